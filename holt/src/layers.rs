//! One tree as a stack of **layers**, newest first: the in-memory delta (an ART of the writes
//! since the newest image), the frozen delta being written to an image (if any), then the image
//! runs, newest first. A key's slot is its slot in the first layer that holds it; a tombstone
//! there hides the key in every older layer.
//!
//! [`Layer`] is one layer of one tree, [`LayerCursor`] a listing cursor over it, and [`Merged`]
//! merges the cursors of several layers into one ordered stream: a key comes from its newest
//! layer, a common prefix records which layers produced it.

use std::borrow::Cow;

use crate::art::{ListIter, ListRef, Summary, Verdict};
use crate::error::Result;
use crate::image::{self, Image, ImgItem, ImgList, Leaf, Root};
use crate::slot::{Slot, TreeMap};

/// A slot read from any layer: the value (`None`: a tombstone) and the commit version that
/// wrote it (0 in image layers of trees that keep no versions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotRef<'a> {
    pub(crate) value: Option<&'a [u8]>,
    pub(crate) version: u64,
}

impl<'a> SlotRef<'a> {
    #[inline]
    pub(crate) fn of(slot: &'a Slot) -> Self {
        SlotRef {
            value: slot.value.as_deref(),
            version: slot.version,
        }
    }

    #[inline]
    pub(crate) fn of_leaf(l: Leaf<'a>) -> Self {
        SlotRef {
            value: l.value,
            version: l.version,
        }
    }
}

/// One layer of one tree.
#[derive(Clone, Copy)]
pub(crate) enum Layer<'s> {
    /// An in-memory delta.
    Mem(&'s TreeMap),
    /// An image run.
    Img(&'s Image, Root),
}

impl<'s> Layer<'s> {
    /// The slot of `key` in this layer. Errors: `Corrupt` (images).
    #[inline]
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<SlotRef<'s>>> {
        match *self {
            Layer::Mem(t) => Ok(t.get(key).map(SlotRef::of)),
            Layer::Img(img, root) => Ok(image::get(img, root.off, key)?.map(SlotRef::of_leaf)),
        }
    }

    /// Live and dead slots of the whole tree in this layer (exact), and an upper bound of
    /// their commit versions.
    pub(crate) fn summary(&self) -> Summary {
        match *self {
            Layer::Mem(t) => t.summary(),
            Layer::Img(_, root) => root.summary,
        }
    }

    /// Whether some slot under `prefix` passes `classify` / `leaf` (see
    /// [`crate::art::Art::any_in_prefix`]; image nodes without a stored summary are opened).
    pub(crate) fn any_in_prefix(
        &self,
        prefix: &[u8],
        classify: &dyn Fn(&Summary) -> Verdict,
        leaf: &mut dyn FnMut(&[u8], SlotRef<'_>) -> Result<bool>,
    ) -> Result<bool> {
        match *self {
            Layer::Mem(t) => {
                t.any_in_prefix(prefix, classify, &mut |k, slot| leaf(k, SlotRef::of(slot)))
            }
            Layer::Img(img, root) => {
                image::any_in_prefix(img, root.off, prefix, classify, &mut |k, l| {
                    leaf(k, SlotRef::of_leaf(l))
                })
            }
        }
    }

    /// The slot with the greatest key strictly below `bound`. Errors: `Corrupt` (images).
    pub(crate) fn last_below(&self, bound: &[u8]) -> Result<Option<(Cow<'s, [u8]>, SlotRef<'s>)>> {
        match *self {
            Layer::Mem(t) => Ok(t
                .last_below(bound)
                .map(|(k, s)| (Cow::Borrowed(k), SlotRef::of(s)))),
            Layer::Img(img, root) => Ok(image::last_below(img, root.off, bound)?
                .map(|(k, l)| (Cow::Owned(k), SlotRef::of_leaf(l)))),
        }
    }

    /// A listing cursor over this layer (see [`crate::art::Art::list_iter`]); `skip` rules out
    /// subtrees by summary. Positioned before the first item. Errors: `Corrupt` (images).
    pub(crate) fn list<'f>(
        &self,
        prefix: &'f [u8],
        start_after: Option<&'f [u8]>,
        delimiter: Option<u8>,
        skip: Option<&'f SkipAll<'f>>,
    ) -> Result<LayerCursor<'f>>
    where
        's: 'f,
    {
        Ok(match *self {
            Layer::Mem(t) => {
                let it = match skip {
                    Some(f) => t.list_iter_filtered(prefix, start_after, delimiter, f),
                    None => t.list_iter(prefix, start_after, delimiter),
                };
                LayerCursor::Mem {
                    it,
                    cur: MemCur::None,
                    buf: Vec::new(),
                }
            }
            Layer::Img(img, root) => LayerCursor::Img(ImgList::new(
                img,
                root.off,
                prefix,
                start_after,
                delimiter,
                skip,
            )?),
        })
    }
}

/// A subtree filter usable by both layer kinds.
pub(crate) type SkipAll<'f> = dyn Fn(&Summary) -> bool + Sync + 'f;

