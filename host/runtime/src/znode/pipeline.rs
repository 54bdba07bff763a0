//! `znode.pipeline`: several requests sent at once, their results returned in order.
//!
//! zookeeper-client sends a request when its method is called, not when its future is polled,
//! and ZooKeeper answers one session's requests in the order they came. So every step is sent
//! first and awaited after, and the steps cost one round trip together. Each step is checked,
//! counted and recorded as its own `znode` function would; recovery (reads tried again, a
//! protected create found again) runs afterwards, in step order, and once a step had to be
//! recovered every read after it is sent again, so it still sees what came before it.

use std::future::Future;
use std::pin::Pin;

use zookeeper_client::{CreateSequence, Error as ClientError, Stat};

use super::{protect, stat, PreparedCreate};
use crate::bindings::types::{DeleteOp, ProtectedOp, SetDataOp, Step, StepResult, ZkError};
use crate::bindings::znode::Host;
use crate::error::from_client;
use crate::paths;
use crate::state::HostState;

/// Most steps in one pipeline.
pub(crate) const MAX_STEPS: usize = 64;

/// A step checked and counted, ready to send.
enum Ready {
    Create(PreparedCreate),
    /// A protected create: its directory and unique prefix, for finding it again.
    Protected(PreparedCreate, String, String),
    /// A protected create a retried acquire found made already: nothing is sent.
    Found(crate::bindings::types::Created),
    Delete(String, Option<i32>),
    SetData(String, Vec<u8>, Option<i32>),
    Exists(String),
    GetData(String),
    GetChildren(String),
}

/// What the server answered to a step.
enum Answer {
    Create(Result<(Stat, CreateSequence), ClientError>),
    Delete(Result<(), ClientError>),
    SetData(Result<Stat, ClientError>),
    Exists(Result<Option<Stat>, ClientError>),
    Data(Result<(Vec<u8>, Stat), ClientError>),
    Children(Result<(Vec<String>, Stat), ClientError>),
    /// Nothing was sent ([`Ready::Found`]).
    Found,
}

type Sent<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// A `znode` function's reply (whose outer error the host never returns).
fn flat<T>(reply: wasmtime::Result<Result<T, ZkError>>) -> Result<T, ZkError> {
    reply.unwrap_or_else(|e| Err(ZkError::Other(e.to_string())))
}

fn lost<T>(result: &Result<T, ZkError>) -> bool {
    matches!(result, Err(ZkError::ConnectionLoss))
}

