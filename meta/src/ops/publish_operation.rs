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

use sha2::{Digest, Sha256};

use crate::codec::system::{
    decode_pending_operation_key, pending_operation_key, pending_operation_prefix,
    PENDING_OPERATION_VALUE,
};
use crate::codec::{
    artifact_revision, command_dedupe, CommandResult, Operation, OperationKey, OperationKind,
    OperationResult, PublishBase, PublishCondition, PublishOperation, PublishPhase,
    StagedCleanupState, StagedObject, StagedObjectKey, StagedProviderState, TerminalError,
};
use crate::command::executor::check_handle_fences;
use crate::command::projection::{self as index_projection, IndexFields};
use crate::command::{MetadataCommand, Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, OperationId, RequestId};
use crate::ops::publish::{
    self, plan_with, validate_digest_uri, OperationBinding, PathCondition, Planned, PublishReceipt,
    PublishRequest,
};
use crate::path::NormPath;
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};

use super::Step;

/// Most StagedObject rows one command stages, marks or settles (keeps every ledger command
/// within [`crate::command::MAX_COMMAND_MUTATIONS`] and [`crate::command::MAX_COMMAND_PREDICATES`]).
pub const MAX_LEDGER_ROWS_PER_COMMAND: usize = 100;

/// Domain separator of [`final_request_id`].
const FINAL_REQUEST_DOMAIN: &[u8] = b"nokv.publish.final-request.v1\0";
/// Domain separator of the ledger command digests.
const LEDGER_DIGEST_DOMAIN: &[u8] = b"nokv.publish.ledger.v1\0";
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

fn op_key(shard: &MetaShard, id: &OperationId) -> Vec<u8> {
    OperationKey {
        root: shard.root_id(),
        kind: OperationKind::Publish,
        operation_id: *id,
    }
    .encode()
}

fn staged_key(shard: &MetaShard, id: &OperationId, seq: u64) -> Vec<u8> {
    StagedObjectKey {
        root: shard.root_id(),
        publish_operation_id: *id,
        object_sequence: seq,
    }
    .encode()
}

/// The registry row insert of operation `id` (see the module docs).
fn register(id: &OperationId) -> Mutation {
    Mutation::put(
        Family::System,
        pending_operation_key(OperationKind::Publish, id),
        PENDING_OPERATION_VALUE.to_vec(),
    )
}

/// The registry row delete of operation `id` (see the module docs).
fn unregister(id: &OperationId) -> Mutation {
    Mutation::Delete {
        family: Family::System,
        key: pending_operation_key(OperationKind::Publish, id),
    }
}

fn phase_name(phase: PublishPhase) -> String {
    format!("{phase:?}")
}

fn state_error(id: &OperationId, phase: Option<PublishPhase>, wanted: &str) -> Error {
    Error::OperationState {
        operation_id: id.to_hex(),
        phase: phase.map_or_else(|| "absent".to_owned(), phase_name),
        wanted: wanted.to_owned(),
    }
}

/// Reads the Publish operation row at `key` and requires it to be Uploading: `(bytes, record)`.
/// Errors: [`Error::OperationState`] naming `wanted` when it is absent or in another phase.
fn read_uploading<S: Snapshot>(
    snap: &S,
    key: &[u8],
    id: &OperationId,
    wanted: &str,
) -> Result<(Vec<u8>, PublishOperation)> {
    match read_op(snap, key)? {
        Some((bytes, op)) if op.phase == PublishPhase::Uploading => Ok((bytes, op)),
        Some((_, op)) => Err(state_error(id, Some(op.phase), wanted)),
        None => Err(state_error(id, None, wanted)),
    }
}

/// Reads and decodes one Publish operation row at `snap`: `(bytes, record)`.
fn read_op<S: Snapshot>(snap: &S, key: &[u8]) -> Result<Option<(Vec<u8>, PublishOperation)>> {
    let Some(bytes) = snap.get(Family::Operation, key)? else {
        return Ok(None);
    };
    match Operation::decode_for_kind(OperationKind::Publish, &bytes)? {
        Operation::Publish(op) => Ok(Some((bytes, op))),
        _ => Err(Error::codec(
            "operation",
            "non-publish value under a publish key",
        )),
    }
}

/// The Publish operation `id`, if any (one point read at the current version).
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn get(shard: &MetaShard, id: &OperationId) -> Result<Option<PublishOperation>> {
    let snap = shard.inner.store.snapshot();
    Ok(read_op(&snap, &op_key(shard, id))?.map(|(_, op)| op))
}

/// The non-terminal Publish operations, in operation-id order, found through the
/// pending-operation registry (see the module docs): one bounded System scan per 255 registry
/// rows plus one point read of each operation at the current version. Cost O(non-terminal
/// operations), independent of the terminal operations retained forever. An operation that
/// became terminal between the scan and its read is returned with its terminal phase (callers
/// skip it).
///
/// Errors: [`Error::Codec`] for a malformed registry row or one naming no operation; storage
/// errors.
pub fn list_pending(shard: &MetaShard) -> Result<Vec<ListedOperation>> {
    let prefix = pending_operation_prefix(OperationKind::Publish);
    let mut ids = Vec::new();
    shard.inner.store.snapshot().for_each_row(
        Family::System,
        &prefix,
        "system",
        |key, value| {
            let (_, id) = decode_pending_operation_key(key)?;
            crate::codec::system::decode_pending_operation_value(value)?;
            ids.push(id);
            Ok(())
        },
    )?;
    // The registry row and the Operation row change in one command and Operation rows are
    // never deleted, so a fresh read always finds the operation.
    let snap = shard.inner.store.snapshot();
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let Some((_, operation)) = read_op(&snap, &op_key(shard, &id))? else {
            return Err(Error::codec(
                "system",
                format!("pending-operation registry names missing operation {id}"),
            ));
        };
        out.push(ListedOperation {
            operation_id: id,
            operation,
        });
    }
    Ok(out)
}

