//! What the commands need from wherever the recipes run: this process's own host (`local`) or a
//! `wazoo serve` daemon (`remote`). The commands (`claims`, `commands`, `partition`) are written
//! once against [`Backend`]; a backend only carries requests and answers, in the runtime's types (`LeaderInfo`, `Outcome`,
//! `fence::Holder` …), and says how a call failed ([`Failure`]). What a user sees (the checks,
//! messages, output and exit statuses) is the commands' business.

use std::future::Future;
use std::time::Duration;

use wazoo_runtime::fence::{Holder, Written};
use wazoo_runtime::holders::{Contenders, Kind};
use wazoo_runtime::{
    Ballot, CacheChange, CounterFormat, Entry, LeaderInfo, Membership, Outcome, TxMode, Want,
};

use crate::exit;

/// Where the recipes run: claims are taken, values read and written, recipes called.
pub(crate) trait Backend {
    type Contender: Contender;
    type Participant: Participant;
    type Instance: Instance;
    /// A fresh contender for `want` running `recipe`, for `id` (its node's data where the recipe
    /// leaves it blank); `label` names it in a daemon's logs.
    async fn contender(
        &self,
        want: &Want,
        recipe: &str,
        label: &str,
        id: &str,
    ) -> anyhow::Result<Self::Contender>;

    /// Appends `data` to the queue at `path`: the item's node. An `ephemeral` item lives until
    /// [`Backend::end`].
    async fn queue_put(
        &self,
        path: &str,
        data: Vec<u8>,
        priority: Option<u8>,
        ephemeral: bool,
    ) -> Result<String, Failure>;
    /// Removes the head item: its data.
    async fn queue_take(&self, path: &str, timeout: Option<Duration>) -> Result<Vec<u8>, Failure>;
    async fn queue_len(&self, path: &str) -> Result<u32, Failure>;

    /// The value at `path`, if any.
    async fn config_get(&self, path: &str) -> Result<Option<Entry>, Failure>;
    /// Sets the value (only at `version`, when given): its new version.
    async fn config_set(&self, path: &str, data: Vec<u8>, version: Option<i32>) -> Result<i32, Failure>;
    /// Deletes the value (only at `version`, when given), or says why not. An ephemeral node
    /// there (someone's claim) is refused, exit status 2.
    async fn config_delete(&self, path: &str, version: Option<i32>) -> Result<Deleted, Failure>;
    /// Calls `each` with the value now and after every change, until `each` or the watch fails.
    async fn config_watch(&self, path: &str, each: &mut dyn FnMut(Option<&Entry>)) -> Result<(), Failure>;

    /// The counter at `path`, stored in `format`.
    async fn counter_get(&self, path: &str, format: CounterFormat) -> Result<i64, Failure>;
    /// Adds `delta` to the counter stored in `format`: the new value.
    async fn counter_add(&self, path: &str, delta: i64, format: CounterFormat) -> Result<i64, Failure>;

    /// The members of the group at `path` now.
    async fn group_members(&self, path: &str) -> Result<Membership, Failure>;
    /// Calls `each` with the members now and after every change, until the watch fails.
    async fn group_watch(&self, path: &str, each: &mut dyn FnMut(&Membership)) -> Result<(), Failure>;
    /// Follows a cache of `path` (with `recursive`, of the tree below it too) kept by the cache
    /// recipe `recipe`: `each` gets a `created` per node there, `initialized`, then every change,
    /// across broken connections and new sessions, until the watch fails.
    async fn watch(
        &self,
        path: &str,
        recursive: bool,
        recipe: &str,
        each: &mut dyn FnMut(&CacheChange),
    ) -> Result<(), Failure>;

