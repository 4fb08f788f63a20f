//! SecondaryIndex (docs/metadata-format.md, tag 0x0f) — one typed index row per (field, value, path).
//!
//! Key:
//!
//! ```text
//! root_id 16 | u16 len(index_id) | index_id | encoded_value | workspace_incarnation_id 16
//!            | ordered path key (… 0x01)
//! ```
//!
//! `index_id` is a [`FieldId`] (`[A-Za-z0-9_.-]`, 1..=128 bytes). `encoded_value` is the
//! self-delimiting, order-preserving [`IndexValue`] encoding (see
//! [`crate::index::value_codec`]), so rows of one field scan in value order, then incarnation,
//! then canonical path order, and no value is a prefix-ambiguous concatenation.
//!
//! Value (format version 1): `u16 1 | u64 path_generation | u32 n | n × (str field_id,
//! bytes encoded_index_value)` — the compact projection a query returns without reading
//! PathCurrent (consumers still recheck the workspace incarnation/state at their read version).

use super::wire::{Dec, Enc};
use crate::codec::field_id::FieldId;
use crate::codec::index_value::IndexValue;
use crate::error::{Error, Result};
use crate::ids::{RootId, WorkspaceIncarnationId};
use crate::path::{ordered_key, NormPath};

const FAMILY: &str = "secondary_index";
/// Value format version.
pub const VALUE_VERSION: u16 = 1;

/// The SecondaryIndex key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryIndexKey {
    /// Root.
    pub root: RootId,
    /// Index (field) id.
    pub index_id: FieldId,
    /// Indexed value.
    pub value: IndexValue,
    /// Workspace incarnation of the indexed path.
    pub incarnation: WorkspaceIncarnationId,
    /// Indexed path.
    pub path: NormPath,
}

/// `root_id | u16 len | index_id` — the prefix of every row of one index.
pub fn index_prefix(root: &RootId, index_id: &FieldId) -> Vec<u8> {
    Enc::new()
        .raw(root.as_bytes())
        .str16(index_id.as_str())
        .finish()
}

impl SecondaryIndexKey {
    /// Encodes the key.
    ///
    /// Errors: [`Error::InvalidArgument`] when the value is too long for the value codec.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut k = index_prefix(&self.root, &self.index_id);
        self.value.encode_into(&mut k)?;
        k.extend_from_slice(self.incarnation.as_bytes());
        k.extend_from_slice(&ordered_key(&self.path));
        Ok(k)
    }

    /// Decodes a key. Errors: [`Error::Codec`] (invalid field id, malformed value, short key,
    /// malformed ordered path).
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let root = RootId(d.b16()?);
        let index_id = FieldId::from_stored(FAMILY, d.bytes16()?)?;
        let rest = d.rest();
        let (value, used) = IndexValue::decode_prefix(rest)?;
        let tail = rest
            .get(used..)
            .ok_or_else(|| Error::codec(FAMILY, "truncated after index value"))?;
        let mut d = Dec::new(FAMILY, tail);
        let incarnation = WorkspaceIncarnationId(d.b16()?);
        let path = d.ordered_path_rest()?;
        Ok(SecondaryIndexKey {
            root,
            index_id,
            value,
            incarnation,
            path,
        })
    }
}

/// The SecondaryIndex value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryIndexEntry {
    /// Generation of the indexed path when the row was written.
    pub path_generation: u64,
    /// Compact projection `(field id, encoded index value)`.
    pub projection: Vec<(String, Vec<u8>)>,
}

impl SecondaryIndexEntry {
    /// Encodes the value (format version 1).
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::version(VALUE_VERSION);
        e.u64(self.path_generation).count(self.projection.len());
        for (field, value) in &self.projection {
            e.str(field).bytes(value);
        }
        e.finish()
    }

    /// Decodes the value. Errors: [`Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let path_generation = d.u64()?;
        let n = d.count()?;
        let mut projection = Vec::new();
        for _ in 0..n {
            let field = d.string()?;
            let value = d.bytes()?.to_vec();
            projection.push((field, value));
        }
        d.finish()?;
        Ok(SecondaryIndexEntry {
            path_generation,
            projection,
        })
    }
}
