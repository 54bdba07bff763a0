//! Held claims: one type for everything a caller holds through a recipe handle (a lock, a read
//! or write lock, a semaphore lease, a leadership, a group membership, a claimed queue item, an
//! ephemeral queue item, a double-barrier participant, a kept custom instance).
//!
//! A [`Contender`] is a fresh handle about to contend for one [`Want`]; once it holds, it becomes
//! a [`Claim`]. A claim carries its node, fencing token and the recipe version that took it,
//! says when it is [`lost`](Claim::lost), and lets go on [`release`](Claim::release); dropped, its
//! handle's ledger deletes its nodes. The CLI and the daemon hold these and nothing parallel.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::bindings::{Mode, ZkError};
use crate::error::RecipeError;
use crate::family::{self, mode_name, Family, Param, Said};
use crate::handle::{BarrierHandle, DynamicHandle, ElectionHandle, GroupHandle, LockHandle, QueueHandle};
use crate::handle::{ClaimHandle, RwLockHandle, SemaphoreHandle};
use crate::keeper::Live;
use crate::loss::{lost, Lost};
use crate::registry::{Version, World};

/// What a contender asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    /// The exclusive lock.
    Lock,
    /// The read/write lock in one mode.
    ReadWrite(Mode),
    /// One of `max_leases` leases of a semaphore.
    Lease { max_leases: u32 },
    /// Leadership of an election, campaigning as `id`.
    Leadership { id: String },
    /// Membership of a group as `name`, with `data`.
    Membership { name: String, data: Vec<u8> },
    /// A claim of a family served from its description (the `claim` world), with `data` as the
    /// contender's node data.
    Claim { family: &'static Family, data: Vec<u8> },
}

impl Want {
    /// The recipe world that serves it.
    pub fn world(&self) -> World {
        self.family().world
    }

    /// Its family's description.
    pub fn family(&self) -> &'static Family {
        match self {
            Want::Lock => &family::LOCK,
            Want::ReadWrite(_) => &family::RWLOCK,
            Want::Lease { .. } => &family::SEMAPHORE,
            Want::Leadership { .. } => &family::ELECTION,
            Want::Membership { .. } => &family::GROUP,
            Want::Claim { family, .. } => family,
        }
    }

    /// The one thing it names besides its path, if any.
    pub fn param(&self) -> Option<Param> {
        let (key, env, value, said) = match self {
            Want::ReadWrite(mode) => ("mode", "WAZOO_LOCK_MODE", mode_name(*mode).to_string(), Said::Before),
            Want::Leadership { id } => ("id", "WAZOO_LEADER_ID", id.clone(), Said::No),
            Want::Membership { name, .. } => ("member", "WAZOO_MEMBER", name.clone(), Said::AsName),
            Want::Claim { family, data } => {
                let spec = family.data.as_ref()?;
                (spec.key, spec.env, String::from_utf8_lossy(data).into_owned(), Said::No)
            }
            Want::Lock | Want::Lease { .. } => return None,
        };
        Some(Param { key, env, value, said })
    }

    /// A semaphore's number of leases; none for other kinds.
    pub fn leases(&self) -> Option<u32> {
        match self {
            Want::Lease { max_leases } => Some(*max_leases),
            _ => None,
        }
    }

    fn kind(&self) -> ClaimKind {
        match self {
            Want::Lock => ClaimKind::Lock,
            Want::ReadWrite(Mode::Read) => ClaimKind::Read,
            Want::ReadWrite(Mode::Write) => ClaimKind::Write,
            Want::Lease { .. } => ClaimKind::Lease,
            Want::Leadership { .. } => ClaimKind::Leadership,
            Want::Membership { .. } => ClaimKind::Membership,
            Want::Claim { .. } => ClaimKind::Described,
        }
    }
}

/// What a claim is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimKind {
    Lock,
    Read,
    Write,
    Lease,
    Leadership,
    Membership,
    /// A queue item claimed for processing: acked, or back in the queue when the claim ends.
    QueueClaim,
    /// An ephemeral queue item: gone when its producer's claim ends.
    QueueItem,
    /// A participant of a double barrier, until it leaves.
    Participant,
    /// A custom recipe instance kept between calls, with whatever it owns.
    Instance,
    /// A claim of a family served from its description.
    Described,
}