    /// Puts the barrier at `path` up: whether this call did (it was down).
    async fn barrier_set(&self, path: &str, recipe: &str) -> Result<bool, Failure>;
    /// Takes the barrier down: whether this call did (it was up).
    async fn barrier_remove(&self, path: &str, recipe: &str) -> Result<bool, Failure>;
    /// Blocks until the barrier is down, or `timeout` passes ([`Failure::Timeout`]).
    async fn barrier_wait(&self, path: &str, timeout: Option<Duration>, recipe: &str) -> Result<(), Failure>;
    /// A fresh participant of the double barrier at `path`, not yet entered.
    async fn participant(&self, path: &str, recipe: &str) -> anyhow::Result<Self::Participant>;

    /// The leader of the election at `path` now, read with `recipe`, without contending.
    async fn leader(&self, path: &str, recipe: &str) -> Result<Option<LeaderInfo>, Failure>;
    /// Calls `each` with the leader now and after every change (of the leader or its
    /// acknowledgement), until the watch fails.
    async fn leader_watch(
        &self,
        path: &str,
        recipe: &str,
        each: &mut dyn FnMut(Option<&LeaderInfo>),
    ) -> Result<(), Failure>;
    /// The holders and waiters of the claim at `path`, in queue order (no recipe).
    async fn holders(
        &self,
        path: &str,
        kind: Option<Kind>,
        leases: Option<u32>,
    ) -> Result<Contenders, Failure>;
    /// Every claim at `prefix` or below it, by path, each with its contenders in queue order
    /// (no recipe; see `wazoo_runtime::holders::under`).
    async fn claims(&self, prefix: &str) -> Result<Vec<(String, Contenders)>, Failure>;
    /// The daemon's client sessions (the caller's tenant's), oldest first; `None` on this
    /// process's own host, which has none.
    async fn sessions(&self) -> Result<Option<Vec<SessionInfo>>, Failure>;
    /// Asks the holder of claim node `node` to let go; with `grace`, deletes the node if it has
    /// not within that time. What came of it.
    async fn revoke(&self, node: &str, grace: Option<Duration>) -> Result<Revocation, Failure>;
    /// Whether `node` still exists with fencing token `token`.
    async fn fence_check(&self, node: &str, token: i64) -> Result<Holder, Failure>;
    /// Writes `value` to `path` for the holder of `node` with `token` (see
    /// `wazoo_runtime::fence`).
    async fn fence_write(&self, node: &str, token: i64, path: &str, value: &[u8])
        -> Result<Written, Failure>;

    /// Starts transaction `tx` over `sites` and waits for its outcome (aborted if not every
    /// site voted within `timeout`).
    async fn tx_coordinate(
        &self,
        tx: &str,
        sites: &[String],
        payload: &[u8],
        mode: TxMode,
        timeout: Duration,
    ) -> Result<Outcome, Failure>;
    /// Votes `ballot` in `tx` as `site` and waits for the outcome.
    async fn tx_vote(
        &self,
        tx: &str,
        site: &str,
        ballot: Ballot,
        timeout: Duration,
    ) -> Result<Outcome, Failure>;

    /// The recipe components there are, and what to say when there are none.
    async fn recipes(&self) -> Result<Recipes, Failure>;
    /// Checks a component and publishes it to the recipe registry in ZooKeeper.
    async fn publish(
        &self,
        request: wazoo_proto::PublishRequest,
    ) -> Result<wazoo_proto::PublishReply, Failure>;
    /// A recipe's rollout: its current version and canary, the hosts' reports, its history.
    async fn rollout(&self, name: &str) -> Result<wazoo_proto::RolloutReply, Failure>;
    /// Makes an earlier version of a recipe current again.
    async fn rollback(
        &self,
        request: wazoo_proto::RollbackRequest,
    ) -> Result<wazoo_proto::PublishReply, Failure>;
    /// The functions `recipe` exports, with their WIT types, as [`Backend::call`] names them.
    async fn functions(&self, recipe: &str) -> Result<Vec<String>, Failure>;
    /// Calls export `function` of a fresh instance of `recipe` with `args` (a JSON array or
    /// object): its result as JSON. The instance ends with the call.
    async fn call(
        &self,
        recipe: &str,
        function: &str,
        args: &serde_json::Value,
    ) -> Result<serde_json::Value, Failure> {
        let mut instance = self.instance(recipe, &format!("call {recipe} {function}")).await?;
        let result = instance.call(function, args).await;
        instance.close().await;
        result
    }
    /// A fresh instance of `recipe`, whatever its world, kept across calls with what it owns
    /// (a node it created stays until [`Instance::close`]): how a command of a family without
    /// typed calls of its own is written once (ARCHITECTURE.md, "Adding a recipe family").
    async fn instance(&self, recipe: &str, label: &str) -> anyhow::Result<Self::Instance>;
    /// Runs the custom recipe `component` with `args`: its `ok` or `err` text.
    async fn run(&self, component: &str, args: &[String]) -> Result<Result<String, String>, Failure>;

