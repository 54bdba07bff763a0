//! Recipes rolled out through ZooKeeper: a component is published once, checked, into the
//! registry ([`store`]), and every host that follows the registry fetches it, checks it again
//! (its digest, its signature when the host trusts keys, every check of the plugins directory
//! and a trial instantiation), and serves it, with no failed call: the new version is ready
//! before new handles are pointed at it, and handles made before keep the version they run.
//!
//! - **Which source wins.** For a name the registry holds, its version wins over a file of the
//!   plugins directory and over the program's own component.
//! - **History and rollback.** Every change of a recipe's pointer is an event of its history;
//!   a rollback makes an earlier version current again.
//! - **Canary.** A version published with a canary is served first by N hosts, each of which
//!   takes a place (an ephemeral node). It becomes current once each has served it for the
//!   time and calls asked, with no trap and no sandbox limit hit; a canary host that sees one
//!   withdraws it, with the reason in the history.
//! - **Protocol.** A component declares the wire protocol it speaks ([`crate::protocol`]). A
//!   version whose protocol differs from the one in service is refused unless the publisher
//!   says it means it; then every following host stops giving out new handles of the recipe,
//!   waits for its handles of the old version to end, reports itself drained, and serves the
//!   new version only once every following host has: no two hosts serve incompatible
//!   protocols of one recipe at once.

pub mod store;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use sha2::{Digest as _, Sha256};

use crate::host::Host;
use crate::protocol::describe;
use crate::registry::{hex, Version};
use crate::signing::{Signature, TrustedKeys};
use store::{now_ms, Refused};
pub use store::{Canary, Event, Manifest, Named, Pointer, Report, Store, ROOT};

/// A component's SHA-256 in hex: its name in the registry, and what a signature signs.
pub fn digest(component: &[u8]) -> String {
    hex(&Sha256::digest(component))
}

/// This machine's host name (for a host's name in the reports).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// A recipe name the registry accepts: 1 to 128 of `[A-Za-z0-9._-]`, not starting with `.`.
pub fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !ok {
        bail!("recipe name {name:?}: use 1 to 128 letters, digits, '.', '_' or '-', not starting with '.'");
    }
    Ok(())
}

/// A canary's terms: how many hosts serve the version first, for how long and how many calls.
#[derive(Clone, Copy, Debug)]
pub struct CanaryPlan {
    pub hosts: u32,
    pub serve_for: Duration,
    pub calls: u64,
}

/// What to publish.
pub struct Publish {
    pub name: String,
    pub component: Vec<u8>,
    /// Who publishes (shown in the history).
    pub by: String,
    pub signatures: Vec<Signature>,
    pub canary: Option<CanaryPlan>,
    /// The operator means to switch the recipe's wire protocol.
    pub new_protocol: bool,
    /// The most deflated bytes the namespace's components may take, this one included.
    pub quota: Option<u64>,
    /// Names this publisher may not take (a tenant's: the operator's own recipes).
    pub reserved: Vec<String>,
}

/// What a publish or rollback did.
#[derive(Debug)]
pub struct Published {
    pub manifest: Manifest,
    pub event: Event,
    /// What was current before.
    pub previous: Option<Named>,
}

/// Where a host keeps what it fetched from the registry: `<dir>/<sha256>/<name>.wasm`.
fn file_for(dir: &Path, sha: &str, name: &str) -> PathBuf {
    dir.join(sha).join(format!("{name}.wasm"))
}

/// Writes `bytes` to `file` whole or not at all, in a directory private to the host.
fn write_private(file: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let parent = file.parent().context("a component file has a directory")?;
    crate::registry::private_dir(parent)?;
    let tmp = file.with_extension(format!("part{}", std::process::id()));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, file).with_context(|| format!("writing {}", file.display()))?;
    Ok(())
}

