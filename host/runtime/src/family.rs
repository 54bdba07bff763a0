//! The claim families, each described once: the table the rest reads instead of writing the
//! family into each place.
//!
//! A [`Family`] says what a claim of it is called, how its nodes are laid out under its path
//! (which is how `holders` tells who holds, for wazoo's recipes and Curator's alike), and what a
//! command run under it is told. [`Want::family`](crate::Want::family) finds a contender's
//! family, and [`Param`] carries the one thing a claim of it names (a read/write lock's mode, a
//! candidate's id, a member's name). The CLI's messages, its environment for CMD, the claim's
//! printed form, `holders` (local, and the daemon's `Holders`) and its `--kind` all read these
//! rows; a new claim family adds one.

use crate::bindings::{Mode, World};

/// One claim family. Rows are constants, so commands can `match` on them.
#[derive(Debug, PartialEq, Eq)]
pub struct Family {
    /// The kind's name: `wazoo holders --kind`, and how its command's path is spoken of in a
    /// usage error ("invalid lock path").
    pub name: &'static str,
    /// How a usage error speaks of its path: "invalid lock path" (a read/write lock's is a lock
    /// path too).
    pub path_word: &'static str,
    /// The recipe world that serves it: a standard family's own, or `Claim` for a family
    /// served from its description alone.
    pub world: World,
    /// The recipe (plugin `NAME.wasm`) that serves it when a caller names none.
    pub recipe: &'static str,
    /// What its claims name besides the path, for a family of the `Claim` world: the node data
    /// a contender passes (`--data`). Standard families name theirs by their own options.
    pub data: Option<DataParam>,
    /// What one claim is called: "lock", "lease", "leadership", "membership".
    pub claim: &'static str,
    /// How a claim relates to its path in messages: "lock *at* /x", "lease *of* /s".
    pub at: &'static str,
    /// The context of a failure to get one: `{what}` is the claim as [`Family::what`] says it,
    /// `{path}` its path.
    pub failing: &'static str,
    /// Says whether a timed-out wait is for this: "timed out after 5s waiting for the lock at
    /// /x" (`{after}`, `{path}`).
    pub timed_out: &'static str,
    /// The same, after `--no-wait` found it taken.
    pub taken: &'static str,
    /// How its contenders' nodes are laid out under its path.
    pub nodes: Nodes,
    /// Its path's name in CMD's environment.
    pub path_env: &'static str,
    /// Its node's name in CMD's environment, and whether the claim has a fencing token
    /// (`WAZOO_FENCING_TOKEN`); none for a family whose node is named by the claim itself.
    pub node_env: Option<&'static str>,
    /// Whether a contender's node data is the contender's name (an election's candidate id; a
    /// lock's, read/write lock's or lease's holder identity, `--id`), which says who holds when
    /// someone waits.
    pub data_names_holder: bool,
}

/// How a family's nodes are laid out under its path.
#[derive(Debug, PartialEq, Eq)]
pub enum Nodes {
    /// Ephemeral sequential children, each named `<anything><marker><10 digits>`, in one queue
    /// by sequence: a node of a marker without a mode holds if it is first (and a writer's the
    /// same); a reader's holds while no other kind of node is before it.
    Queue(&'static [Marker]),
    /// Curator's `InterProcessSemaphoreV2`: lease nodes in `leases/…<lease><seq>`, waiters
    /// queued for the mutex `locks/…<lock><seq>` (see `holders`).
    Leases { leases: &'static str, lease: &'static str, locks: &'static str, lock: &'static str },
    /// Children named by their members, who all hold: no queue to read.
    Members,
}

/// A node marker: the sequence follows it.
#[derive(Debug, PartialEq, Eq)]
pub struct Marker {
    pub text: &'static str,
    /// A read/write lock's mode of the nodes with this marker.
    pub mode: Option<Mode>,
}

/// The one thing a claim names besides its path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name in the printed claim and its JSON: `mode`, `id`, `member`.
    pub key: &'static str,
    /// Its name in CMD's environment.
    pub env: &'static str,
    pub value: String,
    /// Where [`Family::what`] says it.
    pub said: Said,
}

