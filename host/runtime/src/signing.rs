//! Signed components: ed25519 signatures over a component's digest, and the keys a host trusts.
//!
//! A publisher signs a component with its private key ([`SigningKey::sign`]); the signature
//! travels with the component as a [`Signature`], which names its key by id and carries the
//! 64-byte signature in base64. A host configured with [`TrustedKeys`] serves a component only
//! when one of its signatures is by a trusted key that may sign that recipe, and verifies
//! ([`TrustedKeys::vouch`]).
//!
//! What is signed is not the component's bytes but [`message`]: the domain string
//! `wazoo-component-v1`, a newline, and the component's SHA-256 in lowercase hex. The digest
//! stands for the bytes (the host computes it from the file it loads, and one changed byte
//! changes it). The domain string frames it so that a signature the same key made for something
//! else (a message that happens to be the same 64 hex digits, say) never passes as a signature
//! of a component, and so that a later format of what is signed cannot be confused with this one.
//!
//! The host's trusted keys are a TOML file of public keys, each with the recipe names (glob
//! patterns) it may sign:
//!
//! ```toml
//! [[key]]
//! id = "ops"
//! ed25519 = "<base64 of the 32-byte public key>"
//! recipes = ["lock", "team-*"]    # optional: every recipe when left out
//! ```
//!
//! It is read strictly: an unknown key at any level, an id given twice, a public key that is
//! not 32 bytes of base64, a pattern that is not a glob, and a file that names no key are all
//! refused, with a one-line error that names the file and the entry.
//!
//! A publisher's private key is kept in a key file of its own, private to its user (mode 0600):
//!
//! ```toml
//! # wazoo signing key "ops": SECRET. ...
//! id = "ops"
//! ed25519_pkcs8 = "<base64 of the PKCS#8 v2 document>"
//! ```
//!
//! The private key never leaves the publisher: a host is given the public key only
//! ([`SigningKey::trusted_entry`]), and the host reads no private key.

use std::io::Write as _;
use std::path::Path;

use anyhow::anyhow;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair as _, UnparsedPublicKey, ED25519};

/// What precedes the digest in every signed message.
const DOMAIN: &[u8] = b"wazoo-component-v1\n";

/// The fields of a `[[key]]` entry of a trusted keys file.
const ENTRY_FIELDS: [&str; 3] = ["id", "ed25519", "recipes"];

/// What is signed for a component whose SHA-256 is `sha256_hex` (lowercase hex, 64 digits):
/// `wazoo-component-v1`, a newline, then the digest. The framing keeps a signature made for
/// anything else from passing as a component's.
pub fn message(sha256_hex: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(DOMAIN.len() + sha256_hex.len());
    m.extend_from_slice(DOMAIN);
    m.extend_from_slice(sha256_hex.as_bytes());
    m
}

/// One signature as it travels with a component.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    /// The id of the key that made it.
    pub key: String,
    /// The 64-byte ed25519 signature of [`message`], in base64.
    pub ed25519: String,
}

/// Whether `id` is a key id: 1 to 64 characters of `A-Z a-z 0-9 . _ @ -`.
fn check_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!("{id:?} is not a key id (1 to 64 characters of A-Z, a-z, 0-9, '.', '_', '@', '-')"))
    }
}

/// A TOML parse error in one line: the message and where, without the excerpt TOML's own
/// display adds.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let before = text.get(..span.start.min(text.len())).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("not valid TOML: {} at line {line} column {column}", e.message().trim())
        }
        None => format!("not valid TOML: {}", e.message().trim()),
    }
}

/// A private signing key, as kept in a key file: its id and its ed25519 key pair.
pub struct SigningKey {
    id: String,
    /// The PKCS#8 v2 document the pair was read from, which is what the key file holds.
    pkcs8: Vec<u8>,
    pair: Ed25519KeyPair,
}

/// A key file's contents.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    id: String,
    ed25519_pkcs8: String,
}

