//! `Client::fsck` and `Client::repair_index` (see [`meta::ops::fsck`]).

use std::collections::{BTreeMap, BTreeSet};

use meta::ids::ArtifactRevisionId;
use meta::ops::fsck::{self as ops, Finding, FindingKind, FsckReport, RepairReport};

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
    /// reports each mismatch as a typed finding (see [`meta::ops::fsck`]); then lists this
    /// root's artifact prefix once: each block object an Available revision's manifest names
    /// but the listing lacks is an `ObjectMissing` finding (the published bytes are lost), and
    /// the provider objects that nothing owns are listed as information. When the listing fails,
    /// `listing_error` says why and no object finding is made.
    ///
    /// fsck reads no object bytes: a block that is present but damaged is found by
    /// [`Client::fsck_verifying_bytes`] (or by the read that meets it).
    ///
    /// Errors: `Error::Meta` for storage failures (corrupt rows are findings, not errors).
    pub fn fsck(&self) -> Result<FsckOutcome> {
        self.fsck_with(false)
    }

    /// [`Client::fsck`], then a scrub: reads every block object an Available revision owns
    /// (present in the listing) and checks it against its recorded length and SHA-256 — each
    /// mismatch an `ObjectDamaged` finding. Cost: every published byte is read once, one block
    /// (4 MiB by default) in memory at a time; objects garbage collection deleted meanwhile are
    /// skipped. `nokv fsck --verify-bytes`.
    ///
    /// Errors: as [`Client::fsck`]; `Error::Object` when the provider fails a read other than
    /// with NotFound.
    pub fn fsck_verifying_bytes(&self) -> Result<FsckOutcome> {
        self.fsck_with(true)
    }

    fn fsck_with(&self, verify_bytes: bool) -> Result<FsckOutcome> {
        let mut report = ops::check(self.meta())?;
        let ops::ObjectKeys { owned, required } = ops::object_keys(self.meta())?;
        let prefix = format!(
            "{}{}/{}/",
            objstore::keys::ARTIFACTS_PREFIX,
            self.meta().logical_shard_id().to_hex(),
            self.meta().root_id().to_hex()
        );
        let (unowned_objects, listing_error) = match self.objects().list(&prefix) {
            Ok(keys) => {
                let listed: BTreeSet<&str> = keys.iter().map(String::as_str).collect();
                report
                    .findings
                    .extend(self.missing_objects(&required, &listed)?);
                if verify_bytes {
                    report
                        .findings
                        .extend(self.damaged_objects(&required, &listed)?);
                }
                (
                    keys.iter()
                        .filter(|k| !owned.contains(*k))
                        .cloned()
                        .collect(),
                    None,
                )
            }
            Err(e) => (Vec::new(), Some(crate::error::Error::from(e).to_string())),
        };
        Ok(FsckOutcome {
            report,
            unowned_objects,
            listing_error,
        })
    }

    /// One `ObjectMissing` finding per key of `required` (object key → an Available revision
    /// naming it, with its record) that the provider listing `listed` lacks — after confirming, at a newer read,
    /// that the revision is still Available (a garbage-collection pass may have claimed it and
    /// deleted its objects between fsck's read and its listing; a read-only client confirms
    /// through a fresh read-only open of the same store, or its own view if that open fails).
    fn missing_objects(
        &self,
        required: &BTreeMap<String, ops::RequiredObject>,
        listed: &BTreeSet<&str>,
    ) -> Result<Vec<Finding>> {
        let absent: Vec<(&String, &ArtifactRevisionId)> = required
            .iter()
            .filter(|(key, _)| !listed.contains(key.as_str()))
            .map(|(key, r)| (key, &r.revision))
            .collect();
        if absent.is_empty() {
            return Ok(Vec::new());
        }
        let revisions: BTreeSet<ArtifactRevisionId> = absent.iter().map(|(_, r)| **r).collect();
        // A read-only handle reads as of its open: confirm through a fresh read-only open
        // (when that open fails, the handle's own view decides).
        let fresh = self
            .is_read_only()
            .then(|| Client::open_read_only(self.dir()).ok())
            .flatten();
        let view = fresh.as_ref().unwrap_or(self);
        let still_available = ops::available_revisions(view.meta(), &revisions)?;
        Ok(absent
            .into_iter()
            .filter(|(_, rev)| still_available.contains(rev))
            .map(|(key, rev)| Finding {
                kind: FindingKind::ObjectMissing,
                subject: format!("revision {rev}"),
                detail: format!(
                    "block object {key} is missing from the object store ({})",
                    explain_hint(rev)
                ),
            })
            .collect())
    }

    /// One `ObjectDamaged` finding per listed block object of `required` whose bytes differ from
    /// its record (an object whose owning revision is not Available has no record and is not
    /// read). An object gone since the listing (collected by GC) is skipped.
    fn damaged_objects(
        &self,
        required: &BTreeMap<String, ops::RequiredObject>,
        listed: &BTreeSet<&str>,
    ) -> Result<Vec<Finding>> {
        let mut out = Vec::new();
        for (key, required) in required {
            let Some((len, digest_uri)) = &required.record else {
                continue;
            };
            if !listed.contains(key.as_str()) {
                continue;
            }
            let expected = objstore::parse_sha256_uri(digest_uri)?;
            // `get` reads the provider's bytes (a caching provider does not answer from its
            // local copy here).
            let checked = self
                .objects()
                .get(key)
                .and_then(|bytes| objstore::verify_bytes(key, bytes, *len, &expected));
            match checked {
                Ok(_) | Err(objstore::Error::NotFound { .. }) => {}
                Err(objstore::Error::IntegrityMismatch {
                    expected, actual, ..
                }) => {
                    let rev = required.revision;
                    out.push(Finding {
                        kind: FindingKind::ObjectDamaged,
                        subject: format!("revision {rev}"),
                        detail: format!(
                            "block object {key} differs from its record: expected {expected}, \
                             found {actual} ({})",
                            explain_hint(&rev)
                        ),
                    });
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }

    /// Rebuilds the derived SecondaryIndex rows from PathCurrent in bounded commands (missing and
    /// differing rows put, stale rows deleted; see [`meta::ops::fsck::repair_index`]).
    ///
    /// Errors: `Error::Meta` (fenced, storage, a PathCurrent row that does not decode).
    pub fn repair_index(&self) -> Result<RepairReport> {
        Ok(ops::repair_index(self.meta())?)
    }
}

/// The pointer a block finding gives from its revision to the paths that lost their bytes.
fn explain_hint(rev: &ArtifactRevisionId) -> String {
    format!("`nokv gc --explain {rev}` names the paths and commits that hold the revision")
}

impl Client {
    /// Failed background checkpoints (flushes and merges) of the embedded metadata engine since
    /// this handle opened the store (`holt::Stats::checkpoint_failures`); 0 for a store whose
    /// metadata lives in etcd, and for a read-only handle. Each failure lost nothing; a store
    /// whose count keeps rising has a damaged image or an I/O problem (`nokv fsck` scrubs every
    /// image block).
    pub fn checkpoint_failures(&self) -> u64 {
        crate::health::checkpoint_failures(self.meta())
    }
}
