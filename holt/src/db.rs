//! `Db`: open/create, commit pipeline, views, history floor, checkpoints, stats.

use std::fs::{self, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::batch::{Batch, BatchOp};
use crate::compact::{self, Job};
use crate::error::{Error, Result};
use crate::image::{set, Image, Progress, TreeEntry};
use crate::legacy_checkpoint;
use crate::limits::{check_key, check_value};
use crate::mvcc;
use crate::options::{Options, ScrubReport, Stats, WalIo, WalIoPath, WriterLock};
use crate::published::Published;
use crate::recovery::{self, recover_store, CatchUp, Fingerprint};
use crate::registry::{TreeInfo, TreeMeta, HISTORY_TAG};
use crate::slot::TreeMap;
use crate::state::{Frozen, State, Visibility};
use crate::store_format::{self, StoreFormat};
use crate::tree::{Tree, View};
use crate::vfs::WalFs;
use crate::wal::record::Record;
use crate::wal::writer::{create_segment, sync_dir, IoEngine, Wal};
use crate::writer_lock::{CatchUpReport, LockFile, Release};

static NEXT_DB_ID: AtomicU64 = AtomicU64::new(1);

/// One holt database: a directory (or an in-memory instance) holding named trees.
///
/// Cheap to clone; all clones share one engine and are `Send + Sync`. The directory lock is
/// released when the last clone is dropped (`Tree` handles do not keep the database open).
#[derive(Clone)]
pub struct Db {
    pub(crate) inner: Arc<Inner>,
    /// The background checkpointer of a file-backed database; the last clone's drop stops and
    /// joins it (declared after `inner` so the engine is released first, then the thread).
    _bg: Option<Arc<BgGuard>>,
}

/// Wake-up and stop flags shared by the engine and its background checkpointer thread.
#[derive(Default)]
pub(crate) struct BgSignal {
    /// `(checkpoint requested, stop, checkpoint running)`.
    flags: Mutex<(bool, bool, bool)>,
    cond: parking_lot::Condvar,
    /// Set on shutdown; a checkpoint being written by the thread aborts at its next block.
    stopping: std::sync::atomic::AtomicBool,
}

impl BgSignal {
    fn request(&self) {
        let mut f = self.flags.lock();
        if !f.0 {
            f.0 = true;
            self.cond.notify_all();
        }
    }

    /// Blocks until a checkpoint is requested (`true`) or shutdown begins (`false`).
    fn wait(&self) -> bool {
        let mut f = self.flags.lock();
        loop {
            if f.1 {
                return false;
            }
            if f.0 {
                f.0 = false;
                f.2 = true;
                return true;
            }
            self.cond.wait(&mut f);
        }
    }

    /// The thread finished the checkpoint `wait` handed it.
    fn finished(&self) {
        self.flags.lock().2 = false;
        self.cond.notify_all();
    }

    /// Blocks until no checkpoint is requested or running (or shutdown began).
    fn wait_idle(&self) {
        let mut f = self.flags.lock();
        while (f.0 || f.2) && !f.1 {
            self.cond.wait(&mut f);
        }
    }

    /// A checkpoint is requested or being written.
    fn busy(&self) -> bool {
        let f = self.flags.lock();
        f.0 || f.2
    }

    fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.flags.lock().1 = true;
        self.cond.notify_all();
    }
}

impl Release for Inner {
    fn before_release(&self) -> std::result::Result<(), ()> {
        let (Some(wal), Some(dir)) = (&self.wal, &self.dir) else {
            return Ok(());
        };
        if self.bg.as_ref().is_some_and(|bg| bg.busy()) {
            return Err(());
        }
        let Some(_ckpt) = self.ckpt.try_lock() else {
            return Err(());
        };
        let tip = self.tip.lock();
        // Every record queued so far is written (no pin is held, so nothing is being
        // validated); a poisoned log has nothing more to write and is released as it is.
        if wal.drain(self.published.cell()).is_err() && wal.check_poison().is_ok() {
            return Err(());
        }
        let files = recovery::fingerprint(wal.fs(), dir).map_err(|_| ())?;
        *self.known_files.lock() = Some(files);
        drop(tip);
        Ok(())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(lock) = &self.lock {
            lock.stop();
        }
    }
}

/// Drops its pin on the writer lock.
pub(crate) struct PinGuard<'a>(&'a Inner);

impl Drop for PinGuard<'_> {
    fn drop(&mut self) {
        self.0.unpin();
    }
}

/// Owned by every `Db` clone: stops and joins the checkpointer when the last clone is dropped.
struct BgGuard {
    signal: Arc<BgSignal>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for BgGuard {
    fn drop(&mut self) {
        // A checkpoint that is due (requested) or being written is finished before the thread
        // stops: short-lived processes (one CLI call each) would otherwise abandon every
        // automatic checkpoint and let the WAL — and every later open's replay — grow without
        // bound. The wait is one checkpoint at most; commits are already durable in the WAL.
        self.signal.wait_idle();
        self.signal.stop();
        if let Some(t) = self.thread.lock().take() {
            // A panic in the checkpointer has nothing left to report; the WAL kept every commit.
            let _ = t.join();
        }
    }
}

/// The points of a checkpoint at which the test hook runs (the hook exists in `cfg(test)` builds
/// only).
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CkptStep {
    /// The checkpoint file exists and its header is written; entries follow.
    Writing,
    /// Installed, older checkpoints and covered WAL segments dropped.
    Done,
}

/// Test hook run by the checkpoint writer at each [`CkptStep`] (it may block to hold the writer).
#[cfg(test)]
pub(crate) type CkptHook = Arc<dyn Fn(CkptStep) + Send + Sync>;

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("dir", &self.inner.dir)
            .field("version", &self.version())
            .finish()
    }
}

/// What [`Inner::accept`] produced: the new tip and the LSN whose durability is pending.
pub(crate) struct Accepted {
    /// The accepted state (the unchanged tip when `build` produced nothing).
    pub(crate) state: Arc<State>,
    /// The queued record's LSN; `None` when nothing waits for durability.
    pub(crate) pending_lsn: Option<u64>,
}