/// Checks `p.component` as a host checks a plugins file (world, WIT version, imports, limits, a
/// trial instantiation), its signature against `trusted`, its protocol against the one in
/// service, then stores it and makes it current (or the canary). `dir`: where the publishing
/// host keeps components ([`Follower::dir`]).
pub async fn publish(
    host: &Host,
    store: &Store,
    dir: &Path,
    trusted: Option<&TrustedKeys>,
    p: Publish,
) -> anyhow::Result<Published> {
    check_name(&p.name)?;
    if !host.allows(&p.name) {
        bail!("recipe {:?} is not one this tenant may publish", p.name);
    }
    if p.reserved.contains(&p.name) {
        bail!("recipe {:?} is one of the operator's own: a tenant publishes under names of its own", p.name);
    }
    let sha = hex(&Sha256::digest(&p.component));
    let file = file_for(dir, &sha, &p.name);
    write_private(&file, &p.component)?;
    let checked = match host.load_file(&file).await {
        Ok(version) => match trusted.map(|keys| keys.vouch(&p.name, &sha, &p.signatures)) {
            Some(Err(why)) => Err(anyhow!("{why}")),
            _ => Ok(version),
        },
        // Said of the component, not of the host's private copy of it.
        Err(e) => {
            let text = format!("{e:#}");
            let path = file.display().to_string();
            match text.contains(&path) {
                true => Err(anyhow!("{}", text.replace(&path, &format!("recipe {}", p.name)))),
                false => Err(anyhow!("recipe {}: {text}", p.name)),
            }
        }
    };
    let version = match checked {
        Ok(version) => version,
        Err(e) => {
            // Nothing of a refused component is kept (a served copy has its own file).
            if host.registry().current(&p.name).is_none_or(|v| v.path != file) {
                let _ = std::fs::remove_file(&file);
            }
            return Err(e);
        }
    };
    let about = Manifest {
        sha256: sha.clone(),
        bytes: 0,
        stored: 0,
        chunks: 0,
        world: version.world.name().to_string(),
        protocol: version.protocol.clone(),
        signatures: p.signatures.clone(),
        publisher: p.by.clone(),
        at_ms: now_ms(),
    };
    // What this host serves for the name from its own sources, when the registry has no version.
    let local = match host.registry().published(&p.name) {
        Some(_) => None,
        None => host.loaded(&p.name).await.ok().filter(|v| v.sha256 != sha),
    };
    // Checked against what is in service before anything is stored, and again as it changes.
    let in_service = |pointer: &Pointer| -> anyhow::Result<bool> {
        let serving = match (&pointer.current, &local) {
            (Some(current), _) => Some((current.world.clone(), current.protocol.clone())),
            (None, Some(v)) => Some((v.world.name().to_string(), v.protocol.clone())),
            (None, None) => None,
        };
        let Some((world, protocol)) = serving else { return Ok(false) };
        if world != about.world {
            bail!("{} is a {world} recipe; this component implements {}", p.name, about.world);
        }
        if protocol == about.protocol {
            return Ok(false);
        }
        if p.canary.is_some() {
            bail!(
                "{} speaks {} and this version {}: a canary would serve both at once; publish without --canary",
                p.name,
                describe(protocol.as_deref()),
                describe(about.protocol.as_deref())
            );
        }
        if !p.new_protocol {
            bail!(
                "{} speaks {} and this version {}: hosts serving both on one path would grant one claim twice. \
                 Publish with --new-protocol to switch, every host draining the old version first",
                p.name,
                describe(protocol.as_deref()),
                describe(about.protocol.as_deref())
            );
        }
        Ok(true)
    };
    if let Some((pointer, _)) = store.pointer(&p.name).await? {
        in_service(&pointer)?;
    } else {
        in_service(&Pointer::default())?;
    }
    let signed_before = store.manifest(&sha).await?.map(|(m, _)| m.signatures.len());
    let manifest = store.put(&p.component, about.clone(), p.quota).await?;
    let signed_anew = signed_before.is_some_and(|n| n < manifest.signatures.len());
    loop {
        let (pointer, at) = match store.pointer(&p.name).await? {
            Some((pointer, at)) => (pointer, Some(at)),
            None => (Pointer::default(), None),
        };
        let switched = in_service(&pointer)?;
        let named = Named {
            sha256: sha.clone(),
            protocol: manifest.protocol.clone(),
            world: manifest.world.clone(),
            publisher: p.by.clone(),
            at_ms: now_ms(),
        };
        // Published again as it is (a command run twice): nothing to change, nothing to record.
        let current = pointer.current.as_ref().is_some_and(|c| c.sha256 == sha);
        if current && p.canary.is_none() && pointer.canary.is_none() && !signed_anew {
            let event = store.history_of(&p.name).await?.into_iter().rev().find(|e| e.sha256 == sha);
            if let Some(event) = event {
                return Ok(Published { manifest, event, previous: pointer.current });
            }
        }
        let mut next = pointer.clone();
        let action = match p.canary {
            Some(plan) if pointer.current.as_ref().is_some_and(|c| c.sha256 != sha) => {
                next.canary = Some(Canary {
                    version: named.clone(),
                    hosts: plan.hosts.max(1),
                    for_ms: plan.serve_for.as_millis() as u64,
                    calls: plan.calls,
                });
                "canary"
            }
            _ => {
                next.current = Some(named.clone());
                next.canary = None;
                next.switched_protocol = switched;
                "publish"
            }
        };
        let event = Event {
            action: action.into(),
            sha256: sha.clone(),
            protocol: manifest.protocol.clone(),
            by: p.by.clone(),
            at_ms: now_ms(),
            reason: None,
            id: uuid::Uuid::new_v4().to_string(),
        };
        let (_, blob_version) =
            store.manifest(&sha).await?.context("the component vanished from the registry")?;
        match store.change(&p.name, at, &next, &event, Some((&sha, blob_version))).await {
            Ok(()) => return Ok(Published { manifest, event, previous: pointer.current }),
            Err(Refused::Raced) | Err(Refused::NoBlob) => continue,
            Err(Refused::Zk(e)) => return Err(unsettled(store, &p.name, e)),
        }
    }
}

