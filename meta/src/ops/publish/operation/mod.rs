//! The Publish operation and its StagedObject ledger (docs/metadata-format.md, "Upload And Append", Operation
//! and StagedObject families; docs/design.md, "Immutable Bodies And Publication", "Safe Object
//! Lifetime").
//!
//! Publication is object-first and metadata-last, and nothing is ever uploaded without a durable
//! owner. The caller (the SDK) drives this state machine; every step is one
//! [`crate::command::MetadataCommand`] that predicates the exact Operation row it read, so
//! concurrent steps serialize on that row and exactly one of two competing CASes wins:
//!
//! ```text
//! Begin         -> Operation(Publish) in Uploading, freezing the complete request (intent
//!                  digest, workbench, path, generation condition, revision id, reused append
//!                  base, content type, producer, manifest id, index fields), optionally with the
//!                  first StagedObject rows                                      [begin]
//! stage         -> StagedObject rows (object key, expected length + sha256 digest, provider
//!                  state Uploading) committed BEFORE their bytes are sent; rows sent earlier may
//!                  be marked Uploaded in the same command                       [stage]
//! finalize      -> CAS Uploading -> Finalizing, sealing the body length and digest and marking
//!                  the last rows Uploaded                                       [finalize]
//! publish       -> the publication command of [`crate::ops::publish`], extended: the same
//!                  single command moves Finalizing -> Published and stores the result
//!                  (commit version = path generation) on the operation       [publish_operation]
//! seal+publish  -> Uploading -> Published in ONE command: finalize's seal and marks folded
//!                  into the publication command, for an operation whose rows were all staged
//!                  at Begin; a refusal commits nothing (still Uploading)  [finalize_and_publish]
//! abort         -> CAS Uploading -> Aborting                                    [abort]
//! take over     -> Finalizing -> Aborting only with fenced proof that no publication exists
//!                  (the final request's CommandDedupe row and the new ArtifactRevision are both
//!                  predicated Absent)                                           [take_over]
//! clean         -> Aborting -> Cleaning; rows DeletePending; the caller deletes exactly the
//!                  ledger-owned keys; rows Deleted (or Quarantined when the provider outcome
//!                  is ambiguous); Cleaning -> Cleaned | Quarantined           [clean]
//! reconcile     -> a later pass re-checks Quarantined rows; Quarantined -> Cleaned once every
//!                  row is confirmed absent                                      [clean]
//! ```
//!
//! Object sequences: StagedObject rows of one operation are numbered `0, 1, 2, …` in the order
//! they were staged ([`PublishOperation::staged_object_count`] is the next sequence). The own
//! blocks of the current revision are the rows whose `artifact_revision_id` equals the
//! operation's, in sequence order; the `i`-th of them has physical object index
//! `base_row_count + i`. A re-begun idempotent attempt (see [`restart`]) keeps the earlier
//! attempt's (Deleted) rows and continues the numbering under a fresh revision.
//!
//! The final publication request id is derived from the operation id ([`final_request_id`]),
//! so a published operation's exact receipt is the CommandDedupe row of that id (see
//! [`published_receipt`]), and the abort takeover can prove its absence.
//!
//! Recovery is driven by these rows only, never by listing the bucket: [`list_pending`] returns
//! the non-terminal Publish operations through the pending-operation registry, [`list`] every
//! Publish operation (one bounded prefix scan per 255 rows), [`ledger`] the rows of one.
//!
//! ## Pending-operation registry
//!
//! Terminal operations (Published, Cleaned) are kept forever (docs/metadata-format.md, "Commit Closure": no
//! terminal-operation GC), so scanning the Operation family at every open would cost
//! O(publications ever begun). Each non-terminal Publish operation therefore also has one row in
//! the System tree (tag 0xF0): key `"pending_operation" | u8 OperationKind::Publish |
//! operation_id 16`, value `u16be 1` ([`crate::codec::system::pending_operation_key`],
//! [`crate::codec::system::PENDING_OPERATION_VALUE`]). The row is
//!
//! - inserted by the same command that creates the operation in Uploading ([`begin`]) or
//!   re-begins a Cleaned attempt ([`restart`]);
//! - kept through Finalizing, Aborting, Cleaning and Quarantined;
//! - deleted by the same command that makes the operation terminal: the publication command
//!   ([`publish_operation`], Finalizing -> Published) and the last cleanup command (Cleaning ->
//!   Cleaned, or a reconciled Quarantined -> Cleaned, [`clean`]).
//!
//! [`list_pending`] therefore costs O(non-terminal operations) (a registry scan plus one point
//! read per row). Operations begun by a build without the registry are not in it; [`list`]
//! (`nokv operation list --all`) still scans every operation.

mod abort;
mod begin;
mod clean;
mod final_request;
mod finalize;
mod ledger;
mod publication;
mod reserve;
mod stage;
mod state;

pub use abort::*;
pub use begin::*;
pub use clean::*;
pub use finalize::*;
pub use ledger::*;
pub use publication::*;
pub use reserve::*;
pub use stage::*;
pub use state::*;

#[cfg(test)]
mod tests;
