//! Who holds a claim and who waits for it, in queue order, read from ZooKeeper on a plain
//! session: no recipe, no sandbox. What kazoo's `Lock.contenders()` and Curator's
//! `getParticipantNodes()` / `LeaderLatch.getParticipants()` show, for the wire formats wazoo's
//! recipes share with Curator.
//!
//! Every contender is an ephemeral sequential node whose name ends with a marker and ZooKeeper's
//! 10-digit sequence; the part before the marker (`_c_<uuid>-`, Curator's protected-mode prefix)
//! does not matter. Nodes are ordered by that sequence, as Curator sorts them.
//!
//! | kind | nodes | who holds |
//! |---|---|---|
//! | lock (`InterProcessMutex`) | `PATH/…lock-<seq>` | the first |
//! | read/write lock (`InterProcessReadWriteLock`) | `PATH/…__READ__<seq>`, `PATH/…__WRIT__<seq>` | a writer if it is first; a reader if no writer is before it |
//! | election (`LeaderLatch`) | `PATH/…latch-<seq>`, data: the participant's id | the first (the leader) |
//! | semaphore (`InterProcessSemaphoreV2`) | leases `PATH/leases/…lease-<seq>`, waiters' mutex `PATH/locks/…lock-<seq>` | see below |
//!
//! **The semaphore.** A contender first queues for the mutex `PATH/locks`; at its head, it
//! creates its lease node, and while there are more lease nodes than leases it waits (holding
//! the mutex) for one to go; then it lets go of the mutex. So every lease node holds, except
//! the last one while its contender still heads `locks/` waiting for a lease to free up. The
//! number of leases is not stored in ZooKeeper:
//!
//! - with `leases: Some(n)`, the first `n` lease nodes hold and later ones wait;
//! - with `None`, every lease node holds, except the last one when it is *paired* with the head
//!   of `locks/`: the same session owns both (`ephemeralOwner`) and the lease node was created
//!   after the lock node (a higher czxid), which is how a waiter makes them. Right after that
//!   contender acquired, and until it deletes its lock node a moment later, it still shows as
//!   waiting. A session may run several contenders (several handles of one wazoo host, several
//!   recipes of one Curator client), and in the moment between one contender reaching the head
//!   of `locks/` and creating its lease node, the newest lease node of another contender of the
//!   same session, created after that lock node, is paired with it instead: that lease node then
//!   shows as waiting and the waiter is not listed until its own lease node exists.
//!
//! The lease nodes come first, then the `locks/` nodes as waiters in their order, except the
//! head of `locks/` when it is paired with the last lease node: that is one contender, listed
//! once, by its lease node. Other `locks/` nodes are listed even when their session owns a lease
//! node, because that session may run another contender that really waits.
//!
//! A contender's token is its node's czxid, the fencing token the recipe returned to it. The
//! listing follows a `sync`, so a lagging server does not show a holder that is gone. Nodes that
//! vanish between the listing and their read are left out, and the states are those of the nodes
//! read. Children whose names match no format are ignored.

use std::future::Future;
use std::pin::Pin;

use zookeeper_client::Client;

use crate::error::from_client;
use crate::family::{sequence, Family, Marker, Nodes};
use crate::{paths, Mode, ZkError};

/// The kind of claim at a path, which says how its nodes are named and who holds: a family
/// whose contenders queue ([`Family::queued`]); its name is the CLI's (`lock`, `rwlock`,
/// `semaphore`, `election`).
pub type Kind = &'static Family;

/// Where a contender stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Holds the lock (a read or write lock, a lease), or leads.
    Holds,
    /// Waits in the queue.
    Waits,
}

/// One contender: its node and what ZooKeeper says of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Contender {
    /// The node's full path.
    pub node: String,
    /// The node's sequence (its 10-digit suffix).
    pub sequence: i64,
    pub state: State,
    /// Read or write: for a read/write lock only.
    pub mode: Option<Mode>,
    /// The node's data: an election participant's id; for a lock, whatever its client wrote
    /// (the holder's identity: `--id`, kazoo's identifier, Curator's client address).
    pub data: Vec<u8>,
    /// The session that owns the node (its `ephemeralOwner`).
    pub session: i64,
    /// The node's czxid: the fencing token the recipe returned to the contender.
    pub token: i64,
    /// When the node was made (its ctime), in milliseconds since the Unix epoch: when its
    /// contender queued (a holder that waited first holds since the node ahead of it went).
    pub since_ms: i64,
}

