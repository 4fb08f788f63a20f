//! The WAL segment writer (the group-commit sink) and [`Wal`], the log of one open database.
//!
//! Committers encode their record under the commit lock and hand it to the group-commit
//! hand-off ([`super::group_commit`]), which elects one committer at a time as writer; the writer
//! passes the whole group to [`SegmentWriter::write_group`]: one write at the end of the current
//! segment and, under [`Durability::Sync`], one `fdatasync`, either as a linked io_uring
//! submission ([`IoEngine::Uring`]) or as `pwrite` + `fdatasync` ([`IoEngine::Blocking`]).
//! Segments are named after the first LSN they hold and created atomically with their header
//! ([`create_segment`]: written under a `.tmp` name, fdatasynced, renamed, WAL directory
//! fsynced), so a segment file that exists always starts with a valid header and its name is
//! durable before any record in it is acknowledged. A rotation ([`Wal::flush_and_rotate`])
//! creates the next segment at once: a flush writes its image only after the segment that
//! follows it exists (`store_format` explains why recovery relies on it). All file operations go
//! through [`WalFs`], so tests can inject faults.
//!
//! A failed write or sync poisons the log (see the hand-off module): the records of that group
//! (and all later ones) are refused, because the in-memory tip already contains them. Reopen to
//! recover.

use std::fs::File;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use crate::error::{Error, Result};
use crate::options::{Durability, WalGroupStats, WalIo, WalIoPath};
use crate::state::State;
use crate::vfs::{self, WalFile, WalFs};
use crate::wal::group_commit::{GroupCommit, GroupSink};
use crate::wal::reader::TailSegment;
use crate::wal::record::{
    parse_segment_name, segment_file_name, segment_header, SEGMENT_HEADER_LEN,
};
use crate::wal::uring::Ring;

/// fsyncs a directory of the real file system so that created, renamed or removed entries are
/// durable. Errors: `Io` (`open` or `fsync`).
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let f = File::open(dir).map_err(|e| Error::io("open", dir, e))?;
    f.sync_all().map_err(|e| Error::io("fsync", dir, e))
}

/// How the segment writer submits a group's write and `fdatasync`.
#[derive(Debug)]
pub(crate) enum IoEngine {
    /// `pwrite(2)` + `fdatasync(2)`.
    Blocking,
    /// A linked write + `fdatasync` submission on the writer's own io_uring (boxed: the ring
    /// handle is a few hundred bytes).
    Uring(Box<Ring>),
}

impl IoEngine {
    /// Picks the engine for `wal_io`, probing io_uring for `Auto` and `IoUring`.
    /// Errors: `Unsupported` (with the kernel's reason) for `IoUring` when the probe fails.
    pub(crate) fn select(wal_io: WalIo) -> Result<IoEngine> {
        match wal_io {
            WalIo::Blocking => Ok(IoEngine::Blocking),
            WalIo::Auto => {
                Ok(Ring::probe().map_or(IoEngine::Blocking, |r| IoEngine::Uring(Box::new(r))))
            }
            WalIo::IoUring => Ring::probe()
                .map(|r| IoEngine::Uring(Box::new(r)))
                .map_err(|e| {
                    Error::Unsupported(format!(
                        "WalIo::IoUring requested but io_uring is not available: {e}"
                    ))
                }),
        }
    }

    /// The path reported in `Stats::wal_io`.
    pub(crate) fn path(&self) -> WalIoPath {
        match self {
            IoEngine::Blocking => WalIoPath::Blocking,
            IoEngine::Uring(_) => WalIoPath::IoUring,
        }
    }
}

#[derive(Default)]
struct Counters {
    syncs: AtomicU64,
    writes: AtomicU64,
    bytes: AtomicU64,
}

struct OpenSegment {
    file: Box<dyn WalFile>,
    path: PathBuf,
    start_lsn: u64,
    /// Offset of the first record (the header length; 0 for a reused format-1 segment).
    body_start: u64,
    len: u64,
}

impl OpenSegment {
    /// Holds no record yet.
    fn is_empty(&self) -> bool {
        self.len == self.body_start
    }
}

