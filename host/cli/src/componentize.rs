//! Any language that emits WASI: `wazoo componentize` turns a WASI preview 1 core module (C with
//! clang and wasi-libc, or any compiler that emits wasip1 reactor modules) into a recipe
//! component, and `wazoo new bindings --lang c` writes the C bindings of a recipe world. Both read
//! the program's own copy of `wit/`, so a recipe author installs nothing but a compiler.
//!
//! Componentizing embeds the chosen world's type in the module, adapts its
//! `wasi_snapshot_preview1` imports to WASI 0.2 with the preview 1 adapter of the wasmtime
//! version the host runs, and then puts the result through the registry's checks, the same a
//! plugin passes before it serves, and the instance memory limit: a refusal here is the one the
//! host would give. Only the module's start-up code is left to the host's trial instantiation,
//! since it may call ZooKeeper.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use wit_parser::{PackageId, Resolve, WorldId};

use crate::exit::{self, Exit};

/// The contract as the program carries it: the recipe worlds and the primitives they import.
pub(crate) const WIT: &[(&str, &str)] = &[
    ("wit/recipes.wit", include_str!("../../../wit/recipes.wit")),
    ("wit/deps/zk/zk.wit", include_str!("../../../wit/deps/zk/zk.wit")),
];

/// The WIT packages, resolved; the recipes package is the main one.
fn contract() -> anyhow::Result<(Resolve, PackageId)> {
    let mut resolve = Resolve::default();
    let (_, zk) = WIT[1];
    let (_, recipes) = WIT[0];
    resolve.push_source("wit/deps/zk/zk.wit", zk).context("the program's copy of zk.wit")?;
    let main =
        resolve.push_source("wit/recipes.wit", recipes).context("the program's copy of recipes.wit")?;
    Ok((resolve, main))
}

/// The world named `name`: its name in `wit/recipes.wit` (`custom`, `barrier-recipe`), with or
/// without `-recipe`, or its full name, with or without the version
/// (`wazoo:recipes/barrier-recipe@0.1.2`).
fn world(resolve: &Resolve, main: PackageId, name: &str) -> anyhow::Result<WorldId> {
    let package = &resolve.packages[main];
    let id = &package.name;
    let short = match name.split_once('/') {
        None => Some(name),
        Some((prefix, rest)) if prefix == format!("{}:{}", id.namespace, id.name) => {
            match rest.split_once('@') {
                None => Some(rest),
                Some((world, version)) => {
                    (Some(version.to_string()) == id.version.as_ref().map(|v| v.to_string())).then_some(world)
                }
            }
        }
        Some(_) => None,
    };
    let found = short.filter(|s| !s.contains(['/', '@', ':'])).and_then(|short| {
        package.worlds.get(short).or_else(|| package.worlds.get(&format!("{short}-recipe"))).copied()
    });
    found.ok_or_else(|| {
        let mut known: Vec<&str> =
            package.worlds.keys().map(String::as_str).filter(|w| *w != "imports").collect();
        known.sort();
        exit::usage(format!("world {name:?}: {id} has no such world (it has: {})", known.join(", ")))
    })
}

/// The full name of `world`, e.g. `wazoo:recipes/barrier-recipe@0.1.2`.
fn world_name(resolve: &Resolve, world: WorldId) -> String {
    let world = &resolve.worlds[world];
    let package = &resolve.packages[world.package.expect("a world of a package")].name;
    match &package.version {
        Some(v) => format!("{}:{}/{}@{v}", package.namespace, package.name, world.name),
        None => format!("{}:{}/{}", package.namespace, package.name, world.name),
    }
}

/// The C bindings of world `name` (wit-bindgen's C generator): `recipe.h`, `recipe.c` and
/// `recipe_component_type.o` (the world's type, which `recipe.c` links in; `componentize` embeds
/// the type again from the program's copy), with the same names and the same `recipe_` prefix
/// for every world, so C code (the guest layer among it) moves between worlds unchanged.
/// Returns the world's full name and the files.
pub(crate) fn c_bindings(name: &str) -> anyhow::Result<(String, Vec<(String, Vec<u8>)>)> {
    let (mut resolve, main) = contract()?;
    let world = world(&resolve, main, name)?;
    let options =
        wit_bindgen_c::Opts { rename_world: Some("recipe".into()), ..wit_bindgen_c::Opts::default() };
    let mut generator = options.build();
    let mut files = wit_bindgen_core::Files::default();
    generator.generate(&mut resolve, world, &mut files).context("generating the C bindings")?;
    let files = files.iter().map(|(name, bytes)| (name.to_string(), bytes.to_vec())).collect();
    Ok((world_name(&resolve, world), files))
}

