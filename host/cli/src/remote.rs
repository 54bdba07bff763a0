//! `wazoo --server ADDR …`: the subcommands through a `wazoo serve` daemon's gRPC API
//! (`host/proto/wazoo.proto`) instead of a ZooKeeper session of this process's own.
//!
//! A claim (lock, lease, leadership, group membership) lives in a client session that a task
//! keeps alive over the KeepAlive stream; the command runs under it exactly as on the local path
//! ([`super::hold`]): the same environment, signal forwarding, grace and exit statuses. The daemon's errors carry
//! the ZooKeeper error's WIT name (`timeout:`, `bad-version:` …), which is mapped back to what
//! the local path says and does.

use std::future::Future;
use std::time::Duration;

use anyhow::{anyhow, bail};
use tonic::{Code, Status};
use wazoo_client::{Authed, Client, ConnectError, Session};
use wazoo_proto as pb;
use wazoo_proto::recipes_client::RecipesClient;
use wazoo_runtime::Mode;

use super::exit;
use super::show;
use super::supervise::Signals;
use super::{
    barrier_removed, barrier_set, check_election, check_path, check_tx, custom_outcome, default_id,
    fence_checked, fence_written, few_entered, few_left, hold, join_run, leader_env, leader_note, lease_env,
    lock_env, lock_what, no_holders, no_leader, no_members, no_value, not_held, print_item, print_recipes,
    run_between, stale_version, timed_out, tx_cleaned, tx_outcome, BarrierCommand, Command, ConfigCommand,
    CounterCommand, Ending, FenceCommand, GroupCommand, Holding, QueueCommand, RecipeRow, RecipesCommand,
    Run, RunUnder, TxCommand, Waited, TX_CLEAN,
};
use super::{interrupted, left_queue};

/// The WIT error names the daemon puts before a recipe's error (see the proto's header); the
/// rest of the message is what the local path would say.
const ERROR_NAMES: &[&str] = &[
    "timeout",
    "no-node",
    "node-exists",
    "bad-version",
    "not-empty",
    "invalid-path",
    "invalid-argument",
    "connection-loss",
    "session-expired",
    "no-auth",
    "limit-exceeded",
    "quota-exceeded",
    "other",
    "trapped",
];

/// Runs `command` through the daemon at `server`; `ttl` is the client session's TTL for claims.
pub(crate) async fn run(
    server: &str,
    token: Option<String>,
    ttl: Duration,
    connect_timeout: Duration,
    command: Command,
) -> anyhow::Result<u8> {
    if let Some(name) = local_only(&command) {
        eprintln!("wazoo: {name} does not go through --server");
        return Ok(2);
    }
    check(&command)?;
    let remote = Remote::connect(server, token, connect_timeout).await?;
    match command {
        Command::Lock { path, wait, hold, recipe, command } => {
            let run = Run { wait: &wait, hold: &hold, command: &command };
            remote.lock(ttl, None, &path, run, &recipe).await
        }
        Command::Rwlock { mode, path, wait, hold, recipe, command } => {
            let run = Run { wait: &wait, hold: &hold, command: &command };
            remote.lock(ttl, Some(mode), &path, run, &recipe).await
        }
        Command::Semaphore { path, leases, wait, hold, recipe, command } => {
            let run = Run { wait: &wait, hold: &hold, command: &command };
            remote.semaphore(ttl, &path, leases, run, &recipe).await
        }
        Command::Elect { path, id, wait, hold, recipe, command } => {
            let run = Run { wait: &wait, hold: &hold, command: &command };
            remote.elect(ttl, &path, id, run, &recipe).await
        }
        Command::Holders { path, kind, leases, json } => remote.holders(&path, kind, leases, json).await,
        Command::Leader { path, watch, recipe, json } => remote.leader(&path, watch, &recipe, json).await,
        Command::Queue { command } => remote.queue(ttl, command).await,
        Command::Config { command } => remote.config(command).await,
        Command::Barrier { command } => remote.barrier(command).await,
        Command::Revoke { node, grace } => remote.revoke(&node, grace).await,
        Command::Counter { command } => remote.counter(command).await,
        Command::Group { command } => remote.group(ttl, command).await,
        Command::DoubleBarrier { path, count, timeout, command } => {
            remote.double_barrier(ttl, &path, count, timeout, &command).await
        }
        Command::TwoPhaseCommit { command } => remote.two_phase_commit(command).await,
        Command::Fence { command } => remote.fence(command).await,
        Command::Run { component, args } => remote.invoke(&component, &args).await,
        Command::Recipes { command: RecipesCommand::List { json } } => remote.list_recipes(json).await,
        Command::Recipes { command: RecipesCommand::Functions { recipe } } => remote.functions(&recipe).await,
        Command::Call { recipe, function, args } => remote.call(&recipe, &function, &args).await,
        _ => unreachable!("local_only lets through only what is handled here"),
    }
}

