//! Errors: how ZooKeeper's failures reach a guest, and how a recipe's failures reach a caller.

use std::fmt;

use crate::bindings::ZkError;

/// Maps a zookeeper-client error onto the WIT `zk-error`. Faults of the connection itself
/// (resets, request timeouts) mean the outcome is unknown, exactly like `connection-loss`.
pub(crate) fn from_client(e: zookeeper_client::Error) -> ZkError {
    use zookeeper_client::Error as E;
    match e {
        E::NoNode => ZkError::NoNode,
        E::NodeExists => ZkError::NodeExists,
        E::NotEmpty => ZkError::NotEmpty,
        E::BadVersion => ZkError::BadVersion,
        E::NoChildrenForEphemerals => ZkError::NoChildrenForEphemerals,
        E::ConnectionLoss | E::Timeout | E::SessionMoved | E::Custom(_) => ZkError::ConnectionLoss,
        E::SessionExpired | E::ClientClosed => ZkError::SessionExpired,
        E::NoAuth | E::AuthFailed => ZkError::NoAuth,
        E::QuotaExceeded => ZkError::QuotaExceeded,
        E::Unimplemented => ZkError::Unimplemented,
        E::BadArguments(why) => ZkError::InvalidArgument(why.to_string()),
        E::InvalidAcl => ZkError::InvalidArgument("invalid ACL".into()),
        other => ZkError::Other(other.to_string()),
    }
}

/// A handle that could not be made because the host's instances are all in use (the pooling
/// allocator's `SandboxLimits::max_instances`): a passing shortage, not a missing recipe. Carried
/// in an `anyhow::Error` from the calls that make handles; find it with [`is_exhausted`].
#[derive(Debug)]
pub struct Exhausted(pub String);

impl fmt::Display for Exhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Exhausted {}

/// Whether a failure to make a handle was the host's instances being used up ([`Exhausted`]).
pub fn is_exhausted(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Exhausted>())
}

/// A wasmtime error as an `anyhow::Error` in which the pool's limit stays findable, as
/// [`Exhausted`].
pub(crate) fn from_wasmtime(e: wasmtime::Error) -> anyhow::Error {
    let exhausted = e.is::<wasmtime::PoolConcurrencyLimitError>();
    let e = anyhow::Error::from(e);
    match exhausted {
        true => anyhow::Error::new(Exhausted(format!("{e:#}"))),
        false => e,
    }
}

/// An instantiation's failure, said with the component's `path`: still [`Exhausted`] when the
/// host's instances were used up, so callers can tell it from a broken component.
pub(crate) fn instantiation(path: &std::path::Path, e: anyhow::Error) -> anyhow::Error {
    let text = format!("instantiating {} failed: {e:#}", path.display());
    match is_exhausted(&e) {
        true => anyhow::Error::new(Exhausted(text)),
        false => anyhow::anyhow!(text),
    }
}

/// A sentence for a `zk-error`, for operators and CLI users.
pub fn describe(e: &ZkError) -> String {
    struct D<'a>(&'a ZkError);
    impl fmt::Display for D<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self.0 {
                ZkError::NoNode => f.write_str("node does not exist"),
                ZkError::NodeExists => f.write_str("node already exists"),
                ZkError::NotEmpty => f.write_str("node has children"),
                ZkError::BadVersion => f.write_str("version mismatch"),
                ZkError::NoChildrenForEphemerals => f.write_str("ephemeral nodes cannot have children"),
                ZkError::ConnectionLoss => f.write_str("connection lost (outcome unknown)"),
                ZkError::SessionExpired => f.write_str("ZooKeeper session expired"),
                ZkError::NoAuth => f.write_str("not authorised"),
                ZkError::InvalidPath(why) => write!(f, "invalid path: {why}"),
                ZkError::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
                ZkError::Timeout => f.write_str("timed out"),
                ZkError::QuotaExceeded => f.write_str("ZooKeeper quota exceeded"),
                ZkError::LimitExceeded(what) => write!(f, "limit exceeded: {what}"),
                ZkError::Unimplemented => f.write_str("not supported by the server"),
                ZkError::Other(what) => f.write_str(what),
            }
        }
    }
    D(e).to_string()
}

/// Why a call into a recipe handle failed.
#[derive(Debug)]
pub enum RecipeError {
    /// The recipe returned a ZooKeeper error.
    Zk(ZkError),
    /// The guest trapped (or hit a sandbox limit); the handle is retired and its nodes deleted.
    Trapped(String),
    /// The handle was retired by an earlier trap or cancelled call.
    Retired,
}

impl fmt::Display for RecipeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecipeError::Zk(e) => f.write_str(&describe(e)),
            RecipeError::Trapped(why) => write!(f, "recipe trapped: {why}"),
            RecipeError::Retired => f.write_str("recipe handle retired after an earlier failure"),
        }
    }
}

impl std::error::Error for RecipeError {}

impl From<ZkError> for RecipeError {
    fn from(e: ZkError) -> Self {
        RecipeError::Zk(e)
    }
}
