//! Concurrent writers on one embedded `nokv::Client` (issue 14, "Commands are sequenced, not
//! raced"): N threads share one client and each publishes 4 KiB bodies under its own distinct
//! paths for a fixed time. Reports puts/s over all threads, the ratio to one thread, and every
//! failed put by error kind (with distinct paths, every failure is a defect: no writer may fail or
//! give up for another writer's sake).
//!
//! A bench binary (not criterion): the quantity is aggregate throughput of concurrent writers,
//! not the latency of one call. Default durability (`Sync`: every metadata command waits for its
//! WAL fdatasync; group commit shares one fdatasync among concurrent commands), local-directory
//! objects.
//!
//! Run: `cargo bench -p nokv-benches --bench concurrent_puts`.
//! `NOKV_BENCH_THREADS=1,4,16,64` sets the writer counts, `NOKV_BENCH_SECS=5` the time per count,
//! `NOKV_BENCH_PUTS=100` switches to a fixed number of puts per thread instead of a time budget.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nokv::{Client, PutOptions};
use nokv_benches::{env_list, env_u64};

/// One run: `threads` writers on one fresh store. Returns (acknowledged puts, seconds, errors).
fn run(threads: usize, secs: u64, puts: Option<u64>) -> (u64, f64, BTreeMap<String, u64>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = Client::open(dir.path().join("store")).expect("open");
    client.create_workbench("bench").expect("create");
    let body = vec![b'x'; 4096];
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(Mutex::new(BTreeMap::<String, u64>::new()));
    let start = Instant::now();
    let acked: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (client, body, stop, errors) =
                    (client.clone(), &body, stop.clone(), errors.clone());
                s.spawn(move || {
                    let opts = PutOptions::create("application/octet-stream", "bench");
                    let mut ok = 0u64;
                    let mut i = 0u64;
                    loop {
                        if puts.is_some_and(|n| i >= n) || stop.load(Ordering::Relaxed) {
                            break;
                        }
                        match client.put("bench", &format!("outputs/t{t}/f{i}"), body, &opts) {
                            Ok(_) => ok += 1,
                            Err(e) => {
                                let kind = format!("{e:?}");
                                let kind = kind.split([' ', '(', '{']).next().unwrap_or("?");
                                *errors.lock().unwrap().entry(kind.to_string()).or_default() += 1;
                            }
                        }
                        i += 1;
                    }
                    ok
                })
            })
            .collect();
        if puts.is_none() {
            std::thread::sleep(Duration::from_secs(secs));
            stop.store(true, Ordering::Relaxed);
        }
        handles.into_iter().map(|h| h.join().expect("writer")).sum()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let errors = errors.lock().unwrap().clone();
    (acked, elapsed, errors)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    let threads = env_list("NOKV_BENCH_THREADS", &[1, 2, 4, 8, 16, 64]);
    let secs = env_u64("NOKV_BENCH_SECS").unwrap_or(5);
    let puts = env_u64("NOKV_BENCH_PUTS");
    println!("4 KiB put_file, one embedded Client shared by N threads, distinct paths");
    match puts {
        Some(n) => println!("{n} puts per thread"),
        None => println!("{secs} s per writer count"),
    }
    println!("| writers | acknowledged puts | puts/s | × 1 writer | failed puts |");
    println!("|---:|---:|---:|---:|---|");
    let mut base = None;
    for t in threads {
        let (acked, elapsed, errors) = run(t, secs, puts);
        let rate = acked as f64 / elapsed;
        let base = *base.get_or_insert(rate);
        let failed = if errors.is_empty() {
            "0".to_string()
        } else {
            errors
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "| {t} | {acked} | {rate:.0} | {:.2} | {failed} |",
            rate / base
        );
    }
}