/// Makes an earlier version of `name` current again: `digest` (a prefix of at least 8 hex
/// digits), else the one current before the present one.
pub async fn rollback(
    store: &Store,
    name: &str,
    digest: Option<&str>,
    new_protocol: bool,
    by: &str,
) -> anyhow::Result<Published> {
    check_name(name)?;
    loop {
        let Some((pointer, at)) = store.pointer(name).await? else {
            bail!("the registry holds no recipe {name:?}");
        };
        let current = pointer.current.clone();
        let history = store.history_of(name).await?;
        let became: Vec<&Event> = history
            .iter()
            .filter(|e| matches!(e.action.as_str(), "publish" | "rollback" | "promote"))
            .collect();
        let sha = match digest {
            Some(d) => {
                if d.len() < 8 || !d.bytes().all(|b| b.is_ascii_hexdigit()) {
                    bail!("digest {d:?}: give at least 8 hex digits of a version's sha256 (see `wazoo recipes history {name}`)");
                }
                let d = d.to_ascii_lowercase();
                let found: HashSet<&str> =
                    history.iter().filter(|e| e.sha256.starts_with(&d)).map(|e| e.sha256.as_str()).collect();
                match found.len() {
                    0 => bail!("no version of {name} in its history has a sha256 starting {d}"),
                    1 => found.into_iter().next().unwrap_or_default().to_string(),
                    _ => bail!("several versions of {name} have a sha256 starting {d}: give more digits"),
                }
            }
            None => {
                let now = current.as_ref().map(|c| c.sha256.as_str());
                match became.iter().rev().find(|e| Some(e.sha256.as_str()) != now) {
                    Some(e) => e.sha256.clone(),
                    None => bail!("{name} has no earlier version to roll back to"),
                }
            }
        };
        let Some((manifest, blob_version)) = store.manifest(&sha).await? else {
            bail!("the registry no longer holds version {} of {name}", &sha[..12]);
        };
        if let Some(c) = &current {
            if c.sha256 == sha {
                bail!("version {} of {name} is current already", &sha[..12]);
            }
            if c.protocol != manifest.protocol && !new_protocol {
                bail!(
                    "{name} speaks {} and version {} {}: roll back with --new-protocol to switch, every host draining first",
                    describe(c.protocol.as_deref()),
                    &sha[..12],
                    describe(manifest.protocol.as_deref())
                );
            }
        }
        let named = Named {
            sha256: sha.clone(),
            protocol: manifest.protocol.clone(),
            world: manifest.world.clone(),
            publisher: by.to_string(),
            at_ms: now_ms(),
        };
        let switched = current.as_ref().is_some_and(|c| c.protocol != manifest.protocol);
        let next = Pointer { current: Some(named), canary: None, switched_protocol: switched };
        let event = Event {
            action: "rollback".into(),
            sha256: sha.clone(),
            protocol: manifest.protocol.clone(),
            by: by.to_string(),
            at_ms: now_ms(),
            reason: None,
            id: uuid::Uuid::new_v4().to_string(),
        };
        match store.change(name, Some(at), &next, &event, Some((&sha, blob_version))).await {
            Ok(()) => return Ok(Published { manifest, event, previous: current }),
            Err(Refused::Raced) | Err(Refused::NoBlob) => continue,
            Err(Refused::Zk(e)) => return Err(unsettled(store, name, e)),
        }
    }
}

