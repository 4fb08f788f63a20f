//! PathCurrent (docs/metadata-format.md, tag 0x03) — the only namespace truth.
//!
//! Key: `root_id | workspace_incarnation_id | ordered path key` (see [`crate::path`]).
//! Value `PathEntry` (format version 2): `u16 2 | u64 generation | artifact_revision_id 16 |
//! u64 logical_size | str body_digest_uri | str manifest_digest_uri | u32 dependency_count |
//! u32 dependency_depth | str content_type | str producer | option(str manifest_id) |
//! u64 created_version | u64 modified_version | u32 n | n × (str field, bytes value)`
//! where `str`/`bytes` are u32-length-prefixed.

use super::wire::{Dec, Enc};
use crate::error::{Error, Result};
use crate::ids::{ArtifactRevisionId, RootId, WorkspaceIncarnationId};
use crate::path::{decode_ordered_key, dir_prefix, ordered_key, NormPath};

const FAMILY: &str = "path_current";
/// Value format version (publication-owned path record).
pub const VALUE_VERSION: u16 = 2;

/// PathEntry: the compact, complete PathMetadata projection of one published path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathEntry {
    /// Path generation: the commit version that published this body (unique, never reused).
    pub generation: u64,
    /// Immutable revision owning the manifest.
    pub artifact_revision_id: ArtifactRevisionId,
    /// Body length in bytes.
    pub logical_size: u64,
    /// `sha256:` + 64 lowercase hex of the whole body.
    pub body_digest_uri: String,
    /// `sha256:` + 64 lowercase hex over the canonical manifest rows.
    pub manifest_digest_uri: String,
    /// Distinct physical owner revisions other than this one.
    pub dependency_count: u32,
    /// Sealed dependency depth (0 without reused blocks).
    pub dependency_depth: u32,
    /// Content type (1..=255 bytes).
    pub content_type: String,
    /// Producer / provenance summary.
    pub producer: String,
    /// Optional caller manifest id.
    pub manifest_id: Option<String>,
    /// Commit version that first created the path (kept across replacements).
    pub created_version: u64,
    /// Commit version of this body publication.
    pub modified_version: u64,
    /// Typed index projection `(field id, encoded value)`; empty in this slice.
    pub index_projection: Vec<(String, Vec<u8>)>,
}

/// `root_id | incarnation` — the PathCurrent prefix of one workspace incarnation.
pub fn workspace_prefix(root: &RootId, inc: &WorkspaceIncarnationId) -> Vec<u8> {
    Enc::new().raw(root.as_bytes()).raw(inc.as_bytes()).finish()
}

/// The exact PathCurrent key.
pub fn key(root: &RootId, inc: &WorkspaceIncarnationId, path: &NormPath) -> Vec<u8> {
    let mut k = workspace_prefix(root, inc);
    k.extend_from_slice(&ordered_key(path));
    k
}

/// The children/subtree prefix of `dir` (workspace root for `None`).
pub fn children_prefix(
    root: &RootId,
    inc: &WorkspaceIncarnationId,
    dir: Option<&NormPath>,
) -> Vec<u8> {
    let mut k = workspace_prefix(root, inc);
    k.extend_from_slice(&dir_prefix(dir));
    k
}

/// The decoded PathCurrent key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathCurrentKey {
    /// Root.
    pub root: RootId,
    /// Workspace incarnation.
    pub incarnation: WorkspaceIncarnationId,
    /// Normalized path.
    pub path: NormPath,
}

impl PathCurrentKey {
    /// `root_id | incarnation | ordered(path) 0x01` (same bytes as [`key`]).
    pub fn encode(&self) -> Vec<u8> {
        key(&self.root, &self.incarnation, &self.path)
    }

    /// Decodes a full key. Errors: [`Error::Codec`] (short key, malformed ordered path).
    pub fn decode(k: &[u8]) -> Result<Self> {
        let mut d = super::wire::Dec::new(FAMILY, k);
        let root = RootId(d.b16()?);
        let incarnation = WorkspaceIncarnationId(d.b16()?);
        let path = d.ordered_path_rest()?;
        Ok(PathCurrentKey {
            root,
            incarnation,
            path,
        })
    }
}