/// The contenders of a claim, in queue order: holders first.
#[derive(Clone, Debug, PartialEq)]
pub struct Contenders {
    /// The kind given, or the one the node names showed.
    pub kind: Kind,
    pub contenders: Vec<Contender>,
}

/// The contenders of the claim at `path`, in queue order. `kind` none: told by the children's
/// names (`invalid-argument` when they do not tell). `leases`: a semaphore's number of leases,
/// if known (ignored for other kinds; see the module's notes). A path that does not exist has
/// no contenders.
pub async fn read(
    zk: &crate::zk::Zk,
    path: &str,
    kind: Option<Kind>,
    leases: Option<u32>,
) -> Result<Contenders, ZkError> {
    let client = &zk.client;
    paths::check_node(path).map_err(ZkError::InvalidPath)?;
    if leases == Some(0) {
        return Err(ZkError::InvalidArgument("a semaphore has at least 1 lease".into()));
    }
    match client.sync(path).await {
        Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
        Err(e) => return Err(from_client(e)),
    }
    let given = kind.is_some();
    let kind = match kind {
        Some(kind) => kind,
        None => match detect(path, &list(client, path).await?)? {
            Some(kind) => kind,
            None => return Ok(Contenders { kind: &crate::family::LOCK, contenders: Vec::new() }),
        },
    };
    let contenders = match &kind.nodes {
        Nodes::Leases { leases: lease_dir, lease, locks, lock } => {
            let dirs = (paths::join(path, lease_dir), paths::join(path, locks));
            semaphore(client, dirs, (lease, lock), leases).await?
        }
        Nodes::Queue(markers) => {
            let queue = read_nodes(client, path, queued(markers, list(client, path).await?)).await?;
            let modes: Vec<Option<Mode>> = queue.iter().map(|c| c.mode).collect();
            queue.into_iter().zip(queue_states(&modes)).map(|(c, state)| Contender { state, ..c }).collect()
        }
        Nodes::Members => {
            return Err(ZkError::InvalidArgument(format!("a {} has no queue to read", kind.name)))
        }
    };
    // Nobody of the kind asked for, at a path whose children are all of another kind: the
    // wrong kind was given, which is no answer that nobody holds.
    if given && contenders.is_empty() {
        if let Ok(Some(other)) = detect(path, &list(client, path).await?) {
            if other != kind {
                return Err(ZkError::InvalidArgument(format!(
                    "{path} is a {} (its children are in that format), not a {}: pass --kind {}",
                    other.name, kind.name, other.name
                )));
            }
        }
    }
    Ok(Contenders { kind, contenders })
}

/// The lease nodes, then the waiters' mutex nodes (see the module's notes).
async fn semaphore(
    client: &Client,
    (lease_dir, lock_dir): (String, String),
    (lease, lock): (&str, &str),
    leases: Option<u32>,
) -> Result<Vec<Contender>, ZkError> {
    let lease_names = sequenced(list(client, &lease_dir).await?, lease, None);
    let lock_names = sequenced(list(client, &lock_dir).await?, lock, None);
    let held = read_nodes(client, &lease_dir, lease_names).await?;
    let waiting = read_nodes(client, &lock_dir, lock_names).await?;
    let owners: Vec<Owner> = held.iter().map(Owner::of).collect();
    let (states, paired) = semaphore_states(&owners, waiting.first().map(Owner::of), leases);
    let held = held.into_iter().zip(states).map(|(c, state)| Contender { state, ..c });
    Ok(held.chain(waiting.into_iter().skip(usize::from(paired))).collect())
}

/// The children of `dir`; none if it does not exist.
async fn list(client: &Client, dir: &str) -> Result<Vec<String>, ZkError> {
    match client.list_children(dir).await {
        Ok(children) => Ok(children),
        Err(zookeeper_client::Error::NoNode) => Ok(Vec::new()),
        Err(e) => Err(from_client(e)),
    }
}

/// A contender's node as its name shows it.
#[derive(Clone, Debug, PartialEq)]
struct Named {
    name: String,
    sequence: i64,
    mode: Option<Mode>,
}