/// The subcommands (and options) the daemon's API has no call for: their name.
fn local_only(command: &Command) -> Option<&'static str> {
    match command {
        Command::Lock { .. }
        | Command::Rwlock { .. }
        | Command::Semaphore { .. }
        | Command::Elect { .. }
        | Command::Leader { .. }
        | Command::Holders { .. }
        | Command::Config { .. }
        | Command::Barrier { .. }
        | Command::Revoke { .. }
        | Command::Counter { .. }
        | Command::Group { .. }
        | Command::DoubleBarrier { .. }
        | Command::TwoPhaseCommit { .. }
        | Command::Fence { .. }
        | Command::Run { .. }
        | Command::Call { .. }
        | Command::Recipes { .. } => None,
        Command::Queue { .. } => None,
        Command::Server { .. } => Some("server"),
        Command::Serve { .. } => Some("serve"),
        Command::Demo { .. } => Some("demo"),
        Command::New { .. } => Some("new"),
    }
}

/// Refuses a bad path (or lease count) before the daemon is asked, as the local path does.
fn check(command: &Command) -> anyhow::Result<()> {
    match command {
        Command::Lock { path, .. } | Command::Rwlock { path, .. } => check_path("lock", path),
        Command::Semaphore { path, .. } => check_path("semaphore", path),
        Command::Holders { path, .. } => check_path("claim", path),
        Command::Elect { path, .. } => check_path("election", path),
        Command::Leader { path, .. } => check_election(path),
        Command::Queue { command } => check_path("queue", command.path()),
        Command::Config { command } => check_path("config", command.path()),
        Command::Barrier { command } => check_path("barrier", command.path()),
        Command::Revoke { node, .. } => check_path("node", node),
        Command::Counter { command } => check_path("counter", command.path()),
        Command::Group { command } => check_path("group", command.path()),
        Command::DoubleBarrier { path, .. } => check_path("barrier", path),
        Command::TwoPhaseCommit { command } => check_tx(command),
        Command::Fence { command } => {
            command.paths().into_iter().try_for_each(|(kind, path)| check_path(kind, path))
        }
        Command::Call { args, .. } => serde_json::from_str::<serde_json::Value>(args)
            .map(drop)
            .map_err(|e| exit::usage(format!("ARGS is not JSON: {e}"))),
        _ => Ok(()),
    }
}

/// The exit status of a failed call, as the local path has it for the same failure
/// ([`exit::zk_code`] for a recipe's error): 69 for a daemon (or its ZooKeeper) out of reach, 2
/// for a request the daemon refuses as malformed, else 70.
fn status_code(status: &Status) -> u8 {
    let name = status.message().split_once(": ").map_or("", |(name, _)| name);
    match (status.code(), name) {
        (_, "connection-loss" | "session-expired") => exit::UNAVAILABLE,
        (_, "no-node" | "node-exists" | "bad-version" | "not-empty" | "invalid-argument") => exit::NOTHING,
        (_, "invalid-path") => exit::USAGE,
        (Code::Unavailable | Code::Unknown | Code::Cancelled, _) => exit::UNAVAILABLE,
        (Code::InvalidArgument, _) => exit::USAGE,
        _ => exit::FAILED,
    }
}

fn millis(timeout: Option<Duration>) -> Option<u64> {
    timeout.map(|t| t.as_millis().try_into().unwrap_or(u64::MAX))
}

/// Whether the daemon answered that `--timeout` passed.
fn is_timeout(status: &Status) -> bool {
    status.code() == Code::DeadlineExceeded
}

/// Whether the daemon answered `bad-version` (a compare-and-set found another version).
fn is_bad_version(status: &Status) -> bool {
    status.code() == Code::FailedPrecondition && status.message().starts_with("bad-version:")
}

/// A connection to the daemon.
#[derive(Clone)]
struct Remote {
    /// As given, for messages.
    addr: String,
    client: Client,
}

impl Remote {
    /// Connects (eagerly, so an unreachable daemon is one clear error, exit status 69).
    async fn connect(addr: &str, token: Option<String>, timeout: Duration) -> anyhow::Result<Remote> {
        match Client::connect(addr, token.as_deref(), timeout).await {
            Ok(client) => Ok(Remote { addr: addr.to_string(), client }),
            Err(ConnectError::BadToken) => bail!("--token: only visible ASCII characters are allowed"),
            Err(ConnectError::BadAddress(why)) => bail!("--server: {why}"),
            Err(ConnectError::Unreachable(why)) => Err(exit::unavailable(why)),
        }
    }

    fn recipes(&self) -> RecipesClient<Authed> {
        self.client.recipes()
    }

    /// A failed call as an error: the daemon's message as the local path words it (after
    /// `context`, as there), or that the daemon could no longer be reached.
    fn failed(&self, context: impl std::fmt::Display, status: Status) -> anyhow::Error {
        let message = match self.describe(&status) {
            (text, true) => format!("{context}: {text}"),
            (text, false) => text,
        };
        exit::Exit { code: status_code(&status), message }.into()
    }

