//! The machine's floor for durable writes (issues 11 and 14), a bench binary.
//!
//! NoKV's throughput targets for many writers ("16 durable committers ≥ 8× one", "16 clients ≥
//! 8× one client") are ratios of what the disk and kernel do for concurrent `fdatasync`/`fsync`
//! callers. This bench measures that directly, with programs that do nothing but the durable
//! writes, so the engine's and the server's ratios can be read against what the machine allows:
//!
//! - `wal/append` — a minimal leader/follower group commit: each writer queues one record of
//!   `NOKV_BENCH_RECORD` bytes (default 256), a leader writes the whole queue at the end of one
//!   file and calls `fdatasync`, then acknowledges every record of its group. The file grows, as
//!   holt's WAL segments do.
//! - `wal/prealloc` — the same into a file written with zeros and synced before the run, so a
//!   sync flushes data but no size or allocation change.
//! - `wal/…+gather` — the leader first waits up to `NOKV_BENCH_GATHER_US` (default 50 µs) while
//!   fewer records are queued than its previous group held, so two alternating cohorts of writers
//!   merge into one group (a single writer never waits: its previous group held one record).
//! - `object/new-dirs` — the local object store's durable put of one 4 KiB block, as
//!   `objstore::LocalStore` does it under its key layout
//!   (`…/{revision}/blocks/{index}`): create the revision and `blocks` directories, write a temp
//!   file, `fsync` it, rename it into place, `fsync` the `blocks` directory, the revision
//!   directory and the root directory (four flushes, each after new metadata).
//! - `object/flat` — a 4 KiB temp file in one existing directory, `fsync`, rename, `fsync` the
//!   directory: the least a durable, atomically named object can cost on a POSIX file system.
//!
//! Each case runs with `NOKV_BENCH_THREADS` (default `1,4,16`) writers for `NOKV_BENCH_SECS`
//! (default 3) seconds, `NOKV_BENCH_ROUNDS` (default 2) times, the cases interleaved, in a fresh
//! directory under `NOKV_BENCH_DIR` (default: the system temp directory — it must be on the file
//! system whose floor you want). Output: operations per second and the ratio to one writer of
//! the same case and round. Run: `cargo bench -p nokv-benches --bench durability_floor`.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use nokv_benches::{bench_dir, env_list, env_u64, run_for};

/// One WAL floor run's configuration.
#[derive(Clone, Copy)]
struct WalCase {
    prealloc: bool,
    gather: Option<Duration>,
}

/// Size of the preallocated WAL file (bytes); a run stops writing at its end.
const PREALLOC_BYTES: u64 = 256 << 20;

struct Queue {
    /// Records queued and not yet taken by a leader.
    queued: u64,
    /// Sequence number of the last record queued / made durable.
    last_queued: u64,
    durable: u64,
    leader_active: bool,
    /// Records in the previous group.
    last_group: u64,
    /// Next write offset in the file.
    offset: u64,
    groups: u64,
    failed: bool,
}

/// Runs the group-commit floor with `threads` writers; returns (records acknowledged, groups,
/// seconds).
fn run_wal(dir: &Path, case: WalCase, threads: usize, secs: u64, record: usize) -> (u64, u64, f64) {
    let path = dir.join("wal");
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .expect("create wal file");
    if case.prealloc {
        let zeros = vec![0u8; 1 << 20];
        let mut w = &file;
        for _ in 0..(PREALLOC_BYTES >> 20) {
            w.write_all(&zeros).expect("preallocate");
        }
        file.sync_all().expect("sync preallocated file");
    }
    let queue = Mutex::new(Queue {
        queued: 0,
        last_queued: 0,
        durable: 0,
        leader_active: false,
        last_group: 1,
        offset: 0,
        groups: 0,
        failed: false,
    });
    let cond = Condvar::new();
    let stop = AtomicBool::new(false);
    let acked = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let (queue, cond, stop, acked, file) = (&queue, &cond, &stop, &acked, &file);
            s.spawn(move || {
                let bytes = vec![b'r'; record];
                while !stop.load(Ordering::Relaxed) {
                    let mut q = queue.lock().unwrap();
                    q.queued += 1;
                    q.last_queued += 1;
                    let me = q.last_queued;
                    while q.durable < me && !q.failed {
                        if q.leader_active {
                            q = cond.wait(q).unwrap();
                            continue;
                        }
                        q.leader_active = true;
                        if let Some(gather) = case.gather {
                            if q.queued < q.last_group {
                                drop(q);
                                std::thread::sleep(gather);
                                q = queue.lock().unwrap();
                            }
                        }
                        let (n, last, offset) = (q.queued, q.last_queued, q.offset);
                        let len = n * record as u64;
                        if case.prealloc && offset + len > PREALLOC_BYTES {
                            q.failed = true;
                            cond.notify_all();
                            break;
                        }
                        q.queued = 0;
                        q.offset += len;
                        drop(q);
                        let group: Vec<u8> = bytes.repeat(n as usize);
                        file.write_all_at(&group, offset).expect("write group");
                        file.sync_data().expect("fdatasync");
                        q = queue.lock().unwrap();
                        q.durable = last;
                        q.last_group = n;
                        q.groups += 1;
                        q.leader_active = false;
                        cond.notify_all();
                    }
                    if q.failed {
                        break;
                    }
                    drop(q);
                    acked.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
    });
    let elapsed = start.elapsed().as_secs_f64();
    let groups = queue.lock().unwrap().groups;
    drop(file);
    fs::remove_file(&path).expect("remove wal file");
    (acked.into_inner(), groups, elapsed)
}

fn sync_dir(path: &Path) {
    File::open(path)
        .and_then(|d| d.sync_all())
        .expect("fsync directory");
}

/// Writes `body` durably under `dir/name` via temp file, `fsync` and rename.
fn durable_file(dir: &Path, name: &str, body: &[u8]) {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&tmp)
        .expect("create temp file");
    f.write_all(body).expect("write block");
    f.sync_all().expect("fsync block");
    drop(f);
    fs::rename(&tmp, dir.join(name)).expect("rename");
}

