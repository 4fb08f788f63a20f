//! SnapshotRef (docs/metadata-format.md, tag 0x0b) — one leased snapshot of a workspace incarnation.
//!
//! Key: `root_id 16 | workspace_incarnation_id 16 | u64 snapshot_id` (big-endian).
//!
//! Value, format version 1 (every row without a retire annotation):
//!
//! ```text
//! u16 1 | u64 read_version | option(u16 len | alias) | u64 lease_deadline_unix_ms |
//! u8 SnapshotState | u64 consumer_count | u64 consumer_epoch | bytes annotation
//! ```
//!
//! Format version 2 (a row retired with an annotation) appends the retire annotation:
//!
//! ```text
//! u16 2 | <the version-1 fields> | bytes retire_annotation
//! ```
//!
//! `annotation` is the canonical `{reason, metadata}` JSON of the mint and `retire_annotation`
//! the canonical `{metadata, reason}` JSON of the *first* retirement (u32 lengths; docs/workbench.md
//! caps each at 4096 bytes, enforced by the writer). The retire annotation is durable and never
//! replaced: a later retire of a retired snapshot writes nothing (docs/workbench.md,
//! "snapshot_retire"). The encoder writes the lowest version that holds the row — version 1
//! unless a retire annotation is present — so rows of stores that never stored one keep their
//! bytes; the decoder accepts both and fails closed on any other version.
//!
//! Schema note: the metadata format's "Durable Format Registry" lists SnapshotRef among the version-1
//! records; version 2 is this codec's addition for the durable first retire annotation
//! (golden bytes of both versions in `meta/tests/fixtures/snapshot_ref.hex`). The alias follows
//! the snapshot-alias rule ([`crate::ids::AliasName`]).

use super::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{AliasName, RootId, SnapshotId, WorkspaceIncarnationId};

const FAMILY: &str = "snapshot_ref";
/// Newest value format version (rows with a retire annotation).
pub const VALUE_VERSION: u16 = 2;
/// Value format version of rows without a retire annotation (the original layout).
pub const VALUE_VERSION_V1: u16 = 1;

durable_enum!(
    /// Durable snapshot lifecycle (discriminants of docs/metadata-format.md). `expired` is derived, not stored.
    SnapshotState, "snapshot_ref" {
        /// Leased and readable.
        Active = 1,
        /// The reaper claimed it (Active -> ReapClaimed) and released its hold.
        ReapClaimed = 2,
        /// Reaped (terminal).
        Reaped = 3,
        /// Explicitly retired (terminal).
        Retired = 4,
    }
);

/// The SnapshotRef key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotRefKey {
    /// Root.
    pub root: RootId,
    /// Workspace incarnation.
    pub incarnation: WorkspaceIncarnationId,
    /// Snapshot id.
    pub snapshot_id: SnapshotId,
}

impl SnapshotRefKey {
    /// `root_id | incarnation | u64 snapshot_id` (40 bytes).
    pub fn encode(&self) -> Vec<u8> {
        Enc::new()
            .raw(self.root.as_bytes())
            .raw(self.incarnation.as_bytes())
            .u64(self.snapshot_id.get())
            .finish()
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] for any length other than 40.
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let k = SnapshotRefKey {
            root: RootId(d.b16()?),
            incarnation: WorkspaceIncarnationId(d.b16()?),
            snapshot_id: SnapshotId(d.u64()?),
        };
        d.finish()?;
        Ok(k)
    }
}

/// The SnapshotRef value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRef {
    /// Read version the snapshot freezes.
    pub read_version: u64,
    /// Alias minted with the snapshot, if any.
    pub alias: Option<AliasName>,
    /// Lease deadline on the shard's persisted lease clock, Unix milliseconds.
    pub lease_deadline_unix_ms: u64,
    /// Durable lifecycle.
    pub state: SnapshotState,
    /// Live restore/fork consumers.
    pub consumer_count: u64,
    /// Incremented by every consumer attach/release.
    pub consumer_epoch: u64,
    /// Canonical `{reason, metadata}` annotation bytes of the mint.
    pub annotation: Vec<u8>,
    /// Canonical `{metadata, reason}` annotation bytes of the first retirement, if it carried
    /// one (only with `state == Retired`; value version 2).
    pub retire_annotation: Option<Vec<u8>>,
}

impl SnapshotRef {
    /// Encodes the value: format version 1, or 2 when a retire annotation is present.
    pub fn encode(&self) -> Vec<u8> {
        let version = if self.retire_annotation.is_some() {
            VALUE_VERSION
        } else {
            VALUE_VERSION_V1
        };
        let mut e = Enc::version(version);
        e.u64(self.read_version);
        match &self.alias {
            None => {
                e.u8(0);
            }
            Some(a) => {
                e.u8(1).str16(a.as_str());
            }
        }
        e.u64(self.lease_deadline_unix_ms)
            .u8(self.state.to_u8())
            .u64(self.consumer_count)
            .u64(self.consumer_epoch)
            .bytes(&self.annotation);
        if let Some(r) = &self.retire_annotation {
            e.bytes(r);
        }
        e.finish()
    }

    /// Decodes the value (format version 1 or 2). Errors: [`crate::Error::Codec`] for any other
    /// version, truncation, trailing bytes or an unknown state.
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        let version = d.version_in(&[VALUE_VERSION_V1, VALUE_VERSION])?;
        let read_version = d.u64()?;
        let alias = if d.opt_tag()? {
            Some(AliasName::from_stored(FAMILY, d.bytes16()?)?)
        } else {
            None
        };
        let v = SnapshotRef {
            read_version,
            alias,
            lease_deadline_unix_ms: d.u64()?,
            state: SnapshotState::from_u8(d.u8()?)?,
            consumer_count: d.u64()?,
            consumer_epoch: d.u64()?,
            annotation: d.bytes()?.to_vec(),
            retire_annotation: None,
        };
        let v = if version == VALUE_VERSION {
            SnapshotRef {
                retire_annotation: Some(d.bytes()?.to_vec()),
                ..v
            }
        } else {
            v
        };
        d.finish()?;
        Ok(v)
    }
}
