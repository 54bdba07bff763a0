//! The contract between `wazoo serve` and its clients: the gRPC API `wazoo.v1`
//! (`host/proto/wazoo.proto`), generated at build time with protox, so no `protoc` is needed.
//!
//! Both sides depend on this crate alone for the wire: the daemon (`wazoo-daemon`) implements
//! the servers, the client (`wazoo-client`) and the CLI use the clients. It depends on no
//! wasmtime and no ZooKeeper client.

tonic::include_proto!("wazoo.v1");
