//! The commands' backend through a `wazoo serve` daemon's gRPC API (`host/proto/wazoo.proto`,
//! over `wazoo-client`) instead of a ZooKeeper session of this process's own
//! ([`crate::backend::Backend`]).
//!
//! The connection is made at the first call (after the command has checked its arguments), and
//! an unreachable daemon is one clear error, exit status 69. A claim (lock, lease, leadership,
//! group membership), an ephemeral queue item and a double barrier's participant live in a client
//! session of their own that a task keeps alive over the KeepAlive stream. The daemon's errors
//! carry the ZooKeeper error's WIT name (`timeout:`, `bad-version:` …), which is mapped back to
//! what the local path says and does ([`Failure`]). The messages are converted to and from the
//! runtime's types in one place, [`convert`].

mod convert;

use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use tokio::sync::Mutex;
use tonic::{Code, Response, Status};
use wazoo_client::{
    bounded, Authed, Client, ConnectError, Error, ErrorKind, NotAcquired, Options, Session, Tls,
};
use wazoo_proto as pb;
use wazoo_proto::recipes_client::RecipesClient;
use wazoo_runtime::fence::{Holder, Written};
use wazoo_runtime::holders::{Contenders, Kind};
use wazoo_runtime::{
    Ballot, CacheChange, CounterFormat, Entry, LeaderInfo, Membership, Outcome, TxMode, Want,
};

use crate::backend::{
    Backend, Contender, Deleted, Ending, Failure, Granted, Holding, Instance, Participant, Recipes,
    Revocation, SessionInfo,
};
use crate::exit;
use convert::{by_path, millis};

/// The exit status of a failed call: by the kind the daemon gives it, from the one table
/// ([`exit::kind_code`], as on the local path). A status without a kind did not come from the
/// daemon's services: it is read by its gRPC code (69 for a daemon that broke off, 2 for a
/// refused argument, else 70).
fn status_code(error: &Error) -> u8 {
    match error.kind {
        Some(kind) => exit::kind_code(kind),
        None => match error.code {
            code if broke_off(code) => exit::UNAVAILABLE,
            Code::InvalidArgument => exit::USAGE,
            _ => exit::FAILED,
        },
    }
}

/// Whether a call with no typed answer failed because the daemon broke off (the connection
/// went, whatever tonic names it: an HTTP/2 protocol error, a daemon killed mid-frame, is
/// `INTERNAL`; every status of the daemon's own carries a kind).
fn broke_off(code: Code) -> bool {
    matches!(code, Code::Unavailable | Code::Unknown | Code::Cancelled | Code::Internal)
}

fn is_timeout(error: &Error) -> bool {
    error.kind == Some(ErrorKind::Timeout)
}

/// Whether the daemon answered `bad-version` (a compare-and-set found another version).
fn is_bad_version(error: &Error) -> bool {
    error.kind == Some(ErrorKind::BadVersion)
}

/// The daemon at an address, connected at the first call.
#[derive(Clone)]
pub(crate) struct Remote {
    /// As given, for messages.
    addr: String,
    token: Option<String>,
    tls: Option<Tls>,
    connect_timeout: Duration,
    /// The TTL of the client sessions claims are held in.
    ttl: Duration,
    /// The daemon answering now: connected on the first call, again after it broke off.
    client: Arc<Mutex<Option<Client>>>,
    /// The daemons that broke off without an answer: tried last when connecting again.
    broke_off: Arc<std::sync::Mutex<Vec<String>>>,
    /// What lives until [`Backend::end`]: an ephemeral queue item's session.
    kept: Arc<Mutex<Vec<Session>>>,
    /// A claim in jeopardy counts as lost (`--stop-in-jeopardy`).
    stop_in_jeopardy: bool,
}

impl Remote {
    /// The daemon at `addr`, reached with `token` within `connect_timeout` when first asked;
    /// `ttl` is the TTL of the client sessions claims live in.
    pub(crate) fn new(
        addr: &str,
        token: Option<String>,
        tls: Option<Tls>,
        connect_timeout: Duration,
        ttl: Duration,
        stop_in_jeopardy: bool,
    ) -> Remote {
        Remote {
            addr: addr.to_string(),
            token,
            tls,
            connect_timeout,
            ttl,
            client: Arc::default(),
            broke_off: Arc::default(),
            kept: Arc::default(),
            stop_in_jeopardy,
        }
    }

