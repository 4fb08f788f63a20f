//! Open-time options and runtime statistics.

use std::time::Duration;

/// When a commit is acknowledged relative to its WAL record reaching storage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Durability {
    /// Acknowledge a commit only after its WAL record has been written **and** `fdatasync`ed.
    /// A commit returned by `Db::commit` survives a crash or power loss. The default.
    #[default]
    Sync,
    /// Acknowledge after the WAL record has been handed to the kernel with `write(2)`, without
    /// `fdatasync`. Survives a process crash but **not** an OS crash or power loss.
    /// **For tests and benchmarks only** — never use it for data you want to keep.
    Buffered,
}

/// Which I/O path the WAL writer should use (chosen once, at open).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WalIo {
    /// Use io_uring when the kernel allows it, else the blocking path. At open holt creates a
    /// ring, checks that the kernel supports the `WRITE` and `FSYNC` opcodes and round-trips a
    /// `NOP`; on any error it falls back to `pwrite(2)` + `fdatasync(2)`.
    /// [`Stats::wal_io`] reports the outcome.
    #[default]
    Auto,
    /// Require io_uring: each commit group is one `WRITE` SQE linked (`IOSQE_IO_LINK`) to an
    /// `FSYNC` SQE with `IORING_FSYNC_DATASYNC`, submitted together with one `io_uring_enter`.
    /// `Db::open` and `Db::open_memory` return `Error::Unsupported` (naming the kernel's error)
    /// if the probe described under [`WalIo::Auto`] fails.
    IoUring,
    /// Force the blocking `pwrite(2)` + `fdatasync(2)` path.
    Blocking,
}

/// The WAL I/O path actually in use, reported by `Db::stats` ([`Stats::wal_io`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WalIoPath {
    /// Blocking `pwrite(2)` + `fdatasync(2)` on the group-commit writer thread. Also reported by
    /// in-memory databases, which have no WAL.
    Blocking,
    /// io_uring: one linked write + `fdatasync` submission per commit group.
    IoUring,
}

/// Number of buckets in [`WalGroupStats::histogram`].
pub const WAL_GROUP_HISTOGRAM_BUCKETS: usize = 8;

/// How many WAL records each group-commit write (and, under [`Durability::Sync`], each
/// `fdatasync`) covered since open. Records are commits, tree creations and history-floor
/// changes (each one LSN).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalGroupStats {
    /// Groups written successfully (one write, plus one `fdatasync` under `Durability::Sync`).
    pub groups: u64,
    /// WAL records covered by those groups.
    pub records: u64,
    /// The largest group, in records.
    pub max: u64,
    /// `histogram[i]` counts groups of `2^i ..= 2^(i+1) - 1` records (bucket 0: single-record
    /// groups, bucket 4: 16..=31 records); the last bucket counts every group of
    /// `2^(WAL_GROUP_HISTOGRAM_BUCKETS - 1)` = 128 records or more.
    pub histogram: [u64; WAL_GROUP_HISTOGRAM_BUCKETS],
    /// Groups whose leader waited the commit delay ([`Options::commit_delay`]) before taking
    /// the queue, because fewer records were queued than its previous group held.
    pub delayed: u64,
}

impl WalGroupStats {
    /// Mean records per group (`records / groups`), 0.0 before the first group.
    pub fn mean(&self) -> f64 {
        if self.groups == 0 {
            0.0
        } else {
            self.records as f64 / self.groups as f64
        }
    }

    pub(crate) fn record(&mut self, n: u64) {
        self.groups += 1;
        self.records += n;
        self.max = self.max.max(n);
        let bucket = (63 - n.max(1).leading_zeros()) as usize;
        self.histogram[bucket.min(WAL_GROUP_HISTOGRAM_BUCKETS - 1)] += 1;
    }
}

/// Default automatic-flush threshold: 1 MiB of WAL since the last flush. This bounds what an
/// open replays (see [`Options::checkpoint_wal_bytes`]).
pub const DEFAULT_CHECKPOINT_WAL_BYTES: u64 = 1024 * 1024;

/// Default [`Options::commit_delay`]: 50 µs.
pub const DEFAULT_COMMIT_DELAY: Duration = Duration::from_micros(50);

/// Options for `Db::open` / `Db::open_memory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// When commits are acknowledged; default [`Durability::Sync`].
    pub durability: Durability,
    /// WAL I/O path; default [`WalIo::Auto`].
    pub wal_io: WalIo,
    /// Flush the in-memory delta to a new image automatically once this many WAL bytes (record
    /// headers included) have been written since the last flush, then run the merges the merge
    /// policy calls for ([`crate::Db::flush`]). Default 1 MiB
    /// ([`DEFAULT_CHECKPOINT_WAL_BYTES`]); `0` disables automatic flushes and merges (and the
    /// background thread). This threshold bounds the WAL an open replays and the memory the
    /// delta takes: a flush that is due when the last `Db` clone is dropped is finished before
    /// the drop returns, so even one-call processes leave at most this much WAL behind (plus
    /// whatever a crash interrupted). The work runs on a background thread (`holt-checkpoint`,
    /// one per open file-backed database) that the committer crossing the threshold wakes
    /// without waiting for it: the committer returns as soon as its own commit is durable, and
    /// commits continue while the image is written (the WAL rolls to a new segment first). A
    /// failed automatic flush loses nothing (the WAL stays); it is counted in
    /// [`Stats::checkpoint_failures`] and retried after another `checkpoint_wal_bytes` of WAL.
    /// Dropping the last `Db` clone first waits for a due or running flush or merge, then stops
    /// the thread and joins it.
    pub checkpoint_wal_bytes: u64,
    /// **Commit delay** of group commit: the most a group's leader waits, before writing its
    /// group, for more committers to join it — and only while fewer records are queued than its
    /// previous group held, so a lone committer never waits. Many concurrent committers
    /// otherwise split into two alternating cohorts (one queues while the other's group is in
    /// `fdatasync`), each group covering about half of them; the delay merges them. Default
    /// [`DEFAULT_COMMIT_DELAY`] (50 µs; the sleep may overshoot by the kernel's timer slack);
    /// `Duration::ZERO` never waits. Groups that waited are counted in
    /// [`WalGroupStats::delayed`]. Measured in `docs/benchmarks.md` ("Commit delay").
    pub commit_delay: Duration,
    /// How [`crate::Db::open`] holds the store's `LOCK` file; default [`WriterLock::Held`].
    pub writer_lock: WriterLock,
}

