//! The tenants of a multi-tenant `wazoo serve` (`--tenants FILE`): who they are, how they
//! authenticate, where their namespace is, what they may load, and their limits.
//!
//! The file is JSON:
//!
//! ```json
//! {"tenants": [{
//!   "name": "alice",
//!   "token": "a long random API token",
//!   "zookeeper_secret": "the password of alice's ZooKeeper digest identity",
//!   "root": "/tenants/alice",
//!   "recipes": ["lock", "queue", "config", "alice-*"],
//!   "plugins": "/srv/wazoo/alice-plugins",
//!   "limits": {"memory_mib": 64, "cpu_ms": 1000, "stack_kib": 512, "instances": 200,
//!              "data_bytes": 65536, "children": 10000, "watches": 1000,
//!              "ops_per_sec": 2000, "znodes": 10000, "bytes_per_sec": 1048576},
//!   "quota": {"znodes": 20000, "bytes": 67108864}
//! }]}
//! ```
//!
//! `quota` sets ZooKeeper's own hard quota on the tenant's root (`countHardLimit`,
//! `byteHardLimit` under `/zookeeper/quota`): defence in depth behind the host's limits, which
//! servers started with `-Dzookeeper.enforceQuota=true` enforce (wazoo's own do) and others
//! only log.
//!
//! Only `name`, `token` and `zookeeper_secret` are required. `root` defaults to
//! `/tenants/NAME`, `recipes` to every component in the plugins directory, `plugins` to the
//! daemon's, and each limit to the host's default.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use serde_json::Value;
use sha2::Digest as _;

use wazoo_runtime::{Host, HostConfig, SandboxLimits};

/// A tenant of a multi-tenant daemon: its name, the SHA-256 of its API token, and its host
/// (its own ZooKeeper session, identity, namespace, recipes and limits).
pub struct Tenant {
    pub name: String,
    pub token_sha256: [u8; 32],
    pub host: Host,
}

/// One tenant as the file declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantSpec {
    pub name: String,
    pub token: String,
    pub zookeeper_secret: String,
    pub root: String,
    pub recipes: Option<Vec<String>>,
    pub plugins: Option<PathBuf>,
    pub limits: SandboxLimits,
    /// ZooKeeper hard quota on the root: nodes (the root included) and bytes; None for none.
    pub quota: Option<(Option<u64>, Option<u64>)>,
}

/// Reads and checks the tenants file.
pub fn load(path: &Path) -> anyhow::Result<Vec<TenantSpec>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text).with_context(|| format!("in {}", path.display()))
}

/// Parses the tenants file's text.
pub fn parse(text: &str) -> anyhow::Result<Vec<TenantSpec>> {
    let doc: Value = serde_json::from_str(text).map_err(|e| anyhow!("not JSON: {e}"))?;
    let list = doc.get("tenants").and_then(Value::as_array).ok_or_else(|| anyhow!("no \"tenants\" array"))?;
    let mut specs: Vec<TenantSpec> = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let spec = tenant(t).with_context(|| format!("tenant {}", i + 1))?;
        if specs.iter().any(|s| s.name == spec.name) {
            bail!("tenant {:?} is declared twice", spec.name);
        }
        if specs.iter().any(|s| s.token == spec.token) {
            bail!("tenants {:?} and another share a token", spec.name);
        }
        if let Some(other) = specs.iter().find(|s| nested(&s.root, &spec.root)) {
            bail!(
                "the roots of {:?} ({}) and {:?} ({}) overlap",
                other.name,
                other.root,
                spec.name,
                spec.root
            );
        }
        specs.push(spec);
    }
    if specs.is_empty() {
        bail!("no tenants declared");
    }
    Ok(specs)
}

fn nested(a: &str, b: &str) -> bool {
    let within = |x: &str, y: &str| x == y || y.starts_with(&format!("{x}/"));
    within(a, b) || within(b, a)
}