/// Reads every node of `names` under `dir` (the requests go out together), keeping their order
/// and leaving out those already gone. Every state is `Waits` until the rules decide.
async fn read_nodes(client: &Client, dir: &str, names: Vec<Named>) -> Result<Vec<Contender>, ZkError> {
    received(send_reads(client, dir, names)).await
}

/// A node's read, sent: zookeeper-client sends a request when it is called, so reads sent one
/// after another (of one claim, or of every claim under a prefix) share round trips.
struct Sent {
    named: Named,
    node: String,
    reply: Pin<
        Box<dyn Future<Output = Result<(Vec<u8>, zookeeper_client::Stat), zookeeper_client::Error>> + Send>,
    >,
}

/// Sends the reads of every node of `names` under `dir`, in their order.
fn send_reads(client: &Client, dir: &str, names: Vec<Named>) -> Vec<Sent> {
    names
        .into_iter()
        .map(|named| {
            let node = paths::join(dir, &named.name);
            let reply = Box::pin(client.get_data(&node));
            Sent { named, node, reply }
        })
        .collect()
}

/// The contenders the reads `sent` found, in their order, leaving out the nodes already gone.
async fn received(sent: Vec<Sent>) -> Result<Vec<Contender>, ZkError> {
    let mut read = Vec::with_capacity(sent.len());
    for Sent { named, node, reply } in sent {
        match reply.await {
            Ok((data, stat)) => read.push(Contender {
                node,
                sequence: named.sequence,
                state: State::Waits,
                mode: named.mode,
                data,
                session: stat.ephemeral_owner,
                token: stat.czxid,
                since_ms: stat.ctime,
            }),
            Err(zookeeper_client::Error::NoNode) => {}
            Err(e) => return Err(from_client(e)),
        }
    }
    Ok(read)
}

/// The names of `children` that carry `marker`, with `mode`, ordered by sequence.
fn sequenced(children: Vec<String>, marker: &str, mode: Option<Mode>) -> Vec<Named> {
    let mut named: Vec<Named> = children
        .into_iter()
        .filter_map(|name| sequence(&name, marker).map(|sequence| Named { name, sequence, mode }))
        .collect();
    named.sort_by_key(|n| n.sequence);
    named
}

/// The contenders among `children` of a family that queues by `markers`, in order.
fn queued(markers: &[Marker], children: Vec<String>) -> Vec<Named> {
    let mut all: Vec<Named> = Vec::new();
    let mut rest = children;
    for marker in markers {
        let (these, others): (Vec<String>, Vec<String>) =
            rest.into_iter().partition(|name| sequence(name, marker.text).is_some());
        all.extend(sequenced(these, marker.text, marker.mode));
        rest = others;
    }
    all.sort_by_key(|n| n.sequence);
    all
}

/// The kind a child's name shows.
fn kind_of(name: &str) -> Option<Kind> {
    Family::of_child(name)
}

/// The one kind all of `children` (of `path`) show; none when there are no children.
fn detect(path: &str, children: &[String]) -> Result<Option<Kind>, ZkError> {
    let names: Vec<&str> = Family::queued().map(|f| f.name).collect();
    let pass = format!("pass the kind ({})", crate::family::or_list(&names));
    let mut found: Option<Kind> = None;
    for name in children {
        match (kind_of(name), found) {
            (None, _) => {
                return Err(ZkError::InvalidArgument(format!(
                    "cannot tell what claim {path} is: its child {name:?} is named in no known format; {pass}"
                )))
            }
            (Some(kind), Some(seen)) if kind != seen => {
                return Err(ZkError::InvalidArgument(format!(
                    "{path} has children of more than one kind ({} and {}); {pass}",
                    seen.name, kind.name
                )))
            }
            (kind, _) => found = kind,
        }
    }
    Ok(found)
}

/// Who holds in a queue ordered by sequence (a lock or election: every mode none; a read/write
/// lock: each node's mode): a writer, or a node of an exclusive kind, if it is first; a reader
/// if no writer is before it.
fn queue_states(modes: &[Option<Mode>]) -> Vec<State> {
    let mut writer_before = false;
    modes
        .iter()
        .enumerate()
        .map(|(i, mode)| {
            let holds = match mode {
                Some(Mode::Read) => !writer_before,
                _ => i == 0,
            };
            if !matches!(mode, Some(Mode::Read)) {
                writer_before = true;
            }
            if holds {
                State::Holds
            } else {
                State::Waits
            }
        })
        .collect()
}