    /// What a failed call says, and whether it goes after a context (as a recipe's error does).
    fn describe(&self, status: &Status) -> (String, bool) {
        let message = status.message();
        // A handle the daemon could not make (no such component, a refused one): said bare, as
        // on the local path.
        if let Some(rest) = message.strip_prefix("recipe: ") {
            return (rest.to_string(), false);
        }
        if let Some((name, rest)) = message.split_once(": ") {
            if ERROR_NAMES.contains(&name) {
                return (rest.to_string(), true);
            }
        }
        match status.code() {
            Code::Unavailable | Code::Unknown | Code::Cancelled => {
                (format!("lost the connection to the wazoo daemon at {}: {message}", self.addr), false)
            }
            // What the daemon itself says about a request (a bad argument, an unknown session).
            Code::InvalidArgument | Code::NotFound | Code::FailedPrecondition | Code::Internal => {
                (message.to_string(), true)
            }
            _ => (format!("unexpected answer from the wazoo daemon at {}: {message}", self.addr), false),
        }
    }

    /// Opens a client session kept alive from a task, named `name` in the daemon's logs.
    async fn session(&self, ttl: Duration, name: String) -> anyhow::Result<Session> {
        self.client.session(ttl, name).await.map_err(|s| self.failed("opening a client session", s))
    }

    /// Follows the loss of `claim` (made in `session`) from now on: what `hold` runs under.
    async fn follow(&self, session: Session, claim: &pb::Claim, what: &str) -> anyhow::Result<RemoteClaim> {
        match self.client.follow(session, claim.clone()).await {
            Ok(claim) => Ok(RemoteClaim { remote: self.clone(), claim }),
            Err(status) => Err(self.failed(format!("following the {what}"), status)),
        }
    }

