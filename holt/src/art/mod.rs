//! Persistent adaptive radix tree (ART): holt's in-memory ordered index.
//!
//! An [`Art<V>`] maps byte keys (any bytes, length 0..=64 KiB and beyond, including the empty key
//! and keys that are prefixes of other keys) to values, in byte order. It follows Leis, Kemper and
//! Neumann, "The Adaptive Radix Tree: ARTful Indexing for Main-Memory Databases" (ICDE 2013):
//!
//! - **Adaptive nodes.** Inner nodes come in four sizes: Node4 and Node16 (sorted edge-byte
//!   arrays), Node48 (256-entry byte index into 48 slots) and Node256 (direct array). A node grows
//!   to the next size when a child is added to a full node (5th, 17th, 49th child) and shrinks with
//!   hysteresis so alternating insert/remove at a boundary does not thrash: Node16 becomes Node4
//!   at ≤ 3 children, Node48 becomes Node16 at ≤ 12, Node256 becomes Node48 at ≤ 37.
//! - **Path compression (pessimistic).** Every inner node stores its full compressed prefix; a
//!   lookup compares it and never needs to revisit a leaf to verify skipped bytes.
//! - **Lazy expansion.** A leaf stores its full key; a single key below a branch point is one leaf,
//!   never a chain of one-child nodes. An inner node always has at least two entries.
//! - **Keys that are prefixes of other keys.** Each inner node has an optional *terminal* slot for
//!   the key that ends exactly after its prefix, so no terminator byte is reserved and any byte
//!   (0x00 and 0xff included) can appear in keys.
//!
//! **Persistence.** Nodes are shared through `Arc`. [`Art::clone`] is O(1) and the clone is an
//! immutable snapshot: later writes to either tree path-copy only the nodes on the root-to-leaf
//! path (`Arc::make_mut`), while nodes not shared with any snapshot are updated in place. This is
//! how holt pins a consistent read view (MVCC read version) while the writer applies the next
//! group commit.
//!
//! **Listing.** [`Art::list`] / [`Art::list_iter`] implement delimiter listing: with a delimiter,
//! all keys of one group roll up into a single [`ListItem::CommonPrefix`] and the iterator skips
//! the whole subtree, so the cost is proportional to the items emitted times the tree depth, not
//! to the keys underneath.
//!
//! **Summaries.** Values implement [`Summarize`] (live or tombstone, and a stamp — holt's commit
//! version). Every inner node keeps a [`Summary`] of its subtree: exact counts of live and dead
//! leaves, maintained by deltas along the written key's path (inserts add optimistically on the
//! way down and correct in a second in-place descent when the key existed), and an upper bound of
//! the stamps (raised on insert, never lowered on removal). [`Art::list_iter_filtered`] and
//! [`Art::range_from_filtered`] skip any subtree a predicate on its summary rules out, in O(1);
//! [`Art::any_in_prefix`] answers "is anything under this prefix wanted?" by opening only the
//! subtrees a summary cannot settle. [`Art::last_below`] is a predecessor search (greatest key
//! below a bound), used to find MVCC history rows.
//!
//! The implementation has no `unsafe` code, and no operation recurses on tree depth (insert,
//! remove, iteration, statistics and drop are all iterative), so even pathological chains of
//! nested keys cannot overflow the stack.

mod child;
mod iter;
mod node;
mod node256;
mod node48;
mod node4_16;

#[cfg(test)]
mod tests;

use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use child::{dispatch, Child};
use iter::Filter;
pub(crate) use iter::SkipFn;
pub use iter::{Iter, ListItem, ListIter, ListRef};
use node::{common_prefix_len, convert, Header, InnerNode, Leaf};
pub use node::{Summarize, Summary};
use node256::Node256;
use node48::Node48;
use node4_16::{Node16, Node4};

/// Node16 shrinks to Node4 when it has at most this many children after a removal.
pub const SHRINK_16_TO_4: usize = 3;
/// Node48 shrinks to Node16 when it has at most this many children after a removal.
pub const SHRINK_48_TO_16: usize = 12;
/// Node256 shrinks to Node48 when it has at most this many children after a removal.
pub const SHRINK_256_TO_48: usize = 37;