/// A described family's node data as its claims name it.
#[derive(Debug, PartialEq, Eq)]
pub struct DataParam {
    /// Its name in the printed claim and its JSON.
    pub key: &'static str,
    /// Its name in CMD's environment.
    pub env: &'static str,
}

/// Where a claim's parameter goes in the words for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Said {
    /// Before the claim: "read lock at /x".
    Before,
    /// After the path: "membership of /g as NAME".
    AsName,
    /// Not said.
    No,
}

/// Curator's `InterProcessMutex`: `PATH/…lock-<seq>`, the first holds.
pub const LOCK: Family = Family {
    name: "lock",
    path_word: "lock",
    world: World::Lock,
    recipe: World::Lock.default_recipe(),
    data: None,
    claim: "lock",
    at: "at",
    failing: "cannot acquire the {what}",
    timed_out: "timed out after {after} waiting for the lock at {path}",
    taken: "the lock at {path} is held by another (--no-wait)",
    nodes: Nodes::Queue(&[Marker { text: "lock-", mode: None }]),
    path_env: "WAZOO_LOCK_PATH",
    node_env: Some("WAZOO_LOCK_NODE"),
    data_names_holder: true,
};

/// Curator's `InterProcessReadWriteLock`: `PATH/…__READ__<seq>`, `PATH/…__WRIT__<seq>` (Curator
/// spells it WRIT); a writer holds if it is first, a reader if no writer is before it.
pub const RWLOCK: Family = Family {
    name: "rwlock",
    nodes: Nodes::Queue(&[
        Marker { text: "__READ__", mode: Some(Mode::Read) },
        Marker { text: "__WRIT__", mode: Some(Mode::Write) },
    ]),
    world: World::RwLock,
    recipe: World::RwLock.default_recipe(),
    ..LOCK
};

/// Curator's `InterProcessSemaphoreV2`.
pub const SEMAPHORE: Family = Family {
    name: "semaphore",
    path_word: "semaphore",
    world: World::Semaphore,
    recipe: World::Semaphore.default_recipe(),
    data: None,
    claim: "lease",
    at: "of",
    failing: "cannot take a lease of {path}",
    timed_out: "no lease of {path} free after {after}",
    taken: "no lease of {path} free (--no-wait)",
    nodes: Nodes::Leases { leases: "leases", lease: "lease-", locks: "locks", lock: "lock-" },
    path_env: "WAZOO_SEMAPHORE_PATH",
    node_env: Some("WAZOO_LEASE_NODE"),
    data_names_holder: true,
};

/// Curator's `LeaderLatch`: `PATH/…latch-<seq>`, data the candidate's id; the first leads.
pub const ELECTION: Family = Family {
    name: "election",
    path_word: "election",
    world: World::Election,
    recipe: World::Election.default_recipe(),
    data: None,
    claim: "leadership",
    at: "of",
    failing: "cannot campaign in {path}",
    timed_out: "not leading {path} after {after}",
    taken: "another leads {path} (--no-wait)",
    nodes: Nodes::Queue(&[Marker { text: "latch-", mode: None }]),
    path_env: "WAZOO_ELECTION_PATH",
    node_env: Some("WAZOO_LEADER_NODE"),
    data_names_holder: true,
};

/// A group (ZooKeeper recipes' "Group Membership"): `PATH/NAME`, ephemeral, data the member's.
pub const GROUP: Family = Family {
    name: "group",
    path_word: "group",
    world: World::Group,
    recipe: World::Group.default_recipe(),
    data: None,
    claim: "membership",
    at: "of",
    failing: "group {path}",
    timed_out: "",
    taken: "",
    nodes: Nodes::Members,
    path_env: "WAZOO_GROUP_PATH",
    node_env: None,
    data_names_holder: false,
};

