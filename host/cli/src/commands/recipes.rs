//! `recipes list|functions`, `call` and `run`: the recipe components themselves.

use crate::backend::{Backend, RecipeRow};
use crate::{exit, show};

/// `wazoo recipes list`: a table, or with `json` one object per component.
pub(crate) async fn list(backend: &impl Backend, json: bool) -> anyhow::Result<u8> {
    let recipes = backend.recipes().await.map_err(|f| f.into_error("listing recipes"))?;
    print_recipes(&recipes.rows, &recipes.none, json)
}

/// The `wazoo recipes list` table (or `empty` when there are no rows).
/// With `json`, one `{"name","world","sha256","bytes","path","embedded","note"}` per component,
/// nothing for none. A component the binary carries shows `embedded` in the PATH column.
fn print_recipes(rows: &[RecipeRow], empty: &str, json: bool) -> anyhow::Result<u8> {
    use std::io::Write as _;
    if json {
        for r in rows {
            let row = serde_json::json!({
                "name": r.name, "world": r.world, "sha256": r.hash, "bytes": r.bytes, "path": r.path,
                "embedded": r.embedded, "note": r.note,
            });
            show::emit(&row.to_string());
        }
        return Ok(0);
    }
    let mut out = std::io::stdout().lock();
    let printed = (|| -> std::io::Result<()> {
        if rows.is_empty() {
            writeln!(out, "{empty}")?;
            return Ok(());
        }
        writeln!(out, "{:<18} {:<40} {:<12} {:>9}  PATH", "NAME", "WORLD", "SHA-256", "BYTES")?;
        for r in rows {
            let path = if r.embedded { "embedded" } else { r.path.as_str() };
            write!(out, "{:<18} {:<40} {:<12} {:>9}  {path}", r.name, r.world, r.hash, r.bytes)?;
            if let Some(note) = &r.note {
                write!(out, "  ({note})")?;
            }
            writeln!(out)?;
        }
        Ok(())
    })();
    match printed {
        // A reader that stopped early (`| head`) is not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(0),
    }
}

/// `wazoo recipes functions`: one signature per line.
pub(crate) async fn functions(backend: &impl Backend, recipe: &str) -> anyhow::Result<u8> {
    for f in backend.functions(recipe).await.map_err(|f| f.into_error("listing recipes"))? {
        out!("{f}");
    }
    Ok(0)
}

/// `wazoo call`: one call on a fresh instance; prints the result as JSON, exit status 1 when it
/// is `{"err": …}`.
pub(crate) async fn call(
    backend: &impl Backend,
    recipe: &str,
    function: &str,
    args: &str,
) -> anyhow::Result<u8> {
    let args: serde_json::Value =
        serde_json::from_str(args).map_err(|e| exit::usage(format!("ARGS is not JSON: {e}")))?;
    let called = backend.call(recipe, function, &args).await;
    let result = called.map_err(|f| f.into_error(format!("calling {function}")))?;
    out!("{result}");
    Ok(match result.as_object() {
        Some(o) if o.len() == 1 && o.contains_key("err") => exit::NOTHING,
        _ => 0,
    })
}

/// `wazoo run`: a custom recipe's answer, its `ok` text to stdout (exit status 0), its `err`
/// text to stderr (exit status 1).
pub(crate) async fn run(backend: &impl Backend, component: &str, args: &[String]) -> anyhow::Result<u8> {
    let ran = backend.run(component, args).await.map_err(|f| f.into_error("running the recipe"))?;
    match ran {
        Ok(out) => {
            if !out.is_empty() {
                out!("{out}");
            }
            Ok(0)
        }
        Err(err) => {
            eprintln!("wazoo: {component}: {err}");
            Ok(exit::NOTHING)
        }
    }
}