/// The handle behind a claim.
pub(crate) enum Holder {
    Lock(LockHandle),
    RwLock(RwLockHandle),
    Semaphore(SemaphoreHandle),
    Election(ElectionHandle),
    Group(GroupHandle),
    Claim(ClaimHandle),
    Queue(QueueHandle),
    Barrier(BarrierHandle),
    Dynamic(DynamicHandle),
    /// A claim taken up as its node alone ([`Claim::adopted`]).
    Node(NodeClaim),
}

/// A claim held as data: its node on a session, with no recipe instance behind it. Either
/// another process (a daemon of the group) made it, or a handle of this host did and gave its
/// instance back ([`Claim::into_data`]); this one watches it and lets it go by deleting it.
pub struct NodeClaim {
    live: Arc<Live>,
    node: String,
    /// Set once the node is deleted (or found gone).
    gone: bool,
    /// The recipe version that took it, when this host did: kept alive with the claim, so that
    /// a switch of protocol drains it as it drains handles.
    version: Option<Arc<Version>>,
    /// When this host made it: the czxid it was created with, and what the host counts its
    /// nodes in. Its delete is then sent unwaited and settled as a recipe's release is.
    made_here: Option<(i64, Arc<crate::state::Shared>)>,
}

impl NodeClaim {
    fn live(&self) -> &Arc<Live> {
        &self.live
    }

    fn version(&self) -> Option<&Arc<Version>> {
        self.version.as_ref()
    }

    fn lost(&self) -> impl Future<Output = Lost> + Send + 'static {
        lost(self.live.clone(), Some(self.node.clone()))
    }

    fn is_retired(&self) -> bool {
        true
    }

    fn tracks_nodes(&self) -> bool {
        !self.gone
    }

    fn tag(&mut self, _: Option<crate::state::ClaimTag>) {}

    fn fold(&mut self, _: crate::state::Fold) {}

    /// Deletes the node if it is still this session's. One this host made is deleted as a
    /// recipe's unwaited release deletes it: sent now, ahead of every later request of the
    /// session, and settled in the background.
    async fn let_go(&mut self) -> Result<(), RecipeError> {
        if self.gone {
            return Ok(());
        }
        if self.send_delete() {
            return Ok(());
        }
        let client = &self.live.client;
        let me = self.live.session_id();
        let mut attempt = 0;
        loop {
            let result = match client.check_stat(&self.node).await {
                Ok(Some(stat)) if stat.ephemeral_owner == me => {
                    match client.delete(&self.node, Some(stat.version)).await {
                        Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
                        Err(e) => Err(e),
                    }
                }
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            };
            match result {
                Ok(()) => {
                    self.gone = true;
                    return Ok(());
                }
                Err(zookeeper_client::Error::ConnectionLoss) if attempt < 3 => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
                }
                Err(e) => return Err(RecipeError::Zk(crate::error::from_client(e))),
            }
        }
    }

    /// Ends the claim without a release (its session ended, say): a node this host made is
    /// deleted only while it is still the one it created (its czxid), as a handle's ledger
    /// deletes what a closed handle owned.
    async fn close(mut self) {
        match self.made_here.take() {
            Some((czxid, shared)) => {
                self.gone = true;
                clean_made(self.live.clone(), self.node.clone(), czxid, shared).await;
            }
            None => {
                let _ = self.let_go().await;
            }
        }
    }

    /// Sends the unwaited delete of a node this host made: false for another's.
    fn send_delete(&mut self) -> bool {
        let Some((czxid, shared)) = self.made_here.take() else { return false };
        self.gone = true;
        let ledger = Arc::new(crate::ledger::Ledger::default());
        ledger.created(&self.node, czxid);
        ledger.releasing(&self.node);
        crate::state::send_unwaited(self.live.clone(), ledger, shared, self.node.clone(), Some(czxid));
        true
    }
}

