//! `nokv restore run|abort|status`.
//!
//! - `run SOURCE DEST (--snapshot ID|NAME | --commit HEX64)` runs `workbench_restore` and prints
//!   its JSON envelope (exit 0 on success, 1 on a tool error). Re-running the same command after
//!   a crash resumes the same deterministic operation.
//! - `abort DEST` aborts an unfinished restore into DEST and cleans it up (a published
//!   destination is never touched); prints `{operation_id, phase}`.
//! - `status DEST` prints the restore operation owning DEST (`phase`, progress), or exits 1.

use std::io::Write;
use std::path::Path;

use clap::Subcommand;
use serde_json::{json, Map, Value};

use super::{print_json, EXIT_OK, EXIT_TOOL_ERROR};
use crate::client::Client;
use crate::workbench::{store_error, Workbench};

/// `nokv restore` actions.
#[derive(Debug, Subcommand)]
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
        crate::client::ClientOptions {
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
                let sel = match s.parse::<u64>() {
                    Ok(n) if s.bytes().all(|b| b.is_ascii_digit()) => Value::from(n),
                    _ => Value::from(s),
                };
                args.insert("at_snapshot".into(), sel);
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
        RestoreCommand::Abort { destination } => match client.abort_restore(&destination) {
            Ok(r) => {
                print_json(
                    out,
                    &json!({"operation_id": r.operation_id, "phase": format!("{:?}", r.phase)}),
                );
                EXIT_OK
            }
            Err(e) => {
                let _ = writeln!(out, "{{\"error\": {}}}", Value::from(e.to_string()));
                EXIT_TOOL_ERROR
            }
        },
        RestoreCommand::Status { destination } => match client.restore_operation(&destination) {
            Ok(Some(op)) => {
                print_json(
                    out,
                    &json!({
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
            Ok(None) => {
                let _ = writeln!(out, "{{\"error\": \"no restore owns this workbench id\"}}");
                EXIT_TOOL_ERROR
            }
            Err(e) => {
                let _ = writeln!(out, "{{\"error\": {}}}", Value::from(e.to_string()));
                EXIT_TOOL_ERROR
            }
        },
    }
}
