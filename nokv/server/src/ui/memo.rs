//! What a page remembers between renders: an answer computed from a scan of the index, kept
//! under the name of the store state it was computed at, so a remembered answer can never be
//! stale (a changed state has another name). Bounded: cleared when it holds its capacity.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Answers `V` by state name, at most `capacity` of them (a process-wide `static`).
pub(crate) struct Memo<V> {
    known: Mutex<BTreeMap<String, V>>,
    capacity: usize,
}

impl<V: Clone> Memo<V> {
    /// An empty memo holding at most `capacity` states.
    pub(crate) const fn new(capacity: usize) -> Memo<V> {
        Memo {
            known: Mutex::new(BTreeMap::new()),
            capacity,
        }
    }

    /// The answer remembered for state `key`, if any.
    pub(crate) fn get(&self, key: &str) -> Option<V> {
        self.lock().get(key).cloned()
    }

    /// Remembers `value` for state `key` (clearing everything first when full).
    pub(crate) fn put(&self, key: String, value: V) {
        let mut known = self.lock();
        if known.len() >= self.capacity {
            known.clear();
        }
        known.insert(key, value);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, V>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The name of one workbench's set of files: `(root, workbench, incarnation,
/// workspace_revision)` — every publication and removal moves the revision.
pub(crate) fn workspace_state(root: &str, id: &str, ws: &meta::codec::WorkspaceCurrent) -> String {
    format!(
        "{root}/{id}/{}/{}",
        ws.incarnation.to_hex(),
        ws.workspace_revision
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_memo_starts_over() {
        let memo: Memo<u64> = Memo::new(2);
        memo.put("a".into(), 1);
        memo.put("b".into(), 2);
        assert_eq!(memo.get("a"), Some(1));
        memo.put("c".into(), 3);
        assert_eq!(memo.get("a"), None);
        assert_eq!(memo.get("c"), Some(3));
    }
}
