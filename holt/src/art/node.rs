//! Node vocabulary shared by every ART node kind: byte strings with a small inline form, leaves,
//! the inner-node header (compressed prefix + terminal slot) and the [`InnerNode`] trait that
//! Node4/16/48/256 implement. The node kinds are generic over their child pointer `C`, so they
//! sit below the pointer enum that names them all (`child.rs`, where `C = Child<V>`).
//!
//! Invariants kept by the tree (see `mod.rs` for where):
//! - An inner node always holds at least two entries (children plus the terminal slot). A node
//!   that would drop to one entry is collapsed into that entry by the remover.
//! - Every key below an inner node that starts at key offset `d` shares `key[d..d + prefix.len()]
//!   == prefix` (pessimistic path compression: the full prefix is stored, never truncated).
//! - The terminal leaf of an inner node is the key that ends exactly after the prefix.
//! - A leaf stores its full key (lazy expansion: a lone key under a subtree is one leaf).

use std::sync::Arc;

/// Bytes stored inline when a node prefix is at most this long (no separate heap block).
pub(crate) const INLINE_BYTES: usize = 22;

/// Bytes of a leaf's key stored inline in the leaf (longer keys go to the heap). A point lookup
/// compares the full key at the leaf (lazy expansion), so keeping typical keys (path-shaped
/// metadata keys are 40–60 bytes) inside the leaf saves one dependent cache miss per lookup.
pub(crate) const LEAF_INLINE_BYTES: usize = 62;

/// An immutable byte string that stores up to `N` bytes inline (`N + 2` bytes total, at least
/// the footprint of a `Box<[u8]>` plus tag), and longer strings on the heap. `N <= 255`.
#[derive(Clone)]
pub(crate) enum Bytes<const N: usize = INLINE_BYTES> {
    Inline { len: u8, buf: [u8; N] },
    Heap(Box<[u8]>),
}

/// A leaf's full key.
pub(crate) type KeyBytes = Bytes<LEAF_INLINE_BYTES>;

impl<const N: usize> Bytes<N> {
    pub(crate) const EMPTY: Bytes<N> = Bytes::Inline {
        len: 0,
        buf: [0; N],
    };

    pub(crate) fn from_slice(bytes: &[u8]) -> Self {
        if bytes.len() <= N && N <= usize::from(u8::MAX) {
            let mut buf = [0u8; N];
            buf[..bytes.len()].copy_from_slice(bytes);
            Bytes::Inline {
                len: bytes.len() as u8,
                buf,
            }
        } else {
            Bytes::Heap(bytes.into())
        }
    }

    /// Concatenation `a ++ [byte] ++ b`, used when a node is merged into its only child.
    pub(crate) fn concat3(a: &[u8], byte: u8, b: &[u8]) -> Self {
        let mut v = Vec::with_capacity(a.len() + 1 + b.len());
        v.extend_from_slice(a);
        v.push(byte);
        v.extend_from_slice(b);
        Bytes::from_slice(&v)
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Inline { len, buf } => &buf[..usize::from(*len)],
            Bytes::Heap(b) => b,
        }
    }

    /// Heap bytes owned beyond the inline footprint.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Bytes::Inline { .. } => 0,
            Bytes::Heap(b) => b.len(),
        }
    }
}

/// A key/value pair. The key is the full key (lazy expansion), inline up to
/// [`LEAF_INLINE_BYTES`]; `repr(C)` keeps the key first so the compare reads the leaf's first
/// cache line(s) and the value right after.
#[repr(C)]
pub(crate) struct Leaf<V> {
    pub(crate) key: KeyBytes,
    pub(crate) value: V,
}

impl<V> Leaf<V> {
    pub(crate) fn new(key: &[u8], value: V) -> Self {
        Leaf {
            key: Bytes::from_slice(key),
            value,
        }
    }
}

/// What a stored value tells the tree about itself, aggregated per subtree into a [`Summary`].
///
/// holt stores MVCC slots: a slot is *live* when it holds a value and *dead* when it is a
/// tombstone, and its *stamp* is the commit version that wrote it. The aggregates let readers
/// skip subtrees that hold only tombstones and let the pruner skip subtrees without tombstones.
pub trait Summarize {
    /// False for a tombstone.
    fn is_live(&self) -> bool;
    /// A monotone stamp (holt: the commit version that wrote the value).
    fn stamp(&self) -> u64;

    /// The summary of a subtree holding only this value.
    fn summary(&self) -> Summary {
        let live = self.is_live();
        Summary {
            live: u64::from(live),
            dead: u64::from(!live),
            max_stamp: self.stamp(),
        }
    }
}