impl Drop for NodeClaim {
    fn drop(&mut self) {
        // Dropped without a release (its owner went away): a node this host made goes as the
        // ledger of a dropped handle would delete it.
        if self.gone {
            return;
        }
        if let (Some((czxid, shared)), Ok(rt)) =
            (self.made_here.take(), tokio::runtime::Handle::try_current())
        {
            rt.spawn(clean_made(self.live.clone(), self.node.clone(), czxid, shared));
        }
    }
}

/// Deletes `node` (made by this host with `czxid`) if it is still that node, as a handle's
/// ledger cleans up, and counts it out of the host's nodes.
async fn clean_made(live: Arc<Live>, node: String, czxid: i64, shared: Arc<crate::state::Shared>) {
    let ledger = crate::ledger::Ledger::default();
    ledger.created(&node, czxid);
    let n = ledger.clean(&live.client).await;
    shared.usage.znodes.fetch_sub(n as i64, std::sync::atomic::Ordering::Relaxed);
}

/// `$body` with `$h` bound to the handle, whatever its type.
macro_rules! each {
    ($holder:expr, $h:ident => $body:expr) => {
        match $holder {
            Holder::Lock($h) => $body,
            Holder::RwLock($h) => $body,
            Holder::Semaphore($h) => $body,
            Holder::Election($h) => $body,
            Holder::Group($h) => $body,
            Holder::Claim($h) => $body,
            Holder::Queue($h) => $body,
            Holder::Barrier($h) => $body,
            Holder::Dynamic($h) => $body,
            Holder::Node($h) => $body,
        }
    };
}

impl Holder {
    fn live(&self) -> &Arc<Live> {
        each!(self, h => h.live())
    }

    fn version(&self) -> Option<&Arc<Version>> {
        each!(self, h => h.version())
    }

    /// Starts or stops holding the recipe's unwaited release back for its next contention.
    fn fold(&mut self, fold: crate::state::Fold) {
        each!(self, h => h.fold(fold))
    }

    /// Takes what `want` asks for at `path` through this handle.
    async fn take(
        &mut self,
        want: &Want,
        path: &str,
        timeout: Option<Duration>,
    ) -> Result<Granted, RecipeError> {
        let (node, token) = match (&mut *self, want) {
            (Holder::Lock(h), _) => h.acquire(path, timeout).await.map(|g| (g.node, g.token))?,
            (Holder::RwLock(h), Want::ReadWrite(mode)) => {
                h.acquire(path, *mode, timeout).await.map(|g| (g.node, g.token))?
            }
            (Holder::Semaphore(h), Want::Lease { max_leases }) => {
                h.acquire(path, *max_leases, timeout).await.map(|g| (g.node, g.token))?
            }
            (Holder::Election(h), Want::Leadership { id }) => {
                h.campaign(path, id, timeout).await.map(|g| (g.node, g.token))?
            }
            (Holder::Group(h), Want::Membership { name, data }) => {
                // Membership has no wait, and no token: the member's node is its name.
                h.join(path, name, data).await?;
                (if path == "/" { format!("/{name}") } else { format!("{path}/{name}") }, 0)
            }
            (Holder::Claim(h), Want::Claim { data, .. }) => {
                h.acquire(path, data, timeout).await.map(|g| (g.node, g.token))?
            }
            _ => unreachable!("a contender's handle is made for its want"),
        };
        each!(self, h => h.tag(None));
        Ok(Granted { node, token })
    }

    /// Lets go of what the handle holds; for the kinds that end only with their handle, nothing.
    async fn let_go(&mut self) -> Result<(), RecipeError> {
        match self {
            Holder::Lock(h) => h.release().await,
            Holder::RwLock(h) => h.release().await,
            Holder::Semaphore(h) => h.release().await,
            Holder::Election(h) => h.resign().await,
            Holder::Group(h) => h.leave().await,
            Holder::Claim(h) => h.release().await,
            // Closing the handle deletes the claim (the item goes back to the queue), the
            // participant's node, the ephemeral item, or whatever the instance owns.
            Holder::Queue(_) | Holder::Barrier(_) | Holder::Dynamic(_) => Ok(()),
            Holder::Node(n) => n.let_go().await,
        }
    }