/// Every claim family, in the order `holders` tries their markers.
pub static FAMILIES: &[&Family] = &[&LOCK, &RWLOCK, &SEMAPHORE, &ELECTION, &GROUP];

/// The families described by a file (`NAME.family.toml` beside the recipe), in the order they
/// were read: this process's additions to [`FAMILIES`].
static DESCRIBED: std::sync::Mutex<Vec<&'static Family>> = std::sync::Mutex::new(Vec::new());

impl Family {
    /// The family named `name`: a standard one, or one described by a file read
    /// ([`load_dir`]).
    pub fn named(name: &str) -> Option<&'static Family> {
        Family::all().into_iter().find(|f| f.name == name)
    }

    /// Every family: the standard ones, then the described ones.
    pub fn all() -> Vec<&'static Family> {
        let mut all: Vec<&'static Family> = FAMILIES.to_vec();
        all.extend(DESCRIBED.lock().unwrap().iter().copied());
        all
    }

    /// The families whose contenders queue, and so have holders and waiters to show.
    pub fn queued() -> impl Iterator<Item = &'static Family> {
        Family::all().into_iter().filter(|f| !matches!(f.nodes, Nodes::Members))
    }

    /// The family whose contenders' nodes are named like the child `name` of a claim's path:
    /// the first, standard ones before described ones, whose markers (or a semaphore's
    /// directories) it has.
    pub fn of_child(name: &str) -> Option<&'static Family> {
        Family::queued().find(|family| match &family.nodes {
            Nodes::Queue(markers) => markers.iter().any(|m| sequence(name, m.text).is_some()),
            Nodes::Leases { leases, locks, .. } => name == *leases || name == *locks,
            Nodes::Members => false,
        })
    }

    /// Whether it is served from its description alone (the `claim` world).
    pub fn is_described(&self) -> bool {
        self.world == World::Claim
    }

    /// `name` as a kind `holders` reads, or which kinds there are.
    pub fn holders_kind(name: &str) -> Result<&'static Family, String> {
        Family::queued().find(|f| f.name == name).ok_or_else(|| {
            let names: Vec<&str> = Family::queued().map(|f| f.name).collect();
            format!("unknown kind {name:?}: {}", or_list(&names))
        })
    }

    /// `template` (one of this family's messages) with the claim, its path and how long it was
    /// waited for put in.
    pub fn say(&self, template: &str, path: &str, param: Option<&Param>, after: &str) -> String {
        fill(template, &[("{what}", &self.what(path, param)), ("{path}", path), ("{after}", after)])
    }

    /// The claim in words: "lock at /x", "read lock at /x", "membership of /g as NAME".
    pub fn what(&self, path: &str, param: Option<&Param>) -> String {
        let (claim, at) = (self.claim, self.at);
        match param {
            Some(p) if p.said == Said::Before => format!("{} {claim} {at} {path}", p.value),
            Some(p) if p.said == Said::AsName => format!("{claim} {at} {path} as {}", p.value),
            _ => format!("{claim} {at} {path}"),
        }
    }
}

/// ZooKeeper's sequence suffix: `%010d`.
const SEQUENCE_DIGITS: usize = 10;

/// The sequence of a node named `<anything><marker><10 digits>`.
pub fn sequence(name: &str, marker: &str) -> Option<i64> {
    let split = name.len().checked_sub(SEQUENCE_DIGITS)?;
    let (head, digits) = (name.get(..split)?, name.get(split..)?);
    if !head.ends_with(marker) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `template` with each `{key}` of `values` put in, in one pass: a value that itself holds
/// `{path}` (a path may) is left as it is.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    'scan: while !rest.is_empty() {
        for (key, value) in values {
            if let Some(after) = rest.strip_prefix(key) {
                out.push_str(value);
                rest = after;
                continue 'scan;
            }
        }
        let c = rest.chars().next().unwrap();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A family known only by the name a daemon gave it (its description is not on this side):
/// enough to label what the daemon read. Not registered, so no command takes it.
pub fn unknown(name: &str) -> &'static Family {
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let name = leak(name.to_string());
    Box::leak(Box::new(Family {
        name,
        path_word: name,
        world: World::Claim,
        recipe: name,
        data: None,
        claim: name,
        at: "at",
        failing: "cannot take the {what}",
        timed_out: "timed out after {after} waiting for the {what}",
        taken: "the {what} is held by another (--no-wait)",
        nodes: Nodes::Queue(&[]),
        path_env: "",
        node_env: None,
        data_names_holder: false,
    }))
}

