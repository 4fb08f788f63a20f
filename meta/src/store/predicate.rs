//! The storage-neutral vocabulary of a metadata command: key predicates and mutations on named
//! families. [`crate::store::TxnStore`] turns them into one checked atomic write.

use crate::family::Family;

/// What a predicate requires of one key at the commit boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expectation {
    /// The key must not exist.
    Absent,
    /// The key must exist with any value.
    Present,
    /// The key must exist with exactly these value bytes (a CAS on the encoded record).
    Equals(Vec<u8>),
}

/// One command predicate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predicate {
    /// Keyspace of the key.
    pub family: Family,
    /// Exact key bytes.
    pub key: Vec<u8>,
    /// Required state.
    pub expect: Expectation,
}

impl Predicate {
    /// `key` must be absent.
    pub fn absent(family: Family, key: Vec<u8>) -> Self {
        Predicate {
            family,
            key,
            expect: Expectation::Absent,
        }
    }

    /// `key` must hold exactly `value`.
    pub fn equals(family: Family, key: Vec<u8>, value: Vec<u8>) -> Self {
        Predicate {
            family,
            key,
            expect: Expectation::Equals(value),
        }
    }
}

/// One command mutation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    /// Insert or overwrite `key`.
    Put {
        /// Keyspace.
        family: Family,
        /// Key bytes.
        key: Vec<u8>,
        /// Encoded value.
        value: Vec<u8>,
    },
    /// Remove `key` (a no-op if absent).
    Delete {
        /// Keyspace.
        family: Family,
        /// Key bytes.
        key: Vec<u8>,
    },
}

impl Mutation {
    /// The keyspace the mutation touches.
    pub fn family(&self) -> Family {
        match self {
            Mutation::Put { family, .. } | Mutation::Delete { family, .. } => *family,
        }
    }

    /// Shorthand for [`Mutation::Put`].
    pub fn put(family: Family, key: Vec<u8>, value: Vec<u8>) -> Self {
        Mutation::Put { family, key, value }
    }
}
