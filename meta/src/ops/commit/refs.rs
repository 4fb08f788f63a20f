//! Reference-count adjustments of ArtifactRevision and Commit rows shared by publication and
//! cleanup.

use crate::codec::{gc_candidate, ArtifactRevision, Commit, GcCandidate, GcClaimState};
use crate::command::Mutation;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, RootId};

/// Adjusts a revision row's reference count by `delta` (±1) and bumps its epoch; at zero it
/// records `last_zero_ref_version` and returns the GcCandidate mutation too.
pub(crate) fn adjust_revision(
    root: &RootId,
    rev: &ArtifactRevisionId,
    row: &mut ArtifactRevision,
    add: bool,
    cv: u64,
) -> Result<Option<Mutation>> {
    if add {
        row.strong_reference_count = row.strong_reference_count.saturating_add(1);
    } else {
        row.strong_reference_count = row
            .strong_reference_count
            .checked_sub(1)
            .ok_or_else(|| Error::codec("artifact_revision", "strong reference count underflow"))?;
    }
    row.reference_epoch = row.reference_epoch.saturating_add(1);
    if row.strong_reference_count == 0 {
        row.last_zero_ref_version = Some(cv);
        return Ok(Some(Mutation::put(
            Family::GcCandidate,
            gc_candidate::key(root, rev, row.reference_epoch),
            GcCandidate {
                last_zero_ref_version: cv,
                claim_state: GcClaimState::Candidate,
                retry_count: 0,
            }
            .encode(),
        )));
    }
    Ok(None)
}

/// Releases one consumer of `c` (count −1, epoch +1, `last_zero_consumer_version` at zero).
pub(super) fn release_consumer(c: &mut Commit, cv: u64) -> Result<()> {
    c.consumer_count = c
        .consumer_count
        .checked_sub(1)
        .ok_or_else(|| Error::codec("commit", "consumer count underflow"))?;
    c.consumer_epoch = c.consumer_epoch.saturating_add(1);
    if c.consumer_count == 0 {
        c.last_zero_consumer_version = Some(cv);
    }
    Ok(())
}
