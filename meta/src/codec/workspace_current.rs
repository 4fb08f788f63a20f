//! WorkspaceCurrent (docs/metadata-format.md, tag 0x02) — the workbench name → incarnation marker.
//!
//! Key: `root_id | u32 len(workbench_id) | workbench_id`.
//! Value (format version 2): `u16 2 | incarnation 16 | u64 workspace_revision | u8 WorkspaceState
//! | option(owning_operation 16) | u64 created_version | u64 modified_version`.

use super::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{validate_workbench_id, OperationId, RootId, WorkspaceIncarnationId};

const FAMILY: &str = "workspace_current";
/// Value format version (publication-owned workspace record).
pub const VALUE_VERSION: u16 = 2;

pub use crate::workspace_state::WorkspaceState;

durable_enum!(impl WorkspaceState, "workspace_current" {
    Staging = 1,
    Visible = 2,
    Retired = 3,
});

/// The WorkspaceCurrent value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceCurrent {
    /// Never-reused incarnation id.
    pub incarnation: WorkspaceIncarnationId,
    /// Workspace revision: 1 at creation, +1 per publication.
    pub workspace_revision: u64,
    /// Visibility state.
    pub state: WorkspaceState,
    /// Operation owning a staging marker (restore), if any.
    pub owning_operation: Option<OperationId>,
    /// Commit version that created the marker.
    pub created_version: u64,
    /// Commit version of the last change.
    pub modified_version: u64,
}

/// The WorkspaceCurrent key for a (validated) workbench id.
pub fn key(root: &RootId, workbench_id: &str) -> Vec<u8> {
    Enc::new().raw(root.as_bytes()).str(workbench_id).finish()
}

/// The decoded WorkspaceCurrent key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceCurrentKey {
    /// Root.
    pub root: RootId,
    /// External workbench id.
    pub workbench_id: String,
}

impl WorkspaceCurrentKey {
    /// `root_id | u32 len | workbench_id` (same bytes as [`key`]).
    pub fn encode(&self) -> Vec<u8> {
        key(&self.root, &self.workbench_id)
    }

    /// Decodes a key; the workbench id must pass the docs/metadata-format.md rule.
    /// Errors: [`crate::Error::Codec`] (short key, bad length, invalid id, trailing bytes).
    pub fn decode(k: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, k);
        let root = RootId(d.b16()?);
        let workbench_id = d.string()?;
        validate_workbench_id(&workbench_id)
            .map_err(|e| d.err(format!("invalid workbench id in key: {e}")))?;
        d.finish()?;
        Ok(WorkspaceCurrentKey { root, workbench_id })
    }
}

impl WorkspaceCurrent {
    /// Encodes the value (format version 2).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .raw(self.incarnation.as_bytes())
            .u64(self.workspace_revision)
            .u8(self.state.to_u8())
            .opt_raw(self.owning_operation.as_ref().map(|o| &o.as_bytes()[..]))
            .u64(self.created_version)
            .u64(self.modified_version)
            .finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let incarnation = WorkspaceIncarnationId(d.b16()?);
        let workspace_revision = d.u64()?;
        let state = WorkspaceState::from_u8(d.u8()?)?;
        let owning_operation = d.opt_b16()?.map(OperationId);
        let created_version = d.u64()?;
        let modified_version = d.u64()?;
        d.finish()?;
        Ok(WorkspaceCurrent {
            incarnation,
            workspace_revision,
            state,
            owning_operation,
            created_version,
            modified_version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_current_golden_bytes() {
        let w = WorkspaceCurrent {
            incarnation: WorkspaceIncarnationId([7; 16]),
            workspace_revision: 1,
            state: WorkspaceState::Visible,
            owning_operation: None,
            created_version: 3,
            modified_version: 3,
        };
        let b = w.encode();
        let mut expected = vec![0, 2];
        expected.extend_from_slice(&[7; 16]);
        expected.extend_from_slice(&1u64.to_be_bytes());
        expected.push(2);
        expected.push(0);
        expected.extend_from_slice(&3u64.to_be_bytes());
        expected.extend_from_slice(&3u64.to_be_bytes());
        assert_eq!(b, expected);
        assert_eq!(WorkspaceCurrent::decode(&b).unwrap(), w);
        let k = key(&RootId([1; 16]), "ab");
        assert_eq!(&k[16..], &[0, 0, 0, 2, b'a', b'b']);
    }

    #[test]
    fn workspace_current_rejects_unknown_state_version_and_trailing() {
        let w = WorkspaceCurrent {
            incarnation: WorkspaceIncarnationId([7; 16]),
            workspace_revision: 9,
            state: WorkspaceState::Staging,
            owning_operation: Some(OperationId([3; 16])),
            created_version: 1,
            modified_version: 2,
        };
        let b = w.encode();
        assert_eq!(WorkspaceCurrent::decode(&b).unwrap(), w);
        let mut bad = b.clone();
        bad[2 + 16 + 8] = 4;
        assert!(WorkspaceCurrent::decode(&bad).is_err());
        let mut bad = b.clone();
        bad[1] = 1;
        assert!(WorkspaceCurrent::decode(&bad).is_err());
        let mut bad = b.clone();
        bad.push(0);
        assert!(WorkspaceCurrent::decode(&bad).is_err());
        assert!(WorkspaceCurrent::decode(&b[..b.len() - 1]).is_err());
    }
}
