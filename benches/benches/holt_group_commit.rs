//! Bench binary: holt's durable commit rate with 1…16 concurrent committers, per group-commit
//! delay (`holt::Options::commit_delay`), with what each cell's groups looked like.
//!
//! Each committer commits one 64-byte put per batch (`Durability::Sync`: every commit waits for
//! its group's `fdatasync`) on a fresh database. Per cell: commits per second, the ratio to one
//! committer with the same delay, records per group and the share of groups whose leader waited
//! the delay (from `Db::stats().wal_groups`), and the process's CPU (user + system) as a share of
//! the machine's cores. The delays are run one after another in each round, so compare a
//! round's rows with each other.
//!
//! `NOKV_BENCH_THREADS` (default `1,2,4,8,16`), `NOKV_BENCH_DELAYS_US` (default `0,50`),
//! `NOKV_BENCH_SECS` (per cell, default 3), `NOKV_BENCH_ROUNDS` (default 2), `NOKV_BENCH_DIR`
//! (where the databases go; default the system temp directory). Run:
//! `cargo bench -p nokv-benches --bench holt_group_commit`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use holt::{Batch, Db, Options};
use nokv_benches::{bench_dir, env_list, env_u64, run_for};

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: `getrusage` writes into the zeroed struct we own; RUSAGE_SELF is always valid.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

fn main() {
    let threads = env_list("NOKV_BENCH_THREADS", &[1, 2, 4, 8, 16]);
    let delays = env_list("NOKV_BENCH_DELAYS_US", &[0, 50]);
    let secs = env_u64("NOKV_BENCH_SECS").unwrap_or(3);
    let rounds = env_u64("NOKV_BENCH_ROUNDS").unwrap_or(2);
    let base = bench_dir();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "holt group commit: {cores} cores, directory {}, {secs} s per cell",
        base.display()
    );
    for round in 1..=rounds {
        println!("\nround {round}");
        println!(
            "| delay | committers | commits/s | × 1 | records per group | groups delayed | CPU |"
        );
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        for &delay in &delays {
            let dir = tempfile::tempdir_in(&base).expect("bench directory");
            let db = Db::open(
                dir.path(),
                Options {
                    commit_delay: Duration::from_micros(delay as u64),
                    ..Options::default()
                },
            )
            .expect("open");
            let tree = db.create_tree("t", 1, false).expect("create tree");
            let seq = AtomicU64::new(0);
            let mut one = None;
            for &n in &threads {
                let before = db.stats().wal_groups;
                let cpu0 = cpu_seconds();
                let (done, elapsed) = run_for(n, secs, &|_, _| {
                    let k = seq.fetch_add(1, Ordering::Relaxed);
                    let mut b = Batch::new();
                    b.put(&tree, format!("k/{k:012}").into_bytes(), vec![7u8; 64]);
                    db.commit(b).expect("commit");
                });
                let cpu = cpu_seconds() - cpu0;
                let after = db.stats().wal_groups;
                let groups = (after.groups - before.groups).max(1) as f64;
                let rate = done as f64 / elapsed;
                let base_rate = *one.get_or_insert(rate);
                println!(
                    "| {delay} µs | {n} | {rate:.0} | {:.2} | {:.1} | {:.0} % | {:.0} % |",
                    rate / base_rate,
                    (after.records - before.records) as f64 / groups,
                    100.0 * (after.delayed - before.delayed) as f64 / groups,
                    100.0 * cpu / elapsed / cores as f64
                );
            }
        }
    }
}
