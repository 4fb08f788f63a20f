//! Node4 and Node16: up to N children kept in two parallel arrays sorted by edge byte
//! (ART paper §III-A), one type generic over the capacity. Search is a linear scan over at most
//! 16 bytes, which the compiler vectorises well enough; SIMD intrinsics are not needed.

use super::node::{Header, InnerNode};

/// Inner node with at most `N` children, edge bytes sorted ascending in `keys[..len]` and the
/// matching children in `children[..len]` (always `Some` below `len`, `None` above).
///
/// `repr(C)` with the fields in lookup order: the count and edge bytes, then the header (prefix
/// first), then the children, so a lookup reads the node's first cache line and one child slot.
#[derive(Clone)]
#[repr(C)]
pub(crate) struct Sorted<V, C, const N: usize> {
    len: u8,
    keys: [u8; N],
    header: Header<V>,
    children: [Option<C>; N],
}

/// ART Node4: up to 4 children of type `C`.
pub(crate) type Node4<V, C> = Sorted<V, C, 4>;
/// ART Node16: up to 16 children of type `C`.
pub(crate) type Node16<V, C> = Sorted<V, C, 16>;

impl<V, C, const N: usize> Sorted<V, C, N> {
    pub(crate) fn new(header: Header<V>) -> Self {
        Sorted {
            header,
            len: 0,
            keys: [0; N],
            children: std::array::from_fn(|_| None),
        }
    }

    #[inline]
    fn position(&self, byte: u8) -> Option<usize> {
        self.keys[..usize::from(self.len)]
            .iter()
            .position(|&k| k == byte)
    }
}

impl<V, C, const N: usize> InnerNode<V, C> for Sorted<V, C, N> {
    #[inline]
    fn header(&self) -> &Header<V> {
        &self.header
    }

    fn header_mut(&mut self) -> &mut Header<V> {
        &mut self.header
    }

    fn count(&self) -> usize {
        usize::from(self.len)
    }

    fn is_full(&self) -> bool {
        usize::from(self.len) >= N
    }

    #[inline]
    fn find(&self, byte: u8) -> Option<&C> {
        self.position(byte).and_then(|i| self.children[i].as_ref())
    }

    fn find_slot_mut(&mut self, byte: u8) -> Option<&mut Option<C>> {
        self.position(byte).map(|i| &mut self.children[i])
    }

    fn next_from(&self, from: u16) -> Option<(u8, &C)> {
        let len = usize::from(self.len);
        let i = self.keys[..len].partition_point(|&k| u16::from(k) < from);
        if i < len {
            self.children[i].as_ref().map(|c| (self.keys[i], c))
        } else {
            None
        }
    }

    fn prev_before(&self, below: u16) -> Option<(u8, &C)> {
        let len = usize::from(self.len);
        let i = self.keys[..len].partition_point(|&k| u16::from(k) < below);
        let i = i.checked_sub(1)?;
        self.children[i].as_ref().map(|c| (self.keys[i], c))
    }

    fn add(&mut self, byte: u8, child: C) {
        let len = usize::from(self.len);
        debug_assert!(len < N, "add on a full node");
        debug_assert!(self.position(byte).is_none(), "add of a present edge");
        if len >= N {
            return;
        }
        let pos = self.keys[..len].partition_point(|&k| k < byte);
        self.keys.copy_within(pos..len, pos + 1);
        self.children[pos..=len].rotate_right(1);
        self.keys[pos] = byte;
        self.children[pos] = Some(child);
        self.len += 1;
    }

    fn take(&mut self, byte: u8) -> Option<C> {
        let pos = self.position(byte)?;
        let len = usize::from(self.len);
        let child = self.children[pos].take();
        self.keys.copy_within(pos + 1..len, pos);
        self.children[pos..len].rotate_left(1);
        self.len -= 1;
        child
    }

    fn drain(&mut self, out: &mut dyn FnMut(u8, C)) {
        let len = usize::from(self.len);
        self.len = 0;
        for i in 0..len {
            if let Some(c) = self.children[i].take() {
                out(self.keys[i], c);
            }
        }
    }
}