/// Persistent ordered map from byte keys to values (see the [module docs](self)).
///
/// Reads take `&self`; writes take `&mut self` and copy on write any node shared with a snapshot.
/// `Art<V>` is `Send + Sync` when `V` is, so snapshots can be read from other threads.
pub struct Art<V> {
    root: Option<Child<V>>,
    len: usize,
}

/// Node counts of one tree, for tests and memory benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Inner nodes of kind Node4.
    pub node4: usize,
    /// Inner nodes of kind Node16.
    pub node16: usize,
    /// Inner nodes of kind Node48.
    pub node48: usize,
    /// Inner nodes of kind Node256.
    pub node256: usize,
    /// Leaves, counting terminal leaves; always equals [`Art::len`].
    pub leaves: usize,
    /// Terminal leaves only (keys that end exactly at an inner node).
    pub terminals: usize,
    /// Longest root-to-leaf path, counted in nodes (a lone leaf root has depth 1).
    pub max_depth: usize,
}

impl<V> Default for Art<V> {
    fn default() -> Self {
        Art { root: None, len: 0 }
    }
}

impl<V> Clone for Art<V> {
    /// O(1): shares the root. The clone is a snapshot unaffected by later writes to either tree.
    fn clone(&self) -> Self {
        Art {
            root: self.root.clone(),
            len: self.len,
        }
    }
}

impl<V> Drop for Art<V> {
    /// Iterative teardown: uniquely owned nodes are opened and their children queued, so dropping
    /// a very deep tree never recurses; nodes shared with a snapshot are only released.
    fn drop(&mut self) {
        let mut stack = Vec::new();
        if let Some(root) = self.root.take() {
            stack.push(root);
        }
        while let Some(child) = stack.pop() {
            child.release_into(&mut stack);
        }
    }
}

impl<V: fmt::Debug> fmt::Debug for Art<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V> Art<V> {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no key is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value stored under `key`, or `None`. Cost: one node per branch point on the key's
    /// path plus one prefix comparison per node.
    pub fn get(&self, key: &[u8]) -> Option<&V> {
        let mut node = self.root.as_ref()?;
        let mut depth = 0usize;
        loop {
            dispatch!(node, n => {
                let header = n.header();
                let rest = key.get(depth..)?;
                let prefix = header.prefix.as_slice();
                if !rest.starts_with(prefix) {
                    return None;
                }
                depth += prefix.len();
                match key.get(depth) {
                    None => return header.terminal.as_ref().map(|l| &l.value),
                    Some(&b) => {
                        node = n.find(b)?;
                        depth += 1;
                    }
                }
            }, l => {
                // Every byte before `depth` was matched on the way down (pessimistic path
                // compression), so only the rest of the key needs comparing.
                let lk = l.key.as_slice();
                let same = lk.len() == key.len() && lk.get(depth..) == key.get(depth..);
                return same.then_some(&l.value);
            })
        }
    }

