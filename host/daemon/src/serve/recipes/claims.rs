//! The claims every claiming family shares: Acquire (a lock, a read or a write lock, a
//! semaphore's lease, by `Family`), Release, a `Hold` stream's claims one after another, a
//! claim's Lost stream, and Resume of a claim taken up from another member of the group; and
//! their messages: what an Acquire asks for (`want_of`), its claim id (`claim_tag`), a granted
//! claim as a `Claim` (`claim`, which Campaign and GroupJoin make theirs with too).

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::{millis, or, Service};
use crate::serve::state::{ClientSession, Ended, State, StreamSlot};
use crate::serve::Events;
use crate::wire::{self, no_handle, status};
use wazoo_runtime::{Claim, Mode, Want};

use wazoo_proto as pb;

pub(super) async fn acquire(
    service: &Service,
    request: Request<pb::AcquireRequest>,
) -> Result<Response<pb::Claim>, Status> {
    let req = request.into_inner();
    let want = want_of(&req)?;
    let recipe = or(&req.recipe, want.family().recipe).to_string();
    service
        .measured("Acquire", &recipe, async {
            let session = service.session(req.session)?;
            let named = claim_tag(req.session, &req.claim_id, req.retry)?;
            let holder = identity(&session, &req.holder_id)?;
            let timeout = millis(req.timeout_ms);
            claim(service, &session, want, &recipe, &req.path, timeout, named, &holder, Kept::AsData).await
        })
        .await
}

pub(super) async fn release(
    service: &Service,
    request: Request<pb::HandleRef>,
) -> Result<Response<pb::Empty>, Status> {
    let req = request.into_inner();
    service.measured("Release", "", service.release_handle(req.session, req.handle)).await
}

pub(super) async fn hold(
    service: &Service,
    request: Request<Streaming<pb::HoldRequest>>,
) -> Result<Response<Events<pb::HoldEvent>>, Status> {
    let steps = request.into_inner();
    let slot = service.stream_slot()?;
    let (tx, rx) = mpsc::channel(2);
    tokio::spawn(Service(service.0.clone()).holding(steps, slot, tx));
    Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
}

pub(super) async fn lost(
    service: &Service,
    request: Request<pb::HandleRef>,
) -> Result<Response<Events<pb::LostEvent>>, Status> {
    let req = request.into_inner();
    let (_, entry) = service.entry(req.session, req.handle)?;
    let lost = match entry.held.lock().await.as_ref() {
        Some(held) => held.lost(),
        None => return Err(wire::unknown_handle(format!("handle: {} was released", req.handle))),
    };
    let ended = entry.ended.subscribe();
    let ending = entry.ending();
    let meter = std::sync::Arc::downgrade(&entry);
    let mut slot = service.stream_slot()?;
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        let event = tokio::select! {
            // What happened to the claim itself goes first when several are ready.
            biased;
            // A handle ended in the daemon deletes its node too: the loss is told as that
            // end, and a claim given up on purpose (a Release) is no loss at all.
            why = lost => match *ended.borrow() {
                Some(how) => how.loss().and_then(wire::ended_event),
                None => {
                    meter.upgrade().inspect(|e| e.lost(crate::metrics::loss_reason(&why)));
                    Some(wire::lost_event(&why))
                }
            },
            how = ending => how.loss().and_then(wire::ended_event),
            // The daemon or the tenant stopping closes the claim's ZooKeeper session (a
            // claim released just before is still no loss).
            () = slot.stopped() => match *ended.borrow() {
                Some(how) => how.loss().and_then(wire::ended_event),
                None => wire::ended_event(pb::LossReason::SessionClosed),
            },
            _ = tx.closed() => None,
        };
        if let Some(event) = event {
            let _ = tx.send(Ok(event)).await;
        }
    });
    Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
}