/// Creates the segment for records from `first_lsn` in `wal_dir` atomically, header included:
/// writes the header to `<name>.tmp` (a stale one is replaced), fdatasyncs it, renames it over
/// `<name>` (replacing an empty format-1 segment of that name) and fsyncs the directory, then
/// opens the segment for appending. Returns the open file.
/// Errors: `Io` naming the failed operation.
pub(crate) fn create_segment(
    fs: &dyn WalFs,
    wal_dir: &Path,
    first_lsn: u64,
) -> Result<Box<dyn WalFile>> {
    let path = vfs::create_whole(
        fs,
        wal_dir,
        &segment_file_name(first_lsn),
        &segment_header(first_lsn),
    )?;
    fs.open_write(&path)
        .map_err(|e| Error::io("open", &path, e))
}

/// Appends framed records to the current segment file; the next segment is created at each
/// rotation, or when the first record after a failed rotation needs one.
pub(crate) struct SegmentWriter {
    fs: Arc<dyn WalFs>,
    wal_dir: PathBuf,
    current: Option<OpenSegment>,
    /// The last segment found by recovery, not yet reopened for writing.
    tail: Option<TailSegment>,
    engine: IoEngine,
    durability: Durability,
    counters: Arc<Counters>,
}

impl SegmentWriter {
    /// Cuts a recovered tail segment back to its last valid record, durably.
    fn cut_torn_tail(&self, tail: &TailSegment) -> Result<()> {
        if tail.file_len > tail.valid_end {
            let mut f = self
                .fs
                .open_write(&tail.path)
                .map_err(|e| Error::io("open", &tail.path, e))?;
            f.set_len(tail.valid_end)
                .map_err(|e| Error::io("ftruncate", &tail.path, e))?;
            vfs::sync_data(&mut *f).map_err(|e| Error::io("fdatasync", &tail.path, e))?;
        }
        Ok(())
    }

    /// Makes sure a segment is open that the record with `first_lsn` can be appended to.
    fn open_for(&mut self, first_lsn: u64) -> Result<()> {
        if self.current.is_some() {
            return Ok(());
        }
        if let Some(tail) = self.tail.take() {
            if tail.next_lsn == first_lsn {
                let mut file = self
                    .fs
                    .open_write(&tail.path)
                    .map_err(|e| Error::io("open", &tail.path, e))?;
                if tail.file_len > tail.valid_end {
                    // Drop the torn tail record found at open (first write only); the group's
                    // fdatasync makes the new length durable together with the new records.
                    file.set_len(tail.valid_end)
                        .map_err(|e| Error::io("ftruncate", &tail.path, e))?;
                }
                self.current = Some(OpenSegment {
                    file,
                    path: tail.path,
                    start_lsn: first_lsn,
                    body_start: tail.body_start,
                    len: tail.valid_end,
                });
                return Ok(());
            }
            self.cut_torn_tail(&tail)?;
        }
        self.create(first_lsn)
    }

    /// Creates the segment for records from `first_lsn` and makes it current.
    fn create(&mut self, first_lsn: u64) -> Result<()> {
        let file = create_segment(&*self.fs, &self.wal_dir, first_lsn)?;
        self.current = Some(OpenSegment {
            file,
            path: self.wal_dir.join(segment_file_name(first_lsn)),
            start_lsn: first_lsn,
            body_start: SEGMENT_HEADER_LEN as u64,
            len: SEGMENT_HEADER_LEN as u64,
        });
        Ok(())
    }

    /// Closes the current segment and creates the one the next record (LSN `next_lsn`) starts,
    /// so that it exists before anything that relies on the rotation (a flush's image) is
    /// written. An empty headed segment already named `next_lsn` (current, or the recovered
    /// tail) is kept; any other recovered tail is cut back to its last valid record and closed.
    fn rotate(&mut self, next_lsn: u64) -> Result<()> {
        if let Some(cur) = &self.current {
            if cur.is_empty() && cur.body_start > 0 && cur.start_lsn == next_lsn {
                return Ok(());
            }
        }
        self.current = None;
        if let Some(tail) = self.tail.take() {
            if tail.body_start > 0 && tail.valid_end == tail.body_start && tail.next_lsn == next_lsn
            {
                self.tail = Some(tail);
                return Ok(());
            }
            self.cut_torn_tail(&tail)?;
        }
        self.create(next_lsn)
    }