    /// True when `key` is stored.
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// All entries in byte order of their keys, as `(key, value)`.
    pub fn iter(&self) -> Iter<'_, V> {
        Iter::from_root(self.root.as_ref(), None)
    }

    /// Entries whose key is `>= start` (`Included`), `> start` (`Excluded`) or all (`Unbounded`),
    /// in byte order. Seeks in O(depth) rather than scanning the smaller keys.
    pub fn range_from(&self, start: Bound<&[u8]>) -> Iter<'_, V> {
        Iter::seek(self.root.as_ref(), start, None)
    }

    /// Entries whose key starts with `prefix`, in byte order. Descends to the subtree covering
    /// `prefix` in O(depth) and iterates only that subtree.
    pub fn prefix_iter(&self, prefix: &[u8]) -> Iter<'_, V> {
        Iter::prefix(self.root.as_ref(), prefix)
    }

    /// Lazy delimiter listing (S3 `ListObjectsV2` shape): keys starting with `prefix` in byte
    /// order. With `delimiter = Some(d)`, every key whose remainder after `prefix` contains `d`
    /// rolls up into one [`ListItem::CommonPrefix`] holding `key[..prefix.len() + i + 1]` (`i`
    /// the first `d` in the remainder), and the whole group is skipped without visiting its keys.
    /// An item (key or common prefix) is yielded only if its bytes compare greater than
    /// `start_after`, so passing the last item of a previous page continues after it (a
    /// continuation from a common prefix skips that group).
    pub fn list_iter(
        &self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        delimiter: Option<u8>,
    ) -> ListIter<'_, V> {
        ListIter::new(self.root.as_ref(), prefix, start_after, delimiter, None)
    }

    /// Eager form of [`Art::list_iter`]: at most `limit` items (keys and common prefixes both
    /// count). `limit == 0` returns nothing.
    pub fn list(
        &self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        delimiter: Option<u8>,
        limit: usize,
    ) -> Vec<ListItem<'_, V>> {
        self.list_iter(prefix, start_after, delimiter)
            .take(limit)
            .collect()
    }

    /// Counts of each node kind (walks the whole tree, O(n)).
    pub fn node_stats(&self) -> NodeStats {
        let mut stats = NodeStats::default();
        let mut stack: Vec<(&Child<V>, usize)> = Vec::new();
        if let Some(root) = &self.root {
            stack.push((root, 1));
        }
        while let Some((node, depth)) = stack.pop() {
            stats.max_depth = stats.max_depth.max(depth);
            match node {
                Child::Leaf(_) => stats.leaves += 1,
                Child::N4(_) => stats.node4 += 1,
                Child::N16(_) => stats.node16 += 1,
                Child::N48(_) => stats.node48 += 1,
                Child::N256(_) => stats.node256 += 1,
            }
            if let Some(h) = node.header() {
                if h.terminal.is_some() {
                    stats.leaves += 1;
                    stats.terminals += 1;
                }
                let mut from = 0u16;
                while let Some((b, c)) = node.next_from(from) {
                    stack.push((c, depth + 1));
                    from = u16::from(b) + 1;
                }
            }
        }
        stats
    }

    /// Approximate heap bytes owned by this tree: node structs, `Arc` headers (two counters
    /// each), leaves with their values' inline size, and out-of-line key/prefix bytes. Heap memory
    /// owned *by values* (e.g. a `Vec` inside `V`) and allocator overhead are not counted. Nodes
    /// shared with snapshots are counted in full by every tree that reaches them.
    pub fn heap_bytes(&self) -> usize {
        const ARC_COUNTERS: usize = 2 * std::mem::size_of::<usize>();
        fn leaf_bytes<V>(l: &Leaf<V>) -> usize {
            ARC_COUNTERS + std::mem::size_of::<Leaf<V>>() + l.key.heap_bytes()
        }
        let mut total = 0usize;
        let mut stack: Vec<&Child<V>> = Vec::new();
        if let Some(root) = &self.root {
            stack.push(root);
        }
        while let Some(node) = stack.pop() {
            dispatch!(node, n => {
                let h = n.header();
                total += ARC_COUNTERS + n.self_bytes() + h.prefix.heap_bytes();
                if let Some(t) = &h.terminal {
                    total += leaf_bytes(t);
                }
                let mut from = 0u16;
                while let Some((b, c)) = n.next_from(from) {
                    stack.push(c);
                    from = u16::from(b) + 1;
                }
            }, l => {
                total += leaf_bytes(l);
            })
        }
        total
    }
}