    fn lost(&self) -> Pin<Box<dyn Future<Output = Lost> + Send>> {
        each!(self, h => Box::pin(h.lost()))
    }

    /// Whether it is a handle of the kind `want` needs.
    fn serves(&self, want: &Want) -> bool {
        matches!(
            (self, want),
            (Holder::Lock(_), Want::Lock)
                | (Holder::RwLock(_), Want::ReadWrite(_))
                | (Holder::Semaphore(_), Want::Lease { .. })
        )
    }

    /// Whether it may serve another claim: no call of it failed or was cancelled, and it
    /// tracks no node (what it held is let go of).
    fn reusable(&self) -> bool {
        each!(self, h => !h.is_retired() && !h.tracks_nodes())
    }

    async fn close(self) {
        each!(self, h => h.close().await)
    }
}

/// Handles of the lock family (lock, read/write lock, semaphore) whose last claim was let go of
/// cleanly, kept for the next contender of the same recipe: a warm instance costs no
/// instantiation and no first-call set-up. The rule is the one a handle lives by anyway: a
/// handle is reused only after calls that returned cleanly. One taken from here runs the
/// recipe's current version on the current session, holds nothing and tracks no node; any
/// other is closed.
pub struct Warm {
    handles: std::sync::Mutex<Vec<(String, Holder)>>,
    /// Most handles kept.
    cap: usize,
}

/// Most warm handles one host keeps: each is one of the instances the host's pool allows
/// (`SandboxLimits::max_instances`), so at most a quarter of those, and no more than 32.
const WARM_HANDLES: u32 = 32;

impl Warm {
    pub(crate) fn new(max_instances: u32) -> Warm {
        Warm { handles: Default::default(), cap: (max_instances / 4).min(WARM_HANDLES) as usize }
    }

    pub fn len(&self) -> usize {
        self.handles.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A warm handle of `recipe` for `want`, if one is still good for `version` on `live`.
    /// Handles of any recipe whose session is not `live` go (they hold nothing), as do this
    /// recipe's handles of another version.
    pub(crate) fn take(
        &self,
        recipe: &str,
        want: &Want,
        version: &Arc<Version>,
        live: &Arc<Live>,
    ) -> Option<Holder> {
        let (found, stale) = {
            let mut handles = self.handles.lock().unwrap();
            let (keep, stale): (Vec<_>, Vec<_>) =
                std::mem::take(&mut *handles).into_iter().partition(|(r, h)| {
                    Arc::ptr_eq(h.live(), live)
                        && live.ended().is_none()
                        && (r != recipe || h.version().is_some_and(|v| Arc::ptr_eq(v, version)))
                });
            *handles = keep;
            let found = handles.iter().rposition(|(r, h)| r == recipe && h.serves(want));
            (found.map(|at| handles.swap_remove(at).1), stale)
        };
        // Dropped outside the lock: a store's drop is not free.
        drop(stale);
        found
    }

    /// Ends every warm handle (an instantiation found the host's instances used up).
    pub(crate) fn clear(&self) -> usize {
        let all = std::mem::take(&mut *self.handles.lock().unwrap());
        all.len()
    }

    /// Keeps `holder` warm if it may be reused; closes it otherwise.
    async fn give_back(&self, recipe: String, holder: Holder) {
        if holder.reusable() {
            let mut handles = self.handles.lock().unwrap();
            if handles.len() < self.cap {
                handles.push((recipe, holder));
                return;
            }
        }
        holder.close().await;
    }
}

/// A fresh handle about to contend for one [`Want`] (the host makes it: `Host::contender`).
pub struct Contender {
    want: Want,
    holder: Holder,
    /// Where the handle goes back when its claim is let go of cleanly.
    warm: Option<(Arc<Warm>, String)>,
}

/// What [`Contender::acquire`] got: the node and fencing token, for [`Contender::claim`].
#[derive(Debug)]
pub struct Granted {
    node: String,
    token: i64,
}

impl Granted {
    pub fn node(&self) -> &str {
        &self.node
    }

