//! The writer lock on `dir/LOCK`: held for the database's whole life ([`WriterLock::Held`], the
//! default), or **shared** with writers in other processes ([`WriterLock::Shared`]): taken when a
//! write needs it, kept while any write of this process runs (a *pin*) and for an idle grace
//! after the last one, then released. A leaf: the flock, the pin count, the acquisition term and
//! the counters; what an acquisition must do to the engine (catch up with the records other
//! writers committed meanwhile) and what a release must do first (finish this process's queued
//! records) are closures and a trait the engine (`db.rs`) provides. See docs/holt-format.md,
//! "Sharing the writer lock between processes".

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::options::{WriterLock, WriterLockStats};

/// At most this many recent lock waits are kept for [`LockFile::wait_samples`].
pub(crate) const WAIT_SAMPLES: usize = 1 << 16;

/// The longest pause between two attempts to take a contended lock.
const MAX_BACKOFF: Duration = Duration::from_millis(2);

/// After handing the lock over to a waiting process, this process does not try to take it again
/// for this long (longer than a waiter's longest pause), so the waiter gets it.
const YIELD: Duration = Duration::from_millis(3);

/// The file beside `LOCK` that waiting writers hold a shared flock on while they wait, so the
/// holder can tell that someone is waiting (its exclusive `try_lock` fails).
pub(crate) const WAITING_FILE: &str = "WAITING";

/// What the releaser thread asks of the engine.
pub(crate) trait Release: Send + Sync {
    /// Makes every record this process queued durable and remembers what the engine needs to
    /// recognise, at the next acquisition, whether another process changed the store's files
    /// (called with the lock held, no pin taken and the pin state locked; it must not pin).
    /// `Err`: keep the lock for now (an image is being written, or the files cannot be listed).
    fn before_release(&self) -> std::result::Result<(), ()>;
}

struct PinState {
    /// This process holds the flock.
    held: bool,
    /// Writes of this process running now (each holds the lock).
    pins: u64,
    /// When the last pin was dropped.
    idle_since: Instant,
    /// Acquisitions so far (the first one is the open's).
    term: u64,
    stats: WriterLockStats,
    /// Recent lock waits in microseconds (a ring of at most [`WAIT_SAMPLES`]).
    samples: Vec<u64>,
    next_sample: usize,
    /// Set when the engine is dropped: the releaser thread ends.
    stopped: bool,
    /// After a hand-over, this process waits until then before it takes the lock again.
    yield_until: Option<Instant>,
}

/// The `LOCK` file of a writer and its pin state.
pub(crate) struct LockFile {
    file: File,
    /// The [`WAITING_FILE`] of a shared lock.
    waiting: Option<File>,
    path: PathBuf,
    mode: WriterLock,
    state: Mutex<PinState>,
    cond: Condvar,
    /// Mirror of `PinState::held` for readers that must not take the pin mutex (the background
    /// checkpointer, which runs under the engine's image-write mutex).
    held_flag: AtomicBool,
}

impl LockFile {
    /// Wraps `file`, whose flock the caller holds already (the open took it); a shared lock also
    /// opens (creating it when missing) the [`WAITING_FILE`] beside it.
    /// Errors: `Io` when that file cannot be opened.
    pub(crate) fn new(file: File, path: PathBuf, mode: WriterLock) -> Result<Arc<LockFile>> {
        let waiting = match mode {
            WriterLock::Held => None,
            WriterLock::Shared { .. } => {
                let waiting_path = path.with_file_name(WAITING_FILE);
                Some(
                    std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create(true)
                        .truncate(false)
                        .open(&waiting_path)
                        .map_err(|e| Error::io("open", &waiting_path, e))?,
                )
            }
        };
        Ok(Arc::new(LockFile {
            file,
            waiting,
            path,
            mode,
            state: Mutex::new(PinState {
                held: true,
                pins: 0,
                idle_since: Instant::now(),
                term: 1,
                stats: WriterLockStats {
                    acquisitions: 1,
                    ..WriterLockStats::default()
                },
                samples: Vec::new(),
                next_sample: 0,
                stopped: false,
                yield_until: None,
            }),
            cond: Condvar::new(),
            held_flag: AtomicBool::new(true),
        }))
    }

