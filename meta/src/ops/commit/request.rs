//! Validation and authentication of a BuildCommit request against its frozen form.

use super::keys::canonical_parents;
use super::model::{BuildCommitRequest, MAX_LINEAGE_BYTES, MAX_PARENTS, MAX_PRODUCER_BYTES};
use crate::codec::BuildCommitOperation;
use crate::error::{Error, Result};
use crate::ids::validate_workbench_id;

pub(super) fn validate(req: &BuildCommitRequest) -> Result<()> {
    validate_workbench_id(&req.workbench_id)?;
    crate::ops::publish::validate_digest_uri("content_digest_uri", &req.content_digest_uri)?;
    crate::ops::publish::validate_digest_uri("manifest_digest_uri", &req.manifest_digest_uri)?;
    if req.producer.len() > MAX_PRODUCER_BYTES {
        return Err(Error::invalid("producer is longer than 1024 bytes"));
    }
    if req.lineage.len() > MAX_LINEAGE_BYTES {
        return Err(Error::invalid("lineage is longer than 16 KiB"));
    }
    if canonical_parents(&req.parents).len() > MAX_PARENTS {
        return Err(Error::invalid("a commit may name at most 64 parents"));
    }
    if req.parents.contains(&req.commit_id) {
        return Err(Error::invalid("a commit cannot be its own parent"));
    }
    Ok(())
}

/// Compares a retry with the frozen durable request.
pub(super) fn authenticate(req: &BuildCommitRequest, op: &BuildCommitOperation) -> Result<()> {
    let mismatch = |what: &str| {
        Err(Error::OperationInputMismatch {
            reason: format!("{what} differs from the original request of this commit"),
        })
    };
    if op.workbench_id != req.workbench_id {
        return mismatch("workbench_id");
    }
    if op.commit_id != req.commit_id || op.projection_input_digest != req.projection_input_digest {
        return mismatch("commit identity");
    }
    if op.content_digest_uri != req.content_digest_uri
        || op.manifest_digest_uri != req.manifest_digest_uri
    {
        return mismatch("digest");
    }
    if op.replace != req.replace {
        return mismatch("replace");
    }
    if op.producer != req.producer {
        return mismatch("producer");
    }
    if op.lineage != req.lineage {
        return mismatch("lineage");
    }
    if op.parents != canonical_parents(&req.parents) {
        return mismatch("parent list");
    }
    Ok(())
}