impl std::fmt::Debug for SigningKey {
    /// The id and the public key; never the private key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("id", &self.id).field("public", &self.public_base64()).finish()
    }
}

impl SigningKey {
    /// A new key pair with this id, which must be 1 to 64 characters of `A-Z a-z 0-9 . _ @ -`.
    pub fn generate(id: &str) -> anyhow::Result<SigningKey> {
        check_id(id).map_err(|e| anyhow!("signing key id {e}"))?;
        let document = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
            .map_err(|_| anyhow!("generating an ed25519 key pair failed"))?;
        let pair = Ed25519KeyPair::from_pkcs8(document.as_ref())
            .map_err(|e| anyhow!("the generated ed25519 key pair is not usable: {e}"))?;
        Ok(SigningKey { id: id.to_owned(), pkcs8: document.as_ref().to_vec(), pair })
    }

    /// The key file's text (TOML): `id` and `ed25519_pkcs8`, the PKCS#8 v2 document in base64,
    /// after a comment that says the file is secret.
    pub fn to_file_text(&self) -> String {
        format!(
            "# wazoo signing key {id:?}: SECRET. Whoever can read this file can sign components as {id:?}.\n\
             # Keep it private to its user (mode 0600); give hosts the public key only.\n\
             id = \"{id}\"\n\
             ed25519_pkcs8 = \"{pkcs8}\"\n",
            id = self.id,
            pkcs8 = STANDARD.encode(&self.pkcs8),
        )
    }

