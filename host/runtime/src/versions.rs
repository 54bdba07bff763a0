//! Which versions of the WIT packages a host serves: a component built against a version it
//! does not accept is refused when it is loaded, with a message that says both versions.

use wasmtime::component::Component;
use wasmtime::Engine;

/// The WIT packages this host offers, and their versions.
pub const PACKAGES: [(&str, &str); 2] = [("wazoo:zk", "0.1.5"), ("wazoo:recipes", "0.1.2")];

/// Refuses a component built against a WIT package version this host does not accept.
pub(crate) fn check(engine: &Engine, component: &Component) -> anyhow::Result<()> {
    let ty = component.component_type();
    let names =
        ty.imports(engine).map(|(n, _)| n.to_string()).chain(ty.exports(engine).map(|(n, _)| n.to_string()));
    for name in names {
        let Some((package, version)) = package_version(&name) else { continue };
        let Some((_, ours)) = PACKAGES.iter().find(|(p, _)| *p == package) else { continue };
        if !compatible(version, ours) {
            anyhow::bail!(
                "it was built against {package}@{version} ({name}); this host offers {package}@{ours} \
                 and accepts {}",
                accepted(ours)
            );
        }
    }
    Ok(())
}

/// `wazoo:zk/znode@0.1.0` → (`wazoo:zk`, `0.1.0`).
fn package_version(name: &str) -> Option<(&str, &str)> {
    let (path, version) = name.split_once('@')?;
    let package = path.split('/').next()?;
    Some((package, version))
}

/// Whether a host offering `ours` serves a component built against `theirs`: Cargo's caret rule
/// (same major, and below 1.0 the same minor), and no newer than `ours`, whose additions the
/// component may import.
fn compatible(theirs: &str, ours: &str) -> bool {
    let (Ok(wanted), Ok(offered)) =
        (semver::VersionReq::parse(&format!("^{theirs}")), semver::Version::parse(ours))
    else {
        return false;
    };
    semver::Version::parse(theirs).is_ok() && wanted.matches(&offered)
}

/// The versions a host offering `ours` accepts, for messages.
fn accepted(ours: &str) -> String {
    match semver::Version::parse(ours) {
        Ok(v) if v.major == 0 => format!("0.{}.0 to {ours}", v.minor),
        Ok(v) => format!("{}.0.0 to {ours}", v.major),
        Err(_) => ours.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::World;

    /// The versions the host offers are the ones `wit/` declares, and every world's name and
    /// export carry the recipes package's.
    #[test]
    fn packages_are_the_wits() {
        let wit = concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit");
        for (file, package) in [("deps/zk/zk.wit", "wazoo:zk"), ("recipes.wit", "wazoo:recipes")] {
            let text = std::fs::read_to_string(format!("{wit}/{file}")).unwrap();
            let declared = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("package ")?.strip_suffix(';'))
                .unwrap_or_else(|| panic!("{file} declares no package"));
            let ours = PACKAGES.iter().find(|(p, _)| *p == package).unwrap().1;
            assert_eq!(declared, format!("{package}@{ours}"), "{file}");
        }
        let recipes = PACKAGES[1].1;
        for world in World::FAMILIES.iter().chain([&World::Custom]) {
            assert!(world.name().ends_with(&format!("@{recipes}")), "{}", world.name());
            if *world != World::Custom {
                assert!(world.export().ends_with(&format!("@{recipes}")), "{}", world.export());
            }
        }
    }

    #[test]
    fn semver_rules() {
        assert!(compatible("0.1.0", "0.1.0"));
        assert!(compatible("0.1.0", "0.1.1"));
        // Built against a newer patch, it may import what this host lacks.
        assert!(!compatible("0.1.7", "0.1.1"));
        assert!(!compatible("0.2.0", "0.1.0"));
        assert!(!compatible("0.0.9", "0.1.0"));
        assert!(compatible("1.0.0", "1.3.0"));
        assert!(!compatible("1.4.0", "1.3.0"));
        assert!(!compatible("2.0.0", "1.0.0"));
        assert!(!compatible("nonsense", "0.1.0"));
        assert_eq!(package_version("wazoo:zk/znode@0.1.0"), Some(("wazoo:zk", "0.1.0")));
        assert_eq!(package_version("run"), None);
        assert_eq!(accepted("0.1.1"), "0.1.0 to 0.1.1");
    }
}