    pub fn token(&self) -> i64 {
        self.token
    }
}

impl Contender {
    /// A contender for `want` with the handle `holder` (made, or taken warm, by the host);
    /// with `warm`, the handle goes back to that pool when its claim is let go of cleanly.
    pub(crate) fn new(want: Want, holder: Holder, warm: Option<(Arc<Warm>, String)>) -> Contender {
        Contender { want, holder, warm }
    }

    pub fn want(&self) -> &Want {
        &self.want
    }

    /// Names the claim this contender makes ([`crate::ClaimTag`]): its nodes carry the tag, and
    /// with `tag.retry` the acquire takes a node an earlier try of the same claim made.
    pub fn name_claim(&mut self, tag: crate::ClaimTag) {
        each!(&mut self.holder, h => h.tag(Some(tag)))
    }

    /// Says who this contender's claim is for (`wazoo lock --id`; through a daemon, the client's
    /// id, session name and address): the data of its node, where its recipe leaves the node's
    /// data blank, as every standard claim recipe but an election does. Curator and kazoo show a
    /// contender's data as its client's identity; so does [`crate::holders`].
    pub fn identify(&mut self, identity: &str) {
        let identity: Option<std::sync::Arc<str>> = (!identity.is_empty()).then(|| identity.into());
        match &mut self.holder {
            Holder::Lock(h) => h.identify(identity),
            Holder::RwLock(h) => h.identify(identity),
            Holder::Semaphore(h) => h.identify(identity),
            Holder::Election(h) => h.identify(identity),
            Holder::Group(h) => h.identify(identity),
            Holder::Claim(h) => h.identify(identity),
            Holder::Queue(h) => h.identify(identity),
            Holder::Barrier(h) => h.identify(identity),
            Holder::Dynamic(h) => h.identify(identity),
            // A node taken up as it is: made already.
            Holder::Node(_) => {}
        }
    }

    /// Blocks until what is wanted at `path` is held, or `timeout` passes (`timeout`, leaving no
    /// node). Cancelled (dropped mid-call), the handle is retired: [`Contender::close`] it.
    pub async fn acquire(&mut self, path: &str, timeout: Option<Duration>) -> Result<Granted, RecipeError> {
        self.holder.take(&self.want, path, timeout).await
    }

    /// The election handle of a leadership contender, to acknowledge the leadership once had.
    pub fn election(&mut self) -> Option<&mut ElectionHandle> {
        match &mut self.holder {
            Holder::Election(h) => Some(h),
            _ => None,
        }
    }

    /// The session it runs on.
    pub fn live(&self) -> &Arc<Live> {
        self.holder.live()
    }

    /// The claim `granted` by [`Contender::acquire`] at `path`.
    pub fn claim(self, granted: Granted) -> Claim {
        Claim {
            kind: self.want.kind(),
            node: granted.node,
            token: granted.token,
            holder: Some(self.holder),
            warm: self.warm,
            want: Some(self.want),
        }
    }

    /// Ends the handle, deleting whatever nodes it made (a waiting node leaves the queue).
    pub async fn close(self) {
        self.holder.close().await
    }
}

/// Something held through a recipe handle. Dropped without [`Claim::release`] or
/// [`Claim::close`], its handle's ledger deletes its nodes in the background.
pub struct Claim {
    kind: ClaimKind,
    node: String,
    token: i64,
    /// Taken by `release` and `close`.
    holder: Option<Holder>,
    /// Where a cleanly released handle goes back ([`Warm`]).
    warm: Option<(Arc<Warm>, String)>,
    /// What its contender wanted, to take it again ([`Claim::requeue`]).
    want: Option<Want>,
}

impl Claim {
    /// A queue item `node` claimed by `handle` for processing.
    pub fn queue_claim(handle: QueueHandle, node: String) -> Claim {
        Claim::kept(ClaimKind::QueueClaim, Holder::Queue(handle), node)
    }

    /// An ephemeral queue item `node` put by `handle`.
    pub fn queue_item(handle: QueueHandle, node: String) -> Claim {
        Claim::kept(ClaimKind::QueueItem, Holder::Queue(handle), node)
    }

