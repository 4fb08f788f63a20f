//! The MVCC history floor of a shard: the lowest version whose state holt still answers. It
//! never passes the read version of a HistoryHold row and, while holds allow, stays
//! `history_retention_versions` below the tip (docs/metadata-format.md, "Snapshot Lifecycle And
//! History Holds"). The shard's owner step maintains it; the snapshot operations
//! ([`crate::ops::snapshot`]) re-export it.

use super::handle::MetaShard;
pub use super::snapshot_policy::{
    SnapshotPolicy, DEFAULT_HISTORY_RETENTION_VERSIONS, DEFAULT_SKEW_GRACE_MS,
};
use crate::codec::setting::HISTORY_RETENTION_VERSIONS;
use crate::codec::HistoryHold;
use crate::error::Result;
use crate::family::Family;
use crate::store::{Snapshot, TxnStore};

/// The stored value of setting `name` at `snap` (`None` while never set).
///
/// Errors: [`crate::Error::InvalidArgument`] for an unknown name; [`crate::Error::Codec`] for a
/// corrupt row; storage errors.
pub fn stored_setting<S: Snapshot>(snap: &S, name: &str) -> Result<Option<u64>> {
    let key = crate::codec::setting::setting_key(name)?;
    snap.get(Family::System, &key)?
        .map(|b| crate::codec::setting::decode_value(&b))
        .transpose()
}

/// The `history_retention_versions` in effect: the stored value, else `default`.
///
/// Errors: as [`stored_setting`].
pub fn history_retention_versions(shard: &MetaShard, default: u64) -> Result<u64> {
    Ok(
        stored_setting(&shard.inner.store.snapshot(), HISTORY_RETENTION_VERSIONS)?
            .unwrap_or(default),
    )
}

/// The lowest read version any HistoryHold row of the root retains (`None` without holds).
///
/// Errors: codec and storage errors.
pub fn min_hold_version(shard: &MetaShard) -> Result<Option<u64>> {
    let snap = shard.inner.store.snapshot();
    let mut min: Option<u64> = None;
    for (_, bytes) in snap.rows(Family::HistoryHold, shard.root_id().as_bytes(), "snapshot")? {
        let hold = HistoryHold::decode(&bytes)?;
        min = Some(min.map_or(hold.read_version, |m| m.min(hold.read_version)));
    }
    Ok(min)
}

/// Raises the holt history floor to `min(lowest hold read version, version -
/// history_retention_versions)` when that is above the current floor, and returns the floor.
/// The floor never passes a hold (see the module docs). The durable store setting
/// `history_retention_versions` (`crate::ops::settings`) wins over
/// `policy.history_retention_versions` once it is set.
///
/// Errors: codec and storage errors.
pub fn maintain_history_floor(shard: &MetaShard, policy: &SnapshotPolicy) -> Result<u64> {
    let store = &shard.inner.store;
    // Read the tip first: every hold committed after this point has read_version >= tip.
    let tip = shard.version()?;
    let retention = history_retention_versions(shard, policy.history_retention_versions)?;
    let mut target = tip.saturating_sub(retention);
    if let Some(min) = min_hold_version(shard)? {
        target = target.min(min);
    }
    if target > store.history_floor()? {
        store.set_history_floor(target)?;
    }
    store.history_floor()
}
