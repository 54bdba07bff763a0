//! `wazoo --server ADDR …`: the subcommands through a `wazoo serve` daemon's gRPC API
//! (`host/proto/wazoo.proto`) instead of a ZooKeeper session of this process's own.
//!
//! A claim (lock, lease, leadership, group membership) lives in a client session that a task
//! keeps alive over the KeepAlive stream; the command runs under it exactly as on the local path
//! ([`super::hold`]): the same environment, signal forwarding, grace and exit statuses. The daemon's errors carry
//! the ZooKeeper error's WIT name (`timeout:`, `bad-version:` …), which is mapped back to what
//! the local path says and does.

use std::time::Duration;

use anyhow::{anyhow, bail};
use tonic::{Code, Status};
use wazoo_client::{Authed, Client, ConnectError, Session};
use wazoo_proto as pb;
use wazoo_proto::recipes_client::RecipesClient;
use wazoo_runtime::{Entry, Membership, Mode, Want};

use super::backend::{Backend, Contender, Ending, Failure, Granted, Holding};
use super::exit;
use super::show;
use super::supervise::Signals;
use super::{
    barrier_removed, barrier_set, check_election, check_path, check_tx, custom_outcome, fence_checked,
    fence_written, few_entered, few_left, no_holders, no_leader, print_recipes, run_between, timed_out,
    tx_cleaned, tx_outcome, BarrierCommand, Command, FenceCommand, RecipeRow, RecipesCommand, TxCommand,
    Waited, TX_CLEAN,
};
use super::{claims, commands};

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
    let remote = Remote::connect(server, token, connect_timeout, ttl).await?;
    if let Some((asked, run)) = super::asked(&command) {
        return claims::claim(&remote, asked, run).await;
    }
    match command {
        Command::Holders { path, kind, leases, json } => remote.holders(&path, kind, leases, json).await,
        Command::Leader { path, watch, recipe, json } => remote.leader(&path, watch, &recipe, json).await,
        Command::Queue { command } => commands::queue(&remote, command).await,
        Command::Config { command } => commands::config(&remote, command).await,
        Command::Barrier { command } => remote.barrier(command).await,
        Command::Revoke { node, grace } => remote.revoke(&node, grace).await,
        Command::Counter { command } => commands::counter(&remote, command).await,
        Command::Group { command } => commands::group(&remote, command).await,
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
    /// The TTL of the client sessions claims are held in.
    ttl: Duration,
    /// What lives until [`Backend::end`]: an ephemeral queue item's session.
    kept: std::sync::Arc<tokio::sync::Mutex<Vec<Session>>>,
}

