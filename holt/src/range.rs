//! Ordered range scans with prefix, exclusive `start_after`, `limit` and delimiter roll-up.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use crate::error::Result;
use crate::mvcc;
use crate::registry::TreeMeta;
use crate::state::{Slot, State};

/// What to scan.
///
/// Keys with `key.starts_with(prefix)` are visited in byte order. With `delimiter = Some(d)`, a
/// key whose remainder after `prefix` contains `d` at position `i` rolls up into one
/// [`Entry::CommonPrefix`] holding `key[..prefix.len() + i + 1]`; the scan then seeks past every
/// key under that common prefix instead of walking them. An entry (key or common prefix) is
/// emitted only if its bytes compare greater than `start_after`, so a continuation whose
/// `start_after` is a previously returned common prefix skips that whole group. `limit` caps the
/// number of emitted entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RangeSpec {
    /// Only keys starting with these bytes (empty = all keys).
    pub prefix: Vec<u8>,
    /// Exclusive lower bound on emitted entries (a continuation token).
    pub start_after: Option<Vec<u8>>,
    /// Optional one-byte delimiter for common-prefix roll-up (e.g. `b'/'`).
    pub delimiter: Option<u8>,
    /// Maximum number of entries to emit.
    pub limit: Option<usize>,
}

impl RangeSpec {
    /// Every key of the tree.
    pub fn all() -> Self {
        RangeSpec::default()
    }

    /// Every key starting with `prefix`.
    pub fn with_prefix(prefix: impl Into<Vec<u8>>) -> Self {
        RangeSpec {
            prefix: prefix.into(),
            ..RangeSpec::default()
        }
    }

    /// Sets the exclusive `start_after` bound.
    pub fn start_after(mut self, after: impl Into<Vec<u8>>) -> Self {
        self.start_after = Some(after.into());
        self
    }

    /// Sets the roll-up delimiter.
    pub fn delimiter(mut self, d: u8) -> Self {
        self.delimiter = Some(d);
        self
    }

    /// Sets the entry limit.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }
}

/// One item of a range scan.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Entry {
    /// A key and its value at the scan's read version.
    Key {
        /// Full key bytes.
        key: Vec<u8>,
        /// Value bytes.
        value: Vec<u8>,
    },
    /// A rolled-up group: every visible key starting with these bytes (which end with the
    /// delimiter) is summarised by this one entry.
    CommonPrefix(Vec<u8>),
}

/// Number of slots fetched from the ordered map per seek.
const CHUNK: usize = 32;

/// Iterator over a range scan; yields `Result<Entry>`. It owns a pinned snapshot, so it is
/// unaffected by later commits. After yielding an error it ends.
pub struct RangeIter {
    state: Arc<State>,
    meta: Option<Arc<TreeMeta>>,
    read_version: u64,
    spec: RangeSpec,
    /// Where the next map seek starts.
    cursor: Bound<Vec<u8>>,
    buf: VecDeque<(Vec<u8>, Slot)>,
    /// The map has nothing after `cursor` within the prefix.
    exhausted: bool,
    emitted: usize,
    done: bool,
}

impl std::fmt::Debug for RangeIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeIter")
            .field("read_version", &self.read_version)
            .field("spec", &self.spec)
            .field("emitted", &self.emitted)
            .finish()
    }
}

