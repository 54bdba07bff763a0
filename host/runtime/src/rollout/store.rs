//! The registry's nodes in ZooKeeper, and the requests that read and change them.
//!
//! Under the registry's root (`/wazoo/registry` in the host's namespace):
//!
//! ```text
//! blobs/<sha256>               a component: empty while it is written, its Manifest once sealed
//! blobs/<sha256>/c-00000 …     the component deflated, in chunks of at most 768 KiB
//! recipes/<NAME>               the Pointer: which version is current, the canary, the switch
//! recipes/<NAME>/history/h-…   one Event per change of the pointer (sequential)
//! recipes/<NAME>/serving/<id>  each following host's report (ephemeral): what it serves
//! recipes/<NAME>/canary/<…>    the canary hosts' places (ephemeral)
//! ```
//!
//! A blob is sealed by one conditional write of its manifest after every chunk is written, and
//! a pointer names only sealed blobs (its change checks the blob's version in the same
//! transaction): a host never fetches a half-written component. Every change of a pointer is
//! one transaction with its history event, conditional on the pointer's version, so two
//! publishers cannot both win, and the history is exactly the pointer's past.

use std::io::{Read as _, Write as _};
use std::time::{Duration, SystemTime};

use anyhow::{anyhow, bail, Context as _};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::bindings::ZkError;
use crate::registry::{hex, MAX_COMPONENT_BYTES};
use crate::signing::Signature;
use crate::zk::{Access, MultiError, NodeMode, Op, Watch, Zk};

/// The registry's root in the host's namespace (a tenant's is under its own chroot).
pub const ROOT: &str = "/wazoo/registry";

/// The most bytes one chunk node holds: well below ZooKeeper's default `jute.maxbuffer` (1 MiB),
/// which bounds a node's data and a request.
pub const CHUNK_BYTES: usize = 768 << 10;

/// How many times a request cut off by a connection loss is tried.
const TRIES: u32 = 20;

/// A sealed component: what its blob node holds.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub sha256: String,
    /// The component's size.
    pub bytes: u64,
    /// Its size deflated, as the chunks hold it.
    pub stored: u64,
    pub chunks: u32,
    /// The recipe world it implements (`lock`, `custom`, …).
    pub world: String,
    /// The wire protocol it declares ([`crate::protocol`]).
    pub protocol: Option<String>,
    pub signatures: Vec<Signature>,
    /// Who stored it first, and when (milliseconds since the Unix epoch).
    pub publisher: String,
    pub at_ms: u64,
}

/// One version as a pointer names it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Named {
    pub sha256: String,
    pub protocol: Option<String>,
    pub world: String,
    pub publisher: String,
    pub at_ms: u64,
}

/// A version on trial on some hosts before it becomes current ([`crate::rollout`]'s canary).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Canary {
    pub version: Named,
    /// How many hosts serve it.
    pub hosts: u32,
    /// How long each must serve it, and how many calls it must answer, without a trap or a
    /// sandbox limit hit, before it becomes current.
    pub for_ms: u64,
    pub calls: u64,
}

/// What a recipe's node says: the version every following host serves, and the canary.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Pointer {
    pub current: Option<Named>,
    pub canary: Option<Canary>,
    /// Set when `current` speaks another wire protocol than the version before it: hosts serve
    /// it only once every following host has drained the old one.
    pub switched_protocol: bool,
}

/// One change of a recipe's pointer.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// `publish`, `rollback`, `canary`, `promote` or `withdraw`.
    pub action: String,
    pub sha256: String,
    pub protocol: Option<String>,
    pub by: String,
    pub at_ms: u64,
    pub reason: Option<String>,
    /// Unique to the change: a publisher whose reply was lost finds it by this.
    pub id: String,
}

