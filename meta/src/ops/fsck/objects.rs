//! The object keys the metadata requires and the revisions that own them.

use crate::codec::{
    ArtifactRevision, ArtifactRevisionKey, ManifestRow, Operation, OperationKey, OperationKind,
    PublishPhase, RevisionState, StagedCleanupState, StagedObject, StagedObjectKey,
};
use crate::error::Result;
use crate::family::Family;
use crate::ids::ArtifactRevisionId;
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};
use std::collections::{BTreeMap, BTreeSet};

/// The object keys the rows of one root speak for, read at one version (see [`object_keys`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectKeys {
    /// Every object key an authoritative row owns: the ArtifactManifest rows of every revision
    /// not yet Deleted (pruned at Deleted), the StagedObject rows of Publish operations that
    /// are not Published whose cleanup is not confirmed, and the keys of live revision
    /// reservations. Anything else under the root's artifact
    /// prefix is unowned (`nokv fsck` lists it as information).
    pub owned: BTreeSet<String>,
    /// The block objects that must exist: every key named by a manifest row of an **Available**
    /// revision (published, not claimed by garbage collection), with what is recorded of it
    /// ([`RequiredObject`]). Deleting, Quarantined and Deleted revisions are left out — their
    /// objects are being or were deleted on purpose. `nokv fsck` reports each of these keys
    /// absent from the provider listing as an [`FindingKind::ObjectMissing`] finding (confirmed
    /// at a newer read with [`available_revisions`], so a revision collected meanwhile is not
    /// reported); `nokv fsck --verify-bytes` checks each present one against its record.
    pub required: BTreeMap<String, RequiredObject>,
}

/// A block object that must exist (see [`ObjectKeys::required`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredObject {
    /// The first Available revision naming the object (a key reused by a child revision names
    /// its physical owner's object).
    pub revision: ArtifactRevisionId,
    /// The object's recorded length in bytes and `sha256:` digest URI, from the manifest row of
    /// the revision that owns it physically, when that revision is Available (`None` otherwise:
    /// a child revision's rows reusing an older block describe only a range of it).
    pub record: Option<(u64, String)>,
}

/// The owned and the required object keys of the shard's root ([`ObjectKeys`]), from one
/// snapshot: one pass over the ArtifactRevision rows (their states), one over the
/// ArtifactManifest rows (both sets), the Publish operations and StagedObject rows, and the
/// revision reservations.
///
/// Errors: [`Error::Codec`] for a manifest, operation or staged-object row that does not decode
/// (revision rows that do not decode are left out of `required`; [`check`] reports them);
/// storage errors. Memory O(keys).
pub fn object_keys(shard: &MetaShard) -> Result<ObjectKeys> {
    let snap = shard.inner.store.snapshot();
    let root = shard.root_id();
    let mut available = BTreeSet::new();
    snap.for_each_row(
        Family::ArtifactRevision,
        root.as_bytes(),
        "artifact_revision",
        |k, v| {
            if let (Ok(key), Ok(row)) =
                (ArtifactRevisionKey::decode(k), ArtifactRevision::decode(v))
            {
                if row.state == RevisionState::Available {
                    available.insert(key.revision);
                }
            }
            Ok(())
        },
    )?;
    let mut out = ObjectKeys::default();
    snap.for_each_row(
        Family::ArtifactManifest,
        root.as_bytes(),
        "artifact_manifest",
        |k, v| {
            let key = crate::codec::artifact_manifest::ArtifactManifestKey::decode(k)?;
            let row = ManifestRow::decode_value(key.object_index, v)?;
            if available.contains(&key.revision) {
                let required =
                    out.required
                        .entry(row.object_key.clone())
                        .or_insert(RequiredObject {
                            revision: key.revision,
                            record: None,
                        });
                if row.physical_owner_revision == key.revision && row.object_offset == 0 {
                    required
                        .record
                        .get_or_insert_with(|| (row.length, row.digest_uri.clone()));
                }
            }
            out.owned.insert(row.object_key);
            Ok(())
        },
    )?;
    let mut unpublished = BTreeSet::new();
    let mut prefix = root.as_bytes().to_vec();
    prefix.push(OperationKind::Publish.to_u8());
    snap.for_each_row(Family::Operation, &prefix, "operation", |k, v| {
        let key = OperationKey::decode(k)?;
        if let Operation::Publish(p) = Operation::decode_for_kind(OperationKind::Publish, v)? {
            if p.phase != PublishPhase::Published {
                unpublished.insert(key.operation_id);
            }
        }
        Ok(())
    })?;
    snap.for_each_row(
        Family::StagedObject,
        root.as_bytes(),
        "staged_object",
        |k, v| {
            let key = StagedObjectKey::decode(k)?;
            let row = StagedObject::decode(v)?;
            if unpublished.contains(&key.publish_operation_id)
                && row.cleanup_state != StagedCleanupState::Deleted
            {
                out.owned.insert(row.object_key);
            }
            Ok(())
        },
    )?;
    // Revision reservations own the block key of each revision they hold.
    let mut prefix = root.as_bytes().to_vec();
    prefix.push(OperationKind::Reserve.to_u8());
    snap.for_each_row(Family::Operation, &prefix, "operation", |_, v| {
        if let Operation::Reserve(r) = Operation::decode_for_kind(OperationKind::Reserve, v)? {
            out.owned
                .extend(r.revisions.into_iter().map(|rev| rev.object_key));
        }
        Ok(())
    })?;
    Ok(out)
}

/// Which of `revisions` are Available at the shard's current read version (a read-only shard:
/// as of its open). Errors: storage failures; a row that does not decode counts as not
/// Available.
pub fn available_revisions(
    shard: &MetaShard,
    revisions: &BTreeSet<ArtifactRevisionId>,
) -> Result<BTreeSet<ArtifactRevisionId>> {
    let snap = shard.inner.store.snapshot();
    let root = shard.root_id();
    let mut out = BTreeSet::new();
    for rev in revisions {
        let key = ArtifactRevisionKey {
            root,
            revision: *rev,
        };
        if let Some(v) = snap.get(Family::ArtifactRevision, &key.encode())? {
            if ArtifactRevision::decode(&v).is_ok_and(|r| r.state == RevisionState::Available) {
                out.insert(*rev);
            }
        }
    }
    Ok(out)
}
