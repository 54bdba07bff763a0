//! The registry: recipe components on disk, each validated before it serves, and swapped for a
//! new version when its file changes.
//!
//! A component becomes a [`Version`] only once it has passed every check: it is a component (not
//! too big, compiled within a time limit), it targets one of the recipe worlds, at a WIT version
//! this host accepts (same major, or same minor below 1.0), its imports are all offered by the
//! host, and its exports have the world's types. The host then instantiates it once as a trial
//! (a component that traps while starting is refused) before it [`Registry::install`]s it.
//!
//! New handles use the version serving when they are made; a handle keeps the version it was
//! made with until it ends, so the old one is dropped with its last handle. A file that fails a
//! check changes nothing: the version before keeps serving and the failure is kept, with its
//! reason, for `list` and the log. A removed file stops new handles of its recipe.
//!
//! Compiled code is cached on disk, keyed by the file's SHA-256 and the engine's settings, so a
//! restart does not compile again. The cache directory must be private to the host: what it
//! holds is native code. Compiled code is also kept in memory by the same SHA-256, for as long
//! as a version of this registry holds it: a swap compiles only the file that changed, with a
//! compile cache or without one (a file renamed or copied compiles nothing), and two loads of
//! the same bytes at once compile them once.
//!
//! Looking at every file ([`Registry::check`], what a reload does) checks what changed since it
//! last looked, and nothing else; a listing ([`Registry::listed`]) reads what was found and
//! never compiles, nor waits for a compile: a file not checked yet shows with the version that
//! still serves for it, if any, and no refusal.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, Context as _};
use sha2::{Digest, Sha256};
use wasmtime::component::{types::ComponentItem, Component, InstancePre, Linker};
use wasmtime::Engine;

pub use crate::bindings::World;
use crate::state::HostState;
pub use crate::stats::Usage;

pub use crate::versions::PACKAGES;

/// Largest component file accepted.
pub const MAX_COMPONENT_BYTES: u64 = 64 << 20;

/// A file's size and modification time: a changed stamp means a new version to check.
type Stamp = (SystemTime, u64);

/// One validated version of a recipe component.
pub struct Version {
    /// The file name without `.wasm`.
    pub name: String,
    pub path: PathBuf,
    /// SHA-256 of the file, in hex.
    pub sha256: String,
    pub world: World,
    pub bytes: u64,
    /// Whether its compiled code came from a cache, not a compile: the on-disk cache, or the
    /// compiled code of the same bytes (same SHA-256) already in memory.
    pub from_cache: bool,
    /// Time spent compiling it (zero when it came from the cache).
    pub compile_time: Duration,
    pub loaded_at: SystemTime,
    /// The wire protocol it declares ([`crate::protocol`]), if any.
    pub protocol: Option<String>,
    /// What its handles did: calls, traps and sandbox limits hit (a canary's record).
    pub usage: Arc<Usage>,
    pub(crate) pre: InstancePre<HostState>,
    stamp: Stamp,
}

impl Version {
    /// The functions this version exports, with their WIT signatures (for the generic invoke).
    pub fn functions(&self) -> Vec<String> {
        let component = self.pre.component();
        crate::dynamic::exports(component.engine(), component).iter().map(|e| e.signature()).collect()
    }
}

impl std::fmt::Debug for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Version")
            .field("name", &self.name)
            .field("sha256", &self.sha256)
            .field("world", &self.world)
            .field("from_cache", &self.from_cache)
            .finish()
    }
}

impl Version {
    /// The first 12 hex digits of the file's SHA-256: enough to tell versions apart in a list.
    pub fn short_hash(&self) -> &str {
        &self.sha256[..12]
    }
}

/// The compile worker process and its limits.
#[derive(Clone, Debug)]
struct CompileWorker {
    program: PathBuf,
    memory: u64,
    args: Vec<String>,
}

/// A file that failed a check, and why.
#[derive(Clone, Debug)]
pub struct Refusal {
    pub reason: String,
    pub at: SystemTime,
    stamp: Stamp,
}

/// What the registry knows of one component file.
#[derive(Debug)]
pub struct RecipeInfo {
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
    /// The version serving new handles, if any.
    pub serving: Option<Arc<Version>>,
    /// The last refusal of this file's current contents, if it was refused.
    pub refused: Option<Refusal>,
    /// Whether it is carried in the program's binary (no file of its name in the plugins
    /// directory overrides it).
    pub embedded: bool,
    /// Whether it came from the registry in ZooKeeper ([`crate::rollout`]), which wins over the
    /// plugins directory and the program's own for the names it holds.
    pub published: bool,
}

