//! Explainable retention: why a revision is kept (`nokv gc --explain`).
//!
//! [`explain_revision`] names every holder of one revision from authoritative rows only:
//!
//! - each strong reference (RevisionRef): a path (with its workbench, and whether that workbench
//!   is visible or a restore still staging it), a commit (with the heads, tags, restore leases
//!   and child commits that hold the commit) or a dependent appended revision (which reuses the
//!   revision's blocks, with its own state);
//! - for a revision without references: each HistoryHold at or below `last_zero_ref_version`
//!   (snapshot with workbench and alias, restore, commit build), the retention window
//!   (`history_retention_versions`), a non-terminal Publish operation naming it;
//! - or its GC state (being collected, quarantined with evidence, deleted) — or "collectable at
//!   the next pass".
//!
//! Cost: one scan of the root's RevisionRef rows (references are keyed by owner, so the holders
//! of one target cannot be point-read), plus point reads per holder found and the HistoryHold
//! rows. It is a diagnostic, not part of any hot path.

use crate::codec::{
    commit_consumer, workspace_current, Commit, CommitConsumerKey, CommitKey, CommitState,
    ConsumerOwner, GcPhase, PathEntry, PublishPhase, RefOwner, RevisionRefKey, RevisionState,
    WorkspaceCurrent, WorkspaceState,
};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, CommitId, OperationId, WorkspaceIncarnationId};
use crate::path::NormPath;
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};

use super::{
    holds_at, in_flight_publications, manifest_rows, operation_id, owned, read_operation,
    read_revision, wait_reasons, workbench_of, HoldInfo, WaitReason,
};
use crate::ops::snapshot::SnapshotPolicy;

/// One holder of a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// A `RevisionRef(Path)`: the revision is the body of a path.
    Path {
        /// The path's workbench (`None` if the incarnation has no claim row).
        workbench_id: Option<String>,
        /// The workspace incarnation.
        incarnation: WorkspaceIncarnationId,
        /// The path.
        path: NormPath,
        /// True when the incarnation is the workbench's Visible one (false: a restore still
        /// staging it, or an abandoned incarnation).
        visible: bool,
        /// The path's current generation, if its PathCurrent row names this revision.
        generation: Option<u64>,
        /// When the path's workbench expired (Unix ms), if it did: the next GC pass removes the
        /// path (docs/metadata-format.md, "Workbench Expiry").
        expired_at_unix_ms: Option<u64>,
    },
    /// A `RevisionRef(Commit)`: the revision is a member of a commit.
    Commit {
        /// The commit.
        commit_id: CommitId,
        /// Its state (`None` while the commit is still being built).
        state: Option<CommitState>,
        /// Workbenches whose head is the commit.
        heads: Vec<String>,
        /// `(workbench, tag)` pairs naming the commit.
        tags: Vec<(String, String)>,
        /// Restore operations leasing the commit as their source.
        leases: Vec<OperationId>,
        /// Child commits naming it as a parent.
        children: Vec<CommitId>,
    },
    /// A `RevisionRef(RevisionDependency)`: an appended revision reuses this revision's blocks.
    Dependent {
        /// The child revision.
        child: ArtifactRevisionId,
        /// The child's state (`None` if its row is missing).
        child_state: Option<RevisionState>,
        /// The child's own strong reference count.
        child_references: u64,
    },
    /// A HistoryHold keeps the history floor at or below `last_zero_ref_version`.
    HistoryHold(HoldInfo),
    /// The retention window keeps the floor at `tip - retention_versions`.
    RetentionWindow {
        /// `history_retention_versions` in effect.
        retention_versions: u64,
        /// The current tip.
        tip: u64,
    },
    /// A non-terminal Publish operation names the revision.
    InFlightPublish {
        /// The operation.
        operation_id: OperationId,
        /// Its phase.
        phase: PublishPhase,
        /// Its workbench.
        workbench_id: String,
        /// Its path.
        path: NormPath,
    },
}

/// The overall answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Strong references hold it (see the holders).
    Referenced,
    /// No references, but the history floor (holds, retention) or an in-flight publication
    /// keeps it.
    Waiting,
    /// Nothing holds it: the next pass collects it.
    CollectableNextPass,
    /// A collection is in progress.
    BeingCollected {
        /// The Gc operation phase.
        phase: GcPhase,
    },
    /// A provider answer was ambiguous; a later pass reconciles it.
    Quarantined {
        /// The recorded evidence.
        evidence: String,
    },
    /// Collected: its objects are confirmed absent.
    Deleted {
        /// Commit version that published Deleted, if the operation row records it.
        commit_version: Option<u64>,
    },
}

