//! fsck: recompute every derived count, seal and index from authoritative rows — reference
//! counts and seal digests from paths, commits, operations, holds, revisions and manifests, never
//! from an object listing (docs/metadata-format.md, "Garbage Collection State Machine";
//! docs/design.md, "Discovery And Provenance").
//!
//! [`check`] reads one consistent snapshot (plus the RecoveryOutbox chain through
//! [`MetaShard::verify_recovery_outbox`] and the snapshot/hold invariants of
//! [`crate::ops::snapshot::check_invariants`]) and reports each mismatch as a typed [`Finding`]:
//!
//! | check | from | finding kinds |
//! |-------|------|---------------|
//! | strong-reference count and epoch of every revision | RevisionRef rows | `ReferenceCountMismatch`, `ReferenceEpochBehind`, `DanglingReference`, `ReferenceToUnavailableRevision` |
//! | every PathCurrent row has its Path reference and vice versa | PathCurrent, RevisionRef | `PathReferenceMissing`, `PathReferenceOrphan` |
//! | commit references belong to a sealed/retiring commit or a build in progress | Commit, Operation(BuildCommit) | `CommitReferenceOrphan` |
//! | dependency references and each revision's sealed dependency count/digest, manifest row count and manifest digest | ArtifactManifest | `DependencyMismatch`, `DependencyReferenceOrphan`, `ManifestMismatch` |
//! | GC state: a zero-reference Available revision has its candidate; Deleting/Quarantined ones their Gc operation; Deleted ones no manifest | GcCandidate, Operation(Gc) | `GcCandidateMissing`, `GcCandidateOrphan`, `GcOperationMismatch`, `DeletedRevisionResidue` |
//! | commit seals (member/revision count and digest, parent digest, parent consumers) and consumer counts | CommitMember, RevisionRef, CommitConsumer | `CommitSealMismatch`, `CommitParentMismatch`, `CommitConsumerMismatch` |
//! | restore seals (RestoreMember count and chained digest; staged rows of unpublished restores) | RestoreMember, PathCurrent | `RestoreSealMismatch` |
//! | SecondaryIndex rows versus the rows PathCurrent projects | PathCurrent, SecondaryIndex | `IndexRowMissing`, `IndexRowStale`, `IndexRowMismatch` |
//! | a path that is both a file and a directory | PathCurrent | `FileDirectoryClash` |
//! | RecoveryOutbox hash chain | RecoveryOutbox, System | `RecoveryOutboxBroken` |
//! | snapshot, alias and hold invariants | SnapshotRef, SnapshotAlias, HistoryHold | `SnapshotInvariant` |
//! | any row that does not decode | every family read | `UnreadableRow` |
//! | every data block of the holt images against its CRC (reads check only the blocks they touch) | the metadata files | `DamagedMetadataBlock` |
//! | every block object an Available revision's manifest names is present (`nokv fsck`, from the provider listing: absence only, never namespace truth) | ArtifactRevision, ArtifactManifest, object listing | `ObjectMissing` |
//!
//! The block scrub runs first; when it finds damage the row checks are skipped (their reads
//! would fail on the damaged blocks) and the report holds the damaged blocks only.
//!
//! Cost: O(rows of the checked families) reads at one version; memory O(paths + references +
//! index rows). [`check`] involves no object listing; `nokv fsck` then lists the root's artifact
//! prefix once, reports the required keys of [`object_keys`] that are absent as
//! `ObjectMissing`, and the provider objects no row owns as information.
//!
//! [`repair_index`] rebuilds the derived SecondaryIndex rows from PathCurrent in bounded
//! commands: missing or differing rows are put and stale rows deleted, each command predicating
//! the PathCurrent rows it derived from (so a concurrent publication makes it re-plan).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::codec::{
    commit_consumer, path_current, revision_ref, ArtifactRevision, ArtifactRevisionKey,
    BuildCommitPhase, Commit, CommitConsumerKey, CommitKey, CommitState, ConsumerOwner,
    GcCandidate, GcCandidateKey, GcClaimState, GcPhase, ManifestRow, Operation, OperationKey,
    OperationKind, PathCurrentKey, PathEntry, PublishPhase, RefOwner, RestoreMember,
    RestoreMemberKey, RestorePhase, RevisionRef, RevisionRefKey, RevisionState, SecondaryIndexKey,
    StagedCleanupState, StagedObject, StagedObjectKey, WorkspaceIncarnationClaim,
    WorkspaceIncarnationClaimKey,
};
use crate::command::projection::{index_rows, MAX_INDEX_MUTATIONS};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, CommitId, RequestId, RootId, WorkspaceIncarnationId};
use crate::path::NormPath;
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, ShardSnapshot, Snapshot, TxnStore};

use super::{run_step, Step};