pub(super) async fn resume(
    service: &Service,
    request: Request<pb::ResumeRequest>,
) -> Result<Response<pb::Claim>, Status> {
    let req = request.into_inner();
    service
        .measured("Resume", "", async {
            let session = service.session(req.session)?;
            wazoo_runtime::paths::check_node(&req.node)
                .map_err(|why| wire::invalid_argument(format!("node: {why}")))?;
            let _reserved = service.room_for_handle(&session)?;
            let live = session.host.live().await.map_err(wire::no_zookeeper)?;
            let stat =
                live.zk().exists(&req.node).await.map_err(|e| {
                    wire::no_zookeeper(anyhow::anyhow!("{}", wazoo_runtime::error::describe(&e)))
                })?;
            let held = stat.is_some_and(|s| {
                s.ephemeral_owner == live.session_id()
                    && (req.fencing_token == 0 || s.czxid == req.fencing_token)
            });
            if !held {
                return Err(wire::unknown_handle(format!(
                    "handle: {} is not held in this session (gone, or another's)",
                    req.node
                )));
            }
            let claim = Claim::adopted(kind_of_node(&req.node), live, req.node.clone(), req.fencing_token);
            let handle = service.keep(&session, claim).await?;
            tracing::info!(session = req.session, node = %req.node, "claim taken up");
            Ok(pb::Claim {
                handle,
                node: req.node,
                fencing_token: req.fencing_token,
                recipe_version: String::new(),
            })
        })
        .await
}

/// A `Hold` stream's step that takes a claim: a first one, or the held one again.
enum Taking {
    Acquire(pb::AcquireRequest),
    Again(Holding),
}

/// The claim a `Hold` stream holds.
struct Holding {
    session: u64,
    handle: u64,
    /// The acquire that took it, for a `requeue`.
    request: pb::AcquireRequest,
    /// Resolves when the claim is lost; followed until it has been told.
    lost: std::pin::Pin<Box<dyn std::future::Future<Output = wazoo_runtime::Lost> + Send>>,
    /// Resolves, with how, once the handle ends outside this stream (a Release from another
    /// call, its client session ending): followed until it has.
    ending: std::pin::Pin<Box<dyn std::future::Future<Output = Ended> + Send>>,
    /// How the handle ended, once it has: looked at when the claim's loss comes, since ending
    /// the handle deletes its node too.
    ended: tokio::sync::watch::Receiver<Option<Ended>>,
    /// The handle's entry, to count the claim's loss in the metrics.
    meter: std::sync::Weak<crate::serve::state::Entry>,
    /// Whether the stream was told the claim is lost (once).
    told: bool,
    /// Whether the handle ended outside this stream: a `release` then has nothing to let go.
    gone: bool,
}

impl Holding {
    /// The one `lost` event of a claim that ended outside the stream `how`.
    fn ended_event(how: Ended) -> Option<pb::LostEvent> {
        match how {
            Ended::Released => wire::ended_event(pb::LossReason::Released),
            how => how.loss().and_then(wire::ended_event),
        }
    }
}

impl Service {
    /// Lets go of `handle` of `session` and ends it.
    async fn release_handle(&self, session: u64, handle: u64) -> Result<pb::Empty, Status> {
        let (session, entry) = self.entry(session, handle)?;
        session.handles.lock().unwrap().remove(&handle);
        entry.ended.send_replace(Some(Ended::Released));
        let held = entry.held.lock().await.take();
        let Some(held) = held else { return Ok(pb::Empty {}) };
        held.release().await.map(|()| pb::Empty {}).map_err(status)
    }

