//! Commit versions → etcd revisions, the history floor, and cluster-wide compaction (see the
//! module docs of [`super`]).

use std::time::Instant;

use super::handle::EtcdStore;
use super::keys::{decode_floor, decode_u64, prefix_end, ShardKeys};
use super::kv::{range_latest, Kv};
use super::write::{read_txn, txn_cas};
use crate::error::{Error, Result};

/// The storage-neutral "that version is gone" error.
pub(crate) fn pruned(requested: u64, floor: u64) -> Error {
    Error::Storage(holt::Error::HistoryPruned { requested, floor })
}

fn exact(kvs: &[Option<Kv>], i: usize) -> Option<&Kv> {
    kvs.get(i).and_then(Option::as_ref)
}

/// The etcd revision at which the rows of commit version `version` can be read: the newest
/// revision before the shard's next commit (the current revision when there is none), so that
/// the cluster compaction — which never passes `R(floor + 1) - 1` for this shard — cannot remove
/// it while `version` is at or above the floor. `failed_at`: a revision a read just found
/// compacted (the answer must be newer, else the version is gone).
///
/// Errors: [`Error::InvalidArgument`] above the current version; `HistoryPruned` below the
/// floor or when compaction passed the version; [`Error::StoreUnavailable`]; [`Error::Codec`].
pub(crate) fn resolve(store: &EtcdStore, version: u64, failed_at: Option<i64>) -> Result<i64> {
    let keys = store.keys();
    let next = version
        .checked_add(1)
        .ok_or_else(|| Error::invalid("version space exhausted"))?;
    let (kvs, header) = read_txn(
        store,
        vec![
            keys.clock(),
            keys.floor(),
            keys.version(version),
            keys.version(next),
            keys.compacted().to_vec(),
        ],
    )?;
    let clock = exact(&kvs, 0)
        .map(|kv| decode_u64("etcd_clock", &kv.value))
        .transpose()?
        .unwrap_or(0);
    let floor = exact(&kvs, 1)
        .map(|kv| decode_floor(&kv.value).map(|(f, _)| f))
        .transpose()?
        .unwrap_or(0);
    if version > clock {
        return Err(Error::invalid(format!(
            "version {version} is above the shard's current version {clock}"
        )));
    }
    if version < floor {
        return Err(pruned(version, floor));
    }
    if version >= 1 && exact(&kvs, 2).is_none() {
        return Err(pruned(version, floor));
    }
    let upper = exact(&kvs, 3).map_or(header.saturating_add(1), |kv| kv.create_revision);
    let target = upper.saturating_sub(1);
    let compacted = exact(&kvs, 4)
        .map(|kv| decode_u64("etcd_compacted", &kv.value))
        .transpose()?
        .unwrap_or(0);
    if i64::try_from(compacted).is_ok_and(|c| target < c) || failed_at.is_some_and(|f| target <= f)
    {
        return Err(pruned(version, floor));
    }
    Ok(target)
}

/// The shard's history floor (0 when none is recorded).
pub(crate) fn floor(store: &EtcdStore) -> Result<u64> {
    let (kvs, _) = read_txn(store, vec![store.keys().floor()])?;
    exact(&kvs, 0)
        .map(|kv| decode_floor(&kv.value).map(|(f, _)| f))
        .transpose()
        .map(|f| f.unwrap_or(0))
}

/// Raises the floor to `version` (CAS on the floor record), drops the commit-version index
/// below it, then runs a compaction pass when the last one is older than the store's
/// compaction interval (a failed pass is left to the next one).
pub(crate) fn set_floor(store: &EtcdStore, version: u64) -> Result<()> {
    let keys = store.keys();
    for _ in 0..32 {
        let (kvs, _) = read_txn(store, vec![keys.floor(), keys.clock()])?;
        let current = exact(&kvs, 0);
        let floor = current
            .map(|kv| decode_floor(&kv.value).map(|(f, _)| f))
            .transpose()?
            .unwrap_or(0);
        let clock = exact(&kvs, 1)
            .map(|kv| decode_u64("etcd_clock", &kv.value))
            .transpose()?
            .unwrap_or(0);
        if version <= floor {
            return Ok(());
        }
        if version > clock {
            return Err(Error::invalid(format!(
                "history floor {version} is above the shard's current version {clock}"
            )));
        }
        let applied = txn_cas(
            store,
            keys.floor(),
            current.map(|kv| kv.value.clone()),
            keys.floor_value(version),
            Some((keys.version(0), keys.version(version))),
        )?;
        if applied {
            maybe_compact(store);
            return Ok(());
        }
    }
    Err(Error::StoreUnavailable {
        reason: "the history floor kept changing under concurrent updates".into(),
        write_outcome_unknown: false,
    })
}

fn maybe_compact(store: &EtcdStore) {
    let due = {
        let Ok(mut last) = store.last_compaction().lock() else {
            return;
        };
        let due = last.is_none_or(|t| t.elapsed() >= store.options().compaction_interval);
        if due {
            *last = Some(Instant::now());
        }
        due
    };
    if due {
        let _ = compact(store);
    }
}

/// The revision recorded by the last compaction pass (0 = none).
pub(crate) fn compacted_revision(store: &EtcdStore) -> Result<i64> {
    let (kvs, _) = read_txn(store, vec![store.keys().compacted().to_vec()])?;
    let c = exact(&kvs, 0)
        .map(|kv| decode_u64("etcd_compacted", &kv.value))
        .transpose()?
        .unwrap_or(0);
    i64::try_from(c).map_err(|_| Error::codec("etcd_compacted", "revision out of range"))
}

/// One compaction pass (see the module docs of [`super`]).
pub(crate) fn compact(store: &EtcdStore) -> Result<Option<i64>> {
    let keys = store.keys();
    let floors_prefix = keys.floors_prefix().to_vec();
    let end = prefix_end(&floors_prefix);
    let page = range_latest(store, floors_prefix, end, 0)?;
    let mut target = page.revision;
    let mut next_keys = Vec::with_capacity(page.kvs.len());
    for kv in &page.kvs {
        let (f, shard) = decode_floor(&kv.value)?;
        let Some(next) = f.checked_add(1) else {
            continue;
        };
        next_keys.push(ShardKeys::version_in(shard, next));
    }
    for chunk in next_keys.chunks(64) {
        let (kvs, _) = read_txn(store, chunk.to_vec())?;
        for kv in kvs.into_iter().flatten() {
            target = target.min(kv.create_revision.saturating_sub(1));
        }
    }
    let previous = compacted_revision(store)?;
    if target <= previous || target <= 1 {
        return Ok(None);
    }
    let prev_value = (previous > 0).then(|| (previous as u64).to_be_bytes().to_vec());
    if !txn_cas(
        store,
        keys.compacted().to_vec(),
        prev_value,
        (target as u64).to_be_bytes().to_vec(),
        None,
    )? {
        return Ok(None);
    }
    super::write::compact_to(store, target)?;
    Ok(Some(target))
}
