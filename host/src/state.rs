//! What a recipe instance's store holds, and how a host call reaches it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::StoreLimits;
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};

use crate::faults::Faults;
use crate::keeper::Live;
use crate::ledger::Ledger;
use crate::sandbox::SandboxLimits;
use crate::stats::Stats;

/// State shared by every handle of one host.
#[derive(Debug, Default)]
pub struct Shared {
    pub faults: Faults,
    pub stats: Stats,
    pub limits: SandboxLimits,
}

/// The store data of one recipe instance.
pub struct HostState {
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) store_limits: StoreLimits,
    /// The session this handle runs on for its whole life.
    pub(crate) live: Arc<Live>,
    pub(crate) ledger: Arc<Ledger>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) clock: CallClock,
}

impl HostState {
    pub(crate) fn new(live: Arc<Live>, ledger: Arc<Ledger>, shared: Arc<Shared>) -> HostState {
        let store_limits = shared.limits.store_limits();
        let clock = CallClock {
            started: Instant::now(),
            in_host: Duration::ZERO,
            budget: shared.limits.cpu_per_call,
        };
        HostState {
            // No preopens, no environment, no inherited stdio: the guest reaches nothing but
            // the clock, randomness and wazoo:zk.
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            store_limits,
            live,
            ledger,
            shared,
            clock,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Guest CPU time of the current call: wall time since the call began, less the time spent
/// awaiting ZooKeeper in host calls. Waiting on a watch never counts against the guest.
#[derive(Debug)]
pub(crate) struct CallClock {
    started: Instant,
    in_host: Duration,
    budget: Duration,
}

impl CallClock {
    pub(crate) fn begin(&mut self) {
        self.started = Instant::now();
        self.in_host = Duration::ZERO;
    }

    pub(crate) fn add_host_time(&mut self, spent: Duration) {
        self.in_host += spent;
    }

    pub(crate) fn over_budget(&self) -> bool {
        self.started.elapsed().saturating_sub(self.in_host) > self.budget
    }
}