    /// Serves one `Hold` stream: its steps in order, the held claim's loss as it comes, and on
    /// the way out the release of a claim still held.
    async fn holding(
        self,
        mut steps: Streaming<pb::HoldRequest>,
        mut slot: StreamSlot,
        tx: mpsc::Sender<Result<pb::HoldEvent, Status>>,
    ) {
        use pb::hold_event::Event;
        use pb::hold_request::Step;
        let event = |event: Event| Ok(pb::HoldEvent { event: Some(event) });
        let mut held: Option<Holding> = None;
        let ended: Result<(), Status> = loop {
            let step = match held.as_mut() {
                None => tokio::select! {
                    step = steps.message() => step,
                    () = slot.stopped() => break Ok(()),
                },
                Some(Holding { lost, ending, ended, meter, told, gone, .. }) => {
                    let told_now = tokio::select! {
                        // What happened to the claim goes before the next step and the stop.
                        biased;
                        // A handle ended outside the stream deletes its node too: the loss is
                        // told as that end.
                        why = lost, if !*told => {
                            let how = *ended.borrow();
                            Ok(match how {
                                Some(how) => Holding::ended_event(how),
                                None => {
                                    meter.upgrade().inspect(|e| e.lost(crate::metrics::loss_reason(&why)));
                                    Some(wire::lost_event(&why))
                                }
                            })
                        }
                        how = ending, if !*gone => {
                            *gone = true;
                            Ok(if *told { None } else { Holding::ended_event(how) })
                        }
                        step = steps.message() => Err(step),
                        // The daemon or the tenant stopping closes the claim's ZooKeeper session.
                        () = slot.stopped() => {
                            if !*told {
                                let lost = match *ended.borrow() {
                                    Some(how) => Holding::ended_event(how),
                                    None => wire::ended_event(pb::LossReason::SessionClosed),
                                };
                                if let Some(lost) = lost {
                                    let _ = tx.send(event(Event::Lost(lost))).await;
                                }
                            }
                            break Ok(());
                        }
                    };
                    match told_now {
                        Err(step) => step,
                        Ok(lost) => {
                            if let (Some(lost), false) = (lost, *told) {
                                *told = true;
                                if tx.send(event(Event::Lost(lost))).await.is_err() {
                                    break Ok(());
                                }
                            }
                            continue;
                        }
                    }
                }
            };
            let step = match step {
                Ok(Some(pb::HoldRequest { step: Some(step) })) => step,
                Ok(Some(pb::HoldRequest { step: None })) => {
                    break Err(wire::invalid_argument("a HoldRequest names no step"))
                }
                // The client's side ended, or the stream broke.
                Ok(None) | Err(_) => break Ok(()),
            };
            let taking = match step {
                Step::Acquire(_) if held.is_some() => {
                    break Err(wire::invalid_argument("this stream holds a claim already: release it first"))
                }
                Step::Acquire(req) => Taking::Acquire(req),
                Step::Requeue(_) => {
                    let Some(holding) = held.take() else {
                        break Err(wire::invalid_argument("this stream holds no claim to take again"));
                    };
                    if holding.gone {
                        break Err(wire::unknown_handle(format!(
                            "handle: {} ended outside this stream: acquire again",
                            holding.handle
                        )));
                    }
                    Taking::Again(holding)
                }
                Step::Release(_) => {
                    let Some(holding) = held.take() else {
                        break Err(wire::invalid_argument("this stream holds no claim to release"));
                    };
                    // A handle that ended outside the stream has nothing left to let go.
                    if !holding.gone {
                        let released = self
                            .measured(
                                "Hold/release",
                                "",
                                self.release_handle(holding.session, holding.handle),
                            )
                            .await;
                        if let Err(e) = released {
                            break Err(e);
                        }
                    }
                    if tx.send(event(Event::Released(pb::Empty {}))).await.is_err() {
                        break Ok(());
                    }
                    continue;
                }
            };
            let taken = tokio::select! {
                taken = async {
                    match taking {
                        Taking::Acquire(req) => self.acquire_held(req).await,
                        Taking::Again(holding) => self.requeue_held(holding).await,
                    }
                } => taken,
                // Nobody to hand the claim to: dropping the call ends its handle (a claim being
                // taken again is dropped, and its handle's ledger deletes its nodes).
                () = tx.closed() => break Ok(()),
                () = slot.stopped() => break Ok(()),
            };
            match taken {
                Ok((claim, holding)) => {
                    held = Some(holding);
                    if tx.send(event(Event::Claim(claim))).await.is_err() {
                        break Ok(());
                    }
                }
                Err(e) => break Err(e),
            }
        };
        if let Some(holding) = held.filter(|h| !h.gone) {
            let _ = self.release_handle(holding.session, holding.handle).await;
        }
        if let Err(e) = ended {
            let _ = tx.send(Err(e)).await;
        }
    }

