//! Writes: one [`CheckedWrite`] as one etcd transaction (see the module docs of [`super`]), and
//! the small engine transactions (read-only multi-gets, CAS of engine records, compaction).

use std::collections::BTreeMap;

use etcd_client::{Compare, CompareOp, Txn, TxnOp};

use super::bridge::{self, classify, unavailable, Backoff, Failure};
use super::handle::EtcdStore;
use super::keys::decode_u64;
use super::kv::Kv;
use crate::error::{Error, Result};
use crate::store::predicate::{Expectation, Mutation};
use crate::store::txn::{CheckedWrite, WriteFailure};

/// Per-op framing bytes assumed when sizing a request against `--max-request-bytes`.
const OP_OVERHEAD_BYTES: usize = 48;
/// Room left for the request envelope.
const REQUEST_SLACK_BYTES: usize = 4096;

/// The end of [`send`].
enum Sent {
    /// etcd answered; `retried`: an earlier attempt got no answer (and may have applied).
    Answered {
        resp: etcd_client::proto::PbTxnResponse,
        retried: bool,
    },
    /// Transient failures until the retry window ran out (an attempt may have applied).
    TimedOut(String),
    /// A non-transient failure; `retried` as above.
    Failed { failure: Failure, retried: bool },
}

/// Sends the transaction `build` makes (the same one at every attempt) with retries of
/// transient failures within the store's retry window.
fn send(store: &EtcdStore, build: impl Fn() -> Txn, backoff: &mut Backoff) -> Sent {
    let mut retried = false;
    loop {
        let mut kv = store.kv();
        let txn = build();
        let outcome = match bridge::run(async move { kv.txn(txn).await }) {
            Ok(o) => o,
            Err(e) => {
                return Sent::Failed {
                    failure: Failure::Permanent(e.to_string()),
                    retried,
                }
            }
        };
        match outcome {
            Ok(resp) => {
                return Sent::Answered {
                    resp: resp.0,
                    retried,
                }
            }
            Err(e) => match classify(&e) {
                Failure::Transient(r) => {
                    retried = true;
                    if !backoff.wait() {
                        return Sent::TimedOut(r);
                    }
                }
                failure => return Sent::Failed { failure, retried },
            },
        }
    }
}

/// The range results of a transaction branch made only of exact-key gets, in order.
fn gets(resp: etcd_client::proto::PbTxnResponse, keys: &[Vec<u8>]) -> Result<Vec<Option<Kv>>> {
    use etcd_client::proto::PbTxnOpResponse;
    if resp.responses.len() != keys.len() {
        return Err(unavailable(
            format!(
                "etcd answered {} range(s) for {} get(s)",
                resp.responses.len(),
                keys.len()
            ),
            false,
        ));
    }
    resp.responses
        .into_iter()
        .zip(keys)
        .map(|(op, key)| match op.response {
            Some(PbTxnOpResponse::ResponseRange(r)) => {
                Ok(r.kvs.into_iter().map(Kv::from_pb).find(|kv| &kv.key == key))
            }
            _ => Err(unavailable(
                "etcd answered a get with another response",
                false,
            )),
        })
        .collect()
}

/// Reads `keys` (exact) in one read-only transaction at the latest revision; returns the values
/// and that revision.
pub(crate) fn read_txn(store: &EtcdStore, keys: Vec<Vec<u8>>) -> Result<(Vec<Option<Kv>>, i64)> {
    let mut backoff = Backoff::new(store.options().retry_window);
    let build = || {
        Txn::new().and_then(
            keys.iter()
                .map(|k| TxnOp::get(k.clone(), None))
                .collect::<Vec<_>>(),
        )
    };
    match send(store, build, &mut backoff) {
        Sent::Answered { resp, .. } => {
            let revision = resp.header.as_ref().map_or(0, |h| h.revision);
            Ok((gets(resp, &keys)?, revision))
        }
        Sent::TimedOut(r) => Err(unavailable(format!("etcd read: {r}"), false)),
        Sent::Failed { failure, .. } => Err(unavailable(
            format!("etcd read: {}", failure_reason(&failure)),
            false,
        )),
    }
}

/// Compare-and-set of one engine record: sets `key` to `value` when it currently holds
/// `expected` (`None`: absent), optionally deleting the range `[start, end)` in the same
/// transaction. Returns whether it applied (after an unanswered attempt, a record already at
/// `value` counts as applied).
pub(crate) fn txn_cas(
    store: &EtcdStore,
    key: Vec<u8>,
    expected: Option<Vec<u8>>,
    value: Vec<u8>,
    delete: Option<(Vec<u8>, Vec<u8>)>,
) -> Result<bool> {
    let mut backoff = Backoff::new(store.options().retry_window);
    let build = || {
        let cmp = match &expected {
            None => Compare::version(key.clone(), CompareOp::Equal, 0),
            Some(v) => Compare::value(key.clone(), CompareOp::Equal, v.clone()),
        };
        let mut ops = vec![TxnOp::put(key.clone(), value.clone(), None)];
        if let Some((start, end)) = &delete {
            ops.push(TxnOp::delete(
                start.clone(),
                Some(etcd_client::DeleteOptions::new().with_range(end.clone())),
            ));
        }
        Txn::new()
            .when(vec![cmp])
            .and_then(ops)
            .or_else(vec![TxnOp::get(key.clone(), None)])
    };
    match send(store, build, &mut backoff) {
        Sent::Answered { resp, retried } => {
            if resp.succeeded {
                return Ok(true);
            }
            let now = gets(resp, std::slice::from_ref(&key))?;
            let at_value = now
                .first()
                .and_then(Option::as_ref)
                .is_some_and(|kv| kv.value == value);
            Ok(retried && at_value)
        }
        Sent::TimedOut(r) => Err(unavailable(format!("etcd compare-and-set: {r}"), true)),
        Sent::Failed { failure, retried } => Err(unavailable(
            format!("etcd compare-and-set: {}", failure_reason(&failure)),
            retried,
        )),
    }
}

