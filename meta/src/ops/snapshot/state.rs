//! The snapshot lifecycle's shared vocabulary: bounds, selectors, statuses, requests, receipts and resolved rows.

use crate::codec::{SnapshotAlias, SnapshotRef, SnapshotState};
use crate::command::{Mutation, Predicate};
use crate::ids::{AliasName, RequestId, SnapshotId, WorkspaceIncarnationId};
use crate::ops::lease_clock::LeaseReading;

/// Milliseconds in one day (the facade's `ttl_days` unit).
pub const DAY_MS: u64 = 86_400_000;
/// Longest lease one create/renew may grant: 90 days in ms (docs/workbench.md `ttl_days` 1–90).
pub const MAX_TTL_MS: u64 = 90 * DAY_MS;
/// Largest canonical annotation in bytes (docs/workbench.md: ≤4096 bytes).
pub const MAX_ANNOTATION_BYTES: usize = 4096;

/// Selects a snapshot within a workbench: the numeric id, or the alias (resolved to its latest
/// mint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotSelector {
    /// The numeric snapshot id.
    Id(SnapshotId),
    /// The alias (latest mint wins).
    Name(AliasName),
}

/// Derived snapshot status (docs/workbench.md `workbench_snapshot_list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotStatus {
    /// Active and its deadline is later than the lease clock.
    Alive,
    /// Active but its deadline passed; not yet claimed by the reaper (renew may revive it).
    Expired,
    /// Explicitly retired (terminal).
    Retired,
    /// Claimed by the reaper (`ReapClaimed` or `Reaped`; terminal).
    Reaped,
}

impl SnapshotStatus {
    /// The facade name: `alive`, `expired`, `retired` or `reaped`.
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotStatus::Alive => "alive",
            SnapshotStatus::Expired => "expired",
            SnapshotStatus::Retired => "retired",
            SnapshotStatus::Reaped => "reaped",
        }
    }

    /// The status of `record` on the lease clock of `lease`.
    pub fn of(record: &SnapshotRef, lease: &LeaseReading) -> SnapshotStatus {
        match record.state {
            SnapshotState::Active if lease.is_expired(record.lease_deadline_unix_ms) => {
                SnapshotStatus::Expired
            }
            SnapshotState::Active => SnapshotStatus::Alive,
            SnapshotState::Retired => SnapshotStatus::Retired,
            SnapshotState::ReapClaimed | SnapshotState::Reaped => SnapshotStatus::Reaped,
        }
    }
}

/// One snapshot as read at one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// The workbench.
    pub workbench_id: String,
    /// Its (visible) incarnation.
    pub incarnation: WorkspaceIncarnationId,
    /// Numeric snapshot id.
    pub snapshot_id: SnapshotId,
    /// The SnapshotRef value.
    pub record: SnapshotRef,
    /// Derived status on the lease clock of the reading.
    pub status: SnapshotStatus,
    /// Whether the record's alias currently resolves to this snapshot (`false` without alias or
    /// after a later mint of the same name).
    pub alias_current: bool,
    /// The alias row's generation when `alias_current`.
    pub alias_generation: Option<u64>,
}

/// Result of a create/renew/retire/consumer command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotReceipt {
    /// Numeric snapshot id.
    pub snapshot_id: SnapshotId,
    /// The SnapshotRef value after the command.
    pub record: SnapshotRef,
    /// Commit version of the command (the original one on replay; the read version for a
    /// no-op such as retiring an already retired snapshot).
    pub commit_version: u64,
    /// True when an earlier identical request's stored result was returned.
    pub idempotent_replay: bool,
    /// False when nothing was written (retire of an already retired snapshot).
    pub changed: bool,
}

/// A snapshot mint request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateSnapshotRequest {
    /// Replay identity.
    pub request_id: RequestId,
    /// Workbench to freeze (must be `Visible`).
    pub workbench_id: String,
    /// Optional alias; minting an existing name moves it to this snapshot.
    pub alias: Option<AliasName>,
    /// Lease length in ms (1 ..= [`MAX_TTL_MS`]).
    pub ttl_ms: u64,
    /// Canonical `{reason, metadata}` annotation bytes (≤ [`MAX_ANNOTATION_BYTES`]).
    pub annotation: Vec<u8>,
    /// Refuse ([`Error::SnapshotLifecycle`]) unless the workbench has a WorkbenchCommitHead (the
    /// facade's "only a committed workbench can be snapshotted").
    pub require_commit_head: bool,
}