/// Writes the C bindings of `world` into `dir`; returns the world's full name and the files.
pub(crate) fn write_c_bindings(world: &str, dir: &Path) -> anyhow::Result<(String, Vec<PathBuf>)> {
    let (name, files) = c_bindings(world)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    for (file, bytes) in files {
        let path = dir.join(file);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok((name, written))
}

/// What `componentize` made.
pub(crate) struct Made {
    /// The world's full name, as the registry sees it.
    pub(crate) world: String,
    pub(crate) bytes: usize,
    /// Whether the module imported WASI preview 1 (and so carries the adapter).
    pub(crate) adapted: bool,
}

/// A refusal: the input is not (and cannot be made) a recipe of that world. Exit status 1.
fn refuse(input: &Path, why: impl std::fmt::Display) -> anyhow::Error {
    Exit { code: exit::NOTHING, message: format!("{} refused: {why}", input.display()) }.into()
}

/// Turns the core module at `input` into a component for world `name`, checks it as the
/// registry checks a plugin, and writes it to `output`.
pub(crate) fn componentize(input: &Path, name: &str, output: &Path) -> anyhow::Result<Made> {
    let (resolve, main) = contract()?;
    let world = world(&resolve, main, name)?;
    let limit = wazoo_runtime::registry::MAX_COMPONENT_BYTES;
    let cannot_read = |e: std::io::Error| Exit {
        code: exit::FAILED,
        message: format!("cannot read {}: {e}", input.display()),
    };
    // At most one byte past the limit is read: a huge file (or /dev/zero) is refused, not loaded.
    let mut module = Vec::new();
    std::fs::File::open(input)
        .and_then(|file| std::io::Read::read_to_end(&mut std::io::Read::take(file, limit + 1), &mut module))
        .map_err(cannot_read)?;
    if module.len() as u64 > limit {
        return Err(refuse(input, format!("it is more than the {limit} bytes a component may have")));
    }
    let imports = core_imports(&module).map_err(|why| refuse(input, why))?;
    let adapted = imports.iter().any(|(module, _)| {
        module == wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME
    });
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .map_err(|e| refuse(input, format!("{e:#}")))?;
    let mut encoder = wit_component::ComponentEncoder::default();
    encoder.module(&module).map_err(|e| refuse(input, one_line(&e)))?;
    if adapted {
        encoder
            .adapter(
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
                wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
            )
            .context("loading the WASI preview 1 adapter")?;
    }
    let component = encoder.validate(true).encode().map_err(|e| refuse(input, one_line(&e)))?;
    let full = world_name(&resolve, world);
    check(input, &component, &full)?;
    write_whole(output, &component)?;
    Ok(Made { world: full, bytes: component.len(), adapted })
}

/// Writes `bytes` to `path` through a temporary file beside it, renamed into place: a host
/// watching a plugins directory never sees half a component, and a failure leaves `path` as it
/// was.
fn write_whole(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let failed = |e: &dyn std::fmt::Display| Exit {
        code: exit::FAILED,
        message: format!("writing {}: {e}", path.display()),
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut file =
        tempfile::Builder::new().prefix(".componentize").tempfile_in(dir).map_err(|e| failed(&e))?;
    std::io::Write::write_all(&mut file, bytes).map_err(|e| failed(&e))?;
    {
        use std::os::unix::fs::PermissionsExt as _;
        file.as_file().set_permissions(std::fs::Permissions::from_mode(0o644)).map_err(|e| failed(&e))?;
    }
    file.persist(path).map_err(|e| failed(&e.error))?;
    Ok(())
}

/// The imports of the core module `bytes` as (module, name); refuses a component, a module that
/// is not WebAssembly, a WASI command (it runs `main` and ends; a recipe is called), and a module
/// whose memory starts larger than an instance may have.
fn core_imports(bytes: &[u8]) -> Result<Vec<(String, String)>, String> {
    if wasmparser::Parser::is_component(bytes) {
        return Err("it is already a component; put it in the plugins directory as it is".into());
    }
    if !wasmparser::Parser::is_core_wasm(bytes) {
        return Err("it is not a WebAssembly core module".into());
    }
    let mut imports = Vec::new();
    let mut exports = Vec::new();
    let mut memories = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| format!("it is not a valid module: {e}"))? {
            wasmparser::Payload::ImportSection(section) => {
                for import in section.into_imports() {
                    let import = import.map_err(|e| format!("it is not a valid module: {e}"))?;
                    if let wasmparser::TypeRef::Memory(memory) = import.ty {
                        memories.push(memory);
                    }
                    imports.push((import.module.to_string(), import.name.to_string()));
                }
            }
            wasmparser::Payload::MemorySection(section) => {
                for memory in section {
                    memories.push(memory.map_err(|e| format!("it is not a valid module: {e}"))?);
                }
            }
            wasmparser::Payload::ExportSection(section) => {
                for export in section {
                    exports
                        .push(export.map_err(|e| format!("it is not a valid module: {e}"))?.name.to_string());
                }
            }
            _ => {}
        }
    }
    if exports.iter().any(|e| e == "_start") {
        return Err(
            "it is a WASI command (it exports `_start`); build a reactor (clang -mexec-model=reactor)".into(),
        );
    }
    // The host's instance pool refuses such a module only when it instantiates it.
    let limit = wazoo_runtime::SandboxLimits::default().memory_bytes as u64;
    for memory in memories {
        let start = memory.initial.saturating_mul(1u64 << memory.page_size_log2.unwrap_or(16));
        if start > limit {
            return Err(format!(
                "its memory starts at {start} bytes, more than the {limit} an instance may have \
                 (lower -Wl,--initial-memory)"
            ));
        }
    }
    Ok(imports)
}

/// The registry's checks, on the component as it would be loaded from the plugins directory.
fn check(input: &Path, component: &[u8], world: &str) -> anyhow::Result<()> {
    let limits = wazoo_runtime::SandboxLimits::default();
    let engine = wazoo_runtime::sandbox::compile_engine(&limits)?;
    let dir = tempfile::tempdir().context("a temporary directory")?;
    let file = dir.path().join("recipe.wasm");
    std::fs::write(&file, component)?;
    let registry = wazoo_runtime::Registry::new(engine, dir.path().to_path_buf(), None)?;
    let version = registry.load(&file).map_err(|e| refuse(input, format!("{e:#}")))?;
    if version.world.name() != world {
        return Err(refuse(input, format!("it implements {}, not {world}", version.world.name())));
    }
    Ok(())
}

/// An encoder's error on one line: its context chain, the first line of each.
fn one_line(error: &anyhow::Error) -> String {
    error
        .chain()
        .map(|e| e.to_string().lines().next().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join(": ")
}
