//! Executes one [`MetadataCommand`] as exactly one checked atomic write.
//!
//! Order of checks:
//! 1. request-id replay: a point read of CommandDedupe(request_id) at the latest version — the
//!    same digest returns the stored result (`idempotent_replay = true`) before any fence, a
//!    different digest is [`Error::RequestReplayMismatch`];
//! 2. the command header must match this shard handle (schema id, root, logical shard, placement
//!    generation, owner epoch) — else [`Error::Fenced`];
//! 3. one batch carrying: `System("schema")` Equals the marker, RootFence(root) Equals the active
//!    fence row, `System("owner_epoch")` Equals this handle's epoch, the read-version fence,
//!    CommandDedupe(request_id) Absent, every command predicate; then the mutations, the
//!    ChangeEvent rows and the CommandDedupe row.
//!
//! A stale read version is [`Error::ReadVersionConflict`] (`attempts: 1`; the ops layer rebuilds
//! and retries) returned once the conflicting commit is readable (bounded wait, see
//! [`crate::store::TxnStore::wait_for_version`]). A failed fence predicate is [`Error::Fenced`]; a failed CommandDedupe predicate
//! (a concurrent first execution) or command predicate is [`Error::CommandPredicateFailed`]; the
//! ops layer re-reads and reports the precise error. Nothing is applied on any failure.

use super::predicate::{Mutation, Predicate};
use super::{
    MetadataCommand, MAX_COMMAND_EVENTS, MAX_COMMAND_MUTATIONS, MAX_COMMAND_PREDICATES,
    MAX_MANIFEST_ROWS,
};
use crate::codec::system::{encode_owner_epoch, KEY_OWNER_EPOCH, KEY_SCHEMA, SCHEMA_ID};
use crate::codec::{change_event, command_dedupe, root_fence, CommandDedupe, CommandResult};
use crate::error::{Error, Result};
use crate::ids::{LogicalShardId, RootId};
use crate::schema::{marker_bytes, Family};
use crate::store::{CheckedWrite, Snapshot, TxnStore, WriteFailure};

/// The identity and fence rows a shard handle validates every command against.
#[derive(Debug, Clone)]
pub struct ShardFence {
    /// The shard's root.
    pub root_id: RootId,
    /// The shard's logical shard.
    pub logical_shard_id: LogicalShardId,
    /// Installed placement generation.
    pub placement_generation: u64,
    /// This handle's owner epoch.
    pub owner_epoch: u64,
    /// Encoded RootFence row the batch must find.
    pub root_fence_bytes: Vec<u8>,
}

/// Result of executing a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutcome {
    /// Commit version that applied the command (the original one for a replay).
    pub commit_version: u64,
    /// The deterministic result.
    pub result: CommandResult,
    /// True when the stored result of an earlier identical request was returned.
    pub idempotent_replay: bool,
}

/// Looks up the stored outcome for `request_id`. `Ok(None)` when the request is new.
///
/// Errors: [`Error::RequestReplayMismatch`] if the id was used with another digest;
/// [`Error::Codec`] for a corrupt row; storage errors.
pub fn replay_lookup<S: Snapshot>(
    snap: &S,
    root: &RootId,
    request_id: &crate::ids::RequestId,
    digest: &[u8; 32],
) -> Result<Option<CommandOutcome>> {
    let Some(bytes) = snap.get(
        Family::CommandDedupe,
        &command_dedupe::key(root, request_id),
    )?
    else {
        return Ok(None);
    };
    let stored = CommandDedupe::decode(&bytes)?;
    if &stored.command_digest != digest {
        return Err(Error::RequestReplayMismatch);
    }
    Ok(Some(CommandOutcome {
        commit_version: stored.commit_version,
        result: stored.result,
        idempotent_replay: true,
    }))
}