/// A typed fsck finding kind (see the module docs for what each checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FindingKind {
    /// `strong_reference_count` differs from the RevisionRef rows targeting the revision.
    ReferenceCountMismatch,
    /// `reference_epoch` is below the epoch recorded by one of its references.
    ReferenceEpochBehind,
    /// A RevisionRef targets a revision that does not exist.
    DanglingReference,
    /// A RevisionRef targets a revision that is Deleting, Quarantined or Deleted.
    ReferenceToUnavailableRevision,
    /// A PathCurrent row has no `RevisionRef(Path)` for its revision.
    PathReferenceMissing,
    /// A `RevisionRef(Path)` has no PathCurrent row naming its revision.
    PathReferenceOrphan,
    /// A `RevisionRef(Commit)` belongs to no sealed/retiring commit and no build in progress.
    CommitReferenceOrphan,
    /// A revision's manifest owners disagree with its sealed dependency count/digest or lack
    /// their `RevisionDependency` reference.
    DependencyMismatch,
    /// A `RevisionRef(RevisionDependency)` whose child does not reuse the target's blocks.
    DependencyReferenceOrphan,
    /// A revision's manifest rows disagree with its `block_count` or `manifest_digest_uri`.
    ManifestMismatch,
    /// A zero-reference Available revision has no GcCandidate at its current epoch.
    GcCandidateMissing,
    /// A GcCandidate names a revision that does not exist.
    GcCandidateOrphan,
    /// A Deleting/Quarantined revision disagrees with its Gc operation or candidate.
    GcOperationMismatch,
    /// A Deleted revision still has manifest rows or references.
    DeletedRevisionResidue,
    /// A commit's member/revision count or digest differs from its rows.
    CommitSealMismatch,
    /// A commit's parent digest or parent consumer rows disagree with its parents.
    CommitParentMismatch,
    /// A commit's `consumer_count` differs from its CommitConsumer rows.
    CommitConsumerMismatch,
    /// A restore's sealed member count/digest differs from its RestoreMember rows.
    RestoreSealMismatch,
    /// PathCurrent projects an index row that is absent.
    IndexRowMissing,
    /// A SecondaryIndex row no PathCurrent row projects.
    IndexRowStale,
    /// A SecondaryIndex row with a value other than the projected one.
    IndexRowMismatch,
    /// The RecoveryOutbox hash chain does not verify.
    RecoveryOutboxBroken,
    /// A path that is both a file (exact PathCurrent row) and a directory (descendant rows).
    FileDirectoryClash,
    /// A snapshot / alias / hold invariant does not hold.
    SnapshotInvariant,
    /// A data block (or CRC table page) of a holt image fails its CRC.
    DamagedMetadataBlock,
    /// A row does not decode.
    UnreadableRow,
    /// A block object an Available revision's manifest names is absent from the object store
    /// (found by `nokv fsck` from the provider listing; see [`ObjectKeys::required`]).
    ObjectMissing,
    /// A block object an Available revision owns differs from its recorded length or SHA-256
    /// (found only by `nokv fsck --verify-bytes`, which reads every such block; see
    /// [`RequiredObject::record`]).
    ObjectDamaged,
}

impl FindingKind {
    /// The stable name (the variant name, e.g. `ReferenceCountMismatch`).
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::ReferenceCountMismatch => "ReferenceCountMismatch",
            FindingKind::ReferenceEpochBehind => "ReferenceEpochBehind",
            FindingKind::DanglingReference => "DanglingReference",
            FindingKind::ReferenceToUnavailableRevision => "ReferenceToUnavailableRevision",
            FindingKind::PathReferenceMissing => "PathReferenceMissing",
            FindingKind::PathReferenceOrphan => "PathReferenceOrphan",
            FindingKind::CommitReferenceOrphan => "CommitReferenceOrphan",
            FindingKind::DependencyMismatch => "DependencyMismatch",
            FindingKind::DependencyReferenceOrphan => "DependencyReferenceOrphan",
            FindingKind::ManifestMismatch => "ManifestMismatch",
            FindingKind::GcCandidateMissing => "GcCandidateMissing",
            FindingKind::GcCandidateOrphan => "GcCandidateOrphan",
            FindingKind::GcOperationMismatch => "GcOperationMismatch",
            FindingKind::DeletedRevisionResidue => "DeletedRevisionResidue",
            FindingKind::CommitSealMismatch => "CommitSealMismatch",
            FindingKind::CommitParentMismatch => "CommitParentMismatch",
            FindingKind::CommitConsumerMismatch => "CommitConsumerMismatch",
            FindingKind::RestoreSealMismatch => "RestoreSealMismatch",
            FindingKind::IndexRowMissing => "IndexRowMissing",
            FindingKind::IndexRowStale => "IndexRowStale",
            FindingKind::IndexRowMismatch => "IndexRowMismatch",
            FindingKind::RecoveryOutboxBroken => "RecoveryOutboxBroken",
            FindingKind::FileDirectoryClash => "FileDirectoryClash",
            FindingKind::SnapshotInvariant => "SnapshotInvariant",
            FindingKind::DamagedMetadataBlock => "DamagedMetadataBlock",
            FindingKind::ObjectMissing => "ObjectMissing",
            FindingKind::ObjectDamaged => "ObjectDamaged",
            FindingKind::UnreadableRow => "UnreadableRow",
        }
    }

    /// True for the findings [`repair_index`] fixes.
    pub fn is_index(self) -> bool {
        matches!(
            self,
            FindingKind::IndexRowMissing
                | FindingKind::IndexRowStale
                | FindingKind::IndexRowMismatch
        )
    }
}

/// One mismatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What kind.
    pub kind: FindingKind,
    /// What it is about, e.g. `revision 0a1b…`, `path wb/outputs/x`, `commit 3c4d…`, `lsn 17`.
    pub subject: String,
    /// The precise mismatch (expected versus found).
    pub detail: String,
}

/// What was checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsckStats {
    /// ArtifactRevision rows.
    pub revisions: u64,
    /// RevisionRef rows.
    pub references: u64,
    /// PathCurrent rows.
    pub paths: u64,
    /// SecondaryIndex rows.
    pub index_rows: u64,
    /// Commit rows.
    pub commits: u64,
    /// Restore operations.
    pub restores: u64,
    /// GcCandidate rows.
    pub gc_candidates: u64,
    /// RecoveryOutbox records verified.
    pub outbox_records: u64,
    /// Read version of the snapshot checked.
    pub read_version: u64,
    /// Data blocks of holt images checked against their CRCs (0 for an etcd shard).
    pub metadata_blocks: u64,
}

/// The result of [`check`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsckReport {
    /// Every mismatch, in check order.
    pub findings: Vec<Finding>,
    /// What was checked.
    pub stats: FsckStats,
    /// The row checks were skipped because the block scrub found damaged metadata blocks
    /// (the row counts in `stats` are then 0).
    pub rows_skipped: bool,
}

impl FsckReport {
    /// True when nothing was found.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }
}

struct Checker<'a> {
    snap: &'a ShardSnapshot,
    root: RootId,
    findings: Vec<Finding>,
    stats: FsckStats,
}

impl Checker<'_> {
    fn find(&mut self, kind: FindingKind, subject: impl Into<String>, detail: impl Into<String>) {
        self.findings.push(Finding {
            kind,
            subject: subject.into(),
            detail: detail.into(),
        });
    }

    /// Every row of `family` under the root, undecodable keys/values reported as
    /// `UnreadableRow` by the caller's decoder.
    fn rows(&self, family: Family, what: &'static str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.snap.rows(family, self.root.as_bytes(), what)
    }

    fn unreadable(&mut self, family: &str, key: &[u8], e: &Error) {
        self.find(
            FindingKind::UnreadableRow,
            format!("{family} row {}", crate::ids::to_hex(key)),
            e.to_string(),
        );
    }
}

