//! loom model test of the group-commit hand-off (committer ↔ WAL writer), driving holt's real
//! `wal::group_commit` module with its locks swapped for loom's.
//!
//! Run with (separate target dir, so the main build is not invalidated):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p holt --release --test loom_group_commit
//! ```
//!
//! Each model runs 2–3 committer threads (any of which may be elected writer) against a model
//! sink that records every write and sync, and checks in every explored interleaving:
//! - no committer is acknowledged before the sync covering its record returned, and its state
//!   (or a newer one) has been published by then;
//! - every record is written exactly once, in LSN order, as contiguous groups;
//! - a failing sync fails exactly the waiters of that group (with the I/O error), later records
//!   are never written and their committers get `Poisoned`, and earlier ones stay acknowledged;
//! - with a commit delay, the same holds while a leader pauses holding the writer role (under
//!   loom the pause is a yield, so committers queueing during it are explored).
//!
//! `LOOM_MAX_PREEMPTIONS` (default 3) bounds the preemptions loom explores per execution.

#![cfg(loom)]

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};
use std::time::Duration;

use holt::loom_group_commit::{GroupCommit, GroupSink};
use holt::{Error, Result};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// What the model "disk" saw.
#[derive(Default)]
struct Disk {
    /// Every LSN written, in write order.
    written: Vec<u64>,
    /// Highest LSN covered by a successful sync.
    synced_through: u64,
    /// The LSN range of the group whose sync failed.
    failed: Option<(u64, u64)>,
    groups: usize,
    /// An `exclusive` section is running.
    in_exclusive: bool,
}

struct ModelSink {
    disk: Arc<Mutex<Disk>>,
    /// Index of the group whose sync fails.
    fail_group: Option<usize>,
}

impl GroupSink for ModelSink {
    fn write_group(&mut self, first: u64, last: u64, bytes: &[u8]) -> Result<()> {
        let mut d = self.disk.lock().unwrap();
        assert!(!d.in_exclusive, "group written during an exclusive section");
        assert!(d.failed.is_none(), "group written after a failed sync");
        let lsns: Vec<u64> = bytes
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(
            lsns,
            (first..=last).collect::<Vec<_>>(),
            "group is not its LSN range"
        );
        let expected_first = d.written.last().map_or(1, |l| l + 1);
        assert_eq!(
            first, expected_first,
            "records written twice or out of order"
        );
        d.written.extend(lsns);
        let idx = d.groups;
        d.groups += 1;
        if self.fail_group == Some(idx) {
            d.failed = Some((first, last));
            return Err(Error::Io {
                op: "fdatasync",
                path: "model.wal".into(),
                source: io::Error::from_raw_os_error(5),
            });
        }
        d.synced_through = last;
        Ok(())
    }
}

struct Model {
    gc: GroupCommit<ModelSink, u64>,
    disk: Arc<Mutex<Disk>>,
    /// The commit lock: LSN assignment + enqueue happen under it, as in `Db::submit`.
    commit_lock: Mutex<u64>,
    /// Newest published item (the LSN it stands for).
    published: AtomicU64,
}

impl Model {
    fn new(fail_group: Option<usize>, commit_delay: bool) -> Arc<Model> {
        let disk = Arc::new(Mutex::new(Disk::default()));
        Arc::new(Model {
            gc: GroupCommit::new(
                ModelSink {
                    disk: disk.clone(),
                    fail_group,
                },
                0,
            )
            .with_commit_delay(if commit_delay {
                Duration::from_micros(50)
            } else {
                Duration::ZERO
            }),
            disk,
            commit_lock: Mutex::new(0),
            published: AtomicU64::new(0),
        })
    }

    fn publish(&self, lsn: u64) {
        let prev = self.published.swap(lsn, Ordering::SeqCst);
        assert!(
            prev < lsn,
            "published state went backwards: {prev} then {lsn}"
        );
    }

    /// One committer: take the next LSN and enqueue under the commit lock, then wait.
    /// Returns `(lsn, result)`; `lsn == 0` if the enqueue itself was refused.
    fn commit(&self) -> (u64, Result<()>) {
        let lsn = {
            let mut last = self.commit_lock.lock().unwrap();
            let lsn = *last + 1;
            if let Err(e) = self.gc.enqueue(lsn, &lsn.to_le_bytes(), lsn) {
                return (0, Err(e));
            }
            *last = lsn;
            lsn
        };
        let res = self.gc.wait_durable(lsn, |item| self.publish(item));
        if res.is_ok() {
            let d = self.disk.lock().unwrap();
            assert!(
                d.synced_through >= lsn,
                "LSN {lsn} acknowledged before its sync (synced through {})",
                d.synced_through
            );
            assert!(
                self.published.load(Ordering::SeqCst) >= lsn,
                "acknowledged before publish"
            );
        }
        (lsn, res)
    }
}

