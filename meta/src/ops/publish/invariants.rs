//! The written invariants of the Publish operation, debug-checked at every phase transition.

use crate::codec::{OperationResult, PublishOperation, PublishPhase};

/// Debug-checks one Publish operation step and returns `to` (docs/metadata-format.md, "Upload And
/// Append"): the phase moves only along Uploading -> Finalizing -> Published or
/// Uploading|Finalizing -> Aborting -> Cleaning -> Cleaned|Quarantined (Quarantined -> Cleaned by
/// reconciliation) — a sealed publication, durable as Uploading -> Published, is checked as its
/// two steps —, a Published or Cleaned operation is never rewritten, the frozen revision,
/// intent and target never change, the ledger counters never decrease, the length and digest
/// sealed by Finalizing stay sealed, and Published carries its result.
pub(crate) fn checked_publish(from: &PublishOperation, to: PublishOperation) -> PublishOperation {
    use PublishPhase::{
        Aborting, Cleaned, Cleaning, Finalizing, Published, Quarantined, Uploading,
    };
    debug_assert!(
        matches!(
            (from.phase, to.phase),
            (Uploading, Uploading | Finalizing | Aborting)
                | (Finalizing, Published | Aborting)
                | (Aborting, Cleaning)
                | (Cleaning, Cleaning | Cleaned | Quarantined)
                | (Quarantined, Quarantined | Cleaned)
        ),
        "Publish {:?} -> {:?} is not a documented transition",
        from.phase,
        to.phase
    );
    debug_assert!(
        from.artifact_revision_id == to.artifact_revision_id
            && from.intent_digest == to.intent_digest
            && from.workbench_id == to.workbench_id
            && from.path == to.path,
        "a Publish step changed its frozen request"
    );
    debug_assert!(
        to.staged_object_count >= from.staged_object_count
            && to.cleanup_next_sequence >= from.cleanup_next_sequence,
        "a Publish step moved a ledger counter back"
    );
    debug_assert!(
        from.phase != Finalizing
            || (to.expected_length == from.expected_length
                && to.expected_digest_uri == from.expected_digest_uri),
        "a Publish step changed the length/digest sealed by Finalizing"
    );
    debug_assert!(
        to.phase != Published || matches!(to.result, OperationResult::Succeeded(_)),
        "Publish reached Published without its result"
    );
    to
}
