//! MVCC history (docs/metadata-format.md, "History") and its incremental pruning.
//!
//! ## History rows
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
//! the history row with the smallest commit version `> v` — found with one predecessor search
//! per layer of the history tree (the greatest key below `prefix | u64be(!v)`), whatever the
//! number of rows the key has.
//!
//! Deleted keys of versioned trees stay in their tree as **tombstones** (`Slot { value: None }`)
//! so that a read at an older version still finds them. Every ART node (in memory, and in images
//! of versioned trees and of the history tree) counts the live and dead slots below it and
//! bounds their commit versions (`art::Summary`), so readers skip subtrees that hold only
//! tombstones older than their read version in O(1) (see `range`).
//!
//! ## Pruning: incremental, bounded, not logged
//!
//! At history floor `f` every history row with commit version `<= f` and every tombstone slot
//! with version `<= f` is **garbage**: a read at any `v >= f` never selects such a row (it wants
//! rows with versions `> v`) and reads such a tombstone as absent, exactly as if it were gone.
//! Garbage is therefore invisible, and removing it changes no answer. That makes pruning pure
//! memory reclamation, which holt does as follows:
//!
//! 1. [`Db::set_history_floor`](crate::Db::set_history_floor) logs the new floor (one small WAL
//!    record, durable before the call proceeds) and publishes it: from then on `view_at(v < f)`
//!    fails with `HistoryPruned`. Applying the record does **no** pruning work; it only
//!    schedules a sweep ([`State::raise_floor`]).
//! 2. The sweep ([`prune_step`]) walks the in-memory delta of the `history` tree and then of
//!    every versioned tree in key order from a cursor kept in the state ([`PruneCursor`]),
//!    removing garbage it meets (a tombstone only when no older layer holds its key). Each
//!    step does a bounded amount of work (a budget of visited keys/nodes), so it holds the
//!    commit lock for a bounded time. In versioned trees the walk skips, in O(1), every subtree
//!    whose summary has no tombstone, so it costs O(tombstones), not O(keys).
//! 3. Steps run (a) on the caller of `set_history_floor`, which repeats
//!    [`SWEEP_STEP_BUDGET`]-sized steps — each taking and releasing the commit lock, so other
//!    commits interleave — until the sweep is complete, and (b) piggy-backed on every commit
//!    while a sweep is pending ([`COMMIT_STEP_BUDGET`] per commit), which finishes sweeps left
//!    over by replay after a reopen. A step's result is published only together with durable
//!    content (see `Db`), never ahead of the WAL.
//! 4. Pruning writes no WAL record: after a crash, replay may bring garbage back (rows from
//!    commits logged before a floor record); it is invisible, the replayed floor record schedules
//!    a new sweep, and images never receive garbage history rows, nor, in the base image,
//!    garbage tombstones ([`drop_in_image`]), so garbage in older layers disappears as the
//!    images are written and merged.
//!
//! If the floor rises again while a sweep is running, the sweep continues with the new floor
//! (it always reads the current floor) and is re-run once from the start, so keys it had
//! already passed are checked against the new floor too.

use std::ops::Bound;
use std::sync::Arc;

use crate::art::Summary;
use crate::error::{Error, Result};
use crate::layers::SlotRef;
use crate::registry::{TreeMeta, HISTORY_TAG};
use crate::slot::Value;
use crate::state::{PruneCursor, State};
use crate::wal::record::PhysOp;

const KIND_ABSENT: u8 = 0;
const KIND_VALUE: u8 = 1;

/// Work budget (keys plus inner nodes visited) of one prune step run by `set_history_floor`.
/// Bounds the time one step holds the commit lock (tens to a few hundred microseconds).
pub(crate) const SWEEP_STEP_BUDGET: usize = 2048;
/// Work budget of the prune step piggy-backed on a commit while a sweep is pending.
pub(crate) const COMMIT_STEP_BUDGET: usize = 64;

/// `tag | u32be(len) | key` — the prefix shared by all history rows of one key.
pub(crate) fn history_key_prefix(tag: u8, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + 4 + key.len() + 8);
    k.push(tag);
    // Keys are at most 64 KiB (checked at commit), so the length fits in a u32.
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

