//! # nokv-commands — the store commands the `nokv` CLI and `nokv serve` share
//!
//! `nokv commit|tag|find|snapshot|changes|restore|operation|rm|mv|diff|gc|fsck|config|expire|demo|ls|tree|log`:
//! each command parses its arguments (clap derive, also serde for the wire), runs on an open
//! [`nokv::Client`] and prints what the user reads. The CLI calls these on the embedded store;
//! `nokv serve` runs the same code for `POST /v1/commands/{command}` ([`request::CommandRequest`]),
//! so a command answers identically through `--server`.
//!
//! Exit codes: [`EXIT_OK`] success, [`EXIT_TOOL_ERROR`] tool/operation error, [`EXIT_USAGE`] usage
//! error.

use std::io::Write;

use clap::Subcommand;
use nokv::client::Client;
use nokv::publication::parse_operation_id;
use nokv::workbench::errors::ToolError;
use serde_json::Value;

pub mod audit_cmd;
pub mod browse_cmd;
pub mod command_access;
pub mod commit_cmd;
pub mod config_cmd;
pub mod demo;
pub mod diff_cmd;
pub mod expire_cmd;
pub mod fsck_cmd;
pub mod gc_cmd;
pub mod mv_cmd;
pub mod read_only;
pub mod request;
pub mod restore_cmd;
pub mod rm_cmd;
pub mod snapshot_cmd;
pub mod token_cmd;

/// Exit code of a successful command.
pub const EXIT_OK: u8 = 0;
/// Exit code of a tool or operation error.
pub const EXIT_TOOL_ERROR: u8 = 1;
/// Exit code of a usage error (bad flags, unparsable JSON).
pub const EXIT_USAGE: u8 = 2;

/// `nokv operation` subcommands.
#[derive(Debug, Clone, Subcommand, serde::Serialize, serde::Deserialize)]
pub enum OperationAction {
    /// Recover orphaned Publish operations from the ledger (never by listing the bucket):
    /// resume verified Finalizing ones, abort and clean the others, reconcile quarantined ones.
    /// Prints `resumed N cleaned N quarantined N …`.
    Recover,
    /// List Publish operations: the non-terminal ones plus the `--recent` most recently
    /// published ones (by commit version), or every one with `--all`.
    List {
        /// List every operation, terminal (Published, Cleaned) ones included.
        #[arg(long)]
        all: bool,
        /// How many of the most recent Published operations to show (default 10).
        #[arg(long, default_value_t = 10)]
        recent: usize,
    },
}

/// `nokv operation recover|list` on an opened (or failed-to-open) client; human text on `out`,
/// failures as `nokv: …` on `err`. Shared by the CLI and the server.
pub fn run_operation_with(
    client: nokv::Result<Client>,
    action: OperationAction,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    match action {
        OperationAction::Recover => {
            // The open itself runs one pass (orphans of dead processes); a second pass
            // reconciles what the first one quarantined earlier and reports totals.
            match client.and_then(|c| c.recover_operations()) {
                Ok(s) => {
                    let _ = writeln!(
                        out,
                        "resumed {} cleaned {} quarantined {} reconciled {} pending {} in_flight {} errors {}",
                        s.resumed,
                        s.cleaned,
                        s.quarantined,
                        s.reconciled,
                        s.pending,
                        s.in_flight,
                        s.errors.len()
                    );
                    for e in &s.errors {
                        let _ = writeln!(out, "error {e}");
                    }
                    if s.errors.is_empty() {
                        EXIT_OK
                    } else {
                        EXIT_TOOL_ERROR
                    }
                }
                Err(e) => {
                    let _ = writeln!(err, "nokv: {e}");
                    EXIT_TOOL_ERROR
                }
            }
        }
        OperationAction::List { all, recent } => {
            match client.and_then(|c| c.list_operations(true)) {
                Ok(every) => {
                    let ops = if all {
                        every
                    } else {
                        let terminal = |p: &str| p == "Published" || p == "Cleaned";
                        let mut published: Vec<_> = every
                            .iter()
                            .filter(|o| o.phase == "Published")
                            .cloned()
                            .collect();
                        published.sort_by_key(|o| std::cmp::Reverse(o.generation));
                        published.truncate(recent);
                        let mut ops: Vec<_> =
                            every.into_iter().filter(|o| !terminal(&o.phase)).collect();
                        ops.extend(published);
                        ops
                    };
                    for op in &ops {
                        let _ = writeln!(
                            out,
                            "{}  {:<11}  {}/{}  objects {} live {}  {}{}",
                            op.operation_id,
                            op.phase,
                            op.workbench_id,
                            nokv::printable::printable(&op.path),
                            op.staged_objects,
                            op.live_objects,
                            op.generation
                                .map_or_else(String::new, |g| format!("generation {g}")),
                            op.note
                                .as_ref()
                                .map_or_else(String::new, |n| format!("  ({n})"))
                        );
                    }
                    let _ = writeln!(out, "{} operation(s)", ops.len());
                    EXIT_OK
                }
                Err(e) => {
                    let _ = writeln!(err, "nokv: {e}");
                    EXIT_TOOL_ERROR
                }
            }
        }
    }
}

