//! Power-loss tests of `LocalDir` on the simulated file system (`sim.rs`): concurrent puts,
//! put-if-absents and deletes in both durability modes, the power cut at a random call, then
//! a fresh `LocalDir` on what the disk kept. Checked: every write that returned `Ok` is there
//! with exactly its bytes (a delete that returned `Ok`: the key is gone), no key holds bytes
//! that nobody wrote, and no key holds a partial object — except, in
//! [`ObjectSync::Syncfs`] mode with spontaneous writeback, the key of a put-if-absent that was
//! never acknowledged, which may hold a prefix of its bytes (see the module docs of `local`).
//! A deliberately broken provider that skips its flushes must fail the same checks.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use super::sim::{Rng, SimFs};
use super::*;

const ROOT: &str = "/store/objects";
const THREADS: u64 = 4;
const STEPS: u64 = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    PutIfAbsent,
    Put,
    Delete,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Created,
    AlreadyExists,
    Done,
    Failed,
}

#[derive(Clone, Debug)]
struct Event {
    key: String,
    op: Op,
    value: Vec<u8>,
    outcome: Outcome,
}

fn open_sim(fs: &SimFs, sync: ObjectSync) -> Result<LocalDir, Error> {
    LocalDir::open_on(Box::new(fs.clone()), Path::new(ROOT), LocalOptions { sync })
}

/// A block key under one of three shared revisions (threads share their directories).
fn block(revision: u64, index: u64) -> String {
    crate::keys::block_key(&[0x11; 16], &[0x22; 16], &[revision as u8; 16], index)
}

/// Distinct bytes for step `n` of thread `t`: 3 header bytes, then 0–299 pseudo-random ones.
fn value(rng: &mut Rng, t: u64, n: u64) -> Vec<u8> {
    let len = rng.below(300) as usize;
    let mut v = vec![b'v', t as u8, n as u8];
    v.extend((0..len).map(|_| rng.next() as u8));
    v
}

/// One thread's writes: put-if-absent of fresh block keys (and, now and then, of a key every
/// thread races for), overwrites of its own key, deletes of its own earlier blocks.
fn run_thread(store: &LocalDir, seed: u64, t: u64) -> Vec<Event> {
    let mut rng = Rng::new(seed.wrapping_mul(1_000_003).wrapping_add(t));
    let mut events = Vec::new();
    let mut own_blocks: Vec<String> = Vec::new();
    for n in 0..STEPS {
        let r = rng.below(10);
        let shared = r == 6;
        let (key, op) = match r {
            0..=5 => (block(rng.below(3), t * 1000 + n), Op::PutIfAbsent),
            6 => (block(rng.below(3), 999), Op::PutIfAbsent),
            7 | 8 => (format!("nokv/t{t}/value"), Op::Put),
            _ => match own_blocks.pop() {
                Some(k) => (k, Op::Delete),
                None => (block(0, t * 1000 + n), Op::PutIfAbsent),
            },
        };
        let value = if op == Op::Delete {
            Vec::new()
        } else {
            value(&mut rng, t, n)
        };
        let outcome = match op {
            Op::PutIfAbsent => match store.put_if_absent(&key, &value) {
                Ok(PutOutcome::Created) => {
                    if !shared {
                        own_blocks.push(key.clone());
                    }
                    Outcome::Created
                }
                Ok(PutOutcome::AlreadyExists) => Outcome::AlreadyExists,
                Err(_) => Outcome::Failed,
            },
            Op::Put => match store.put(&key, &value) {
                Ok(()) => Outcome::Done,
                Err(_) => Outcome::Failed,
            },
            Op::Delete => match store.delete(&key) {
                Ok(()) => Outcome::Done,
                Err(_) => Outcome::Failed,
            },
        };
        events.push(Event {
            key,
            op,
            value,
            outcome,
        });
    }
    events
}

/// What the checks found in one run.
#[derive(Debug, Default)]
struct Checked {
    /// Writes that returned `Ok` and were checked after the power loss.
    acknowledged: u64,
    /// Keys found holding a prefix of an unacknowledged put-if-absent (allowed when not
    /// `exact`).
    prefixes: u64,
}

