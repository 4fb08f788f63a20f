//! Ordered listing of one image tree: seek, prefix, exclusive `start_after`, delimiter roll-up
//! and an optional subtree filter, one item at a time.
//!
//! The cursor keeps a stack of the inner nodes on the path to its position and the key bytes
//! of that path. When it is about to enter a child whose edge byte or compressed prefix holds
//! the delimiter (past the listing prefix), the whole child is one group: its common prefix is
//! produced without reading anything below the child. So a listing reads one record per group
//! plus the records on the way, not the keys under each group. The current item's bytes live in
//! the cursor's own buffer until the next [`ImgList::advance`].

use crate::art::Summary;
use crate::error::Result;

use super::file::Image;
use super::node::{Inner, Leaf, Rec};
use super::read::{terminal_leaf, MAX_PATH};

/// A subtree filter: true when nothing in a subtree with that summary can be wanted.
pub(crate) type SkipFn<'s> = dyn Fn(&Summary) -> bool + Sync + 's;

enum Frame<'a> {
    /// A leaf to produce next (a leaf root or the target of a seek); its key is
    /// `path[..depth] ++ suffix`.
    Leaf { leaf: Leaf<'a>, depth: usize },
    Inner {
        node: Inner<'a>,
        /// Key offset of the node's edge bytes (`path[..edge_depth]` leads to them).
        edge_depth: usize,
        terminal_pending: bool,
        /// The next child to visit: the first with an edge byte `>= next`, at child index
        /// `index`.
        next: u16,
        index: u16,
    },
}

/// The current item of an [`ImgList`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum ImgItem<'c, 'a> {
    /// A key (the cursor's buffer) and its slot.
    Key(&'c [u8], Leaf<'a>),
    /// A common prefix (ends with the delimiter).
    Group(&'c [u8]),
}

#[derive(Clone, Copy)]
enum Cur<'a> {
    None,
    Key(usize, Leaf<'a>),
    Group(usize),
}

/// A listing cursor over one image tree (see the module docs). Call [`ImgList::advance`] to
/// reach the first item.
pub(crate) struct ImgList<'a, 's> {
    img: &'a Image,
    stack: Vec<Frame<'a>>,
    path: Vec<u8>,
    prefix: &'s [u8],
    start_after: Option<&'s [u8]>,
    delimiter: Option<u8>,
    skip: Option<&'s SkipFn<'s>>,
    done: bool,
    cur: Cur<'a>,
}

/// How many children of a node [`warm`] touches ahead of the walk.
const WARM_CHILDREN: usize = 16;

/// Reads the first byte of each of the first [`WARM_CHILDREN`] children of `node`. The loads
/// do not depend on each other, so the CPU overlaps their cache (and TLB) misses instead of
/// taking them one after another as the walk reaches each child. A pure read of mapped bytes:
/// no effect on results, and nothing is trusted from blocks not yet checked.
fn warm(img: &Image, node: &Inner<'_>) {
    let mut acc = 0u8;
    for off in node.first_children(WARM_CHILDREN) {
        acc = acc.wrapping_add(img.peek(off));
    }
    std::hint::black_box(acc);
}