fn rev_subject(rev: &ArtifactRevisionId) -> String {
    format!("revision {rev}")
}

fn path_subject(workbench: Option<&str>, inc: &WorkspaceIncarnationId, path: &NormPath) -> String {
    match workbench {
        Some(w) => format!("path {w}/{path}"),
        None => format!("path {path} (incarnation {inc})"),
    }
}

/// Per-revision facts gathered from the manifest rows.
#[derive(Default)]
struct ManifestFacts {
    rows: Vec<ManifestRow>,
}

/// Checks the store (see the module docs). Never fails on corrupt rows: they become
/// `UnreadableRow` findings.
///
/// Errors: storage errors only (and [`Error::Codec`] for a corrupt System recovery tail, which
/// the open would already have refused).
pub fn check(shard: &MetaShard) -> Result<FsckReport> {
    let mut scrubbed = FsckReport::default();
    if let Some(db) = shard.inner.store.holt_db() {
        let report = db.scrub();
        scrubbed.stats.metadata_blocks = report.blocks;
        scrubbed
            .findings
            .extend(report.damaged.into_iter().map(|e| match e {
                holt::Error::Corrupt {
                    file,
                    offset,
                    reason,
                } => Finding {
                    kind: FindingKind::DamagedMetadataBlock,
                    subject: format!("{} at byte {offset}", file.display()),
                    detail: reason,
                },
                other => Finding {
                    kind: FindingKind::DamagedMetadataBlock,
                    subject: "metadata images".into(),
                    detail: other.to_string(),
                },
            }));
    }
    if !scrubbed.is_clean() {
        scrubbed.rows_skipped = true;
        return Ok(scrubbed);
    }
    let snap = shard.inner.store.snapshot();
    let root = shard.root_id();
    let mut c = Checker {
        snap: &snap,
        root,
        findings: Vec::new(),
        stats: FsckStats {
            read_version: snap.version(),
            ..scrubbed.stats
        },
    };

    // Workbench ids of incarnations.
    let mut workbench: HashMap<WorkspaceIncarnationId, String> = HashMap::new();
    for (k, v) in c.rows(
        Family::WorkspaceIncarnationClaim,
        "workspace_incarnation_claim",
    )? {
        match (
            WorkspaceIncarnationClaimKey::decode(&k),
            WorkspaceIncarnationClaim::decode(&v),
        ) {
            (Ok(key), Ok(claim)) => {
                workbench.insert(key.incarnation, claim.workbench_id);
            }
            (Err(e), _) | (_, Err(e)) => c.unreadable("workspace_incarnation_claim", &k, &e),
        }
    }

    // PathCurrent: references expected, index rows expected, file/directory clashes.
    let mut paths: HashMap<(WorkspaceIncarnationId, NormPath), ArtifactRevisionId> = HashMap::new();
    let mut expected_index: BTreeMap<Vec<u8>, (Vec<u8>, String)> = BTreeMap::new();
    let mut previous_key: Option<Vec<u8>> = None;
    for (k, v) in c.rows(Family::PathCurrent, "path_current")? {
        let (key, entry) = match (PathCurrentKey::decode(&k), PathEntry::decode(&v)) {
            (Ok(key), Ok(entry)) => (key, entry),
            (Err(e), _) | (_, Err(e)) => {
                c.unreadable("path_current", &k, &e);
                continue;
            }
        };
        c.stats.paths += 1;
        let wb = workbench.get(&key.incarnation).cloned();
        let subject = path_subject(wb.as_deref(), &key.incarnation, &key.path);
        // Keys sort `a/…` (a | NUL …) immediately before the exact row `a` (a | 0x01): the row
        // just before an exact row is one of its descendants iff it starts with `a | NUL`.
        if let (Some(prev), Some(stem)) = (
            &previous_key,
            k.strip_suffix(&[crate::path::EXACT_TERMINATOR]),
        ) {
            let mut dir = stem.to_vec();
            dir.push(crate::path::COMPONENT_DELIMITER);
            if prev.starts_with(&dir) {
                c.find(
                    FindingKind::FileDirectoryClash,
                    subject.clone(),
                    "the path is a file and also has descendant files",
                );
            }
        }
        previous_key = Some(k.clone());
        let ref_key = revision_ref::key(
            &root,
            &RefOwner::Path {
                incarnation: key.incarnation,
                path: key.path.clone(),
            },
            &entry.artifact_revision_id,
        );
        if snap.get(Family::RevisionRef, &ref_key)?.is_none() {
            c.find(
                FindingKind::PathReferenceMissing,
                subject.clone(),
                format!(
                    "no RevisionRef(Path) for its revision {}",
                    entry.artifact_revision_id
                ),
            );
        }
        match &wb {
            Some(w) => match index_rows(&root, &key.incarnation, w, &key.path, &entry) {
                Ok(rows) => {
                    for (ik, iv) in rows {
                        expected_index.insert(ik, (iv, subject.clone()));
                    }
                }
                Err(e) => c.find(FindingKind::UnreadableRow, subject.clone(), e.to_string()),
            },
            None => c.find(
                FindingKind::UnreadableRow,
                subject.clone(),
                "the incarnation has no WorkspaceIncarnationClaim (its index rows cannot be derived)",
            ),
        }
        paths.insert((key.incarnation, key.path), entry.artifact_revision_id);
    }

    // Commits and builds in progress (for commit references).
    let mut commits: BTreeMap<CommitId, Commit> = BTreeMap::new();
    for (k, v) in c.rows(Family::Commit, "commit")? {
        match (CommitKey::decode(&k), Commit::decode(&v)) {
            (Ok(key), Ok(commit)) => {
                commits.insert(key.commit_id, commit);
            }
            (Err(e), _) | (_, Err(e)) => c.unreadable("commit", &k, &e),
        }
    }
    let mut building: BTreeSet<CommitId> = BTreeSet::new();
    let mut restores = Vec::new();
    let mut gc_ops: BTreeMap<crate::ids::OperationId, crate::codec::GcOperation> = BTreeMap::new();
    let mut live_staged_ops = BTreeSet::new();
    for (k, v) in c.rows(Family::Operation, "operation")? {
        let key = match OperationKey::decode(&k) {
            Ok(key) => key,
            Err(e) => {
                c.unreadable("operation", &k, &e);
                continue;
            }
        };
        match Operation::decode_for_kind(key.kind, &v) {
            Ok(Operation::BuildCommit(b)) => {
                if !matches!(
                    b.phase,
                    BuildCommitPhase::Complete | BuildCommitPhase::Cleaned
                ) {
                    building.insert(b.commit_id);
                }
            }
            Ok(Operation::Restore(r)) => restores.push((key.operation_id, *r)),
            Ok(Operation::Gc(g)) => {
                gc_ops.insert(key.operation_id, g);
            }
            Ok(Operation::Publish(p)) => {
                if p.phase != PublishPhase::Published {
                    live_staged_ops.insert(key.operation_id);
                }
            }
            Ok(Operation::CommitRetire(_)) => {}
            Err(e) => c.unreadable("operation", &k, &e),
        }
    }

    // RevisionRef rows.
    let mut ref_counts: HashMap<ArtifactRevisionId, (u64, u64)> = HashMap::new();
    let mut dependency_refs: BTreeSet<(ArtifactRevisionId, ArtifactRevisionId)> = BTreeSet::new();
    for (k, v) in c.rows(Family::RevisionRef, "revision_ref")? {
        let (key, value) = match (RevisionRefKey::decode(&k), RevisionRef::decode(&v)) {
            (Ok(key), Ok(value)) => (key, value),
            (Err(e), _) | (_, Err(e)) => {
                c.unreadable("revision_ref", &k, &e);
                continue;
            }
        };
        c.stats.references += 1;
        let slot = ref_counts.entry(key.target).or_default();
        slot.0 += 1;
        slot.1 = slot.1.max(value.reference_epoch_at_add);
        match &key.owner {
            RefOwner::Path { incarnation, path } => {
                if paths.get(&(*incarnation, path.clone())) != Some(&key.target) {
                    let wb = workbench.get(incarnation).cloned();
                    c.find(
                        FindingKind::PathReferenceOrphan,
                        path_subject(wb.as_deref(), incarnation, path),
                        format!(
                            "RevisionRef(Path) to revision {} but PathCurrent does not name it",
                            key.target
                        ),
                    );
                }
            }
            RefOwner::Commit(id) => {
                let ok = building.contains(id)
                    || commits.get(id).is_some_and(|cm| {
                        matches!(cm.state, CommitState::Sealed | CommitState::Retiring)
                    });
                if !ok {
                    c.find(
                        FindingKind::CommitReferenceOrphan,
                        format!("commit {}", id.to_hex()),
                        format!(
                            "RevisionRef(Commit) to revision {} but the commit is {}",
                            key.target,
                            commits.get(id).map_or_else(
                                || "absent and not being built".to_owned(),
                                |cm| format!("{:?}", cm.state)
                            )
                        ),
                    );
                }
            }
            RefOwner::RevisionDependency { child } => {
                dependency_refs.insert((*child, key.target));
            }
        }
    }

    // GcCandidate rows.
    let mut candidates: HashMap<(ArtifactRevisionId, u64), GcCandidate> = HashMap::new();
    for (k, v) in c.rows(Family::GcCandidate, "gc_candidate")? {
        match (GcCandidateKey::decode(&k), GcCandidate::decode(&v)) {
            (Ok(key), Ok(cand)) => {
                c.stats.gc_candidates += 1;
                candidates.insert((key.revision, key.reference_epoch), cand);
            }
            (Err(e), _) | (_, Err(e)) => c.unreadable("gc_candidate", &k, &e),
        }
    }

    // Manifests grouped by revision (one ordered scan).
    let mut manifests: HashMap<ArtifactRevisionId, ManifestFacts> = HashMap::new();
    for (k, v) in c.rows(Family::ArtifactManifest, "artifact_manifest")? {
        match crate::codec::ArtifactManifestKey::decode(&k) {
            Ok(key) => match ManifestRow::decode_value(key.object_index, &v) {
                Ok(row) => manifests.entry(key.revision).or_default().rows.push(row),
                Err(e) => c.unreadable("artifact_manifest", &k, &e),
            },
            Err(e) => c.unreadable("artifact_manifest", &k, &e),
        }
    }

    // ArtifactRevision rows.
    let mut revisions: HashMap<ArtifactRevisionId, RevisionState> = HashMap::new();
    for (k, v) in c.rows(Family::ArtifactRevision, "artifact_revision")? {
        let (key, row) = match (
            ArtifactRevisionKey::decode(&k),
            ArtifactRevision::decode(&v),
        ) {
            (Ok(key), Ok(row)) => (key, row),
            (Err(e), _) | (_, Err(e)) => {
                c.unreadable("artifact_revision", &k, &e);
                continue;
            }
        };
        c.stats.revisions += 1;
        let rev = key.revision;
        revisions.insert(rev, row.state);
        let subject = rev_subject(&rev);
        let (refs, max_epoch) = ref_counts.get(&rev).copied().unwrap_or((0, 0));
        if refs != row.strong_reference_count {
            c.find(
                FindingKind::ReferenceCountMismatch,
                subject.clone(),
                format!(
                    "strong_reference_count is {} but {refs} RevisionRef row(s) target it",
                    row.strong_reference_count
                ),
            );
        }
        if max_epoch > row.reference_epoch {
            c.find(
                FindingKind::ReferenceEpochBehind,
                subject.clone(),
                format!(
                    "reference_epoch is {} but a reference was added at epoch {max_epoch}",
                    row.reference_epoch
                ),
            );
        }
        if refs > 0 && row.state != RevisionState::Available {
            c.find(
                FindingKind::ReferenceToUnavailableRevision,
                subject.clone(),
                format!("{refs} reference(s) target a {:?} revision", row.state),
            );
        }
        let facts = manifests.remove(&rev).unwrap_or_default();
        let gc_id = crate::ops::gc::operation_id(&root, &rev, row.reference_epoch);
        let cand = candidates.get(&(rev, row.reference_epoch));
        match row.state {
            RevisionState::Deleted => {
                if !facts.rows.is_empty() {
                    c.find(
                        FindingKind::DeletedRevisionResidue,
                        subject.clone(),
                        format!("{} manifest row(s) remain", facts.rows.len()),
                    );
                }
                continue;
            }
            RevisionState::Available => {
                if row.strong_reference_count == 0 {
                    let ok = cand.is_some_and(|cd| {
                        cd.claim_state == GcClaimState::Candidate
                            && Some(cd.last_zero_ref_version) == row.last_zero_ref_version
                    });
                    if !ok {
                        c.find(
                            FindingKind::GcCandidateMissing,
                            subject.clone(),
                            format!(
                                "no reference holds it but no GcCandidate exists at epoch {}",
                                row.reference_epoch
                            ),
                        );
                    }
                }
            }
            RevisionState::Deleting | RevisionState::Quarantined => {
                let op = gc_ops.get(&gc_id);
                let expected_claim = if row.state == RevisionState::Deleting {
                    GcClaimState::Claimed
                } else {
                    GcClaimState::Quarantined
                };
                let op_ok = op.is_some_and(|o| match row.state {
                    RevisionState::Deleting => {
                        matches!(o.phase, GcPhase::Claimed | GcPhase::Deleting)
                    }
                    _ => o.phase == GcPhase::Quarantined,
                });
                if !op_ok || cand.map(|cd| cd.claim_state) != Some(expected_claim) {
                    c.find(
                        FindingKind::GcOperationMismatch,
                        subject.clone(),
                        format!(
                            "revision is {:?} but its Gc operation is {} and its candidate {}",
                            row.state,
                            op.map_or_else(|| "absent".to_owned(), |o| format!("{:?}", o.phase)),
                            cand.map_or_else(
                                || "absent".to_owned(),
                                |cd| format!("{:?}", cd.claim_state)
                            )
                        ),
                    );
                }
            }
        }
        // Manifest: row count and digest.
        if facts.rows.len() as u64 != row.block_count {
            c.find(
                FindingKind::ManifestMismatch,
                subject.clone(),
                format!(
                    "block_count is {} but {} manifest row(s) exist",
                    row.block_count,
                    facts.rows.len()
                ),
            );
        } else if crate::codec::manifest_digest_uri(&facts.rows) != row.manifest_digest_uri {
            c.find(
                FindingKind::ManifestMismatch,
                subject.clone(),
                "the manifest rows do not hash to manifest_digest_uri",
            );
        }
        // Dependencies: the sealed set against the manifest and its references.
        let owners: BTreeSet<ArtifactRevisionId> = facts
            .rows
            .iter()
            .map(|r| r.physical_owner_revision)
            .filter(|o| *o != rev)
            .collect();
        if owners.len() as u64 != u64::from(row.dependency_count)
            || super::publish::dependency_digest(&owners) != row.dependency_digest
        {
            c.find(
                FindingKind::DependencyMismatch,
                subject.clone(),
                format!(
                    "the manifest reuses blocks of {} revision(s) but the seal says {} (or its digest differs)",
                    owners.len(),
                    row.dependency_count
                ),
            );
        }
        for owner in &owners {
            if !dependency_refs.remove(&(rev, *owner)) {
                c.find(
                    FindingKind::DependencyMismatch,
                    subject.clone(),
                    format!("reuses blocks of {owner} without a RevisionDependency reference"),
                );
            }
        }
    }
    for (child, target) in dependency_refs {
        c.find(
            FindingKind::DependencyReferenceOrphan,
            rev_subject(&target),
            format!("RevisionDependency from {child}, which does not reuse its blocks"),
        );
    }
    for (rev, _) in ref_counts.iter() {
        if !revisions.contains_key(rev) {
            c.find(
                FindingKind::DanglingReference,
                rev_subject(rev),
                "references target a revision that does not exist",
            );
        }
    }
    for (rev, facts) in manifests {
        c.find(
            FindingKind::ManifestMismatch,
            rev_subject(&rev),
            format!(
                "{} manifest row(s) of a revision that does not exist",
                facts.rows.len()
            ),
        );
    }
    for ((rev, _), _) in candidates {
        if !revisions.contains_key(&rev) {
            c.find(
                FindingKind::GcCandidateOrphan,
                rev_subject(&rev),
                "a GcCandidate names a revision that does not exist",
            );
        }
    }

    // Commit seals, parents, consumers.
    for (id, commit) in &commits {
        c.stats.commits += 1;
        let subject = format!("commit {}", id.to_hex());
        let mut consumers = 0u64;
        snap.for_each_row(
            Family::CommitConsumer,
            &commit_consumer::commit_prefix(&root, id),
            "commit_consumer",
            |_, _| {
                consumers += 1;
                Ok(())
            },
        )?;
        if consumers != commit.consumer_count {
            c.find(
                FindingKind::CommitConsumerMismatch,
                subject.clone(),
                format!(
                    "consumer_count is {} but {consumers} CommitConsumer row(s) exist",
                    commit.consumer_count
                ),
            );
        }
        if commit.state != CommitState::Sealed {
            continue;
        }
        let seals = super::commit::recompute_seals(&snap, &root, id)?;
        if seals.member_count != commit.member_count || seals.member_digest != commit.member_digest
        {
            c.find(
                FindingKind::CommitSealMismatch,
                subject.clone(),
                format!(
                    "member seal is {} row(s) but {} CommitMember row(s) (or their digest) differ",
                    commit.member_count, seals.member_count
                ),
            );
        }
        if seals.revision_count != commit.unique_revision_count
            || seals.revision_digest != commit.revision_digest
        {
            c.find(
                FindingKind::CommitSealMismatch,
                subject.clone(),
                format!(
                    "revision seal is {} but {} RevisionRef(Commit) row(s) (or their digest) differ",
                    commit.unique_revision_count, seals.revision_count
                ),
            );
        }
        if super::commit::parent_digest(&commit.parents) != commit.parent_digest {
            c.find(
                FindingKind::CommitParentMismatch,
                subject.clone(),
                "parent_digest does not match the parent list",
            );
        }
        for p in &commit.parents {
            let ck = CommitConsumerKey {
                root,
                commit_id: *p,
                owner: ConsumerOwner::ChildCommit { child: *id },
            }
            .encode();
            if snap.get(Family::CommitConsumer, &ck)?.is_none() {
                c.find(
                    FindingKind::CommitParentMismatch,
                    subject.clone(),
                    format!("parent {} has no ChildCommit consumer row", p.to_hex()),
                );
            }
        }
    }

    // Restore seals.
    for (op_id, r) in &restores {
        c.stats.restores += 1;
        if !matches!(
            r.phase,
            RestorePhase::SourceSealed | RestorePhase::Ready | RestorePhase::Complete
        ) {
            continue;
        }
        let subject = format!("restore {}", op_id.to_hex());
        let prefix = {
            let mut p = root.as_bytes().to_vec();
            p.extend_from_slice(op_id.as_bytes());
            p
        };
        let mut seq = 0u64;
        let mut digest = super::restore::EMPTY_MEMBER_DIGEST;
        let mut problems = Vec::new();
        for (k, v) in snap.rows(Family::RestoreMember, &prefix, "restore_member")? {
            let (key, m) = match (RestoreMemberKey::decode(&k), RestoreMember::decode(&v)) {
                (Ok(key), Ok(m)) => (key, m),
                (Err(e), _) | (_, Err(e)) => {
                    c.unreadable("restore_member", &k, &e);
                    continue;
                }
            };
            if key.member_sequence != seq {
                problems.push(format!(
                    "member sequence {} where {seq} was expected",
                    key.member_sequence
                ));
            }
            if r.phase != RestorePhase::Complete {
                let staged = snap.get(
                    Family::PathCurrent,
                    &path_current::key(&root, &r.destination_incarnation, &m.destination_path),
                )?;
                let ok = staged.is_some_and(|b| {
                    super::restore::member_row_digest(key.member_sequence, &m.destination_path, &b)
                        == m.row_digest
                });
                if !ok {
                    problems.push(format!("member {seq} does not match its staged path"));
                }
            }
            digest = super::restore::chain_member_digest(&digest, &m.row_digest);
            seq += 1;
        }
        if seq != r.member_count || digest != r.member_digest {
            problems.push(format!(
                "sealed {} member(s) but {seq} RestoreMember row(s) (or their digest) differ",
                r.member_count
            ));
        }
        for p in problems {
            c.find(FindingKind::RestoreSealMismatch, subject.clone(), p);
        }
    }

    // SecondaryIndex rows versus PathCurrent.
    for (k, v) in c.rows(Family::SecondaryIndex, "secondary_index")? {
        c.stats.index_rows += 1;
        match expected_index.remove(&k) {
            Some((value, _)) if value == v => {}
            Some((_, subject)) => c.find(
                FindingKind::IndexRowMismatch,
                subject,
                format!("index row {} holds another value", index_row_name(&k)),
            ),
            None => {
                let subject = match SecondaryIndexKey::decode(&k) {
                    Ok(key) => path_subject(
                        workbench.get(&key.incarnation).map(String::as_str),
                        &key.incarnation,
                        &key.path,
                    ),
                    Err(_) => "secondary_index".to_owned(),
                };
                c.find(
                    FindingKind::IndexRowStale,
                    subject,
                    format!(
                        "index row {} is not projected by PathCurrent",
                        index_row_name(&k)
                    ),
                );
            }
        }
    }
    for (k, (_, subject)) in expected_index {
        c.find(
            FindingKind::IndexRowMissing,
            subject,
            format!("index row {} is missing", index_row_name(&k)),
        );
    }

    let mut findings = c.findings;
    let mut stats = c.stats;
    drop(snap);

    // RecoveryOutbox chain (the one public verification).
    match shard.verify_recovery_outbox() {
        Ok(summary) => stats.outbox_records = summary.records,
        Err(Error::RecoveryOutboxCorrupt { lsn, reason }) => findings.push(Finding {
            kind: FindingKind::RecoveryOutboxBroken,
            subject: format!("lsn {lsn}"),
            detail: reason,
        }),
        Err(e) => findings.push(Finding {
            kind: FindingKind::RecoveryOutboxBroken,
            subject: "recovery outbox".into(),
            detail: e.to_string(),
        }),
    }
    // Snapshot, alias and hold invariants.
    match super::snapshot::check_invariants(shard) {
        Ok(problems) => findings.extend(problems.into_iter().map(|p| Finding {
            kind: FindingKind::SnapshotInvariant,
            subject: "snapshots".into(),
            detail: p,
        })),
        Err(e) => findings.push(Finding {
            kind: FindingKind::SnapshotInvariant,
            subject: "snapshots".into(),
            detail: e.to_string(),
        }),
    }
    Ok(FsckReport {
        findings,
        stats,
        rows_skipped: false,
    })
}

