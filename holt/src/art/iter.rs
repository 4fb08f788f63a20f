//! Ordered iteration, seek, prefix scans and delimiter listing.
//!
//! [`Iter`] is an explicit DFS stack of the ancestors of the current position. Each inner-node
//! frame remembers whether its terminal leaf is still pending and the next edge byte to visit,
//! plus `edge_depth`: the key offset of that node's edge byte (node start depth + prefix length).
//! Every key still to come from a frame shares `key[..edge_depth]` with the key just returned,
//! which is what lets [`ListIter`] drop a whole delimiter group by popping frames.

use std::ops::Bound;

use super::child::Child;
use super::node::{common_prefix_len, Leaf, Summarize, Summary};

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
                        if *next == 0 {
                            warm(node);
                        }
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

/// How many children of a node [`warm`] touches ahead of the walk.
const WARM_CHILDREN: usize = 16;

/// Reads one byte of each of the first [`WARM_CHILDREN`] children of `node` (their header or
/// key tag). The loads do not depend on each other, so the CPU overlaps their cache misses
/// instead of taking them one after another as the walk reaches each child; the walk then
/// finds the children's first cache lines already loaded. A pure read: no effect on results.
fn warm<V>(node: &Child<V>) {
    let mut acc = 0usize;
    let mut from = 0u16;
    for _ in 0..WARM_CHILDREN {
        let Some((b, c)) = node.next_from(from) else {
            break;
        };
        acc = acc.wrapping_add(match c {
            Child::Leaf(l) => l.key.as_slice().len(),
            _ => c.header().map_or(0, |h| h.prefix.as_slice().len()),
        });
        from = u16::from(b) + 1;
    }
    std::hint::black_box(acc);
}

/// One listing item found by [`ListIter`], before any bytes are copied.
enum Found<'a, V> {
    Key(&'a [u8], &'a V),
    /// A common prefix that is a slice of a leaf key.
    Group(&'a [u8]),
    /// A common prefix: the iterator's `path[..len]`.
    PathGroup(usize),
}

