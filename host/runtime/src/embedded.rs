//! Recipe components a program carries in its binary (the `wazoo` binary carries the standard
//! recipes), written out once to a private directory so the registry checks, compiles, caches
//! and serves them like any file of the plugins directory. A file of the same name in the
//! plugins directory overrides the embedded one.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use sha2::{Digest, Sha256};

/// One embedded component: its recipe name (`lock`) and its bytes.
pub type Embedded = (&'static str, &'static [u8]);

/// Writes `components` as `NAME.wasm` into a private directory named by their hash (under the
/// user's cache directory, else the temporary directory) and returns it. Files already there
/// with the same bytes are left as they are, so the registry's view of them does not change.
pub fn materialize(components: &[Embedded]) -> anyhow::Result<PathBuf> {
    let mut all = Sha256::new();
    for (name, bytes) in components {
        all.update(name.as_bytes());
        all.update([0]);
        all.update(bytes);
    }
    let hash: String = all.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    let base = match crate::registry::default_cache_dir().and_then(|d| d.parent().map(Path::to_path_buf)) {
        Some(cache) => cache.join("embedded"),
        // SAFETY: getuid has no preconditions and cannot fail.
        None => std::env::temp_dir().join(format!("wazoo-embedded-{}", unsafe { libc::getuid() })),
    };
    let dir = base.join(hash);
    crate::registry::private_dir(&dir)?;
    for (name, bytes) in components {
        if name.is_empty() || name.contains('/') {
            anyhow::bail!("embedded component name {name:?} is not a recipe name");
        }
        let file = dir.join(format!("{name}.wasm"));
        if std::fs::read(&file).is_ok_and(|now| now == *bytes) {
            continue;
        }
        let partial = dir.join(format!(".{name}.wasm.{}", std::process::id()));
        let mut out =
            std::fs::File::create(&partial).with_context(|| format!("writing {}", partial.display()))?;
        out.write_all(bytes)
            .and_then(|()| out.sync_all())
            .with_context(|| format!("writing {}", partial.display()))?;
        std::fs::rename(&partial, &file).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(dir)
}
