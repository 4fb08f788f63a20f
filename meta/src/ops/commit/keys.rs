//! Deterministic operation ids, digests and row keys of the commit operations.

use super::model::{
    INITIALIZATION_DOMAIN, OPERATION_DOMAIN, RETIRE_DOMAIN, RUN_MANIFEST_PATH,
    STAGED_REVISION_DOMAIN,
};
use crate::codec::{
    revision_ref, BuildCommitOperation, CommitConsumerKey, ConsumerOwner, HistoryHoldKey, HoldId,
    Operation, OperationKey, OperationKind, RefOwner, WorkbenchCommitHeadKey,
};
use crate::error::{Error, Result};
use crate::ids::{ArtifactRevisionId, CommitId, OperationId, RootId, WorkspaceIncarnationId};
use crate::path::{normalize, NormPath};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;

pub(super) fn sha(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

pub(super) fn first16(d: &[u8; 32]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// The deterministic BuildCommit operation id of a request (see the module docs).
pub fn build_operation_id(root: &RootId, projection_input_digest: &[u8; 32]) -> OperationId {
    OperationId(first16(&sha(&[
        OPERATION_DOMAIN,
        root.as_bytes(),
        projection_input_digest,
    ])))
}

/// The deterministic revision id of the staged run manifest of operation `op` (so a retry after
/// process loss re-uploads to the same object keys instead of leaking blocks).
pub fn staged_manifest_revision(root: &RootId, op: &OperationId) -> ArtifactRevisionId {
    ArtifactRevisionId(first16(&sha(&[
        STAGED_REVISION_DOMAIN,
        root.as_bytes(),
        op.as_bytes(),
    ])))
}

/// The deterministic CommitRetire operation id of a commit.
pub fn retire_operation_id(root: &RootId, commit_id: &CommitId) -> OperationId {
    OperationId(first16(&sha(&[
        RETIRE_DOMAIN,
        root.as_bytes(),
        commit_id.as_bytes(),
    ])))
}

pub(super) fn run_manifest_path() -> Result<NormPath> {
    Ok(normalize(RUN_MANIFEST_PATH)?)
}

pub(super) fn op_key(root: &RootId, kind: OperationKind, id: &OperationId) -> Vec<u8> {
    OperationKey {
        root: *root,
        kind,
        operation_id: *id,
    }
    .encode()
}

pub(super) fn head_key(root: &RootId, inc: &WorkspaceIncarnationId) -> Vec<u8> {
    WorkbenchCommitHeadKey {
        root: *root,
        incarnation: *inc,
    }
    .encode()
}

pub(super) fn commit_key(root: &RootId, id: &CommitId) -> Vec<u8> {
    crate::codec::commit::CommitKey {
        root: *root,
        commit_id: *id,
    }
    .encode()
}

pub(super) fn hold_key(root: &RootId, op: &OperationId) -> Vec<u8> {
    HistoryHoldKey {
        root: *root,
        hold: HoldId::BuildCommit(*op),
    }
    .encode()
}

pub(super) fn consumer_key(root: &RootId, commit: &CommitId, owner: ConsumerOwner) -> Vec<u8> {
    CommitConsumerKey {
        root: *root,
        commit_id: *commit,
        owner,
    }
    .encode()
}

/// `root | Commit kind | commit_id` — prefix of the commit's `RevisionRef(Commit)` rows.
pub(super) fn commit_ref_prefix(root: &RootId, commit: &CommitId) -> Vec<u8> {
    let mut k = revision_ref::key(
        root,
        &RefOwner::Commit(*commit),
        &ArtifactRevisionId([0; 16]),
    );
    k.truncate(k.len() - ArtifactRevisionId::LEN);
    k
}

pub(super) fn ref_target(key: &[u8]) -> Result<ArtifactRevisionId> {
    let start = key
        .len()
        .checked_sub(ArtifactRevisionId::LEN)
        .ok_or_else(|| Error::codec("revision_ref", "short key"))?;
    let mut id = [0u8; 16];
    id.copy_from_slice(&key[start..]);
    Ok(ArtifactRevisionId(id))
}

pub(super) fn decode_build(bytes: &[u8]) -> Result<BuildCommitOperation> {
    match Operation::decode_for_kind(OperationKind::BuildCommit, bytes)? {
        Operation::BuildCommit(b) => Ok(*b),
        _ => Err(Error::codec("operation", "not a BuildCommit operation")),
    }
}

pub(super) fn encode_build(op: &BuildCommitOperation) -> Vec<u8> {
    Operation::BuildCommit(Box::new(op.clone())).encode()
}

/// Canonical parent list: unique, ascending.
pub(super) fn canonical_parents(parents: &[CommitId]) -> Vec<CommitId> {
    parents
        .iter()
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// `nokv.build-commit.initialization.v5\0` digest over the frozen request (docs/metadata-format.md).
pub fn initialization_digest(op: &BuildCommitOperation) -> [u8; 32] {
    let mut h = Sha256::new();
    let s = |h: &mut Sha256, b: &[u8]| {
        h.update((b.len() as u64).to_be_bytes());
        h.update(b);
    };
    h.update(INITIALIZATION_DOMAIN);
    h.update(op.projection_input_digest);
    h.update(op.commit_id.as_bytes());
    s(&mut h, op.workbench_id.as_bytes());
    h.update(op.source_incarnation.as_bytes());
    h.update(op.source_read_version.to_be_bytes());
    h.update(op.source_workspace_revision.to_be_bytes());
    match &op.expected_head {
        None => h.update([0u8]),
        Some(hr) => {
            h.update([1u8]);
            h.update(hr.commit_id.as_bytes());
            h.update(hr.head_generation.to_be_bytes());
        }
    }
    s(&mut h, op.content_digest_uri.as_bytes());
    s(&mut h, op.manifest_digest_uri.as_bytes());
    h.update([u8::from(op.replace)]);
    match op.run_manifest_expected_generation {
        None => h.update([0u8]),
        Some(g) => {
            h.update([1u8]);
            h.update(g.to_be_bytes());
        }
    }
    h.update(op.committed_at_unix_seconds.to_be_bytes());
    s(&mut h, op.producer.as_bytes());
    s(&mut h, &op.lineage);
    h.update((op.parents.len() as u64).to_be_bytes());
    for p in &op.parents {
        h.update(p.as_bytes());
    }
    h.finalize().into()
}

/// Chains one element into a running digest.
pub(super) fn chain(domain: &[u8], prev: &[u8; 32], parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(domain);
    h.update(prev);
    for p in parts {
        h.update((p.len() as u32).to_be_bytes());
        h.update(p);
    }
    h.finalize().into()
}
