//! A writer lock shared between writers (`WriterLock::Shared`, docs/holt-format.md, "Sharing
//! the writer lock between processes"). Two `Db` handles on one directory hold two open file
//! descriptions of `LOCK`, so their flocks exclude each other exactly as two processes' do:
//!
//! - each write takes the lock when its handle does not hold it, and the handle releases it
//!   after the idle grace, so two writers interleave instead of one failing with `Locked`;
//! - a handle that takes the lock again first catches up with the other's commits: WAL records
//!   replayed onto its state, or the state recovered again when the other flushed or
//!   checkpointed (images and segments changed under it);
//! - no commit is lost or applied twice: a counter incremented under a version expectation by
//!   both handles ends at the number of acknowledged increments, and a reopen sees every key.

use std::sync::Arc;
use std::time::Duration;

use holt::{Batch, Db, Expect, Options, WriterLock};

fn shared(idle_ms: u64) -> Options {
    Options {
        writer_lock: WriterLock::Shared {
            idle_release: Duration::from_millis(idle_ms),
            wait: Duration::from_secs(30),
        },
        ..Options::default()
    }
}

fn open(dir: &std::path::Path, opts: Options) -> Db {
    // The first open may meet the other handle's lock for a moment (held through its grace).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match Db::open(dir, opts) {
            Ok(db) => return db,
            Err(holt::Error::Locked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("open: {e}"),
        }
    }
}

fn put(db: &Db, k: &str, v: &str) -> u64 {
    let t = db.tree("t").unwrap();
    let mut b = Batch::new();
    b.put(&t, k, v);
    db.commit(b).unwrap()
}

fn get(db: &Db, k: &str) -> Option<Vec<u8>> {
    db.refresh().unwrap();
    db.tree("t").unwrap().get(k.as_bytes()).unwrap()
}

#[test]
fn two_writers_interleave_and_each_catches_up_with_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), shared(5));
    a.create_tree("t", 1, true).unwrap();
    put(&a, "a1", "1");
    let b = open(dir.path(), shared(5));
    // B's open saw A's commits; its write waits for A's grace, then goes through.
    assert_eq!(get(&b, "a1").as_deref(), Some(&b"1"[..]));
    put(&b, "b1", "2");
    // A takes the lock again and replays B's record before its own commit.
    let v = put(&a, "a2", "3");
    assert_eq!(get(&a, "b1").as_deref(), Some(&b"2"[..]));
    assert_eq!(a.version(), v);
    assert_eq!(get(&b, "a2").as_deref(), Some(&b"3"[..]));
    let stats = a.stats().writer_lock;
    assert!(stats.acquisitions >= 2, "{stats:?}");
    assert!(stats.releases >= 1, "{stats:?}");
    assert!(stats.caught_up_records >= 1, "{stats:?}");
    drop(a);
    drop(b);
    let reopened = Db::open(dir.path(), Options::default()).unwrap();
    for k in ["a1", "b1", "a2"] {
        assert!(get(&reopened, k).is_some(), "{k} lost");
    }
}

#[test]
fn a_writer_reloads_when_the_other_checkpointed_while_it_was_away() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path(), shared(2));
    a.create_tree("t", 1, true).unwrap();
    for i in 0..50 {
        put(&a, &format!("a{i:03}"), "x");
    }
    let b = open(dir.path(), shared(2));
    for i in 0..50 {
        put(&b, &format!("b{i:03}"), "y");
    }
    // B rewrites the store as one image and deletes the WAL segments A last wrote to.
    b.checkpoint().unwrap();
    put(&b, "after-checkpoint", "z");
    put(&a, "a-last", "w");
    assert!(a.stats().writer_lock.reloads >= 1, "{:?}", a.stats());
    for k in ["a000", "a049", "b000", "b049", "after-checkpoint", "a-last"] {
        assert!(get(&a, k).is_some(), "{k} missing in A");
        assert!(get(&b, k).is_some(), "{k} missing in B");
    }
    // A's next flush writes the image above B's and leaves a store that opens whole.
    a.flush().unwrap();
    put(&b, "b-last", "v");
    drop(a);
    drop(b);
    let reopened = Db::open(dir.path(), Options::default()).unwrap();
    for k in ["a000", "b049", "after-checkpoint", "a-last", "b-last"] {
        assert!(get(&reopened, k).is_some(), "{k} lost");
    }
}

/// Reads the counter, then commits `counter + 1` expecting the version it read (a lost race
/// answers `VersionMismatch` and the increment is retried).
fn increment(db: &Db) -> u64 {
    let t = db.tree("t").unwrap();
    loop {
        let hold = db.hold_writer().unwrap();
        let view = db.view();
        let n: u64 = view
            .get(&t, b"counter")
            .unwrap()
            .map(|v| String::from_utf8(v).unwrap().parse().unwrap())
            .unwrap_or(0);
        let mut b = Batch::new();
        b.expect_version(view.version());
        b.expect(
            &t,
            b"counter".to_vec(),
            match view.get(&t, b"counter").unwrap() {
                Some(v) => Expect::Equals(v),
                None => Expect::Absent,
            },
        );
        b.put(&t, "counter", (n + 1).to_string());
        let out = db.commit(b);
        drop(hold);
        match out {
            Ok(_) => return n + 1,
            Err(holt::Error::VersionMismatch { .. } | holt::Error::PredicateFailed { .. }) => {}
            Err(e) => panic!("increment: {e}"),
        }
    }
}

#[test]
fn concurrent_increments_from_two_writers_are_never_lost() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        // Small images: flushes and merges happen while the handles trade the lock.
        checkpoint_wal_bytes: 4096,
        ..shared(1)
    };
    let a = open(dir.path(), opts);
    a.create_tree("t", 1, true).unwrap();
    let b = open(dir.path(), opts);
    let per_writer = 150;
    let handles: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .map(|db| {
            let db = Arc::new(db);
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                for _ in 0..per_writer {
                    seen.push(increment(&db));
                }
                seen
            })
        })
        .collect();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_unstable();
    // Every acknowledged increment produced a distinct value: none overwrote another.
    assert_eq!(all, (1..=2 * per_writer as u64).collect::<Vec<_>>());
    assert!(a.stats().writer_lock.acquisitions > 1);
    assert!(b.stats().writer_lock.acquisitions > 1);
    drop(a);
    drop(b);
    let reopened = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(
        get(&reopened, "counter"),
        Some((2 * per_writer).to_string().into_bytes())
    );
}

#[test]
fn a_held_lock_still_refuses_a_second_writer() {
    let dir = tempfile::tempdir().unwrap();
    let _a = Db::open(dir.path(), Options::default()).unwrap();
    assert!(matches!(
        Db::open(dir.path(), shared(5)),
        Err(holt::Error::Locked { .. })
    ));
}
