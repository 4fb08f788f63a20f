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

/// An inner node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Inner<'a> {
    /// Compressed path: the key bytes between the parent's edge byte and this node's edges.
    pub(crate) prefix: &'a [u8],
    /// Subtree summary (stored for versioned trees and the history tree only).
    pub(crate) summary: Option<Summary>,
    /// File offset of the terminal leaf.
    pub(crate) terminal: Option<u64>,
    bitmap: bool,
    #[cfg_attr(not(test), allow(dead_code))]
    count: usize,
    width: usize,
    /// Sorted edge bytes (`count` of them) or the 32-byte edge bitmap.
    edges: &'a [u8],
    /// `count` child references, `width` bytes each.
    refs: &'a [u8],
}

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
            let summary = if tag & F_SUMMARY != 0 {
                Some(Summary {
                    live: varint(b, &mut pos)?,
                    dead: varint(b, &mut pos)?,
                    max_stamp: varint(b, &mut pos)?,
                })
            } else {
                None
            };
            let terminal = if tag & F_TERMINAL != 0 {
                let s = b
                    .get(pos..pos + width)
                    .ok_or(ParseError::Bad("truncated node"))?;
                pos += width;
                Some(read_ref(s))
            } else {
                None
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
            let prefix = &b[pos..pos + prefix_len];
            let edges = &b[pos + prefix_len..pos + prefix_len + edges_len];
            let refs = &b[pos + prefix_len + edges_len..total];
            if bitmap {
                let ones: u32 = (0..4).map(|i| word(edges, i).count_ones()).sum();
                if ones as usize != count {
                    return Err(ParseError::Bad(
                        "edge bitmap does not match the child count",
                    ));
                }
            } else if edges.windows(2).any(|w| w[0] >= w[1]) {
                return Err(ParseError::Bad("edge bytes are not strictly ascending"));
            }
            Ok(Rec::Inner(Inner {
                prefix,
                summary,
                terminal,
                bitmap,
                count,
                width,
                edges,
                refs,
            }))
        }
        _ => Err(ParseError::Bad("not a node or leaf record")),
    }
}

impl<'a> Inner<'a> {
    /// Number of children (the terminal not counted; at least 1).
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    #[inline]
    fn ref_at(&self, i: usize) -> Option<u64> {
        let w = self.width;
        self.refs.get(i * w..i * w + w).map(read_ref)
    }

    /// Rank of edge `b` in a bitmap node (number of set bits below it).
    #[inline]
    fn rank(&self, b: u8) -> usize {
        let wi = usize::from(b >> 6);
        let bit = u32::from(b & 63);
        let mut r = (word(self.edges, wi) & ((1u64 << bit) - 1)).count_ones() as usize;
        for j in 0..wi {
            r += word(self.edges, j).count_ones() as usize;
        }
        r
    }

    #[inline]
    fn has_bit(&self, b: u8) -> bool {
        word(self.edges, usize::from(b >> 6)) >> (b & 63) & 1 == 1
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
            let i = self.edges.iter().position(|&e| e == b)?;
            self.ref_at(i)
        }
    }

    /// The child with the smallest edge byte `>= from` (`from` in `0..=256`).
    #[inline]
    pub(crate) fn next_from(&self, from: u16) -> Option<(u8, u64)> {
        if self.bitmap {
            let mut i = usize::from(from);
            while i < 256 {
                let w = word(self.edges, i >> 6) >> (i & 63);
                if w != 0 {
                    let b = (i + w.trailing_zeros() as usize) as u8;
                    return self.ref_at(self.rank(b)).map(|r| (b, r));
                }
                i = ((i >> 6) + 1) << 6;
            }
            None
        } else {
            let i = self.edges.partition_point(|&e| u16::from(e) < from);
            let b = *self.edges.get(i)?;
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
                let w = word(self.edges, wi) << shift;
                if w != 0 {
                    let b = (top - w.leading_zeros() as usize) as u8;
                    return self.ref_at(self.rank(b)).map(|r| (b, r));
                }
                i = wi << 6;
            }
            None
        } else {
            let i = self.edges.partition_point(|&e| u16::from(e) < below);
            let i = i.checked_sub(1)?;
            let b = *self.edges.get(i)?;
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
            assert_eq!(n.prefix, b"pre");
            assert_eq!(n.terminal, Some(7));
            assert_eq!(n.count(), edges.len());
            for b in 0..=255u8 {
                let want = edges.contains(&b).then(|| 1000 + u64::from(b));
                assert_eq!(n.find(b), want, "find {b}");
            }
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
