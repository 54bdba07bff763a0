//! The registry: recipe components on disk, compiled once per file and checked against the
//! world they claim to implement.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, Context as _};
use wasmtime::component::{types::ComponentItem, Component};
use wasmtime::Engine;

use crate::bindings::{
    BARRIER_EXPORT, CONFIG_EXPORT, CUSTOM_EXPORT, ELECTION_EXPORT, GROUP_EXPORT, LOCK_EXPORT, QUEUE_EXPORT,
    RWLOCK_EXPORT, SEMAPHORE_EXPORT, TRANSACTION_EXPORT,
};

/// The recipe worlds a component can target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum World {
    /// `wazoo:recipes/lock-recipe`
    Lock,
    /// `wazoo:recipes/rwlock-recipe`
    RwLock,
    /// `wazoo:recipes/election-recipe`
    Election,
    /// `wazoo:recipes/barrier-recipe`
    Barrier,
    /// `wazoo:recipes/semaphore-recipe`
    Semaphore,
    /// `wazoo:recipes/queue-recipe`
    Queue,
    /// `wazoo:recipes/group-recipe`
    Group,
    /// `wazoo:recipes/config-recipe`
    Config,
    /// `wazoo:recipes/transaction-recipe`
    Transaction,
    /// `wazoo:recipes/custom`
    Custom,
}

impl World {
    pub fn name(self) -> &'static str {
        match self {
            World::Lock => "wazoo:recipes/lock-recipe@0.1.0",
            World::RwLock => "wazoo:recipes/rwlock-recipe@0.1.0",
            World::Election => "wazoo:recipes/election-recipe@0.1.0",
            World::Barrier => "wazoo:recipes/barrier-recipe@0.1.0",
            World::Semaphore => "wazoo:recipes/semaphore-recipe@0.1.0",
            World::Queue => "wazoo:recipes/queue-recipe@0.1.0",
            World::Group => "wazoo:recipes/group-recipe@0.1.0",
            World::Config => "wazoo:recipes/config-recipe@0.1.0",
            World::Transaction => "wazoo:recipes/transaction-recipe@0.1.0",
            World::Custom => "wazoo:recipes/custom@0.1.0",
        }
    }
}

/// A component file found in the plugins directory.
#[derive(Debug)]
pub struct RecipeInfo {
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
    /// The world it implements, or why it cannot be used.
    pub world: Result<World, String>,
}

#[derive(Clone)]
struct Compiled {
    modified: SystemTime,
    len: u64,
    component: Component,
    compile_time: Duration,
}

/// Compiled components, keyed by file; a changed file is compiled again.
pub struct Registry {
    engine: Engine,
    dir: PathBuf,
    compiled: Mutex<HashMap<PathBuf, Compiled>>,
}

impl Registry {
    pub fn new(engine: Engine, dir: PathBuf) -> Registry {
        Registry { engine, dir, compiled: Mutex::new(HashMap::new()) }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A recipe by name (`lock` → `<plugins>/lock.wasm`) or by path to a `.wasm` file.
    pub fn resolve(&self, recipe: &str) -> PathBuf {
        let as_path = Path::new(recipe);
        if recipe.ends_with(".wasm") || as_path.components().count() > 1 {
            as_path.to_path_buf()
        } else {
            self.dir.join(format!("{recipe}.wasm"))
        }
    }

    /// The compiled component for `path`, compiling it if the file is new or changed.
    pub fn component(&self, path: &Path) -> anyhow::Result<Component> {
        self.compiled(path).map(|c| c.component)
    }

    /// How long compiling `path` took the last time it was compiled.
    pub fn compile_time(&self, path: &Path) -> anyhow::Result<Duration> {
        self.compiled(path).map(|c| c.compile_time)
    }

    fn compiled(&self, path: &Path) -> anyhow::Result<Compiled> {
        let meta = std::fs::metadata(path).with_context(|| {
            format!("recipe component {} not found (build the recipes with `make recipes`)", path.display())
        })?;
        let (modified, len) = (meta.modified()?, meta.len());
        if let Some(c) = self.compiled.lock().unwrap().get(path) {
            if c.modified == modified && c.len == len {
                return Ok(c.clone());
            }
        }
        let started = Instant::now();
        let component = Component::from_file(&self.engine, path)
            .map_err(|e| anyhow!("{} is not a valid wasm component: {e:#}", path.display()))?;
        let compiled = Compiled { modified, len, component, compile_time: started.elapsed() };
        self.compiled.lock().unwrap().insert(path.to_path_buf(), compiled.clone());
        Ok(compiled)
    }

    /// Which recipe world `component` exports.
    pub fn world_of(&self, component: &Component) -> Result<World, String> {
        let ty = component.component_type();
        let mut exports = Vec::new();
        for (name, item) in ty.exports(&self.engine) {
            match (name, &item.ty) {
                (LOCK_EXPORT, ComponentItem::ComponentInstance(_)) => return Ok(World::Lock),
                (RWLOCK_EXPORT, ComponentItem::ComponentInstance(_)) => return Ok(World::RwLock),
                (ELECTION_EXPORT, ComponentItem::ComponentInstance(_)) => return Ok(World::Election),
                (BARRIER_EXPORT, ComponentItem::ComponentInstance(_)) => return Ok(World::Barrier),
                (SEMAPHORE_EXPORT, ComponentItem::ComponentInstance(_)) => return Ok(World::Semaphore),
                (QUEUE_EXPORT, ComponentItem::ComponentInstance(_)) => return Ok(World::Queue),
                (GROUP_EXPORT, ComponentItem::ComponentInstance(_)) => return Ok(World::Group),
                (CONFIG_EXPORT, ComponentItem::ComponentInstance(_)) => return Ok(World::Config),
                (TRANSACTION_EXPORT, ComponentItem::ComponentInstance(_)) => return Ok(World::Transaction),
                (CUSTOM_EXPORT, ComponentItem::ComponentFunc(_)) => return Ok(World::Custom),
                _ => exports.push(name.to_string()),
            }
        }
        Err(format!("exports none of the wazoo recipe worlds (it exports: {})", exports.join(", ")))
    }

    /// Every `.wasm` file in the plugins directory, with the world it implements.
    pub fn list(&self) -> anyhow::Result<Vec<RecipeInfo>> {
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|e| anyhow!("cannot read plugins directory {}: {e}", self.dir.display()))?;
        let mut found = Vec::new();
        for entry in entries {
            let path = entry?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("wasm") {
                continue;
            }
            let name = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
            let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let world = self.component(&path).map_err(|e| format!("{e:#}")).and_then(|c| self.world_of(&c));
            found.push(RecipeInfo { name, path, bytes, world });
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(found)
    }
}