/// `field=value` of an index key for messages (the raw key when it does not decode).
fn index_row_name(k: &[u8]) -> String {
    match SecondaryIndexKey::decode(k) {
        Ok(key) => format!("{}={:?}", key.index_id.as_str(), key.value),
        Err(_) => crate::ids::to_hex(k),
    }
}

/// The object keys the rows of one root speak for, read at one version (see [`object_keys`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectKeys {
    /// Every object key an authoritative row owns: the ArtifactManifest rows of every revision
    /// not yet Deleted (pruned at Deleted) and the StagedObject rows of Publish operations that
    /// are not Published whose cleanup is not confirmed. Anything else under the root's artifact
    /// prefix is unowned (`nokv fsck` lists it as information).
    pub owned: BTreeSet<String>,
    /// The block objects that must exist: every key named by a manifest row of an **Available**
    /// revision (published, not claimed by garbage collection), with what is recorded of it
    /// ([`RequiredObject`]). Deleting, Quarantined and Deleted revisions are left out — their
    /// objects are being or were deleted on purpose. `nokv fsck` reports each of these keys
    /// absent from the provider listing as an [`FindingKind::ObjectMissing`] finding (confirmed
    /// at a newer read with [`available_revisions`], so a revision collected meanwhile is not
    /// reported); `nokv fsck --verify-bytes` checks each present one against its record.
    pub required: BTreeMap<String, RequiredObject>,
}

