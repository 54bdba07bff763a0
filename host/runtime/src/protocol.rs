//! What wire protocol a component says it speaks.
//!
//! Two builds of one recipe can lay out their znodes differently: the `lock` plugin speaks
//! Curator's `InterProcessMutex` format, `lock-kazoo` kazoo's `Lock` format. Each contender sees
//! only the nodes of its own format, so two hosts serving one recipe name with the two builds on
//! one path both take the lock. A component therefore declares the protocol it speaks, in a
//! custom section named [`SECTION`] (`wazoo-protocol`) holding a short UTF-8 string, and the
//! registry refuses to switch a recipe to a component declaring another one unless told to.
//!
//! The convention is `<name>/<major>`: `curator-mutex/1`, `kazoo-lock/1`, `wazoo-queue/1`. The
//! name says whose format (a peer's, or `wazoo-<recipe>` for wazoo's own), the major version
//! counts incompatible changes: a build whose nodes an older build would misread (or miss)
//! declares the next major, and two strings that differ in any way are taken as incompatible on
//! the wire. A declaration is 1 to 128 bytes of printable ASCII without spaces: letters, digits
//! and `-_./:@+`.
//!
//! The section may sit in the component itself or in any component or core module nested in it
//! (a Rust recipe's `wazoo_guest::protocol!` puts it in its core module, which the component
//! embeds as it is). Declarations that disagree are an error; none at all is `None`, a component
//! that says nothing.

use anyhow::{bail, Context as _};
use wasmparser::{Parser, Payload};

/// The custom section's name.
pub const SECTION: &str = "wazoo-protocol";

/// The longest declaration, in bytes.
const MAX_LEN: usize = 128;

/// The protocol a component (its bytes: a component or a core module) declares in its
/// `wazoo-protocol` custom section, searched in the component itself and in every nested
/// component and core module. `Ok(None)` when none declares one. An error when declarations
/// disagree (two different strings), when one is not valid (UTF-8, 1 to 128 bytes, printable
/// ASCII without spaces: letters, digits and `-_./:@+`), or when the bytes are not WebAssembly.
pub fn declared(bytes: &[u8]) -> anyhow::Result<Option<String>> {
    let mut found: Option<&str> = None;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.context("reading the component for its wazoo-protocol section")?;
        let Payload::CustomSection(section) = payload else { continue };
        if section.name() != SECTION {
            continue;
        }
        let protocol = check(section.data())?;
        match found {
            Some(earlier) if earlier != protocol => {
                bail!("the component declares two protocols in its {SECTION} sections: {earlier:?} and {protocol:?}")
            }
            _ => found = Some(protocol),
        }
    }
    Ok(found.map(str::to_owned))
}

/// How a protocol reads in messages: the string, or "none declared".
pub fn describe(protocol: Option<&str>) -> String {
    match protocol {
        Some(protocol) => protocol.to_owned(),
        None => "none declared".to_owned(),
    }
}

