//! Node256: one child slot per edge byte (ART paper §III-A).

use super::node::{Header, InnerNode};

/// Inner node with 49..=256 children, indexed directly by edge byte.
#[derive(Clone)]
#[repr(C)]
pub(crate) struct Node256<V, C> {
    header: Header<V>,
    len: u16,
    children: [Option<C>; 256],
}

impl<V, C> Node256<V, C> {
    pub(crate) fn new(header: Header<V>) -> Self {
        Node256 {
            header,
            len: 0,
            children: std::array::from_fn(|_| None),
        }
    }
}

impl<V, C> InnerNode<V, C> for Node256<V, C> {
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
        false
    }

    #[inline]
    fn find(&self, byte: u8) -> Option<&C> {
        self.children[usize::from(byte)].as_ref()
    }

    fn find_slot_mut(&mut self, byte: u8) -> Option<&mut Option<C>> {
        let slot = &mut self.children[usize::from(byte)];
        if slot.is_some() {
            Some(slot)
        } else {
            None
        }
    }

    fn next_from(&self, from: u16) -> Option<(u8, &C)> {
        let start = usize::from(from).min(256);
        self.children[start..]
            .iter()
            .enumerate()
            .find_map(|(off, c)| c.as_ref().map(|c| ((start + off) as u8, c)))
    }

    fn prev_before(&self, below: u16) -> Option<(u8, &C)> {
        let end = usize::from(below).min(256);
        self.children[..end]
            .iter()
            .enumerate()
            .rev()
            .find_map(|(pos, c)| c.as_ref().map(|c| (pos as u8, c)))
    }

    fn add(&mut self, byte: u8, child: C) {
        let slot = &mut self.children[usize::from(byte)];
        debug_assert!(slot.is_none(), "add of a present edge");
        if slot.is_none() {
            self.len += 1;
        }
        *slot = Some(child);
    }

    fn take(&mut self, byte: u8) -> Option<C> {
        let c = self.children[usize::from(byte)].take();
        if c.is_some() {
            self.len -= 1;
        }
        c
    }

    fn drain(&mut self, out: &mut dyn FnMut(u8, C)) {
        self.len = 0;
        for (byte, slot) in self.children.iter_mut().enumerate() {
            if let Some(c) = slot.take() {
                out(byte as u8, c);
            }
        }
    }
}