pub(crate) struct Inner {
    opts: Options,
    dir: Option<PathBuf>,
    /// The newest durable state; what readers (and `Tree` handles) see.
    published: Arc<Published>,
    /// The commit lock, guarding the newest (possibly not yet durable) state that the next
    /// batch is validated against.
    tip: Mutex<Arc<State>>,
    wal: Option<Wal>,
    /// Serialises image writes (flushes, merges, checkpoints).
    ckpt: Mutex<()>,
    /// WAL bytes (replayed + written) at the last flush's rotation.
    ckpt_base: AtomicU64,
    /// WAL bytes replayed at open and by the catch-ups of a shared writer lock.
    replayed_bytes: AtomicU64,
    commits: AtomicU64,
    checkpoints: AtomicU64,
    merges: AtomicU64,
    checkpoint_failures: AtomicU64,
    /// The error of the last failed automatic (background) checkpoint.
    last_checkpoint_error: Mutex<Option<String>>,
    /// The background checkpointer's signal (file-backed databases with automatic checkpoints).
    bg: Option<Arc<BgSignal>>,
    #[cfg(test)]
    ckpt_hook: Mutex<Option<CkptHook>>,
    /// Signals publications to `Db::wait_visible` (engine-core; notified from `submit`).
    visible: Visibility,
    /// The advisory lock on `dir/LOCK` of a writer: held for the engine's life, or shared with
    /// other processes (see `writer_lock.rs`).
    lock: Option<Arc<LockFile>>,
    /// The store's files as this writer left them when it last released a shared lock.
    known_files: Mutex<Option<Fingerprint>>,
    /// Opened with `Db::open_read_only` (see `read_only.rs`): every write is refused.
    read_only: bool,
}

fn check_wal_io(opts: &Options) -> Result<IoEngine> {
    IoEngine::select(opts.wal_io)
}

/// The registry as recorded in an image (the `history` tree is implicit).
fn tree_entries(registry: &crate::registry::Registry) -> Vec<TreeEntry> {
    registry
        .iter()
        .filter(|m| m.tag != HISTORY_TAG)
        .map(|m| TreeEntry {
            tag: m.tag,
            versioned: m.versioned,
            name: m.name.clone(),
        })
        .collect()
}

/// The size unit of the merge policy's tiers: about the image a flush writes.
fn merge_unit(opts: &Options) -> u64 {
    (opts.checkpoint_wal_bytes / 2).max(64 << 10)
}

impl Inner {
    fn new(
        opts: Options,
        dir: Option<PathBuf>,
        state: State,
        wal: Option<Wal>,
        replayed_bytes: u64,
        lock: Option<Arc<LockFile>>,
        bg: Option<Arc<BgSignal>>,
    ) -> Self {
        let state = Arc::new(state);
        Inner {
            opts,
            dir,
            published: Arc::new(Published::new(
                NEXT_DB_ID.fetch_add(1, Ordering::Relaxed),
                state.clone(),
            )),
            tip: Mutex::new(state),
            wal,
            ckpt: Mutex::new(()),
            ckpt_base: AtomicU64::new(0),
            replayed_bytes: AtomicU64::new(replayed_bytes),
            commits: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            merges: AtomicU64::new(0),
            checkpoint_failures: AtomicU64::new(0),
            last_checkpoint_error: Mutex::new(None),
            bg,
            #[cfg(test)]
            ckpt_hook: Mutex::new(None),
            visible: Visibility::default(),
            lock,
            known_files: Mutex::new(None),
            read_only: false,
        }
    }

