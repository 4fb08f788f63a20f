//! One key's slot as the in-memory delta stores it: its value (inline when small, shared when
//! large, or a tombstone) and the commit version that wrote it.

use std::sync::Arc;

use crate::art::{Art, Summarize};

/// The adaptive radix tree backing one named tree.
pub(crate) type TreeMap = Art<Slot>;

/// Values of at most this many bytes are stored inline in their slot, i.e. inside the ART leaf
/// next to the key, so a point read touches no separate value allocation.
pub(crate) const INLINE_VALUE_BYTES: usize = 64;

/// A slot's value: a tombstone, a small value stored inline, or a shared heap value (the same
/// `Arc` the WAL record of the commit carried).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    /// Deleted (versioned trees only).
    Tombstone,
    /// Up to [`INLINE_VALUE_BYTES`] bytes, stored in place.
    Inline {
        len: u8,
        buf: [u8; INLINE_VALUE_BYTES],
    },
    /// A larger value.
    Shared(Arc<[u8]>),
}

impl Value {
    /// A value from borrowed bytes (`None`: a tombstone); copies small values inline.
    pub(crate) fn from_bytes(v: Option<&[u8]>) -> Self {
        match v {
            None => Value::Tombstone,
            Some(b) if b.len() <= INLINE_VALUE_BYTES => {
                let mut buf = [0u8; INLINE_VALUE_BYTES];
                buf[..b.len()].copy_from_slice(b);
                Value::Inline {
                    len: b.len() as u8,
                    buf,
                }
            }
            Some(b) => Value::Shared(Arc::from(b)),
        }
    }

    /// A value from a shared buffer (`None`: a tombstone); small values are copied inline, larger
    /// ones keep sharing the buffer.
    pub(crate) fn from_arc(v: Option<Arc<[u8]>>) -> Self {
        match v {
            Some(a) if a.len() > INLINE_VALUE_BYTES => Value::Shared(a),
            other => Value::from_bytes(other.as_deref()),
        }
    }

    /// The bytes, or `None` for a tombstone.
    #[inline]
    pub(crate) fn as_deref(&self) -> Option<&[u8]> {
        match self {
            Value::Tombstone => None,
            Value::Inline { len, buf } => buf.get(..usize::from(*len)),
            Value::Shared(a) => Some(a),
        }
    }

    /// True unless a tombstone.
    #[inline]
    pub(crate) fn is_some(&self) -> bool {
        !matches!(self, Value::Tombstone)
    }
}

/// One key's current slot.
///
/// Invariant: a tombstone occurs in versioned trees, where deleted keys stay until the history
/// floor passes `version` so that ranges at older read versions can find them, and in any tree
/// whose key an older layer (frozen delta, image) still holds, which it hides.
#[derive(Clone, Debug, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Slot {
    /// The value, or a tombstone. First, so it sits right after the leaf's key.
    pub(crate) value: Value,
    /// The commit version that last wrote this slot.
    pub(crate) version: u64,
}

impl Summarize for Slot {
    /// Tombstones are dead: the ART counts them per subtree so that listings skip subtrees
    /// holding only tombstones and the pruner skips subtrees holding none.
    fn is_live(&self) -> bool {
        self.value.is_some()
    }

    /// The commit version that wrote the slot: a subtree whose largest stamp is at or below a
    /// read version holds no change newer than that version.
    fn stamp(&self) -> u64 {
        self.version
    }
}