/// A borrowed listing item from [`ListIter::next_ref`]: no allocation per item. A common
/// prefix may borrow the iterator's own path buffer, so it lives until the next call.
#[derive(Debug, PartialEq, Eq)]
pub enum ListRef<'s, 'a, V> {
    /// A key (full key bytes) and its value.
    Key(&'a [u8], &'a V),
    /// A common prefix (see [`ListItem::CommonPrefix`]).
    CommonPrefix(&'s [u8]),
}

/// Lazy delimiter listing; see [`Art::list_iter`](super::Art::list_iter).
///
/// Unfiltered listings with a delimiter track the key bytes of the current path (`path`): when
/// the edge byte or compressed prefix of a child about to be entered contains the delimiter
/// (past the listing prefix), the whole child subtree is one group and its common prefix is
/// emitted without descending to any of its leaves — one node visit per group instead of a walk
/// down to the group's first key.
pub struct ListIter<'a, V> {
    inner: Iter<'a, V>,
    prefix: Vec<u8>,
    start_after: Option<Vec<u8>>,
    delimiter: Option<u8>,
    done: bool,
    /// Path tracking is on (no filter and a delimiter).
    walk: bool,
    /// Key bytes `0..edge_depth` of the deepest inner frame entered (walk mode).
    path: Vec<u8>,
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
        let (start, target) = match start_after {
            Some(sa) if sa >= prefix => (Bound::Excluded(sa), sa),
            _ => (Bound::Included(prefix), prefix),
        };
        let walk = filter.is_none() && delimiter.is_some();
        let inner = Iter::seek(root, start, filter);
        let mut path = Vec::new();
        if walk {
            // Every frame seek left behind lies on one root-to-node path; the deepest inner
            // frame's bytes are the target up to where its node starts, then its prefix.
            let deepest = inner.stack.iter().rev().find_map(|f| match f {
                Frame::Inner {
                    node, edge_depth, ..
                } => Some((*node, *edge_depth)),
                Frame::Leaf(_) => None,
            });
            if let Some((node, edge_depth)) = deepest {
                let p = node.header().map_or(&[][..], |h| h.prefix.as_slice());
                let start = edge_depth.saturating_sub(p.len());
                path.extend_from_slice(target.get(..start).unwrap_or(target));
                path.extend_from_slice(p);
            }
        }
        ListIter {
            inner,
            prefix: prefix.to_vec(),
            start_after: start_after.map(<[u8]>::to_vec),
            delimiter,
            done: false,
            walk,
            path,
        }
    }

    /// Classifies one key in listing order: `Some(item)` to emit, `None` to go on (a group at or
    /// before `start_after`); sets `done` once keys leave the prefix.
    fn on_key(&mut self, key: &'a [u8], value: &'a V) -> Option<Found<'a, V>> {
        if !key.starts_with(&self.prefix) {
            self.done = true;
            return None;
        }
        let plen = self.prefix.len();
        let group_end = self
            .delimiter
            .and_then(|d| key[plen..].iter().position(|&b| b == d))
            .map(|i| plen + i);
        let Some(pos) = group_end else {
            return Some(Found::Key(key, value));
        };
        self.inner.skip_group(pos);
        let common = &key[..=pos];
        if self.start_after.as_deref().is_none_or(|sa| common > sa) {
            return Some(Found::Group(common));
        }
        None
    }

    /// `next` in walk mode (see the type docs).
    fn next_walk(&mut self, d: u8) -> Option<Found<'a, V>> {
        let plen = self.prefix.len();
        while !self.done {
            let Some(top) = self.inner.stack.last_mut() else {
                self.done = true;
                break;
            };
            let (b, child, edge_depth) = match top {
                Frame::Leaf(l) => {
                    let l: &'a Leaf<V> = l;
                    self.inner.stack.pop();
                    if let Some(item) = self.on_key(l.key.as_slice(), &l.value) {
                        return Some(item);
                    }
                    continue;
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
                        if *next == 0 {
                            warm(node);
                        }
                        if let Some(t) = node.header().and_then(|h| h.terminal.as_deref()) {
                            if let Some(item) = self.on_key(t.key.as_slice(), &t.value) {
                                return Some(item);
                            }
                            continue;
                        }
                    }
                    match node.next_from(*next) {
                        Some((b, child)) => {
                            *next = u16::from(b) + 1;
                            (b, child, *edge_depth)
                        }
                        None => {
                            self.inner.stack.pop();
                            continue;
                        }
                    }
                }
            };
            let Some(header) = child.header() else {
                if let Child::Leaf(l) = child {
                    if let Some(item) = self.on_key(l.key.as_slice(), &l.value) {
                        return Some(item);
                    }
                }
                continue;
            };
            self.inner.visited += 1;
            self.path.truncate(edge_depth);
            self.path.push(b);
            self.path.extend_from_slice(header.prefix.as_slice());
            let n = self.path.len().min(plen);
            if self.path[..n] != self.prefix[..n] {
                // Keys come in order and start at or after the prefix: this subtree and all
                // that follow are past it.
                self.done = true;
                break;
            }
            // Normally only the bytes just appended can hold the delimiter (a group is emitted
            // before it is entered), but frames left by seek may lie inside a group.
            if let Some(i) = self
                .path
                .get(plen..)
                .and_then(|r| r.iter().position(|&x| x == d))
            {
                // The child subtree, and everything else below the first delimiter, is one group.
                let pos = plen + i;
                self.inner.skip_group(pos);
                let common = &self.path[..=pos];
                if self.start_after.as_deref().is_none_or(|sa| common > sa) {
                    return Some(Found::PathGroup(pos + 1));
                }
                continue;
            }
            self.inner.stack.push(Frame::Inner {
                node: child,
                edge_depth: self.path.len(),
                terminal_pending: true,
                next: 0,
            });
        }
        None
    }

    /// The next item without copying anything: like [`Iterator::next`], but a common prefix is
    /// borrowed (from a leaf key or from the iterator's path buffer) instead of allocated.
    pub fn next_ref(&mut self) -> Option<ListRef<'_, 'a, V>> {
        let found = self.find_next()?;
        Some(match found {
            Found::Key(k, v) => ListRef::Key(k, v),
            Found::Group(p) => ListRef::CommonPrefix(p),
            Found::PathGroup(len) => ListRef::CommonPrefix(self.path.get(..len).unwrap_or(&[])),
        })
    }

    fn find_next(&mut self) -> Option<Found<'a, V>> {
        if self.walk {
            if let Some(d) = self.delimiter {
                return self.next_walk(d);
            }
        }
        while !self.done {
            let Some((key, value)) = self.inner.next() else {
                self.done = true;
                break;
            };
            if let Some(item) = self.on_key(key, value) {
                return Some(item);
            }
        }
        None
    }

    /// Tree nodes visited so far (seek plus iteration); see [`Iter::nodes_visited`].
    pub fn nodes_visited(&self) -> usize {
        self.inner.nodes_visited()
    }
}

impl<'a, V> Iterator for ListIter<'a, V> {
    type Item = ListItem<'a, V>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(match self.next_ref()? {
            ListRef::Key(k, v) => ListItem::Key(k, v),
            ListRef::CommonPrefix(p) => ListItem::CommonPrefix(p.to_vec()),
        })
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
