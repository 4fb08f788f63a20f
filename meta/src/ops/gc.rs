//! Garbage collection of artifact revisions (docs/metadata-format.md, "Garbage Collection State Machine",
//! "Artifact Revisions And Strong References"; docs/design.md, "Safe Object Lifetime").
//!
//! # What may be collected
//!
//! A revision is collected only through a `GcCandidate(root, revision, reference_epoch)` row,
//! written by the command that released its last strong reference. A pass scans those rows —
//! O(candidates), never the whole store and never an object listing — and claims a candidate
//! only when, at one fresh snapshot:
//!
//! 1. `strong_reference_count == 0`;
//! 2. the candidate's key epoch equals the revision's current `reference_epoch` (a later
//!    reference addition bumped the epoch and made the candidate stale: it is pruned);
//! 3. the holt MVCC history floor is newer than `last_zero_ref_version`, so no read view, leased
//!    snapshot, restore or commit build can still reach a state where the revision was
//!    referenced (every HistoryHold keeps the floor at or below its read version; the
//!    configured `history_retention_versions` keeps it that many versions behind the tip —
//!    see [`crate::ops::settings`]);
//! 4. no non-terminal Publish operation names the revision (as its new revision or its append
//!    base), found through the pending-operation registry;
//! 5. the caller is the fenced owner: every step is a [`crate::command::MetadataCommand`]
//!    checked against the RootFence and the owner epoch at the commit boundary.
//!
//! # The state machine
//!
//! One `Operation(Gc, operation_id)` per claimed candidate, `operation_id =
//! first_16(sha256("nokv.gc.operation.v1\0" | root_id | revision_id | u64 reference_epoch))`
//! ([`operation_id`]). Every step is one command that predicates the exact Operation,
//! ArtifactRevision and GcCandidate bytes it read, so concurrent collectors (or a collector and a
//! reference addition) have exactly one winner per step:
//!
//! ```text
//! claim      Available -> Deleting            ArtifactRevision (epoch and zero count predicated),
//!                                             GcCandidate Candidate -> Claimed,
//!                                             Operation(Gc) created in Claimed        [claimed]
//! start      Gc Claimed -> Deleting           before the first provider DELETE         [deleting]
//! batches    DELETE each own object (manifest rows physically owned by the revision), in
//!            object-index order, ≤ DELETE_BATCH per command; the command records the cursor
//!            (next_object_index) and deleted_object_count                           [batch]
//! deleted    Deleting -> Deleted              all own objects confirmed absent: one command
//!                                             publishes Deleted (revision and operation, with
//!                                             the commit version as result), releases the sealed
//!                                             dependency set (RevisionDependency refs deleted,
//!                                             owners' count −1 / epoch +1, GcCandidate at zero),
//!                                             prunes the manifest rows and the candidate [deleted]
//! quarantine Deleting -> Quarantined          a DELETE with an ambiguous provider answer: the
//!                                             revision, operation and candidate become
//!                                             Quarantined with the evidence        [quarantined]
//! reconcile  Quarantined -> Deleted           a later pass HEADs every own object: all absent
//!            Quarantined -> Deleting          -> Deleted (as above); some present -> explicit
//!                                             transition back to Deleting from the first present
//!                                             object, which is deleted again        [reopened]
//! ```
//!
//! A child's own objects are deleted first; only the final command releases its dependency set,
//! so a base can never be deleted while a child that reuses its blocks is readable. The object
//! keys come from the ArtifactManifest rows (`physical_owner_revision == revision`), never from a
//! listing. A crash between any two commands leaves a state the next pass resumes: DELETE is
//! idempotent, and the cursor only moves past objects whose DELETE answered.
//!
//! `GcPhase::Queued` is never written: the claim and the operation row are one atomic command, so
//! a queued-but-unclaimed state is never observable (the candidate row plays that role).
//!
//! # The quiescent floor and the GcBarrier
//!
//! The floor is raised to at most the tip. When the last commit of a quiescent store is the one
//! that zeroed a revision, no floor can pass it; the pass then advances
//! `GcBarrier(root).generation` by one command (its commit version is the new tip) and raises the
//! floor again ([`advance_barrier`]). Rounds repeat, bounded by [`MAX_ROUNDS`], while a round
//! collected something (a collected child can zero its base).
//!
//! # Audit retention
//!
//! After Deleted, the ArtifactManifest rows and the GcCandidate row are pruned in the same
//! command. The ArtifactRevision row (state Deleted, with its digests, size and counts) and the
//! Gc operation row (phase Deleted, objects deleted, the commit version) are kept as the audit
//! record: revision ids are never reused, and `nokv gc --explain` can still say what happened to
//! a revision id. Stale candidates (epoch superseded, revision missing or already Deleted) are
//! pruned by the pass that finds them.
//!
//! # Cost
//!
//! A pass reads the GcCandidate rows, the pending-operation registry, and per processed revision
//! its manifest rows; HistoryHold and SnapshotRef rows are read only to name what a waiting
//! candidate is held by. Provider calls are one DELETE per own object (plus one HEAD per own
//! object when reconciling a quarantined revision).

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::codec::{
    artifact_manifest, artifact_revision, gc_candidate, revision_ref, ArtifactRevision,
    CommandResult, GcBarrier, GcBarrierKey, GcCandidate, GcCandidateKey, GcClaimState, GcOperation,
    GcPhase, HistoryHold, HistoryHoldKey, HoldId, ManifestRow, Operation, OperationKey,
    OperationKind, OperationResult, RefOwner, RevisionState, SnapshotRef, SnapshotRefKey,
};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, OperationId, RequestId, RootId, SnapshotId};
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, ShardSnapshot, Snapshot, TxnStore};

use super::snapshot::SnapshotPolicy;
use super::{run_step, Step};

pub mod explain;

pub use super::publish_operation::DeleteOutcome;

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

fn op_key(root: &RootId, id: &OperationId) -> Vec<u8> {
    OperationKey {
        root: *root,
        kind: OperationKind::Gc,
        operation_id: *id,
    }
    .encode()
}