    /// True in [`WriterLock::Shared`] mode.
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self.mode, WriterLock::Shared { .. })
    }

    /// Whether this process holds the flock now.
    pub(crate) fn held(&self) -> bool {
        self.held_flag.load(Ordering::Acquire)
    }

    /// The acquisition term: 1 after the open, +1 at every later acquisition. Constant (1) in
    /// [`WriterLock::Held`] mode.
    pub(crate) fn term(&self) -> u64 {
        self.state.lock().term
    }

    /// Takes one pin: returns at once while the lock is held; otherwise takes the flock (waiting
    /// up to the mode's `wait`, polling with a short backoff), runs `catch_up` with it held and
    /// only then counts the acquisition. Returns the term the pin belongs to.
    ///
    /// Errors: `Locked` when another process kept the lock for the whole wait; `Io` on flock
    /// failure; `catch_up`'s error (the flock is released again, nothing changed).
    pub(crate) fn pin(&self, catch_up: impl FnOnce() -> Result<CatchUpReport>) -> Result<u64> {
        let mut st = self.state.lock();
        if st.held {
            st.pins += 1;
            return Ok(st.term);
        }
        let WriterLock::Shared { wait, .. } = self.mode else {
            // Held mode never releases.
            st.pins += 1;
            return Ok(st.term);
        };
        let started = Instant::now();
        if let Some(until) = st.yield_until.take() {
            // Just handed over: give the waiter its turn first.
            if let Some(left) = until.checked_duration_since(started) {
                std::thread::sleep(left);
            }
        }
        take_announced(&self.file, self.waiting.as_ref(), &self.path, started, wait)?;
        let waited = started.elapsed();
        let report = match catch_up() {
            Ok(r) => r,
            Err(e) => {
                let _ = self.file.unlock();
                return Err(e);
            }
        };
        st.held = true;
        self.held_flag.store(true, Ordering::Release);
        st.term += 1;
        st.pins += 1;
        let micros = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
        st.stats.acquisitions += 1;
        st.stats.wait_micros_total = st.stats.wait_micros_total.saturating_add(micros);
        st.stats.wait_micros_max = st.stats.wait_micros_max.max(micros);
        st.stats.caught_up_records += report.records;
        st.stats.reloads += u64::from(report.reloaded);
        if st.samples.len() < WAIT_SAMPLES {
            st.samples.push(micros);
        } else {
            let i = st.next_sample;
            st.samples[i] = micros;
        }
        st.next_sample = (st.next_sample + 1) % WAIT_SAMPLES;
        Ok(st.term)
    }

    /// Drops one pin; the last one starts the idle grace — or, when another process is waiting
    /// for the lock (it holds a shared flock on [`WAITING_FILE`]), hands the lock over at once:
    /// `engine.before_release`, release, and this process stays away for [`YIELD`].
    pub(crate) fn unpin(&self, engine: &dyn Release) {
        let mut st = self.state.lock();
        st.pins = st.pins.saturating_sub(1);
        if st.pins > 0 {
            return;
        }
        st.idle_since = Instant::now();
        if st.held && self.someone_waits() && engine.before_release().is_ok() {
            st.held = false;
            self.held_flag.store(false, Ordering::Release);
            let _ = self.file.unlock();
            st.stats.releases += 1;
            st.stats.handovers += 1;
            st.yield_until = Some(Instant::now() + YIELD);
        }
        self.cond.notify_all();
    }

    /// Whether a writer of another process announced that it waits for the lock.
    fn someone_waits(&self) -> bool {
        let Some(w) = &self.waiting else {
            return false;
        };
        match w.try_lock() {
            Ok(()) => {
                let _ = w.unlock();
                false
            }
            Err(std::fs::TryLockError::WouldBlock) => true,
            Err(std::fs::TryLockError::Error(_)) => false,
        }
    }

    /// Counters for `Db::stats`.
    pub(crate) fn stats(&self) -> WriterLockStats {
        self.state.lock().stats
    }

    /// The recent lock waits, in microseconds, oldest first.
    pub(crate) fn wait_samples(&self) -> Vec<u64> {
        let st = self.state.lock();
        if st.samples.len() < WAIT_SAMPLES {
            return st.samples.clone();
        }
        let mut out = st.samples[st.next_sample..].to_vec();
        out.extend_from_slice(&st.samples[..st.next_sample]);
        out
    }

    /// Stops the releaser thread and lets go of the flock (the engine is being dropped; nothing
    /// is written any more).
    pub(crate) fn stop(&self) {
        let mut st = self.state.lock();
        st.stopped = true;
        if st.held {
            st.held = false;
            self.held_flag.store(false, Ordering::Release);
            let _ = self.file.unlock();
        }
        self.cond.notify_all();
    }

    /// Starts the releaser thread of a shared lock: it releases the flock once no pin has been
    /// held for the idle grace and `engine.before_release` succeeded. It holds the engine only
    /// weakly and ends when the engine is dropped.
    pub(crate) fn spawn_releaser(
        self: &Arc<Self>,
        engine: Weak<dyn Release>,
    ) -> std::io::Result<()> {
        let WriterLock::Shared { idle_release, .. } = self.mode else {
            return Ok(());
        };
        let lock = Arc::clone(self);
        std::thread::Builder::new()
            .name("holt-writer-lock".into())
            .spawn(move || lock.release_loop(engine, idle_release))
            .map(|_| ())
    }

    fn release_loop(&self, engine: Weak<dyn Release>, idle: Duration) {
        let mut st = self.state.lock();
        loop {
            if st.stopped {
                return;
            }
            if !st.held || st.pins > 0 {
                self.cond.wait(&mut st);
                continue;
            }
            let since = st.idle_since.elapsed();
            if since < idle {
                self.cond.wait_for(&mut st, idle - since);
                continue;
            }
            let Some(strong) = engine.upgrade() else {
                return;
            };
            if strong.before_release().is_ok() {
                st.held = false;
                self.held_flag.store(false, Ordering::Release);
                let _ = self.file.unlock();
                st.stats.releases += 1;
            } else {
                // Busy (an image being written) or failing: try again after another grace.
                st.idle_since = Instant::now();
            }
            // The engine may be dropped with this last reference, and its drop takes the pin
            // mutex: let go of the mutex first.
            drop(st);
            drop(strong);
            st = self.state.lock();
        }
    }
}