/// What the semaphore rule looks at in a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Owner {
    session: i64,
    token: i64,
}

impl Owner {
    fn of(c: &Contender) -> Owner {
        Owner { session: c.session, token: c.token }
    }
}

/// The states of a semaphore's lease nodes (in order), given the head of `locks/` and the
/// number of leases if known; and whether that head is paired with the last lease node (the
/// same session, created before it): then it is the same contender, listed once.
fn semaphore_states(leases: &[Owner], head: Option<Owner>, limit: Option<u32>) -> (Vec<State>, bool) {
    let paired = match (leases.last(), head) {
        (Some(last), Some(head)) => last.session == head.session && last.token > head.token,
        _ => false,
    };
    let states = (0..leases.len())
        .map(|i| {
            let holds = match limit {
                Some(n) => i < n as usize,
                None => !(paired && i + 1 == leases.len()),
            };
            if holds {
                State::Holds
            } else {
                State::Waits
            }
        })
        .collect();
    (states, paired)
}

/// The most nodes [`under`] visits below a prefix before it gives up (`limit-exceeded`).
pub const MAX_VISITED: usize = 10_000;

/// kazoo's own formats, which wazoo's `lock-kazoo` and `rwlock-kazoo` share: `Lock` and
/// `WriteLock` make `…__lock__<seq>`, `ReadLock` `…__rlock__<seq>`, with the rules of a lock
/// and of a read/write lock. Listed as a lock, or a read/write lock when a reader is queued.
const KAZOO_LOCK: &[Marker] = &[Marker { text: "__lock__", mode: None }];
const KAZOO_RWLOCK: &[Marker] = &[
    Marker { text: "__rlock__", mode: Some(Mode::Read) },
    Marker { text: "__lock__", mode: Some(Mode::Write) },
];

/// A claim found by the walk, before its nodes are read.
enum Found {
    /// Contenders in one queue: `dir`'s children of a family's markers.
    Queue { dir: String, kind: Kind, names: Vec<Named> },
    /// A semaphore at `dir` (its lease and lock directories were listed, and every child of
    /// theirs is named as a semaphore names them).
    Semaphore { dir: String, kind: Kind, leases: (String, Vec<Named>), locks: (String, Vec<Named>) },
}

/// What one listing of the walk is of.
enum Item {
    /// A node whose children may be claims, or hold claims below them.
    Dir(String),
    /// A candidate semaphore's lease directory, then its lock directory (both are listed in the
    /// same round): a semaphore if every child of both is named as its family names them.
    Semaphore { dir: String, kind: Kind, leases: String, locks: String },
}