fn read_revision<S: Snapshot>(
    snap: &S,
    root: &RootId,
    rev: &ArtifactRevisionId,
) -> Result<Option<(Vec<u8>, ArtifactRevision)>> {
    match snap.get(Family::ArtifactRevision, &artifact_revision::key(root, rev))? {
        None => Ok(None),
        Some(b) => {
            let r = ArtifactRevision::decode(&b)?;
            Ok(Some((b, r)))
        }
    }
}

fn read_candidate<S: Snapshot>(
    snap: &S,
    key: &GcCandidateKey,
) -> Result<Option<(Vec<u8>, GcCandidate)>> {
    match snap.get(Family::GcCandidate, &key.encode())? {
        None => Ok(None),
        Some(b) => {
            let c = GcCandidate::decode(&b)?;
            Ok(Some((b, c)))
        }
    }
}

/// The Gc operation row `id`, if any: `(bytes, record)`.
///
/// Errors: [`Error::Codec`] (also for a non-Gc value under a Gc key); storage errors.
pub fn read_operation<S: Snapshot>(
    snap: &S,
    root: &RootId,
    id: &OperationId,
) -> Result<Option<(Vec<u8>, GcOperation)>> {
    match snap.get(Family::Operation, &op_key(root, id))? {
        None => Ok(None),
        Some(b) => match Operation::decode_for_kind(OperationKind::Gc, &b)? {
            Operation::Gc(g) => Ok(Some((b, g))),
            _ => Err(Error::codec("operation", "non-Gc value under a Gc key")),
        },
    }
}

/// Every GcCandidate row of the root in key order.
fn candidates(snap: &ShardSnapshot, root: &RootId) -> Result<Vec<(GcCandidateKey, Vec<u8>)>> {
    let mut out = Vec::new();
    snap.for_each_row(
        Family::GcCandidate,
        root.as_bytes(),
        "gc_candidate",
        |k, v| {
            out.push((GcCandidateKey::decode(k)?, v.to_vec()));
            Ok(())
        },
    )?;
    Ok(out)
}

/// Manifest rows of `rev` with object index `>= from`, in index order, stopping after `limit`
/// rows physically owned by `rev` (`limit = usize::MAX`: every row).
fn manifest_rows<S: Snapshot>(
    snap: &S,
    root: &RootId,
    rev: &ArtifactRevisionId,
    from: u64,
    own_limit: usize,
) -> Result<Vec<ManifestRow>> {
    let prefix = artifact_manifest::prefix(root, rev);
    let mut marker = from
        .checked_sub(1)
        .map(|prev| artifact_manifest::key(root, rev, prev));
    let mut out = Vec::new();
    let mut own = 0usize;
    loop {
        let spec = ScanSpec {
            prefix: prefix.clone(),
            start_after: marker.take(),
            delimiter: None,
            limit: crate::store::MAX_SCAN_ITEMS,
        };
        let batch = snap.scan(Family::ArtifactManifest, &spec)?;
        let exhausted = batch.len() < spec.limit;
        for item in batch {
            let ScanItem::Row { key, value } = item else {
                return Err(Error::codec("artifact_manifest", "unexpected rollup"));
            };
            let idx = artifact_manifest::decode_key_index(&key)?;
            let row = ManifestRow::decode_value(idx, &value)?;
            marker = Some(key);
            if row.physical_owner_revision == *rev {
                own += 1;
            }
            out.push(row);
            if own >= own_limit {
                return Ok(out);
            }
        }
        if exhausted {
            return Ok(out);
        }
    }
}

fn owned(rev: &ArtifactRevisionId, rows: &[ManifestRow]) -> Vec<OwnedObject> {
    rows.iter()
        .filter(|r| r.physical_owner_revision == *rev)
        .map(|r| OwnedObject {
            revision: *rev,
            physical_object_index: r.physical_object_index,
            key: r.object_key.clone(),
            length: r.length,
        })
        .collect()
}

/// The own objects of `rev` at the current version: its ArtifactManifest rows physically owned
/// by it, in object-index order (what a collection deletes).
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn own_objects(shard: &MetaShard, rev: &ArtifactRevisionId) -> Result<Vec<OwnedObject>> {
    let snap = shard.inner.store.snapshot();
    let rows = manifest_rows(&snap, &shard.root_id(), rev, 0, usize::MAX)?;
    Ok(owned(rev, &rows))
}

fn step_digest(step: &[u8], id: &OperationId, before: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"nokv.gc.step.v1\0");
    h.update((step.len() as u64).to_be_bytes());
    h.update(step);
    h.update(id.as_bytes());
    h.update(Sha256::digest(before));
    h.finalize().into()
}

fn recorded(id: &OperationId, phase: GcPhase) -> CommandResult {
    CommandResult::OperationRecorded {
        kind: OperationKind::Gc,
        operation_id: *id,
        phase: phase.to_u8(),
    }
}

// ---------------------------------------------------------------------------------------------
// Floor, barrier, holds

/// The floor [`crate::ops::snapshot::maintain_history_floor`] would set now, without setting it.
fn prospective_floor(shard: &MetaShard, retention: u64) -> Result<u64> {
    let tip = shard.version()?;
    let mut target = tip.saturating_sub(retention);
    if let Some(min) = super::snapshot::min_hold_version(shard)? {
        target = target.min(min);
    }
    Ok(target.max(shard.store().history_floor()?))
}

