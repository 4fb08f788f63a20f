//! Tag (docs/metadata-format.md, tag 0x0a) — a named pointer to a commit within one workspace incarnation.
//!
//! Key: `root_id 16 | workspace_incarnation_id 16 | u16 len(tag_name) | tag_name` (tag names are
//! case-sensitive UTF-8 without NUL, 1..=128 bytes: [`crate::ids::TagName`]).
//! Value (format version 1): `u16 1 | commit_id 32 | u64 tag_generation`.

use super::wire::{Dec, Enc};
use crate::error::Result;
use crate::ids::{CommitId, RootId, TagName, WorkspaceIncarnationId};

const FAMILY: &str = "tag";
/// Value format version.
pub const VALUE_VERSION: u16 = 1;

/// The Tag key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagKey {
    /// Root.
    pub root: RootId,
    /// Workspace incarnation.
    pub incarnation: WorkspaceIncarnationId,
    /// Tag name.
    pub tag: TagName,
}

/// `root_id | incarnation` — the prefix of every tag of one incarnation.
pub fn incarnation_prefix(root: &RootId, inc: &WorkspaceIncarnationId) -> Vec<u8> {
    Enc::new().raw(root.as_bytes()).raw(inc.as_bytes()).finish()
}

impl TagKey {
    /// `root_id | incarnation | u16 len | tag_name`.
    pub fn encode(&self) -> Vec<u8> {
        Enc::new()
            .raw(self.root.as_bytes())
            .raw(self.incarnation.as_bytes())
            .str16(self.tag.as_str())
            .finish()
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] (short key, invalid name, trailing bytes).
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let root = RootId(d.b16()?);
        let incarnation = WorkspaceIncarnationId(d.b16()?);
        let tag = TagName::from_stored(FAMILY, d.bytes16()?)?;
        d.finish()?;
        Ok(TagKey {
            root,
            incarnation,
            tag,
        })
    }
}

/// The Tag value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    /// Tagged commit.
    pub commit_id: CommitId,
    /// Incremented by every tag move (CAS token).
    pub tag_generation: u64,
}

impl Tag {
    /// Encodes the value (format version 1).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .raw(self.commit_id.as_bytes())
            .u64(self.tag_generation)
            .finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let v = Tag {
            commit_id: CommitId(d.b32()?),
            tag_generation: d.u64()?,
        };
        d.finish()?;
        Ok(v)
    }
}