/// Checks the store booted after the power loss against what the threads did. `exact`: no
/// key may hold a partial object at all.
fn check(store: &LocalDir, threads: &[Vec<Event>], exact: bool) -> Result<Checked, String> {
    let mut attempts: HashMap<&str, Vec<&Event>> = HashMap::new();
    for e in threads.iter().flatten() {
        if e.op != Op::Delete {
            attempts.entry(&e.key).or_default().push(e);
        }
    }
    let mut found = Checked::default();
    let visible = store.list("").map_err(|e| format!("list: {e}"))?;
    for key in &visible {
        let bytes = store.get(key).map_err(|e| format!("get {key}: {e}"))?;
        let Some(tries) = attempts.get(key.as_str()) else {
            return Err(format!("{key} holds bytes nobody wrote"));
        };
        if tries.iter().any(|e| e.value == bytes) {
            continue;
        }
        let unacknowledged_prefix = tries
            .iter()
            .all(|e| e.op == Op::PutIfAbsent && e.outcome == Outcome::Failed)
            && tries.iter().any(|e| e.value.starts_with(&bytes));
        if !exact && unacknowledged_prefix {
            found.prefixes += 1;
            continue;
        }
        return Err(format!(
            "{key} holds a partial object ({} bytes) after the power loss",
            bytes.len()
        ));
    }
    for events in threads {
        for (i, e) in events.iter().enumerate() {
            if e.outcome == Outcome::Failed {
                continue;
            }
            let later_delete = events[i + 1..]
                .iter()
                .find(|d| d.op == Op::Delete && d.key == e.key);
            match e.op {
                Op::Delete => {
                    found.acknowledged += 1;
                    if visible.contains(&e.key) {
                        return Err(format!("{} is back after its delete returned", e.key));
                    }
                }
                Op::PutIfAbsent if later_delete.is_some() => {}
                Op::PutIfAbsent => {
                    found.acknowledged += 1;
                    let bytes = store.get(&e.key).map_err(|err| {
                        format!(
                            "{} ({:?}) lost after the power loss: {err}",
                            e.key, e.outcome
                        )
                    })?;
                    if e.outcome == Outcome::Created && bytes != e.value {
                        return Err(format!("{} holds other bytes than its creator's", e.key));
                    }
                }
                Op::Put => {
                    // The value of this put or of a later put of the same thread (the only
                    // writer of the key).
                    found.acknowledged += 1;
                    let bytes = store
                        .get(&e.key)
                        .map_err(|err| format!("{} lost after the power loss: {err}", e.key))?;
                    let newer = events[i..]
                        .iter()
                        .any(|p| p.op == Op::Put && p.key == e.key && p.value == bytes);
                    if !newer {
                        return Err(format!("{} went back to an older value", e.key));
                    }
                }
            }
        }
    }
    Ok(found)
}

/// One run: concurrent writers, the power cut at a random call (or after they finish), the
/// checks on the rebooted store.
fn crash_run(seed: u64, sync: ObjectSync, writeback: u64, broken: bool) -> Result<Checked, String> {
    let fs = SimFs::new(seed, writeback);
    // Every other run, flushes take a while, so writes land while one runs (a flush that
    // started before a write must not be taken for its flush).
    if seed % 2 == 1 {
        fs.set_syncfs_delay(Duration::from_micros(300));
    }
    let mut store = open_sim(&fs, sync).map_err(|e| format!("open: {e}"))?;
    store.skip_flushes = broken;
    let mut rng = Rng::new(seed ^ 0xC0FF_EE00);
    fs.crash_after(1 + rng.below(THREADS * STEPS * 9));
    let threads: Vec<Vec<Event>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let store = &store;
                s.spawn(move || run_thread(store, seed, t))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let rebooted = fs.after_crash(seed.wrapping_add(1));
    let store = open_sim(&rebooted, sync).map_err(|e| format!("reopen: {e}"))?;
    let exact = sync == ObjectSync::PerFile || writeback == 0;
    let found = check(&store, &threads, exact)?;
    // The rebooted store takes writes again.
    store
        .put_if_absent("after/crash", b"fine")
        .map_err(|e| format!("put after reboot: {e}"))?;
    Ok(found)
}

