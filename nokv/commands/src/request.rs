//! The DTO of `POST /v1/commands/{command}`: one store command with its arguments, run by the
//! server exactly as the CLI runs it on the embedded store (docs/server.md).

use std::io::Write;

use nokv::client::Client;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::audit_cmd::AuditArgs;
use crate::browse_cmd::{LogArgs, LsArgs, TreeArgs};
use crate::commit_cmd::{CommitArgs, FindArgs, TagCommand};
use crate::config_cmd::ConfigCommand;
use crate::diff_cmd::DiffArgs;
use crate::expire_cmd::ExpireArgs;
use crate::fsck_cmd::FsckArgs;
use crate::gc_cmd::GcArgs;
use crate::mv_cmd::MvArgs;
use crate::restore_cmd::RestoreCommand;
use crate::rm_cmd::RmArgs;
use crate::snapshot_cmd::SnapshotCommand;
use crate::token_cmd::TokenCommand;
use crate::{OperationAction, EXIT_OK, EXIT_TOOL_ERROR};

/// One CLI command the server runs on its open client: the DTO of
/// `POST /v1/commands/{command}` (`{command}` is the variant name in snake case, the body its
/// arguments).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "command", content = "args", rename_all = "snake_case")]
pub enum CommandRequest {
    /// `nokv commit …`.
    Commit(CommitArgs),
    /// `nokv tag …`.
    Tag(TagCommand),
    /// `nokv find …`.
    Find(FindArgs),
    /// `nokv snapshot …`.
    Snapshot(SnapshotCommand),
    /// `nokv restore …`.
    Restore(RestoreCommand),
    /// `nokv operation …`.
    Operation(OperationAction),
    /// `nokv demo` (runs on the server's store; its sandboxes live there).
    Demo,
    /// `nokv rm …`.
    Rm(RmArgs),
    /// `nokv mv …`.
    Mv(MvArgs),
    /// `nokv diff …`.
    Diff(DiffArgs),
    /// `nokv gc …`.
    Gc(GcArgs),
    /// `nokv fsck …`.
    Fsck(FsckArgs),
    /// `nokv config …`.
    Config(ConfigCommand),
    /// `nokv expire …`.
    Expire(ExpireArgs),
    /// `nokv ls …`.
    Ls(LsArgs),
    /// `nokv tree …`.
    Tree(TreeArgs),
    /// `nokv log …`.
    Log(LogArgs),
    /// `nokv token …` (the store's token registry; `admin` only).
    Token(TokenCommand),
    /// `nokv audit …` (the store's audit trail; `admin` only).
    Audit(AuditArgs),
}

impl CommandRequest {
    /// The request of endpoint `name` with body `args`. Errors: a message for an unknown
    /// command or arguments that do not fit it.
    pub fn parse(name: &str, args: Value) -> Result<CommandRequest, String> {
        let value = if name == "demo" {
            json!({ "command": "demo" })
        } else {
            json!({ "command": name, "args": args })
        };
        serde_json::from_value(value).map_err(|e| {
            format!("`{name}` is not a command this server runs with these arguments: {e}")
        })
    }

    /// The endpoint name and body of this request.
    pub fn to_wire(&self) -> (String, Value) {
        let v = serde_json::to_value(self).unwrap_or(Value::Null);
        let name = v
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        (name, v.get("args").cloned().unwrap_or(Value::Null))
    }

    /// Runs the command on `client` exactly as the CLI does, capturing what it prints:
    /// `{"exit_code": N, "stdout": TEXT, "stderr": TEXT}`; `demo` adds `"changes"`, the
    /// [`crate::demo::DemoChange`]s it made (each gets its own audit record).
    pub fn run(self, client: &Client) -> Value {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut changes = None;
        let code = match self {
            CommandRequest::Commit(a) => crate::commit_cmd::run_commit_with(client, a, &mut out),
            CommandRequest::Tag(a) => crate::commit_cmd::run_tag_with(client, a, &mut out),
            CommandRequest::Find(a) => crate::commit_cmd::run_find_with(client, a, &mut out),
            CommandRequest::Snapshot(a) => {
                crate::snapshot_cmd::run_snapshot_with(client, a, &mut out)
            }
            CommandRequest::Restore(a) => crate::restore_cmd::run_restore_with(client, a, &mut out),
            CommandRequest::Operation(a) => {
                crate::run_operation_with(Ok(client.clone()), a, &mut out, &mut err)
            }
            CommandRequest::Rm(a) => crate::rm_cmd::run_rm_with(client, a, &mut out),
            CommandRequest::Mv(a) => crate::mv_cmd::run_mv_with(client, a, &mut out),
            CommandRequest::Diff(a) => crate::diff_cmd::run_diff_with(client, a, &mut out),
            CommandRequest::Gc(a) => crate::gc_cmd::run_gc_with(client, a, &mut out, &mut err),
            CommandRequest::Fsck(a) => {
                crate::fsck_cmd::run_fsck_with(client, a, &mut out, &mut err)
            }
            CommandRequest::Config(a) => {
                crate::config_cmd::run_config_with(client, a, &mut out, &mut err)
            }
            CommandRequest::Expire(a) => crate::expire_cmd::run_expire_with(client, a, &mut out),
            CommandRequest::Ls(a) => crate::browse_cmd::run_ls_with(client, a, &mut out, &mut err),
            CommandRequest::Tree(a) => {
                crate::browse_cmd::run_tree_with(client, a, &mut out, &mut err)
            }
            CommandRequest::Log(a) => {
                crate::browse_cmd::run_log_with(client, a, &mut out, &mut err)
            }
            CommandRequest::Token(a) => crate::token_cmd::run_token_with(
                &nokv::access::TokenRegistry::at_store(client.dir()),
                a,
                crate::token_cmd::wall_unix_ms(),
                &mut out,
            ),
            CommandRequest::Audit(a) => crate::audit_cmd::run_audit_with(
                &nokv::access::AuditLog::at_store(client.dir()),
                &a,
                crate::token_cmd::wall_unix_ms(),
                &mut out,
            ),
            CommandRequest::Demo => match crate::demo::run_demo(client, &mut out) {
                Ok(report) => {
                    changes = serde_json::to_value(&report.changes).ok();
                    EXIT_OK
                }
                Err(e) => {
                    let _ = writeln!(err, "nokv: {e}");
                    EXIT_TOOL_ERROR
                }
            },
        };
        let mut answer = json!({
            "exit_code": code,
            "stdout": String::from_utf8_lossy(&out),
            "stderr": String::from_utf8_lossy(&err),
        });
        if let Some(changes) = changes {
            answer["changes"] = changes;
        }
        answer
    }
}
