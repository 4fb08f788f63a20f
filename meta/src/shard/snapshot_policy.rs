//! [`SnapshotPolicy`]: the lease and history-retention configuration the snapshot operations and
//! a writer handle's maintenance use (docs/metadata-format.md, "Snapshot Lifecycle And History
//! Holds"). A leaf of `shard/`; `history_floor.rs` re-exports it.

/// Default maximum clock-skew grace: 5 minutes, in milliseconds.
pub const DEFAULT_SKEW_GRACE_MS: u64 = 5 * 60 * 1000;
/// Default diagnostic history retention: the floor stays this many versions below the tip.
pub const DEFAULT_HISTORY_RETENTION_VERSIONS: u64 = 1024;

/// Lease and retention configuration of the snapshot operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotPolicy {
    /// Maximum clock-skew grace the reaper waits past a deadline, ms (default 5 minutes).
    pub skew_grace_ms: u64,
    /// The configured diagnostic floor: the history floor never rises above
    /// `version - history_retention_versions` (default 1024; 0 keeps only what holds need).
    pub history_retention_versions: u64,
}

impl Default for SnapshotPolicy {
    fn default() -> Self {
        SnapshotPolicy {
            skew_grace_ms: DEFAULT_SKEW_GRACE_MS,
            history_retention_versions: DEFAULT_HISTORY_RETENTION_VERSIONS,
        }
    }
}