/// Runs the object floor with `threads` writers; returns (objects made durable, seconds).
fn run_objects(root: &Path, new_dirs: bool, threads: usize, secs: u64) -> (u64, f64) {
    let body = vec![b'x'; 4096];
    run_for(threads, secs, &|t, i| {
        if new_dirs {
            let revision = root.join(format!("{t:04x}{i:028x}"));
            let blocks = revision.join("blocks");
            fs::create_dir_all(&blocks).expect("create revision directories");
            durable_file(&blocks, "0000000000000000", &body);
            sync_dir(&blocks);
            sync_dir(&revision);
            sync_dir(root);
        } else {
            durable_file(root, &format!("{t:04x}{i:028x}"), &body);
            sync_dir(root);
        }
    })
}

fn main() {
    // `cargo bench` passes `--bench`; there are no other arguments.
    let threads = env_list("NOKV_BENCH_THREADS", &[1, 4, 16]);
    let secs = env_u64("NOKV_BENCH_SECS").unwrap_or(3);
    let rounds = env_u64("NOKV_BENCH_ROUNDS").unwrap_or(2);
    let record = env_u64("NOKV_BENCH_RECORD").unwrap_or(256) as usize;
    let gather = Duration::from_micros(env_u64("NOKV_BENCH_GATHER_US").unwrap_or(50));
    let base = bench_dir();
    println!(
        "durability floor: {} cores, directory {}, {secs} s per row, record {record} B, gather {} µs",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        base.display(),
        gather.as_micros()
    );
    let wal_cases = [
        (
            "wal/append",
            WalCase {
                prealloc: false,
                gather: None,
            },
        ),
        (
            "wal/append+gather",
            WalCase {
                prealloc: false,
                gather: Some(gather),
            },
        ),
        (
            "wal/prealloc",
            WalCase {
                prealloc: true,
                gather: None,
            },
        ),
        (
            "wal/prealloc+gather",
            WalCase {
                prealloc: true,
                gather: Some(gather),
            },
        ),
    ];
    for round in 1..=rounds {
        println!("\nround {round}");
        println!("| case | writers | ops/s | × 1 writer | records per fdatasync |");
        println!("|---|---:|---:|---:|---:|");
        for (name, case) in wal_cases {
            let mut one = None;
            for &n in &threads {
                let dir = tempfile::tempdir_in(&base).expect("bench directory");
                let (acked, groups, elapsed) = run_wal(dir.path(), case, n, secs, record);
                let rate = acked as f64 / elapsed;
                let base_rate = *one.get_or_insert(rate);
                println!(
                    "| {name} | {n} | {rate:.0} | {:.2} | {:.1} |",
                    rate / base_rate,
                    acked as f64 / groups.max(1) as f64
                );
            }
        }
        for (name, new_dirs) in [("object/new-dirs", true), ("object/flat", false)] {
            let mut one = None;
            for &n in &threads {
                let dir = tempfile::tempdir_in(&base).expect("bench directory");
                let (done, elapsed) = run_objects(dir.path(), new_dirs, n, secs);
                let rate = done as f64 / elapsed;
                let base_rate = *one.get_or_insert(rate);
                println!("| {name} | {n} | {rate:.0} | {:.2} | |", rate / base_rate);
            }
        }
    }
}