/// A block object that must exist (see [`ObjectKeys::required`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredObject {
    /// The first Available revision naming the object (a key reused by a child revision names
    /// its physical owner's object).
    pub revision: ArtifactRevisionId,
    /// The object's recorded length in bytes and `sha256:` digest URI, from the manifest row of
    /// the revision that owns it physically, when that revision is Available (`None` otherwise:
    /// a child revision's rows reusing an older block describe only a range of it).
    pub record: Option<(u64, String)>,
}

/// The owned and the required object keys of the shard's root ([`ObjectKeys`]), from one
/// snapshot: one pass over the ArtifactRevision rows (their states), one over the
/// ArtifactManifest rows (both sets), and the Publish operations and StagedObject rows.
///
/// Errors: [`Error::Codec`] for a manifest, operation or staged-object row that does not decode
/// (revision rows that do not decode are left out of `required`; [`check`] reports them);
/// storage errors. Memory O(keys).
pub fn object_keys(shard: &MetaShard) -> Result<ObjectKeys> {
    let snap = shard.inner.store.snapshot();
    let root = shard.root_id();
    let mut available = BTreeSet::new();
    snap.for_each_row(
        Family::ArtifactRevision,
        root.as_bytes(),
        "artifact_revision",
        |k, v| {
            if let (Ok(key), Ok(row)) =
                (ArtifactRevisionKey::decode(k), ArtifactRevision::decode(v))
            {
                if row.state == RevisionState::Available {
                    available.insert(key.revision);
                }
            }
            Ok(())
        },
    )?;
    let mut out = ObjectKeys::default();
    snap.for_each_row(
        Family::ArtifactManifest,
        root.as_bytes(),
        "artifact_manifest",
        |k, v| {
            let key = crate::codec::artifact_manifest::ArtifactManifestKey::decode(k)?;
            let row = ManifestRow::decode_value(key.object_index, v)?;
            if available.contains(&key.revision) {
                let required =
                    out.required
                        .entry(row.object_key.clone())
                        .or_insert(RequiredObject {
                            revision: key.revision,
                            record: None,
                        });
                if row.physical_owner_revision == key.revision && row.object_offset == 0 {
                    required
                        .record
                        .get_or_insert_with(|| (row.length, row.digest_uri.clone()));
                }
            }
            out.owned.insert(row.object_key);
            Ok(())
        },
    )?;
    let mut unpublished = BTreeSet::new();
    let mut prefix = root.as_bytes().to_vec();
    prefix.push(OperationKind::Publish.to_u8());
    snap.for_each_row(Family::Operation, &prefix, "operation", |k, v| {
        let key = OperationKey::decode(k)?;
        if let Operation::Publish(p) = Operation::decode_for_kind(OperationKind::Publish, v)? {
            if p.phase != PublishPhase::Published {
                unpublished.insert(key.operation_id);
            }
        }
        Ok(())
    })?;
    snap.for_each_row(
        Family::StagedObject,
        root.as_bytes(),
        "staged_object",
        |k, v| {
            let key = StagedObjectKey::decode(k)?;
            let row = StagedObject::decode(v)?;
            if unpublished.contains(&key.publish_operation_id)
                && row.cleanup_state != StagedCleanupState::Deleted
            {
                out.owned.insert(row.object_key);
            }
            Ok(())
        },
    )?;
    Ok(out)
}

