//! The committer ↔ WAL-writer hand-off of **group commit** (leader/follower).
//!
//! Committers hold their own ordering lock (the database's commit lock) while they call
//! [`GroupCommit::enqueue`], so framed records arrive here in strictly increasing **LSN** order
//! and are appended to one shared buffer. After releasing that lock each committer calls
//! [`GroupCommit::wait_durable`] with its LSN:
//!
//! - if a previous group already made the LSN durable it returns `Ok` at once;
//! - if no writer is active, the committer **elects itself writer** (leader): it takes the whole
//!   queue (its own record and everything queued before and after it), releases the queue lock,
//!   hands the bytes to the [`GroupSink`] (one write + one `fdatasync` for the whole group),
//!   publishes the newest item of the group, then re-takes the lock, records the new durable LSN
//!   and wakes every waiter;
//! - otherwise it sleeps on the condition variable until a writer finishes.
//!
//! While a writer is in `fdatasync`, new committers queue up behind it and are covered together by
//! the next group.
//!
//! **Commit delay.** With many committers, those acknowledged by one group come back together
//! while the next group is already being written, so the committers split into two cohorts that
//! alternate, each group covering about half of them. A leader configured with a commit delay
//! (see [`GroupCommit::with_commit_delay`]) therefore first waits up to that long, holding the
//! writer role, whenever fewer records are queued than its previous group held; records queued
//! meanwhile join its group. A single committer never waits (its previous group held one
//! record), so the delay costs latency only when there are other committers to share a sync
//! with. Every waiter of a group is acknowledged only after that group's sync returned.
//! A failing write or sync fails **exactly the waiters of that group** with the sink's error and
//! **poisons** the log: records queued behind it are never written and their waiters (and every
//! later `enqueue`) get [`Error::Poisoned`]. The in-memory tip already contains the failed
//! records, so the database must be reopened to recover.
//!
//! The locks come from [`super::sync`], which is `loom` under `cfg(loom)`; the loom model test
//! `tests/loom_group_commit.rs` drives this very code.

use std::io;