    /// Reads a key file written by [`SigningKey::to_file_text`]. A file that other users may
    /// read or write is refused, and so is any key the file should not have.
    pub fn load(path: &Path) -> anyhow::Result<SigningKey> {
        use std::os::unix::fs::PermissionsExt;
        let fail = |what: String| anyhow!("signing key {}: {what}", path.display());
        let mode = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?.permissions().mode();
        if mode & 0o077 != 0 {
            let how = if mode & 0o044 != 0 {
                "readable by"
            } else if mode & 0o022 != 0 {
                "writable by"
            } else {
                "open to"
            };
            return Err(anyhow!(
                "signing key {} is {how} other users (mode {:o}); chmod 600 it",
                path.display(),
                mode & 0o777
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let file: KeyFile = toml::from_str(&text).map_err(|e| fail(toml_error(&text, &e)))?;
        check_id(&file.id).map_err(|e| fail(format!("id: {e}")))?;
        let pkcs8 = STANDARD
            .decode(file.ed25519_pkcs8.as_bytes())
            .map_err(|_| fail("ed25519_pkcs8: not base64".into()))?;
        let pair = Ed25519KeyPair::from_pkcs8(&pkcs8)
            .map_err(|e| fail(format!("ed25519_pkcs8: not an ed25519 PKCS#8 v2 document ({e})")))?;
        Ok(SigningKey { id: file.id, pkcs8, pair })
    }

    /// Writes the key file, a new file with mode 0600. An existing file is not overwritten.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let fail = |what: String| anyhow!("signing key {}: {what}", path.display());
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(|e| {
                match e.kind() {
                    std::io::ErrorKind::AlreadyExists => fail("already exists; it is not overwritten".into()),
                    _ => fail(e.to_string()),
                }
            })?;
        let written = file.write_all(self.to_file_text().as_bytes()).and_then(|()| file.sync_all());
        if let Err(e) = written {
            drop(file);
            let _ = std::fs::remove_file(path);
            return Err(fail(format!("writing it failed: {e}")));
        }
        Ok(())
    }

    /// The key's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The public key: its 32 bytes in base64.
    pub fn public_base64(&self) -> String {
        STANDARD.encode(self.pair.public_key().as_ref())
    }

    /// The `[[key]]` entry a trusted keys file takes for this key, allowed every recipe
    /// (`recipes = ["*"]`, to be narrowed by whoever adds it).
    pub fn trusted_entry(&self) -> String {
        format!("[[key]]\nid = \"{}\"\ned25519 = \"{}\"\nrecipes = [\"*\"]\n", self.id, self.public_base64())
    }

    /// Signs the component whose SHA-256 is `sha256_hex` (lowercase hex): the signature of
    /// [`message`]`(sha256_hex)`.
    pub fn sign(&self, sha256_hex: &str) -> Signature {
        let signature = self.pair.sign(&message(sha256_hex));
        Signature { key: self.id.clone(), ed25519: STANDARD.encode(signature.as_ref()) }
    }
}

/// One trusted public key.
#[derive(Clone, Debug)]
struct Trusted {
    id: String,
    public: [u8; 32],
    /// The recipe names it may sign; every recipe when `None`.
    recipes: Option<globset::GlobSet>,
}

/// The keys a host trusts, each with the recipes it may sign, in the order of their file.
#[derive(Clone, Debug)]
pub struct TrustedKeys {
    keys: Vec<Trusted>,
}

/// Why one signature by a trusted key does not vouch for a component, most telling last (a
/// signature by a key that is not trusted tells least of all).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Failing {
    /// Its key is trusted, but not for this recipe.
    NotAllowed,
    /// Its key is trusted for this recipe, but it is not a signature or does not verify.
    Bad,
}

impl TrustedKeys {
    /// Reads the trusted keys file at `path` (see [`TrustedKeys::parse`]).
    pub fn load(path: &Path) -> anyhow::Result<TrustedKeys> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| anyhow!("trusted keys {origin}: {e}"))?;
        TrustedKeys::parse(&text, &origin)
    }

    /// Parses a trusted keys file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> anyhow::Result<TrustedKeys> {
        let fail = |what: String| anyhow!("trusted keys {origin}: {what}");
        let table: toml::Table = toml::from_str(text).map_err(|e| fail(toml_error(text, &e)))?;
        let mut entries = Vec::new();
        for (name, value) in table {
            match (name.as_str(), value) {
                ("key", toml::Value::Array(array)) => entries = array,
                ("key", _) => return Err(fail("key: not [[key]] tables".into())),
                _ => {
                    return Err(fail(format!(
                        "unknown field {name:?} (the file has [[key]] tables and nothing else)"
                    )))
                }
            }
        }
        if entries.is_empty() {
            return Err(fail("names no key: a host with no trusted key could serve nothing".into()));
        }
        let mut keys: Vec<Trusted> = Vec::with_capacity(entries.len());
        for (i, entry) in entries.into_iter().enumerate() {
            let name = match &entry {
                toml::Value::Table(t) => match t.get("id") {
                    Some(toml::Value::String(id)) => format!("key {id:?}"),
                    _ => format!("key #{}", i + 1),
                },
                _ => format!("key #{}", i + 1),
            };
            let key = trusted(entry).map_err(|what| fail(format!("{name}: {what}")))?;
            if keys.iter().any(|k| k.id == key.id) {
                return Err(fail(format!("{name}: duplicate id (an earlier key has it too)")));
            }
            keys.push(key);
        }
        Ok(TrustedKeys { keys })
    }

    /// Which trusted key vouches for the component `recipe` whose SHA-256 is `sha256_hex`,
    /// given its signatures: the id of the first signature's key that is trusted, may sign
    /// `recipe`, and whose signature verifies. Otherwise a one-line reason, naming the component
    /// and what it lacks; of several failing signatures, the most telling failure is reported (a
    /// trusted key's signature that does not verify before a key that may not sign the recipe,
    /// before a key that is not trusted).
    pub fn vouch(&self, recipe: &str, sha256_hex: &str, signatures: &[Signature]) -> Result<String, String> {
        let short: String = sha256_hex.chars().take(12).collect();
        let component = format!("recipe {recipe:?} (sha256 {short}…)");
        let trusted = self.ids().join(", ");
        if signatures.is_empty() {
            return Err(format!(
                "{component} is not signed; this host serves only components signed by one of: {trusted}"
            ));
        }
        let message = message(sha256_hex);
        let mut untrusted: Vec<&str> = Vec::new();
        let mut worst: Option<(Failing, String)> = None;
        for signature in signatures {
            let (failing, why) = match self.keys.iter().find(|k| k.id == signature.key) {
                None => {
                    if !untrusted.contains(&signature.key.as_str()) {
                        untrusted.push(&signature.key);
                    }
                    continue;
                }
                Some(key) if !key.recipes.as_ref().is_none_or(|set| set.is_match(recipe)) => (
                    Failing::NotAllowed,
                    format!("{component} is signed by {:?}, which may not sign recipe {recipe:?}", key.id),
                ),
                Some(key) => match STANDARD.decode(signature.ed25519.as_bytes()) {
                    Ok(bytes) if bytes.len() == 64 => {
                        let public = UnparsedPublicKey::new(&ED25519, &key.public);
                        if public.verify(&message, &bytes).is_ok() {
                            return Ok(key.id.clone());
                        }
                        (
                            Failing::Bad,
                            format!("{component} carries a signature by {:?} that does not verify", key.id),
                        )
                    }
                    _ => (
                        Failing::Bad,
                        format!(
                            "{component} carries a signature by {:?} that is not 64 bytes of base64",
                            key.id
                        ),
                    ),
                },
            };
            if worst.as_ref().is_none_or(|(w, _)| failing > *w) {
                worst = Some((failing, why));
            }
        }
        if let Some((_, why)) = worst {
            return Err(why);
        }
        let names: Vec<String> = untrusted.iter().map(|k| format!("{k:?}")).collect();
        Err(format!(
            "{component} is signed by {}, which this host does not trust (trusted: {trusted})",
            names.join(" and ")
        ))
    }

    /// The keys' ids, in the order of their file.
    pub fn ids(&self) -> Vec<String> {
        self.keys.iter().map(|k| k.id.clone()).collect()
    }
}