/// Every Publish operation of the root in operation-id order (bounded scans of ≤255 rows; cost
/// O(number of Publish operations ever begun — terminal rows are retained, docs/metadata-format.md). Recovery
/// uses [`list_pending`] instead.
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn list(shard: &MetaShard) -> Result<Vec<ListedOperation>> {
    let snap = shard.inner.store.snapshot();
    let mut prefix = shard.root_id().as_bytes().to_vec();
    prefix.push(OperationKind::Publish.to_u8());
    let mut out = Vec::new();
    snap.for_each_row(Family::Operation, &prefix, "operation", |key, value| {
        let k = OperationKey::decode(key)?;
        match Operation::decode_for_kind(OperationKind::Publish, value)? {
            Operation::Publish(op) => out.push(ListedOperation {
                operation_id: k.operation_id,
                operation: op,
            }),
            _ => return Err(Error::codec("operation", "non-publish value")),
        }
        Ok(())
    })?;
    Ok(out)
}

/// Every StagedObject row of operation `id` as `(object_sequence, row)`, in sequence order.
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn ledger(shard: &MetaShard, id: &OperationId) -> Result<Vec<(u64, StagedObject)>> {
    let snap = shard.inner.store.snapshot();
    ledger_at(shard, &snap, id)
}

fn ledger_at<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    id: &OperationId,
) -> Result<Vec<(u64, StagedObject)>> {
    let mut prefix = shard.root_id().as_bytes().to_vec();
    prefix.extend_from_slice(id.as_bytes());
    let mut out = Vec::new();
    snap.for_each_row(
        Family::StagedObject,
        &prefix,
        "staged_object",
        |key, value| {
            let k = StagedObjectKey::decode(key)?;
            out.push((k.object_sequence, StagedObject::decode(value)?));
            Ok(())
        },
    )?;
    Ok(out)
}

/// The stored receipt of a published operation (the CommandDedupe row of its
/// [`final_request_id`], with `idempotent_replay = true`), or `None` while it is not published.
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn published_receipt(shard: &MetaShard, id: &OperationId) -> Result<Option<PublishReceipt>> {
    published_receipt_at(shard, &shard.inner.store.snapshot(), id)
}

/// [`published_receipt`] at `snap`.
fn published_receipt_at<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    id: &OperationId,
) -> Result<Option<PublishReceipt>> {
    let key = command_dedupe::key(&shard.root_id(), &final_request_id(id));
    let Some(bytes) = snap.get(Family::CommandDedupe, &key)? else {
        return Ok(None);
    };
    let stored = crate::codec::CommandDedupe::decode(&bytes)?;
    publish::receipt(crate::command::CommandOutcome {
        commit_version: stored.commit_version,
        result: stored.result,
        idempotent_replay: true,
        recovery_lsn: stored.recovery_lsn,
    })
    .map(Some)
}

fn ledger_digest(step: &[u8], id: &OperationId, detail: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(LEDGER_DIGEST_DOMAIN);
    h.update((step.len() as u64).to_be_bytes());
    h.update(step);
    h.update(id.as_bytes());
    h.update((detail.len() as u64).to_be_bytes());
    h.update(detail);
    h.finalize().into()
}

/// Runs a ledger step through [`super::run_step`], handing `plan` the snapshot's read version.
fn run<T>(
    shard: &MetaShard,
    mut plan: impl FnMut(&crate::store::ShardSnapshot, u64) -> Result<Step<T>>,
) -> Result<T> {
    super::run_step(shard, |snap| plan(snap, snap.version()))
}

fn command(
    shard: &MetaShard,
    read_version: u64,
    digest: [u8; 32],
    id: &OperationId,
    phase: PublishPhase,
) -> Result<MetadataCommand> {
    Ok(shard.command_header(
        RequestId::random()?,
        digest,
        read_version,
        CommandResult::OperationRecorded {
            kind: OperationKind::Publish,
            operation_id: *id,
            phase: phase.to_u8(),
        },
    ))
}

fn validate_block(b: &StagedBlock) -> Result<()> {
    if b.object_key.is_empty() || b.object_key.len() > publish::MAX_OBJECT_KEY_BYTES {
        return Err(Error::invalid("staged object_key must be 1..=1024 bytes"));
    }
    if b.length == 0 {
        return Err(Error::invalid("staged objects are never empty"));
    }
    validate_digest_uri("staged object digest_uri", &b.digest_uri)
}

fn validate_intent(intent: &PublishIntent) -> Result<()> {
    crate::ids::validate_workbench_id(&intent.workbench_id)?;
    if publish::is_reserved(&intent.path) {
        return Err(Error::invalid(format!(
            "{} is reserved for commit/restore (or lies below a reserved path) and cannot be published directly",
            intent.path
        )));
    }
    if intent.content_type.is_empty() || intent.content_type.len() > publish::MAX_CONTENT_TYPE_BYTES
    {
        return Err(Error::invalid("content_type must be 1..=255 bytes"));
    }
    if intent.producer.len() > publish::MAX_PRODUCER_BYTES {
        return Err(Error::invalid("producer is longer than 1024 bytes"));
    }
    if intent
        .manifest_id
        .as_ref()
        .is_some_and(|m| m.len() > publish::MAX_MANIFEST_ID_BYTES)
    {
        return Err(Error::invalid("manifest_id is longer than 1024 bytes"));
    }
    if intent.dependency_depth > publish::MAX_DEPENDENCY_DEPTH {
        return Err(Error::invalid("dependency_depth exceeds 8"));
    }
    if intent.base.is_none() && intent.dependency_depth != 0 {
        return Err(Error::invalid(
            "a publication without a base has dependency depth 0",
        ));
    }
    index_projection::validate_index_fields(&intent.index_fields)
}

