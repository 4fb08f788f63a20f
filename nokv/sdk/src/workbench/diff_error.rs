//! The typed tool error of a failed diff ([`crate::Client::diff`]) for every front door (`nokv
//! diff`, `GET /v1/diff`, Python `Store.diff`).

use nokv_protocol::errors::{ErrorCode, ToolError};
use serde_json::Value;

use super::snapshot_tools::snapshot_error;
use crate::client::Client;
use crate::error::Error;

/// Maps a diff failure: a missing commit is `NotFound` (`details.commit_id`), a retiring or
/// retired commit `InvalidState`; snapshot sides map as snapshot reads do (`SnapshotNotFound`,
/// `SnapshotExpired`); everything else like any tool error of `workbench_id` (the workbench of
/// side A, or empty when side A is a commit).
pub fn diff_error(client: &Client, workbench_id: &str, err: Error) -> ToolError {
    match err {
        Error::Meta(meta::Error::CommitNotFound { commit_id }) => {
            ToolError::new(ErrorCode::NotFound, "the named commit does not exist")
                .with_detail("commit_id", Value::from(commit_id))
        }
        Error::Meta(meta::Error::CommitLifecycle { reason }) => {
            ToolError::new(ErrorCode::InvalidState, reason)
        }
        other => snapshot_error(client, workbench_id, other),
    }
}
