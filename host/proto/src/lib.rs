//! The contract between `wazoo serve` and its clients: the gRPC API `wazoo.v1`
//! (`host/proto/wazoo.proto`), generated at build time with protox, so no `protoc` is needed.
//!
//! Both sides depend on this crate alone for the wire: the daemon (`wazoo-daemon`) implements
//! the servers, the client (`wazoo-client`) and the CLI use the clients. It depends on no
//! wasmtime and no ZooKeeper client.
//!
//! Errors are typed: every error status the daemon returns carries an [`ErrorKind`], as the
//! `reason` of a `google.rpc.ErrorInfo` of domain [`ERROR_DOMAIN`] in the status details (the
//! standard rich error model, written and read with `tonic-types`). [`ErrorKind::status`] makes
//! such a status and [`ErrorKind::of`] reads the kind back, so no side parses a message.

use tonic_types::{ErrorDetail, ErrorDetails, StatusExt as _};

tonic::include_proto!("wazoo.v1");

pub mod codec;

/// The encoded `FileDescriptorSet` of the API (wazoo.proto, and the google.rpc messages its
/// error details carry), for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/wazoo_descriptor.bin"));

/// The `domain` of the `google.rpc.ErrorInfo` the daemon's errors carry.
pub const ERROR_DOMAIN: &str = "wazoo.v1";

/// The claim families `Holders` reads, by the names the runtime's family table and the CLI give
/// them, and their values on the wire. The one place a kind's name meets its number.
const HOLDERS_KINDS: &[(&str, HoldersKind)] = &[
    ("lock", HoldersKind::Lock),
    ("rwlock", HoldersKind::ReadWrite),
    ("semaphore", HoldersKind::Semaphore),
    ("election", HoldersKind::Election),
];

/// The wire value of the kind named `name`: `Detect` for a name the wire has no value for (the
/// daemon then tells the kind from the nodes).
pub fn holders_kind(name: &str) -> HoldersKind {
    HOLDERS_KINDS.iter().find(|(n, _)| *n == name).map_or(HoldersKind::Detect, |(_, k)| *k)
}

/// The name of the kind `kind` is on the wire; none for `Detect`.
pub fn holders_kind_name(kind: HoldersKind) -> Option<&'static str> {
    HOLDERS_KINDS.iter().find(|(_, k)| *k == kind).map(|(n, _)| *n)
}

impl ErrorKind {
    /// A status of `code` and `message` that carries this kind: its details are a
    /// `google.rpc.Status` (the same code and message) holding one `google.rpc.ErrorInfo`
    /// with `reason` this kind's name (e.g. `ERROR_KIND_BAD_VERSION`) and `domain`
    /// [`ERROR_DOMAIN`].
    pub fn status(self, code: tonic::Code, message: impl Into<String>) -> tonic::Status {
        let details =
            ErrorDetails::with_error_info(self.as_str_name(), ERROR_DOMAIN, std::collections::HashMap::new());
        tonic::Status::with_error_details(code, message, details)
    }

    /// The kind `status` carries, read from its details (never from its message). `None` if it
    /// carries none: it did not come from the daemon's services (a broken connection, an
    /// unknown method, a daemon older than the kinds), or its kind is newer than this crate.
    pub fn of(status: &tonic::Status) -> Option<ErrorKind> {
        status
            .get_error_details_vec()
            .into_iter()
            .find_map(|detail| match detail {
                ErrorDetail::ErrorInfo(info) if info.domain == ERROR_DOMAIN => Some(info),
                _ => None,
            })
            .and_then(|info| ErrorKind::from_str_name(&info.reason))
            .filter(|kind| *kind != ErrorKind::Unspecified)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;
    use tonic::Code;

    #[test]
    fn a_kind_survives_the_trip_through_the_headers() {
        let sent = ErrorKind::BadVersion.status(Code::FailedPrecondition, "bad-version: version mismatch");
        let mut headers = tonic::metadata::MetadataMap::new().into_headers();
        sent.add_header(&mut headers).expect("a status as headers");
        let received = tonic::Status::from_header_map(&headers).expect("a status from headers");
        assert_eq!(received.code(), Code::FailedPrecondition);
        assert_eq!(received.message(), "bad-version: version mismatch");
        assert_eq!(ErrorKind::of(&received), Some(ErrorKind::BadVersion));
    }

    #[test]
    fn a_status_without_an_error_info_of_the_domain_has_no_kind() {
        assert_eq!(ErrorKind::of(&tonic::Status::not_found("bad-version: in the message only")), None);
        let details = ErrorDetails::with_error_info(
            "ERROR_KIND_BAD_VERSION",
            "example.com",
            std::collections::HashMap::new(),
        );
        let foreign = tonic::Status::with_error_details(Code::FailedPrecondition, "", details);
        assert_eq!(ErrorKind::of(&foreign), None);
        let garbage = tonic::Status::with_details(Code::Internal, "", vec![0xff, 0xff, 0xff].into());
        assert_eq!(ErrorKind::of(&garbage), None);
    }

    /// The wire format is googleapis': a client with its own copy of `google.rpc.Status` and
    /// `google.rpc.ErrorInfo` (grpcio-status, any gRPC library) reads the kind.
    #[test]
    fn the_details_are_a_google_rpc_status_with_an_error_info() {
        let sent = ErrorKind::UnknownHandle.status(Code::NotFound, "handle: 7 is not open");
        let status = tonic_types::pb::Status::decode(sent.details()).unwrap();
        assert_eq!((status.code, status.message.as_str()), (Code::NotFound as i32, "handle: 7 is not open"));
        assert_eq!(status.details[0].type_url, "type.googleapis.com/google.rpc.ErrorInfo");
        let info = tonic_types::pb::ErrorInfo::decode(status.details[0].value.as_slice()).unwrap();
        assert_eq!((info.reason.as_str(), info.domain.as_str()), ("ERROR_KIND_UNKNOWN_HANDLE", ERROR_DOMAIN));
    }
}