    /// The connection, made (and health-checked) on the first call, or the first after the
    /// daemon broke off: an unreachable daemon is exit status 69.
    async fn client(&self) -> anyhow::Result<Client> {
        let connect = || async {
            let options =
                Options { token: self.token.clone(), timeout: self.connect_timeout, tls: self.tls.clone() };
            let mut addrs: Vec<&str> = self.addr.split(',').collect();
            let broke_off = self.broke_off.lock().unwrap_or_else(|e| e.into_inner()).clone();
            addrs.sort_by_key(|a| broke_off.iter().any(|b| b == a.trim()));
            match Client::connect_with(&addrs.join(","), &options).await {
                Ok(client) => Ok(client),
                Err(ConnectError::BadToken) => Err(exit::usage(
                    "--token: the token must be one or more visible ASCII characters (no spaces)",
                )),
                Err(ConnectError::BadAddress(why)) => Err(exit::usage(format!("--server: {why}"))),
                Err(ConnectError::Unreachable(why)) => Err(exit::unavailable(why)),
            }
        };
        let mut current = self.client.lock().await;
        if let Some(client) = current.as_ref() {
            return Ok(client.clone());
        }
        let client = connect().await?;
        *current = Some(client.clone());
        Ok(client)
    }

    async fn recipes(&self) -> anyhow::Result<RecipesClient<Authed>> {
        Ok(self.client().await?.recipes())
    }

    /// A call's answer, or how it failed.
    fn answer<T>(&self, reply: Result<Response<T>, Status>) -> Result<T, Failure> {
        reply.map(Response::into_inner).map_err(|status| self.failure(&Error::from(status)))
    }

    /// A failed call as the commands see it ([`Failure`]).
    fn failure(&self, error: &Error) -> Failure {
        if is_timeout(error) {
            return Failure::Timeout;
        }
        if is_bad_version(error) {
            return Failure::Stale(self.describe(error).0);
        }
        let (text, after_context) = self.describe(error);
        Failure::Error { code: status_code(error), text, after_context }
    }

    /// What a failed call says, and whether it goes after a context (as a recipe's error does),
    /// by its kind. The message's leading word (the kind's name, for older clients) is not
    /// repeated.
    fn describe(&self, error: &Error) -> (String, bool) {
        use ErrorKind as K;
        let message = error.message.as_str();
        let kind = error.kind;
        // The leading word a kind's message starts with: `bad-version` for BAD_VERSION,
        // `trapped` for RETIRED, `recipe` for RECIPE_UNAVAILABLE.
        let word = kind.map(|k| match k {
            K::Retired => "trapped".to_string(),
            K::RecipeUnavailable => "recipe".to_string(),
            k => k.as_str_name().trim_start_matches("ERROR_KIND_").to_lowercase().replace('_', "-"),
        });
        let bare = || {
            let without = word.as_deref().and_then(|w| message.strip_prefix(w)?.strip_prefix(": "));
            without.unwrap_or(message).to_string()
        };
        match kind {
            // A handle the daemon could not make (no such component, a refused one): said bare,
            // as on the local path.
            Some(K::RecipeUnavailable) => (bare(), false),
            // What the daemon itself says about a request (an unknown session or handle).
            Some(
                K::UnknownSession | K::UnknownHandle | K::WrongHandle | K::Unauthenticated | K::Internal,
            ) => (message.to_string(), true),
            // A recipe's error (or a trapped recipe), after the command's context.
            Some(_) => (bare(), true),
            None => match error.code {
                code if broke_off(code) => {
                    (format!("lost the connection to the wazoo daemon at {}: {message}", self.addr), false)
                }
                Code::InvalidArgument | Code::NotFound | Code::FailedPrecondition => {
                    (message.to_string(), true)
                }
                _ => (format!("unexpected answer from the wazoo daemon at {}: {message}", self.addr), false),
            },
        }
    }

