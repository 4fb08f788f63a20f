//! Ordered range scans with prefix, exclusive `start_after`, `limit` and delimiter roll-up.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::Arc;

use crate::art::{ListItem, ListRef, Summary, Verdict};
use crate::error::Result;
use crate::mvcc::{self, HISTORY_TAG};
use crate::registry::TreeMeta;
use crate::state::State;

/// What to scan.
///
/// Keys with `key.starts_with(prefix)` are visited in byte order. With `delimiter = Some(d)`, a
/// key whose remainder after `prefix` contains `d` at position `i` rolls up into one
/// [`Entry::CommonPrefix`] holding `key[..prefix.len() + i + 1]`; the scan then seeks past every
/// key under that common prefix instead of walking them. An entry (key or common prefix) is
/// emitted only if its bytes compare greater than `start_after`, so a continuation whose
/// `start_after` is a previously returned common prefix skips that whole group. `limit` caps the
/// number of emitted entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RangeSpec {
    /// Only keys starting with these bytes (empty = all keys).
    pub prefix: Vec<u8>,
    /// Exclusive lower bound on emitted entries (a continuation token).
    pub start_after: Option<Vec<u8>>,
    /// Optional one-byte delimiter for common-prefix roll-up (e.g. `b'/'`).
    pub delimiter: Option<u8>,
    /// Maximum number of entries to emit.
    pub limit: Option<usize>,
}

impl RangeSpec {
    /// Every key of the tree.
    pub fn all() -> Self {
        RangeSpec::default()
    }

    /// Every key starting with `prefix`.
    pub fn with_prefix(prefix: impl Into<Vec<u8>>) -> Self {
        RangeSpec {
            prefix: prefix.into(),
            ..RangeSpec::default()
        }
    }

    /// Sets the exclusive `start_after` bound.
    pub fn start_after(mut self, after: impl Into<Vec<u8>>) -> Self {
        self.start_after = Some(after.into());
        self
    }

    /// Sets the roll-up delimiter.
    pub fn delimiter(mut self, d: u8) -> Self {
        self.delimiter = Some(d);
        self
    }

    /// Sets the entry limit.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }
}

/// One item of a range scan.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Entry {
    /// A key and its value at the scan's read version.
    Key {
        /// Full key bytes.
        key: Vec<u8>,
        /// Value bytes.
        value: Vec<u8>,
    },
    /// A rolled-up group: every visible key starting with these bytes (which end with the
    /// delimiter) is summarised by this one entry.
    CommonPrefix(Vec<u8>),
}

/// One item of a callback range scan ([`Tree::for_each_in_range`](crate::Tree::for_each_in_range),
/// [`View::for_each_in_range`](crate::View::for_each_in_range)): the same items as [`Entry`], but
/// borrowed from the pinned snapshot (or the scan's own buffer) for the duration of the
/// callback, so the scan allocates nothing per item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryRef<'a> {
    /// A key and its value at the scan's read version.
    Key {
        /// Full key bytes.
        key: &'a [u8],
        /// Value bytes.
        value: &'a [u8],
    },
    /// A rolled-up group (see [`Entry::CommonPrefix`]).
    CommonPrefix(&'a [u8]),
}

impl EntryRef<'_> {
    /// An owned copy ([`Entry`]).
    pub fn to_entry(&self) -> Entry {
        match *self {
            EntryRef::Key { key, value } => Entry::Key {
                key: key.to_vec(),
                value: value.to_vec(),
            },
            EntryRef::CommonPrefix(p) => Entry::CommonPrefix(p.to_vec()),
        }
    }
}

/// Most entries produced per ART listing pass; the next pass re-seeks (O(depth)) after the last
/// item of the previous one.
const CHUNK: usize = 1024;

/// Iterator over a range scan; yields `Result<Entry>`. It owns a pinned snapshot (an
/// `Arc<State>`), so it is unaffected by later commits. After yielding an error it ends.
///
/// The scan runs on the tree's adaptive radix tree (ART): a delimiter group is rolled up by
/// descending to its subtree and moving on to the next sibling, never by walking its keys.
/// Entries are produced in passes of up to 1,024 (each pass borrows the pinned snapshot and copies its entries out). In versioned trees every
/// ART node's summary (live/dead slot counts, largest commit version) lets the scan skip in O(1)
/// each subtree holding only tombstones not newer than the read version, and decide whether a
/// group has a visible key at the read version without walking the group (at the latest version
/// one summary check at the group's root; at an older version only the nodes holding changes
/// newer than the read version are opened).
pub struct RangeIter {
    state: Arc<State>,
    meta: Option<Arc<TreeMeta>>,
    read_version: u64,
    spec: RangeSpec,
    /// Exclusive continuation point of the next pass: the caller's `start_after` at first, then
    /// the last item (key or common prefix) the previous pass examined.
    cursor: Option<Vec<u8>>,
    buf: VecDeque<Result<Entry>>,
    /// The ART listing has nothing after `cursor`.
    exhausted: bool,
    emitted: usize,
    done: bool,
}

