//! The RecoveryOutbox format (see the parent module docs, "Rows", "Logical record" and "Chain
//! digest"): header and chunk keys and values, the chain digest, and the logical record's
//! entries and byte codec. A leaf of `outbox/`: `append.rs`, `verify.rs` and `retention.rs`
//! build on it.

use sha2::{Digest, Sha256};

use crate::codec::{CommandResult, RecoveryOutboxKey};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{LogicalShardId, RequestId, RootId};
use crate::store::predicate::Mutation;

/// First byte of a header key.
pub const HEADER_KEY_TAG: u8 = crate::codec::recovery_outbox::HEADER_TAG;
/// First byte of a chunk key.
pub const CHUNK_KEY_TAG: u8 = crate::codec::recovery_outbox::CHUNK_TAG;
/// Payload bytes per chunk (every chunk but the last is exactly this long).
pub const CHUNK_BYTES: usize = 64 * 1024;
/// Value version of the logical record (docs/metadata-format.md: "the logical recovery-outbox record uses value
/// version 2").
pub const RECORD_VALUE_VERSION: u16 = 2;
/// Value version of the header and chunk storage framing (docs/metadata-format.md: version 1).
pub const FRAME_VALUE_VERSION: u16 = 1;
/// Domain separator of the chain digest.
pub const CHAIN_DOMAIN: &[u8] = b"nokv.recovery_outbox.chain.v2\0";
/// Encoded header value length in bytes.
pub const HEADER_VALUE_BYTES: usize = 2 + 4 + 8 + 32 + 32;

const FAMILY: &str = "recovery_outbox";

/// Header row key: `0x00 | u64be lsn` ([`RecoveryOutboxKey::Header`]).
pub fn header_key(lsn: u64) -> Vec<u8> {
    RecoveryOutboxKey::Header { recovery_lsn: lsn }.encode()
}

/// Chunk row key: `0x01 | u64be lsn | u32be chunk_index` ([`RecoveryOutboxKey::Chunk`]).
pub fn chunk_key(lsn: u64, index: u32) -> Vec<u8> {
    RecoveryOutboxKey::Chunk {
        recovery_lsn: lsn,
        chunk_index: index,
    }
    .encode()
}

/// Decodes a header key. Errors: [`Error::Codec`] unless exactly `0x00 | 8 bytes`.
pub fn decode_header_key(k: &[u8]) -> Result<u64> {
    match RecoveryOutboxKey::decode(k)? {
        RecoveryOutboxKey::Header { recovery_lsn } => Ok(recovery_lsn),
        RecoveryOutboxKey::Chunk { .. } => Err(Error::codec(FAMILY, "not a header key")),
    }
}

/// Decodes a chunk key into `(lsn, chunk_index)`. Errors: [`Error::Codec`] unless exactly
/// `0x01 | 8 bytes | 4 bytes`.
pub fn decode_chunk_key(k: &[u8]) -> Result<(u64, u32)> {
    match RecoveryOutboxKey::decode(k)? {
        RecoveryOutboxKey::Chunk {
            recovery_lsn,
            chunk_index,
        } => Ok((recovery_lsn, chunk_index)),
        RecoveryOutboxKey::Header { .. } => Err(Error::codec(FAMILY, "not a chunk key")),
    }
}

/// The storage header of one record (value version 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxHeader {
    /// Number of chunk rows (`ceil(record_len / CHUNK_BYTES)`).
    pub chunk_count: u32,
    /// Length of the logical record in bytes.
    pub record_len: u64,
    /// Chain digest of the previous LSN (genesis: zeros).
    pub previous_digest: [u8; 32],
    /// Chain digest after this record.
    pub chain_digest: [u8; 32],
}

