//! The group flush of [`super::ObjectSync::Syncfs`]: callers that need their writes durable
//! share `syncfs(2)` calls, leader/follower style.
//!
//! Flushes are numbered 1, 2, 3, … in the order they start, and at most one runs at a time. A
//! caller that has finished its writes calls [`GroupFlush::wait`]: it needs the flush numbered
//! one above the last one *started* — a flush already running may have started before the
//! caller's last write and cannot vouch for it. If no flush is running, the caller leads that
//! flush itself; otherwise it sleeps until the running one ends and then leads the next one or
//! finds it already led by another caller. Callers that arrive while a flush runs are thus
//! served together by the next one.
//!
//! **Outcomes.** Each caller gets the outcome of exactly the flush it needed. A flush that fails
//! fails every caller that needed it, with a copy of its error; the flusher stays usable and the
//! next flush is tried afresh. A later successful flush never answers for an earlier failed one:
//! since Linux 5.8 `syncfs` reports a writeback error once (the file system's error sequence is
//! advanced for the descriptor that saw it), and the pages whose writeback failed are no longer
//! dirty, so a second `syncfs` would report success without having written them.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Condvar, Mutex, MutexGuard};

/// A failed flush whose callers have not all collected its error yet.
struct Failure {
    raw_os_error: Option<i32>,
    kind: io::ErrorKind,
    message: String,
    /// Callers of this flush still to be told.
    callers_left: u64,
}

impl Failure {
    fn error(&self) -> io::Error {
        match self.raw_os_error {
            Some(code) => io::Error::from_raw_os_error(code),
            None => io::Error::new(self.kind, self.message.clone()),
        }
    }
}

struct State {
    /// Number of the last flush started (0: none yet). While no flush runs it equals
    /// `finished`; while one runs it is `finished + 1`.
    started: u64,
    /// Number of the last flush that ended, successfully or not.
    finished: u64,
    running: bool,
    /// Callers waiting for flush `started + 1`, the next one to start.
    next_callers: u64,
    /// Failed flushes by number, kept until each of their callers has collected the error.
    failures: BTreeMap<u64, Failure>,
    /// Flushes run so far.
    flushes: u64,
    /// Calls of [`GroupFlush::wait`] so far.
    waits: u64,
}

/// Shares flushes between concurrent callers (see the module docs).
pub(crate) struct GroupFlush {
    state: Mutex<State>,
    ended: Condvar,
}

impl GroupFlush {
    pub(crate) fn new() -> Self {
        GroupFlush {
            state: Mutex::new(State {
                started: 0,
                finished: 0,
                running: false,
                next_callers: 0,
                failures: BTreeMap::new(),
                flushes: 0,
                waits: 0,
            }),
            ended: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; a poisoned lock still holds consistent state.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Returns once a flush that started after this call began has ended: `Ok` when it
    /// succeeded, its error otherwise. `flush` is the flush itself (`syncfs`), run by whichever
    /// caller leads a group.
    pub(crate) fn wait(&self, flush: impl Fn() -> io::Result<()>) -> io::Result<()> {
        let mut st = self.lock();
        st.waits += 1;
        let needed = st.started + 1;
        st.next_callers += 1;
        loop {
            if st.finished >= needed {
                let Some(failure) = st.failures.get_mut(&needed) else {
                    return Ok(());
                };
                let error = failure.error();
                failure.callers_left = failure.callers_left.saturating_sub(1);
                if failure.callers_left == 0 {
                    st.failures.remove(&needed);
                }
                return Err(error);
            }
            if st.running {
                st = self.ended.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            // Nothing runs and flush `needed` has not ended, so it has not started either
            // (`started == finished < needed` and `needed <= started + 1`): lead it.
            st.started = needed;
            st.running = true;
            st.flushes += 1;
            let callers = std::mem::take(&mut st.next_callers);
            drop(st);
            let outcome = flush();
            st = self.lock();
            st.finished = needed;
            st.running = false;
            if let Err(e) = outcome {
                st.failures.insert(
                    needed,
                    Failure {
                        raw_os_error: e.raw_os_error(),
                        kind: e.kind(),
                        message: e.to_string(),
                        callers_left: callers,
                    },
                );
            }
            self.ended.notify_all();
        }
    }

    /// (flushes run, calls of [`GroupFlush::wait`]) so far.
    pub(crate) fn counts(&self) -> (u64, u64) {
        let st = self.lock();
        (st.flushes, st.waits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Barrier;

    #[test]
    fn a_lone_caller_runs_its_own_flush() {
        let g = GroupFlush::new();
        let runs = AtomicU64::new(0);
        for _ in 0..3 {
            g.wait(|| {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        assert_eq!(g.counts(), (3, 3));
    }

    #[test]
    fn callers_arriving_during_a_flush_share_the_next_one() {
        let g = GroupFlush::new();
        let flushes = AtomicU64::new(0);
        let threads = 16;
        let rounds = 50;
        let barrier = Barrier::new(threads);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    barrier.wait();
                    for _ in 0..rounds {
                        g.wait(|| {
                            flushes.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(1));
                            Ok(())
                        })
                        .unwrap();
                    }
                });
            }
        });
        let (run, waits) = g.counts();
        assert_eq!(waits, (threads * rounds) as u64);
        assert_eq!(run, flushes.load(Ordering::SeqCst));
        assert!(
            run < waits / 2,
            "{run} flushes for {waits} callers: no sharing"
        );
    }

    #[test]
    fn a_failed_flush_fails_exactly_its_callers_and_the_next_one_is_tried_afresh() {
        let g = GroupFlush::new();
        let err = g
            .wait(|| Err(io::Error::from_raw_os_error(libc::EIO)))
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO));
        // Not poisoned: the next caller needs (and gets) a new, successful flush.
        g.wait(|| Ok(())).unwrap();
        assert_eq!(g.counts(), (2, 2));
        // Every failure record was collected by its one caller.
        assert!(g.lock().failures.is_empty());
    }

    #[test]
    fn every_caller_of_a_failed_group_gets_the_error_even_after_a_later_success() {
        // Callers queue behind a slow flush; the flush they need then fails, the one after it
        // succeeds. Each of them must report the failure it needed, however late it wakes up.
        let g = GroupFlush::new();
        let number = AtomicU64::new(0);
        let release = Barrier::new(2);
        let queued = 6;
        std::thread::scope(|s| {
            // Flush 1: slow, succeeds; held until the others are queued.
            let leader = s.spawn(|| {
                g.wait(|| {
                    number.fetch_add(1, Ordering::SeqCst);
                    release.wait();
                    Ok(())
                })
            });
            // Wait until flush 1 runs, then queue callers: they need flush 2, which fails.
            while !g.lock().running {
                std::thread::yield_now();
            }
            let waiters: Vec<_> = (0..queued)
                .map(|_| {
                    s.spawn(|| {
                        g.wait(|| {
                            let n = number.fetch_add(1, Ordering::SeqCst) + 1;
                            if n == 2 {
                                Err(io::Error::from_raw_os_error(libc::EIO))
                            } else {
                                Ok(())
                            }
                        })
                    })
                })
                .collect();
            while g.lock().next_callers < queued {
                std::thread::yield_now();
            }
            release.wait();
            assert!(leader.join().unwrap().is_ok());
            for w in waiters {
                let e = w.join().unwrap().unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::EIO));
            }
        });
        // A later caller gets a fresh flush, which succeeds.
        g.wait(|| {
            number.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
        assert_eq!(g.counts().0, 3);
        assert!(g.lock().failures.is_empty());
    }
}