/// Every claim at `prefix` or below it, each with its contenders in queue order (as [`read`]
/// gives them, the kind told by the children's names), ordered by path. A directory is a claim
/// when some of its children are contenders' nodes of a queued family (Curator's and wazoo's
/// formats, and kazoo's `Lock`, `ReadLock` and `WriteLock`), or when it has a `leases` child
/// and its `leases` and `locks` children hold only a semaphore's nodes; a claim's other
/// children are walked too, but not those of a sequential node (a queue's item), nor a subtree
/// this session may not read (another application's ACL). The walk follows a `sync`; each
/// level of the tree is listed in one round trip, and every contender's node is read in one
/// more. Before each round `admit` is asked for the number of requests it sends (the host's
/// operations per second, [`crate::Host::spend_ops`]), and its refusal ends the walk. More than
/// `limit` nodes below `prefix`: `limit-exceeded`, which asks for a narrower prefix. A prefix
/// that does not exist has no claims.
pub async fn under(
    zk: &crate::zk::Zk,
    prefix: &str,
    limit: usize,
    admit: &(dyn Fn(usize) -> Result<(), ZkError> + Send + Sync),
) -> Result<Vec<(String, Contenders)>, ZkError> {
    let client = &zk.client;
    paths::check(prefix).map_err(ZkError::InvalidPath)?;
    admit(1)?;
    match client.sync(prefix).await {
        Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
        Err(e) => return Err(from_client(e)),
    }
    let mut visited = 1usize;
    let mut found: Vec<Found> = Vec::new();
    let mut items = vec![Item::Dir(prefix.to_string())];
    while !items.is_empty() {
        // Every listing of the level goes out before the first reply is awaited.
        admit(items.iter().map(|item| if matches!(item, Item::Dir(_)) { 1 } else { 2 }).sum())?;
        let sent: Vec<_> = items
            .iter()
            .map(|item| match item {
                Item::Dir(dir) => (Box::pin(client.list_children(dir)), None),
                Item::Semaphore { leases, locks, .. } => {
                    (Box::pin(client.list_children(leases)), Some(Box::pin(client.list_children(locks))))
                }
            })
            .collect();
        let mut next = Vec::new();
        for (item, (first, second)) in items.into_iter().zip(sent) {
            let first = listed(first.await)?;
            let second = match second {
                Some(reply) => listed(reply.await)?,
                None => Vec::new(),
            };
            visited += first.len() + second.len();
            if visited > limit {
                return Err(ZkError::LimitExceeded(format!(
                    "more than {limit} nodes under {prefix}: pass a narrower prefix"
                )));
            }
            match item {
                Item::Dir(dir) => classify(dir, first, &mut found, &mut next),
                Item::Semaphore { dir, kind, leases, locks } => {
                    let Nodes::Leases { lease, lock, .. } = &kind.nodes else { continue };
                    let all =
                        |names: &[String], marker: &str| names.iter().all(|n| sequence(n, marker).is_some());
                    if all(&first, *lease) && all(&second, *lock) {
                        let leases = (leases, sequenced(first, lease, None));
                        let locks = (locks, sequenced(second, lock, None));
                        found.push(Found::Semaphore { dir, kind, leases, locks });
                    } else {
                        // Not a semaphore's: each is a directory of its own.
                        classify(leases, first, &mut found, &mut next);
                        classify(locks, second, &mut found, &mut next);
                    }
                }
            }
        }
        items = next;
    }
    // Every contender's read goes out before the first reply is awaited.
    admit(
        found
            .iter()
            .map(|claim| match claim {
                Found::Queue { names, .. } => names.len(),
                Found::Semaphore { leases, locks, .. } => leases.1.len() + locks.1.len(),
            })
            .sum(),
    )?;
    let sent: Vec<_> = found
        .into_iter()
        .map(|claim| match claim {
            Found::Queue { dir, kind, names } => {
                let reads = send_reads(client, &dir, names);
                (dir, kind, reads, None)
            }
            Found::Semaphore { dir, kind, leases, locks } => {
                let held = send_reads(client, &leases.0, leases.1);
                let waiting = send_reads(client, &locks.0, locks.1);
                (dir, kind, held, Some(waiting))
            }
        })
        .collect();
    let mut claims = Vec::new();
    for (dir, kind, first, waiting) in sent {
        let first = received(first).await?;
        let contenders = match waiting {
            None => {
                let modes: Vec<Option<Mode>> = first.iter().map(|c| c.mode).collect();
                first
                    .into_iter()
                    .zip(queue_states(&modes))
                    .map(|(c, state)| Contender { state, ..c })
                    .collect()
            }
            Some(waiting) => {
                let waiting = received(waiting).await?;
                let owners: Vec<Owner> = first.iter().map(Owner::of).collect();
                let (states, paired) = semaphore_states(&owners, waiting.first().map(Owner::of), None);
                let held = first.into_iter().zip(states).map(|(c, state)| Contender { state, ..c });
                held.chain(waiting.into_iter().skip(usize::from(paired))).collect()
            }
        };
        let contenders: Vec<Contender> = contenders;
        if !contenders.is_empty() {
            claims.push((dir, Contenders { kind, contenders }));
        }
    }
    claims.sort_by(|a, b| (a.0.as_str(), a.1.kind.name).cmp(&(b.0.as_str(), b.1.kind.name)));
    Ok(claims)
}

/// A listing's children; none when the node is gone, or not ours to read (another
/// application's, under its own ACL, on a shared ensemble: its subtree is left out).
fn listed(reply: Result<Vec<String>, zookeeper_client::Error>) -> Result<Vec<String>, ZkError> {
    match reply {
        Ok(children) => Ok(children),
        Err(zookeeper_client::Error::NoNode | zookeeper_client::Error::NoAuth) => Ok(Vec::new()),
        Err(e) => Err(from_client(e)),
    }
}

