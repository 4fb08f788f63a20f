//! `nokv restore run|abort|status`.
//!
//! - `run SOURCE DEST (--snapshot ID|NAME | --commit HEX64)` runs `workbench_restore` and prints
//!   its JSON envelope (exit 0 on success, 1 on a tool error). Re-running the same command after
//!   a crash resumes the same deterministic operation.
//! - `abort DEST` aborts an unfinished restore into DEST and cleans it up; prints
//!   `{"status":"success", operation_id, phase}`. A restore that already completed is never
//!   touched: `InvalidState` ("the restore already completed; nothing to abort"), exit 1.
//! - `status DEST` prints `{"status":"success", …}` with the restore operation owning DEST
//!   (`phase`, progress), or `NotFound {path}` when no restore owns DEST (exit 1).
//!
//! Every error is the standard Workbench envelope
//! `{"status":"error","code":…,"message":…,"retryable":…,"details":{…}}` on stdout.

use std::io::Write;
use std::path::Path;

use clap::Subcommand;
use serde_json::{json, Map, Value};

use crate::{print_json, EXIT_OK, EXIT_TOOL_ERROR};
use meta::codec::{RestoreOperation, RestorePhase};
use meta::ops::restore::RestoreError as OpError;
use nokv::client::Client;
use nokv::restore::RestoreFailure;
use nokv::workbench::errors::{ErrorCode, ToolError};
use nokv::workbench::{meta_tool_error, store_error, tool_error, Workbench};

/// Prints the error envelope of `err`; returns the tool-error exit code.
fn failure(out: &mut dyn Write, err: ToolError) -> u8 {
    print_json(out, &err.envelope());
    EXIT_TOOL_ERROR
}

/// `NotFound {path}`: no restore operation owns `destination`.
fn no_restore(client: &Client, destination: &str) -> ToolError {
    ToolError::new(
        ErrorCode::NotFound,
        format!("no restore owns workbench `{destination}`; start one with `nokv restore run`"),
    )
    .with_detail("path", Value::from(client.workbench_path(destination)))
}

/// Maps errors of `restore abort|status DEST` to tool errors (no storage identities).
fn op_error(client: &Client, destination: &str, err: RestoreFailure) -> ToolError {
    match err {
        RestoreFailure::Sdk(e) => tool_error(client, destination, e),
        RestoreFailure::Operation(OpError::OperationNotFound) => no_restore(client, destination),
        RestoreFailure::Operation(OpError::Meta(meta::Error::InvalidArgument(msg))) => {
            ToolError::invalid_arguments(msg)
        }
        RestoreFailure::Operation(OpError::Meta(e)) => meta_tool_error(&e),
        RestoreFailure::Operation(OpError::InvalidPhase { .. }) => {
            ToolError::conflict("OperationState")
        }
        other => ToolError::internal(format!("the restore operation failed: {other}")),
    }
}

/// `nokv restore` actions.
#[derive(Debug, Clone, Subcommand, serde::Serialize, serde::Deserialize)]
pub enum RestoreCommand {
    /// Restore a snapshot or commit of SOURCE into the new workbench DEST (`workbench_restore`).
    Run {
        /// Source workbench id.
        source: String,
        /// Destination workbench id (must not exist).
        destination: String,
        /// Snapshot id (digits) or name.
        #[arg(long, conflicts_with = "commit", required_unless_present = "commit")]
        snapshot: Option<String>,
        /// Commit id (64 lowercase hex).
        #[arg(long)]
        commit: Option<String>,
    },
    /// Abort and clean up an unfinished restore into DEST.
    Abort {
        /// Destination workbench id.
        destination: String,
    },
    /// Show the restore operation that owns DEST.
    Status {
        /// Destination workbench id.
        destination: String,
    },
}

/// Runs one `nokv restore` action; returns the exit code.
pub fn run_restore(dir: &Path, cmd: RestoreCommand, out: &mut dyn Write) -> u8 {
    let client = match Client::open_with(
        dir,
        nokv::client::ClientOptions {
            create_if_missing: false,
            ..Default::default()
        },
    ) {
        Ok(c) => c,
        Err(e) => {
            print_json(out, &store_error(e).envelope());
            return EXIT_TOOL_ERROR;
        }
    };
    run_restore_with(&client, cmd, out)
}

/// [`run_restore`] on an open client (the server runs it for `nokv --server`).
pub fn run_restore_with(client: &Client, cmd: RestoreCommand, out: &mut dyn Write) -> u8 {
    let client = client.clone();
    match cmd {
        RestoreCommand::Run {
            source,
            destination,
            snapshot,
            commit,
        } => {
            let mut args = Map::new();
            args.insert("id".into(), Value::from(source));
            args.insert("destination_id".into(), Value::from(destination));
            if let Some(s) = snapshot {
                args.insert("at_snapshot".into(), crate::snapshot_selector(&s));
            }
            if let Some(c) = commit {
                args.insert("at_commit".into(), Value::from(c));
            }
            let result = Workbench::new(client).call("workbench_restore", &Value::Object(args));
            print_json(out, &result);
            if result.get("status").and_then(Value::as_str) == Some("success") {
                EXIT_OK
            } else {
                EXIT_TOOL_ERROR
            }
        }
        RestoreCommand::Abort { destination } => {
            // A completed restore is refused before anything is attempted.
            match client.restore_operation(&destination) {
                Ok(Some(op)) if op.phase == RestorePhase::Complete => {
                    return failure(out, already_complete(&client, &destination, &op));
                }
                Ok(_) => {}
                Err(e) => return failure(out, op_error(&client, &destination, e)),
            }
            match client.abort_restore(&destination) {
                // Lost a race with the final publication: the destination stays visible.
                Ok(r) if r.phase == RestorePhase::Complete => failure(
                    out,
                    ToolError::new(
                        ErrorCode::InvalidState,
                        "the restore already completed; nothing to abort",
                    )
                    .with_detail("path", Value::from(client.workbench_path(&destination)))
                    .with_detail("operation_id", Value::from(r.operation_id)),
                ),
                Ok(r) => {
                    print_json(
                        out,
                        &json!({
                            "status": "success",
                            "operation_id": r.operation_id,
                            "phase": format!("{:?}", r.phase),
                        }),
                    );
                    EXIT_OK
                }
                Err(e) => failure(out, op_error(&client, &destination, e)),
            }
        }
        RestoreCommand::Status { destination } => match client.restore_operation(&destination) {
            Ok(Some(op)) => {
                print_json(
                    out,
                    &json!({
                        "status": "success",
                        "operation_id": op.operation_id().to_hex(),
                        "phase": format!("{:?}", op.phase),
                        "source_workbench_id": op.source_workbench_id,
                        "destination_workbench_id": op.destination_workbench_id,
                        "member_count": op.member_count,
                        "source_eof": op.cursor.source_eof,
                        "cleanup_next_sequence": op.cleanup_next_sequence,
                    }),
                );
                EXIT_OK
            }
            Ok(None) => failure(out, no_restore(&client, &destination)),
            Err(e) => failure(out, op_error(&client, &destination, e)),
        },
    }
}

/// `InvalidState`: the restore into `destination` already published.
fn already_complete(client: &Client, destination: &str, op: &RestoreOperation) -> ToolError {
    ToolError::new(
        ErrorCode::InvalidState,
        "the restore already completed; nothing to abort",
    )
    .with_detail("path", Value::from(client.workbench_path(destination)))
    .with_detail("operation_id", Value::from(op.operation_id().to_hex()))
}
