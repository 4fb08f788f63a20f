//! Verification of the RecoveryOutbox chain (see the parent module docs, "Verification").

use super::record::{
    chain_digest, chunk_key, decode_chunk, decode_chunk_key, decode_header_key, decode_record,
    header_key, OutboxHeader, CHUNK_BYTES, CHUNK_KEY_TAG, HEADER_KEY_TAG,
};
use crate::codec::system::RecoveryTail;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::store::{ScanItem, ScanSpec, Snapshot, MAX_SCAN_ITEMS};

/// What a successful verification walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxSummary {
    /// Number of records verified.
    pub records: u64,
    /// Number of chunk rows verified.
    pub chunks: u64,
    /// Sum of the verified logical record lengths in bytes.
    pub record_bytes: u64,
    /// First LSN verified (`last_lsn + 1` when there was nothing to verify).
    pub first_lsn: u64,
    /// Last LSN of the chain (the System recovery tail's applied LSN).
    pub last_lsn: u64,
}

/// How much of the outbox a verification covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every row of the tree: the retained records start right after the pruned chain point
    /// `from` and nothing below it may remain (the explicit full verification).
    Full,
    /// Only the records after the chain point `from` (open: after the verified head); rows at or
    /// below it are not read.
    Suffix,
}

fn corrupt(lsn: u64, reason: impl Into<String>) -> Error {
    Error::RecoveryOutboxCorrupt {
        lsn,
        reason: reason.into(),
    }
}

/// An ordered cursor over the rows of one RecoveryOutbox key prefix after an optional marker,
/// fetched in bounded scans of [`MAX_SCAN_ITEMS`] rows (memory: one page).
struct Rows<'a, S: Snapshot> {
    snap: &'a S,
    prefix: Vec<u8>,
    page: std::collections::VecDeque<(Vec<u8>, Vec<u8>)>,
    marker: Option<Vec<u8>>,
    exhausted: bool,
}

impl<'a, S: Snapshot> Rows<'a, S> {
    fn new(snap: &'a S, prefix: u8, after: Option<Vec<u8>>) -> Self {
        Rows {
            snap,
            prefix: vec![prefix],
            page: Default::default(),
            marker: after,
            exhausted: false,
        }
    }

    fn fill(&mut self, lsn: u64) -> Result<()> {
        if !self.page.is_empty() || self.exhausted {
            return Ok(());
        }
        let spec = ScanSpec {
            prefix: self.prefix.clone(),
            start_after: self.marker.take(),
            delimiter: None,
            limit: MAX_SCAN_ITEMS,
        };
        let items = self.snap.scan(Family::RecoveryOutbox, &spec)?;
        self.exhausted = items.len() < MAX_SCAN_ITEMS;
        for item in items {
            match item {
                ScanItem::Row { key, value } => {
                    self.marker = Some(key.clone());
                    self.page.push_back((key, value));
                }
                ScanItem::Prefix(_) => {
                    return Err(corrupt(lsn, "unexpected rollup in an undelimited scan"))
                }
            }
        }
        Ok(())
    }

    /// The next row, or a typed failure.
    fn next_row(&mut self, lsn: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.fill(lsn)?;
        Ok(self.page.pop_front())
    }

    /// The next row's key without consuming it.
    fn peek_key(&mut self, lsn: u64) -> Result<Option<&[u8]>> {
        self.fill(lsn)?;
        Ok(self.page.front().map(|(k, _)| k.as_slice()))
    }
}

/// Peeks at the next chunk key, decoded.
fn peek_chunk<S: Snapshot>(it: &mut Rows<'_, S>, lsn: u64) -> Result<Option<(u64, u32)>> {
    match it.peek_key(lsn)? {
        None => Ok(None),
        Some(key) => decode_chunk_key(key)
            .map(Some)
            .map_err(|_| corrupt(lsn, format!("malformed chunk key {}", hex(key)))),
    }
}

fn hex(b: &[u8]) -> String {
    crate::ids::to_hex(b)
}

