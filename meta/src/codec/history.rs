//! History keys and values (reserved engine tree `history`, tag 0x00, written by holt inside the
//! same atomic batch as every overwrite/delete of a versioned family tree).
//!
//! ```text
//! key   = source_family_tag u8 | u32 len(user_key) | user_key | u64 !commit_version
//! value = u8 kind (0 = absent/tombstone before this commit, 1 = value) | previous value bytes
//! ```
//!
//! `source_family_tag` is one of the 23 metadata family tags (`0x01..=0x17`); the reserved
//! engine trees are not history sources, so any other tag fails closed. The commit version is
//! stored inverted so one key's rows sort newest first. The layout is holt's own
//! (`holt::mvcc`); this module decodes it for recovery and fsck and must stay byte-identical.

use super::wire::{Dec, Enc};
use crate::error::{Error, Result};
use crate::family::Family;

const FAMILY: &str = "history";

/// The metadata family whose tag is `tag`, if `tag` names a history source.
pub fn source_family(tag: u8) -> Option<Family> {
    Family::ALL
        .into_iter()
        .find(|f| f.versioned() && f.tag() == tag)
}

/// One History key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryKey {
    /// Source family (a versioned metadata family).
    pub source: Family,
    /// The family key whose previous value the row holds.
    pub user_key: Vec<u8>,
    /// Commit version that overwrote/deleted the key.
    pub commit_version: u64,
}

/// `source_family_tag | u32 len | user_key` — the prefix of every history row of one key.
pub fn key_prefix(source: Family, user_key: &[u8]) -> Vec<u8> {
    Enc::new().u8(source.tag()).bytes(user_key).finish()
}

impl HistoryKey {
    /// Encodes the key.
    pub fn encode(&self) -> Vec<u8> {
        let mut k = key_prefix(self.source, &self.user_key);
        k.extend_from_slice(&(!self.commit_version).to_be_bytes());
        k
    }

    /// Decodes a key. Errors: [`Error::Codec`] for a tag that is not a history source, a length
    /// that disagrees with the key, or trailing bytes.
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let tag = d.u8()?;
        let source = source_family(tag)
            .ok_or_else(|| d.err(format!("tag {tag:#04x} is not a history source family")))?;
        let user_key = d.bytes()?.to_vec();
        let commit_version = !d.u64()?;
        d.finish()?;
        Ok(HistoryKey {
            source,
            user_key,
            commit_version,
        })
    }
}

/// Encodes a history value: `0` for "absent before this commit", `1 | bytes` for a previous value.
pub fn encode_value(previous: Option<&[u8]>) -> Vec<u8> {
    match previous {
        None => vec![0],
        Some(v) => {
            let mut out = Vec::with_capacity(1 + v.len());
            out.push(1);
            out.extend_from_slice(v);
            out
        }
    }
}

/// Decodes a history value into the previous value (`None` = absent/tombstone).
///
/// Errors: [`Error::Codec`] for an empty value, an unknown kind byte, or bytes after kind `0`.
pub fn decode_value(b: &[u8]) -> Result<Option<Vec<u8>>> {
    match b.split_first() {
        Some((0, [])) => Ok(None),
        Some((1, rest)) => Ok(Some(rest.to_vec())),
        Some((0, _)) => Err(Error::codec(FAMILY, "bytes after a tombstone kind")),
        Some((k, _)) => Err(Error::codec(
            FAMILY,
            format!("unknown history value kind {k}"),
        )),
        None => Err(Error::codec(FAMILY, "empty history value")),
    }
}
