//! `Preparing|Copying -> Copying`: source pages and the copy batch.

use super::identity::{chain_member_digest, manifest_path, member_row_digest};
use super::row::op_key;
use super::row::{command, run};
use super::state::{checked_restore, RestoreError, RestoreMark, Result, MAX_BATCH_MEMBERS};
use crate::codec::{
    artifact_revision, commit_member, gc_candidate, path_current, revision_ref, workspace_current,
    ArtifactRevision, CommitMember, GcCandidate, GcClaimState, Operation, PathEntry, RefOwner,
    RestoreMember, RestoreMemberKey, RestoreOperation, RestorePhase, RestoreSource, RevisionRef,
    RevisionState, WorkspaceCurrent, WorkspaceState,
};
use crate::command::projection as index_projection;
use crate::command::{
    Mutation, Predicate, MAX_COMMAND_MUTATIONS, MAX_COMMAND_PREDICATES, MAX_INDEX_MUTATIONS,
};
use crate::error::Error;
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, RootId};
use crate::path::{ordered_key, NormPath};
use crate::shard::sequencer::Sequenced;
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, Snapshot, TxnStore, MAX_SCAN_ITEMS};
use std::collections::BTreeMap;

/// One page of source entries strictly after `after`, in canonical path order, at most `limit`,
/// and whether more follow. A snapshot source reads PathCurrent of the source incarnation at the
/// held read version (holt `view_at`); a commit source reads its immutable CommitMember rows.
pub(super) fn source_page(
    shard: &MetaShard,
    op: &RestoreOperation,
    after: Option<&NormPath>,
    limit: usize,
) -> Result<(Vec<(NormPath, PathEntry)>, bool)> {
    match op.source {
        RestoreSource::Snapshot(_) => {
            let reader = shard.read_at(op.source_read_version)?;
            Ok(reader.scan_files(&op.source_incarnation, None, after, limit)?)
        }
        RestoreSource::Commit(id) => {
            let root = shard.root_id();
            let snap = shard.inner.store.snapshot();
            let prefix = commit_member::commit_prefix(&root, &id);
            let mut marker = after.map(|p| {
                let mut m = prefix.clone();
                m.extend_from_slice(&ordered_key(p));
                m
            });
            let mut out = Vec::new();
            loop {
                let spec = ScanSpec {
                    prefix: prefix.clone(),
                    start_after: marker.clone(),
                    delimiter: None,
                    limit: (limit + 1 - out.len()).clamp(1, MAX_SCAN_ITEMS),
                };
                let batch = snap.scan(Family::CommitMember, &spec)?;
                let exhausted = batch.len() < spec.limit;
                for item in batch {
                    let ScanItem::Row { key, value } = item else {
                        return Err(Error::codec("commit_member", "unexpected rollup").into());
                    };
                    if out.len() == limit {
                        return Ok((out, true));
                    }
                    let path = crate::codec::CommitMemberKey::decode(&key)?.path;
                    let m = CommitMember::decode(&value)?;
                    out.push((path, member_entry(m)));
                    marker = Some(key);
                }
                if exhausted {
                    return Ok((out, false));
                }
            }
        }
    }
}

/// The destination PathEntry of one CommitMember (created/modified versions = its generation).
pub(super) fn member_entry(m: CommitMember) -> PathEntry {
    PathEntry {
        generation: m.path_generation,
        artifact_revision_id: m.artifact_revision_id,
        logical_size: m.logical_size,
        body_digest_uri: m.body_digest_uri,
        manifest_digest_uri: m.manifest_digest_uri,
        dependency_count: m.dependency_count,
        dependency_depth: m.dependency_depth,
        content_type: m.content_type,
        producer: m.producer,
        manifest_id: m.manifest_id,
        created_version: m.path_generation,
        modified_version: m.path_generation,
        index_projection: m.projection,
    }
}

