//! Restore (docs/metadata-format.md, "Restore Closure"): same-root, destination-creating restore of a frozen
//! source — a leased snapshot's read version or a sealed commit's CommitMember rows — into a fresh
//! staging incarnation that becomes visible in one final marker command.
//!
//! ## Identity
//!
//! The operation id is deterministic: [`restore_identity_digest`] over the root, the source
//! workbench and incarnation, the concrete source selector (snapshot id or commit id; aliases are
//! point-resolved by the caller before [`plan`]), the destination workbench and the fresh
//! destination incarnation; `operation_id = identity_digest[..16]`. The destination incarnation is
//! derived from the request and the retired incarnation it reclaims, if any
//! ([`destination_incarnation_for`]), so every plan of the same attempt — also after process loss
//! before the prepare command — reproduces the same identity; it is never reused (the prepare
//! command predicates its WorkspaceIncarnationClaim absent, and a reclaiming attempt chains the
//! retired incarnation). Once prepared, plans find the operation through the destination's
//! `WorkspaceCurrent.owning_operation`. The
//! [`initialization_digest`] binds the identity to the exact encoded `PathEntry` of
//! `metadata/restore_manifest.json` sealed into the operation.
//!
//! ## Phases, one metadata command each
//!
//! ```text
//! prepare        (none) -> Preparing   Operation(Restore), WorkspaceCurrent(Staging, fresh
//!                                      incarnation, owning_operation), WorkspaceIncarnationClaim,
//!                                      the RestoreStaging manifest revision + its Path RevisionRef
//!                                      + PathCurrent + index rows (all under the staging
//!                                      incarnation), and the source attachment:
//!                                        snapshot: SnapshotRef Active & lease > now, consumer
//!                                                  count/epoch +1, HistoryHold(Restore, op)
//!                                        commit:   Commit Sealed, consumer count/epoch +1,
//!                                                  CommitConsumer(Lease, op)
//! copy batch     Preparing|Copying -> Copying
//!                                      ≤ MAX_BATCH_MEMBERS source entries: destination
//!                                      PathCurrent, Path RevisionRef (+1 count/epoch on the shared
//!                                      ArtifactRevision), SecondaryIndex rows, RestoreMember(seq,
//!                                      row digest), next cursor/sequence, running member digest;
//!                                      the batch that reaches end-of-source records EOF
//! seal           Copying(EOF) -> SourceSealed     member_count / member_digest frozen
//! verify         SourceSealed -> Ready            RestoreMember rows re-read and re-digested
//!                                                 against the staged PathCurrent rows; the source
//!                                                 rescanned at its held read version (or its
//!                                                 CommitMember rows) must give the same count and
//!                                                 digest
//! publish        Ready -> Complete                destination Staging -> Visible, one
//!                                                 WorkspaceCreated ChangeEvent, source hold /
//!                                                 consumer released
//! abort          Preparing..Ready -> Aborting     terminal error recorded
//! cleanup batch  Aborting|Cleaning -> Cleaning    driven by RestoreMember rows (never a listing):
//!                                                 each staged PathCurrent, index rows and Path
//!                                                 RevisionRef removed (count/epoch −1; GcCandidate
//!                                                 at zero), the member row deleted
//! cleanup final  Cleaning -> Cleaned              manifest path removed, Staging -> Retired,
//!                                                 source hold / consumer released exactly once
//! ```
//!
//! Every step command predicates the exact bytes of the Operation row it read, so a step, a
//! concurrent duplicate driver, publication and abort all CAS the same record and exactly one
//! wins. Staging rows produce no ChangeEvent. No object bytes are copied: destination paths
//! reference the source's immutable revisions.
//!
//! Destination path entries keep the source `PathEntry` (generation, revision, digests,
//! projection). The restore manifest's entry uses generation
//! `source_read_version + 1` (greater than every copied generation, deterministic across retries).
//! A source `metadata/restore_manifest.json` (a source that was itself restored) is not copied:
//! the destination holds its own.
//!
//! A restore never publishes a path that is both a file and a directory: a source that holds
//! such a clash (written before the rule was enforced) fails its copy step with
//! [`RestoreError::SourceNamespaceClash`] and is aborted and cleaned up, so no destination
//! becomes visible that listings and materialization could not walk.

mod abort;
mod cleanup;
mod copy;
mod drive;
mod identity;
mod plan;
mod prepare;
mod publish;
mod row;
mod state;
mod verify;

pub use abort::*;
pub use drive::*;
pub use identity::*;
pub use plan::*;
pub use prepare::*;
pub use row::*;
pub use state::*;

#[cfg(test)]
mod tests;