impl std::fmt::Debug for RangeIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeIter")
            .field("read_version", &self.read_version)
            .field("spec", &self.spec)
            .field("emitted", &self.emitted)
            .finish()
    }
}

/// How a tree's slots become invisible to a scan, which decides the subtree filter and the
/// group-visibility test.
#[derive(Clone, Copy)]
enum Visibility {
    /// Every slot is visible (unversioned trees; the history tree while the floor is 0).
    All,
    /// A versioned tree read at this version: tombstones and slots changed later need MVCC.
    AtVersion(u64),
    /// The history tree: rows at or below this floor are pruned (possibly not yet physically
    /// removed by the incremental sweep) and never shown.
    AboveFloor(u64),
}

/// Whether some key of history-tree group `cp` is above `floor`.
fn history_group_visible(state: &State, cp: &[u8], floor: u64) -> Result<bool> {
    let classify = |s: &Summary| {
        if s.max_stamp <= floor {
            Verdict::Skip
        } else {
            Verdict::Open
        }
    };
    state
        .tree(HISTORY_TAG)
        .any_in_prefix(cp, &classify, &mut |_, slot| Ok(slot.version > floor))
}

/// Whether some key starting with `cp` in versioned tree `meta` is visible at `read_version`.
fn group_visible(state: &State, meta: &TreeMeta, cp: &[u8], read_version: u64) -> Result<bool> {
    // A subtree whose newest change is at or below the read version shows exactly its live
    // slots; anything newer has to be resolved through the history tree.
    let classify = |s: &Summary| {
        if s.max_stamp > read_version {
            Verdict::Open
        } else if s.live > 0 {
            Verdict::Hit
        } else {
            Verdict::Skip
        }
    };
    state
        .tree(meta.tag)
        .any_in_prefix(cp, &classify, &mut |key, slot| {
            Ok(mvcc::resolve(state, meta, key, slot, read_version)?.is_some())
        })
}

/// How slots of `meta`'s tree become invisible to a scan at `read_version` on `state`.
fn visibility_of(state: &State, meta: &TreeMeta, read_version: u64) -> Visibility {
    if meta.versioned {
        Visibility::AtVersion(read_version)
    } else if meta.tag == HISTORY_TAG && state.floor > 0 {
        Visibility::AboveFloor(state.floor)
    } else {
        // Unversioned trees hold no tombstones and read their latest state at every version.
        Visibility::All
    }
}

/// The subtree filter for `vis`: true when no slot of a subtree with that summary is visible.
fn skips(vis: Visibility, s: &Summary) -> bool {
    match vis {
        Visibility::All => false,
        Visibility::AtVersion(v) => s.live == 0 && s.max_stamp <= v,
        Visibility::AboveFloor(floor) => s.max_stamp <= floor,
    }
}

/// Whether rolled-up group `cp` has a key visible under `vis`.
fn group_is_visible(state: &State, meta: &TreeMeta, cp: &[u8], vis: Visibility) -> Result<bool> {
    match vis {
        Visibility::All => Ok(true),
        Visibility::AtVersion(v) => group_visible(state, meta, cp, v),
        Visibility::AboveFloor(floor) => history_group_visible(state, cp, floor),
    }
}

