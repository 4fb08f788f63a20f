//! Open-time options and runtime statistics.

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

/// Which I/O path the WAL writer should use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WalIo {
    /// Let holt choose. In this first cut that is always the blocking `pwrite` + `fdatasync`
    /// path ([`WalIoPath::Blocking`]).
    #[default]
    Auto,
    /// Require io_uring. Not implemented yet: `Db::open` returns `Error::Unsupported`.
    IoUring,
    /// Force the blocking `pwrite` + `fdatasync` path.
    Blocking,
}

/// The WAL I/O path actually in use, reported by `Db::stats`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WalIoPath {
    /// Blocking `pwrite(2)` + `fdatasync(2)` on the committing (leader) thread.
    Blocking,
    /// io_uring submission (not available in this first cut).
    IoUring,
}

/// Default automatic-checkpoint threshold: 64 MiB of WAL since the last checkpoint.
pub const DEFAULT_CHECKPOINT_WAL_BYTES: u64 = 64 * 1024 * 1024;

/// Options for `Db::open` / `Db::open_memory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// When commits are acknowledged; default [`Durability::Sync`].
    pub durability: Durability,
    /// WAL I/O path; default [`WalIo::Auto`].
    pub wal_io: WalIo,
    /// Take a checkpoint automatically once this many WAL bytes (record headers included) have
    /// been written since the last checkpoint. Default 64 MiB
    /// ([`DEFAULT_CHECKPOINT_WAL_BYTES`]); `0` disables automatic checkpoints. The checkpoint runs
    /// inline on the committing thread that crossed the threshold, after its own commit is
    /// durable and published (first cut).
    pub checkpoint_wal_bytes: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            durability: Durability::Sync,
            wal_io: WalIo::Auto,
            checkpoint_wal_bytes: DEFAULT_CHECKPOINT_WAL_BYTES,
        }
    }
}

/// A point-in-time copy of engine counters, from `Db::stats`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// The WAL I/O path in use (always `Blocking` in this first cut, also for in-memory dbs).
    pub wal_io: WalIoPath,
    /// The durability mode the database was opened with.
    pub durability: Durability,
    /// True for `Db::open_memory` instances (no WAL, no files).
    pub in_memory: bool,
    /// Batches committed since open (each got a commit version).
    pub commits: u64,
    /// WAL `fdatasync` calls since open. With group commit this can be lower than the number of
    /// WAL records: one sync covers every record of the group.
    pub wal_syncs: u64,
    /// WAL writes (one per commit group) since open.
    pub wal_writes: u64,
    /// WAL bytes (headers + payloads) written since open.
    pub wal_bytes: u64,
    /// LSN of the last durable WAL record (commits, tree creations and floor changes each take
    /// one LSN). For in-memory dbs the LSN still advances, without a log.
    pub last_lsn: u64,
    /// Checkpoints completed since open (manual and automatic).
    pub checkpoints: u64,
    /// Automatic checkpoints that failed (the triggering commit itself had already succeeded).
    pub checkpoint_failures: u64,
    /// Last committed version (same as `Db::version`).
    pub version: u64,
    /// Current MVCC history floor (same as `Db::history_floor`).
    pub history_floor: u64,
}
