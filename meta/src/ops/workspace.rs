//! Workbench creation.

use sha2::{Digest, Sha256};

use crate::codec::{
    workspace_current, workspace_incarnation_claim, ChangeEvent, ChangeKind, CommandResult,
    WorkspaceCurrent, WorkspaceIncarnationClaim, WorkspaceState,
};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{validate_workbench_id, RequestId, WorkspaceIncarnationId};
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Result of [`MetaShard::create_workspace`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateWorkspaceOutcome {
    /// The `Visible` marker.
    pub workspace: WorkspaceCurrent,
    /// False when the workbench already existed and was visible (idempotent create).
    pub created: bool,
}

/// Creates `workbench_id` as a `Visible` workbench: one command writes WorkspaceCurrent
/// (fresh incarnation, workspace_revision 1, created/modified = commit version), the never-deleted
/// WorkspaceIncarnationClaim, and a `WorkspaceCreated` ChangeEvent. Predicates: marker Absent,
/// claim Absent.
///
/// An existing `Visible` marker returns `created = false` without writing.
///
/// Errors: [`Error::InvalidArgument`] for an invalid id; [`Error::WorkspaceUnavailable`] for a
/// `Staging`/`Retired` marker; [`Error::ReadVersionConflict`] after [`super::MAX_ATTEMPTS`];
/// [`Error::Fenced`]; storage and codec errors.
pub fn create_workspace(shard: &MetaShard, workbench_id: &str) -> Result<CreateWorkspaceOutcome> {
    validate_workbench_id(workbench_id)?;
    let root = shard.root_id();
    let ws_key = workspace_current::key(&root, workbench_id);
    super::sequenced_retrying(shard, |seq| {
        let snap = seq.snapshot();
        if let Some(b) = snap.get(Family::WorkspaceCurrent, &ws_key)? {
            let ws = WorkspaceCurrent::decode(&b)?;
            if crate::read::workspace_live(&snap, &ws, shard.wall_unix_ms())? {
                return Ok(CreateWorkspaceOutcome {
                    workspace: ws,
                    created: false,
                });
            }
            // An expired workbench keeps its name (docs/metadata-format.md, "Workbench Expiry"):
            // reported as Expired even before a writer recorded the state.
            let state = if ws.state == WorkspaceState::Visible {
                WorkspaceState::Expired
            } else {
                ws.state
            };
            return Err(Error::WorkspaceUnavailable {
                workbench_id: workbench_id.to_owned(),
                state,
            });
        }
        // A write is due: a writer's first write advances its owner epoch (a commit), after
        // which the command below meets a stale read version and the loop re-reads.
        seq.prepare_write()?;
        let read_version = snap.version();
        let commit_version = read_version + 1;
        let incarnation = WorkspaceIncarnationId::random()?;
        let ws = WorkspaceCurrent {
            incarnation,
            workspace_revision: 1,
            state: WorkspaceState::Visible,
            owning_operation: None,
            created_version: commit_version,
            modified_version: commit_version,
            expires_at_unix_ms: None,
        };
        let mut h = Sha256::new();
        h.update(b"nokv.workspace.create.v1\0");
        h.update((workbench_id.len() as u32).to_be_bytes());
        h.update(workbench_id.as_bytes());
        h.update(incarnation.as_bytes());
        let digest: [u8; 32] = h.finalize().into();
        let claim_key = workspace_incarnation_claim::key(&root, &incarnation);
        let mut cmd = shard.command_header(
            RequestId::random()?,
            digest,
            read_version,
            CommandResult::WorkspaceCreated {
                workspace: ws.clone(),
            },
        );
        cmd.predicates = vec![
            Predicate::absent(Family::WorkspaceCurrent, ws_key.clone()),
            Predicate::absent(Family::WorkspaceIncarnationClaim, claim_key.clone()),
        ];
        cmd.mutations = vec![
            Mutation::put(Family::WorkspaceCurrent, ws_key.clone(), ws.encode()),
            Mutation::put(
                Family::WorkspaceIncarnationClaim,
                claim_key,
                WorkspaceIncarnationClaim {
                    workbench_id: workbench_id.to_owned(),
                }
                .encode(),
            ),
        ];
        cmd.event_projection = vec![ChangeEvent {
            workbench_id: workbench_id.to_owned(),
            incarnation,
            kind: ChangeKind::WorkspaceCreated,
            path: None,
            before_generation: None,
            after_generation: None,
            moved_from: None,
        }];
        drop(snap);
        seq.execute(cmd)?;
        Ok(CreateWorkspaceOutcome {
            workspace: ws,
            created: true,
        })
    })
}
impl MetaShard {
    /// Creates a `Visible` workbench (see [`create_workspace`]).
    pub fn create_workspace(&self, workbench_id: &str) -> Result<CreateWorkspaceOutcome> {
        create_workspace(self, workbench_id)
    }
}
