//! The snapshot invariants fsck and the tests check.

use super::read::scan_all;
use crate::codec::{
    snapshot_alias::SnapshotAliasKey, snapshot_ref::SnapshotRefKey, HistoryHold, HistoryHoldKey,
    HistoryHoldState, HoldId, SnapshotAlias, SnapshotRef, SnapshotState,
};
use crate::error::Result;
use crate::family::Family;
use crate::shard::MetaShard;
use crate::store::TxnStore;

/// Recomputes the snapshot/hold invariants of the root from the rows at one version and returns
/// every violation (empty when consistent). A diagnostic for tests and fsck-style checks:
///
/// - an `Active` SnapshotRef has an `Active` HistoryHold(Snapshot, id) at its read version, and a
///   non-`Active` one has none;
/// - `consumer_count` equals the number of HistoryHold(Restore) rows naming the snapshot;
/// - every SnapshotAlias resolves to an existing SnapshotRef of its incarnation that carries the
///   alias, and its terminal projection matches a non-`Active` state;
/// - the holt history floor is at or below every hold's read version.
///
/// Errors: codec and storage errors.
pub fn check_invariants(shard: &MetaShard) -> Result<Vec<String>> {
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let mut problems = Vec::new();
    let mut holds = std::collections::BTreeMap::new();
    let mut restore_consumers: std::collections::BTreeMap<u64, u64> = Default::default();
    let floor = shard.inner.store.history_floor()?;
    for (key, bytes) in scan_all(&snap, Family::HistoryHold, root.as_bytes().to_vec())? {
        let k = HistoryHoldKey::decode(&key)?;
        let h = HistoryHold::decode(&bytes)?;
        if h.read_version < floor {
            problems.push(format!(
                "hold {:?} at read version {} is below the history floor {floor}",
                k.hold, h.read_version
            ));
        }
        match k.hold {
            HoldId::Snapshot(id) => {
                holds.insert(id.get(), h);
            }
            HoldId::Restore(_) => {
                if let Some(s) = h.source_snapshot_id {
                    *restore_consumers.entry(s.get()).or_default() += 1;
                }
            }
            HoldId::BuildCommit(_) => {}
        }
    }
    let mut refs = std::collections::BTreeMap::new();
    for (key, bytes) in scan_all(&snap, Family::SnapshotRef, root.as_bytes().to_vec())? {
        let k = SnapshotRefKey::decode(&key)?;
        let r = SnapshotRef::decode(&bytes)?;
        let id = k.snapshot_id.get();
        match (r.state, holds.get(&id)) {
            (SnapshotState::Active, Some(h))
                if h.read_version == r.read_version && h.state == HistoryHoldState::Active => {}
            (SnapshotState::Active, _) => {
                problems.push(format!("active snapshot {id} has no matching Active hold"));
            }
            (_, Some(_)) => problems.push(format!(
                "snapshot {id} in state {:?} still has its hold",
                r.state
            )),
            (_, None) => {}
        }
        let consumers = restore_consumers.get(&id).copied().unwrap_or(0);
        if consumers != r.consumer_count {
            problems.push(format!(
                "snapshot {id} counts {} consumer(s) but {consumers} restore hold(s) name it",
                r.consumer_count
            ));
        }
        refs.insert((k.incarnation, id), r);
    }
    for (key, bytes) in scan_all(&snap, Family::SnapshotAlias, root.as_bytes().to_vec())? {
        let k = SnapshotAliasKey::decode(&key)?;
        let a = SnapshotAlias::decode(&bytes)?;
        match refs.get(&(k.incarnation, a.snapshot_id.get())) {
            None => problems.push(format!("alias {} names a missing snapshot", k.alias)),
            Some(r) => {
                if r.alias.as_ref() != Some(&k.alias) {
                    problems.push(format!(
                        "alias {} names a snapshot minted without it",
                        k.alias
                    ));
                }
                let expected = (r.state != SnapshotState::Active).then_some(r.state);
                if a.terminal_state != expected {
                    problems.push(format!(
                        "alias {} projects {:?} but the snapshot is {:?}",
                        k.alias, a.terminal_state, r.state
                    ));
                }
            }
        }
    }
    Ok(problems)
}