/// The callback scan behind `Tree::for_each_in_range` / `View::for_each_in_range`: one pass over
/// the ART of `meta`'s tree in `state` at `read_version`, calling `f` for each entry `spec`
/// selects (up to `spec.limit`) until `f` returns `ControlFlow::Break`. Nothing is allocated per
/// entry. Errors: `Corrupt` if a needed MVCC history row is missing.
pub(crate) fn for_each(
    state: &State,
    meta: &TreeMeta,
    read_version: u64,
    spec: &RangeSpec,
    f: &mut dyn FnMut(EntryRef<'_>) -> ControlFlow<()>,
) -> Result<()> {
    let limit = spec.limit.unwrap_or(usize::MAX);
    if limit == 0 {
        return Ok(());
    }
    let tree = state.tree(meta.tag);
    let vis = visibility_of(state, meta, read_version);
    let skip = move |s: &Summary| skips(vis, s);
    let mut items = match vis {
        Visibility::All => {
            tree.list_iter(&spec.prefix, spec.start_after.as_deref(), spec.delimiter)
        }
        _ => tree.list_iter_filtered(
            &spec.prefix,
            spec.start_after.as_deref(),
            spec.delimiter,
            &skip,
        ),
    };
    let mut emitted = 0usize;
    while let Some(item) = items.next_ref() {
        let flow = match item {
            ListRef::Key(key, slot) => match mvcc::resolve(state, meta, key, slot, read_version)? {
                Some(value) => f(EntryRef::Key { key, value }),
                None => continue,
            },
            ListRef::CommonPrefix(cp) => {
                if !group_is_visible(state, meta, cp, vis)? {
                    continue;
                }
                f(EntryRef::CommonPrefix(cp))
            }
        };
        emitted += 1;
        if flow.is_break() || emitted >= limit {
            break;
        }
    }
    Ok(())
}

impl RangeIter {
    pub(crate) fn new(
        state: Arc<State>,
        meta: Option<Arc<TreeMeta>>,
        read_version: u64,
        spec: RangeSpec,
    ) -> Self {
        RangeIter {
            state,
            done: meta.is_none(),
            meta,
            read_version,
            cursor: spec.start_after.clone(),
            spec,
            buf: VecDeque::new(),
            exhausted: false,
            emitted: 0,
        }
    }

    /// Runs one listing pass, buffering up to `want` entries.
    fn refill(&mut self, want: usize) {
        let Some(meta) = self.meta.clone() else {
            self.exhausted = true;
            return;
        };
        let state = Arc::clone(&self.state);
        let tree = state.tree(meta.tag);
        let v = self.read_version;
        let vis = visibility_of(&state, &meta, v);
        let skip = move |s: &Summary| skips(vis, s);
        let mut items = match vis {
            Visibility::All => tree.list_iter(
                &self.spec.prefix,
                self.cursor.as_deref(),
                self.spec.delimiter,
            ),
            _ => tree.list_iter_filtered(
                &self.spec.prefix,
                self.cursor.as_deref(),
                self.spec.delimiter,
                &skip,
            ),
        };
        // The last item examined (the next pass's exclusive start), kept in one reused buffer.
        self.buf.reserve(want.min(CHUNK));
        let had_cursor = self.cursor.is_some();
        let mut last = self.cursor.take().unwrap_or_default();
        let mut any = false;
        let mut produced = 0usize;
        while produced < want {
            let Some(item) = items.next() else {
                self.exhausted = true;
                break;
            };
            let entry = match item {
                ListItem::Key(key, slot) => {
                    last.clear();
                    last.extend_from_slice(key);
                    any = true;
                    match mvcc::resolve(&state, &meta, key, slot, v) {
                        Ok(Some(value)) => Ok(Entry::Key {
                            key: key.to_vec(),
                            value: value.to_vec(),
                        }),
                        Ok(None) => continue,
                        Err(e) => Err(e),
                    }
                }
                ListItem::CommonPrefix(cp) => {
                    let visible = group_is_visible(&state, &meta, &cp, vis);
                    last.clear();
                    last.extend_from_slice(&cp);
                    any = true;
                    match visible {
                        Ok(true) => Ok(Entry::CommonPrefix(cp)),
                        Ok(false) => continue,
                        Err(e) => Err(e),
                    }
                }
            };
            let failed = entry.is_err();
            self.buf.push_back(entry);
            produced += 1;
            if failed {
                self.exhausted = true;
                break;
            }
        }
        drop(items);
        if any || had_cursor {
            self.cursor = Some(last);
        }
    }

    fn step(&mut self) -> Option<Result<Entry>> {
        let remaining = self
            .spec
            .limit
            .map_or(usize::MAX, |l| l - self.emitted.min(l));
        if remaining == 0 {
            return None;
        }
        if self.buf.is_empty() && !self.exhausted {
            self.refill(remaining.min(CHUNK));
        }
        let entry = self.buf.pop_front()?;
        self.emitted += 1;
        Some(entry)
    }
}

impl Iterator for RangeIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Some(Ok(e)) => Some(Ok(e)),
            None => {
                self.done = true;
                None
            }
            Some(Err(e)) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
