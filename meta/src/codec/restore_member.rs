//! RestoreMember (docs/metadata-format.md, tag 0x12) — the ordered member index of one restore; cleanup is
//! driven by these rows, never by a path or object listing.
//!
//! Key: `root_id 16 | operation_id 16 | u64 member_sequence`.
//! Value (format version 1): `u16 1 | str destination_path | artifact_revision_id 16 |
//! u64 path_generation | row_digest 32`. The path is revalidated by the shared normalizer.

use super::wire::{Dec, Enc};
use crate::error::Result;
use crate::ids::{ArtifactRevisionId, OperationId, RootId};
use crate::path::NormPath;

const FAMILY: &str = "restore_member";
/// Value format version.
pub const VALUE_VERSION: u16 = 1;

/// The RestoreMember key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreMemberKey {
    /// Root.
    pub root: RootId,
    /// Restore operation.
    pub operation_id: OperationId,
    /// Member sequence (0-based, dense).
    pub member_sequence: u64,
}

impl RestoreMemberKey {
    /// `root_id | operation_id | u64 member_sequence` (40 bytes).
    pub fn encode(&self) -> Vec<u8> {
        Enc::new()
            .raw(self.root.as_bytes())
            .raw(self.operation_id.as_bytes())
            .u64(self.member_sequence)
            .finish()
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] for any length other than 40.
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let k = RestoreMemberKey {
            root: RootId(d.b16()?),
            operation_id: OperationId(d.b16()?),
            member_sequence: d.u64()?,
        };
        d.finish()?;
        Ok(k)
    }
}

/// The RestoreMember value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreMember {
    /// Destination path (staged under the destination incarnation).
    pub destination_path: NormPath,
    /// Revision referenced by the staged path.
    pub artifact_revision_id: ArtifactRevisionId,
    /// Generation of the staged path.
    pub path_generation: u64,
    /// Digest of the member row (feeds the operation's member digest).
    pub row_digest: [u8; 32],
}

impl RestoreMember {
    /// Encodes the value (format version 1).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .norm_path(&self.destination_path)
            .raw(self.artifact_revision_id.as_bytes())
            .u64(self.path_generation)
            .raw(&self.row_digest)
            .finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let v = RestoreMember {
            destination_path: d.norm_path()?,
            artifact_revision_id: ArtifactRevisionId(d.b16()?),
            path_generation: d.u64()?,
            row_digest: d.b32()?,
        };
        d.finish()?;
        Ok(v)
    }
}
