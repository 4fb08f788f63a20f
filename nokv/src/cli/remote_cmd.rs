//! `nokv --server URL …` (or `NOKV_SERVER`, token `NOKV_TOKEN`): every command talks to a
//! `nokv serve` server through [`crate::remote::RemoteClient`] instead of opening the store, and
//! prints exactly what it prints embedded.
//!
//! How each command reaches the server (see `docs/server.md`):
//!
//! - `workbench <tool>`: the tool name, JSON syntax and schema are checked here (as embedded),
//!   then `POST /v1/tools/{tool}` returns the envelope that is printed;
//! - `commit`, `tag`, `find`, `snapshot`, `restore`, `operation`, `demo`:
//!   `POST /v1/commands/{command}` with the parsed arguments as the DTO ([`CommandRequest`]);
//!   the server runs the same command code on its open client and returns what it printed;
//! - `append`: the operation id and input are checked and read here, then
//!   `POST /v1/workbenches/{id}/append/{path}` returns the envelope;
//! - `collect` and `materialize`: the local-file halves run here (one implementation with the
//!   embedded path: [`crate::materialize::collect_with`], [`crate::materialize::write_files`]);
//!   bodies stream through `PUT`/`GET /v1/workbenches/{id}/files/{path}`;
//! - `changes`: `GET /v1/changes` streams the NDJSON lines;
//! - `schema` is answered locally (the same table); `init` and `serve` act on a local store
//!   directory and refuse `--server` (usage error).
//!
//! A server that cannot be reached prints one error envelope (`Unavailable`, retryable) on
//! stdout for the JSON commands, or `nokv: …` on stderr for the human ones; exit 1.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::commit_cmd::{CommitArgs, FindArgs, TagCommand};
use super::config_cmd::ConfigCommand;
use super::fsck_cmd::FsckArgs;
use super::gc_cmd::GcArgs;
use super::restore_cmd::RestoreCommand;
use super::rm_cmd::RmArgs;
use super::snapshot_cmd::SnapshotCommand;
use super::{print_json, Bar, Command, OperationAction, EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE};
use crate::client::Client;
use crate::remote::RemoteClient;
use crate::workbench::errors::{ErrorCode, ToolError};

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
    /// `nokv gc …`.
    Gc(GcArgs),
    /// `nokv fsck …`.
    Fsck(FsckArgs),
    /// `nokv config …`.
    Config(ConfigCommand),
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
    /// `{"exit_code": N, "stdout": TEXT, "stderr": TEXT}`.
    pub fn run(self, client: &Client) -> Value {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let code = match self {
            CommandRequest::Commit(a) => super::commit_cmd::run_commit_with(client, a, &mut out),
            CommandRequest::Tag(a) => super::commit_cmd::run_tag_with(client, a, &mut out),
            CommandRequest::Find(a) => super::commit_cmd::run_find_with(client, a, &mut out),
            CommandRequest::Snapshot(a) => {
                super::snapshot_cmd::run_snapshot_with(client, a, &mut out)
            }
            CommandRequest::Restore(a) => super::restore_cmd::run_restore_with(client, a, &mut out),
            CommandRequest::Operation(a) => {
                super::run_operation_with(Ok(client.clone()), a, &mut out, &mut err)
            }
            CommandRequest::Rm(a) => super::rm_cmd::run_rm_with(client, a, &mut out),
            CommandRequest::Gc(a) => super::gc_cmd::run_gc_with(client, a, &mut out, &mut err),
            CommandRequest::Fsck(a) => {
                super::fsck_cmd::run_fsck_with(client, a, &mut out, &mut err)
            }
            CommandRequest::Config(a) => {
                super::config_cmd::run_config_with(client, a, &mut out, &mut err)
            }
            CommandRequest::Demo => match crate::demo::run_demo(client, &mut out) {
                Ok(_) => EXIT_OK,
                Err(e) => {
                    let _ = writeln!(err, "nokv: {e}");
                    EXIT_TOOL_ERROR
                }
            },
        };
        json!({
            "exit_code": code,
            "stdout": String::from_utf8_lossy(&out),
            "stderr": String::from_utf8_lossy(&err),
        })
    }
}

/// The envelope printed when the server cannot be reached or refuses the request itself.
fn transport_envelope(e: &crate::Error) -> Value {
    match e {
        crate::Error::Server {
            code,
            message,
            retryable,
            details,
            ..
        } => json!({
            "status": "error",
            "code": code,
            "message": message,
            "retryable": retryable,
            "details": details,
        }),
        other => json!({
            "status": "error",
            "code": "Unavailable",
            "message": other.to_string(),
            "retryable": true,
            "details": {},
        }),
    }
}