impl HostState {
    pub(crate) async fn do_pipeline(
        &mut self,
        steps: Vec<Step>,
    ) -> Result<Vec<Result<StepResult, ZkError>>, ZkError> {
        if steps.len() > MAX_STEPS {
            self.limit_hit();
            return Err(ZkError::LimitExceeded(format!(
                "a pipeline of {} steps; at most {MAX_STEPS}",
                steps.len()
            )));
        }
        // Room for every create at once, as for a `multi`: the count goes up only as replies
        // come back, so creates checked one by one before any is sent would all see room.
        let creates =
            steps.iter().filter(|s| matches!(s, Step::Create(_) | Step::CreateProtected(_))).count();
        self.admit_nodes(creates)?;
        let mut ready = Vec::with_capacity(steps.len());
        for step in steps {
            ready.push(match step {
                // A retried acquire takes the node its earlier try made, if there is one.
                Step::CreateProtected(op) if self.claim.is_some_and(|c| c.retry) => {
                    match protect(&op.dir, &op.name, self.claim.as_ref()) {
                        Err(e) => Err(e),
                        Ok((prefix, path)) => {
                            match self.retried_protected(&op.dir, &prefix, &op.mode, &path).await {
                                Ok(Some(found)) => Ok(Ready::Found(found)),
                                Ok(None) => self.ready(Step::CreateProtected(op)),
                                Err(e) => Err(e),
                            }
                        }
                    }
                }
                step => self.ready(step),
            });
        }
        let live = self.live.clone();
        let client = &live.client;
        // Every request goes out here, in step order, before any reply is awaited.
        let sent: Vec<Option<Sent<'_>>> = ready
            .iter()
            .map(|step| {
                let step = step.as_ref().ok()?;
                Some(match step {
                    Ready::Found(_) => Box::pin(async { Answer::Found }) as Sent<'_>,
                    Ready::Create(c) | Ready::Protected(c, _, _) => {
                        let reply = client.create(&c.path, &c.data, &c.options);
                        Box::pin(async move { Answer::Create(reply.await) }) as Sent<'_>
                    }
                    Ready::Delete(path, version) => {
                        let reply = client.delete(path, *version);
                        Box::pin(async move { Answer::Delete(reply.await) })
                    }
                    Ready::SetData(path, data, version) => {
                        let reply = client.set_data(path, data, *version);
                        Box::pin(async move { Answer::SetData(reply.await) })
                    }
                    Ready::Exists(path) => {
                        let reply = client.check_stat(path);
                        Box::pin(async move { Answer::Exists(reply.await) })
                    }
                    Ready::GetData(path) => {
                        let reply = client.get_data(path);
                        Box::pin(async move { Answer::Data(reply.await) })
                    }
                    Ready::GetChildren(path) => {
                        let reply = client.get_children(path);
                        Box::pin(async move { Answer::Children(reply.await) })
                    }
                })
            })
            .collect();
        let mut answers = Vec::with_capacity(sent.len());
        for reply in sent {
            answers.push(match reply {
                Some(reply) => Some(reply.await),
                None => None,
            });
        }

        let mut results = Vec::with_capacity(ready.len());
        // A step before this one had to be recovered: reads are sent again.
        let mut recovered = false;
        for (step, answer) in ready.into_iter().zip(answers) {
            let (step, answer) = match (step, answer) {
                (Err(refused), _) => {
                    results.push(Err(refused));
                    continue;
                }
                (Ok(step), Some(answer)) => (step, answer),
                (Ok(_), None) => unreachable!("every ready step was sent"),
            };
            let result = match (step, answer) {
                (Ready::Create(c), Answer::Create(reply)) => {
                    let created = self.finish_create(&c, reply);
                    recovered |= lost(&created);
                    created.map(StepResult::Created)
                }
                (Ready::Protected(c, dir, prefix), Answer::Create(reply)) => {
                    let first = self.finish_create(&c, reply);
                    recovered |= matches!(first, Err(ZkError::ConnectionLoss | ZkError::NoNode));
                    let PreparedCreate { path, data, mode, .. } = c;
                    self.protected_from(&dir, &prefix, path, data, mode, Some(first))
                        .await
                        .map(StepResult::Created)
                }
                (Ready::Found(created), Answer::Found) => Ok(StepResult::Created(created)),
                (Ready::Delete(path, _), Answer::Delete(reply)) => {
                    let deleted = self.finish_delete(&path, reply);
                    recovered |= lost(&deleted);
                    deleted.map(|()| StepResult::Deleted)
                }
                (Ready::SetData(_, _, _), Answer::SetData(reply)) => {
                    let set = reply.map_err(from_client);
                    recovered |= lost(&set);
                    set.map(|s| StepResult::DataSet(stat(s)))
                }
                (Ready::Exists(path), Answer::Exists(reply)) => {
                    let read = reply.map_err(from_client).map(|s| s.map(stat));
                    if recovered || lost(&read) {
                        recovered = true;
                        flat(Host::exists(self, path).await)
                    } else {
                        read
                    }
                    .map(StepResult::Exists)
                }
                (Ready::GetData(path), Answer::Data(reply)) => {
                    let read = reply.map_err(from_client).map(|(data, s)| (data, stat(s)));
                    if recovered || lost(&read) {
                        recovered = true;
                        flat(Host::get_data(self, path).await)
                    } else {
                        read
                    }
                    .map(StepResult::Data)
                }
                (Ready::GetChildren(path), Answer::Children(reply)) => {
                    let read = reply.map_err(from_client);
                    if recovered || lost(&read) {
                        recovered = true;
                        flat(Host::get_children(self, path).await)
                    } else {
                        read.and_then(|(children, s)| {
                            self.check_children(children.len()).map(|()| (children, stat(s)))
                        })
                    }
                    .map(StepResult::Children)
                }
                _ => unreachable!("each step's answer is of its own kind"),
            };
            results.push(result);
        }
        Ok(results)
    }

    /// Checks and counts one step as its `znode` function would.
    fn ready(&mut self, step: Step) -> Result<Ready, ZkError> {
        let readable = |path: String| paths::check(&path).map(|()| path).map_err(ZkError::InvalidPath);
        Ok(match step {
            Step::Create(c) => Ready::Create(self.prepare_create(c.path, c.data, c.mode)?),
            Step::CreateProtected(ProtectedOp { dir, name, data, mode }) => {
                let (prefix, path) = protect(&dir, &name, self.claim.as_ref())?;
                Ready::Protected(self.prepare_create(path, data, mode)?, dir, prefix)
            }
            Step::Delete(DeleteOp { path, version }) => {
                paths::check_node(&path).map_err(ZkError::InvalidPath)?;
                self.count_call()?;
                Ready::Delete(path, version)
            }
            Step::SetData(SetDataOp { path, data, version }) => {
                paths::check_node(&path).map_err(ZkError::InvalidPath)?;
                self.check_data(&data)?;
                self.count_call()?;
                Ready::SetData(path, data, version)
            }
            Step::Exists(path) => {
                let path = readable(path)?;
                self.count_call()?;
                Ready::Exists(path)
            }
            Step::GetData(path) => {
                let path = readable(path)?;
                self.count_call()?;
                Ready::GetData(path)
            }
            Step::GetChildren(path) => {
                let path = readable(path)?;
                self.count_call()?;
                Ready::GetChildren(path)
            }
        })
    }
}
