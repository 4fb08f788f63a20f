//! The Publish operation's shared vocabulary: ledger bounds, digest domains, the intent, blocks and outcomes.

use crate::codec::{PublishBase, PublishOperation, PublishPhase};
use crate::command::projection::IndexFields;
use crate::ids::{ArtifactRevisionId, OperationId, RequestId};
use crate::ops::publish::PathCondition;
use crate::path::NormPath;
use sha2::{Digest, Sha256};

/// Most StagedObject rows one command stages, marks or settles (keeps every ledger command
/// within [`crate::command::MAX_COMMAND_MUTATIONS`] and [`crate::command::MAX_COMMAND_PREDICATES`]).
pub const MAX_LEDGER_ROWS_PER_COMMAND: usize = 100;

/// Domain separator of [`final_request_id`].
pub(super) const FINAL_REQUEST_DOMAIN: &[u8] = b"nokv.publish.final-request.v1\0";
/// Domain separator of the ledger command digests.
pub(super) const LEDGER_DIGEST_DOMAIN: &[u8] = b"nokv.publish.ledger.v1\0";
/// Terminal error code stored on an aborted publication.
pub const ABORTED_CODE: &str = "Aborted";

/// The complete publication request a Publish operation freezes at Begin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishIntent {
    /// Operation id (random for ordinary publications; the caller's idempotency key for a
    /// durable append).
    pub operation_id: OperationId,
    /// Caller intent digest (e.g. `sha256(domain | workbench | path | delta digest)` for an
    /// idempotent append); the same id with another digest is
    /// [`Error::OperationIntentMismatch`].
    pub intent_digest: [u8; 32],
    /// Target workbench.
    pub workbench_id: String,
    /// Target path.
    pub path: NormPath,
    /// Generation CAS of the final command.
    pub condition: PathCondition,
    /// The new revision every staged key belongs to (fresh, never reused).
    pub revision_id: ArtifactRevisionId,
    /// Reused append segments (the first `row_count` manifest rows of `revision`), if any.
    pub base: Option<PublishBase>,
    /// Sealed dependency depth (0 without a base; see [`PublishRequest::dependency_depth`]).
    pub dependency_depth: u32,
    /// Content type, 1..=255 bytes.
    pub content_type: String,
    /// Producer / provenance summary (≤1024 bytes).
    pub producer: String,
    /// Optional caller manifest id (≤1024 bytes).
    pub manifest_id: Option<String>,
    /// Custom typed index fields.
    pub index_fields: IndexFields,
}

/// One object the caller is about to send: its row is committed before the first byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedBlock {
    /// Provider object key (the revision-owned block key).
    pub object_key: String,
    /// Exact object length in bytes.
    pub length: u64,
    /// `sha256:` digest URI of the object bytes.
    pub digest_uri: String,
}

/// What [`begin`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BeginOutcome {
    /// The operation was created in Uploading (with the given first rows at sequences
    /// `0..first.len()`).
    Started(PublishOperation),
    /// An operation with this id and the same intent digest already exists (any phase); nothing
    /// was written. The caller decides: return the published receipt, resume, or [`restart`].
    Existing(PublishOperation),
}

/// How the caller's DELETE of one ledger-owned object ended (see [`clean`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The object is confirmed absent.
    Deleted,
    /// The provider outcome is ambiguous (an ambiguous PUT that may still land, an ambiguous
    /// DELETE): the row stays owned as Quarantined with this evidence until a later pass.
    Quarantined(String),
    /// A definite, retryable failure: the row stays DeletePending, cleanup stops and the
    /// operation stays Cleaning for the next recovery pass.
    Failed(String),
}

/// One Publish operation as listed by [`list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedOperation {
    /// Operation id.
    pub operation_id: OperationId,
    /// The decoded record.
    pub operation: PublishOperation,
}

/// True for phases no step leaves on its own (Published, Cleaned). Quarantined is not terminal:
/// a later recovery pass reconciles it.
pub fn is_terminal(phase: PublishPhase) -> bool {
    matches!(phase, PublishPhase::Published | PublishPhase::Cleaned)
}

/// The request id of the final publication command of `operation_id`:
/// the first 16 bytes of `sha256("nokv.publish.final-request.v1\0" | operation_id)`.
pub fn final_request_id(operation_id: &OperationId) -> RequestId {
    let mut h = Sha256::new();
    h.update(FINAL_REQUEST_DOMAIN);
    h.update(operation_id.as_bytes());
    let d: [u8; 32] = h.finalize().into();
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    RequestId(id)
}
