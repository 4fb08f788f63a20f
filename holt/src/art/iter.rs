//! Ordered iteration, seek, prefix scans and delimiter listing.
//!
//! [`Iter`] is an explicit DFS stack of the ancestors of the current position. Each inner-node
//! frame remembers whether its terminal leaf is still pending and the next edge byte to visit,
//! plus `edge_depth`: the key offset of that node's edge byte (node start depth + prefix length).
//! Every key still to come from a frame shares `key[..edge_depth]` with the key just returned,
//! which is what lets [`ListIter`] drop a whole delimiter group by popping frames.

use std::ops::Bound;

use super::node::{common_prefix_len, Child, Leaf, Summarize, Summary};

/// The subtree predicate of a [`Filter`] (`Sync` so filtered iterators stay `Send + Sync`).
pub(crate) type SkipFn<'a> = dyn Fn(&Summary) -> bool + Sync + 'a;

/// True when `filter` rules out the leaf `l`.
#[inline]
fn skips_leaf<V>(filter: &Option<Filter<'_, V>>, l: &Leaf<V>) -> bool {
    filter
        .as_ref()
        .is_some_and(|f| (f.skip)(&(f.leaf)(&l.value)))
}

/// A subtree filter: `skip(summary)` returns true when no entry of a subtree (or leaf) with that
/// summary can be wanted, so the iterator never descends into it. `leaf` summarises one value.
pub(crate) struct Filter<'a, V> {
    pub(crate) skip: &'a SkipFn<'a>,
    pub(crate) leaf: fn(&V) -> Summary,
}

impl<'a, V: Summarize> Filter<'a, V> {
    pub(crate) fn new(skip: &'a SkipFn<'a>) -> Self {
        Filter {
            skip,
            leaf: <V as Summarize>::summary,
        }
    }
}

enum Frame<'a, V> {
    /// A leaf still to be returned (only a leaf root or a seek target ends up here).
    Leaf(&'a Leaf<V>),
    Inner {
        node: &'a Child<V>,
        edge_depth: usize,
        terminal_pending: bool,
        next: u16,
    },
}

/// Iterator over `(key, value)` in byte order of keys; see [`Art::iter`](super::Art::iter),
/// [`Art::range_from`](super::Art::range_from) and [`Art::prefix_iter`](super::Art::prefix_iter).
pub struct Iter<'a, V> {
    stack: Vec<Frame<'a, V>>,
    visited: usize,
    filter: Option<Filter<'a, V>>,
}

impl<'a, V> Iter<'a, V> {
    fn empty() -> Self {
        Iter {
            stack: Vec::new(),
            visited: 0,
            filter: None,
        }
    }

    /// Installs a subtree filter (applied to every subtree and leaf reached from now on).
    pub(crate) fn with_filter(mut self, filter: Option<Filter<'a, V>>) -> Self {
        self.filter = filter;
        self
    }

    /// True when the filter rules out the whole subtree `node`.
    #[inline]
    fn skips(&self, node: &Child<V>) -> bool {
        let Some(f) = &self.filter else {
            return false;
        };
        let summary = match node {
            Child::Leaf(l) => (f.leaf)(&l.value),
            _ => node.header().map(|h| h.summary).unwrap_or_default(),
        };
        (f.skip)(&summary)
    }

    /// Pushes the whole subtree `node`, whose prefix starts at key offset `depth`.
    fn push_all(&mut self, node: &'a Child<V>, depth: usize) {
        self.visited += 1;
        if self.skips(node) {
            return;
        }
        match node {
            Child::Leaf(l) => self.stack.push(Frame::Leaf(l)),
            _ => {
                let prefix_len = node.header().map_or(0, |h| h.prefix.as_slice().len());
                self.stack.push(Frame::Inner {
                    node,
                    edge_depth: depth + prefix_len,
                    terminal_pending: true,
                    next: 0,
                });
            }
        }
    }

    pub(crate) fn from_root(root: Option<&'a Child<V>>, filter: Option<Filter<'a, V>>) -> Self {
        let mut it = Self::empty().with_filter(filter);
        if let Some(r) = root {
            it.push_all(r, 0);
        }
        it
    }

