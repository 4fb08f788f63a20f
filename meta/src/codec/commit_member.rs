//! CommitMember (docs/metadata-format.md, tag 0x08) — one path of a sealed commit's frozen tree.
//!
//! Key: `root_id 16 | commit_id 32 | ordered path key` — the same canonical ordered path codec as
//! PathCurrent ([`crate::path::ordered_key`], `… 0x01`), so members scan in canonical path order
//! and a directory's child prefix never matches a longer sibling.
//!
//! Value (format version 2, immutable commit record):
//!
//! ```text
//! u16 2 | artifact_revision_id 16 | u64 path_generation | str body_digest_uri |
//! str manifest_digest_uri | u64 logical_size | u32 dependency_count | u32 dependency_depth |
//! str content_type | str producer | option(str manifest_id) |
//! u32 n | n × (str field_id, bytes encoded_index_value)          typed projection
//! ```
//!
//! The typed projection has the same shape as PathEntry's: each value is an
//! [`crate::index::IndexValue`] encoding.

use super::wire::{Dec, Enc};
use crate::error::Result;
use crate::ids::{ArtifactRevisionId, CommitId, RootId};
use crate::path::{ordered_key, NormPath};

const FAMILY: &str = "commit_member";
/// Value format version (immutable commit record).
pub const VALUE_VERSION: u16 = 2;

/// The CommitMember key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitMemberKey {
    /// Root.
    pub root: RootId,
    /// Commit.
    pub commit_id: CommitId,
    /// Member path.
    pub path: NormPath,
}

/// `root_id | commit_id` — the prefix of every member of one commit.
pub fn commit_prefix(root: &RootId, commit_id: &CommitId) -> Vec<u8> {
    Enc::new()
        .raw(root.as_bytes())
        .raw(commit_id.as_bytes())
        .finish()
}

impl CommitMemberKey {
    /// `root_id | commit_id | ordered(path) 0x01`.
    pub fn encode(&self) -> Vec<u8> {
        let mut k = commit_prefix(&self.root, &self.commit_id);
        k.extend_from_slice(&ordered_key(&self.path));
        k
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] (short key, malformed ordered path).
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let root = RootId(d.b16()?);
        let commit_id = CommitId(d.b32()?);
        let path = d.ordered_path_rest()?;
        Ok(CommitMemberKey {
            root,
            commit_id,
            path,
        })
    }
}

/// The CommitMember value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitMember {
    /// Revision frozen at this path.
    pub artifact_revision_id: ArtifactRevisionId,
    /// Path generation frozen at this path.
    pub path_generation: u64,
    /// `sha256:` digest URI of the complete body.
    pub body_digest_uri: String,
    /// `sha256:` digest URI of the manifest rows.
    pub manifest_digest_uri: String,
    /// Body length in bytes.
    pub logical_size: u64,
    /// Sealed dependency count of the revision.
    pub dependency_count: u32,
    /// Sealed dependency depth of the revision.
    pub dependency_depth: u32,
    /// Content type.
    pub content_type: String,
    /// Producer / provenance summary.
    pub producer: String,
    /// Optional caller manifest id.
    pub manifest_id: Option<String>,
    /// Typed projection `(field id, encoded index value)`.
    pub projection: Vec<(String, Vec<u8>)>,
}

impl CommitMember {
    /// Encodes the value (format version 2).
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::version(VALUE_VERSION);
        e.raw(self.artifact_revision_id.as_bytes())
            .u64(self.path_generation)
            .str(&self.body_digest_uri)
            .str(&self.manifest_digest_uri)
            .u64(self.logical_size)
            .u32(self.dependency_count)
            .u32(self.dependency_depth)
            .str(&self.content_type)
            .str(&self.producer)
            .opt_str(self.manifest_id.as_deref())
            .count(self.projection.len());
        for (field, value) in &self.projection {
            e.str(field).bytes(value);
        }
        e.finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let artifact_revision_id = ArtifactRevisionId(d.b16()?);
        let path_generation = d.u64()?;
        let body_digest_uri = d.string()?;
        let manifest_digest_uri = d.string()?;
        let logical_size = d.u64()?;
        let dependency_count = d.u32()?;
        let dependency_depth = d.u32()?;
        let content_type = d.string()?;
        let producer = d.string()?;
        let manifest_id = d.opt_string()?;
        let n = d.count()?;
        let mut projection = Vec::new();
        for _ in 0..n {
            let field = d.string()?;
            let value = d.bytes()?.to_vec();
            projection.push((field, value));
        }
        d.finish()?;
        Ok(CommitMember {
            artifact_revision_id,
            path_generation,
            body_digest_uri,
            manifest_digest_uri,
            logical_size,
            dependency_count,
            dependency_depth,
            content_type,
            producer,
            manifest_id,
            projection,
        })
    }
}
