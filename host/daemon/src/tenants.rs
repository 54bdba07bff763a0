//! The tenants of a multi-tenant `wazoo serve` (`--tenants FILE`): who they are, how they
//! authenticate, where their namespace is, what they may load, and their limits.
//!
//! The file is JSON, or TOML when its name ends in `.toml`:
//!
//! ```json
//! {"tenants": [{
//!   "name": "alice",
//!   "token": "a-long-random-API-token-without-spaces",
//!   "zookeeper_secret": "the password of alice's ZooKeeper digest identity",
//!   "root": "/tenants/alice",
//!   "recipes": ["lock", "queue", "config", "alice-*"],
//!   "plugins": "/srv/wazoo/alice-plugins",
//!   "limits": {"memory_mib": 64, "cpu_ms": 1000, "stack_kib": 512, "instances": 200,
//!              "data_bytes": 65536, "children": 10000, "watches": 1000,
//!              "ops_per_sec": 2000, "znodes": 10000, "bytes_per_sec": 1048576,
//!              "client_sessions": 1000, "handles": 256, "session_ttl_ms": 60000},
//!   "quota": {"znodes": 20000, "bytes": 67108864}
//! }]}
//! ```
//!
//! ```toml
//! [[tenants]]
//! name = "alice"
//! token_sha256 = "…the SHA-256 of alice's API token, 64 hex digits…"
//! zookeeper_secret = "the password of alice's ZooKeeper digest identity"
//! recipes = ["lock", "alice-*"]
//! limits = { memory_mib = 64, cpu_ms = 1000 }
//! quota = { znodes = 20000 }
//! ```
//!
//! Only `name`, `zookeeper_secret`, and one of `token` or `token_sha256` are required. `token`
//! is the tenant's API token: at least 16 visible ASCII characters (0x21–0x7E, no spaces), the
//! one rule of a token that every client (the CLI, the Rust and Python clients) holds to, since
//! it travels as `authorization: Bearer TOKEN`. `token_sha256` is its SHA-256 in 64 hex digits,
//! so that the token itself need not sit in the file. `root` defaults to
//! `/tenants/NAME`, `recipes` to every component in the plugins directory, `plugins` to the
//! daemon's, and each limit to the host's default.
//!
//! `recipes` are glob patterns (`*`, `?`, `[abc]`, `{a,b}`) matched against whole recipe
//! names; a pattern that is not a valid glob is refused.
//!
//! `quota` sets ZooKeeper's own hard quota on the tenant's root (`countHardLimit`,
//! `byteHardLimit` under `/zookeeper/quota`): defence in depth behind the host's limits, which
//! servers started with `-Dzookeeper.enforceQuota=true` enforce (wazoo's own do) and others
//! only log.
//!
//! The unit tests of that strictness are about a third of this file.
//!
//! The file is read strictly, since a key that is silently ignored can widen a tenant's access
//! (a misspelt `recipes` would allow every component): an unknown key at any level, a key given
//! twice, or a value of the wrong type is an error that names the key and the tenant, and the
//! whole file is refused.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use serde::Deserialize;
use serde_json::Value;
use sha2::Digest as _;

use wazoo_runtime::{Host, HostConfig, SandboxLimits};

/// A tenant of a multi-tenant daemon: its name, the SHA-256 of its API token, and its host
/// (its own ZooKeeper session, identity, namespace, recipes and limits).
pub struct Tenant {
    pub name: String,
    pub token_sha256: [u8; 32],
    pub host: Host,
    /// What the tenant's clients may hold in the daemon, where it differs from the daemon's.
    pub clients: ClientBounds,
    /// What it may publish to its registry.
    pub publishing: crate::publishing::Publishing,
}

/// A tenant's caps on its client sessions (`limits.client_sessions`, `limits.handles`,
/// `limits.session_ttl_ms`); none: the daemon's (`serve --max-…`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClientBounds {
    /// Client sessions open at once.
    pub sessions: Option<u32>,
    /// Handles kept in one client session.
    pub handles: Option<u32>,
    /// The longest TTL granted to a client session.
    pub max_ttl: Option<Duration>,
}

/// One tenant as the file declares it. Its `Debug` does not show `zookeeper_secret`.
#[derive(Clone, PartialEq)]
pub struct TenantSpec {
    pub name: String,
    /// The SHA-256 of the tenant's API token (from `token`, or `token_sha256` as given).
    pub token_sha256: [u8; 32],
    pub zookeeper_secret: String,
    pub root: String,
    pub recipes: Option<Vec<String>>,
    pub plugins: Option<PathBuf>,
    pub limits: SandboxLimits,
    pub clients: ClientBounds,
    /// ZooKeeper hard quota on the root: nodes (the root included) and bytes; None for none.
    pub quota: Option<(Option<u64>, Option<u64>)>,
    /// The trusted-keys file and its text (a changed file is a changed tenant on SIGHUP).
    pub trusted_keys: Option<(PathBuf, String)>,
    /// The most bytes (deflated) its registry components may take.
    pub registry_bytes: u64,
}

