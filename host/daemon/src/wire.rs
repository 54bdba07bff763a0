//! The daemon's side of the wire in one place: the runtime's errors, losses and the values every
//! service shares (a claim's recipe version, the recipes listed, the health and its counters) as
//! the `wazoo.v1` ones (`host/proto/wazoo.proto`). A recipe family's own messages are converted
//! in its file under `serve/recipes/`, with its calls.
//!
//! Every error status the daemon returns is made here, with its gRPC code and its
//! [`pb::ErrorKind`] (carried as a `google.rpc.ErrorInfo` in the status details, see
//! [`pb::ErrorKind::status`]) fixed together, so a client reads the kind and never the message.
//! The messages keep their leading word (`bad-version:`, `session:` …) for the clients that still
//! read it. Every message is bounded ([`MAX_MESSAGE`]): one that embeds what a client sent or an
//! operator listed (a recipe name, a path, a tenant's patterns) never outgrows the HTTP/2 headers
//! it travels in.

use std::sync::atomic::Ordering;

use tonic::{Code, Status};
use wazoo_proto as pb;
use wazoo_runtime::error::RecipeError;
use wazoo_runtime::registry::RegistryStats;
use wazoo_runtime::SessionEnd;
use wazoo_runtime::{Claim, Lost, RecipeInfo, ZkError};

use pb::ErrorKind;

/// The longest status message, in bytes: a longer one is cut at a character and ends in `…`.
/// The message travels in the `grpc-message` header (percent-encoded, up to three bytes a byte)
/// and again in the details' `google.rpc.Status` (base64), and a client's HTTP/2 headers are at
/// most 16 KiB; 1 KiB leaves room for both.
pub const MAX_MESSAGE: usize = 1024;

/// A status of `kind` and `code` whose message is cut to [`MAX_MESSAGE`] bytes: every status
/// this module makes is made here.
fn bounded(kind: ErrorKind, code: Code, message: impl Into<String>) -> Status {
    let mut message = message.into();
    if message.len() > MAX_MESSAGE {
        let end = message.floor_char_boundary(MAX_MESSAGE - '…'.len_utf8());
        message.truncate(end);
        message.push('…');
    }
    kind.status(code, message)
}

/// A recipe error as a gRPC status (the proto's header has the table): the kind of its
/// `zk-error` case, or TRAPPED / RETIRED; the message is the error's WIT name, then what it says.
pub fn status(e: RecipeError) -> Status {
    let text = e.to_string();
    match e {
        RecipeError::Zk(z) => {
            let (kind, code, name) = zk(&z);
            bounded(kind, code, format!("{name}: {text}"))
        }
        RecipeError::Trapped(_) => bounded(ErrorKind::Trapped, Code::Internal, format!("trapped: {text}")),
        RecipeError::Retired => bounded(ErrorKind::Retired, Code::Internal, format!("trapped: {text}")),
    }
}

/// A `zk-error`'s kind, gRPC code and the word its message starts with (the WIT name, or `other`
/// for the cases that had no code of their own).
fn zk(e: &ZkError) -> (ErrorKind, Code, &'static str) {
    match e {
        ZkError::Timeout => (ErrorKind::Timeout, Code::DeadlineExceeded, "timeout"),
        ZkError::NoNode => (ErrorKind::NoNode, Code::NotFound, "no-node"),
        ZkError::NodeExists => (ErrorKind::NodeExists, Code::AlreadyExists, "node-exists"),
        ZkError::BadVersion => (ErrorKind::BadVersion, Code::FailedPrecondition, "bad-version"),
        ZkError::NotEmpty => (ErrorKind::NotEmpty, Code::FailedPrecondition, "not-empty"),
        ZkError::NoChildrenForEphemerals => (ErrorKind::NoChildrenForEphemerals, Code::Unknown, "other"),
        ZkError::InvalidPath(_) => (ErrorKind::InvalidPath, Code::InvalidArgument, "invalid-path"),
        ZkError::InvalidArgument(_) => {
            (ErrorKind::InvalidArgument, Code::InvalidArgument, "invalid-argument")
        }
        ZkError::ConnectionLoss => (ErrorKind::ConnectionLoss, Code::Unavailable, "connection-loss"),
        ZkError::SessionExpired => (ErrorKind::SessionExpired, Code::Unavailable, "session-expired"),
        ZkError::NoAuth => (ErrorKind::NoAuth, Code::PermissionDenied, "no-auth"),
        ZkError::LimitExceeded(_) => (ErrorKind::LimitExceeded, Code::ResourceExhausted, "limit-exceeded"),
        ZkError::QuotaExceeded => (ErrorKind::QuotaExceeded, Code::ResourceExhausted, "quota-exceeded"),
        ZkError::Unimplemented => (ErrorKind::Unimplemented, Code::Unknown, "other"),
        ZkError::Other(_) => (ErrorKind::Other, Code::Unknown, "other"),
    }
}

