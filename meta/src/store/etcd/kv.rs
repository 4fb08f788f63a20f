//! The raw etcd range primitives every other part of the store builds on: one range at a
//! revision with retries, the latest value of a key, and the shard commit clock.

use etcd_client::GetOptions;

use super::bridge::{self, classify, unavailable, Backoff, Failure};
use super::handle::EtcdStore;
use super::keys::decode_u64;
use crate::error::{Error, Result};

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
