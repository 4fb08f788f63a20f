//! GC's shared vocabulary: digest domain, bounds, the object-remover contract and the report types.

use crate::codec::{GcOperation, GcPhase, HoldId, OperationResult};
use crate::ids::{ArtifactRevisionId, OperationId, RootId, SnapshotId};
use crate::ops::publish::operation::DeleteOutcome;
use sha2::{Digest, Sha256};

/// Domain separator of [`operation_id`].
pub const OPERATION_DOMAIN: &[u8] = b"nokv.gc.operation.v1\0";
/// Own objects deleted between two progress commands.
pub const DELETE_BATCH: usize = 64;
/// Most rounds of one pass (a round collects what is eligible; the next one sees candidates the
/// previous round created by releasing dependency sets). A sealed dependency graph is at most
/// eight revisions deep, so a chain unravels in at most nine collecting rounds, each followed by
/// at most one barrier round: 32 leaves room.
pub const MAX_ROUNDS: usize = 32;
/// Stale candidates pruned by one command.
pub const PRUNE_BATCH: usize = 128;

/// The Gc operation id of the candidate `(revision, reference_epoch)`:
/// `first_16(sha256("nokv.gc.operation.v1\0" | root_id | revision_id | u64be epoch))`.
pub fn operation_id(
    root: &RootId,
    revision: &ArtifactRevisionId,
    reference_epoch: u64,
) -> OperationId {
    let mut h = Sha256::new();
    h.update(OPERATION_DOMAIN);
    h.update(root.as_bytes());
    h.update(revision.as_bytes());
    h.update(reference_epoch.to_be_bytes());
    let d: [u8; 32] = h.finalize().into();
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    OperationId(id)
}

/// One object a revision physically owns (an ArtifactManifest row with
/// `physical_owner_revision == revision`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedObject {
    /// The owning revision.
    pub revision: ArtifactRevisionId,
    /// The owner's local physical object index.
    pub physical_object_index: u64,
    /// The provider object key recorded in the manifest.
    pub key: String,
    /// Object length in bytes.
    pub length: u64,
}

/// What a HEAD of one object found (reconciliation of a quarantined revision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The object is confirmed absent.
    Absent,
    /// The object still exists.
    Present,
    /// The provider could not answer; the revision stays Quarantined.
    Failed(String),
}

/// The provider side of a pass: the caller issues exactly the DELETE / HEAD of the object it is
/// handed (nokv implements it over `objstore`, with the same ambiguous-result rules as the
/// publish ledger's cleanup).
pub trait ObjectRemover {
    /// Deletes `object`: [`DeleteOutcome::Deleted`] once it is confirmed absent,
    /// [`DeleteOutcome::Quarantined`] for an ambiguous answer (sent, outcome unknown),
    /// [`DeleteOutcome::Failed`] for a definite failure (retried by a later pass).
    fn delete(&mut self, object: &OwnedObject) -> DeleteOutcome;
    /// HEADs `object`.
    fn probe(&mut self, object: &OwnedObject) -> ProbeOutcome;
}

/// Options of one pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcOptions {
    /// Report what would be collected; write nothing (no claim, no barrier, no floor change, no
    /// pruning) and issue no provider call.
    pub dry_run: bool,
    /// Process at most this many revisions (claimed, resumed or reconciled) in this pass.
    pub max_revisions: Option<usize>,
}

/// A phase boundary of the pass, reported to the observer right after its command committed
/// (crash tests stop the process there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// The GcBarrier generation advanced.
    Barrier,
    /// A candidate was claimed (Available -> Deleting, Gc Claimed).
    Claimed,
    /// Gc Claimed -> Deleting.
    Deleting,
    /// The first DELETE of a batch answered, before the batch's progress command.
    ObjectDeleted,
    /// A batch's progress command committed.
    Batch,
    /// A revision was quarantined.
    Quarantined,
    /// A quarantined revision went back to Deleting (objects still present).
    Reopened,
    /// A revision was published Deleted.
    Deleted,
}

impl Boundary {
    /// Stable name (`barrier`, `claimed`, `deleting`, `object-deleted`, `batch`, `quarantined`,
    /// `reopened`, `deleted`).
    pub fn as_str(self) -> &'static str {
        match self {
            Boundary::Barrier => "barrier",
            Boundary::Claimed => "claimed",
            Boundary::Deleting => "deleting",
            Boundary::ObjectDeleted => "object-deleted",
            Boundary::Batch => "batch",
            Boundary::Quarantined => "quarantined",
            Boundary::Reopened => "reopened",
            Boundary::Deleted => "deleted",
        }
    }
}

/// A revision collected (or, in a dry run, collectable) by a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectedRevision {
    /// The revision.
    pub revision: ArtifactRevisionId,
    /// Its body size in bytes.
    pub logical_size: u64,
    /// Own objects deleted (dry run: that would be deleted).
    pub objects: u64,
    /// Bytes of those objects.
    pub object_bytes: u64,
    /// Dependency owners whose RevisionDependency reference was released.
    pub released_dependencies: Vec<ArtifactRevisionId>,
    /// Commit version that published Deleted (`None` in a dry run).
    pub commit_version: Option<u64>,
    /// True when the revision was Quarantined before and a reconciliation proved its objects
    /// absent.
    pub reconciled: bool,
}

/// A revision a pass quarantined (or found still quarantined).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantinedRevision {
    /// The revision.
    pub revision: ArtifactRevisionId,
    /// Provider evidence.
    pub evidence: String,
}

/// A revision whose collection stopped on a definite provider failure; it stays Deleting and the
/// next pass resumes from its cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterruptedRevision {
    /// The revision.
    pub revision: ArtifactRevisionId,
    /// The failure.
    pub reason: String,
}

