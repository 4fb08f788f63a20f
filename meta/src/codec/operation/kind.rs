//! What every operation kind's codec shares: the Operation key, the kind discriminants and
//! their value format versions, and the cursor encoding.

use crate::codec::cursor::ClosureCursor;
use crate::codec::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{OperationId, RootId};

pub(super) const FAMILY: &str = "operation";

/// Value format version of [`PublishOperation`].
pub const PUBLISH_VALUE_VERSION: u16 = 1;
/// Value format version of [`BuildCommitOperation`] (docs/metadata-format.md: version 5).
pub const BUILD_COMMIT_VALUE_VERSION: u16 = 5;
/// Value format version of [`RestoreOperation`] (docs/metadata-format.md: version 4).
pub const RESTORE_VALUE_VERSION: u16 = 4;
/// Value format version of [`CommitRetireOperation`].
pub const COMMIT_RETIRE_VALUE_VERSION: u16 = 1;
/// Value format version of [`GcOperation`].
pub const GC_VALUE_VERSION: u16 = 1;
/// Value format version of [`ReserveOperation`](super::ReserveOperation).
pub const RESERVE_VALUE_VERSION: u16 = 1;

durable_enum!(
    /// Kind of durable operation (discriminants of docs/metadata-format.md).
    OperationKind, "operation" {
        /// Object-first artifact publication.
        Publish = 1,
        /// Commit construction.
        BuildCommit = 2,
        /// Restore/fork into a new destination workbench.
        Restore = 3,
        /// Commit retirement.
        CommitRetire = 4,
        /// Garbage collection of one revision.
        Gc = 5,
        /// Revision reservation: block keys owned before a put chooses one.
        Reserve = 6,
    }
);

impl OperationKind {
    /// The value format version this build reads and writes for the kind.
    pub fn value_version(self) -> u16 {
        match self {
            OperationKind::Publish => PUBLISH_VALUE_VERSION,
            OperationKind::BuildCommit => BUILD_COMMIT_VALUE_VERSION,
            OperationKind::Restore => RESTORE_VALUE_VERSION,
            OperationKind::CommitRetire => COMMIT_RETIRE_VALUE_VERSION,
            OperationKind::Gc => GC_VALUE_VERSION,
            OperationKind::Reserve => RESERVE_VALUE_VERSION,
        }
    }
}

/// The Operation key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationKey {
    /// Root.
    pub root: RootId,
    /// Operation kind.
    pub kind: OperationKind,
    /// Operation id.
    pub operation_id: OperationId,
}

impl OperationKey {
    /// `root_id | u8 kind | operation_id` (33 bytes).
    pub fn encode(&self) -> Vec<u8> {
        Enc::new()
            .raw(self.root.as_bytes())
            .u8(self.kind.to_u8())
            .raw(self.operation_id.as_bytes())
            .finish()
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] (unknown kind, length other than 33).
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let k = OperationKey {
            root: RootId(d.b16()?),
            kind: OperationKind::from_u8(d.u8()?)?,
            operation_id: OperationId(d.b16()?),
        };
        d.finish()?;
        Ok(k)
    }
}

/// Writes a closure cursor into an operation value.
pub(super) fn put_cursor(e: &mut Enc, c: &ClosureCursor) {
    c.put(e);
}
