//! RecoveryOutbox keys (reserved engine tree `recovery_outbox`; no MetadataFamily tag).
//!
//! ```text
//! header key: 0x00 | u64 recovery_lsn                     (9 bytes)
//! chunk key:  0x01 | u64 recovery_lsn | u32 chunk_index   (13 bytes)
//! ```
//!
//! All headers sort before all chunks; within each kind rows sort by LSN (and chunk index). The
//! header/chunk values (canonical mutation, typed result evidence, previous/current chain digest,
//! storage framing) are written and verified by the command layer ([`crate::command`]); this
//! module only owns the key layout.

use super::wire::{Dec, Enc};
use crate::error::Result;

const FAMILY: &str = "recovery_outbox";
/// First byte of a header key.
pub const HEADER_TAG: u8 = 0x00;
/// First byte of a chunk key.
pub const CHUNK_TAG: u8 = 0x01;

/// One RecoveryOutbox key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecoveryOutboxKey {
    /// The header row of one recovery LSN.
    Header {
        /// Recovery LSN.
        recovery_lsn: u64,
    },
    /// One chunk row of one recovery LSN.
    Chunk {
        /// Recovery LSN.
        recovery_lsn: u64,
        /// Chunk index (0-based).
        chunk_index: u32,
    },
}

impl RecoveryOutboxKey {
    /// Encodes the key (see the module docs).
    pub fn encode(&self) -> Vec<u8> {
        match *self {
            RecoveryOutboxKey::Header { recovery_lsn } => {
                Enc::new().u8(HEADER_TAG).u64(recovery_lsn).finish()
            }
            RecoveryOutboxKey::Chunk {
                recovery_lsn,
                chunk_index,
            } => Enc::new()
                .u8(CHUNK_TAG)
                .u64(recovery_lsn)
                .u32(chunk_index)
                .finish(),
        }
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] for an unknown leading tag, a wrong length
    /// or trailing bytes.
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let k = match d.u8()? {
            HEADER_TAG => RecoveryOutboxKey::Header {
                recovery_lsn: d.u64()?,
            },
            CHUNK_TAG => RecoveryOutboxKey::Chunk {
                recovery_lsn: d.u64()?,
                chunk_index: d.u32()?,
            },
            t => return Err(d.err(format!("unknown recovery outbox key tag {t}"))),
        };
        d.finish()?;
        Ok(k)
    }

    /// `0x01 | recovery_lsn` — the prefix of every chunk of one LSN.
    pub fn chunk_prefix(recovery_lsn: u64) -> Vec<u8> {
        Enc::new().u8(CHUNK_TAG).u64(recovery_lsn).finish()
    }
}