/// Counters for reports and metrics.
#[derive(Debug, Default)]
pub struct RegistryStats {
    /// Components compiled (not taken from the cache).
    pub compiles: AtomicU64,
    /// Components taken from the on-disk cache.
    pub cache_hits: AtomicU64,
    /// Components whose compiled code was in memory already (the same bytes under another name,
    /// or checked before): neither compiled nor read from the cache.
    pub reuses: AtomicU64,
    /// Versions installed over an earlier one.
    pub swaps: AtomicU64,
    /// Files refused.
    pub refusals: AtomicU64,
}

/// What [`Registry::lookup`] found for a file.
pub enum Lookup {
    /// Nothing changed since this version was installed.
    Serving(Arc<Version>),
    /// The file is new or changed and not checked yet: load it, then install or refuse it.
    Changed { serving: Option<Arc<Version>> },
    /// The file's current contents were refused; the version before (if any) keeps serving.
    Refused { serving: Option<Arc<Version>>, reason: String },
}

/// The recipe components of one plugins directory.
pub struct Registry {
    engine: Engine,
    linker: Linker<HostState>,
    dir: PathBuf,
    /// Where the components the program carries were written ([`crate::embedded`]): used for a
    /// recipe with no file in `dir`.
    embedded: Option<PathBuf>,
    cache: Option<PathBuf>,
    /// Milliseconds a compile may take.
    compile_limit: AtomicU64,
    worker: Mutex<Option<CompileWorker>>,
    serving: Mutex<HashMap<PathBuf, Arc<Version>>>,
    refused: Mutex<HashMap<PathBuf, Refusal>>,
    /// Recipes served from the registry in ZooKeeper: name → the fetched component's file.
    published: Mutex<HashMap<String, PathBuf>>,
    /// Recipes whose new handles wait (a switch of wire protocol drains the old version first).
    closed: Mutex<HashSet<String>>,
    /// Recipes the registry's follower follows, and the ZooKeeper session on which it last
    /// confirmed what serves them: on another session (the one before expired) new handles
    /// wait until it looked again, since a switch of protocol may have happened meanwhile.
    confirmed: Mutex<HashMap<String, Option<i64>>>,
    reopened: tokio::sync::Notify,
    stats: RegistryStats,
    /// Compiled components by the SHA-256 of their bytes, while a version holds them
    /// ([`Registry::keep_compiled`]).
    compiled: Mutex<HashMap<String, Component>>,
    /// The digests being compiled now: a second load of the same bytes waits for the first.
    compiling: Mutex<HashSet<String>>,
    compiled_now: Condvar,
    /// What [`Registry::check`] found of files no handle asked for (an embedded recipe), for
    /// their stamp: a version checked but not installed, or why it was refused.
    described: Mutex<HashMap<PathBuf, Described>>,
}

/// What [`Registry::check`] found of a file it loaded without installing it.
#[derive(Clone, Debug)]
enum Described {
    Checked(Arc<Version>),
    Refused(Refusal),
}

impl Described {
    fn stamp(&self) -> Stamp {
        match self {
            Described::Checked(v) => v.stamp,
            Described::Refused(r) => r.stamp,
        }
    }
}

/// Takes a digest off [`Registry::compiling`] when its compile ends, however it ends.
struct Compiling<'a> {
    registry: &'a Registry,
    sha256: &'a str,
}

impl Drop for Compiling<'_> {
    fn drop(&mut self) {
        self.registry.compiling.lock().unwrap().remove(self.sha256);
        self.registry.compiled_now.notify_all();
    }
}