/// Which of `revisions` are Available at the shard's current read version (a read-only shard:
/// as of its open). Errors: storage failures; a row that does not decode counts as not
/// Available.
pub fn available_revisions(
    shard: &MetaShard,
    revisions: &BTreeSet<ArtifactRevisionId>,
) -> Result<BTreeSet<ArtifactRevisionId>> {
    let snap = shard.inner.store.snapshot();
    let root = shard.root_id();
    let mut out = BTreeSet::new();
    for rev in revisions {
        let key = ArtifactRevisionKey {
            root,
            revision: *rev,
        };
        if let Some(v) = snap.get(Family::ArtifactRevision, &key.encode())? {
            if ArtifactRevision::decode(&v).is_ok_and(|r| r.state == RevisionState::Available) {
                out.insert(*rev);
            }
        }
    }
    Ok(out)
}

/// What [`repair_index`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Index rows put (missing or differing).
    pub rows_put: u64,
    /// Stale index rows deleted.
    pub rows_deleted: u64,
    /// Metadata commands executed.
    pub commands: u64,
}

/// Paths whose index rows one repair command derives.
const REPAIR_PATHS_PER_COMMAND: usize = 16;
/// Index rows one deleting repair command examines (each stale row costs one predicate on
/// itself and at most one on its PathCurrent row: within the command's predicate bound).
const REPAIR_DELETES_PER_COMMAND: usize = 64;

