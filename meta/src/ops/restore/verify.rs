//! `SourceSealed -> Ready`: the source-closure verification.

use super::copy::source_page;
use super::identity::{chain_member_digest, manifest_path, member_row_digest};
use super::plan::read_commit;
use super::state::{RestoreError, Result, EMPTY_MEMBER_DIGEST};
use crate::codec::{
    path_current, RestoreMember, RestoreMemberKey, RestoreOperation, RestoreSource,
};
use crate::error::Error;
use crate::family::Family;
use crate::path::NormPath;
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, Snapshot, MAX_SCAN_ITEMS};

/// The verification step of a restore (docs/metadata-format.md, "Restore Closure"): re-reads
/// the ordered RestoreMember index (dense sequences, each row digest recomputed from the staged
/// PathCurrent) and rescans the source from its start; both must reproduce the sealed member
/// count and digest. A commit source must also have exactly the
/// sealed Commit's member count.
pub(super) fn verify<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    op: &RestoreOperation,
) -> Result<()> {
    let root = shard.root_id();
    let mismatch = |reason: String| RestoreError::SourceClosureMismatch { reason };
    // 1. The member index against the staged rows.
    let prefix = RestoreMemberKey {
        root,
        operation_id: op.operation_id(),
        member_sequence: 0,
    }
    .encode();
    let prefix = prefix[..32].to_vec();
    let mut marker: Option<Vec<u8>> = None;
    let mut expected_seq = 0u64;
    let mut digest = EMPTY_MEMBER_DIGEST;
    loop {
        let spec = ScanSpec {
            prefix: prefix.clone(),
            start_after: marker.clone(),
            delimiter: None,
            limit: MAX_SCAN_ITEMS,
        };
        let batch = snap.scan(Family::RestoreMember, &spec)?;
        let exhausted = batch.len() < spec.limit;
        for item in batch {
            let ScanItem::Row { key, value } = item else {
                return Err(Error::codec("restore_member", "unexpected rollup").into());
            };
            let k = RestoreMemberKey::decode(&key)?;
            if k.member_sequence != expected_seq {
                return Err(mismatch(format!(
                    "member sequence {} where {expected_seq} was expected",
                    k.member_sequence
                )));
            }
            let m = RestoreMember::decode(&value)?;
            let staged = snap
                .get(
                    Family::PathCurrent,
                    &path_current::key(&root, &op.destination_incarnation, &m.destination_path),
                )?
                .ok_or_else(|| mismatch(format!("member {expected_seq} has no staged path")))?;
            if member_row_digest(expected_seq, &m.destination_path, &staged) != m.row_digest {
                return Err(mismatch(format!(
                    "member {expected_seq} does not match its staged path"
                )));
            }
            digest = chain_member_digest(&digest, &m.row_digest);
            expected_seq += 1;
            marker = Some(key);
        }
        if exhausted {
            break;
        }
    }
    if expected_seq != op.member_count || digest != op.member_digest {
        return Err(mismatch(
            "member index differs from the sealed count/digest".into(),
        ));
    }
    // 2. The source closure.
    let mpath = manifest_path()?;
    let mut after: Option<NormPath> = None;
    let mut seq = 0u64;
    let mut scanned = 0u64;
    let mut digest = EMPTY_MEMBER_DIGEST;
    loop {
        let (page, more) = source_page(shard, op, after.as_ref(), MAX_SCAN_ITEMS)?;
        for (path, entry) in &page {
            scanned += 1;
            if *path != mpath {
                let row = member_row_digest(seq, path, &entry.encode());
                digest = chain_member_digest(&digest, &row);
                seq += 1;
            }
        }
        after = page.last().map(|(p, _)| p.clone());
        if !more || after.is_none() {
            break;
        }
    }
    if seq != op.member_count || digest != op.member_digest {
        return Err(mismatch(
            "source rescan differs from the sealed member count/digest".into(),
        ));
    }
    if let RestoreSource::Commit(id) = op.source {
        let (_, commit) = read_commit(snap, &root, &id)?
            .ok_or_else(|| mismatch("the source commit disappeared".into()))?;
        if commit.member_count != scanned {
            return Err(mismatch(format!(
                "commit seals {} members, {scanned} were scanned",
                commit.member_count
            )));
        }
        // The CommitMember rows must still reproduce the sealed Commit member count/digest.
        let seals = crate::ops::commit::closure_seals(shard, &id)?;
        if seals.member_count != commit.member_count || seals.member_digest != commit.member_digest
        {
            return Err(mismatch(
                "the commit's members no longer match its member seal".into(),
            ));
        }
    }
    Ok(())
}