/// Why one revision is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The revision.
    pub revision: ArtifactRevisionId,
    /// Its lifecycle state.
    pub state: RevisionState,
    /// `strong_reference_count`.
    pub strong_reference_count: u64,
    /// `reference_epoch`.
    pub reference_epoch: u64,
    /// `last_zero_ref_version`, if the count ever reached zero.
    pub last_zero_ref_version: Option<u64>,
    /// Body size in bytes.
    pub logical_size: u64,
    /// Objects the revision physically owns (0 once Deleted: its manifest is pruned).
    pub own_objects: u64,
    /// Bytes of those objects.
    pub own_bytes: u64,
    /// Distinct older revisions whose blocks it reuses.
    pub dependency_count: u32,
    /// The holders.
    pub holders: Vec<Holder>,
    /// The answer.
    pub verdict: Verdict,
    /// The MVCC history floor now.
    pub history_floor: u64,
    /// The tip now.
    pub tip: u64,
    /// Paths of expired workbenches whose removal by the expiry sweep released a reference to
    /// the revision, found while the history before the release is still readable (a revision
    /// waiting or collectable after an expiry); empty otherwise.
    pub released_by_expiry: Vec<ExpiryRelease>,
}

/// A reference released because its workbench expired (see [`Explanation::released_by_expiry`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiryRelease {
    /// The expired workbench.
    pub workbench_id: String,
    /// The path that held the revision.
    pub path: NormPath,
    /// When the workbench expired, Unix ms.
    pub expired_at_unix_ms: u64,
}

/// Explains the revision at `path` of visible workbench `workbench_id` (see the module docs). An
/// expired workbench whose paths the expiry sweep has not removed yet is explained too (its path
/// holder names the expiry).
///
/// Errors: [`Error::WorkspaceNotFound`] (also for an expired workbench whose paths are gone:
/// `Reader::workspace_expired_at` says when it expired); [`Error::PathNotFound`] (a removed
/// path has no revision to name: pass the revision id to [`explain_revision`]); codec and
/// storage errors.
pub fn explain_path(
    shard: &MetaShard,
    workbench_id: &str,
    path: &NormPath,
    policy: &SnapshotPolicy,
) -> Result<Explanation> {
    let read = shard.read();
    let not_found = || Error::WorkspaceNotFound {
        workbench_id: workbench_id.to_owned(),
    };
    // One marker read decides both: live (`Visible`, not past its deadline) or expired; the
    // store clock is read only for a marker with a deadline.
    let ws = read.workspace(workbench_id)?.ok_or_else(not_found)?;
    let expired = match ws.expires_at_unix_ms {
        None => false,
        Some(_) => ws.expired_at(read.store_clock_unix_ms()?).is_some(),
    };
    if ws.state != WorkspaceState::Visible && !expired {
        return Err(not_found());
    }
    let Some(entry) = read.path_entry(&ws.incarnation, path)? else {
        // An expired workbench's removed paths answer as the workbench does.
        if expired {
            return Err(not_found());
        }
        return Err(Error::PathNotFound);
    };
    drop(read);
    explain_revision(shard, &entry.artifact_revision_id, policy)
}

/// The WorkspaceCurrent marker of `workbench_id` at `snap`, if it still names incarnation `inc`
/// (one point read; `None` without a workbench id).
fn marker_of<S: Snapshot>(
    snap: &S,
    root: &crate::ids::RootId,
    workbench_id: Option<&str>,
    inc: &WorkspaceIncarnationId,
) -> Result<Option<WorkspaceCurrent>> {
    let Some(wb) = workbench_id else {
        return Ok(None);
    };
    Ok(snap
        .get(Family::WorkspaceCurrent, &workspace_current::key(root, wb))?
        .map(|b| WorkspaceCurrent::decode(&b))
        .transpose()?
        .filter(|w| w.incarnation == *inc))
}

/// When the marker `ws` expired (Unix ms) on the store clock at `snap` of a process reading
/// `wall_unix_ms`, if it did (the lease clock is read only for a marker with a deadline).
fn expired_at<S: Snapshot>(
    snap: &S,
    ws: Option<&WorkspaceCurrent>,
    wall_unix_ms: u64,
) -> Result<Option<u64>> {
    match ws {
        Some(w) if w.expires_at_unix_ms.is_some() => {
            Ok(w.expired_at(crate::clock::store_clock_now(snap, wall_unix_ms)?))
        }
        _ => Ok(None),
    }
}

