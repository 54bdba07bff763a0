//! `wazoo`'s exit statuses, one table for every subcommand (the book's
//! docs/src/reference/exit-statuses.md has the same table, and `--help` and the manual pages print
//! it from `manual::EXIT_STATUSES`), and
//! how an error becomes one: by its kind ([`kind_code`]), on the local path and through a daemon
//! alike.
//!
//! A script tells "nothing there" (1) from "could not find out" (69, 70): `config get` with no
//! value exits 1, the same call with ZooKeeper unreachable exits 69. The claim commands' own
//! statuses (3, 4, 5) can be moved out of CMD's way with `--conflict-exit-code`,
//! `--lost-exit-code` and `--revoked-exit-code`.

use std::fmt;

use wazoo_proto::ErrorKind;
use wazoo_runtime::{RecipeError, ZkError};

/// Nothing there, or a definite no: no value, no leader, no holders, a stale version, a fenced
/// write refused, a transaction still running, a name taken, a recipe's `err` answer.
pub(crate) const NOTHING: u8 = 1;
/// Bad usage: an unknown option, a value out of range, an invalid path (clap's own status too).
pub(crate) const USAGE: u8 = 2;
/// Not held: `--timeout` passed (or `--no-wait` found it taken) while waiting.
pub(crate) const CONFLICT: u8 = 3;
/// The claim was lost while CMD ran (session expired or cut off, node deleted).
pub(crate) const LOST: u8 = 4;
/// Another client revoked the claim; CMD was stopped and the claim released.
pub(crate) const REVOKED: u8 = 5;
/// A two-phase commit transaction aborted.
pub(crate) const ABORTED: u8 = 6;
/// CMD was found but cannot be run (not executable, a directory), said before any claim is
/// taken for it: the shell's status for it.
pub(crate) const CANNOT_RUN: u8 = 126;
/// CMD was not found (on `PATH`, or at the path given), said before any claim is taken for it:
/// the shell's status for it.
pub(crate) const NOT_FOUND: u8 = 127;
/// ZooKeeper or the `wazoo serve` daemon could not be reached, or the connection to it was lost
/// before the outcome was known (`EX_UNAVAILABLE`).
pub(crate) const UNAVAILABLE: u8 = 69;
/// Anything else that failed: ZooKeeper or the daemon refused (not authorised, an unknown token,
/// a quota or limit), a recipe trapped or is missing, a local I/O error (`EX_SOFTWARE`).
pub(crate) const FAILED: u8 = 70;

/// An error that carries the exit status it ends `wazoo` with.
#[derive(Debug)]
pub(crate) struct Exit {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// A usage error: exit status 2.
pub(crate) fn usage(message: impl fmt::Display) -> anyhow::Error {
    Exit { code: USAGE, message: message.to_string() }.into()
}

/// ZooKeeper or the daemon is out of reach: exit status 69.
pub(crate) fn unavailable(message: impl fmt::Display) -> anyhow::Error {
    Exit { code: UNAVAILABLE, message: message.to_string() }.into()
}

/// The one table of the exit status of a failed call, by what went wrong (`kind`): the same
/// on the local path (a ZooKeeper error, as [`zk_kind`] names it) and through a daemon (the kind
/// its status carries). A definite no about what is on the server (no such node, the name is
/// taken, not at that version, a recipe's refusal of the arguments for what it found) is 1, a
/// malformed path 2, a lost connection 69, the rest 70.
pub(crate) fn kind_code(kind: ErrorKind) -> u8 {
    use ErrorKind as K;
    match kind {
        K::NoNode | K::NodeExists | K::BadVersion | K::NotEmpty | K::InvalidArgument => NOTHING,
        K::InvalidPath => USAGE,
        K::ConnectionLoss | K::SessionExpired => UNAVAILABLE,
        _ => FAILED,
    }
}

/// The kind of a ZooKeeper error met on the local path, as the daemon names the same error.
pub(crate) fn zk_kind(e: &ZkError) -> ErrorKind {
    use ErrorKind as K;
    match e {
        ZkError::Timeout => K::Timeout,
        ZkError::NoNode => K::NoNode,
        ZkError::NodeExists => K::NodeExists,
        ZkError::BadVersion => K::BadVersion,
        ZkError::NotEmpty => K::NotEmpty,
        ZkError::NoChildrenForEphemerals => K::NoChildrenForEphemerals,
        ZkError::InvalidPath(_) => K::InvalidPath,
        ZkError::InvalidArgument(_) => K::InvalidArgument,
        ZkError::ConnectionLoss => K::ConnectionLoss,
        ZkError::SessionExpired => K::SessionExpired,
        ZkError::NoAuth => K::NoAuth,
        ZkError::LimitExceeded(_) => K::LimitExceeded,
        ZkError::QuotaExceeded => K::QuotaExceeded,
        ZkError::Unimplemented => K::Unimplemented,
        ZkError::Other(_) => K::Other,
    }
}

/// The kind of a recipe's error on the local path: its ZooKeeper error's, or a trapped (or
/// retired) recipe's.
pub(crate) fn recipe_kind(e: &RecipeError) -> ErrorKind {
    match e {
        RecipeError::Zk(e) => zk_kind(e),
        RecipeError::Trapped(_) => ErrorKind::Trapped,
        RecipeError::Retired => ErrorKind::Retired,
    }
}

/// The exit status for an error that ended a command: the one it carries, 69 for a ZooKeeper
/// out of reach, else 70.
pub(crate) fn code_of(error: &anyhow::Error) -> u8 {
    for cause in error.chain() {
        if let Some(exit) = cause.downcast_ref::<Exit>() {
            return exit.code;
        }
        if cause.is::<wazoo_runtime::keeper::Unreachable>() {
            return UNAVAILABLE;
        }
        if let Some(e) = cause.downcast_ref::<RecipeError>() {
            return kind_code(recipe_kind(e));
        }
    }
    FAILED
}
