//! The write path against the machine's durability floor (issue 24), a bench binary.
//!
//! Three measurements, each on a fresh store in `NOKV_BENCH_DIR` (default: the system temp
//! directory; it must be on the file system being measured), default durability (every metadata
//! command waits for its WAL fdatasync, shared by group commit; objects on the local directory
//! provider with the store's object-sync mode):
//!
//! 1. **Latency against the floor.** `NOKV_BENCH_PUTS` (default 500) one-at-a-time embedded
//!    4 KiB `Client::put`s and as many *floor* operations, interleaved in slices of 50 so both
//!    see the same machine: a floor operation is what any durable put must at least do — write
//!    a new 4 KiB file and `fsync` it, then append a 512-byte record to a log file and
//!    `fdatasync` it. Reported: p50 / p90 of each, and put p50 / floor p50.
//! 2. **Writers.** Embedded 4 KiB puts per second from each of `NOKV_BENCH_THREADS` (default
//!    `1,16`) threads sharing one `Client`, `NOKV_BENCH_SECS` (default 3) seconds each, and the
//!    ratio to one writer.
//! 3. Nothing else: `NOKV_BENCH_MODE=sequential` runs only `NOKV_BENCH_PUTS` sequential puts (no
//!    floor, no writers), for counting system calls per put with
//!    `strace -f -c -o FILE target/release/deps/write_path-* ` (see docs/benchmarks.md).
//!
//! `NOKV_BENCH_ROUNDS` (default 2) repeats sections 1 and 2. Run:
//! `cargo bench -p nokv-benches --bench write_path`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use nokv::{Client, PutOptions};
use nokv_benches::{bench_dir, env_list, env_u64, run_for};

const BODY: usize = 4096;
const RECORD: usize = 512;
const SLICE: u64 = 50;

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort_unstable();
    if samples.is_empty() {
        return f64::NAN;
    }
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i].as_secs_f64() * 1e3
}

/// One floor operation: a new 4 KiB file written and fsynced, then a record appended to `log`
/// and fdatasynced.
fn floor_op(dir: &Path, log: &mut File, i: u64, block: &[u8], record: &[u8]) {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(format!("b{i}")))
        .expect("create block file");
    f.write_all(block).expect("write block");
    f.sync_all().expect("fsync block");
    log.write_all(record).expect("append record");
    log.sync_data().expect("fdatasync log");
}

fn open_store(root: &Path, name: &str) -> Client {
    let client = Client::open(root.join(name)).expect("open store");
    client.create_workbench("bench").expect("create workbench");
    client
}

fn main() {
    let puts = env_u64("NOKV_BENCH_PUTS").unwrap_or(500);
    let rounds = env_u64("NOKV_BENCH_ROUNDS").unwrap_or(2);
    let secs = env_u64("NOKV_BENCH_SECS").unwrap_or(3);
    let threads = env_list("NOKV_BENCH_THREADS", &[1, 16]);
    let sequential_only = std::env::var("NOKV_BENCH_MODE").is_ok_and(|m| m == "sequential");
    let body = vec![0x5au8; BODY];
    let record = vec![0xa5u8; RECORD];
    let opts = PutOptions::create("application/octet-stream", "bench");
    let tmp = tempfile::tempdir_in(bench_dir()).expect("bench dir");

    if sequential_only {
        let client = open_store(tmp.path(), "sequential");
        let start = Instant::now();
        for i in 0..puts {
            client
                .put("bench", &format!("outputs/f{i}"), &body, &opts)
                .expect("put");
        }
        let t = start.elapsed().as_secs_f64();
        println!(
            "sequential: {puts} puts in {t:.2} s, {:.3} ms per put",
            t * 1e3 / puts as f64
        );
        return;
    }

    for round in 1..=rounds {
        // 1. Latency: floor and put interleaved in slices.
        let client = open_store(tmp.path(), &format!("latency{round}"));
        let floor_dir = tmp.path().join(format!("floor{round}"));
        std::fs::create_dir_all(&floor_dir).expect("floor dir");
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(floor_dir.join("log"))
            .expect("floor log");
        let (mut floor, mut put) = (Vec::new(), Vec::new());
        let mut i = 0u64;
        while i < puts {
            let n = SLICE.min(puts - i);
            for k in i..i + n {
                let t = Instant::now();
                floor_op(&floor_dir, &mut log, k, &body, &record);
                floor.push(t.elapsed());
            }
            for k in i..i + n {
                let t = Instant::now();
                client
                    .put("bench", &format!("outputs/f{k}"), &body, &opts)
                    .expect("put");
                put.push(t.elapsed());
            }
            i += n;
        }
        drop(client);
        let (f50, f90) = (percentile(&mut floor, 0.5), percentile(&mut floor, 0.9));
        let (p50, p90) = (percentile(&mut put, 0.5), percentile(&mut put, 0.9));
        println!(
            "round {round} latency ({puts} each): floor p50 {f50:.3} ms p90 {f90:.3} ms | \
             put p50 {p50:.3} ms p90 {p90:.3} ms | put/floor p50 {:.2}x",
            p50 / f50
        );

        // 2. Writers sharing one client.
        let client = open_store(tmp.path(), &format!("writers{round}"));
        let mut one = None;
        for &n in &threads {
            let (done, t) = run_for(n, secs, &|w, i| {
                client
                    .put("bench", &format!("outputs/n{n}/w{w}/f{i}"), &body, &opts)
                    .expect("put");
            });
            let rate = done as f64 / t;
            let base = *one.get_or_insert(rate);
            println!(
                "round {round} writers {n:>2}: {rate:>8.1} puts/s ({done} puts, {t:.2} s) = {:.2}x one",
                rate / base
            );
        }
    }
}