    /// True for a database opened with `Db::open_read_only`.
    pub(crate) fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// `Err(ReadOnly { op })` for a database opened read-only.
    fn refuse_if_read_only(&self, op: &'static str) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly { op });
        }
        Ok(())
    }

    pub(crate) fn current(&self) -> Arc<State> {
        self.published.current()
    }

    pub(crate) fn view(&self) -> View {
        View::latest(self.current(), self.id())
    }

    /// Runs `build` against the tip under the commit lock; if it yields a new state and record,
    /// logs the record (group commit) and returns once the new state is durable and published.
    fn submit(
        &self,
        build: impl FnOnce(&State) -> Result<Option<(State, Record)>>,
    ) -> Result<Arc<State>> {
        let accepted = self.accept(build)?;
        if let Some(lsn) = accepted.pending_lsn {
            self.await_durable(lsn)?;
        }
        Ok(accepted.state)
    }

    /// The first half of [`Inner::submit`]: runs `build` against the tip under the commit lock
    /// and, if it yields a new state and record, makes that state the new tip (the newest
    /// *accepted* state, which later batches are validated against) and queues the record for
    /// group commit. Returns without waiting for durability; `pending_lsn` is the LSN to hand to
    /// [`Inner::await_durable`] (`None`: nothing to wait for — no change, or an in-memory
    /// database, which publishes at once).
    pub(crate) fn accept(
        &self,
        build: impl FnOnce(&State) -> Result<Option<(State, Record)>>,
    ) -> Result<Accepted> {
        let mut tip = self.tip.lock();
        if let Some(wal) = &self.wal {
            wal.check_poison()?;
        }
        let Some((mut st, rec)) = build(&tip)? else {
            return Ok(Accepted {
                state: tip.clone(),
                pending_lsn: None,
            });
        };
        debug_assert!(
            st.version >= tip.version && st.floor >= tip.floor,
            "a new state went back in version or floor"
        );
        let lsn = tip.lsn + 1;
        st.lsn = lsn;
        let st = Arc::new(st);
        match &self.wal {
            None => {
                *tip = st.clone();
                self.published.set(st.clone());
                drop(tip);
                self.visible.notify();
                Ok(Accepted {
                    state: st,
                    pending_lsn: None,
                })
            }
            Some(wal) => {
                let bytes = rec.frame(lsn)?;
                wal.enqueue(lsn, &bytes, st.clone())?;
                *tip = st.clone();
                Ok(Accepted {
                    state: st,
                    pending_lsn: Some(lsn),
                })
            }
        }
    }

    /// The second half of [`Inner::submit`]: returns once the record with `lsn` is durable and
    /// the state it produced (or a newer one) is published, writing a group as leader if no
    /// writer is active. Errors: the group's I/O error, or `Poisoned` when an earlier group
    /// failed (the record was never written).
    pub(crate) fn await_durable(&self, lsn: u64) -> Result<()> {
        let Some(wal) = &self.wal else {
            return Ok(());
        };
        let durable = wal.wait_durable(lsn, self.published.cell());
        // Engine-core hook for `Db::wait_visible`: the state with `lsn` (or a newer one) is
        // published now — or the log failed, which waiters must learn too.
        self.visible.notify();
        durable
    }

    /// The newest accepted state (the tip), possibly ahead of the published one.
    pub(crate) fn accepted(&self) -> Arc<State> {
        self.tip.lock().clone()
    }

    /// Takes one pin on the writer lock (see `writer_lock.rs`): a no-op unless the lock is
    /// shared; then, when this process does not hold it, it is taken (waiting up to the
    /// configured wait) and the state caught up with what other writers committed. Every write
    /// holds a pin from before it is validated until it is durable. Returns the acquisition
    /// term. Errors: `Locked` after the wait, `Io`, and the catch-up's `Corrupt`/`Io`.
    pub(crate) fn pin(&self) -> Result<u64> {
        match &self.lock {
            Some(lock) if lock.is_shared() => lock.pin(|| self.catch_up()),
            Some(lock) => Ok(lock.term()),
            None => Ok(1),
        }
    }

    /// Drops a pin taken by [`Inner::pin`].
    pub(crate) fn unpin(&self) {
        if let Some(lock) = &self.lock {
            if lock.is_shared() {
                lock.unpin(self);
            }
        }
    }

    /// The writer lock (`None` for in-memory and read-only databases).
    pub(crate) fn writer_lock(&self) -> Option<&LockFile> {
        self.lock.as_deref()
    }

    /// The catch-up of an acquisition of the shared lock (called with the flock just taken):
    /// under the image-write mutex and the commit lock, the state is brought up to date with the
    /// files (`recovery::catch_up`) and, when anything changed, installed as tip and published,
    /// and the WAL writer continues after the last record found.
    fn catch_up(&self) -> Result<CatchUpReport> {
        let (Some(wal), Some(dir)) = (&self.wal, &self.dir) else {
            return Ok(CatchUpReport::default());
        };
        let _ckpt = self.ckpt.lock();
        let mut tip = self.tip.lock();
        wal.check_poison()?;
        let Some(known) = self.known_files.lock().clone() else {
            // Never released: nobody else could write.
            return Ok(CatchUpReport::default());
        };
        let (recovered, report) = match recovery::catch_up(wal.fs(), dir, &tip, &known)? {
            CatchUp::Unchanged => return Ok(CatchUpReport::default()),
            CatchUp::Replayed(r, records) => (
                r,
                CatchUpReport {
                    records,
                    reloaded: false,
                },
            ),
            CatchUp::Reloaded(r) => {
                let records = r.state.lsn.saturating_sub(tip.lsn);
                // The WAL since the newest image is all that a flush has to write now.
                self.ckpt_base
                    .store(self.wal_bytes_total(), Ordering::Relaxed);
                (
                    r,
                    CatchUpReport {
                        records,
                        reloaded: true,
                    },
                )
            }
        };
        self.replayed_bytes
            .fetch_add(recovered.replayed_bytes, Ordering::Relaxed);
        let mut st = recovered.state;
        if st.prune.is_none() {
            st.prune = tip.prune.clone();
        }
        let st = Arc::new(st);
        wal.resume(
            recovered.tail,
            st.lsn,
            self.published.cell(),
            Arc::clone(&st),
        )?;
        *tip = Arc::clone(&st);
        self.published.set(st);
        drop(tip);
        self.visible.notify();
        Ok(report)
    }

    /// The engine id that views and tree handles are bound to.
    pub(crate) fn id(&self) -> u64 {
        self.published.id()
    }

    /// Counts one acknowledged commit and wakes the checkpointer if one is due.
    pub(crate) fn commit_acknowledged(&self) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.maybe_auto_checkpoint();
    }

    /// Runs one bounded step of the pending MVCC prune sweep on the tip, under the commit lock
    /// (see `mvcc`: pruning removes only rows no read version at or above the floor can reach,
    /// so it is not logged). The result is published at once when the tip holds nothing that is
    /// not yet durable (same LSN as the published state); otherwise the group commit in flight
    /// publishes its own state and the pruning reaches readers with the next commit. Returns
    /// whether more of the sweep remains.
    fn prune_chunk(&self) -> bool {
        let mut tip = self.tip.lock();
        if tip.prune.is_none() {
            return false;
        }
        if self.wal.as_ref().is_some_and(|w| w.check_poison().is_err()) {
            return false;
        }
        let mut st = State::clone(&tip);
        let more = mvcc::prune_step(&mut st, mvcc::SWEEP_STEP_BUDGET);
        let st = Arc::new(st);
        self.published.set_if_durable(Arc::clone(&st));
        *tip = st;
        more
    }

    fn wal_bytes_total(&self) -> u64 {
        self.replayed_bytes.load(Ordering::Relaxed)
            + self.wal.as_ref().map_or(0, Wal::bytes_written)
    }

    /// Runs the test hook for `step` (`cfg(test)` only; a no-op otherwise).
    fn ckpt_step(&self, step: CkptStep) {
        #[cfg(test)]
        {
            let hook = self.ckpt_hook.lock().clone();
            if let Some(hook) = hook {
                hook(step);
            }
        }
        #[cfg(not(test))]
        let _ = step;
    }

    /// Freezes the active delta for a flush: under the commit lock and the group-commit writer
    /// role, every queued record is made durable and the WAL rolls to a new segment, so the tip
    /// (now durable, LSN `L`) ends the closed segments; its delta becomes the frozen layer and
    /// a fresh, empty delta takes the next commits. The new structure is published at once
    /// (same content). Returns the frozen delta, or `None` when nothing happened since the
    /// newest image. A frozen delta left by a failed flush is returned again, not re-frozen.
    fn freeze(&self) -> Result<Option<Arc<Frozen>>> {
        let Some(wal) = &self.wal else {
            return Ok(None);
        };
        let mut tip = self.tip.lock();
        if let Some(f) = &tip.frozen {
            return Ok(Some(Arc::clone(f)));
        }
        wal.check_poison()?;
        wal.flush_and_rotate(self.published.cell())?;
        self.ckpt_base
            .store(self.wal_bytes_total(), Ordering::Relaxed);
        let imaged = tip.images.first().map_or(0, |i| i.last_lsn());
        if tip.lsn <= imaged {
            return Ok(None);
        }
        let mut st = State::clone(&tip);
        let trees = std::mem::replace(&mut st.trees, vec![TreeMap::new(); 256]);
        let frozen = Arc::new(Frozen {
            trees,
            lsn: st.lsn,
            version: st.version,
            floor: st.floor,
            registry: st.registry.clone(),
        });
        st.frozen = Some(Arc::clone(&frozen));
        let st = Arc::new(st);
        *tip = Arc::clone(&st);
        self.published.set_if_durable(st);
        Ok(Some(frozen))
    }

    /// Makes `change(tip)` the new tip and publishes it: at once when the tip is durable,
    /// otherwise once the group commit in flight (which publishes the state queued before the
    /// change) is done, unless newer commits (built on the new structure) published already.
    fn install_structure(&self, change: impl FnOnce(&State) -> State) {
        let lsn = {
            let mut tip = self.tip.lock();
            let st = Arc::new(change(&tip));
            *tip = Arc::clone(&st);
            let lsn = st.lsn;
            if self.published.set_if_durable(st) {
                return;
            }
            lsn
        };
        if let Some(wal) = &self.wal {
            if wal.wait_durable(lsn, self.published.cell()).is_err() {
                return;
            }
        }
        let tip = self.tip.lock();
        self.published.set_if_durable(Arc::clone(&tip));
    }

    /// Writes the image of `frozen` (if any) over the newest `inputs.len()` images of the tip,
    /// installs it in their place and deletes what it replaced: covered WAL segments (after a
    /// flush or checkpoint), merged images, leftovers. The caller holds `self.ckpt`.
    fn write_install(
        &self,
        frozen: Option<Arc<Frozen>>,
        inputs: Vec<Arc<Image>>,
        cancel: &dyn Fn() -> bool,
    ) -> Result<()> {
        let (Some(wal), Some(dir)) = (&self.wal, &self.dir) else {
            return Ok(());
        };
        let fs = wal.fs();
        let below = self.tip.lock().images.get(inputs.len()).cloned();
        let first = inputs
            .last()
            .map(|i| i.first_lsn())
            .or_else(|| below.as_ref().map(|b| b.last_lsn() + 1))
            .unwrap_or(1);
        let (last, version, floor, trees) = match (&frozen, inputs.first()) {
            (Some(f), _) => (f.lsn, f.version, f.floor, tree_entries(&f.registry)),
            (None, Some(newest)) => {
                let m = newest.meta();
                (m.last_lsn, m.version, m.floor, m.trees.clone())
            }
            (None, None) => return Ok(()),
        };
        let drop_floor = self.current().floor.max(floor);
        let job = Job {
            frozen: frozen.as_deref(),
            inputs: &inputs,
            first,
            last,
            version,
            floor,
            trees,
            drop_floor,
        };
        let mut progress = |step: Progress| {
            if step == Progress::Started {
                self.ckpt_step(CkptStep::Writing);
            }
            if cancel() {
                return Err(Error::Closed);
            }
            Ok(())
        };
        let (tmp, _bytes) = compact::write(fs, dir, &job, &mut progress)?;
        if cancel() {
            compact::discard_tmp(fs, &tmp);
            return Err(Error::Closed);
        }
        let img = match compact::install(fs, dir, first, last, &tmp) {
            Ok(img) => img,
            Err(e) => {
                // Gone already when the rename happened; otherwise never installed.
                compact::discard_tmp(fs, &tmp);
                return Err(e);
            }
        };
        let wrote_frozen = frozen.is_some();
        let replaced = inputs.len();
        self.install_structure(|tip| {
            let mut st = tip.clone();
            if wrote_frozen {
                st.frozen = None;
            }
            let mut images = vec![Arc::clone(&img)];
            images.extend(tip.images.iter().skip(replaced).cloned());
            debug_assert!(
                images
                    .windows(2)
                    .all(|w| w[1].last_lsn() + 1 == w[0].first_lsn()),
                "the installed images do not tile the log"
            );
            debug_assert!(
                images[0].last_lsn() <= st.lsn,
                "an image ahead of the state"
            );
            st.images = Arc::from(images);
            st
        });
        self.cleanup(if wrote_frozen { Some(last) } else { None })?;
        Ok(())
    }

    /// Deletes what the current tiling no longer needs: image files it does not use (merged
    /// away, or left over), stale `.tmp` files, legacy checkpoints and WAL segments covered by
    /// the images (`wal_through`). The caller holds `self.ckpt`.
    fn cleanup(&self, wal_through: Option<u64>) -> Result<()> {
        let (Some(wal), Some(dir)) = (&self.wal, &self.dir) else {
            return Ok(());
        };
        let fs = wal.fs();
        let keep: Vec<PathBuf> = self
            .tip
            .lock()
            .images
            .iter()
            .map(|i| i.path().to_path_buf())
            .collect();
        let imaged = wal_through.unwrap_or(0);
        let listing = set::list(fs, dir)?;
        let mut doomed: Vec<PathBuf> = listing
            .images
            .into_iter()
            .map(|(_, _, p)| p)
            .filter(|p| !keep.contains(p))
            .collect();
        doomed.extend(listing.stale_tmp);
        if imaged > 0 {
            let legacy = legacy_checkpoint::list(fs, dir)?;
            doomed.extend(
                legacy
                    .installed
                    .into_iter()
                    .filter(|(lsn, _)| *lsn <= imaged)
                    .map(|(_, p)| p),
            );
            doomed.extend(legacy.stale_tmp);
        }
        for path in &doomed {
            match fs.remove(path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("unlink", path, e)),
            }
        }
        if !doomed.is_empty() {
            fs.sync_dir(dir).map_err(|e| Error::io("fsync", dir, e))?;
        }
        if imaged > 0 {
            wal.remove_segments_through(imaged)?;
        }
        Ok(())
    }

    /// Flush: writes the in-memory delta (frozen first) as a new image above the others and
    /// drops the WAL it covers. A no-op when nothing happened since the newest image. The
    /// caller holds `self.ckpt`.
    fn flush_locked(&self, cancel: &dyn Fn() -> bool) -> Result<()> {
        let Some(frozen) = self.freeze()? else {
            return Ok(());
        };
        self.write_install(Some(frozen), Vec::new(), cancel)?;
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        self.ckpt_step(CkptStep::Done);
        Ok(())
    }

    /// Checkpoint: writes the in-memory delta and every image as one new base image and drops
    /// everything it replaces. A no-op when the store already is one image and nothing
    /// happened since. The caller holds `self.ckpt`.
    fn checkpoint_locked(&self, cancel: &dyn Fn() -> bool) -> Result<()> {
        if self.tip.lock().frozen.is_some() {
            // A flush that failed earlier: finish it first (one frozen layer at a time).
            self.flush_locked(cancel)?;
        }
        let frozen = self.freeze()?;
        let images: Vec<Arc<Image>> = self.tip.lock().images.to_vec();
        if frozen.is_none() && images.len() <= 1 {
            self.cleanup(images.first().map(|i| i.last_lsn()))?;
            return Ok(());
        }
        let wrote = frozen.is_some();
        self.write_install(frozen, images, cancel)?;
        if !wrote {
            self.merges.fetch_add(1, Ordering::Relaxed);
        }
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        self.ckpt_step(CkptStep::Done);
        Ok(())
    }

    /// Upgrades a format-1 store (see `store_format`) that holds records: a flush rolls the WAL
    /// to a new, headed segment and writes whatever the images lack (a legacy checkpoint
    /// included) as an image; the format-1 segments, all covered now, are dropped; the marker
    /// is written last, so a crash anywhere before leaves a format-1 store that the next writer
    /// upgrades again. Runs at open, before the checkpointer thread starts.
    /// Errors: those of a flush, `Io`.
    fn upgrade_format(&self) -> Result<()> {
        let (Some(wal), Some(dir)) = (&self.wal, &self.dir) else {
            return Ok(());
        };
        let _ckpt = self.ckpt.lock();
        self.flush_locked(&|| false)?;
        let imaged = self.tip.lock().images.first().map_or(0, |i| i.last_lsn());
        wal.remove_segments_through(imaged)?;
        store_format::write(wal.fs(), dir)
    }

    /// The merge the policy calls for now (`image::set::plan_merge`): how many of the newest
    /// images to merge.
    fn merge_due(&self) -> Option<usize> {
        let sizes: Vec<u64> = self.tip.lock().images.iter().map(|i| i.bytes()).collect();
        set::plan_merge(&sizes, merge_unit(&self.opts))
    }

    /// Runs the merge the policy calls for, if any; returns whether one ran. The caller holds
    /// `self.ckpt`.
    fn merge_step(&self, cancel: &dyn Fn() -> bool) -> Result<bool> {
        let Some(k) = self.merge_due() else {
            return Ok(false);
        };
        let inputs: Vec<Arc<Image>> = self.tip.lock().images.iter().take(k).cloned().collect();
        if inputs.len() < 2 {
            return Ok(false);
        }
        self.write_install(None, inputs, cancel)?;
        self.merges.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Whether enough WAL has been written since the last flush's rotation for an automatic
    /// flush.
    fn auto_checkpoint_due(&self) -> bool {
        let threshold = self.opts.checkpoint_wal_bytes;
        threshold != 0
            && self.wal.is_some()
            && self
                .wal_bytes_total()
                .saturating_sub(self.ckpt_base.load(Ordering::Relaxed))
                >= threshold
    }

    /// Called after each commit: wakes the background checkpointer when a flush is due.
    /// Never blocks the committer.
    fn maybe_auto_checkpoint(&self) {
        if let Some(bg) = &self.bg {
            if self.auto_checkpoint_due() {
                bg.request();
            }
        }
    }

    /// One round of background work: the due flush, then every merge the policy calls for.
    /// A failure is counted and remembered (`Stats::checkpoint_failures`,
    /// `Stats::last_checkpoint_error`); the WAL and the older images keep every commit, the
    /// failed write's `.tmp` file is removed, and the next attempt comes after another
    /// `checkpoint_wal_bytes` of WAL.
    fn background_checkpoint(&self, signal: &BgSignal) {
        let _guard = self.ckpt.lock();
        if self.lock.as_ref().is_some_and(|l| !l.held()) {
            // A shared lock released meanwhile: the files belong to whoever holds it now. The
            // flush stays due and runs after the next acquisition.
            return;
        }
        let cancel = || signal.stopping.load(Ordering::Relaxed);
        let mut res = Ok(());
        if self.auto_checkpoint_due() || self.tip.lock().frozen.is_some() {
            res = self.flush_locked(&cancel);
        }
        while res.is_ok() {
            match self.merge_step(&cancel) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => res = Err(e),
            }
        }
        match res {
            Ok(()) => {}
            Err(_) if cancel() => {}
            Err(e) => {
                self.checkpoint_failures.fetch_add(1, Ordering::Relaxed);
                *self.last_checkpoint_error.lock() = Some(e.to_string());
            }
        }
    }

    fn tree_meta(&self, state: &State, tree: &Tree) -> Result<Arc<TreeMeta>> {
        if tree.db_id != self.id() {
            return Err(Error::UnknownTree {
                name: tree.meta.name.clone(),
            });
        }
        state
            .registry
            .get(tree.meta.tag)
            .filter(|m| m.name == tree.meta.name)
            .cloned()
            .ok_or_else(|| Error::UnknownTree {
                name: tree.meta.name.clone(),
            })
    }

    /// Validates `batch` against `tip` and plans its writes (history rows included).
    pub(crate) fn build_commit(
        &self,
        tip: &State,
        batch: Batch,
    ) -> Result<Option<(State, Record)>> {
        for op in &batch.ops {
            let (tree, key) = match op {
                BatchOp::Put { tree, key, value } => {
                    check_value(value)?;
                    (tree, key)
                }
                BatchOp::Delete { tree, key } => (tree, key),
                BatchOp::Expect { tree, key, expect } => {
                    if let crate::batch::Expect::Equals(v) = expect {
                        check_value(v)?;
                    }
                    (tree, key)
                }
            };
            check_key(key)?;
            let meta = self.tree_meta(tip, tree)?;
            if meta.tag == HISTORY_TAG && !matches!(op, BatchOp::Expect { .. }) {
                return Err(Error::InvalidArgument(
                    "the history tree is written only by the engine".into(),
                ));
            }
        }
        if let Some(expected) = batch.expect_version {
            if expected != tip.version {
                return Err(Error::VersionMismatch {
                    expected,
                    actual: tip.version,
                });
            }
        }
        for op in &batch.ops {
            if let BatchOp::Expect { tree, key, expect } = op {
                if !expect.holds(tip.latest(tree.meta.tag, key)?) {
                    return Err(Error::PredicateFailed {
                        tree: tree.meta.name.clone(),
                        key: key.clone(),
                        expected: expect.describe(),
                    });
                }
            }
        }
        let version = tip.version + 1;
        let history = tip
            .registry
            .get(HISTORY_TAG)
            .cloned()
            .ok_or_else(|| Error::corrupt("<registry>", 0, "history tree missing"))?;
        let mut st = tip.clone();
        let mut phys = Vec::new();
        for op in batch.ops {
            let (tree, key, value) = match op {
                BatchOp::Put { tree, key, value } => (tree, key, Some(Arc::<[u8]>::from(value))),
                BatchOp::Delete { tree, key } => (tree, key, None),
                BatchOp::Expect { .. } => continue,
            };
            let meta = self.tree_meta(tip, &tree)?;
            mvcc::write(&mut st, &meta, &history, key, value, version, &mut phys)?;
        }
        st.version = version;
        if st.prune.is_some() {
            // Piggy-backed, bounded share of a pending MVCC prune sweep (see `mvcc`).
            mvcc::prune_step(&mut st, mvcc::COMMIT_STEP_BUDGET);
        }
        Ok(Some((st, Record::Commit { version, ops: phys })))
    }
}