fn failure_reason(f: &Failure) -> String {
    match f {
        Failure::Compacted => "compacted".into(),
        Failure::Transient(r) | Failure::TooLarge(r) | Failure::Permanent(r) => r.clone(),
    }
}

/// Creates `key` with `value` unless it exists.
pub(crate) fn put_if_absent(store: &EtcdStore, key: Vec<u8>, value: Vec<u8>) -> Result<()> {
    txn_cas(store, key, None, value, None).map(|_| ())
}

/// Compacts the cluster's history to `revision` (already compacted further: done).
pub(crate) fn compact_to(store: &EtcdStore, revision: i64) -> Result<()> {
    let mut backoff = Backoff::new(store.options().retry_window);
    loop {
        let mut kv = store.kv();
        match bridge::run(async move { kv.compact(revision, None).await })? {
            Ok(_) => return Ok(()),
            Err(e) => match classify(&e) {
                Failure::Compacted => return Ok(()),
                Failure::Transient(r) => {
                    if !backoff.wait() {
                        return Err(unavailable(format!("etcd compaction: {r}"), false));
                    }
                }
                Failure::TooLarge(r) | Failure::Permanent(r) => {
                    return Err(unavailable(format!("etcd compaction: {r}"), false))
                }
            },
        }
    }
}

fn nonce() -> Result<[u8; 16]> {
    let mut n = [0u8; 16];
    getrandom::fill(&mut n)
        .map_err(|e| unavailable(format!("no randomness for a write nonce: {e}"), false))?;
    Ok(n)
}

fn exhausted(resource: &'static str, maximum: usize) -> WriteFailure {
    WriteFailure::Other(Error::ResourceExhausted {
        resource,
        maximum: maximum as u64,
    })
}