fn json_failure(out: &mut dyn Write, e: &crate::Error) -> u8 {
    print_json(out, &transport_envelope(e));
    EXIT_TOOL_ERROR
}

fn text_failure(e: &crate::Error) -> u8 {
    eprintln!("nokv: {e}");
    EXIT_TOOL_ERROR
}

/// Runs one parsed command against the server at `url`; returns the exit code.
pub(crate) fn run(url: &str, quiet: bool, command: Command, out: &mut dyn Write) -> u8 {
    let remote = match RemoteClient::connect(url, None) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("nokv: {e}");
            return EXIT_USAGE;
        }
    };
    run_with(remote, quiet, command, out)
}

/// The routed client of `--control URLS --root NAME`, else of `$NOKV_CONTROL` + `$NOKV_ROOT`
/// (ignored when `--server` was given); `None` when neither names one.
///
/// Errors: [`crate::Error::InvalidArgument`] for bad URLs or a bad root name.
pub(crate) fn routed_client(
    control: Option<&str>,
    root: Option<&str>,
    server_flag: bool,
) -> crate::Result<Option<RemoteClient>> {
    match (control, root) {
        (Some(c), Some(r)) => {
            let ns = std::env::var("NOKV_ETCD_NAMESPACE")
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| meta::store::etcd::DEFAULT_NAMESPACE.to_owned());
            Ok(Some(RemoteClient::connect_routed(c, &ns, r, None)?))
        }
        _ if server_flag => Ok(None),
        _ => RemoteClient::from_control_env(),
    }
}

/// Runs `command` through `remote` (a client of one server or a routed client); returns the
/// exit code.
pub(crate) fn run_with(
    remote: RemoteClient,
    quiet: bool,
    command: Command,
    out: &mut dyn Write,
) -> u8 {
    match command {
        Command::Workbench { tool, input } => {
            let (name, input) = match super::workbench_input(&tool, input.as_deref()) {
                Ok(x) => x,
                Err((env, code)) => {
                    print_json(out, &env);
                    return code;
                }
            };
            match remote.call_tool(name, &input) {
                Ok(env) => {
                    print_json(out, &env);
                    super::envelope_exit_code(&env)
                }
                Err(e) => json_failure(out, &e),
            }
        }
        Command::Schema => {
            print_json(out, &crate::workbench::schema::describe_all());
            EXIT_OK
        }
        Command::Commit(a) => command_call(&remote, CommandRequest::Commit(a), out),
        Command::Tag { action } => command_call(&remote, CommandRequest::Tag(action), out),
        Command::Find(a) => command_call(&remote, CommandRequest::Find(a), out),
        Command::Snapshot { action } => {
            command_call(&remote, CommandRequest::Snapshot(action), out)
        }
        Command::Restore { action } => command_call(&remote, CommandRequest::Restore(action), out),
        Command::Operation { action } => {
            command_call(&remote, CommandRequest::Operation(action), out)
        }
        Command::Demo => command_call(&remote, CommandRequest::Demo, out),
        Command::Rm(a) => command_call(&remote, CommandRequest::Rm(a), out),
        Command::Gc(a) => command_call(&remote, CommandRequest::Gc(a), out),
        Command::Fsck(a) => command_call(&remote, CommandRequest::Fsck(a), out),
        Command::Config { action } => command_call(&remote, CommandRequest::Config(action), out),
        Command::Append {
            workbench,
            path,
            file,
            stdin,
            operation_id,
            content_type,
        } => {
            let bytes = match super::append_input(file.as_deref(), stdin.as_deref(), &operation_id)
            {
                Ok(b) => b,
                Err((err, code)) => {
                    print_json(out, &err.envelope());
                    return code;
                }
            };
            match remote.append_envelope(
                &workbench,
                &path,
                &bytes,
                &operation_id,
                content_type.as_deref(),
                None,
            ) {
                Ok(env) => {
                    print_json(out, &env);
                    super::envelope_exit_code(&env)
                }
                Err(e) => json_failure(out, &e),
            }
        }
        Command::Changes {
            after,
            workbench,
            follow,
            limit,
            poll_ms,
        } => {
            let mut q = Vec::new();
            if let Some(a) = &after {
                q.push(format!("after={}", crate::remote::encode_component(a)));
            }
            if let Some(w) = &workbench {
                q.push(format!("workbench={}", crate::remote::encode_component(w)));
            }
            if follow {
                q.push("follow=true".into());
            }
            if let Some(l) = limit {
                q.push(format!("limit={l}"));
            }
            q.push(format!("poll_ms={poll_ms}"));
            match remote.changes_stream(&q.join("&")) {
                Ok(mut reader) => copy_feed(&mut reader, out),
                Err(e) => json_failure(out, &e),
            }
        }
        Command::Materialize {
            workbench,
            dest,
            prefix,
        } => {
            let mut bar = Bar::new(quiet);
            let result = (|| -> crate::Result<Vec<crate::materialize::MaterializedFile>> {
                let (version, files) = remote.list_files(&workbench, prefix.as_deref())?;
                crate::materialize::write_files(
                    &files,
                    &dest,
                    &mut |e| bar.event(e),
                    &mut |path, _, w, advance| {
                        remote.read_to_writer_at(&workbench, path.as_str(), version, w, advance)
                    },
                )
            })();
            bar.finish();
            match result {
                Ok(files) => {
                    super::print_materialized(out, &files, &dest);
                    EXIT_OK
                }
                Err(e) => text_failure(&e),
            }
        }
        Command::Collect {
            workbench,
            file,
            path,
            content_type,
            replace,
            fields,
            index_json,
        } => {
            let mut bar = Bar::new(quiet);
            let result = (|| -> crate::Result<crate::materialize::CollectedFile> {
                let index = super::collect_precheck(&file, &path, &fields, index_json)?;
                remote.create_workbench(&workbench)?;
                let ct = content_type
                    .unwrap_or_else(|| crate::materialize::guess_content_type(&path).to_string());
                crate::materialize::collect_with(
                    &file,
                    &path,
                    &ct,
                    replace,
                    &index,
                    &mut |e| bar.event(e),
                    &mut |reader, options| remote.put_reader(&workbench, &path, reader, options),
                )
            })();
            bar.finish();
            match result {
                Ok(c) => {
                    super::print_collected(out, &c);
                    EXIT_OK
                }
                Err(e) => text_failure(&e),
            }
        }
        // The control plane is reached directly (etcd), not through the server.
        Command::Root { action } => super::root_cmd::run_root(action, out),
        Command::Shard { action } => super::shard_cmd::run_shard(action, out),
        // `nokv mcp` picks its remote backend itself (see `main_with_args`).
        // `verify` opens the store read-only, so it runs next to the server's writer.
        Command::Mcp(_) | Command::Init { .. } | Command::Serve(_) | Command::Verify(_) => {
            eprintln!(
                "nokv: `init`, `serve` and `verify` act on a local store directory; run them \
                 without --server"
            );
            EXIT_USAGE
        }
    }
}