/// How many more times [`Db::open`] tries the `LOCK` file (2 ms apart) before answering
/// `Locked`.
const LOCK_ATTEMPTS: u32 = 25;

impl Db {
    /// Opens (or creates) the database in directory `dir`.
    ///
    /// A missing or empty directory is initialised (`LOCK`, `wal/` with its first segment,
    /// `FORMAT`). An existing directory must already be a holt store (a format-1 store that
    /// holds records is upgraded here: one flush, see `docs/holt-format.md`); open then maps its
    /// images (checking each one's footer, CRC
    /// directory and meta record — nothing proportional to the number of keys) and replays the
    /// WAL after the newest one into the in-memory delta, without modifying any file (a torn
    /// final record is truncated later, by the first WAL write). A store written before images
    /// existed (`checkpoint-<lsn>.ckpt`) is loaded into memory once and converted by the first
    /// flush.
    ///
    /// The WAL I/O path is chosen from `opts.wal_io` (see [`crate::WalIo`]); `Db::stats` reports it.
    ///
    /// Errors: `Unsupported` for `WalIo::IoUring` when io_uring is not available; `Locked` if
    /// another `Db` holds `dir/LOCK` (still held after ~50 ms of retries);
    /// `Corrupt` for a directory that is not a holt store, an image whose footer, directory or
    /// meta record is damaged when the WAL cannot replace it (naming the file), or a damaged,
    /// gapped, missing or headerless WAL segment (the torn final record excepted);
    /// `Unsupported` for a store format newer than this version; `Io` on OS failures.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Db> {
        Self::open_with_fs(dir, opts, crate::vfs::os())
    }

    /// [`Db::open`] with the WAL's file operations going through `wal_fs` (tests inject faults).
    pub(crate) fn open_with_fs(
        dir: impl AsRef<Path>,
        opts: Options,
        wal_fs: Arc<dyn WalFs>,
    ) -> Result<Db> {
        let engine = check_wal_io(&opts)?;
        let dir = dir.as_ref().to_path_buf();
        let wal_dir = dir.join("wal");
        let lock_path = dir.join("LOCK");
        let fresh = match fs::read_dir(&dir) {
            Ok(mut rd) => rd.next().is_none(),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                fs::create_dir_all(&dir).map_err(|e| Error::io("mkdir", &dir, e))?;
                if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                    sync_dir(parent)?;
                }
                true
            }
            Err(e) => return Err(Error::io("read_dir", &dir, e)),
        };
        if fresh {
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&lock_path)
                .map_err(|e| Error::io("create", &lock_path, e))?;
            fs::create_dir(&wal_dir).map_err(|e| Error::io("mkdir", &wal_dir, e))?;
            sync_dir(&dir)?;
        } else if !lock_path.is_file() || !wal_dir.is_dir() {
            return Err(Error::corrupt(
                &dir,
                0,
                "not a holt database (missing LOCK file or wal/ directory)",
            ));
        }
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::io("open", &lock_path, e))?;
        // A lock can also be held for a moment by a copy of a closed handle's descriptor in a
        // child process another thread forked before it exec'd (the descriptor is close-on-exec):
        // wait that out briefly before reporting the store as locked. A writer sharing the lock
        // waits for its turn like any later acquisition (announcing itself, so the holder hands
        // over when idle).
        let announce = match opts.writer_lock {
            WriterLock::Shared { wait, .. } => Some(wait),
            WriterLock::Held => None,
        };
        if let Some(wait) = announce {
            crate::writer_lock::wait_for_turn(&lock, &lock_path, wait)?;
        }
        let mut attempt = 0;
        loop {
            match lock.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if attempt < LOCK_ATTEMPTS => {
                    attempt += 1;
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(Error::Locked { path: lock_path })
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(Error::io("flock", &lock_path, e))
                }
            }
        }

        if fresh {
            // Born in the current format: the first segment (with its header) and the marker.
            drop(create_segment(&*wal_fs, &wal_dir, 1)?);
            store_format::write(&*wal_fs, &dir)?;
        }
        let (recovered, legacy, format) = recover_store(&*wal_fs, &dir)?;
        let upgrade = format == StoreFormat::V1 && (recovered.state.lsn > 0 || legacy);
        let wal = Wal::new(
            wal_fs,
            wal_dir,
            recovered.tail,
            recovered.state.lsn,
            opts.durability,
            engine,
            opts.commit_delay,
        );
        let signal = (opts.checkpoint_wal_bytes > 0).then(|| Arc::new(BgSignal::default()));
        let inner = Arc::new(Inner::new(
            opts,
            Some(dir),
            recovered.state,
            Some(wal),
            recovered.replayed_bytes,
            Some(LockFile::new(lock, lock_path, opts.writer_lock)?),
            signal.clone(),
        ));
        if upgrade {
            inner.upgrade_format()?;
        }
        let bg = match signal {
            None => None,
            Some(signal) => {
                let (engine, sig) = (Arc::clone(&inner), Arc::clone(&signal));
                let thread = std::thread::Builder::new()
                    .name("holt-checkpoint".into())
                    .spawn(move || {
                        while sig.wait() {
                            engine.background_checkpoint(&sig);
                            sig.finished();
                        }
                    })
                    .map_err(|e| Error::io("spawn checkpointer thread", "", e))?;
                Some(Arc::new(BgGuard {
                    signal,
                    thread: Mutex::new(Some(thread)),
                }))
            }
        };
        if let Some(lock) = &inner.lock {
            let weak: std::sync::Weak<Inner> = Arc::downgrade(&inner);
            let weak: std::sync::Weak<dyn Release> = weak;
            lock.spawn_releaser(weak)
                .map_err(|e| Error::io("spawn writer-lock thread", "", e))?;
        }
        let db = Db { inner, _bg: bg };
        // WAL replayed at open may already be over the threshold, or a crash may have left a
        // merge undone.
        db.inner.maybe_auto_checkpoint();
        if db.inner.merge_due().is_some() {
            if let Some(bg) = &db.inner.bg {
                bg.request();
            }
        }
        Ok(db)
    }

    /// Creates an empty in-memory database with the same semantics and no files (nothing is
    /// durable; `checkpoint` is a no-op). Errors: `Unsupported` for `WalIo::IoUring` when
    /// io_uring is not available (the same check as [`Db::open`], although no WAL is written).
    pub fn open_memory(opts: Options) -> Result<Db> {
        if opts.wal_io == WalIo::IoUring {
            check_wal_io(&opts)?;
        }
        Ok(Db {
            inner: Arc::new(Inner::new(opts, None, State::new(), None, 0, None, None)),
            _bg: None,
        })
    }

    /// Wraps a state recovered by `Db::open_read_only` (see `read_only.rs`): no WAL, no lock, no
    /// background thread, every write refused with `Error::ReadOnly`.
    pub(crate) fn from_read_only_state(
        opts: Options,
        dir: PathBuf,
        state: State,
        replayed_bytes: u64,
    ) -> Db {
        let mut inner = Inner::new(opts, Some(dir), state, None, replayed_bytes, None, None);
        inner.read_only = true;
        Db {
            inner: Arc::new(inner),
            _bg: None,
        }
    }

    /// A pin on the writer lock for the duration of one write (see [`Inner::pin`]).
    fn pinned(&self) -> Result<PinGuard<'_>> {
        self.inner.pin()?;
        Ok(PinGuard(&self.inner))
    }

    fn handle(&self, meta: Arc<TreeMeta>) -> Tree {
        Tree {
            db: Arc::downgrade(&self.inner.published),
            db_id: self.inner.id(),
            meta,
        }
    }

    /// Registers a new tree durably (a WAL record, like a commit; it does not consume a commit
    /// version) and returns its handle. A versioned tree keeps MVCC history in the `history`
    /// tree. Errors: `InvalidArgument` for a name outside 1..=64 bytes of `[a-z0-9_]`;
    /// `TreeExists` for a taken name (including `history`); `TagInUse` for a taken tag
    /// (including 0x00); `Io`/`Poisoned` on WAL failure; `ReadOnly` on a read-only database.
    pub fn create_tree(&self, name: &str, tag: u8, versioned: bool) -> Result<Tree> {
        self.inner.refuse_if_read_only("create_tree")?;
        let _pin = self.pinned()?;
        let st = self.inner.submit(|tip| {
            tip.registry.check_new(name, tag)?;
            let rec = Record::CreateTree {
                tag,
                versioned,
                name: name.to_string(),
            };
            let mut st = tip.clone();
            st.apply_record(rec.clone(), tip.lsn)?
                .map_err(Error::InvalidArgument)?;
            Ok(Some((st, rec)))
        })?;
        let meta = st
            .registry
            .get(tag)
            .cloned()
            .ok_or_else(|| Error::InvalidArgument(format!("tree {name:?} vanished")))?;
        Ok(self.handle(meta))
    }

    /// The handle of tree `name`, if registered (the engine's `history` tree included).
    pub fn tree(&self, name: &str) -> Option<Tree> {
        let st = self.inner.current();
        st.registry.by_name(name).cloned().map(|m| self.handle(m))
    }

    /// Every registered tree, sorted by tag (the `history` tree, tag 0x00, first).
    pub fn trees(&self) -> Vec<TreeInfo> {
        self.inner
            .current()
            .registry
            .iter()
            .map(|m| TreeInfo {
                name: m.name.clone(),
                tag: m.tag,
                versioned: m.versioned,
            })
            .collect()
    }

    /// The last committed version (0 for a new database).
    pub fn version(&self) -> u64 {
        self.inner.current().version
    }

    /// Atomically applies `batch` and returns its commit version (previous version + 1).
    ///
    /// The version expectation and all predicates are checked against the latest committed
    /// state first; on failure nothing applies. Writes to versioned trees also write their MVCC
    /// history rows. Returns after the WAL record is durable (`Durability::Sync`: fdatasync;
    /// `Buffered`: write) and the new state is visible to readers.
    ///
    /// Errors: `InvalidArgument` (empty batch, key > 64 KiB, value > 16 MiB, write to the
    /// `history` tree), `UnknownTree` (handle from another database), `VersionMismatch`,
    /// `PredicateFailed`, `Io` / `Poisoned` (WAL failure), `ReadOnly` (opened with
    /// [`Db::open_read_only`]).
    pub fn commit(&self, batch: Batch) -> Result<u64> {
        self.inner.refuse_if_read_only("commit")?;
        if batch.is_empty() {
            return Err(Error::InvalidArgument("empty batch".into()));
        }
        let _pin = self.pinned()?;
        let st = self
            .inner
            .submit(|tip| self.inner.build_commit(tip, batch))?;
        self.inner.commit_acknowledged();
        Ok(st.version)
    }

    /// A consistent view at the current version. Never blocks behind a commit.
    pub fn view(&self) -> View {
        self.inner.view()
    }

    /// A consistent view at read version `version` (`history_floor() <= version <= version()`).
    /// Versioned trees read as of `version`; unversioned trees read their latest state.
    /// Errors: `HistoryPruned { requested, floor }` below the floor; `InvalidArgument` above the
    /// current version.
    pub fn view_at(&self, version: u64) -> Result<View> {
        let state = self.inner.current();
        if version > state.version {
            return Err(Error::InvalidArgument(format!(
                "read version {version} is above the current version {}",
                state.version
            )));
        }
        if version < state.floor {
            return Err(Error::HistoryPruned {
                requested: version,
                floor: state.floor,
            });
        }
        Ok(View {
            state,
            version,
            db_id: self.inner.id(),
        })
    }

    /// Raises the MVCC history floor to `version` and prunes the history rows and tombstones that
    /// no read version `>= version` needs. Lower or equal values are ignored (the floor is
    /// monotonic).
    ///
    /// The floor is logged through the WAL and published first (from then on `view_at` below it
    /// fails with `HistoryPruned`); the pruning then runs incrementally on the calling thread in
    /// bounded steps (a few thousand keys/nodes each), taking and releasing the commit lock per
    /// step, so concurrent commits interleave and are delayed by at most one step; in versioned
    /// trees subtrees without tombstones are skipped in O(1). Any part of a sweep not finished
    /// here (e.g. after a reopen) continues piggy-backed on later commits. The call returns once
    /// the sweep is complete. Pruning is not logged: it only drops rows no allowed read can
    /// reach. Views taken earlier keep their pinned snapshot and stay readable.
    /// Errors: `InvalidArgument` if `version > version()`; `Io` / `Poisoned` on WAL failure;
    /// `ReadOnly` on a read-only database.
    pub fn set_history_floor(&self, version: u64) -> Result<()> {
        self.inner.refuse_if_read_only("set_history_floor")?;
        let _pin = self.pinned()?;
        self.inner.submit(|tip| {
            if version > tip.version {
                return Err(Error::InvalidArgument(format!(
                    "history floor {version} is above the current version {}",
                    tip.version
                )));
            }
            if version <= tip.floor {
                return Ok(None);
            }
            let rec = Record::SetFloor { floor: version };
            let mut st = tip.clone();
            st.apply_record(rec.clone(), tip.lsn)?
                .map_err(Error::InvalidArgument)?;
            Ok(Some((st, rec)))
        })?;
        while self.inner.prune_chunk() {}
        Ok(())
    }

    /// Blocks until commit `version` is visible to readers — `self.version() >= version`, so
    /// `view()` and `Tree::get` see it — or until `timeout` has passed. No polling: publications
    /// wake the waiter through a condition variable.
    ///
    /// Useful after `Error::VersionMismatch { actual, .. }` or `Error::PredicateFailed`: batches
    /// are validated against the newest *accepted* state, which can be ahead of the readable
    /// state while its group commit waits for fdatasync; waiting for `actual` before re-reading
    /// avoids rebuilding the batch from a stale view.
    ///
    /// Returns `Ok(true)` once visible (immediately if it already is), `Ok(false)` on timeout
    /// (e.g. `version` was never committed). Errors: `Poisoned` if a WAL failure means pending
    /// commits will never become visible.
    pub fn wait_visible(&self, version: u64, timeout: std::time::Duration) -> Result<bool> {
        let inner = &self.inner;
        let deadline = std::time::Instant::now().checked_add(timeout);
        inner.visible.wait_until(
            || {
                if inner.current().version >= version {
                    return Ok(true);
                }
                if let Some(wal) = &inner.wal {
                    wal.check_poison()?;
                }
                Ok(false)
            },
            deadline,
        )
    }

    /// The current MVCC history floor (0 for a new database).
    pub fn history_floor(&self) -> u64 {
        self.inner.current().floor
    }

    /// Writes a checkpoint: the in-memory delta and every image merged into one new base image
    /// at the latest durable LSN, installed atomically (rename + directory fsync), after which
    /// the images it replaces and the WAL segments it covers are deleted. Synchronous: returns
    /// once all of that is durable. Cost: proportional to the whole store (it rewrites every
    /// key); [`Db::flush`] is the cheap, delta-sized form. Commits by other threads continue
    /// while the image is written (the WAL rolls to a fresh segment first). Waits for
    /// background work in progress, then writes its own. A no-op for in-memory databases and
    /// when the store already is one image with nothing newer.
    /// Errors: `Io` on file-system failures and `Corrupt` for a bad block of an image being
    /// merged (the WAL and the previous images stay, so nothing is lost), `Poisoned` after a
    /// WAL failure, `ReadOnly` on a read-only database.
    pub fn checkpoint(&self) -> Result<()> {
        self.inner.refuse_if_read_only("checkpoint")?;
        let _pin = self.pinned()?;
        let _guard = self.inner.ckpt.lock();
        self.inner.checkpoint_locked(&|| false)
    }

    /// Flushes the in-memory delta: writes the changes since the newest image as a new image
    /// above it, installs it and deletes the WAL segments it covers, then runs the merges the
    /// merge policy calls for (see `docs/holt-format.md`). Synchronous. Cost: proportional to
    /// the delta (at most about [`Options::checkpoint_wal_bytes`] of WAL when automatic
    /// flushes run) plus any due merge. This is what automatic checkpoints do on the
    /// background thread. A no-op for in-memory databases and when nothing happened since the
    /// newest image.
    /// Errors: as [`Db::checkpoint`].
    pub fn flush(&self) -> Result<()> {
        self.inner.refuse_if_read_only("flush")?;
        let _pin = self.pinned()?;
        let _guard = self.inner.ckpt.lock();
        self.inner.flush_locked(&|| false)?;
        while self.inner.merge_step(&|| false)? {}
        Ok(())
    }

    /// Blocks until the background checkpointer is idle: no automatic checkpoint requested or
    /// being written. Returns at once for in-memory databases and when automatic checkpoints are
    /// disabled (`Options::checkpoint_wal_bytes == 0`). Commits never need this; it is for
    /// tests, benchmarks and callers that want the WAL trimmed before they measure or copy the
    /// directory. A failed background checkpoint also ends the wait (see
    /// [`Stats::checkpoint_failures`]).
    pub fn wait_checkpointer_idle(&self) {
        if let Some(bg) = &self.inner.bg {
            bg.wait_idle();
        }
    }

    /// The newest published state (tests).
    #[cfg(test)]
    pub(crate) fn current_state(&self) -> Arc<State> {
        self.inner.current()
    }

    /// Installs (or clears) the checkpoint test hook.
    #[cfg(test)]
    pub(crate) fn set_checkpoint_hook(&self, hook: Option<CkptHook>) {
        *self.inner.ckpt_hook.lock() = hook;
    }

    /// Checks every data block of every image this database is served from against its CRC
    /// (reads do that lazily, block by block, on first touch; this reads them all), for
    /// offline verification such as `nokv fsck`. The in-memory delta and the WAL (checked
    /// record by record at open) are not involved. Blocks found intact are remembered, so later
    /// reads do not check them again; a damaged block keeps failing every read that touches it.
    /// Cost: one read of every image byte not checked yet. Works on read-only databases; an
    /// in-memory database has no images (an empty report).
    /// Damage is reported in [`ScrubReport::damaged`], never as an error.
    pub fn scrub(&self) -> ScrubReport {
        let images = self.inner.current().images.clone();
        let mut damaged = Vec::new();
        let mut blocks = 0;
        for img in images.iter() {
            blocks += img.scrub(&mut |e| damaged.push(e));
        }
        ScrubReport {
            images: images.len(),
            blocks,
            damaged,
        }
    }

    /// Engine counters.
    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        let st = inner.current();
        let wal = inner.wal.as_ref();
        let ws = wal.map(Wal::stats);
        Stats {
            wal_io: ws.map_or(WalIoPath::Blocking, |w| w.io),
            durability: inner.opts.durability,
            in_memory: inner.dir.is_none(),
            read_only: inner.read_only,
            commits: inner.commits.load(Ordering::Relaxed),
            wal_syncs: ws.map_or(0, |w| w.syncs),
            wal_writes: ws.map_or(0, |w| w.writes),
            wal_bytes: ws.map_or(0, |w| w.bytes),
            wal_groups: ws.map(|w| w.groups).unwrap_or_default(),
            last_lsn: ws.map_or(st.lsn, |w| w.durable_lsn),
            checkpoints: inner.checkpoints.load(Ordering::Relaxed),
            merges: inner.merges.load(Ordering::Relaxed),
            checkpoint_failures: inner.checkpoint_failures.load(Ordering::Relaxed),
            last_checkpoint_error: inner.last_checkpoint_error.lock().clone(),
            version: st.version,
            history_floor: st.floor,
            images: st.images.len(),
            image_bytes: st.images.iter().map(|i| i.bytes()).sum(),
            writer_lock: inner.writer_lock().map(LockFile::stats).unwrap_or_default(),
            delta_keys: (0..=255u8)
                .map(|t| st.tree(t).len() as u64)
                .chain(
                    st.frozen
                        .iter()
                        .flat_map(|f| f.trees.iter().map(|t| t.len() as u64)),
                )
                .sum(),
        }
    }
}
