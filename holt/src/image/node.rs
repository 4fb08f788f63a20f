//! Decoded views of image records (leaves and inner nodes), borrowed from the mapped file.
//!
//! ```text
//! leaf   u8 tag (T_LEAF | F_TOMBSTONE? | F_VERSION?) | varint suffix_len | [varint value_len]
//!        | [varint version] | suffix | [value]
//! inner  u8 tag (T_SORTED|T_BITMAP | F_TERMINAL? | F_SUMMARY? | (width-1) << 4) | u8 count-1
//!        | varint prefix_len | [varint live | varint dead | varint max_version]
//!        | [terminal ref: width bytes] | prefix | edges (count bytes, or a 32-byte bitmap)
//!        | count × child ref (width bytes each)
//! ```
//!
//! All length fields come first, so the first few bytes of a record give its total length: a
//! record that does not fit in the rest of its block is a *large record* that starts at a block
//! boundary (its header is always in its first block).

use crate::art::Summary;

use super::format::{
    get_varint, read_ref, BITMAP_BYTES, F_SUMMARY, F_TERMINAL, F_TOMBSTONE, F_VERSION, SORTED_MAX,
    TYPE_MASK, T_BITMAP, T_LEAF, T_SORTED, WIDTH_SHIFT,
};

/// One key's slot: the key bytes after its parent's edge byte (the whole key for a leaf root,
/// nothing for a terminal leaf), the commit version (0 when the tree keeps none) and the value
/// (`None`: a tombstone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Leaf<'a> {
    pub(crate) suffix: &'a [u8],
    pub(crate) version: u64,
    pub(crate) value: Option<&'a [u8]>,
}

impl Leaf<'_> {
    /// The summary of a subtree holding only this slot.
    #[inline]
    pub(crate) fn summary(&self) -> Summary {
        let live = self.value.is_some();
        Summary {
            live: u64::from(live),
            dead: u64::from(!live),
            max_stamp: self.version,
        }
    }
}

/// An inner node: a view of its record, kept small (it is copied into every cursor frame).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Inner<'a> {
    /// The whole record.
    rec: &'a [u8],
    /// File offset of the terminal leaf (`NONE`: no terminal).
    terminal: u64,
    prefix_at: u32,
    edges_at: u32,
    refs_at: u32,
    /// Where the summary varints start (0: no summary).
    summary_at: u32,
    count: u16,
    width: u8,
    bitmap: bool,
}

/// `Inner::terminal` when the node has none.
const NONE: u64 = u64::MAX;

