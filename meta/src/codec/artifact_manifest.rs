//! ArtifactManifest (docs/metadata-format.md, tag 0x05) — the ordered block rows of one revision.
//!
//! Key: `root_id | artifact_revision_id | u64 object_index` (row position in this revision).
//! Value (format version 2): `u16 2 | physical_owner_revision_id 16 | u64 physical_object_index |
//! str object_key | u64 logical_offset | u64 object_offset | u64 length | str digest_uri |
//! option(u32 append_segment)`.

use super::wire::{Dec, Enc};
use crate::error::{Error, Result};
use crate::ids::{ArtifactRevisionId, RootId};
use sha2::{Digest, Sha256};

const FAMILY: &str = "artifact_manifest";
/// Value format version (publication-owned revision record).
pub const VALUE_VERSION: u16 = 2;

/// One manifest row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestRow {
    /// Row position within the owning (child) revision; part of the key.
    pub object_index: u64,
    /// Revision that physically owns the referenced block (may be an older revision).
    pub physical_owner_revision: ArtifactRevisionId,
    /// The owner's own object index of the block (used to rebuild the physical object key).
    pub physical_object_index: u64,
    /// Provider object key of the block.
    pub object_key: String,
    /// Offset of this row's bytes in the logical body.
    pub logical_offset: u64,
    /// Offset of this row's bytes inside the physical object.
    pub object_offset: u64,
    /// Number of bytes.
    pub length: u64,
    /// `sha256:` digest URI of the physical object.
    pub digest_uri: String,
    /// Append segment number, when the row was produced by an append.
    pub append_segment: Option<u32>,
}

/// The ArtifactManifest key of one row.
pub fn key(root: &RootId, rev: &ArtifactRevisionId, object_index: u64) -> Vec<u8> {
    let mut k = prefix(root, rev);
    k.extend_from_slice(&object_index.to_be_bytes());
    k
}

/// `root_id | artifact_revision_id` — the prefix of every row of one revision.
pub fn prefix(root: &RootId, rev: &ArtifactRevisionId) -> Vec<u8> {
    Enc::new().raw(root.as_bytes()).raw(rev.as_bytes()).finish()
}

/// The decoded ArtifactManifest key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactManifestKey {
    /// Root.
    pub root: RootId,
    /// Revision owning the row.
    pub revision: ArtifactRevisionId,
    /// Row position in that revision.
    pub object_index: u64,
}

impl ArtifactManifestKey {
    /// `root_id | artifact_revision_id | u64 object_index` (40 bytes).
    pub fn encode(&self) -> Vec<u8> {
        key(&self.root, &self.revision, self.object_index)
    }

    /// Decodes a key. Errors: [`Error::Codec`] for any length other than 40.
    pub fn decode(k: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, k);
        let v = ArtifactManifestKey {
            root: RootId(d.b16()?),
            revision: ArtifactRevisionId(d.b16()?),
            object_index: d.u64()?,
        };
        d.finish()?;
        Ok(v)
    }
}

/// Decodes `object_index` from a full key. Errors: [`Error::Codec`].
pub fn decode_key_index(key: &[u8]) -> Result<u64> {
    let tail: [u8; 8] = key
        .get(32..)
        .and_then(|t| t.try_into().ok())
        .ok_or_else(|| Error::codec(FAMILY, "key is not root | revision | u64"))?;
    Ok(u64::from_be_bytes(tail))
}

impl ManifestRow {
    /// Encodes the value (format version 2; `object_index` lives in the key).
    pub fn encode_value(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .raw(self.physical_owner_revision.as_bytes())
            .u64(self.physical_object_index)
            .str(&self.object_key)
            .u64(self.logical_offset)
            .u64(self.object_offset)
            .u64(self.length)
            .str(&self.digest_uri)
            .opt_u32(self.append_segment)
            .finish()
    }

    /// Decodes a value, taking `object_index` from the key. Errors: [`Error::Codec`].
    pub fn decode_value(object_index: u64, b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let r = ManifestRow {
            object_index,
            physical_owner_revision: ArtifactRevisionId(d.b16()?),
            physical_object_index: d.u64()?,
            object_key: d.string()?,
            logical_offset: d.u64()?,
            object_offset: d.u64()?,
            length: d.u64()?,
            digest_uri: d.string()?,
            append_segment: d.opt_u32()?,
        };
        d.finish()?;
        Ok(r)
    }
}

/// The manifest digest URI: `"sha256:"` + lowercase hex of SHA-256 over, for each row in order,
/// `u64 object_index | encoded row value` (the exact ArtifactManifest key suffix and value bytes).
pub fn manifest_digest_uri(rows: &[ManifestRow]) -> String {
    let mut h = Sha256::new();
    for r in rows {
        h.update(r.object_index.to_be_bytes());
        h.update(r.encode_value());
    }
    format!("sha256:{}", crate::ids::to_hex(&h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> ManifestRow {
        ManifestRow {
            object_index: 0,
            physical_owner_revision: ArtifactRevisionId([5; 16]),
            physical_object_index: 0,
            object_key: "k".into(),
            logical_offset: 0,
            object_offset: 0,
            length: 3,
            digest_uri: "sha256:z".into(),
            append_segment: Some(1),
        }
    }

    #[test]
    fn manifest_row_golden_bytes_and_round_trip() {
        let r = row();
        let b = r.encode_value();
        let mut expected = vec![0, 2];
        expected.extend_from_slice(&[5; 16]);
        expected.extend_from_slice(&0u64.to_be_bytes());
        expected.extend_from_slice(&[0, 0, 0, 1, b'k']);
        expected.extend_from_slice(&0u64.to_be_bytes());
        expected.extend_from_slice(&0u64.to_be_bytes());
        expected.extend_from_slice(&3u64.to_be_bytes());
        expected.extend_from_slice(&[0, 0, 0, 8]);
        expected.extend_from_slice(b"sha256:z");
        expected.extend_from_slice(&[1, 0, 0, 0, 1]);
        assert_eq!(b, expected);
        assert_eq!(ManifestRow::decode_value(0, &b).unwrap(), r);
        let mut bad = b.clone();
        let n = bad.len();
        bad[n - 5] = 2; // unknown option tag
        assert!(ManifestRow::decode_value(0, &bad).is_err());
        let k = key(&RootId([1; 16]), &ArtifactRevisionId([2; 16]), 7);
        assert_eq!(decode_key_index(&k).unwrap(), 7);
    }

    #[test]
    fn manifest_digest_depends_on_every_row_field() {
        let a = vec![row()];
        let mut b = vec![row()];
        b[0].length = 4;
        assert_ne!(manifest_digest_uri(&a), manifest_digest_uri(&b));
        assert!(manifest_digest_uri(&a).starts_with("sha256:"));
        assert_eq!(manifest_digest_uri(&a).len(), 7 + 64);
        assert_eq!(manifest_digest_uri(&a), manifest_digest_uri(&a.clone()));
    }
}