/// Advances `GcBarrier(root).generation` by one in one command and returns the new generation.
/// Its commit version becomes the tip, so the history floor of a quiescent store can pass a
/// revision zeroed by the previous last commit.
///
/// Errors: [`Error::Fenced`]; codec and storage errors.
pub fn advance_barrier(shard: &MetaShard) -> Result<u64> {
    let root = shard.root_id();
    let key = GcBarrierKey { root }.encode();
    run_step(shard, |snap| {
        let current = snap.get(Family::GcBarrier, &key)?;
        let generation = match &current {
            None => 0,
            Some(b) => GcBarrier::decode(b)?.generation,
        }
        .checked_add(1)
        .ok_or_else(|| Error::invalid("GcBarrier generation exhausted"))?;
        let mut cmd = shard.command_header(
            RequestId::random()?,
            step_digest(b"barrier", &OperationId([0; 16]), &generation.to_be_bytes()),
            snap.version(),
            CommandResult::Applied { value: generation },
        );
        cmd.predicates.push(match current {
            None => Predicate::absent(Family::GcBarrier, key.clone()),
            Some(b) => Predicate::equals(Family::GcBarrier, key.clone(), b),
        });
        cmd.mutations.push(Mutation::put(
            Family::GcBarrier,
            key.clone(),
            GcBarrier { generation }.encode(),
        ));
        Ok(Step::Command(Box::new(cmd), generation))
    })
}

/// Every HistoryHold of the root with its holder named (snapshot workbench and alias, restore
/// destination, build workbench). Cost: the HistoryHold rows, the SnapshotRef rows when a
/// snapshot hold exists, and one Operation point read per restore/build hold.
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn holds(shard: &MetaShard) -> Result<Vec<HoldInfo>> {
    let snap = shard.inner.store.snapshot();
    holds_at(&snap, &shard.root_id())
}

pub(crate) fn holds_at(snap: &ShardSnapshot, root: &RootId) -> Result<Vec<HoldInfo>> {
    let mut raw = Vec::new();
    snap.for_each_row(
        Family::HistoryHold,
        root.as_bytes(),
        "history_hold",
        |k, v| {
            raw.push((HistoryHoldKey::decode(k)?.hold, HistoryHold::decode(v)?));
            Ok(())
        },
    )?;
    let mut snapshots: BTreeMap<u64, (Option<String>, Option<String>)> = BTreeMap::new();
    if raw.iter().any(|(h, _)| matches!(h, HoldId::Snapshot(_))) {
        snap.for_each_row(
            Family::SnapshotRef,
            root.as_bytes(),
            "snapshot_ref",
            |k, v| {
                let key = SnapshotRefKey::decode(k)?;
                let r = SnapshotRef::decode(v)?;
                let wb = workbench_of(snap, root, &key.incarnation)?;
                snapshots.insert(
                    key.snapshot_id.get(),
                    (wb, r.alias.map(|a| a.as_str().to_owned())),
                );
                Ok(())
            },
        )?;
    }
    let mut out = Vec::with_capacity(raw.len());
    for (hold, h) in raw {
        let holder = match hold {
            HoldId::Snapshot(id) => {
                let (workbench_id, alias) = snapshots.get(&id.get()).cloned().unwrap_or_default();
                HoldHolder::Snapshot {
                    workbench_id,
                    snapshot_id: id,
                    alias,
                }
            }
            HoldId::Restore(op) => {
                // Diagnostic naming only: an undecodable row names no workbench.
                let destination_workbench_id = super::restore::read_op(snap, root, &op)
                    .ok()
                    .flatten()
                    .map(|(_, r)| r.destination_workbench_id);
                HoldHolder::Restore {
                    operation_id: op,
                    destination_workbench_id,
                }
            }
            HoldId::BuildCommit(op) => {
                let workbench_id = super::commit::read_build(snap, root, &op)
                    .ok()
                    .flatten()
                    .map(|(_, o)| o.workbench_id);
                HoldHolder::BuildCommit {
                    operation_id: op,
                    workbench_id,
                }
            }
        };
        out.push(HoldInfo {
            hold,
            read_version: h.read_version,
            holder,
        });
    }
    Ok(out)
}

/// The stable workbench id of an incarnation (its WorkspaceIncarnationClaim), if claimed.
pub(crate) fn workbench_of<S: Snapshot>(
    snap: &S,
    root: &RootId,
    inc: &crate::ids::WorkspaceIncarnationId,
) -> Result<Option<String>> {
    Ok(snap
        .get(
            Family::WorkspaceIncarnationClaim,
            &crate::codec::workspace_incarnation_claim::key(root, inc),
        )?
        .map(|b| crate::codec::WorkspaceIncarnationClaim::decode(&b))
        .transpose()?
        .map(|c| c.workbench_id))
}

/// Revisions named by non-terminal Publish operations (new revision or append base) → the
/// operation, through the pending-operation registry (O(non-terminal operations)).
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn in_flight_publications(
    shard: &MetaShard,
) -> Result<BTreeMap<ArtifactRevisionId, OperationId>> {
    let mut out = BTreeMap::new();
    for listed in super::publish_operation::list_pending(shard)? {
        let op = &listed.operation;
        if super::publish_operation::is_terminal(op.phase) {
            continue;
        }
        out.insert(op.artifact_revision_id, listed.operation_id);
        if let Some(base) = &op.base {
            out.insert(base.revision, listed.operation_id);
        }
    }
    Ok(out)
}

/// The reasons a revision zeroed at `z` waits, given the floor, tip, retention and holds.
pub(crate) fn wait_reasons(
    z: u64,
    floor: u64,
    tip: u64,
    retention: u64,
    holds: &[HoldInfo],
    in_flight: Option<OperationId>,
) -> Vec<WaitReason> {
    let mut reasons = Vec::new();
    if let Some(operation_id) = in_flight {
        reasons.push(WaitReason::InFlightPublish { operation_id });
    }
    if floor <= z {
        for h in holds.iter().filter(|h| h.read_version <= z) {
            reasons.push(WaitReason::HistoryHold(h.clone()));
        }
        if tip.saturating_sub(retention) <= z {
            reasons.push(WaitReason::RetentionWindow {
                retention_versions: retention,
                tip,
            });
        }
    }
    reasons
}

// ---------------------------------------------------------------------------------------------
// The pass