/// Checks the end state of one execution given every committer's outcome.
fn check_outcomes(model: &Model, outcomes: &[(u64, Result<()>)]) {
    let d = model.disk.lock().unwrap();
    let n_written = d.written.len() as u64;
    assert_eq!(d.written, (1..=n_written).collect::<Vec<_>>());
    for (lsn, res) in outcomes {
        match (res, d.failed) {
            (Ok(()), _) => assert!(*lsn <= d.synced_through),
            (Err(Error::Io { .. }), Some((first, last))) => {
                assert!(
                    (first..=last).contains(lsn),
                    "LSN {lsn} failed outside the failed group"
                )
            }
            (Err(Error::Poisoned { .. }), Some((_, last))) => {
                assert!(
                    *lsn == 0 || *lsn > last,
                    "LSN {lsn} poisoned but written in a group"
                )
            }
            (Err(e), failed) => panic!("LSN {lsn}: unexpected {e:?} (failed group {failed:?})"),
        }
    }
    match d.failed {
        None => {
            assert!(outcomes.iter().all(|(_, r)| r.is_ok()));
            assert_eq!(n_written, outcomes.len() as u64, "a record was not written");
        }
        Some((first, last)) => {
            // Exactly the waiters of the failed group got the I/O error.
            for (lsn, res) in outcomes {
                let in_group = (first..=last).contains(lsn);
                assert_eq!(
                    in_group,
                    matches!(res, Err(Error::Io { .. })),
                    "LSN {lsn}: {res:?}, failed group {first}..={last}"
                );
            }
            assert_eq!(d.synced_through, first - 1);
            assert_eq!(
                n_written, last,
                "records after the failed group were written"
            );
        }
    }
}

static EXECUTIONS: AtomicUsize = AtomicUsize::new(0);

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b
}

fn run(
    name: &str,
    committers: usize,
    fail_group: Option<usize>,
    with_exclusive: bool,
    commit_delay: bool,
) {
    EXECUTIONS.store(0, StdOrdering::Relaxed);
    let started = std::time::Instant::now();
    builder().check(move || {
        EXECUTIONS.fetch_add(1, StdOrdering::Relaxed);
        let model = Model::new(fail_group, commit_delay);
        let handles: Vec<_> = (0..committers)
            .map(|_| {
                let m = model.clone();
                thread::spawn(move || m.commit())
            })
            .collect();
        if with_exclusive {
            // A checkpoint rotation: flushes what is queued, then holds the writer role.
            let res = model.gc.exclusive(
                |item| model.publish(item),
                |_, durable| {
                    let mut d = model.disk.lock().unwrap();
                    assert_eq!(d.synced_through, durable, "exclusive saw an unsynced group");
                    d.in_exclusive = true;
                    drop(d);
                    thread::yield_now();
                    model.disk.lock().unwrap().in_exclusive = false;
                    Ok(durable)
                },
            );
            if let Ok(durable) = res {
                assert!(model.published.load(Ordering::SeqCst) >= durable);
            }
        }
        let outcomes: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        check_outcomes(&model, &outcomes);
    });
    eprintln!(
        "loom {name}: {} executions in {:.2?}",
        EXECUTIONS.load(StdOrdering::Relaxed),
        started.elapsed()
    );
}

#[test]
fn three_committers_each_acknowledged_only_after_their_sync() {
    run("3 committers", 3, None, false, false);
}

#[test]
fn failing_first_sync_fails_exactly_its_group_and_poisons_the_rest() {
    run("2 committers, first sync fails", 2, Some(0), false, false);
}

#[test]
fn failing_second_sync_keeps_the_first_group_acknowledged() {
    run("3 committers, second sync fails", 3, Some(1), false, false);
}

#[test]
fn exclusive_rotation_excludes_group_writes() {
    run("2 committers + exclusive", 2, None, true, false);
}

#[test]
fn with_a_commit_delay_three_committers_are_acknowledged_only_after_their_sync() {
    run("3 committers, commit delay", 3, None, false, true);
}

#[test]
fn with_a_commit_delay_a_failing_second_sync_fails_exactly_its_group() {
    run(
        "3 committers, commit delay, second sync fails",
        3,
        Some(1),
        false,
        true,
    );
}

#[test]
fn with_a_commit_delay_exclusive_rotation_excludes_group_writes() {
    run(
        "2 committers + exclusive, commit delay",
        2,
        None,
        true,
        true,
    );
}
