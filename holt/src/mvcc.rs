//! MVCC history (seed 000, "History").
//!
//! For every overwrite or delete of a key in a versioned tree, the same commit writes the
//! key's previous value into the engine-owned `history` tree (tag 0x00):
//!
//! ```text
//! key   = source_tree_tag (1 byte) | u32be(user key length) | user key | u64be(!commit_version)
//! value = kind (1 byte: 0 = absent/tombstone, 1 = value) | previous value bytes
//! ```
//!
//! The first write of a key records kind 0 ("absent before this commit"). Because the commit
//! version is stored inverted, a key's rows sort newest first. The value a key had at read
//! version `v` is its slot value when the slot's version is `<= v`, otherwise the value stored in
//! the history row with the smallest commit version `> v`.
//!
//! Pruning at history floor `f` drops every history row with commit version `<= f` and every
//! tombstone slot with version `<= f`: no read version `>= f` can need them.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::registry::TreeMeta;
use crate::state::{PhysOp, Slot, State};

/// Tag of the engine-owned `history` tree.
pub const HISTORY_TAG: u8 = 0x00;
/// Name of the engine-owned `history` tree.
pub const HISTORY_NAME: &str = "history";

const KIND_ABSENT: u8 = 0;
const KIND_VALUE: u8 = 1;

/// `tag | u32be(len) | key` — the prefix shared by all history rows of one key.
pub(crate) fn history_key_prefix(tag: u8, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + 4 + key.len() + 8);
    k.push(tag);
    k.extend_from_slice(&(key.len() as u32).to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// Full history key for `key` of tree `tag` written by commit `version`.
pub(crate) fn history_key(tag: u8, key: &[u8], version: u64) -> Vec<u8> {
    let mut k = history_key_prefix(tag, key);
    k.extend_from_slice(&(!version).to_be_bytes());
    k
}

/// Commit version of a history key (its last 8 bytes, inverted).
fn history_key_version(hkey: &[u8]) -> Option<u64> {
    let tail = hkey.len().checked_sub(8).map(|s| &hkey[s..])?;
    let mut a = [0u8; 8];
    a.copy_from_slice(tail);
    Some(!u64::from_be_bytes(a))
}

fn encode_history_value(prev: Option<&[u8]>) -> Arc<[u8]> {
    match prev {
        None => Arc::from(&[KIND_ABSENT][..]),
        Some(v) => {
            let mut out = Vec::with_capacity(1 + v.len());
            out.push(KIND_VALUE);
            out.extend_from_slice(v);
            Arc::from(out)
        }
    }
}

fn decode_history_value(hkey: &[u8], v: &[u8]) -> Result<Option<Vec<u8>>> {
    match v.split_first() {
        Some((&KIND_ABSENT, [])) => Ok(None),
        Some((&KIND_VALUE, rest)) => Ok(Some(rest.to_vec())),
        _ => Err(history_corrupt(
            hkey,
            "history value has an unknown kind byte",
        )),
    }
}

fn history_corrupt(hkey: &[u8], reason: &str) -> Error {
    Error::corrupt(
        "<history tree>",
        0,
        format!("{reason} (history key {hkey:02x?})"),
    )
}

/// Plans and applies one user write (`value = None` is a delete) at commit `version`, appending
/// the physical ops (history row first, then the write) to `out`. Deleting an absent key is a
/// no-op and logs nothing. In a versioned tree only the first write of a key within a commit
/// records history: it captures the value before the commit.
pub(crate) fn write(
    st: &mut State,
    meta: &TreeMeta,
    history: &TreeMeta,
    key: Vec<u8>,
    value: Option<Arc<[u8]>>,
    version: u64,
    out: &mut Vec<PhysOp>,
) {
    let cur = st.tree(meta.tag).get(key.as_slice());
    let prev = cur.and_then(|s| s.value.clone());
    if value.is_none() && prev.is_none() {
        return;
    }
    if meta.versioned && cur.is_none_or(|s| s.version != version) {
        let row = PhysOp {
            tag: history.tag,
            key: history_key(meta.tag, &key, version),
            value: Some(encode_history_value(prev.as_deref())),
        };
        st.apply(history, row.clone(), version);
        out.push(row);
    }
    let op = PhysOp {
        tag: meta.tag,
        key,
        value,
    };
    st.apply(meta, op.clone(), version);
    out.push(op);
}

/// The value `key` (whose current slot is `slot`) had at `read_version`.
///
/// Unversioned trees keep no history: their latest value is returned whatever the read version.
pub(crate) fn resolve(
    st: &State,
    meta: &TreeMeta,
    key: &[u8],
    slot: &Slot,
    read_version: u64,
) -> Result<Option<Vec<u8>>> {
    if slot.version <= read_version || !meta.versioned {
        return Ok(slot.value.as_ref().map(|v| v.to_vec()));
    }
    let prefix = history_key_prefix(meta.tag, key);
    let mut upper = prefix.clone();
    upper.extend_from_slice(&(!read_version).to_be_bytes());
    // Rows sort by inverted version: the row with the smallest commit version > read_version is
    // the last one strictly below `upper`.
    let hist = st.tree(HISTORY_TAG);
    let row = hist
        .range::<_, [u8]>((
            std::ops::Bound::Included(prefix.as_slice()),
            std::ops::Bound::Excluded(upper.as_slice()),
        ))
        .next_back();
    match row {
        Some((hkey, hslot)) => match &hslot.value {
            Some(v) => decode_history_value(hkey, v),
            None => Err(history_corrupt(hkey, "tombstone in the history tree")),
        },
        None => Err(Error::corrupt(
            "<history tree>",
            0,
            format!(
                "missing history row for tree {} key {key:02x?} at version {read_version} \
                 (slot version {})",
                meta.name, slot.version
            ),
        )),
    }
}

/// Drops history rows and tombstones that no read version `>= floor` can need. Runs
/// synchronously over the whole history tree and every versioned tree (first cut).
pub(crate) fn prune(st: &mut State, floor: u64) {
    let dead_rows: Vec<Vec<u8>> = st
        .tree(HISTORY_TAG)
        .iter()
        .filter(|(k, _)| history_key_version(k).is_some_and(|v| v <= floor))
        .map(|(k, _)| k.clone())
        .collect();
    let hist = &mut st.trees[usize::from(HISTORY_TAG)];
    for k in dead_rows {
        hist.remove(k.as_slice());
    }
    let versioned: Vec<u8> = st
        .registry
        .iter()
        .filter(|m| m.versioned)
        .map(|m| m.tag)
        .collect();
    for tag in versioned {
        let dead: Vec<Vec<u8>> = st
            .tree(tag)
            .iter()
            .filter(|(_, s)| s.value.is_none() && s.version <= floor)
            .map(|(k, _)| k.clone())
            .collect();
        let map = &mut st.trees[usize::from(tag)];
        for k in dead {
            map.remove(k.as_slice());
        }
    }
}