    /// Ends what the commands left open (an ephemeral item's handle or session), deleting it.
    async fn end(&self);
}

/// How a delete of a node ended: deleted, or the definite no it met (exit status 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deleted {
    Yes,
    /// Nothing there.
    Absent,
    /// Not at the version asked for.
    OtherVersion,
    /// It has children.
    HasChildren,
}

/// The recipe components a backend has (`wazoo recipes list`).
pub(crate) struct Recipes {
    pub(crate) rows: Vec<RecipeRow>,
    /// What to say when there are none: where they would be.
    pub(crate) none: String,
}

/// One component of `wazoo recipes list`.
pub(crate) struct RecipeRow {
    pub(crate) name: String,
    /// The world it implements, or why it was refused (`refused: …`), or `unknown`.
    pub(crate) world: String,
    /// The serving version's short SHA-256, or `-`.
    pub(crate) hash: String,
    pub(crate) bytes: u64,
    pub(crate) path: String,
    /// After the path, e.g. why a newer file was refused while an older version serves.
    pub(crate) note: Option<String>,
    /// Carried in the binary, not a file of the plugins directory.
    pub(crate) embedded: bool,
}

/// A double barrier's participant, made before entering so that a signal while entering can
/// end it and its node with it.
pub(crate) trait Participant: Sized {
    /// Enters the double barrier at `path`; blocks until `count` participants are in, or
    /// `timeout` passes ([`Failure::Timeout`]).
    async fn enter(&mut self, path: &str, count: u32, timeout: Option<Duration>) -> Result<(), Failure>;
    /// Leaves; blocks until every participant has left, or `timeout` passes.
    async fn leave(&mut self, timeout: Option<Duration>) -> Result<(), Failure>;
    /// Ends it (the handle, or the client session), deleting its node if still there.
    async fn close(self);
}

/// An instance of any recipe, its exports called by name with JSON arguments and results
/// (`dynamic`, in the runtime).
pub(crate) trait Instance: Sized {
    /// Calls export `function` (`interface.function`) with `args` (a JSON array or object).
    async fn call(&mut self, function: &str, args: &serde_json::Value) -> Result<serde_json::Value, Failure>;
    /// After a failed call, whether it starts again as a fresh instance in the same session
    /// because the instance stayed behind on a daemon that went while the session was taken up
    /// by another of its group: the ephemeral nodes at `take_up` the lost instance made are then
    /// the fresh one's once it makes them again (the same nodes, not new ones). False when the
    /// instance itself failed, or its session ended: close it.
    async fn renew(&mut self, take_up: &[&str]) -> bool;
    /// Ends it, deleting the ephemeral nodes it made.
    async fn close(self);
}