    /// Something the daemon said that this client cannot read: exit status 70, said alone.
    fn strange(&self, text: String) -> Failure {
        Failure::Error { code: exit::FAILED, text, after_context: false }
    }

    /// A call that waited in a client session that ended (the daemon ended it, or stopped
    /// answering its keepalives): unavailable, exit status 69.
    fn ended(&self, why: String) -> Failure {
        Failure::Error { code: exit::UNAVAILABLE, text: why, after_context: false }
    }

    /// A watch stream the daemon ended (it stopped, or went away): unavailable, exit status 69.
    fn stopped_reporting(&self, what: &str) -> Failure {
        let text = format!("the wazoo daemon at {} stopped reporting {what}", self.addr);
        Failure::Error { code: exit::UNAVAILABLE, text, after_context: false }
    }

    /// A JSON result of Invoke.
    fn json(&self, reply: pb::InvokeReply) -> Result<serde_json::Value, Failure> {
        serde_json::from_str(&reply.result_json).map_err(|e| {
            self.strange(format!("the wazoo daemon at {} answered {:?}: {e}", self.addr, reply.result_json))
        })
    }

    /// Opens a client session kept alive from a task, named `name` in the daemon's logs.
    async fn session(&self, ttl: Duration, name: String) -> anyhow::Result<Session> {
        // A daemon that breaks off without an answer (it died, or was adopted as it woke up)
        // is tried last from then on, and the next that answers of those given (the other
        // members of its group) is asked, each at most once.
        let tries = self.addr.split(',').count();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let client = self.client().await?;
            match client.session(ttl, name.clone()).await {
                // Opened on another member (this one broke off since it was connected): that
                // member answers from now on.
                Ok(session) if session.client().addr() != client.addr() => {
                    self.broke_off.lock().unwrap_or_else(|e| e.into_inner()).push(client.addr().to_string());
                    *self.client.lock().await = Some(session.client());
                    return Ok(session);
                }
                // Or one that cannot reach ZooKeeper (it was frozen, say, and is on its way out).
                Err(e)
                    if attempt < tries
                        && ((e.kind.is_none() && broke_off(e.code))
                            || e.kind == Some(ErrorKind::ConnectionLoss)) =>
                {
                    self.broke_off.lock().unwrap_or_else(|e| e.into_inner()).push(client.addr().to_string());
                    let mut current = self.client.lock().await;
                    if current.as_ref().is_some_and(|c| c.addr() == client.addr()) {
                        *current = None;
                    }
                }
                opened => return opened.map_err(|e| self.failure(&e).into_error("opening a client session")),
            }
        }
    }

    /// The daemon's list of components.
    async fn listed(&self) -> Result<Vec<pb::Recipe>, Failure> {
        let reply = self.client().await?.admin().list_recipes(bounded(pb::Empty {})).await;
        Ok(self.answer(reply)?.recipes)
    }

    /// The leader of `path` now and after every change, as the daemon reports it.
    async fn observe(&self, path: &str, recipe: &str) -> Result<tonic::Streaming<pb::LeaderEvent>, Failure> {
        let request = pb::ObserveRequest { path: path.to_string(), recipe: recipe.to_string() };
        self.answer(self.recipes().await?.observe(request).await)
    }

    /// The next leader event of `events`.
    async fn next_leader(
        &self,
        path: &str,
        events: &mut tonic::Streaming<pb::LeaderEvent>,
    ) -> Result<Option<LeaderInfo>, Failure> {
        match events.message().await {
            Ok(Some(event)) => Ok(convert::leader(event)),
            Ok(None) => Err(self.stopped_reporting(&format!("the leader of {path}"))),
            Err(status) => Err(self.failure(&Error::from(status))),
        }
    }
}

impl Backend for Remote {
    type Contender = RemoteContender;
    type Participant = RemoteParticipant;
    type Instance = RemoteInstance;

    async fn contender(
        &self,
        want: &Want,
        recipe: &str,
        label: &str,
        id: &str,
    ) -> anyhow::Result<RemoteContender> {
        let session = self.session(self.ttl, format!("wazoo {label}")).await?;
        let inner = session.contender(convert::ask(want), recipe).holder_id(id);
        Ok(RemoteContender { remote: self.clone(), inner })
    }

