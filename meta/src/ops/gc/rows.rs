//! Reading GC's rows: the Gc operation, ArtifactRevision, GcCandidate and manifest rows; keys and step digests.

use super::state::OwnedObject;
use crate::codec::{
    artifact_manifest, artifact_revision, gc_candidate, ArtifactRevision, CommandResult,
    GcCandidate, GcCandidateKey, GcOperation, GcPhase, ManifestRow, Operation, OperationKey,
    OperationKind,
};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, OperationId, RootId};
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, ShardSnapshot, Snapshot, TxnStore};
use sha2::{Digest, Sha256};

pub(super) fn op_key(root: &RootId, id: &OperationId) -> Vec<u8> {
    OperationKey {
        root: *root,
        kind: OperationKind::Gc,
        operation_id: *id,
    }
    .encode()
}

pub(super) fn read_revision<S: Snapshot>(
    snap: &S,
    root: &RootId,
    rev: &ArtifactRevisionId,
) -> Result<Option<(Vec<u8>, ArtifactRevision)>> {
    match snap.get(Family::ArtifactRevision, &artifact_revision::key(root, rev))? {
        None => Ok(None),
        Some(b) => {
            let r = ArtifactRevision::decode(&b)?;
            Ok(Some((b, r)))
        }
    }
}

pub(super) fn read_candidate<S: Snapshot>(
    snap: &S,
    key: &GcCandidateKey,
) -> Result<Option<(Vec<u8>, GcCandidate)>> {
    match snap.get(Family::GcCandidate, &key.encode())? {
        None => Ok(None),
        Some(b) => {
            let c = GcCandidate::decode(&b)?;
            Ok(Some((b, c)))
        }
    }
}

/// The Gc operation row `id`, if any: `(bytes, record)`.
///
/// Errors: [`Error::Codec`] (also for a non-Gc value under a Gc key); storage errors.
pub fn read_operation<S: Snapshot>(
    snap: &S,
    root: &RootId,
    id: &OperationId,
) -> Result<Option<(Vec<u8>, GcOperation)>> {
    match snap.get(Family::Operation, &op_key(root, id))? {
        None => Ok(None),
        Some(b) => match Operation::decode_for_kind(OperationKind::Gc, &b)? {
            Operation::Gc(g) => Ok(Some((b, g))),
            _ => Err(Error::codec("operation", "non-Gc value under a Gc key")),
        },
    }
}

/// Every GcCandidate row of the root in key order.
pub(super) fn candidates(
    snap: &ShardSnapshot,
    root: &RootId,
) -> Result<Vec<(GcCandidateKey, Vec<u8>)>> {
    let mut out = Vec::new();
    snap.for_each_row(
        Family::GcCandidate,
        root.as_bytes(),
        "gc_candidate",
        |k, v| {
            out.push((GcCandidateKey::decode(k)?, v.to_vec()));
            Ok(())
        },
    )?;
    Ok(out)
}

/// Manifest rows of `rev` with object index `>= from`, in index order, stopping after `limit`
/// rows physically owned by `rev` (`limit = usize::MAX`: every row).
pub(super) fn manifest_rows<S: Snapshot>(
    snap: &S,
    root: &RootId,
    rev: &ArtifactRevisionId,
    from: u64,
    own_limit: usize,
) -> Result<Vec<ManifestRow>> {
    let prefix = artifact_manifest::prefix(root, rev);
    let mut marker = from
        .checked_sub(1)
        .map(|prev| artifact_manifest::key(root, rev, prev));
    let mut out = Vec::new();
    let mut own = 0usize;
    loop {
        let spec = ScanSpec {
            prefix: prefix.clone(),
            start_after: marker.take(),
            delimiter: None,
            limit: crate::store::MAX_SCAN_ITEMS,
        };
        let batch = snap.scan(Family::ArtifactManifest, &spec)?;
        let exhausted = batch.len() < spec.limit;
        for item in batch {
            let ScanItem::Row { key, value } = item else {
                return Err(Error::codec("artifact_manifest", "unexpected rollup"));
            };
            let idx = artifact_manifest::decode_key_index(&key)?;
            let row = ManifestRow::decode_value(idx, &value)?;
            marker = Some(key);
            if row.physical_owner_revision == *rev {
                own += 1;
            }
            out.push(row);
            if own >= own_limit {
                return Ok(out);
            }
        }
        if exhausted {
            return Ok(out);
        }
    }
}

pub(super) fn owned(rev: &ArtifactRevisionId, rows: &[ManifestRow]) -> Vec<OwnedObject> {
    rows.iter()
        .filter(|r| r.physical_owner_revision == *rev)
        .map(|r| OwnedObject {
            revision: *rev,
            physical_object_index: r.physical_object_index,
            key: r.object_key.clone(),
            length: r.length,
        })
        .collect()
}

/// The own objects of `rev` at the current version: its ArtifactManifest rows physically owned
/// by it, in object-index order (what a collection deletes).
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn own_objects(shard: &MetaShard, rev: &ArtifactRevisionId) -> Result<Vec<OwnedObject>> {
    let snap = shard.inner.store.snapshot();
    let rows = manifest_rows(&snap, &shard.root_id(), rev, 0, usize::MAX)?;
    Ok(owned(rev, &rows))
}

pub(super) fn step_digest(step: &[u8], id: &OperationId, before: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"nokv.gc.step.v1\0");
    h.update((step.len() as u64).to_be_bytes());
    h.update(step);
    h.update(id.as_bytes());
    h.update(Sha256::digest(before));
    h.finalize().into()
}

pub(super) fn recorded(id: &OperationId, phase: GcPhase) -> CommandResult {
    CommandResult::OperationRecorded {
        kind: OperationKind::Gc,
        operation_id: *id,
        phase: phase.to_u8(),
    }
}

// ---------------------------------------------------------------------------------------------
// Floor, barrier, holds

/// The GcCandidate key of `rev` at its current epoch, if the revision row exists.
///
/// Errors: [`Error::Codec`]; storage errors.
pub fn candidate_key(
    shard: &MetaShard,
    rev: &ArtifactRevisionId,
) -> Result<Option<GcCandidateKey>> {
    let snap = shard.inner.store.snapshot();
    let root = shard.root_id();
    Ok(
        read_revision(&snap, &root, rev)?.map(|(_, r)| GcCandidateKey {
            root,
            revision: *rev,
            reference_epoch: r.reference_epoch,
        }),
    )
}

/// The candidate row key of `rev` at `epoch` (the GcCandidate family key).
pub fn candidate_row_key(root: &RootId, rev: &ArtifactRevisionId, epoch: u64) -> Vec<u8> {
    gc_candidate::key(root, rev, epoch)
}

/// The rows one step acts on, read at one snapshot.
pub(super) struct Rows {
    pub(super) rev_bytes: Vec<u8>,
    pub(super) rev: ArtifactRevision,
    pub(super) cand_bytes: Vec<u8>,
    pub(super) cand: GcCandidate,
    pub(super) op: Option<(Vec<u8>, GcOperation)>,
}

pub(super) fn read_rows<S: Snapshot>(
    snap: &S,
    key: &GcCandidateKey,
    id: &OperationId,
) -> Result<Option<Rows>> {
    let Some((rev_bytes, rev)) = read_revision(snap, &key.root, &key.revision)? else {
        return Ok(None);
    };
    let Some((cand_bytes, cand)) = read_candidate(snap, key)? else {
        return Ok(None);
    };
    let op = read_operation(snap, &key.root, id)?;
    Ok(Some(Rows {
        rev_bytes,
        rev,
        cand_bytes,
        cand,
        op,
    }))
}
