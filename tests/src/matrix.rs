//! The exhaustive single-fault matrix: every operation of every recipe, in every language the
//! project ships, faulted at every ZooKeeper request it makes, once per kind of fault.
//!
//! For each [`Case`] (one export of one recipe, with the state it needs):
//!
//! 1. a clean run through a tapping proxy records the requests the operation makes, in order,
//!    with the error code of each reply (requests are enumerated, never hand-picked);
//! 2. for every request that succeeded on the server in that run, and for each [`Kind`] of
//!    fault, the operation runs again with that one request faulted: its reply lost (the
//!    connection cut), the session expired right after it, or the participant killed right
//!    after it (the call cancelled and its handle dropped, as a process dies);
//! 3. each faulted run asserts that the fault fired on the request it meant (same position,
//!    type and path as in the clean run) and that this request succeeded on the server; a fault
//!    that lands anywhere else is a failure of the run, not a pass;
//! 4. then it checks the recipe's own promise (the case's `check`, with the handle still open,
//!    and `after`, once every handle is closed), and for every recipe that no ephemeral node is
//!    left once its handles are closed and that no call hangs.
//!
//! Other participants (a contender, a producer, a coordinator, a site) run on a second host
//! that reaches ZooKeeper directly. An operation that blocks until another participant acts has
//! a trigger: the participant acts once the faulted host's watch on the named node has been
//! answered, so the faulted run's requests come in the same order as the clean run's.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::task::JoinHandle;
use wazoo_runtime::{DynamicHandle, Host};
use zookeeper_client::Client;

use crate::chaos::{Lab, Site};
use crate::proxy::{op, Action, Request};

/// A boxed future borrowing the run's context.
pub type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The kinds of fault injected at each request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The server applied the request; the reply was lost and the connection cut.
    LostReply,
    /// The server applied the request; the session expired before the reply got back.
    Expiry,
    /// The server applied the request; then the participant died: the call was cancelled and
    /// its handle dropped (its ephemeral nodes deleted, as the session's end would).
    Crash,
}

pub const KINDS: [Kind; 3] = [Kind::LostReply, Kind::Expiry, Kind::Crash];

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::LostReply => "lost reply",
            Kind::Expiry => "session expired",
            Kind::Crash => "participant killed",
        }
    }
}

/// How the operation under test ended.
#[derive(Debug)]
pub enum Outcome {
    /// It returned: `{"ok": …}` or `{"err": …}`.
    Returned(Value),
    /// The host refused or lost the call (a trap, a retired handle).
    Failed(String),
    /// The participant was killed in the middle of it.
    Killed,
    /// It did not return within the bound.
    Hung,
}

/// What a run did, handed to the case's checks.
pub struct Verdict {
    pub fault: Option<Kind>,
    pub outcome: Outcome,
    /// What the case's `before` step returned.
    pub before: Value,
}

impl Verdict {
    /// The call's `ok` payload, if it returned one.
    pub fn ok(&self) -> Option<&Value> {
        match &self.outcome {
            Outcome::Returned(v) => v.get("ok"),
            _ => None,
        }
    }

    /// Whether the participant survived to hear back (the call returned, ok or not).
    pub fn returned(&self) -> bool {
        matches!(self.outcome, Outcome::Returned(_))
    }
}