/// A tenant's registry quota when the file gives none: ZooKeeper keeps every node in memory.
pub const REGISTRY_MIB: u64 = 32;

impl std::fmt::Debug for TenantSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantSpec")
            .field("name", &self.name)
            .field("root", &self.root)
            .field("recipes", &self.recipes)
            .field("plugins", &self.plugins)
            .field("limits", &self.limits)
            .field("clients", &self.clients)
            .field("quota", &self.quota)
            .field("trusted_keys", &self.trusted_keys.as_ref().map(|(p, _)| p))
            .field("registry_bytes", &self.registry_bytes)
            .finish_non_exhaustive()
    }
}

/// The whole file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    /// Each tenant is read on its own, so that an error can name it.
    tenants: Option<Vec<Value>>,
}

/// One tenant's table, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    token: Option<String>,
    token_sha256: Option<String>,
    zookeeper_secret: String,
    root: Option<String>,
    /// Absent: every recipe. Given, it must be a list: `null` is refused, not read as absent.
    #[serde(default, deserialize_with = "recipes_list")]
    recipes: Option<Vec<String>>,
    plugins: Option<PathBuf>,
    #[serde(default, deserialize_with = "limits_table")]
    limits: Option<Limits>,
    #[serde(default, deserialize_with = "quota_table")]
    quota: Option<Quota>,
    /// The keys whose signatures the tenant's host requires of registry components.
    trusted_keys: Option<PathBuf>,
    /// The most MiB (deflated) the tenant's registry components may take.
    registry_mib: Option<u64>,
}

/// A tenant's `limits`, as written.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Limits {
    memory_mib: Option<u64>,
    cpu_ms: Option<u64>,
    stack_kib: Option<u64>,
    instances: Option<u64>,
    data_bytes: Option<u64>,
    children: Option<u64>,
    watches: Option<u64>,
    ops_per_sec: Option<u64>,
    znodes: Option<u64>,
    bytes_per_sec: Option<u64>,
    client_sessions: Option<u64>,
    handles: Option<u64>,
    session_ttl_ms: Option<u64>,
}

/// A tenant's `quota`, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Quota {
    znodes: Option<u64>,
    bytes: Option<u64>,
}

/// `recipes`, which when present holds a list (`null` is refused), its errors prefixed by the
/// key's name.
fn recipes_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    Vec::<String>::deserialize(d).map(Some).map_err(|e| serde::de::Error::custom(format!("recipes: {e}")))
}

/// `limits`, with its errors prefixed by the table's name.
fn limits_table<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Limits>, D::Error> {
    Option::<Limits>::deserialize(d).map_err(|e| serde::de::Error::custom(format!("limits: {e}")))
}

/// `quota`, with its errors prefixed by the table's name.
fn quota_table<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Quota>, D::Error> {
    Option::<Quota>::deserialize(d).map_err(|e| serde::de::Error::custom(format!("quota: {e}")))
}

/// Reads and checks the tenants file: TOML if its name ends in `.toml`, JSON otherwise.
pub fn load(path: &Path) -> anyhow::Result<Vec<TenantSpec>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let toml = path.extension().is_some_and(|e| e == "toml");
    let specs = if toml { parse_toml(&text) } else { parse(&text) };
    specs.with_context(|| format!("in {}", path.display()))
}

/// Parses the tenants file's text, JSON.
pub fn parse(text: &str) -> anyhow::Result<Vec<TenantSpec>> {
    // A key given twice would be decided silently by the last one: refused first.
    serde_json::from_str::<DistinctKeys>(text).map_err(|e| anyhow!("not valid JSON: {e}"))?;
    let doc: Value = serde_json::from_str(text).map_err(|e| anyhow!("not valid JSON: {e}"))?;
    specs(doc)
}

/// Parses the tenants file's text, TOML (`[[tenants]]` tables).
pub fn parse_toml(text: &str) -> anyhow::Result<Vec<TenantSpec>> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        // One line: the message and where, without the excerpt TOML's own display adds.
        match e.span() {
            Some(span) => {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                anyhow!("not valid TOML: {} at line {line} column {column}", e.message().trim())
            }
            None => anyhow!("not valid TOML: {}", e.message().trim()),
        }
    })?;
    specs(json_of_toml(toml::Value::Table(table), "the document")?)
}