impl OutboxHeader {
    /// Encodes the header value (see module docs).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER_VALUE_BYTES);
        v.extend_from_slice(&FRAME_VALUE_VERSION.to_be_bytes());
        v.extend_from_slice(&self.chunk_count.to_be_bytes());
        v.extend_from_slice(&self.record_len.to_be_bytes());
        v.extend_from_slice(&self.previous_digest);
        v.extend_from_slice(&self.chain_digest);
        v
    }

    /// Decodes a header value. Errors: [`Error::Codec`] for another version, a wrong length, or
    /// a chunk count that does not match the record length under strict framing.
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut r = Reader::new(b);
        r.version(FRAME_VALUE_VERSION)?;
        let chunk_count = r.u32()?;
        let record_len = r.u64()?;
        let previous_digest = r.b32()?;
        let chain_digest = r.b32()?;
        r.finish()?;
        if u64::from(chunk_count) != chunks_for(record_len) {
            return Err(Error::codec(
                FAMILY,
                format!("header declares {chunk_count} chunk(s) for a {record_len}-byte record"),
            ));
        }
        Ok(OutboxHeader {
            chunk_count,
            record_len,
            previous_digest,
            chain_digest,
        })
    }
}

/// Number of chunks strict framing uses for `len` bytes.
pub fn chunks_for(len: u64) -> u64 {
    len.div_ceil(CHUNK_BYTES as u64)
}

/// Encodes one chunk value: `u16be 1 | u32be len | payload`.
pub fn encode_chunk(payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(6 + payload.len());
    v.extend_from_slice(&FRAME_VALUE_VERSION.to_be_bytes());
    v.extend_from_slice(
        &u32::try_from(payload.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    v.extend_from_slice(payload);
    v
}

/// Decodes one chunk value into its payload. Errors: [`Error::Codec`] for another version or a
/// length that does not match the value.
pub fn decode_chunk(b: &[u8]) -> Result<&[u8]> {
    let mut r = Reader::new(b);
    r.version(FRAME_VALUE_VERSION)?;
    let payload = r.bytes()?;
    r.finish()?;
    Ok(payload)
}

/// `SHA-256(CHAIN_DOMAIN || previous || record_bytes)` (see module docs).
pub fn chain_digest(previous: &[u8; 32], record_bytes: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(CHAIN_DOMAIN);
    h.update(previous);
    h.update(record_bytes);
    h.finalize().into()
}

/// Discriminant of a record kind.
const KIND_STORE_INITIALIZATION: u8 = 1;
const KIND_OWNER_EPOCH_ADVANCE: u8 = 2;
const KIND_METADATA_COMMAND: u8 = 3;
const KIND_LEASE_CLOCK_OBSERVATION: u8 = 4;

/// What one record describes, with its typed deterministic result evidence.
// One entry is decoded per record at open; the size difference between kinds does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoveryEntry {
    /// The initializing commit of an empty store (always LSN 1).
    StoreInitialization {
        /// Root placed on the shard.
        root_id: RootId,
        /// The logical shard.
        logical_shard_id: LogicalShardId,
        /// Installed placement generation.
        placement_generation: u64,
        /// The first owner epoch (1).
        owner_epoch: u64,
    },
    /// A physical-owner epoch advance at open.
    OwnerEpochAdvance {
        /// Epoch before the open.
        previous_epoch: u64,
        /// Epoch of the new owner handle.
        owner_epoch: u64,
    },
    /// One applied [`crate::command::MetadataCommand`].
    MetadataCommand {
        /// Command root.
        root_id: RootId,
        /// Command logical shard.
        logical_shard_id: LogicalShardId,
        /// Placement generation the command carried.
        placement_generation: u64,
        /// Owner epoch the command carried.
        owner_epoch: u64,
        /// Replay identity.
        request_id: RequestId,
        /// SHA-256 over the canonical command inputs.
        command_digest: [u8; 32],
        /// Read version the command was built on (commit version − 1).
        read_version: u64,
        /// The deterministic result (the exact CommandDedupe result).
        result: CommandResult,
    },
    /// A monotonic lease-clock observation that changed the persisted System lease clock
    /// (docs/metadata-format.md, "Snapshot Lifecycle And History Holds": the lease clock is shard-local durable state).
    LeaseClockObservation {
        /// Owner epoch of the observing handle.
        owner_epoch: u64,
        /// The wall clock the owner observed, Unix milliseconds.
        observed_wall_unix_ms: u64,
        /// Persisted high-water before the observation (0 when none was recorded).
        previous_high_water_unix_ms: u64,
        /// Persisted high-water after the observation.
        high_water_unix_ms: u64,
        /// Earliest wall time at which the reaper may claim anything (raised on regression).
        reap_not_before_unix_ms: u64,
    },
}

/// One decoded logical record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryRecord {
    /// Recovery LSN (1-based, contiguous).
    pub recovery_lsn: u64,
    /// holt commit version of the batch that applied the record.
    pub commit_version: u64,
    /// The entry and its result evidence.
    pub entry: RecoveryEntry,
    /// The exact ordered authoritative mutations of the batch.
    pub mutations: Vec<Mutation>,
}

