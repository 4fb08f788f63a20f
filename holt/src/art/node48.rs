//! Node48: a 256-entry index from edge byte to one of 48 child slots (ART paper §III-A).

use super::node::{Header, InnerNode};

/// Inner node with 17..=48 children. `index[byte]` is 0 when the edge is absent, otherwise
/// `slot + 1`; `children[slot]` holds the child.
#[derive(Clone)]
#[repr(C)]
pub(crate) struct Node48<V, C> {
    header: Header<V>,
    len: u8,
    index: [u8; 256],
    children: [Option<C>; 48],
}

impl<V, C> Node48<V, C> {
    pub(crate) fn new(header: Header<V>) -> Self {
        Node48 {
            header,
            len: 0,
            index: [0; 256],
            children: std::array::from_fn(|_| None),
        }
    }

    #[inline]
    fn slot(&self, byte: u8) -> Option<usize> {
        match self.index[usize::from(byte)] {
            0 => None,
            i => Some(usize::from(i) - 1),
        }
    }
}

impl<V, C> InnerNode<V, C> for Node48<V, C> {
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
        usize::from(self.len) >= 48
    }

    #[inline]
    fn find(&self, byte: u8) -> Option<&C> {
        self.slot(byte).and_then(|s| self.children[s].as_ref())
    }

    fn find_slot_mut(&mut self, byte: u8) -> Option<&mut Option<C>> {
        self.slot(byte).map(|s| &mut self.children[s])
    }

    fn next_from(&self, from: u16) -> Option<(u8, &C)> {
        let start = usize::from(from).min(256);
        self.index[start..]
            .iter()
            .position(|&i| i != 0)
            .and_then(|off| {
                let byte = (start + off) as u8;
                self.find(byte).map(|c| (byte, c))
            })
    }

    fn prev_before(&self, below: u16) -> Option<(u8, &C)> {
        let end = usize::from(below).min(256);
        self.index[..end]
            .iter()
            .rposition(|&i| i != 0)
            .and_then(|pos| {
                let byte = pos as u8;
                self.find(byte).map(|c| (byte, c))
            })
    }

    fn add(&mut self, byte: u8, child: C) {
        debug_assert!(self.slot(byte).is_none(), "add of a present edge");
        let Some(free) = self.children.iter().position(Option::is_none) else {
            debug_assert!(false, "add on a full Node48");
            return;
        };
        self.children[free] = Some(child);
        self.index[usize::from(byte)] = (free + 1) as u8;
        self.len += 1;
    }

    fn take(&mut self, byte: u8) -> Option<C> {
        let s = self.slot(byte)?;
        self.index[usize::from(byte)] = 0;
        self.len -= 1;
        self.children[s].take()
    }

    fn drain(&mut self, out: &mut dyn FnMut(u8, C)) {
        self.len = 0;
        for byte in 0..=255u8 {
            if let Some(s) = self.slot(byte) {
                self.index[usize::from(byte)] = 0;
                if let Some(c) = self.children[s].take() {
                    out(byte, c);
                }
            }
        }
    }
}
