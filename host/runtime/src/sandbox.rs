//! The sandbox: engine settings, per-store limits and the CPU clock that enforces them.

use std::time::{Duration, Instant};

use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreLimits,
    StoreLimitsBuilder, Trap, UpdateDeadline,
};

/// Limits applied to every recipe instance.
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxLimits {
    /// Linear memory per instance. Rust recipes need well under 2 MiB; interpreted ones start
    /// at 9 MiB (JavaScript) and 12 MiB (Python) and grow with what their code allocates.
    pub memory_bytes: usize,
    /// Guest CPU per call (time awaiting ZooKeeper excluded).
    pub cpu_per_call: Duration,
    /// Wasm stack per instance.
    pub wasm_stack_bytes: usize,
    /// Instances alive at once, across the host (the pooling allocator's slots).
    pub max_instances: u32,
    /// Data per znode write: far below ZooKeeper's 1 MiB `jute.maxbuffer`, so no guest can make
    /// the server drop the shared connection with an oversized packet.
    pub max_data_bytes: usize,
    /// Children one listing may return (a bigger directory is `limit-exceeded`, not a reply
    /// that could approach `jute.maxbuffer`).
    pub max_children: usize,
    /// Watches armed and not yet dropped, across the host's handles.
    pub max_watches: usize,
    /// ZooKeeper operations per second across the host's handles (0: no limit); a burst of one
    /// second's worth is allowed.
    pub ops_per_sec: u32,
    /// Nodes created through this host and not deleted through it (0: no limit).
    pub max_znodes: u64,
    /// Bytes of node data written per second across the host's handles (0: no limit); a burst
    /// of one second's worth is allowed.
    pub bytes_per_sec: u64,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            memory_bytes: 256 << 20,
            cpu_per_call: Duration::from_secs(5),
            wasm_stack_bytes: 512 << 10,
            max_instances: 1000,
            max_data_bytes: 512 << 10,
            max_children: 100_000,
            max_watches: 100_000,
            ops_per_sec: 0,
            max_znodes: 0,
            bytes_per_sec: 0,
        }
    }
}

impl SandboxLimits {
    pub(crate) fn store_limits(&self) -> StoreLimits {
        StoreLimitsBuilder::new()
            .memory_size(self.memory_bytes)
            .instances(CORE_INSTANCES_PER_COMPONENT as usize)
            .tables(16)
            .memories(4)
            .trap_on_grow_failure(true)
            .build()
    }
}

/// Core instances one component may link (the store's limit; the pool holds this many per
/// instance slot).
const CORE_INSTANCES_PER_COMPONENT: u32 = 24;

/// How often the epoch advances; the CPU clock is checked at this granularity.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Builds the engine every recipe runs on, and starts its epoch ticker.
pub fn engine(limits: &SandboxLimits) -> anyhow::Result<Engine> {
    let mut config = settings(limits);
    let mut pool = PoolingAllocationConfig::default();
    // A Rust wasip2 component has a main module plus small shim modules (3 core instances);
    // an interpreted one (componentize-py, componentize-js) links a dozen or so (14 for a
    // Python recipe), still with one memory.
    pool.total_component_instances(limits.max_instances);
    pool.total_core_instances(limits.max_instances * CORE_INSTANCES_PER_COMPONENT);
    pool.total_memories(limits.max_instances);
    pool.total_tables(limits.max_instances * 4);
    pool.total_stacks(limits.max_instances);
    pool.max_memory_size(limits.memory_bytes);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    let engine = Engine::new(&config)?;
    start_epoch_ticker(&engine);
    Ok(engine)
}

/// An engine that only compiles, for the compile worker: the same code generation settings as
/// [`engine`] (its output loads there), without the instance pool, whose address-space
/// reservation would not fit under the worker's memory limit.
pub fn compile_engine(limits: &SandboxLimits) -> anyhow::Result<Engine> {
    Ok(Engine::new(&settings(limits))?)
}

/// What both engines share: everything that shapes compiled code.
fn settings(limits: &SandboxLimits) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    // Recipes use synchronous WIT functions only; without the component-model concurrency
    // machinery a host→guest call costs ~0.25 µs instead of ~1.2 µs.
    config.concurrency_support(false);
    config.max_wasm_stack(limits.wasm_stack_bytes);
    // The async stack holds the guest's stack plus the host frames above it.
    config.async_stack_size(limits.wasm_stack_bytes + (1 << 20));
    config
}

/// One ticker thread per engine; it ends when the engine is dropped.
fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("wazoo-epoch".into())
        .spawn(move || loop {
            std::thread::sleep(EPOCH_TICK);
            match weak.upgrade() {
                Some(engine) => engine.increment_epoch(),
                None => break,
            }
        })
        .expect("spawning the epoch ticker");
}

/// What a sandboxed store's data gives the sandbox: its memory limits and its CPU clock.
pub(crate) trait Sandboxed: Send + 'static {
    fn store_limits(&mut self) -> &mut StoreLimits;
    fn clock(&mut self) -> &mut CallClock;
    fn clock_ref(&self) -> &CallClock;
}

/// A store for one recipe instance, with memory limits and the per-call CPU clock: the call
/// hooks time the guest, the epoch callback stops it once over budget.
pub(crate) fn store<T: Sandboxed>(engine: &Engine, state: T) -> Store<T> {
    let mut store = Store::new(engine, state);
    store.limiter(|s| s.store_limits());
    store.call_hook(|mut ctx, hook| {
        let clock = ctx.data_mut().clock();
        if hook.exiting_host() {
            clock.enter_wasm();
        } else {
            clock.leave_wasm();
        }
        Ok(())
    });
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| {
        if ctx.data().clock_ref().over_budget() {
            return Err(Trap::Interrupt.into());
        }
        // Yield to the executor at every tick so one busy guest cannot hog a worker thread.
        Ok(UpdateDeadline::Yield(1))
    });
    store
}

/// Guest CPU time of the current call: only the time wasm code runs counts, measured between
/// the store's call hooks. Time in any host call (awaiting ZooKeeper, a watch, a WASI sleep)
/// never counts against the guest.
#[derive(Debug)]
pub(crate) struct CallClock {
    in_wasm: Duration,
    entered_wasm: Option<Instant>,
    budget: Duration,
}

impl CallClock {
    pub(crate) fn new(budget: Duration) -> CallClock {
        CallClock { in_wasm: Duration::ZERO, entered_wasm: None, budget }
    }

    /// A new call from the host begins: the budget starts afresh.
    pub(crate) fn begin(&mut self) {
        self.in_wasm = Duration::ZERO;
        self.entered_wasm = None;
    }

    pub(crate) fn enter_wasm(&mut self) {
        self.entered_wasm = Some(Instant::now());
    }

    pub(crate) fn leave_wasm(&mut self) {
        if let Some(since) = self.entered_wasm.take() {
            self.in_wasm += since.elapsed();
        }
    }

    pub(crate) fn over_budget(&self) -> bool {
        self.in_wasm + self.entered_wasm.map_or(Duration::ZERO, |since| since.elapsed()) > self.budget
    }
}

#[cfg(test)]
mod tests {
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};

    use super::*;

    fn fingerprint(engine: &Engine) -> u64 {
        let mut h = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        h.finish()
    }

    #[test]
    fn the_compile_engine_makes_code_the_serving_engine_loads() {
        let limits = SandboxLimits::default();
        assert_eq!(fingerprint(&engine(&limits).unwrap()), fingerprint(&compile_engine(&limits).unwrap()));
    }
}
