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

/// Where a bench puts its files: `$NOKV_BENCH_DIR`, else the system temp directory (it must be
/// on the file system being measured).
pub fn bench_dir() -> std::path::PathBuf {
    std::env::var_os("NOKV_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

/// Runs `op(worker, iteration)` on `workers` threads in a loop for `secs` seconds; returns the
/// number of calls completed and the elapsed seconds. `op` panics on failure (a bench aborts).
pub fn run_for(workers: usize, secs: u64, op: &(dyn Fn(usize, u64) + Sync)) -> (u64, f64) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        for w in 0..workers {
            let (stop, done) = (&stop, &done);
            s.spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    op(w, i);
                    i += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(std::time::Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
    });
    (done.into_inner(), start.elapsed().as_secs_f64())
}

/// The wall time of each of `n` calls of `f`.
pub fn time_n(n: u64, mut f: impl FnMut()) -> Vec<std::time::Duration> {
    (0..n)
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed()
        })
        .collect()
}

/// p50, p90 and p99 of `samples` in milliseconds (nearest rank). Panics when `samples` is
/// empty (a bench aborts).
pub fn percentiles(mut samples: Vec<std::time::Duration>) -> (f64, f64, f64) {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[i].as_secs_f64() * 1000.0
    };
    (at(0.5), at(0.9), at(0.99))
}