/// Sorts the `children` of `dir`: contenders' nodes make claims of their families (`found`);
/// a `leases` child makes a candidate semaphore, whose directories are listed next; every
/// other child is walked (`next`).
fn classify(dir: String, children: Vec<String>, found: &mut Vec<Found>, next: &mut Vec<Item>) {
    let mut queues: Vec<(Kind, Vec<String>)> = Vec::new();
    let mut kazoo: Vec<String> = Vec::new();
    let mut semaphore: Option<Kind> = None;
    let mut rest = Vec::new();
    for name in children {
        match Family::of_child(&name) {
            Some(kind) if matches!(kind.nodes, Nodes::Queue(_)) => {
                match queues.iter_mut().find(|(k, _)| *k == kind) {
                    Some((_, names)) => names.push(name),
                    None => queues.push((kind, vec![name])),
                }
            }
            Some(kind) if matches!(kind.nodes, Nodes::Leases { leases, .. } if leases == name.as_str()) => {
                semaphore = Some(kind)
            }
            _ if KAZOO_RWLOCK.iter().any(|m| sequence(&name, m.text).is_some()) => kazoo.push(name),
            _ => rest.push(name),
        }
    }
    for (kind, names) in queues {
        if let Nodes::Queue(markers) = &kind.nodes {
            found.push(Found::Queue { dir: dir.clone(), kind, names: queued(markers, names) });
        }
    }
    if !kazoo.is_empty() {
        let readers = kazoo.iter().any(|n| sequence(n, KAZOO_RWLOCK[0].text).is_some());
        let (kind, markers) = match readers {
            true => (&crate::family::RWLOCK, KAZOO_RWLOCK),
            false => (&crate::family::LOCK, KAZOO_LOCK),
        };
        found.push(Found::Queue { dir: dir.clone(), kind, names: queued(markers, kazoo) });
    }
    if let Some(kind) = semaphore {
        if let Nodes::Leases { leases, locks, .. } = &kind.nodes {
            rest.retain(|name| name.as_str() != *locks);
            next.push(Item::Semaphore {
                leases: paths::join(&dir, leases),
                locks: paths::join(&dir, locks),
                dir: dir.clone(),
                kind,
            });
        }
    }
    // A sequential node (a queue's item, say) has no claims below it: not walked.
    next.extend(
        rest.into_iter().filter(|name| !is_sequential(name)).map(|name| Item::Dir(paths::join(&dir, &name))),
    );
}

