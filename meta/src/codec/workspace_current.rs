//! WorkspaceCurrent (docs/metadata-format.md, tag 0x02) — the workbench name → incarnation marker.
//!
//! Key: `root_id | u32 len(workbench_id) | workbench_id`.
//! Value (format version 2): `u16 2 | incarnation 16 | u64 workspace_revision | u8 WorkspaceState
//! | option(owning_operation 16) | u64 created_version | u64 modified_version`.
//! Value (format version 3): the version-2 fields, then `option(u64 expires_at_unix_ms)`; written
//! only for a marker with an expiry deadline or in state `Expired`, so every other marker keeps
//! its version-2 bytes (docs/metadata-format.md, "WorkspaceCurrent", "Workbench Expiry").

use super::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{validate_workbench_id, OperationId, RootId, WorkspaceIncarnationId};

const FAMILY: &str = "workspace_current";
/// Value format version of a marker without an expiry deadline (publication-owned workspace
/// record).
pub const VALUE_VERSION: u16 = 2;
/// Value format version of a marker with an expiry deadline or in state `Expired`.
pub const VALUE_VERSION_EXPIRY: u16 = 3;

pub use crate::workspace_state::WorkspaceState;

durable_enum!(impl WorkspaceState, "workspace_current" {
    Staging = 1,
    Visible = 2,
    Retired = 3,
    Expired = 4,
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
    /// The expiry deadline, Unix milliseconds on the store clock (docs/metadata-format.md,
    /// "Workbench Expiry"): `None` never expires. Always `Some` in state `Expired` (the deadline
    /// that passed).
    pub expires_at_unix_ms: Option<u64>,
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
    /// Encodes the value: format version 2 when there is no expiry deadline and the state is not
    /// `Expired` (the bytes every marker had before expiry existed), else format version 3.
    pub fn encode(&self) -> Vec<u8> {
        let v3 = self.expires_at_unix_ms.is_some() || self.state == WorkspaceState::Expired;
        let mut e = Enc::version(if v3 {
            VALUE_VERSION_EXPIRY
        } else {
            VALUE_VERSION
        });
        e.raw(self.incarnation.as_bytes())
            .u64(self.workspace_revision)
            .u8(self.state.to_u8())
            .opt_raw(self.owning_operation.as_ref().map(|o| &o.as_bytes()[..]))
            .u64(self.created_version)
            .u64(self.modified_version);
        if v3 {
            e.opt_u64(self.expires_at_unix_ms);
        }
        e.finish()
    }

    /// Decodes a version-2 or version-3 value.
    ///
    /// Errors: [`crate::Error::Codec`] for another version, truncation, trailing bytes, an unknown
    /// state, the state `Expired` in a version-2 value, or an `Expired` marker without a deadline.
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        let version = d.version_in(&[VALUE_VERSION, VALUE_VERSION_EXPIRY])?;
        let incarnation = WorkspaceIncarnationId(d.b16()?);
        let workspace_revision = d.u64()?;
        let state = WorkspaceState::from_u8(d.u8()?)?;
        let owning_operation = d.opt_b16()?.map(OperationId);
        let created_version = d.u64()?;
        let modified_version = d.u64()?;
        let expires_at_unix_ms = if version == VALUE_VERSION_EXPIRY {
            d.opt_u64()?
        } else {
            None
        };
        if state == WorkspaceState::Expired && expires_at_unix_ms.is_none() {
            return Err(d.err(if version == VALUE_VERSION {
                "state Expired in a version-2 value".to_owned()
            } else {
                "an Expired marker without its deadline".to_owned()
            }));
        }
        d.finish()?;
        Ok(WorkspaceCurrent {
            incarnation,
            workspace_revision,
            state,
            owning_operation,
            created_version,
            modified_version,
            expires_at_unix_ms,
        })
    }

    /// The marker after one more change to the workspace's tree committed at version `cv`:
    /// `workspace_revision` +1 (saturating) and `modified_version` = `cv`, every other field kept
    /// (docs/metadata-format.md, "WorkspaceCurrent").
    pub fn advanced(&self, cv: u64) -> WorkspaceCurrent {
        WorkspaceCurrent {
            workspace_revision: self.workspace_revision.saturating_add(1),
            modified_version: cv,
            ..self.clone()
        }
    }

    /// When this marker stopped being live because of its expiry, on a store clock reading
    /// `clock_now_unix_ms` (docs/metadata-format.md, "Workbench Expiry"): `Some(deadline)` for an
    /// `Expired` marker, and for a `Visible` one whose deadline is at or before the clock (expired,
    /// not yet marked); `None` otherwise.
    pub fn expired_at(&self, clock_now_unix_ms: u64) -> Option<u64> {
        match (self.state, self.expires_at_unix_ms) {
            (WorkspaceState::Expired, d) => d,
            (WorkspaceState::Visible, Some(d)) if d <= clock_now_unix_ms => Some(d),
            _ => None,
        }
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
            expires_at_unix_ms: None,
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
            expires_at_unix_ms: None,
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

    #[test]
    fn workspace_current_with_expiry_is_version_3_golden_bytes() {
        let w = WorkspaceCurrent {
            incarnation: WorkspaceIncarnationId([7; 16]),
            workspace_revision: 1,
            state: WorkspaceState::Expired,
            owning_operation: None,
            created_version: 3,
            modified_version: 4,
            expires_at_unix_ms: Some(0x0102),
        };
        let b = w.encode();
        let mut expected = vec![0, 3];
        expected.extend_from_slice(&[7; 16]);
        expected.extend_from_slice(&1u64.to_be_bytes());
        expected.push(4);
        expected.push(0);
        expected.extend_from_slice(&3u64.to_be_bytes());
        expected.extend_from_slice(&4u64.to_be_bytes());
        expected.push(1);
        expected.extend_from_slice(&0x0102u64.to_be_bytes());
        assert_eq!(b, expected);
        assert_eq!(WorkspaceCurrent::decode(&b).unwrap(), w);
        // A visible marker with a deadline is version 3 too; removing the deadline gives back
        // exactly the version-2 bytes.
        let visible = WorkspaceCurrent {
            state: WorkspaceState::Visible,
            ..w.clone()
        };
        assert_eq!(visible.encode()[..2], [0, 3]);
        let never = WorkspaceCurrent {
            expires_at_unix_ms: None,
            ..visible
        };
        assert_eq!(never.encode()[..2], [0, 2]);
        assert_eq!(WorkspaceCurrent::decode(&never.encode()).unwrap(), never);
    }

    #[test]
    fn expired_state_needs_version_3_and_a_deadline() {
        let w = WorkspaceCurrent {
            incarnation: WorkspaceIncarnationId([7; 16]),
            workspace_revision: 1,
            state: WorkspaceState::Visible,
            owning_operation: None,
            created_version: 3,
            modified_version: 3,
            expires_at_unix_ms: None,
        };
        // Version 2 bytes with the Expired discriminant.
        let mut v2 = w.encode();
        v2[2 + 16 + 8] = 4;
        assert!(WorkspaceCurrent::decode(&v2).is_err());
        // Version 3 bytes, Expired, no deadline.
        let mut v3 = v2.clone();
        v3[1] = 3;
        v3.push(0);
        assert!(WorkspaceCurrent::decode(&v3).is_err());
        // An unknown version and a truncated deadline fail closed.
        let with = WorkspaceCurrent {
            expires_at_unix_ms: Some(9),
            ..w
        }
        .encode();
        let mut v4 = with.clone();
        v4[1] = 4;
        assert!(WorkspaceCurrent::decode(&v4).is_err());
        assert!(WorkspaceCurrent::decode(&with[..with.len() - 1]).is_err());
    }

    #[test]
    fn expired_at_follows_the_store_clock_and_the_recorded_state() {
        let w = WorkspaceCurrent {
            incarnation: WorkspaceIncarnationId([7; 16]),
            workspace_revision: 1,
            state: WorkspaceState::Visible,
            owning_operation: None,
            created_version: 3,
            modified_version: 3,
            expires_at_unix_ms: Some(1_000),
        };
        assert_eq!(w.expired_at(999), None);
        assert_eq!(w.expired_at(1_000), Some(1_000));
        let recorded = WorkspaceCurrent {
            state: WorkspaceState::Expired,
            ..w.clone()
        };
        assert_eq!(
            recorded.expired_at(0),
            Some(1_000),
            "Expired ignores the clock"
        );
        let never = WorkspaceCurrent {
            expires_at_unix_ms: None,
            ..w
        };
        assert_eq!(never.expired_at(u64::MAX), None);
    }
}
