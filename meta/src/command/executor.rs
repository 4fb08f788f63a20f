//! Executes one [`MetadataCommand`] as exactly one checked atomic write (docs/metadata-format.md, "Metadata
//! Command").
//!
//! Order of checks, each against the newest readable snapshot and then again, atomically, at the
//! holt commit boundary:
//! 0. shape: the command's predicate / mutation / event counts are within their fixed bounds
//!    ([`Error::InvalidArgument`] otherwise; nothing is read), and it writes no reserved tree
//!    except the System pending-operation registry rows ([`crate::codec::system`]) and setting
//!    rows ([`crate::codec::setting`]);
//! 1. schema marker and RootFence: `schema_id` is `nokv_workspace`, `System("schema")` holds the
//!    exact marker, the command's root/logical shard/placement generation equal this handle's,
//!    and `RootFence(root)` is `Active` with that logical shard and placement generation —
//!    [`Error::Fenced`] otherwise;
//! 2. owner epoch: the command's `owner_epoch` equals this handle's and the persisted
//!    `System("owner_epoch")` — a stale (or future) epoch is [`Error::Fenced`] naming both;
//! 3. request-id replay: CommandDedupe(request_id) with the same digest returns the stored
//!    result (`idempotent_replay = true`) *before* the read-version fence, so a response-loss
//!    retry succeeds even after other commits; a different digest is
//!    [`Error::RequestReplayMismatch`];
//! 4. read-version fence: `read_version` must equal the shard's commit clock (the snapshot
//!    version), so the commit version is `read_version + 1` — else
//!    [`Error::ReadVersionConflict`] (`attempts: 1`; the ops layer rebuilds);
//! 5. every command predicate, evaluated by holt inside the batch; a failed predicate applies
//!    nothing ([`Error::CommandPredicateFailed`]).
//!
//! The batch carries: Equals on the marker, the RootFence row and the owner epoch, the
//! read-version expectation, CommandDedupe(request_id) Absent, Equals on the System recovery
//! tail, every command predicate; then the command mutations, its ChangeEvent rows
//! (`root | commit_version | sequence` from 0), the CommandDedupe row (v2, bound to the recovery
//! LSN), the RecoveryOutbox header and chunk rows and the new System recovery tail (see
//! [`crate::outbox`]). One holt batch; nothing else is written.
//!
//! After a read-version conflict at commit the executor waits (bounded, see
//! [`TxnStore::wait_for_version`]) until the conflicting commit is readable and re-runs the
//! replay lookup, so a concurrent first execution of the same request id also returns the stored
//! result; otherwise the conflict is returned for the caller to rebuild.

use super::metadata::{
    MetadataCommand, MAX_COMMAND_EVENTS, MAX_COMMAND_MUTATIONS, MAX_COMMAND_PREDICATES,
    MAX_INDEX_MUTATIONS, MAX_MANIFEST_ROWS,
};
use crate::codec::system::marker_bytes;
use crate::codec::system::{
    decode_owner_epoch, is_pending_operation_key, RecoveryTail, KEY_OWNER_EPOCH, KEY_RECOVERY_TAIL,
    KEY_SCHEMA, SCHEMA_ID,
};
use crate::codec::{
    change_event, command_dedupe, root_fence, CommandDedupe, RootActivationState, RootFence,
};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{LogicalShardId, RootId};
use crate::outbox::{self, RecoveryEntry};
use crate::store::predicate::{Mutation, Predicate};
use crate::store::{CheckedWrite, PendingWrite, Snapshot, TxnStore, WriteFailure};

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
    pub result: crate::codec::CommandResult,
    /// True when the stored result of an earlier identical request was returned.
    pub idempotent_replay: bool,
    /// Recovery LSN of the command's RecoveryOutbox record (the original one for a replay;
    /// `None` only for a replayed row written before the outbox existed).
    pub recovery_lsn: Option<u64>,
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
        recovery_lsn: stored.recovery_lsn,
    }))
}