    async fn queue_put(
        &self,
        path: &str,
        data: Vec<u8>,
        priority: Option<u8>,
        ephemeral: bool,
    ) -> Result<String, Failure> {
        // An ephemeral item lives in a client session, which ends with this command.
        let session = match ephemeral {
            true => Some(self.session(self.ttl, format!("wazoo queue put --ephemeral {path}")).await?),
            false => None,
        };
        let mut recipes = match &session {
            Some(session) => session.client().recipes(),
            None => self.recipes().await?,
        };
        let request = pb::QueuePutRequest {
            path: path.to_string(),
            data,
            priority: priority.map(u32::from),
            recipe: String::new(),
            ephemeral,
            session: session.as_ref().map_or(0, |s| s.id()),
        };
        let put = recipes.queue_put(bounded(request)).await;
        self.kept.lock().await.extend(session);
        Ok(self.answer(put)?.node)
    }

    async fn queue_take(&self, path: &str, timeout: Option<Duration>) -> Result<Vec<u8>, Failure> {
        let request =
            pb::WaitRequest { path: path.to_string(), timeout_ms: millis(timeout), recipe: String::new() };
        Ok(self.answer(self.recipes().await?.queue_take(request).await)?.data)
    }

    async fn queue_len(&self, path: &str) -> Result<u32, Failure> {
        Ok(self.answer(self.recipes().await?.queue_len(bounded(by_path(path))).await)?.items)
    }

    async fn config_get(&self, path: &str) -> Result<Option<Entry>, Failure> {
        Ok(convert::entry(self.answer(self.recipes().await?.config_get(bounded(by_path(path))).await)?))
    }

    async fn config_delete(&self, path: &str, version: Option<i32>) -> Result<Deleted, Failure> {
        let request = pb::ConfigDeleteRequest { path: path.to_string(), version };
        match self.recipes().await?.config_delete(bounded(request)).await {
            Ok(_) => Ok(Deleted::Yes),
            Err(status) => {
                let error = Error::from(status);
                match error.kind {
                    Some(ErrorKind::NoNode) => Ok(Deleted::Absent),
                    Some(ErrorKind::BadVersion) => Ok(Deleted::OtherVersion),
                    Some(ErrorKind::NotEmpty) => Ok(Deleted::HasChildren),
                    // Someone's claim: bad usage, as on the local path.
                    Some(ErrorKind::InvalidArgument) => Err(Failure::Error {
                        code: exit::USAGE,
                        text: self.describe(&error).0,
                        after_context: false,
                    }),
                    _ => Err(self.failure(&error)),
                }
            }
        }
    }

    async fn config_set(&self, path: &str, data: Vec<u8>, version: Option<i32>) -> Result<i32, Failure> {
        let request = pb::ConfigSetRequest {
            path: path.to_string(),
            data,
            expected_version: version,
            recipe: String::new(),
        };
        Ok(self.answer(self.recipes().await?.config_set(bounded(request)).await)?.version)
    }

    async fn config_watch(&self, path: &str, each: &mut dyn FnMut(Option<&Entry>)) -> Result<(), Failure> {
        let mut entries = self.answer(self.recipes().await?.config_watch(by_path(path)).await)?;
        loop {
            match entries.message().await {
                Ok(Some(e)) => each(convert::entry(e).as_ref()),
                Ok(None) => return Err(self.stopped_reporting(&format!("changes of {path}"))),
                Err(status) => return Err(self.failure(&Error::from(status))),
            }
        }
    }

    async fn counter_get(&self, path: &str, format: CounterFormat) -> Result<i64, Failure> {
        let format = convert::counter_format(format) as i32;
        let request = pb::CounterGetRequest { path: path.to_string(), recipe: String::new(), format };
        Ok(self.answer(self.recipes().await?.counter_get(bounded(request)).await)?.value)
    }

    async fn counter_add(&self, path: &str, delta: i64, format: CounterFormat) -> Result<i64, Failure> {
        let format = convert::counter_format(format) as i32;
        let request = pb::CounterAddRequest { path: path.to_string(), delta, recipe: String::new(), format };
        Ok(self.answer(self.recipes().await?.counter_add(bounded(request)).await)?.value)
    }

