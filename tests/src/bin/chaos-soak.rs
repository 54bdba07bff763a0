//! The chaos suite's long, randomised run: scenarios drawn by a seeded generator, with random
//! fault lengths, against a standalone server and a 3-member ensemble, for as long as asked.
//!
//! ```text
//! cargo run --release -p wazoo-tests --bin chaos-soak -- [--seed N] [--minutes M] [--session-ms MS] [--only TEXT]
//! ```
//!
//! `--only TEXT` draws only the scenarios whose name contains TEXT (`--only "daemon group"`).
//!
//! The seed is printed first and last; the same seed draws the same scenarios with the same
//! parameters (timing on a real network and real servers still varies from run to run). The
//! report lists every scenario run, the faults injected, the operations done and the invariant
//! checks passed; the exit status is 1 if any invariant was violated.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wazoo_testkit::{ServerOptions, ZkServer};
use wazoo_tests::chaos::{Cluster, Lab, Report, Rng};
use wazoo_tests::group_soak;
use wazoo_tests::matrix::Bench;
use wazoo_tests::scenarios::{self, EnsembleFault};

struct Options {
    seed: u64,
    minutes: f64,
    session: Duration,
    /// The scenarios drawn from, by index, and the `--only` text that chose them.
    only: Vec<usize>,
    only_text: Option<String>,
}