/// One `[[key]]` entry, checked; the error says what is wrong within the entry.
fn trusted(entry: toml::Value) -> Result<Trusted, String> {
    let toml::Value::Table(entry) = entry else {
        return Err("not a table".into());
    };
    if let Some(unknown) = entry.keys().find(|k| !ENTRY_FIELDS.contains(&k.as_str())) {
        return Err(format!("unknown field {unknown:?} (a key has id, ed25519 and recipes)"));
    }
    let id = match entry.get("id") {
        Some(toml::Value::String(id)) => id.clone(),
        Some(_) => return Err("id: not a string".into()),
        None => return Err("missing id".into()),
    };
    check_id(&id).map_err(|e| format!("id: {e}"))?;
    let public = match entry.get("ed25519") {
        Some(toml::Value::String(b64)) => STANDARD
            .decode(b64.as_bytes())
            .ok()
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .ok_or("ed25519: not 32 bytes of base64")?,
        Some(_) => return Err("ed25519: not 32 bytes of base64".into()),
        None => return Err("missing ed25519 (the public key: base64 of its 32 bytes)".into()),
    };
    let recipes = match entry.get("recipes") {
        None => None,
        Some(toml::Value::Array(patterns)) => {
            if patterns.is_empty() {
                return Err("recipes: empty, so the key could sign no recipe (leave recipes out for every \
                            recipe)"
                    .into());
            }
            let mut set = globset::GlobSetBuilder::new();
            for pattern in patterns {
                let toml::Value::String(pattern) = pattern else {
                    return Err("recipes: not a list of glob patterns".into());
                };
                set.add(globset::Glob::new(pattern).map_err(|e| format!("recipes: {e}"))?);
            }
            Some(set.build().map_err(|e| format!("recipes: {e}"))?)
        }
        Some(_) => return Err("recipes: not a list of glob patterns".into()),
    };
    Ok(Trusted { id, public, recipes })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const OTHER: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

    /// A directory of its own under the system's temporary directory, removed when dropped.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            use std::sync::atomic::{AtomicU64, Ordering};
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let dir = std::env::temp_dir().join(format!(
                "wazoo-signing-{}-{}-{name}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir(&dir).expect("create temp dir");
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn trusting(keys: &[(&SigningKey, Option<&str>)]) -> TrustedKeys {
        let mut text = String::new();
        for (key, recipes) in keys {
            match recipes {
                None => text.push_str(&key.trusted_entry()),
                Some(r) => text.push_str(&format!(
                    "[[key]]\nid = \"{}\"\ned25519 = \"{}\"\nrecipes = {r}\n",
                    key.id(),
                    key.public_base64()
                )),
            }
        }
        TrustedKeys::parse(&text, "/x/keys.toml").expect("trusted keys parse")
    }

    fn parse_err(text: &str) -> String {
        format!("{:#}", TrustedKeys::parse(text, "/x/keys.toml").expect_err("should be refused"))
    }

    #[test]
    fn message_framing() {
        assert_eq!(message(DIGEST), format!("wazoo-component-v1\n{DIGEST}").into_bytes());
        assert_eq!(message(""), b"wazoo-component-v1\n".to_vec());
        // A signature of the bare digest (no domain) does not pass.
        let key = SigningKey::generate("ops").unwrap();
        let bare = key.pair.sign(DIGEST.as_bytes());
        let forged = Signature { key: "ops".into(), ed25519: STANDARD.encode(bare.as_ref()) };
        let err = trusting(&[(&key, None)]).vouch("lock", DIGEST, &[forged]).unwrap_err();
        assert!(err.ends_with("carries a signature by \"ops\" that does not verify"), "{err}");
    }

    #[test]
    fn round_trip() {
        let ops = SigningKey::generate("ops").unwrap();
        let team = SigningKey::generate("team@example.org").unwrap();
        let keys = trusting(&[(&ops, None), (&team, None)]);
        assert_eq!(keys.ids(), vec!["ops".to_string(), "team@example.org".to_string()]);
        assert_eq!(keys.vouch("lock", DIGEST, &[ops.sign(DIGEST)]), Ok("ops".to_string()));
        assert_eq!(
            keys.vouch("lock", DIGEST, &[team.sign(OTHER), team.sign(DIGEST)]),
            Ok("team@example.org".to_string())
        );
        // A signature serializes with the fields named, and reads back strictly.
        let sig = ops.sign(DIGEST);
        let json = serde_json::to_string(&sig).unwrap();
        assert_eq!(serde_json::from_str::<Signature>(&json).unwrap(), sig);
        assert!(serde_json::from_str::<Signature>(r#"{"key":"a","ed25519":"","x":1}"#).is_err());
        assert_eq!(STANDARD.decode(&sig.ed25519).unwrap().len(), 64);
        assert_eq!(STANDARD.decode(ops.public_base64()).unwrap().len(), 32);
    }

    #[test]
    fn key_ids() {
        for bad in ["", "a b", "ops/1", "é", &"a".repeat(65)] {
            assert!(SigningKey::generate(bad).is_err(), "{bad:?}");
        }
        assert!(SigningKey::generate(&"a".repeat(64)).is_ok());
        assert!(SigningKey::generate("A-z_0.9@x").is_ok());
    }

    #[test]
    fn key_file_round_trip() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new("roundtrip");
        let path = dir.0.join("ops.key");
        let key = SigningKey::generate("ops").unwrap();
        key.save(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with('#') && text.contains("SECRET"), "{text}");
        let loaded = SigningKey::load(&path).unwrap();
        assert_eq!(loaded.id(), "ops");
        assert_eq!(loaded.public_base64(), key.public_base64());
        let keys = trusting(&[(&key, None)]);
        assert_eq!(keys.vouch("lock", DIGEST, &[loaded.sign(DIGEST)]), Ok("ops".to_string()));
        // Not overwritten.
        let err = format!("{:#}", SigningKey::generate("new").unwrap().save(&path).unwrap_err());
        assert!(err.contains("already exists"), "{err}");
        assert_eq!(SigningKey::load(&path).unwrap().public_base64(), key.public_base64());
        // The secret stays out of Debug.
        let debug = format!("{key:?}");
        assert!(!debug.contains(&STANDARD.encode(&key.pkcs8)), "{debug}");
    }

    #[test]
    fn key_file_open_to_others_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new("mode");
        let path = dir.0.join("ops.key");
        SigningKey::generate("ops").unwrap().save(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = format!("{:#}", SigningKey::load(&path).unwrap_err());
        assert_eq!(
            err,
            format!("signing key {} is readable by other users (mode 644); chmod 600 it", path.display())
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o620)).unwrap();
        let err = format!("{:#}", SigningKey::load(&path).unwrap_err());
        assert!(err.contains("is writable by other users (mode 620)"), "{err}");
    }

    #[test]
    fn key_file_strict() {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = TempDir::new("strict");
        let key = SigningKey::generate("ops").unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.0.join(name);
            let mut f =
                std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).unwrap();
            f.write_all(text.as_bytes()).unwrap();
            path
        };
        let extra = write("extra.key", &format!("{}comment = \"x\"\n", key.to_file_text()));
        let err = format!("{:#}", SigningKey::load(&extra).unwrap_err());
        assert!(err.starts_with(&format!("signing key {}: ", extra.display())), "{err}");
        assert!(err.contains("comment"), "{err}");
        let garbage = write("garbage.key", "id = \"ops\"\ned25519_pkcs8 = \"AAAA\"\n");
        let err = format!("{:#}", SigningKey::load(&garbage).unwrap_err());
        assert!(err.contains("ed25519_pkcs8: not an ed25519 PKCS#8 v2 document"), "{err}");
        let missing = dir.0.join("missing.key");
        assert!(format!("{:#}", SigningKey::load(&missing).unwrap_err()).contains("missing.key"));
    }

    #[test]
    fn wrong_digest_fails() {
        let ops = SigningKey::generate("ops").unwrap();
        let keys = trusting(&[(&ops, None)]);
        let err = keys.vouch("lock", OTHER, &[ops.sign(DIGEST)]).unwrap_err();
        assert_eq!(
            err,
            "recipe \"lock\" (sha256 fedcba987654…) carries a signature by \"ops\" that does not verify"
        );
    }

    #[test]
    fn not_signed() {
        let ops = SigningKey::generate("ops").unwrap();
        let team = SigningKey::generate("team").unwrap();
        let keys = trusting(&[(&ops, None), (&team, None)]);
        assert_eq!(
            keys.vouch("lock", DIGEST, &[]).unwrap_err(),
            "recipe \"lock\" (sha256 0123456789ab…) is not signed; this host serves only components signed \
             by one of: ops, team"
        );
    }

    #[test]
    fn untrusted_key() {
        let ops = SigningKey::generate("ops").unwrap();
        let team = SigningKey::generate("team").unwrap();
        let eve = SigningKey::generate("eve").unwrap();
        let keys = trusting(&[(&ops, None), (&team, None)]);
        assert_eq!(
            keys.vouch("lock", DIGEST, &[eve.sign(DIGEST)]).unwrap_err(),
            "recipe \"lock\" (sha256 0123456789ab…) is signed by \"eve\", which this host does not trust \
             (trusted: ops, team)"
        );
        // A key that claims a trusted id but is not it does not verify.
        let fake = SigningKey::generate("ops").unwrap();
        let err = keys.vouch("lock", DIGEST, &[eve.sign(DIGEST), fake.sign(DIGEST)]).unwrap_err();
        assert!(err.ends_with("carries a signature by \"ops\" that does not verify"), "{err}");
        // Two untrusted keys are both named.
        let mallory = SigningKey::generate("mallory").unwrap();
        let err = keys.vouch("lock", DIGEST, &[eve.sign(DIGEST), mallory.sign(DIGEST)]).unwrap_err();
        assert!(err.contains("is signed by \"eve\" and \"mallory\", which this host"), "{err}");
    }

    #[test]
    fn key_not_allowed_for_recipe() {
        let ops = SigningKey::generate("ops").unwrap();
        let team = SigningKey::generate("team").unwrap();
        let keys = trusting(&[(&ops, Some(r#"["lock"]"#)), (&team, Some(r#"["team-*", "x?"]"#))]);
        assert_eq!(keys.vouch("team-queue", DIGEST, &[team.sign(DIGEST)]), Ok("team".to_string()));
        assert_eq!(keys.vouch("xy", DIGEST, &[team.sign(DIGEST)]), Ok("team".to_string()));
        assert_eq!(keys.vouch("lock", DIGEST, &[ops.sign(DIGEST)]), Ok("ops".to_string()));
        assert_eq!(
            keys.vouch("lock", DIGEST, &[team.sign(DIGEST)]).unwrap_err(),
            "recipe \"lock\" (sha256 0123456789ab…) is signed by \"team\", which may not sign recipe \"lock\""
        );
        let err = keys.vouch("team-x", DIGEST, &[ops.sign(DIGEST)]).unwrap_err();
        assert!(err.ends_with("is signed by \"ops\", which may not sign recipe \"team-x\""), "{err}");
        // A key allowed for the recipe is used when another is not.
        assert_eq!(keys.vouch("lock", DIGEST, &[team.sign(DIGEST), ops.sign(DIGEST)]), Ok("ops".to_string()));
        // A non-verifying signature of an allowed key beats a key not allowed.
        let mut bad = ops.sign(OTHER);
        bad.key = "ops".into();
        let err = keys.vouch("lock", DIGEST, &[team.sign(DIGEST), bad]).unwrap_err();
        assert!(err.ends_with("by \"ops\" that does not verify"), "{err}");
    }

    #[test]
    fn tampered_signature() {
        let ops = SigningKey::generate("ops").unwrap();
        let keys = trusting(&[(&ops, None)]);
        let mut sig = ops.sign(DIGEST);
        let mut bytes = STANDARD.decode(&sig.ed25519).unwrap();
        bytes[10] ^= 0x01;
        sig.ed25519 = STANDARD.encode(&bytes);
        let err = keys.vouch("lock", DIGEST, std::slice::from_ref(&sig)).unwrap_err();
        assert!(err.ends_with("carries a signature by \"ops\" that does not verify"), "{err}");
        // Tampered, then an untrusted key: the tampered one is the more telling.
        let eve = SigningKey::generate("eve").unwrap();
        let err = keys.vouch("lock", DIGEST, &[eve.sign(DIGEST), sig]).unwrap_err();
        assert!(err.ends_with("by \"ops\" that does not verify"), "{err}");
    }

    #[test]
    fn malformed_signature() {
        let ops = SigningKey::generate("ops").unwrap();
        let keys = trusting(&[(&ops, None)]);
        let good = ops.sign(DIGEST);
        let short = STANDARD.encode(&STANDARD.decode(&good.ed25519).unwrap()[..63]);
        for junk in ["not base64!", "", "AAAA====", short.as_str(), "é"] {
            let sig = Signature { key: "ops".into(), ed25519: junk.into() };
            let err = keys.vouch("lock", DIGEST, &[sig]).unwrap_err();
            assert!(err.ends_with("carries a signature by \"ops\" that is not 64 bytes of base64"), "{err}");
        }
        // A digest too short or not ASCII does not panic.
        assert!(keys.vouch("lock", "ab", std::slice::from_ref(&good)).is_err());
        assert!(keys
            .vouch("lock", "éééééééééééééé", &[good])
            .unwrap_err()
            .contains("(sha256 éééééééééééé…)"));
    }

    #[test]
    fn trusted_keys_strict() {
        let ops = SigningKey::generate("ops").unwrap();
        let entry = ops.trusted_entry();
        let public = ops.public_base64();
        // Unknown fields, at each level.
        let err = parse_err(&format!("{entry}comment = \"x\"\n"));
        assert_eq!(
            err,
            "trusted keys /x/keys.toml: key \"ops\": unknown field \"comment\" (a key has id, ed25519 and \
             recipes)"
        );
        let err = parse_err(&format!("version = 1\n{entry}"));
        assert!(err.starts_with("trusted keys /x/keys.toml: unknown field \"version\""), "{err}");
        // Duplicate ids.
        let err = parse_err(&format!("{entry}{entry}"));
        assert!(err.starts_with("trusted keys /x/keys.toml: key \"ops\": duplicate id"), "{err}");
        // No key.
        for empty in ["", "# nothing\n", "key = []\n"] {
            assert_eq!(
                parse_err(empty),
                "trusted keys /x/keys.toml: names no key: a host with no trusted key could serve nothing"
            );
        }
        // A bad glob.
        let err = parse_err(&format!("[[key]]\nid = \"ops\"\ned25519 = \"{public}\"\nrecipes = [\"a[\"]\n"));
        assert!(err.starts_with("trusted keys /x/keys.toml: key \"ops\": recipes: "), "{err}");
        let err = parse_err(&format!("[[key]]\nid = \"ops\"\ned25519 = \"{public}\"\nrecipes = []\n"));
        assert!(err.contains("key \"ops\": recipes: empty"), "{err}");
        let err = parse_err(&format!("[[key]]\nid = \"ops\"\ned25519 = \"{public}\"\nrecipes = [1]\n"));
        assert!(err.contains("key \"ops\": recipes: not a list of glob patterns"), "{err}");
        // A public key of 31 bytes, of 33, not base64, not a string.
        let short = STANDARD.encode([7u8; 31]);
        let long = STANDARD.encode([7u8; 33]);
        for bad in [format!("\"{short}\""), format!("\"{long}\""), "\"!!\"".into(), "32".into()] {
            assert_eq!(
                parse_err(&format!("[[key]]\nid = \"ops\"\ned25519 = {bad}\n")),
                "trusted keys /x/keys.toml: key \"ops\": ed25519: not 32 bytes of base64"
            );
        }
        // Missing fields, bad ids, not TOML: the entry is named by its place when it has no id.
        let err = parse_err(&format!("{entry}[[key]]\ned25519 = \"{public}\"\n"));
        assert_eq!(err, "trusted keys /x/keys.toml: key #2: missing id");
        let err = parse_err("[[key]]\nid = \"ops\"\n");
        assert!(err.starts_with("trusted keys /x/keys.toml: key \"ops\": missing ed25519"), "{err}");
        let err = parse_err(&format!("[[key]]\nid = \"a b\"\ned25519 = \"{public}\"\n"));
        assert!(
            err.starts_with("trusted keys /x/keys.toml: key \"a b\": id: \"a b\" is not a key id"),
            "{err}"
        );
        let err = parse_err("key = \"ops\"\n");
        assert_eq!(err, "trusted keys /x/keys.toml: key: not [[key]] tables");
        let err = parse_err("[[key]\n");
        assert!(err.starts_with("trusted keys /x/keys.toml: not valid TOML: "), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn trusted_keys_load() {
        let dir = TempDir::new("trusted");
        let path = dir.0.join("keys.toml");
        let ops = SigningKey::generate("ops").unwrap();
        let team = SigningKey::generate("team").unwrap();
        std::fs::write(&path, format!("{}\n{}", ops.trusted_entry(), team.trusted_entry())).unwrap();
        let keys = TrustedKeys::load(&path).unwrap();
        assert_eq!(keys.ids(), vec!["ops".to_string(), "team".to_string()]);
        std::fs::write(&path, "").unwrap();
        let err = format!("{:#}", TrustedKeys::load(&path).unwrap_err());
        assert!(err.starts_with(&format!("trusted keys {}: names no key", path.display())), "{err}");
        let missing = dir.0.join("missing.toml");
        let err = format!("{:#}", TrustedKeys::load(&missing).unwrap_err());
        assert!(err.starts_with(&format!("trusted keys {}: ", missing.display())), "{err}");
    }
}
