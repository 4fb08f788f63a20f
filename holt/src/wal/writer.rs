//! WAL segment writer and leader/follower group commit.
//!
//! Committers encode their record while holding the commit lock (so records are queued in LSN
//! order), push it on the pending queue, release the commit lock, then take the I/O lock. Whoever
//! holds the I/O lock is the *leader*: it drains **every** pending record, writes them with one
//! `pwrite`, issues one `fdatasync` (Durability::Sync), publishes the newest state and releases
//! the lock. A *follower* that then gets the lock finds its LSN already durable and returns
//! without any I/O. While a leader syncs, new committers queue up behind the I/O lock and are
//! covered together by the next leader — that is the group commit.
//!
//! A failed write or sync poisons the log: the records of that group (and all later ones) are
//! refused, because the in-memory tip already contains them. Reopen to recover.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::error::{Error, Result};
use crate::options::Durability;
use crate::state::State;
use crate::wal::reader::TailSegment;
use crate::wal::record::segment_file_name;

/// fsyncs a directory so that created, renamed or removed entries are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let f = File::open(dir).map_err(|e| Error::io("open", dir, e))?;
    f.sync_all().map_err(|e| Error::io("fsync", dir, e))
}

struct OpenSegment {
    file: File,
    path: PathBuf,
    start_lsn: u64,
    len: u64,
}

/// Appends framed records to the current segment file, creating segments lazily (named after
/// the first LSN they will hold).
pub(crate) struct SegmentWriter {
    wal_dir: PathBuf,
    current: Option<OpenSegment>,
    /// The last segment found by recovery, not yet reopened for writing.
    tail: Option<TailSegment>,
}

fn cut_torn_tail(tail: &TailSegment) -> Result<()> {
    if tail.file_len > tail.valid_end {
        let f = OpenOptions::new()
            .write(true)
            .open(&tail.path)
            .map_err(|e| Error::io("open", &tail.path, e))?;
        f.set_len(tail.valid_end)
            .map_err(|e| Error::io("ftruncate", &tail.path, e))?;
        f.sync_all()
            .map_err(|e| Error::io("fsync", &tail.path, e))?;
    }
    Ok(())
}

impl SegmentWriter {
    pub(crate) fn new(wal_dir: PathBuf, tail: Option<TailSegment>) -> Self {
        SegmentWriter {
            wal_dir,
            current: None,
            tail,
        }
    }

    fn open_for(&mut self, first_lsn: u64) -> Result<&mut OpenSegment> {
        if self.current.is_none() {
            if let Some(tail) = self.tail.take() {
                if tail.next_lsn == first_lsn {
                    let file = OpenOptions::new()
                        .write(true)
                        .open(&tail.path)
                        .map_err(|e| Error::io("open", &tail.path, e))?;
                    if tail.file_len > tail.valid_end {
                        // Drop the torn tail record found at open (first write only).
                        file.set_len(tail.valid_end)
                            .map_err(|e| Error::io("ftruncate", &tail.path, e))?;
                    }
                    let start_lsn = first_lsn;
                    self.current = Some(OpenSegment {
                        file,
                        path: tail.path,
                        start_lsn,
                        len: tail.valid_end,
                    });
                } else {
                    cut_torn_tail(&tail)?;
                }
            }
        }
        match &mut self.current {
            Some(seg) => Ok(seg),
            slot @ None => {
                let path = self.wal_dir.join(segment_file_name(first_lsn));
                let file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map_err(|e| Error::io("create", &path, e))?;
                sync_dir(&self.wal_dir)?;
                Ok(slot.insert(OpenSegment {
                    file,
                    path,
                    start_lsn: first_lsn,
                    len: 0,
                }))
            }
        }
    }

    /// Writes `buf` (records starting at `first_lsn`) at the end of the current segment.
    fn append(&mut self, first_lsn: u64, buf: &[u8]) -> Result<()> {
        let seg = self.open_for(first_lsn)?;
        seg.file
            .write_all_at(buf, seg.len)
            .map_err(|e| Error::io("pwrite", &seg.path, e))?;
        seg.len += buf.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        if let Some(seg) = &self.current {
            seg.file
                .sync_data()
                .map_err(|e| Error::io("fdatasync", &seg.path, e))?;
        }
        Ok(())
    }