/// How one candidate row stands at a snapshot.
enum Class {
    /// Prune the row (superseded epoch, revision missing or Deleted).
    Stale,
    /// Claimed, Deleting or Quarantined: resume.
    InProgress,
    /// Claimable now.
    Eligible,
    /// Zero references, but held: `(last_zero_ref_version, in-flight publish)`.
    Waiting(u64, Option<OperationId>),
    /// Inconsistent rows (left for fsck to name; never claimed).
    Skip,
}

fn classify<S: Snapshot>(
    snap: &S,
    key: &GcCandidateKey,
    cand: &GcCandidate,
    floor: u64,
    in_flight: &BTreeMap<ArtifactRevisionId, OperationId>,
) -> Result<Class> {
    let Some((_, row)) = read_revision(snap, &key.root, &key.revision)? else {
        return Ok(Class::Stale);
    };
    if row.state == RevisionState::Deleted || row.reference_epoch != key.reference_epoch {
        return Ok(Class::Stale);
    }
    match row.state {
        RevisionState::Deleting | RevisionState::Quarantined => return Ok(Class::InProgress),
        RevisionState::Deleted => return Ok(Class::Stale),
        RevisionState::Available => {}
    }
    if row.strong_reference_count != 0 || cand.claim_state != GcClaimState::Candidate {
        return Ok(Class::Skip);
    }
    let z = row
        .last_zero_ref_version
        .unwrap_or(cand.last_zero_ref_version);
    let flight = in_flight.get(&key.revision).copied();
    if floor > z && flight.is_none() {
        Ok(Class::Eligible)
    } else {
        Ok(Class::Waiting(z, flight))
    }
}

/// Runs one garbage-collection pass (see the module docs): raises the history floor (the durable
/// `history_retention_versions` wins over `policy`), prunes stale candidates, advances the
/// GcBarrier when a quiescent tip is all that holds a candidate, then claims, resumes and
/// reconciles revisions — at most `opts.max_revisions` — deleting their own objects through
/// `remover`. `observe` is called after each phase boundary's command (crash tests stop there).
///
/// Per-revision provider failures do not fail the pass: they are reported (quarantined,
/// interrupted) and the next pass resumes. A lost CAS (another collector or a reference
/// addition won) skips that revision.
///
/// Errors: [`Error::Fenced`] (not the current owner); [`Error::Codec`] for corrupt rows of a
/// revision being collected (its dependency set disagrees with its seal, a dependency reference
/// is missing); storage errors.
pub fn run_pass(
    shard: &MetaShard,
    policy: &SnapshotPolicy,
    opts: &GcOptions,
    remover: &mut dyn ObjectRemover,
    observe: &mut dyn FnMut(Boundary),
) -> Result<GcReport> {
    let root = shard.root_id();
    let retention =
        super::settings::history_retention_versions(shard, policy.history_retention_versions)?;
    let mut report = GcReport {
        dry_run: opts.dry_run,
        history_retention_versions: retention,
        ..GcReport::default()
    };
    let mut budget = opts.max_revisions.unwrap_or(usize::MAX);
    let mut barrier_this_round = false;
    for _round in 0..MAX_ROUNDS {
        if !opts.dry_run {
            // A pass writes: the owner epoch advances before its first check (lazy epoch).
            shard.prepare_write()?;
            let snap = shard.inner.store.snapshot();
            crate::command::executor::check_handle_fences(&snap, &shard.inner.fence)?;
        }
        let floor = if opts.dry_run {
            prospective_floor(shard, retention)?
        } else {
            super::snapshot::maintain_history_floor(shard, policy)?
        };
        let in_flight = in_flight_publications(shard)?;
        let snap = shard.inner.store.snapshot();
        let tip = snap.version();
        let mut stale = Vec::new();
        let mut work = Vec::new();
        let mut waiting = Vec::new();
        for (key, bytes) in candidates(&snap, &root)? {
            let cand = GcCandidate::decode(&bytes)?;
            match classify(&snap, &key, &cand, floor, &in_flight)? {
                Class::Stale => stale.push((key, bytes)),
                Class::InProgress | Class::Eligible => work.push(key),
                Class::Waiting(z, flight) => waiting.push((key, z, flight)),
                Class::Skip => {}
            }
        }
        drop(snap);
        report.tip = tip;
        report.history_floor = floor;
        report.stale_candidates_pruned += stale.len() as u64;
        if !opts.dry_run {
            prune(shard, &stale)?;
        }
        // Holders are named only when something waits.
        let hold_list = if waiting.is_empty() {
            Vec::new()
        } else {
            holds(shard)?
        };
        let min_hold = hold_list.iter().map(|h| h.read_version).min();
        report.waiting = waiting
            .iter()
            .map(|(key, z, flight)| WaitingRevision {
                revision: key.revision,
                last_zero_ref_version: *z,
                reasons: wait_reasons(*z, floor, tip, retention, &hold_list, *flight),
            })
            .collect();
        // A quiescent tip is all that keeps a candidate: one barrier command makes the tip pass
        // it.
        let tip_only = |z: u64, flight: &Option<_>| {
            flight.is_none() && tip.saturating_sub(retention) == z && min_hold.is_none_or(|h| h > z)
        };
        let any_tip_only = waiting.iter().any(|(_, z, flight)| tip_only(*z, flight));
        if any_tip_only && opts.dry_run {
            // The real pass commits that barrier (or its own commands move the tip) and then
            // collects these candidates: preview them as collected instead of waiting.
            let tip_held: Vec<_> = waiting
                .iter()
                .filter(|(_, z, flight)| tip_only(*z, flight))
                .map(|(key, _, _)| *key)
                .collect();
            report
                .waiting
                .retain(|w| !tip_held.iter().any(|k| k.revision == w.revision));
            work.extend(tip_held);
        }
        if work.is_empty() {
            if any_tip_only && !barrier_this_round && !opts.dry_run {
                report.barrier_generation = Some(advance_barrier(shard)?);
                observe(Boundary::Barrier);
                barrier_this_round = true;
                continue;
            }
            break;
        }
        barrier_this_round = false;
        let mut progressed = false;
        for key in work {
            if budget == 0 {
                report.budget_exhausted = true;
                break;
            }
            budget -= 1;
            if opts.dry_run {
                if let Some(c) = preview(shard, &key)? {
                    report.collected.push(c);
                }
                continue;
            }
            match drive(shard, &key, remover, observe)? {
                Driven::Collected(c) => {
                    progressed = true;
                    report.collected.push(c);
                }
                Driven::Quarantined(q) => report.quarantined.push(q),
                Driven::Interrupted(i) => report.interrupted.push(i),
                Driven::Skipped => {}
            }
        }
        if opts.dry_run || !progressed || report.budget_exhausted {
            break;
        }
    }
    // Report the final state of the floor and tip.
    if !opts.dry_run {
        report.tip = shard.version()?;
        report.history_floor = shard.store().history_floor()?;
        let done: BTreeSet<ArtifactRevisionId> =
            report.collected.iter().map(|c| c.revision).collect();
        report.waiting.retain(|w| !done.contains(&w.revision));
    }
    Ok(report)
}