fn fenced(reason: impl Into<String>) -> Error {
    Error::Fenced {
        reason: reason.into(),
    }
}

/// Step 0: fixed bounds.
fn check_bounds(cmd: &MetadataCommand) -> Result<()> {
    let bounded = cmd.bounded_mutations();
    if cmd.predicates.len() > MAX_COMMAND_PREDICATES
        || bounded > MAX_COMMAND_MUTATIONS
        || cmd.family_mutations(Family::ArtifactManifest) > MAX_MANIFEST_ROWS
        || cmd.family_mutations(Family::SecondaryIndex) > MAX_INDEX_MUTATIONS
        || cmd.event_projection.len() > MAX_COMMAND_EVENTS
    {
        return Err(Error::invalid(
            "metadata command exceeds its predicate/mutation/event bounds",
        ));
    }
    // The reserved trees are derived by the executor, except the pending-operation registry
    // rows of the System tree, which a command writes together with the Operation row they
    // mirror (see [`crate::codec::system`]).
    if let Some(m) = cmd.mutations.iter().find(|m| match m {
        Mutation::Put {
            family: Family::System,
            key,
            ..
        }
        | Mutation::Delete {
            family: Family::System,
            key,
        } => !is_pending_operation_key(key) && !crate::codec::setting::is_setting_key(key),
        m => m.family() == Family::RecoveryOutbox,
    }) {
        return Err(Error::invalid(format!(
            "metadata commands may not write the reserved {} tree",
            m.family().name()
        )));
    }
    Ok(())
}

/// The fence rows read at the snapshot (steps 1 and 2), returned for the batch predicates.
struct FenceRows {
    root_fence: Vec<u8>,
    owner_epoch: Vec<u8>,
    tail: RecoveryTail,
}

/// The identity fields of a command header that steps 1 and 2 check.
struct Identity<'a> {
    schema_id: &'a str,
    root_id: RootId,
    logical_shard_id: LogicalShardId,
    placement_generation: u64,
    owner_epoch: u64,
}

impl<'a> Identity<'a> {
    fn of(cmd: &'a MetadataCommand) -> Self {
        Identity {
            schema_id: &cmd.schema_id,
            root_id: cmd.root_id,
            logical_shard_id: cmd.logical_shard_id,
            placement_generation: cmd.placement_generation,
            owner_epoch: cmd.owner_epoch,
        }
    }
}

/// Steps 1 and 2 for a command this handle would issue, against `snap`: operations run it before
/// their own request-id replay lookup so a fenced handle never serves a stored result.
///
/// Errors: [`Error::Fenced`]; codec and storage errors.
pub(crate) fn check_handle_fences<S: Snapshot>(snap: &S, fence: &ShardFence) -> Result<()> {
    let id = Identity {
        schema_id: SCHEMA_ID,
        root_id: fence.root_id,
        logical_shard_id: fence.logical_shard_id,
        placement_generation: fence.placement_generation,
        owner_epoch: fence.owner_epoch,
    };
    check_fences(snap, fence, &id).map(|_| ())
}