/// A handle that could not be made (no such recipe, refused component, ZooKeeper down):
/// FAILED_PRECONDITION, RECIPE_UNAVAILABLE, message `recipe:`. The host's instances all in use
/// is a passing shortage instead: RESOURCE_EXHAUSTED, LIMIT_EXCEEDED, message `limit-exceeded:`.
pub fn no_handle(e: anyhow::Error) -> Status {
    if wazoo_runtime::error::is_exhausted(&e) {
        return exhausted(format!(
            "limit-exceeded: the daemon's recipe instances are all in use (serve --max-instances, or a \
             tenant's `instances`): {e:#}"
        ));
    }
    bounded(ErrorKind::RecipeUnavailable, Code::FailedPrecondition, format!("recipe: {e:#}"))
}

/// A client session that is not open: NOT_FOUND, UNKNOWN_SESSION (the message starts `session:`).
pub fn unknown_session(message: String) -> Status {
    bounded(ErrorKind::UnknownSession, Code::NotFound, message)
}

/// A handle the session does not hold: NOT_FOUND, UNKNOWN_HANDLE (the message starts `handle:`).
pub fn unknown_handle(message: String) -> Status {
    bounded(ErrorKind::UnknownHandle, Code::NotFound, message)
}

/// A handle holding another kind of claim than the call needs: FAILED_PRECONDITION,
/// WRONG_HANDLE (the message starts `handle:`).
pub fn wrong_handle(message: String) -> Status {
    bounded(ErrorKind::WrongHandle, Code::FailedPrecondition, message)
}

/// A component the registry refuses (a check, a signature, a protocol, a quota):
/// FAILED_PRECONDITION, RECIPE_UNAVAILABLE (message `recipe:`).
pub fn refused(e: anyhow::Error) -> Status {
    let text = format!("{e:#}").split_whitespace().collect::<Vec<_>>().join(" ");
    bounded(ErrorKind::RecipeUnavailable, Code::FailedPrecondition, format!("recipe: {text}"))
}

/// A recipe the registry does not hold: NOT_FOUND, NO_NODE.
pub fn not_published(message: String) -> Status {
    bounded(ErrorKind::NoNode, Code::NotFound, message)
}

/// A request field the daemon refuses itself: INVALID_ARGUMENT, INVALID_ARGUMENT.
pub fn invalid_argument(message: impl Into<String>) -> Status {
    bounded(ErrorKind::InvalidArgument, Code::InvalidArgument, message)
}

/// No ZooKeeper session to run a call on: UNAVAILABLE, CONNECTION_LOSS (message
/// `connection-loss:`).
pub fn no_zookeeper(e: anyhow::Error) -> Status {
    bounded(ErrorKind::ConnectionLoss, Code::Unavailable, format!("connection-loss: {e:#}"))
}

/// A cap of the daemon's reached (sessions, handles): RESOURCE_EXHAUSTED, LIMIT_EXCEEDED.
pub fn exhausted(message: impl Into<String>) -> Status {
    bounded(ErrorKind::LimitExceeded, Code::ResourceExhausted, message)
}

/// A call with no known tenant token: UNAUTHENTICATED, UNAUTHENTICATED.
pub fn unauthenticated(message: impl Into<String>) -> Status {
    bounded(ErrorKind::Unauthenticated, Code::Unauthenticated, message)
}

/// The daemon failed itself: INTERNAL, INTERNAL.
pub fn internal(message: impl Into<String>) -> Status {
    bounded(ErrorKind::Internal, Code::Internal, message)
}

/// A client session another member of the group serves and that member still answers, or one
/// being adopted by a third: UNAVAILABLE, CONNECTION_LOSS (message `member:`); try again there.
pub fn elsewhere(message: impl Into<String>) -> Status {
    bounded(ErrorKind::ConnectionLoss, Code::Unavailable, message)
}