impl<V: Summarize> Art<V> {
    /// Like [`Art::list_iter`], but subtrees (and leaves) whose [`Summary`] makes `skip` return
    /// true are never entered: they produce neither keys nor common prefixes. Because the
    /// summaries are kept per inner node, a subtree of any size is skipped in O(1).
    pub(crate) fn list_iter_filtered<'a>(
        &'a self,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        delimiter: Option<u8>,
        skip: &'a SkipFn<'a>,
    ) -> ListIter<'a, V> {
        ListIter::new(
            self.root.as_ref(),
            prefix,
            start_after,
            delimiter,
            Some(Filter::new(skip)),
        )
    }

    /// Like [`Art::range_from`], skipping subtrees and leaves for which `skip` returns true.
    pub(crate) fn range_from_filtered<'a>(
        &'a self,
        start: Bound<&[u8]>,
        skip: &'a SkipFn<'a>,
    ) -> Iter<'a, V> {
        Iter::seek(self.root.as_ref(), start, Some(Filter::new(skip)))
    }

    /// Aggregate over the whole tree (live and dead slots, an upper bound of the stamps).
    pub(crate) fn summary(&self) -> Summary {
        self.root.as_ref().map(Child::summary).unwrap_or_default()
    }

    /// Whether some key starting with `prefix` is accepted. `classify` judges a subtree or leaf
    /// from its summary: [`Verdict::Skip`] (nothing in it is wanted), [`Verdict::Hit`]
    /// (something in it is wanted — stop) or [`Verdict::Open`] (look inside; for a leaf, ask
    /// `leaf`). Cost: the prefix descent plus the nodes `classify` opens.
    pub(crate) fn any_in_prefix<E>(
        &self,
        prefix: &[u8],
        classify: &dyn Fn(&Summary) -> Verdict,
        leaf: &mut LeafCheck<'_, V, E>,
    ) -> Result<bool, E> {
        let (found, _) = iter::prefix_root(self.root.as_ref(), prefix);
        let mut stack: Vec<&Child<V>> = found.map(|(n, _)| n).into_iter().collect();
        let mut check_leaf = |l: &Leaf<V>| -> Result<bool, E> {
            match classify(&l.value.summary()) {
                Verdict::Skip => Ok(false),
                Verdict::Hit => Ok(true),
                Verdict::Open => leaf(l.key.as_slice(), &l.value),
            }
        };
        while let Some(node) = stack.pop() {
            let Some(h) = node.header() else {
                if let Child::Leaf(l) = node {
                    if check_leaf(l)? {
                        return Ok(true);
                    }
                }
                continue;
            };
            match classify(&h.summary) {
                Verdict::Skip => continue,
                Verdict::Hit => return Ok(true),
                Verdict::Open => {}
            }
            if let Some(t) = &h.terminal {
                if check_leaf(t)? {
                    return Ok(true);
                }
            }
            let mut from = 0u16;
            while let Some((b, c)) = node.next_from(from) {
                stack.push(c);
                from = u16::from(b) + 1;
            }
        }
        Ok(false)
    }
}

/// The per-leaf question of [`Art::any_in_prefix`]: is this undecided entry wanted?
pub(crate) type LeafCheck<'a, V, E> = dyn FnMut(&[u8], &V) -> Result<bool, E> + 'a;

/// How [`Art::any_in_prefix`] treats a subtree or leaf, judged from its [`Summary`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing in it is wanted.
    Skip,
    /// Something in it is wanted.
    Hit,
    /// Undecided: look at its children (or, for a leaf, at the value).
    Open,
}