/// Ends the canary of `sha` on `name`: `promote` makes it current, else it is withdrawn with
/// `reason`. Nothing happens if the pointer no longer has that canary.
async fn settle_canary(
    store: &Store,
    name: &str,
    sha: &str,
    promote: bool,
    reason: Option<String>,
    by: &str,
) -> anyhow::Result<bool> {
    loop {
        let Some((pointer, at)) = store.pointer(name).await? else { return Ok(false) };
        let Some(canary) = pointer.canary.clone().filter(|c| c.version.sha256 == sha) else {
            return Ok(false);
        };
        let mut next = pointer.clone();
        next.canary = None;
        if promote {
            next.current = Some(canary.version.clone());
            next.switched_protocol = false;
        }
        let event = Event {
            action: if promote { "promote" } else { "withdraw" }.into(),
            sha256: sha.to_string(),
            protocol: canary.version.protocol.clone(),
            by: by.to_string(),
            at_ms: now_ms(),
            reason: reason.clone(),
            id: uuid::Uuid::new_v4().to_string(),
        };
        let blob = store.manifest(sha).await?.map(|(_, v)| v);
        match store.change(name, Some(at), &next, &event, blob.map(|v| (sha, v))).await {
            Ok(()) => return Ok(true),
            Err(Refused::Raced) => continue,
            Err(Refused::NoBlob) => bail!("the canary's component vanished from the registry"),
            Err(Refused::Zk(e)) => return Err(unsettled(store, name, e)),
        }
    }
}

/// How often a canary host looks at its record.
const CANARY_TICK: Duration = Duration::from_millis(200);

/// How often another host looks for a free canary place while a canary is on trial.
const PLACE_TICK: Duration = Duration::from_secs(1);

