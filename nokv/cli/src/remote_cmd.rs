//! `nokv --server URL …` (or `NOKV_SERVER`, token `NOKV_TOKEN`): every command talks to a
//! `nokv serve` server through [`nokv_remote::RemoteClient`] instead of opening the store, and
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
//!   embedded path: [`nokv::materialize::collect_with`], [`nokv::materialize::write_files`]);
//!   bodies stream through `PUT`/`GET /v1/workbenches/{id}/files/{path}`;
//! - `changes`: `GET /v1/changes` streams the NDJSON lines;
//! - `schema` is answered locally (the same table); `init` and `serve` act on a local store
//!   directory and refuse `--server` (usage error).
//!
//! A server that cannot be reached prints one error envelope (`Unavailable`, retryable) on
//! stdout for the JSON commands, or `nokv: …` on stderr for the human ones; exit 1.

use std::io::{Read, Write};

use crate::args::Command;
use crate::tool_io::{
    append_input, collect_precheck, collect_request_id, print_collected, print_materialized,
    run_tool, with_request_id, workbench_input, Bar,
};
use nokv::workbench::errors::{ErrorCode, ToolError};
use nokv_commands::request::CommandRequest;
use nokv_commands::{print_json, EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE};
use nokv_remote::RemoteClient;

fn json_failure(out: &mut dyn Write, e: nokv::Error) -> u8 {
    print_json(out, &nokv_remote::error_envelope(e));
    EXIT_TOOL_ERROR
}

fn text_failure(e: &nokv::Error) -> u8 {
    nokv_commands::eprint_error(e);
    EXIT_TOOL_ERROR
}

/// Runs one parsed command against the server at `url`; returns the exit code.
pub(crate) fn run(url: &str, quiet: bool, command: Command, out: &mut dyn Write) -> u8 {
    let remote = match RemoteClient::connect(url, None) {
        Ok(r) => r,
        Err(e) => {
            nokv_commands::eprint_error(&e);
            return EXIT_USAGE;
        }
    };
    run_with(remote, quiet, command, out)
}

/// The routed client of `--control URLS --root NAME`, else of `$NOKV_CONTROL` + `$NOKV_ROOT`
/// (ignored when `--server` was given); `None` when neither names one.
///
/// Errors: [`nokv::Error::InvalidArgument`] for bad URLs or a bad root name.
pub(crate) fn routed_client(
    control: Option<&str>,
    root: Option<&str>,
    server_flag: bool,
) -> nokv::Result<Option<RemoteClient>> {
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
        Command::Workbench {
            tool,
            input,
            request_id,
        } => {
            let (name, input, request_id) =
                match workbench_input(&tool, input.as_deref(), request_id.as_deref()) {
                    Ok(x) => x,
                    Err((env, code)) => {
                        print_json(out, &env);
                        return code;
                    }
                };
            run_tool(&remote, name, &input, request_id, out)
        }
        Command::Schema => {
            print_json(out, &nokv::workbench::schema::describe_all());
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
        Command::Expire(a) => command_call(&remote, CommandRequest::Expire(a), out),
        Command::Mv(a) => command_call(&remote, CommandRequest::Mv(a), out),
        Command::Diff(a) => command_call(&remote, CommandRequest::Diff(a), out),
        Command::Gc(a) => command_call(&remote, CommandRequest::Gc(a), out),
        Command::Fsck(a) => command_call(&remote, CommandRequest::Fsck(a), out),
        Command::Config { action } => command_call(&remote, CommandRequest::Config(action), out),
        Command::Token { action } => command_call(&remote, CommandRequest::Token(action), out),
        Command::Audit(a) => command_call(&remote, CommandRequest::Audit(a), out),
        Command::Ls(a) => {
            let json = a.json;
            command_call_as(&remote, CommandRequest::Ls(a), json, out)
        }
        Command::Tree(a) => {
            let json = a.json;
            command_call_as(&remote, CommandRequest::Tree(a), json, out)
        }
        Command::Log(a) => {
            let json = a.json;
            command_call_as(&remote, CommandRequest::Log(a), json, out)
        }
        Command::Cat(a) => crate::cat_cmd::run_cat_remote(&remote, &a, out),
        // Generated from the command tree: answered locally.
        Command::Completions { shell } => crate::manual_cmd::run_completions(shell, out),
        Command::Man { dir } => crate::manual_cmd::run_man(dir.as_deref(), out),
        Command::Append {
            workbench,
            path,
            file,
            stdin,
            operation_id,
            content_type,
        } => {
            let bytes = match append_input(file.as_deref(), stdin.as_deref(), &operation_id) {
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
                    nokv_commands::envelope_exit_code(&env)
                }
                Err(e) => json_failure(out, e),
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
                q.push(format!("after={}", nokv_remote::encode_component(a)));
            }
            if let Some(w) = &workbench {
                q.push(format!("workbench={}", nokv_remote::encode_component(w)));
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
                Err(e) => json_failure(out, e),
            }
        }
        Command::Materialize {
            workbench,
            dest,
            prefix,
        } => {
            let mut bar = Bar::new(quiet);
            let result = (|| -> nokv::Result<Vec<nokv::materialize::MaterializedFile>> {
                let (version, files) = remote.list_files(&workbench, prefix.as_deref())?;
                nokv::materialize::write_files(
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
                    print_materialized(out, &files, &dest);
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
            request_id,
        } => {
            let request_id = match collect_request_id(request_id.as_deref()) {
                Ok(id) => id,
                Err(code) => return code,
            };
            let mut bar = Bar::new(quiet);
            let result = (|| -> nokv::Result<nokv::materialize::CollectedFile> {
                let index = collect_precheck(&file, &path, &fields, index_json)?;
                remote.create_workbench(&workbench)?;
                let ct = content_type
                    .unwrap_or_else(|| nokv::materialize::guess_content_type(&path).to_string());
                nokv::materialize::collect_with(
                    &file,
                    &path,
                    &ct,
                    replace,
                    &index,
                    &mut |e| bar.event(e),
                    &mut |reader, options| {
                        let options = with_request_id(options, request_id);
                        remote.put_reader(&workbench, &path, reader, &options)
                    },
                )
            })();
            bar.finish();
            match result {
                Ok(c) => {
                    print_collected(out, &c);
                    EXIT_OK
                }
                Err(e) => text_failure(&e),
            }
        }
        // The control plane is reached directly (etcd), not through the server.
        Command::Root { action } => crate::root_cmd::run_root(action, out),
        Command::Shard { action } => crate::shard_cmd::run_shard(action, out),
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
    let json = request_is_json(&request.to_wire().0);
    command_call_as(remote, request, json, out)
}

/// [`command_call`] of a command whose output is JSON when `json` (a failure to reach the server
/// is then an error envelope on stdout, else `nokv: …` on stderr).
fn command_call_as(
    remote: &RemoteClient,
    request: CommandRequest,
    json: bool,
    out: &mut dyn Write,
) -> u8 {
    let (name, args) = request.to_wire();
    match remote.command(&name, &args) {
        Ok(o) => {
            let _ = out.write_all(o.stdout.as_bytes());
            let _ = std::io::stderr().write_all(o.stderr.as_bytes());
            o.exit_code
        }
        Err(e) => match json {
            true => json_failure(out, e),
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