impl<V> Art<V> {
    /// The entry with the greatest key strictly below `bound` (predecessor search), in
    /// O(depth) node visits plus one descent to the rightmost leaf of a subtree.
    pub(crate) fn last_below(&self, bound: &[u8]) -> Option<(&[u8], &V)> {
        /// The best candidate so far: every key in it is below `bound`, and it is larger than
        /// any candidate found higher up the path.
        enum Best<'a, V> {
            None,
            Subtree(&'a Child<V>),
            Leaf(&'a Leaf<V>),
        }
        let mut best = Best::None;
        let mut node = self.root.as_ref()?;
        let mut depth = 0usize;
        loop {
            let Some(header) = node.header() else {
                if let Child::Leaf(l) = node {
                    if l.key.as_slice() < bound {
                        best = Best::Leaf(l);
                    }
                }
                break;
            };
            let prefix = header.prefix.as_slice();
            let rest = bound.get(depth..).unwrap_or_default();
            let m = common_prefix_len(prefix, rest);
            if m < prefix.len() {
                // Diverges inside the prefix: the subtree lies wholly below the bound only if its
                // next prefix byte is smaller (if the bound ran out, every key is longer: above).
                if m < rest.len() && prefix[m] < rest[m] {
                    best = Best::Subtree(node);
                }
                break;
            }
            let edge_depth = depth + prefix.len();
            // The bound ends exactly at this node: the terminal equals it, children exceed it.
            let Some(&b) = bound.get(edge_depth) else {
                break;
            };
            // Below the bound here: children with a smaller edge byte, else the terminal
            // (a proper prefix of the bound).
            if let Some((_, c)) = node.prev_before(u16::from(b)) {
                best = Best::Subtree(c);
            } else if let Some(t) = &header.terminal {
                best = Best::Leaf(t);
            }
            match node.find(b) {
                Some(child) => {
                    node = child;
                    depth = edge_depth + 1;
                }
                None => break,
            }
        }
        let mut node = match best {
            Best::None => return None,
            Best::Leaf(l) => return Some((l.key.as_slice(), &l.value)),
            Best::Subtree(c) => c,
        };
        // Rightmost leaf of the subtree: the last child, or the terminal of a childless node.
        loop {
            match node {
                Child::Leaf(l) => return Some((l.key.as_slice(), &l.value)),
                _ => match node.prev_before(256) {
                    Some((_, c)) => node = c,
                    None => {
                        let t = node.header()?.terminal.as_deref()?;
                        return Some((t.key.as_slice(), &t.value));
                    }
                },
            }
        }
    }
}

impl<V: Clone + Summarize> Art<V> {
    /// Stores `value` under `key`; returns the previous value if the key was present.
    ///
    /// Copy-on-write: nodes on the key's path that are shared with a snapshot are cloned, nodes
    /// owned by this tree alone are updated in place. Replacing the value of a leaf shared with a
    /// snapshot clones the previous value to return it. Every inner node on the path has its
    /// [`Summary`] updated: optimistically as for a new key on the way down, corrected by a
    /// second (in-place) descent when the key turns out to be present.
    pub fn insert(&mut self, key: &[u8], value: V) -> Option<V> {
        let added = value.summary();
        let mut slot: &mut Option<Child<V>> = &mut self.root;
        let mut depth = 0usize;
        let old = loop {
            let Some(node) = slot.as_ref() else {
                *slot = Some(Child::Leaf(Arc::new(Leaf::new(key, value))));
                break None;
            };
            match classify_insert(node, key, depth) {
                InsertStep::AtLeaf => break insert_at_leaf(slot, key, depth, value),
                InsertStep::SplitPrefix(m) => {
                    split_prefix(slot, key, depth, m, value);
                    break None;
                }
                InsertStep::Terminal => {
                    add_summary(slot, added);
                    break set_terminal(slot, key, value);
                }
                InsertStep::AddChild(b) => {
                    add_summary(slot, added);
                    add_child(slot, b, Child::Leaf(Arc::new(Leaf::new(key, value))));
                    break None;
                }
                InsertStep::Descend(b, next_depth) => {
                    add_summary(slot, added);
                    match child_slot_mut(slot, b) {
                        Some(s) => {
                            slot = s;
                            depth = next_depth;
                        }
                        None => {
                            // classify_insert saw the child; losing it would be a tree bug.
                            debug_assert!(false, "descend into a missing child");
                            break None;
                        }
                    }
                }
            }
        };
        match &old {
            None => self.len += 1,
            Some(prev) => self.sub_along_path(key, prev.summary()),
        }
        old
    }

    /// Subtracts `removed` from the summary of every inner node on `key`'s path (the nodes were
    /// just made unique by the write, so this copies nothing).
    fn sub_along_path(&mut self, key: &[u8], removed: Summary) {
        let mut slot: &mut Option<Child<V>> = &mut self.root;
        let mut depth = 0usize;
        loop {
            let edge = {
                let Some(h) = slot.as_mut().and_then(Child::header_mut) else {
                    return;
                };
                h.summary.sub(removed);
                depth + h.prefix.as_slice().len()
            };
            let Some(&b) = key.get(edge) else {
                return;
            };
            match child_slot_mut(slot, b) {
                Some(s) => {
                    slot = s;
                    depth = edge + 1;
                }
                None => return,
            }
        }
    }

    /// Removes `key`; returns its value if it was present. Path-copies shared nodes only when
    /// the key is present. The parent of the removed leaf shrinks to a smaller node kind below
    /// the thresholds above, or collapses into its last entry (merging compressed prefixes).
    pub fn remove(&mut self, key: &[u8]) -> Option<V> {
        // Check first so a missing key never path-copies nodes shared with a snapshot.
        let removed = self.get(key)?.summary();
        let value = remove_present(&mut self.root, key, removed);
        if value.is_some() {
            self.len -= 1;
        }
        value
    }
}

impl<'a, V> IntoIterator for &'a Art<V> {
    type Item = (&'a [u8], &'a V);
    type IntoIter = Iter<'a, V>;