    /// Positions the iterator at the first key satisfying `start`, descending one path.
    pub(crate) fn seek(
        root: Option<&'a Child<V>>,
        start: Bound<&[u8]>,
        filter: Option<Filter<'a, V>>,
    ) -> Self {
        let (target, inclusive) = match start {
            Bound::Unbounded => return Self::from_root(root, filter),
            Bound::Included(s) => (s, true),
            Bound::Excluded(s) => (s, false),
        };
        let mut it = Self::empty().with_filter(filter);
        let Some(mut node) = root else {
            return it;
        };
        let mut depth = 0usize;
        loop {
            let Some(header) = node.header() else {
                if let Child::Leaf(l) = node {
                    let k = l.key.as_slice();
                    if k > target || (inclusive && k == target) {
                        it.push_all(node, depth);
                    }
                }
                return it;
            };
            it.visited += 1;
            let prefix = header.prefix.as_slice();
            let rest = target.get(depth..).unwrap_or_default();
            let m = common_prefix_len(prefix, rest);
            if m < prefix.len() {
                // The subtree is entirely above the target (target ran out, or a larger byte) or
                // entirely below it.
                if m == rest.len() || prefix[m] > rest[m] {
                    it.push_all(node, depth);
                }
                return it;
            }
            let edge_depth = depth + prefix.len();
            let Some(&b) = target.get(edge_depth) else {
                // The terminal equals the target; every child is greater.
                it.stack.push(Frame::Inner {
                    node,
                    edge_depth,
                    terminal_pending: inclusive,
                    next: 0,
                });
                return it;
            };
            // The terminal is a proper prefix of the target, hence smaller: skip it.
            it.stack.push(Frame::Inner {
                node,
                edge_depth,
                terminal_pending: false,
                next: u16::from(b) + 1,
            });
            match node.find(b) {
                Some(child) => {
                    node = child;
                    depth = edge_depth + 1;
                }
                None => return it,
            }
        }
    }

    /// Iterates the subtree of keys starting with `prefix`.
    pub(crate) fn prefix(root: Option<&'a Child<V>>, prefix: &[u8]) -> Self {
        let mut it = Self::empty();
        let (found, visited) = prefix_root(root, prefix);
        it.visited = visited;
        if let Some((node, depth)) = found {
            it.push_all(node, depth);
        }
        it
    }

    /// Number of tree nodes this iterator has pushed or descended through so far (a work
    /// counter for tests and benchmarks; leaves returned straight from a parent are not counted).
    pub fn nodes_visited(&self) -> usize {
        self.visited
    }

    /// Drops every pending key that shares `key[..=pos]` with the key returned last: pops each
    /// ancestor frame whose edge byte lies beyond `pos`. Frames at or above `pos` already moved
    /// past the edge taken, so they continue with the next sibling group.
    fn skip_group(&mut self, pos: usize) {
        while let Some(Frame::Inner { edge_depth, .. }) = self.stack.last() {
            if *edge_depth > pos {
                self.stack.pop();
            } else {
                break;
            }
        }
    }
}

impl<'a, V> Iterator for Iter<'a, V> {
    type Item = (&'a [u8], &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let top = self.stack.last_mut()?;
            let (child, edge_depth) = match top {
                Frame::Leaf(l) => {
                    let l: &'a Leaf<V> = l;
                    self.stack.pop();
                    return Some((l.key.as_slice(), &l.value));
                }
                Frame::Inner {
                    node,
                    edge_depth,
                    terminal_pending,
                    next,
                } => {
                    let node: &'a Child<V> = node;
                    if *terminal_pending {
                        *terminal_pending = false;
                        if let Some(t) = node.header().and_then(|h| h.terminal.as_deref()) {
                            if !skips_leaf(&self.filter, t) {
                                return Some((t.key.as_slice(), &t.value));
                            }
                        }
                    }
                    match node.next_from(*next) {
                        Some((b, child)) => {
                            *next = u16::from(b) + 1;
                            (child, *edge_depth)
                        }
                        None => {
                            self.stack.pop();
                            continue;
                        }
                    }
                }
            };
            match child {
                Child::Leaf(l) => {
                    if !skips_leaf(&self.filter, l) {
                        return Some((l.key.as_slice(), &l.value));
                    }
                }
                _ => self.push_all(child, edge_depth + 1),
            }
        }
    }
}

