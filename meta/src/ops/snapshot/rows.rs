//! Resolving a selector to its SnapshotRef / SnapshotAlias rows; keys, events, digests and receipts shared by the steps.

use super::state::{
    AliasRow, Resolved, SnapshotInfo, SnapshotReceipt, SnapshotSelector, SnapshotStatus, MAX_TTL_MS,
};
use crate::codec::{
    snapshot_alias::SnapshotAliasKey, snapshot_ref::SnapshotRefKey, workspace_current, ChangeEvent,
    ChangeKind, CommandResult, HistoryHoldKey, HoldId, SnapshotAlias, SnapshotRef, SnapshotState,
    WorkspaceCurrent,
};
use crate::command::{CommandOutcome, Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{validate_workbench_id, AliasName, RootId, SnapshotId, WorkspaceIncarnationId};
use crate::ops::lease_clock::LeaseReading;
use crate::store::Snapshot;
use sha2::{Digest, Sha256};

pub(super) fn visible_marker<S: Snapshot>(
    snap: &S,
    root: &RootId,
    workbench_id: &str,
    wall_unix_ms: u64,
) -> Result<(Vec<u8>, WorkspaceCurrent)> {
    validate_workbench_id(workbench_id)?;
    let not_found = || Error::WorkspaceNotFound {
        workbench_id: workbench_id.to_owned(),
    };
    let bytes = snap
        .get(
            Family::WorkspaceCurrent,
            &workspace_current::key(root, workbench_id),
        )?
        .ok_or_else(not_found)?;
    let ws = WorkspaceCurrent::decode(&bytes)?;
    if !crate::read::workspace_live(snap, &ws, wall_unix_ms)? {
        return Err(not_found());
    }
    Ok((bytes, ws))
}

pub(super) fn alias_key(root: &RootId, inc: &WorkspaceIncarnationId, alias: &AliasName) -> Vec<u8> {
    SnapshotAliasKey {
        root: *root,
        incarnation: *inc,
        alias: alias.clone(),
    }
    .encode()
}

pub(super) fn ref_key(root: &RootId, inc: &WorkspaceIncarnationId, id: SnapshotId) -> Vec<u8> {
    SnapshotRefKey {
        root: *root,
        incarnation: *inc,
        snapshot_id: id,
    }
    .encode()
}

pub(super) fn hold_key(root: &RootId, hold: HoldId) -> Vec<u8> {
    HistoryHoldKey { root: *root, hold }.encode()
}

/// [`Resolved`] for a snapshot addressed by id (reaper paths): its row plus the current alias
/// row of its name, if it has one.
pub(super) fn resolved_by_id<S: Snapshot>(
    snap: &S,
    root: &RootId,
    k: &SnapshotRefKey,
    key: &[u8],
    bytes: &[u8],
    record: &SnapshotRef,
) -> Result<Resolved> {
    let alias = match &record.alias {
        None => None,
        Some(a) => read_alias(snap, alias_key(root, &k.incarnation, a))?,
    };
    Ok(Resolved {
        id: k.snapshot_id,
        key: key.to_vec(),
        bytes: bytes.to_vec(),
        record: record.clone(),
        alias,
        by_name: false,
    })
}

pub(super) fn read_alias<S: Snapshot>(snap: &S, key: Vec<u8>) -> Result<Option<AliasRow>> {
    Ok(match snap.get(Family::SnapshotAlias, &key)? {
        None => None,
        Some(b) => {
            let v = SnapshotAlias::decode(&b)?;
            Some((key, b, v))
        }
    })
}

pub(super) fn resolve<S: Snapshot>(
    snap: &S,
    root: &RootId,
    inc: &WorkspaceIncarnationId,
    selector: &SnapshotSelector,
) -> Result<Resolved> {
    let (id, by_name, name_alias) = match selector {
        SnapshotSelector::Id(id) => (*id, false, None),
        SnapshotSelector::Name(name) => {
            let Some(found) = read_alias(snap, alias_key(root, inc, name))? else {
                return Err(Error::SnapshotNotFound);
            };
            (found.2.snapshot_id, true, Some(found))
        }
    };
    let key = ref_key(root, inc, id);
    let bytes = snap
        .get(Family::SnapshotRef, &key)?
        .ok_or(Error::SnapshotNotFound)?;
    let record = SnapshotRef::decode(&bytes)?;
    let alias = match name_alias {
        Some(a) => Some(a),
        None => match &record.alias {
            None => None,
            Some(a) => read_alias(snap, alias_key(root, inc, a))?,
        },
    };
    Ok(Resolved {
        id,
        key,
        bytes,
        record,
        alias,
        by_name,
    })
}

pub(super) fn info(
    workbench_id: &str,
    inc: WorkspaceIncarnationId,
    r: &Resolved,
    lease: &LeaseReading,
) -> SnapshotInfo {
    let current = r.alias.as_ref().filter(|(_, _, a)| a.snapshot_id == r.id);
    SnapshotInfo {
        workbench_id: workbench_id.to_owned(),
        incarnation: inc,
        snapshot_id: r.id,
        record: r.record.clone(),
        status: SnapshotStatus::of(&r.record, lease),
        alias_current: current.is_some(),
        alias_generation: current.map(|(_, _, a)| a.alias_generation),
    }
}

/// The alias predicate/mutation of a lifecycle change of `r` to terminal `state` (`None`: the
/// record stays Active, only a by-name CAS is needed).
pub(super) fn alias_rows(
    r: &Resolved,
    terminal: Option<SnapshotState>,
) -> (Vec<Predicate>, Vec<Mutation>) {
    let Some((key, bytes, alias)) = &r.alias else {
        return (Vec::new(), Vec::new());
    };
    let points_here = alias.snapshot_id == r.id;
    let mut preds = Vec::new();
    let mut muts = Vec::new();
    if r.by_name || (points_here && terminal.is_some()) {
        preds.push(Predicate::equals(
            Family::SnapshotAlias,
            key.clone(),
            bytes.clone(),
        ));
    }
    if let (true, Some(state)) = (points_here, terminal) {
        muts.push(Mutation::put(
            Family::SnapshotAlias,
            key.clone(),
            SnapshotAlias {
                terminal_state: Some(state),
                ..*alias
            }
            .encode(),
        ));
    }
    (preds, muts)
}

pub(super) fn snapshot_event(
    workbench_id: &str,
    inc: WorkspaceIncarnationId,
    kind: ChangeKind,
    id: SnapshotId,
) -> ChangeEvent {
    ChangeEvent {
        workbench_id: workbench_id.to_owned(),
        incarnation: inc,
        kind,
        path: None,
        before_generation: None,
        after_generation: Some(id.get()),
        moved_from: None,
    }
}

pub(super) fn receipt(out: CommandOutcome) -> Result<SnapshotReceipt> {
    match out.result {
        CommandResult::SnapshotLifecycle {
            snapshot_id,
            snapshot,
        } => Ok(SnapshotReceipt {
            snapshot_id,
            record: snapshot,
            commit_version: out.commit_version,
            idempotent_replay: out.idempotent_replay,
            changed: true,
        }),
        _ => Err(Error::RequestReplayMismatch),
    }
}

pub(super) fn validate_ttl(ttl_ms: u64) -> Result<()> {
    if ttl_ms == 0 || ttl_ms > MAX_TTL_MS {
        return Err(Error::invalid(format!(
            "lease length must be 1 ..= {MAX_TTL_MS} ms (90 days)"
        )));
    }
    Ok(())
}

pub(super) fn digest(domain: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(domain);
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    h.finalize().into()
}

pub(super) fn selector_bytes(s: &SnapshotSelector) -> Vec<u8> {
    match s {
        SnapshotSelector::Id(id) => {
            let mut v = vec![1u8];
            v.extend_from_slice(&id.get().to_be_bytes());
            v
        }
        SnapshotSelector::Name(n) => {
            let mut v = vec![2u8];
            v.extend_from_slice(n.as_str().as_bytes());
            v
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Create / renew / retire
