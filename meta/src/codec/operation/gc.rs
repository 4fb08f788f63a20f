//! Operation payload of the GC machine (value version 1).

use crate::codec::cursor::OperationResult;
use crate::codec::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::ArtifactRevisionId;

durable_enum!(
    /// GC phase (discriminants of docs/metadata-format.md).
    GcPhase, "operation" {
        /// Waiting to be claimed.
        Queued = 1,
        /// Available -> Deleting claimed.
        Claimed = 2,
        /// Deleting objects.
        Deleting = 3,
        /// Every object confirmed absent.
        Deleted = 4,
        /// Ambiguous provider result.
        Quarantined = 5,
    }
);

/// Garbage collection of one revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcOperation {
    /// Phase.
    pub phase: GcPhase,
    /// Revision being collected.
    pub artifact_revision_id: ArtifactRevisionId,
    /// Reference epoch the claim expected.
    pub reference_epoch: u64,
    /// Next ArtifactManifest object_index to delete.
    pub next_object_index: u64,
    /// Objects confirmed deleted so far.
    pub deleted_object_count: u64,
    /// Evidence recorded when quarantined.
    pub quarantine_evidence: Option<String>,
    /// Terminal result (success payload: commit version that published Deleted).
    pub result: OperationResult<u64>,
}

/// Encodes the GcOperation payload (after the version and kind bytes).
pub(super) fn put_gc(g: &GcOperation, e: &mut Enc) {
    e.u8(g.phase.to_u8())
        .raw(g.artifact_revision_id.as_bytes())
        .u64(g.reference_epoch)
        .u64(g.next_object_index)
        .u64(g.deleted_object_count)
        .opt_str(g.quarantine_evidence.as_deref());
    g.result.put(e, |v, e| {
        e.u64(*v);
    });
}

pub(super) fn decode_gc(d: &mut Dec<'_>) -> Result<GcOperation> {
    Ok(GcOperation {
        phase: GcPhase::from_u8(d.u8()?)?,
        artifact_revision_id: ArtifactRevisionId(d.b16()?),
        reference_epoch: d.u64()?,
        next_object_index: d.u64()?,
        deleted_object_count: d.u64()?,
        quarantine_evidence: d.opt_string()?,
        result: OperationResult::get(d, |d| d.u64())?,
    })
}
