//! The `nokv` command line (clap). Every subcommand is a thin wrapper over [`nokv::Client`] and
//! the [`nokv::workbench::Workbench`] facade.
//!
//! Exit codes: 0 success, 1 tool/operation error, 2 usage error. `nokv workbench` prints exactly
//! one JSON envelope on stdout.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use serde_json::Value;

mod args;
mod cat_cmd;
mod local_audit;
mod manual_cmd;
mod mcp_cmd;
mod remote_cmd;
mod root_cmd;
mod serve_cmd;
mod shard_cmd;
mod tool_io;
mod verify_cmd;

pub use args::{server_url, store_dir, Cli, Command};
use tool_io::{
    append_input, collect_error, collect_precheck, collect_request_id, print_collected,
    print_materialized, run_tool, with_request_id, workbench_input, Bar,
};

use nokv::client::Client;
use nokv::workbench::errors::ToolError;
use nokv::workbench::{schema, store_error};
use nokv_commands::{
    append_envelope, commit_cmd, config_cmd, fsck_cmd, gc_cmd, print_json, read_only, restore_cmd,
    rm_cmd, run_operation_with, snapshot_cmd, EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE,
};

/// Parses the process arguments and runs the command; returns the process exit code.
pub fn main_with_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> ExitCode {
    let args: Vec<std::ffi::OsString> = args.into_iter().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            if !err.use_stderr() {
                return ExitCode::from(EXIT_OK); // --help / --version
            }
            // `nokv workbench …` promises one JSON envelope on stdout, even for usage errors;
            // so does every command under `--json` or with stdout read by a program.
            if wants_json_usage_error(&args) {
                print_json(&mut std::io::stdout().lock(), &usage_envelope(&args, &err));
            }
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // Generated from the command tree: no store, no server.
    match &cli.command {
        Command::Completions { shell } => {
            return ExitCode::from(manual_cmd::run_completions(
                *shell,
                &mut std::io::stdout().lock(),
            ))
        }
        Command::Man { dir } => {
            return ExitCode::from(manual_cmd::run_man(
                dir.as_deref(),
                &mut std::io::stdout().lock(),
            ))
        }
        _ => {}
    }
    let dir = store_dir(cli.store.as_deref());
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match remote_cmd::routed_client(
        cli.control.as_deref(),
        cli.root.as_deref(),
        cli.server.is_some(),
    ) {
        Ok(Some(remote))
            if !matches!(
                cli.command,
                Command::Serve(_) | Command::Init { .. } | Command::Verify(_) | Command::Mcp(_)
            ) =>
        {
            return ExitCode::from(remote_cmd::run_with(
                remote,
                cli.quiet,
                cli.command,
                &mut out,
            ));
        }
        Ok(_) => {}
        Err(e) => return usage_error(&args, &mut out, &e.to_string()),
    }
    let server = match server_url(cli.server.as_deref(), cli.store.is_some()) {
        Ok(server) => server,
        Err(usage) => return usage_error(&args, &mut out, usage),
    };
    if let Some(url) = &server {
        let local = matches!(
            cli.command,
            Command::Serve(_) | Command::Init { .. } | Command::Verify(_)
        );
        if !matches!(cli.command, Command::Mcp(_)) && (!local || cli.server.is_some()) {
            return ExitCode::from(remote_cmd::run(url, cli.quiet, cli.command, &mut out));
        }
    }
    // A mutating command on the store itself is recorded in its audit trail with the local user.
    let audit = local_audit::pending(&cli.command);
    let mut out = local_audit::Tee::new(out, audit.is_some());
    // The demo's own changes, each recorded before the `demo` record.
    let mut demo_changes = Vec::new();
    let code = match cli.command {
        Command::Serve(args) => serve_cmd::run_serve(&dir, args),
        Command::Workbench {
            tool,
            input,
            request_id,
        } => run_workbench(
            &dir,
            &tool,
            input.as_deref(),
            request_id.as_deref(),
            &mut out,
        ),
        Command::Schema => {
            print_json(&mut out, &schema::describe_all());
            EXIT_OK
        }
        Command::Ls(args) => {
            nokv_commands::browse_cmd::run_ls(&dir, args, &mut out, &mut std::io::stderr())
        }
        Command::Tree(args) => {
            nokv_commands::browse_cmd::run_tree(&dir, args, &mut out, &mut std::io::stderr())
        }
        Command::Log(args) => {
            nokv_commands::browse_cmd::run_log(&dir, args, &mut out, &mut std::io::stderr())
        }
        Command::Cat(args) => cat_cmd::run_cat(&dir, &args, &mut out),
        Command::Completions { shell } => manual_cmd::run_completions(shell, &mut out),
        Command::Man { dir: pages } => manual_cmd::run_man(pages.as_deref(), &mut out),
        // The MCP transport writes stdout from another thread: release this thread's lock first.
        Command::Mcp(args) => {
            out.release();
            mcp_cmd::run_mcp(&dir, server.as_deref(), &args)
        }
        Command::Materialize {
            workbench,
            dest,
            prefix,
        } => with_read_only_client(&dir, |client| {
            let mut bar = Bar::new(cli.quiet);
            let files = nokv::materialize::materialize_with_progress(
                client,
                &workbench,
                prefix.as_deref(),
                &dest,
                &mut |e| bar.event(e),
            );
            bar.finish();
            print_materialized(&mut out, &files?, &dest);
            Ok(())
        }),
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
                Err(code) => return ExitCode::from(code),
            };
            with_client(&dir, |client| {
                let index = collect_precheck(&file, &path, &fields, index_json)?;
                client.create_workbench(&workbench)?;
                let ct = content_type
                    .unwrap_or_else(|| nokv::materialize::guess_content_type(&path).to_string());
                let mut bar = Bar::new(cli.quiet);
                let c = nokv::materialize::collect_with(
                    &file,
                    &path,
                    &ct,
                    replace,
                    &index,
                    &mut |e| bar.event(e),
                    &mut |reader, options| {
                        let options = with_request_id(options, request_id);
                        client.put_reader(&workbench, &path, reader, &options)
                    },
                );
                bar.finish();
                print_collected(
                    &mut out,
                    &c.map_err(|e| collect_error(client, &workbench, e))?,
                );
                Ok(())
            })
        }
        Command::Append {
            workbench,
            path,
            file,
            stdin,
            operation_id,
            content_type,
        } => run_append(
            &dir,
            &workbench,
            &path,
            file.as_deref(),
            stdin.as_deref(),
            &operation_id,
            content_type.as_deref(),
            &mut out,
        ),
        Command::Operation { action } => {
            // The open itself runs no recovery pass here: `recover` runs its own and reports it.
            let opts = nokv::client::ClientOptions {
                create_if_missing: false,
                recover_at_open: false,
                ..Default::default()
            };
            run_operation_with(
                Client::open_with(&dir, opts),
                action,
                &mut out,
                &mut std::io::stderr(),
            )
        }
        Command::Restore { action } => restore_cmd::run_restore(&dir, action, &mut out),
        Command::Commit(args) => commit_cmd::run_commit(&dir, args, &mut out),
        Command::Tag { action } => commit_cmd::run_tag(&dir, action, &mut out),
        Command::Find(args) => commit_cmd::run_find(&dir, args, &mut out),
        Command::Snapshot { action } => snapshot_cmd::run_snapshot(&dir, action, &mut out),
        Command::Root { action } => root_cmd::run_root(action, &mut out),
        Command::Shard { action } => shard_cmd::run_shard(action, &mut out),
        Command::Changes {
            after,
            workbench,
            follow,
            limit,
            poll_ms,
        } => snapshot_cmd::run_changes(
            &dir,
            &snapshot_cmd::ChangesArgs {
                after,
                workbench,
                follow,
                limit,
                poll_ms,
            },
            &mut out,
        ),
        Command::Rm(args) => rm_cmd::run_rm(&dir, args, &mut out),
        Command::Expire(args) => nokv_commands::expire_cmd::run_expire(&dir, args, &mut out),
        Command::Mv(args) => nokv_commands::mv_cmd::run_mv(&dir, args, &mut out),
        Command::Diff(args) => nokv_commands::diff_cmd::run_diff(&dir, args, &mut out),
        Command::Gc(args) => gc_cmd::run_gc(&dir, args, &mut out),
        Command::Fsck(args) => fsck_cmd::run_fsck(&dir, args, &mut out),
        Command::Config { action } => config_cmd::run_config(&dir, action, &mut out),
        Command::Audit(args) => nokv_commands::audit_cmd::run_audit_with(
            &nokv::access::AuditLog::at_store(&dir),
            &args,
            nokv_commands::token_cmd::wall_unix_ms(),
            &mut out,
        ),
        Command::Token { .. } if !local_audit::store_exists(&dir) => {
            print_json(
                &mut out,
                &nokv::workbench::errors::ToolError::new(
                    nokv::workbench::errors::ErrorCode::NotFound,
                    format!(
                        "no store at {}; create one first (nokv init, or any write)",
                        dir.display()
                    ),
                )
                .envelope(),
            );
            EXIT_TOOL_ERROR
        }
        Command::Token { action } => nokv_commands::token_cmd::run_token_with(
            &nokv::access::TokenRegistry::at_store(&dir),
            action,
            nokv_commands::token_cmd::wall_unix_ms(),
            &mut out,
        ),
        Command::Verify(args) => verify_cmd::run_verify(&dir, &args, &mut out),
        Command::Demo => with_client(&dir, |client| {
            demo_changes = nokv_commands::demo::run_demo(client, &mut out)?.changes;
            Ok(())
        }),
        Command::Init {
            objects,
            endpoint,
            region,
            path_style,
            cache_dir,
            cache_bytes,
            metadata_etcd,
            etcd_namespace,
            root,
            object_sync,
        } => {
            let options = nokv::store_config::InitOptions {
                objects,
                endpoint,
                region,
                path_style,
                cache_dir,
                cache_bytes,
                metadata_etcd,
                etcd_namespace,
                root_name: root,
                object_sync,
            };
            match nokv::store_config::init_store(&dir, &options) {
                Ok(outcome) => {
                    let verb = if outcome.created {
                        "initialized"
                    } else {
                        "already initialized"
                    };
                    let _ = writeln!(
                        out,
                        "{verb} store {} (uuid {}), objects: {}",
                        dir.display(),
                        outcome.config.store_uuid,
                        outcome.config.describe_objects()
                    );
                    EXIT_OK
                }
                Err(err) => {
                    nokv_commands::eprint_error(&err);
                    EXIT_TOOL_ERROR
                }
            }
        }
    };
    let code = match audit {
        Some(entry) => local_audit::finish(&dir, entry, &demo_changes, code, out.copied()),
        None => code,
    };
    ExitCode::from(code)
}

