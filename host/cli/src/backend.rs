//! What the commands need from wherever the recipes run: this process's own host
//! ([`crate::local`]) or a `wazoo serve` daemon ([`crate::remote`]). The commands
//! ([`crate::claims`], [`crate::commands`]) are written once against [`Backend`]; a backend only
//! carries requests and answers, and says how a call failed ([`Failure`]). What a user sees (the
//! checks, messages, output and exit statuses) is the commands' business.

use std::future::Future;
use std::time::Duration;

use wazoo_runtime::{Entry, Membership, Want};

use crate::exit;

/// Where claims are taken.
pub(crate) trait Backend {
    type Contender: Contender;
    /// A fresh contender for `want` running `recipe`; `label` names it in a daemon's logs.
    async fn contender(&self, want: &Want, recipe: &str, label: &str) -> anyhow::Result<Self::Contender>;

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
    /// Calls `each` with the value now and after every change, until `each` or the watch fails.
    async fn config_watch(&self, path: &str, each: &mut dyn FnMut(Option<&Entry>)) -> Result<(), Failure>;

    async fn counter_get(&self, path: &str) -> Result<i64, Failure>;
    /// Adds `delta`: the new value.
    async fn counter_add(&self, path: &str, delta: i64) -> Result<i64, Failure>;

    /// The members of the group at `path` now.
    async fn group_members(&self, path: &str) -> Result<Membership, Failure>;
    /// Calls `each` with the members now and after every change, until the watch fails.
    async fn group_watch(&self, path: &str, each: &mut dyn FnMut(&Membership)) -> Result<(), Failure>;

    /// Ends what the commands left open (an ephemeral item's handle or session), deleting it.
    async fn end(&self);
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
    /// `--timeout` passed, or `--no-wait` found the claim taken.
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
            Failure::Timeout => (exit::CONFLICT, format!("{context}: timed out")),
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

impl From<wazoo_runtime::RecipeError> for Failure {
    fn from(e: wazoo_runtime::RecipeError) -> Failure {
        use wazoo_runtime::{RecipeError, ZkError};
        match e {
            RecipeError::Zk(ZkError::Timeout) => Failure::Timeout,
            RecipeError::Zk(z @ ZkError::BadVersion) => Failure::Stale(z.to_string()),
            RecipeError::Zk(z) => {
                Failure::Error { code: exit::zk_code(&z), text: z.to_string(), after_context: true }
            }
            other => Failure::Error { code: exit::FAILED, text: other.to_string(), after_context: true },
        }
    }
}