/// Executes `cmd` against `store` under `fence` (see the module docs).
pub fn execute<S: TxnStore>(
    store: &S,
    fence: &ShardFence,
    cmd: MetadataCommand,
) -> Result<CommandOutcome> {
    if let Some(out) = replay_lookup(
        &store.snapshot(),
        &cmd.root_id,
        &cmd.request_id,
        &cmd.command_digest,
    )? {
        return Ok(out);
    }
    if cmd.schema_id != SCHEMA_ID
        || cmd.root_id != fence.root_id
        || cmd.logical_shard_id != fence.logical_shard_id
        || cmd.placement_generation != fence.placement_generation
        || cmd.owner_epoch != fence.owner_epoch
    {
        return Err(Error::Fenced {
            reason: "command header does not match the shard identity".into(),
        });
    }
    if cmd.predicates.len() > MAX_COMMAND_PREDICATES
        || cmd.bounded_mutations() > MAX_COMMAND_MUTATIONS
        || cmd.mutations.len() - cmd.bounded_mutations() > MAX_MANIFEST_ROWS
        || cmd.event_projection.len() > MAX_COMMAND_EVENTS
    {
        return Err(Error::invalid(
            "metadata command exceeds its predicate/mutation/event bounds",
        ));
    }
    let commit_version = cmd
        .read_version
        .checked_add(1)
        .ok_or_else(|| Error::invalid("read version exhausted"))?;
    let root = cmd.root_id;
    let dedupe_key = command_dedupe::key(&root, &cmd.request_id);

    let mut predicates = Vec::with_capacity(cmd.predicates.len() + 4);
    predicates.push(Predicate::equals(
        Family::System,
        KEY_SCHEMA.to_vec(),
        marker_bytes(),
    ));
    predicates.push(Predicate::equals(
        Family::RootFence,
        root_fence::key(&root),
        fence.root_fence_bytes.clone(),
    ));
    predicates.push(Predicate::equals(
        Family::System,
        KEY_OWNER_EPOCH.to_vec(),
        encode_owner_epoch(fence.owner_epoch),
    ));
    predicates.push(Predicate::absent(Family::CommandDedupe, dedupe_key.clone()));
    predicates.extend(cmd.predicates);

    let mut mutations = cmd.mutations;
    for (seq, event) in cmd.event_projection.iter().enumerate() {
        let seq = u32::try_from(seq).map_err(|_| Error::invalid("too many events"))?;
        mutations.push(Mutation::put(
            Family::ChangeEvent,
            change_event::key(&root, commit_version, seq),
            event.encode(),
        ));
    }
    let dedupe = CommandDedupe {
        command_digest: cmd.command_digest,
        result: cmd.result.clone(),
        commit_version,
        recovery_lsn: None,
    };
    mutations.push(Mutation::put(
        Family::CommandDedupe,
        dedupe_key,
        dedupe.encode(),
    ));

    let write = CheckedWrite {
        read_version: Some(cmd.read_version),
        predicates,
        mutations,
    };
    match store.write(write) {
        Ok(v) if v == commit_version => Ok(CommandOutcome {
            commit_version,
            result: cmd.result,
            idempotent_replay: false,
        }),
        Ok(v) => Err(Error::Fenced {
            reason: format!("commit version {v} is not read version + 1 ({commit_version})"),
        }),
        Err(WriteFailure::ReadVersion { actual, .. }) => {
            // The conflicting commit may still be becoming durable; let it become readable so
            // the rebuilt command sees it.
            store.wait_for_version(actual);
            Err(Error::ReadVersionConflict { attempts: 1 })
        }
        Err(WriteFailure::Predicate { family, .. }) => match family {
            Some(Family::System) | Some(Family::RootFence) => Err(Error::Fenced {
                reason: "schema marker, RootFence or owner epoch changed; reopen the store".into(),
            }),
            _ => {
                // The ops layer verified every predicate at `read_version`, so a failure means
                // a newer commit exists; wait until it is readable before the re-read.
                store.wait_for_version(commit_version);
                Err(Error::CommandPredicateFailed)
            }
        },
        Err(WriteFailure::Other(e)) => Err(e),
    }
}