#[derive(Clone, Copy)]
pub(crate) enum MemCur<'s> {
    None,
    Key(&'s [u8], &'s Slot),
    /// A common prefix, copied into the cursor's buffer.
    Group,
}

/// One item of a layer listing.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Item<'c> {
    Key(&'c [u8], SlotRef<'c>),
    Group(&'c [u8]),
}

impl<'c> Item<'c> {
    /// The item's bytes (key or common prefix).
    #[inline]
    pub(crate) fn bytes(&self) -> &'c [u8] {
        match *self {
            Item::Key(k, _) | Item::Group(k) => k,
        }
    }
}

/// A listing cursor over one layer; call [`LayerCursor::advance`] to reach the first item.
pub(crate) enum LayerCursor<'f> {
    Mem {
        it: ListIter<'f, Slot>,
        cur: MemCur<'f>,
        buf: Vec<u8>,
    },
    Img(ImgList<'f, 'f>),
}

impl LayerCursor<'_> {
    /// Moves to the next item. Errors: `Corrupt` (images; the cursor then ends).
    #[inline]
    pub(crate) fn advance(&mut self) -> Result<()> {
        match self {
            LayerCursor::Mem { it, cur, buf } => {
                *cur = match it.next_ref() {
                    None => MemCur::None,
                    Some(ListRef::Key(k, v)) => MemCur::Key(k, v),
                    Some(ListRef::CommonPrefix(p)) => {
                        buf.clear();
                        buf.extend_from_slice(p);
                        MemCur::Group
                    }
                };
                Ok(())
            }
            LayerCursor::Img(c) => c.advance(),
        }
    }

    /// The current item (`None` before the first advance and at the end).
    #[inline]
    pub(crate) fn current(&self) -> Option<Item<'_>> {
        match self {
            LayerCursor::Mem { cur, buf, .. } => match *cur {
                MemCur::None => None,
                MemCur::Key(k, s) => Some(Item::Key(k, SlotRef::of(s))),
                MemCur::Group => Some(Item::Group(buf)),
            },
            LayerCursor::Img(c) => c.current().map(|i| match i {
                ImgItem::Key(k, l) => Item::Key(k, SlotRef::of_leaf(l)),
                ImgItem::Group(p) => Item::Group(p),
            }),
        }
    }
}

/// The listing of several layers merged into one ordered stream (see the module docs). Layer
/// `i` of the cursors is layer `i` of the tree (newest first).
pub(crate) struct Merged<'f> {
    cursors: Vec<LayerCursor<'f>>,
    /// Bit `i`: cursor `i`'s current item has the bytes of the head.
    head: u64,
    /// The head is a common prefix (in at least one layer).
    group: bool,
}

/// The head of a [`Merged`] stream.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Head<'c> {
    /// A key with its slot from the newest layer holding it.
    Key { key: &'c [u8], slot: SlotRef<'c> },
    /// A common prefix and the set of layers (bits) that have keys under it.
    Group { prefix: &'c [u8], layers: u64 },
}

impl<'f> Merged<'f> {
    /// Merges `cursors` (at most 64, newest layer first), advancing each to its first item.
    /// Errors: `Corrupt` (images).
    pub(crate) fn new(mut cursors: Vec<LayerCursor<'f>>) -> Result<Self> {
        for c in &mut cursors {
            c.advance()?;
        }
        let mut m = Merged {
            cursors,
            head: 0,
            group: false,
        };
        m.find_head();
        Ok(m)
    }

    fn find_head(&mut self) {
        let mut best: Option<&[u8]> = None;
        let mut mask = 0u64;
        let mut group = false;
        for (i, c) in self.cursors.iter().enumerate() {
            let Some(item) = c.current() else { continue };
            let b = item.bytes();
            let is_group = matches!(item, Item::Group(_));
            match best {
                Some(cur) if b > cur => {}
                Some(cur) if b == cur => {
                    mask |= 1 << i;
                    group |= is_group;
                }
                _ => {
                    best = Some(b);
                    mask = 1 << i;
                    group = is_group;
                }
            }
        }
        self.head = mask;
        self.group = group;
    }

    /// The head item (`None` at the end).
    #[inline]
    pub(crate) fn head(&self) -> Option<Head<'_>> {
        if self.head == 0 {
            return None;
        }
        let first = self.head.trailing_zeros() as usize;
        match self.cursors.get(first)?.current()? {
            Item::Key(key, slot) if !self.group => Some(Head::Key { key, slot }),
            item => Some(Head::Group {
                prefix: item.bytes(),
                layers: self.head,
            }),
        }
    }

    /// Moves past the head. Errors: `Corrupt` (images).
    pub(crate) fn advance(&mut self) -> Result<()> {
        let mut bits = self.head;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if let Some(c) = self.cursors.get_mut(i) {
                if let Err(e) = c.advance() {
                    self.head = 0;
                    return Err(e);
                }
            }
        }
        self.find_head();
        Ok(())
    }
}