/// A following host's report on one recipe.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// The host's id (the node's name).
    #[serde(default)]
    pub host: String,
    /// `serving`, `draining` (its old version's handles are ending), `drained` (it serves no
    /// version of the recipe until every host drained: a switch of protocol), or `refused` (it
    /// keeps what it served before).
    pub state: String,
    /// What it serves (empty: nothing from the registry).
    pub sha256: String,
    pub protocol: Option<String>,
    /// Whether it serves the canary.
    pub canary: bool,
    pub since_ms: u64,
    /// The served version's calls, traps and limit hits so far.
    pub calls: u64,
    pub traps: u64,
    pub limit_hits: u64,
    pub reason: Option<String>,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Why a pointer did not change.
#[derive(Debug)]
pub enum Refused {
    /// Another change came first: read the pointer again.
    Raced,
    /// The named blob is not there (or not sealed).
    NoBlob,
    Zk(ZkError),
}

/// The registry of one namespace.
#[derive(Clone, Debug)]
pub struct Store {
    zk: Zk,
    root: String,
    /// Who may use the nodes it makes: a host with a ZooKeeper identity (a tenant's) keeps them
    /// to that identity.
    access: Access,
}

impl Store {
    pub fn new(zk: Zk, root: &str, access: Access) -> Store {
        Store { zk, root: root.trim_end_matches('/').to_string(), access }
    }

    pub fn zk(&self) -> &Zk {
        &self.zk
    }

    fn blob(&self, sha: &str) -> String {
        format!("{}/blobs/{sha}", self.root)
    }

    fn chunk(&self, sha: &str, i: u32) -> String {
        format!("{}/blobs/{sha}/c-{i:05}", self.root)
    }

    pub fn recipe(&self, name: &str) -> String {
        format!("{}/recipes/{name}", self.root)
    }

    pub fn serving(&self, name: &str) -> String {
        format!("{}/recipes/{name}/serving", self.root)
    }

    pub fn canaries(&self, name: &str) -> String {
        format!("{}/recipes/{name}/canary", self.root)
    }

    fn history(&self, name: &str) -> String {
        format!("{}/recipes/{name}/history", self.root)
    }