fn decode_history_value<'s>(hkey: &[u8], v: &'s [u8]) -> Result<Option<&'s [u8]>> {
    match v.split_first() {
        Some((&KIND_ABSENT, [])) => Ok(None),
        Some((&KIND_VALUE, rest)) => Ok(Some(rest)),
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
/// records history: it captures the value before the commit. The key's current slot is read
/// through every layer (delta, frozen delta, images). Errors: `Corrupt` (reading an image).
pub(crate) fn write(
    st: &mut State,
    meta: &TreeMeta,
    history: &TreeMeta,
    key: Vec<u8>,
    value: Option<Arc<[u8]>>,
    version: u64,
    out: &mut Vec<PhysOp>,
) -> Result<()> {
    // A put into an unversioned tree needs nothing from the current slot: skip the lookup
    // (which may probe every image for a new key).
    if meta.versioned || value.is_none() {
        let row = {
            let cur = st.slot(meta.tag, &key)?;
            let prev = cur.and_then(|s| s.value);
            if value.is_none() && prev.is_none() {
                return Ok(());
            }
            let first_write = cur.is_none_or(|s| s.version != version);
            (meta.versioned && first_write).then(|| PhysOp {
                tag: history.tag,
                key: history_key(meta.tag, &key, version),
                value: Some(encode_history_value(prev)),
            })
        };
        if let Some(row) = row {
            st.apply(
                history,
                &row.key,
                Value::from_arc(row.value.clone()),
                version,
            )?;
            out.push(row);
        }
    }
    st.apply(meta, &key, Value::from_arc(value.clone()), version)?;
    out.push(PhysOp {
        tag: meta.tag,
        key,
        value,
    });
    Ok(())
}

/// The value `key` (whose current slot is `slot`) had at `read_version`, borrowed from `st`.
///
/// Unversioned trees keep no history: their latest value is returned whatever the read version.
/// The history row is found with one predecessor search per layer of the `history` tree.
/// Errors: `Corrupt` if the history row a versioned read needs is missing or malformed, or an
/// image block is bad.
pub(crate) fn resolve<'s>(
    st: &'s State,
    meta: &TreeMeta,
    key: &[u8],
    slot: SlotRef<'s>,
    read_version: u64,
) -> Result<Option<&'s [u8]>> {
    if !meta.versioned || slot.version <= read_version {
        return Ok(slot.value);
    }
    let prefix = history_key_prefix(meta.tag, key);
    let mut upper = prefix.clone();
    upper.extend_from_slice(&(!read_version).to_be_bytes());
    // Rows sort by inverted version: the row with the smallest commit version > read_version is
    // the greatest key strictly below `upper` — if it still belongs to this key.
    match st.history_last_below(&upper)? {
        Some((hkey, hslot)) if hkey.starts_with(&prefix) && hkey.len() == prefix.len() + 8 => {
            match hslot.value {
                Some(v) => decode_history_value(&hkey, v),
                None => Err(history_corrupt(&hkey, "tombstone in the history tree")),
            }
        }
        _ => Err(Error::corrupt(
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

/// The value of `key` (current slot `slot`, from its newest layer) visible at `read_version`
/// in tree `meta`: MVCC resolution for versioned trees, tombstones read as absent, and rows of
/// the `history` tree at or below the floor hidden (pruned, even before they are physically
/// removed). Errors: as [`resolve`].
#[inline]
pub(crate) fn visible<'s>(
    st: &'s State,
    meta: &TreeMeta,
    key: &[u8],
    slot: SlotRef<'s>,
    read_version: u64,
) -> Result<Option<&'s [u8]>> {
    if meta.tag == HISTORY_TAG && slot.version <= st.floor {
        return Ok(None);
    }
    resolve(st, meta, key, slot, read_version)
}

/// The next versioned tree after `tag` in sweep order.
fn next_swept_tag(st: &State, tag: u8) -> Option<u8> {
    st.registry
        .iter()
        .find(|m| m.versioned && m.tag > tag)
        .map(|m| m.tag)
}

/// Whether `slot` of tree `tag` is garbage at history floor `floor`.
fn is_garbage(tag: u8, slot: SlotRef<'_>, floor: u64) -> bool {
    if tag == HISTORY_TAG {
        // A history row's slot version is the commit that wrote it, i.e. the row's version.
        slot.version <= floor
    } else {
        slot.value.is_none() && slot.version <= floor
    }
}

/// Whether an image written at history floor `floor` may leave out `slot` of tree `tag`
/// (`versioned`). `bottom`: the image is the base, with no older layer whose slot a tombstone
/// could be hiding. History rows at or below the floor are garbage in any image; tombstones are
/// dropped only from the base (versioned ones once the floor passed them).
pub(crate) fn drop_in_image(
    tag: u8,
    versioned: bool,
    slot: SlotRef<'_>,
    floor: u64,
    bottom: bool,
) -> bool {
    if tag == HISTORY_TAG {
        return is_garbage(tag, slot, floor);
    }
    bottom && slot.value.is_none() && (!versioned || slot.version <= floor)
}

/// Runs one bounded step of the pending prune sweep on `st` (which must be a private copy:
/// nodes shared with published snapshots are path-copied). The sweep walks the active delta
/// only: older layers drop their garbage when the next image is written. A garbage tombstone
/// is removed only when no older layer holds the key (it would otherwise bring the older slot
/// back). `budget` bounds the keys plus inner nodes visited. Returns whether the sweep is still
/// pending afterwards.
pub(crate) fn prune_step(st: &mut State, budget: usize) -> bool {
    let Some(mut cur) = st.prune.take() else {
        return false;
    };
    let floor = st.floor;
    let mut left = budget.max(1);
    loop {
        let tag = cur.tag;
        let (dead, last, finished, work) = {
            let tree = st.tree(tag);
            let start = match &cur.after {
                Some(k) => Bound::Excluded(k.as_slice()),
                None => Bound::Unbounded,
            };
            // In versioned trees only tombstones can be garbage: skip subtrees without one.
            let no_tombstone = |s: &Summary| s.dead == 0;
            let mut it = if tag == HISTORY_TAG {
                tree.range_from(start)
            } else {
                tree.range_from_filtered(start, &no_tombstone)
            };
            let mut dead: Vec<Vec<u8>> = Vec::new();
            let mut last: Option<&[u8]> = None;
            let mut keys = 0usize;
            let mut finished = true;
            while let Some((k, slot)) = it.next() {
                keys += 1;
                last = Some(k);
                if is_garbage(tag, SlotRef::of(slot), floor)
                    && (tag == HISTORY_TAG || matches!(st.lower_has(tag, k), Ok(false)))
                {
                    dead.push(k.to_vec());
                }
                if keys + it.nodes_visited() >= left {
                    finished = false;
                    break;
                }
            }
            let work = keys + it.nodes_visited();
            (dead, last.map(<[u8]>::to_vec), finished, work)
        };
        let tree = st.tree_mut(tag);
        for k in &dead {
            tree.remove(k);
        }
        left = left.saturating_sub(work.max(1));
        if finished {
            match next_swept_tag(st, tag) {
                Some(next) => {
                    cur.tag = next;
                    cur.after = None;
                }
                None if cur.again => cur = PruneCursor::start(),
                None => return false,
            }
        } else {
            cur.after = last;
        }
        if left == 0 {
            st.prune = Some(cur);
            return true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versioned_state() -> (State, Arc<TreeMeta>, Arc<TreeMeta>) {
        let mut st = State::new();
        st.registry = st.registry.with(TreeMeta {
            name: "t".into(),
            tag: 7,
            versioned: true,
        });
        let meta = st.registry.get(7).cloned().expect("registered");
        let hist = st.registry.get(HISTORY_TAG).cloned().expect("history");
        (st, meta, hist)
    }

    fn put(st: &mut State, meta: &TreeMeta, hist: &TreeMeta, key: &str, value: Option<&str>) {
        let version = st.version + 1;
        let mut out = Vec::new();
        write(
            st,
            meta,
            hist,
            key.as_bytes().to_vec(),
            value.map(|v| Arc::from(v.as_bytes())),
            version,
            &mut out,
        )
        .expect("write");
        st.version = version;
    }

    #[test]
    fn small_prune_steps_remove_exactly_the_garbage_and_keep_reads_at_the_floor() {
        let (mut st, meta, hist) = versioned_state();
        for i in 0..200 {
            put(&mut st, &meta, &hist, &format!("k{i:03}"), Some("a")); // v = i + 1
        }
        for i in 0..200 {
            let v = if i % 2 == 0 { None } else { Some("b") };
            put(&mut st, &meta, &hist, &format!("k{i:03}"), v); // v = 201 + i
        }
        let floor = 300;
        let before: Vec<Option<Vec<u8>>> = (0..200)
            .map(|i| {
                let k = format!("k{i:03}");
                let slot = st.slot(7, k.as_bytes()).expect("read").expect("slot");
                resolve(&st, &meta, k.as_bytes(), slot, floor)
                    .expect("resolve")
                    .map(<[u8]>::to_vec)
            })
            .collect();
        st.raise_floor(floor);
        let mut steps = 0;
        while prune_step(&mut st, 16) {
            steps += 1;
            assert!(steps < 10_000, "sweep does not terminate");
        }
        assert!(steps > 10, "a budget of 16 needs many steps, took {steps}");
        assert!(st.prune.is_none());
        // Rows with versions <= 300 are gone: the 200 creation rows and rows 201..=300.
        assert_eq!(st.tree(HISTORY_TAG).len(), 100);
        // Tombstones written at versions <= 300 (even keys below k100) are gone.
        let tombstones = st
            .tree(7)
            .iter()
            .filter(|(_, s)| !s.value.is_some())
            .count();
        assert_eq!(tombstones, 50);
        for (i, want) in before.iter().enumerate() {
            let k = format!("k{i:03}");
            let got = match st.slot(7, k.as_bytes()).expect("read") {
                Some(slot) => resolve(&st, &meta, k.as_bytes(), slot, floor)
                    .expect("resolve")
                    .map(<[u8]>::to_vec),
                None => None,
            };
            assert_eq!(&got, want, "{k} at the floor");
        }
    }

    #[test]
    fn raising_the_floor_during_a_sweep_reruns_it_from_the_start() {
        let (mut st, meta, hist) = versioned_state();
        for i in 0..50 {
            put(&mut st, &meta, &hist, &format!("k{i:02}"), Some("a"));
        }
        st.raise_floor(10);
        assert!(prune_step(&mut st, 8));
        // Rows of early keys were passed with floor 10; raise to 50 mid-sweep.
        st.raise_floor(50);
        while prune_step(&mut st, 8) {}
        assert_eq!(st.tree(HISTORY_TAG).len(), 0);
    }
}
