//! Atomic write batches: puts, deletes and predicates across any number of trees.

use crate::tree::Tree;

/// A predicate on one key, checked against the latest committed state before a batch applies
/// (a CAS guard).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expect {
    /// The key must not exist (a tombstone counts as absent).
    Absent,
    /// The key must exist, with any value.
    Present,
    /// The key must exist with exactly this value.
    Equals(Vec<u8>),
}

impl Expect {
    pub(crate) fn holds(&self, current: Option<&[u8]>) -> bool {
        match (self, current) {
            (Expect::Absent, None) => true,
            (Expect::Present, Some(_)) => true,
            (Expect::Equals(want), Some(have)) => want.as_slice() == have,
            _ => false,
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Expect::Absent => "absent".to_string(),
            Expect::Present => "present".to_string(),
            Expect::Equals(v) => format!("equals a {}-byte value", v.len()),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) enum BatchOp {
    Put {
        tree: Tree,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        tree: Tree,
        key: Vec<u8>,
    },
    Expect {
        tree: Tree,
        key: Vec<u8>,
        expect: Expect,
    },
}

/// An atomic batch for `Db::commit`.
///
/// All predicates (`expect`, `expect_version`) are checked against the latest committed state
/// before anything applies; if one fails, nothing applies. Puts and deletes then apply in the
/// order they were added (a later put of the same key wins) and the whole batch gets one new
/// commit version. Key and value sizes are checked at commit ([`MAX_KEY_LEN`](crate::MAX_KEY_LEN),
/// [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN)); writes to the engine-owned `history` tree are refused there.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub(crate) ops: Vec<BatchOp>,
    pub(crate) expect_version: Option<u64>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Batch::default()
    }

    /// Sets `key` to `value` in `tree`.
    pub fn put(&mut self, tree: &Tree, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.ops.push(BatchOp::Put {
            tree: tree.clone(),
            key: key.into(),
            value: value.into(),
        });
    }

    /// Removes `key` from `tree` (a no-op if it is absent).
    pub fn delete(&mut self, tree: &Tree, key: impl Into<Vec<u8>>) {
        self.ops.push(BatchOp::Delete {
            tree: tree.clone(),
            key: key.into(),
        });
    }

    /// Adds a predicate on `key` in `tree`; a failing predicate makes the commit return
    /// `Error::PredicateFailed` and apply nothing.
    pub fn expect(&mut self, tree: &Tree, key: impl Into<Vec<u8>>, expect: Expect) {
        self.ops.push(BatchOp::Expect {
            tree: tree.clone(),
            key: key.into(),
            expect,
        });
    }

    /// Requires the database's last committed version to equal `version` (the read version the
    /// caller based its batch on); otherwise the commit returns `Error::VersionMismatch`.
    pub fn expect_version(&mut self, version: u64) {
        self.expect_version = Some(version);
    }

    /// True when the batch has no puts, deletes, predicates and no version expectation;
    /// committing it returns `Error::InvalidArgument`.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.expect_version.is_none()
    }

    /// Number of puts, deletes and key predicates (the version expectation is not counted).
    pub fn len(&self) -> usize {
        self.ops.len()
    }
}
