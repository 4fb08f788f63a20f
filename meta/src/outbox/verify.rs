//! Open-time verification of the RecoveryOutbox (see the parent module docs).

use super::{
    chain_digest, decode_chunk, decode_chunk_key, decode_header_key, decode_record, OutboxHeader,
    CHUNK_BYTES, CHUNK_KEY_TAG, HEADER_KEY_TAG,
};
use crate::codec::system::RecoveryTail;
use crate::error::{Error, Result};
use crate::schema::Family;
use crate::store::{ScanItem, ScanSpec, Snapshot, MAX_SCAN_ITEMS};

/// What a successful verification walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxSummary {
    /// Number of records (= the last LSN, since LSNs start at 1).
    pub records: u64,
    /// Number of chunk rows.
    pub chunks: u64,
    /// Sum of logical record lengths in bytes.
    pub record_bytes: u64,
}

fn corrupt(lsn: u64, reason: impl Into<String>) -> Error {
    Error::RecoveryOutboxCorrupt {
        lsn,
        reason: reason.into(),
    }
}

/// An ordered cursor over the rows of one RecoveryOutbox key prefix, fetched in bounded scans
/// of [`MAX_SCAN_ITEMS`] rows (memory: one page).
struct Rows<'a, S: Snapshot> {
    snap: &'a S,
    prefix: Vec<u8>,
    page: std::collections::VecDeque<(Vec<u8>, Vec<u8>)>,
    marker: Option<Vec<u8>>,
    exhausted: bool,
}

impl<'a, S: Snapshot> Rows<'a, S> {
    fn new(snap: &'a S, prefix: Vec<u8>) -> Self {
        Rows {
            snap,
            prefix,
            page: Default::default(),
            marker: None,
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

/// Verifies the whole outbox at `snap` against the System `tail`.
///
/// Errors: [`Error::RecoveryOutboxCorrupt`] naming the first bad LSN; storage errors.
pub(crate) fn verify<S: Snapshot>(snap: &S, tail: &RecoveryTail) -> Result<OutboxSummary> {
    let mut headers = Rows::new(snap, vec![HEADER_KEY_TAG]);
    let mut chunks = Rows::new(snap, vec![CHUNK_KEY_TAG]);
    if snap.get(Family::RecoveryOutbox, &[])?.is_some() {
        return Err(corrupt(1, "row with an empty key"));
    }
    let mut summary = OutboxSummary {
        records: 0,
        chunks: 0,
        record_bytes: 0,
    };
    let mut previous = RecoveryTail::GENESIS.chain_digest;
    let mut last_key: Option<Vec<u8>> = None;
    let mut expected_lsn: u64 = 1;
    while let Some((key, value)) = headers.next_row(expected_lsn)? {
        let lsn = decode_header_key(&key)
            .map_err(|_| corrupt(expected_lsn, format!("malformed header key {}", hex(&key))))?;
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
    // Every 0x00/0x01 key has been seen; anything after the largest one is foreign.
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
