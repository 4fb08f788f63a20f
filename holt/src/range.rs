//! Ordered range scans with prefix, exclusive `start_after`, `limit` and delimiter roll-up.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::Arc;

use crate::art::{Summary, Verdict};
use crate::error::Result;
use crate::layers::{Head, Item, Layer, Merged, SkipAll};
use crate::mvcc;
use crate::registry::{TreeMeta, HISTORY_TAG};
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

/// Most entries produced per listing pass; the next pass re-seeks (O(depth) per layer) after
/// the last item of the previous one.
const CHUNK: usize = 1024;

/// Iterator over a range scan; yields `Result<Entry>`. It owns a pinned snapshot (an
/// `Arc<State>`), so it is unaffected by later commits. After yielding an error it ends.
///
/// The scan runs on the tree's layers (in-memory delta, images; see `crate::layers`): a
/// delimiter group is rolled up by reaching its subtree and moving on to the next sibling,
/// never by walking its keys. Entries are produced in passes of up to 1,024 (each pass borrows
/// the pinned snapshot and copies its entries out). With one layer, every subtree summary
/// (live/dead slot counts, largest commit version) lets the scan skip in O(1) each subtree
/// holding only slots invisible at the read version, and decide whether a group has a visible
/// key without walking the group.
pub struct RangeIter {
    state: Arc<State>,
    meta: Option<Arc<TreeMeta>>,
    read_version: u64,
    spec: RangeSpec,
    /// Exclusive continuation point of the next pass: the caller's `start_after` at first, then
    /// the last item (key or common prefix) the previous pass examined.
    cursor: Option<Vec<u8>>,
    buf: VecDeque<Result<Entry>>,
    /// The listing has nothing after `cursor`.
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

/// Which slots of a tree a scan shows, which decides the subtree filter and the group test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Visibility {
    /// Every slot is visible (a layer of an unversioned tree without tombstones).
    All,
    /// Live slots are visible (unversioned trees: tombstones only hide older layers' slots).
    Live,
    /// A versioned tree read at this version: tombstones and slots changed later need MVCC.
    AtVersion(u64),
    /// The history tree: rows at or below this floor are pruned (possibly not yet physically
    /// removed) and never shown.
    AboveFloor(u64),
}

/// How slots of `meta`'s tree become invisible to a scan at `read_version` on `state`.
fn visibility_of(state: &State, meta: &TreeMeta, read_version: u64) -> Visibility {
    if meta.versioned {
        Visibility::AtVersion(read_version)
    } else if meta.tag == HISTORY_TAG && state.floor > 0 {
        Visibility::AboveFloor(state.floor)
    } else {
        Visibility::Live
    }
}

/// `vis` specialised to one layer: a layer without tombstones shows every live slot.
fn for_layer(vis: Visibility, layer: &Layer<'_>) -> Visibility {
    if vis == Visibility::Live && layer.summary().dead == 0 {
        Visibility::All
    } else {
        vis
    }
}

/// The subtree filter for `vis`: true when no slot of a subtree with that summary is visible.
fn skips(vis: Visibility, s: &Summary) -> bool {
    match vis {
        Visibility::All => false,
        Visibility::Live => s.live == 0,
        Visibility::AtVersion(v) => s.live == 0 && s.max_stamp <= v,
        Visibility::AboveFloor(floor) => s.max_stamp <= floor,
    }
}

/// How a group test judges a subtree from its summary under `vis`.
fn classify(vis: Visibility, s: &Summary) -> Verdict {
    match vis {
        Visibility::All => Verdict::Hit,
        Visibility::Live if s.live > 0 => Verdict::Hit,
        Visibility::Live => Verdict::Skip,
        // A subtree whose newest change is at or below the read version shows exactly its live
        // slots; anything newer has to be resolved through the history tree.
        Visibility::AtVersion(v) if s.max_stamp > v => Verdict::Open,
        Visibility::AtVersion(_) if s.live > 0 => Verdict::Hit,
        Visibility::AtVersion(_) => Verdict::Skip,
        Visibility::AboveFloor(floor) if s.max_stamp <= floor => Verdict::Skip,
        Visibility::AboveFloor(_) => Verdict::Open,
    }
}