/// Checks that the chain point `point` (the verified head) is anchored in the stored chain: at
/// the pruned point itself it must equal it; above it, the retained header at `point.applied_lsn`
/// must carry exactly its digest; and it may not pass the System `tail`.
///
/// Errors: [`Error::RecoveryOutboxCorrupt`] naming `point.applied_lsn`; [`Error::Storage`].
pub(crate) fn check_anchor<S: Snapshot>(
    snap: &S,
    pruned: &RecoveryTail,
    point: &RecoveryTail,
    tail: &RecoveryTail,
) -> Result<()> {
    let lsn = point.applied_lsn;
    if lsn < pruned.applied_lsn || lsn > tail.applied_lsn || pruned.applied_lsn > tail.applied_lsn {
        return Err(corrupt(
            lsn,
            format!(
                "verified head LSN {lsn} is outside the retained chain (pruned through LSN {}, \
                 tail LSN {})",
                pruned.applied_lsn, tail.applied_lsn
            ),
        ));
    }
    if lsn == pruned.applied_lsn {
        if point.chain_digest != pruned.chain_digest {
            return Err(corrupt(
                lsn,
                "verified head digest differs from the pruned point",
            ));
        }
        return Ok(());
    }
    let Some(bytes) = snap.get(Family::RecoveryOutbox, &header_key(lsn))? else {
        return Err(corrupt(
            lsn,
            format!("the verified head's record LSN {lsn} is missing"),
        ));
    };
    let header =
        OutboxHeader::decode(&bytes).map_err(|e| corrupt(lsn, format!("malformed header: {e}")))?;
    if header.chain_digest != point.chain_digest {
        return Err(corrupt(
            lsn,
            "verified head digest differs from the stored record",
        ));
    }
    Ok(())
}