fn condition_of(c: PathCondition) -> PublishCondition {
    match c {
        PathCondition::Create => PublishCondition::Create,
        PathCondition::Replace {
            expected_generation,
        } => PublishCondition::Replace {
            expected_generation,
        },
        PathCondition::Append {
            expected_generation,
        } => PublishCondition::Append {
            expected_generation,
        },
    }
}

fn path_condition(c: PublishCondition) -> PathCondition {
    match c {
        PublishCondition::Create => PathCondition::Create,
        PublishCondition::Replace {
            expected_generation,
        } => PathCondition::Replace {
            expected_generation,
        },
        PublishCondition::Append {
            expected_generation,
        } => PathCondition::Append {
            expected_generation,
        },
    }
}

fn fresh_operation(
    intent: &PublishIntent,
    staged: u64,
    first_seq: u64,
) -> Result<PublishOperation> {
    Ok(PublishOperation {
        phase: PublishPhase::Uploading,
        artifact_revision_id: intent.revision_id,
        intent_digest: intent.intent_digest,
        workbench_id: intent.workbench_id.clone(),
        path: intent.path.clone(),
        condition: condition_of(intent.condition),
        base: intent.base,
        dependency_depth: intent.dependency_depth,
        content_type: intent.content_type.clone(),
        producer: intent.producer.clone(),
        manifest_id: intent.manifest_id.clone(),
        index_projection: index_projection::encode_projection(&intent.index_fields)?,
        staged_object_count: staged,
        expected_length: 0,
        expected_digest_uri: None,
        cleanup_next_sequence: first_seq,
        quarantine_evidence: None,
        result: OperationResult::Pending,
    })
}

/// Checks the intent and the first batch of staged rows of [`begin`] / [`restart`].
fn validate_begin(intent: &PublishIntent, first: &[StagedBlock]) -> Result<()> {
    validate_intent(intent)?;
    if first.len() > MAX_LEDGER_ROWS_PER_COMMAND {
        return Err(Error::invalid("too many staged rows for one command"));
    }
    first.iter().try_for_each(validate_block)
}

fn staged_row(revision: ArtifactRevisionId, b: &StagedBlock) -> StagedObject {
    StagedObject {
        artifact_revision_id: revision,
        object_key: b.object_key.clone(),
        upload_id: None,
        expected_length: b.length,
        expected_digest_uri: b.digest_uri.clone(),
        provider_state: StagedProviderState::Uploading,
        cleanup_state: StagedCleanupState::Owned,
    }
}

/// Begin: one command creating Operation(Publish, id) in Uploading with the complete frozen
/// request and the StagedObject rows of `first` (sequences `0..first.len()`, at most
/// [`MAX_LEDGER_ROWS_PER_COMMAND`]), before any of their bytes is sent. An existing operation
/// with the same intent digest is returned as [`BeginOutcome::Existing`] unchanged.
///
/// Errors: [`Error::InvalidArgument`]; [`Error::OperationIntentMismatch`] when the id exists
/// with another intent digest; [`Error::Fenced`]; codec and storage errors.
pub fn begin(
    shard: &MetaShard,
    intent: &PublishIntent,
    first: &[StagedBlock],
) -> Result<BeginOutcome> {
    validate_begin(intent, first)?;
    let id = intent.operation_id;
    let key = op_key(shard, &id);
    run(shard, |snap, version| {
        if let Some((_, existing)) = read_op(snap, &key)? {
            if existing.intent_digest != intent.intent_digest {
                return Err(Error::OperationIntentMismatch {
                    operation_id: id.to_hex(),
                });
            }
            return Ok(Step::Done(BeginOutcome::Existing(existing)));
        }
        let op = fresh_operation(intent, first.len() as u64, 0)?;
        let mut cmd = command(
            shard,
            version,
            ledger_digest(b"begin", &id, &intent.intent_digest),
            &id,
            PublishPhase::Uploading,
        )?;
        cmd.predicates
            .push(Predicate::absent(Family::Operation, key.clone()));
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            Operation::Publish(op.clone()).encode(),
        ));
        cmd.mutations.push(register(&id));
        for (seq, b) in first.iter().enumerate() {
            cmd.mutations.push(Mutation::put(
                Family::StagedObject,
                staged_key(shard, &id, seq as u64),
                staged_row(intent.revision_id, b).encode(),
            ));
        }
        Ok(Step::Command(Box::new(cmd), BeginOutcome::Started(op)))
    })
}