impl Remote {
    /// Connects (eagerly, so an unreachable daemon is one clear error, exit status 69).
    async fn connect(
        addr: &str,
        token: Option<String>,
        timeout: Duration,
        ttl: Duration,
    ) -> anyhow::Result<Remote> {
        match Client::connect(addr, token.as_deref(), timeout).await {
            Ok(client) => Ok(Remote { addr: addr.to_string(), client, ttl, kept: Default::default() }),
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

    /// A failed call as the claim commands see it ([`Failure`]).
    fn failure(&self, status: &Status) -> Failure {
        if is_timeout(status) {
            return Failure::Timeout;
        }
        if is_bad_version(status) {
            return Failure::Stale(self.describe(status).0);
        }
        let (text, after_context) = self.describe(status);
        Failure::Error { code: status_code(status), text, after_context }
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

/// A claim the daemon holds for this process, in a client session of its own.
impl Backend for Remote {
    type Contender = RemoteContender;

    async fn contender(&self, want: &Want, recipe: &str, label: &str) -> anyhow::Result<RemoteContender> {
        let session = self.session(self.ttl, format!("wazoo {label}")).await?;
        Ok(RemoteContender {
            remote: self.clone(),
            session,
            want: want.clone(),
            recipe: recipe.to_string(),
            claim: None,
        })
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
        let request = pb::QueuePutRequest {
            path: path.to_string(),
            data,
            priority: priority.map(u32::from),
            recipe: String::new(),
            ephemeral,
            session: session.as_ref().map_or(0, |s| s.id()),
        };
        let put = self.recipes().queue_put(request).await;
        self.kept.lock().await.extend(session);
        Ok(put.map_err(|s| self.failure(&s))?.into_inner().node)
    }

    async fn queue_take(&self, path: &str, timeout: Option<Duration>) -> Result<Vec<u8>, Failure> {
        let request =
            pb::WaitRequest { path: path.to_string(), timeout_ms: millis(timeout), recipe: String::new() };
        Ok(self.recipes().queue_take(request).await.map_err(|s| self.failure(&s))?.into_inner().data)
    }

    async fn queue_len(&self, path: &str) -> Result<u32, Failure> {
        let reply = self.recipes().queue_len(by_path(path)).await;
        Ok(reply.map_err(|s| self.failure(&s))?.into_inner().items)
    }

    async fn config_get(&self, path: &str) -> Result<Option<Entry>, Failure> {
        let reply = self.recipes().config_get(by_path(path)).await;
        Ok(entry(reply.map_err(|s| self.failure(&s))?.into_inner()))
    }

    async fn config_set(&self, path: &str, data: Vec<u8>, version: Option<i32>) -> Result<i32, Failure> {
        let request = pb::ConfigSetRequest {
            path: path.to_string(),
            data,
            expected_version: version,
            recipe: String::new(),
        };
        Ok(self.recipes().config_set(request).await.map_err(|s| self.failure(&s))?.into_inner().version)
    }

    async fn config_watch(&self, path: &str, each: &mut dyn FnMut(Option<&Entry>)) -> Result<(), Failure> {
        let reply = self.recipes().config_watch(by_path(path)).await;
        let mut entries = reply.map_err(|s| self.failure(&s))?.into_inner();
        loop {
            match entries.message().await {
                Ok(Some(e)) => each(entry(e).as_ref()),
                Ok(None) => return Err(self.stopped_reporting(path)),
                Err(status) => return Err(self.failure(&status)),
            }
        }
    }

    async fn counter_get(&self, path: &str) -> Result<i64, Failure> {
        let reply = self.recipes().counter_get(by_path(path)).await;
        Ok(reply.map_err(|s| self.failure(&s))?.into_inner().value)
    }

    async fn counter_add(&self, path: &str, delta: i64) -> Result<i64, Failure> {
        let request = pb::CounterAddRequest { path: path.to_string(), delta, recipe: String::new() };
        Ok(self.recipes().counter_add(request).await.map_err(|s| self.failure(&s))?.into_inner().value)
    }

    async fn group_members(&self, path: &str) -> Result<Membership, Failure> {
        let reply = self.recipes().group_members(by_path(path)).await;
        Ok(membership(reply.map_err(|s| self.failure(&s))?.into_inner()))
    }

    async fn group_watch(&self, path: &str, each: &mut dyn FnMut(&Membership)) -> Result<(), Failure> {
        let reply = self.recipes().group_watch(by_path(path)).await;
        let mut changes = reply.map_err(|s| self.failure(&s))?.into_inner();
        loop {
            match changes.message().await {
                Ok(Some(members)) => each(&membership(members)),
                Ok(None) => return Err(self.stopped_reporting(path)),
                Err(status) => return Err(self.failure(&status)),
            }
        }
    }

    async fn end(&self) {
        for session in self.kept.lock().await.drain(..) {
            session.close().await;
        }
    }
}

impl Remote {
    /// A watch stream the daemon ended.
    fn stopped_reporting(&self, path: &str) -> Failure {
        let text = format!("the wazoo daemon at {} stopped reporting changes of {path}", self.addr);
        Failure::Error { code: exit::FAILED, text, after_context: false }
    }
}

/// A request naming a path, for the family's default recipe.
fn by_path(path: &str) -> pb::PathRequest {
    pb::PathRequest { path: path.to_string(), recipe: String::new() }
}

fn entry(e: pb::ConfigEntry) -> Option<Entry> {
    e.exists.then_some(Entry { data: e.data, version: e.version })
}

fn membership(m: pb::Membership) -> Membership {
    let members =
        m.members.into_iter().map(|m| wazoo_runtime::Member { name: m.name, data: m.data }).collect();
    Membership { members, version: m.version }
}

/// A client session about to ask for one claim; closing it deletes whatever the claim made.
pub(crate) struct RemoteContender {
    remote: Remote,
    session: Session,
    want: Want,
    recipe: String,
    /// What the daemon granted.
    claim: Option<pb::Claim>,
}

impl Contender for RemoteContender {
    type Held = RemoteClaim;

    async fn acquire(&mut self, path: &str, timeout: Option<Duration>) -> Result<Granted, Failure> {
        let mut recipes = self.remote.recipes();
        let (session, path, recipe) = (self.session.id(), path.to_string(), self.recipe.clone());
        let timeout_ms = millis(timeout);
        let acquire = |family: pb::Family, max_leases: u32| pb::AcquireRequest {
            session,
            path: path.clone(),
            family: family as i32,
            max_leases,
            timeout_ms,
            recipe: recipe.clone(),
        };
        let reply = match &self.want {
            Want::Lock => recipes.acquire(acquire(pb::Family::Lock, 0)).await,
            Want::ReadWrite(Mode::Read) => recipes.acquire(acquire(pb::Family::ReadLock, 0)).await,
            Want::ReadWrite(Mode::Write) => recipes.acquire(acquire(pb::Family::WriteLock, 0)).await,
            Want::Lease { max_leases } => recipes.acquire(acquire(pb::Family::Semaphore, *max_leases)).await,
            Want::Leadership { id } => {
                let request = pb::CampaignRequest { session, path, id: id.clone(), timeout_ms, recipe };
                recipes.campaign(request).await
            }
            Want::Membership { name, data } => {
                let request =
                    pb::GroupJoinRequest { session, path, name: name.clone(), data: data.clone(), recipe };
                recipes.group_join(request).await
            }
        };
        let claim = reply.map_err(|status| self.remote.failure(&status))?.into_inner();
        let granted = Granted { node: claim.node.clone(), token: claim.fencing_token };
        self.claim = Some(claim);
        Ok(granted)
    }

    async fn acknowledge(&mut self, note: &str) -> Result<(), String> {
        let Some(claim) = &self.claim else { return Ok(()) };
        let request = pb::AcknowledgeRequest {
            session: self.session.id(),
            handle: claim.handle,
            note: note.to_string(),
        };
        self.remote.recipes().acknowledge(request).await.map(drop).map_err(|s| s.message().to_string())
    }

    async fn hold(self) -> anyhow::Result<RemoteClaim> {
        let Some(claim) = self.claim else {
            self.session.close().await;
            bail!("nothing was acquired");
        };
        match self.remote.client.follow(self.session, claim).await {
            Ok(claim) => Ok(RemoteClaim { remote: self.remote, claim }),
            Err(status) => Err(self.remote.failed("following the claim", status)),
        }
    }

    async fn close(self) {
        self.session.close().await
    }

    fn session_timeout(&self) -> Duration {
        self.session.ttl()
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
        async move { ending(lost.await) }
    }

    async fn release(self) -> Result<(), String> {
        let RemoteClaim { remote, mut claim } = self;
        let released = claim.release_only().await.map_err(|status| remote.describe(&status).0);
        claim.close().await;
        released
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