/// `POST /v1/commands/{command}`: prints what the server's run of the command printed.
fn command_call(remote: &RemoteClient, request: CommandRequest, out: &mut dyn Write) -> u8 {
    let (name, args) = request.to_wire();
    match remote.command(&name, &args) {
        Ok(o) => {
            let _ = out.write_all(o.stdout.as_bytes());
            let _ = std::io::stderr().write_all(o.stderr.as_bytes());
            o.exit_code
        }
        Err(e) => match request_is_json(&name) {
            true => json_failure(out, &e),
            false => text_failure(&e),
        },
    }
}

/// Whether a command prints JSON envelopes (else human text).
fn request_is_json(name: &str) -> bool {
    !matches!(name, "operation" | "demo" | "gc" | "fsck" | "config")
}

/// Copies the change-feed stream to stdout line by line; the exit code is 1 when the feed ended
/// with an error envelope (as embedded) or the stream broke.
fn copy_feed(reader: &mut dyn Read, out: &mut dyn Write) -> u8 {
    let mut buf = std::io::BufReader::new(reader);
    // Events are compact one-line objects without a `status`; a failure ends the feed with the
    // pretty-printed error envelope (as embedded).
    let mut failed = false;
    loop {
        let mut line = String::new();
        match std::io::BufRead::read_line(&mut buf, &mut line) {
            Ok(0) => break,
            Ok(_) => {
                let _ = out.write_all(line.as_bytes());
                let _ = out.flush();
                failed |= line.trim() == "\"status\": \"error\",";
            }
            Err(e) => {
                let err = ToolError::new(
                    ErrorCode::ObjectUnavailable,
                    format!("the change feed connection broke: {e}"),
                );
                print_json(out, &err.envelope());
                return EXIT_TOOL_ERROR;
            }
        }
    }
    if failed {
        EXIT_TOOL_ERROR
    } else {
        EXIT_OK
    }
}