fn options() -> Result<Options, String> {
    let mut seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let (mut minutes, mut session_ms) = (10.0, 3000u64);
    let mut only: Vec<usize> = (0..SCENARIOS.len()).collect();
    let mut only_text = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--seed" => seed = value("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--minutes" => minutes = value("--minutes")?.parse().map_err(|e| format!("--minutes: {e}"))?,
            "--session-ms" => {
                session_ms = value("--session-ms")?.parse().map_err(|e| format!("--session-ms: {e}"))?
            }
            "--only" => {
                let text = value("--only")?;
                only = (0..SCENARIOS.len()).filter(|&i| SCENARIOS[i].contains(text.as_str())).collect();
                if only.is_empty() {
                    return Err(format!("--only {text:?}: no scenario's name contains it"));
                }
                only_text = Some(text);
            }
            "-h" | "--help" => {
                return Err(
                    "usage: chaos-soak [--seed N] [--minutes M] [--session-ms MS] [--only TEXT]".into()
                );
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    // The servers' tick is 200 ms: sessions may last 400 ms to 4 s.
    if !(400..=4000).contains(&session_ms) {
        return Err("--session-ms must be within 400..=4000 (2 to 20 ticks of 200 ms)".into());
    }
    Ok(Options { seed, minutes, session: Duration::from_millis(session_ms), only, only_text })
}

/// The scenarios drawn from, by index.
const SCENARIOS: [&str; 23] = [
    "holder's session killed",
    "host frozen",
    "brief disconnect",
    "reply lost after a sequential create",
    "reply lost after set-data",
    "unlock while disconnected",
    "watched node changed during a disconnect",
    "queue consumer killed",
    "2PC coordinator killed",
    "barrier participant's session expires",
    "a guest traps while holding a lock",
    "ZooKeeper leader killed",
    "ZooKeeper leader frozen",
    "ZooKeeper leader isolated",
    "host on a minority member",
    "leader restarted every 3s",
    "whole ensemble down",
    "slow replies",
    "wazoo process frozen",
    "fault matrix: one operation, every request, slow replies",
    "daemon client sessions end with calls waiting",
    "wazoo serve frozen",
    "daemon group: members killed, frozen, stopped",
];

fn main() {
    let options = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    println!(
        "chaos-soak: seed {} ({} minutes, session timeout {:?})",
        options.seed, options.minutes, options.session
    );
    // Servers first, outside any runtime (they block while they start).
    let standalone = ZkServer::start(ServerOptions { tick_ms: 200, ..ServerOptions::default() })
        .expect("starting a standalone ZooKeeper");
    let cluster = Arc::new(Cluster::start(200).expect("starting the ensemble"));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    let reports = runtime.block_on(soak(&options, standalone.address(), cluster.clone()));
    drop(runtime);

    println!(
        "\n{:<56} {:>5} {:>7} {:>8} {:>8} {:>10}",
        "scenario", "runs", "faults", "ops", "checks", "violations"
    );
    let mut table: BTreeMap<String, (u32, usize, u64, u64, usize)> = BTreeMap::new();
    for (pick, r) in &reports {
        let row = table.entry(SCENARIOS[*pick].to_string()).or_default();
        row.0 += 1;
        row.1 += r.faults.len();
        row.2 += r.ops;
        row.3 += r.checks;
        row.4 += r.violations.len();
    }
    for (name, (runs, faults, ops, checks, violations)) in &table {
        println!("{name:<56} {runs:>5} {faults:>7} {ops:>8} {checks:>8} {violations:>10}");
    }
    // The scenarios' figures, summed over their runs (the daemon group's: faults, claims through
    // them, claims lost, overlaps).
    let mut figures: BTreeMap<&str, Vec<(String, u64)>> = BTreeMap::new();
    for (pick, r) in &reports {
        let sums = figures.entry(SCENARIOS[*pick]).or_default();
        for (name, value) in &r.figures {
            match sums.iter_mut().find(|(n, _)| n == name) {
                Some((_, sum)) => *sum += value,
                None => sums.push((name.clone(), *value)),
            }
        }
    }
    for (scenario, sums) in figures.iter().filter(|(_, sums)| !sums.is_empty()) {
        println!("\n{scenario}:");
        for (name, sum) in sums {
            println!("  {name:<30} {sum:>8}");
        }
    }
    let failed: Vec<&Report> = reports.iter().map(|(_, r)| r).filter(|r| !r.passed()).collect();
    println!(
        "\n{} scenarios run, {} failed. Seed {} (replay: chaos-soak --seed {} --minutes {}{})",
        reports.len(),
        failed.len(),
        options.seed,
        options.seed,
        options.minutes,
        options.only_text.as_ref().map(|t| format!(" --only {t:?}")).unwrap_or_default()
    );
    for r in &failed {
        print!("{r}");
    }
    std::process::exit(if failed.is_empty() { 0 } else { 1 });
}

async fn soak(options: &Options, standalone: String, cluster: Arc<Cluster>) -> Vec<(usize, Report)> {
    let single = Arc::new(Lab::new(vec![standalone], options.session, "/chaos-soak").await);
    let multi = Arc::new(Lab::new(cluster.members.clone(), options.session, "/chaos-soak").await);
    let mut rng = Rng::new(options.seed);
    let until = Instant::now() + Duration::from_secs_f64(options.minutes * 60.0);
    let mut reports = Vec::new();
    let mut n = 0;
    while Instant::now() < until {
        n += 1;
        let pick = options.only[rng.range(0, options.only.len() as u64 - 1) as usize];
        let seed = rng.next();
        let mut params = Rng::new(seed);
        let s = options.session;
        let (single, multi, cluster) = (single.clone(), multi.clone(), cluster.clone());
        // Each scenario on a task of its own: a panic is a failed scenario, not the end.
        let task = tokio::spawn(async move {
            match pick {
                0 => scenarios::holder_session_killed(&single).await,
                1 => scenarios::host_frozen(&single, params.range(2, 3) as u32).await,
                2 => {
                    scenarios::brief_disconnect(&single, s.mul_f64(params.range(10, 50) as f64 / 100.0)).await
                }
                3 => scenarios::lost_create_reply(&single).await,
                4 => scenarios::lost_set_data_reply(&single).await,
                5 => {
                    scenarios::unlock_while_disconnected(
                        &single,
                        s.mul_f64(params.range(10, 50) as f64 / 100.0),
                    )
                    .await
                }
                6 => {
                    let down = s.mul_f64(params.range(10, 50) as f64 / 100.0);
                    scenarios::watched_nodes_change_while_disconnected(&single, down).await
                }
                7 => scenarios::queue_consumer_killed(&single, params.range(5, 60) as usize).await,
                8 => scenarios::coordinator_killed(&single).await,
                9 => scenarios::barrier_participant_expires(&single).await,
                10 => scenarios::guest_traps_holding_a_lock(&single).await,
                11 => {
                    scenarios::ensemble_fault(&multi, &cluster, EnsembleFault::LeaderKilled, params.next())
                        .await
                }
                12 => {
                    let fault = EnsembleFault::LeaderFrozen(s.mul_f64(params.range(50, 300) as f64 / 100.0));
                    scenarios::ensemble_fault(&multi, &cluster, fault, params.next()).await
                }
                13 => {
                    let fault =
                        EnsembleFault::LeaderIsolated(s.mul_f64(params.range(50, 300) as f64 / 100.0));
                    scenarios::ensemble_fault(&multi, &cluster, fault, params.next()).await
                }
                14 => {
                    let fault =
                        EnsembleFault::MinorityMember(s.mul_f64(params.range(50, 300) as f64 / 100.0));
                    scenarios::ensemble_fault(&multi, &cluster, fault, params.next()).await
                }
                15 => {
                    let total = Duration::from_secs(params.range(15, 60));
                    let fault = EnsembleFault::LeaderRestarts { every: Duration::from_secs(3), total };
                    scenarios::ensemble_fault(&multi, &cluster, fault, params.next()).await
                }
                17 => {
                    let delay = s.mul_f64(params.range(5, 30) as f64 / 100.0);
                    scenarios::slow_replies(&single, delay, s * params.range(1, 4) as u32).await
                }
                18 => scenarios::host_process_frozen(&single, params.range(2, 3) as u32).await,
                19 => {
                    // One case of the exhaustive matrix, its faulted host's replies slowed by a
                    // random delay, so requests meet the faults at other moments.
                    let cases = wazoo_tests::cases::all();
                    let case = &cases[params.range(0, cases.len() as u64 - 1) as usize];
                    let bench = Bench::new(&single.members[0], s).await;
                    bench.site.proxies[0].delay(params.millis(0, 5));
                    bench.report(case).await
                }
                20 => {
                    let waiters = params.range(1, 12) as usize;
                    scenarios::daemon_sessions_end_with_calls_waiting(&single, waiters).await
                }
                21 => scenarios::daemon_frozen(&single, params.range(2, 3) as u32).await,
                22 => group_soak::daemons_faulted(&multi, params.range(3, 8) as usize, params.next()).await,
                16 => {
                    let fault = EnsembleFault::AllDown(s.mul_f64(params.range(120, 300) as f64 / 100.0));
                    scenarios::ensemble_fault(&multi, &cluster, fault, params.next()).await
                }
                _ => unreachable!("a scenario index past SCENARIOS"),
            }
        });
        let report = match task.await {
            Ok(report) => report,
            Err(e) => Report {
                scenario: SCENARIOS[pick].to_string(),
                faults: Vec::new(),
                notes: Vec::new(),
                ops: 0,
                checks: 0,
                violations: vec![format!("the scenario panicked: {e}")],
                figures: Vec::new(),
                took: Duration::ZERO,
            },
        };
        print!("#{n} {report}");
        reports.push((pick, report));
    }
    reports
}
