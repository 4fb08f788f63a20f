//! SecondaryIndex repair: rebuild index rows from PathCurrent in bounded commands.

use crate::codec::{
    path_current, PathCurrentKey, PathEntry, SecondaryIndexKey, WorkspaceIncarnationClaim,
};
use crate::command::projection::{index_rows, MAX_INDEX_MUTATIONS};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{RequestId, RootId};
use crate::ops::{run_step, Step};
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, Snapshot, TxnStore};
use std::collections::BTreeSet;

/// What [`repair_index`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Index rows put (missing or differing).
    pub rows_put: u64,
    /// Stale index rows deleted.
    pub rows_deleted: u64,
    /// Metadata commands executed.
    pub commands: u64,
}

/// Paths whose index rows one repair command derives.
pub(super) const REPAIR_PATHS_PER_COMMAND: usize = 16;
/// Index rows one deleting repair command examines (each stale row costs one predicate on
/// itself and at most one on its PathCurrent row: within the command's predicate bound).
pub(super) const REPAIR_DELETES_PER_COMMAND: usize = 64;

/// One page of at most `limit` row keys of `family` under the root, after `after` (key order).
pub(super) fn key_page(
    shard: &MetaShard,
    family: Family,
    root: &RootId,
    after: Option<&[u8]>,
    limit: usize,
) -> Result<Vec<Vec<u8>>> {
    let snap = shard.inner.store.snapshot();
    let spec = ScanSpec {
        prefix: root.as_bytes().to_vec(),
        start_after: after.map(<[u8]>::to_vec),
        delimiter: None,
        limit,
    };
    Ok(snap
        .scan(family, &spec)?
        .into_iter()
        .filter_map(|i| match i {
            ScanItem::Row { key, .. } => Some(key),
            ScanItem::Prefix(_) => None,
        })
        .collect())
}

/// Rebuilds the SecondaryIndex rows from PathCurrent (see the module docs): pass 1 walks
/// PathCurrent in bounded pages and, per page, puts every projected row that is missing or
/// differs (one command per ≤ 16 paths and ≤ [`MAX_INDEX_MUTATIONS`] puts, predicating those
/// PathCurrent rows); pass 2 walks SecondaryIndex and deletes every row its PathCurrent row does
/// not project (≤ 64 index rows examined per command, predicating the PathCurrent rows read). Idempotent; a rerun after a crash continues where it stopped.
///
/// Errors: [`Error::Fenced`]; codec and storage errors (a PathCurrent row that does not decode
/// stops the repair: fix or remove it first).
pub fn repair_index(shard: &MetaShard) -> Result<RepairReport> {
    let root = shard.root_id();
    let mut report = RepairReport::default();
    // Pass 1: puts.
    let mut after: Option<Vec<u8>> = None;
    loop {
        let keys = key_page(
            shard,
            Family::PathCurrent,
            &root,
            after.as_deref(),
            REPAIR_PATHS_PER_COMMAND,
        )?;
        if keys.is_empty() {
            break;
        }
        after = keys.last().cloned();
        let exhausted = keys.len() < REPAIR_PATHS_PER_COMMAND;
        let (puts, commands) = repair_puts(shard, &keys)?;
        report.rows_put += puts;
        report.commands += commands;
        if exhausted {
            break;
        }
    }
    // Pass 2: deletes.
    let mut after: Option<Vec<u8>> = None;
    loop {
        let keys = key_page(
            shard,
            Family::SecondaryIndex,
            &root,
            after.as_deref(),
            REPAIR_DELETES_PER_COMMAND,
        )?;
        if keys.is_empty() {
            break;
        }
        after = keys.last().cloned();
        let exhausted = keys.len() < REPAIR_DELETES_PER_COMMAND;
        let deleted = repair_deletes(shard, &keys)?;
        if deleted > 0 {
            report.rows_deleted += deleted;
            report.commands += 1;
        }
        if exhausted {
            break;
        }
    }
    Ok(report)
}

/// `(key, value)` rows.
pub(super) type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// The projected index rows of the PathCurrent row `key` at `snap` (with the PathCurrent bytes
/// they derive from), or `None` when it is gone.
pub(super) fn projected<S: Snapshot>(
    snap: &S,
    root: &RootId,
    key: &[u8],
) -> Result<Option<(Vec<u8>, Rows)>> {
    let Some(bytes) = snap.get(Family::PathCurrent, key)? else {
        return Ok(None);
    };
    let pk = PathCurrentKey::decode(key)?;
    let entry = PathEntry::decode(&bytes)?;
    let claim = snap
        .get(
            Family::WorkspaceIncarnationClaim,
            &crate::codec::workspace_incarnation_claim::key(root, &pk.incarnation),
        )?
        .ok_or_else(|| {
            Error::codec(
                "workspace_incarnation_claim",
                format!(
                    "incarnation {} of an indexed path has no claim",
                    pk.incarnation
                ),
            )
        })?;
    let wb = WorkspaceIncarnationClaim::decode(&claim)?.workbench_id;
    let rows = index_rows(root, &pk.incarnation, &wb, &pk.path, &entry)?;
    Ok(Some((bytes, rows)))
}