/// The event a claim's loss sends on its Lost stream: the typed reason, and the words older
/// clients read (`session-expired` for any end of the session, closed included).
pub fn lost_event(why: &Lost) -> pb::LostEvent {
    let (loss_reason, reason) = match why {
        Lost::Session(SessionEnd::Closed) => (pb::LossReason::SessionClosed, "session-expired"),
        Lost::Session(_) => (pb::LossReason::SessionExpired, "session-expired"),
        Lost::NodeDeleted => (pb::LossReason::NodeDeleted, "node-deleted"),
        Lost::Revoked => (pb::LossReason::Revoked, "revoked"),
        Lost::CutOff(_) => (pb::LossReason::CutOff, "cut-off"),
    };
    pb::LostEvent { reason: reason.to_string(), loss_reason: loss_reason as i32 }
}

/// The event a claim that ended in the daemon, not in ZooKeeper, sends on the streams that
/// follow it: its client session ended ([`pb::LossReason::ClientSessionEnded`]), the daemon or
/// the tenant stopping ([`pb::LossReason::SessionClosed`]), or a Release from another call
/// ([`pb::LossReason::Released`]); none for a reason that is no such end.
pub fn ended_event(loss_reason: pb::LossReason) -> Option<pb::LostEvent> {
    let reason = match loss_reason {
        pb::LossReason::SessionClosed => "session-expired",
        pb::LossReason::ClientSessionEnded => "client-session-ended",
        pb::LossReason::Released => "released",
        _ => return None,
    };
    Some(pb::LostEvent { reason: reason.to_string(), loss_reason: loss_reason as i32 })
}

/// The version of the recipe a claim was made with (its short hash; empty for a claim taken up
/// with Resume), as the replies carry it.
pub fn recipe_version(held: &Claim) -> String {
    held.version().map(|v| v.short_hash().to_string()).unwrap_or_default()
}

/// The recipes a host lists, as `Admin.ListRecipes` and `Admin.Reload` return them.
pub fn recipe_list(listed: Vec<RecipeInfo>) -> pb::RecipeList {
    let recipes = listed
        .into_iter()
        .map(|r| pb::Recipe {
            name: r.name,
            path: r.path.display().to_string(),
            bytes: r.bytes,
            world: r.serving.as_ref().map(|v| v.world.name().to_string()).unwrap_or_default(),
            version: r.serving.as_ref().map(|v| v.short_hash().to_string()).unwrap_or_default(),
            from_cache: r.serving.as_ref().is_some_and(|v| v.from_cache),
            refused: r.refused.map(|f| f.reason).unwrap_or_default(),
            functions: r.serving.as_ref().map(|v| v.functions()).unwrap_or_default(),
            embedded: r.embedded,
            published: r.published,
            protocol: r.serving.as_ref().and_then(|v| v.protocol.clone()).unwrap_or_default(),
        })
        .collect();
    pb::RecipeList { recipes }
}

