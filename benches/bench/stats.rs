//! The one set of figures every benchmark uses: the median (and other quantiles) of repeated timings, elapsed
//! time in the unit printed, and this process's peak memory.

use std::time::Instant;

/// The value at `per_mille` thousandths of the sorted samples: 500 is the median (the upper one of an even
/// count, `v[len / 2]`), 900 the 90th percentile.
pub fn quantile(mut samples: Vec<f64>, per_mille: usize) -> f64 {
    assert!(!samples.is_empty(), "a quantile of no samples");
    samples.sort_by(f64::total_cmp);
    let at = (samples.len() * per_mille / 1000).min(samples.len() - 1);
    samples[at]
}

/// The median of the samples.
pub fn median(samples: Vec<f64>) -> f64 {
    quantile(samples, 500)
}

/// Milliseconds since `start`.
pub fn ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// Microseconds since `start`.
pub fn us(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e6
}

/// A number from the environment, else `default`.
pub fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// A `/proc/self/status` field in KiB (`VmHWM:` the peak resident set, `VmRSS:` the current one); 0 off Linux.
pub fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Resets the peak resident set to the current one (Linux), so a figure covers one part of the run.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The peak resident set since the last reset, in MiB.
pub fn peak_rss_mib() -> f64 {
    status_kib("VmHWM:") as f64 / 1024.0
}