/// Re-begins an idempotent publication whose earlier attempt ended Cleaned (nothing was
/// published and every object it staged is confirmed deleted): one command replacing the
/// Cleaned row (predicated unchanged) with a fresh Uploading attempt under `intent`'s new
/// revision, keeping the old (Deleted) StagedObject rows and continuing the sequence numbering.
/// The intent digest must be the original one.
///
/// Errors: [`Error::OperationIntentMismatch`]; [`Error::OperationState`] unless the row is
/// Cleaned with a failed result; [`Error::InvalidArgument`]; codec and storage errors.
pub fn restart(
    shard: &MetaShard,
    intent: &PublishIntent,
    first: &[StagedBlock],
) -> Result<PublishOperation> {
    validate_begin(intent, first)?;
    let id = intent.operation_id;
    let key = op_key(shard, &id);
    run(shard, |snap, version| {
        let Some((bytes, old)) = read_op(snap, &key)? else {
            return Err(state_error(
                &id,
                None,
                "only a Cleaned attempt can be re-begun",
            ));
        };
        if old.intent_digest != intent.intent_digest {
            return Err(Error::OperationIntentMismatch {
                operation_id: id.to_hex(),
            });
        }
        if old.phase != PublishPhase::Cleaned || !matches!(old.result, OperationResult::Failed(_)) {
            return Err(state_error(
                &id,
                Some(old.phase),
                "only a Cleaned attempt can be re-begun",
            ));
        }
        if old.artifact_revision_id == intent.revision_id {
            return Err(Error::invalid(
                "a re-begun attempt needs a fresh revision id",
            ));
        }
        let start = old.staged_object_count;
        let op = fresh_operation(intent, start.saturating_add(first.len() as u64), start)?;
        let mut cmd = command(
            shard,
            version,
            ledger_digest(b"restart", &id, intent.revision_id.as_bytes()),
            &id,
            PublishPhase::Uploading,
        )?;
        cmd.predicates
            .push(Predicate::equals(Family::Operation, key.clone(), bytes));
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            Operation::Publish(op.clone()).encode(),
        ));
        cmd.mutations.push(register(&id));
        for (i, b) in first.iter().enumerate() {
            let seq = start.saturating_add(i as u64);
            let k = staged_key(shard, &id, seq);
            cmd.predicates
                .push(Predicate::absent(Family::StagedObject, k.clone()));
            cmd.mutations.push(Mutation::put(
                Family::StagedObject,
                k,
                staged_row(intent.revision_id, b).encode(),
            ));
        }
        Ok(Step::Command(Box::new(cmd), op))
    })
}

/// Adds the provider-state `marks` (`(sequence, state)`) of the current attempt's rows to `cmd`
/// (reads each row at `snap`).
fn push_marks<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    id: &OperationId,
    op: &PublishOperation,
    marks: &[(u64, StagedProviderState)],
    cmd: &mut MetadataCommand,
) -> Result<()> {
    for (seq, state) in marks {
        let k = staged_key(shard, id, *seq);
        let Some(b) = snap.get(Family::StagedObject, &k)? else {
            return Err(Error::invalid(format!(
                "no staged object at sequence {seq}"
            )));
        };
        let mut row = StagedObject::decode(&b)?;
        if row.artifact_revision_id != op.artifact_revision_id {
            return Err(Error::invalid(format!(
                "staged object {seq} belongs to an earlier attempt"
            )));
        }
        if row.provider_state == *state {
            continue;
        }
        row.provider_state = *state;
        cmd.mutations
            .push(Mutation::put(Family::StagedObject, k, row.encode()));
    }
    Ok(())
}

/// Stages more objects of an Uploading operation: one command (predicating the operation row
/// unchanged) writing `blocks` as the next StagedObject rows — before any of their bytes is
/// sent — and recording provider states of earlier rows in `marks` (`(sequence, state)`:
/// Uploaded once a send completed, Ambiguous when the provider could not tell).
/// Returns the first sequence assigned to `blocks`.
///
/// Errors: [`Error::OperationState`] when the operation is not Uploading (cleanup won: the
/// caller joins cleanup instead of sending); [`Error::InvalidArgument`] (more than
/// [`MAX_LEDGER_ROWS_PER_COMMAND`] rows either way, a bad row, an unknown sequence); codec and
/// storage errors.
pub fn stage(
    shard: &MetaShard,
    id: &OperationId,
    blocks: &[StagedBlock],
    marks: &[(u64, StagedProviderState)],
) -> Result<u64> {
    if blocks.len() > MAX_LEDGER_ROWS_PER_COMMAND || marks.len() > MAX_LEDGER_ROWS_PER_COMMAND {
        return Err(Error::invalid("too many staged rows for one command"));
    }
    for b in blocks {
        validate_block(b)?;
    }
    let key = op_key(shard, id);
    run(shard, |snap, version| {
        let (bytes, op) = read_uploading(snap, &key, id, "staging needs an Uploading operation")?;
        let start = op.staged_object_count;
        let mut next = op.clone();
        next.staged_object_count = start.saturating_add(blocks.len() as u64);
        let mut cmd = command(
            shard,
            version,
            ledger_digest(b"stage", id, &start.to_be_bytes()),
            id,
            PublishPhase::Uploading,
        )?;
        cmd.predicates
            .push(Predicate::equals(Family::Operation, key.clone(), bytes));
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            Operation::Publish(next).encode(),
        ));
        for (i, b) in blocks.iter().enumerate() {
            cmd.mutations.push(Mutation::put(
                Family::StagedObject,
                staged_key(shard, id, start.saturating_add(i as u64)),
                staged_row(op.artifact_revision_id, b).encode(),
            ));
        }
        push_marks(shard, snap, id, &op, marks, &mut cmd)?;
        Ok(Step::Command(Box::new(cmd), start))
    })
}