/// Whether group `cp` has a key visible at `read_version`, judged on the given layers (newest
/// first) of which those in `mask` have keys under `cp`. A candidate of a layer counts only if
/// no newer layer in `mask` holds the same key (a newer slot, tombstone or not, hides it).
/// Cost: with one layer, the summaries decide at the group's root unless history is needed;
/// otherwise candidates are examined in key order until one is visible, so the work is bounded
/// by the keys the newer layers hide.
fn group_visible(
    state: &State,
    meta: &TreeMeta,
    layers: &[Layer<'_>],
    mask: u64,
    cp: &[u8],
    vis: Visibility,
    read_version: u64,
) -> Result<bool> {
    for (i, layer) in layers.iter().enumerate() {
        if mask >> i & 1 == 0 {
            continue;
        }
        let lvis = for_layer(vis, layer);
        let newer: Vec<&Layer<'_>> = layers
            .iter()
            .take(i)
            .enumerate()
            .filter(|(j, _)| mask >> j & 1 == 1)
            .map(|(_, l)| l)
            .collect();
        if newer.is_empty() && lvis == Visibility::All {
            return Ok(true);
        }
        let judge = |s: &Summary| match classify(lvis, s) {
            Verdict::Hit if !newer.is_empty() => Verdict::Open,
            v => v,
        };
        let found = layer.any_in_prefix(cp, &judge, &mut |key, slot| {
            for n in &newer {
                if n.get(key)?.is_some() {
                    return Ok(false);
                }
            }
            Ok(mvcc::visible(state, meta, key, slot, read_version)?.is_some())
        })?;
        if found {
            return Ok(true);
        }
    }
    Ok(false)
}

/// One step of [`scan`]: an entry to show, or the bytes of an item examined but not shown (a
/// key invisible at the read version, a group without a visible key).
pub(crate) enum Step<'a> {
    Visible(EntryRef<'a>),
    Hidden(&'a [u8]),
}

/// The scan behind every range read: the items of `meta`'s tree in `state` at `read_version`
/// with keys starting with `prefix`, after `start_after`, rolled up at `delimiter`, passed to
/// `f` in order until the listing ends or `f` returns `ControlFlow::Break`. Nothing is
/// allocated per item. One layer is scanned directly (with a summary filter when that can skip
/// anything); several are merged (see `crate::layers::Merged`).
/// Errors: `Corrupt` if a needed MVCC history row is missing or an image block is bad (items
/// before it were already passed to `f`).
pub(crate) fn scan(
    state: &State,
    meta: &TreeMeta,
    read_version: u64,
    prefix: &[u8],
    start_after: Option<&[u8]>,
    delimiter: Option<u8>,
    f: &mut dyn FnMut(Step<'_>) -> ControlFlow<()>,
) -> Result<()> {
    let layers = state.layers(meta.tag);
    let vis = visibility_of(state, meta, read_version);
    match layers.as_slice() {
        [] => Ok(()),
        [layer] => {
            let lvis = for_layer(vis, layer);
            let filter = match lvis {
                Visibility::All => false,
                Visibility::Live | Visibility::AtVersion(_) => layer.summary().dead > 0,
                Visibility::AboveFloor(_) => true,
            };
            let skip = move |s: &Summary| skips(lvis, s);
            let skip: Option<&SkipAll<'_>> = if filter { Some(&skip) } else { None };
            let mut cur = layer.list(prefix, start_after, delimiter, skip)?;
            cur.advance()?;
            while let Some(item) = cur.current() {
                let flow = match item {
                    Item::Key(key, slot) => {
                        match mvcc::visible(state, meta, key, slot, read_version)? {
                            Some(value) => f(Step::Visible(EntryRef::Key { key, value })),
                            None => f(Step::Hidden(key)),
                        }
                    }
                    Item::Group(cp) => {
                        if group_visible(state, meta, &layers, 1, cp, vis, read_version)? {
                            f(Step::Visible(EntryRef::CommonPrefix(cp)))
                        } else {
                            f(Step::Hidden(cp))
                        }
                    }
                };
                if flow.is_break() {
                    break;
                }
                cur.advance()?;
            }
            Ok(())
        }
        _ => {
            let cursors = layers
                .iter()
                .map(|l| l.list(prefix, start_after, delimiter, None))
                .collect::<Result<Vec<_>>>()?;
            let mut merged = Merged::new(cursors)?;
            while let Some(head) = merged.head() {
                let flow = match head {
                    Head::Key { key, slot, .. } => {
                        match mvcc::visible(state, meta, key, slot, read_version)? {
                            Some(value) => f(Step::Visible(EntryRef::Key { key, value })),
                            None => f(Step::Hidden(key)),
                        }
                    }
                    Head::Group {
                        prefix: cp,
                        layers: mask,
                    } => {
                        if group_visible(state, meta, &layers, mask, cp, vis, read_version)? {
                            f(Step::Visible(EntryRef::CommonPrefix(cp)))
                        } else {
                            f(Step::Hidden(cp))
                        }
                    }
                };
                if flow.is_break() {
                    break;
                }
                merged.advance()?;
            }
            Ok(())
        }
    }
}

/// The callback scan behind `Tree::for_each_in_range` / `View::for_each_in_range`: calls `f`
/// for each entry `spec` selects (up to `spec.limit`) until `f` returns
/// `ControlFlow::Break`. Errors: as [`scan`].
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
    let mut emitted = 0usize;
    scan(
        state,
        meta,
        read_version,
        &spec.prefix,
        spec.start_after.as_deref(),
        spec.delimiter,
        &mut |step| match step {
            Step::Hidden(_) => ControlFlow::Continue(()),
            Step::Visible(e) => {
                emitted += 1;
                if f(e).is_break() || emitted >= limit {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            }
        },
    )
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
        self.buf.reserve(want.min(CHUNK));
        let had_cursor = self.cursor.is_some();
        let from = self.cursor.take();
        // The last item examined (the next pass's exclusive start).
        let mut last = Vec::new();
        let mut any = false;
        let mut produced = 0usize;
        let mut stopped = false;
        let buf = &mut self.buf;
        let res = scan(
            &state,
            &meta,
            self.read_version,
            &self.spec.prefix,
            from.as_deref(),
            self.spec.delimiter,
            &mut |step| {
                let bytes = match step {
                    Step::Hidden(b) => b,
                    Step::Visible(e) => {
                        buf.push_back(Ok(e.to_entry()));
                        produced += 1;
                        match e {
                            EntryRef::Key { key, .. } => key,
                            EntryRef::CommonPrefix(p) => p,
                        }
                    }
                };
                last.clear();
                last.extend_from_slice(bytes);
                any = true;
                if produced >= want {
                    stopped = true;
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
        );
        if let Err(e) = res {
            self.buf.push_back(Err(e));
            self.exhausted = true;
            return;
        }
        if !stopped {
            self.exhausted = true;
        }
        if any {
            self.cursor = Some(last);
        } else if had_cursor {
            self.cursor = from;
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