/// One section's contents, as a protocol, or why it is not one.
fn check(data: &[u8]) -> anyhow::Result<&str> {
    let Ok(protocol) = std::str::from_utf8(data) else {
        bail!("the {SECTION} section is not UTF-8: {:?}", String::from_utf8_lossy(data))
    };
    if protocol.is_empty() {
        bail!("the {SECTION} section is empty");
    }
    if protocol.len() > MAX_LEN {
        bail!("the {SECTION} section is {} bytes long, more than {MAX_LEN}", protocol.len());
    }
    if let Some(c) = protocol.chars().find(|&c| !allowed(c)) {
        bail!(
            "the {SECTION} section {protocol:?} holds {c:?}: a protocol is letters, digits and `-_./:@+`, without spaces"
        );
    }
    Ok(protocol)
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-_./:@+".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LEB128 of `n`, as the binary format writes sizes.
    fn leb(mut n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return out;
            }
            out.push(byte | 0x80);
        }
    }

    /// A custom section (id 0) named `name` holding `data`.
    fn custom(name: &str, data: &[u8]) -> Vec<u8> {
        let mut body = leb(name.len());
        body.extend_from_slice(name.as_bytes());
        body.extend_from_slice(data);
        let mut out = vec![0];
        out.extend(leb(body.len()));
        out.extend(body);
        out
    }

    /// A core module holding nothing but `sections`.
    fn module(sections: &[Vec<u8>]) -> Vec<u8> {
        let mut out = b"\0asm\x01\0\0\0".to_vec();
        for s in sections {
            out.extend_from_slice(s);
        }
        out
    }

    /// A component holding `sections` (custom ones) and then the core `modules`.
    fn component(sections: &[Vec<u8>], modules: &[Vec<u8>]) -> Vec<u8> {
        let mut out = b"\0asm\x0d\0\x01\0".to_vec();
        for s in sections {
            out.extend_from_slice(s);
        }
        for m in modules {
            // Component section id 1: a core module.
            out.push(1);
            out.extend(leb(m.len()));
            out.extend_from_slice(m);
        }
        out
    }

    fn protocol(data: &[u8]) -> Vec<u8> {
        custom(SECTION, data)
    }

    #[test]
    fn none() {
        assert_eq!(declared(&module(&[])).unwrap(), None);
        assert_eq!(declared(&module(&[custom("name", b"\0"), custom("producers", b"x y")])).unwrap(), None);
        assert_eq!(declared(&component(&[], &[module(&[])])).unwrap(), None);
    }

    #[test]
    fn one() {
        let m = module(&[custom("other", b"stuff"), protocol(b"curator-mutex/1")]);
        assert_eq!(declared(&m).unwrap().as_deref(), Some("curator-mutex/1"));
        let all = "abcXYZ019-_./:@+";
        assert_eq!(declared(&module(&[protocol(all.as_bytes())])).unwrap().as_deref(), Some(all));
        let longest = "a".repeat(MAX_LEN);
        assert_eq!(declared(&module(&[protocol(longest.as_bytes())])).unwrap(), Some(longest));
    }

    #[test]
    fn nested() {
        let inner = module(&[protocol(b"kazoo-lock/1")]);
        let c = component(&[], &[module(&[]), inner.clone()]);
        assert_eq!(declared(&c).unwrap().as_deref(), Some("kazoo-lock/1"));
        // The component's own section and its module's, agreeing.
        let c = component(&[protocol(b"kazoo-lock/1")], std::slice::from_ref(&inner));
        assert_eq!(declared(&c).unwrap().as_deref(), Some("kazoo-lock/1"));
        // And disagreeing.
        let c = component(&[protocol(b"curator-mutex/1")], &[inner]);
        let e = declared(&c).unwrap_err().to_string();
        assert!(e.contains("curator-mutex/1") && e.contains("kazoo-lock/1"), "{e}");
    }

    #[test]
    fn two_agreeing() {
        let m = module(&[protocol(b"kazoo-lock/1"), custom("x", b""), protocol(b"kazoo-lock/1")]);
        assert_eq!(declared(&m).unwrap().as_deref(), Some("kazoo-lock/1"));
    }

    #[test]
    fn two_disagreeing() {
        let m = module(&[protocol(b"curator-mutex/1"), protocol(b"kazoo-lock/1")]);
        let e = declared(&m).unwrap_err().to_string();
        assert!(e.contains("two protocols"), "{e}");
        // Only the case differs: still two protocols.
        assert!(declared(&module(&[protocol(b"a/1"), protocol(b"A/1")])).is_err());
    }

    #[test]
    fn invalid() {
        for bad in [
            &b"\xff\xfe"[..],
            b"curator-\xc3(mutex/1",
            b"",
            b"curator mutex/1",
            b" curator-mutex/1",
            b"curator-mutex/1\n",
            b"curator-mutex/1\0",
            b"tab\tbed",
            b"caf\xc3\xa9/1",
            b"semi;colon",
        ] {
            let m = module(&[protocol(bad)]);
            assert!(declared(&m).is_err(), "{:?} accepted", String::from_utf8_lossy(bad));
        }
        let too_long = "a".repeat(MAX_LEN + 1);
        let e = declared(&module(&[protocol(too_long.as_bytes())])).unwrap_err().to_string();
        assert!(e.contains("129 bytes"), "{e}");
        // An invalid declaration is an error even beside a valid one.
        assert!(declared(&module(&[protocol(b"kazoo-lock/1"), protocol(b"")])).is_err());
    }

    #[test]
    fn not_wasm() {
        for bad in [
            &b""[..],
            b"\0asm",
            b"\0asm\x01\0\0\0\0",
            b"\0asm\x01\0\0\0\0\xff\xff\xff\xff\x0f",
            b"\0asm\x01\0\0\0\0\x05\x10wazoo",
            b"not wasm at all",
        ] {
            assert!(declared(bad).is_err(), "{bad:?} accepted");
        }
        // Every prefix of a real module with a declaration: an error or an answer, never a panic.
        let m = component(&[protocol(b"x/1")], &[module(&[custom("a", b"b"), protocol(b"x/1")])]);
        for n in 0..m.len() {
            let _ = declared(&m[..n]);
        }
        assert_eq!(declared(&m).unwrap().as_deref(), Some("x/1"));
    }

    #[test]
    fn describes() {
        assert_eq!(describe(Some("kazoo-lock/1")), "kazoo-lock/1");
        assert_eq!(describe(None), "none declared");
    }

    /// The components `make recipes` installs, where built: each reads back as the protocol its
    /// recipe declares (`None`: the recipes whose language cannot declare one yet).
    #[test]
    fn built_plugins() {
        let plugins = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins");
        let expected: &[(&str, Option<&str>)] = &[
            ("lock", Some("curator-mutex/1")),
            ("lock-kazoo", Some("kazoo-lock/1")),
            ("rwlock", Some("curator-rwlock/1")),
            ("rwlock-kazoo", Some("kazoo-rwlock/1")),
            ("semaphore", Some("curator-semaphore-v2/1")),
            ("semaphore-kazoo", Some("kazoo-semaphore/1")),
            ("election", Some("curator-leader-latch/1")),
            ("election-selector", Some("curator-leader-selector/1")),
            ("barrier", Some("wazoo-barrier/1")),
            ("queue", Some("wazoo-queue/1")),
            ("group", Some("wazoo-group/1")),
            ("config", Some("wazoo-config/1")),
            ("registration", Some("wazoo-registration/1")),
            ("cache", Some("wazoo-cache/1")),
            ("transaction", Some("wazoo-transaction/1")),
            ("tree", Some("wazoo-tree/1")),
            ("lock-c", Some("curator-mutex/1")),
            ("barrier-c", Some("wazoo-barrier/1")),
            ("semaphore-py", Some("curator-semaphore-v2/1")),
            ("election-js", Some("curator-leader-latch/1")),
        ];
        for (name, want) in expected {
            let path = plugins.join(format!("{name}.wasm"));
            let Ok(bytes) = std::fs::read(&path) else {
                eprintln!("skipped {}: not built", path.display());
                continue;
            };
            let got = declared(&bytes).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            assert_eq!(got.as_deref(), *want, "{}", path.display());
        }
    }
}
