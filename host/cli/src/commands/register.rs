//! `wazoo register PATH DATA [--ttl DUR] [-- CMD]`: a registration kept present while CMD runs
//! (Curator's `PersistentNode`, service discovery), through the `registration` recipe's exports
//! by name (`Backend::instance`), so it runs locally and through a daemon alike.

use std::time::Duration;

use serde_json::{json, Value};

use crate::args::HoldArgs;
use crate::backend::{Backend, Failure, Instance};
use crate::commands::check_path;
use crate::exit;
use crate::supervise::{exit_status, Signals, Supervised};

/// How long one `tend` waits when there is no TTL to keep alive. Short: through a daemon, a
/// `tend` the command's end cancels still runs there until its wait ends, and the
/// registration's end waits for it.
const TEND: Duration = Duration::from_secs(2);
/// How long CMD's processes have after SIGTERM before SIGKILL, without `--grace`.
const GRACE: Duration = Duration::from_secs(2);
/// The wait before trying again after a failure (ZooKeeper out of reach, a new session).
const RETRY: Duration = Duration::from_secs(1);

/// What `wazoo register` was asked.
pub(crate) struct Asked<'a> {
    pub(crate) path: &'a str,
    pub(crate) data: &'a str,
    pub(crate) ttl: Option<Duration>,
    pub(crate) recipe: &'a str,
    pub(crate) hold: &'a HoldArgs,
    pub(crate) command: &'a [String],
    /// Without a command: the `registered` line as JSON, `{"path","data"}`.
    pub(crate) json: bool,
}

/// The error kind of a `{"err": …}` result (`"node-exists"`, or the case of `{"case": text}`),
/// or `None` for an ok result.
fn error_kind(result: &Value) -> Option<String> {
    let err = result.get("err")?;
    Some(match err {
        Value::String(kind) => kind.clone(),
        Value::Object(o) => o.keys().next().cloned().unwrap_or_default(),
        other => other.to_string(),
    })
}

/// A registration held by one recipe instance.
struct Registered<I> {
    instance: I,
}

/// Registers `asked` on a fresh instance: the instance, or the failure (a `{"err"}` as text).
async fn register<B: Backend>(backend: &B, asked: &Asked<'_>) -> Result<Registered<B::Instance>, String> {
    let label = format!("register {}", asked.path);
    let mut instance = backend.instance(asked.recipe, &label).await.map_err(|e| format!("{e:#}"))?;
    let ttl_ms = asked.ttl.map(|t| t.as_millis() as u64);
    let args = json!([asked.path, asked.data, ttl_ms]);
    match instance.call("registration.register", &args).await {
        Ok(result) => match error_kind(&result) {
            None => Ok(Registered { instance }),
            Some(kind) => {
                instance.close().await;
                Err(describe(&kind, &result, asked.path))
            }
        },
        Err(failure) => {
            instance.close().await;
            Err(format!("{:#}", failure.into_error("registering")))
        }
    }
}

fn describe(kind: &str, result: &Value, path: &str) -> String {
    match kind {
        "node-exists" => format!("{path} is another session's registration"),
        "unimplemented" => {
            format!("{path}: the ZooKeeper servers do not enable TTL nodes (extendedTypesEnabled)")
        }
        _ => format!("{path}: {}", result["err"]),
    }
}