/// A decoded record.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Rec<'a> {
    Leaf(Leaf<'a>),
    Inner(Inner<'a>),
}

/// Why a record could not be decoded from the bytes given.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// The record is `usize` bytes long, more than were given (a large record: fetch and retry).
    Short(usize),
    /// The bytes are not a valid record.
    Bad(&'static str),
}

#[inline]
fn varint(b: &[u8], pos: &mut usize) -> Result<u64, ParseError> {
    get_varint(b, pos).ok_or(ParseError::Bad("truncated or overlong varint"))
}

#[inline]
fn len_of(v: u64) -> Result<usize, ParseError> {
    usize::try_from(v).map_err(|_| ParseError::Bad("length does not fit in memory"))
}

#[inline]
fn word(b: &[u8], i: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(i * 8..i * 8 + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

/// Decodes the record at the start of `b`. `b` may extend past the record.
pub(crate) fn parse(b: &[u8]) -> Result<Rec<'_>, ParseError> {
    let tag = *b.first().ok_or(ParseError::Bad("empty record"))?;
    let mut pos = 1usize;
    match tag & TYPE_MASK {
        T_LEAF => {
            if tag & !(TYPE_MASK | F_TOMBSTONE | F_VERSION) != 0 {
                return Err(ParseError::Bad("unknown leaf flags"));
            }
            let suffix_len = len_of(varint(b, &mut pos)?)?;
            let tombstone = tag & F_TOMBSTONE != 0;
            let value_len = if tombstone {
                0
            } else {
                len_of(varint(b, &mut pos)?)?
            };
            let version = if tag & F_VERSION != 0 {
                varint(b, &mut pos)?
            } else {
                0
            };
            let total = pos
                .checked_add(suffix_len)
                .and_then(|t| t.checked_add(value_len))
                .ok_or(ParseError::Bad("leaf length overflows"))?;
            if total > b.len() {
                return Err(ParseError::Short(total));
            }
            let suffix = &b[pos..pos + suffix_len];
            let value = (!tombstone).then(|| &b[pos + suffix_len..total]);
            Ok(Rec::Leaf(Leaf {
                suffix,
                version,
                value,
            }))
        }
        kind @ (T_SORTED | T_BITMAP) => {
            if tag & 0x80 != 0 {
                return Err(ParseError::Bad("unknown inner-node flags"));
            }
            let width = usize::from((tag >> WIDTH_SHIFT) & 0x7) + 1;
            let count = usize::from(*b.get(1).ok_or(ParseError::Bad("truncated node"))?) + 1;
            pos = 2;
            let bitmap = kind == T_BITMAP;
            if !bitmap && count > SORTED_MAX {
                return Err(ParseError::Bad("sorted node with too many children"));
            }
            let prefix_len = len_of(varint(b, &mut pos)?)?;
            let summary_at = if tag & F_SUMMARY != 0 {
                let at = pos;
                for _ in 0..3 {
                    varint(b, &mut pos)?;
                }
                at
            } else {
                0
            };
            let terminal = if tag & F_TERMINAL != 0 {
                let s = b
                    .get(pos..pos + width)
                    .ok_or(ParseError::Bad("truncated node"))?;
                pos += width;
                read_ref(s)
            } else {
                NONE
            };
            let edges_len = if bitmap { BITMAP_BYTES } else { count };
            let total = pos
                .checked_add(prefix_len)
                .and_then(|t| t.checked_add(edges_len))
                .and_then(|t| t.checked_add(count * width))
                .ok_or(ParseError::Bad("node length overflows"))?;
            if total > b.len() {
                return Err(ParseError::Short(total));
            }
            let small = |v: usize| u32::try_from(v).map_err(|_| ParseError::Bad("node too large"));
            let node = Inner {
                rec: &b[..total],
                terminal,
                prefix_at: small(pos)?,
                edges_at: small(pos + prefix_len)?,
                refs_at: small(pos + prefix_len + edges_len)?,
                summary_at: small(summary_at)?,
                count: count as u16,
                width: width as u8,
                bitmap,
            };
            // Every read below is bounds-checked, so a bitmap that disagrees with the count can
            // only make a lookup miss; it is refused here because that is cheap to check. (The
            // order of sorted edge bytes is not re-checked on every read.)
            if bitmap {
                let edges = node.edges();
                let ones: u32 = (0..4).map(|i| word(edges, i).count_ones()).sum();
                if ones as usize != count {
                    return Err(ParseError::Bad(
                        "edge bitmap does not match the child count",
                    ));
                }
            }
            Ok(Rec::Inner(node))
        }
        _ => Err(ParseError::Bad("not a node or leaf record")),
    }
}

impl<'a> Inner<'a> {
    /// Number of children (the terminal not counted; at least 1).
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        usize::from(self.count)
    }

    /// Compressed path: the key bytes between the parent's edge byte and this node's edges.
    #[inline]
    pub(crate) fn prefix(&self) -> &'a [u8] {
        self.rec
            .get(self.prefix_at as usize..self.edges_at as usize)
            .unwrap_or_default()
    }

    /// File offset of the terminal leaf.
    #[inline]
    pub(crate) fn terminal(&self) -> Option<u64> {
        (self.terminal != NONE).then_some(self.terminal)
    }

    /// Subtree summary (stored for versioned trees and the history tree only).
    #[inline]
    pub(crate) fn summary(&self) -> Option<Summary> {
        if self.summary_at == 0 {
            return None;
        }
        let mut pos = self.summary_at as usize;
        Some(Summary {
            live: get_varint(self.rec, &mut pos)?,
            dead: get_varint(self.rec, &mut pos)?,
            max_stamp: get_varint(self.rec, &mut pos)?,
        })
    }

    #[inline]
    fn edges(&self) -> &'a [u8] {
        self.rec
            .get(self.edges_at as usize..self.refs_at as usize)
            .unwrap_or_default()
    }

    #[inline]
    fn ref_at(&self, i: usize) -> Option<u64> {
        let w = usize::from(self.width);
        let at = self.refs_at as usize + i * w;
        self.rec.get(at..at + w).map(read_ref)
    }

    /// Rank of edge `b` in a bitmap node (number of set bits below it).
    #[inline]
    fn rank(&self, b: u8) -> usize {
        let wi = usize::from(b >> 6);
        let bit = u32::from(b & 63);
        let edges = self.edges();
        let mut r = (word(edges, wi) & ((1u64 << bit) - 1)).count_ones() as usize;
        for j in 0..wi {
            r += word(edges, j).count_ones() as usize;
        }
        r
    }

    #[inline]
    fn has_bit(&self, b: u8) -> bool {
        word(self.edges(), usize::from(b >> 6)) >> (b & 63) & 1 == 1
    }

    /// The offset of the child under edge byte `b`.
    #[inline]
    pub(crate) fn find(&self, b: u8) -> Option<u64> {
        if self.bitmap {
            if !self.has_bit(b) {
                return None;
            }
            self.ref_at(self.rank(b))
        } else {
            let i = self.edges().iter().position(|&e| e == b)?;
            self.ref_at(i)
        }
    }

    /// Number of children with an edge byte `< from` (`from` in `0..=256`): the index of the
    /// first child at or after `from`.
    #[inline]
    pub(crate) fn count_below(&self, from: u16) -> u16 {
        if self.bitmap {
            if from >= 256 {
                return self.count;
            }
            self.rank(from as u8) as u16
        } else {
            self.edges().partition_point(|&e| u16::from(e) < from) as u16
        }
    }

    /// The child at position (`from`, `index`) of an in-order walk: the child with the
    /// smallest edge byte `>= from`, whose index among the children is `index` (the walk keeps
    /// both: after child `(b, i)` comes `(b + 1, i + 1)`). No search: sorted nodes read entry
    /// `index`, bitmap nodes scan the bitmap from `from` and read reference `index`.
    #[inline]
    pub(crate) fn child_at(&self, from: u16, index: u16) -> Option<(u8, u64)> {
        if self.bitmap {
            let mut i = usize::from(from);
            while i < 256 {
                let w = word(self.edges(), i >> 6) >> (i & 63);
                if w != 0 {
                    let b = (i + w.trailing_zeros() as usize) as u8;
                    return self.ref_at(usize::from(index)).map(|r| (b, r));
                }
                i = ((i >> 6) + 1) << 6;
            }
            None
        } else {
            let b = *self.edges().get(usize::from(index))?;
            self.ref_at(usize::from(index)).map(|r| (b, r))
        }
    }

    /// Offsets of the first `n` children, in edge order.
    #[inline]
    pub(crate) fn first_children(&self, n: usize) -> impl Iterator<Item = u64> + '_ {
        (0..n.min(usize::from(self.count))).filter_map(|i| self.ref_at(i))
    }

    /// The child with the smallest edge byte `>= from` (`from` in `0..=256`).
    #[cfg(test)]
    pub(crate) fn next_from(&self, from: u16) -> Option<(u8, u64)> {
        if self.bitmap {
            let mut i = usize::from(from);
            while i < 256 {
                let w = word(self.edges(), i >> 6) >> (i & 63);
                if w != 0 {
                    let b = (i + w.trailing_zeros() as usize) as u8;
                    return self.ref_at(self.rank(b)).map(|r| (b, r));
                }
                i = ((i >> 6) + 1) << 6;
            }
            None
        } else {
            let edges = self.edges();
            let i = edges.partition_point(|&e| u16::from(e) < from);
            let b = *edges.get(i)?;
            self.ref_at(i).map(|r| (b, r))
        }
    }

    /// The child with the largest edge byte `< below` (`below` in `0..=256`).
    #[inline]
    pub(crate) fn prev_before(&self, below: u16) -> Option<(u8, u64)> {
        if self.bitmap {
            let mut i = usize::from(below);
            while i > 0 {
                let top = i - 1; // highest candidate bit
                let wi = top >> 6;
                let shift = 63 - (top & 63);
                let w = word(self.edges(), wi) << shift;
                if w != 0 {
                    let b = (top - w.leading_zeros() as usize) as u8;
                    return self.ref_at(self.rank(b)).map(|r| (b, r));
                }
                i = wi << 6;
            }
            None
        } else {
            let edges = self.edges();
            let i = edges.partition_point(|&e| u16::from(e) < below);
            let i = i.checked_sub(1)?;
            let b = *edges.get(i)?;
            self.ref_at(i).map(|r| (b, r))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::writer::encode_inner;
    use super::*;

    fn node(edges: &[u8], terminal: bool) -> Vec<u8> {
        let children: Vec<(u8, u64)> = edges.iter().map(|&b| (b, 1000 + u64::from(b))).collect();
        let mut buf = Vec::new();
        encode_inner(
            &mut buf,
            b"pre",
            &children,
            terminal.then_some(7),
            Some(Summary {
                live: 3,
                dead: 1,
                max_stamp: 9,
            }),
        );
        buf
    }

    #[test]
    fn sorted_and_bitmap_nodes_answer_find_next_and_prev_alike() {
        for edges in [
            vec![0u8, 5, 255],
            (0..16).map(|i| i * 7).collect::<Vec<u8>>(),
            (0..=255).step_by(3).collect(),
            (0..=255).collect(),
        ] {
            let buf = node(&edges, true);
            let Ok(Rec::Inner(n)) = parse(&buf) else {
                panic!("not an inner node");
            };
            assert_eq!(n.prefix(), b"pre");
            assert_eq!(n.terminal(), Some(7));
            assert_eq!(
                n.summary(),
                Some(Summary {
                    live: 3,
                    dead: 1,
                    max_stamp: 9
                })
            );
            assert_eq!(n.count(), edges.len());
            for b in 0..=255u8 {
                let want = edges.contains(&b).then(|| 1000 + u64::from(b));
                assert_eq!(n.find(b), want, "find {b}");
            }
            let mut walked = Vec::new();
            let (mut from, mut index) = (0u16, 0u16);
            while let Some((b, off)) = n.child_at(from, index) {
                walked.push((b, off));
                from = u16::from(b) + 1;
                index += 1;
                assert_eq!(n.count_below(from), index);
            }
            let want: Vec<(u8, u64)> = edges.iter().map(|&e| (e, 1000 + u64::from(e))).collect();
            assert_eq!(walked, want);
            assert_eq!(
                n.first_children(3).collect::<Vec<_>>(),
                want.iter().take(3).map(|w| w.1).collect::<Vec<_>>()
            );
            for from in 0..=256u16 {
                let want = edges.iter().find(|&&e| u16::from(e) >= from);
                assert_eq!(
                    n.next_from(from),
                    want.map(|&e| (e, 1000 + u64::from(e))),
                    "next_from {from}"
                );
                let want = edges.iter().rev().find(|&&e| u16::from(e) < from);
                assert_eq!(
                    n.prev_before(from),
                    want.map(|&e| (e, 1000 + u64::from(e))),
                    "prev_before {from}"
                );
            }
        }
    }

    #[test]
    fn truncated_records_report_their_length_and_garbage_is_refused() {
        let buf = node(&[1, 2, 3], false);
        assert_eq!(
            parse(&buf[..buf.len() - 1]).unwrap_err(),
            ParseError::Short(buf.len())
        );
        assert!(matches!(parse(&[0xff, 0, 0]), Err(ParseError::Bad(_))));
        assert!(matches!(parse(&[]), Err(ParseError::Bad(_))));
    }
}