    async fn group_members(&self, path: &str) -> Result<Membership, Failure> {
        Ok(convert::membership(
            self.answer(self.recipes().await?.group_members(bounded(by_path(path))).await)?,
        ))
    }

    async fn group_watch(&self, path: &str, each: &mut dyn FnMut(&Membership)) -> Result<(), Failure> {
        let mut changes = self.answer(self.recipes().await?.group_watch(by_path(path)).await)?;
        loop {
            match changes.message().await {
                Ok(Some(members)) => each(&convert::membership(members)),
                Ok(None) => return Err(self.stopped_reporting(&format!("changes of {path}"))),
                Err(status) => return Err(self.failure(&Error::from(status))),
            }
        }
    }

    async fn watch(
        &self,
        path: &str,
        recursive: bool,
        recipe: &str,
        each: &mut dyn FnMut(&CacheChange),
    ) -> Result<(), Failure> {
        let request = pb::WatchRequest { path: path.to_string(), recursive, recipe: recipe.to_string() };
        let mut events = self.answer(self.recipes().await?.watch(request).await)?;
        loop {
            match events.message().await {
                Ok(Some(event)) => each(&convert::cache_change(event)),
                Ok(None) => return Err(self.stopped_reporting(&format!("changes under {path}"))),
                Err(status) => return Err(self.failure(&Error::from(status))),
            }
        }
    }

    async fn barrier_set(&self, path: &str, recipe: &str) -> Result<bool, Failure> {
        let request = pb::PathRequest { path: path.to_string(), recipe: recipe.to_string() };
        Ok(self.answer(self.recipes().await?.barrier_set(bounded(request)).await)?.changed)
    }

    async fn barrier_remove(&self, path: &str, recipe: &str) -> Result<bool, Failure> {
        let request = pb::PathRequest { path: path.to_string(), recipe: recipe.to_string() };
        Ok(self.answer(self.recipes().await?.barrier_remove(bounded(request)).await)?.changed)
    }

    async fn barrier_wait(&self, path: &str, timeout: Option<Duration>, recipe: &str) -> Result<(), Failure> {
        let request = pb::WaitRequest {
            path: path.to_string(),
            timeout_ms: millis(timeout),
            recipe: recipe.to_string(),
        };
        self.answer(self.recipes().await?.barrier_wait(request).await).map(drop)
    }

    async fn participant(&self, path: &str, recipe: &str) -> anyhow::Result<RemoteParticipant> {
        let session = self.session(self.ttl, format!("wazoo double-barrier {path}")).await?;
        Ok(RemoteParticipant { remote: self.clone(), session, entered: None, recipe: recipe.to_string() })
    }

    async fn leader(&self, path: &str, recipe: &str) -> Result<Option<LeaderInfo>, Failure> {
        let mut events = self.observe(path, recipe).await?;
        self.next_leader(path, &mut events).await
    }

    async fn leader_watch(
        &self,
        path: &str,
        recipe: &str,
        each: &mut dyn FnMut(Option<&LeaderInfo>),
    ) -> Result<(), Failure> {
        let mut events = self.observe(path, recipe).await?;
        loop {
            each(self.next_leader(path, &mut events).await?.as_ref());
        }
    }

    async fn holders(
        &self,
        path: &str,
        kind: Option<Kind>,
        leases: Option<u32>,
    ) -> Result<Contenders, Failure> {
        let request = pb::HoldersRequest {
            path: path.to_string(),
            kind: convert::holders_kind(kind) as i32,
            leases,
            described: kind.filter(|k| k.is_described()).map(|k| k.name.to_string()).unwrap_or_default(),
        };
        Ok(convert::contenders(self.answer(self.recipes().await?.holders(bounded(request)).await)?))
    }

    async fn claims(&self, prefix: &str) -> Result<Vec<(String, Contenders)>, Failure> {
        let request = pb::ListClaimsRequest { prefix: prefix.to_string() };
        let reply = self.client().await?.admin().list_claims(bounded(request)).await;
        Ok(convert::claim_list(self.answer(reply)?))
    }