/// One operation under test.
pub struct Case {
    /// `recipe/interface.function`, and a variant after a space if one export has several cases.
    pub name: &'static str,
    /// The plugin that runs it (`lock`, `semaphore-py`, `election-js`, …).
    pub recipe: &'static str,
    /// Steps on the faulted handle (and state made by others) before the fault is armed.
    pub before: for<'a> fn(&'a Ctx, &'a mut DynamicHandle) -> Fut<'a, Value>,
    /// The export to call and its arguments, given `before`'s value.
    pub call: fn(&Ctx, &Value) -> (&'static str, Value),
    /// For an operation that blocks until someone else acts: which answered request of the
    /// faulted host means it now waits, and what the other participant then does.
    pub trigger: Option<(fn(&Ctx, &Request) -> bool, for<'a> fn(&'a Ctx) -> Fut<'a, ()>)>,
    /// A lost reply must not make the call fail (it can find out what happened). False only
    /// where docs/src/reference/wit.md documents `connection-loss` as "outcome unknown".
    pub survives_lost_reply: bool,
    /// The promise, checked once the call ended, with the faulted handle still open.
    pub check: for<'a> fn(&'a Ctx, &'a Verdict) -> Fut<'a, ()>,
    /// The promise, checked once every handle of the run is closed.
    pub after: for<'a> fn(&'a Ctx, &'a Verdict) -> Fut<'a, ()>,
}

/// A run's context: its paths, the other participants' host, a plain checking client, and the
/// invariants checked so far.
pub struct Ctx {
    /// A directory of the run's own; every node of the run is under it.
    pub root: String,
    /// The recipe's path, `root/r`.
    pub path: String,
    pub peer: Host,
    pub checker: Client,
    /// The faulted host's session id when the run started.
    pub session: i64,
    checks: AtomicU64,
    violations: Mutex<Vec<String>>,
    kept: tokio::sync::Mutex<Vec<DynamicHandle>>,
    tasks: Mutex<Vec<JoinHandle<Vec<Result<Value, String>>>>>,
    /// The faulted handle, while the case's `check` runs (for a promise only more calls on it
    /// can show, such as a cache's later reports).
    pub faulted: tokio::sync::Mutex<Option<DynamicHandle>>,
}

/// Runs of one injection before a fault that keeps missing its request is a failure.
const ATTEMPTS: u32 = 5;

/// What one run found.
struct Once {
    log: Vec<Request>,
    checks: u64,
    violations: Vec<String>,
    /// Why the fault did not land on the request it was meant for, if it did not.
    misfire: Option<String>,
}

/// How long any one call may take before it counts as hung.
const BOUND: Duration = Duration::from_secs(20);
/// The timeout the operations under test are given, where they take one.
pub const WAIT_MS: u64 = 5000;

impl Ctx {
    /// Checks one invariant.
    pub fn check(&self, ok: bool, why: impl FnOnce() -> String) {
        self.checks.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.violations.lock().unwrap().push(why());
        }
    }

    /// Calls `calls` in order on a fresh handle of `recipe` on the other host, then closes it.
    pub async fn peer(&self, recipe: &str, calls: &[(&str, Value)]) -> Vec<Value> {
        let mut handle = self.peer.dynamic(recipe).await.expect("a peer handle");
        let results = call_all(&mut handle, calls).await;
        handle.close().await;
        results.into_iter().map(|r| r.unwrap_or_else(|e| json!({ "host-error": e }))).collect()
    }

    /// As [`Ctx::peer`], but the handle stays open (holding what it took) until the run ends.
    pub async fn hold(&self, recipe: &str, calls: &[(&str, Value)]) -> Vec<Value> {
        let mut handle = self.peer.dynamic(recipe).await.expect("a peer handle");
        let results = call_all(&mut handle, calls).await;
        self.kept.lock().await.push(handle);
        results.into_iter().map(|r| r.unwrap_or_else(|e| json!({ "host-error": e }))).collect()
    }