impl Registry {
    /// A registry of the components in `dir`, compiled for `engine`, with compiled code cached
    /// in `cache` (see [`default_cache_dir`]) when given.
    pub fn new(engine: Engine, dir: PathBuf, cache: Option<PathBuf>) -> anyhow::Result<Registry> {
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        add_zk_imports(&mut linker)?;
        let cache = cache.and_then(|dir| match private_dir(&dir) {
            Ok(()) => Some(dir),
            Err(e) => {
                tracing::warn!("not caching compiled components in {}: {e:#}", dir.display());
                None
            }
        });
        Ok(Registry {
            engine,
            linker,
            dir,
            embedded: None,
            cache,
            compile_limit: AtomicU64::new(60_000),
            worker: Mutex::new(None),
            serving: Mutex::default(),
            refused: Mutex::default(),
            published: Mutex::default(),
            closed: Mutex::default(),
            confirmed: Mutex::default(),
            reopened: tokio::sync::Notify::new(),
            stats: RegistryStats::default(),
            compiled: Mutex::default(),
            compiling: Mutex::default(),
            compiled_now: Condvar::new(),
            described: Mutex::default(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where compiled code is cached, if anywhere.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache.as_deref()
    }

    /// Serves the components in `dir` (see [`crate::embedded::materialize`]) for recipes that
    /// have no file in the plugins directory.
    pub fn with_embedded(mut self, dir: Option<PathBuf>) -> Registry {
        self.embedded = dir;
        self
    }

    /// The file of recipe `name`: the one the registry in ZooKeeper published, else the one in
    /// the plugins directory, else the embedded one, if any.
    fn file_of(&self, name: &str) -> PathBuf {
        if let Some(published) = self.published.lock().unwrap().get(name) {
            return published.clone();
        }
        let file = self.dir.join(format!("{name}.wasm"));
        match &self.embedded {
            Some(embedded) if !file.exists() => {
                let carried = embedded.join(format!("{name}.wasm"));
                if carried.exists() {
                    carried
                } else {
                    file
                }
            }
            _ => file,
        }
    }

    /// Serves `file` (a component fetched from the registry in ZooKeeper, loaded and installed
    /// already) for new handles of recipe `name`; `None` goes back to the plugins directory.
    pub fn publish(&self, name: &str, file: Option<PathBuf>) {
        let mut published = self.published.lock().unwrap();
        match file {
            Some(file) => published.insert(name.to_string(), file),
            None => published.remove(name),
        };
    }

    /// The file the registry in ZooKeeper serves for `name`, if it serves one.
    pub fn published(&self, name: &str) -> Option<PathBuf> {
        self.published.lock().unwrap().get(name).cloned()
    }

    /// Makes new handles of recipe `name` wait (`open` false) until it is opened again.
    pub fn gate(&self, name: &str, open: bool) {
        let mut closed = self.closed.lock().unwrap();
        if open {
            closed.remove(name);
            self.reopened.notify_waiters();
        } else {
            closed.insert(name.to_string());
        }
    }

    /// Waits while recipe `name` is closed ([`Registry::gate`]), or followed but not confirmed on
    /// `session` ([`Registry::confirm`]).
    pub async fn open(&self, name: &str, session: i64) {
        loop {
            let reopened = self.reopened.notified();
            if self.admits(name, session) {
                return;
            }
            reopened.await;
        }
    }

    /// Whether a new handle of `name` made on `session` goes ahead now ([`Registry::open`]).
    pub fn admits(&self, name: &str, session: i64) -> bool {
        let confirmed = match self.confirmed.lock().unwrap().get(name) {
            Some(on) => *on == Some(session),
            None => true,
        };
        confirmed && !self.closed.lock().unwrap().contains(name)
    }

    /// Makes new handles of `name` wait until the follower confirms it ([`Registry::confirm`]).
    pub fn follow(&self, name: &str) {
        self.confirmed.lock().unwrap().entry(name.to_string()).or_insert(None);
    }

    /// The follower looked at `name` on `session`: new handles made on it go ahead.
    pub fn confirm(&self, name: &str, session: i64) {
        self.confirmed.lock().unwrap().insert(name.to_string(), Some(session));
        self.reopened.notify_waiters();
    }

    /// Stops following `name` (its follower stopped): new handles no longer wait for it.
    pub fn unfollow(&self, name: &str) {
        self.confirmed.lock().unwrap().remove(name);
        self.closed.lock().unwrap().remove(name);
        self.reopened.notify_waiters();
    }

    /// The version serving new handles of `name`, if one was loaded.
    pub fn current(&self, name: &str) -> Option<Arc<Version>> {
        self.serving.lock().unwrap().get(&self.file_of(name)).cloned()
    }

    pub fn stats(&self) -> &RegistryStats {
        &self.stats
    }

    /// How long a compile may take before the file is refused.
    pub fn set_compile_limit(&self, limit: Duration) {
        self.compile_limit.store(limit.as_millis() as u64, Ordering::Relaxed);
    }

    fn compile_limit(&self) -> Duration {
        Duration::from_millis(self.compile_limit.load(Ordering::Relaxed))
    }

    /// Compiles in a child process from now on: `program` (the `wazoo-compile` binary) under a
    /// limit of `memory` bytes of address space, killed past the compile time limit. Without
    /// a worker, compiles run on a thread of the host (time-limited only).
    pub fn use_compile_worker(&self, program: PathBuf, memory: u64, limits: &crate::SandboxLimits) {
        *self.worker.lock().unwrap() = Some(CompileWorker {
            program,
            memory,
            args: vec![
                "--memory-bytes".into(),
                limits.memory_bytes.to_string(),
                "--stack-bytes".into(),
                limits.wasm_stack_bytes.to_string(),
            ],
        });
    }

    /// A recipe by name (`lock` → `<plugins>/lock.wasm`) or by path to a `.wasm` file.
    pub fn resolve(&self, recipe: &str) -> PathBuf {
        let as_path = Path::new(recipe);
        if recipe.ends_with(".wasm") || as_path.components().count() > 1 {
            as_path.to_path_buf()
        } else {
            self.file_of(recipe)
        }
    }

    /// Where `path` stands: one `stat`, no read, when nothing changed.
    pub fn lookup(&self, path: &Path) -> anyhow::Result<Lookup> {
        let serving = self.serving.lock().unwrap().get(path).cloned();
        let stamp = match stamp(path) {
            Ok(stamp) => stamp,
            Err(e) => {
                if serving.is_some() {
                    self.serving.lock().unwrap().remove(path);
                    tracing::info!("{} was removed: no new handles of it", path.display());
                }
                return Err(e);
            }
        };
        if let Some(v) = &serving {
            if v.stamp == stamp {
                return Ok(Lookup::Serving(v.clone()));
            }
        }
        if let Some(r) = self.refused.lock().unwrap().get(path) {
            if r.stamp == stamp {
                return Ok(Lookup::Refused { serving, reason: r.reason.clone() });
            }
        }
        Ok(Lookup::Changed { serving })
    }

    /// Reads, compiles (or takes from the cache) and checks `path`: a version ready to install.
    /// Blocking: compiling takes tens of milliseconds to seconds.
    pub fn load(&self, path: &Path) -> anyhow::Result<Version> {
        let stamp = stamp(path)?;
        if stamp.1 > MAX_COMPONENT_BYTES {
            anyhow::bail!(
                "{} is {} bytes; components may have at most {MAX_COMPONENT_BYTES}",
                path.display(),
                stamp.1
            );
        }
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let sha256 = hex(&Sha256::digest(&bytes));
        // Read now (the compile takes the bytes), said once the bytes are known to be a component.
        let protocol = crate::protocol::declared(&bytes);
        let (component, from_cache, compile_time) = self.compiled_code(path, &sha256, bytes)?;
        let protocol = protocol.map_err(|e| anyhow!("{}", one_line(&format!("{e:#}"))))?;
        crate::versions::check(&self.engine, &component)?;
        let world = self.world_of(&component)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| anyhow!("it imports something this host does not offer: {e:#}"))?;
        world.check_exports(&pre)?;
        Ok(Version {
            name: path.file_stem().unwrap_or_default().to_string_lossy().into_owned(),
            path: path.to_path_buf(),
            sha256,
            world,
            bytes: stamp.1,
            from_cache,
            compile_time,
            loaded_at: SystemTime::now(),
            protocol,
            usage: Arc::default(),
            pre,
            stamp,
        })
    }

    /// The compiled code of `bytes` (read from `path`, whose SHA-256 is `sha256`): from memory
    /// when a version of the same bytes is there, else from the on-disk cache, else compiled.
    /// A load of bytes being compiled by another waits for that compile rather than compile
    /// them again. Also says whether it came from a cache, and how long the compile took.
    fn compiled_code(
        &self,
        path: &Path,
        sha256: &str,
        bytes: Vec<u8>,
    ) -> anyhow::Result<(Component, bool, Duration)> {
        let mut compiling = self.compiling.lock().unwrap();
        loop {
            if let Some(component) = self.compiled_of(sha256) {
                self.stats.reuses.fetch_add(1, Ordering::Relaxed);
                return Ok((component, true, Duration::ZERO));
            }
            if !compiling.contains(sha256) {
                break;
            }
            compiling = self.compiled_now.wait(compiling).unwrap();
        }
        compiling.insert(sha256.to_string());
        drop(compiling);
        let _compiling = Compiling { registry: self, sha256 };
        let cached = self.cache_file(sha256);
        let mut from_cache = false;
        let mut compile_time = Duration::ZERO;
        let component = match cached.as_deref().and_then(|file| self.load_cached(file)) {
            Some(component) => {
                from_cache = true;
                self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                component
            }
            None if self.worker.lock().unwrap().is_some() => {
                say_slow_compile(path, bytes.len(), cached.is_some());
                let started = Instant::now();
                let component = self.compile_in_worker(path, &bytes, cached.as_deref())?;
                compile_time = started.elapsed();
                self.stats.compiles.fetch_add(1, Ordering::Relaxed);
                component
            }
            None => {
                say_slow_compile(path, bytes.len(), cached.is_some());
                let started = Instant::now();
                let component = self.compile(path, bytes)?;
                compile_time = started.elapsed();
                self.stats.compiles.fetch_add(1, Ordering::Relaxed);
                if let Some(file) = &cached {
                    if let Err(e) = store(file, &component) {
                        tracing::warn!("caching {} failed: {e:#}", path.display());
                    }
                }
                component
            }
        };
        self.compiled.lock().unwrap().insert(sha256.to_string(), component.clone());
        Ok((component, from_cache, compile_time))
    }

    /// The compiled code of the bytes whose SHA-256 is `sha256`, if this registry holds it: kept
    /// by digest, or held by a version serving or checked.
    fn compiled_of(&self, sha256: &str) -> Option<Component> {
        if let Some(component) = self.compiled.lock().unwrap().get(sha256) {
            return Some(component.clone());
        }
        let same = |v: &Arc<Version>| (v.sha256 == sha256).then(|| v.pre.component().clone());
        if let Some(component) = self.serving.lock().unwrap().values().find_map(same) {
            return Some(component);
        }
        self.described.lock().unwrap().values().find_map(|d| match d {
            Described::Checked(v) => same(v),
            Described::Refused(_) => None,
        })
    }

    /// Forgets the compiled code no version serving or checked holds any more (a version swapped
    /// out keeps its own code while its last handles live).
    fn keep_compiled(&self) {
        let mut held: HashSet<String> =
            self.serving.lock().unwrap().values().map(|v| v.sha256.clone()).collect();
        held.extend(self.described.lock().unwrap().values().filter_map(|d| match d {
            Described::Checked(v) => Some(v.sha256.clone()),
            Described::Refused(_) => None,
        }));
        held.extend(self.compiling.lock().unwrap().iter().cloned());
        self.compiled.lock().unwrap().retain(|sha256, _| held.contains(sha256));
    }

    /// Makes `version` the one new handles of its file get.
    pub fn install(&self, version: Version) -> Arc<Version> {
        let version = Arc::new(version);
        let previous = self.serving.lock().unwrap().insert(version.path.clone(), version.clone());
        self.refused.lock().unwrap().remove(&version.path);
        self.described.lock().unwrap().remove(&version.path);
        match &previous {
            Some(old) if old.sha256 != version.sha256 => {
                self.stats.swaps.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    "{}: version {} replaces {} for new handles",
                    version.name,
                    version.short_hash(),
                    old.short_hash()
                );
            }
            Some(_) => {}
            None => tracing::debug!("{}: version {} loaded", version.name, version.short_hash()),
        }
        if previous.is_some_and(|old| old.sha256 != version.sha256) {
            self.keep_compiled();
        }
        version
    }

    /// Whether a version of the recipe `name` (a file `NAME.wasm` in the plugins directory) was
    /// loaded and serves.
    pub fn knows(&self, name: &str) -> bool {
        !name.contains('/') && self.serving.lock().unwrap().contains_key(&self.file_of(name))
    }

    /// Records that the current contents of `path` were refused; what served before still does.
    pub fn refuse(&self, path: &Path, reason: String) {
        let Ok(stamp) = stamp(path) else { return };
        let reason = one_line(&reason);
        self.stats.refusals.fetch_add(1, Ordering::Relaxed);
        let keeps = if self.serving.lock().unwrap().contains_key(path) {
            "; the version before keeps serving"
        } else {
            ""
        };
        tracing::warn!("{} refused: {reason}{keeps}", path.display());
        self.refused
            .lock()
            .unwrap()
            .insert(path.to_path_buf(), Refusal { reason, at: SystemTime::now(), stamp });
    }

    /// Which recipe world `component` exports. Its export names carry the `wazoo:recipes`
    /// version it was built against, any that [`crate::versions`] accepts.
    pub fn world_of(&self, component: &Component) -> anyhow::Result<World> {
        let ty = component.component_type();
        let mut exports = Vec::new();
        let unversioned = |name: &str| name.split_once('@').map_or(name, |(n, _)| n).to_string();
        for (name, item) in ty.exports(&self.engine) {
            let world = World::FAMILIES
                .iter()
                .chain([&World::Custom])
                .find(|w| unversioned(w.export()) == unversioned(name));
            match (world, &item.ty) {
                (Some(&World::Custom), ComponentItem::ComponentFunc(_)) => return Ok(World::Custom),
                (Some(&world), ComponentItem::ComponentInstance(_)) if world != World::Custom => {
                    return Ok(world)
                }
                _ => exports.push(name.to_string()),
            }
        }
        Err(anyhow!("it exports none of the wazoo recipe worlds (it exports: {})", exports.join(", ")))
    }

    /// Every `.wasm` file in the plugins directory (and the embedded ones it does not override),
    /// each checked now if it changed since it was last looked at, and what serves for it.
    /// Versions are not installed by listing. Blocking: a changed file compiles (unless the same
    /// bytes were compiled before), and only a changed one.
    pub fn list(&self) -> anyhow::Result<Vec<RecipeInfo>> {
        self.check()?;
        self.listed()
    }

    /// Checks every file that changed since it was last looked at (new, changed or refused
    /// contents: loaded, not installed, for [`Registry::listed`] to show) and forgets what it
    /// knew of files that are gone. Blocking: a changed file compiles (unless the same bytes
    /// were compiled before); no lock a listing takes is held meanwhile.
    pub fn check(&self) -> anyhow::Result<()> {
        let (files, _) = self.files()?;
        for (path, _) in &files {
            let Ok(Lookup::Changed { .. }) = self.lookup(path) else { continue };
            let Ok(stamp) = stamp(path) else { continue };
            if self.described.lock().unwrap().get(path).is_some_and(|d| d.stamp() == stamp) {
                continue;
            }
            let described = match self.load(path) {
                Ok(v) => Described::Checked(Arc::new(v)),
                Err(e) => Described::Refused(Refusal {
                    reason: one_line(&format!("{e:#}")),
                    at: SystemTime::now(),
                    stamp,
                }),
            };
            self.described.lock().unwrap().insert(path.clone(), described);
        }
        // A file that is gone serves no new handle (as `lookup` finds when asked), and what was
        // found of it is forgotten, its compiled code with it.
        let here: HashSet<&PathBuf> = files.iter().map(|(path, _)| path).collect();
        self.described.lock().unwrap().retain(|path, _| here.contains(path));
        let gone: Vec<PathBuf> = self
            .serving
            .lock()
            .unwrap()
            .keys()
            .filter(|path| {
                let ours = path.parent() == Some(self.dir.as_path())
                    || self.embedded.as_deref().is_some_and(|e| path.parent() == Some(e));
                ours && !path.exists()
            })
            .cloned()
            .collect();
        for path in gone {
            if self.serving.lock().unwrap().remove(&path).is_some() {
                tracing::info!("{} was removed: no new handles of it", path.display());
            }
        }
        self.keep_compiled();
        Ok(())
    }

    /// The `.wasm` files listed: each with whether it is embedded, less the recipes the registry
    /// in ZooKeeper serves, which come second (name → file).
    #[allow(clippy::type_complexity)]
    fn files(&self) -> anyhow::Result<(Vec<(PathBuf, bool)>, HashMap<String, PathBuf>)> {
        let mut files = Vec::new();
        match std::fs::read_dir(&self.dir) {
            Ok(entries) => {
                for entry in entries {
                    files.push((entry?.path(), false));
                }
            }
            // Without a plugins directory, the embedded recipes are all there is.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && self.embedded.is_some() => {}
            Err(e) => return Err(anyhow!("cannot read plugins directory {}: {e}", self.dir.display())),
        }
        if let Some(embedded) = &self.embedded {
            for entry in
                std::fs::read_dir(embedded).map_err(|e| anyhow!("cannot read {}: {e}", embedded.display()))?
            {
                let path = entry?.path();
                let overridden = path.file_name().is_some_and(|n| self.dir.join(n).exists());
                if !overridden {
                    files.push((path, true));
                }
            }
        }
        // A recipe the registry in ZooKeeper serves shows as that, whatever file names it here.
        let published = self.published.lock().unwrap().clone();
        files.retain(|(path, _)| {
            path.extension().and_then(|e| e.to_str()) == Some("wasm")
                && !path.file_stem().is_some_and(|n| published.contains_key(n.to_string_lossy().as_ref()))
        });
        Ok((files, published))
    }

    /// What serves for every `.wasm` file of the plugins directory (and the embedded ones it
    /// does not override), as last checked: no file is read and nothing compiles, so a listing
    /// answers while a compile runs. A file not checked yet (new, or changed since) shows with
    /// the version still serving for it, if any, and no refusal.
    pub fn listed(&self) -> anyhow::Result<Vec<RecipeInfo>> {
        let (files, published) = self.files()?;
        let mut found = Vec::new();
        for (name, path) in published {
            let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let serving = self.serving.lock().unwrap().get(&path).cloned();
            found.push(RecipeInfo {
                name,
                path,
                bytes,
                serving,
                refused: None,
                embedded: false,
                published: true,
            });
        }
        for (path, embedded) in files {
            let name = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
            let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let (serving, refused) = match self.lookup(&path) {
                Ok(Lookup::Serving(v)) => (Some(v), None),
                Ok(Lookup::Refused { serving, .. }) => {
                    (serving, self.refused.lock().unwrap().get(&path).cloned())
                }
                Ok(Lookup::Changed { serving }) => {
                    let described = self.described.lock().unwrap().get(&path).cloned();
                    match described {
                        Some(d) if stamp(&path).is_ok_and(|now| now == d.stamp()) => match d {
                            Described::Checked(v) => (Some(v), None),
                            Described::Refused(r) => (serving, Some(r)),
                        },
                        _ => (serving, None),
                    }
                }
                Err(e) => (
                    None,
                    Some(Refusal {
                        reason: format!("{e:#}"),
                        at: SystemTime::now(),
                        stamp: (SystemTime::UNIX_EPOCH, 0),
                    }),
                ),
            };
            found.push(RecipeInfo { name, path, bytes, serving, refused, embedded, published: false });
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(found)
    }

    /// Compiles on a worker thread, refusing a compile that takes longer than the limit (the
    /// worker is left to finish on its own; its result is dropped).
    fn compile(&self, path: &Path, bytes: Vec<u8>) -> anyhow::Result<Component> {
        let engine = self.engine.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("wazoo-compile".into())
            .spawn(move || {
                let _ = tx.send(Component::new(&engine, &bytes));
            })
            .context("starting a compile worker")?;
        match rx.recv_timeout(self.compile_limit()) {
            Ok(Ok(component)) => Ok(component),
            Ok(Err(e)) => Err(anyhow!("{} is not a valid wasm component: {e:#}", path.display())),
            Err(_) => {
                Err(anyhow!("compiling {} took longer than {:?}", path.display(), self.compile_limit()))
            }
        }
    }

    /// Compiles `bytes` (read from `path`, and hashed) in the worker process into `out` (the
    /// cache file, or a temporary file) and loads the result. The worker is handed the bytes on
    /// its stdin, not the path: a file changed after it was hashed cannot be compiled, and
    /// cached, under the digest of what it held before.
    fn compile_in_worker(&self, path: &Path, bytes: &[u8], out: Option<&Path>) -> anyhow::Result<Component> {
        use std::os::unix::process::CommandExt;
        let worker = self.worker.lock().unwrap().clone().expect("a compile worker");
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let temporary = std::env::temp_dir().join(format!(
            "wazoo-compiled-{}-{}.cwasm",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let target = out.map(Path::to_path_buf).unwrap_or_else(|| temporary.clone());
        let memory = worker.memory;
        let mut command = std::process::Command::new(&worker.program);
        command
            .arg("-")
            .arg(&target)
            .args(&worker.args)
            .env("RUST_BACKTRACE", "0")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        // SAFETY: only async-signal-safe calls (setrlimit) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let limit =
                    libc::rlimit { rlim_cur: memory as libc::rlim_t, rlim_max: memory as libc::rlim_t };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("starting the compile worker {}", worker.program.display()))?;
        let deadline = Instant::now() + self.compile_limit();
        let input = child.stdin.take().expect("the worker's stdin is piped");
        let status = std::thread::scope(|scope| {
            // Written beside the wait, closed when written; a worker killed meanwhile makes it
            // fail (EPIPE), which its status already says.
            scope.spawn(move || {
                use std::io::Write as _;
                let mut input = input;
                let _ = input.write_all(bytes);
            });
            loop {
                if let Some(status) = child.try_wait()? {
                    break anyhow::Ok(Some(status));
                }
                if Instant::now() >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Ok(None);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })?;
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            use std::io::Read as _;
            let _ = pipe.read_to_string(&mut stderr);
        }
        let outcome = match status {
            None => Err(anyhow!("compiling {} took longer than {:?}", path.display(), self.compile_limit())),
            Some(s) if s.success() => {
                // SAFETY: written just now by our own compile worker, with the same settings.
                unsafe { Component::deserialize_file(&self.engine, &target) }
                    .map_err(|e| anyhow!("loading the compiled {}: {e:#}", path.display()))
            }
            Some(s) => {
                // What the worker said, however many lines it took (wasmparser's take several).
                let said = stderr.split_once("wazoo-compile: ").map(|(_, why)| one_line(why));
                match said {
                    Some(why) => Err(anyhow!("{} is not a valid wasm component: {why}", path.display())),
                    // An allocation failed (the abort message says so), or the worker was killed.
                    None if stderr.contains("memory allocation") => Err(anyhow!(
                        "compiling {} went over its memory limit of {} MiB",
                        path.display(),
                        memory >> 20
                    )),
                    None => Err(anyhow!(
                        "the compile worker died compiling {} ({s}; memory limit {} MiB)",
                        path.display(),
                        memory >> 20
                    )),
                }
            }
        };
        if out.is_none() {
            let _ = std::fs::remove_file(&temporary);
        }
        outcome
    }

    /// `<cache>/<sha256>-<engine settings hash>.cwasm`.
    fn cache_file(&self, sha256: &str) -> Option<PathBuf> {
        let dir = self.cache.as_ref()?;
        let mut h = DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        Some(dir.join(format!("{sha256}-{:016x}.cwasm", h.finish())))
    }

    fn load_cached(&self, file: &Path) -> Option<Component> {
        if !file.exists() {
            return None;
        }
        // SAFETY: the file is one this registry wrote with `Component::serialize` for an engine
        // with the same settings (the name says so, and wasmtime checks again), in a directory
        // private to the host.
        match unsafe { Component::deserialize_file(&self.engine, file) } {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!("ignoring cached {}: {e:#}", file.display());
                let _ = std::fs::remove_file(file);
                None
            }
        }
    }
}

fn stamp(path: &Path) -> anyhow::Result<Stamp> {
    let meta = std::fs::metadata(path).with_context(|| {
        format!("recipe component {} not found (build the recipes with `make recipes`)", path.display())
    })?;
    Ok((meta.modified()?, meta.len()))
}

/// An error's text on one line (wasmparser's messages span several).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `component`'s compiled code to `file` (whole, or not at all).
fn store(file: &Path, component: &Component) -> anyhow::Result<()> {
    let bytes = component.serialize().map_err(|e| anyhow!("{e:#}"))?;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp =
        file.with_extension(format!("tmp{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, file)?;
    Ok(())
}

/// Creates `dir` if needed, readable and writable by this user only.
pub(crate) fn private_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let mode = std::fs::metadata(dir)?.permissions().mode();
    if mode & 0o077 != 0 {
        anyhow::bail!("{} is open to other users (mode {:o})", dir.display(), mode & 0o777);
    }
    Ok(())
}

/// `$XDG_CACHE_HOME/wazoo/components`, else `~/.cache/wazoo/components`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("wazoo").join("components"))
}

/// Components at least this big (the Python and JavaScript ones: 12 to 18 MiB) take seconds to
/// compile, so their first use says so rather than sit silent.
const SLOW_COMPILE_BYTES: usize = 4 << 20;

/// Says on the log (a warning, so a command's stderr shows it) that `path` is being compiled and
/// that this takes a while, when it is big enough to.
fn say_slow_compile(path: &Path, bytes: usize, cached_later: bool) {
    if bytes < SLOW_COMPILE_BYTES {
        return;
    }
    let later = match cached_later {
        true => "once: later runs take it from the compile cache",
        false => "on every run without a compile cache (--cache)",
    };
    tracing::warn!(
        "compiling {} ({} MiB) for this machine: this takes seconds, {later}",
        path.display(),
        bytes >> 20
    );
}

/// Registers every `wazoo:zk` import on `linker` (their host side: `znode`, `watch`, `session`,
/// `persistent`, `contention`).
fn add_zk_imports(linker: &mut wasmtime::component::Linker<crate::state::HostState>) -> anyhow::Result<()> {
    use crate::bindings::{contention, persistent, session, types, watch, znode};
    use wasmtime::component::HasSelf;
    types::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    znode::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    watch::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    session::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    persistent::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    contention::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}