    /// First LSN of the segment that will receive the next record, if already open.
    fn current_start(&self) -> Option<u64> {
        self.current.as_ref().map(|s| s.start_lsn)
    }
}

impl GroupSink for SegmentWriter {
    fn write_group(&mut self, first_lsn: u64, _last_lsn: u64, bytes: &[u8]) -> Result<()> {
        self.open_for(first_lsn)?;
        let Some(seg) = self.current.as_mut() else {
            return Err(Error::Poisoned {
                reason: "internal: no open WAL segment".into(),
            });
        };
        let sync = self.durability == Durability::Sync;
        match (&mut self.engine, seg.file.raw_fd()) {
            (IoEngine::Uring(ring), Some(fd)) => {
                let op = if sync {
                    "io_uring write + fdatasync"
                } else {
                    "io_uring write"
                };
                ring.write_at(fd, bytes, seg.len, sync)
                    .map_err(|e| Error::io(op, &seg.path, e))?;
            }
            _ => {
                vfs::write_all_at(&mut *seg.file, bytes, seg.len)
                    .map_err(|e| Error::io("pwrite", &seg.path, e))?;
                if sync {
                    vfs::sync_data(&mut *seg.file)
                        .map_err(|e| Error::io("fdatasync", &seg.path, e))?;
                }
            }
        }
        seg.len += bytes.len() as u64;
        if sync {
            self.counters.syncs.fetch_add(1, Ordering::Relaxed);
        }
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// WAL counters for `Db::stats`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WalStats {
    pub(crate) io: WalIoPath,
    pub(crate) syncs: u64,
    pub(crate) writes: u64,
    pub(crate) bytes: u64,
    pub(crate) groups: WalGroupStats,
    pub(crate) durable_lsn: u64,
}

/// The write-ahead log of one open database.
pub(crate) struct Wal {
    gc: GroupCommit<SegmentWriter, Arc<State>>,
    fs: Arc<dyn WalFs>,
    wal_dir: PathBuf,
    io: WalIoPath,
    counters: Arc<Counters>,
}

impl Wal {
    /// The log in `wal_dir`, durable through `durable_lsn`, continuing after the recovered
    /// `tail` segment, writing through `engine`, its group-commit leaders waiting up to
    /// `commit_delay` for more committers under `Durability::Sync` (see `Options::commit_delay`).
    pub(crate) fn new(
        fs: Arc<dyn WalFs>,
        wal_dir: PathBuf,
        tail: Option<TailSegment>,
        durable_lsn: u64,
        durability: Durability,
        engine: IoEngine,
        commit_delay: Duration,
    ) -> Self {
        let counters = Arc::new(Counters::default());
        let io = engine.path();
        let writer = SegmentWriter {
            fs: fs.clone(),
            wal_dir: wal_dir.clone(),
            current: None,
            tail,
            engine,
            durability,
            counters: counters.clone(),
        };
        Wal {
            // Without fdatasync a group costs one write: nothing to gain by waiting.
            gc: GroupCommit::new(writer, durable_lsn).with_commit_delay(match durability {
                Durability::Sync => commit_delay,
                Durability::Buffered => Duration::ZERO,
            }),
            fs,
            wal_dir,
            io,
            counters,
        }
    }

    /// `Err(Poisoned)` once a WAL write or sync has failed.
    pub(crate) fn check_poison(&self) -> Result<()> {
        self.gc.check_poison()
    }

    /// Queues the framed record `bytes` with `lsn`; `state` is the state it produces. Must be
    /// called under the commit lock, in LSN order. Errors: `Poisoned` after a WAL failure.
    pub(crate) fn enqueue(&self, lsn: u64, bytes: &[u8], state: Arc<State>) -> Result<()> {
        self.gc.enqueue(lsn, bytes, state)
    }

    /// The file layer the log (and the checkpoint writer) goes through.
    pub(crate) fn fs(&self) -> &dyn WalFs {
        &*self.fs
    }