    async fn sessions(&self) -> Result<Option<Vec<SessionInfo>>, Failure> {
        let reply = self.client().await?.admin().list_sessions(bounded(pb::Empty {})).await;
        Ok(Some(convert::sessions(self.answer(reply)?)))
    }

    async fn revoke(&self, node: &str, grace: Option<Duration>) -> Result<Revocation, Failure> {
        let request =
            pb::RevokeRequest { node: node.to_string(), grace_ms: millis(grace), recipe: String::new() };
        let mut request = tonic::Request::new(request);
        request.set_timeout(grace.unwrap_or_default() + wazoo_client::CALL_TIMEOUT);
        let reply = self.answer(self.recipes().await?.revoke(request).await)?;
        Ok(convert::revoked(&reply, grace.is_some()))
    }

    async fn fence_check(&self, node: &str, token: i64) -> Result<Holder, Failure> {
        let request = pb::FenceCheckRequest { node: node.to_string(), token };
        Ok(convert::holder(&self.answer(self.recipes().await?.fence_check(bounded(request)).await)?))
    }

    async fn fence_write(
        &self,
        node: &str,
        token: i64,
        path: &str,
        value: &[u8],
    ) -> Result<Written, Failure> {
        let request = pb::FenceWriteRequest {
            node: node.to_string(),
            token,
            path: path.to_string(),
            value: value.to_vec(),
        };
        Ok(convert::written(&self.answer(self.recipes().await?.fence_write(bounded(request)).await)?))
    }

    async fn tx_coordinate(
        &self,
        tx: &str,
        sites: &[String],
        payload: &[u8],
        mode: TxMode,
        timeout: Duration,
    ) -> Result<Outcome, Failure> {
        let request = pb::TxCoordinateRequest {
            tx: tx.to_string(),
            sites: sites.to_vec(),
            payload: payload.to_vec(),
            mode: convert::tx_mode(mode) as i32,
            timeout_ms: millis(Some(timeout)),
            recipe: String::new(),
        };
        Ok(convert::outcome(&self.answer(self.recipes().await?.tx_coordinate(request).await)?))
    }

    async fn tx_vote(
        &self,
        tx: &str,
        site: &str,
        ballot: Ballot,
        timeout: Duration,
    ) -> Result<Outcome, Failure> {
        let request = pb::TxVoteRequest {
            tx: tx.to_string(),
            site: site.to_string(),
            ballot: convert::ballot(ballot) as i32,
            timeout_ms: millis(Some(timeout)),
            recipe: String::new(),
        };
        Ok(convert::outcome(&self.answer(self.recipes().await?.tx_vote(request).await)?))
    }

    async fn recipes(&self) -> Result<Recipes, Failure> {
        let rows = self.listed().await?.into_iter().map(convert::recipe_row).collect();
        let none = format!("no components in the plugins directory of the wazoo daemon at {}", self.addr);
        Ok(Recipes { rows, none })
    }

    async fn publish(&self, request: pb::PublishRequest) -> Result<pb::PublishReply, Failure> {
        let reply = self.client().await?.admin().publish(request).await;
        self.answer(reply)
    }

    async fn rollout(&self, name: &str) -> Result<pb::RolloutReply, Failure> {
        let reply = self
            .client()
            .await?
            .admin()
            .rollout(bounded(pb::RolloutRequest { name: name.to_string() }))
            .await;
        self.answer(reply)
    }

    async fn rollback(&self, request: pb::RollbackRequest) -> Result<pb::PublishReply, Failure> {
        let reply = self.client().await?.admin().rollback(request).await;
        self.answer(reply)
    }

    async fn functions(&self, recipe: &str) -> Result<Vec<String>, Failure> {
        let Some(found) = self.listed().await?.into_iter().find(|r| r.name == recipe) else {
            return Err(self.strange(format!("the wazoo daemon at {} has no recipe {recipe:?}", self.addr)));
        };
        if found.world.is_empty() {
            return Err(self.strange(format!("{recipe} is not serving: {}", found.refused)));
        }
        Ok(found.functions)
    }

    async fn instance(&self, recipe: &str, label: &str) -> anyhow::Result<RemoteInstance> {
        let session = self.session(self.ttl, format!("wazoo {label}")).await?;
        Ok(RemoteInstance {
            remote: self.clone(),
            session,
            recipe: recipe.to_string(),
            handle: 0,
            generation: 0,
            take_up: Vec::new(),
            broke_off: false,
        })
    }

