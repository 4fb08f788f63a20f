//! BuildCommit `begin`: fresh construction in `Building` (or the exact retry).

use super::keys::{
    build_operation_id, canonical_parents, commit_key, encode_build, head_key, hold_key,
    initialization_digest, op_key, run_manifest_path,
};
use super::model::{BuildCommitRequest, BuildHandle};
use super::request::{authenticate, validate};
use super::state::{
    advanced, commit_version, header, read_build, read_commit, read_ws, step_digest,
};
use crate::codec::{
    path_current, BuildCommitOperation, BuildCommitPhase, ClosureCursor, CommitState, HeadRef,
    HistoryHold, HistoryHoldState, OperationKind, OperationResult, PathEntry, WorkbenchCommitHead,
};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ops::{run_step as run, Step as Built};
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Step 1: finds (and authenticates) or creates the build operation of `req`.
///
/// An existing operation is returned whatever its phase (the caller drives it with [`step`]);
/// a `Cleaned` operation whose terminal error is a retryable `Conflict` is re-initialized over
/// its exact row. Only fresh construction reads the live workspace, head and run manifest.
///
/// Errors: [`Error::InvalidArgument`], [`Error::OperationInputMismatch`],
/// [`Error::WorkspaceNotFound`], [`Error::WorkbenchCommitConflict`] (head exists, no
/// `replace`), [`Error::CommitNotFound`] / [`Error::CommitLifecycle`] for a parent that is
/// missing or not `Sealed`, [`Error::ReadVersionConflict`], [`Error::Fenced`], codec and
/// storage errors.
pub fn begin(shard: &MetaShard, req: &BuildCommitRequest) -> Result<BuildHandle> {
    validate(req)?;
    let root = shard.root_id();
    let op_id = build_operation_id(&root, &req.projection_input_digest);
    let key = op_key(&root, OperationKind::BuildCommit, &op_id);
    run(shard, |snap| {
        let previous = match read_build(snap, &root, &op_id)? {
            Some((bytes, op)) => {
                authenticate(req, &op)?;
                let restartable = op.phase == BuildCommitPhase::Cleaned
                    && matches!(&op.result, OperationResult::Failed(t) if t.code == "Conflict");
                if !restartable {
                    return Ok(Built::Done(BuildHandle {
                        operation_id: op_id,
                        operation: op,
                        created: false,
                    }));
                }
                Some(bytes)
            }
            None => None,
        };
        // Fresh construction: live preconditions.
        let Some((ws_key, ws_bytes, ws)) = read_ws(snap, &root, &req.workbench_id)? else {
            return Err(Error::WorkspaceNotFound {
                workbench_id: req.workbench_id.clone(),
            });
        };
        if !crate::read::workspace_live(snap, &ws, shard.wall_unix_ms())? {
            return Err(Error::WorkspaceNotFound {
                workbench_id: req.workbench_id.clone(),
            });
        }
        let inc = ws.incarnation;
        let hk = head_key(&root, &inc);
        let head_bytes = snap.get(Family::WorkbenchCommitHead, &hk)?;
        let head = head_bytes
            .as_deref()
            .map(WorkbenchCommitHead::decode)
            .transpose()?;
        if let Some(h) = &head {
            if !req.replace {
                return Err(Error::WorkbenchCommitConflict {
                    head: h.commit_id.to_hex(),
                });
            }
        }
        let parents = canonical_parents(&req.parents);
        for p in &parents {
            match read_commit(snap, &root, p)? {
                None => {
                    return Err(Error::CommitNotFound {
                        commit_id: p.to_hex(),
                    })
                }
                Some((_, c)) if c.state != CommitState::Sealed => {
                    return Err(Error::CommitLifecycle {
                        reason: format!("parent commit is {:?}, not Sealed", c.state),
                    })
                }
                Some(_) => {}
            }
        }
        if read_commit(snap, &root, &req.commit_id)?.is_some() {
            return Err(Error::CommitLifecycle {
                reason: "a commit with this identity already exists without its build operation"
                    .into(),
            });
        }
        let manifest_path = run_manifest_path()?;
        let manifest_gen = snap
            .get(
                Family::PathCurrent,
                &path_current::key(&root, &inc, &manifest_path),
            )?
            .map(|b| PathEntry::decode(&b).map(|e| e.generation))
            .transpose()?;
        let rv = snap.version();
        let cv = commit_version(snap)?;
        let mut op = BuildCommitOperation {
            phase: BuildCommitPhase::Building,
            commit_id: req.commit_id,
            projection_input_digest: req.projection_input_digest,
            initialization_digest: [0; 32],
            workbench_id: req.workbench_id.clone(),
            source_incarnation: inc,
            source_read_version: rv,
            source_workspace_revision: ws.workspace_revision,
            expected_head: head.map(|h| HeadRef {
                commit_id: h.commit_id,
                head_generation: h.head_generation,
            }),
            replace: req.replace,
            content_digest_uri: req.content_digest_uri.clone(),
            manifest_digest_uri: req.manifest_digest_uri.clone(),
            run_manifest_expected_generation: manifest_gen,
            committed_at_unix_seconds: req.observed_unix_seconds,
            staged_manifest: None,
            producer: req.producer.clone(),
            lineage: req.lineage.clone(),
            parents,
            cursor: ClosureCursor::default(),
            member_count: 0,
            member_digest: [0; 32],
            revision_count: 0,
            revision_digest: [0; 32],
            parent_count: 0,
            parent_digest: [0; 32],
            cleanup_cursor: ClosureCursor::default(),
            result: OperationResult::Pending,
        };
        op.initialization_digest = initialization_digest(&op);
        let digest = step_digest(&op_id, b"begin", previous.as_deref().unwrap_or_default());
        let mut cmd = header(
            shard,
            snap,
            digest,
            advanced(
                OperationKind::BuildCommit,
                &op_id,
                BuildCommitPhase::Building.to_u8(),
            ),
        )?;
        let hkey = hold_key(&root, &op_id);
        cmd.predicates = vec![
            match &previous {
                None => Predicate::absent(Family::Operation, key.clone()),
                Some(b) => Predicate::equals(Family::Operation, key.clone(), b.clone()),
            },
            Predicate::equals(Family::WorkspaceCurrent, ws_key, ws_bytes),
            match &head_bytes {
                None => Predicate::absent(Family::WorkbenchCommitHead, hk),
                Some(b) => Predicate::equals(Family::WorkbenchCommitHead, hk, b.clone()),
            },
            Predicate::absent(Family::HistoryHold, hkey.clone()),
            Predicate::absent(Family::Commit, commit_key(&root, &req.commit_id)),
        ];
        cmd.mutations = vec![
            Mutation::put(Family::Operation, key.clone(), encode_build(&op)),
            Mutation::put(
                Family::HistoryHold,
                hkey,
                HistoryHold {
                    read_version: rv,
                    source_snapshot_id: None,
                    state: HistoryHoldState::Active,
                    created_version: cv,
                }
                .encode(),
            ),
        ];
        Ok(Built::Command(
            Box::new(cmd),
            BuildHandle {
                operation_id: op_id,
                operation: op,
                created: true,
            },
        ))
    })
}