    /// A double-barrier participant entered through `handle`.
    pub fn participant(handle: BarrierHandle, node: String) -> Claim {
        Claim::kept(ClaimKind::Participant, Holder::Barrier(handle), node)
    }

    /// A custom instance kept with whatever it owns.
    pub fn instance(handle: DynamicHandle) -> Claim {
        Claim::kept(ClaimKind::Instance, Holder::Dynamic(handle), String::new())
    }

    /// A claim of `kind` taken up as its `node` alone, with fencing token `token`, on `live`
    /// (a session adopted from another daemon of the group): lost when the node goes or the
    /// session ends, released by deleting the node.
    pub fn adopted(kind: ClaimKind, live: Arc<Live>, node: String, token: i64) -> Claim {
        let holder =
            Holder::Node(NodeClaim { live, node: node.clone(), gone: false, version: None, made_here: None });
        Claim { kind, node, token, holder: Some(holder), warm: None, want: None }
    }

    fn kept(kind: ClaimKind, holder: Holder, node: String) -> Claim {
        Claim { kind, node, token: 0, holder: Some(holder), warm: None, want: None }
    }

    pub fn kind(&self) -> ClaimKind {
        self.kind
    }

    /// The node that holds it (empty for an instance).
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The fencing token: the node's czxid (0 for the kinds without one).
    pub fn token(&self) -> i64 {
        self.token
    }

    fn holder(&self) -> &Holder {
        self.holder.as_ref().expect("a claim keeps its handle until it is consumed")
    }

    /// The recipe version that took it (it keeps running that version until it ends).
    pub fn version(&self) -> Option<&Arc<Version>> {
        self.holder().version()
    }

    /// The ZooKeeper session it lives on.
    pub fn live(&self) -> &Arc<Live> {
        self.holder().live()
    }

    /// Resolves when it is lost ([`Lost`]): the session ended, its node was deleted or revoked,
    /// or ZooKeeper answered nothing for 2/3 of the session timeout. Take it right after
    /// acquiring.
    pub fn lost(&self) -> impl Future<Output = Lost> + Send + 'static {
        self.holder().lost()
    }

    /// The leadership's handle, to acknowledge it.
    pub fn election(&mut self) -> Option<&mut ElectionHandle> {
        match self.holder.as_mut() {
            Some(Holder::Election(h)) => Some(h),
            _ => None,
        }
    }

    /// The queue handle of a claimed or put item, to ack it.
    pub fn queue(&mut self) -> Option<&mut QueueHandle> {
        match self.holder.as_mut() {
            Some(Holder::Queue(h)) => Some(h),
            _ => None,
        }
    }

    /// A double-barrier participant's handle, to leave.
    pub fn barrier(&mut self) -> Option<&mut BarrierHandle> {
        match self.holder.as_mut() {
            Some(Holder::Barrier(h)) => Some(h),
            _ => None,
        }
    }

    /// The kept instance's handle, for further calls.
    pub fn instance_mut(&mut self) -> Option<&mut DynamicHandle> {
        match self.holder.as_mut() {
            Some(Holder::Dynamic(h)) => Some(h),
            _ => None,
        }
    }

    /// Lets go (unlock, resign, leave; a claimed item goes back to the queue), then ends the
    /// handle, deleting whatever nodes it still owns. The handle ends even when letting go fails.
    pub async fn release(mut self) -> Result<(), RecipeError> {
        let Some(mut holder) = self.holder.take() else { return Ok(()) };
        let outcome = holder.let_go().await;
        match (self.warm.take(), &outcome) {
            (Some((warm, recipe)), Ok(())) => warm.give_back(recipe, holder).await,
            _ => holder.close().await,
        }
        outcome
    }