    /// Stores `component` (its manifest filled in from `about`), unless a sealed copy is there
    /// already, in which case `about`'s signatures are added to it. Tried again through
    /// connection losses: every step can be repeated.
    /// `quota`: the most deflated bytes the registry's components may take, this one included.
    pub async fn put(
        &self,
        component: &[u8],
        about: Manifest,
        quota: Option<u64>,
    ) -> anyhow::Result<Manifest> {
        let sha = hex(&Sha256::digest(component));
        if sha != about.sha256 {
            bail!("the manifest names sha256 {} but the component's is {sha}", about.sha256);
        }
        let mut deflater = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        deflater.write_all(component)?;
        let stored = deflater.finish()?;
        let chunks: Vec<&[u8]> = stored.chunks(CHUNK_BYTES).collect();
        let manifest = Manifest {
            bytes: component.len() as u64,
            stored: stored.len() as u64,
            chunks: chunks.len() as u32,
            ..about
        };
        let blobs = format!("{}/blobs", self.root);
        retry(|| self.zk.mkdir(&blobs, self.access)).await.or_else(exists_ok)?;
        if let Some(quota) = quota {
            if self.manifest(&sha).await?.is_none() {
                let used = self.stored_bytes().await?;
                if used + manifest.stored > quota {
                    bail!(
                        "the registry's components take {used} bytes stored; this one ({} bytes deflated) would exceed the quota of {quota}",
                        manifest.stored
                    );
                }
            }
        }
        let blob = self.blob(&sha);
        match retry(|| self.zk.create(&blob, b"", NodeMode::Persistent, self.access)).await {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => bail!("storing {blob}: {e:?}"),
        }
        loop {
            let (data, stat) =
                retry(|| self.zk.get_data(&blob)).await.map_err(|e| anyhow!("reading {blob}: {e:?}"))?;
            if !data.is_empty() {
                // Sealed already: add the signatures it lacks.
                let mut sealed: Manifest =
                    serde_json::from_slice(&data).with_context(|| format!("{blob} holds no manifest"))?;
                let before = sealed.signatures.len();
                for s in &manifest.signatures {
                    if !sealed.signatures.contains(s) {
                        sealed.signatures.push(s.clone());
                    }
                }
                if sealed.signatures.len() == before {
                    return Ok(sealed);
                }
                let text = serde_json::to_vec(&sealed)?;
                match retry(|| self.zk.set_data(&blob, &text, Some(stat.version))).await {
                    Ok(_) => return Ok(sealed),
                    Err(ZkError::BadVersion) => continue,
                    Err(e) => bail!("adding signatures to {blob}: {e:?}"),
                }
            }
            // Every chunk (one there already, from an earlier try, is written again).
            let writes: Vec<_> = chunks
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let path = self.chunk(&sha, i as u32);
                    async move {
                        match retry(|| self.zk.create(&path, c, NodeMode::Persistent, self.access)).await {
                            Err(ZkError::NodeExists) => {
                                retry(|| self.zk.set_data(&path, c, None)).await.map(drop)
                            }
                            done => done.map(drop),
                        }
                        .map_err(|e| anyhow!("writing {path}: {e:?}"))
                    }
                })
                .collect();
            for w in futures_join(writes).await {
                w?;
            }
            let text = serde_json::to_vec(&manifest)?;
            match retry(|| self.zk.set_data(&blob, &text, Some(stat.version))).await {
                Ok(_) => return Ok(manifest),
                // Sealed by another publisher meanwhile (or by this one, its reply lost).
                Err(ZkError::BadVersion) => continue,
                Err(e) => bail!("sealing {blob}: {e:?}"),
            }
        }
    }

    /// The sealed manifest of `sha` and its node's version, or `None`.
    pub async fn manifest(&self, sha: &str) -> anyhow::Result<Option<(Manifest, i32)>> {
        let blob = self.blob(sha);
        match retry(|| self.zk.get_data(&blob)).await {
            Ok((data, _)) if data.is_empty() => Ok(None),
            Ok((data, stat)) => Ok(Some((
                serde_json::from_slice(&data).with_context(|| format!("{blob} holds no manifest"))?,
                stat.version,
            ))),
            Err(ZkError::NoNode) => Ok(None),
            Err(e) => bail!("reading {blob}: {e:?}"),
        }
    }

    /// The sealed component `sha`: its chunks read, inflated, and checked
    /// against its digest.
    pub async fn fetch(&self, sha: &str) -> anyhow::Result<(Manifest, Vec<u8>)> {
        let Some((manifest, _)) = self.manifest(sha).await? else {
            bail!("the registry holds no component {sha}");
        };
        let reads: Vec<_> = (0..manifest.chunks)
            .map(|i| {
                let path = self.chunk(sha, i);
                async move {
                    retry(|| self.zk.get_data(&path))
                        .await
                        .map(|(d, _)| d)
                        .map_err(|e| anyhow!("reading {path}: {e:?}"))
                }
            })
            .collect();
        let mut stored = Vec::with_capacity(manifest.stored as usize);
        for chunk in futures_join(reads).await {
            stored.extend_from_slice(&chunk?);
        }
        let mut component = Vec::with_capacity(manifest.bytes as usize);
        flate2::read::DeflateDecoder::new(&stored[..])
            .take(MAX_COMPONENT_BYTES + 1)
            .read_to_end(&mut component)
            .with_context(|| format!("inflating component {sha}"))?;
        if component.len() as u64 > MAX_COMPONENT_BYTES {
            bail!("component {sha} inflates past {MAX_COMPONENT_BYTES} bytes");
        }
        let got = hex(&Sha256::digest(&component));
        if got != sha {
            bail!("component {sha} read back with sha256 {got}: refused");
        }
        Ok((manifest, component))
    }

    /// Every recipe the registry holds.
    pub async fn names(&self) -> anyhow::Result<Vec<String>> {
        let dir = format!("{}/recipes", self.root);
        match retry(|| self.zk.children(&dir)).await {
            Ok(mut names) => {
                names.sort();
                Ok(names)
            }
            Err(ZkError::NoNode) => Ok(Vec::new()),
            Err(e) => bail!("listing {dir}: {e:?}"),
        }
    }

    /// Every recipe the registry holds, and a watch on that list (or on its parent's creation).
    pub async fn names_watch(&self) -> anyhow::Result<(Vec<String>, Watch)> {
        let dir = format!("{}/recipes", self.root);
        loop {
            match retry(|| self.zk.children_watch(&dir)).await {
                Ok(listed) => return Ok(listed),
                // Nothing published yet: watch for the first.
                Err(ZkError::NoNode) => match retry(|| self.zk.exists_watch(&dir)).await {
                    Ok((None, watch)) => return Ok((Vec::new(), watch)),
                    Ok(_) => continue,
                    Err(e) => bail!("watching {dir}: {e:?}"),
                },
                Err(e) => bail!("listing {dir}: {e:?}"),
            }
        }
    }

    /// The pointer of `name` and its node's version, if it was ever published.
    pub async fn pointer(&self, name: &str) -> anyhow::Result<Option<(Pointer, i32)>> {
        let path = self.recipe(name);
        match retry(|| self.zk.get_data(&path)).await {
            Ok((data, stat)) => Ok(Some((parse_pointer(&path, &data)?, stat.version))),
            Err(ZkError::NoNode) => Ok(None),
            Err(e) => bail!("reading {path}: {e:?}"),
        }
    }

    /// The pointer of `name`, and a watch on its change.
    pub async fn pointer_watch(&self, name: &str) -> anyhow::Result<(Option<(Pointer, i32)>, Watch)> {
        let path = self.recipe(name);
        loop {
            match retry(|| self.zk.get_data_watch(&path)).await {
                Ok((data, stat, watch)) => {
                    return Ok((Some((parse_pointer(&path, &data)?, stat.version)), watch))
                }
                Err(ZkError::NoNode) => match retry(|| self.zk.exists_watch(&path)).await {
                    Ok((None, watch)) => return Ok((None, watch)),
                    Ok(_) => continue,
                    Err(e) => bail!("watching {path}: {e:?}"),
                },
                Err(e) => bail!("reading {path}: {e:?}"),
            }
        }
    }

    /// Changes the pointer of `name` (at `version`, `None`: it does not exist yet) to `pointer`,
    /// with its history `event`, in one transaction that also checks that `blob` (a sha256 at a
    /// sealed version) is still as read.
    pub async fn change(
        &self,
        name: &str,
        version: Option<i32>,
        pointer: &Pointer,
        event: &Event,
        blob: Option<(&str, i32)>,
    ) -> Result<(), Refused> {
        let path = self.recipe(name);
        let data = serde_json::to_vec(pointer).expect("a pointer serializes");
        let mut ops = Vec::new();
        if let Some((sha, v)) = blob {
            ops.push(Op::Check { path: self.blob(sha), version: v });
        }
        match version {
            Some(v) => ops.push(Op::SetData { path: path.clone(), data, version: Some(v) }),
            None => {
                let recipes = format!("{}/recipes", self.root);
                match retry(|| self.zk.mkdir(&recipes, self.access)).await {
                    Ok(()) | Err(ZkError::NodeExists) => {}
                    Err(e) => return Err(Refused::Zk(e)),
                }
                ops.push(Op::Create { path: path.clone(), data, sequential: false, access: self.access });
                for dir in [self.history(name), self.serving(name), self.canaries(name)] {
                    ops.push(Op::Create {
                        path: dir,
                        data: Vec::new(),
                        sequential: false,
                        access: self.access,
                    });
                }
            }
        }
        let text = serde_json::to_vec(event).expect("an event serializes");
        ops.push(Op::Create {
            path: format!("{}/h-", self.history(name)),
            data: text,
            sequential: true,
            access: self.access,
        });
        let mut tries = 0;
        loop {
            match self.zk.multi(&ops).await {
                Ok(()) => return Ok(()),
                Err(MultiError { index: None, error: ZkError::ConnectionLoss }) if tries < TRIES => {
                    // Applied or not: the history says.
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    match self.history_of(name).await {
                        Ok(events) if events.iter().any(|e| e.id == event.id) => return Ok(()),
                        Ok(_) => continue,
                        Err(_) => continue,
                    }
                }
                Err(MultiError { index: Some(0), .. }) if blob.is_some() => return Err(Refused::NoBlob),
                Err(MultiError {
                    error: ZkError::BadVersion | ZkError::NodeExists | ZkError::NoNode,
                    ..
                }) => return Err(Refused::Raced),
                Err(MultiError { error, .. }) => return Err(Refused::Zk(error)),
            }
        }
    }

    /// The pointer's changes, oldest first.
    pub async fn history_of(&self, name: &str) -> anyhow::Result<Vec<Event>> {
        let dir = self.history(name);
        let mut names = match retry(|| self.zk.children(&dir)).await {
            Ok(names) => names,
            Err(ZkError::NoNode) => return Ok(Vec::new()),
            Err(e) => bail!("listing {dir}: {e:?}"),
        };
        names.sort();
        let reads: Vec<_> = names
            .iter()
            .map(|n| {
                let path = format!("{dir}/{n}");
                async move { (retry(|| self.zk.get_data(&path)).await, path) }
            })
            .collect();
        let mut events = Vec::new();
        for (read, path) in futures_join(reads).await {
            match read {
                Ok((data, _)) => events
                    .push(serde_json::from_slice(&data).with_context(|| format!("{path} holds no event"))?),
                Err(ZkError::NoNode) => {}
                Err(e) => bail!("reading {path}: {e:?}"),
            }
        }
        Ok(events)
    }

    /// Every following host's report on `name`.
    pub async fn reports(&self, name: &str) -> anyhow::Result<Vec<Report>> {
        Ok(self.reports_watch_inner(name, false).await?.0)
    }

    async fn reports_watch_inner(
        &self,
        name: &str,
        watched: bool,
    ) -> anyhow::Result<(Vec<Report>, Option<Watch>)> {
        let dir = self.serving(name);
        let (hosts, watch) = if watched {
            let (h, w) =
                retry(|| self.zk.children_watch(&dir)).await.map_err(|e| anyhow!("listing {dir}: {e:?}"))?;
            (h, Some(w))
        } else {
            match retry(|| self.zk.children(&dir)).await {
                Ok(h) => (h, None),
                Err(ZkError::NoNode) => (Vec::new(), None),
                Err(e) => bail!("listing {dir}: {e:?}"),
            }
        };
        let reads: Vec<_> = hosts
            .iter()
            .map(|h| {
                let path = format!("{dir}/{h}");
                async move { (retry(|| self.zk.get_data(&path)).await, h.clone()) }
            })
            .collect();
        let mut reports = Vec::new();
        for (read, host) in futures_join(reads).await {
            match read {
                Ok((data, _)) => reports.push(parse_report(&data, host)),
                Err(ZkError::NoNode) => {}
                Err(e) => bail!("reading {dir}/{host}: {e:?}"),
            }
        }
        reports.sort_by(|a, b| a.host.cmp(&b.host));
        Ok((reports, watch))
    }

    /// Writes this host's report on `name` (an ephemeral node of its session).
    pub async fn report(&self, name: &str, report: &Report) -> anyhow::Result<()> {
        let path = format!("{}/{}", self.serving(name), report.host);
        let data = serde_json::to_vec(report)?;
        self.own_ephemeral(&path, &data).await
    }

    /// Makes `path` an ephemeral node of this session holding `data`: set when this session
    /// owns it, made anew when another (this host's session before, expired or not yet) does.
    async fn own_ephemeral(&self, path: &str, data: &[u8]) -> anyhow::Result<()> {
        let mine = self.zk.session_id();
        for _ in 0..TRIES {
            match retry(|| self.zk.create(path, data, NodeMode::Ephemeral, self.access)).await {
                Ok(_) => return Ok(()),
                Err(ZkError::NodeExists) => {}
                Err(e) => bail!("writing {path}: {e:?}"),
            }
            match retry(|| self.zk.exists(path)).await {
                Ok(Some(stat)) if stat.ephemeral_owner == mine => {
                    match retry(|| self.zk.set_data(path, data, Some(stat.version))).await {
                        Ok(_) => return Ok(()),
                        Err(ZkError::NoNode | ZkError::BadVersion) => continue,
                        Err(e) => bail!("writing {path}: {e:?}"),
                    }
                }
                // Another session's (this host before a restart): replaced by this one's.
                Ok(Some(stat)) => match retry(|| self.zk.delete(path, Some(stat.version))).await {
                    Ok(()) | Err(ZkError::NoNode | ZkError::BadVersion) => continue,
                    Err(e) => bail!("replacing {path}: {e:?}"),
                },
                Ok(None) => continue,
                Err(e) => bail!("reading {path}: {e:?}"),
            }
        }
        bail!("writing {path}: it kept changing under this host")
    }

    /// Enters this host (`id`) in the list of hosts that follow the registry.
    pub async fn join(&self, id: &str) -> anyhow::Result<()> {
        let dir = format!("{}/hosts", self.root);
        retry(|| self.zk.mkdir(&dir, self.access)).await.or_else(exists_ok)?;
        self.own_ephemeral(&format!("{dir}/{id}"), &now_ms().to_string().into_bytes()).await
    }

    /// The hosts that follow the registry.
    pub async fn members(&self) -> anyhow::Result<Vec<String>> {
        let dir = format!("{}/hosts", self.root);
        match retry(|| self.zk.children(&dir)).await {
            Ok(mut hosts) => {
                hosts.sort();
                Ok(hosts)
            }
            Err(ZkError::NoNode) => Ok(Vec::new()),
            Err(e) => bail!("listing {dir}: {e:?}"),
        }
    }

    /// The hosts that follow the registry, and a watch on their list.
    pub async fn members_watch(&self) -> anyhow::Result<(Vec<String>, Option<Watch>)> {
        let dir = format!("{}/hosts", self.root);
        match retry(|| self.zk.children_watch(&dir)).await {
            Ok((mut hosts, watch)) => {
                hosts.sort();
                Ok((hosts, Some(watch)))
            }
            Err(ZkError::NoNode) => Ok((Vec::new(), None)),
            Err(e) => bail!("listing {dir}: {e:?}"),
        }
    }

    /// Every following host's report on `name`, each read with a watch on its change, and a
    /// watch on the list of reports.
    pub async fn reports_watched(&self, name: &str) -> anyhow::Result<(Vec<Report>, Vec<Watch>)> {
        let dir = self.serving(name);
        let (hosts, list) =
            retry(|| self.zk.children_watch(&dir)).await.map_err(|e| anyhow!("listing {dir}: {e:?}"))?;
        let mut watches = vec![list];
        let mut reports = Vec::new();
        for host in hosts {
            let path = format!("{dir}/{host}");
            match retry(|| self.zk.get_data_watch(&path)).await {
                Ok((data, _, watch)) => {
                    watches.push(watch);
                    reports.push(parse_report(&data, host));
                }
                Err(ZkError::NoNode) => {}
                Err(e) => bail!("reading {path}: {e:?}"),
            }
        }
        Ok((reports, watches))
    }

    /// Takes one of the `hosts` canary places of `sha` on `name` for this session, if one is free:
    /// the place's path.
    pub async fn take_canary_place(
        &self,
        name: &str,
        sha: &str,
        hosts: u32,
        me: &str,
    ) -> anyhow::Result<Option<String>> {
        let dir = self.canaries(name);
        let mine = self.zk.session_id();
        for i in 0..hosts {
            let path = format!("{dir}/{}-{i}", &sha[..12.min(sha.len())]);
            match retry(|| self.zk.create(&path, me.as_bytes(), NodeMode::Ephemeral, self.access)).await {
                Ok(_) => return Ok(Some(path)),
                Err(ZkError::NodeExists) => {
                    // This session's own, made by a try whose reply was lost?
                    if let Ok(Some(stat)) = retry(|| self.zk.exists(&path)).await {
                        if stat.ephemeral_owner == mine {
                            return Ok(Some(path));
                        }
                    }
                }
                Err(e) => bail!("taking a canary place at {path}: {e:?}"),
            }
        }
        Ok(None)
    }

    /// The canary places of `sha` on `name` and what each holder wrote there (`passed` once its
    /// host served long enough without a fault).
    pub async fn canary_places(&self, name: &str, sha: &str) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
        let dir = self.canaries(name);
        let prefix = format!("{}-", &sha[..12.min(sha.len())]);
        let places = match retry(|| self.zk.children(&dir)).await {
            Ok(p) => p,
            Err(ZkError::NoNode) => return Ok(Vec::new()),
            Err(e) => bail!("listing {dir}: {e:?}"),
        };
        let mut found = Vec::new();
        for place in places.into_iter().filter(|p| p.starts_with(&prefix)) {
            let path = format!("{dir}/{place}");
            if let Ok((data, _)) = retry(|| self.zk.get_data(&path)).await {
                found.push((path, data));
            }
        }
        Ok(found)
    }

    /// Marks this host's canary place as passed.
    pub async fn pass_canary_place(&self, path: &str, me: &str) -> anyhow::Result<()> {
        let data = format!("{me} passed");
        retry(|| self.zk.set_data(path, data.as_bytes(), None))
            .await
            .map(drop)
            .map_err(|e| anyhow!("marking {path}: {e:?}"))
    }

    /// Leaves a canary place.
    pub async fn leave_canary_place(&self, path: &str) {
        let _ = retry(|| self.zk.delete(path, None)).await;
    }

    /// The deflated bytes the registry's sealed components take, all told.
    pub async fn stored_bytes(&self) -> anyhow::Result<u64> {
        let dir = format!("{}/blobs", self.root);
        let blobs = match retry(|| self.zk.children(&dir)).await {
            Ok(b) => b,
            Err(ZkError::NoNode) => return Ok(0),
            Err(e) => bail!("listing {dir}: {e:?}"),
        };
        let mut total = 0;
        for sha in blobs {
            if let Some((m, _)) = self.manifest(&sha).await? {
                total += m.stored;
            }
        }
        Ok(total)
    }
}