/// Steps 1 and 2 against `snap`.
fn check_fences<S: Snapshot>(
    snap: &S,
    fence: &ShardFence,
    cmd: &Identity<'_>,
) -> Result<FenceRows> {
    if cmd.schema_id != SCHEMA_ID {
        return Err(fenced(format!(
            "command schema id {:?} is not {SCHEMA_ID:?}",
            cmd.schema_id
        )));
    }
    match snap.get(Family::System, KEY_SCHEMA)? {
        Some(m) if m == marker_bytes() => {}
        _ => return Err(fenced("the schema marker changed; reopen the store")),
    }
    if cmd.root_id != fence.root_id || cmd.logical_shard_id != fence.logical_shard_id {
        return Err(fenced(format!(
            "command addresses root {} on logical shard {}; this shard serves root {} on {}",
            cmd.root_id, cmd.logical_shard_id, fence.root_id, fence.logical_shard_id
        )));
    }
    let root_fence = snap
        .get(Family::RootFence, &root_fence::key(&cmd.root_id))?
        .ok_or_else(|| fenced("no RootFence is installed for the root"))?;
    let installed = RootFence::decode(&root_fence)?;
    if installed.activation_state != RootActivationState::Active {
        return Err(fenced(format!(
            "RootFence is {:?}, not Active",
            installed.activation_state
        )));
    }
    if installed.logical_shard_id != cmd.logical_shard_id {
        return Err(fenced("RootFence names another logical shard"));
    }
    if installed.placement_generation != cmd.placement_generation
        || fence.placement_generation != cmd.placement_generation
    {
        return Err(fenced(format!(
            "stale placement generation: command carries {}, RootFence has {}",
            cmd.placement_generation, installed.placement_generation
        )));
    }
    if root_fence != fence.root_fence_bytes {
        return Err(fenced("RootFence changed since this handle opened"));
    }
    let owner_epoch = snap
        .get(Family::System, KEY_OWNER_EPOCH)?
        .ok_or_else(|| fenced("no owner epoch is recorded"))?;
    let current = decode_owner_epoch(&owner_epoch)?;
    if cmd.owner_epoch != current || fence.owner_epoch != current {
        return Err(fenced(format!(
            "stale owner epoch: command carries {}, handle holds {}, shard owner epoch is {current}",
            cmd.owner_epoch, fence.owner_epoch
        )));
    }
    let tail = snap
        .get(Family::System, KEY_RECOVERY_TAIL)?
        .ok_or_else(|| fenced("no System recovery tail is recorded"))?;
    Ok(FenceRows {
        root_fence,
        owner_epoch,
        tail: RecoveryTail::decode(&tail)?,
    })
}

/// The checked write `cmd` turns into (everything after the checks of steps 0–4), with the
/// recovery LSN it appends.
pub(crate) struct PlannedWrite {
    pub(crate) write: CheckedWrite,
    pub(crate) recovery_lsn: u64,
}

fn plan(cmd: &MetadataCommand, rows: FenceRows) -> Result<PlannedWrite> {
    let commit_version = cmd
        .read_version
        .checked_add(1)
        .ok_or_else(|| Error::invalid("read version exhausted"))?;
    let root = cmd.root_id;
    let dedupe_key = command_dedupe::key(&root, &cmd.request_id);
    let recovery_lsn = rows
        .tail
        .applied_lsn
        .checked_add(1)
        .ok_or_else(|| Error::invalid("recovery LSN space exhausted"))?;

    let mut mutations = Vec::with_capacity(cmd.mutations.len() + cmd.event_projection.len() + 4);
    mutations.extend(cmd.mutations.iter().cloned());
    for (seq, event) in cmd.event_projection.iter().enumerate() {
        let seq = u32::try_from(seq).map_err(|_| Error::invalid("too many events"))?;
        mutations.push(Mutation::put(
            Family::ChangeEvent,
            change_event::key(&root, commit_version, seq),
            event.encode(),
        ));
    }
    mutations.push(Mutation::put(
        Family::CommandDedupe,
        dedupe_key.clone(),
        CommandDedupe {
            command_digest: cmd.command_digest,
            result: cmd.result.clone(),
            commit_version,
            recovery_lsn: Some(recovery_lsn),
        }
        .encode(),
    ));
    let entry = RecoveryEntry::MetadataCommand {
        root_id: root,
        logical_shard_id: cmd.logical_shard_id,
        placement_generation: cmd.placement_generation,
        owner_epoch: cmd.owner_epoch,
        request_id: cmd.request_id,
        command_digest: cmd.command_digest,
        read_version: cmd.read_version,
        result: cmd.result.clone(),
    };
    let appended = outbox::append(&rows.tail, commit_version, &entry, &mutations)?;
    mutations.extend(appended.rows);

    let mut predicates = Vec::with_capacity(cmd.predicates.len() + 5);
    predicates.push(Predicate::equals(
        Family::System,
        KEY_SCHEMA.to_vec(),
        marker_bytes(),
    ));
    predicates.push(Predicate::equals(
        Family::RootFence,
        root_fence::key(&root),
        rows.root_fence,
    ));
    predicates.push(Predicate::equals(
        Family::System,
        KEY_OWNER_EPOCH.to_vec(),
        rows.owner_epoch,
    ));
    predicates.push(appended.tail_predicate);
    predicates.push(Predicate::absent(Family::CommandDedupe, dedupe_key));
    predicates.extend(cmd.predicates.iter().cloned());
    Ok(PlannedWrite {
        write: CheckedWrite {
            read_version: Some(cmd.read_version),
            predicates,
            mutations,
        },
        recovery_lsn,
    })
}