/// The node markers of recipes that are not claim families of this table (kazoo's formats, the
/// queue's items): a described family's markers must not be told apart from these either.
const RESERVED_MARKERS: &[&str] = &["__lock__", "__rlock__", "queue-"];

/// The environment names a described family's data cannot take: wazoo's own.
fn reserved_env(env: &str, upper: &str) -> bool {
    env == "WAZOO_FENCING_TOKEN"
        || env == format!("WAZOO_{upper}_PATH")
        || env == format!("WAZOO_{upper}_NODE")
        || FAMILIES.iter().any(|f| f.path_env == env || f.node_env == Some(env))
        || matches!(
            env,
            "WAZOO_LOCK_MODE" | "WAZOO_LEADER_ID" | "WAZOO_MEMBER" | "WAZOO_TERM" | "WAZOO_PARTITION"
        )
}

/// A read/write lock's mode as commands and messages say it.
pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Read => "read",
        Mode::Write => "write",
    }
}

/// `a, b, c or d`.
pub fn or_list(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.to_string(),
        None => String::new(),
    }
}

/// Reads every family description in `dir` (`NAME.family.toml`, next to the recipe
/// `NAME.wasm` that serves it) and adds those not read before: the families `wazoo claim`,
/// `holders` and the daemon's Acquire then serve. A description is parsed strictly: an unknown
/// key, a missing marker, a name of a standard family or one read before with other contents is
/// an error naming the file. A directory that does not exist describes nothing.
///
/// ```toml
/// # plugins/baton.family.toml: served by plugins/baton.wasm (wazoo:recipes/claim-recipe)
/// claim = "baton"              # what one claim is called [default: the name]
/// at = "of"                    # "baton of /x" [default: "at"]
/// markers = ["baton-"]         # its node markers, which the 10-digit sequence follows
/// data = { key = "holder", env = "WAZOO_BATON_HOLDER" }  # what --data names [default: none]
/// ```
pub fn load_dir(dir: &std::path::Path) -> Result<Vec<&'static Family>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
    };
    let mut files: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        // Hidden files (an editor's lock or swap file) are not descriptions.
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(DESCRIPTION) && !n.starts_with('.'))
        })
        .collect();
    files.sort();
    let mut loaded = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let stem = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let name = stem.strip_suffix(DESCRIPTION).unwrap_or(stem);
        let family = describe(name, &text).map_err(|e| format!("{}: {e}", file.display()))?;
        loaded.push(register(family).map_err(|e| format!("{}: {e}", file.display()))?);
    }
    Ok(loaded)
}

/// How a family description file's name ends.
pub const DESCRIPTION: &str = ".family.toml";

/// A description file's contents.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Described {
    claim: Option<String>,
    at: Option<String>,
    recipe: Option<String>,
    markers: Vec<String>,
    data: Option<DescribedData>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DescribedData {
    key: String,
    env: String,
}