/// Decodes the path of a full PathCurrent key. Errors: [`Error::Codec`].
pub fn decode_key_path(key: &[u8]) -> Result<NormPath> {
    let rest = key
        .get(32..)
        .ok_or_else(|| Error::codec(FAMILY, "key shorter than root and incarnation"))?;
    decode_ordered_key(rest).map_err(|e| Error::codec(FAMILY, e.to_string()))
}

impl PathEntry {
    /// Encodes the value (format version 2).
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::version(VALUE_VERSION);
        e.u64(self.generation)
            .raw(self.artifact_revision_id.as_bytes())
            .u64(self.logical_size)
            .str(&self.body_digest_uri)
            .str(&self.manifest_digest_uri)
            .u32(self.dependency_count)
            .u32(self.dependency_depth)
            .str(&self.content_type)
            .str(&self.producer)
            .opt_str(self.manifest_id.as_deref())
            .u64(self.created_version)
            .u64(self.modified_version)
            .u32(u32::try_from(self.index_projection.len()).unwrap_or(u32::MAX));
        for (field, value) in &self.index_projection {
            e.str(field).bytes(value);
        }
        e.finish()
    }

    /// Decodes the value. Errors: [`Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let generation = d.u64()?;
        let artifact_revision_id = ArtifactRevisionId(d.b16()?);
        let logical_size = d.u64()?;
        let body_digest_uri = d.string()?;
        let manifest_digest_uri = d.string()?;
        let dependency_count = d.u32()?;
        let dependency_depth = d.u32()?;
        let content_type = d.string()?;
        let producer = d.string()?;
        let manifest_id = d.opt_string()?;
        let created_version = d.u64()?;
        let modified_version = d.u64()?;
        let n = d.u32()?;
        let mut index_projection = Vec::new();
        for _ in 0..n {
            if d.is_empty() {
                return Err(d.err("truncated index projection"));
            }
            let field = d.string()?;
            let value = d.bytes()?.to_vec();
            index_projection.push((field, value));
        }
        d.finish()?;
        Ok(PathEntry {
            generation,
            artifact_revision_id,
            logical_size,
            body_digest_uri,
            manifest_digest_uri,
            dependency_count,
            dependency_depth,
            content_type,
            producer,
            manifest_id,
            created_version,
            modified_version,
            index_projection,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::path::normalize;

    pub(crate) fn sample() -> PathEntry {
        PathEntry {
            generation: 5,
            artifact_revision_id: ArtifactRevisionId([9; 16]),
            logical_size: 11,
            body_digest_uri: format!("sha256:{}", "a".repeat(64)),
            manifest_digest_uri: format!("sha256:{}", "b".repeat(64)),
            dependency_count: 0,
            dependency_depth: 0,
            content_type: "text/plain".into(),
            producer: "test".into(),
            manifest_id: Some("m".into()),
            created_version: 2,
            modified_version: 5,
            index_projection: vec![("k".into(), vec![1, 2])],
        }
    }

    #[test]
    fn path_entry_round_trips_and_fails_closed() {
        let e = sample();
        let b = e.encode();
        assert_eq!(PathEntry::decode(&b).unwrap(), e);
        assert_eq!(&b[..10], &[0, 2, 0, 0, 0, 0, 0, 0, 0, 5]);
        for cut in 0..b.len() {
            assert!(PathEntry::decode(&b[..cut]).is_err(), "truncation at {cut}");
        }
        let mut long = b.clone();
        long.push(1);
        assert!(PathEntry::decode(&long).is_err());
        let mut v3 = b.clone();
        v3[1] = 3;
        assert!(PathEntry::decode(&v3).is_err());
    }

    #[test]
    fn path_current_key_layout() {
        let root = RootId([1; 16]);
        let inc = WorkspaceIncarnationId([2; 16]);
        let p = normalize("a/b").unwrap();
        let k = key(&root, &inc, &p);
        assert_eq!(&k[32..], &[0x62, 0x00, 0x63, 0x01]);
        assert_eq!(decode_key_path(&k).unwrap(), p);
        assert!(k.starts_with(&children_prefix(
            &root,
            &inc,
            Some(&normalize("a").unwrap())
        )));
    }
}
