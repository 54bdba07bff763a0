//! `wazoo new recipe NAME --lang rust|python|js|c`: a buildable recipe to start from, in the
//! language a team knows. Each template implements the `custom` world (a `run` export that
//! `wazoo run` calls) with a small real recipe, carries its own copy of the WIT contract, and,
//! for Python, JavaScript and C, the guest-side convenience layer; for C also the bindings,
//! generated here (see [`crate::componentize`]).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// A recipe language `wazoo new recipe` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
    C,
}

/// A language `wazoo new bindings` writes bindings for (the others generate their own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BindingsLang {
    C,
}

use crate::componentize::WIT;

const RUST: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../templates/rust/Cargo.toml")),
    ("src/lib.rs", include_str!("../templates/rust/src/lib.rs")),
    ("build.sh", include_str!("../templates/rust/build.sh")),
];

const PYTHON: &[(&str, &str)] = &[
    ("app.py", include_str!("../templates/python/app.py")),
    ("build.sh", include_str!("../templates/python/build.sh")),
    ("wazoo_guest/__init__.py", include_str!("../../../guest/python/wazoo_guest/__init__.py")),
    ("wazoo_guest/errors.py", include_str!("../../../guest/python/wazoo_guest/errors.py")),
];

const C: &[(&str, &str)] = &[
    ("recipe.c", include_str!("../templates/c/recipe.c")),
    ("build.sh", include_str!("../templates/c/build.sh")),
    ("wazoo_guest.h", include_str!("../../../guest/c/wazoo_guest.h")),
    ("wazoo_guest.c", include_str!("../../../guest/c/wazoo_guest.c")),
];

const JS: &[(&str, &str)] = &[
    ("recipe.js", include_str!("../templates/js/recipe.js")),
    ("package.json", include_str!("../templates/js/package.json")),
    ("build.mjs", include_str!("../templates/js/build.mjs")),
    ("wazoo-guest.js", include_str!("../../../guest/js/wazoo-guest.js")),
];

/// Writes the template for `lang` into `dir` (which must not exist yet, or be empty), with
/// `name` filled in; returns the files written.
pub fn new_recipe(name: &str, lang: Lang, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    check_name(name)?;
    if dir.exists() && std::fs::read_dir(dir)?.next().is_some() {
        return Err(crate::exit::Exit {
            code: crate::exit::NOTHING,
            message: format!("{} exists and is not empty", dir.display()),
        }
        .into());
    }
    let files = match lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
        Lang::C => C,
    };
    let readme = readme(name, lang);
    let mut written = Vec::new();
    for (path, text) in WIT.iter().chain(files).copied().chain([("README.md", readme.as_str())]) {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().expect("a file has a parent"))?;
        std::fs::write(&file, text.replace("{{name}}", name))
            .with_context(|| format!("writing {}", file.display()))?;
        if path.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))?;
        }
        written.push(file);
    }
    if lang == Lang::C {
        let (_, bindings) = crate::componentize::write_c_bindings("custom", &dir.join("bindings"))?;
        written.extend(bindings);
    }
    Ok(written)
}

/// A recipe name: the plugin's file name and the crate or package name.
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if !ok {
        return Err(crate::exit::usage(format!(
            "recipe name {name:?}: use lowercase letters, digits and inner dashes (e.g. wait-for), at most 64"
        )));
    }
    Ok(())
}

fn readme(name: &str, lang: Lang) -> String {
    let (what, build, edit) = match lang {
        Lang::Rust => (
            "Rust, with wit-bindgen",
            "rustup target add wasm32-wasip2   # once\n./build.sh",
            "`src/lib.rs`",
        ),
        Lang::Python => (
            "Python, with componentize-py 0.25",
            "python3 -m pip install 'componentize-py==0.25.1'   # once\n./build.sh",
            "`app.py` (`wazoo_guest/` is the guest-side layer: typed errors, the protected create, the predecessor watch)",
        ),
        Lang::Js => (
            "JavaScript, with componentize-js 0.23",
            "npm install   # once\nnode build.mjs",
            "`recipe.js` (`wazoo-guest.js` is the guest-side layer: typed errors, the protected create, the predecessor watch)",
        ),
        Lang::C => (
            "C, with Debian's clang and wasi-libc",
            "apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32   # once\n./build.sh",
            "`recipe.c` (`wazoo_guest.h` is the guest-side layer: error codes, the protected create, the predecessor \
             wait, deadlines; `bindings/` is what `wazoo new bindings` generates, and `build.sh` generates it again for \
             its `WORLD`)",
        ),
    };
    let change = match lang {
        Lang::C => "(`WORLD` in `build.sh`, which writes `bindings/` again from the wazoo binary's own copy)",
        Lang::Rust => "(the `world` of `generate!` in `src/lib.rs`)",
        Lang::Python => "(`-w` in `build.sh`)",
        Lang::Js => "(`worldName` in `build.mjs`)",
    };
    format!(
        "# {name}\n\nA wazoo recipe in {what}, for world `wazoo:recipes/custom@0.1.2` (`wit/`, a copy of the \
         contract). As generated it waits until a znode exists and prints its data.\n\n\
         ```sh\n{build}\ncp {name}.wasm /path/to/plugins/\nwazoo run {name} /some/path --timeout-ms 5000\n```\n\n\
         Edit {edit}. To implement a standard family instead (a lock, an election…), change the world to \
         one of `wit/recipes.wit` {change} and export its interface; `wazoo recipes list` then shows the \
         world the host sees.\n"
    )
}