fn with_client(dir: &Path, f: impl FnOnce(&Client) -> nokv::Result<()>) -> u8 {
    report(Client::open(dir).and_then(|client| f(&client)))
}

/// [`with_client`] on the existing store opened read-only (see [`read_only`]).
fn with_read_only_client(dir: &Path, f: impl FnOnce(&Client) -> nokv::Result<()>) -> u8 {
    report(read_only::open_existing(dir, true).and_then(|client| f(&client)))
}

fn report(result: nokv::Result<()>) -> u8 {
    match result {
        Ok(()) => EXIT_OK,
        Err(err) => {
            // Human subcommands: the operator's own paths are useful here (the JSON tool
            // envelopes never carry them).
            nokv_commands::eprint_error(&err);
            EXIT_TOOL_ERROR
        }
    }
}

/// `nokv append`: one JSON envelope on stdout (success: the receipt; error: the facade's typed
/// error envelope).
#[allow(clippy::too_many_arguments)]
fn run_append(
    dir: &Path,
    workbench: &str,
    path: &str,
    file: Option<&Path>,
    stdin: Option<&str>,
    operation_id: &str,
    content_type: Option<&str>,
    out: &mut dyn Write,
) -> u8 {
    let bytes = match append_input(file, stdin, operation_id) {
        Ok(b) => b,
        Err((err, code)) => {
            print_json(out, &err.envelope());
            return code;
        }
    };
    // Append never creates a store or a workbench (same rule as `workbench_append`): a missing
    // one is `NotFound`.
    let options = nokv::client::ClientOptions {
        create_if_missing: false,
        ..Default::default()
    };
    let client = match Client::open_with(dir, options) {
        Ok(c) => c,
        Err(e) => {
            print_json(out, &store_error(e).envelope());
            return EXIT_TOOL_ERROR;
        }
    };
    let (env, code) = append_envelope(
        &client,
        workbench,
        path,
        &bytes,
        operation_id,
        content_type,
        None,
    );
    print_json(out, &env);
    code
}

