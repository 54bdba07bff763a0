//! What the benchmarks share: percentiles and how durations are printed.
#![allow(dead_code)] // each bench uses some of these

use std::time::Duration;

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
