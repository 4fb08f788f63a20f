//! Durable commits: the BuildCommit operation and explicit commit retirement (docs/metadata-format.md,
//! "Commit Closure").
//!
//! # BuildCommit
//!
//! The operation id is deterministic: `first_16(sha256("nokv.build-commit.operation.v1\0" |
//! root_id | projection_input_digest))`, so an exact retry finds the same Operation row before any
//! live workspace, head or run-manifest read ("Operation lookup precedes all live … reads").
//! The retry is authenticated against the complete frozen request (workbench, identity digests,
//! `replace`, producer, lineage, parents); any difference is
//! [`Error::OperationInputMismatch`].
//!
//! Phases and the command each step is (every step CASes the exact Operation bytes it read, so
//! concurrent drivers of the same build have one winner per step):
//!
//! 1. [`begin`] — fresh construction only: evaluates the live preconditions (workspace
//!    `Visible`, head vs `replace`, parents `Sealed`), then one command creates
//!    `Operation(BuildCommit)` in `Building` with the frozen request (source incarnation,
//!    read version and workspace revision, expected head, run-manifest generation condition,
//!    first owner-observed `committed_at_unix_seconds`, initialization digest) and
//!    `HistoryHold(BuildCommit, operation_id)` at the source read version;
//! 2. [`stage_manifest`] — after the caller uploaded the canonical `run_manifest.json` blocks
//!    under the deterministic staged revision ([`staged_manifest_revision`]), one command creates
//!    the hidden ArtifactRevision (`Available`, one reference), its manifest rows, its
//!    `RevisionRef(Commit, commit_id)` and the immutable [`StagedManifestBinding`] — without
//!    PathCurrent;
//! 3. member batches ([`step`]) — the frozen workspace is scanned at the source read version in
//!    canonical path order, `metadata/run_manifest.json` replaced/inserted as one virtual member
//!    backed by the staged revision; each command writes ≤ [`MEMBER_BATCH`] CommitMember rows,
//!    one `RevisionRef(Commit)` per revision not yet referenced by this commit (count +1 /
//!    epoch +1 on the revision, which must be `Available`), and advances the member cursor, count
//!    and chained member digest;
//! 4. parent batches — one `CommitConsumer(parent, ChildCommit, child)` per unique parent
//!    against the parent's exact `Sealed` row (count +1 / epoch +1), chained parent digest;
//! 5. seal — re-scans CommitMember, `RevisionRef(Commit, commit_id)` and the parent consumer
//!    rows, verifies the member/revision/parent count+digest pairs against them, then CASes
//!    `Building -> Sealing` recording all three seals;
//! 6. publish — one command writes PathCurrent(`metadata/run_manifest.json`) and its Path
//!    RevisionRef (releasing the replaced one), its index rows, WorkspaceCurrent, the sealed
//!    Commit (consumer_count 1 for the head), WorkbenchCommitHead, the new head's
//!    `CommitConsumer(WorkbenchHead)` and the old head's release, `Sealing -> Complete` with
//!    the result, one ChangeEvent, and deletes the HistoryHold.
//!
//! Abort: a permanent failure (head moved, run-manifest generation moved, workspace gone, a
//! revision or parent no longer usable) CASes `Building|Sealing -> Aborting` with the terminal
//! error (`Sealing` only with a `Commit` Absent predicate), then `Aborting -> Cleaning`, then
//! cleanup batches delete CommitMember rows, release every `RevisionRef(Commit)` (count −1 /
//! epoch +1, GcCandidate at zero) and every parent consumer, and a final command deletes the
//! HistoryHold and sets `Cleaned`. `Quarantined` is never entered by this implementation (no
//! ambiguous external effect exists in the metadata steps).
//!
//! # Digests (decisions recorded here)
//!
//! - member digest: chained, `d_0 = 0^32`, `d_i = sha256("nokv.commit.member.v1\0" | d_{i-1} |
//!   u32 len | ordered path key | u32 len | CommitMember value)`;
//! - revision digest: `sha256("nokv.commit.revisions.v1\0" | ids…)` over the unique revision ids
//!   in ascending byte order (the `RevisionRef(Commit)` key order);
//! - parent digest: chained like the member digest with `"nokv.commit.parent.v1\0" | d | id`
//!   over the unique parents in ascending order.
//!
//! # CommitRetire
//!
//! [`retire`] claims `Sealed -> Retiring` in one command that predicates the exact Commit bytes
//! (so `consumer_count == 0` at the observed `consumer_epoch`) and creates the CommitRetire
//! operation directly in `Releasing` (the claim and the operation row are one atomic command, so
//! `Claiming` is never observable). Release batches delete members, release the unique revision
//! references and the outbound parent consumers with typed cursors; one final command publishes
//! `Retired` and `Complete`.

mod abort;
mod begin;
mod drive;
mod keys;
mod members;
mod model;
mod parents;
mod publish;
mod refs;
mod request;
mod retire;
mod seal;
mod seals;
mod stage;
mod state;

pub use abort::*;
pub use begin::*;
pub use drive::*;
pub use keys::*;
pub use model::*;
pub(crate) use refs::*;
pub use retire::*;
pub use seals::*;
pub use stage::*;
pub use state::*;
