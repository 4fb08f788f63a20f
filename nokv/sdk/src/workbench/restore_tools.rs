//! `workbench_restore` (docs/workbench.md; docs/metadata-format.md, "Restore Closure").
//!
//! Inputs: `id` (source), `destination_id` (≠ `id`, must be absent), exactly one of
//! `at_snapshot` (snapshot id ≥ 0 or name) / `at_commit` (64 lowercase hex). The restore runs to
//! completion through [`crate::client::Client::restore`]: the staging destination is invisible to every
//! read/list/query surface until the one final marker transition; an exact retry returns the
//! same operation's result with `idempotent_replay: true`.
//!
//! Result: `state: "complete"`, `operation_id` (32 hex), `source_workbench_id`,
//! `destination_workbench_id`, `snapshot_id`, `read_version`, `commit_id`,
//! `destination_generation`, `idempotent_replay`, `cleanup_pending`, `restore_manifest` (path).
//!
//! Errors: `InvalidArguments` (same id, both/neither selector, malformed commit id), `NotFound`
//! (source workbench, or no such commit of it), `SnapshotNotFound`, `SnapshotExpired` (expired,
//! retired or reaped; `details.state`, as a read at the snapshot answers), `AlreadyExists` (destination visible or reserved by another operation),
//! `RestoreProtocolMismatch` (operation-id collision or a retry that does not match the prepared
//! operation), `NotDirectory` (the source holds a path both as a file and as a directory — an
//! older store; the restore is rolled back), `InvalidState` (retiring commit, failed closure verification, aborted operation),
//! `Conflict` (`OperationState`, `ReadVersion`), `ObjectUnavailable`, `Internal`.

use meta::ids::CommitId;
use meta::ops::restore::RestoreError as OpError;
use serde_json::{Map, Value};

use super::error_map::{meta_tool_error, tool_error};
use super::facade::Workbench;
use super::scope::req_str;
use super::snapshot_tools::selector_of;
use crate::client::Client;
use crate::restore::{RestoreFailure, RestoreFrom, RestoreRequest};
use nokv_protocol::errors::{ErrorCode, ToolError, ToolResult};

/// Runs `workbench_restore`.
pub(super) fn restore(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let destination = req_str(args, "destination_id")?;
    if id == destination {
        return Err(ToolError::invalid_arguments(
            "destination_id must differ from id: restore creates a new workbench",
        ));
    }
    let snapshot = selector_of(args.get("at_snapshot"))?;
    let commit = match args.get("at_commit") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(CommitId::from_hex(s).map_err(|_| {
            ToolError::invalid_arguments("at_commit must be 64 lowercase hex characters")
        })?),
        Some(_) => {
            return Err(ToolError::invalid_arguments(
                "at_commit must be 64 lowercase hex characters",
            ))
        }
    };
    let from = match (snapshot, commit) {
        (Some(s), None) => RestoreFrom::Snapshot(s),
        (None, Some(c)) => RestoreFrom::Commit(c),
        _ => {
            return Err(ToolError::invalid_arguments(
                "give exactly one of at_snapshot or at_commit",
            ))
        }
    };
    let client = wb.client();
    let req = RestoreRequest {
        source_workbench_id: id.to_string(),
        destination_workbench_id: destination.to_string(),
        from,
    };
    let receipt = client
        .restore(&req)
        .map_err(|e| restore_error(client, &req, e))?;
    match receipt.to_json() {
        Value::Object(map) => Ok(map),
        _ => Err(ToolError::internal("restore result is not an object")),
    }
}

/// Maps restore errors to tool errors without storage identities (operation and commit ids are
/// facade identities).
pub(crate) fn restore_error(
    client: &Client,
    req: &RestoreRequest,
    err: RestoreFailure,
) -> ToolError {
    let src = &req.source_workbench_id;
    let dst = &req.destination_workbench_id;
    match err {
        RestoreFailure::Sdk(e) => tool_error(client, src, e),
        RestoreFailure::Interrupted(point) => ToolError::internal(format!(
            "the restore stopped at fault point {}; run the same restore again to resume it",
            point.as_str()
        )),
        RestoreFailure::Operation(op) => match op {
            OpError::SourceWorkbenchNotFound { .. } => super::error_map::workbench_not_found(
                client,
                src,
                "does not exist; restore needs an existing source",
            ),
            OpError::SnapshotNotFound { .. } => ToolError::new(
                ErrorCode::SnapshotNotFound,
                format!(
                    "no such snapshot in workbench `{src}`; list them with workbench_snapshot_list"
                ),
            ),
            // The same answer as a read at the snapshot (snapshot_tools::snapshot_error).
            OpError::SnapshotExpired {
                snapshot_id,
                status,
            } => ToolError::new(
                ErrorCode::SnapshotExpired,
                format!(
                    "snapshot {snapshot_id} is {status}; its frozen state is no longer held (an expired, unreaped snapshot can be renewed; otherwise restore from a commit)"
                ),
            )
            .with_detail("snapshot_id", Value::from(snapshot_id))
            .with_detail("state", Value::from(status)),
            OpError::CommitNotFound { commit_id } => ToolError::new(
                ErrorCode::NotFound,
                format!("workbench `{src}` has no sealed commit {commit_id}"),
            )
            .with_detail("path", Value::from(client.workbench_path(src))),
            OpError::CommitUnavailable { commit_id, state } => ToolError::new(
                ErrorCode::InvalidState,
                format!("commit {commit_id} is {state:?} and can no longer be restored"),
            ),
            OpError::DestinationExists { .. } => ToolError::new(
                ErrorCode::AlreadyExists,
                format!(
                    "workbench `{dst}` already exists or is reserved by another operation; restore into a new id"
                ),
            )
            .with_detail("path", Value::from(client.workbench_path(dst))),
            OpError::IdentityCollision => ToolError::new(
                ErrorCode::RestoreProtocolMismatch,
                "the restore's deterministic operation id collides with a different restore; choose another destination id",
            ),
            OpError::RequestMismatch => ToolError::new(
                ErrorCode::RestoreProtocolMismatch,
                "this retry does not match the prepared restore of the same identity",
            ),
            OpError::SourceClosureMismatch { reason } => ToolError::new(
                ErrorCode::InvalidState,
                format!("the restore source failed verification and the restore was rolled back: {reason}"),
            ),
            OpError::SourceNamespaceClash { path } => ToolError::new(
                ErrorCode::NotDirectory,
                format!(
                    "the restore source holds `{path}` both as a file and as a directory (written by an older version); a restore never publishes such a namespace, so it was rolled back — read the files by their exact paths, or remove one side in the source and commit or snapshot again"
                ),
            )
            .with_detail(
                "path",
                Value::from(format!("{}/{path}", client.workbench_path(src))),
            )
            .with_detail("kind", Value::from("file_and_directory")),
            OpError::Aborted(t) => ToolError::new(
                ErrorCode::parse(&t.code).unwrap_or(ErrorCode::InvalidState),
                t.message,
            ),
            OpError::InvalidPhase { .. } | OpError::OperationNotFound => {
                ToolError::conflict("OperationState")
            }
            OpError::Meta(meta::Error::RevisionUnavailable { .. }) => ToolError::new(
                ErrorCode::InvalidState,
                "a source artifact is no longer available; the restore was rolled back",
            ),
            OpError::Meta(e) => meta_tool_error(&e),
        },
    }
}