/// A TOML value as the JSON value it stands for. Dates and non-finite floats, which JSON has
/// not and no key of the file takes, are refused rather than turned into something else.
fn json_of_toml(value: toml::Value, at: &str) -> anyhow::Result<Value> {
    Ok(match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| anyhow!("{at}: {f} is not a finite number"))?,
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => bail!("{at}: a date ({d}) is not a value of a tenants file"),
        toml::Value::Array(items) => Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, v)| json_of_toml(v, &format!("{at}[{i}]")))
                .collect::<anyhow::Result<_>>()?,
        ),
        toml::Value::Table(table) => Value::Object(
            table
                .into_iter()
                .map(|(k, v)| {
                    let at = if at == "the document" { k.clone() } else { format!("{at}.{k}") };
                    Ok((k, json_of_toml(v, &at)?))
                })
                .collect::<anyhow::Result<_>>()?,
        ),
    })
}

/// The tenants of a parsed document, checked each on its own and against each other.
fn specs(doc: Value) -> anyhow::Result<Vec<TenantSpec>> {
    if !doc.is_object() {
        bail!("the document must be an object with a \"tenants\" array");
    }
    let doc = Document::deserialize(doc).map_err(|e| anyhow!("{e}"))?;
    let list = doc.tenants.ok_or_else(|| anyhow!("no \"tenants\" array"))?;
    let mut specs: Vec<TenantSpec> = Vec::new();
    for (i, t) in list.into_iter().enumerate() {
        let label = match t.get("name").and_then(Value::as_str) {
            Some(name) => format!("tenant {name:?}"),
            None => format!("tenant {}", i + 1),
        };
        let spec = tenant(t).with_context(|| label)?;
        if specs.iter().any(|s| s.name == spec.name) {
            bail!("tenant {:?} is declared twice", spec.name);
        }
        if let Some(other) = specs.iter().find(|s| s.token_sha256 == spec.token_sha256) {
            bail!("tenants {:?} and {:?} share a token", other.name, spec.name);
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

fn tenant(t: Value) -> anyhow::Result<TenantSpec> {
    if !t.is_object() {
        bail!("must be an object (a table)");
    }
    let entry = Entry::deserialize(t).map_err(|e| anyhow!("{e}"))?;
    let name = entry.name;
    let ok_name = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok_name {
        bail!("name {name:?}: use lowercase letters, digits, '-' and '_' (at most 64)");
    }
    let token_sha256 = match (entry.token, entry.token_sha256) {
        (Some(_), Some(_)) => bail!("give either \"token\" or \"token_sha256\", not both"),
        (None, None) => bail!("no \"token\" or \"token_sha256\""),
        (Some(token), None) => {
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                bail!("the token must be visible ASCII characters (0x21–0x7E): no spaces, no others");
            }
            if token.len() < 16 {
                bail!("the token must be at least 16 characters");
            }
            sha2::Sha256::digest(token.as_bytes()).into()
        }
        (None, Some(hex)) => sha256_hex(&hex)
            .ok_or_else(|| anyhow!("token_sha256 must be 64 hex digits (the SHA-256 of the token)"))?,
    };
    let zookeeper_secret = entry.zookeeper_secret;
    if zookeeper_secret.is_empty() || zookeeper_secret.contains(':') {
        bail!("zookeeper_secret must be non-empty and without ':'");
    }
    let root = entry.root.unwrap_or_else(|| format!("/tenants/{name}"));
    wazoo_runtime::paths::check_node(&root).map_err(|why| anyhow!("root: {why}"))?;
    for pattern in entry.recipes.iter().flatten() {
        // The runtime matches names with the same globs.
        globset::Glob::new(pattern).map_err(|e| anyhow!("recipes: {e}"))?;
    }
    let (limits, clients) = match entry.limits {
        Some(l) => {
            let clients = client_bounds(&l).context("limits")?;
            (limits(l).context("limits")?, clients)
        }
        None => (SandboxLimits::default(), ClientBounds::default()),
    };
    let quota = match entry.quota {
        None => None,
        Some(Quota { znodes, bytes }) => {
            for (key, n) in [("znodes", znodes), ("bytes", bytes)] {
                if n.is_some_and(|n| i64::try_from(n).is_err()) {
                    bail!("quota.{key} is too large (at most {})", i64::MAX);
                }
            }
            Some((znodes, bytes))
        }
    };
    let trusted_keys = match entry.trusted_keys {
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| anyhow!("trusted_keys {}: {e}", path.display()))?;
            wazoo_runtime::signing::TrustedKeys::parse(&text, &path.display().to_string())
                .map_err(|e| anyhow!("trusted_keys: {e:#}"))?;
            Some((path, text))
        }
        None => None,
    };
    let registry_bytes = match entry.registry_mib {
        Some(0) => bail!("registry_mib must be at least 1"),
        Some(mib) if mib > 1 << 20 => bail!("registry_mib is too large (at most {})", 1u64 << 20),
        Some(mib) => mib << 20,
        None => REGISTRY_MIB << 20,
    };
    Ok(TenantSpec {
        trusted_keys,
        registry_bytes,
        name,
        token_sha256,
        zookeeper_secret,
        root,
        recipes: entry.recipes,
        plugins: entry.plugins,
        limits,
        clients,
        quota,
    })
}