/// One page of at most `limit` row keys of `family` under the root, after `after` (key order).
fn key_page(
    shard: &MetaShard,
    family: Family,
    root: &RootId,
    after: Option<&[u8]>,
    limit: usize,
) -> Result<Vec<Vec<u8>>> {
    let snap = shard.inner.store.snapshot();
    let spec = ScanSpec {
        prefix: root.as_bytes().to_vec(),
        start_after: after.map(<[u8]>::to_vec),
        delimiter: None,
        limit,
    };
    Ok(snap
        .scan(family, &spec)?
        .into_iter()
        .filter_map(|i| match i {
            ScanItem::Row { key, .. } => Some(key),
            ScanItem::Prefix(_) => None,
        })
        .collect())
}

/// Rebuilds the SecondaryIndex rows from PathCurrent (see the module docs): pass 1 walks
/// PathCurrent in bounded pages and, per page, puts every projected row that is missing or
/// differs (one command per ≤ 16 paths and ≤ [`MAX_INDEX_MUTATIONS`] puts, predicating those
/// PathCurrent rows); pass 2 walks SecondaryIndex and deletes every row its PathCurrent row does
/// not project (≤ 64 index rows examined per command, predicating the PathCurrent rows read). Idempotent; a rerun after a crash continues where it stopped.
///
/// Errors: [`Error::Fenced`]; codec and storage errors (a PathCurrent row that does not decode
/// stops the repair: fix or remove it first).
pub fn repair_index(shard: &MetaShard) -> Result<RepairReport> {
    let root = shard.root_id();
    let mut report = RepairReport::default();
    // Pass 1: puts.
    let mut after: Option<Vec<u8>> = None;
    loop {
        let keys = key_page(
            shard,
            Family::PathCurrent,
            &root,
            after.as_deref(),
            REPAIR_PATHS_PER_COMMAND,
        )?;
        if keys.is_empty() {
            break;
        }
        after = keys.last().cloned();
        let exhausted = keys.len() < REPAIR_PATHS_PER_COMMAND;
        let (puts, commands) = repair_puts(shard, &keys)?;
        report.rows_put += puts;
        report.commands += commands;
        if exhausted {
            break;
        }
    }
    // Pass 2: deletes.
    let mut after: Option<Vec<u8>> = None;
    loop {
        let keys = key_page(
            shard,
            Family::SecondaryIndex,
            &root,
            after.as_deref(),
            REPAIR_DELETES_PER_COMMAND,
        )?;
        if keys.is_empty() {
            break;
        }
        after = keys.last().cloned();
        let exhausted = keys.len() < REPAIR_DELETES_PER_COMMAND;
        let deleted = repair_deletes(shard, &keys)?;
        if deleted > 0 {
            report.rows_deleted += deleted;
            report.commands += 1;
        }
        if exhausted {
            break;
        }
    }
    Ok(report)
}