/// The smallest byte string greater than every string starting with `p`, or `None` if `p` is
/// all 0xff (then nothing follows the group).
fn prefix_successor(p: &[u8]) -> Option<Vec<u8>> {
    let mut s = p.to_vec();
    while let Some(last) = s.pop() {
        if last < 0xff {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

impl RangeIter {
    pub(crate) fn new(
        state: Arc<State>,
        meta: Option<Arc<TreeMeta>>,
        read_version: u64,
        spec: RangeSpec,
    ) -> Self {
        // Start at the prefix, or just after `start_after` when that is further: no key at or
        // below `start_after` can produce an entry above it (a common prefix is a prefix of its
        // keys, so it sorts no higher than them).
        let cursor = match &spec.start_after {
            Some(sa) if sa.as_slice() >= spec.prefix.as_slice() => Bound::Excluded(sa.clone()),
            _ => Bound::Included(spec.prefix.clone()),
        };
        RangeIter {
            state,
            done: meta.is_none(),
            meta,
            read_version,
            spec,
            cursor,
            buf: VecDeque::new(),
            exhausted: false,
            emitted: 0,
        }
    }

    fn refill(&mut self) {
        if self.exhausted {
            return;
        }
        let Some(meta) = &self.meta else {
            self.exhausted = true;
            return;
        };
        let map = self.state.tree(meta.tag);
        let bound = match &self.cursor {
            Bound::Included(k) => Bound::Included(k.as_slice()),
            Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let prefix = self.spec.prefix.as_slice();
        for (k, s) in map
            .range::<_, [u8]>((bound, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(CHUNK)
        {
            self.buf.push_back((k.clone(), s.clone()));
        }
        if self.buf.len() < CHUNK {
            self.exhausted = true;
        }
        if let Some((k, _)) = self.buf.back() {
            self.cursor = Bound::Excluded(k.clone());
        }
    }

    fn next_raw(&mut self) -> Option<(Vec<u8>, Slot)> {
        if self.buf.is_empty() {
            self.refill();
        }
        self.buf.pop_front()
    }

    /// Moves the scan past every key starting with `cp`.
    fn skip_group(&mut self, cp: &[u8]) {
        while self.buf.front().is_some_and(|(k, _)| k.starts_with(cp)) {
            self.buf.pop_front();
        }
        if self.buf.is_empty() && !self.exhausted {
            match prefix_successor(cp) {
                Some(s) => self.cursor = Bound::Included(s),
                None => self.exhausted = true,
            }
        }
    }

    fn resolve(&self, key: &[u8], slot: &Slot) -> Result<Option<Vec<u8>>> {
        match &self.meta {
            Some(meta) => mvcc::resolve(&self.state, meta, key, slot, self.read_version),
            None => Ok(None),
        }
    }

    /// Whether any key under `cp` is visible at the read version (needed because tombstones and
    /// keys created after the read version stay in the map).
    fn group_visible(&mut self, first_key: &[u8], first: &Slot, cp: &[u8]) -> Result<bool> {
        if self.resolve(first_key, first)?.is_some() {
            return Ok(true);
        }
        let Some(meta) = self.meta.clone() else {
            return Ok(false);
        };
        let state = self.state.clone();
        for (k, s) in state
            .tree(meta.tag)
            .range::<_, [u8]>((Bound::Excluded(first_key), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(cp))
        {
            if self.resolve(k, s)?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn step(&mut self) -> Result<Option<Entry>> {
        loop {
            if self.spec.limit.is_some_and(|l| self.emitted >= l) {
                return Ok(None);
            }
            let Some((key, slot)) = self.next_raw() else {
                return Ok(None);
            };
            let plen = self.spec.prefix.len();
            let split = self
                .spec
                .delimiter
                .and_then(|d| key[plen..].iter().position(|&b| b == d));
            let after = |bytes: &[u8], sa: &Option<Vec<u8>>| {
                sa.as_ref().is_none_or(|sa| bytes > sa.as_slice())
            };
            let entry = match split {
                Some(i) => {
                    let cp = key[..plen + i + 1].to_vec();
                    let wanted = after(&cp, &self.spec.start_after)
                        && self.group_visible(&key, &slot, &cp)?;
                    self.skip_group(&cp);
                    if !wanted {
                        continue;
                    }
                    Entry::CommonPrefix(cp)
                }
                None => {
                    if !after(&key, &self.spec.start_after) {
                        continue;
                    }
                    match self.resolve(&key, &slot)? {
                        Some(value) => Entry::Key { key, value },
                        None => continue,
                    }
                }
            };
            self.emitted += 1;
            return Ok(Some(entry));
        }
    }
}

impl Iterator for RangeIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::prefix_successor;

    #[test]
    fn prefix_successor_carries_over_ff_bytes() {
        assert_eq!(prefix_successor(b"a/"), Some(b"a0".to_vec()));
        assert_eq!(prefix_successor(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xff, 0xff]), None);
        assert_eq!(prefix_successor(b""), None);
    }
}