    fn into_iter(self) -> Iter<'a, V> {
        self.iter()
    }
}

impl<K: AsRef<[u8]>, V: Clone + Summarize> FromIterator<(K, V)> for Art<V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut art = Art::new();
        art.extend(iter);
        art
    }
}

impl<K: AsRef<[u8]>, V: Clone + Summarize> Extend<(K, V)> for Art<V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k.as_ref(), v);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Insert helpers. Each takes the slot holding the node so it can replace the node (split, grow).

/// What the insert loop does at one node, decided from a shared borrow.
enum InsertStep {
    /// The slot holds a leaf: replace its value or split it.
    AtLeaf,
    /// The key diverges from the node's prefix after this many prefix bytes.
    SplitPrefix(usize),
    /// The key ends exactly after the node's prefix.
    Terminal,
    /// No child under this edge byte yet.
    AddChild(u8),
    /// Continue into the child under this edge byte, at this key depth.
    Descend(u8, usize),
}

fn classify_insert<V>(node: &Child<V>, key: &[u8], depth: usize) -> InsertStep {
    let Some(header) = node.header() else {
        return InsertStep::AtLeaf;
    };
    let prefix = header.prefix.as_slice();
    let rest = key.get(depth..).unwrap_or_default();
    let m = common_prefix_len(prefix, rest);
    if m < prefix.len() {
        return InsertStep::SplitPrefix(m);
    }
    let edge_depth = depth + prefix.len();
    match key.get(edge_depth) {
        None => InsertStep::Terminal,
        Some(&b) if node.find(b).is_some() => InsertStep::Descend(b, edge_depth + 1),
        Some(&b) => InsertStep::AddChild(b),
    }
}

/// Adds one new leaf's summary to the inner node in `slot` (copy-on-write).
fn add_summary<V: Clone>(slot: &mut Option<Child<V>>, added: Summary) {
    if let Some(h) = slot.as_mut().and_then(Child::header_mut) {
        h.summary.add(added);
    }
}

/// Subtracts one removed leaf's summary from the inner node in `slot` (copy-on-write).
fn sub_summary<V: Clone>(slot: &mut Option<Child<V>>, removed: Summary) {
    if let Some(h) = slot.as_mut().and_then(Child::header_mut) {
        h.summary.sub(removed);
    }
}

/// Returns the old value of a leaf and stores `value`, copying the leaf if a snapshot shares it.
fn replace_leaf_value<V: Clone>(leaf: &mut Arc<Leaf<V>>, value: V) -> V {
    if let Some(l) = Arc::get_mut(leaf) {
        return std::mem::replace(&mut l.value, value);
    }
    let old = leaf.value.clone();
    *leaf = Arc::new(Leaf {
        key: leaf.key.clone(),
        value,
    });
    old
}

/// Takes the value out of a removed leaf (cloning it only if a snapshot still shares the leaf).
fn leaf_value<V: Clone>(leaf: Arc<Leaf<V>>) -> V {
    match Arc::try_unwrap(leaf) {
        Ok(l) => l.value,
        Err(shared) => shared.value.clone(),
    }
}

/// Puts `leaf` into a new node whose prefix ends at key depth `edge_depth`.
fn place_leaf<V>(node: &mut Node4<V, Child<V>>, leaf: Arc<Leaf<V>>, edge_depth: usize) {
    match leaf.key.as_slice().get(edge_depth).copied() {
        None => node.header_mut().terminal = Some(leaf),
        Some(b) => node.add(b, Child::Leaf(leaf)),
    }
}