/// Puts the missing/differing index rows of the PathCurrent rows `keys`, in commands within the
/// index bound. Returns `(rows put, commands)`.
pub(super) fn repair_puts(shard: &MetaShard, keys: &[Vec<u8>]) -> Result<(u64, u64)> {
    let root = shard.root_id();
    let mut total = 0u64;
    let mut commands = 0u64;
    let mut start = 0usize;
    while start < keys.len() {
        let (written, next) = run_step(shard, |snap| {
            let mut cmd = shard.command_header(
                RequestId::random()?,
                index_digest(b"put", keys.get(start).map_or(&[][..], |k| k.as_slice())),
                snap.version(),
                crate::codec::CommandResult::Applied { value: 0 },
            );
            let mut puts = 0usize;
            let mut next = start;
            for key in &keys[start..] {
                let Some((bytes, rows)) = projected(snap, &root, key)? else {
                    next += 1;
                    continue;
                };
                let mut muts = Vec::new();
                for (ik, iv) in rows {
                    if snap.get(Family::SecondaryIndex, &ik)?.as_deref() != Some(iv.as_slice()) {
                        muts.push(Mutation::put(Family::SecondaryIndex, ik, iv));
                    }
                }
                if puts > 0 && puts + muts.len() > MAX_INDEX_MUTATIONS {
                    break;
                }
                next += 1;
                if muts.is_empty() {
                    continue;
                }
                puts += muts.len();
                cmd.predicates
                    .push(Predicate::equals(Family::PathCurrent, key.clone(), bytes));
                cmd.mutations.extend(muts);
            }
            if cmd.mutations.is_empty() {
                return Ok(Step::Done((0u64, next)));
            }
            cmd.result = crate::codec::CommandResult::Applied { value: puts as u64 };
            Ok(Step::Command(Box::new(cmd), (puts as u64, next)))
        })?;
        if written > 0 {
            commands += 1;
        }
        total += written;
        if next == start {
            // A single path projecting more than the bound cannot happen (≤ 72 rows per path).
            return Err(Error::invalid("index repair made no progress"));
        }
        start = next;
    }
    Ok((total, commands))
}

/// Deletes the rows of `keys` (SecondaryIndex keys) that their PathCurrent row does not project,
/// in one command. Returns the number deleted.
pub(super) fn repair_deletes(shard: &MetaShard, keys: &[Vec<u8>]) -> Result<u64> {
    let root = shard.root_id();
    run_step(shard, |snap| {
        let mut cmd = shard.command_header(
            RequestId::random()?,
            index_digest(b"delete", keys.first().map_or(&[][..], |k| k.as_slice())),
            snap.version(),
            crate::codec::CommandResult::Applied { value: 0 },
        );
        let mut predicated: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut deleted = 0u64;
        for ik in keys {
            let Some(current) = snap.get(Family::SecondaryIndex, ik)? else {
                continue;
            };
            let stale = match SecondaryIndexKey::decode(ik) {
                Err(_) => true,
                Ok(key) => {
                    let pkey = path_current::key(&root, &key.incarnation, &key.path);
                    match projected(snap, &root, &pkey)? {
                        None => {
                            if predicated.insert(pkey.clone()) {
                                cmd.predicates
                                    .push(Predicate::absent(Family::PathCurrent, pkey));
                            }
                            true
                        }
                        Some((bytes, rows)) => {
                            let projected_here = rows.iter().any(|(k, _)| k == ik);
                            if !projected_here && predicated.insert(pkey.clone()) {
                                cmd.predicates.push(Predicate::equals(
                                    Family::PathCurrent,
                                    pkey,
                                    bytes,
                                ));
                            }
                            !projected_here
                        }
                    }
                }
            };
            if stale {
                cmd.predicates.push(Predicate::equals(
                    Family::SecondaryIndex,
                    ik.clone(),
                    current,
                ));
                cmd.mutations.push(Mutation::Delete {
                    family: Family::SecondaryIndex,
                    key: ik.clone(),
                });
                deleted += 1;
            }
        }
        if deleted == 0 {
            return Ok(Step::Done(0));
        }
        cmd.result = crate::codec::CommandResult::Applied { value: deleted };
        Ok(Step::Command(Box::new(cmd), deleted))
    })
}

pub(super) fn index_digest(step: &[u8], first: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"nokv.fsck.repair_index.v1\0");
    h.update(step);
    h.update([0]);
    h.update(first);
    h.finalize().into()
}