/// Who holds a HistoryHold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldHolder {
    /// A leased snapshot.
    Snapshot {
        /// Its workbench (`None` if the SnapshotRef row is gone).
        workbench_id: Option<String>,
        /// Numeric snapshot id.
        snapshot_id: SnapshotId,
        /// Its alias, if minted with one.
        alias: Option<String>,
    },
    /// A restore in progress.
    Restore {
        /// The restore operation.
        operation_id: OperationId,
        /// Its destination workbench (`None` if the operation row is unreadable).
        destination_workbench_id: Option<String>,
    },
    /// A commit build in progress.
    BuildCommit {
        /// The build operation.
        operation_id: OperationId,
        /// Its workbench (`None` if the operation row is unreadable).
        workbench_id: Option<String>,
    },
}

/// One HistoryHold with its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldInfo {
    /// The hold id.
    pub hold: HoldId,
    /// The read version it retains.
    pub read_version: u64,
    /// Who holds it.
    pub holder: HoldHolder,
}

/// Why a zero-reference revision is not collectable yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitReason {
    /// A HistoryHold at or below `last_zero_ref_version` keeps the floor there.
    HistoryHold(HoldInfo),
    /// The configured `history_retention_versions` keeps the floor at `tip - retention`, which
    /// is not yet above `last_zero_ref_version`.
    RetentionWindow {
        /// The setting in effect.
        retention_versions: u64,
        /// The current tip.
        tip: u64,
    },
    /// A non-terminal Publish operation names the revision (new revision or append base).
    InFlightPublish {
        /// The operation.
        operation_id: OperationId,
    },
}

/// A zero-reference revision waiting for the history floor or an in-flight publication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingRevision {
    /// The revision.
    pub revision: ArtifactRevisionId,
    /// Commit version at which its last reference went.
    pub last_zero_ref_version: u64,
    /// What keeps it.
    pub reasons: Vec<WaitReason>,
}

/// What one pass did (see [`run_pass`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// True for a dry run (nothing was written or deleted).
    pub dry_run: bool,
    /// Commit version at the end of the pass.
    pub tip: u64,
    /// The MVCC history floor at the end of the pass (dry run: the floor a pass would set).
    pub history_floor: u64,
    /// `history_retention_versions` in effect.
    pub history_retention_versions: u64,
    /// GcBarrier generation this pass advanced to, if it advanced it.
    pub barrier_generation: Option<u64>,
    /// Revisions published Deleted by this pass (dry run: collectable at this pass).
    pub collected: Vec<CollectedRevision>,
    /// Revisions quarantined by this pass or still quarantined after its reconciliation.
    pub quarantined: Vec<QuarantinedRevision>,
    /// Revisions left Deleting after a definite provider failure.
    pub interrupted: Vec<InterruptedRevision>,
    /// Zero-reference revisions still waiting, with what holds each.
    pub waiting: Vec<WaitingRevision>,
    /// Stale candidate rows pruned (dry run: that would be pruned).
    pub stale_candidates_pruned: u64,
    /// True when `max_revisions` stopped the pass before every eligible revision was processed.
    pub budget_exhausted: bool,
    /// Expired workbenches whose expiry this pass recorded or whose paths it removed, with the
    /// revisions it released (docs/metadata-format.md, "Workbench Expiry"); a revision collected
    /// by the same pass went because of that expiry.
    pub expired_workbenches: Vec<crate::ops::expiry::ExpiredWorkbench>,
}

impl GcReport {
    /// Objects deleted by the pass.
    pub fn objects_deleted(&self) -> u64 {
        self.collected.iter().map(|c| c.objects).sum()
    }

    /// Bytes of the objects deleted by the pass.
    pub fn bytes_deleted(&self) -> u64 {
        self.collected.iter().map(|c| c.object_bytes).sum()
    }
}

// ---------------------------------------------------------------------------------------------
// Rows

/// Debug-checks one Gc operation step and returns `to` (docs/metadata-format.md, "Garbage
/// Collection State Machine"): the phase moves only along Claimed -> Deleting -> Deleted, with
/// Deleting -> Quarantined and a reconciled Quarantined -> Deleting | Deleted; a Deleted
/// operation is never rewritten; the revision and reference epoch never change; the deleted
/// count never decreases; the object cursor moves back only when a quarantined revision is
/// reopened; Deleted carries its result.
pub(super) fn checked_gc(from: &GcOperation, to: GcOperation) -> GcOperation {
    use GcPhase::{Claimed, Deleted, Deleting, Quarantined};
    debug_assert!(
        matches!(
            (from.phase, to.phase),
            (Claimed, Deleting)
                | (Deleting, Deleting | Quarantined | Deleted)
                | (Quarantined, Deleting | Deleted)
        ),
        "Gc {:?} -> {:?} is not a documented transition",
        from.phase,
        to.phase
    );
    debug_assert!(
        from.artifact_revision_id == to.artifact_revision_id
            && from.reference_epoch == to.reference_epoch,
        "a Gc step changed its revision or reference epoch"
    );
    debug_assert!(
        to.deleted_object_count >= from.deleted_object_count,
        "a Gc step decreased its deleted-object count"
    );
    debug_assert!(
        to.next_object_index >= from.next_object_index || from.phase == Quarantined,
        "a Gc step moved its object cursor back outside reconciliation"
    );
    debug_assert!(
        to.phase != Deleted || matches!(to.result, OperationResult::Succeeded(_)),
        "Gc reached Deleted without its result"
    );
    to
}