/// Encodes a logical record (value version 2) from borrowed parts.
pub fn encode_record(
    recovery_lsn: u64,
    commit_version: u64,
    entry: &RecoveryEntry,
    mutations: &[Mutation],
) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(256));
    w.u16(RECORD_VALUE_VERSION);
    w.u64(recovery_lsn);
    w.u64(commit_version);
    match entry {
        RecoveryEntry::StoreInitialization {
            root_id,
            logical_shard_id,
            placement_generation,
            owner_epoch,
        } => {
            w.u8(KIND_STORE_INITIALIZATION);
            w.raw(root_id.as_bytes());
            w.raw(logical_shard_id.as_bytes());
            w.u64(*placement_generation);
            w.u64(*owner_epoch);
        }
        RecoveryEntry::OwnerEpochAdvance {
            previous_epoch,
            owner_epoch,
        } => {
            w.u8(KIND_OWNER_EPOCH_ADVANCE);
            w.u64(*previous_epoch);
            w.u64(*owner_epoch);
        }
        RecoveryEntry::MetadataCommand {
            root_id,
            logical_shard_id,
            placement_generation,
            owner_epoch,
            request_id,
            command_digest,
            read_version,
            result,
        } => {
            w.u8(KIND_METADATA_COMMAND);
            w.raw(root_id.as_bytes());
            w.raw(logical_shard_id.as_bytes());
            w.u64(*placement_generation);
            w.u64(*owner_epoch);
            w.raw(request_id.as_bytes());
            w.raw(command_digest);
            w.u64(*read_version);
            w.bytes(&result.encode());
        }
        RecoveryEntry::LeaseClockObservation {
            owner_epoch,
            observed_wall_unix_ms,
            previous_high_water_unix_ms,
            high_water_unix_ms,
            reap_not_before_unix_ms,
        } => {
            w.u8(KIND_LEASE_CLOCK_OBSERVATION);
            w.u64(*owner_epoch);
            w.u64(*observed_wall_unix_ms);
            w.u64(*previous_high_water_unix_ms);
            w.u64(*high_water_unix_ms);
            w.u64(*reap_not_before_unix_ms);
        }
    }
    w.u32(u32::try_from(mutations.len()).unwrap_or(u32::MAX));
    for m in mutations {
        match m {
            Mutation::Put { family, key, value } => {
                w.u8(1);
                w.u8(family.tag());
                w.bytes(key);
                w.bytes(value);
            }
            Mutation::Delete { family, key } => {
                w.u8(2);
                w.u8(family.tag());
                w.bytes(key);
            }
        }
    }
    w.0
}