/// Records the provider's multipart upload id on StagedObject row `sequence` of an Uploading
/// operation, in one command predicating the operation row — called by the uploader after the
/// provider created the upload and before its first part is sent, so a process killed mid-upload
/// leaves the upload owned by the ledger and cleanup can abort it (docs/metadata-format.md, "Upload And
/// Append": the ledger owns "all object keys, multipart ids, lengths, and digests").
///
/// Errors: [`Error::OperationState`] when the operation is not Uploading (cleanup won: the caller
/// must not send the parts); [`Error::InvalidArgument`] for an unknown sequence, a row of an
/// earlier attempt, an empty or over-long id (> 1024 bytes) or a row that already records
/// another id; codec and storage errors.
pub fn record_upload_id(
    shard: &MetaShard,
    id: &OperationId,
    sequence: u64,
    upload_id: &str,
) -> Result<()> {
    if upload_id.is_empty() || upload_id.len() > publish::MAX_OBJECT_KEY_BYTES {
        return Err(Error::invalid(
            "a multipart upload id must be 1..=1024 bytes",
        ));
    }
    let key = op_key(shard, id);
    run(shard, |snap, version| {
        let (bytes, op) =
            read_uploading(snap, &key, id, "an upload id needs an Uploading operation")?;
        let k = staged_key(shard, id, sequence);
        let Some(row_bytes) = snap.get(Family::StagedObject, &k)? else {
            return Err(Error::invalid(format!(
                "no staged object at sequence {sequence}"
            )));
        };
        let mut row = StagedObject::decode(&row_bytes)?;
        if row.artifact_revision_id != op.artifact_revision_id {
            return Err(Error::invalid(format!(
                "staged object {sequence} belongs to an earlier attempt"
            )));
        }
        match row.upload_id.as_deref() {
            Some(existing) if existing == upload_id => return Ok(Step::Done(())),
            Some(_) => {
                return Err(Error::invalid(format!(
                    "staged object {sequence} already records another upload id"
                )))
            }
            None => {}
        }
        row.upload_id = Some(upload_id.to_owned());
        row.provider_state = StagedProviderState::Uploading;
        let mut cmd = command(
            shard,
            version,
            ledger_digest(b"upload-id", id, &sequence.to_be_bytes()),
            id,
            PublishPhase::Uploading,
        )?;
        cmd.predicates
            .push(Predicate::equals(Family::Operation, key.clone(), bytes));
        cmd.predicates.push(Predicate::equals(
            Family::StagedObject,
            k.clone(),
            row_bytes,
        ));
        cmd.mutations
            .push(Mutation::put(Family::StagedObject, k, row.encode()));
        Ok(Step::Command(Box::new(cmd), ()))
    })
}

/// Finalize CAS: Uploading -> Finalizing in one command that seals the body length (bytes) and
/// `sha256:` digest and records the provider states `marks` (at most
/// [`MAX_LEDGER_ROWS_PER_COMMAND`]; mark earlier ones with [`stage`] and no new blocks).
/// Returns the Finalizing record. Only one of this CAS and [`abort`]'s Uploading -> Aborting
/// CAS can win.
///
/// Errors: [`Error::OperationState`] when the operation is not Uploading;
/// [`Error::InvalidArgument`]; codec and storage errors.
pub fn finalize(
    shard: &MetaShard,
    id: &OperationId,
    expected_length: u64,
    expected_digest_uri: &str,
    marks: &[(u64, StagedProviderState)],
) -> Result<PublishOperation> {
    validate_digest_uri("body digest", expected_digest_uri)?;
    if marks.len() > MAX_LEDGER_ROWS_PER_COMMAND {
        return Err(Error::invalid("too many staged rows for one command"));
    }
    let key = op_key(shard, id);
    run(shard, |snap, version| {
        let (bytes, op) =
            read_uploading(snap, &key, id, "finalization needs an Uploading operation")?;
        let mut next = op.clone();
        next.phase = PublishPhase::Finalizing;
        next.expected_length = expected_length;
        next.expected_digest_uri = Some(expected_digest_uri.to_owned());
        let mut cmd = command(
            shard,
            version,
            ledger_digest(b"finalize", id, expected_digest_uri.as_bytes()),
            id,
            PublishPhase::Finalizing,
        )?;
        cmd.predicates
            .push(Predicate::equals(Family::Operation, key.clone(), bytes));
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            Operation::Publish(next.clone()).encode(),
        ));
        push_marks(shard, snap, id, &op, marks, &mut cmd)?;
        Ok(Step::Command(Box::new(cmd), next))
    })
}

/// The own blocks of the current attempt (rows of `op`'s revision) in sequence order.
pub fn own_rows(op: &PublishOperation, rows: &[(u64, StagedObject)]) -> Vec<(u64, StagedObject)> {
    rows.iter()
        .filter(|(_, r)| r.artifact_revision_id == op.artifact_revision_id)
        .cloned()
        .collect()
}

/// Every ArtifactManifest row of `rev` at `snap`, in object-index order.
fn manifest_at<S: Snapshot>(
    snap: &S,
    shard: &MetaShard,
    rev: &ArtifactRevisionId,
) -> Result<Vec<crate::codec::ManifestRow>> {
    let prefix = crate::codec::artifact_manifest::prefix(&shard.root_id(), rev);
    let mut out = Vec::new();
    snap.for_each_row(
        Family::ArtifactManifest,
        &prefix,
        "artifact_manifest",
        |key, value| {
            let idx = crate::codec::artifact_manifest::decode_key_index(key)?;
            out.push(crate::codec::ManifestRow::decode_value(idx, value)?);
            Ok(())
        },
    )?;
    Ok(out)
}

