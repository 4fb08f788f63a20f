//! Operation payload of a revision reservation (value version 1): revision ids whose first
//! block object is owned before any put has chosen one (docs/metadata-format.md, "Upload And
//! Append", "Revision reservations").

use crate::codec::wire::{durable_enum, Dec, Enc};
use crate::error::{Error, Result};
use crate::ids::ArtifactRevisionId;

/// Most revisions one reservation holds (bounds the row, the sweep after a crash and the
/// command that writes it).
pub const MAX_RESERVED_REVISIONS: usize = 32;

durable_enum!(
    /// The step a reservation command recorded (the `phase` byte of its
    /// `OperationRecorded` command result; the row itself has no phase: it exists or not).
    ReservePhase, "operation" {
        /// The reservation row was written.
        Reserved = 1,
        /// The reservation row was deleted (every revision published or its object deleted).
        Retired = 2,
    }
);

/// One reserved revision and the object key of its block 0, owned by the reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedRevision {
    /// The revision id a put may publish under.
    pub revision: ArtifactRevisionId,
    /// The provider key of that revision's object index 0.
    pub object_key: String,
}

/// A revision reservation: while its row exists, the object key of every listed revision is
/// owned by it (and, once that revision is published, by the revision's manifest as well).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReserveOperation {
    /// The reserved revisions, 1..=[`MAX_RESERVED_REVISIONS`], distinct.
    pub revisions: Vec<ReservedRevision>,
}

/// Encodes the ReserveOperation payload (after the version and kind bytes):
/// `u32 n | n × (artifact_revision_id 16 | str object_key)`.
pub(super) fn put_reserve(r: &ReserveOperation, e: &mut Enc) {
    e.u32(r.revisions.len() as u32);
    for rev in &r.revisions {
        e.raw(rev.revision.as_bytes()).str(&rev.object_key);
    }
}

pub(super) fn decode_reserve(d: &mut Dec<'_>) -> Result<ReserveOperation> {
    let n = d.u32()? as usize;
    if n == 0 || n > MAX_RESERVED_REVISIONS {
        return Err(Error::codec(
            super::kind::FAMILY,
            format!("a reservation holds 1..={MAX_RESERVED_REVISIONS} revisions, not {n}"),
        ));
    }
    let mut revisions = Vec::with_capacity(n);
    for _ in 0..n {
        revisions.push(ReservedRevision {
            revision: ArtifactRevisionId(d.b16()?),
            object_key: d.string()?,
        });
    }
    Ok(ReserveOperation { revisions })
}