    /// A `Hold` stream's acquire: the claim, kept in the request's session as Acquire keeps
    /// it, and what the stream follows of it.
    async fn acquire_held(&self, req: pb::AcquireRequest) -> Result<(pb::Claim, Holding), Status> {
        let want = want_of(&req)?;
        let recipe = or(&req.recipe, want.family().recipe).to_string();
        self.measured("Hold/acquire", &recipe, async {
            let session = self.session(req.session)?;
            let named = claim_tag(req.session, &req.claim_id, req.retry)?;
            let holder = identity(&session, &req.holder_id)?;
            let timeout = millis(req.timeout_ms);
            let claim =
                claim(self, &session, want, &recipe, &req.path, timeout, named, &holder, Kept::Instance)
                    .await?;
            let holding = self.follow(req, claim.handle).await?;
            Ok((claim, holding))
        })
        .await
        .map(Response::into_inner)
    }

    /// What a `Hold` stream follows of the claim `req` took, kept as `handle`.
    async fn follow(&self, request: pb::AcquireRequest, handle: u64) -> Result<Holding, Status> {
        let (_, entry) = self.entry(request.session, handle)?;
        let lost = match entry.held.lock().await.as_ref() {
            Some(held) => held.lost(),
            None => return Err(wire::unknown_handle(format!("handle: {handle} was released"))),
        };
        Ok(Holding {
            session: request.session,
            handle,
            request,
            lost: Box::pin(lost),
            ending: Box::pin(entry.ending()),
            ended: entry.ended.subscribe(),
            meter: std::sync::Arc::downgrade(&entry),
            told: false,
            gone: false,
        })
    }

    /// A `Hold` stream's requeue: the held claim let go of and taken again as its acquire asked
    /// (`Claim::requeue`: one `multi` where the recipe allows), kept under a new handle.
    async fn requeue_held(&self, holding: Holding) -> Result<(pb::Claim, Holding), Status> {
        let req = holding.request;
        let want = want_of(&req)?;
        let recipe = or(&req.recipe, want.family().recipe).to_string();
        let family = crate::metrics::family_of_want(&want);
        self.measured("Hold/requeue", &recipe, async {
            let (session, entry) = self.entry(req.session, holding.handle)?;
            // The new handle's place is taken before the old one leaves, so no acquire of the
            // same client session takes it meanwhile.
            let _reserved = match self.room_replacing_handle(&session) {
                Ok(reserved) => reserved,
                Err(refused) => {
                    let _ = self.release_handle(req.session, holding.handle).await;
                    return Err(refused);
                }
            };
            session.handles.lock().unwrap().remove(&holding.handle);
            entry.ended.send_replace(Some(Ended::Released));
            let Some(mut held) = entry.held.lock().await.take() else {
                return Err(wire::unknown_handle(format!("handle: {} was released", holding.handle)));
            };
            drop(entry);
            // The new node keeps the client's claim id, so a retried acquire after a fail-over
            // finds it.
            if let Some(tag) = claim_tag(req.session, &req.claim_id, false)? {
                held.name_claim(tag);
            }
            let waiting = session.waiting(&req.path, &listed_family(&want));
            let timeout = millis(req.timeout_ms);
            let taken = self.metrics.waiting(
                self.tenant.as_deref(),
                family,
                timeout,
                held.requeue(&req.path, timeout),
            );
            let claim = match session.while_open(taken).await {
                Ok(Ok(claim)) => claim,
                Ok(Err(e)) => return Err(status(e)),
                Err(ended) => return Err(ended),
            };
            let (node, fencing_token, recipe_version) =
                (claim.node().to_string(), claim.token(), wire::recipe_version(&claim));
            let handle = self.keep(&session, claim).await?;
            drop(waiting);
            let holding = self.follow(req.clone(), handle).await?;
            Ok((pb::Claim { handle, node, fencing_token, recipe_version }, holding))
        })
        .await
        .map(Response::into_inner)
    }
}

