//! Begin (`(none) -> Uploading`) and restart: the operation and its first ledger rows before any byte is sent.

use super::ledger::{
    command, ledger_digest, op_key, read_op, register, run, staged_key, state_error,
};
use super::state::{BeginOutcome, PublishIntent, StagedBlock, MAX_LEDGER_ROWS_PER_COMMAND};
use crate::codec::{
    Operation, OperationResult, PublishCondition, PublishOperation, PublishPhase,
    StagedCleanupState, StagedObject, StagedProviderState,
};
use crate::command::projection::{self as index_projection};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::ArtifactRevisionId;
use crate::ops::publish::{self, validate_digest_uri, PathCondition};
use crate::ops::Step;
use crate::shard::MetaShard;

pub(super) fn validate_block(b: &StagedBlock) -> Result<()> {
    if b.object_key.is_empty() || b.object_key.len() > publish::MAX_OBJECT_KEY_BYTES {
        return Err(Error::invalid("staged object_key must be 1..=1024 bytes"));
    }
    if b.length == 0 {
        return Err(Error::invalid("staged objects are never empty"));
    }
    validate_digest_uri("staged object digest_uri", &b.digest_uri)
}

pub(super) fn validate_intent(intent: &PublishIntent) -> Result<()> {
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

pub(super) fn condition_of(c: PathCondition) -> PublishCondition {
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

pub(super) fn path_condition(c: PublishCondition) -> PathCondition {
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

pub(super) fn fresh_operation(
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
pub(super) fn validate_begin(intent: &PublishIntent, first: &[StagedBlock]) -> Result<()> {
    validate_intent(intent)?;
    if first.len() > MAX_LEDGER_ROWS_PER_COMMAND {
        return Err(Error::invalid("too many staged rows for one command"));
    }
    first.iter().try_for_each(validate_block)
}

pub(super) fn staged_row(revision: ArtifactRevisionId, b: &StagedBlock) -> StagedObject {
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