fn run_workbench(
    dir: &Path,
    tool: &str,
    input: Option<&str>,
    request_id: Option<&str>,
    out: &mut dyn Write,
) -> u8 {
    let (name, input, request_id) = match workbench_input(tool, input, request_id) {
        Ok(x) => x,
        Err((env, code)) => {
            print_json(out, &env);
            return code;
        }
    };
    // Only `create` may bring a new store into existence; every other tool on a missing store is
    // NotFound instead of silently creating an empty one. Reading tools open read-only.
    let options = nokv::client::ClientOptions {
        create_if_missing: name == "workbench_create",
        read_only: read_only::tool_reads_only(name),
        ..Default::default()
    };
    let client = match Client::open_with(dir, options) {
        Ok(c) => c,
        Err(e) => {
            print_json(out, &store_error(e).envelope());
            return EXIT_TOOL_ERROR;
        }
    };
    run_tool(&client, name, &input, request_id, out)
}

/// Whether the command line names the `workbench` subcommand (the first word of
/// [`subcommand_path`]).
fn is_workbench_call(args: &[std::ffi::OsString]) -> bool {
    subcommand_path(args)
        .first()
        .is_some_and(|c| c == "workbench")
}

/// Whether a clap usage error is also answered with the JSON `InvalidArguments` envelope on
/// stdout: always under `nokv workbench` (it promises one envelope), and for every other command
/// when `--json` is on the command line or stdout is not a terminal (a program reads it) —
/// except `nokv mcp`, whose stdout is the MCP protocol channel. clap's human usage text stays on
/// stderr in every case.
fn wants_json_usage_error(args: &[std::ffi::OsString]) -> bool {
    use std::io::IsTerminal;
    if is_workbench_call(args) {
        return true;
    }
    if subcommand_path(args).first().is_some_and(|c| c == "mcp") {
        return false;
    }
    args.iter().skip(1).any(|a| a == "--json") || !std::io::stdout().is_terminal()
}