/// Rebuilds the publication request a Finalizing operation froze: the base's first
/// `row_count` ArtifactManifest rows, then one row per own staged object (physical object index
/// `base_row_count + i`, contiguous logical offsets).
fn frozen_request<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    id: &OperationId,
    op: &PublishOperation,
) -> Result<PublishRequest> {
    let mut manifest = Vec::new();
    let mut offset = 0u64;
    if let Some(base) = &op.base {
        let rows = manifest_at(snap, shard, &base.revision)?;
        let take = usize::try_from(base.row_count)
            .map_err(|_| Error::codec("operation", "base row count overflows"))?;
        if rows.len() < take {
            return Err(Error::RevisionUnavailable {
                revision: base.revision.to_hex(),
                reason: "the base manifest is shorter than recorded".into(),
            });
        }
        manifest.extend(rows.into_iter().take(take));
        offset = manifest.last().map_or(0, |r: &crate::codec::ManifestRow| {
            r.logical_offset.saturating_add(r.length)
        });
        if offset != base.logical_size {
            return Err(Error::codec(
                "operation",
                "base rows do not cover the base size",
            ));
        }
    }
    let ledger = ledger_at(shard, snap, id)?;
    for (i, (_, row)) in own_rows(op, &ledger).into_iter().enumerate() {
        let index = op.base.map_or(0, |b| b.row_count).saturating_add(i as u64);
        manifest.push(crate::codec::ManifestRow {
            object_index: index,
            physical_owner_revision: op.artifact_revision_id,
            physical_object_index: index,
            object_key: row.object_key,
            logical_offset: offset,
            object_offset: 0,
            length: row.expected_length,
            digest_uri: row.expected_digest_uri,
            append_segment: None,
        });
        offset = offset
            .checked_add(row.expected_length)
            .ok_or_else(|| Error::codec("staged_object", "lengths overflow"))?;
    }
    let Some(digest) = op.expected_digest_uri.clone() else {
        return Err(Error::codec(
            "operation",
            "Finalizing without a sealed digest",
        ));
    };
    Ok(PublishRequest {
        request_id: final_request_id(id),
        workbench_id: op.workbench_id.clone(),
        path: op.path.clone(),
        condition: path_condition(op.condition),
        revision_id: op.artifact_revision_id,
        logical_size: op.expected_length,
        body_digest_uri: digest,
        content_type: op.content_type.clone(),
        producer: op.producer.clone(),
        manifest_id: op.manifest_id.clone(),
        manifest,
        dependency_depth: op.dependency_depth,
        index_fields: index_projection::decode_projection(&op.index_projection)?,
    })
}

/// The objects a Finalizing (or any) operation's final publication would reference as its own:
/// `(object_key, length, digest_uri)` of the current attempt, in object-index order. Recovery
/// verifies these before resuming a Finalizing operation.
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn own_objects(shard: &MetaShard, id: &OperationId) -> Result<Vec<(String, u64, String)>> {
    let Some(op) = get(shard, id)? else {
        return Ok(Vec::new());
    };
    Ok(own_rows(&op, &ledger(shard, id)?)
        .into_iter()
        .map(|(_, r)| (r.object_key, r.expected_length, r.expected_digest_uri))
        .collect())
}

/// The final publication: the publication command of [`crate::ops::publish`] built from the
/// frozen request, extended so the same single command moves Finalizing -> Published and stores
/// the result on the operation. A Published operation returns its stored receipt
/// (`idempotent_replay = true`).
///
/// Errors: [`Error::OperationState`] when the operation is neither Finalizing nor Published;
/// the publication errors of [`crate::ops::publish::publish`] ([`Error::PathAlreadyExists`],
/// [`Error::GenerationConflict`], [`Error::WorkspaceNotFound`], [`Error::RevisionUnavailable`],
/// …) — the operation then stays Finalizing and the caller takes it over with [`abort`].
pub fn publish_operation(shard: &MetaShard, id: &OperationId) -> Result<PublishReceipt> {
    let key = op_key(shard, id);
    super::sequenced_retrying(shard, |seq| {
        seq.prepare_write()?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence)?;
        let Some((bytes, op)) = read_op(&snap, &key)? else {
            return Err(state_error(
                id,
                None,
                "publication needs a Finalizing operation",
            ));
        };
        if op.phase == PublishPhase::Published {
            return published_receipt_at(shard, &snap, id)?.ok_or_else(|| {
                Error::codec("operation", "Published operation without its receipt")
            });
        }
        if op.phase != PublishPhase::Finalizing {
            return Err(state_error(
                id,
                Some(op.phase),
                "publication needs a Finalizing operation",
            ));
        }
        let req = frozen_request(shard, &snap, id, &op)?;
        publish::validate_request(&req)?;
        let digest = publish::command_digest(&req);
        let binding = OperationBinding {
            key: key.clone(),
            bytes,
            op,
        };
        let planned = plan_with(shard, &snap, &req, digest, Some(&binding))?;
        drop(snap);
        let out = match planned {
            Planned::Replay(out) => *out,
            Planned::Command(mut cmd) => {
                // Published is terminal: the registry row goes in the publication command.
                cmd.mutations.push(unregister(id));
                seq.execute(*cmd)?
            }
        };
        publish::receipt(out)
    })
}

/// Abort claim: CAS Uploading -> Aborting (the cleanup side of the race with [`finalize`]'s
/// Uploading -> Finalizing CAS; exactly one wins). The record stores a failed result
/// (`Aborted`, `reason`). An operation already Aborting, Cleaning, Quarantined or Cleaned is
/// returned unchanged.
///
/// Errors: [`Error::OperationState`] when the operation is absent, Finalizing (use
/// [`take_over`]) or Published; codec and storage errors.
pub fn abort(shard: &MetaShard, id: &OperationId, reason: &str) -> Result<PublishOperation> {
    claim(shard, id, reason, false)
}