/// A contender made before the wait, so that a signal during the wait can end it and its
/// waiting node with it.
pub(crate) trait Contender: Sized {
    type Held: Holding;
    /// Blocks until the claim at `path` is had, or `timeout` passes ([`Failure::Timeout`]).
    async fn acquire(&mut self, path: &str, timeout: Option<Duration>) -> Result<Granted, Failure>;
    /// A leader's acknowledgement, for observers to see that it started its work.
    async fn acknowledge(&mut self, note: &str) -> Result<(), String>;
    /// What was acquired, followed from now on.
    async fn hold(self) -> anyhow::Result<Self::Held>;
    /// Ends it, deleting whatever nodes it made.
    async fn close(self);
    /// The session's timeout (or a daemon session's TTL): the default grace is a fifth of it.
    fn session_timeout(&self) -> Duration;
}

/// What a contender got.
pub(crate) struct Granted {
    pub(crate) node: String,
    pub(crate) token: i64,
}

/// What a command can run under: a recipe handle's claim here, or one held for us by a daemon.
pub(crate) trait Holding {
    /// Resolves when what is held is lost or revoked.
    fn lost(&self) -> impl Future<Output = Ending> + Send + 'static;
    /// Gives up what is held, then ends the handle (or session), also when giving up fails.
    async fn release(self) -> Result<(), String>;
    /// Ends the handle (or session) now without giving up first: its nodes are deleted.
    async fn close(self);
}

/// What a revocation came to ([`Backend::revoke`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Revocation {
    /// No grace: the holder was asked to let go, and nothing was waited for.
    Asked,
    /// The holder let go within the grace (or the node was gone already).
    Released,
    /// The grace passed: the node was deleted.
    Forced,
}

impl Revocation {
    /// What a recipe's `revoke` answered (`released`), asked with a grace or without.
    pub(crate) fn of(released: bool, graced: bool) -> Revocation {
        match (graced, released) {
            (false, _) => Revocation::Asked,
            (true, true) => Revocation::Released,
            (true, false) => Revocation::Forced,
        }
    }

    /// The word `wazoo revoke` prints.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Revocation::Asked => "asked",
            Revocation::Released => "released",
            Revocation::Forced => "forced",
        }
    }
}

/// Why a claim ended while its command ran.
pub(crate) struct Ending {
    /// For the message, e.g. "lock node was deleted".
    pub(crate) why: String,
    /// Another client asked for it (exit status 5, and the claim is released), rather than lost.
    pub(crate) revoked: bool,
}

impl From<wazoo_runtime::Lost> for Ending {
    fn from(lost: wazoo_runtime::Lost) -> Ending {
        Ending { why: lost.to_string(), revoked: lost == wazoo_runtime::Lost::Revoked }
    }
}

/// A backend call that failed.
pub(crate) enum Failure {
    /// `--timeout` passed, or `--no-wait` found the claim taken. The commands that wait say so
    /// themselves (exit status 3); a timeout nobody asked for is a failure like any other.
    Timeout,
    /// A compare-and-set found another version (`bad-version`): a definite no, exit status 1.
    Stale(String),
    /// Nothing was asked: ZooKeeper or the daemon is out of reach, the recipe missing or
    /// refused. Said as it is, with the exit status it carries ([`exit::code_of`]).
    Setup(anyhow::Error),
    /// Anything else: the exit status it ends wazoo with, and what it says.
    Error {
        code: u8,
        text: String,
        /// Said after the command's context ("cannot acquire the lock at /x: …"), as a recipe's
        /// error is; false for what stands alone (the daemon went away).
        after_context: bool,
    },
}

