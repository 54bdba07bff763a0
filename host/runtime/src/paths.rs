//! Path checks. Every path a guest passes goes through [`check`] before it reaches ZooKeeper,
//! so the rules (and, later, a tenant's namespace) live in one place.

/// Longest path accepted, in bytes. ZooKeeper has no limit of its own short of `jute.maxbuffer`.
pub const MAX_PATH_BYTES: usize = 1024;

/// Checks `path` for reads (the root is allowed).
pub fn check(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("path is empty".into());
    }
    if !path.starts_with('/') {
        return Err(format!("path must be absolute (start with '/'): {path:?}"));
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(format!("path is longer than {MAX_PATH_BYTES} bytes"));
    }
    if let Some(c) = path.chars().find(|c| forbidden(*c)) {
        return Err(format!("path contains the character {c:?}: {path:?}"));
    }
    if path == "/" {
        return Ok(());
    }
    if path.ends_with('/') {
        return Err(format!("path must not end with '/': {path:?}"));
    }
    for part in path[1..].split('/') {
        match part {
            "" => return Err(format!("path has an empty component ('//'): {path:?}")),
            "." | ".." => return Err(format!("path has a relative component {part:?}: {path:?}")),
            _ => {}
        }
    }
    if path == "/zookeeper" || path.starts_with("/zookeeper/") {
        return Err(format!("{path:?} is reserved for ZooKeeper itself"));
    }
    Ok(())
}

/// Checks `path` for writes: as [`check`], and not the root.
pub fn check_node(path: &str) -> Result<(), String> {
    check(path)?;
    if path == "/" {
        return Err("the root node cannot be created or deleted".into());
    }
    Ok(())
}

/// The characters ZooKeeper's `PathUtils` refuses, plus every other control character.
fn forbidden(c: char) -> bool {
    c.is_control() || matches!(c, '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}')
}

/// The parent of a checked, non-root path.
pub(crate) fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// `dir` + "/" + `name`.
pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_paths() {
        for p in ["/", "/a", "/a/b-c_d.e", "/lock/_c_1234-lock-"] {
            assert_eq!(check(p), Ok(()), "{p}");
        }
    }

    #[test]
    fn refuses_bad_paths_with_a_reason() {
        let cases = [
            ("", "empty"),
            ("a/b", "absolute"),
            ("/a/", "end with"),
            ("/a//b", "empty component"),
            ("/a/../b", "relative"),
            ("/a/./b", "relative"),
            ("/a\0b", "character"),
            ("/a\nb", "character"),
            ("/zookeeper/quota", "reserved"),
        ];
        for (p, why) in cases {
            let err = check(p).unwrap_err();
            assert!(err.contains(why), "{p:?}: {err}");
        }
        assert!(check(&format!("/{}", "x".repeat(MAX_PATH_BYTES))).is_err());
        assert!(check_node("/").is_err());
    }
}