    /// WAL bytes written since open.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.counters.bytes.load(Ordering::Relaxed)
    }

    /// Returns once the record with `lsn` is durable (Sync) / written (Buffered) and its state
    /// (or a newer one) is published, writing the group itself if no writer is active.
    /// Errors: `Io` if its group failed, `Poisoned` after an earlier failure.
    pub(crate) fn wait_durable(&self, lsn: u64, published: &RwLock<Arc<State>>) -> Result<()> {
        self.gc.wait_durable(lsn, |st| *published.write() = st)
    }

    /// Makes every queued record durable, closes the current segment (the next record starts a
    /// new one) and returns the published state, whose LSN is the rotation point: every segment
    /// starting at or below it holds only records at or below it.
    pub(crate) fn flush_and_rotate(&self, published: &RwLock<Arc<State>>) -> Result<Arc<State>> {
        self.gc.exclusive(
            |st| *published.write() = st,
            |w, durable| {
                w.rotate(durable + 1)?;
                let snap = published.read().clone();
                debug_assert!(w.current_start().is_none_or(|s| s > snap.lsn));
                Ok(snap)
            },
        )
    }

    /// Writes every queued record as one group (publishing its state) and returns once it is
    /// durable; nothing is queued afterwards until the caller's commit lock is released.
    /// Errors: `Poisoned` (or the group's error) after a WAL failure.
    pub(crate) fn drain(&self, published: &RwLock<Arc<State>>) -> Result<()> {
        self.gc
            .exclusive(|st| *published.write() = st, |_, _| Ok(()))
    }

    /// Continues the log after another process wrote to it: the next record gets LSN
    /// `lsn + 1` and goes to the recovered `tail` segment (cut back to its last valid record
    /// by the first write) or to a new segment; `state` (the caught-up state, durable through
    /// `lsn`) is published. Called under the commit lock with nothing queued (after
    /// [`Wal::drain`] at the release). Errors: `Poisoned`; `InvalidArgument` if records are
    /// queued (an engine bug).
    pub(crate) fn resume(
        &self,
        tail: Option<TailSegment>,
        lsn: u64,
        published: &RwLock<Arc<State>>,
        state: Arc<State>,
    ) -> Result<()> {
        self.gc.resume_at(lsn, |w| {
            w.current = None;
            w.tail = tail;
        })?;
        *published.write() = state;
        Ok(())
    }

    /// Deletes every segment whose first LSN is at or below `lsn` (all covered by a checkpoint
    /// at `lsn` after `flush_and_rotate`) and any `.tmp` a crash left of such a segment's
    /// creation, and fsyncs the WAL directory. Errors: `Io` (`read_dir`, `unlink`, `fsync`).
    pub(crate) fn remove_segments_through(&self, lsn: u64) -> Result<()> {
        let listed = self
            .fs
            .list(&self.wal_dir)
            .map_err(|e| Error::io("read_dir", &self.wal_dir, e))?;
        for path in listed {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            // A segment, or a `.tmp` a crash left of one's creation; only those the checkpoint
            // covers (a segment being created now, after a failed rotation, is for a later LSN).
            let (start, leftover) = match name.strip_suffix(".tmp") {
                Some(stem) => (parse_segment_name(stem), true),
                None => (parse_segment_name(name), false),
            };
            if start.is_none_or(|start| start > lsn) {
                continue;
            }
            match self.fs.remove(&path) {
                Ok(()) => {}
                Err(e) if leftover && e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("unlink", &path, e)),
            }
        }
        self.fs
            .sync_dir(&self.wal_dir)
            .map_err(|e| Error::io("fsync", &self.wal_dir, e))
    }

    /// Counters for `Db::stats`.
    pub(crate) fn stats(&self) -> WalStats {
        WalStats {
            io: self.io,
            syncs: self.counters.syncs.load(Ordering::Relaxed),
            writes: self.counters.writes.load(Ordering::Relaxed),
            bytes: self.counters.bytes.load(Ordering::Relaxed),
            groups: self.gc.stats(),
            durable_lsn: self.gc.durable_lsn(),
        }
    }
}