    /// Runs `calls` on a fresh peer handle in a task of its own (a participant that blocks);
    /// [`Ctx::joined`] collects the results.
    pub fn spawn(&self, recipe: &'static str, calls: Vec<(&'static str, Value)>) {
        let host = self.peer.clone();
        let task = tokio::spawn(async move {
            let mut handle = host.dynamic(recipe).await.expect("a peer handle");
            let results = call_all(&mut handle, &calls).await;
            handle.close().await;
            results
        });
        self.tasks.lock().unwrap().push(task);
    }

    /// As [`Ctx::spawn`], on a handle the run already has (see [`Ctx::keep`]).
    pub fn spawn_on(&self, mut handle: DynamicHandle, calls: Vec<(&'static str, Value)>) {
        let task = tokio::spawn(async move {
            let results = call_all(&mut handle, &calls).await;
            handle.close().await;
            results
        });
        self.tasks.lock().unwrap().push(task);
    }

    /// Keeps a participant's handle open until the run ends (or [`Ctx::take_kept`]).
    pub async fn keep(&self, handle: DynamicHandle) {
        self.kept.lock().await.push(handle);
    }

    /// The handle kept last, to act on.
    pub async fn take_kept(&self) -> Option<DynamicHandle> {
        self.kept.lock().await.pop()
    }

    /// The results of every task [`Ctx::spawn`] started, each within `limit`; a task still
    /// running then is a hung participant (a violation), and is stopped.
    pub async fn joined(&self, limit: Duration) -> Vec<Vec<Result<Value, String>>> {
        let tasks: Vec<_> = std::mem::take(&mut *self.tasks.lock().unwrap());
        let mut all = Vec::new();
        for task in tasks {
            match tokio::time::timeout(limit, task).await {
                Ok(Ok(results)) => all.push(results),
                Ok(Err(e)) => {
                    self.check(false, || format!("a participant's task failed: {e}"));
                    all.push(Vec::new());
                }
                Err(_) => {
                    self.check(false, || format!("a participant still waits after {limit:?}"));
                    all.push(Vec::new());
                }
            }
        }
        all
    }

    /// The children of `path` (sorted), by the checking client.
    pub async fn children(&self, path: &str) -> Vec<String> {
        crate::children(&self.checker, path).await
    }

    /// The data of `path`, by the checking client.
    pub async fn data(&self, path: &str) -> Option<Vec<u8>> {
        self.checker.get_data(path).await.ok().map(|(d, _)| d)
    }

    /// The ephemeral owner of `path`, if it exists.
    pub async fn owner(&self, path: &str) -> Option<i64> {
        self.checker.check_stat(path).await.ok().flatten().map(|s| s.ephemeral_owner)
    }

    async fn close_kept(&self) {
        for handle in self.kept.lock().await.drain(..) {
            handle.close().await;
        }
    }
}

async fn call_all(handle: &mut DynamicHandle, calls: &[(&str, Value)]) -> Vec<Result<Value, String>> {
    let mut results = Vec::new();
    for (function, args) in calls {
        let result = tokio::time::timeout(BOUND, handle.call(function, args)).await;
        results.push(match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("{function} did not return within {BOUND:?}")),
        });
    }
    results
}

/// The `ok` payload of a result, if any.
pub fn ok(v: &Value) -> Option<&Value> {
    v.get("ok")
}

/// What the matrix found: the figure docs/src/testing/faults.md quotes.
#[derive(Default, Debug)]
pub struct Figure {
    pub rows: Vec<Row>,
}

/// One case's line of the figure.
#[derive(Default, Debug, Clone)]
pub struct Row {
    pub case: String,
    /// Requests of the clean run.
    pub requests: usize,
    /// Of those, the ones that succeeded on the server (each faulted once per kind).
    pub succeeded: usize,
    pub injected: usize,
    /// Runs again because the fault did not land on its request (other participants' timing).
    pub misfires: usize,
    pub checks: u64,
    pub violations: Vec<String>,
    pub took: Duration,
}

impl Figure {
    pub fn violations(&self) -> usize {
        self.rows.iter().map(|r| r.violations.len()).sum()
    }

    pub fn injected(&self) -> usize {
        self.rows.iter().map(|r| r.injected).sum()
    }

    /// The one-line summary: operations × requests × fault kinds, checks, violations.
    pub fn summary(&self) -> String {
        let requests: usize = self.rows.iter().map(|r| r.succeeded).sum();
        let recorded: usize = self.rows.iter().map(|r| r.requests).sum();
        let checks: u64 = self.rows.iter().map(|r| r.checks).sum();
        format!(
            "fault matrix: {} operations, {} requests recorded, {} succeeded on the server × {} fault kinds = {} faults injected; {} invariants checked, {} violations",
            self.rows.len(),
            recorded,
            requests,
            KINDS.len(),
            self.injected(),
            checks,
            self.violations()
        )
    }
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<44} {:>8} {:>9} {:>8} {:>6} {:>7} {:>10} {:>7}",
            "operation", "requests", "succeeded", "injected", "reruns", "checks", "violations", "took"
        )?;
        for r in &self.rows {
            writeln!(
                f,
                "{:<44} {:>8} {:>9} {:>8} {:>6} {:>7} {:>10} {:>6.1}s",
                r.case,
                r.requests,
                r.succeeded,
                r.injected,
                r.misfires,
                r.checks,
                r.violations.len(),
                r.took.as_secs_f64()
            )?;
        }
        writeln!(f, "{}", self.summary())?;
        for r in &self.rows {
            for v in &r.violations {
                writeln!(f, "VIOLATION {}: {v}", r.case)?;
            }
        }
        Ok(())
    }
}