const SEEDS: u64 = 300;

fn crash_loop(sync: ObjectSync, writeback: u64) {
    let mut acknowledged = 0;
    let mut prefixes = 0;
    for seed in 0..SEEDS {
        match crash_run(seed, sync, writeback, false) {
            Ok(found) => {
                acknowledged += found.acknowledged;
                prefixes += found.prefixes;
            }
            Err(e) => panic!("{sync:?}, writeback {writeback}‰, seed {seed}: {e}"),
        }
    }
    println!(
        "{sync:?}, writeback {writeback}‰: {SEEDS} power losses, {acknowledged} acknowledged writes checked, {prefixes} unacknowledged prefixes"
    );
}

#[test]
fn per_file_puts_survive_power_loss() {
    crash_loop(ObjectSync::PerFile, 0);
}

#[test]
fn per_file_puts_survive_power_loss_with_spontaneous_writeback() {
    crash_loop(ObjectSync::PerFile, 200);
}

#[test]
fn syncfs_group_puts_survive_power_loss() {
    crash_loop(ObjectSync::Syncfs, 0);
}

#[test]
fn syncfs_group_puts_survive_power_loss_with_spontaneous_writeback() {
    crash_loop(ObjectSync::Syncfs, 200);
}

#[test]
fn the_checker_catches_a_provider_that_skips_its_flushes() {
    for sync in [ObjectSync::PerFile, ObjectSync::Syncfs] {
        let caught = (0..40)
            .filter(|&seed| crash_run(seed, sync, 0, true).is_err())
            .count();
        assert!(
            caught > 0,
            "{sync:?}: losing acknowledged writes went unnoticed"
        );
    }
}

#[test]
fn a_failed_syncfs_fails_its_group_and_the_next_group_is_flushed_afresh() {
    let fs = SimFs::new(7, 0);
    let store = open_sim(&fs, ObjectSync::Syncfs).unwrap();
    fs.fail_syncfs(1);
    let err = store.put_if_absent("a/b/k1", b"one").unwrap_err();
    assert!(matches!(err, Error::Io { op: "syncfs", .. }), "{err}");
    // The object nothing could vouch for is gone again.
    assert_eq!(store.head("a/b/k1").unwrap(), None);
    // The provider still works, and a later flush serves only later writes.
    assert_eq!(
        store.put_if_absent("a/b/k2", b"two").unwrap(),
        PutOutcome::Created
    );
    assert_eq!(
        store.put_if_absent("a/b/k1", b"one again").unwrap(),
        PutOutcome::Created
    );
    let rebooted = fs.after_crash(8);
    let store = open_sim(&rebooted, ObjectSync::Syncfs).unwrap();
    assert_eq!(store.get("a/b/k2").unwrap(), b"two");
    assert_eq!(store.get("a/b/k1").unwrap(), b"one again");
}