/// `(key, value)` rows.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// The projected index rows of the PathCurrent row `key` at `snap` (with the PathCurrent bytes
/// they derive from), or `None` when it is gone.
fn projected<S: Snapshot>(snap: &S, root: &RootId, key: &[u8]) -> Result<Option<(Vec<u8>, Rows)>> {
    let Some(bytes) = snap.get(Family::PathCurrent, key)? else {
        return Ok(None);
    };
    let pk = PathCurrentKey::decode(key)?;
    let entry = PathEntry::decode(&bytes)?;
    let claim = snap
        .get(
            Family::WorkspaceIncarnationClaim,
            &crate::codec::workspace_incarnation_claim::key(root, &pk.incarnation),
        )?
        .ok_or_else(|| {
            Error::codec(
                "workspace_incarnation_claim",
                format!(
                    "incarnation {} of an indexed path has no claim",
                    pk.incarnation
                ),
            )
        })?;
    let wb = WorkspaceIncarnationClaim::decode(&claim)?.workbench_id;
    let rows = index_rows(root, &pk.incarnation, &wb, &pk.path, &entry)?;
    Ok(Some((bytes, rows)))
}

/// Puts the missing/differing index rows of the PathCurrent rows `keys`, in commands within the
/// index bound. Returns `(rows put, commands)`.
fn repair_puts(shard: &MetaShard, keys: &[Vec<u8>]) -> Result<(u64, u64)> {
    let root = shard.root_id();
    let mut total = 0u64;
    let mut commands = 0u64;
    let mut start = 0usize;
    while start < keys.len() {
        let (written, next) = run_step(shard, |snap| {
            let mut cmd = shard.command_header(
                RequestId::random()?,
                index_digest(b"put", keys.get(start).map_or(&[][..], |k| k.as_slice())),
                snap.version(),
                crate::codec::CommandResult::Applied { value: 0 },
            );
            let mut puts = 0usize;
            let mut next = start;
            for key in &keys[start..] {
                let Some((bytes, rows)) = projected(snap, &root, key)? else {
                    next += 1;
                    continue;
                };
                let mut muts = Vec::new();
                for (ik, iv) in rows {
                    if snap.get(Family::SecondaryIndex, &ik)?.as_deref() != Some(iv.as_slice()) {
                        muts.push(Mutation::put(Family::SecondaryIndex, ik, iv));
                    }
                }
                if puts > 0 && puts + muts.len() > MAX_INDEX_MUTATIONS {
                    break;
                }
                next += 1;
                if muts.is_empty() {
                    continue;
                }
                puts += muts.len();
                cmd.predicates
                    .push(Predicate::equals(Family::PathCurrent, key.clone(), bytes));
                cmd.mutations.extend(muts);
            }
            if cmd.mutations.is_empty() {
                return Ok(Step::Done((0u64, next)));
            }
            cmd.result = crate::codec::CommandResult::Applied { value: puts as u64 };
            Ok(Step::Command(Box::new(cmd), (puts as u64, next)))
        })?;
        if written > 0 {
            commands += 1;
        }
        total += written;
        if next == start {
            // A single path projecting more than the bound cannot happen (≤ 72 rows per path).
            return Err(Error::invalid("index repair made no progress"));
        }
        start = next;
    }
    Ok((total, commands))
}

/// Deletes the rows of `keys` (SecondaryIndex keys) that their PathCurrent row does not project,
/// in one command. Returns the number deleted.
fn repair_deletes(shard: &MetaShard, keys: &[Vec<u8>]) -> Result<u64> {
    let root = shard.root_id();
    run_step(shard, |snap| {
        let mut cmd = shard.command_header(
            RequestId::random()?,
            index_digest(b"delete", keys.first().map_or(&[][..], |k| k.as_slice())),
            snap.version(),
            crate::codec::CommandResult::Applied { value: 0 },
        );
        let mut predicated: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut deleted = 0u64;
        for ik in keys {
            let Some(current) = snap.get(Family::SecondaryIndex, ik)? else {
                continue;
            };
            let stale = match SecondaryIndexKey::decode(ik) {
                Err(_) => true,
                Ok(key) => {
                    let pkey = path_current::key(&root, &key.incarnation, &key.path);
                    match projected(snap, &root, &pkey)? {
                        None => {
                            if predicated.insert(pkey.clone()) {
                                cmd.predicates
                                    .push(Predicate::absent(Family::PathCurrent, pkey));
                            }
                            true
                        }
                        Some((bytes, rows)) => {
                            let projected_here = rows.iter().any(|(k, _)| k == ik);
                            if !projected_here && predicated.insert(pkey.clone()) {
                                cmd.predicates.push(Predicate::equals(
                                    Family::PathCurrent,
                                    pkey,
                                    bytes,
                                ));
                            }
                            !projected_here
                        }
                    }
                }
            };
            if stale {
                cmd.predicates.push(Predicate::equals(
                    Family::SecondaryIndex,
                    ik.clone(),
                    current,
                ));
                cmd.mutations.push(Mutation::Delete {
                    family: Family::SecondaryIndex,
                    key: ik.clone(),
                });
                deleted += 1;
            }
        }
        if deleted == 0 {
            return Ok(Step::Done(0));
        }
        cmd.result = crate::codec::CommandResult::Applied { value: deleted };
        Ok(Step::Command(Box::new(cmd), deleted))
    })
}

fn index_digest(step: &[u8], first: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"nokv.fsck.repair_index.v1\0");
    h.update(step);
    h.update([0]);
    h.update(first);
    h.finalize().into()
}