/// Executes `cmd` against `store` under `fence` (see the module docs), outside any command
/// sequencer: the command races other writers of `store` on the read-version fence. A
/// [`crate::MetaShard`]'s operations (and [`crate::MetaShard::execute`]) run through its
/// sequencer instead ([`crate::shard::sequencer`]), where that race cannot happen.
///
/// Errors: [`Error::InvalidArgument`] (bounds, reserved trees other than the System
/// pending-operation registry rows), [`Error::Fenced`],
/// [`Error::RequestReplayMismatch`], [`Error::ReadVersionConflict`],
/// [`Error::CommandPredicateFailed`], codec and storage errors. Nothing is applied on any error.
pub fn execute<S: TxnStore>(
    store: &S,
    fence: &ShardFence,
    cmd: MetadataCommand,
) -> Result<CommandOutcome> {
    check_bounds(&cmd)?;
    let snap = store.snapshot();
    let rows = check_fences(&snap, fence, &Identity::of(&cmd))?;
    if let Some(out) = replay_lookup(&snap, &cmd.root_id, &cmd.request_id, &cmd.command_digest)? {
        return Ok(out);
    }
    if cmd.read_version != snap.version() {
        return Err(Error::ReadVersionConflict { attempts: 1 });
    }
    drop(snap);
    let planned = plan(&cmd, rows)?;
    let commit_version = cmd.read_version + 1;
    let after_conflict = |visible_at: u64| -> Result<CommandOutcome> {
        // The conflicting commit may still be becoming durable; wait until it is readable, then
        // prefer the stored result of a concurrent identical request.
        store.wait_for_version(visible_at);
        let snap = store.snapshot();
        match replay_lookup(&snap, &cmd.root_id, &cmd.request_id, &cmd.command_digest)? {
            Some(out) => Ok(out),
            None => Err(Error::ReadVersionConflict { attempts: 1 }),
        }
    };
    match store.write(planned.write) {
        Ok(v) if v == commit_version => Ok(CommandOutcome {
            commit_version,
            result: cmd.result,
            idempotent_replay: false,
            recovery_lsn: Some(planned.recovery_lsn),
        }),
        Ok(v) => Err(fenced(format!(
            "commit version {v} is not read version + 1 ({commit_version})"
        ))),
        Err(WriteFailure::ReadVersion { actual, .. }) => after_conflict(actual),
        Err(WriteFailure::Predicate { family, key }) => match family {
            Some(Family::RootFence) => Err(fenced("RootFence changed; reopen the store")),
            Some(Family::System) if key == KEY_RECOVERY_TAIL => {
                // Unreachable while the read-version expectation holds (the tail only moves
                // with a commit); treated as a stale read version.
                after_conflict(store.version())
            }
            Some(Family::System) => Err(fenced(
                "schema marker or owner epoch changed; another owner opened the store",
            )),
            Some(Family::CommandDedupe) => match after_conflict(store.version()) {
                Err(Error::ReadVersionConflict { .. }) => Err(Error::CommandPredicateFailed),
                other => other,
            },
            // holt checks the version expectation first, so the predicate was false at
            // `read_version` itself: the ops layer re-reads and names the precise error.
            _ => Err(Error::CommandPredicateFailed),
        },
        Err(WriteFailure::Other(e)) => Err(e),
    }
}