    async fn run(&self, component: &str, args: &[String]) -> Result<Result<String, String>, Failure> {
        let args = serde_json::Value::from(args.to_vec());
        let request = pb::InvokeRequest {
            recipe: component.to_string(),
            args_json: args.to_string(),
            ..Default::default()
        };
        let reply = self.answer(self.recipes().await?.invoke(request).await)?;
        let answered = reply.result_json.clone();
        let result = self.json(reply)?;
        let text = |key: &str| result.get(key).and_then(|v| v.as_str()).map(str::to_string);
        match (text("ok"), text("err")) {
            (Some(ok), _) => Ok(Ok(ok)),
            (None, Some(err)) => Ok(Err(err)),
            (None, None) => {
                Err(self.strange(format!("the wazoo daemon at {} answered {answered:?}", self.addr)))
            }
        }
    }

    async fn end(&self) {
        for session in self.kept.lock().await.drain(..) {
            session.close().await;
        }
    }
}

/// A client session about to ask for one claim ([`wazoo_client::Contender`]); closing it
/// deletes whatever the claim made.
pub(crate) struct RemoteContender {
    remote: Remote,
    inner: wazoo_client::Contender,
}

impl Contender for RemoteContender {
    type Held = RemoteClaim;

    async fn acquire(&mut self, path: &str, timeout: Option<Duration>) -> Result<Granted, Failure> {
        match self.inner.acquire(path, timeout).await {
            Ok(claim) => Ok(Granted { node: claim.node.clone(), token: claim.fencing_token }),
            Err(NotAcquired::Failed(error)) => Err(self.remote.failure(&error)),
            // A wait ends with the client session: a daemon that stopped answering is not
            // waited for past the session's keepalives.
            Err(NotAcquired::SessionEnded(why)) => Err(self.remote.ended(why)),
        }
    }

    async fn acknowledge(&mut self, note: &str) -> Result<(), String> {
        self.inner.acknowledge(note).await.map_err(|error| error.message)
    }

    async fn hold(self) -> anyhow::Result<RemoteClaim> {
        if self.inner.granted().is_none() {
            self.inner.close().await;
            bail!("nothing was acquired");
        }
        match self.inner.hold().await {
            Ok(claim) => Ok(RemoteClaim { remote: self.remote, claim }),
            Err(error) => Err(self.remote.failure(&error).into_error("following the claim")),
        }
    }

    async fn close(self) {
        self.inner.close().await
    }

    fn session_timeout(&self) -> Duration {
        self.inner.session().ttl()
    }
}

/// A claim the daemon holds for this process, in a session of its own.
pub(crate) struct RemoteClaim {
    remote: Remote,
    claim: wazoo_client::Claim,
}

impl Holding for RemoteClaim {
    fn lost(&self) -> impl std::future::Future<Output = Ending> + Send + 'static {
        let lost = self.claim.lost();
        let jeopardy = self.claim.session().jeopardy();
        let stop = self.remote.stop_in_jeopardy;
        async move {
            if !stop {
                return convert::ending(lost.await);
            }
            tokio::select! {
                lost = lost => convert::ending(lost),
                why = jeopardy => Ending { why: format!("jeopardy, --stop-in-jeopardy: {why}"), revoked: false },
            }
        }
    }

    async fn release(self) -> Result<(), String> {
        let RemoteClaim { remote, mut claim } = self;
        let released = claim.release_only().await.map_err(|error| remote.describe(&error).0);
        claim.close().await;
        released
    }

    async fn close(self) {
        self.claim.close().await;
    }
}

/// A double barrier's participant: its node lives in a client session of this process's own
/// from entering to leaving.
/// An instance the daemon keeps in a client session of its own: the first call makes it
/// (`Invoke` with `keep`), the later ones name its handle; closing the session ends it.
pub(crate) struct RemoteInstance {
    remote: Remote,
    session: Session,
    recipe: String,
    /// The daemon's handle, once the first call made it.
    handle: u64,
    /// The session's link generation when the handle was made: a daemon that took the session
    /// up since has no such instance.
    generation: u64,
    /// What the next fresh instance takes up ([`Instance::renew`]).
    take_up: Vec<String>,
    /// Whether the last call failed with no answer of the daemon's own (the connection broke,
    /// or a stopping daemon refused it): the daemon may be going.
    broke_off: bool,
}