/// A host following the registry: it serves each recipe's current version (or the canary, on a
/// canary host) and reports what it serves.
pub struct Follower {
    host: Host,
    root: String,
    id: String,
    dir: PathBuf,
    trusted: Option<Arc<TrustedKeys>>,
    followed: Mutex<HashSet<String>>,
    /// Its tasks, ended by [`Follower::stop`].
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

/// What one recipe's follower serves.
#[derive(Default)]
struct Served {
    version: Option<Arc<Version>>,
    canary: bool,
    since: Option<Instant>,
    since_ms: u64,
    /// The canary place this host holds.
    place: Option<String>,
    passed: bool,
    /// A version refused here, why, and at which version of the pointer.
    refused: Option<(String, String, i32)>,
    /// The last report written (to write only changes), and on which session.
    reported: Option<(Report, i64)>,
}

/// Why a switch did not happen.
enum Miss {
    /// The component is refused here (digest, signature, checks, world): kept until the
    /// pointer changes.
    Refused(anyhow::Error),
    /// ZooKeeper failed under it: tried again.
    Again(anyhow::Error),
}

impl Follower {
    /// A follower of the registry at `root` for `host`, reporting as `id` (a node name: no `/`),
    /// keeping fetched components in `dir` (private to the host), serving only components
    /// signed by a key of `trusted` when given.
    pub fn new(
        host: Host,
        root: &str,
        id: &str,
        dir: PathBuf,
        trusted: Option<Arc<TrustedKeys>>,
    ) -> Arc<Follower> {
        Arc::new(Follower {
            host,
            root: root.to_string(),
            id: id.replace('/', "_"),
            dir,
            trusted,
            followed: Mutex::default(),
            tasks: Mutex::default(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn trusted(&self) -> Option<&TrustedKeys> {
        self.trusted.as_deref()
    }

    /// The registry, on the host's current session.
    pub async fn store(&self) -> anyhow::Result<Store> {
        Ok(Store::new(self.host.live().await?.zk(), &self.root, self.host.access()))
    }

    /// Enters this host in the registry's hosts, brings every recipe the registry holds (that
    /// this host may load) to its registry version once, then follows the registry on a task of
    /// its own, for as long as the process runs.
    pub async fn start(self: &Arc<Self>) -> anyhow::Result<()> {
        let store = self.store().await?;
        store.join(&self.id).await?;
        for name in store.names().await? {
            if self.host.allows(&name) && check_name(&name).is_ok() {
                self.follow(name, true).await;
            }
        }
        let me = self.clone();
        let joined = store.zk().session_id();
        let task = tokio::spawn(async move { me.watch_names(joined).await });
        self.tasks.lock().unwrap().push(task.abort_handle());
        Ok(())
    }

    /// Stops following (a tenant that stops serving): what is served stays as it is.
    pub fn stop(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
        for name in self.followed.lock().unwrap().iter() {
            self.host.registry().unfollow(name);
        }
    }

    /// Follows the list of recipes (each new one gets a follower task), and keeps this host in
    /// the registry's hosts (again on a new session).
    async fn watch_names(self: Arc<Self>, mut joined: i64) {
        loop {
            let listed = match self.store().await {
                // Entered again only on a new session (`start` entered it on the first).
                Ok(store) if store.zk().session_id() != joined => match store.join(&self.id).await {
                    Ok(()) => {
                        joined = store.zk().session_id();
                        store.names_watch().await
                    }
                    Err(e) => Err(e),
                },
                Ok(store) => store.names_watch().await,
                Err(e) => Err(e),
            };
            match listed {
                Ok((names, watch)) => {
                    for name in names {
                        if self.host.allows(&name) && check_name(&name).is_ok() {
                            self.follow(name, false).await;
                        }
                    }
                    watch.changed().await;
                }
                Err(e) => {
                    tracing::warn!("following the recipe registry: {e:#}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// Starts following `name` unless it is followed already; with `first`, waits until its
    /// first look is done.
    async fn follow(self: &Arc<Self>, name: String, first: bool) {
        if !self.followed.lock().unwrap().insert(name.clone()) {
            return;
        }
        self.host.registry().follow(&name);
        let (done, looked) = tokio::sync::oneshot::channel();
        let me = self.clone();
        let task = tokio::spawn(async move { me.follow_loop(name, done).await });
        self.tasks.lock().unwrap().push(task.abort_handle());
        if first {
            let _ = looked.await;
        }
    }

    async fn follow_loop(self: Arc<Self>, name: String, done: tokio::sync::oneshot::Sender<()>) {
        let mut done = Some(done);
        let mut served = Served::default();
        loop {
            let watched = match self.store().await {
                Ok(store) => match store.pointer_watch(&name).await {
                    Ok((pointer, watch)) => {
                        let step = self.step(&store, &name, pointer, &mut served).await;
                        match &step {
                            Ok(_) => self.host.registry().confirm(&name, store.zk().session_id()),
                            Err(e) => tracing::warn!("recipe {name} from the registry: {e:#}"),
                        }
                        Some((watch, step.unwrap_or(AGAIN)))
                    }
                    Err(e) => {
                        tracing::warn!("following recipe {name}: {e:#}");
                        None
                    }
                },
                Err(e) => {
                    tracing::warn!("following recipe {name}: {e:#}");
                    None
                }
            };
            if let Some(done) = done.take() {
                let _ = done.send(());
            }
            match watched {
                Some((watch, tick)) => {
                    tokio::select! {
                        _ = watch.changed() => {}
                        () = tokio::time::sleep(tick) => {}
                    }
                }
                None => tokio::time::sleep(AGAIN).await,
            }
        }
    }

    /// One look at `name`'s pointer: switches to its version if needed, reports, and judges a
    /// canary this host serves. When to look again without a change of the pointer.
    async fn step(
        &self,
        store: &Store,
        name: &str,
        pointer: Option<(Pointer, i32)>,
        served: &mut Served,
    ) -> anyhow::Result<Duration> {
        let Some((pointer, at)) = pointer else {
            if served.version.take().is_some() {
                self.host.registry().publish(name, None);
            }
            return Ok(REPORT_TICK);
        };
        let current = pointer.current.as_ref().map(|c| c.sha256.as_str());
        let canary = pointer.canary.clone().filter(|c| Some(c.version.sha256.as_str()) != current);
        // A place for a canary that is no longer the one (promoted, withdrawn, replaced) is left.
        let stale = |place: &String| {
            canary.as_ref().is_none_or(|c| {
                !place.rsplit('/').next().is_some_and(|n| n.starts_with(&c.version.sha256[..12]))
            })
        };
        if served.place.as_ref().is_some_and(stale) {
            if let Some(place) = served.place.take() {
                store.leave_canary_place(&place).await;
            }
        }
        let mut target = pointer.current.clone().map(|c| (c, false));
        if let Some(c) = &canary {
            if served.place.is_none() {
                served.place = store.take_canary_place(name, &c.version.sha256, c.hosts, &self.id).await?;
                served.passed = false;
            }
            if served.place.is_some() {
                target = Some((c.version.clone(), true));
            }
        }
        let Some((target, is_canary)) = target else { return Ok(REPORT_TICK) };
        // A refusal of another version than the one asked for now is over (a canary withdrawn).
        if served.refused.as_ref().is_some_and(|(sha, _, _)| *sha != target.sha256) {
            served.refused = None;
        }
        let serves = served.version.as_ref().map(|v| v.sha256.as_str());
        // A refused version is tried again when the pointer changes (signed anew, say).
        let refused = served.refused.as_ref().is_some_and(|(sha, _, v)| *sha == target.sha256 && *v == at);
        if serves != Some(target.sha256.as_str()) && !refused {
            match self.switch(store, name, &target, pointer.switched_protocol, served).await {
                Ok(()) => served.refused = None,
                Err(Miss::Again(e)) => return Err(e),
                Err(Miss::Refused(e)) => {
                    let reason = format!("{e:#}");
                    tracing::warn!("recipe {name}: version {} refused: {reason}", &target.sha256[..12]);
                    served.refused = Some((target.sha256.clone(), reason.clone(), at));
                    if is_canary {
                        let why = format!("refused on host {}: {reason}", self.id);
                        settle_canary(store, name, &target.sha256, false, Some(why), &self.id).await?;
                    }
                }
            }
        }
        if served.version.as_ref().is_some_and(|v| v.sha256 == target.sha256) {
            served.canary = is_canary;
        }
        self.report(store, name, served, "serving", None).await?;
        let Some(c) = canary else { return Ok(REPORT_TICK) };
        if !served.canary {
            // A canary host that goes leaves its place: look for one again now and then.
            return Ok(PLACE_TICK);
        }
        self.judge(store, name, &c, served).await?;
        Ok(CANARY_TICK)
    }

    /// Withdraws the canary this host serves if it trapped or hit a sandbox limit; marks this
    /// host's place passed once it served long enough; promotes it once every place passed.
    async fn judge(&self, store: &Store, name: &str, c: &Canary, served: &mut Served) -> anyhow::Result<()> {
        let Some(version) = &served.version else { return Ok(()) };
        let u = &version.usage;
        let (calls, traps, limits) = (
            u.calls.load(std::sync::atomic::Ordering::Relaxed),
            u.traps.load(std::sync::atomic::Ordering::Relaxed),
            u.limit_hits.load(std::sync::atomic::Ordering::Relaxed),
        );
        if traps > 0 || limits > 0 {
            let why = format!(
                "on host {}: {traps} traps and {limits} sandbox limits hit in {calls} calls",
                self.id
            );
            tracing::warn!("recipe {name}: withdrawing canary {} {why}", &c.version.sha256[..12]);
            settle_canary(store, name, &c.version.sha256, false, Some(why), &self.id).await?;
            return Ok(());
        }
        let served_for = served.since.map_or(Duration::ZERO, |s| s.elapsed());
        if !served.passed && served_for.as_millis() as u64 >= c.for_ms && calls >= c.calls {
            if let Some(place) = &served.place {
                store.pass_canary_place(place, &self.id).await?;
                served.passed = true;
            }
        }
        if served.passed {
            let places = store.canary_places(name, &c.version.sha256).await?;
            let passed = places.iter().filter(|(_, d)| d.ends_with(b" passed")).count();
            if passed as u32 >= c.hosts {
                tracing::info!(
                    "recipe {name}: canary {} passed on {passed} hosts; making it current",
                    &c.version.sha256[..12]
                );
                settle_canary(store, name, &c.version.sha256, true, None, &self.id).await?;
            }
        }
        Ok(())
    }

    /// Writes this host's report on `name` (`state`, of `version` when given, else of what it
    /// serves), unless it says what the last one on this session said.
    async fn report(
        &self,
        store: &Store,
        name: &str,
        served: &mut Served,
        state: &str,
        version: Option<&Arc<Version>>,
    ) -> anyhow::Result<()> {
        let version = version.or(served.version.as_ref());
        let load = |f: fn(&crate::registry::Usage) -> &std::sync::atomic::AtomicU64| {
            version.map_or(0, |v| f(&v.usage).load(std::sync::atomic::Ordering::Relaxed))
        };
        let (state, reason) = match &served.refused {
            Some((sha, why, _)) if state == "serving" => {
                ("refused", Some(format!("version {}: {why}", &sha[..12])))
            }
            _ => (state, None),
        };
        let report = Report {
            host: self.id.clone(),
            state: state.into(),
            sha256: version.map(|v| v.sha256.clone()).unwrap_or_default(),
            protocol: version.and_then(|v| v.protocol.clone()),
            canary: served.canary,
            since_ms: served.since_ms,
            calls: load(|u| &u.calls),
            traps: load(|u| &u.traps),
            limit_hits: load(|u| &u.limit_hits),
            reason,
        };
        let session = store.zk().session_id();
        if served.reported.as_ref().is_some_and(|(r, s)| *r == report && *s == session) {
            return Ok(());
        }
        store.report(name, &report).await?;
        served.reported = Some((report, session));
        Ok(())
    }

    /// Fetches, checks and loads `target`, then serves it for `name`: at once, or, when the wire
    /// protocol changes, once this host's handles of the old version ended and every following
    /// host drained its own.
    async fn switch(
        &self,
        store: &Store,
        name: &str,
        target: &Named,
        switched: bool,
        served: &mut Served,
    ) -> Result<(), Miss> {
        let sha = &target.sha256;
        let file = file_for(&self.dir, sha, name);
        let fetched = if file.exists() {
            None
        } else {
            let (manifest, bytes) = store.fetch(sha).await.map_err(fetch_miss)?;
            Some((manifest, bytes))
        };
        let signatures = match &fetched {
            Some((m, _)) => m.signatures.clone(),
            None if self.trusted.is_some() => {
                let read = store.manifest(sha).await.map_err(Miss::Again)?;
                read.map(|(m, _)| m.signatures).unwrap_or_default()
            }
            None => Vec::new(),
        };
        if let Some(keys) = &self.trusted {
            keys.vouch(name, sha, &signatures).map_err(|e| Miss::Refused(anyhow!("{e}")))?;
        }
        if let Some((_, bytes)) = &fetched {
            write_private(&file, bytes).map_err(Miss::Again)?;
        }
        let version = self.host.load_file(&file).await.map_err(Miss::Refused)?;
        if version.sha256 != *sha {
            let _ = std::fs::remove_file(&file);
            return Err(Miss::Refused(anyhow!(
                "{} holds sha256 {}, not {sha}",
                file.display(),
                version.sha256
            )));
        }
        let registry = self.host.registry();
        let old = served.version.clone().or_else(|| registry.current(name));
        if let Some(old) = &old {
            if old.world != version.world {
                return Err(Miss::Refused(anyhow!(
                    "it implements {}, but {name} is a {} recipe here",
                    version.world.name(),
                    old.world.name()
                )));
            }
        }
        let changes = switched || old.as_ref().is_some_and(|o| o.protocol != version.protocol);
        if changes {
            // The gate stays closed if the drain fails: it is tried again, and until then this
            // host gives out no handle of either version.
            registry.gate(name, false);
            let kept = served.version.take();
            // What holds the old version and is not a handle: the registry, `old`, `kept`.
            let own = 2 + kept.as_ref().zip(old.as_ref()).is_some_and(|(k, o)| Arc::ptr_eq(k, o)) as usize;
            if let Err(e) = self.drain(store, name, old, own, &version, served).await {
                served.version = kept;
                return Err(Miss::Again(e));
            }
        }
        registry.publish(name, Some(file));
        registry.gate(name, true);
        served.version = Some(version);
        served.since = Some(Instant::now());
        served.since_ms = now_ms();
        tracing::info!("recipe {name}: serving version {} from the registry", &sha[..12]);
        Ok(())
    }

    /// Waits for this host's handles of `old` to end, reports itself drained, and waits until
    /// every host that follows the registry reports drained or serves `version`'s protocol.
    /// `own`: how many references to `old` are not handles.
    async fn drain(
        &self,
        store: &Store,
        name: &str,
        old: Option<Arc<Version>>,
        own: usize,
        version: &Version,
        served: &mut Served,
    ) -> anyhow::Result<()> {
        let started = Instant::now();
        if let Some(old) = old {
            self.report(store, name, served, "draining", Some(&old)).await?;
            // Any reference beyond the follower's own is a handle still running it.
            let mut said = Instant::now();
            while Arc::strong_count(&old) > own {
                // A handle let go of meanwhile may have been kept warm.
                self.host.cool();
                if said.elapsed() > Duration::from_secs(10) {
                    tracing::info!(
                        "recipe {name}: switching protocol; waiting for {} handles of version {} to end",
                        Arc::strong_count(&old) - own,
                        old.short_hash()
                    );
                    said = Instant::now();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        self.report(store, name, served, "drained", None).await?;
        loop {
            // Every member, and every report (each read with a watch on its change).
            let (members, members_watch) = store.members_watch().await?;
            let (reports, watches) = store.reports_watched(name).await?;
            let done =
                |r: &Report| r.state == "drained" || (r.state == "serving" && r.protocol == version.protocol);
            let mut waiting: Vec<String> =
                reports.iter().filter(|r| r.host != self.id && !done(r)).map(|r| r.host.clone()).collect();
            // A host that follows the registry but has not reported yet may serve the old one.
            waiting.extend(
                members.iter().filter(|m| **m != self.id && !reports.iter().any(|r| r.host == **m)).cloned(),
            );
            if waiting.is_empty() {
                break;
            }
            tracing::info!(
                "recipe {name}: switching to {}; waiting for {} to drain",
                describe(version.protocol.as_deref()),
                waiting.join(", ")
            );
            let mut changed: Vec<_> =
                watches.into_iter().chain(members_watch).map(|w| Box::pin(w.changed())).collect();
            select_all(&mut changed).await;
        }
        tracing::info!("recipe {name}: every host drained in {:?}", started.elapsed());
        Ok(())
    }
}

/// A failed fetch: the component's own fault (its digest, its bytes) refuses it; ZooKeeper's is
/// tried again.
fn fetch_miss(e: anyhow::Error) -> Miss {
    let text = format!("{e:#}");
    if text.contains("read back with sha256") || text.contains("inflat") || text.contains("holds no manifest")
    {
        Miss::Refused(e)
    } else {
        Miss::Again(e)
    }
}

/// A change of `name`'s pointer that ZooKeeper did not answer: made or not, the history says.
fn unsettled(store: &Store, name: &str, e: crate::ZkError) -> anyhow::Error {
    match e {
        crate::ZkError::SessionExpired | crate::ZkError::ConnectionLoss => anyhow!(
            "the change of {} may or may not have been made (ZooKeeper did not answer: {e:?}); \
             `wazoo recipes history {name}` tells",
            store.recipe(name)
        ),
        e => anyhow!("changing {}: {e:?}", store.recipe(name)),
    }
}

/// How long a follower waits before it tries again after a failure.
const AGAIN: Duration = Duration::from_secs(1);

/// How often a follower reports what its version did (written only when it changed).
const REPORT_TICK: Duration = Duration::from_secs(5);

/// The first of `futures` to finish.
async fn select_all<F: std::future::Future + Unpin>(futures: &mut [F]) -> F::Output {
    std::future::poll_fn(|cx| {
        for f in futures.iter_mut() {
            if let std::task::Poll::Ready(out) = std::pin::Pin::new(f).poll(cx) {
                return std::task::Poll::Ready(out);
            }
        }
        std::task::Poll::Pending
    })
    .await
}