/// 64 hex digits as 32 bytes.
fn sha256_hex(hex: &str) -> Option<[u8; 32]> {
    let digits = hex.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(digits.chunks(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        if !pair.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

/// The caps on the tenant's client sessions from the file's limits, each checked.
fn client_bounds(l: &Limits) -> anyhow::Result<ClientBounds> {
    let count = |key: &str, n: Option<u64>| -> anyhow::Result<Option<u32>> {
        match n {
            None => Ok(None),
            Some(0) => bail!("{key} must be above 0"),
            Some(n) => {
                u32::try_from(n).map(Some).map_err(|_| anyhow!("{key} is too large (at most {})", u32::MAX))
            }
        }
    };
    let max_ttl = match l.session_ttl_ms {
        None => None,
        Some(n) if !(1_000..=3_600_000).contains(&n) => bail!("session_ttl_ms must be 1000–3600000"),
        Some(n) => Some(Duration::from_millis(n)),
    };
    Ok(ClientBounds {
        sessions: count("client_sessions", l.client_sessions)?,
        handles: count("handles", l.handles)?,
        max_ttl,
    })
}

/// The host's limits from the file's, each checked against its range.
fn limits(l: Limits) -> anyhow::Result<SandboxLimits> {
    let mut limits = SandboxLimits::default();
    let too_large = |key: &str| anyhow!("{key} is too large");
    let size = |key: &str, n: u64| usize::try_from(n).map_err(|_| too_large(key));
    let scaled =
        |key: &str, n: u64, unit: usize| size(key, n)?.checked_mul(unit).ok_or_else(|| too_large(key));
    let small = |key: &str, n: u64| {
        u32::try_from(n).map_err(|_| anyhow!("{key} is too large (at most {})", u32::MAX))
    };
    if let Some(n) = l.memory_mib {
        limits.memory_bytes = scaled("memory_mib", n, 1 << 20)?;
    }
    if let Some(n) = l.cpu_ms {
        if n > 3_600_000 {
            bail!("cpu_ms is too large (at most 3600000)");
        }
        limits.cpu_per_call = Duration::from_millis(n);
    }
    if let Some(n) = l.stack_kib {
        limits.wasm_stack_bytes = scaled("stack_kib", n, 1 << 10)?;
    }
    if let Some(n) = l.instances {
        limits.max_instances = small("instances", n)?;
    }
    if let Some(n) = l.data_bytes {
        limits.max_data_bytes = size("data_bytes", n)?.min(SandboxLimits::default().max_data_bytes);
    }
    if let Some(n) = l.children {
        limits.max_children = size("children", n)?;
    }
    if let Some(n) = l.watches {
        limits.max_watches = size("watches", n)?;
    }
    if let Some(n) = l.ops_per_sec {
        limits.ops_per_sec = small("ops_per_sec", n)?;
    }
    if let Some(n) = l.znodes {
        limits.max_znodes = n;
    }
    if let Some(n) = l.bytes_per_sec {
        limits.bytes_per_sec = n;
    }
    if limits.memory_bytes == 0 || limits.max_instances == 0 || limits.cpu_per_call.is_zero() {
        bail!("memory_mib, instances and cpu_ms must be above 0");
    }
    Ok(limits)
}

/// Checks that no object of a JSON document gives a key twice (serde_json keeps the last).
struct DistinctKeys;

impl<'de> Deserialize<'de> for DistinctKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DistinctKeys)
    }
}

impl<'de> serde::de::Visitor<'de> for DistinctKeys {
    type Value = DistinctKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_unit<E>(self) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<DistinctKeys>()?.is_some() {}
        Ok(self)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format_args!("the key {key:?} is given twice")));
            }
            map.next_value::<DistinctKeys>()?;
        }
        Ok(self)
    }
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
        set_quota(hosts, base.keeper.tls.as_ref(), &spec.root, quota)
            .await
            .with_context(|| format!("setting the ZooKeeper quota of tenant {}", spec.name))?;
    }
    let trusted = match &spec.trusted_keys {
        Some((path, text)) => Some(std::sync::Arc::new(
            wazoo_runtime::signing::TrustedKeys::parse(text, &path.display().to_string())
                .with_context(|| format!("tenant {}", spec.name))?,
        )),
        None => None,
    };
    let publishing = crate::publishing::Publishing {
        by: Some(format!("tenant {}", spec.name)),
        quota: Some(spec.registry_bytes),
        reserved: operator_recipes(base),
        trusted,
    };
    Ok(Tenant {
        name: spec.name.clone(),
        token_sha256: spec.token_sha256,
        host,
        clients: spec.clients,
        publishing,
    })
}