/// The owners of every RevisionRef row that targets `rev` at `snap`: one scan of the root's
/// RevisionRef rows (references are keyed by owner), filtered on the target.
fn refs_to<S: Snapshot>(
    snap: &S,
    root: &crate::ids::RootId,
    rev: &ArtifactRevisionId,
) -> Result<Vec<RefOwner>> {
    let mut owners = Vec::new();
    snap.for_each_row(
        Family::RevisionRef,
        root.as_bytes(),
        "revision_ref",
        |k, _| {
            if k.ends_with(rev.as_bytes()) {
                let key = RevisionRefKey::decode(k)?;
                if key.target == *rev {
                    owners.push(key.owner);
                }
            }
            Ok(())
        },
    )?;
    Ok(owners)
}

/// The Path references of `rev` that the expiry sweep released: the Path RevisionRef rows of
/// `rev` just before `last_zero_ref_version` whose workbench is expired now. Empty when that
/// history is no longer readable.
fn expiry_releases<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    rev: &ArtifactRevisionId,
    last_zero_ref_version: u64,
) -> Result<Vec<ExpiryRelease>> {
    let root = shard.root_id();
    let Some(before) = last_zero_ref_version.checked_sub(1) else {
        return Ok(Vec::new());
    };
    let old = match shard.inner.store.snapshot_at(before) {
        Ok(s) => s,
        Err(_) => return Ok(Vec::new()),
    };
    // A history pruned while the scan runs answers like one pruned before it: nothing to name.
    let Ok(refs) = refs_to(&old, &root, rev) else {
        return Ok(Vec::new());
    };
    let owners = refs.into_iter().filter_map(|owner| match owner {
        RefOwner::Path { incarnation, path } => Some((incarnation, path)),
        _ => None,
    });
    let mut out = Vec::new();
    for (incarnation, path) in owners {
        let workbench_id = workbench_of(snap, &root, &incarnation)?;
        let ws = marker_of(snap, &root, workbench_id.as_deref(), &incarnation)?;
        if let Some(at) = expired_at(snap, ws.as_ref(), shard.wall_unix_ms())? {
            out.push(ExpiryRelease {
                workbench_id: workbench_id.unwrap_or_default(),
                path,
                expired_at_unix_ms: at,
            });
        }
    }
    Ok(out)
}

