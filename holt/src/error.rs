//! Typed errors returned by every fallible holt operation.

use std::path::PathBuf;

/// Every error holt returns. No operation panics on caller input or on bytes read from disk;
/// problems surface as one of these variants.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system I/O call failed. `op` names the call (`"open"`, `"pwrite"`,
    /// `"fdatasync"`, `"rename"`, ...), `path` the file or directory it was applied to.
    #[error("I/O error during {op} on {}: {source}", path.display())]
    Io {
        /// The failing operation.
        op: &'static str,
        /// The file or directory the operation touched.
        path: PathBuf,
        /// The underlying OS error.
        #[source]
        source: std::io::Error,
    },
    /// A WAL segment, checkpoint or directory does not have the expected shape: bad CRC, bad
    /// framing or encoding, an LSN gap, a missing segment, or a directory that is not a holt
    /// store. `offset` is the byte offset inside `file` where the problem was found.
    #[error("corrupt store: {} at byte {offset}: {reason}", file.display())]
    Corrupt {
        /// The damaged file (or directory).
        file: PathBuf,
        /// Byte offset of the damaged record or block inside `file`.
        offset: u64,
        /// Human-readable description of what was wrong.
        reason: String,
    },
    /// A batch predicate (`Batch::expect`) did not hold against the latest committed state;
    /// nothing in the batch was applied.
    #[error("predicate failed on tree {tree} key {key:?}: expected {expected}")]
    PredicateFailed {
        /// Name of the tree the predicate was on.
        tree: String,
        /// The key the predicate was on.
        key: Vec<u8>,
        /// What the predicate expected (`"absent"`, `"present"`, `"equals <n> bytes"`).
        expected: String,
    },
    /// `Batch::expect_version` did not match the database's last committed version; nothing in
    /// the batch was applied.
    #[error("version mismatch: batch expected version {expected}, database is at {actual}")]
    VersionMismatch {
        /// The version the batch required.
        expected: u64,
        /// The database's last committed version when the batch was checked.
        actual: u64,
    },
    /// `Db::view_at` was asked for a version below the MVCC history floor.
    #[error("history pruned: version {requested} is below the history floor {floor}")]
    HistoryPruned {
        /// The requested read version.
        requested: u64,
        /// The current history floor.
        floor: u64,
    },
    /// `Db::create_tree` with a name that is already registered (including the reserved
    /// `history` tree).
    #[error("tree {name:?} already exists")]
    TreeExists {
        /// The duplicate name.
        name: String,
    },
    /// `Db::create_tree` with a tag that is already registered (including the reserved tag 0x00).
    #[error("tree tag {tag:#04x} already in use")]
    TagInUse {
        /// The duplicate tag.
        tag: u8,
    },
    /// A `Tree` handle that does not belong to this database (it came from another `Db`).
    #[error("tree {name:?} does not belong to this database")]
    UnknownTree {
        /// Name carried by the foreign handle.
        name: String,
    },
    /// A caller-supplied argument is out of range (oversized key or value, empty batch, bad tree
    /// name, a version above the current one, a write to the engine-owned `history` tree, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Another `Db` (in this or another process) holds the exclusive lock on `path`.
    #[error("database is locked: {}", path.display())]
    Locked {
        /// The `LOCK` file.
        path: PathBuf,
    },
    /// The requested feature is not available in this build (for now: `WalIo::IoUring`).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Every `Db` clone has been dropped; a `Tree` handle outlived its database.
    #[error("database is closed")]
    Closed,
    /// The database was opened with [`crate::Db::open_read_only`]: it serves reads of the state
    /// as of its open and refuses every write. `op` names the refused call (`"commit"`,
    /// `"create_tree"`, `"set_history_floor"`, `"checkpoint"`, `"flush"`). Nothing was written.
    #[error("database is open read-only: {op} refused")]
    ReadOnly {
        /// The refused call.
        op: &'static str,
    },
    /// An earlier WAL write or fdatasync failed. The in-memory state can no longer be trusted to
    /// match the log, so every later write is refused; reopen the database to recover.
    #[error("database poisoned by an earlier WAL failure: {reason}")]
    Poisoned {
        /// Description of the original failure.
        reason: String,
    },
}

/// `std::result::Result` specialised to holt's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corrupt(
        file: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corrupt {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }
}