/// One entry of a delimiter listing.
#[derive(Debug, PartialEq, Eq)]
pub enum ListItem<'a, V> {
    /// A key (full key bytes) and its value.
    Key(&'a [u8], &'a V),
    /// `key[..prefix.len() + i + 1]`: the listing prefix, the remainder up to and including the
    /// first delimiter. Stands for every key of the group.
    CommonPrefix(Vec<u8>),
}

impl<V> Clone for ListItem<'_, V> {
    fn clone(&self) -> Self {
        match self {
            ListItem::Key(k, v) => ListItem::Key(k, v),
            ListItem::CommonPrefix(p) => ListItem::CommonPrefix(p.clone()),
        }
    }
}

/// Lazy delimiter listing; see [`Art::list_iter`](super::Art::list_iter).
pub struct ListIter<'a, V> {
    inner: Iter<'a, V>,
    prefix: Vec<u8>,
    start_after: Option<Vec<u8>>,
    delimiter: Option<u8>,
    done: bool,
}

impl<'a, V> ListIter<'a, V> {
    pub(crate) fn new(
        root: Option<&'a Child<V>>,
        prefix: &[u8],
        start_after: Option<&[u8]>,
        delimiter: Option<u8>,
        filter: Option<Filter<'a, V>>,
    ) -> Self {
        // Start at the later of `prefix` and `start_after`; iteration stops at the first key
        // that no longer starts with `prefix`.
        let start = match start_after {
            Some(sa) if sa >= prefix => Bound::Excluded(sa),
            _ => Bound::Included(prefix),
        };
        ListIter {
            inner: Iter::seek(root, start, filter),
            prefix: prefix.to_vec(),
            start_after: start_after.map(<[u8]>::to_vec),
            delimiter,
            done: false,
        }
    }

    /// Tree nodes visited so far (seek plus iteration); see [`Iter::nodes_visited`].
    pub fn nodes_visited(&self) -> usize {
        self.inner.nodes_visited()
    }
}

impl<'a, V> Iterator for ListIter<'a, V> {
    type Item = ListItem<'a, V>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let Some((key, value)) = self.inner.next() else {
                self.done = true;
                break;
            };
            if !key.starts_with(&self.prefix) {
                self.done = true;
                break;
            }
            let plen = self.prefix.len();
            let group_end = self
                .delimiter
                .and_then(|d| key[plen..].iter().position(|&b| b == d))
                .map(|i| plen + i);
            let Some(pos) = group_end else {
                return Some(ListItem::Key(key, value));
            };
            self.inner.skip_group(pos);
            let common = &key[..=pos];
            if self.start_after.as_deref().is_none_or(|sa| common > sa) {
                return Some(ListItem::CommonPrefix(common.to_vec()));
            }
        }
        None
    }
}

/// The subtree holding every key that starts with `prefix`, with the key offset where its node
/// prefix starts, plus the number of inner nodes descended through. `None` when no key starts
/// with `prefix`.
pub(crate) fn prefix_root<'a, V>(
    root: Option<&'a Child<V>>,
    prefix: &[u8],
) -> (Option<(&'a Child<V>, usize)>, usize) {
    let mut visited = 0usize;
    let Some(mut node) = root else {
        return (None, visited);
    };
    let mut depth = 0usize;
    loop {
        let Some(header) = node.header() else {
            if let Child::Leaf(l) = node {
                if l.key.as_slice().starts_with(prefix) {
                    return (Some((node, depth)), visited);
                }
            }
            return (None, visited);
        };
        let p = header.prefix.as_slice();
        let rest = prefix.get(depth..).unwrap_or_default();
        let m = common_prefix_len(p, rest);
        if m == rest.len() {
            // The wanted prefix ends inside (or right after) this node's prefix.
            return (Some((node, depth)), visited);
        }
        if m < p.len() {
            return (None, visited);
        }
        visited += 1;
        let edge_depth = depth + p.len();
        match prefix.get(edge_depth).and_then(|&b| node.find(b)) {
            Some(child) => {
                node = child;
                depth = edge_depth + 1;
            }
            None => return (None, visited),
        }
    }
}