/// Running reference-count changes of one command: revision -> (original bytes, updated row).
pub(super) type Touched = BTreeMap<ArtifactRevisionId, (Vec<u8>, ArtifactRevision)>;

pub(super) fn touch<'a, S: Snapshot>(
    snap: &S,
    root: &RootId,
    touched: &'a mut Touched,
    rev: ArtifactRevisionId,
) -> Result<&'a mut ArtifactRevision> {
    if let std::collections::btree_map::Entry::Vacant(v) = touched.entry(rev) {
        let bytes = snap
            .get(
                Family::ArtifactRevision,
                &artifact_revision::key(root, &rev),
            )?
            .ok_or_else(|| Error::RevisionUnavailable {
                revision: rev.to_hex(),
                reason: "missing".into(),
            })?;
        let row = ArtifactRevision::decode(&bytes)?;
        v.insert((bytes, row));
    }
    match touched.get_mut(&rev) {
        Some((_, row)) => Ok(row),
        None => Err(Error::codec("artifact_revision", "touched revision vanished").into()),
    }
}

/// Predicates + puts for every touched revision (GcCandidate when a count reaches zero).
pub(super) fn flush_touched(
    root: &RootId,
    cv: u64,
    touched: Touched,
    predicates: &mut Vec<Predicate>,
    mutations: &mut Vec<Mutation>,
) {
    for (id, (bytes, mut row)) in touched {
        let key = artifact_revision::key(root, &id);
        if row.strong_reference_count == 0 {
            row.last_zero_ref_version = Some(cv);
            mutations.push(Mutation::put(
                Family::GcCandidate,
                gc_candidate::key(root, &id, row.reference_epoch),
                GcCandidate {
                    last_zero_ref_version: cv,
                    claim_state: GcClaimState::Candidate,
                    retry_count: 0,
                }
                .encode(),
            ));
        }
        predicates.push(Predicate::equals(
            Family::ArtifactRevision,
            key.clone(),
            bytes,
        ));
        mutations.push(Mutation::put(Family::ArtifactRevision, key, row.encode()));
    }
}

pub(super) fn staging_marker<S: Snapshot>(
    snap: &S,
    root: &RootId,
    op: &RestoreOperation,
) -> Result<(Vec<u8>, WorkspaceCurrent)> {
    let key = workspace_current::key(root, &op.destination_workbench_id);
    let bytes = snap.get(Family::WorkspaceCurrent, &key)?.ok_or_else(|| {
        RestoreError::Meta(Error::codec(
            "workspace_current",
            "restore staging marker is missing",
        ))
    })?;
    let marker = WorkspaceCurrent::decode(&bytes)?;
    if marker.state != WorkspaceState::Staging
        || marker.incarnation != op.destination_incarnation
        || marker.owning_operation != Some(op.operation_id())
    {
        return Err(RestoreError::Meta(Error::codec(
            "workspace_current",
            "destination marker is not this operation's staging marker",
        )));
    }
    Ok((bytes, marker))
}

