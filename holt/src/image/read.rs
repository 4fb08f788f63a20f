//! Point lookups, predecessor search and subtree queries on one tree of an image.
//!
//! Every descent consumes at least one key byte per inner node (its edge byte), so lookups end
//! after at most `key.len() + 1` records whatever the file holds; walks that build keys refuse a
//! path longer than any key can be, so a damaged (but CRC-valid) reference cycle ends in
//! `Error::Corrupt`, never in a loop.

use crate::art::{Summary, Verdict};
use crate::error::Result;
use crate::limits::MAX_KEY_LEN;

use super::file::{Image, Root};
use super::format::{bloom_probe, key_hash, BLOOM_BLOCK};
use super::node::{Inner, Leaf, Rec};

/// Longest key path a walk accepts before it reports a reference cycle.
pub(crate) const MAX_PATH: usize = MAX_KEY_LEN + 1;

fn lcp(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Whether tree `root`'s bloom filter may hold `key` (`true` when the image has no filter): one
/// 64-byte block read. Errors: `Corrupt` for a bad block.
#[inline]
pub(crate) fn may_contain(img: &Image, root: &Root, key: &[u8]) -> Result<bool> {
    let Some((off, len)) = root.bloom else {
        return Ok(true);
    };
    let blocks = len / BLOOM_BLOCK as u64;
    if blocks == 0 {
        return Ok(true);
    }
    let (block, probes) = bloom_probe(key_hash(key), blocks);
    let bits = img.bytes_at(off + block * BLOOM_BLOCK as u64, BLOOM_BLOCK)?;
    Ok(probes.iter().all(|&p| {
        bits.get(usize::from(p >> 3))
            .is_some_and(|b| b >> (p & 7) & 1 == 1)
    }))
}

/// The terminal leaf at `off` (a leaf with an empty suffix).
pub(crate) fn terminal_leaf(img: &Image, off: u64) -> Result<Leaf<'_>> {
    match img.record(off)? {
        Rec::Leaf(l) if l.suffix.is_empty() => Ok(l),
        _ => Err(img.corrupt(off, "a terminal reference is not an empty-suffix leaf")),
    }
}

/// The slot of `key` in the tree rooted at `root`.
/// Errors: `Corrupt` for a bad block or record on the path.
#[inline]
pub(crate) fn get<'a>(img: &'a Image, root: u64, key: &[u8]) -> Result<Option<Leaf<'a>>> {
    let mut off = root;
    let mut depth = 0usize;
    loop {
        match img.record(off)? {
            Rec::Leaf(l) => return Ok((key.get(depth..) == Some(l.suffix)).then_some(l)),
            Rec::Inner(n) => {
                let rest = key.get(depth..).unwrap_or_default();
                if !rest.starts_with(n.prefix()) {
                    return Ok(None);
                }
                depth += n.prefix().len();
                match key.get(depth) {
                    None => {
                        return match n.terminal() {
                            Some(t) => terminal_leaf(img, t).map(Some),
                            None => Ok(None),
                        }
                    }
                    Some(&b) => match n.find(b) {
                        Some(c) => {
                            off = c;
                            depth += 1;
                        }
                        None => return Ok(None),
                    },
                }
            }
        }
    }
}

/// The entry with the greatest key strictly below `bound`, with its full key.
/// Errors: `Corrupt` for a bad block or record.
pub(crate) fn last_below<'a>(
    img: &'a Image,
    root: u64,
    bound: &[u8],
) -> Result<Option<(Vec<u8>, Leaf<'a>)>> {
    enum Best<'a> {
        None,
        /// A finished candidate.
        Leaf(Vec<u8>, Leaf<'a>),
        /// The record at `off` (every key under it is below the bound); `key` holds the key
        /// bytes before the record's own contribution.
        Subtree(u64, Vec<u8>),
    }
    let mut best = Best::None;
    let mut off = root;
    let mut depth = 0usize;
    loop {
        match img.record(off)? {
            Rec::Leaf(l) => {
                let mut key = bound.get(..depth).unwrap_or(bound).to_vec();
                key.extend_from_slice(l.suffix);
                if key.as_slice() < bound {
                    best = Best::Leaf(key, l);
                }
                break;
            }
            Rec::Inner(n) => {
                let rest = bound.get(depth..).unwrap_or_default();
                let m = lcp(n.prefix(), rest);
                if m < n.prefix().len() {
                    if m < rest.len() && n.prefix()[m] < rest[m] {
                        best = Best::Subtree(off, bound[..depth].to_vec());
                    }
                    break;
                }
                let edge_depth = depth + n.prefix().len();
                let Some(&b) = bound.get(edge_depth) else {
                    break;
                };
                if let Some((eb, c)) = n.prev_before(u16::from(b)) {
                    let mut key = bound[..edge_depth].to_vec();
                    key.push(eb);
                    best = Best::Subtree(c, key);
                } else if let Some(t) = n.terminal() {
                    best = Best::Leaf(bound[..edge_depth].to_vec(), terminal_leaf(img, t)?);
                }
                match n.find(b) {
                    Some(c) => {
                        off = c;
                        depth = edge_depth + 1;
                    }
                    None => break,
                }
            }
        }
    }
    let (mut off, mut key) = match best {
        Best::None => return Ok(None),
        Best::Leaf(k, l) => return Ok(Some((k, l))),
        Best::Subtree(off, key) => (off, key),
    };
    // The rightmost slot of the subtree: the last child, or the terminal of a childless node.
    loop {
        if key.len() > MAX_PATH {
            return Err(img.corrupt(off, "reference cycle (key path too long)"));
        }
        match img.record(off)? {
            Rec::Leaf(l) => {
                key.extend_from_slice(l.suffix);
                return Ok(Some((key, l)));
            }
            Rec::Inner(n) => {
                key.extend_from_slice(n.prefix());
                match n.prev_before(256) {
                    Some((eb, c)) => {
                        key.push(eb);
                        off = c;
                    }
                    None => match n.terminal() {
                        Some(t) => return Ok(Some((key, terminal_leaf(img, t)?))),
                        None => return Err(img.corrupt(off, "inner node without entries")),
                    },
                }
            }
        }
    }
}