fn insert_at_leaf<V: Clone + Summarize>(
    slot: &mut Option<Child<V>>,
    key: &[u8],
    depth: usize,
    value: V,
) -> Option<V> {
    let Some(Child::Leaf(existing)) = slot else {
        return None;
    };
    if existing.key.as_slice() == key {
        return Some(replace_leaf_value(existing, value));
    }
    // Lazy expansion: two distinct keys meet here; a Node4 takes their common bytes as prefix.
    let existing_rest = existing.key.as_slice().get(depth..).unwrap_or_default();
    let rest = key.get(depth..).unwrap_or_default();
    let m = common_prefix_len(existing_rest, rest);
    let mut node = Node4::new(Header::new(&rest[..m]));
    node.header_mut().summary = existing.value.summary().merge(value.summary());
    let edge_depth = depth + m;
    if let Some(Child::Leaf(old)) = slot.take() {
        place_leaf(&mut node, old, edge_depth);
    }
    place_leaf(&mut node, Arc::new(Leaf::new(key, value)), edge_depth);
    *slot = Some(Child::N4(Arc::new(node)));
    None
}

fn split_prefix<V: Clone + Summarize>(
    slot: &mut Option<Child<V>>,
    key: &[u8],
    depth: usize,
    m: usize,
    value: V,
) {
    let Some(mut old) = slot.take() else {
        return;
    };
    let Some(header) = old.header_mut() else {
        *slot = Some(old);
        return;
    };
    let prefix = std::mem::replace(&mut header.prefix, node::Bytes::EMPTY);
    let p = prefix.as_slice();
    let (Some(&edge), Some(tail)) = (p.get(m), p.get(m + 1..)) else {
        header.prefix = prefix;
        *slot = Some(old);
        return;
    };
    header.prefix = node::Bytes::from_slice(tail);
    let mut node = Node4::new(Header::new(&p[..m]));
    node.header_mut().summary = header.summary.merge(value.summary());
    node.add(edge, old);
    place_leaf(&mut node, Arc::new(Leaf::new(key, value)), depth + m);
    *slot = Some(Child::N4(Arc::new(node)));
}

fn set_terminal<V: Clone>(slot: &mut Option<Child<V>>, key: &[u8], value: V) -> Option<V> {
    let header = slot.as_mut()?.header_mut()?;
    match &mut header.terminal {
        Some(leaf) => Some(replace_leaf_value(leaf, value)),
        None => {
            header.terminal = Some(Arc::new(Leaf::new(key, value)));
            None
        }
    }
}

fn child_slot_mut<V: Clone>(slot: &mut Option<Child<V>>, b: u8) -> Option<&mut Option<Child<V>>> {
    slot.as_mut()?.find_slot_mut(b)
}

