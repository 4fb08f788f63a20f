//! RootFence (docs/metadata-format.md, tag 0x01): `key = root_id`,
//! `value = u16 1 | logical_shard_id 16 | u64 placement_generation | u8 RootActivationState`.

use super::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{LogicalShardId, RootId};

const FAMILY: &str = "root_fence";

durable_enum!(
    /// Shard-local activation state of a root (discriminants of docs/metadata-format.md).
    RootActivationState, "root_fence" {
        /// Being installed.
        Installing = 1,
        /// Serving commands.
        Active = 2,
        /// Draining.
        Draining = 3,
        /// Fenced off.
        Fenced = 4,
    }
);

/// The shard-local RootFence row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootFence {
    /// Logical shard that installed the root.
    pub logical_shard_id: LogicalShardId,
    /// Installed placement generation.
    pub placement_generation: u64,
    /// Activation state.
    pub activation_state: RootActivationState,
}

/// The RootFence key: the raw root id.
pub fn key(root: &RootId) -> Vec<u8> {
    root.as_bytes().to_vec()
}

impl RootFence {
    /// Encodes the value (value format version 1).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(1)
            .raw(self.logical_shard_id.as_bytes())
            .u64(self.placement_generation)
            .u8(self.activation_state.to_u8())
            .finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(1)?;
        let logical_shard_id = LogicalShardId(d.b16()?);
        let placement_generation = d.u64()?;
        let activation_state = RootActivationState::from_u8(d.u8()?)?;
        d.finish()?;
        Ok(RootFence {
            logical_shard_id,
            placement_generation,
            activation_state,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_fence_golden_bytes_and_unknown_state() {
        let f = RootFence {
            logical_shard_id: LogicalShardId([0xaa; 16]),
            placement_generation: 1,
            activation_state: RootActivationState::Active,
        };
        let b = f.encode();
        let mut expected = vec![0, 1];
        expected.extend_from_slice(&[0xaa; 16]);
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(b, expected);
        assert_eq!(RootFence::decode(&b).unwrap(), f);
        let mut bad = b.clone();
        *bad.last_mut().unwrap() = 5;
        assert!(RootFence::decode(&bad).is_err());
        assert!(RootFence::decode(&b[..b.len() - 1]).is_err());
    }
}