/// The operator's own recipes: the components in the daemon's plugins directory and those the
/// program carries. A tenant may not publish under their names.
fn operator_recipes(base: &HostConfig) -> Vec<String> {
    let mut names = Vec::new();
    for dir in std::iter::once(&base.plugins).chain(base.embedded.as_ref()) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "wasm") {
                if let Some(stem) = path.file_stem() {
                    names.push(stem.to_string_lossy().into_owned());
                }
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// Sets ZooKeeper's hard quota on `root`, which exists (what `setquota -N -B` writes): the limit
/// node, and a stats node the server fills in with the subtree's current counts.
async fn set_quota(
    hosts: &str,
    tls: Option<&wazoo_runtime::ZkTls>,
    root: &str,
    (count, bytes): (Option<u64>, Option<u64>),
) -> anyhow::Result<()> {
    use wazoo_runtime::error::describe;
    use wazoo_runtime::zk::{Access, NodeMode, Zk};
    use wazoo_runtime::ZkError;
    let client = Zk::connect_anonymous(hosts, tls).await?;
    let dir = format!("/zookeeper/quota{root}");
    match client.mkdir(&dir, Access::Open).await {
        Ok(()) | Err(ZkError::NodeExists) => {}
        Err(e) => bail!("creating {dir}: {}", describe(&e)),
    }
    // Quotas are at most i64::MAX (checked when the file is read).
    let hard = |n: Option<u64>| n.and_then(|n| i64::try_from(n).ok()).unwrap_or(-1);
    let limits = format!("count=-1,bytes=-1,countHardLimit={},byteHardLimit={}", hard(count), hard(bytes));
    let limit_node = format!("{dir}/zookeeper_limits");
    match client.create(&limit_node, limits.as_bytes(), NodeMode::Persistent, Access::Open).await {
        Ok(_) => {}
        Err(ZkError::NodeExists) => {
            client
                .set_data(&limit_node, limits.as_bytes(), None)
                .await
                .map_err(|e| anyhow::anyhow!("setting {limit_node}: {}", describe(&e)))?;
        }
        Err(e) => bail!("creating {limit_node}: {}", describe(&e)),
    }
    let stats = format!("{dir}/zookeeper_stats");
    match client.create(&stats, b"count=0,bytes=0", NodeMode::Persistent, Access::Open).await {
        Ok(_) | Err(ZkError::NodeExists) => Ok(()),
        Err(e) => bail!("creating the quota's stats node: {}", describe(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example shipped beside the systemd unit (`dist/`) is a file the daemon accepts, and
    /// says what it seems to say.
    #[test]
    fn the_shipped_example_tenants_file_is_read_as_written() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/tenants.example.toml");
        let tenants = load(&example).expect("the example tenants file parses");
        let names: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["payments", "batch"]);
        assert_eq!(tenants[0].root, "/tenants/payments");
        assert_eq!(tenants[0].limits.max_watches, 1000);
        assert_eq!(tenants[0].clients.handles, Some(64));
        assert_eq!(tenants[1].plugins.as_deref(), Some(Path::new("/var/lib/wazoo/tenants/batch")));
        assert_eq!(tenants[1].quota, Some((Some(1000), Some(1048576))));
    }

    const GOOD: &str = r#"{"tenants": [
        {"name": "alice", "token": "0123456789abcdef-alice", "zookeeper_secret": "a",
         "recipes": ["lock", "alice-*"], "limits": {"memory_mib": 32, "ops_per_sec": 100}},
        {"name": "bob", "token": "0123456789abcdef-bob", "zookeeper_secret": "b", "root": "/teams/bob",
         "quota": {"znodes": 20}}
    ]}"#;

    /// GOOD, as TOML.
    const GOOD_TOML: &str = r#"
        [[tenants]]
        name = "alice"
        token = "0123456789abcdef-alice"
        zookeeper_secret = "a"
        recipes = ["lock", "alice-*"]
        limits = { memory_mib = 32, ops_per_sec = 100 }

        [[tenants]]
        name = "bob"
        token = "0123456789abcdef-bob"
        zookeeper_secret = "b"
        root = "/teams/bob"
        [tenants.quota]
        znodes = 20
    "#;

    /// A tenant's secrets stay out of its `Debug`.
    #[test]
    fn debug_shows_no_secret() {
        let spec = &parse(GOOD).unwrap()[0];
        let shown = format!("{spec:?}");
        assert!(shown.contains("alice") && !shown.contains("zookeeper_secret"), "{shown}");
        let keeper = wazoo_runtime::KeeperConfig {
            digest: Some("alice:the-password".into()),
            ..wazoo_runtime::KeeperConfig::default()
        };
        let shown = format!("{keeper:?}");
        assert!(shown.contains("alice:…") && !shown.contains("the-password"), "{shown}");
    }

    /// `"recipes": null` is refused: it would read as "every recipe".
    #[test]
    fn a_null_recipe_list_is_refused() {
        let text = r#"{"tenants": [{"name": "a", "token": "0123456789abcdef-a", "zookeeper_secret": "a",
                       "recipes": null}]}"#;
        assert!(error(text).contains("recipes"), "{}", error(text));
    }

    /// A tenant's caps on its client sessions are read from `limits`, checked, and absent by
    /// default.
    #[test]
    fn reads_client_bounds() {
        let with = |limits: &str| {
            format!(
                r#"{{"tenants": [{{"name": "a", "token": "0123456789abcdef-a", "zookeeper_secret": "a",
                   "limits": {limits}}}]}}"#
            )
        };
        let specs = parse(&with(r#"{"client_sessions": 5, "handles": 2, "session_ttl_ms": 2000}"#)).unwrap();
        let expected =
            ClientBounds { sessions: Some(5), handles: Some(2), max_ttl: Some(Duration::from_secs(2)) };
        assert_eq!(specs[0].clients, expected);
        assert_eq!(parse(GOOD).unwrap()[0].clients, ClientBounds::default());
        assert!(error(&with(r#"{"client_sessions": 0}"#)).contains("client_sessions must be above 0"));
        assert!(error(&with(r#"{"session_ttl_ms": 10}"#)).contains("session_ttl_ms must be 1000–3600000"));
        assert!(error(&with(r#"{"handles": 5000000000}"#)).contains("handles is too large"));
    }

    /// The error `parse` gives for `text`, with its causes on one line.
    fn error(text: &str) -> String {
        format!("{:#}", parse(text).expect_err(text))
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn reads_tenants_with_defaults() {
        let specs = parse(GOOD).unwrap();
        assert_eq!(specs[0].root, "/tenants/alice");
        assert_eq!(specs[0].limits.memory_bytes, 32 << 20);
        assert_eq!(specs[0].limits.ops_per_sec, 100);
        assert_eq!(specs[0].limits.max_watches, SandboxLimits::default().max_watches);
        assert_eq!(specs[0].recipes.as_deref(), Some(&["lock".to_string(), "alice-*".to_string()][..]));
        assert_eq!(specs[0].quota, None);
        assert_eq!(specs[1].root, "/teams/bob");
        assert!(specs[1].recipes.is_none());
        assert_eq!(specs[1].quota, Some((Some(20), None)));
    }

    #[test]
    fn refuses_bad_tenants_with_a_reason() {
        let cases = [
            (r#"{}"#, "no \"tenants\""),
            (r#"[]"#, "must be an object"),
            (r#"{"tenants": []}"#, "no tenants"),
            (r#"{"tenants": ["alice"]}"#, "tenant 1: must be an object"),
            (
                r#"{"tenants": [{"name": "Alice", "token": "0123456789abcdef", "zookeeper_secret": "a"}]}"#,
                "lowercase",
            ),
            (r#"{"tenants": [{"name": "a", "token": "short", "zookeeper_secret": "a"}]}"#, "16 characters"),
            (
                r#"{"tenants": [{"name": "a", "token": "a token with spaces", "zookeeper_secret": "a"}]}"#,
                "tenant \"a\": the token must be visible ASCII characters (0x21–0x7E): no spaces",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a:b"}]}"#,
                "without ':'",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef"}]}"#,
                "missing field `zookeeper_secret`",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a", "root": "/x/../y"}]}"#,
                "relative",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a", "recipes": "lock"}]}"#,
                "tenant \"a\": recipes: invalid type: string \"lock\", expected a sequence",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a", "limits": {"cpu_ms": -1}}]}"#,
                "tenant \"a\": limits: invalid value: integer `-1`",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a", "limits": {"cpu_ms": 3600001}}]}"#,
                "tenant \"a\": limits: cpu_ms is too large",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a", "limits": {"instances": 0}}]}"#,
                "above 0",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a", "limits": {"ops_per_sec": 4294967296}}]}"#,
                "ops_per_sec is too large",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a", "quota": {"bytes": 9223372036854775808}}]}"#,
                "tenant \"a\": quota.bytes is too large",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a", "root": "/t"},
                               {"name": "b", "token": "0123456789abcdeg", "zookeeper_secret": "b", "root": "/t/b"}]}"#,
                "overlap",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a"},
                               {"name": "a", "token": "0123456789abcdeg", "zookeeper_secret": "b"}]}"#,
                "declared twice",
            ),
            (
                r#"{"tenants": [{"name": "a", "token": "0123456789abcdef", "zookeeper_secret": "a"},
                               {"name": "b", "token": "0123456789abcdef", "zookeeper_secret": "b"}]}"#,
                "share a token",
            ),
        ];
        for (text, why) in cases {
            let err = error(text);
            assert!(err.contains(why), "{text}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
    }

    #[test]
    fn refuses_an_unknown_top_level_key() {
        let misspelt = GOOD.replacen("\"tenants\"", "\"tenant\"", 1);
        assert!(
            error(&misspelt).contains("unknown field `tenant`, expected `tenants`"),
            "{}",
            error(&misspelt)
        );
        let extra = GOOD.replacen('{', "{\"version\": 2, ", 1);
        assert!(error(&extra).contains("unknown field `version`"), "{}", error(&extra));
    }

    #[test]
    fn refuses_a_misspelt_recipes_key_naming_the_tenant() {
        // The issue this strictness answers: `recipe` used to switch the allow-list off.
        let text = GOOD.replacen("\"recipes\"", "\"recipe\"", 1);
        let err = error(&text);
        assert!(err.starts_with("tenant \"alice\": unknown field `recipe`, expected one of"), "{err}");
        assert!(err.contains("`recipes`"), "the expected keys are listed: {err}");
    }

    #[test]
    fn refuses_a_misspelt_limits_key() {
        let text = GOOD.replacen("\"limits\"", "\"limts\"", 1);
        let err = error(&text);
        assert!(err.starts_with("tenant \"alice\": unknown field `limts`"), "{err}");
    }

    #[test]
    fn refuses_unknown_keys_inside_limits_and_quota() {
        let text = GOOD.replacen("\"ops_per_sec\"", "\"ops_per_second\"", 1);
        let err = error(&text);
        assert!(err.starts_with("tenant \"alice\": limits: unknown field `ops_per_second`"), "{err}");
        let text = GOOD.replacen("{\"znodes\": 20}", "{\"znode\": 20}", 1);
        let err = error(&text);
        assert!(err.starts_with("tenant \"bob\": quota: unknown field `znode`"), "{err}");
    }

    #[test]
    fn names_a_tenant_without_a_name_by_its_position() {
        let text = GOOD.replacen("\"name\": \"bob\"", "\"nmae\": \"bob\"", 1);
        let err = error(&text);
        assert!(err.starts_with("tenant 2: unknown field `nmae`"), "{err}");
    }

    #[test]
    fn refuses_a_key_given_twice() {
        let text = GOOD.replacen(
            "\"recipes\": [\"lock\", \"alice-*\"]",
            "\"recipes\": [\"lock\"], \"recipes\": [\"*\"]",
            1,
        );
        let err = error(&text);
        assert!(err.contains("the key \"recipes\" is given twice"), "{err}");
    }

    #[test]
    fn takes_the_sha256_of_the_token_instead_of_the_token() {
        let by_token = parse(GOOD).unwrap();
        let digest = sha2::Sha256::digest(b"0123456789abcdef-alice");
        assert_eq!(by_token[0].token_sha256, <[u8; 32]>::from(digest));
        for written in [hex(&digest), hex(&digest).to_uppercase()] {
            let text = GOOD.replacen(
                "\"token\": \"0123456789abcdef-alice\"",
                &format!("\"token_sha256\": \"{written}\""),
                1,
            );
            assert_eq!(parse(&text).unwrap(), by_token, "the same tenants either way");
        }
        // Another tenant's token, given by its hash, is still a shared token.
        let text = GOOD.replacen(
            "\"token\": \"0123456789abcdef-bob\"",
            &format!("\"token_sha256\": \"{}\"", hex(&digest)),
            1,
        );
        assert!(error(&text).contains("tenants \"alice\" and \"bob\" share a token"), "{}", error(&text));
    }

    /// A token is what every client sends: visible ASCII (0x21–0x7E), no space, tab, control
    /// or other character, wherever it stands; the refusal names the tenant and not the token.
    #[test]
    fn a_token_is_visible_ascii_only() {
        let with = |token: &str| {
            serde_json::json!({"tenants": [{"name": "alice", "token": token, "zookeeper_secret": "a"}]})
                .to_string()
        };
        for bad in [
            "0123456789abcdef alice",
            " 0123456789abcdef",
            "0123456789abcdef\t",
            "0123456789abcdef\u{7f}",
            "0123456789abcdef-é",
            "0123456789abcdef\u{a0}",
            "0123456789abcdef\n",
        ] {
            let err = error(&with(bad));
            assert!(
                err.starts_with("tenant \"alice\": the token must be visible ASCII characters (0x21–0x7E)"),
                "{bad:?}: {err}"
            );
            assert!(!err.contains("0123456789abcdef") && !err.contains('\n'), "{bad:?}: {err}");
        }
        for good in ["0123456789abcdef", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"] {
            assert!(parse(&with(good)).is_ok(), "{good:?}: {}", error(&with(good)));
        }
        // The TOML file is held to the same rule.
        let toml = "[[tenants]]\nname = \"alice\"\ntoken = \"0123456789 abcdef\"\nzookeeper_secret = \"a\"\n";
        let err = format!("{:#}", parse_toml(toml).unwrap_err());
        assert!(err.contains("tenant \"alice\": the token must be visible ASCII"), "{err}");
    }

    #[test]
    fn wants_exactly_one_of_token_and_token_sha256() {
        let digest = hex(&sha2::Sha256::digest(b"0123456789abcdef-alice"));
        let both = GOOD.replacen(
            "\"token\": \"0123456789abcdef-alice\"",
            &format!("\"token\": \"0123456789abcdef-alice\", \"token_sha256\": \"{digest}\""),
            1,
        );
        assert!(
            error(&both).contains("tenant \"alice\": give either \"token\" or \"token_sha256\", not both")
        );
        let neither = GOOD.replacen("\"token\": \"0123456789abcdef-alice\", ", "", 1);
        assert!(
            error(&neither).contains("tenant \"alice\": no \"token\" or \"token_sha256\""),
            "{}",
            error(&neither)
        );
        for bad in [&digest[..63], &format!("{}g", &digest[..63]), &format!("{digest}00"), "+1234567"] {
            let text = GOOD.replacen(
                "\"token\": \"0123456789abcdef-alice\"",
                &format!("\"token_sha256\": \"{bad}\""),
                1,
            );
            assert!(error(&text).contains("token_sha256 must be 64 hex digits"), "{bad}: {}", error(&text));
        }
    }

    #[test]
    fn reads_toml_as_it_reads_json() {
        assert_eq!(parse_toml(GOOD_TOML).unwrap(), parse(GOOD).unwrap());
        // The same strictness, the same errors.
        let err = format!("{:#}", parse_toml(&GOOD_TOML.replacen("recipes =", "recipe =", 1)).unwrap_err());
        assert!(err.starts_with("tenant \"alice\": unknown field `recipe`, expected one of"), "{err}");
        let err = format!("{:#}", parse_toml(&GOOD_TOML.replacen("limits =", "limts =", 1)).unwrap_err());
        assert!(err.starts_with("tenant \"alice\": unknown field `limts`"), "{err}");
        let err =
            format!("{:#}", parse_toml(&GOOD_TOML.replacen("znodes = 20", "znode = 20", 1)).unwrap_err());
        assert!(err.starts_with("tenant \"bob\": quota: unknown field `znode`"), "{err}");
        // TOML's own errors and values JSON has not: one line each.
        for (text, why) in [
            ("[[tenants]]\nname = \"a\"\nname = \"b\"\n", "line 3"),
            ("[[tenants]\n", "line 1"),
            ("[[tenants]]\nname = \"a\"\ntoken = \"0123456789abcdef\"\nzookeeper_secret = 1979-05-27\n", "a date"),
            (
                "[[tenants]]\nname = \"a\"\ntoken = \"0123456789abcdef\"\nzookeeper_secret = \"a\"\nlimits = { memory_mib = nan }\n",
                "tenants[0].limits.memory_mib: NaN is not a finite number",
            ),
        ] {
            let err = format!("{:#}", parse_toml(text).unwrap_err());
            assert!(err.contains(why), "{text}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
    }

    #[test]
    fn loads_by_the_file_name_s_extension() {
        let dir = std::env::temp_dir().join(format!("wazoo-tenants-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (json, toml) = (dir.join("tenants.json"), dir.join("tenants.toml"));
        std::fs::write(&json, GOOD).unwrap();
        std::fs::write(&toml, GOOD_TOML).unwrap();
        let from_json = load(&json).unwrap();
        assert_eq!(load(&toml).unwrap(), from_json);
        // TOML in a file not named .toml is read as JSON, and refused.
        let misnamed = dir.join("tenants.conf");
        std::fs::write(&misnamed, GOOD_TOML).unwrap();
        let err = format!("{:#}", load(&misnamed).unwrap_err());
        assert!(err.contains("tenants.conf: not valid JSON"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn checks_recipe_patterns_as_globs() {
        for good in ["*", "lock", "alice-*", "team-?", "{lock,queue}", "[ab]-lock"] {
            let text = GOOD.replacen("\"alice-*\"", &format!("{good:?}"), 1);
            assert!(parse(&text).is_ok(), "{good}: {:#}", parse(&text).unwrap_err());
        }
        for (bad, why) in [("alice-[", "unclosed character class"), ("{lock,queue", "unclosed alternate")] {
            let text = GOOD.replacen("\"alice-*\"", &format!("{bad:?}"), 1);
            let err = error(&text);
            assert!(err.starts_with("tenant \"alice\": recipes:") && err.contains(why), "{bad}: {err}");
        }
    }
}