fn tenant(t: &Value) -> anyhow::Result<TenantSpec> {
    let text = |key: &str| t.get(key).and_then(Value::as_str).map(str::to_string);
    let name = text("name").ok_or_else(|| anyhow!("no \"name\""))?;
    let ok_name = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok_name {
        bail!("name {name:?}: use lowercase letters, digits, '-' and '_' (at most 64)");
    }
    let token = text("token").ok_or_else(|| anyhow!("{name}: no \"token\""))?;
    if token.len() < 16 {
        bail!("{name}: the token must be at least 16 characters");
    }
    let zookeeper_secret =
        text("zookeeper_secret").ok_or_else(|| anyhow!("{name}: no \"zookeeper_secret\""))?;
    if zookeeper_secret.is_empty() || zookeeper_secret.contains(':') {
        bail!("{name}: zookeeper_secret must be non-empty and without ':'");
    }
    let root = text("root").unwrap_or_else(|| format!("/tenants/{name}"));
    wazoo_runtime::paths::check_node(&root).map_err(|why| anyhow!("{name}: root: {why}"))?;
    let recipes = match t.get("recipes") {
        None => None,
        Some(v) => Some(
            v.as_array()
                .ok_or_else(|| anyhow!("{name}: \"recipes\" must be an array of names"))?
                .iter()
                .map(|r| {
                    r.as_str().map(str::to_string).ok_or_else(|| anyhow!("{name}: recipe names are strings"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?,
        ),
    };
    let plugins = text("plugins").map(PathBuf::from);
    let limits = limits(&name, t.get("limits"))?;
    let quota = match t.get("quota") {
        None => None,
        Some(q) => {
            let q = q.as_object().ok_or_else(|| anyhow!("{name}: \"quota\" must be an object"))?;
            let mut quota = (None, None);
            for (key, value) in q {
                let n =
                    value.as_u64().ok_or_else(|| anyhow!("{name}: quota.{key} must be a whole number"))?;
                if i64::try_from(n).is_err() {
                    bail!("{name}: quota.{key} is too large (at most {})", i64::MAX);
                }
                match key.as_str() {
                    "znodes" => quota.0 = Some(n),
                    "bytes" => quota.1 = Some(n),
                    other => bail!("{name}: unknown quota {other:?} (znodes, bytes)"),
                }
            }
            Some(quota)
        }
    };
    Ok(TenantSpec { name, token, zookeeper_secret, root, recipes, plugins, limits, quota })
}

fn limits(name: &str, v: Option<&Value>) -> anyhow::Result<SandboxLimits> {
    let mut limits = SandboxLimits::default();
    let Some(v) = v else { return Ok(limits) };
    let object = v.as_object().ok_or_else(|| anyhow!("{name}: \"limits\" must be an object"))?;
    for (key, value) in object {
        let n = value.as_u64().ok_or_else(|| anyhow!("{name}: limits.{key} must be a whole number"))?;
        let too_large = || anyhow!("{name}: limits.{key} is too large");
        let n_usize = usize::try_from(n).map_err(|_| too_large())?;
        match key.as_str() {
            "memory_mib" => limits.memory_bytes = n_usize.checked_mul(1 << 20).ok_or_else(too_large)?,
            "cpu_ms" if n > 3_600_000 => return Err(too_large()),
            "cpu_ms" => limits.cpu_per_call = Duration::from_millis(n),
            "stack_kib" => limits.wasm_stack_bytes = n_usize.checked_mul(1 << 10).ok_or_else(too_large)?,
            "instances" => limits.max_instances = u32::try_from(n)?,
            "data_bytes" => limits.max_data_bytes = n_usize.min(SandboxLimits::default().max_data_bytes),
            "children" => limits.max_children = n_usize,
            "watches" => limits.max_watches = n_usize,
            "ops_per_sec" => limits.ops_per_sec = u32::try_from(n)?,
            "znodes" => limits.max_znodes = n,
            "bytes_per_sec" => limits.bytes_per_sec = n,
            other => bail!("{name}: unknown limit {other:?}"),
        }
    }
    if limits.memory_bytes == 0 || limits.max_instances == 0 || limits.cpu_per_call.is_zero() {
        bail!("{name}: memory_mib, instances and cpu_ms must be above 0");
    }
    Ok(limits)
}

/// Starts `spec`'s host on `base`'s ZooKeeper (its hosts; any chroot of `base` is replaced by
/// the tenant's root), with the tenant's digest identity, recipes and limits.
pub async fn start(spec: &TenantSpec, base: &HostConfig) -> anyhow::Result<Tenant> {
    let (hosts, _) = wazoo_runtime::keeper::split_chroot(&base.keeper.zookeeper);

    let mut config = base.clone();
    config.keeper.zookeeper = format!("{hosts}{}", spec.root);
    config.keeper.digest = Some(format!("{}:{}", spec.name, spec.zookeeper_secret));
    config.limits = spec.limits.clone();
    config.allowed = spec.recipes.clone();
    if let Some(dir) = &spec.plugins {
        config.plugins = dir.clone();
    }
    let host = Host::start(config).await.with_context(|| format!("starting tenant {}", spec.name))?;
    // After the host has made the root (with the tenant's ACL), the quota on it.
    if let Some(quota) = spec.quota {
        set_quota(hosts, &spec.root, quota)
            .await
            .with_context(|| format!("setting the ZooKeeper quota of tenant {}", spec.name))?;
    }
    Ok(Tenant {
        name: spec.name.clone(),
        token_sha256: sha2::Sha256::digest(spec.token.as_bytes()).into(),
        host,
    })
}

/// Sets ZooKeeper's hard quota on `root`, which exists (what `setquota -N -B` writes): the limit
/// node, and a stats node the server fills in with the subtree's current counts.
async fn set_quota(
    hosts: &str,
    root: &str,
    (count, bytes): (Option<u64>, Option<u64>),
) -> anyhow::Result<()> {
    use zookeeper_client::{Acls, Client, CreateMode, Error};
    let client = Client::connect(hosts).await.with_context(|| format!("connecting to {hosts}"))?;
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let dir = format!("/zookeeper/quota{root}");
    match client.mkdir(&dir, &open).await {
        Ok(()) | Err(Error::NodeExists) => {}
        Err(e) => bail!("creating {dir}: {e}"),
    }
    // Quotas are at most i64::MAX (checked when the file is read).
    let hard = |n: Option<u64>| n.and_then(|n| i64::try_from(n).ok()).unwrap_or(-1);
    let limits = format!("count=-1,bytes=-1,countHardLimit={},byteHardLimit={}", hard(count), hard(bytes));
    let limit_node = format!("{dir}/zookeeper_limits");
    match client.create(&limit_node, limits.as_bytes(), &open).await {
        Ok(_) => {}
        Err(Error::NodeExists) => {
            client.set_data(&limit_node, limits.as_bytes(), None).await?;
        }
        Err(e) => bail!("creating {limit_node}: {e}"),
    }
    match client.create(&format!("{dir}/zookeeper_stats"), b"count=0,bytes=0", &open).await {
        Ok(_) | Err(Error::NodeExists) => Ok(()),
        Err(e) => bail!("creating the quota's stats node: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"tenants": [
        {"name": "alice", "token": "0123456789abcdef-alice", "zookeeper_secret": "a",
         "recipes": ["lock", "alice-*"], "limits": {"memory_mib": 32, "ops_per_sec": 100}},
        {"name": "bob", "token": "0123456789abcdef-bob", "zookeeper_secret": "b", "root": "/teams/bob"}
    ]}"#;

    #[test]
    fn reads_tenants_with_defaults() {
        let specs = parse(GOOD).unwrap();
        assert_eq!(specs[0].root, "/tenants/alice");
        assert_eq!(specs[0].limits.memory_bytes, 32 << 20);
        assert_eq!(specs[0].limits.ops_per_sec, 100);
        assert_eq!(specs[0].recipes.as_deref(), Some(&["lock".to_string(), "alice-*".to_string()][..]));
        assert_eq!(specs[1].root, "/teams/bob");
        assert!(specs[1].recipes.is_none());
    }

    #[test]
    fn refuses_bad_tenants_with_a_reason() {
        let cases = [
            (r#"{}"#, "no \"tenants\""),
            (r#"{"tenants": []}"#, "no tenants"),
            (
                r#"{"tenants": [{"name": "Alice", "token": "0123456789abcdef", "zookeeper_secret": "a"}]}"#,
                "lowercase",
            ),
            (r#"{"tenants": [{"name": "a", "token": "short", "zookeeper_secret": "a"}]}"#, "16 characters"),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a:b"}]}"#,
                "without ':'",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a", "root": "/x/../y"}]}"#,
                "relative",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a", "limits": {"cpu": 1}}]}"#,
                "unknown limit",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a", "root": "/t"},
                               {"name": "b", "token": "0123456789abcdeg", "zookeeper_secret": "b", "root": "/t/b"}]}"#,
                "overlap",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a"},
                               {"name": "b", "token": "0123456789abcdef", "zookeeper_secret": "b"}]}"#,
                "share a token",
            ),
        ];
        for (text, why) in cases {
            let err = format!("{:#}", parse(text).unwrap_err());
            assert!(err.contains(why), "{text}: {err}");
        }
    }
}