/// The record holding every key that starts with `prefix`, with the key bytes before its own
/// contribution; `None` when no key starts with `prefix`.
/// Errors: `Corrupt` for a bad block or record.
pub(crate) fn prefix_root(img: &Image, root: u64, prefix: &[u8]) -> Result<Option<(u64, Vec<u8>)>> {
    let mut off = root;
    let mut depth = 0usize;
    loop {
        let rest = prefix.get(depth..).unwrap_or_default();
        match img.record(off)? {
            Rec::Leaf(l) => {
                let m = lcp(l.suffix, rest);
                return Ok((m == rest.len()).then(|| (off, prefix[..depth].to_vec())));
            }
            Rec::Inner(n) => {
                let m = lcp(n.prefix(), rest);
                if m == rest.len() {
                    return Ok(Some((off, prefix[..depth].to_vec())));
                }
                if m < n.prefix().len() {
                    return Ok(None);
                }
                let edge_depth = depth + n.prefix().len();
                match prefix.get(edge_depth).and_then(|&b| n.find(b)) {
                    Some(c) => {
                        off = c;
                        depth = edge_depth + 1;
                    }
                    None => return Ok(None),
                }
            }
        }
    }
}

/// The per-leaf question of [`any_in_prefix`]: is this undecided slot (full key, leaf) wanted?
pub(crate) type LeafCheck<'c, 'a> = dyn FnMut(&[u8], Leaf<'a>) -> Result<bool> + 'c;

/// Whether some key starting with `prefix` is accepted: `classify` judges a subtree (from its
/// stored summary; nodes without one are opened) or a leaf, `leaf` decides leaves judged
/// [`Verdict::Open`]. Cost: the prefix descent plus the records `classify` opens, in key order.
/// Errors: `Corrupt`, or what `leaf` returns.
pub(crate) fn any_in_prefix<'a>(
    img: &'a Image,
    root: u64,
    prefix: &[u8],
    classify: &dyn Fn(&Summary) -> Verdict,
    leaf: &mut LeafCheck<'_, 'a>,
) -> Result<bool> {
    let Some((start, mut path)) = prefix_root(img, root, prefix)? else {
        return Ok(false);
    };
    // (node, key offset of its edge bytes, next edge to visit, its child index)
    let mut stack: Vec<(Inner<'a>, usize, u16, u16)> = Vec::new();
    let mut pending = Some(start);
    loop {
        if let Some(off) = pending.take() {
            match img.record(off)? {
                Rec::Leaf(l) => match classify(&l.summary()) {
                    Verdict::Skip => {}
                    Verdict::Hit => return Ok(true),
                    Verdict::Open => {
                        let depth = path.len();
                        path.extend_from_slice(l.suffix);
                        if leaf(&path, l)? {
                            return Ok(true);
                        }
                        path.truncate(depth);
                    }
                },
                Rec::Inner(n) => {
                    let verdict = n.summary().as_ref().map_or(Verdict::Open, classify);
                    match verdict {
                        Verdict::Skip => {}
                        Verdict::Hit => return Ok(true),
                        Verdict::Open => {
                            path.extend_from_slice(n.prefix());
                            if path.len() > MAX_PATH {
                                return Err(img.corrupt(off, "reference cycle (key path too long)"));
                            }
                            if let Some(t) = n.terminal() {
                                let l = terminal_leaf(img, t)?;
                                let hit = match classify(&l.summary()) {
                                    Verdict::Skip => false,
                                    Verdict::Hit => true,
                                    Verdict::Open => leaf(&path, l)?,
                                };
                                if hit {
                                    return Ok(true);
                                }
                            }
                            stack.push((n, path.len(), 0, 0));
                        }
                    }
                }
            }
        }
        let Some((node, edge_depth, next, index)) = stack.last_mut() else {
            return Ok(false);
        };
        match node.child_at(*next, *index) {
            Some((b, c)) => {
                *next = u16::from(b) + 1;
                *index += 1;
                path.truncate(*edge_depth);
                path.push(b);
                pending = Some(c);
            }
            None => {
                stack.pop();
            }
        }
    }
}