pub(super) fn copy_batch<S: Snapshot>(
    shard: &MetaShard,
    seq: &mut Sequenced<'_>,
    snap: &S,
    old: Vec<u8>,
    mut op: RestoreOperation,
) -> Result<RestorePhase> {
    let root = shard.root_id();
    let from = RestoreMark::of(&op);
    let (_, marker) = staging_marker(snap, &root, &op)?;
    let cv = snap.version() + 1;
    let dest = op.destination_incarnation;
    let mpath = manifest_path()?;
    let (page, more) = source_page(shard, &op, op.cursor.after_path.as_ref(), MAX_BATCH_MEMBERS)?;
    let mut predicates = Vec::new();
    let mut mutations = Vec::new();
    let mut index_rows = 0usize;
    let mut touched = Touched::new();
    let mut consumed = 0usize;
    for (path, entry) in &page {
        // The namespace rule (a path is a file or a directory, never both). The ordered path key's order
        // puts a path's whole subtree immediately before its exact row, so the source holds
        // `path` as both exactly when the entry copied just before it lies below it; a source
        // path below the restore manifest would clash with the destination's own manifest.
        let below_previous = op
            .cursor
            .after_path
            .as_ref()
            .is_some_and(|prev| prev.starts_with_dir(path));
        if below_previous || path.starts_with_dir(&mpath) {
            let clash = if below_previous { path } else { &mpath };
            return Err(RestoreError::SourceNamespaceClash {
                path: clash.as_str().to_owned(),
            });
        }
        if *path != mpath {
            let index = index_projection::index_mutations(
                &root,
                &dest,
                &op.destination_workbench_id,
                path,
                None,
                Some(entry),
            )?;
            // Budget: 4 bounded mutations + ≤ 2 predicates per member, plus the operation row
            // and one revision row/predicate per touched revision.
            let bounded = mutations.len() - index_rows;
            let over = index_rows + index.len() > MAX_INDEX_MUTATIONS
                || bounded + 3 + 2 * (touched.len() + 1) + 2 > MAX_COMMAND_MUTATIONS
                || predicates.len() + 1 + touched.len() + 1 + 1 > MAX_COMMAND_PREDICATES;
            if over && consumed > 0 {
                break;
            }
            let row = touch(snap, &root, &mut touched, entry.artifact_revision_id)?;
            if row.state != RevisionState::Available {
                return Err(Error::RevisionUnavailable {
                    revision: entry.artifact_revision_id.to_hex(),
                    reason: format!("state {:?}", row.state),
                }
                .into());
            }
            row.strong_reference_count = row.strong_reference_count.saturating_add(1);
            row.reference_epoch = row.reference_epoch.saturating_add(1);
            let epoch = row.reference_epoch;
            let seq = op.cursor.next_member_sequence;
            let entry_bytes = entry.encode();
            let row_digest = member_row_digest(seq, path, &entry_bytes);
            let pkey = path_current::key(&root, &dest, path);
            predicates.push(Predicate::absent(Family::PathCurrent, pkey.clone()));
            mutations.push(Mutation::put(Family::PathCurrent, pkey, entry_bytes));
            mutations.push(Mutation::put(
                Family::RevisionRef,
                revision_ref::key(
                    &root,
                    &RefOwner::Path {
                        incarnation: dest,
                        path: path.clone(),
                    },
                    &entry.artifact_revision_id,
                ),
                RevisionRef {
                    reference_epoch_at_add: epoch,
                    created_version: cv,
                }
                .encode(),
            ));
            mutations.push(Mutation::put(
                Family::RestoreMember,
                RestoreMemberKey {
                    root,
                    operation_id: op.operation_id(),
                    member_sequence: seq,
                }
                .encode(),
                RestoreMember {
                    destination_path: path.clone(),
                    artifact_revision_id: entry.artifact_revision_id,
                    path_generation: entry.generation,
                    row_digest,
                }
                .encode(),
            ));
            index_rows += index.len();
            mutations.extend(index);
            op.member_digest = chain_member_digest(&op.member_digest, &row_digest);
            op.member_count += 1;
            op.cursor.next_member_sequence = seq + 1;
        }
        op.cursor.after_path = Some(path.clone());
        consumed += 1;
    }
    if consumed == page.len() && !more {
        op.cursor.source_eof = true;
    }
    flush_touched(&root, cv, touched, &mut predicates, &mut mutations);
    op.phase = RestorePhase::Copying;
    let key = op_key(&root, &op.operation_id());
    predicates.push(Predicate::equals(Family::Operation, key.clone(), old));
    let cmd = command(shard, snap.version(), b"copy", &op.operation_id(), &marker)?;
    mutations.push(Mutation::put(
        Family::Operation,
        key,
        Operation::Restore(Box::new(checked_restore(from, op))).encode(),
    ));
    run(seq, cmd, predicates, mutations, Vec::new())?;
    Ok(RestorePhase::Copying)
}