/// Whether `name` ends with ZooKeeper's 10-digit sequence.
fn is_sequential(name: &str) -> bool {
    name.len() > 10 && name.as_bytes()[name.len() - 10..].iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::{ELECTION, LOCK as LOCKS, RWLOCK, SEMAPHORE};
    use State::{Holds, Waits};

    const LOCK: &str = "lock-";
    const READ: &str = "__READ__";
    const WRITE: &str = "__WRIT__";

    fn markers(kind: Kind) -> &'static [Marker] {
        match &kind.nodes {
            Nodes::Queue(markers) => markers,
            _ => &[],
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sequences_follow_the_marker() {
        assert_eq!(sequence("_c_0f-lock-0000000042", LOCK), Some(42));
        assert_eq!(sequence("lock-0000000000", LOCK), Some(0));
        assert_eq!(sequence("_c_0f-__WRIT__0000000007", WRITE), Some(7));
        assert_eq!(sequence("_c_0f-__WRIT__0000000007", READ), None);
        assert_eq!(sequence("_c_0f-lock-000000042", LOCK), None, "9 digits");
        assert_eq!(sequence("_c_0f-lock-00000000042", LOCK), None, "11 digits");
        assert_eq!(sequence("_c_0f-lock-00000000x2", LOCK), None);
        assert_eq!(sequence("_c_0f-latch-0000000001", LOCK), None);
        assert_eq!(sequence("0000000001", LOCK), None);
        assert_eq!(sequence("é", LOCK), None);
        assert_eq!(sequence("ab__lock__0000000001", LOCK), None, "kazoo's own lock names");
    }

    #[test]
    fn kinds_are_told_by_names() {
        let lock = names(&["_c_a-lock-0000000002", "_c_b-lock-0000000001"]);
        assert_eq!(detect("/p", &lock).unwrap(), Some(&LOCKS));
        let rw = names(&["_c_a-__READ__0000000001", "_c_b-__WRIT__0000000002"]);
        assert_eq!(detect("/p", &rw).unwrap(), Some(&RWLOCK));
        assert_eq!(detect("/p", &names(&["_c_a-latch-0000000001"])).unwrap(), Some(&ELECTION));
        assert_eq!(detect("/p", &names(&["leases", "locks"])).unwrap(), Some(&SEMAPHORE));
        assert_eq!(detect("/p", &names(&["locks"])).unwrap(), Some(&SEMAPHORE));
        assert_eq!(detect("/p", &[]).unwrap(), None);
        for bad in [names(&["_c_a-lock-0000000001", "_c_b-latch-0000000002"]), names(&["item-0000000001"])] {
            match detect("/p", &bad) {
                Err(ZkError::InvalidArgument(why)) => assert!(why.contains("pass the kind"), "{why}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn queues_are_ordered_by_sequence_and_strangers_ignored() {
        let children = names(&[
            "_c_c-lock-0000000010",
            "_c_a-lock-0000000003",
            "stray",
            "_c_b-lock-0000000007",
            "_c_d-latch-0000000001",
        ]);
        let order: Vec<i64> = queued(markers(&LOCKS), children).iter().map(|n| n.sequence).collect();
        assert_eq!(order, vec![3, 7, 10]);
        let children = names(&[
            "_c_w-__WRIT__0000000003",
            "_c_r-__READ__0000000004",
            "_c_r-__READ__0000000001",
            "_c_r-__READ__0000000002",
            "_c_x-lock-0000000000",
        ]);
        let order: Vec<(i64, Option<Mode>)> =
            queued(markers(&RWLOCK), children).iter().map(|n| (n.sequence, n.mode)).collect();
        assert_eq!(
            order,
            vec![(1, Some(Mode::Read)), (2, Some(Mode::Read)), (3, Some(Mode::Write)), (4, Some(Mode::Read))]
        );
    }

    #[test]
    fn exclusive_queues_have_one_holder() {
        assert_eq!(queue_states(&[None, None, None]), vec![Holds, Waits, Waits]);
        assert_eq!(queue_states(&[]), Vec::<State>::new());
    }

    #[test]
    fn readers_hold_until_a_writer_is_before_them() {
        let (r, w) = (Some(Mode::Read), Some(Mode::Write));
        assert_eq!(queue_states(&[r, r, w, r]), vec![Holds, Holds, Waits, Waits]);
        assert_eq!(queue_states(&[w, r, r]), vec![Holds, Waits, Waits]);
        assert_eq!(queue_states(&[w, w]), vec![Holds, Waits]);
        assert_eq!(queue_states(&[r, w, w]), vec![Holds, Waits, Waits]);
    }

    #[test]
    fn semaphore_leases_with_a_known_count() {
        let o = |session, token| Owner { session, token };
        let leases = [o(1, 10), o(2, 11), o(3, 12)];
        assert_eq!(semaphore_states(&leases, Some(o(3, 9)), Some(2)), (vec![Holds, Holds, Waits], true));
        assert_eq!(semaphore_states(&leases, Some(o(4, 13)), Some(2)), (vec![Holds, Holds, Waits], false));
        assert_eq!(semaphore_states(&leases, None, Some(5)), (vec![Holds, Holds, Holds], false));
    }

    #[test]
    fn semaphore_leases_with_an_unknown_count() {
        let o = |session, token| Owner { session, token };
        let leases = [o(1, 10), o(2, 11), o(3, 12)];
        // The head of locks/ made the last lease node: it waits, and is listed once.
        assert_eq!(semaphore_states(&leases, Some(o(3, 9)), None), (vec![Holds, Holds, Waits], true));
        // Another session heads locks/: it has no lease node yet; every lease node holds.
        assert_eq!(semaphore_states(&leases, Some(o(1, 9)), None), (vec![Holds; 3], false));
        // Same session, but the lock node is newer than the last lease: not the one who made it.
        assert_eq!(semaphore_states(&leases, Some(o(3, 13)), None), (vec![Holds; 3], false));
        assert_eq!(semaphore_states(&leases, None, None), (vec![Holds; 3], false));
        assert_eq!(semaphore_states(&[], Some(o(3, 9)), None), (vec![], false));
    }

    #[test]
    fn kind_names_round_trip() {
        for kind in [&LOCKS, &RWLOCK, &SEMAPHORE, &ELECTION] {
            assert_eq!(Family::holders_kind(kind.name), Ok(kind));
        }
        assert!(Family::holders_kind("queue").is_err());
        assert!(Family::holders_kind("group").is_err(), "a group has no queue");
    }
}