/// Where the matrix runs: a lab on one ZooKeeper, a faulted site behind a tapping proxy, and a
/// peer host on the same server.
pub struct Bench {
    pub lab: Lab,
    pub site: Site,
    pub peer: Host,
    next: AtomicU64,
}

impl Bench {
    pub async fn new(address: &str, session: Duration) -> Bench {
        let lab = Lab::new(vec![address.to_string()], session, "/matrix").await;
        // Persistent, so that no run sees it come and go (a container would be reaped when empty).
        let options =
            zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        match lab.checker().await.create("/matrix", b"", &options).await {
            Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
            Err(e) => panic!("creating /matrix: {e}"),
        }
        let site = lab.site("faulted").await;
        let peer = Host::start(crate::config(address, Duration::from_secs(10))).await.expect("a peer host");
        Bench { lab, site, peer, next: AtomicU64::new(0) }
    }

    /// Runs `case` clean, then once per succeeded request and kind of fault.
    pub async fn run(&self, case: &Case) -> Row {
        let started = Instant::now();
        let mut row = Row { case: format!("{} ({})", case.name, case.recipe), ..Row::default() };
        let clean = self.once(case, None).await;
        row.checks += clean.checks;
        row.violations.extend(clean.violations.into_iter().map(|v| format!("clean run: {v}")));
        row.requests = clean.log.len();
        let targets: Vec<&Request> = clean.log.iter().filter(|r| r.err == Some(0)).collect();
        row.succeeded = targets.len();
        for target in targets {
            for kind in KINDS {
                let at = format!(
                    "{} at request {} ({} {})",
                    kind.name(),
                    target.n,
                    op::name(target.kind),
                    target.path
                );
                // A run in which the fault did not land on the request meant (other
                // participants' timing took the operation down another path) proves nothing:
                // it is run again, and an injection that never lands is a failure.
                let mut landed = false;
                for attempt in 1..=ATTEMPTS {
                    let began = Instant::now();
                    let run = self.once(case, Some((target, kind))).await;
                    if std::env::var_os("WAZOO_MATRIX_VERBOSE").is_some() {
                        println!(
                            "  {} {at}: {:.2}s {:?}",
                            case.name,
                            began.elapsed().as_secs_f64(),
                            run.misfire
                        );
                    }
                    row.checks += run.checks + 1;
                    row.violations.extend(run.violations.into_iter().map(|v| format!("{at}: {v}")));
                    match run.misfire {
                        None => {
                            landed = true;
                            break;
                        }
                        Some(why) if attempt == ATTEMPTS => row
                            .violations
                            .push(format!("{at}: the fault did not land in {ATTEMPTS} runs: {why}")),
                        Some(_) => row.misfires += 1,
                    }
                }
                if landed {
                    row.injected += 1;
                }
            }
        }
        row.took = started.elapsed();
        row
    }

    /// [`Bench::run`] as a chaos report, for the soak run.
    pub async fn report(&self, case: &Case) -> crate::chaos::Report {
        let row = self.run(case).await;
        crate::chaos::Report {
            scenario: format!("fault matrix: {}", row.case),
            faults: vec![format!("{} faults at {} requests", row.injected, row.succeeded)],
            notes: Vec::new(),
            ops: row.injected as u64 + 1,
            checks: row.checks,
            violations: row.violations,
            figures: Vec::new(),
            took: row.took,
        }
    }