/// Takeover by cleanup: like [`abort`], but a Finalizing operation is also claimed
/// (Finalizing -> Aborting) — only with fenced proof that no publication exists: the command
/// predicates the Finalizing row unchanged, the final request's CommandDedupe row Absent and the
/// new ArtifactRevision Absent, so it and the publication command (which rewrites the same row)
/// have exactly one winner.
///
/// Errors: [`Error::OperationState`] when the operation is absent or Published (or its
/// publication exists); codec and storage errors.
pub fn take_over(shard: &MetaShard, id: &OperationId, reason: &str) -> Result<PublishOperation> {
    claim(shard, id, reason, true)
}

fn claim(
    shard: &MetaShard,
    id: &OperationId,
    reason: &str,
    takeover: bool,
) -> Result<PublishOperation> {
    let key = op_key(shard, id);
    let root = shard.root_id();
    run(shard, |snap, version| {
        let Some((bytes, op)) = read_op(snap, &key)? else {
            return Err(state_error(
                id,
                None,
                "only an unpublished operation can be aborted",
            ));
        };
        match op.phase {
            PublishPhase::Aborting
            | PublishPhase::Cleaning
            | PublishPhase::Quarantined
            | PublishPhase::Cleaned => return Ok(Step::Done(op)),
            PublishPhase::Published => {
                return Err(state_error(
                    id,
                    Some(op.phase),
                    "a published operation cannot be aborted",
                ))
            }
            PublishPhase::Finalizing if !takeover => {
                return Err(state_error(
                    id,
                    Some(op.phase),
                    "finalization won the CAS; only a takeover with proof can abort it",
                ))
            }
            PublishPhase::Uploading | PublishPhase::Finalizing => {}
        }
        let mut cmd = command(
            shard,
            version,
            ledger_digest(b"abort", id, reason.as_bytes()),
            id,
            PublishPhase::Aborting,
        )?;
        if op.phase == PublishPhase::Finalizing {
            let dedupe = command_dedupe::key(&root, &final_request_id(id));
            let rev = artifact_revision::key(&root, &op.artifact_revision_id);
            if snap.get(Family::CommandDedupe, &dedupe)?.is_some()
                || snap.get(Family::ArtifactRevision, &rev)?.is_some()
            {
                return Err(state_error(
                    id,
                    Some(op.phase),
                    "its publication exists; it cannot be taken over by cleanup",
                ));
            }
            cmd.predicates
                .push(Predicate::absent(Family::CommandDedupe, dedupe));
            cmd.predicates
                .push(Predicate::absent(Family::ArtifactRevision, rev));
        }
        let mut next = op.clone();
        next.phase = PublishPhase::Aborting;
        next.result = OperationResult::Failed(TerminalError {
            code: ABORTED_CODE.to_owned(),
            message: reason.to_owned(),
        });
        cmd.predicates
            .push(Predicate::equals(Family::Operation, key.clone(), bytes));
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            Operation::Publish(next.clone()).encode(),
        ));
        Ok(Step::Command(Box::new(cmd), next))
    })
}

/// One cleanup command: predicate the row, apply `edit` to the selected ledger rows and the
/// operation, and write them.
fn cleanup_step(
    shard: &MetaShard,
    id: &OperationId,
    step: &[u8],
    rows: &[(u64, StagedCleanupState)],
    edit: impl Fn(&mut PublishOperation),
) -> Result<PublishOperation> {
    let key = op_key(shard, id);
    run(shard, |snap, version| {
        let Some((bytes, op)) = read_op(snap, &key)? else {
            return Err(state_error(id, None, "cleanup needs an aborted operation"));
        };
        if !matches!(
            op.phase,
            PublishPhase::Aborting | PublishPhase::Cleaning | PublishPhase::Quarantined
        ) {
            return Err(state_error(
                id,
                Some(op.phase),
                "cleanup needs an Aborting, Cleaning or Quarantined operation",
            ));
        }
        let mut next = op.clone();
        edit(&mut next);
        let mut cmd = command(shard, version, ledger_digest(step, id, &[]), id, next.phase)?;
        cmd.predicates
            .push(Predicate::equals(Family::Operation, key.clone(), bytes));
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            Operation::Publish(next.clone()).encode(),
        ));
        if is_terminal(next.phase) {
            // Cleaned: the registry row goes in the same command.
            cmd.mutations.push(unregister(id));
        }
        for (seq, state) in rows {
            let k = staged_key(shard, id, *seq);
            let Some(b) = snap.get(Family::StagedObject, &k)? else {
                return Err(Error::codec("staged_object", format!("row {seq} vanished")));
            };
            let mut row = StagedObject::decode(&b)?;
            row.cleanup_state = *state;
            if *state == StagedCleanupState::Deleted {
                row.provider_state = match row.provider_state {
                    StagedProviderState::Uploaded | StagedProviderState::Ambiguous => {
                        row.provider_state
                    }
                    _ => StagedProviderState::Aborted,
                };
            }
            cmd.mutations
                .push(Mutation::put(Family::StagedObject, k, row.encode()));
        }
        Ok(Step::Command(Box::new(cmd), next))
    })
}

