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

pub mod explain;

pub use super::publish::operation::DeleteOutcome;

mod barrier;
mod claim;
mod drive;
mod finish;
mod holds;
mod pass;
mod rows;
mod state;
mod transition;

pub use barrier::*;
pub use holds::*;
pub use pass::*;
pub use rows::*;
pub use state::*;
