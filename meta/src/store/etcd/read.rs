//! Snapshot reads: point reads and the bounded delimiter scan (a seek loop over etcd ranges) at
//! a snapshot's revision.

use std::sync::atomic::Ordering;

use super::bridge::unavailable;
use super::handle::EtcdSnapshot;
use super::history;
use super::keys::{prefix_end, successor};
use super::kv::{range, ReadError};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::store::txn::{ScanItem, ScanSpec, MAX_SCAN_ITEMS};

/// Runs `f` at the snapshot's revision; when compaction passed that revision, moves the
/// snapshot to the newest revision that still shows its version (or reports `HistoryPruned`).
fn at_snapshot<T>(
    snap: &EtcdSnapshot,
    family: Family,
    f: impl Fn(i64) -> std::result::Result<T, ReadError>,
) -> Result<T> {
    if let Some(reason) = &snap.failure {
        return Err(unavailable(reason.clone(), false));
    }
    if snap.historical && !family.versioned() {
        return f(0).map_err(|e| match e {
            ReadError::Compacted => unavailable("etcd reported a compacted latest revision", false),
            ReadError::Fatal(e) => e,
        });
    }
    let mut tries = 0;
    loop {
        let revision = snap.revision.load(Ordering::Acquire);
        match f(revision) {
            Ok(v) => return Ok(v),
            Err(ReadError::Fatal(e)) => return Err(e),
            Err(ReadError::Compacted) => {
                tries += 1;
                if tries > 2 {
                    return Err(history::pruned(snap.version, 0));
                }
                let next = history::resolve(&snap.store, snap.version, Some(revision))?;
                snap.revision.store(next, Ordering::Release);
            }
        }
    }
}

/// [`crate::store::Snapshot::get`] of an etcd snapshot.
pub(crate) fn snapshot_get(
    snap: &EtcdSnapshot,
    family: Family,
    key: &[u8],
) -> Result<Option<Vec<u8>>> {
    let full = snap.store.keys().row(family, key);
    at_snapshot(snap, family, |rev| {
        let page = range(&snap.store, full.clone(), None, 1, rev)?;
        Ok(page
            .kvs
            .into_iter()
            .find(|kv| kv.key == full)
            .map(|kv| kv.value))
    })
}

/// [`crate::store::Snapshot::scan`] of an etcd snapshot: the holt scan semantics (items in key
/// order, each either a row or a delimiter roll-up `prefix ..= delimiter`, only items strictly
/// greater than `start_after`, at most `limit`) over etcd ranges. Rows inside a roll-up are
/// skipped within a page; when a page ends inside a roll-up the next range seeks past the
/// whole subtree, so the cost is one range per page of output plus one per subtree that spans
/// a page boundary, never proportional to the rows under a roll-up.
pub(crate) fn snapshot_scan(
    snap: &EtcdSnapshot,
    family: Family,
    spec: &ScanSpec,
) -> Result<Vec<ScanItem>> {
    let limit = spec.limit.clamp(1, MAX_SCAN_ITEMS);
    let fam = snap.store.keys().family_prefix(family);
    let mut full_prefix = fam.clone();
    full_prefix.extend_from_slice(&spec.prefix);
    // `None` cannot happen (the namespace starts with '/'); "\0" asks etcd for every key >= start.
    let end = prefix_end(&full_prefix).unwrap_or_else(|| vec![0]);
    let start = match &spec.start_after {
        Some(after) if after.as_slice() >= spec.prefix.as_slice() => {
            let mut c = fam.clone();
            c.extend_from_slice(after);
            successor(&c)
        }
        _ => full_prefix.clone(),
    };
    at_snapshot(snap, family, |rev| {
        let mut out: Vec<ScanItem> = Vec::new();
        let mut last_rollup: Option<Vec<u8>> = None;
        let mut cursor = start.clone();
        while out.len() < limit && cursor < end {
            let want = i64::try_from(limit - out.len()).unwrap_or(1).max(1);
            let page = range(&snap.store, cursor.clone(), Some(end.clone()), want, rev)?;
            let mut last_key: Option<Vec<u8>> = None;
            for kv in page.kvs {
                let user = kv
                    .key
                    .get(fam.len()..)
                    .ok_or_else(|| {
                        ReadError::Fatal(Error::codec(
                            family.name(),
                            "etcd returned a key outside the family",
                        ))
                    })?
                    .to_vec();
                let rollup = spec.delimiter.and_then(|d| {
                    user.get(spec.prefix.len()..)
                        .and_then(|rest| rest.iter().position(|b| *b == d))
                        .map(|i| user[..spec.prefix.len() + i + 1].to_vec())
                });
                let after_marker =
                    |item: &[u8]| spec.start_after.as_deref().is_none_or(|a| item > a);
                match rollup {
                    Some(r) => {
                        if last_rollup.as_ref() != Some(&r) {
                            if after_marker(&r) {
                                out.push(ScanItem::Prefix(r.clone()));
                            }
                            last_rollup = Some(r);
                        }
                    }
                    None => {
                        if after_marker(&user) {
                            out.push(ScanItem::Row {
                                key: user.clone(),
                                value: kv.value,
                            });
                        }
                    }
                }
                last_key = Some(kv.key);
                if out.len() >= limit {
                    break;
                }
            }
            if out.len() >= limit {
                break;
            }
            let Some(last_key) = last_key else { break };
            if !page.more {
                break;
            }
            // Continue after the last key, or past the whole subtree when the page ended inside
            // a roll-up.
            cursor = match &last_rollup {
                Some(r) if last_key.get(fam.len()..).is_some_and(|u| u.starts_with(r)) => {
                    let mut sub = fam.clone();
                    sub.extend_from_slice(r);
                    match prefix_end(&sub) {
                        Some(e) => e,
                        None => break,
                    }
                }
                _ => successor(&last_key),
            };
        }
        Ok(out)
    })
}
