//! fsck's vocabulary: finding kinds, findings, statistics and the report.

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