/// Takes the flock of `lock` (a `LOCK` file), waiting until `started + wait` at most: polls
/// `try_lock` with a backoff of 50 µs doubling to [`MAX_BACKOFF`], announcing the wait with a
/// shared flock on `waiting` (when given) so the holder hands over when idle.
/// Errors: `Locked` after the wait; `Io` on flock failure.
fn take_announced(
    lock: &File,
    waiting: Option<&File>,
    path: &std::path::Path,
    started: Instant,
    wait: Duration,
) -> Result<()> {
    let announced = waiting.filter(|w| w.lock_shared().is_ok());
    let mut backoff = Duration::from_micros(50);
    let taken = loop {
        match lock.try_lock() {
            Ok(()) => break Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => {
                if started.elapsed() >= wait {
                    break Err(Error::Locked {
                        path: path.to_path_buf(),
                    });
                }
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(std::fs::TryLockError::Error(e)) => break Err(Error::io("flock", path, e)),
        }
    };
    if let Some(w) = announced {
        let _ = w.unlock();
    }
    taken
}

/// The open of a writer sharing the lock: takes the flock of `lock` (the `LOCK` file at
/// `path`), waiting up to `wait` and announcing the wait on the [`WAITING_FILE`] beside it
/// (created when missing), exactly like a later acquisition. Errors: `Locked` after the wait;
/// `Io`.
pub(crate) fn wait_for_turn(lock: &File, path: &std::path::Path, wait: Duration) -> Result<()> {
    let waiting_path = path.with_file_name(WAITING_FILE);
    let waiting = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&waiting_path)
        .map_err(|e| Error::io("open", &waiting_path, e))?;
    take_announced(lock, Some(&waiting), path, Instant::now(), wait)
}

/// What one acquisition's catch-up did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CatchUpReport {
    /// WAL records of other writers replayed into memory.
    pub(crate) records: u64,
    /// The images changed under this process: the state was loaded again from the images and
    /// the WAL after them.
    pub(crate) reloaded: bool,
}
