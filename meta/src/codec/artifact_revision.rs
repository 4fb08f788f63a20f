//! ArtifactRevision (docs/metadata-format.md, tag 0x04) — one immutable body revision and its reference count.
//!
//! Key: `root_id | artifact_revision_id`.
//! Value (format version 2): `u16 2 | u64 logical_size | str body_digest_uri |
//! str manifest_digest_uri | u64 block_count | u32 dependency_count | u32 dependency_depth |
//! dependency_digest 32 | str content_type | u8 RevisionState | u64 reference_epoch |
//! u64 strong_reference_count | option(u64 last_zero_ref_version) | u64 created_version`.

use super::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{ArtifactRevisionId, RootId};

const FAMILY: &str = "artifact_revision";
/// Value format version (publication-owned revision record).
pub const VALUE_VERSION: u16 = 2;

durable_enum!(
    /// Lifecycle of an artifact revision (discriminants of docs/metadata-format.md).
    RevisionState, "artifact_revision" {
        /// Readable; references may be added.
        Available = 1,
        /// Claimed by GC.
        Deleting = 2,
        /// Objects confirmed absent.
        Deleted = 3,
        /// Ambiguous provider result; awaiting reconciliation.
        Quarantined = 4,
    }
);

/// The ArtifactRevision value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRevision {
    /// Body length in bytes.
    pub logical_size: u64,
    /// `sha256:` digest URI of the complete body.
    pub body_digest_uri: String,
    /// `sha256:` digest URI of the canonical manifest rows.
    pub manifest_digest_uri: String,
    /// Number of ArtifactManifest rows (`object_index` 0..block_count).
    pub block_count: u64,
    /// Distinct physical owner revisions other than this one (≤ 64).
    pub dependency_count: u32,
    /// Sealed dependency depth (≤ 8).
    pub dependency_depth: u32,
    /// SHA-256 over the sorted, concatenated 16-byte owner ids (SHA-256 of empty input when none).
    pub dependency_digest: [u8; 32],
    /// Content type at publication.
    pub content_type: String,
    /// Lifecycle state.
    pub state: RevisionState,
    /// Incremented by every reference addition or removal.
    pub reference_epoch: u64,
    /// Number of RevisionRef rows targeting this revision.
    pub strong_reference_count: u64,
    /// Commit version at which the count last became zero.
    pub last_zero_ref_version: Option<u64>,
    /// Commit version that created the revision.
    pub created_version: u64,
}

/// The ArtifactRevision key.
pub fn key(root: &RootId, rev: &ArtifactRevisionId) -> Vec<u8> {
    Enc::new().raw(root.as_bytes()).raw(rev.as_bytes()).finish()
}

/// The decoded ArtifactRevision key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactRevisionKey {
    /// Root.
    pub root: RootId,
    /// Revision.
    pub revision: ArtifactRevisionId,
}

impl ArtifactRevisionKey {
    /// `root_id | artifact_revision_id` (32 bytes).
    pub fn encode(&self) -> Vec<u8> {
        key(&self.root, &self.revision)
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] for any length other than 32.
    pub fn decode(k: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, k);
        let v = ArtifactRevisionKey {
            root: RootId(d.b16()?),
            revision: ArtifactRevisionId(d.b16()?),
        };
        d.finish()?;
        Ok(v)
    }
}

impl ArtifactRevision {
    /// Encodes the value (format version 2).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .u64(self.logical_size)
            .str(&self.body_digest_uri)
            .str(&self.manifest_digest_uri)
            .u64(self.block_count)
            .u32(self.dependency_count)
            .u32(self.dependency_depth)
            .raw(&self.dependency_digest)
            .str(&self.content_type)
            .u8(self.state.to_u8())
            .u64(self.reference_epoch)
            .u64(self.strong_reference_count)
            .opt_u64(self.last_zero_ref_version)
            .u64(self.created_version)
            .finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let r = ArtifactRevision {
            logical_size: d.u64()?,
            body_digest_uri: d.string()?,
            manifest_digest_uri: d.string()?,
            block_count: d.u64()?,
            dependency_count: d.u32()?,
            dependency_depth: d.u32()?,
            dependency_digest: d.b32()?,
            content_type: d.string()?,
            state: RevisionState::from_u8(d.u8()?)?,
            reference_epoch: d.u64()?,
            strong_reference_count: d.u64()?,
            last_zero_ref_version: d.opt_u64()?,
            created_version: d.u64()?,
        };
        d.finish()?;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_revision_round_trips_and_rejects_unknown_state() {
        let r = ArtifactRevision {
            logical_size: 10,
            body_digest_uri: "sha256:x".into(),
            manifest_digest_uri: "sha256:y".into(),
            block_count: 1,
            dependency_count: 0,
            dependency_depth: 0,
            dependency_digest: [4; 32],
            content_type: "t".into(),
            state: RevisionState::Available,
            reference_epoch: 1,
            strong_reference_count: 1,
            last_zero_ref_version: Some(3),
            created_version: 2,
        };
        let b = r.encode();
        assert_eq!(ArtifactRevision::decode(&b).unwrap(), r);
        // state byte sits after: 2 + 8 + (4+8) + (4+8) + 8 + 4 + 4 + 32 + (4+1)
        let state_at = 2 + 8 + 12 + 12 + 8 + 4 + 4 + 32 + 5;
        assert_eq!(b[state_at], 1);
        let mut bad = b.clone();
        bad[state_at] = 0;
        assert!(ArtifactRevision::decode(&bad).is_err());
        for cut in 0..b.len() {
            assert!(ArtifactRevision::decode(&b[..cut]).is_err());
        }
    }
}