    /// The claim kept as data, its recipe instance given back: its node, fencing token and
    /// recipe version, lost as before ([`Claim::lost`]), and let go of by deleting its node, as
    /// a recipe's release does (sent unwaited, settled in the background). A lock, read/write
    /// lock or lease whose handle owns its node and nothing else is kept so: for these families
    /// the node is the claim, as it is for a claim taken up after a fail-over
    /// ([`Claim::adopted`]). Any other claim comes back as it was. A claim kept as data cannot
    /// be taken again ([`Claim::requeue`]).
    pub async fn into_data(mut self) -> Claim {
        let given_up = match self.holder.as_mut() {
            Some(Holder::Lock(h)) => h.give_up_node(&self.node),
            Some(Holder::RwLock(h)) => h.give_up_node(&self.node),
            Some(Holder::Semaphore(h)) => h.give_up_node(&self.node),
            _ => None,
        };
        let Some(made_here) = given_up else { return self };
        let holder = self.holder.take().expect("checked above");
        let (live, version) = (holder.live().clone(), holder.version().cloned());
        // Made before anything is awaited: the node is always someone's to delete.
        let node =
            NodeClaim { live, node: self.node.clone(), gone: false, version, made_here: Some(made_here) };
        // It owns nothing now: closing it deletes nothing, and its instance goes back.
        holder.close().await;
        Claim {
            kind: self.kind,
            node: std::mem::take(&mut self.node),
            token: self.token,
            holder: Some(Holder::Node(node)),
            warm: None,
            want: None,
        }
    }

    /// Names the claim [`Claim::requeue`] takes next, as [`Contender::name_claim`] names an
    /// acquire's: its new node carries the tag (a client's claim id through a daemon, so that
    /// a retried acquire finds it after a fail-over).
    pub fn name_claim(&mut self, tag: crate::ClaimTag) {
        if let Some(holder) = self.holder.as_mut() {
            each!(holder, h => h.tag(Some(tag)))
        }
    }

    /// Lets go and takes the same claim again at `path`, at the back of its queue (the next
    /// holder, if any is waiting, goes first): the hand-over of a client that takes a lock in a
    /// loop, a leader that campaigns again, a lease given back for another.
    ///
    /// Where the recipe releases with `znode.delete-unwaited` and contends through the host's
    /// `contention` (every standard claim recipe but the election), the release and the new
    /// node's create go to ZooKeeper as one `multi`, with the listing behind it: one write for
    /// the hand-over, where a release and an acquire take two, and one round trip when nobody
    /// else queued meanwhile (else one more, to read the new node's czxid, which ZooKeeper 3.8
    /// leaves out of a `multi`'s answer). ZooKeeper applies both or neither; a lost reply is
    /// settled by looking for the new node. Otherwise the release is sent first, as
    /// [`Claim::release`] sends it.
    ///
    /// Only a claim a [`Contender`] made can be taken again: any other is closed, and the call
    /// is `invalid-argument`. On an error the claim is let go of and its handle ended.
    pub async fn requeue(mut self, path: &str, timeout: Option<Duration>) -> Result<Claim, RecipeError> {
        let Some(want) = self.want.take() else {
            let kind = self.kind;
            self.close().await;
            return Err(RecipeError::Zk(ZkError::InvalidArgument(format!(
                "a {kind:?} claim cannot be taken again: only an acquired one"
            ))));
        };
        let Some(mut holder) = self.holder.take() else {
            return Err(RecipeError::Zk(ZkError::InvalidArgument("the claim is let go of already".into())));
        };
        use crate::state::Fold;
        holder.fold(Fold::Hold);
        let taken = match holder.let_go().await {
            // A recipe whose release sent nothing unwaited holds nothing back: whatever its
            // acquire releases goes at once, so nothing it waits on is held.
            Ok(()) => {
                holder.fold(Fold::HoldNoMore);
                holder.take(&want, path, timeout).await
            }
            Err(e) => Err(e),
        };
        holder.fold(Fold::Send);
        match taken {
            Ok(granted) => Ok(Claim {
                kind: self.kind,
                node: granted.node,
                token: granted.token,
                holder: Some(holder),
                warm: self.warm.take(),
                want: Some(want),
            }),
            Err(e) => {
                holder.close().await;
                Err(e)
            }
        }
    }

    /// Ends the handle now without asking the recipe to let go: its ledger deletes its nodes.
    pub async fn close(mut self) {
        if let Some(holder) = self.holder.take() {
            holder.close().await;
        }
    }
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("kind", &self.kind)
            .field("node", &self.node)
            .field("token", &self.token)
            .finish()
    }
}