/// Verifies the outbox at `snap` from the chain point `from` (exclusive) to the System
/// `tail`, in `scope`.
///
/// Checks: contiguous LSNs starting at `from.applied_lsn + 1`, strict header/chunk framing,
/// declared vs present chunks (missing and orphan chunks), the hash chain starting at
/// `from.chain_digest`, a decodable logical record naming its own LSN, no row after the last
/// record (foreign rows), agreement of the last record with `tail`; with [`Scope::Full`] also
/// that no row below `from` remains. Memory is bounded by the largest record.
///
/// Errors: [`Error::RecoveryOutboxCorrupt`] naming the first bad LSN; [`Error::Storage`].
pub(crate) fn verify<S: Snapshot>(
    snap: &S,
    from: &RecoveryTail,
    scope: Scope,
    tail: &RecoveryTail,
) -> Result<OutboxSummary> {
    let start = from.applied_lsn;
    let (header_after, chunk_after) = match scope {
        Scope::Full => (None, None),
        Scope::Suffix => (
            (start > 0).then(|| header_key(start)),
            (start > 0).then(|| chunk_key(start, u32::MAX)),
        ),
    };
    let mut headers = Rows::new(snap, HEADER_KEY_TAG, header_after);
    let mut chunks = Rows::new(snap, CHUNK_KEY_TAG, chunk_after.clone());
    if snap.get(Family::RecoveryOutbox, &[])?.is_some() {
        return Err(corrupt(start + 1, "row with an empty key"));
    }
    let mut summary = OutboxSummary {
        records: 0,
        chunks: 0,
        record_bytes: 0,
        first_lsn: start + 1,
        last_lsn: tail.applied_lsn,
    };
    let mut previous = from.chain_digest;
    let mut last_key: Option<Vec<u8>> = chunk_after;
    let mut expected_lsn: u64 = start + 1;
    while let Some((key, value)) = headers.next_row(expected_lsn)? {
        let lsn = decode_header_key(&key)
            .map_err(|_| corrupt(expected_lsn, format!("malformed header key {}", hex(&key))))?;
        if lsn < expected_lsn {
            return Err(corrupt(
                lsn,
                format!("record LSN {lsn} remains below the pruned chain point (LSN {start})"),
            ));
        }
        if lsn != expected_lsn {
            return Err(corrupt(
                expected_lsn,
                format!("LSN {expected_lsn} is missing (next header is LSN {lsn})"),
            ));
        }
        if lsn > tail.applied_lsn {
            return Err(corrupt(
                lsn,
                format!(
                    "record beyond the System recovery tail (applied LSN {})",
                    tail.applied_lsn
                ),
            ));
        }
        let header = OutboxHeader::decode(&value)
            .map_err(|e| corrupt(lsn, format!("malformed header: {e}")))?;
        if header.previous_digest != previous {
            return Err(corrupt(
                lsn,
                "header's previous digest does not match the chain",
            ));
        }
        // The declared length comes from disk: never pre-allocate more than one chunk for it.
        let mut record = Vec::with_capacity(
            usize::try_from(header.record_len).map_or(0, |n| n.min(CHUNK_BYTES)),
        );
        for index in 0..header.chunk_count {
            match peek_chunk(&mut chunks, lsn)? {
                None => {
                    return Err(corrupt(
                        lsn,
                        format!("chunk {index} of {} is missing", header.chunk_count),
                    ))
                }
                Some(at) if at < (lsn, index) => {
                    return Err(corrupt(
                        at.0,
                        format!("orphan chunk {} of LSN {}", at.1, at.0),
                    ))
                }
                Some(at) if at > (lsn, index) => {
                    return Err(corrupt(
                        lsn,
                        format!("chunk {index} of {} is missing", header.chunk_count),
                    ))
                }
                Some(_) => {}
            }
            let Some((ckey, cvalue)) = chunks.next_row(lsn)? else {
                return Err(corrupt(lsn, format!("chunk {index} vanished")));
            };
            let payload = decode_chunk(&cvalue)
                .map_err(|e| corrupt(lsn, format!("malformed chunk {index}: {e}")))?;
            let last = index + 1 == header.chunk_count;
            let want = if last {
                header.record_len - (u64::from(index) * CHUNK_BYTES as u64)
            } else {
                CHUNK_BYTES as u64
            };
            if payload.len() as u64 != want {
                return Err(corrupt(
                    lsn,
                    format!(
                        "chunk {index} carries {} byte(s); strict framing requires {want}",
                        payload.len()
                    ),
                ));
            }
            record.extend_from_slice(payload);
            summary.chunks += 1;
            last_key = Some(ckey);
        }
        if chain_digest(&previous, &record) != header.chain_digest {
            return Err(corrupt(lsn, "chain digest mismatch"));
        }
        let decoded =
            decode_record(&record).map_err(|e| corrupt(lsn, format!("undecodable record: {e}")))?;
        if decoded.recovery_lsn != lsn {
            return Err(corrupt(
                lsn,
                format!("record names LSN {}", decoded.recovery_lsn),
            ));
        }
        previous = header.chain_digest;
        summary.records += 1;
        summary.record_bytes += header.record_len;
        if last_key.as_ref().is_none_or(|k| k < &key) {
            last_key = Some(key);
        }
        expected_lsn += 1;
    }
    if let Some((lsn, index)) = peek_chunk(&mut chunks, expected_lsn)? {
        return Err(corrupt(lsn, format!("orphan chunk {index} of LSN {lsn}")));
    }
    // Every 0x00/0x01 key of the verified range has been seen; anything after the largest one
    // is foreign.
    let rest = snap.scan(
        Family::RecoveryOutbox,
        &ScanSpec {
            prefix: Vec::new(),
            start_after: last_key,
            delimiter: None,
            limit: 1,
        },
    )?;
    if let Some(item) = rest.into_iter().next() {
        let key = item.marker().to_vec();
        return Err(corrupt(
            expected_lsn,
            format!("foreign row {} in the recovery outbox", hex(&key)),
        ));
    }
    let last = expected_lsn - 1;
    if last != tail.applied_lsn {
        return Err(corrupt(
            last + 1,
            format!(
                "System recovery tail names LSN {} but the outbox ends at LSN {last}",
                tail.applied_lsn
            ),
        ));
    }
    if previous != tail.chain_digest {
        return Err(corrupt(
            last,
            "System recovery tail digest differs from the outbox chain",
        ));
    }
    Ok(summary)
}