/// Prunes stale candidate rows (each predicated unchanged) in commands of ≤ [`PRUNE_BATCH`].
fn prune(shard: &MetaShard, stale: &[(GcCandidateKey, Vec<u8>)]) -> Result<()> {
    for chunk in stale.chunks(PRUNE_BATCH) {
        run_step(shard, |snap| {
            let mut cmd = shard.command_header(
                RequestId::random()?,
                step_digest(
                    b"prune",
                    &OperationId([0; 16]),
                    &snap.version().to_be_bytes(),
                ),
                snap.version(),
                CommandResult::Applied {
                    value: chunk.len() as u64,
                },
            );
            for (key, bytes) in chunk {
                let k = key.encode();
                match snap.get(Family::GcCandidate, &k)? {
                    Some(now) if &now == bytes => {
                        cmd.predicates
                            .push(Predicate::equals(Family::GcCandidate, k.clone(), now));
                        cmd.mutations.push(Mutation::Delete {
                            family: Family::GcCandidate,
                            key: k,
                        });
                    }
                    _ => {}
                }
            }
            if cmd.mutations.is_empty() {
                return Ok(Step::Done(()));
            }
            Ok(Step::Command(Box::new(cmd), ()))
        })?;
    }
    Ok(())
}

/// What a dry run would collect for `key` (own objects at the current version).
fn preview(shard: &MetaShard, key: &GcCandidateKey) -> Result<Option<CollectedRevision>> {
    let snap = shard.inner.store.snapshot();
    let Some((_, row)) = read_revision(&snap, &key.root, &key.revision)? else {
        return Ok(None);
    };
    let rows = manifest_rows(&snap, &key.root, &key.revision, 0, usize::MAX)?;
    let own = owned(&key.revision, &rows);
    let deps: BTreeSet<ArtifactRevisionId> = rows
        .iter()
        .map(|r| r.physical_owner_revision)
        .filter(|o| *o != key.revision)
        .collect();
    Ok(Some(CollectedRevision {
        revision: key.revision,
        logical_size: row.logical_size,
        objects: own.len() as u64,
        object_bytes: own.iter().map(|o| o.length).sum(),
        released_dependencies: deps.into_iter().collect(),
        commit_version: None,
        reconciled: row.state == RevisionState::Quarantined,
    }))
}

/// Outcome of driving one candidate.
enum Driven {
    Collected(CollectedRevision),
    Quarantined(QuarantinedRevision),
    Interrupted(InterruptedRevision),
    /// Lost a CAS or no longer collectable.
    Skipped,
}

/// The rows one step acts on, read at one snapshot.
struct Rows {
    rev_bytes: Vec<u8>,
    rev: ArtifactRevision,
    cand_bytes: Vec<u8>,
    cand: GcCandidate,
    op: Option<(Vec<u8>, GcOperation)>,
}

fn read_rows<S: Snapshot>(
    snap: &S,
    key: &GcCandidateKey,
    id: &OperationId,
) -> Result<Option<Rows>> {
    let Some((rev_bytes, rev)) = read_revision(snap, &key.root, &key.revision)? else {
        return Ok(None);
    };
    let Some((cand_bytes, cand)) = read_candidate(snap, key)? else {
        return Ok(None);
    };
    let op = read_operation(snap, &key.root, id)?;
    Ok(Some(Rows {
        rev_bytes,
        rev,
        cand_bytes,
        cand,
        op,
    }))
}

/// Bound on the steps of one revision in one pass (each step is one command or one batch).
fn step_bound(block_count: u64) -> u64 {
    block_count / DELETE_BATCH as u64 + 16
}

