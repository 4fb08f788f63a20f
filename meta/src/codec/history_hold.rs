//! HistoryHold (docs/metadata-format.md, tag 0x0d) — retains MVCC history at one read version.
//!
//! Key: `root_id 16 | u8 HistoryHoldKind | hold_id` where `hold_id` is discriminated by kind
//! (decision recorded here; docs/metadata-format.md names the holds `HistoryHold(Snapshot…)`,
//! `HistoryHold(BuildCommit…)` and `HistoryHold(Restore, operation_id)`):
//!
//! - Snapshot (1): `u64 snapshot_id` (8 bytes, big-endian) — the leased snapshot's own hold;
//! - BuildCommit (2): `operation_id` (16 bytes) — the build operation's frozen read version;
//! - Restore (3): `operation_id` (16 bytes) — the restore operation's source hold.
//!
//! Value (format version 1): `u16 1 | u64 read_version | option(u64 source_snapshot_id) |
//! u8 HistoryHoldState | u64 created_version`.

use super::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{OperationId, RootId, SnapshotId};

const FAMILY: &str = "history_hold";
/// Value format version.
pub const VALUE_VERSION: u16 = 1;

durable_enum!(
    /// Kind of history hold (discriminants of docs/metadata-format.md).
    HistoryHoldKind, "history_hold" {
        /// Held by a leased snapshot.
        Snapshot = 1,
        /// Held by an in-flight commit build.
        BuildCommit = 2,
        /// Held by an in-flight restore/fork.
        Restore = 3,
    }
);

durable_enum!(
    /// State of a history hold (discriminants of docs/metadata-format.md).
    HistoryHoldState, "history_hold" {
        /// Retaining history.
        Active = 1,
        /// Being released.
        Releasing = 2,
    }
);

/// The discriminated hold id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HoldId {
    /// A snapshot's hold.
    Snapshot(SnapshotId),
    /// A build operation's hold.
    BuildCommit(OperationId),
    /// A restore operation's hold.
    Restore(OperationId),
}

impl HoldId {
    /// The hold kind.
    pub fn kind(&self) -> HistoryHoldKind {
        match self {
            HoldId::Snapshot(_) => HistoryHoldKind::Snapshot,
            HoldId::BuildCommit(_) => HistoryHoldKind::BuildCommit,
            HoldId::Restore(_) => HistoryHoldKind::Restore,
        }
    }
}

/// The HistoryHold key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryHoldKey {
    /// Root.
    pub root: RootId,
    /// Kind and id of the hold.
    pub hold: HoldId,
}

impl HistoryHoldKey {
    /// `root_id | u8 kind | hold_id`.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.raw(self.root.as_bytes()).u8(self.hold.kind().to_u8());
        match &self.hold {
            HoldId::Snapshot(s) => e.u64(s.get()),
            HoldId::BuildCommit(o) | HoldId::Restore(o) => e.raw(o.as_bytes()),
        };
        e.finish()
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] (unknown kind, wrong id width, trailing
    /// bytes).
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let root = RootId(d.b16()?);
        let hold = match HistoryHoldKind::from_u8(d.u8()?)? {
            HistoryHoldKind::Snapshot => HoldId::Snapshot(SnapshotId(d.u64()?)),
            HistoryHoldKind::BuildCommit => HoldId::BuildCommit(OperationId(d.b16()?)),
            HistoryHoldKind::Restore => HoldId::Restore(OperationId(d.b16()?)),
        };
        d.finish()?;
        Ok(HistoryHoldKey { root, hold })
    }
}

/// The HistoryHold value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryHold {
    /// Read version retained.
    pub read_version: u64,
    /// Source snapshot of a restore/fork hold.
    pub source_snapshot_id: Option<SnapshotId>,
    /// Hold state.
    pub state: HistoryHoldState,
    /// Commit version that created the hold.
    pub created_version: u64,
}

impl HistoryHold {
    /// Encodes the value (format version 1).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .u64(self.read_version)
            .opt_u64(self.source_snapshot_id.map(SnapshotId::get))
            .u8(self.state.to_u8())
            .u64(self.created_version)
            .finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let v = HistoryHold {
            read_version: d.u64()?,
            source_snapshot_id: d.opt_u64()?.map(SnapshotId),
            state: HistoryHoldState::from_u8(d.u8()?)?,
            created_version: d.u64()?,
        };
        d.finish()?;
        Ok(v)
    }
}