use crate::error::{Error, Result};
use crate::options::WalGroupStats;
use crate::wal::sync::{pause, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// A queue buffer larger than this (bytes) is not kept for reuse after its group was written.
const MAX_SPARE_CAPACITY: usize = 4 << 20;

/// Where a group's bytes go: the WAL segment writer in the engine, a model in the loom test.
pub trait GroupSink: Send {
    /// Writes `bytes` — the framed records with LSNs `first_lsn..=last_lsn`, in LSN order — and
    /// makes them durable as configured (one write and at most one `fdatasync` for the whole
    /// group). Returns only once the data is durable. An error fails every waiter of the group
    /// and poisons the log.
    fn write_group(&mut self, first_lsn: u64, last_lsn: u64, bytes: &[u8]) -> Result<()>;
}

/// The group that failed: its LSN range and the sink's error.
struct Failure {
    first_lsn: u64,
    last_lsn: u64,
    error: Error,
}

struct Shared<T> {
    /// Framed records waiting for the next writer, in LSN order.
    buf: Vec<u8>,
    /// An empty buffer kept for reuse (the previous group's).
    spare: Vec<u8>,
    /// LSN of the first queued record (meaningful while `queued > 0`).
    first_queued: u64,
    /// LSN of the last record ever queued (the durable LSN before the first enqueue).
    last_queued: u64,
    /// Records in `buf`.
    queued: u64,
    /// The item of the newest queued record; published by the writer after the sync.
    newest: Option<T>,
    /// A writer (leader) is between taking the queue and recording the outcome.
    writer_active: bool,
    /// Every record with an LSN at or below this is durable.
    durable_lsn: u64,
    /// Set once a group failed; permanent.
    failure: Option<Failure>,
    /// Records in the previous successful group (1 before the first).
    last_group: u64,
    stats: WalGroupStats,
}

/// The group-commit hand-off between committers and the WAL writer, generic over the sink `S`
/// and the item `T` each record carries (the engine: the `Arc<State>` to publish).
pub struct GroupCommit<S, T> {
    shared: Mutex<Shared<T>>,
    cond: Condvar,
    /// Only the active writer locks this, so it is never contended.
    sink: Mutex<S>,
    /// The most a leader waits for more records (see the module docs); zero: never.
    commit_delay: Duration,
}

/// A copy of `e` for another waiter of a failed group (`std::io::Error` is not `Clone`): I/O
/// errors keep their operation, path, OS error code and message; other errors become
/// [`Error::Poisoned`] carrying their message.
pub fn duplicate_error(e: &Error) -> Error {
    match e {
        Error::Io { op, path, source } => Error::Io {
            op,
            path: path.clone(),
            source: match source.raw_os_error() {
                Some(code) => io::Error::from_raw_os_error(code),
                None => io::Error::new(source.kind(), source.to_string()),
            },
        },
        other => Error::Poisoned {
            reason: other.to_string(),
        },
    }
}

fn poisoned(f: &Failure) -> Error {
    Error::Poisoned {
        reason: format!(
            "the WAL write of LSNs {}..={} failed: {}",
            f.first_lsn, f.last_lsn, f.error
        ),
    }
}

impl<S: GroupSink, T> GroupCommit<S, T> {
    /// A hand-off whose log is durable through `durable_lsn` (the next record gets
    /// `durable_lsn + 1`).
    pub fn new(sink: S, durable_lsn: u64) -> Self {
        GroupCommit {
            shared: Mutex::new(Shared {
                buf: Vec::new(),
                spare: Vec::new(),
                first_queued: 0,
                last_queued: durable_lsn,
                queued: 0,
                newest: None,
                writer_active: false,
                durable_lsn,
                failure: None,
                last_group: 1,
                stats: WalGroupStats::default(),
            }),
            cond: Condvar::new(),
            sink: Mutex::new(sink),
            commit_delay: Duration::ZERO,
        }
    }

    /// Sets the commit delay: the most a group's leader waits, before taking the queue, for
    /// more records while fewer are queued than its previous group held (see the module docs).
    /// `Duration::ZERO` (the default of [`GroupCommit::new`]) never waits.
    pub fn with_commit_delay(mut self, delay: Duration) -> Self {
        self.commit_delay = delay;
        self
    }

    /// Queues the framed record `bytes` with `lsn` and its `item`. Callers serialise their
    /// `enqueue` calls (the commit lock) so LSNs arrive in order.
    ///
    /// Errors: [`Error::Poisoned`] once a group has failed (nothing is queued);
    /// [`Error::InvalidArgument`] if `lsn` is not the previous LSN + 1 (an engine bug; nothing is
    /// queued).
    pub fn enqueue(&self, lsn: u64, bytes: &[u8], item: T) -> Result<()> {
        let mut sh = self.shared.lock();
        if let Some(f) = &sh.failure {
            return Err(poisoned(f));
        }
        if sh.last_queued.checked_add(1) != Some(lsn) {
            return Err(Error::InvalidArgument(format!(
                "WAL record queued out of order: LSN {lsn} after {}",
                sh.last_queued
            )));
        }
        if sh.queued == 0 {
            sh.first_queued = lsn;
        }
        sh.buf.extend_from_slice(bytes);
        sh.queued += 1;
        sh.last_queued = lsn;
        sh.newest = Some(item);
        Ok(())
    }

    /// Returns once the record with `lsn` is durable, writing a group as leader if no writer is
    /// active. The writer of a group calls `publish` with the newest item of its group after the
    /// sync and before any waiter of the group is acknowledged.
    ///
    /// Errors: the sink's error (duplicated per waiter) if `lsn`'s group failed;
    /// [`Error::Poisoned`] if an earlier group failed and `lsn` was not written;
    /// [`Error::InvalidArgument`] if `lsn` was never queued.
    pub fn wait_durable(&self, lsn: u64, publish: impl Fn(T)) -> Result<()> {
        let mut sh = self.shared.lock();
        loop {
            if lsn <= sh.durable_lsn {
                return Ok(());
            }
            if let Some(f) = &sh.failure {
                return Err(if (f.first_lsn..=f.last_lsn).contains(&lsn) {
                    duplicate_error(&f.error)
                } else {
                    poisoned(f)
                });
            }
            if lsn > sh.last_queued {
                return Err(Error::InvalidArgument(format!(
                    "LSN {lsn} was never queued (last queued: {})",
                    sh.last_queued
                )));
            }
            if sh.writer_active {
                sh = self.cond.wait(sh);
            } else {
                // Not durable, no failure and queued: the record is still in the queue.
                sh = self.write_queued(sh, &publish);
            }
        }
    }

    /// Waits until no writer is active, writes whatever is queued as one group (publishing its
    /// newest item), then runs `f` on the sink while holding the writer role, so no group is
    /// written concurrently (used to rotate WAL segments for a checkpoint). Returns `f`'s result.
    ///
    /// Errors: [`Error::Poisoned`] if a group has failed (now or earlier; `f` does not run);
    /// otherwise whatever `f` returns. An error from `f` does not poison the log.
    pub fn exclusive<R>(
        &self,
        publish: impl Fn(T),
        f: impl FnOnce(&mut S, u64) -> Result<R>,
    ) -> Result<R> {
        let mut sh = self.shared.lock();
        loop {
            if let Some(failure) = &sh.failure {
                return Err(poisoned(failure));
            }
            if sh.writer_active {
                sh = self.cond.wait(sh);
            } else if sh.queued > 0 {
                sh = self.write_queued(sh, &publish);
            } else {
                break;
            }
        }
        sh.writer_active = true;
        let durable = sh.durable_lsn;
        drop(sh);
        let res = f(&mut self.sink.lock(), durable);
        let mut sh = self.shared.lock();
        sh.writer_active = false;
        drop(sh);
        self.cond.notify_all();
        res
    }

    /// Restarts the log at `lsn` (the next record gets `lsn + 1`), after records were appended
    /// by someone else: waits until no writer is active, then runs `f` on the sink and records
    /// `lsn` as durable. For a database whose lock is shared between processes, at an
    /// acquisition.
    ///
    /// Errors: [`Error::Poisoned`] after a failure; [`Error::InvalidArgument`] when records are
    /// queued or `lsn` is below the durable LSN (nothing changes).
    pub fn resume_at(&self, lsn: u64, f: impl FnOnce(&mut S)) -> Result<()> {
        let mut sh = self.shared.lock();
        loop {
            if let Some(failure) = &sh.failure {
                return Err(poisoned(failure));
            }
            if !sh.writer_active {
                break;
            }
            sh = self.cond.wait(sh);
        }
        if sh.queued > 0 || lsn < sh.durable_lsn {
            return Err(Error::InvalidArgument(format!(
                "the log cannot resume at LSN {lsn}: {} records queued, durable through {}",
                sh.queued, sh.durable_lsn
            )));
        }
        f(&mut self.sink.lock());
        sh.durable_lsn = lsn;
        sh.last_queued = lsn;
        Ok(())
    }

    /// Takes the writer role and the whole queue, writes it through the sink outside the queue
    /// lock, publishes, records the outcome and wakes every waiter. Precondition: no writer is
    /// active and the queue is not empty.
    fn write_queued<'a>(
        &'a self,
        mut sh: MutexGuard<'a, Shared<T>>,
        publish: &impl Fn(T),
    ) -> MutexGuard<'a, Shared<T>> {
        sh.writer_active = true;
        if !self.commit_delay.is_zero() && sh.queued < sh.last_group {
            // Holding the writer role, so committers arriving meanwhile queue behind this
            // group instead of writing their own; only a writer records a failure, so none can
            // appear while the lock is released.
            drop(sh);
            pause(self.commit_delay);
            sh = self.shared.lock();
            sh.stats.delayed += 1;
        }
        let spare = std::mem::take(&mut sh.spare);
        let mut buf = std::mem::replace(&mut sh.buf, spare);
        let (first, last, n) = (sh.first_queued, sh.last_queued, sh.queued);
        let newest = sh.newest.take();
        sh.queued = 0;
        drop(sh);

        let res = self.sink.lock().write_group(first, last, &buf);
        if res.is_ok() {
            if let Some(item) = newest {
                publish(item);
            }
        }

        let mut sh = self.shared.lock();
        sh.writer_active = false;
        match res {
            Ok(()) => {
                sh.durable_lsn = last;
                sh.last_group = n;
                sh.stats.record(n);
            }
            Err(error) => {
                sh.failure = Some(Failure {
                    first_lsn: first,
                    last_lsn: last,
                    error,
                });
                // Records queued behind the failed group are never written.
                sh.buf.clear();
                sh.queued = 0;
                sh.newest = None;
            }
        }
        buf.clear();
        if buf.capacity() <= MAX_SPARE_CAPACITY {
            sh.spare = buf;
        }
        self.cond.notify_all();
        sh
    }

    /// `Err(Poisoned)` once a group has failed.
    pub fn check_poison(&self) -> Result<()> {
        match &self.shared.lock().failure {
            Some(f) => Err(poisoned(f)),
            None => Ok(()),
        }
    }

    /// The highest LSN known durable.
    pub fn durable_lsn(&self) -> u64 {
        self.shared.lock().durable_lsn
    }

    /// Group-size statistics since construction.
    pub fn stats(&self) -> WalGroupStats {
        self.shared.lock().stats
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// `(first_lsn, last_lsn, bytes)` of every group a [`Recorder`] was given.
    type GroupLog = Arc<parking_lot::Mutex<Vec<(u64, u64, Vec<u8>)>>>;

    /// A sink that records what it was given and can be told to fail.
    struct Recorder {
        log: GroupLog,
        fail: bool,
    }

    impl GroupSink for Recorder {
        fn write_group(&mut self, first: u64, last: u64, bytes: &[u8]) -> Result<()> {
            if self.fail {
                return Err(Error::io(
                    "fdatasync",
                    "seg",
                    io::Error::from_raw_os_error(libc::EIO),
                ));
            }
            self.log.lock().push((first, last, bytes.to_vec()));
            Ok(())
        }
    }

    #[test]
    fn queued_records_are_written_as_one_group_and_newest_item_published() {
        let log = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let gc = GroupCommit::new(
            Recorder {
                log: log.clone(),
                fail: false,
            },
            10,
        );
        gc.enqueue(11, b"aa", "s11").unwrap();
        gc.enqueue(12, b"bbb", "s12").unwrap();
        let published = parking_lot::Mutex::new(Vec::new());
        gc.wait_durable(11, |s| published.lock().push(s)).unwrap();
        gc.wait_durable(12, |s| published.lock().push(s)).unwrap();
        assert_eq!(*log.lock(), vec![(11, 12, b"aabbb".to_vec())]);
        assert_eq!(*published.lock(), vec!["s12"]);
        assert_eq!(gc.durable_lsn(), 12);
        let st = gc.stats();
        assert_eq!((st.groups, st.records, st.max), (1, 2, 2));
        assert_eq!(st.histogram[1], 1);
    }

    #[test]
    fn out_of_order_enqueue_is_refused() {
        let log = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let gc: GroupCommit<_, ()> = GroupCommit::new(Recorder { log, fail: false }, 0);
        assert!(matches!(
            gc.enqueue(2, b"x", ()),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            gc.wait_durable(1, |_| {}),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn failed_group_errors_its_waiters_and_poisons_later_writes() {
        let log = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let gc = GroupCommit::new(Recorder { log, fail: true }, 0);
        gc.enqueue(1, b"a", ()).unwrap();
        gc.enqueue(2, b"b", ()).unwrap();
        assert!(matches!(
            gc.wait_durable(2, |_| {}),
            Err(Error::Io {
                op: "fdatasync",
                ..
            })
        ));
        assert!(matches!(
            gc.wait_durable(1, |_| {}),
            Err(Error::Io {
                op: "fdatasync",
                ..
            })
        ));
        assert!(matches!(
            gc.enqueue(3, b"c", ()),
            Err(Error::Poisoned { .. })
        ));
        assert!(matches!(gc.check_poison(), Err(Error::Poisoned { .. })));
        assert!(matches!(
            gc.exclusive(|_| {}, |_, _| Ok(())),
            Err(Error::Poisoned { .. })
        ));
        assert_eq!(gc.durable_lsn(), 0);
    }

    #[test]
    fn a_lone_committer_never_waits_the_commit_delay() {
        let log = Arc::new(parking_lot::Mutex::new(Vec::new()));
        // A delay this long would make the test take minutes if a lone committer waited it.
        let gc = GroupCommit::new(
            Recorder {
                log: log.clone(),
                fail: false,
            },
            0,
        )
        .with_commit_delay(Duration::from_secs(30));
        for lsn in 1..=5 {
            gc.enqueue(lsn, b"x", lsn).unwrap();
            gc.wait_durable(lsn, |_| {}).unwrap();
        }
        let st = gc.stats();
        assert_eq!((st.groups, st.records, st.delayed), (5, 5, 0));
        assert_eq!(log.lock().len(), 5);
    }

    #[test]
    fn a_leader_whose_previous_group_was_larger_waits_and_takes_the_late_records() {
        let log = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let gc = GroupCommit::new(
            Recorder {
                log: log.clone(),
                fail: false,
            },
            0,
        )
        .with_commit_delay(Duration::from_secs(1));
        // A first group of two records: nothing was larger before it, so no wait.
        gc.enqueue(1, b"a", 1).unwrap();
        gc.enqueue(2, b"b", 2).unwrap();
        gc.wait_durable(2, |_| {}).unwrap();
        assert_eq!(gc.stats().delayed, 0);
        // One record queued where the previous group held two: its leader waits, and a record
        // queued during the wait joins the group.
        gc.enqueue(3, b"c", 3).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                gc.enqueue(4, b"d", 4).unwrap();
                gc.wait_durable(4, |_| {}).unwrap();
            });
            gc.wait_durable(3, |_| {}).unwrap();
        });
        assert_eq!(
            *log.lock(),
            vec![(1, 2, b"ab".to_vec()), (3, 4, b"cd".to_vec())]
        );
        let st = gc.stats();
        assert_eq!((st.groups, st.delayed), (2, 1));
    }

    #[test]
    fn group_histogram_buckets_are_powers_of_two() {
        let mut st = WalGroupStats::default();
        for n in [1, 2, 3, 4, 7, 8, 127, 128, 5000] {
            st.record(n);
        }
        assert_eq!(st.histogram, [1, 2, 2, 1, 0, 0, 1, 2]);
        assert_eq!(st.max, 5000);
    }
}
