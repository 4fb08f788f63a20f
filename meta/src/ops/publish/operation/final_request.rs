//! The final publication command of a Publish operation: its request rebuilt from the sealed
//! record (the base's manifest rows, then the own staged objects) and the planned command that
//! writes the operation Published. Shared by the two-step, the sealed and the reserved
//! publication.

use super::begin::path_condition;
use super::finalize::own_rows;
use super::ledger::{ledger_at, op_key, published_receipt_at};
use super::state::final_request_id;
use crate::codec::{PublishOperation, StagedObject};
use crate::command::projection::{self as index_projection};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, OperationId};
use crate::ops::publish::{
    self, plan_with, OperationBinding, Planned, PublishReceipt, PublishRequest,
};
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Every ArtifactManifest row of `rev` at `snap`, in object-index order.
pub(super) fn manifest_at<S: Snapshot>(
    snap: &S,
    shard: &MetaShard,
    rev: &ArtifactRevisionId,
) -> Result<Vec<crate::codec::ManifestRow>> {
    let prefix = crate::codec::artifact_manifest::prefix(&shard.root_id(), rev);
    let mut out = Vec::new();
    snap.for_each_row(
        Family::ArtifactManifest,
        &prefix,
        "artifact_manifest",
        |key, value| {
            let idx = crate::codec::artifact_manifest::decode_key_index(key)?;
            out.push(crate::codec::ManifestRow::decode_value(idx, value)?);
            Ok(())
        },
    )?;
    Ok(out)
}

/// Rebuilds the publication request a Finalizing operation froze: the base's first
/// `row_count` ArtifactManifest rows, then one row per own staged object of the ledger at `snap`.
pub(super) fn frozen_request<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    id: &OperationId,
    op: &PublishOperation,
) -> Result<PublishRequest> {
    let ledger = ledger_at(shard, snap, id)?;
    let own = own_rows(op, &ledger)
        .into_iter()
        .map(|(_, row)| row)
        .collect();
    request_with_rows(shard, snap, id, op, own)
}

/// The publication request of the sealed record `op`: the base's first `row_count`
/// ArtifactManifest rows, then one row per `own` staged object (physical object index
/// `base_row_count + i`, contiguous logical offsets).
fn request_with_rows<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    id: &OperationId,
    op: &PublishOperation,
    own: Vec<StagedObject>,
) -> Result<PublishRequest> {
    let mut manifest = Vec::new();
    let mut offset = 0u64;
    if let Some(base) = &op.base {
        let rows = manifest_at(snap, shard, &base.revision)?;
        let take = usize::try_from(base.row_count)
            .map_err(|_| Error::codec("operation", "base row count overflows"))?;
        if rows.len() < take {
            return Err(Error::RevisionUnavailable {
                revision: base.revision.to_hex(),
                reason: "the base manifest is shorter than recorded".into(),
            });
        }
        manifest.extend(rows.into_iter().take(take));
        offset = manifest.last().map_or(0, |r: &crate::codec::ManifestRow| {
            r.logical_offset.saturating_add(r.length)
        });
        if offset != base.logical_size {
            return Err(Error::codec(
                "operation",
                "base rows do not cover the base size",
            ));
        }
    }
    for (i, row) in own.into_iter().enumerate() {
        let index = op.base.map_or(0, |b| b.row_count).saturating_add(i as u64);
        manifest.push(crate::codec::ManifestRow {
            object_index: index,
            physical_owner_revision: op.artifact_revision_id,
            physical_object_index: index,
            object_key: row.object_key,
            logical_offset: offset,
            object_offset: 0,
            length: row.expected_length,
            digest_uri: row.expected_digest_uri,
            append_segment: None,
        });
        offset = offset
            .checked_add(row.expected_length)
            .ok_or_else(|| Error::codec("staged_object", "lengths overflow"))?;
    }
    let Some(digest) = op.expected_digest_uri.clone() else {
        return Err(Error::codec(
            "operation",
            "Finalizing without a sealed digest",
        ));
    };
    Ok(PublishRequest {
        request_id: final_request_id(id),
        workbench_id: op.workbench_id.clone(),
        path: op.path.clone(),
        condition: path_condition(op.condition),
        revision_id: op.artifact_revision_id,
        logical_size: op.expected_length,
        body_digest_uri: digest,
        content_type: op.content_type.clone(),
        producer: op.producer.clone(),
        manifest_id: op.manifest_id.clone(),
        manifest,
        dependency_depth: op.dependency_depth,
        index_fields: index_projection::decode_projection(&op.index_projection)?,
    })
}

/// The stored receipt of Published operation `id` (`idempotent_replay = true`).
///
/// Errors: [`Error::Codec`] when the receipt is missing; storage errors.
pub(super) fn stored_receipt<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    id: &OperationId,
) -> Result<PublishReceipt> {
    published_receipt_at(shard, snap, id)?
        .ok_or_else(|| Error::codec("operation", "Published operation without its receipt"))
}

/// Plans the final publication of `sealed` (the operation's record sealed as Finalizing,
/// written or not): its request — own rows `own`, or the ledger's at `snap` when `None` —,
/// checked, and the command that predicates the operation row as `bytes` (`None`: absent) and
/// writes it Published. A caller whose operation is in the pending registry removes its row in
/// the same command ([`unregister`]).
///
/// Errors: the publication errors of [`crate::ops::publish::publish`]; codec and storage
/// errors.
pub(super) fn plan_final<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    id: &OperationId,
    bytes: Option<Vec<u8>>,
    sealed: PublishOperation,
    own: Option<Vec<StagedObject>>,
) -> Result<Planned> {
    let req = match own {
        Some(own) => request_with_rows(shard, snap, id, &sealed, own)?,
        None => frozen_request(shard, snap, id, &sealed)?,
    };
    publish::validate_request(&req)?;
    let digest = publish::command_digest(&req);
    let binding = OperationBinding {
        key: op_key(shard, id),
        bytes,
        op: sealed,
    };
    plan_with(shard, snap, &req, digest, Some(&binding))
}
