//! Reads: the clock, point reads and the bounded delimiter scan (a seek loop over etcd ranges).

use std::sync::atomic::Ordering;

use etcd_client::GetOptions;

use super::bridge::{self, classify, unavailable, Backoff, Failure};
use super::keys::{decode_u64, prefix_end, successor};
use super::{history, EtcdSnapshot, EtcdStore};
use crate::error::{Error, Result};
use crate::schema::Family;
use crate::store::{ScanItem, ScanSpec, MAX_SCAN_ITEMS};

/// One key-value pair as etcd returned it.
#[derive(Debug, Clone)]
pub(crate) struct Kv {
    pub(crate) key: Vec<u8>,
    pub(crate) value: Vec<u8>,
    pub(crate) create_revision: i64,
    pub(crate) lease: i64,
}

impl Kv {
    pub(crate) fn from_pb(kv: etcd_client::proto::PbKeyValue) -> Kv {
        Kv {
            key: kv.key,
            value: kv.value,
            create_revision: kv.create_revision,
            lease: kv.lease,
        }
    }
}

/// One range answer.
pub(crate) struct Page {
    pub(crate) kvs: Vec<Kv>,
    pub(crate) more: bool,
    /// Revision of the store when the range was served (the header revision).
    pub(crate) revision: i64,
}

/// Why a read at a revision failed.
pub(crate) enum ReadError {
    /// The revision was compacted away.
    Compacted,
    /// Anything else (already retried where that made sense).
    Fatal(Error),
}

impl From<Error> for ReadError {
    fn from(e: Error) -> Self {
        ReadError::Fatal(e)
    }
}

/// One range `[start, end)` (`end` `None`: exactly `start`) of at most `limit` keys (0 = no
/// limit) at `revision` (0 = latest), linearizable, retried on transient failures within the
/// store's retry window.
pub(crate) fn range(
    store: &EtcdStore,
    start: Vec<u8>,
    end: Option<Vec<u8>>,
    limit: i64,
    revision: i64,
) -> std::result::Result<Page, ReadError> {
    let mut backoff = Backoff::new(store.options().retry_window);
    loop {
        let mut kv = store.kv();
        let (start, end) = (start.clone(), end.clone());
        let fut = async move {
            let mut opts = GetOptions::new().with_limit(limit).with_revision(revision);
            if let Some(end) = end {
                opts = opts.with_range(end);
            }
            kv.get(start, Some(opts)).await
        };
        match bridge::run(fut)? {
            Ok(resp) => {
                let pb = resp.0;
                return Ok(Page {
                    revision: pb.header.map_or(0, |h| h.revision),
                    more: pb.more,
                    kvs: pb.kvs.into_iter().map(Kv::from_pb).collect(),
                });
            }
            Err(e) => match classify(&e) {
                Failure::Compacted => return Err(ReadError::Compacted),
                Failure::Transient(r) => {
                    if !backoff.wait() {
                        return Err(unavailable(format!("etcd range: {r}"), false).into());
                    }
                }
                Failure::TooLarge(r) | Failure::Permanent(r) => {
                    return Err(unavailable(format!("etcd range: {r}"), false).into())
                }
            },
        }
    }
}

/// A [`range`] at the latest revision, where compaction cannot interfere.
pub(crate) fn range_latest(
    store: &EtcdStore,
    start: Vec<u8>,
    end: Option<Vec<u8>>,
    limit: i64,
) -> Result<Page> {
    range(store, start, end, limit, 0).map_err(|e| match e {
        ReadError::Compacted => unavailable("etcd reported a compacted latest revision", false),
        ReadError::Fatal(e) => e,
    })
}

/// The latest value of one exact key.
pub(crate) fn get_latest(store: &EtcdStore, key: Vec<u8>) -> Result<Option<Kv>> {
    let page = range_latest(store, key.clone(), None, 1)?;
    Ok(page.kvs.into_iter().find(|kv| kv.key == key))
}

/// The shard commit clock and the revision it was read at.
///
/// Errors: [`Error::StoreUnavailable`]; [`Error::Codec`] for a malformed clock.
pub(crate) fn clock(store: &EtcdStore) -> Result<(u64, i64)> {
    let key = store.keys().clock();
    let page = range_latest(store, key.clone(), None, 1)?;
    let version = match page.kvs.iter().find(|kv| kv.key == key) {
        None => 0,
        Some(kv) => decode_u64("etcd_clock", &kv.value)?,
    };
    Ok((version, page.revision))
}

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
