//! Index key ranges: prefixes, successors, normalization and the range of one predicate.

use super::types::Op;
use crate::error::Result;
use crate::index::value_codec::domain_key_bounds;
use crate::index::IndexValue;

/// `[lower, upper)` over full SecondaryIndex keys. `lower` is never a complete key (it is a
/// value-level prefix), so a scan "strictly after `lower`" returns exactly the keys `>= lower`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KeyRange {
    pub(super) lower: Vec<u8>,
    pub(super) upper: Option<Vec<u8>>,
}

/// The smallest byte string greater than every string starting with `p` (`None`: unbounded).
pub(super) fn prefix_successor(p: &[u8]) -> Option<Vec<u8>> {
    let mut s = p.to_vec();
    while let Some(last) = s.pop() {
        if last < 0xff {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

pub(super) fn prefix_range(p: Vec<u8>) -> KeyRange {
    KeyRange {
        upper: prefix_successor(&p),
        lower: p,
    }
}

pub(super) fn join(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(a.len() + b.len());
    v.extend_from_slice(a);
    v.extend_from_slice(b);
    v
}

/// Sorts and merges overlapping ranges, so a scan never visits a key twice.
pub(super) fn normalize_ranges(mut ranges: Vec<KeyRange>) -> Vec<KeyRange> {
    ranges.retain(|r| r.upper.as_ref().is_none_or(|u| *u > r.lower));
    ranges.sort_by(|a, b| a.lower.cmp(&b.lower));
    let mut out: Vec<KeyRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        if let Some(last) = out.last_mut() {
            let overlaps = last.upper.as_ref().is_none_or(|u| r.lower < *u);
            if overlaps {
                last.upper = match (last.upper.take(), r.upper) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                continue;
            }
        }
        out.push(r);
    }
    out
}

/// The key range of one range predicate operand inside its typed domain.
pub(super) fn range_of(fp: &[u8], op: Op, operand: &IndexValue) -> Result<KeyRange> {
    let (dlo, dhi) = domain_key_bounds(operand.domain());
    let at = join(fp, &operand.order_prefix()?);
    let after = prefix_successor(&at);
    Ok(match op {
        Op::Gt => KeyRange {
            lower: after.unwrap_or_else(|| join(fp, &dhi)),
            upper: Some(join(fp, &dhi)),
        },
        Op::Gte => KeyRange {
            lower: at,
            upper: Some(join(fp, &dhi)),
        },
        Op::Lt => KeyRange {
            lower: join(fp, &dlo),
            upper: Some(at),
        },
        _ => KeyRange {
            lower: join(fp, &dlo),
            upper: after,
        },
    })
}