/// [`crate::store::TxnStore::write`] of an etcd store.
pub(crate) fn write(store: &EtcdStore, w: CheckedWrite) -> std::result::Result<u64, WriteFailure> {
    let keys = store.keys();
    let options = store.options();
    // etcd refuses a key twice in one transaction: the last mutation of a key wins, as it does
    // when holt applies a batch in order.
    let mut rows: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    for m in w.mutations {
        match m {
            Mutation::Put { family, key, value } => {
                rows.insert(keys.row(family, &key), Some(value))
            }
            Mutation::Delete { family, key } => rows.insert(keys.row(family, &key), None),
        };
    }
    let preds: Vec<(Vec<u8>, crate::store::predicate::Predicate)> = w
        .predicates
        .into_iter()
        .map(|p| (keys.row(p.family, &p.key), p))
        .collect();
    let fence = options.owner_fence.clone();
    let fenced = usize::from(fence.is_some());
    let ops = (preds.len() + 1 + fenced)
        .max(rows.len() + 3)
        .max(preds.len() + 2 + fenced);
    if ops > options.limits.max_txn_ops {
        return Err(exhausted(
            "etcd transaction operations (--max-txn-ops)",
            options.limits.max_txn_ops,
        ));
    }
    let bytes: usize = rows
        .iter()
        .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len) + OP_OVERHEAD_BYTES)
        .sum::<usize>()
        + preds
            .iter()
            .map(|(k, p)| {
                2 * (k.len() + OP_OVERHEAD_BYTES)
                    + match &p.expect {
                        Expectation::Equals(v) => v.len(),
                        _ => 0,
                    }
            })
            .sum::<usize>()
        + 8 * 128;
    if bytes + REQUEST_SLACK_BYTES > options.limits.max_request_bytes {
        return Err(exhausted(
            "etcd request bytes (--max-request-bytes)",
            options.limits.max_request_bytes,
        ));
    }

    let mut backoff = Backoff::new(options.retry_window);
    let mut clock_moves = 0u32;
    loop {
        // Fail-stop: an owner past its serving deadline sends nothing (every earlier iteration
        // was answered and applied nothing, so refusing here leaves nothing behind).
        if let Some(check) = fence.as_ref().and_then(|f| f.serving.as_ref()) {
            if !check.serving() {
                return Err(WriteFailure::Other(Error::Fenced {
                    reason: "this owner stopped serving the shard: its lease could expire before \
                             the write lands (fail-stop margin); nothing was written"
                        .into(),
                }));
            }
        }
        let read_version = match w.read_version {
            Some(v) => v,
            None => super::kv::clock(store).map_err(WriteFailure::Other)?.0,
        };
        let commit_version = read_version
            .checked_add(1)
            .ok_or_else(|| WriteFailure::Other(Error::invalid("commit version space exhausted")))?;
        let nonce = nonce().map_err(WriteFailure::Other)?;
        let clock_key = keys.clock();
        let version_key = keys.version(commit_version);
        let mut probe_keys = vec![clock_key.clone(), version_key.clone()];
        if let Some(f) = &fence {
            probe_keys.push(f.key.clone());
        }
        let pred_base = probe_keys.len();
        probe_keys.extend(preds.iter().map(|(k, _)| k.clone()));
        let build = || {
            let mut compares = Vec::with_capacity(preds.len() + 2);
            compares.push(if read_version == 0 {
                Compare::version(clock_key.clone(), CompareOp::Equal, 0)
            } else {
                Compare::value(
                    clock_key.clone(),
                    CompareOp::Equal,
                    read_version.to_be_bytes().to_vec(),
                )
            });
            if let Some(f) = &fence {
                compares.push(Compare::lease(f.key.clone(), CompareOp::Equal, f.lease_id));
            }
            for (k, p) in &preds {
                compares.push(match &p.expect {
                    Expectation::Absent => Compare::version(k.clone(), CompareOp::Equal, 0),
                    Expectation::Present => Compare::version(k.clone(), CompareOp::Greater, 0),
                    Expectation::Equals(v) => {
                        Compare::value(k.clone(), CompareOp::Equal, v.clone())
                    }
                });
            }
            let mut success = Vec::with_capacity(rows.len() + 3);
            for (k, v) in &rows {
                success.push(match v {
                    Some(v) => TxnOp::put(k.clone(), v.clone(), None),
                    None => TxnOp::delete(k.clone(), None),
                });
            }
            success.push(TxnOp::put(
                clock_key.clone(),
                commit_version.to_be_bytes().to_vec(),
                None,
            ));
            success.push(TxnOp::put(version_key.clone(), nonce.to_vec(), None));
            if read_version == 0 {
                // The shard's first commit registers its history floor for cluster compaction.
                success.push(TxnOp::put(keys.floor(), keys.floor_value(0), None));
            }
            let failure: Vec<TxnOp> = probe_keys
                .iter()
                .map(|k| TxnOp::get(k.clone(), None))
                .collect();
            Txn::new().when(compares).and_then(success).or_else(failure)
        };
        let resp = match send(store, build, &mut backoff) {
            Sent::Answered { resp, .. } => resp,
            Sent::TimedOut(reason) => {
                return Err(WriteFailure::Other(unavailable(
                    format!("etcd transaction: {reason}"),
                    true,
                )))
            }
            Sent::Failed {
                failure: Failure::TooLarge(_),
                retried: false,
            } => {
                return Err(exhausted(
                    "etcd transaction size (--max-txn-ops / --max-request-bytes)",
                    options.limits.max_txn_ops,
                ))
            }
            Sent::Failed { failure, retried } => {
                return Err(WriteFailure::Other(unavailable(
                    format!("etcd transaction: {}", failure_reason(&failure)),
                    retried,
                )))
            }
        };
        if resp.succeeded {
            return Ok(commit_version);
        }
        let found = gets(resp, &probe_keys).map_err(WriteFailure::Other)?;
        let at = |i: usize| found.get(i).and_then(Option::as_ref);
        // An earlier attempt of this write, sent without an answer, applied.
        if at(1).is_some_and(|kv| kv.value == nonce) {
            return Ok(commit_version);
        }
        let clock_now = at(0)
            .map(|kv| decode_u64("etcd_clock", &kv.value))
            .transpose()
            .map_err(WriteFailure::Other)?
            .unwrap_or(0);
        if clock_now != read_version {
            // Whatever an unanswered attempt did, the commit of `commit_version` is not ours.
            if w.read_version.is_none() {
                clock_moves += 1;
                if clock_moves <= 64 {
                    continue;
                }
            }
            return Err(WriteFailure::ReadVersion {
                expected: read_version,
                actual: clock_now,
            });
        }
        if let Some(f) = &fence {
            if at(2).map(|kv| kv.lease) != Some(f.lease_id) {
                return Err(WriteFailure::Other(Error::Fenced {
                    reason: "the shard-owner lease is no longer held (expired or taken over); this owner may not commit".into(),
                }));
            }
        }
        for (i, (_, p)) in preds.iter().enumerate() {
            let got = at(pred_base + i);
            let holds = match &p.expect {
                Expectation::Absent => got.is_none(),
                Expectation::Present => got.is_some(),
                Expectation::Equals(v) => got.is_some_and(|kv| &kv.value == v),
            };
            if !holds {
                return Err(WriteFailure::Predicate {
                    family: Some(p.family),
                    key: p.key.clone(),
                });
            }
        }
        return Err(WriteFailure::Other(unavailable(
            "etcd refused the transaction although every compare holds",
            false,
        )));
    }
}