/// The family `name` as `text` describes it.
fn describe(name: &str, text: &str) -> Result<Family, String> {
    let bad_name = |what: &str, n: &str| {
        let ok = !n.is_empty()
            && n.len() <= 64
            && n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && n.as_bytes()[0].is_ascii_lowercase();
        (!ok).then(|| format!("{what} {n:?}: lowercase letters, digits and '-', starting with a letter"))
    };
    if let Some(e) = bad_name("family name", name) {
        return Err(e);
    }
    let d: Described = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(0, |span| text[..span.start.min(text.len())].matches('\n').count() + 1);
        format!("line {line}: {}", e.message().trim())
    })?;
    if d.markers.is_empty() {
        return Err("markers: at least one node marker".into());
    }
    for m in &d.markers {
        if m.is_empty() || m.contains('/') || m.len() > 64 || m.chars().any(char::is_control) {
            return Err(format!(
                "markers: {m:?} is not a node marker (1 to 64 characters, no '/', no control character)"
            ));
        }
    }
    let env_name = |what: &str, e: &str| -> Result<(), String> {
        let ok = e.len() > "WAZOO_".len()
            && e.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
            && e.starts_with("WAZOO_");
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{what}: {e:?} is not an environment variable name of wazoo's (WAZOO_, then A-Z, 0-9, _)"
            ))
        }
    };
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let upper = name.to_ascii_uppercase().replace('-', "_");
    let data = match d.data {
        Some(DescribedData { key, env }) => {
            if let Some(e) = bad_name("data.key", &key) {
                return Err(e);
            }
            if matches!(key.as_str(), "path" | "node" | "token") {
                return Err(format!("data.key: {key:?} names a field every claim has"));
            }
            env_name("data.env", &env)?;
            if reserved_env(&env, &upper) {
                return Err(format!("data.env: {env} is a name wazoo gives CMD already"));
            }
            Some(DataParam { key: leak(key), env: leak(env) })
        }
        None => None,
    };
    let claim = d.claim.unwrap_or_else(|| name.to_string());
    if claim.is_empty() || claim.chars().any(|c| c.is_control() || c == '{' || c == '}') || claim.len() > 64 {
        return Err(format!("claim: {claim:?} is not a claim's name"));
    }
    let at = d.at.unwrap_or_else(|| "at".to_string());
    if !matches!(at.as_str(), "at" | "of" | "on" | "in") {
        return Err(format!("at: {at:?}: one of at, of, on, in"));
    }
    let recipe = d.recipe.unwrap_or_else(|| name.to_string());
    if let Some(e) = bad_name("recipe", &recipe) {
        return Err(e);
    }
    let markers: Vec<Marker> = d.markers.into_iter().map(|m| Marker { text: leak(m), mode: None }).collect();
    let name = leak(name.to_string());
    Ok(Family {
        name,
        path_word: name,
        world: World::Claim,
        recipe: leak(recipe),
        data_names_holder: data.is_some(),
        data,
        failing: "cannot take the {what}",
        timed_out: "timed out after {after} waiting for the {what}",
        taken: "the {what} is held by another (--no-wait)",
        claim: leak(claim),
        at: leak(at),
        nodes: Nodes::Queue(Box::leak(markers.into_boxed_slice())),
        path_env: leak(format!("WAZOO_{upper}_PATH")),
        node_env: Some(leak(format!("WAZOO_{upper}_NODE"))),
    })
}

