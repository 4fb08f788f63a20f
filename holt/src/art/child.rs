//! The child pointer of the ART: one enum over the leaf and the four inner-node kinds, which
//! fixes each kind's child type to `Child<V>` and dispatches the shared [`InnerNode`] calls.

use std::sync::Arc;

use super::node::{Header, InnerNode, Leaf, Summarize, Summary};
use super::node256::Node256;
use super::node48::Node48;
use super::node4_16::{Node16, Node4};

/// A child pointer: one `Arc` per node, tagged by node kind so each kind is allocated at its
/// exact size (16 bytes per pointer: tag + `Arc`).
pub(crate) enum Child<V> {
    Leaf(Arc<Leaf<V>>),
    N4(Arc<Node4<V, Child<V>>>),
    N16(Arc<Node16<V, Child<V>>>),
    N48(Arc<Node48<V, Child<V>>>),
    N256(Arc<Node256<V, Child<V>>>),
}

impl<V> Clone for Child<V> {
    fn clone(&self) -> Self {
        match self {
            Child::Leaf(a) => Child::Leaf(Arc::clone(a)),
            Child::N4(a) => Child::N4(Arc::clone(a)),
            Child::N16(a) => Child::N16(Arc::clone(a)),
            Child::N48(a) => Child::N48(Arc::clone(a)),
            Child::N256(a) => Child::N256(Arc::clone(a)),
        }
    }
}

/// Runs `$body` with `$n` bound to the inner node (as `&Arc<NodeX>` / `&mut Arc<NodeX>`,
/// depending on how `$c` is borrowed), or `$leaf` with `$l` bound to the leaf `Arc`.
macro_rules! dispatch {
    ($c:expr, $n:ident => $body:expr, $l:ident => $leaf:expr) => {
        match $c {
            Child::Leaf($l) => $leaf,
            Child::N4($n) => $body,
            Child::N16($n) => $body,
            Child::N48($n) => $body,
            Child::N256($n) => $body,
        }
    };
}
pub(crate) use dispatch;

impl<V> Child<V> {
    #[inline]
    pub(crate) fn header(&self) -> Option<&Header<V>> {
        dispatch!(self, n => Some(n.header()), _l => None)
    }

    /// Number of children (not counting the terminal); 0 for a leaf.
    pub(crate) fn count(&self) -> usize {
        dispatch!(self, n => n.count(), _l => 0)
    }

    #[inline]
    pub(crate) fn find(&self, byte: u8) -> Option<&Child<V>> {
        dispatch!(self, n => n.find(byte), _l => None)
    }

    /// The child with the smallest edge byte `>= from` (`from` in `0..=256`).
    #[inline]
    pub(crate) fn next_from(&self, from: u16) -> Option<(u8, &Child<V>)> {
        dispatch!(self, n => n.next_from(from), _l => None)
    }

    /// The child with the largest edge byte `< below` (`below` in `0..=256`).
    #[inline]
    pub(crate) fn prev_before(&self, below: u16) -> Option<(u8, &Child<V>)> {
        dispatch!(self, n => n.prev_before(below), _l => None)
    }

    /// Moves the children of a uniquely owned node into `out` (used by the iterative drop so a
    /// deep tree never recurses). Shared nodes are only released (refcount decrement).
    pub(crate) fn release_into(self, out: &mut Vec<Child<V>>) {
        fn take<T: InnerNode<V, Child<V>>, V>(a: Arc<T>, out: &mut Vec<Child<V>>) {
            if let Some(mut node) = Arc::into_inner(a) {
                node.drain(&mut |_, c| out.push(c));
            }
        }
        match self {
            Child::Leaf(_) => {}
            Child::N4(a) => take(a, out),
            Child::N16(a) => take(a, out),
            Child::N48(a) => take(a, out),
            Child::N256(a) => take(a, out),
        }
    }
}

impl<V: Summarize> Child<V> {
    /// Aggregate of this subtree (a leaf summarises its own value).
    #[inline]
    pub(crate) fn summary(&self) -> Summary {
        dispatch!(self, n => n.header().summary, l => l.value.summary())
    }
}

impl<V: Clone> Child<V> {
    /// Copy-on-write access to the header: clones the node first if it is shared.
    pub(crate) fn header_mut(&mut self) -> Option<&mut Header<V>> {
        dispatch!(self, n => Some(Arc::make_mut(n).header_mut()), _l => None)
    }

    /// Copy-on-write access to the slot of the child at `byte`.
    pub(crate) fn find_slot_mut(&mut self, byte: u8) -> Option<&mut Option<Child<V>>> {
        dispatch!(self, n => Arc::make_mut(n).find_slot_mut(byte), _l => None)
    }

    /// Copy-on-write removal of the child at `byte` (no shrink; the caller fixes the node up).
    pub(crate) fn take_child(&mut self, byte: u8) -> Option<Child<V>> {
        dispatch!(self, n => Arc::make_mut(n).take(byte), _l => None)
    }
}