/// A lease renewal request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenewSnapshotRequest {
    /// Replay identity.
    pub request_id: RequestId,
    /// Workbench.
    pub workbench_id: String,
    /// Which snapshot.
    pub selector: SnapshotSelector,
    /// New lease length from the lease clock now, ms (1 ..= [`MAX_TTL_MS`]).
    pub ttl_ms: u64,
}

/// A retirement request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetireSnapshotRequest {
    /// Replay identity.
    pub request_id: RequestId,
    /// Workbench.
    pub workbench_id: String,
    /// Which snapshot.
    pub selector: SnapshotSelector,
    /// Canonical `{metadata, reason}` retire annotation bytes (≤ [`MAX_ANNOTATION_BYTES`]),
    /// stored with the first retirement and never replaced (`None`: the retirement carries
    /// none).
    pub annotation: Option<Vec<u8>>,
}

/// What one reaper pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReapReport {
    /// Snapshots claimed (`Active -> ReapClaimed`, hold released) by this pass.
    pub claimed: Vec<(String, SnapshotId)>,
    /// Snapshots finalized `ReapClaimed -> Reaped` by this pass.
    pub finalized: u64,
    /// Expired snapshots skipped because restore/fork consumers hold them.
    pub skipped_with_consumers: u64,
    /// True when the wall clock was below the persisted high-water (nothing was claimed).
    pub clock_regressed: bool,
    /// The holt history floor after the pass.
    pub history_floor: u64,
}

/// Predicates and mutations a restore/fork command splices into its own command to attach or
/// release a snapshot consumer (docs/metadata-format.md: consumer count/epoch and HistoryHold(Restore) change
/// in the same command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerParts {
    /// Command predicates (exact SnapshotRef bytes, the hold row, the lease clock for attach).
    pub predicates: Vec<Predicate>,
    /// Command mutations (SnapshotRef count/epoch, HistoryHold(Restore, operation_id)).
    pub mutations: Vec<Mutation>,
    /// The snapshot's frozen read version (the source version a restore reads at).
    pub read_version: u64,
    /// The SnapshotRef after the command.
    pub record: SnapshotRef,
}

// ---------------------------------------------------------------------------------------------
// Resolution

/// An alias row: key, stored bytes, decoded value.
pub(super) type AliasRow = (Vec<u8>, Vec<u8>, SnapshotAlias);

pub(super) struct Resolved {
    pub(super) id: SnapshotId,
    pub(super) key: Vec<u8>,
    pub(super) bytes: Vec<u8>,
    pub(super) record: SnapshotRef,
    /// The alias row of the record's alias: (key, bytes, value).
    pub(super) alias: Option<AliasRow>,
    /// True when the selector was a name (its alias row is then always predicated).
    pub(super) by_name: bool,
}

/// Debug-checks one SnapshotRef rewrite and returns `to` (docs/metadata-format.md, "Snapshot
/// Lifecycle And History Holds"): the state moves only along Active -> Retired or Active ->
/// ReapClaimed -> Reaped (Active -> Active for renewals and consumers), a Retired or Reaped
/// snapshot is never rewritten, the read version never changes, a lease is only extended, the
/// consumer epoch never decreases, and the consumer count moves by at most one, bumping the epoch.
pub(super) fn checked_snapshot(from: &SnapshotRef, to: SnapshotRef) -> SnapshotRef {
    use SnapshotState::{Active, ReapClaimed, Reaped, Retired};
    debug_assert!(
        matches!(
            (from.state, to.state),
            (Active, Active | Retired | ReapClaimed) | (ReapClaimed, Reaped)
        ),
        "SnapshotRef {:?} -> {:?} is not a documented transition",
        from.state,
        to.state
    );
    debug_assert!(
        from.read_version == to.read_version,
        "a SnapshotRef rewrite changed its read version"
    );
    debug_assert!(
        to.lease_deadline_unix_ms >= from.lease_deadline_unix_ms,
        "a SnapshotRef lease was shortened"
    );
    debug_assert!(
        to.consumer_epoch >= from.consumer_epoch
            && to.consumer_count.abs_diff(from.consumer_count) <= 1
            && (to.consumer_count == from.consumer_count
                || to.consumer_epoch > from.consumer_epoch),
        "a SnapshotRef consumer change skipped a count or kept its epoch"
    );
    to
}
