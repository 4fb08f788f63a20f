//! Shared helpers for the NoKV benchmarks (see `benches/`).

/// A comma-separated list of counts from the environment variable `name` (e.g.
/// `NOKV_BENCH_THREADS=1,4,16`); `default` when unset, empty or unparsable.
pub fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(name)
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| !v.is_empty())
        .unwrap_or_else(|| default.to_vec())
}

/// An unsigned number from the environment variable `name`; `None` when unset or unparsable.
pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}
