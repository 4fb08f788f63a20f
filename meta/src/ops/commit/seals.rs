//! Closure seals: the digests recomputed over CommitMember and RevisionRef rows.

use super::keys::{chain, commit_ref_prefix, ref_target};
use super::model::{MEMBER_DOMAIN, PARENT_DOMAIN, REVISIONS_DOMAIN};
use crate::codec::{commit_member, CommitMember};
use crate::error::Result;
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, CommitId, RootId};
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;

/// All rows of one scan prefix ([`Snapshot::rows`]).
pub(super) fn scan_all(
    snap: &impl Snapshot,
    family: Family,
    prefix: &[u8],
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    snap.rows(family, prefix, "commit closure")
}

/// Seals of one commit closure recomputed from its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosureSeals {
    /// CommitMember rows.
    pub member_count: u64,
    /// Chained member digest.
    pub member_digest: [u8; 32],
    /// Unique `RevisionRef(Commit)` rows.
    pub revision_count: u64,
    /// Revision-set digest.
    pub revision_digest: [u8; 32],
    /// Unique revisions named by the members.
    pub member_revisions: BTreeSet<ArtifactRevisionId>,
    /// Revisions named by `RevisionRef(Commit)` rows.
    pub referenced_revisions: Vec<ArtifactRevisionId>,
}

pub(crate) fn recompute_seals(
    snap: &impl Snapshot,
    root: &RootId,
    id: &CommitId,
) -> Result<ClosureSeals> {
    let mprefix = commit_member::commit_prefix(root, id);
    let mut member_digest = [0u8; 32];
    let mut member_count = 0u64;
    let mut member_revisions = BTreeSet::new();
    for (k, v) in scan_all(snap, Family::CommitMember, &mprefix)? {
        let suffix = &k[mprefix.len()..];
        member_digest = chain(MEMBER_DOMAIN, &member_digest, &[suffix, &v]);
        member_count += 1;
        member_revisions.insert(CommitMember::decode(&v)?.artifact_revision_id);
    }
    let mut referenced = Vec::new();
    for (k, _) in scan_all(snap, Family::RevisionRef, &commit_ref_prefix(root, id))? {
        referenced.push(ref_target(&k)?);
    }
    let mut h = Sha256::new();
    h.update(REVISIONS_DOMAIN);
    for r in &referenced {
        h.update(r.as_bytes());
    }
    Ok(ClosureSeals {
        member_count,
        member_digest,
        revision_count: referenced.len() as u64,
        revision_digest: h.finalize().into(),
        member_revisions,
        referenced_revisions: referenced,
    })
}

/// The parent digest a commit seals over its unique parents in ascending order: chained like the
/// member digest, `d_i = sha256("nokv.commit.parent.v1\0" | d_{i-1} | u32 len | parent_id)`
/// from `d_0 = 0^32` (see the module docs). `parents` must already be unique and ascending (the
/// Commit record's order).
pub fn parent_digest(parents: &[CommitId]) -> [u8; 32] {
    parents
        .iter()
        .fold([0u8; 32], |d, p| chain(PARENT_DOMAIN, &d, &[p.as_bytes()]))
}

/// Recomputes the closure seals of commit `id` from its CommitMember and `RevisionRef(Commit)`
/// rows at the current version (fsck / tests).
///
/// Errors: codec and storage errors.
pub fn closure_seals(shard: &MetaShard, id: &CommitId) -> Result<ClosureSeals> {
    let snap = shard.inner.store.snapshot();
    recompute_seals(&snap, &shard.root_id(), id)
}
