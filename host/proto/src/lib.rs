//! The contract between `wazoo serve` and its clients: the gRPC API `wazoo.v1`
//! (`host/proto/wazoo.proto`), generated at build time with protox, so no `protoc` is needed.
//!
//! Both sides depend on this crate alone for the wire: the daemon (`wazoo-daemon`) implements
//! the servers, the client (`wazoo-client`) and the CLI use the clients. It depends on no
//! wasmtime and no ZooKeeper client.
//!
//! Errors are typed: every error status the daemon returns carries an [`ErrorKind`], as the
//! `reason` of a `google.rpc.ErrorInfo` of domain [`ERROR_DOMAIN`] in the status details (the
//! standard rich error model, [`google::rpc`]). [`ErrorKind::status`] makes such a status and
//! [`ErrorKind::of`] reads the kind back, so no side parses a message.

use prost::Message as _;

tonic::include_proto!("wazoo.v1");

/// The two messages of the standard rich error model that carry the daemon's [`ErrorKind`]
/// (wire-identical copies of googleapis' `google.rpc.Status` and `google.rpc.ErrorInfo`).
pub mod google {
    pub mod rpc {
        tonic::include_proto!("google.rpc");
    }
}

/// The encoded `FileDescriptorSet` of the API (wazoo.proto and the google.rpc messages), for
/// gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/wazoo_descriptor.bin"));

/// The `domain` of the `google.rpc.ErrorInfo` the daemon's errors carry.
pub const ERROR_DOMAIN: &str = "wazoo.v1";

/// The type URL of a `google.rpc.ErrorInfo` packed in a `google.protobuf.Any`.
const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";

impl ErrorKind {
    /// A status of `code` and `message` that carries this kind: its details are a
    /// `google.rpc.Status` (the same code and message) holding one `google.rpc.ErrorInfo`
    /// with `reason` this kind's name (e.g. `ERROR_KIND_BAD_VERSION`) and `domain`
    /// [`ERROR_DOMAIN`].
    pub fn status(self, code: tonic::Code, message: impl Into<String>) -> tonic::Status {
        let message = message.into();
        let info = google::rpc::ErrorInfo {
            reason: self.as_str_name().to_string(),
            domain: ERROR_DOMAIN.to_string(),
            metadata: Default::default(),
        };
        let details = google::rpc::Status {
            code: code as i32,
            message: message.clone(),
            details: vec![prost_types::Any {
                type_url: ERROR_INFO_TYPE.to_string(),
                value: info.encode_to_vec(),
            }],
        };
        tonic::Status::with_details(code, message, details.encode_to_vec().into())
    }

    /// The kind `status` carries, read from its details (never from its message). `None` if it
    /// carries none: it did not come from the daemon's services (a broken connection, an
    /// unknown method, a daemon older than the kinds), or its kind is newer than this crate.
    pub fn of(status: &tonic::Status) -> Option<ErrorKind> {
        let details = google::rpc::Status::decode(status.details()).ok()?;
        details
            .details
            .iter()
            .filter(|any| any.type_url.rsplit('/').next() == Some("google.rpc.ErrorInfo"))
            .filter_map(|any| google::rpc::ErrorInfo::decode(any.value.as_slice()).ok())
            .find(|info| info.domain == ERROR_DOMAIN)
            .and_then(|info| ErrorKind::from_str_name(&info.reason))
            .filter(|kind| *kind != ErrorKind::Unspecified)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let info = google::rpc::ErrorInfo {
            reason: "ERROR_KIND_BAD_VERSION".into(),
            domain: "example.com".into(),
            metadata: Default::default(),
        };
        let details = google::rpc::Status {
            code: Code::FailedPrecondition as i32,
            message: String::new(),
            details: vec![prost_types::Any { type_url: ERROR_INFO_TYPE.into(), value: info.encode_to_vec() }],
        };
        let foreign =
            tonic::Status::with_details(Code::FailedPrecondition, "", details.encode_to_vec().into());
        assert_eq!(ErrorKind::of(&foreign), None);
        let garbage = tonic::Status::with_details(Code::Internal, "", vec![0xff, 0xff, 0xff].into());
        assert_eq!(ErrorKind::of(&garbage), None);
    }
}