/// How a writer holds the store's `LOCK` file (docs/holt-format.md, "Sharing the writer lock
/// between processes").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WriterLock {
    /// For the database's whole life: another writer's `Db::open` answers `Error::Locked`.
    #[default]
    Held,
    /// Shared with writers in other processes: taken by a write (or a `Db::hold_writer`) when
    /// this process does not hold it — waiting up to `wait`, then catching up with what other
    /// writers committed meanwhile — kept while any write of this process runs and for
    /// `idle_release` after the last one, then released (a background thread,
    /// `holt-writer-lock`, does it). Views are not refreshed by themselves: `Db::refresh` (or
    /// any write) catches up.
    Shared {
        /// The idle grace: how long the lock is kept after the last write of this process.
        idle_release: Duration,
        /// The most a write waits for another process to release the lock before
        /// `Error::Locked`.
        wait: Duration,
    },
}

/// Counters of the writer lock since open (`Stats::writer_lock`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterLockStats {
    /// Times this process took the lock (the open's included).
    pub acquisitions: u64,
    /// Times it released the lock ([`WriterLock::Shared`] only): after the idle grace, or
    /// handed over at once to a waiting writer.
    pub releases: u64,
    /// Of those, the releases that handed the lock over to a writer of another process that was
    /// waiting for it, without waiting out the idle grace.
    pub handovers: u64,
    /// Microseconds waited for the lock over all acquisitions after the open's.
    pub wait_micros_total: u64,
    /// The longest of those waits, in microseconds.
    pub wait_micros_max: u64,
    /// WAL records of other writers replayed by the catch-ups of those acquisitions.
    pub caught_up_records: u64,
    /// Catch-ups that found the images changed and recovered the state from the files again.
    pub reloads: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            durability: Durability::Sync,
            wal_io: WalIo::Auto,
            checkpoint_wal_bytes: DEFAULT_CHECKPOINT_WAL_BYTES,
            commit_delay: DEFAULT_COMMIT_DELAY,
            writer_lock: WriterLock::Held,
        }
    }
}

/// What [`crate::Db::scrub`] found: every data block of every image the database is served
/// from was checked against its CRC.
#[derive(Debug, Default)]
pub struct ScrubReport {
    /// Image files checked.
    pub images: usize,
    /// 4 KiB data blocks checked (over all images).
    pub blocks: u64,
    /// One `Error::Corrupt` per damaged block or CRC table page (naming the file, the byte
    /// offset and the block), in file and block order; empty when every block is intact.
    pub damaged: Vec<crate::error::Error>,
}

/// A point-in-time copy of engine counters, from `Db::stats`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// The WAL I/O path in use, decided at open from [`Options::wal_io`] (`Blocking` for
    /// in-memory dbs).
    pub wal_io: WalIoPath,
    /// The durability mode the database was opened with.
    pub durability: Durability,
    /// True for `Db::open_memory` instances (no WAL, no files).
    pub in_memory: bool,
    /// True for databases opened with `Db::open_read_only` (no WAL writer, no lock; every write
    /// is refused with `Error::ReadOnly`).
    pub read_only: bool,
    /// Batches committed since open (each got a commit version).
    pub commits: u64,
    /// WAL `fdatasync` calls since open. With group commit this can be lower than the number of
    /// WAL records: one sync covers every record of the group.
    pub wal_syncs: u64,
    /// WAL writes (one per commit group) since open.
    pub wal_writes: u64,
    /// Group-commit sizes: how many records each WAL write / `fdatasync` covered.
    pub wal_groups: WalGroupStats,
    /// WAL bytes (headers + payloads) written since open.
    pub wal_bytes: u64,
    /// LSN of the last durable WAL record (commits, tree creations and floor changes each take
    /// one LSN). For in-memory dbs the LSN still advances, without a log.
    pub last_lsn: u64,
    /// Images written from the in-memory delta since open: flushes (manual and automatic) and
    /// checkpoints.
    pub checkpoints: u64,
    /// Merges of images into one since open (background merges, and checkpoints that only
    /// merged images).
    pub merges: u64,
    /// Automatic (background) checkpoints that failed since open. The commits they covered are
    /// still in the WAL; nothing is lost.
    pub checkpoint_failures: u64,
    /// The error message of the last failed automatic checkpoint since open, if any.
    pub last_checkpoint_error: Option<String>,
    /// Last committed version (same as `Db::version`).
    pub version: u64,
    /// Current MVCC history floor (same as `Db::history_floor`).
    pub history_floor: u64,
    /// Image files the store is served from (0 for in-memory databases).
    pub images: usize,
    /// Bytes of those image files.
    pub image_bytes: u64,
    /// Slots (keys and tombstones, every tree) held in memory: the writes since the newest
    /// image.
    pub delta_keys: u64,
    /// The writer lock's counters (all zero for in-memory and read-only databases).
    pub writer_lock: WriterLockStats,
}
