//! What the benchmarks share: percentiles and how durations are printed.
#![allow(dead_code)] // each bench uses some of these

use std::path::PathBuf;
use std::time::Duration;

use wazoo_testkit::{ServerOptions, ZkServer};

/// The plugins directory (`WAZOO_PLUGINS`, else the workspace's `plugins/`) and in it
/// `name.wasm`, which must exist.
pub fn plugin(name: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    let plugins = std::env::var_os("WAZOO_PLUGINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../plugins"));
    let component = plugins.join(format!("{name}.wasm"));
    anyhow::ensure!(component.exists(), "{} missing: run `make recipes` first", component.display());
    Ok((plugins, component))
}

/// The ZooKeeper a bench runs against: `WAZOO_ZOOKEEPER`'s ensemble, else a server started
/// with `options` (stopped when the returned server is dropped), and its address.
pub fn zookeeper(options: ServerOptions) -> anyhow::Result<(Option<ZkServer>, String)> {
    Ok(match std::env::var("WAZOO_ZOOKEEPER") {
        Ok(address) => (None, address),
        Err(_) => {
            let server = ZkServer::start(options)?;
            let address = server.address();
            (Some(server), address)
        }
    })
}

/// The `p`th percentile of `samples` (sorted in place).
pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    let index = ((p / 100.0) * (samples.len() - 1) as f64).round() as usize;
    samples[index]
}

pub fn us(d: Duration) -> String {
    let micros = d.as_secs_f64() * 1e6;
    if micros < 10.0 {
        format!("{micros:.2} µs")
    } else {
        format!("{micros:.0} µs")
    }
}

pub fn ms(d: Duration) -> String {
    let millis = d.as_secs_f64() * 1e3;
    if millis < 10.0 {
        format!("{millis:.2} ms")
    } else {
        format!("{millis:.1} ms")
    }
}

/// This process's resident set size, in bytes.
pub fn rss_bytes() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .ok_or_else(|| anyhow::anyhow!("no VmRSS in /proc/self/status"))?;
    Ok(kb * 1024)
}
