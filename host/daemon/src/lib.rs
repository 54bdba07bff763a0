//! `wazoo serve`: the recipes of one host served over gRPC to many clients ([`serve`]), each
//! tenant in a namespace of its own with its own limits ([`tenants`]), measured in Prometheus
//! metrics ([`metrics`]); every error and value it turns into a `wazoo.v1` one is mapped in
//! [`wire`].
//!
//! It stands on `wazoo-runtime` (the host, its handles and registry) and `wazoo-proto` (the
//! wire); nothing below depends on it.

pub mod console;
pub mod group;
pub mod metrics;
pub mod publishing;
pub mod serve;
pub mod tenants;
pub mod wire;