impl Instance for RemoteInstance {
    async fn call(&mut self, function: &str, args: &serde_json::Value) -> Result<serde_json::Value, Failure> {
        let request = pb::InvokeRequest {
            recipe: self.recipe.clone(),
            function: function.to_string(),
            args_json: args.to_string(),
            session: self.session.id(),
            handle: self.handle,
            keep: self.handle == 0,
            take_up: if self.handle == 0 { std::mem::take(&mut self.take_up) } else { Vec::new() },
        };
        // The daemon that keeps the session now; a call on a handle is abandoned once another
        // daemon takes the session up (the instance stayed behind).
        let generation = if self.handle == 0 { self.session.generation() } else { self.generation };
        let mut recipes = self.session.client().recipes();
        self.broke_off = false;
        let reply = tokio::select! {
            reply = recipes.invoke(request) => match reply {
                Ok(reply) => reply.into_inner(),
                Err(status) => {
                    self.broke_off = wazoo_client::error_kind(&status).is_none() && broke_off(status.code());
                    return Err(self.remote.failure(&Error::from(status)));
                }
            },
            why = self.session.ended() => return Err(self.remote.ended(why)),
            Some(client) = self.session.taken_up_after(generation), if self.handle != 0 => {
                let text = format!("the instance stayed behind: the daemon at {} took the session up", client.addr());
                return Err(Failure::Error { code: exit::UNAVAILABLE, text, after_context: false });
            }
        };
        if self.handle == 0 {
            self.generation = generation;
        }
        self.handle = reply.handle;
        self.remote.json(reply)
    }

    async fn renew(&mut self, take_up: &[&str]) -> bool {
        if self.handle == 0 || !self.session.in_group() {
            return false;
        }
        if self.session.generation() == self.generation {
            // Not taken up yet: only a daemon that broke off is waited for (one told to stop
            // still answers keepalives while it hands over). Gone, its session is taken up by
            // another member, or ends, within the session's TTL.
            if !self.broke_off {
                return false;
            }
            let moved =
                tokio::time::timeout(self.session.ttl(), self.session.taken_up_after(self.generation));
            if !matches!(moved.await, Ok(Some(_))) {
                return false;
            }
        }
        self.handle = 0;
        self.take_up = take_up.iter().map(|p| p.to_string()).collect();
        true
    }

    async fn close(self) {
        self.session.close().await
    }
}

pub(crate) struct RemoteParticipant {
    remote: Remote,
    session: Session,
    /// The handle holding the node, once entered.
    entered: Option<u64>,
    recipe: String,
}

impl Participant for RemoteParticipant {
    async fn enter(&mut self, path: &str, count: u32, timeout: Option<Duration>) -> Result<(), Failure> {
        let request = pb::DoubleBarrierEnterRequest {
            session: self.session.id(),
            path: path.to_string(),
            count,
            timeout_ms: millis(timeout),
            recipe: self.recipe.clone(),
        };
        let mut recipes = self.session.client().recipes();
        let entered = tokio::select! {
            entered = recipes.double_barrier_enter(request) => self.remote.answer(entered)?,
            why = self.session.ended() => return Err(self.remote.ended(why)),
        };
        self.entered = Some(entered.handle);
        Ok(())
    }

    async fn leave(&mut self, timeout: Option<Duration>) -> Result<(), Failure> {
        // Not entered: there is nothing to leave.
        let Some(handle) = self.entered else { return Ok(()) };
        let request =
            pb::DoubleBarrierLeaveRequest { session: self.session.id(), handle, timeout_ms: millis(timeout) };
        let mut recipes = self.session.client().recipes();
        tokio::select! {
            left = recipes.double_barrier_leave(request) => self.remote.answer(left).map(drop),
            why = self.session.ended() => Err(self.remote.ended(why)),
        }
    }

    async fn close(self) {
        self.session.close().await
    }
}
