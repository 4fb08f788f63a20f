//! WorkspaceIncarnationClaim (docs/metadata-format.md, tag 0x17): never-deleted claim of an incarnation id.
//!
//! Key: `root_id | workspace_incarnation_id`. Value (format version 1): `u16 1 | u32 len |
//! workbench_id` (the id is revalidated on decode).

use super::wire::{Dec, Enc};
use crate::error::Result;
use crate::ids::{validate_workbench_id, RootId, WorkspaceIncarnationId};

const FAMILY: &str = "workspace_incarnation_claim";
/// Value format version.
pub const VALUE_VERSION: u16 = 1;

/// The claim value: the stable workbench id owning the incarnation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceIncarnationClaim {
    /// The stable external workbench id.
    pub workbench_id: String,
}

/// The claim key.
pub fn key(root: &RootId, inc: &WorkspaceIncarnationId) -> Vec<u8> {
    Enc::new().raw(root.as_bytes()).raw(inc.as_bytes()).finish()
}

/// The decoded claim key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkspaceIncarnationClaimKey {
    /// Root.
    pub root: RootId,
    /// Claimed incarnation.
    pub incarnation: WorkspaceIncarnationId,
}

impl WorkspaceIncarnationClaimKey {
    /// `root_id | incarnation` (32 bytes).
    pub fn encode(&self) -> Vec<u8> {
        key(&self.root, &self.incarnation)
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] for any length other than 32.
    pub fn decode(k: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, k);
        let v = WorkspaceIncarnationClaimKey {
            root: RootId(d.b16()?),
            incarnation: WorkspaceIncarnationId(d.b16()?),
        };
        d.finish()?;
        Ok(v)
    }
}

impl WorkspaceIncarnationClaim {
    /// Encodes the value (format version 1).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION).str(&self.workbench_id).finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let workbench_id = d.string()?;
        validate_workbench_id(&workbench_id)
            .map_err(|e| d.err(format!("invalid workbench id: {e}")))?;
        d.finish()?;
        Ok(WorkspaceIncarnationClaim { workbench_id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_golden_bytes_round_trip() {
        let c = WorkspaceIncarnationClaim {
            workbench_id: "w1".into(),
        };
        let b = c.encode();
        assert_eq!(b, vec![0, 1, 0, 0, 0, 2, b'w', b'1']);
        assert_eq!(WorkspaceIncarnationClaim::decode(&b).unwrap(), c);
        assert!(WorkspaceIncarnationClaim::decode(&b[..7]).is_err());
    }
}