/// Adds `child` under edge `b`, growing a full node to the next kind first.
fn add_child<V: Clone>(slot: &mut Option<Child<V>>, b: u8, child: Child<V>) {
    fn add_or_grow<V: Clone, A: InnerNode<V, Child<V>> + Clone, B: InnerNode<V, Child<V>>>(
        mut node: Arc<A>,
        b: u8,
        child: Child<V>,
        small: fn(Arc<A>) -> Child<V>,
        big: fn(Arc<B>) -> Child<V>,
        new_big: fn(Header<V>) -> B,
    ) -> Child<V> {
        if node.is_full() {
            let mut grown = convert(Arc::unwrap_or_clone(node), new_big);
            grown.add(b, child);
            big(Arc::new(grown))
        } else {
            Arc::make_mut(&mut node).add(b, child);
            small(node)
        }
    }
    let Some(node) = slot.take() else {
        return;
    };
    *slot = Some(match node {
        Child::N4(n) => add_or_grow(n, b, child, Child::N4, Child::N16, Node16::new),
        Child::N16(n) => add_or_grow(n, b, child, Child::N16, Child::N48, Node48::new),
        Child::N48(n) => add_or_grow(n, b, child, Child::N48, Child::N256, Node256::new),
        Child::N256(mut n) => {
            Arc::make_mut(&mut n).add(b, child);
            Child::N256(n)
        }
        leaf @ Child::Leaf(_) => {
            debug_assert!(false, "add_child on a leaf");
            leaf
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Remove helpers.

/// What the remove loop does at one inner node.
enum RemoveStep {
    TakeTerminal,
    TakeLeafChild(u8),
    Descend(u8, usize),
    Missing,
}

fn classify_remove<V>(node: &Child<V>, key: &[u8], depth: usize) -> RemoveStep {
    let Some(header) = node.header() else {
        return RemoveStep::Missing;
    };
    let prefix = header.prefix.as_slice();
    if !key.get(depth..).unwrap_or_default().starts_with(prefix) {
        return RemoveStep::Missing;
    }
    let edge_depth = depth + prefix.len();
    let Some(&b) = key.get(edge_depth) else {
        return match header.terminal {
            Some(_) => RemoveStep::TakeTerminal,
            None => RemoveStep::Missing,
        };
    };
    match node.find(b) {
        None => RemoveStep::Missing,
        Some(Child::Leaf(l)) if l.key.as_slice() == key => RemoveStep::TakeLeafChild(b),
        Some(Child::Leaf(_)) => RemoveStep::Missing,
        Some(_) => RemoveStep::Descend(b, edge_depth + 1),
    }
}

/// Removes `key` (known to be present, with summary `removed`), updating the summaries on the
/// path.
fn remove_present<V: Clone>(
    root: &mut Option<Child<V>>,
    key: &[u8],
    removed: Summary,
) -> Option<V> {
    if let Some(Child::Leaf(l)) = root {
        if l.key.as_slice() != key {
            return None;
        }
        return match root.take() {
            Some(Child::Leaf(l)) => Some(leaf_value(l)),
            _ => None,
        };
    }
    let mut slot = root;
    let mut depth = 0usize;
    loop {
        let step = classify_remove(slot.as_ref()?, key, depth);
        match step {
            RemoveStep::Missing => return None,
            RemoveStep::TakeTerminal => {
                sub_summary(slot, removed);
                let leaf = slot.as_mut()?.header_mut()?.terminal.take()?;
                fix_after_remove(slot);
                return Some(leaf_value(leaf));
            }
            RemoveStep::TakeLeafChild(b) => {
                sub_summary(slot, removed);
                let child = slot.as_mut()?.take_child(b)?;
                fix_after_remove(slot);
                return match child {
                    Child::Leaf(l) => Some(leaf_value(l)),
                    _ => None,
                };
            }
            RemoveStep::Descend(b, next_depth) => {
                sub_summary(slot, removed);
                slot = child_slot_mut(slot, b)?;
                depth = next_depth;
            }
        }
    }
}

/// Restores the node invariants after one entry left the node in `slot`: a node left with one
/// entry is replaced by it (a lone child inherits `prefix ++ edge ++ child.prefix`), and an
/// underfull node shrinks to the next smaller kind.
fn fix_after_remove<V: Clone>(slot: &mut Option<Child<V>>) {
    let Some(node) = slot.take() else {
        return;
    };
    let (count, terminal) = match node.header() {
        Some(h) => (node.count(), h.terminal.clone()),
        None => {
            *slot = Some(node);
            return;
        }
    };
    if count == 0 {
        *slot = terminal.map(Child::Leaf);
        return;
    }
    if count == 1 && terminal.is_none() {
        let Some((b, only)) = node.next_from(0).map(|(b, c)| (b, c.clone())) else {
            *slot = Some(node);
            return;
        };
        let merged = match (node.header(), only.header()) {
            (Some(parent), Some(child)) => Some(node::Bytes::concat3(
                parent.prefix.as_slice(),
                b,
                child.prefix.as_slice(),
            )),
            _ => None,
        };
        // Drop the parent first so the child is unique (mutated in place) unless a snapshot
        // still holds it.
        drop(node);
        let mut only = only;
        if let (Some(prefix), Some(h)) = (merged, only.header_mut()) {
            h.prefix = prefix;
        }
        *slot = Some(only);
        return;
    }
    *slot = Some(match node {
        Child::N16(n) if count <= SHRINK_16_TO_4 => {
            Child::N4(Arc::new(convert(Arc::unwrap_or_clone(n), Node4::new)))
        }
        Child::N48(n) if count <= SHRINK_48_TO_16 => {
            Child::N16(Arc::new(convert(Arc::unwrap_or_clone(n), Node16::new)))
        }
        Child::N256(n) if count <= SHRINK_256_TO_48 => {
            Child::N48(Arc::new(convert(Arc::unwrap_or_clone(n), Node48::new)))
        }
        other => other,
    });
}