/// What [`submit`] did with a command.
pub(crate) enum Submitted {
    /// The stored result of an earlier identical request; nothing was submitted.
    Replay(CommandOutcome),
    /// Accepted by the store at `outcome.commit_version`; durable once the write is waited for.
    Pending(CommandOutcome, PendingWrite),
}

/// Steps 0–5 of [`execute`] against `snap` — a snapshot of the store's newest *accepted* state
/// taken under the shard's command sequencer (see [`crate::shard::sequencer`]) — then submits the batch
/// pipelined ([`TxnStore::write_pipelined`]): validated and accepted now, durable when the
/// returned write is waited for. Under the sequencer nothing can be accepted between `snap` and
/// the submission, so the read-version fence and the command predicates fail only when the
/// command itself is stale or a predicate is really false.
///
/// Errors: as [`execute`]; nothing is accepted on any error.
pub(crate) fn submit<S: TxnStore>(
    store: &S,
    fence: &ShardFence,
    snap: &S::Snap,
    cmd: MetadataCommand,
) -> Result<Submitted> {
    check_bounds(&cmd)?;
    let rows = check_fences(snap, fence, &Identity::of(&cmd))?;
    if let Some(out) = replay_lookup(snap, &cmd.root_id, &cmd.request_id, &cmd.command_digest)? {
        return Ok(Submitted::Replay(out));
    }
    if cmd.read_version != snap.version() {
        return Err(Error::ReadVersionConflict { attempts: 1 });
    }
    let planned = plan(&cmd, rows)?;
    let commit_version = cmd.read_version + 1;
    match store.write_pipelined(planned.write) {
        Ok(pending) if pending.version() == commit_version => Ok(Submitted::Pending(
            CommandOutcome {
                commit_version,
                result: cmd.result,
                idempotent_replay: false,
                recovery_lsn: Some(planned.recovery_lsn),
            },
            pending,
        )),
        // Unreachable while the store honours the read-version expectation.
        Ok(pending) => Err(fenced(format!(
            "commit version {} is not read version + 1 ({commit_version})",
            pending.version()
        ))),
        Err(WriteFailure::ReadVersion { .. }) => Err(Error::ReadVersionConflict { attempts: 1 }),
        Err(WriteFailure::Predicate { family, key }) => Err(match family {
            Some(Family::RootFence) => fenced("RootFence changed; reopen the store"),
            Some(Family::System) if key == KEY_RECOVERY_TAIL => {
                Error::ReadVersionConflict { attempts: 1 }
            }
            Some(Family::System) => {
                fenced("schema marker or owner epoch changed; another owner opened the store")
            }
            _ => Error::CommandPredicateFailed,
        }),
        Err(WriteFailure::Other(e)) => Err(e),
    }
}

/// Plans `cmd` exactly as [`execute`] would (steps 0–4 included) without writing; used by tests
/// that count the batch shape of an operation.
#[cfg(test)]
pub(crate) fn plan_for_test<S: TxnStore>(
    store: &S,
    fence: &ShardFence,
    cmd: &MetadataCommand,
) -> Result<PlannedWrite> {
    check_bounds(cmd)?;
    let snap = store.snapshot();
    let rows = check_fences(&snap, fence, &Identity::of(cmd))?;
    if cmd.read_version != snap.version() {
        return Err(Error::ReadVersionConflict { attempts: 1 });
    }
    plan(cmd, rows)
}