    /// Runs `command` under the claim `acquiring` brings, as the local path does. A signal while
    /// it waits cancels the call and closes the session, deleting its waiting nodes: exit status
    /// 128 + the signal. A refused claim closes the session too: a timeout is exit status 3,
    /// anything else an error `doing`. The grace is a fifth of the session's TTL unless given.
    #[allow(clippy::too_many_arguments)]
    async fn run_under(
        &self,
        session: Session,
        acquiring: impl Future<Output = Result<tonic::Response<pb::Claim>, tonic::Status>>,
        waited: Waited,
        path: &str,
        doing: String,
        what: String,
        env: impl FnOnce(pb::Claim) -> Vec<(&'static str, String)>,
        run: Run<'_>,
        signals: &mut Signals,
    ) -> anyhow::Result<u8> {
        let claim = match signals.interrupt(acquiring).await {
            Ok(Ok(claim)) => claim.into_inner(),
            Ok(Err(status)) => {
                session.close().await;
                if is_timeout(&status) {
                    return Ok(not_held(waited, path, run.wait));
                }
                return Err(self.failed(doing, status));
            }
            Err(caught) => {
                session.close().await;
                return Ok(left_queue(caught, &what));
            }
        };
        tracing::info!(node = %claim.node, token = claim.fencing_token, "{what} held");
        let ttl = session.ttl();
        let held = self.follow(session, &claim, &what).await?;
        hold(held, RunUnder::new(run, what, env(claim), ttl), signals).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn lock(
        &self,
        ttl: Duration,
        mode: Option<Mode>,
        path: &str,
        run: Run<'_>,
        recipe: &str,
    ) -> anyhow::Result<u8> {
        let mut signals = Signals::new()?;
        let what = lock_what(mode, path);
        let family = match mode {
            None => pb::Family::Lock,
            Some(Mode::Read) => pb::Family::ReadLock,
            Some(Mode::Write) => pb::Family::WriteLock,
        };
        let session = self.session(ttl, format!("wazoo {what}")).await?;
        let request = pb::AcquireRequest {
            session: session.id(),
            path: path.to_string(),
            family: family as i32,
            max_leases: 0,
            timeout_ms: millis(run.wait.wait()),
            recipe: recipe.to_string(),
        };
        let mut recipes = self.recipes();
        let acquiring = recipes.acquire(request);
        let doing = format!("cannot acquire the {what}");
        let env = |claim: pb::Claim| lock_env(mode, path, claim.node, claim.fencing_token);
        let waited = Waited::Lock;
        self.run_under(session, acquiring, waited, path, doing, what, env, run, &mut signals).await
    }

    #[allow(clippy::too_many_arguments)]
    async fn semaphore(
        &self,
        ttl: Duration,
        path: &str,
        leases: u32,
        run: Run<'_>,
        recipe: &str,
    ) -> anyhow::Result<u8> {
        let mut signals = Signals::new()?;
        let what = format!("lease of {path}");
        let session = self.session(ttl, format!("wazoo {what}")).await?;
        let request = pb::AcquireRequest {
            session: session.id(),
            path: path.to_string(),
            family: pb::Family::Semaphore as i32,
            max_leases: leases,
            timeout_ms: millis(run.wait.wait()),
            recipe: recipe.to_string(),
        };
        let mut recipes = self.recipes();
        let acquiring = recipes.acquire(request);
        let doing = format!("cannot take a lease of {path}");
        let env = |claim: pb::Claim| lease_env(path, claim.node, claim.fencing_token);
        let waited = Waited::Lease;
        self.run_under(session, acquiring, waited, path, doing, what, env, run, &mut signals).await
    }

    /// As the local path, without the leader's acknowledgement (the API has no call for it).
    #[allow(clippy::too_many_arguments)]
    async fn elect(
        &self,
        ttl: Duration,
        path: &str,
        id: Option<String>,
        run: Run<'_>,
        recipe: &str,
    ) -> anyhow::Result<u8> {
        let mut signals = Signals::new()?;
        let id = id.unwrap_or_else(default_id);
        let what = format!("leadership of {path}");
        let session = self.session(ttl, format!("wazoo elect {path} as {id}")).await?;
        let request = pb::CampaignRequest {
            session: session.id(),
            path: path.to_string(),
            id: id.clone(),
            timeout_ms: millis(run.wait.wait()),
            recipe: recipe.to_string(),
        };
        let session_id = session.id();
        let campaigning = async {
            let reply = self.recipes().campaign(request).await;
            if let Ok(claim) = &reply {
                // The seed's acknowledgement: observers see that this leader has started its work.
                let note = leader_note(&id, run.command);
                let ack =
                    pb::AcknowledgeRequest { session: session_id, handle: claim.get_ref().handle, note };
                if let Err(s) = self.recipes().acknowledge(ack).await {
                    eprintln!("wazoo: could not acknowledge leadership of {path}: {}", s.message());
                }
            }
            reply
        };
        let doing = format!("cannot campaign in {path}");
        let env = |claim: pb::Claim| leader_env(path, &id, claim.node, claim.fencing_token);
        let waited = Waited::Leadership;
        self.run_under(session, campaigning, waited, path, doing, what, env, run, &mut signals).await
    }

    /// As the local path.
    async fn leader(&self, path: &str, watch: bool, recipe: &str, json: bool) -> anyhow::Result<u8> {
        let request = pb::ObserveRequest { path: path.to_string(), recipe: recipe.to_string() };
        let mut events = self
            .recipes()
            .observe(request)
            .await
            .map_err(|s| self.failed(format!("reading the leader of {path}"), s))?
            .into_inner();
        loop {
            let event = match events.message().await {
                Ok(Some(event)) => event,
                Ok(None) => bail!("the wazoo daemon at {} stopped reporting the leader of {path}", self.addr),
                Err(status) => return Err(self.failed(format!("watching the leader of {path}"), status)),
            };
            let leading = !event.node.is_empty();
            let shown = leading.then(|| show::Leader {
                id: &event.leader_id,
                token: event.fencing_token,
                node: &event.node,
                acknowledged: event.acknowledged.as_deref(),
            });
            show::leader(json, shown);
            if !watch {
                return Ok(if leading { 0 } else { no_leader(path) });
            }
        }
    }

    /// `wazoo holders`: Holders, on the daemon's ZooKeeper session.
    async fn holders(
        &self,
        path: &str,
        kind: Option<wazoo_runtime::holders::Kind>,
        leases: Option<u32>,
        json: bool,
    ) -> anyhow::Result<u8> {
        use wazoo_runtime::holders::Kind;
        let kind = match kind {
            None => pb::HoldersKind::Detect,
            Some(Kind::Lock) => pb::HoldersKind::Lock,
            Some(Kind::ReadWrite) => pb::HoldersKind::ReadWrite,
            Some(Kind::Semaphore) => pb::HoldersKind::Semaphore,
            Some(Kind::Election) => pb::HoldersKind::Election,
        };
        let request = pb::HoldersRequest { path: path.to_string(), kind: kind as i32, leases };
        let reply = self
            .recipes()
            .holders(request)
            .await
            .map_err(|s| self.failed(format!("holders of {path}"), s))?
            .into_inner();
        let kind = match reply.kind() {
            pb::HoldersKind::ReadWrite => Kind::ReadWrite,
            pb::HoldersKind::Semaphore => Kind::Semaphore,
            pb::HoldersKind::Election => Kind::Election,
            pb::HoldersKind::Lock | pb::HoldersKind::Detect => Kind::Lock,
        };
        let rows = reply.contenders.iter().map(|c| show::Contender {
            holds: c.holds,
            node: &c.node,
            mode: match c.mode() {
                pb::ContenderMode::Read => Some("read"),
                pb::ContenderMode::Write => Some("write"),
                pb::ContenderMode::Unspecified => None,
            },
            token: c.fencing_token,
            session: c.session,
            data: &c.data,
        });
        show::contenders(json, kind.name(), rows);
        Ok(if reply.contenders.is_empty() { no_holders(path) } else { 0 })
    }

    async fn queue(&self, ttl: Duration, command: QueueCommand) -> anyhow::Result<u8> {
        let mut recipes = self.recipes();
        match command {
            QueueCommand::Put { path, data, priority, ephemeral } => {
                // An ephemeral item lives in a client session, which ends with this command.
                let session = match ephemeral {
                    true => {
                        eprintln!("wazoo: note: an ephemeral item lives only as long as this command");
                        Some(self.session(ttl, format!("wazoo queue put --ephemeral {path}")).await?)
                    }
                    false => None,
                };
                let request = pb::QueuePutRequest {
                    path: path.clone(),
                    data: data.into_bytes(),
                    priority: priority.map(u32::from),
                    recipe: String::new(),
                    ephemeral,
                    session: session.as_ref().map_or(0, |s| s.id()),
                };
                let item =
                    recipes.queue_put(request).await.map_err(|s| self.failed(format!("queue {path}"), s))?;
                out!("{}", item.into_inner().node);
                if let Some(session) = session {
                    session.close().await;
                }
            }
            QueueCommand::Take { path, timeout } => {
                let request = pb::WaitRequest {
                    path: path.clone(),
                    timeout_ms: millis(timeout),
                    recipe: String::new(),
                };
                match recipes.queue_take(request).await {
                    Ok(item) => print_item(&item.into_inner().data)?,
                    Err(status) if is_timeout(&status) => {
                        return Ok(timed_out(Waited::QueueItem, &path, timeout))
                    }
                    Err(status) => return Err(self.failed(format!("queue {path}"), status)),
                }
            }
            QueueCommand::Len { path, json } => {
                let request = pb::PathRequest { path: path.clone(), recipe: String::new() };
                let length =
                    recipes.queue_len(request).await.map_err(|s| self.failed(format!("queue {path}"), s))?;
                show::number(json, "len", i64::from(length.into_inner().items));
            }
        }
        Ok(0)
    }

    async fn config(&self, command: ConfigCommand) -> anyhow::Result<u8> {
        let mut recipes = self.recipes();
        match command {
            ConfigCommand::Get { path, json } => {
                let request = pb::PathRequest { path: path.clone(), recipe: String::new() };
                let entry = recipes
                    .config_get(request)
                    .await
                    .map_err(|s| self.failed(format!("config {path}"), s))?
                    .into_inner();
                if !entry.exists {
                    return Ok(no_value(&path));
                }
                show::value(json, entry.version, &entry.data);
            }
            ConfigCommand::Set { path, value, version } => {
                let request = pb::ConfigSetRequest {
                    path: path.clone(),
                    data: value.into_bytes(),
                    expected_version: version,
                    recipe: String::new(),
                };
                match recipes.config_set(request).await {
                    Ok(entry) => out!("{}", entry.into_inner().version),
                    Err(status) if is_bad_version(&status) => return Ok(stale_version(&path, version)),
                    Err(status) => return Err(self.failed(format!("config {path}"), status)),
                }
            }
            ConfigCommand::Watch { path, json } => {
                let request = pb::PathRequest { path: path.clone(), recipe: String::new() };
                let mut entries = recipes
                    .config_watch(request)
                    .await
                    .map_err(|s| self.failed(format!("config {path}"), s))?
                    .into_inner();
                loop {
                    match entries.message().await {
                        Ok(Some(e)) => show::entry(json, e.exists.then_some((e.version, &e.data[..]))),
                        Ok(None) => {
                            bail!("the wazoo daemon at {} stopped reporting changes of {path}", self.addr)
                        }
                        Err(status) => return Err(self.failed(format!("config {path}"), status)),
                    }
                }
            }
        }
        Ok(0)
    }

    async fn barrier(&self, command: BarrierCommand) -> anyhow::Result<u8> {
        let mut recipes = self.recipes();
        let request = |path: &str| pb::PathRequest { path: path.to_string(), recipe: String::new() };
        match command {
            BarrierCommand::Set { path } => {
                let done = recipes
                    .barrier_set(request(&path))
                    .await
                    .map_err(|s| self.failed(format!("barrier {path}"), s))?;
                out!("{}", barrier_set(done.into_inner().changed));
            }
            BarrierCommand::Remove { path } => {
                let done = recipes
                    .barrier_remove(request(&path))
                    .await
                    .map_err(|s| self.failed(format!("barrier {path}"), s))?;
                out!("{}", barrier_removed(done.into_inner().changed));
            }
            BarrierCommand::Wait { path, timeout } => {
                let request = pb::WaitRequest {
                    path: path.clone(),
                    timeout_ms: millis(timeout),
                    recipe: String::new(),
                };
                match recipes.barrier_wait(request).await {
                    Ok(_) => out!("down"),
                    Err(status) if is_timeout(&status) => {
                        return Ok(timed_out(Waited::BarrierDown, &path, timeout))
                    }
                    Err(status) => return Err(self.failed(format!("barrier {path}"), status)),
                }
            }
        }
        Ok(0)
    }

    /// `wazoo revoke`: Revoke, with the standard lock recipe as on the local path.
    async fn revoke(&self, node: &str, grace: Option<Duration>) -> anyhow::Result<u8> {
        let request =
            pb::RevokeRequest { node: node.to_string(), grace_ms: millis(grace), recipe: String::new() };
        let reply = self
            .recipes()
            .revoke(request)
            .await
            .map_err(|s| self.failed(format!("revoking {node}"), s))?
            .into_inner();
        out!("{}", if reply.released { "released" } else { "forced" });
        Ok(0)
    }

    async fn counter(&self, command: CounterCommand) -> anyhow::Result<u8> {
        let mut recipes = self.recipes();
        let path = command.path().to_string();
        let (value, json) = match command {
            CounterCommand::Get { json, .. } => (
                recipes.counter_get(pb::PathRequest { path: path.clone(), recipe: String::new() }).await,
                json,
            ),
            CounterCommand::Add { delta, .. } => {
                let request = pb::CounterAddRequest { path: path.clone(), delta, recipe: String::new() };
                (recipes.counter_add(request).await, false)
            }
        };
        let value = value.map_err(|s| self.failed(format!("counter {path}"), s))?;
        show::number(json, "value", value.into_inner().value);
        Ok(0)
    }

    /// `group join` holds the membership in a client session of its own, as `lock` holds a lock.
    async fn group(&self, ttl: Duration, command: GroupCommand) -> anyhow::Result<u8> {
        let mut recipes = self.recipes();
        let path = command.path().to_string();
        fn listed(m: &pb::Membership) -> Vec<(&str, &[u8])> {
            m.members.iter().map(|m| (m.name.as_str(), m.data.as_slice())).collect()
        }
        match command {
            GroupCommand::Join { name, data, hold: holding, command, .. } => {
                let mut signals = Signals::new()?;
                let what = format!("membership of {path} as {name}");
                let session = self.session(ttl, format!("wazoo group join {path} as {name}")).await?;
                let request = pb::GroupJoinRequest {
                    session: session.id(),
                    path: path.clone(),
                    name: name.clone(),
                    data: data.into_bytes(),
                    recipe: String::new(),
                };
                let claim = match signals.interrupt(recipes.group_join(request)).await {
                    Ok(Ok(claim)) => claim.into_inner(),
                    Ok(Err(status)) => {
                        session.close().await;
                        return Err(self.failed(format!("group {path}"), status));
                    }
                    Err(caught) => {
                        session.close().await;
                        return Ok(interrupted(caught, &what));
                    }
                };
                let ttl = session.ttl();
                let held = self.follow(session, &claim, &what).await?;
                let env = vec![("WAZOO_GROUP_PATH", path.clone()), ("WAZOO_MEMBER", name)];
                hold(held, join_run(&holding, &command, what, env, ttl), &mut signals).await
            }
            GroupCommand::List { json, .. } => {
                let request = pb::PathRequest { path: path.clone(), recipe: String::new() };
                let members = recipes
                    .group_members(request)
                    .await
                    .map_err(|s| self.failed(format!("group {path}"), s))?
                    .into_inner();
                show::members(json, listed(&members));
                Ok(if members.members.is_empty() { no_members(&path) } else { 0 })
            }
            GroupCommand::Watch { json, .. } => {
                let request = pb::PathRequest { path: path.clone(), recipe: String::new() };
                let mut changes = recipes
                    .group_watch(request)
                    .await
                    .map_err(|s| self.failed(format!("group {path}"), s))?
                    .into_inner();
                loop {
                    match changes.message().await {
                        Ok(Some(members)) => show::membership(json, listed(&members)),
                        Ok(None) => {
                            bail!("the wazoo daemon at {} stopped reporting changes of {path}", self.addr)
                        }
                        Err(status) => return Err(self.failed(format!("group {path}"), status)),
                    }
                }
            }
        }
    }

    /// `double-barrier`: the participant's node lives in a client session of this process's own
    /// from entering to leaving.
    async fn double_barrier(
        &self,
        ttl: Duration,
        path: &str,
        count: u32,
        timeout: Option<Duration>,
        command: &[String],
    ) -> anyhow::Result<u8> {
        let session = self.session(ttl, format!("wazoo double-barrier {path}")).await?;
        let request = pb::DoubleBarrierEnterRequest {
            session: session.id(),
            path: path.to_string(),
            count,
            timeout_ms: millis(timeout),
            recipe: String::new(),
        };
        let mut signals = Signals::new()?;
        let mut recipes = self.recipes();
        let entered = match signals.interrupt(recipes.double_barrier_enter(request)).await {
            Ok(Ok(entered)) => entered.into_inner(),
            Ok(Err(status)) => {
                session.close().await;
                if is_timeout(&status) {
                    return Ok(few_entered(path, count, timeout));
                }
                return Err(self.failed(format!("entering the double barrier {path}"), status));
            }
            Err(caught) => {
                session.close().await;
                eprintln!("wazoo: {} while entering the double barrier {path}; left it", caught.name());
                return Ok(caught.status());
            }
        };
        let status = match run_between(path, command, &mut signals).await {
            Ok(status) => status,
            Err(e) => {
                session.close().await;
                return Err(e);
            }
        };
        let request = pb::DoubleBarrierLeaveRequest {
            session: session.id(),
            handle: entered.handle,
            timeout_ms: millis(timeout),
        };
        let left = signals.interrupt(recipes.double_barrier_leave(request)).await;
        session.close().await;
        match left {
            Ok(Ok(_)) => Ok(status),
            Ok(Err(status)) if is_timeout(&status) => Ok(few_left(path, timeout)),
            Ok(Err(status)) => Err(self.failed(format!("leaving the double barrier {path}"), status)),
            Err(caught) => {
                eprintln!("wazoo: {} while leaving the double barrier {path}; left it", caught.name());
                Ok(caught.status())
            }
        }
    }

    /// `2pc coordinate|vote|clean`: the vote node lives for the daemon's call; `clean` is the
    /// recipe's export, called through Invoke.
    async fn two_phase_commit(&self, command: TxCommand) -> anyhow::Result<u8> {
        let mut recipes = self.recipes();
        let tx = command.tx().to_string();
        if let TxCommand::Clean { .. } = command {
            let request = pb::InvokeRequest {
                recipe: wazoo_runtime::World::Transaction.default_recipe().to_string(),
                function: TX_CLEAN.to_string(),
                args_json: serde_json::json!([tx]).to_string(),
                ..Default::default()
            };
            let reply = recipes
                .invoke(request)
                .await
                .map_err(|s| self.failed(format!("transaction {tx}"), s))?
                .into_inner();
            let result: serde_json::Value = serde_json::from_str(&reply.result_json).map_err(|e| {
                anyhow!("the wazoo daemon at {} answered {:?}: {e}", self.addr, reply.result_json)
            })?;
            return tx_cleaned(&tx, &result);
        }
        let outcome = match command {
            TxCommand::Coordinate { sites, payload, mode, timeout, .. } => {
                let mode = match mode {
                    wazoo_runtime::TxMode::Coordinated => pb::TxMode::Coordinated,
                    wazoo_runtime::TxMode::AllToAll => pb::TxMode::AllToAll,
                };
                let request = pb::TxCoordinateRequest {
                    tx: tx.clone(),
                    sites,
                    payload: payload.into_bytes(),
                    mode: mode as i32,
                    timeout_ms: millis(Some(timeout)),
                    recipe: String::new(),
                };
                recipes.tx_coordinate(request).await
            }
            TxCommand::Vote { site, ballot, timeout, .. } => {
                let ballot = match ballot {
                    wazoo_runtime::Ballot::Commit => pb::Ballot::Commit,
                    wazoo_runtime::Ballot::Abort => pb::Ballot::Abort,
                };
                let request = pb::TxVoteRequest {
                    tx: tx.clone(),
                    site,
                    ballot: ballot as i32,
                    timeout_ms: millis(Some(timeout)),
                    recipe: String::new(),
                };
                recipes.tx_vote(request).await
            }
            TxCommand::Clean { .. } => unreachable!("cleaned above"),
        }
        .map_err(|s| self.failed(format!("transaction {tx}"), s))?;
        Ok(tx_outcome(outcome.into_inner().committed))
    }

    /// `fence check|write`, on the daemon's ZooKeeper session.
    async fn fence(&self, command: FenceCommand) -> anyhow::Result<u8> {
        let mut recipes = self.recipes();
        match command {
            FenceCommand::Check { node, token } => {
                let request = pb::FenceCheckRequest { node: node.clone(), token };
                let reply = recipes
                    .fence_check(request)
                    .await
                    .map_err(|s| self.failed(format!("fence {node}"), s))?
                    .into_inner();
                let holder = match reply.holder() {
                    pb::FenceHolder::Holds => wazoo_runtime::fence::Holder::Holds,
                    pb::FenceHolder::Gone => wazoo_runtime::fence::Holder::Gone,
                    pb::FenceHolder::OtherToken => {
                        wazoo_runtime::fence::Holder::OtherToken(reply.holder_token)
                    }
                };
                Ok(fence_checked(&node, token, holder))
            }
            FenceCommand::Write { node, token, path, value } => {
                let request = pb::FenceWriteRequest {
                    node: node.clone(),
                    token,
                    path: path.clone(),
                    value: value.into_bytes(),
                };
                let reply = recipes
                    .fence_write(request)
                    .await
                    .map_err(|s| self.failed(format!("fence {path}"), s))?
                    .into_inner();
                let written = match (reply.written, reply.holder()) {
                    (true, _) => wazoo_runtime::fence::Written::Accepted {
                        version: reply.version,
                        previous: reply.last_token,
                    },
                    (false, pb::FenceHolder::Gone) => wazoo_runtime::fence::Written::Gone,
                    (false, pb::FenceHolder::OtherToken) => {
                        wazoo_runtime::fence::Written::OtherToken(reply.holder_token)
                    }
                    (false, pb::FenceHolder::Holds) => wazoo_runtime::fence::Written::Superseded {
                        last: reply.last_token.unwrap_or_default(),
                    },
                };
                Ok(fence_written(&node, token, &path, written))
            }
        }
    }

    /// `wazoo run`: Invoke, the arguments as a JSON array.
    async fn invoke(&self, component: &str, args: &[String]) -> anyhow::Result<u8> {
        let request = pb::InvokeRequest {
            recipe: component.to_string(),
            args_json: serde_json::to_string(args).expect("strings serialise"),
            ..Default::default()
        };
        let reply = self
            .recipes()
            .invoke(request)
            .await
            .map_err(|s| self.failed("running the recipe", s))?
            .into_inner();
        let result: serde_json::Value = serde_json::from_str(&reply.result_json).map_err(|e| {
            anyhow!("the wazoo daemon at {} answered {:?}: {e}", self.addr, reply.result_json)
        })?;
        let text = |key: &str| result.get(key).and_then(|v| v.as_str()).map(str::to_string);
        let outcome = match (text("ok"), text("err")) {
            (Some(ok), _) => Ok(ok),
            (None, Some(err)) => Err(err),
            (None, None) => bail!("the wazoo daemon at {} answered {:?}", self.addr, reply.result_json),
        };
        Ok(custom_outcome(component, outcome))
    }

    /// `wazoo call`: Invoke by function name, on a fresh instance that ends with the call.
    async fn call(&self, recipe: &str, function: &str, args: &str) -> anyhow::Result<u8> {
        let request = pb::InvokeRequest {
            recipe: recipe.to_string(),
            function: function.to_string(),
            args_json: args.to_string(),
            ..Default::default()
        };
        let reply = self
            .recipes()
            .invoke(request)
            .await
            .map_err(|s| self.failed(format!("calling {function}"), s))?
            .into_inner();
        let result: serde_json::Value = serde_json::from_str(&reply.result_json).map_err(|e| {
            anyhow!("the wazoo daemon at {} answered {:?}: {e}", self.addr, reply.result_json)
        })?;
        Ok(crate::print_call_result(&result))
    }

    /// `wazoo recipes functions`: what the daemon's version of `recipe` exports.
    async fn functions(&self, recipe: &str) -> anyhow::Result<u8> {
        let listed = self
            .client
            .admin()
            .list_recipes(pb::Empty {})
            .await
            .map_err(|s| self.failed("listing recipes", s))?
            .into_inner();
        let Some(found) = listed.recipes.into_iter().find(|r| r.name == recipe) else {
            bail!("the wazoo daemon at {} has no recipe {recipe:?}", self.addr);
        };
        if found.world.is_empty() {
            bail!("{recipe} is not serving: {}", found.refused);
        }
        for f in found.functions {
            out!("{f}");
        }
        Ok(0)
    }

    /// `wazoo recipes list`: the daemon's components, and why a newer file was refused while an
    /// older version serves.
    async fn list_recipes(&self, json: bool) -> anyhow::Result<u8> {
        let listed = self
            .client
            .admin()
            .list_recipes(pb::Empty {})
            .await
            .map_err(|s| self.failed("listing recipes", s))?
            .into_inner();
        let rows: Vec<RecipeRow> = listed
            .recipes
            .into_iter()
            .map(|r| {
                let refused = (!r.refused.is_empty()).then(|| format!("refused: {}", r.refused));
                let serving = !r.world.is_empty();
                RecipeRow {
                    name: r.name,
                    world: match (serving, &refused) {
                        (true, _) => r.world,
                        (false, Some(refused)) => refused.clone(),
                        (false, None) => "unknown".to_string(),
                    },
                    hash: if r.version.is_empty() { "-".to_string() } else { r.version },
                    bytes: r.bytes,
                    path: r.path,
                    note: if serving { refused } else { None },
                }
            })
            .collect();
        let empty = format!("no components in the plugins directory of the wazoo daemon at {}", self.addr);
        print_recipes(&rows, &empty, json)
    }
}

/// A claim the daemon holds for this process, in a session of its own.
struct RemoteClaim {
    remote: Remote,
    claim: wazoo_client::Claim,
}

impl Holding for RemoteClaim {
    fn lost(&self) -> impl std::future::Future<Output = Ending> + Send + 'static {
        let lost = self.claim.lost();
        async move { ending(lost.await) }
    }

    async fn release(&mut self) -> Result<(), String> {
        self.claim.release_only().await.map_err(|status| self.remote.describe(&status).0)
    }

    async fn close(self) {
        self.claim.close().await;
    }
}

fn lost_because(why: String) -> Ending {
    Ending { why, revoked: false }
}

/// Why a claim was lost, worded as the local path words the same loss.
fn ending(lost: wazoo_client::Lost) -> Ending {
    use wazoo_client::Lost;
    match lost {
        Lost::SessionExpired => wazoo_runtime::Lost::Session(zookeeper_client::SessionState::Expired).into(),
        Lost::NodeDeleted => wazoo_runtime::Lost::NodeDeleted.into(),
        Lost::Revoked => wazoo_runtime::Lost::Revoked.into(),
        Lost::CutOff => lost_because(
            "the wazoo daemon had no answer from ZooKeeper for 2/3 of its session timeout: assuming the session expired"
                .to_string(),
        ),
        Lost::Disconnected(why) | Lost::Other(why) => lost_because(why),
    }
}
