//! GcBarrier (docs/metadata-format.md, tag 0x16) — a monotonic generation used to advance a quiescent GC
//! history floor.
//!
//! Key: `root_id 16`. Value (format version 1): `u16 1 | u64 generation`.

use super::wire::{Dec, Enc};
use crate::error::Result;
use crate::ids::RootId;

const FAMILY: &str = "gc_barrier";
/// Value format version.
pub const VALUE_VERSION: u16 = 1;

/// The GcBarrier key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcBarrierKey {
    /// Root.
    pub root: RootId,
}

impl GcBarrierKey {
    /// The raw root id (16 bytes).
    pub fn encode(&self) -> Vec<u8> {
        self.root.as_bytes().to_vec()
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] for any length other than 16.
    pub fn decode(key: &[u8]) -> Result<Self> {
        Ok(GcBarrierKey {
            root: super::wire::decode_root_key(FAMILY, key)?,
        })
    }
}

/// The GcBarrier value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcBarrier {
    /// Monotonic barrier generation.
    pub generation: u64,
}

impl GcBarrier {
    /// Encodes the value (format version 1).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION).u64(self.generation).finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let v = GcBarrier {
            generation: d.u64()?,
        };
        d.finish()?;
        Ok(v)
    }
}
