//! RevisionRef (docs/metadata-format.md, tag 0x06) — one row per strong reference to an artifact revision.
//!
//! Key: `root_id | u8 ReferenceKind | reference_owner_id | artifact_revision_id` where the owner id
//! is, per kind:
//! - Path: `workspace_incarnation_id | u32(path_bytes) | ordered, NUL-separated path bytes`
//!   ([`crate::path::ordered_components`], no exact terminator);
//! - Commit: `commit_id` (32 bytes);
//! - RevisionDependency: `child_artifact_revision_id`.
//!
//! Value (format version 2): `u16 2 | u64 reference_epoch_at_add | u64 created_version`.

use super::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{ArtifactRevisionId, CommitId, RootId, WorkspaceIncarnationId};
use crate::path::{decode_ordered_components, ordered_components, NormPath};

const FAMILY: &str = "revision_ref";
/// Value format version (publication-owned revision record).
pub const VALUE_VERSION: u16 = 2;

durable_enum!(
    /// Kind of strong reference (discriminants of docs/metadata-format.md).
    ReferenceKind, "revision_ref" {
        /// A PathCurrent entry.
        Path = 1,
        /// A sealed commit (one per unique revision).
        Commit = 2,
        /// A child revision reusing blocks owned by the target.
        RevisionDependency = 3,
    }
);

/// The typed reference owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefOwner {
    /// A path in one workspace incarnation.
    Path {
        /// Workspace incarnation.
        incarnation: WorkspaceIncarnationId,
        /// Normalized path.
        path: NormPath,
    },
    /// A commit (32-byte CommitId).
    Commit(CommitId),
    /// A child revision whose manifest reuses the target's blocks.
    RevisionDependency {
        /// The child revision.
        child: ArtifactRevisionId,
    },
}

impl RefOwner {
    /// The reference kind.
    pub fn kind(&self) -> ReferenceKind {
        match self {
            RefOwner::Path { .. } => ReferenceKind::Path,
            RefOwner::Commit(_) => ReferenceKind::Commit,
            RefOwner::RevisionDependency { .. } => ReferenceKind::RevisionDependency,
        }
    }

    fn put(&self, e: &mut Enc) {
        match self {
            RefOwner::Path { incarnation, path } => {
                e.raw(incarnation.as_bytes())
                    .bytes(&ordered_components(path));
            }
            RefOwner::Commit(id) => {
                e.raw(id.as_bytes());
            }
            RefOwner::RevisionDependency { child } => {
                e.raw(child.as_bytes());
            }
        }
    }

    fn get(kind: ReferenceKind, d: &mut Dec<'_>) -> Result<Self> {
        Ok(match kind {
            ReferenceKind::Path => {
                let incarnation = WorkspaceIncarnationId(d.b16()?);
                let enc = d.bytes()?;
                let path = decode_ordered_components(enc)
                    .map_err(|e| d.err(format!("invalid owner path: {e}")))?;
                RefOwner::Path { incarnation, path }
            }
            ReferenceKind::Commit => RefOwner::Commit(CommitId(d.b32()?)),
            ReferenceKind::RevisionDependency => RefOwner::RevisionDependency {
                child: ArtifactRevisionId(d.b16()?),
            },
        })
    }

    /// The exact `reference_owner_id` bytes (without the kind byte).
    pub fn owner_id_bytes(&self) -> Vec<u8> {
        let mut e = Enc::new();
        self.put(&mut e);
        e.finish()
    }

    /// Decodes an exact `reference_owner_id` of `kind`.
    ///
    /// Errors: [`crate::Error::Codec`] for a wrong width, a length prefix that disagrees with the
    /// bytes, a malformed ordered path, or trailing bytes.
    pub fn from_owner_id_bytes(kind: ReferenceKind, bytes: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, bytes);
        let o = Self::get(kind, &mut d)?;
        d.finish()?;
        Ok(o)
    }
}

/// The RevisionRef key for `owner → target`.
pub fn key(root: &RootId, owner: &RefOwner, target: &ArtifactRevisionId) -> Vec<u8> {
    let mut e = Enc::new();
    e.raw(root.as_bytes()).u8(owner.kind().to_u8());
    owner.put(&mut e);
    e.raw(target.as_bytes());
    e.finish()
}

/// The decoded RevisionRef key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionRefKey {
    /// Root.
    pub root: RootId,
    /// Reference owner (kind and owner id).
    pub owner: RefOwner,
    /// Referenced revision.
    pub target: ArtifactRevisionId,
}

impl RevisionRefKey {
    /// `root_id | u8 kind | owner id | artifact_revision_id` (same bytes as [`key`]).
    pub fn encode(&self) -> Vec<u8> {
        key(&self.root, &self.owner, &self.target)
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] (unknown kind, wrong widths, malformed
    /// owner path, trailing bytes).
    pub fn decode(k: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, k);
        let root = RootId(d.b16()?);
        let kind = ReferenceKind::from_u8(d.u8()?)?;
        let owner = RefOwner::get(kind, &mut d)?;
        let target = ArtifactRevisionId(d.b16()?);
        d.finish()?;
        Ok(RevisionRefKey {
            root,
            owner,
            target,
        })
    }
}

/// The RevisionRef value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RevisionRef {
    /// The target revision's reference_epoch after this reference was added.
    pub reference_epoch_at_add: u64,
    /// Commit version that added the reference.
    pub created_version: u64,
}

impl RevisionRef {
    /// Encodes the value (format version 2).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .u64(self.reference_epoch_at_add)
            .u64(self.created_version)
            .finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let r = RevisionRef {
            reference_epoch_at_add: d.u64()?,
            created_version: d.u64()?,
        };
        d.finish()?;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::normalize;

    #[test]
    fn revision_ref_key_golden_bytes() {
        let root = RootId([1; 16]);
        let target = ArtifactRevisionId([3; 16]);
        let owner = RefOwner::Path {
            incarnation: WorkspaceIncarnationId([2; 16]),
            path: normalize("a/b").unwrap(),
        };
        let k = key(&root, &owner, &target);
        let mut expected = vec![1; 16];
        expected.push(1);
        expected.extend_from_slice(&[2; 16]);
        expected.extend_from_slice(&[0, 0, 0, 3, 0x62, 0x00, 0x63]);
        expected.extend_from_slice(&[3; 16]);
        assert_eq!(k, expected);
        let dep = key(
            &root,
            &RefOwner::RevisionDependency {
                child: ArtifactRevisionId([4; 16]),
            },
            &target,
        );
        assert_eq!(dep[16], 3);
        assert_eq!(dep.len(), 16 + 1 + 16 + 16);
    }

    #[test]
    fn revision_ref_value_round_trips() {
        let v = RevisionRef {
            reference_epoch_at_add: 2,
            created_version: 9,
        };
        let b = v.encode();
        assert_eq!(b.len(), 18);
        assert_eq!(RevisionRef::decode(&b).unwrap(), v);
        assert!(RevisionRef::decode(&b[..17]).is_err());
        assert!(ReferenceKind::from_u8(4).is_err());
    }
}
