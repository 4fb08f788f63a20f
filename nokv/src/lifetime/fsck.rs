//! `Client::fsck` and `Client::repair_index` (see [`meta::ops::fsck`]).

use meta::ops::fsck::{self as ops, FsckReport, RepairReport};

use crate::client::Client;
use crate::error::Result;

/// What [`Client::fsck`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsckOutcome {
    /// The typed findings recomputed from authoritative rows (empty = consistent).
    pub report: FsckReport,
    /// Information only: provider objects under this root's artifact prefix that no ledger,
    /// manifest or GC row owns (e.g. leftovers of a provider that lost a DELETE answer after the
    /// revision was already published Deleted by an older build, or foreign writes). Never used
    /// to decide anything.
    pub unowned_objects: Vec<String>,
    /// Why the provider listing failed, when it did (the findings are still complete).
    pub listing_error: Option<String>,
}

impl FsckOutcome {
    /// True when the metadata has no finding (unowned objects are information only).
    pub fn is_clean(&self) -> bool {
        self.report.is_clean()
    }
}

impl Client {
    /// Recomputes every strong-reference count and epoch, dependency set, commit and restore
    /// seal, SecondaryIndex row and the RecoveryOutbox chain from authoritative rows only and
    /// reports each mismatch as a typed finding (see [`meta::ops::fsck`]); then lists, as
    /// information, the provider objects under this root's artifact prefix that nothing owns.
    ///
    /// Errors: `Error::Meta` for storage failures (corrupt rows are findings, not errors).
    pub fn fsck(&self) -> Result<FsckOutcome> {
        let report = ops::check(self.meta())?;
        let owned = ops::owned_object_keys(self.meta())?;
        let prefix = format!(
            "{}{}/{}/",
            objstore::keys::ARTIFACTS_PREFIX,
            self.meta().logical_shard_id().to_hex(),
            self.meta().root_id().to_hex()
        );
        let (unowned_objects, listing_error) = match self.objects().list(&prefix) {
            Ok(keys) => (
                keys.into_iter().filter(|k| !owned.contains(k)).collect(),
                None,
            ),
            Err(e) => (Vec::new(), Some(crate::Error::from(e).to_string())),
        };
        Ok(FsckOutcome {
            report,
            unowned_objects,
            listing_error,
        })
    }

    /// Rebuilds the derived SecondaryIndex rows from PathCurrent in bounded commands (missing and
    /// differing rows put, stale rows deleted; see [`meta::ops::fsck::repair_index`]).
    ///
    /// Errors: `Error::Meta` (fenced, storage, a PathCurrent row that does not decode).
    pub fn repair_index(&self) -> Result<RepairReport> {
        Ok(ops::repair_index(self.meta())?)
    }
}