/// Decodes a logical record. Errors: [`Error::Codec`] (family `recovery_outbox`) for another
/// value version, an unknown kind, mutation op or family tag, truncation or trailing bytes.
pub fn decode_record(b: &[u8]) -> Result<RecoveryRecord> {
    let mut r = Reader::new(b);
    r.version(RECORD_VALUE_VERSION)?;
    let recovery_lsn = r.u64()?;
    let commit_version = r.u64()?;
    let entry = match r.u8()? {
        KIND_STORE_INITIALIZATION => RecoveryEntry::StoreInitialization {
            root_id: RootId(r.b16()?),
            logical_shard_id: LogicalShardId(r.b16()?),
            placement_generation: r.u64()?,
            owner_epoch: r.u64()?,
        },
        KIND_OWNER_EPOCH_ADVANCE => RecoveryEntry::OwnerEpochAdvance {
            previous_epoch: r.u64()?,
            owner_epoch: r.u64()?,
        },
        KIND_METADATA_COMMAND => RecoveryEntry::MetadataCommand {
            root_id: RootId(r.b16()?),
            logical_shard_id: LogicalShardId(r.b16()?),
            placement_generation: r.u64()?,
            owner_epoch: r.u64()?,
            request_id: RequestId(r.b16()?),
            command_digest: r.b32()?,
            read_version: r.u64()?,
            result: CommandResult::decode(r.bytes()?)?,
        },
        KIND_LEASE_CLOCK_OBSERVATION => RecoveryEntry::LeaseClockObservation {
            owner_epoch: r.u64()?,
            observed_wall_unix_ms: r.u64()?,
            previous_high_water_unix_ms: r.u64()?,
            high_water_unix_ms: r.u64()?,
            reap_not_before_unix_ms: r.u64()?,
        },
        k => return Err(Error::codec(FAMILY, format!("unknown record kind {k}"))),
    };
    let n = r.u32()?;
    // Each mutation takes at least 6 bytes; refuse counts the remaining bytes cannot hold before
    // allocating.
    if (n as usize).saturating_mul(6) > r.remaining() {
        return Err(Error::codec(FAMILY, "mutation count exceeds the record"));
    }
    let mut mutations = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let op = r.u8()?;
        let tag = r.u8()?;
        let family = Family::from_tag(tag)
            .ok_or_else(|| Error::codec(FAMILY, format!("unknown family tag {tag:#04x}")))?;
        let key = r.bytes()?.to_vec();
        mutations.push(match op {
            1 => Mutation::Put {
                family,
                key,
                value: r.bytes()?.to_vec(),
            },
            2 => Mutation::Delete { family, key },
            x => return Err(Error::codec(FAMILY, format!("unknown mutation op {x}"))),
        });
    }
    r.finish()?;
    Ok(RecoveryRecord {
        recovery_lsn,
        commit_version,
        entry,
        mutations,
    })
}

/// Minimal big-endian writer (private to the outbox so its format does not move with other
/// codecs).
struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn raw(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    /// u32 length + bytes; lengths beyond u32 cannot occur (holt caps values at 16 MiB) and are
    /// saturated so the decoder rejects them rather than misreading.
    fn bytes(&mut self, b: &[u8]) {
        self.u32(u32::try_from(b.len()).unwrap_or(u32::MAX));
        self.raw(b);
    }
}

/// Minimal fail-closed reader.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| Error::codec(FAMILY, format!("truncated at byte {}", self.pos)))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.arr::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.arr()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.arr()?))
    }
    fn b16(&mut self) -> Result<[u8; 16]> {
        self.arr()
    }
    fn b32(&mut self) -> Result<[u8; 32]> {
        self.arr()
    }
    fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn version(&mut self, expected: u16) -> Result<()> {
        let v = u16::from_be_bytes(self.arr()?);
        if v != expected {
            return Err(Error::codec(
                FAMILY,
                format!("unknown value format version {v} (supported: {expected})"),
            ));
        }
        Ok(())
    }
    fn finish(self) -> Result<()> {
        if self.pos != self.buf.len() {
            return Err(Error::codec(
                FAMILY,
                format!("{} trailing byte(s)", self.buf.len() - self.pos),
            ));
        }
        Ok(())
    }
}