/// `Admin.Health`'s reply: how the ZooKeeper session stands (`status`, its id), the client
/// sessions open and the handles they hold (`load`), and the registry's counters.
pub fn health_reply(
    status: String,
    zookeeper_session: i64,
    (client_sessions, handles): (u64, u64),
    stats: &RegistryStats,
) -> pb::HealthReply {
    pb::HealthReply {
        status,
        zookeeper_session,
        client_sessions,
        handles,
        compiles: stats.compiles.load(Ordering::Relaxed),
        cache_hits: stats.cache_hits.load(Ordering::Relaxed),
        swaps: stats.swaps.load(Ordering::Relaxed),
        refusals: stats.refusals.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_zk_error_keeps_its_code_and_message_and_carries_its_kind() {
        let cases = [
            (ZkError::Timeout, ErrorKind::Timeout, Code::DeadlineExceeded, "timeout: timed out"),
            (ZkError::NoNode, ErrorKind::NoNode, Code::NotFound, "no-node: node does not exist"),
            (
                ZkError::NodeExists,
                ErrorKind::NodeExists,
                Code::AlreadyExists,
                "node-exists: node already exists",
            ),
            (
                ZkError::BadVersion,
                ErrorKind::BadVersion,
                Code::FailedPrecondition,
                "bad-version: version mismatch",
            ),
            (
                ZkError::NotEmpty,
                ErrorKind::NotEmpty,
                Code::FailedPrecondition,
                "not-empty: node has children",
            ),
            (
                ZkError::NoChildrenForEphemerals,
                ErrorKind::NoChildrenForEphemerals,
                Code::Unknown,
                "other: ephemeral nodes cannot have children",
            ),
            (
                ZkError::InvalidPath("x".into()),
                ErrorKind::InvalidPath,
                Code::InvalidArgument,
                "invalid-path: invalid path: x",
            ),
            (
                ZkError::InvalidArgument("x".into()),
                ErrorKind::InvalidArgument,
                Code::InvalidArgument,
                "invalid-argument: invalid argument: x",
            ),
            (
                ZkError::ConnectionLoss,
                ErrorKind::ConnectionLoss,
                Code::Unavailable,
                "connection-loss: connection lost (outcome unknown)",
            ),
            (
                ZkError::SessionExpired,
                ErrorKind::SessionExpired,
                Code::Unavailable,
                "session-expired: ZooKeeper session expired",
            ),
            (ZkError::NoAuth, ErrorKind::NoAuth, Code::PermissionDenied, "no-auth: not authorised"),
            (
                ZkError::LimitExceeded("x".into()),
                ErrorKind::LimitExceeded,
                Code::ResourceExhausted,
                "limit-exceeded: limit exceeded: x",
            ),
            (
                ZkError::QuotaExceeded,
                ErrorKind::QuotaExceeded,
                Code::ResourceExhausted,
                "quota-exceeded: ZooKeeper quota exceeded",
            ),
            (
                ZkError::Unimplemented,
                ErrorKind::Unimplemented,
                Code::Unknown,
                "other: not supported by the server",
            ),
            (ZkError::Other("x".into()), ErrorKind::Other, Code::Unknown, "other: x"),
        ];
        for (error, kind, code, message) in cases {
            let s = status(RecipeError::Zk(error));
            assert_eq!((ErrorKind::of(&s), s.code(), s.message()), (Some(kind), code, message));
        }
        let s = status(RecipeError::Trapped("boom".into()));
        assert_eq!((ErrorKind::of(&s), s.code()), (Some(ErrorKind::Trapped), Code::Internal));
        assert!(s.message().starts_with("trapped: "), "{}", s.message());
        let s = status(RecipeError::Retired);
        assert_eq!((ErrorKind::of(&s), s.code()), (Some(ErrorKind::Retired), Code::Internal));
        assert!(s.message().starts_with("trapped: "), "{}", s.message());
    }

    /// A message that embeds what a client sent or an operator listed is cut, at a character,
    /// whatever made it; a short one is left as it is.
    #[test]
    fn every_message_is_bounded() {
        let long = "é".repeat(100_000);
        let statuses = [
            no_handle(anyhow::anyhow!("recipe {long:?} is not one this tenant may load")),
            status(RecipeError::Zk(ZkError::InvalidPath(long.clone()))),
            status(RecipeError::Trapped(long.clone())),
            invalid_argument(long.clone()),
            unknown_session(long.clone()),
            unknown_handle(long.clone()),
            wrong_handle(long.clone()),
            no_zookeeper(anyhow::anyhow!("{long}")),
            exhausted(long.clone()),
            unauthenticated(long.clone()),
            internal(long.clone()),
        ];
        for s in statuses {
            assert!(s.message().len() <= MAX_MESSAGE && s.message().ends_with('…'), "{}", s.message().len());
            assert!(ErrorKind::of(&s).is_some(), "the kind is kept");
            assert!(s.details().len() < MAX_MESSAGE + 128, "the details carry the bounded message");
        }
        let s = no_handle(anyhow::anyhow!("no such recipe"));
        assert_eq!(s.message(), "recipe: no such recipe");
    }

    #[test]
    fn a_loss_carries_its_reason_typed_and_in_words() {
        let cases = [
            (Lost::Session(SessionEnd::Expired), pb::LossReason::SessionExpired, "session-expired"),
            (Lost::Session(SessionEnd::Closed), pb::LossReason::SessionClosed, "session-expired"),
            (Lost::NodeDeleted, pb::LossReason::NodeDeleted, "node-deleted"),
            (Lost::Revoked, pb::LossReason::Revoked, "revoked"),
            (Lost::CutOff(std::time::Duration::from_secs(1)), pb::LossReason::CutOff, "cut-off"),
        ];
        for (lost, typed, words) in cases {
            let event = lost_event(&lost);
            assert_eq!((event.loss_reason(), event.reason.as_str()), (typed, words), "{lost:?}");
        }
    }
}