/// Aggregate facts about every leaf of a subtree, kept in each inner node's header.
///
/// `live` and `dead` are exact (maintained by deltas along the written key's path).
/// `max_stamp` is an upper bound: inserts raise it exactly, removals never lower it, so it may
/// exceed the largest stamp still present (callers must treat it as "at most").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Leaves whose value is live.
    pub live: u64,
    /// Leaves whose value is a tombstone.
    pub dead: u64,
    /// Upper bound of the leaves' stamps (0 for an empty subtree).
    pub max_stamp: u64,
}

impl Summary {
    /// Combines the summaries of two disjoint subtrees.
    pub(crate) fn merge(self, other: Summary) -> Summary {
        Summary {
            live: self.live.saturating_add(other.live),
            dead: self.dead.saturating_add(other.dead),
            max_stamp: self.max_stamp.max(other.max_stamp),
        }
    }

    /// Adds one leaf with `leaf`'s summary (an insert below this subtree).
    pub(crate) fn add(&mut self, leaf: Summary) {
        *self = self.merge(leaf);
    }

    /// Removes one leaf with `leaf`'s summary; `max_stamp` stays (an upper bound).
    pub(crate) fn sub(&mut self, leaf: Summary) {
        self.live = self.live.saturating_sub(leaf.live);
        self.dead = self.dead.saturating_sub(leaf.dead);
    }
}

/// Fields every inner node carries. `repr(C)`: the prefix (read by every lookup) comes first,
/// the summary (read only by filtered scans and writers) last.
#[repr(C)]
pub(crate) struct Header<V> {
    /// Compressed path: bytes every key below this node has at `[depth, depth + len)`.
    pub(crate) prefix: Bytes,
    /// The leaf whose key ends exactly after `prefix` (a key that is a prefix of the others).
    pub(crate) terminal: Option<Arc<Leaf<V>>>,
    /// Aggregate over every leaf below this node, the terminal included.
    pub(crate) summary: Summary,
}

impl<V> Header<V> {
    pub(crate) fn new(prefix: &[u8]) -> Self {
        Header {
            prefix: Bytes::from_slice(prefix),
            terminal: None,
            summary: Summary::default(),
        }
    }
}

impl<V> Default for Header<V> {
    fn default() -> Self {
        Header {
            prefix: Bytes::EMPTY,
            terminal: None,
            summary: Summary::default(),
        }
    }
}

impl<V> Clone for Header<V> {
    fn clone(&self) -> Self {
        Header {
            prefix: self.prefix.clone(),
            terminal: self.terminal.clone(),
            summary: self.summary,
        }
    }
}

/// Behaviour shared by Node4, Node16, Node48 and Node256, whose children are of type `C`.
pub(crate) trait InnerNode<V, C>: Sized {
    fn header(&self) -> &Header<V>;
    fn header_mut(&mut self) -> &mut Header<V>;
    /// Number of children (the terminal slot is not counted).
    fn count(&self) -> usize;
    /// True when `add` of a new edge byte would not fit.
    fn is_full(&self) -> bool;
    fn find(&self, byte: u8) -> Option<&C>;
    fn find_slot_mut(&mut self, byte: u8) -> Option<&mut Option<C>>;
    /// The child with the smallest edge byte `>= from`; `from` ranges over `0..=256`.
    fn next_from(&self, from: u16) -> Option<(u8, &C)>;
    /// The child with the largest edge byte `< below`; `below` ranges over `0..=256`.
    fn prev_before(&self, below: u16) -> Option<(u8, &C)>;
    /// Adds a child under an edge byte that is absent. Callers grow a full node first; on a
    /// full node (a broken caller) the child is dropped and a debug assertion fires.
    fn add(&mut self, byte: u8, child: C);
    fn take(&mut self, byte: u8) -> Option<C>;
    /// Moves every child out in edge-byte order, leaving the node empty.
    fn drain(&mut self, out: &mut dyn FnMut(u8, C));
    /// Heap footprint of the node itself (struct size; prefix heap bytes are added separately).
    fn self_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

/// Moves the contents of node `from` (header and children) into a fresh node of another kind.
/// The caller guarantees the target kind has room for every child.
pub(crate) fn convert<V, C, A: InnerNode<V, C>, B: InnerNode<V, C>>(
    mut from: A,
    new: fn(Header<V>) -> B,
) -> B {
    let moved = from.count();
    let header = std::mem::take(from.header_mut());
    let mut to = new(header);
    from.drain(&mut |b, c| to.add(b, c));
    debug_assert_eq!(to.count(), moved, "convert dropped a child");
    to
}

/// Length of the common prefix of `a` and `b`.
#[inline]
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