/// Adds `family` to the described ones; the same description read again is the same family.
fn register(family: Family) -> Result<&'static Family, String> {
    let mut described = DESCRIBED.lock().unwrap();
    if FAMILIES.iter().any(|f| f.name == family.name) {
        return Err(format!("{} is a standard family; a description cannot replace it", family.name));
    }
    if let Some(known) = described.iter().find(|f| f.name == family.name) {
        return match **known == family {
            true => Ok(known),
            false => Err(format!("family {} was described before with other contents", family.name)),
        };
    }
    let markers = |f: &Family| match &f.nodes {
        Nodes::Queue(m) => m.iter().map(|m| m.text).collect::<Vec<_>>(),
        Nodes::Leases { lease, lock, .. } => vec![*lease, *lock],
        Nodes::Members => Vec::new(),
    };
    let others = FAMILIES.iter().copied().chain(described.iter().copied()).map(|f| (f.name, markers(f)));
    let reserved = ("kazoo's or the queue's", RESERVED_MARKERS.to_vec());
    for (whose, theirs) in others.chain([reserved]) {
        for mine in markers(&family) {
            // A name is told by the marker it ends with: one ending the other cannot be told apart.
            if let Some(theirs) = theirs.iter().find(|t| t.ends_with(mine) || mine.ends_with(*t)) {
                return Err(format!("marker {mine:?} cannot be told from {theirs:?} ({whose} nodes)"));
            }
        }
    }
    let family: &'static Family = Box::leak(Box::new(family));
    described.push(family);
    Ok(family)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for f in FAMILIES {
            assert_eq!(Family::named(f.name), Some(*f));
            assert_eq!(FAMILIES.iter().filter(|g| g.name == f.name).count(), 1);
        }
        assert!(Family::holders_kind("group").unwrap_err().contains("lock, rwlock, semaphore"));
    }

    #[test]
    fn claims_are_said_with_their_parameter() {
        let mode = Param { key: "mode", env: "WAZOO_LOCK_MODE", value: "read".into(), said: Said::Before };
        assert_eq!(RWLOCK.what("/x", Some(&mode)), "read lock at /x");
        let member = Param { key: "member", env: "WAZOO_MEMBER", value: "a".into(), said: Said::AsName };
        assert_eq!(GROUP.what("/g", Some(&member)), "membership of /g as a");
        assert_eq!(SEMAPHORE.what("/s", None), "lease of /s");
    }

    #[test]
    fn descriptions_are_read_strictly() {
        let good =
            "claim = \"ticket\"\nmarkers = [\"tkt-\"]\ndata = { key = \"who\", env = \"WAZOO_WHO\" }\n";
        let family = describe("tickets", good).unwrap();
        assert_eq!(
            (family.claim, family.recipe, family.path_env),
            ("ticket", "tickets", "WAZOO_TICKETS_PATH")
        );
        assert_eq!(family.what("/t", None), "ticket at /t");
        for (text, says) in [
            ("markers = []", "at least one"),
            ("markers = [\"a/b\"]", "not a node marker"),
            ("markers = [\"x-\"]\ncolour = 1", "unknown field"),
            ("claim = \"x\"", "missing field"),
            ("markers = [\"x-\"]\ndata = { key = \"k\", env = \"lower\" }", "environment variable"),
            ("markers = [\"x\\u0001-\"]", "control character"),
            ("markers = [\"x-\"]\nat = \"under\"", "one of at"),
        ] {
            let e = describe("x", text).map(|_| ()).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
        assert!(describe("Bad_Name", "markers = [\"x-\"]").is_err());
        assert!(register(describe("lock", "markers = [\"q-\"]").unwrap()).unwrap_err().contains("standard"));
        for shadow in ["_lock-", "e-", "k__", "lease-", "__rlock__"] {
            let e = register(describe("shadow", &format!("markers = [\"{shadow}\"]")).unwrap()).unwrap_err();
            assert!(e.contains("cannot be told from"), "{shadow}: {e}");
        }
        for env in ["PATH", "WAZOO_FENCING_TOKEN", "WAZOO_X_PATH", "WAZOO_LOCK_NODE"] {
            let text = format!("markers = [\"x-\"]\ndata = {{ key = \"k\", env = \"{env}\" }}");
            assert!(describe("x", &text).is_err(), "{env}");
        }
        let text = "markers = [\"x-\"]\ndata = { key = \"token\", env = \"WAZOO_K\" }";
        assert!(describe("x", text).unwrap_err().contains("every claim has"));
        assert!(describe("x", "markers = [\"x-\"]\nclaim = \"{path}\"").is_err());
        assert!(describe("x", "markers = [\"x-\"]\nnope = 1").unwrap_err().starts_with("line 2: "));
        let first = register(describe("tkt", good).unwrap()).unwrap();
        assert!(std::ptr::eq(first, register(describe("tkt", good).unwrap()).unwrap()));
        assert!(register(describe("tkt", "markers = [\"tk2-\"]").unwrap()).is_err());
        assert_eq!(Family::named("tkt"), Some(first));
    }
}