/// Drives one candidate through the state machine until Deleted, Quarantined, interrupted or
/// skipped.
fn drive(
    shard: &MetaShard,
    key: &GcCandidateKey,
    remover: &mut dyn ObjectRemover,
    observe: &mut dyn FnMut(Boundary),
) -> Result<Driven> {
    let root = key.root;
    let id = operation_id(&root, &key.revision, key.reference_epoch);
    let mut reconciled = false;
    let mut objects_deleted = 0u64;
    let mut bytes_deleted = 0u64;
    let mut bound = u64::MAX;
    let mut steps = 0u64;
    loop {
        steps += 1;
        if steps > bound {
            return Ok(Driven::Interrupted(InterruptedRevision {
                revision: key.revision,
                reason: "the collection did not converge within its step bound".into(),
            }));
        }
        let snap = shard.inner.store.snapshot();
        let Some(rows) = read_rows(&snap, key, &id)? else {
            return Ok(Driven::Skipped);
        };
        if rows.rev.reference_epoch != key.reference_epoch {
            return Ok(Driven::Skipped);
        }
        bound = bound.min(step_bound(rows.rev.block_count));
        let phase = rows.op.as_ref().map(|(_, o)| o.phase);
        match (rows.rev.state, phase) {
            (RevisionState::Available, None) => {
                drop(snap);
                if !claim(shard, key, &id)? {
                    return Ok(Driven::Skipped);
                }
                observe(Boundary::Claimed);
            }
            (RevisionState::Deleting, Some(GcPhase::Claimed)) => {
                drop(snap);
                if !transition(shard, key, &id, Transition::StartDeleting)? {
                    return Ok(Driven::Skipped);
                }
                observe(Boundary::Deleting);
            }
            (RevisionState::Deleting, Some(GcPhase::Deleting)) => {
                let Some((_, op)) = rows.op else {
                    return Ok(Driven::Skipped);
                };
                let todo = manifest_rows(
                    &snap,
                    &root,
                    &key.revision,
                    op.next_object_index,
                    DELETE_BATCH,
                )?;
                drop(snap);
                let own: Vec<(u64, OwnedObject)> = todo
                    .iter()
                    .filter(|r| r.physical_owner_revision == key.revision)
                    .map(|r| {
                        (
                            r.object_index,
                            OwnedObject {
                                revision: key.revision,
                                physical_object_index: r.physical_object_index,
                                key: r.object_key.clone(),
                                length: r.length,
                            },
                        )
                    })
                    .collect();
                if own.is_empty() {
                    let Some(c) = finish(shard, key, &id)? else {
                        return Ok(Driven::Skipped);
                    };
                    observe(Boundary::Deleted);
                    return Ok(Driven::Collected(CollectedRevision {
                        objects: objects_deleted,
                        object_bytes: bytes_deleted,
                        reconciled,
                        ..c
                    }));
                }
                let mut done = 0u64;
                let mut next = op.next_object_index;
                let mut stop: Option<DeleteOutcome> = None;
                for (i, (index, obj)) in own.iter().enumerate() {
                    match remover.delete(obj) {
                        DeleteOutcome::Deleted => {
                            done += 1;
                            objects_deleted += 1;
                            bytes_deleted += obj.length;
                            next = index.saturating_add(1);
                            if i == 0 {
                                observe(Boundary::ObjectDeleted);
                            }
                        }
                        other => {
                            next = *index;
                            stop = Some(other);
                            break;
                        }
                    }
                }
                if stop.is_none() {
                    // Past the batch's last row (also skipping dependency rows after it).
                    next = todo
                        .last()
                        .map_or(next, |r| r.object_index.saturating_add(1));
                }
                match stop {
                    None => {
                        if !transition(shard, key, &id, Transition::Progress { next, done })? {
                            return Ok(Driven::Skipped);
                        }
                        observe(Boundary::Batch);
                    }
                    Some(DeleteOutcome::Quarantined(evidence)) => {
                        if done > 0
                            && !transition(shard, key, &id, Transition::Progress { next, done })?
                        {
                            return Ok(Driven::Skipped);
                        }
                        let evidence = format!(
                            "object {} ({}): {evidence}",
                            own.iter()
                                .find(|(ix, _)| *ix == next)
                                .map_or(0, |(_, o)| o.physical_object_index),
                            key.revision
                        );
                        if !transition(shard, key, &id, Transition::Quarantine(evidence.clone()))? {
                            return Ok(Driven::Skipped);
                        }
                        observe(Boundary::Quarantined);
                        return Ok(Driven::Quarantined(QuarantinedRevision {
                            revision: key.revision,
                            evidence,
                        }));
                    }
                    Some(DeleteOutcome::Failed(reason)) => {
                        if done > 0
                            && !transition(shard, key, &id, Transition::Progress { next, done })?
                        {
                            return Ok(Driven::Skipped);
                        }
                        return Ok(Driven::Interrupted(InterruptedRevision {
                            revision: key.revision,
                            reason,
                        }));
                    }
                    Some(DeleteOutcome::Deleted) => {}
                }
            }
            (RevisionState::Quarantined, Some(GcPhase::Quarantined)) => {
                let rows_all = manifest_rows(&snap, &root, &key.revision, 0, usize::MAX)?;
                drop(snap);
                let mut first_present = None;
                for r in rows_all
                    .iter()
                    .filter(|r| r.physical_owner_revision == key.revision)
                {
                    let obj = OwnedObject {
                        revision: key.revision,
                        physical_object_index: r.physical_object_index,
                        key: r.object_key.clone(),
                        length: r.length,
                    };
                    match remover.probe(&obj) {
                        ProbeOutcome::Absent => {}
                        ProbeOutcome::Present => {
                            first_present = Some(r.object_index);
                            break;
                        }
                        ProbeOutcome::Failed(why) => {
                            let evidence = rows
                                .op
                                .as_ref()
                                .and_then(|(_, o)| o.quarantine_evidence.clone())
                                .unwrap_or_default();
                            return Ok(Driven::Quarantined(QuarantinedRevision {
                                revision: key.revision,
                                evidence: format!("{evidence}; reconciliation HEAD failed: {why}"),
                            }));
                        }
                    }
                }
                reconciled = true;
                match first_present {
                    None => {
                        let Some(c) = finish(shard, key, &id)? else {
                            return Ok(Driven::Skipped);
                        };
                        observe(Boundary::Deleted);
                        return Ok(Driven::Collected(CollectedRevision {
                            objects: objects_deleted,
                            object_bytes: bytes_deleted,
                            reconciled,
                            ..c
                        }));
                    }
                    Some(index) => {
                        if !transition(shard, key, &id, Transition::Reopen(index))? {
                            return Ok(Driven::Skipped);
                        }
                        observe(Boundary::Reopened);
                    }
                }
            }
            (RevisionState::Deleted, _) => return Ok(Driven::Skipped),
            (state, phase) => {
                return Ok(Driven::Interrupted(InterruptedRevision {
                    revision: key.revision,
                    reason: format!(
                        "revision is {state:?} but its Gc operation is {}",
                        phase.map_or_else(|| "absent".to_owned(), |p| format!("{p:?}"))
                    ),
                }));
            }
        }
    }
}