    /// One run: the clean one (no fault) or one fault; the requests it made, the invariants it
    /// checked and those it found violated.
    async fn once(&self, case: &Case, fault: Option<(&Request, Kind)>) -> Once {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let slug: String =
            case.name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        let root = format!("/matrix/{}-{}-{n}", case.recipe, slug);
        let checker = self.lab.checker().await;
        let proxy = &self.site.proxies[0];
        let session = self.site.session().await;
        let ctx = Ctx {
            path: format!("{root}/r"),
            root,
            peer: self.peer.clone(),
            checker,
            session: session.id().0,
            checks: AtomicU64::new(0),
            violations: Mutex::new(Vec::new()),
            kept: tokio::sync::Mutex::new(Vec::new()),
            tasks: Mutex::new(Vec::new()),
            faulted: tokio::sync::Mutex::new(None),
        };
        let mut handle = match self.site.host.dynamic(case.recipe).await {
            Ok(h) => h,
            Err(e) => {
                return Once {
                    log: Vec::new(),
                    checks: 1,
                    violations: vec![format!("no handle: {e:#}")],
                    misfire: None,
                }
            }
        };
        let before = (case.before)(&ctx, &mut handle).await;
        let (function, args) = (case.call)(&ctx, &before);

        proxy.tap(
            fault.map(|(r, kind)| (r.n, if kind == Kind::LostReply { Action::Lose } else { Action::Hold })),
        );
        let trigger = case.trigger.map(|(pred, _)| pred);
        let mut triggered = false;
        let outcome = {
            let call = tokio::time::timeout(BOUND, handle.call(function, &args));
            tokio::pin!(call);
            let mut held = false;
            loop {
                tokio::select! {
                    result = &mut call => break match result {
                        Ok(Ok(value)) => Outcome::Returned(value),
                        Ok(Err(e)) => Outcome::Failed(e.to_string()),
                        Err(_) => Outcome::Hung,
                    },
                    _ = proxy.fault_fired(), if !held && fault.is_some_and(|(_, k)| k != Kind::LostReply) => {
                        held = true;
                        match fault.map(|(_, k)| k) {
                            Some(Kind::Crash) => break Outcome::Killed,
                            _ => self.site.expire_session(&self.lab, session.clone()).await,
                        }
                    }
                    answered = proxy.answered(|r| trigger.is_some_and(|t| t(&ctx, r))), if trigger.is_some() && !triggered => {
                        let _ = answered;
                        triggered = true;
                        if let Some((_, act)) = case.trigger {
                            act(&ctx).await;
                        }
                    }
                }
            }
        };
        // A request the call sent without awaiting its reply (`znode.delete-unwaited`, a
        // release) may reach the server, and be answered, only after the call returned. So the
        // session is asked for one more reply, a sync of `/` that the tap does not log: ZooKeeper
        // answers a session's requests in order, so once it is back every request the call sent
        // is answered and logged (the clean run enumerates them all). A faulted run whose fault
        // fires meanwhile acts as it would while the call waited (a participant killed after its
        // call returned is its handle closed, which follows below).
        if let Outcome::Returned(_) = outcome {
            let session_of_call = handle.live().zk();
            let answered = async {
                let _ = tokio::time::timeout(BOUND, session_of_call.sync("/")).await;
            };
            match fault {
                None => answered.await,
                Some((_, kind)) if proxy.fired().is_none() => {
                    tokio::select! {
                        _ = answered => {}
                        _ = proxy.fault_fired() => {
                            if kind == Kind::Expiry {
                                self.site.expire_session(&self.lab, session.clone()).await;
                            }
                        }
                    }
                }
                Some(_) => {}
            }
        }
        // A killed participant's call is gone; whatever the proxy held is lost.
        proxy.thaw();
        let fired = proxy.fired();
        let log = proxy.untap();
        let verdict = Verdict { fault: fault.map(|(_, k)| k), outcome, before };

        let mut misfire = None;
        if let Some((target, kind)) = fault {
            misfire = match &fired {
                None => Some("the fault never fired: the operation made fewer requests".to_string()),
                Some(f) if f.n != target.n || f.kind != target.kind => {
                    Some(format!("fired on request {} ({}), not {}", f.n, op::name(f.kind), target.n))
                }
                Some(f) if shape(&f.path, &ctx.root) != shape(&target.path, &root_of(&target.path)) => {
                    Some(format!("fired on {}, the clean run's request was on {}", f.path, target.path))
                }
                Some(f) if f.err != Some(0) => {
                    Some(format!("the faulted request failed on the server (error {:?})", f.err))
                }
                Some(_) => None,
            };
            // Landing where it was meant to is checked once per injection, by `run`.
            if kind == Kind::LostReply && case.survives_lost_reply && misfire.is_none() {
                ctx.check(verdict.ok().is_some(), || {
                    format!("a lost reply made the call fail: {:?}", verdict.outcome)
                });
            }
        }
        ctx.check(!matches!(verdict.outcome, Outcome::Hung), || format!("{function} hung past {BOUND:?}"));
        if let Some(pred) = trigger {
            // The other participant acts even if the faulted one never got that far.
            if !triggered && !log.iter().any(|r| r.err.is_some() && pred(&ctx, r)) {
                if let Some((_, act)) = case.trigger {
                    act(&ctx).await;
                }
            }
        }

        *ctx.faulted.lock().await = Some(handle);
        (case.check)(&ctx, &verdict).await;
        let handle = ctx.faulted.lock().await.take().expect("the check gives the faulted handle back");
        handle.close().await;
        ctx.close_kept().await;
        (case.after)(&ctx, &verdict).await;
        let _ = ctx.joined(BOUND).await;
        ctx.close_kept().await;
        let orphans = self.lab.orphans(&ctx.root).await;
        ctx.check(orphans.is_empty(), || {
            format!("ephemeral nodes left once every handle closed: {orphans:?}")
        });
        let checks = ctx.checks.load(Ordering::Relaxed);
        let violations = std::mem::take(&mut *ctx.violations.lock().unwrap());
        Once { log, checks, violations, misfire }
    }
}