/// The subcommand path of a command line for the usage text (`ls`, `snapshot create`, …): the
/// leading words that are neither flags nor values of the global flags, as far as they name
/// subcommands of the clap tree.
fn subcommand_path(args: &[std::ffi::OsString]) -> Vec<String> {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path = Vec::new();
    let mut rest = args.iter().skip(1);
    while let Some(a) = rest.next() {
        let a = a.to_string_lossy();
        if matches!(a.as_ref(), "--store" | "--server" | "--control" | "--root") {
            rest.next();
            continue;
        }
        if a.starts_with('-') {
            continue;
        }
        match cmd.find_subcommand(a.as_ref()) {
            Some(sub) => {
                path.push(sub.get_name().to_string());
                let next = sub.clone();
                cmd = next;
            }
            None => break,
        }
    }
    path
}

/// The first sentence of clap's rendered error, with the indented lines that complete it when it
/// ends in a colon (`the following required arguments were not provided: <TOOL>`).
fn usage_summary(rendered: &str) -> String {
    let mut lines = rendered.lines().filter(|l| !l.trim().is_empty());
    let mut first = lines
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .trim()
        .to_string();
    if first.ends_with(':') {
        let items: Vec<&str> = lines
            .take_while(|l| l.starts_with(' ') || l.starts_with('\t'))
            .map(str::trim)
            .collect();
        if !items.is_empty() {
            first = format!("{first} {}", items.join(", "));
        }
    }
    first
}

/// A usage error found after parsing (conflicting flags): `nokv: …` on stderr and, for
/// `nokv workbench …` (which promises one JSON envelope on stdout), the `InvalidArguments`
/// envelope on `out`; exit 2.
fn usage_error(args: &[std::ffi::OsString], out: &mut dyn Write, message: &str) -> ExitCode {
    nokv_commands::eprint_error(message);
    if is_workbench_call(args) {
        print_json(out, &ToolError::invalid_arguments(message).envelope());
    }
    ExitCode::from(EXIT_USAGE)
}

/// The `InvalidArguments` envelope of a clap usage error: clap's first sentence, the usage of
/// the command that was called, and `details {usage, reason, command}` (`reason`: clap's error
/// kind, e.g. `MissingRequiredArgument`; `command`: the subcommand path, e.g. `snapshot create`,
/// empty for `nokv` itself).
fn usage_envelope(args: &[std::ffi::OsString], err: &clap::Error) -> Value {
    let rendered = err.render().to_string();
    let first = usage_summary(&rendered);
    let path = subcommand_path(args);
    let usage = if is_workbench_call(args) {
        WORKBENCH_USAGE.to_string()
    } else {
        usage_of(&path)
    };
    ToolError::invalid_arguments(format!("{first}; usage: {usage}"))
        .with_detail("usage", usage)
        .with_detail("reason", format!("{:?}", err.kind()))
        .with_detail("command", path.join(" "))
        .envelope()
}

/// The usage of `nokv workbench`.
const WORKBENCH_USAGE: &str = "nokv [--store DIR] workbench <tool> ['<json>' | -]";

/// The usage of the (sub)command at `path` (`["snapshot", "create"]`; empty: `nokv` itself),
/// as clap renders it, without the `Usage:` prefix.
fn usage_of(path: &[String]) -> String {
    use clap::CommandFactory;
    let mut at = Cli::command();
    // Built first, so a nested subcommand's usage names its whole path (`nokv snapshot create`).
    at.build();
    for name in path {
        match at.find_subcommand(name) {
            Some(sub) => at = sub.clone(),
            None => break,
        }
    }
    let rendered = at.render_usage().to_string();
    rendered
        .trim()
        .strip_prefix("Usage:")
        .unwrap_or(&rendered)
        .trim()
        .to_string()
}

#[cfg(test)]
mod usage_tests {
    use super::usage_summary;

    #[test]
    fn a_message_ending_in_a_colon_keeps_the_items_that_complete_it() {
        let rendered = "error: the following required arguments were not provided:\n  <TOOL>\n\nUsage: nokv workbench <TOOL> [INPUT]\n";
        assert_eq!(
            usage_summary(rendered),
            "the following required arguments were not provided: <TOOL>"
        );
        assert_eq!(
            usage_summary("error: unexpected argument '--x' found\n\nUsage: nokv\n"),
            "unexpected argument '--x' found"
        );
        assert_eq!(usage_summary(""), "");
    }
}
