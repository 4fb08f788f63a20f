//! WorkbenchCommitHead (docs/metadata-format.md, tag 0x09) — the current commit of one workspace incarnation.
//!
//! Key: `root_id 16 | workspace_incarnation_id 16`.
//! Value (format version 1): `u16 1 | commit_id 32 | u64 head_generation`.

use super::wire::{Dec, Enc};
use crate::error::Result;
use crate::ids::{CommitId, RootId, WorkspaceIncarnationId};

const FAMILY: &str = "workbench_commit_head";
/// Value format version.
pub const VALUE_VERSION: u16 = 1;

/// The WorkbenchCommitHead key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkbenchCommitHeadKey {
    /// Root.
    pub root: RootId,
    /// Workspace incarnation.
    pub incarnation: WorkspaceIncarnationId,
}

impl WorkbenchCommitHeadKey {
    /// `root_id | incarnation` (32 bytes).
    pub fn encode(&self) -> Vec<u8> {
        Enc::new()
            .raw(self.root.as_bytes())
            .raw(self.incarnation.as_bytes())
            .finish()
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] for any length other than 32.
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let k = WorkbenchCommitHeadKey {
            root: RootId(d.b16()?),
            incarnation: WorkspaceIncarnationId(d.b16()?),
        };
        d.finish()?;
        Ok(k)
    }
}

/// The WorkbenchCommitHead value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkbenchCommitHead {
    /// The head commit.
    pub commit_id: CommitId,
    /// Incremented by every head change (CAS token).
    pub head_generation: u64,
}

impl WorkbenchCommitHead {
    /// Encodes the value (format version 1).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .raw(self.commit_id.as_bytes())
            .u64(self.head_generation)
            .finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let v = WorkbenchCommitHead {
            commit_id: CommitId(d.b32()?),
            head_generation: d.u64()?,
        };
        d.finish()?;
        Ok(v)
    }
}