/// The claim command (see the module docs). Returns false when the candidate is no longer
/// claimable at a fresh snapshot (a reference was added, another collector claimed it, the floor
/// or an in-flight publication holds it).
fn claim(shard: &MetaShard, key: &GcCandidateKey, id: &OperationId) -> Result<bool> {
    let root = key.root;
    let in_flight = in_flight_publications(shard)?;
    run_step(shard, |snap| {
        let Some(rows) = read_rows(snap, key, id)? else {
            return Ok(Step::Done(false));
        };
        let floor = shard.store().history_floor()?;
        let z = rows
            .rev
            .last_zero_ref_version
            .unwrap_or(rows.cand.last_zero_ref_version);
        if rows.rev.state != RevisionState::Available
            || rows.rev.reference_epoch != key.reference_epoch
            || rows.rev.strong_reference_count != 0
            || rows.cand.claim_state != GcClaimState::Candidate
            || rows.op.is_some()
            || floor <= z
            || in_flight.contains_key(&key.revision)
        {
            return Ok(Step::Done(false));
        }
        let okey = op_key(&root, id);
        let rkey = artifact_revision::key(&root, &key.revision);
        let ckey = key.encode();
        let mut rev = rows.rev.clone();
        rev.state = RevisionState::Deleting;
        let cand = GcCandidate {
            claim_state: GcClaimState::Claimed,
            ..rows.cand
        };
        let op = GcOperation {
            phase: GcPhase::Claimed,
            artifact_revision_id: key.revision,
            reference_epoch: key.reference_epoch,
            next_object_index: 0,
            deleted_object_count: 0,
            quarantine_evidence: None,
            result: OperationResult::Pending,
        };
        let mut cmd = shard.command_header(
            RequestId::random()?,
            step_digest(b"claim", id, &rows.rev_bytes),
            snap.version(),
            recorded(id, GcPhase::Claimed),
        );
        cmd.predicates = vec![
            Predicate::equals(Family::ArtifactRevision, rkey.clone(), rows.rev_bytes),
            Predicate::equals(Family::GcCandidate, ckey.clone(), rows.cand_bytes),
            Predicate::absent(Family::Operation, okey.clone()),
        ];
        cmd.mutations = vec![
            Mutation::put(Family::ArtifactRevision, rkey, rev.encode()),
            Mutation::put(Family::GcCandidate, ckey, cand.encode()),
            Mutation::put(Family::Operation, okey, Operation::Gc(op).encode()),
        ];
        Ok(Step::Command(Box::new(cmd), true))
    })
}

/// A single-row-set transition of a claimed revision.
enum Transition {
    /// Gc Claimed -> Deleting.
    StartDeleting,
    /// Cursor and count advance (phase Deleting).
    Progress { next: u64, done: u64 },
    /// Deleting -> Quarantined with evidence (revision, operation, candidate).
    Quarantine(String),
    /// Quarantined -> Deleting from this object index (revision, operation, candidate).
    Reopen(u64),
}

/// Runs one transition; `Ok(false)` when another collector moved the rows first (the caller
/// skips the revision).
fn transition(
    shard: &MetaShard,
    key: &GcCandidateKey,
    id: &OperationId,
    t: Transition,
) -> Result<bool> {
    let root = key.root;
    let okey = op_key(&root, id);
    let rkey = artifact_revision::key(&root, &key.revision);
    let ckey = key.encode();
    run_step(shard, |snap| {
        let Some(rows) = read_rows(snap, key, id)? else {
            return Ok(Step::Done(false));
        };
        let Some((op_bytes, op)) = rows.op else {
            return Ok(Step::Done(false));
        };
        let mut next_op = op.clone();
        let mut next_rev = rows.rev.clone();
        let mut next_cand = rows.cand;
        let (wanted_phase, wanted_state) = match &t {
            Transition::StartDeleting => {
                next_op.phase = GcPhase::Deleting;
                (GcPhase::Claimed, RevisionState::Deleting)
            }
            Transition::Progress { next, done } => {
                next_op.next_object_index = (*next).max(op.next_object_index);
                next_op.deleted_object_count = op.deleted_object_count.saturating_add(*done);
                (GcPhase::Deleting, RevisionState::Deleting)
            }
            Transition::Quarantine(evidence) => {
                next_op.phase = GcPhase::Quarantined;
                next_op.quarantine_evidence =
                    Some(append_evidence(op.quarantine_evidence.as_deref(), evidence));
                next_rev.state = RevisionState::Quarantined;
                next_cand.claim_state = GcClaimState::Quarantined;
                next_cand.retry_count = next_cand.retry_count.saturating_add(1);
                (GcPhase::Deleting, RevisionState::Deleting)
            }
            Transition::Reopen(index) => {
                next_op.phase = GcPhase::Deleting;
                next_op.next_object_index = *index;
                next_op.quarantine_evidence = Some(append_evidence(
                    op.quarantine_evidence.as_deref(),
                    "reconciliation found objects still present; deleting them again",
                ));
                next_rev.state = RevisionState::Deleting;
                next_cand.claim_state = GcClaimState::Claimed;
                (GcPhase::Quarantined, RevisionState::Quarantined)
            }
        };
        if op.phase != wanted_phase || rows.rev.state != wanted_state {
            return Ok(Step::Done(false));
        }
        let mut cmd = shard.command_header(
            RequestId::random()?,
            step_digest(b"transition", id, &op_bytes),
            snap.version(),
            recorded(id, next_op.phase),
        );
        cmd.predicates
            .push(Predicate::equals(Family::Operation, okey.clone(), op_bytes));
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            okey.clone(),
            Operation::Gc(next_op).encode(),
        ));
        if next_rev != rows.rev {
            cmd.predicates.push(Predicate::equals(
                Family::ArtifactRevision,
                rkey.clone(),
                rows.rev_bytes,
            ));
            cmd.mutations.push(Mutation::put(
                Family::ArtifactRevision,
                rkey.clone(),
                next_rev.encode(),
            ));
        }
        if next_cand != rows.cand {
            cmd.predicates.push(Predicate::equals(
                Family::GcCandidate,
                ckey.clone(),
                rows.cand_bytes,
            ));
            cmd.mutations.push(Mutation::put(
                Family::GcCandidate,
                ckey.clone(),
                next_cand.encode(),
            ));
        }
        Ok(Step::Command(Box::new(cmd), true))
    })
}