fn lcp(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl<'a, 's> ImgList<'a, 's> {
    /// A cursor over the keys of the tree at `root` that start with `prefix` and are greater
    /// than `start_after`, rolling up at `delimiter`, skipping subtrees `skip` rules out (only
    /// nodes that store a summary can be skipped). Positioned before the first item.
    /// Errors: `Corrupt` for a bad block or record on the seek path.
    pub(crate) fn new(
        img: &'a Image,
        root: u64,
        prefix: &'s [u8],
        start_after: Option<&'s [u8]>,
        delimiter: Option<u8>,
        skip: Option<&'s SkipFn<'s>>,
    ) -> Result<Self> {
        let mut c = ImgList {
            img,
            stack: Vec::with_capacity(16),
            path: Vec::with_capacity(128),
            prefix,
            start_after,
            delimiter,
            skip,
            done: false,
            cur: Cur::None,
        };
        let (target, inclusive) = match start_after {
            Some(sa) if sa >= prefix => (sa, false),
            _ => (prefix, true),
        };
        c.seek(root, target, inclusive)?;
        Ok(c)
    }

    /// The current item (`None` before the first [`ImgList::advance`] and at the end).
    #[inline]
    pub(crate) fn current(&self) -> Option<ImgItem<'_, 'a>> {
        match self.cur {
            Cur::None => None,
            Cur::Key(len, leaf) => Some(ImgItem::Key(self.path.get(..len)?, leaf)),
            Cur::Group(len) => Some(ImgItem::Group(self.path.get(..len)?)),
        }
    }

    #[inline]
    fn skips_leaf(&self, l: &Leaf<'_>) -> bool {
        self.skip.is_some_and(|f| f(&l.summary()))
    }

    #[inline]
    fn skips_node(&self, n: &Inner<'_>) -> bool {
        match (self.skip, n.summary()) {
            (Some(f), Some(s)) => f(&s),
            _ => false,
        }
    }

    fn push_node(&mut self, n: Inner<'a>, depth: usize) {
        if self.skips_node(&n) {
            return;
        }
        self.path.truncate(depth);
        self.path.extend_from_slice(n.prefix());
        self.stack.push(Frame::Inner {
            node: n,
            edge_depth: self.path.len(),
            terminal_pending: true,
            next: 0,
            index: 0,
        });
    }

    /// Positions the stack at the first key `> target` (`>=` when `inclusive`).
    fn seek(&mut self, root: u64, target: &[u8], inclusive: bool) -> Result<()> {
        let mut off = root;
        let mut depth = 0usize;
        self.path.clear();
        loop {
            match self.img.record(off)? {
                Rec::Leaf(l) => {
                    let rest = target.get(depth..).unwrap_or_default();
                    let after = match l.suffix.cmp(rest) {
                        std::cmp::Ordering::Greater => true,
                        std::cmp::Ordering::Equal => inclusive,
                        std::cmp::Ordering::Less => false,
                    };
                    if after {
                        self.stack.push(Frame::Leaf { leaf: l, depth });
                    }
                    return Ok(());
                }
                Rec::Inner(n) => {
                    let rest = target.get(depth..).unwrap_or_default();
                    let m = lcp(n.prefix(), rest);
                    if m < n.prefix().len() {
                        // The subtree lies wholly above the target (the target ran out, or a
                        // larger byte) or wholly below it.
                        if m == rest.len() || n.prefix()[m] > rest[m] {
                            self.push_node(n, depth);
                        }
                        return Ok(());
                    }
                    self.path.truncate(depth);
                    self.path.extend_from_slice(n.prefix());
                    let edge_depth = self.path.len();
                    match target.get(edge_depth) {
                        None => {
                            // The terminal equals the target; every child is greater.
                            self.stack.push(Frame::Inner {
                                node: n,
                                edge_depth,
                                terminal_pending: inclusive,
                                next: 0,
                                index: 0,
                            });
                            return Ok(());
                        }
                        Some(&b) => {
                            let next = u16::from(b) + 1;
                            self.stack.push(Frame::Inner {
                                node: n,
                                edge_depth,
                                terminal_pending: false,
                                next,
                                index: n.count_below(next),
                            });
                            match n.find(b) {
                                Some(c) => {
                                    self.path.push(b);
                                    off = c;
                                    depth = edge_depth + 1;
                                }
                                None => return Ok(()),
                            }
                        }
                    }
                }
            }
        }
    }

    /// Drops every pending key that shares `path[..=pos]` with the current position.
    fn skip_group(&mut self, pos: usize) {
        while let Some(Frame::Inner { edge_depth, .. }) = self.stack.last() {
            if *edge_depth > pos {
                self.stack.pop();
            } else {
                break;
            }
        }
    }

    /// Classifies the key in `path` (slot `leaf`): sets the current item and returns true, or
    /// returns false to go on (a group at or before `start_after`, or the end of the prefix).
    fn on_key(&mut self, leaf: Leaf<'a>) -> bool {
        if !self.path.starts_with(self.prefix) {
            self.done = true;
            return false;
        }
        let plen = self.prefix.len();
        let group_end = self
            .delimiter
            .and_then(|d| self.path[plen..].iter().position(|&b| b == d))
            .map(|i| plen + i);
        let Some(pos) = group_end else {
            self.cur = Cur::Key(self.path.len(), leaf);
            return true;
        };
        self.skip_group(pos);
        if self.start_after.is_none_or(|sa| &self.path[..=pos] > sa) {
            self.cur = Cur::Group(pos + 1);
            return true;
        }
        false
    }

    /// Moves to the next item; afterwards [`ImgList::current`] is `None` at the end.
    /// Errors: `Corrupt` for a bad block or record (the cursor then ends).
    pub(crate) fn advance(&mut self) -> Result<()> {
        self.cur = Cur::None;
        let res = self.step();
        if res.is_err() {
            self.done = true;
            self.cur = Cur::None;
        }
        res
    }

    fn step(&mut self) -> Result<()> {
        let plen = self.prefix.len();
        while !self.done {
            let Some(top) = self.stack.last_mut() else {
                self.done = true;
                break;
            };
            let (b, child, edge_depth) = match top {
                Frame::Leaf { leaf, depth } => {
                    let (leaf, depth) = (*leaf, *depth);
                    self.stack.pop();
                    self.path.truncate(depth);
                    self.path.extend_from_slice(leaf.suffix);
                    if !self.skips_leaf(&leaf) && self.on_key(leaf) {
                        return Ok(());
                    }
                    continue;
                }
                Frame::Inner {
                    node,
                    edge_depth,
                    terminal_pending,
                    next,
                    index,
                } => {
                    let node = *node;
                    let edge_depth = *edge_depth;
                    if *terminal_pending {
                        *terminal_pending = false;
                        if *next == 0 {
                            warm(self.img, &node);
                        }
                        if let Some(t) = node.terminal() {
                            let leaf = terminal_leaf(self.img, t)?;
                            self.path.truncate(edge_depth);
                            if !self.skips_leaf(&leaf) && self.on_key(leaf) {
                                return Ok(());
                            }
                            continue;
                        }
                    }
                    match node.child_at(*next, *index) {
                        Some((b, c)) => {
                            *next = u16::from(b) + 1;
                            *index += 1;
                            (b, c, edge_depth)
                        }
                        None => {
                            self.stack.pop();
                            continue;
                        }
                    }
                }
            };
            self.path.truncate(edge_depth);
            self.path.push(b);
            match self.img.record(child)? {
                Rec::Leaf(l) => {
                    self.path.extend_from_slice(l.suffix);
                    if !self.skips_leaf(&l) && self.on_key(l) {
                        return Ok(());
                    }
                }
                Rec::Inner(n) => {
                    if self.skips_node(&n) {
                        continue;
                    }
                    self.path.extend_from_slice(n.prefix());
                    if self.path.len() > MAX_PATH {
                        return Err(self
                            .img
                            .corrupt(child, "reference cycle (key path too long)"));
                    }
                    let k = self.path.len().min(plen);
                    if self.path[..k] != self.prefix[..k] {
                        // Keys come in order from at or after the prefix: this subtree and all
                        // that follow are past it.
                        self.done = true;
                        break;
                    }
                    if let Some(d) = self.delimiter {
                        // Normally only the bytes just appended can hold the delimiter, but
                        // frames left by the seek may lie inside a group.
                        if let Some(i) = self.path[plen.min(self.path.len())..]
                            .iter()
                            .position(|&x| x == d)
                        {
                            let pos = plen + i;
                            self.skip_group(pos);
                            if self.start_after.is_none_or(|sa| &self.path[..=pos] > sa) {
                                self.cur = Cur::Group(pos + 1);
                                return Ok(());
                            }
                            continue;
                        }
                    }
                    self.stack.push(Frame::Inner {
                        node: n,
                        edge_depth: self.path.len(),
                        terminal_pending: true,
                        next: 0,
                        index: 0,
                    });
                }
            }
        }
        Ok(())
    }
}
