//! Appending one record: the rows a batch adds (header, chunks, the new System recovery tail)
//! under an Equals predicate on the previous tail (see the parent module docs).

use super::record::{
    chain_digest, chunk_key, chunks_for, encode_chunk, encode_record, header_key, OutboxHeader,
    RecoveryEntry, CHUNK_BYTES,
};
use crate::codec::system::{RecoveryTail, KEY_RECOVERY_TAIL};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::store::predicate::{Mutation, Predicate};

/// The rows one append adds to a batch, and the resulting tail.
#[derive(Debug, Clone)]
pub struct OutboxAppend {
    /// Predicate: the System tail still holds the previous tail bytes.
    pub tail_predicate: Predicate,
    /// Header put, chunk puts, then the System tail put.
    pub rows: Vec<Mutation>,
    /// The tail after the append.
    pub tail: RecoveryTail,
}

/// Builds the rows appending `entry` (with the batch's `mutations`) at `previous.applied_lsn + 1`
/// for a batch that commits at `commit_version`.
///
/// Errors: [`Error::InvalidArgument`] when the LSN space or chunk index space is exhausted.
pub fn append(
    previous: &RecoveryTail,
    commit_version: u64,
    entry: &RecoveryEntry,
    mutations: &[Mutation],
) -> Result<OutboxAppend> {
    let lsn = previous
        .applied_lsn
        .checked_add(1)
        .ok_or_else(|| Error::invalid("recovery LSN space exhausted"))?;
    let record = encode_record(lsn, commit_version, entry, mutations);
    let digest = chain_digest(&previous.chain_digest, &record);
    let chunk_count = u32::try_from(chunks_for(record.len() as u64))
        .map_err(|_| Error::invalid("recovery record too large"))?;
    let header = OutboxHeader {
        chunk_count,
        record_len: record.len() as u64,
        previous_digest: previous.chain_digest,
        chain_digest: digest,
    };
    let mut rows = Vec::with_capacity(chunk_count as usize + 2);
    rows.push(Mutation::put(
        Family::RecoveryOutbox,
        header_key(lsn),
        header.encode(),
    ));
    for (i, payload) in record.chunks(CHUNK_BYTES).enumerate() {
        let i = u32::try_from(i).map_err(|_| Error::invalid("too many recovery chunks"))?;
        rows.push(Mutation::put(
            Family::RecoveryOutbox,
            chunk_key(lsn, i),
            encode_chunk(payload),
        ));
    }
    let tail = RecoveryTail {
        applied_lsn: lsn,
        chain_digest: digest,
    };
    rows.push(Mutation::put(
        Family::System,
        KEY_RECOVERY_TAIL.to_vec(),
        tail.encode(),
    ));
    Ok(OutboxAppend {
        tail_predicate: Predicate::equals(
            Family::System,
            KEY_RECOVERY_TAIL.to_vec(),
            previous.encode(),
        ),
        rows,
        tail,
    })
}