/// The store-side half of `nokv append` (shared by the CLI and the server): the durable
/// idempotent append and the envelope to print, with the exit code.
pub fn append_envelope(
    client: &Client,
    workbench: &str,
    path: &str,
    bytes: &[u8],
    operation_id: &str,
    content_type: Option<&str>,
    create_type: Option<&str>,
) -> (Value, u8) {
    let fail = |err: ToolError, code: u8| (err.envelope(), code);
    let Some(id) = parse_operation_id(operation_id) else {
        return fail(
            ToolError::invalid_arguments("--operation-id must be exactly 32 hex characters"),
            EXIT_USAGE,
        );
    };
    if let Err(e) = meta::validate_workbench_id(workbench) {
        return fail(
            ToolError::invalid_arguments(match e {
                meta::Error::InvalidArgument(msg) => msg,
                other => other.to_string(),
            }),
            EXIT_TOOL_ERROR,
        );
    }
    let result = client.append_idempotent_with_create_type(
        workbench,
        path,
        bytes,
        id,
        content_type,
        create_type.unwrap_or(nokv::workbench::payload::TEXT_CONTENT_TYPE),
        "nokv append",
    );
    match result {
        Ok(r) => {
            let env = serde_json::json!({
                "status": "success",
                "workbench_id": workbench,
                "relative_path": r.path.as_str(),
                "path": format!("{}/{}", client.workbench_path(workbench), r.path.as_str()),
                "operation_id": operation_id.to_ascii_lowercase(),
                "appended_bytes": r.appended_bytes,
                "size_bytes": r.size_bytes,
                "generation": r.generation,
                "created": r.created,
                "digest": r.delta_digest_uri,
                "body_digest_uri": r.body_digest_uri,
                "content_type": r.content_type,
                "idempotent_replay": r.idempotent_replay,
            });
            (env, EXIT_OK)
        }
        // Retrying can never succeed: the id stays bound to its first append.
        Err(nokv::Error::Meta(meta::Error::OperationIntentMismatch { .. })) => fail(
            ToolError::invalid_arguments(
                "this --operation-id is already bound to a different append (another path or \
                 other bytes); pick a new operation id for a new append",
            )
            .with_detail("reason", Value::from("operation_id_reused"))
            .with_detail(
                "operation_id",
                Value::from(operation_id.to_ascii_lowercase()),
            ),
            EXIT_TOOL_ERROR,
        ),
        Err(nokv::Error::Meta(meta::Error::OperationState { .. })) => {
            fail(ToolError::conflict("OperationState"), EXIT_TOOL_ERROR)
        }
        Err(e) => fail(
            nokv::workbench::tool_error(client, workbench, e),
            EXIT_TOOL_ERROR,
        ),
    }
}

/// Parses a `--request-id` (32 hex characters, the form of [`parse_operation_id`]); `None` when
/// none was given. Errors: the `InvalidArguments` error and the usage exit code.
pub fn request_id_arg(request_id: Option<&str>) -> Result<Option<[u8; 16]>, (ToolError, u8)> {
    match request_id.map(parse_operation_id) {
        None => Ok(None),
        Some(Some(id)) => Ok(Some(id)),
        Some(None) => Err((
            ToolError::invalid_arguments("--request-id must be exactly 32 hex characters"),
            EXIT_USAGE,
        )),
    }
}

/// Prints the error envelope of `err` on `out`; returns `code`.
pub(crate) fn print_failure(out: &mut dyn Write, err: ToolError, code: u8) -> u8 {
    print_json(out, &err.envelope());
    code
}

/// A snapshot named on the command line as the Workbench tools take it: all ASCII digits → the
/// numeric snapshot id, anything else → the name (the rule of [`nokv::snapshot::parse_selector`]).
pub(crate) fn snapshot_selector(snapshot: &str) -> Value {
    if !snapshot.is_empty() && snapshot.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(id) = snapshot.parse::<u64>() {
            return Value::from(id);
        }
    }
    Value::from(snapshot)
}

/// Exit code of a printed envelope: 0 for `"status":"success"`, else 1.
pub fn envelope_exit_code(envelope: &Value) -> u8 {
    if envelope.get("status").and_then(Value::as_str) == Some("success") {
        EXIT_OK
    } else {
        EXIT_TOOL_ERROR
    }
}

/// Prints the CLI's plain error line, `nokv: MESSAGE`, on stderr, with the control and
/// bidirectional characters of the message (a name an agent chose) escaped
/// ([`nokv::printable::printable`]).
pub fn eprint_error(message: impl std::fmt::Display) {
    eprintln!("nokv: {}", nokv::printable::printable(&message.to_string()));
}

pub fn print_json(out: &mut dyn Write, value: &Value) {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "{}".to_string());
    let _ = writeln!(out, "{text}");
}

#[cfg(test)]
mod tests {
    use super::snapshot_selector;
    use serde_json::Value;

    #[test]
    fn a_snapshot_argument_is_an_id_only_when_it_is_all_digits() {
        assert_eq!(snapshot_selector("7"), Value::from(7u64));
        assert_eq!(snapshot_selector("007"), Value::from(7u64));
        // `u64::from_str` accepts a sign; a snapshot id does not: "+5" is the alias "+5".
        assert_eq!(snapshot_selector("+5"), Value::from("+5"));
        assert_eq!(snapshot_selector("before"), Value::from("before"));
        // Too large for an id: a name.
        assert_eq!(
            snapshot_selector("99999999999999999999"),
            Value::from("99999999999999999999")
        );
    }
}