/// The run's root a recorded path belongs to: `/matrix/<recipe>-<case>-<n>`.
fn root_of(path: &str) -> String {
    let parts: Vec<&str> = path.splitn(4, '/').collect();
    if parts.len() >= 3 && parts[1] == "matrix" {
        format!("/matrix/{}", parts[2])
    } else {
        String::new()
    }
}

/// A path with what differs from run to run taken out: the run's root, protected-create ids,
/// sequence numbers.
fn shape(path: &str, root: &str) -> String {
    let path = match path.strip_prefix(root) {
        Some(rest) if !root.is_empty() => format!("$ROOT{rest}"),
        _ => path.to_string(),
    };
    let mut out = String::new();
    let mut digits = 0;
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_hexdigit() || c == '-' {
            // Runs of hex digits and dashes of 10 or more (ids, sequences) become `#`.
            let mut run = String::from(c);
            while let Some(&next) = chars.peek() {
                if next.is_ascii_hexdigit() || next == '-' {
                    run.push(next);
                    chars.next();
                } else {
                    break;
                }
            }
            if run.chars().filter(|c| c.is_ascii_hexdigit()).count() >= 10 {
                out.push('#');
            } else {
                out.push_str(&run);
            }
            digits = 0;
        } else {
            out.push(c);
        }
    }
    let _ = digits;
    out
}

#[cfg(test)]
mod tests {
    use super::shape;

    #[test]
    fn shapes_ignore_ids_and_sequences() {
        let a = shape(
            "/matrix/lock-x-1/r/_c_0f2d5a9e-1c2b-4d3e-8f90-123456789abc-lock-0000000007",
            "/matrix/lock-x-1",
        );
        let b = shape(
            "/matrix/lock-x-9/r/_c_aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee-lock-0000000042",
            "/matrix/lock-x-9",
        );
        assert_eq!(a, b);
        assert_ne!(
            shape("/matrix/q-1/r/queue-", "/matrix/q-1"),
            shape("/matrix/q-1/r-claims/x", "/matrix/q-1")
        );
    }
}
