//! SnapshotAlias (docs/metadata-format.md, tag 0x0c) — the one current resolution of a snapshot name within a
//! workspace incarnation (the latest mint wins).
//!
//! Key: `root_id 16 | workspace_incarnation_id 16 | u16 len(alias) | alias`
//! ([`crate::ids::AliasName`]).
//! Value (format version 1): `u16 1 | u64 snapshot_id | u64 alias_generation |
//! option(u8 SnapshotState terminal_state)`.
//!
//! `terminal_state` is the lifecycle projection of the resolved snapshot once it left `Active`
//! (`None` while it is active), so name resolution can answer "expired/retired" without falling
//! back to an earlier mint.

use super::snapshot_ref::SnapshotState;
use super::wire::{Dec, Enc};
use crate::error::Result;
use crate::ids::{AliasName, RootId, SnapshotId, WorkspaceIncarnationId};

const FAMILY: &str = "snapshot_alias";
/// Value format version.
pub const VALUE_VERSION: u16 = 1;

/// The SnapshotAlias key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotAliasKey {
    /// Root.
    pub root: RootId,
    /// Workspace incarnation.
    pub incarnation: WorkspaceIncarnationId,
    /// Alias.
    pub alias: AliasName,
}

impl SnapshotAliasKey {
    /// `root_id | incarnation | u16 len | alias`.
    pub fn encode(&self) -> Vec<u8> {
        Enc::new()
            .raw(self.root.as_bytes())
            .raw(self.incarnation.as_bytes())
            .str16(self.alias.as_str())
            .finish()
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] (short key, invalid alias, trailing bytes).
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let root = RootId(d.b16()?);
        let incarnation = WorkspaceIncarnationId(d.b16()?);
        let alias = AliasName::from_stored(FAMILY, d.bytes16()?)?;
        d.finish()?;
        Ok(SnapshotAliasKey {
            root,
            incarnation,
            alias,
        })
    }
}

/// The SnapshotAlias value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotAlias {
    /// Snapshot the name resolves to (the latest mint).
    pub snapshot_id: SnapshotId,
    /// Incremented by every mint of the name (CAS token).
    pub alias_generation: u64,
    /// Lifecycle projection of the resolved snapshot once it is no longer `Active`.
    pub terminal_state: Option<SnapshotState>,
}

impl SnapshotAlias {
    /// Encodes the value (format version 1).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .u64(self.snapshot_id.get())
            .u64(self.alias_generation)
            .opt_u8(self.terminal_state.map(SnapshotState::to_u8))
            .finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let snapshot_id = SnapshotId(d.u64()?);
        let alias_generation = d.u64()?;
        let terminal_state = d.opt_u8()?.map(SnapshotState::from_u8).transpose()?;
        d.finish()?;
        Ok(SnapshotAlias {
            snapshot_id,
            alias_generation,
            terminal_state,
        })
    }
}
