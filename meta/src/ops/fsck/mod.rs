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

mod check;
mod findings;
mod objects;
mod repair;

pub use check::*;
pub use findings::*;
pub use objects::*;
pub use repair::*;
