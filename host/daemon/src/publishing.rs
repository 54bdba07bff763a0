//! What a host's clients may publish to its recipe registry (`Admin.Publish`): the one host's,
//! or a tenant's ([`crate::tenants`]).

use std::sync::Arc;

/// What a state's clients may publish to its registry (`Admin.Publish`).
#[derive(Clone, Debug, Default)]
pub struct Publishing {
    /// Who the history says published (a tenant's name), instead of what the client says.
    pub by: Option<String>,
    /// The most deflated bytes the registry's components may take.
    pub quota: Option<u64>,
    /// Names it may not publish: the operator's own recipes, for a tenant.
    pub reserved: Vec<String>,
    /// The keys whose signatures its host requires of registry components.
    pub trusted: Option<Arc<wazoo_runtime::signing::TrustedKeys>>,
}