fn append_evidence(before: Option<&str>, more: &str) -> String {
    match before {
        None | Some("") => more.to_owned(),
        Some(b) => format!("{b}; {more}"),
    }
}

/// The final command: Deleted, dependency set released, manifest and candidate pruned.
fn finish(
    shard: &MetaShard,
    key: &GcCandidateKey,
    id: &OperationId,
) -> Result<Option<CollectedRevision>> {
    let root = key.root;
    let okey = op_key(&root, id);
    let rkey = artifact_revision::key(&root, &key.revision);
    let ckey = key.encode();
    run_step(shard, |snap| {
        let Some(rows) = read_rows(snap, key, id)? else {
            return Ok(Step::Done(None));
        };
        let Some((op_bytes, op)) = rows.op else {
            return Ok(Step::Done(None));
        };
        let ok = matches!(
            (rows.rev.state, op.phase),
            (RevisionState::Deleting, GcPhase::Deleting)
                | (RevisionState::Quarantined, GcPhase::Quarantined)
        );
        if !ok {
            return Ok(Step::Done(None));
        }
        let cv = snap
            .version()
            .checked_add(1)
            .ok_or_else(|| Error::invalid("commit version exhausted"))?;
        let manifest = manifest_rows(snap, &root, &key.revision, 0, usize::MAX)?;
        let owners: BTreeSet<ArtifactRevisionId> = manifest
            .iter()
            .map(|r| r.physical_owner_revision)
            .filter(|o| *o != key.revision)
            .collect();
        if owners.len() as u64 != u64::from(rows.rev.dependency_count)
            || super::publish::dependency_digest(&owners) != rows.rev.dependency_digest
        {
            return Err(Error::codec(
                "artifact_revision",
                format!(
                    "revision {}: the manifest's dependency owners do not match the sealed dependency count/digest; nothing released",
                    key.revision
                ),
            ));
        }
        let own = owned(&key.revision, &manifest);
        let mut next_rev = rows.rev.clone();
        next_rev.state = RevisionState::Deleted;
        let mut next_op = op.clone();
        next_op.phase = GcPhase::Deleted;
        next_op.result = OperationResult::Succeeded(cv);
        let mut cmd = shard.command_header(
            RequestId::random()?,
            step_digest(b"deleted", id, &op_bytes),
            snap.version(),
            recorded(id, GcPhase::Deleted),
        );
        cmd.predicates = vec![
            Predicate::equals(Family::Operation, okey.clone(), op_bytes),
            Predicate::equals(Family::ArtifactRevision, rkey.clone(), rows.rev_bytes),
            Predicate::equals(Family::GcCandidate, ckey.clone(), rows.cand_bytes),
        ];
        cmd.mutations = vec![
            Mutation::put(
                Family::Operation,
                okey.clone(),
                Operation::Gc(next_op).encode(),
            ),
            Mutation::put(Family::ArtifactRevision, rkey.clone(), next_rev.encode()),
            Mutation::Delete {
                family: Family::GcCandidate,
                key: ckey.clone(),
            },
        ];
        for owner in &owners {
            let dep_key = revision_ref::key(
                &root,
                &RefOwner::RevisionDependency {
                    child: key.revision,
                },
                owner,
            );
            if snap.get(Family::RevisionRef, &dep_key)?.is_none() {
                return Err(Error::codec(
                    "revision_ref",
                    format!(
                        "revision {}: the dependency reference to {owner} is missing; nothing released",
                        key.revision
                    ),
                ));
            }
            let Some((obytes, mut orow)) = read_revision(snap, &root, owner)? else {
                return Err(Error::codec(
                    "artifact_revision",
                    format!("dependency owner {owner} is missing"),
                ));
            };
            let okey_rev = artifact_revision::key(&root, owner);
            if let Some(candidate) =
                super::commit::adjust_revision(&root, owner, &mut orow, false, cv)?
            {
                cmd.mutations.push(candidate);
            }
            cmd.predicates.push(Predicate::equals(
                Family::ArtifactRevision,
                okey_rev.clone(),
                obytes,
            ));
            cmd.mutations.push(Mutation::put(
                Family::ArtifactRevision,
                okey_rev,
                orow.encode(),
            ));
            cmd.predicates.push(Predicate {
                family: Family::RevisionRef,
                key: dep_key.clone(),
                expect: crate::command::Expectation::Present,
            });
            cmd.mutations.push(Mutation::Delete {
                family: Family::RevisionRef,
                key: dep_key,
            });
        }
        for row in &manifest {
            cmd.mutations.push(Mutation::Delete {
                family: Family::ArtifactManifest,
                key: artifact_manifest::key(&root, &key.revision, row.object_index),
            });
        }
        let collected = CollectedRevision {
            revision: key.revision,
            logical_size: rows.rev.logical_size,
            objects: own.len() as u64,
            object_bytes: own.iter().map(|o| o.length).sum(),
            released_dependencies: owners.into_iter().collect(),
            commit_version: Some(cv),
            reconciled: false,
        };
        Ok(Step::Command(Box::new(cmd), Some(collected)))
    })
}

/// The GcCandidate key of `rev` at its current epoch, if the revision row exists.
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn candidate_key(
    shard: &MetaShard,
    rev: &ArtifactRevisionId,
) -> Result<Option<GcCandidateKey>> {
    let snap = shard.inner.store.snapshot();
    let root = shard.root_id();
    Ok(
        read_revision(&snap, &root, rev)?.map(|(_, r)| GcCandidateKey {
            root,
            revision: *rev,
            reference_epoch: r.reference_epoch,
        }),
    )
}

/// The candidate row key of `rev` at `epoch` (the GcCandidate family key).
pub fn candidate_row_key(root: &RootId, rev: &ArtifactRevisionId, epoch: u64) -> Vec<u8> {
    gc_candidate::key(root, rev, epoch)
}