#[test]
fn a_put_of_a_failed_group_is_never_vouched_for_by_a_later_flush() {
    // Two puts queue behind a running flush; the flush they need fails. Even though the next
    // flush succeeds, both report the failure.
    let fs = SimFs::new(9, 0);
    let store = open_sim(&fs, ObjectSync::Syncfs).unwrap();
    // Opening created the root: one flush.
    assert_eq!(store.stats().syncfs_calls, 1);
    fs.hold_syncfs(true);
    std::thread::scope(|s| {
        let first = s.spawn(|| store.put_if_absent("x/first", b"1"));
        // The first put's flush runs (held); the next flush to start will fail.
        while fs.syncfs_calls() < 2 {
            std::thread::yield_now();
        }
        fs.fail_syncfs(1);
        let queued: Vec<_> = ["x/q1", "x/q2"]
            .into_iter()
            .map(|k| {
                let store = &store;
                s.spawn(move || store.put_if_absent(k, b"queued"))
            })
            .collect();
        while store.stats().flush_waits < 4 {
            std::thread::yield_now();
        }
        fs.hold_syncfs(false);
        assert_eq!(first.join().unwrap().unwrap(), PutOutcome::Created);
        for q in queued {
            let err = q.join().unwrap().unwrap_err();
            assert!(matches!(err, Error::Io { op: "syncfs", .. }), "{err}");
        }
    });
    assert_eq!(store.stats().syncfs_calls, 3);
    assert_eq!(
        store.put_if_absent("x/later", b"l").unwrap(),
        PutOutcome::Created
    );
    let rebooted = fs.after_crash(10);
    let store = open_sim(&rebooted, ObjectSync::Syncfs).unwrap();
    assert_eq!(store.get("x/first").unwrap(), b"1");
    assert_eq!(store.get("x/later").unwrap(), b"l");
    assert_eq!(store.head("x/q1").unwrap(), None);
    assert_eq!(store.head("x/q2").unwrap(), None);
}

#[test]
fn concurrent_put_if_absent_share_few_flushes() {
    let fs = SimFs::new(11, 0);
    fs.set_syncfs_delay(Duration::from_millis(2));
    let store = open_sim(&fs, ObjectSync::Syncfs).unwrap();
    let before = store.stats();
    let (threads, each) = (16u64, 20u64);
    std::thread::scope(|s| {
        for t in 0..threads {
            let store = &store;
            s.spawn(move || {
                for i in 0..each {
                    let key = block(t % 3, t * 1000 + i);
                    let bytes = format!("{t}-{i}").into_bytes();
                    assert_eq!(
                        store.put_if_absent(&key, &bytes).unwrap(),
                        PutOutcome::Created
                    );
                }
            });
        }
    });
    let puts = threads * each;
    let stats = store.stats();
    let flushes = stats.syncfs_calls - before.syncfs_calls;
    assert_eq!(stats.flush_waits - before.flush_waits, puts);
    assert!(
        flushes * 2 <= puts,
        "{flushes} syncfs calls for {puts} puts: flushes were not shared"
    );
    let rebooted = fs.after_crash(12);
    let store = open_sim(&rebooted, ObjectSync::Syncfs).unwrap();
    for t in 0..threads {
        for i in 0..each {
            let bytes = format!("{t}-{i}").into_bytes();
            assert_eq!(store.get(&block(t % 3, t * 1000 + i)).unwrap(), bytes);
        }
    }
}

#[test]
fn a_put_if_absent_that_finds_an_object_whose_flush_fails_writes_its_own() {
    let fs = SimFs::new(13, 0);
    let store = open_sim(&fs, ObjectSync::Syncfs).unwrap();
    let flushes_at_open = fs.syncfs_calls();
    // The first writer's flush will fail; it is held running until the second writer has
    // found the first one's object.
    fs.fail_syncfs(1);
    fs.hold_syncfs(true);
    std::thread::scope(|s| {
        let first = s.spawn(|| store.put_if_absent("k/obj", b"first"));
        while fs.syncfs_calls() == flushes_at_open {
            std::thread::yield_now();
        }
        let second = s.spawn(|| store.put_if_absent("k/obj", b"second"));
        std::thread::sleep(Duration::from_millis(20));
        fs.hold_syncfs(false);
        let err = first.join().unwrap().unwrap_err();
        assert!(matches!(err, Error::Io { op: "syncfs", .. }), "{err}");
        // Not "AlreadyExists" for bytes no flush vouched for: it wrote its own.
        assert_eq!(second.join().unwrap().unwrap(), PutOutcome::Created);
    });
    assert_eq!(store.get("k/obj").unwrap(), b"second");
    let rebooted = fs.after_crash(14);
    let store = open_sim(&rebooted, ObjectSync::Syncfs).unwrap();
    assert_eq!(store.get("k/obj").unwrap(), b"second");
}
