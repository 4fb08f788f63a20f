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
//! - `object/syncfs-group` — the `object/new-dirs` block (same directories, temp file and
//!   rename) with no `fsync` of its own: each writer then waits for a group flush, one
//!   `syncfs(2)` of the file system shared by every writer that finished its rename while the
//!   previous flush ran (leader/follower, as `objstore::LocalDir` does in its default
//!   `ObjectSync::Syncfs` mode). The file system is the one `NOKV_BENCH_DIR` is on, so other
//!   programs' dirty data is flushed too: that is the mode's cost on a shared file system.
//! - `local/syncfs`, `local/per-file` — `objstore::LocalDir::put_if_absent` of the same block
//!   under `objstore::block_key` (a new revision per put) in each `ObjectSync` mode: the
//!   provider itself, with its temp-file names, `mkdir`s and flush bookkeeping.
//!
//! Each case runs with `NOKV_BENCH_THREADS` (default `1,4,16`) writers for `NOKV_BENCH_SECS`
//! (default 3) seconds, `NOKV_BENCH_ROUNDS` (default 2) times, the cases interleaved, in a fresh
//! directory under `NOKV_BENCH_DIR` (default: the system temp directory — it must be on the file
//! system whose floor you want); after each row its directory is removed and the file system
//! flushed (`syncfs`, not timed), so a row never pays for the previous row's files. Output: operations per second, the ratio to one writer of
//! the same case and round, and the flushes per operation (WAL: records per `fdatasync`;
//! objects: `fsync` or `syncfs` calls per object). Run:
//! `cargo bench -p nokv-benches --bench durability_floor`.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use nokv_benches::{bench_dir, env_list, env_u64, run_for};
use objstore::{LocalDir, LocalOptions, ObjectStore, ObjectSync, PutOutcome};

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

/// A bare group flush: a writer needs the flush numbered one above the last one started; the
/// first writer to find none running leads it (one `syncfs`), the others wait.
struct SyncfsGroup {
    state: Mutex<GroupState>,
    ended: Condvar,
    dir: File,
}

#[derive(Default)]
struct GroupState {
    started: u64,
    finished: u64,
    running: bool,
}

impl SyncfsGroup {
    fn new(dir: &Path) -> Self {
        SyncfsGroup {
            state: Mutex::new(GroupState::default()),
            ended: Condvar::new(),
            dir: File::open(dir).expect("open the flush directory"),
        }
    }

    fn wait(&self) {
        let mut st = self.state.lock().unwrap();
        let needed = st.started + 1;
        while st.finished < needed {
            if st.running {
                st = self.ended.wait(st).unwrap();
                continue;
            }
            st.started = needed;
            st.running = true;
            drop(st);
            rustix::fs::syncfs(&self.dir).expect("syncfs");
            st = self.state.lock().unwrap();
            st.finished = needed;
            st.running = false;
            self.ended.notify_all();
        }
    }
}

/// Runs the shared-`syncfs` object floor; returns (objects made durable, flushes, seconds).
fn run_syncfs_group(root: &Path, threads: usize, secs: u64) -> (u64, u64, f64) {
    let body = vec![b'x'; 4096];
    let group = SyncfsGroup::new(root);
    let (done, elapsed) = run_for(threads, secs, &|t, i| {
        let blocks = root.join(format!("{t:04x}{i:028x}")).join("blocks");
        fs::create_dir_all(&blocks).expect("create revision directories");
        let tmp = blocks.join("0000000000000000.tmp");
        let mut f = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&tmp)
            .expect("create temp file");
        f.write_all(&body).expect("write block");
        drop(f);
        fs::rename(&tmp, blocks.join("0000000000000000")).expect("rename");
        group.wait();
    });
    let flushes = group.state.lock().unwrap().finished;
    (done, flushes, elapsed)
}

/// Runs `LocalDir::put_if_absent` of one 4 KiB block per new revision; returns (objects, the
/// provider's flushes: syncfs calls plus file and directory fsyncs, seconds).
fn run_local(root: &Path, sync: ObjectSync, threads: usize, secs: u64) -> (u64, u64, f64) {
    let body = vec![b'x'; 4096];
    let store = LocalDir::open_with(root, LocalOptions { sync }).expect("open LocalDir");
    let before = store.stats();
    let (done, elapsed) = run_for(threads, secs, &|t, i| {
        let mut revision = [0u8; 16];
        revision[..8].copy_from_slice(&(t as u64).to_be_bytes());
        revision[8..].copy_from_slice(&i.to_be_bytes());
        let key = objstore::block_key(&[0x11; 16], &[0x22; 16], &revision, 0);
        let outcome = store.put_if_absent(&key, &body).expect("put_if_absent");
        assert_eq!(outcome, PutOutcome::Created);
    });
    let after = store.stats();
    let flushes = (after.syncfs_calls - before.syncfs_calls)
        + (after.file_fsyncs - before.file_fsyncs)
        + (after.dir_fsyncs - before.dir_fsyncs);
    (done, flushes, elapsed)
}

/// Removes a row's directory and flushes the file system before the next row starts (not
/// timed), so no row pays for the writeback or the block discards of the previous row's files.
fn settle(dir: tempfile::TempDir, base: &Path) {
    dir.close().expect("remove bench directory");
    let base = File::open(base).expect("open bench directory");
    rustix::fs::syncfs(&base).expect("syncfs");
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
                settle(dir, &base);
                let rate = acked as f64 / elapsed;
                let base_rate = *one.get_or_insert(rate);
                println!(
                    "| {name} | {n} | {rate:.0} | {:.2} | {:.1} |",
                    rate / base_rate,
                    acked as f64 / groups.max(1) as f64
                );
            }
        }
        println!();
        println!("| case | writers | objects/s | × 1 writer | flushes per object |");
        println!("|---|---:|---:|---:|---:|");
        let object_cases = [
            "object/new-dirs",
            "object/flat",
            "object/syncfs-group",
            "local/per-file",
            "local/syncfs",
        ];
        for name in object_cases {
            let mut one = None;
            for &n in &threads {
                let dir = tempfile::tempdir_in(&base).expect("bench directory");
                let (done, flushes, elapsed) = match name {
                    "object/new-dirs" => {
                        let (done, elapsed) = run_objects(dir.path(), true, n, secs);
                        (done, done * 4, elapsed)
                    }
                    "object/flat" => {
                        let (done, elapsed) = run_objects(dir.path(), false, n, secs);
                        (done, done * 2, elapsed)
                    }
                    "object/syncfs-group" => run_syncfs_group(dir.path(), n, secs),
                    "local/per-file" => run_local(dir.path(), ObjectSync::PerFile, n, secs),
                    _ => run_local(dir.path(), ObjectSync::Syncfs, n, secs),
                };
                settle(dir, &base);
                let rate = done as f64 / elapsed;
                let base_rate = *one.get_or_insert(rate);
                println!(
                    "| {name} | {n} | {rate:.0} | {:.2} | {:.2} |",
                    rate / base_rate,
                    flushes as f64 / done.max(1) as f64
                );
            }
        }
    }
}