/// Explains why revision `rev` is kept (see the module docs).
///
/// Errors: [`Error::RevisionUnavailable`] when no such revision exists; codec and storage
/// errors.
pub fn explain_revision(
    shard: &MetaShard,
    rev: &ArtifactRevisionId,
    policy: &SnapshotPolicy,
) -> Result<Explanation> {
    let root = shard.root_id();
    let retention =
        crate::ops::settings::history_retention_versions(shard, policy.history_retention_versions)?;
    let in_flight = in_flight_publications(shard)?;
    let floor = shard.store().history_floor()?;
    let snap = shard.inner.store.snapshot();
    let tip = snap.version();
    let Some((_, row)) = read_revision(&snap, &root, rev)? else {
        return Err(Error::RevisionUnavailable {
            revision: rev.to_hex(),
            reason: "no such revision".into(),
        });
    };
    let manifest = manifest_rows(&snap, &root, rev, 0, usize::MAX)?;
    let own = owned(rev, &manifest);
    let mut holders = Vec::new();
    // Strong references: one scan of the RevisionRef rows, filtered on the target.
    let refs = refs_to(&snap, &root, rev)?;
    for owner in refs {
        holders.push(match owner {
            RefOwner::Path { incarnation, path } => {
                let workbench_id = workbench_of(&snap, &root, &incarnation)?;
                // One marker read serves both: whether it is visible and whether it expired.
                let ws = marker_of(&snap, &root, workbench_id.as_deref(), &incarnation)?;
                let visible = ws
                    .as_ref()
                    .is_some_and(|w| w.state == WorkspaceState::Visible);
                let expired_at_unix_ms = expired_at(&snap, ws.as_ref(), shard.wall_unix_ms())?;
                let generation = snap
                    .get(
                        Family::PathCurrent,
                        &crate::codec::path_current::key(&root, &incarnation, &path),
                    )?
                    .map(|b| PathEntry::decode(&b))
                    .transpose()?
                    .filter(|e| e.artifact_revision_id == *rev)
                    .map(|e| e.generation);
                Holder::Path {
                    workbench_id,
                    incarnation,
                    path,
                    visible,
                    generation,
                    expired_at_unix_ms,
                }
            }
            RefOwner::Commit(commit_id) => commit_holder(&snap, &root, commit_id)?,
            RefOwner::RevisionDependency { child } => {
                let child_row = read_revision(&snap, &root, &child)?.map(|(_, r)| r);
                Holder::Dependent {
                    child,
                    child_state: child_row.as_ref().map(|r| r.state),
                    child_references: child_row.map_or(0, |r| r.strong_reference_count),
                }
            }
        });
    }
    if let Some(op) = in_flight.get(rev) {
        if let Some(p) = crate::ops::publish::operation::get(shard, op)? {
            holders.push(Holder::InFlightPublish {
                operation_id: *op,
                phase: p.phase,
                workbench_id: p.workbench_id,
                path: p.path,
            });
        }
    }
    let gc_op = read_operation(&snap, &root, &operation_id(&root, rev, row.reference_epoch))?
        .map(|(_, o)| o);
    let verdict = match row.state {
        RevisionState::Deleted => Verdict::Deleted {
            commit_version: gc_op.as_ref().and_then(|o| match o.result {
                crate::codec::OperationResult::Succeeded(v) => Some(v),
                _ => None,
            }),
        },
        RevisionState::Quarantined => Verdict::Quarantined {
            evidence: gc_op
                .as_ref()
                .and_then(|o| o.quarantine_evidence.clone())
                .unwrap_or_default(),
        },
        RevisionState::Deleting => Verdict::BeingCollected {
            phase: gc_op.as_ref().map_or(GcPhase::Claimed, |o| o.phase),
        },
        RevisionState::Available if row.strong_reference_count > 0 => Verdict::Referenced,
        RevisionState::Available => {
            let z = row.last_zero_ref_version.unwrap_or(row.created_version);
            let hold_list = holds_at(&snap, &root)?;
            let min_hold = hold_list.iter().map(|h| h.read_version).min();
            // The floor the next pass raises to, and whether its barrier makes a quiescent tip
            // pass `z`.
            let mut target = tip.saturating_sub(retention);
            if let Some(m) = min_hold {
                target = target.min(m);
            }
            let next_floor = target.max(floor);
            let barrier = tip.saturating_sub(retention) == z && min_hold.is_none_or(|h| h > z);
            let flight = in_flight.get(rev).copied();
            if flight.is_none() && (next_floor > z || barrier) {
                Verdict::CollectableNextPass
            } else {
                for reason in wait_reasons(z, next_floor, tip, retention, &hold_list, None) {
                    holders.push(match reason {
                        WaitReason::HistoryHold(h) => Holder::HistoryHold(h),
                        WaitReason::RetentionWindow {
                            retention_versions,
                            tip,
                        } => Holder::RetentionWindow {
                            retention_versions,
                            tip,
                        },
                        // Named above with its phase and path.
                        WaitReason::InFlightPublish { .. } => continue,
                    });
                }
                Verdict::Waiting
            }
        }
    };
    let released_by_expiry = match (row.state, row.last_zero_ref_version) {
        (RevisionState::Available, Some(z)) if row.strong_reference_count == 0 => {
            expiry_releases(shard, &snap, rev, z)?
        }
        _ => Vec::new(),
    };
    Ok(Explanation {
        released_by_expiry,
        revision: *rev,
        state: row.state,
        strong_reference_count: row.strong_reference_count,
        reference_epoch: row.reference_epoch,
        last_zero_ref_version: row.last_zero_ref_version,
        logical_size: row.logical_size,
        own_objects: own.len() as u64,
        own_bytes: own.iter().map(|o| o.length).sum(),
        dependency_count: row.dependency_count,
        holders,
        verdict,
        history_floor: floor,
        tip,
    })
}

/// A commit holder with everything that holds the commit.
fn commit_holder<S: Snapshot>(
    snap: &S,
    root: &crate::ids::RootId,
    commit_id: CommitId,
) -> Result<Holder> {
    let state = snap
        .get(
            Family::Commit,
            &CommitKey {
                root: *root,
                commit_id,
            }
            .encode(),
        )?
        .map(|b| Commit::decode(&b))
        .transpose()?
        .map(|c| c.state);
    let mut heads = Vec::new();
    let mut tags = Vec::new();
    let mut leases = Vec::new();
    let mut children = Vec::new();
    let mut owners = Vec::new();
    snap.for_each_row(
        Family::CommitConsumer,
        &commit_consumer::commit_prefix(root, &commit_id),
        "commit_consumer",
        |k, _| {
            owners.push(CommitConsumerKey::decode(k)?.owner);
            Ok(())
        },
    )?;
    for owner in owners {
        match owner {
            ConsumerOwner::WorkbenchHead { incarnation } => {
                heads.push(
                    workbench_of(snap, root, &incarnation)?.unwrap_or_else(|| incarnation.to_hex()),
                );
            }
            ConsumerOwner::Tag { incarnation, tag } => tags.push((
                workbench_of(snap, root, &incarnation)?.unwrap_or_else(|| incarnation.to_hex()),
                tag.as_str().to_owned(),
            )),
            ConsumerOwner::Lease { operation_id } => leases.push(operation_id),
            ConsumerOwner::ChildCommit { child } => children.push(child),
        }
    }
    Ok(Holder::Commit {
        commit_id,
        state,
        heads,
        tags,
        leases,
        children,
    })
}
