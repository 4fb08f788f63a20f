//! The GcBarrier: the prospective history floor and its advance.

use super::rows::step_digest;
use crate::codec::{CommandResult, GcBarrier, GcBarrierKey};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{OperationId, RequestId};
use crate::ops::{run_step, Step};
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};

/// The floor [`crate::ops::snapshot::maintain_history_floor`] would set now, without setting it.
pub(super) fn prospective_floor(shard: &MetaShard, retention: u64) -> Result<u64> {
    let tip = shard.version()?;
    let mut target = tip.saturating_sub(retention);
    if let Some(min) = crate::ops::snapshot::min_hold_version(shard)? {
        target = target.min(min);
    }
    Ok(target.max(shard.store().history_floor()?))
}

/// Advances `GcBarrier(root).generation` by one in one command and returns the new generation.
/// Its commit version becomes the tip, so the history floor of a quiescent store can pass a
/// revision zeroed by the previous last commit.
///
/// Errors: [`Error::Fenced`]; codec and storage errors.
pub fn advance_barrier(shard: &MetaShard) -> Result<u64> {
    let root = shard.root_id();
    let key = GcBarrierKey { root }.encode();
    run_step(shard, |snap| {
        let current = snap.get(Family::GcBarrier, &key)?;
        let generation = match &current {
            None => 0,
            Some(b) => GcBarrier::decode(b)?.generation,
        }
        .checked_add(1)
        .ok_or_else(|| Error::invalid("GcBarrier generation exhausted"))?;
        let mut cmd = shard.command_header(
            RequestId::random()?,
            step_digest(b"barrier", &OperationId([0; 16]), &generation.to_be_bytes()),
            snap.version(),
            CommandResult::Applied { value: generation },
        );
        cmd.predicates.push(match current {
            None => Predicate::absent(Family::GcBarrier, key.clone()),
            Some(b) => Predicate::equals(Family::GcBarrier, key.clone(), b),
        });
        cmd.mutations.push(Mutation::put(
            Family::GcBarrier,
            key.clone(),
            GcBarrier { generation }.encode(),
        ));
        Ok(Step::Command(Box::new(cmd), generation))
    })
}