/// The most bytes of a claim id.
const MAX_CLAIM_ID: usize = 64;

/// The most bytes of a holder id.
const MAX_HOLDER_ID: usize = 128;

/// Who a claim of `session` is for, as its node's data says it (where its recipe leaves the
/// data blank): `ID (session NAME from PEER)`, `holder_id` being the client's own name for
/// itself (the session's name when empty), so that clients sharing the daemon's one ZooKeeper
/// session are told apart by `holders`, `claims`, kazoo and Curator.
pub(super) fn identity(session: &ClientSession, holder_id: &str) -> Result<String, Status> {
    if holder_id.len() > MAX_HOLDER_ID || holder_id.chars().any(char::is_control) {
        return Err(wire::invalid_argument(format!(
            "holder_id: at most {MAX_HOLDER_ID} bytes of printable text"
        )));
    }
    let name = match session.name.as_str() {
        "" => format!("#{}", session.id),
        name => name.to_string(),
    };
    let who = if holder_id.is_empty() { name.as_str() } else { holder_id };
    Ok(match *session.peer.lock().unwrap() {
        Some(peer) => format!("{who} (session {name} from {peer})"),
        None => format!("{who} (session {name})"),
    })
}

/// The name an Acquire gives its claim, if any ([`wazoo_runtime::ClaimTag`]).
pub(super) fn claim_tag(
    session: u64,
    claim_id: &str,
    retry: bool,
) -> Result<Option<wazoo_runtime::ClaimTag>, Status> {
    if claim_id.is_empty() {
        if retry {
            return Err(wire::invalid_argument("retry: a claim sent again needs its claim_id"));
        }
        return Ok(None);
    }
    if claim_id.len() > MAX_CLAIM_ID {
        return Err(wire::invalid_argument(format!("claim_id: at most {MAX_CLAIM_ID} bytes")));
    }
    Ok(Some(wazoo_runtime::ClaimTag::new(session, claim_id, retry)))
}

/// What a claim node's name says it is (for one taken up with Resume).
fn kind_of_node(node: &str) -> wazoo_runtime::ClaimKind {
    use wazoo_runtime::ClaimKind;
    let name = node.rsplit('/').next().unwrap_or(node);
    let described = wazoo_runtime::family::Family::of_child(name).is_some_and(|f| f.is_described());
    if described {
        ClaimKind::Described
    } else if name.contains("__READ__") || name.contains("__rlock__") {
        ClaimKind::Read
    } else if name.contains("__WRIT__") {
        ClaimKind::Write
    } else if name.contains("-lease-") || node.contains("/leases/") {
        ClaimKind::Lease
    } else if name.contains("latch-") {
        ClaimKind::Leadership
    } else if name.contains("-lock-") || name.contains("__lock__") {
        ClaimKind::Lock
    } else {
        ClaimKind::Membership
    }
}

/// What an Acquire (or a `Hold` stream's acquire) asks for.
fn want_of(req: &pb::AcquireRequest) -> Result<Want, Status> {
    if !req.described.is_empty() {
        return match wazoo_runtime::family::Family::named(&req.described) {
            Some(family) if family.is_described() => Ok(Want::Claim { family, data: req.data.clone() }),
            _ => Err(wire::invalid_argument(format!(
                "described: this daemon describes no family {:?} (no {}{} in its plugins directory)",
                req.described,
                req.described,
                wazoo_runtime::family::DESCRIPTION
            ))),
        };
    }
    let family = pb::Family::try_from(req.family).map_err(|_| wire::invalid_argument("unknown family"))?;
    Ok(match family {
        pb::Family::Lock => Want::Lock,
        pb::Family::ReadLock => Want::ReadWrite(Mode::Read),
        pb::Family::WriteLock => Want::ReadWrite(Mode::Write),
        pb::Family::Semaphore => Want::Lease { max_leases: req.max_leases },
    })
}