/// Host `host`'s report as its node holds it (one that cannot be read says so).
fn parse_report(data: &[u8], host: String) -> Report {
    let mut r: Report = serde_json::from_slice(data).unwrap_or_else(|e| Report {
        state: "unreadable".into(),
        reason: Some(e.to_string()),
        ..Report::default()
    });
    r.host = host;
    r
}

fn parse_pointer(path: &str, data: &[u8]) -> anyhow::Result<Pointer> {
    serde_json::from_slice(data).with_context(|| format!("{path} holds no recipe pointer"))
}

fn exists_ok(e: ZkError) -> anyhow::Result<()> {
    match e {
        ZkError::NodeExists => Ok(()),
        e => Err(anyhow!("{e:?}")),
    }
}

/// `request` tried again while it is cut off by a connection loss (a write tried again may
/// find its own earlier effect: each caller says what that looks like).
async fn retry<T, F, Fut>(mut request: F) -> Result<T, ZkError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ZkError>>,
{
    let mut tries = 0;
    loop {
        match request().await {
            Err(ZkError::ConnectionLoss) if tries < TRIES => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(25 * u64::from(tries).min(20))).await;
            }
            done => return done,
        }
    }
}

/// Awaits `futures` one after the other; their outputs in order.
async fn futures_join<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut out = Vec::with_capacity(futures.len());
    for f in futures {
        out.push(f.await);
    }
    out
}