pub(crate) async fn register_command(backend: &impl Backend, asked: Asked<'_>) -> anyhow::Result<u8> {
    check_path("registration", asked.path)?;
    if asked.ttl.is_some_and(|t| t < Duration::from_millis(1)) {
        return Err(exit::usage("--ttl must be at least 1ms"));
    }
    let mut signals = Signals::new()?;
    let mut registered = match signals.interrupt(register(backend, &asked)).await {
        Ok(Ok(registered)) => registered,
        Ok(Err(why)) if why.contains("another session's registration") => {
            eprintln!("wazoo: {why}");
            return Ok(exit::CONFLICT);
        }
        Ok(Err(why)) => return Err(exit::Exit { code: exit::UNAVAILABLE, message: why }.into()),
        Err(caught) => {
            eprintln!("wazoo: {} before {} was registered", caught.name(), asked.path);
            return Ok(caught.status());
        }
    };
    tracing::info!(path = asked.path, "registered");
    let grace = asked.hold.grace.unwrap_or(GRACE);
    let env = vec![
        ("WAZOO_REGISTERED_PATH".to_string(), asked.path.to_string()),
        ("WAZOO_REGISTERED_DATA".to_string(), asked.data.to_string()),
    ];
    let mut cmd = if asked.command.is_empty() {
        match asked.json {
            false => crate::show::emit(&format!("registered {}", asked.path)),
            true => crate::show::line(json!({"path": asked.path, "data": asked.data})),
        }
        None
    } else {
        match Supervised::spawn(asked.command, &env) {
            Ok(cmd) => Some(cmd),
            Err(e) => {
                unregister(backend, &asked, registered).await;
                return Err(e);
            }
        }
    };
    // Tend at least three times per TTL, so a TTL node is touched in time.
    let every = asked.ttl.map(|t| (t / 3).max(Duration::from_millis(1))).unwrap_or(TEND);
    let status = loop {
        let tend_args = json!([every.as_millis() as u64]);
        let tend = registered.instance.call("registration.tend", &tend_args);
        let outcome = tokio::select! {
            status = wait(&mut cmd) => {
                if let Some(cmd) = cmd.as_mut() {
                    if cmd.remains() {
                        cmd.stop(grace).await;
                    }
                }
                break match status {
                    Some(Ok(status)) => exit_status(status),
                    Some(Err(e)) => {
                        eprintln!("wazoo: waiting for the command: {e}");
                        exit::FAILED
                    }
                    None => 0,
                };
            }
            caught = signals.recv() => match cmd.as_ref() {
                Some(cmd) => {
                    cmd.forward(caught);
                    continue;
                }
                None => break 0,
            },
            outcome = tend => outcome,
        };
        let kind = match &outcome {
            Ok(result) => error_kind(result),
            Err(Failure::Timeout) => None,
            Err(_) => Some("failure".to_string()),
        };
        match (kind.as_deref(), &outcome) {
            (None, Ok(result)) => match result.get("ok").and_then(Value::as_str) {
                Some("recreated") => eprintln!("wazoo: {} was gone: registered again", asked.path),
                Some("corrected") => eprintln!("wazoo: the data of {} was changed: set back", asked.path),
                _ => {}
            },
            (None, _) => {}
            (Some("node-exists"), _) => {
                eprintln!("wazoo: another session registered {}; stopping the command", asked.path);
                if let Some(cmd) = cmd.as_mut() {
                    cmd.stop(grace).await;
                }
                registered.instance.close().await;
                if let Some(cmd) = cmd.take() {
                    cmd.finish().await;
                }
                return Ok(asked.hold.lost_exit_code);
            }
            // The session ended, ZooKeeper is out of reach, the recipe failed: register again
            // on a fresh instance (in the host's new session) while the command runs on.
            (Some(kind), _) => {
                eprintln!("wazoo: tending {} failed ({kind}); registering again", asked.path);
                registered.instance.close().await;
                registered = loop {
                    let again = tokio::select! {
                        again = register(backend, &asked) => again,
                        caught = signals.recv() => {
                            if let Some(cmd) = cmd.as_ref() {
                                cmd.forward(caught);
                            }
                            continue;
                        }
                    };
                    match again {
                        Ok(registered) => break registered,
                        Err(why) => {
                            eprintln!("wazoo: {why}; trying again");
                            tokio::time::sleep(RETRY).await;
                        }
                    }
                };
                eprintln!("wazoo: {} registered again", asked.path);
            }
        }
    };
    if let Some(cmd) = cmd {
        cmd.finish().await;
    }
    unregister(backend, &asked, registered).await;
    Ok(status)
}

/// Waits for CMD, if any; never resolves without one.
async fn wait(cmd: &mut Option<Supervised>) -> Option<std::io::Result<std::process::ExitStatus>> {
    match cmd {
        Some(cmd) => Some(cmd.wait().await),
        None => std::future::pending().await,
    }
}

/// Ends the registration: its node deleted. The instance's last `tend` was cancelled, which
/// ends it (its ephemeral node deleted); a TTL node is deleted by a fresh instance.
async fn unregister<B: Backend>(backend: &B, asked: &Asked<'_>, registered: Registered<B::Instance>) {
    registered.instance.close().await;
    if asked.ttl.is_none() {
        return;
    }
    match register(backend, asked).await {
        Ok(mut again) => {
            if let Err(failure) = again.instance.call("registration.unregister", &json!([])).await {
                eprintln!("wazoo: {:#}", failure.into_error(format!("deleting {}", asked.path)));
            }
            again.instance.close().await;
        }
        Err(why) => eprintln!("wazoo: deleting {}: {why}", asked.path),
    }
}