/// How a claim is kept once taken.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kept {
    /// With its recipe instance: a `Hold` stream takes it again through it (requeue).
    Instance,
    /// As data where its family allows ([`Claim::into_data`]): a lock, read/write lock or
    /// lease taken by Acquire gives its instance back once held for
    /// [`AS_DATA_AFTER`](crate::serve::state::AS_DATA_AFTER), or at once when a new claim finds
    /// none left, so that the instance pool bounds the claims being taken and waited for, not
    /// those held.
    AsData,
}

/// Takes `want` at `path` for `session` with a fresh handle of `recipe`, for `holder` (its
/// [`identity`]), and keeps it there, `kept` so.
pub(super) async fn claim(
    state: &State,
    session: &ClientSession,
    want: Want,
    recipe: &str,
    path: &str,
    timeout: Option<Duration>,
    named: Option<wazoo_runtime::ClaimTag>,
    holder: &str,
    kept: Kept,
) -> Result<pb::Claim, Status> {
    let _reserved = state.room_for_handle(session)?;
    let family = crate::metrics::family_of_want(&want);
    let started = std::time::Instant::now();
    let mut again = true;
    let (contender, granted, waiting) = loop {
        let mut contender = contender(state, session, &want, recipe).await?;
        if let Some(tag) = named {
            contender.name_claim(tag);
        }
        contender.identify(holder);
        // Listed as waiting (ListSessions) until the claim is kept.
        let waiting = session.waiting(path, &listed_family(contender.want()));
        // A session that ends while its call waits (in a lock's queue) cancels the call, and
        // closing the contender deletes the node it queued.
        // Waiting in the queue is measured apart from the call's own service time.
        let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
        let waited =
            state.metrics.waiting(state.tenant.as_deref(), family, left, contender.acquire(path, left));
        match session.while_open(waited).await {
            Ok(Ok(granted)) => break (contender, granted, waiting),
            // The host's ZooKeeper session had expired (the daemon was stopped, say) and is
            // being made again: whatever the try made went with it, so it is made again, once,
            // on the new session, within what is left of the timeout.
            Ok(Err(e)) if again && is_expired(&e) => {
                contender.close().await;
                again = false;
            }
            Ok(Err(e)) => {
                contender.close().await;
                return Err(status(e));
            }
            Err(ended) => {
                contender.close().await;
                return Err(ended);
            }
        }
    };
    let claim = contender.claim(granted);
    let (node, fencing_token, recipe_version) =
        (claim.node().to_string(), claim.token(), wire::recipe_version(&claim));
    let handle = match kept {
        Kept::AsData => state.keep_as_data(session, claim).await?,
        Kept::Instance => state.keep(session, claim).await?,
    };
    drop(waiting);
    Ok(pb::Claim { handle, node, fencing_token, recipe_version })
}

/// A fresh contender for `want` of `recipe`. With no instance left, the claims that may be held
/// as data give theirs back first, and it is tried again while that freed any (another claim
/// may take what was freed): refused only when none is left to free.
async fn contender(
    state: &State,
    session: &ClientSession,
    want: &Want,
    recipe: &str,
) -> Result<wazoo_runtime::Contender, Status> {
    for _ in 0..MAKE_ROOM_TRIES {
        match session.host.contender(want.clone(), recipe).await {
            Ok(contender) => return Ok(contender),
            Err(e) if wazoo_runtime::error::is_exhausted(&e) && state.make_room().await => continue,
            Err(e) => return Err(no_handle(e)),
        }
    }
    session.host.contender(want.clone(), recipe).await.map_err(no_handle)
}

/// How often a claim that found no instance left makes room and tries again.
const MAKE_ROOM_TRIES: usize = 3;

/// Whether a recipe call failed because the host's ZooKeeper session had expired.
fn is_expired(e: &wazoo_runtime::error::RecipeError) -> bool {
    matches!(e, wazoo_runtime::error::RecipeError::Zk(wazoo_runtime::ZkError::SessionExpired))
}

/// What a call waits for, as `SessionClaim.family` names it: as the metrics name its family,
/// and a described family by its name.
fn listed_family(want: &Want) -> String {
    match want {
        Want::Claim { family, .. } => family.name,
        want => crate::metrics::family_of_want(want),
    }
    .to_string()
}