    /// Closes the current segment so the next record (LSN `next_lsn`) starts a new one. An
    /// empty recovered tail segment already named `next_lsn` is kept; any other recovered tail is
    /// cut back to its last valid record and closed.
    fn rotate(&mut self, next_lsn: u64) -> Result<()> {
        if self.current.as_ref().is_some_and(|s| s.len > 0) {
            self.current = None;
        }
        if let Some(tail) = self.tail.take() {
            if tail.valid_end == 0 && tail.next_lsn == next_lsn {
                self.tail = Some(tail);
            } else {
                cut_torn_tail(&tail)?;
            }
        }
        Ok(())
    }

    /// First LSN of the segment that will receive the next record, if already known.
    fn current_start(&self) -> Option<u64> {
        self.current.as_ref().map(|s| s.start_lsn)
    }
}

/// A record waiting for the group-commit leader.
pub(crate) struct Pending {
    pub(crate) lsn: u64,
    pub(crate) bytes: Vec<u8>,
    pub(crate) state: Arc<State>,
}

/// The write-ahead log of one open database.
pub(crate) struct Wal {
    pending: Mutex<VecDeque<Pending>>,
    io: Mutex<SegmentWriter>,
    durable_lsn: AtomicU64,
    poison: Mutex<Option<String>>,
    durability: Durability,
    pub(crate) syncs: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) bytes: AtomicU64,
}

impl Wal {
    pub(crate) fn new(
        wal_dir: PathBuf,
        tail: Option<TailSegment>,
        durable_lsn: u64,
        durability: Durability,
    ) -> Self {
        Wal {
            pending: Mutex::new(VecDeque::new()),
            io: Mutex::new(SegmentWriter::new(wal_dir, tail)),
            durable_lsn: AtomicU64::new(durable_lsn),
            poison: Mutex::new(None),
            durability,
            syncs: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// `Err(Poisoned)` once a WAL write or sync has failed.
    pub(crate) fn check_poison(&self) -> Result<()> {
        match &*self.poison.lock() {
            Some(reason) => Err(Error::Poisoned {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Queues an encoded record. Must be called under the commit lock, in LSN order.
    pub(crate) fn enqueue(&self, p: Pending) {
        self.pending.lock().push_back(p);
    }

    pub(crate) fn durable_lsn(&self) -> u64 {
        self.durable_lsn.load(Ordering::Acquire)
    }

    /// Returns once the record with `lsn` is durable (Sync) / written (Buffered) and its state
    /// (or a newer one) is published, becoming the group leader if needed.
    pub(crate) fn wait_durable(&self, lsn: u64, published: &RwLock<Arc<State>>) -> Result<()> {
        let mut w = self.io.lock();
        if self.durable_lsn() >= lsn {
            return Ok(());
        }
        self.check_poison()?;
        self.flush_locked(&mut w, published)
    }

    fn flush_locked(&self, w: &mut SegmentWriter, published: &RwLock<Arc<State>>) -> Result<()> {
        let group: Vec<Pending> = self.pending.lock().drain(..).collect();
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            return Ok(());
        };
        let first_lsn = first.lsn;
        let newest = last.state.clone();
        let last_lsn = last.lsn;
        let total: usize = group.iter().map(|p| p.bytes.len()).sum();
        let res = if group.len() == 1 {
            w.append(first_lsn, &first.bytes)
        } else {
            let mut buf = Vec::with_capacity(total);
            for p in &group {
                buf.extend_from_slice(&p.bytes);
            }
            w.append(first_lsn, &buf)
        }
        .and_then(|()| {
            if self.durability == Durability::Sync {
                w.sync()?;
                self.syncs.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        });
        if let Err(e) = res {
            *self.poison.lock() = Some(e.to_string());
            return Err(e);
        }
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(total as u64, Ordering::Relaxed);
        *published.write() = newest;
        self.durable_lsn.store(last_lsn, Ordering::Release);
        Ok(())
    }

    /// Makes every queued record durable, closes the current segment (the next record starts a
    /// new one) and returns the published state, whose LSN is the rotation point: every segment
    /// starting at or below it holds only records at or below it.
    pub(crate) fn flush_and_rotate(&self, published: &RwLock<Arc<State>>) -> Result<Arc<State>> {
        let mut w = self.io.lock();
        self.check_poison()?;
        self.flush_locked(&mut w, published)?;
        w.rotate(self.durable_lsn() + 1)?;
        debug_assert!(w.current_start().is_none_or(|s| s > published.read().lsn));
        Ok(published.read().clone())
    }
}