/// Cleanup of an aborted operation, driven by its ledger only: Aborting -> Cleaning; then, in
/// batches of at most [`MAX_LEDGER_ROWS_PER_COMMAND`] rows from `cleanup_next_sequence`, the rows
/// are marked DeletePending (one command), `delete` is called for each (the caller issues the
/// provider DELETE of exactly that key) and the outcomes are recorded (one command: Deleted, or
/// Quarantined with evidence); finally Cleaning -> Cleaned, or -> Quarantined when any row is
/// quarantined. For a Quarantined operation (`reconcile`), `delete` is called for each
/// Quarantined row instead and the operation becomes Cleaned once every row is Deleted.
/// A [`DeleteOutcome::Failed`] stops the pass with the operation left Cleaning (or
/// Quarantined); the next pass resumes. Returns the record after the pass.
///
/// Errors: [`Error::OperationState`] when the operation is not Aborting, Cleaning or
/// Quarantined (Cleaned is returned unchanged); codec and storage errors.
pub fn clean(
    shard: &MetaShard,
    id: &OperationId,
    delete: &mut dyn FnMut(&StagedObject) -> DeleteOutcome,
) -> Result<PublishOperation> {
    let Some(mut op) = get(shard, id)? else {
        return Err(state_error(id, None, "cleanup needs an aborted operation"));
    };
    if op.phase == PublishPhase::Cleaned {
        return Ok(op);
    }
    if op.phase == PublishPhase::Quarantined {
        return reconcile(shard, id, delete);
    }
    if op.phase == PublishPhase::Aborting {
        op = cleanup_step(shard, id, b"cleaning", &[], |o| {
            o.phase = PublishPhase::Cleaning;
        })?;
    }
    if op.phase != PublishPhase::Cleaning {
        return Err(state_error(
            id,
            Some(op.phase),
            "cleanup needs an aborted operation",
        ));
    }
    let rows = ledger(shard, id)?;
    let pending: Vec<&(u64, StagedObject)> = rows
        .iter()
        .filter(|(seq, _)| *seq >= op.cleanup_next_sequence)
        .collect();
    for batch in pending.chunks(MAX_LEDGER_ROWS_PER_COMMAND) {
        let marks: Vec<(u64, StagedCleanupState)> = batch
            .iter()
            .filter(|(_, r)| r.cleanup_state == StagedCleanupState::Owned)
            .map(|(seq, _)| (*seq, StagedCleanupState::DeletePending))
            .collect();
        if !marks.is_empty() {
            cleanup_step(shard, id, b"delete-pending", &marks, |_| {})?;
        }
        let mut settled = Vec::new();
        let mut evidence = Vec::new();
        let mut failed = None;
        for (seq, row) in batch.iter() {
            if row.cleanup_state == StagedCleanupState::Deleted {
                settled.push((*seq, StagedCleanupState::Deleted));
                continue;
            }
            match delete(row) {
                DeleteOutcome::Deleted => settled.push((*seq, StagedCleanupState::Deleted)),
                DeleteOutcome::Quarantined(why) => {
                    settled.push((*seq, StagedCleanupState::Quarantined));
                    evidence.push(format!("object {seq}: {why}"));
                }
                DeleteOutcome::Failed(why) => {
                    failed = Some(why);
                    break;
                }
            }
        }
        let next_seq = settled.last().map(|(s, _)| s.saturating_add(1));
        op = cleanup_step(shard, id, b"settle", &settled, |o| {
            if let Some(n) = next_seq {
                o.cleanup_next_sequence = o.cleanup_next_sequence.max(n);
            }
            if !evidence.is_empty() {
                let mut all = o.quarantine_evidence.take().unwrap_or_default();
                for e in &evidence {
                    if !all.is_empty() {
                        all.push_str("; ");
                    }
                    all.push_str(e);
                }
                o.quarantine_evidence = Some(all);
            }
        })?;
        if failed.is_some() {
            return Ok(op);
        }
    }
    cleanup_step(shard, id, b"cleaned", &[], |o| {
        o.cleanup_next_sequence = o.staged_object_count;
        o.phase = if o.quarantine_evidence.is_some() {
            PublishPhase::Quarantined
        } else {
            PublishPhase::Cleaned
        };
    })
}

/// The reconciliation pass of a Quarantined operation (see [`clean`]).
fn reconcile(
    shard: &MetaShard,
    id: &OperationId,
    delete: &mut dyn FnMut(&StagedObject) -> DeleteOutcome,
) -> Result<PublishOperation> {
    let rows = ledger(shard, id)?;
    let quarantined: Vec<&(u64, StagedObject)> = rows
        .iter()
        .filter(|(_, r)| r.cleanup_state != StagedCleanupState::Deleted)
        .collect();
    let mut remaining = false;
    for batch in quarantined.chunks(MAX_LEDGER_ROWS_PER_COMMAND) {
        let mut settled = Vec::new();
        for (seq, row) in batch.iter() {
            match delete(row) {
                DeleteOutcome::Deleted => settled.push((*seq, StagedCleanupState::Deleted)),
                DeleteOutcome::Quarantined(_) | DeleteOutcome::Failed(_) => remaining = true,
            }
        }
        if !settled.is_empty() {
            cleanup_step(shard, id, b"reconcile", &settled, |_| {})?;
        }
    }
    if remaining {
        return get(shard, id)?.ok_or_else(|| state_error(id, None, "reconciliation"));
    }
    cleanup_step(shard, id, b"reconciled", &[], |o| {
        o.phase = PublishPhase::Cleaned;
        if let Some(e) = o.quarantine_evidence.take() {
            o.quarantine_evidence = Some(format!("{e}; reconciled: every object confirmed absent"));
        }
    })
}