impl Failure {
    pub(crate) fn into_error(self, context: impl std::fmt::Display) -> anyhow::Error {
        let (code, message) = match self {
            Failure::Setup(e) => return e,
            Failure::Timeout => (exit::FAILED, format!("{context}: timed out")),
            Failure::Stale(text) => (exit::NOTHING, format!("{context}: {text}")),
            Failure::Error { code, text, after_context: true } => (code, format!("{context}: {text}")),
            Failure::Error { code, text, after_context: false } => (code, text),
        };
        exit::Exit { code, message }.into()
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Failure {
        Failure::Setup(e)
    }
}

/// A recipe's failure, in its words ([`wazoo_runtime::error::describe`] for a ZooKeeper error).
impl From<wazoo_runtime::RecipeError> for Failure {
    fn from(e: wazoo_runtime::RecipeError) -> Failure {
        use wazoo_runtime::{RecipeError, ZkError};
        match e {
            RecipeError::Zk(ZkError::Timeout) => Failure::Timeout,
            e @ RecipeError::Zk(ZkError::BadVersion) => Failure::Stale(e.to_string()),
            e => Failure::Error {
                code: exit::kind_code(exit::recipe_kind(&e)),
                text: e.to_string(),
                after_context: true,
            },
        }
    }
}

/// A daemon's client session, as `Admin.ListSessions` gives it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SessionInfo {
    pub(crate) id: u64,
    /// The name its client gave.
    pub(crate) name: String,
    /// The address its client called from (empty: not known).
    pub(crate) peer: String,
    /// When it was opened, in milliseconds since the Unix epoch.
    pub(crate) opened_ms: i64,
    pub(crate) claims: Vec<SessionClaim>,
}

/// A claim of a daemon's client session.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SessionClaim {
    pub(crate) handle: u64,
    /// The path it was taken at.
    pub(crate) path: String,
    /// `lock`, `read-lock`, `write-lock`, `semaphore`, `election`, …
    pub(crate) family: String,
    /// Held (else waited for).
    pub(crate) holds: bool,
    pub(crate) node: String,
    pub(crate) token: i64,
    /// Since when, in milliseconds since the Unix epoch.
    pub(crate) since_ms: i64,
}

/// A ZooKeeper error met outside a recipe (`holders`, `fence`), as a recipe's.
impl From<wazoo_runtime::ZkError> for Failure {
    fn from(e: wazoo_runtime::ZkError) -> Failure {
        Failure::from(wazoo_runtime::RecipeError::Zk(e))
    }
}

#[cfg(test)]
mod tests {
    use wazoo_runtime::{RecipeError, ZkError};

    use super::*;

    fn said(failure: Failure) -> (u8, String) {
        let e = failure.into_error("config /x");
        (exit::code_of(&e), e.to_string())
    }

    #[test]
    fn a_recipe_error_is_said_in_words_after_the_context() {
        let no_node = Failure::from(RecipeError::Zk(ZkError::NoNode));
        assert_eq!(said(no_node), (exit::NOTHING, "config /x: node does not exist".to_string()));
        let lost = Failure::from(ZkError::ConnectionLoss);
        assert_eq!(
            said(lost),
            (exit::UNAVAILABLE, "config /x: connection lost (outcome unknown)".to_string())
        );
        let stale = Failure::from(RecipeError::Zk(ZkError::BadVersion));
        assert!(matches!(&stale, Failure::Stale(text) if text == "version mismatch"));
        assert_eq!(said(stale), (exit::NOTHING, "config /x: version mismatch".to_string()));
        let trapped = Failure::from(RecipeError::Trapped("out of fuel".into()));
        assert_eq!(said(trapped), (exit::FAILED, "config /x: recipe trapped: out of fuel".to_string()));
    }

    #[test]
    fn a_timeout_nobody_waited_for_is_a_failure() {
        assert!(matches!(Failure::from(ZkError::Timeout), Failure::Timeout));
        assert_eq!(said(Failure::Timeout), (exit::FAILED, "config /x: timed out".to_string()));
    }

    #[test]
    fn what_stands_alone_is_said_alone() {
        let gone = Failure::Error {
            code: exit::UNAVAILABLE,
            text: "the daemon went away".into(),
            after_context: false,
        };
        assert_eq!(said(gone), (exit::UNAVAILABLE, "the daemon went away".to_string()));
        let setup = Failure::from(exit::unavailable("cannot reach ZooKeeper"));
        assert_eq!(said(setup), (exit::UNAVAILABLE, "cannot reach ZooKeeper".to_string()));
    }
}
