//! The `nokv` command line (clap). Every subcommand is a thin wrapper over [`nokv::Client`] and
//! the [`nokv::workbench::Workbench`] facade.
//!
//! Exit codes: 0 success, 1 tool/operation error, 2 usage error. `nokv workbench` prints exactly
//! one JSON envelope on stdout.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde_json::Value;

mod mcp_cmd;
mod remote_cmd;
mod root_cmd;
mod serve_cmd;
mod shard_cmd;
mod verify_cmd;

use nokv::client::Client;
use nokv::publication::parse_operation_id;
use nokv::workbench::errors::ToolError;
use nokv::workbench::{schema, store_error};
use nokv::Store;
use nokv_commands::{
    append_envelope, commit_cmd, config_cmd, envelope_exit_code, fsck_cmd, gc_cmd, print_json,
    read_only, restore_cmd, rm_cmd, run_operation_with, snapshot_cmd, OperationAction, EXIT_OK,
    EXIT_TOOL_ERROR, EXIT_USAGE,
};

/// NoKV — workspace and artifact store for AI agents.
#[derive(Debug, Parser)]
#[command(name = "nokv", version, about, long_about = None)]
pub struct Cli {
    /// Store directory (default: $NOKV_STORE, else ./.nokv).
    #[arg(long, global = true, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// No progress bars (they are also off when stdout is not a terminal).
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
    /// Talk to a `nokv serve` server instead of opening the store (default: $NOKV_SERVER when
    /// `--store` is not given; giving both flags is a usage error; the bearer token comes from
    /// $NOKV_TOKEN). Output is identical to the embedded store's.
    #[arg(long, global = true, value_name = "URL")]
    pub server: Option<String>,
    /// Talk to the root `--root NAME` through the control plane (etcd client URLs,
    /// comma-separated): the command goes to the `nokv serve --control` server that owns the
    /// root's shard now, following owner changes (default: $NOKV_CONTROL with $NOKV_ROOT).
    /// Given before the command: `nokv --control URLS --root NAME workbench list`.
    #[arg(
        long,
        value_name = "URLS",
        requires = "root",
        conflicts_with = "server"
    )]
    pub control: Option<String>,
    /// The root a `--control` client talks to (default: $NOKV_ROOT).
    #[arg(long, value_name = "NAME", requires = "control")]
    pub root: Option<String>,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// `nokv` subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one Workbench tool: `nokv workbench <tool> ['<json>' | -]`; prints one JSON envelope.
    Workbench {
        /// Tool name, with or without the `workbench_` prefix (e.g. `read`, `workbench_list`).
        tool: String,
        /// Tool input as JSON, or `-` to read it from stdin (default `{}`).
        input: Option<String>,
    },
    /// Print every tool's name, description and input schema (JSON).
    Schema,
    /// Serve the 18 Workbench tools over MCP (JSON-RPC on stdin/stdout) until stdin closes or
    /// SIGTERM: on the embedded store (this process owns it while it runs) or, with `--server
    /// URL`, through a `nokv serve` process shared by many clients.
    Mcp(mcp_cmd::McpArgs),
    /// Copy a workbench (or one section/path prefix) into a local directory, verifying digests.
    Materialize {
        /// Workbench id.
        workbench: String,
        /// Destination directory (created when missing).
        dest: PathBuf,
        /// Only this workbench-relative prefix or file (e.g. `input` or `outputs/summary.json`).
        #[arg(long)]
        prefix: Option<String>,
    },
    /// Publish a local file as an artifact (streamed, digest verified).
    Collect {
        /// Workbench id (created when missing).
        workbench: String,
        /// Local file to publish.
        file: PathBuf,
        /// Workbench-relative destination path, e.g. `outputs/model.bin`.
        path: String,
        /// Content type (default: guessed from the file name).
        #[arg(long)]
        content_type: Option<String>,
        /// Replace an existing artifact (generation CAS) instead of create-only.
        #[arg(long)]
        replace: bool,
        /// Custom index field, repeatable: `name=value` (value parsed as JSON when it is a JSON
        /// scalar, else a string) or `name:TYPE=value` with TYPE int, uint, float, bool, ts
        /// (RFC 3339) or str. Example: `--field count:int=123 --field species=Gentoo`.
        #[arg(long = "field", value_name = "NAME[:TYPE]=VALUE")]
        fields: Vec<String>,
        /// Also index the file's top-level JSON scalar members (the file must be a JSON object).
        #[arg(long)]
        index_json: bool,
    },
    /// Append bytes to an artifact of an existing workbench (the artifact is created when
    /// missing; a missing workbench is `NotFound` — create it first with `nokv workbench
    /// create`) as a durable, idempotent operation: replaying the same `--operation-id` after a
    /// lost response returns the original receipt and appends nothing; the same id with other
    /// bytes or another path is refused (`InvalidArguments`, not retryable — pick a new id).
    /// Prints one JSON envelope.
    Append {
        /// Workbench id (must exist).
        workbench: String,
        /// Workbench-relative path, e.g. `logs/run.log`.
        path: String,
        /// Read the bytes from this file (default: stdin; `-` also means stdin).
        #[arg(long, value_name = "F")]
        file: Option<PathBuf>,
        /// `-`: read the bytes from stdin.
        #[arg(value_name = "-")]
        stdin: Option<String>,
        /// Operation id: 32 hex characters (16 bytes), chosen by the caller per logical append.
        #[arg(long, value_name = "HEX32")]
        operation_id: String,
        /// Content type (default: keep the existing type; text/plain on create).
        #[arg(long)]
        content_type: Option<String>,
    },
    /// Publish operations and their StagedObject ledger (docs/metadata-format.md, "Upload And Append").
    Operation {
        /// What to do.
        #[command(subcommand)]
        action: OperationAction,
    },
    /// Run the reference research workflow (Palmer penguins) on this store.
    Demo,
    /// Commit a workbench (`nokv commit WORKBENCH [--message M] [--parent COMMIT]... [--replace]`),
    /// or `nokv commit retire COMMIT` / `nokv commit show COMMIT`.
    Commit(commit_cmd::CommitArgs),
    /// Durable tags on commits: `set`, `get`, `delete`, `list` (CAS-protected).
    Tag {
        /// The tag action.
        #[command(subcommand)]
        action: commit_cmd::TagCommand,
    },
    /// Find committed workbenches and match their run manifests (`workbench_find`).
    Find(commit_cmd::FindArgs),
    /// Restore a snapshot or commit into a new workbench: `run`, `abort`, `status`.
    Restore {
        /// The restore action.
        #[command(subcommand)]
        action: restore_cmd::RestoreCommand,
    },
    /// Roots in the control plane (etcd): `create`, `list`, `show` (`--control URLS` or
    /// `$NOKV_CONTROL`).
    Root {
        /// The root action.
        #[command(subcommand)]
        action: root_cmd::RootCommand,
    },
    /// Logical shards in the control plane with their owners: `list`.
    Shard {
        /// The shard action.
        #[command(subcommand)]
        action: shard_cmd::ShardCommand,
    },
    /// Leased snapshots: `create`, `renew`, `retire`, `list`, `reap`.
    Snapshot {
        /// The snapshot action.
        #[command(subcommand)]
        action: snapshot_cmd::SnapshotCommand,
    },
    /// Print visible change events (one JSON object per line, each with its resume `cursor`).
    /// Opens the store read-only (never waits for or blocks a writer); `--follow` reopens it at
    /// every poll.
    Changes {
        /// Resume strictly after this cursor (from an earlier line's `cursor`).
        #[arg(long, value_name = "CURSOR")]
        after: Option<String>,
        /// Only this workbench's events.
        #[arg(long)]
        workbench: Option<String>,
        /// Keep polling for new events until interrupted (or `--limit`).
        #[arg(long)]
        follow: bool,
        /// Stop after printing this many events (at least 1).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
        /// Poll interval of `--follow` in milliseconds (default 500).
        #[arg(long, default_value_t = 500)]
        poll_ms: u64,
    },
    /// Serve the store to many agents over HTTP (`/v1/` protocol; see docs/server.md):
    /// `nokv serve --store DIR --listen ADDR [--token-file F]`. Runs until SIGTERM/SIGINT, then
    /// drains in-flight requests and closes the store.
    Serve(serve_cmd::ServeArgs),
    /// Remove an artifact (`nokv rm WB PATH [--expected-generation G] [--request-id HEX32]`) or
    /// everything under a prefix (`nokv rm -r WB PREFIX`); prints one JSON envelope.
    Rm(rm_cmd::RmArgs),
    /// Garbage collection: one pass (`--dry-run`, `--max-revisions N`), or `--explain WB PATH |
    /// REVISION` to say why a revision is kept.
    Gc(gc_cmd::GcArgs),
    /// Check every count, seal, index row and the recovery chain from authoritative rows; exit 1
    /// on findings. `--repair-index` rebuilds the SecondaryIndex rows first.
    Fsck(fsck_cmd::FsckArgs),
    /// Durable store settings: `get NAME`, `set NAME VALUE`, `list`.
    Config {
        /// The config action.
        #[command(subcommand)]
        action: config_cmd::ConfigCommand,
    },
    /// Verify the store's RecoveryOutbox chain in full (every retained record, from the pruned
    /// point to the tail), read-only and without the lock; `--maintain` also runs outbox
    /// maintenance steps as the writer until retention holds. Prints one JSON envelope.
    Verify(verify_cmd::VerifyArgs),
    /// Create a new store and persist where its objects live (default: the local directory
    /// `<store>/objects`). With `--objects s3://bucket/prefix` the store keeps its blocks in an
    /// S3-compatible bucket (credentials from the standard AWS environment/profile chain) behind
    /// a local block cache, and writes a namespace marker object that later opens check.
    Init {
        /// Object namespace `s3://bucket[/prefix]` (default: local directory).
        #[arg(long, value_name = "URL")]
        objects: Option<String>,
        /// S3 endpoint URL, e.g. `http://127.0.0.1:9000` (default: AWS).
        #[arg(long, value_name = "URL")]
        endpoint: Option<String>,
        /// S3 region (default: AWS_REGION / profile, else us-east-1).
        #[arg(long)]
        region: Option<String>,
        /// Path-style S3 addressing (implied when the endpoint host is an IP or localhost).
        #[arg(long)]
        path_style: bool,
        /// Block cache directory (default: `cache` inside the store).
        #[arg(long, value_name = "DIR")]
        cache_dir: Option<PathBuf>,
        /// Block cache size bound in bytes (default 1 GiB; 0 disables the cache).
        #[arg(long, value_name = "N")]
        cache_bytes: Option<u64>,
        /// Keep the metadata in etcd (replicated) instead of holt: etcd client URLs,
        /// comma-separated. The root is created in the control plane there first.
        #[arg(long, value_name = "URLS")]
        metadata_etcd: Option<String>,
        /// etcd deployment namespace (default `/nokv/`; with --metadata-etcd).
        #[arg(long, value_name = "NS")]
        etcd_namespace: Option<String>,
        /// Root name in the control plane (default `store-<uuid prefix>`; with --metadata-etcd).
        #[arg(long, value_name = "NAME")]
        root: Option<String>,
    },
}

/// Resolves the store directory: `--store`, else `$NOKV_STORE`, else `./.nokv`.
pub fn store_dir(flag: Option<&Path>) -> PathBuf {
    if let Some(p) = flag {
        return p.to_path_buf();
    }
    match std::env::var_os("NOKV_STORE") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from(".nokv"),
    }
}

/// The server every command (`nokv mcp` included) talks to: `--server`, else `$NOKV_SERVER`
/// (trimmed; empty: none) when no `--store` was given — an explicit store directory wins over
/// the environment. Errors: the usage message when both `--server` and `--store` are given.
pub fn server_url(
    flag: Option<&str>,
    store_given: bool,
) -> std::result::Result<Option<String>, &'static str> {
    match (flag, store_given) {
        (Some(_), true) => Err(
            "--server and --store exclude each other: a command talks to a server or opens a \
             store directory, not both",
        ),
        (Some(u), false) => Ok(Some(u.to_string())),
        (None, true) => Ok(None),
        (None, false) => Ok(std::env::var("NOKV_SERVER")
            .ok()
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty())),
    }
}

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
            // `nokv workbench …` promises one JSON envelope on stdout, even for usage errors.
            if is_workbench_call(&args) {
                print_json(&mut std::io::stdout().lock(), &usage_envelope(&err));
            }
            return ExitCode::from(EXIT_USAGE);
        }
    };
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
    let code = match cli.command {
        Command::Serve(args) => serve_cmd::run_serve(&dir, args),
        Command::Workbench { tool, input } => {
            run_workbench(&dir, &tool, input.as_deref(), &mut out)
        }
        Command::Schema => {
            print_json(&mut out, &schema::describe_all());
            EXIT_OK
        }
        // The MCP transport writes stdout from another thread: release this thread's lock first.
        Command::Mcp(args) => {
            drop(out);
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
        } => with_client(&dir, |client| {
            let index = collect_precheck(&file, &path, &fields, index_json)?;
            client.create_workbench(&workbench)?;
            let ct = content_type
                .unwrap_or_else(|| nokv::materialize::guess_content_type(&path).to_string());
            let mut bar = Bar::new(cli.quiet);
            let c = nokv::materialize::collect_indexed(
                client,
                &workbench,
                &file,
                &path,
                &ct,
                replace,
                &index,
                &mut |e| bar.event(e),
            );
            bar.finish();
            print_collected(&mut out, &c?);
            Ok(())
        }),
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
        Command::Gc(args) => gc_cmd::run_gc(&dir, args, &mut out),
        Command::Fsck(args) => fsck_cmd::run_fsck(&dir, args, &mut out),
        Command::Config { action } => config_cmd::run_config(&dir, action, &mut out),
        Command::Verify(args) => verify_cmd::run_verify(&dir, &args, &mut out),
        Command::Demo => with_client(&dir, |client| {
            nokv_commands::demo::run_demo(client, &mut out)?;
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
                    eprintln!("nokv: {err}");
                    EXIT_TOOL_ERROR
                }
            }
        }
    };
    ExitCode::from(code)
}

/// Prints the lines of a finished materialize (shared by the embedded and the remote path).
fn print_materialized(
    out: &mut dyn Write,
    files: &[nokv::materialize::MaterializedFile],
    dest: &Path,
) {
    let total: u64 = files.iter().map(|f| f.size_bytes).sum();
    for f in files {
        let _ = writeln!(out, "{}  {}  {} bytes", f.digest_uri, f.path, f.size_bytes);
    }
    let _ = writeln!(
        out,
        "materialized {} files ({total} bytes) into {}, digests verified",
        files.len(),
        dest.display()
    );
}

/// Prints the line of a finished collect (shared by the embedded and the remote path).
fn print_collected(out: &mut dyn Write, c: &nokv::materialize::CollectedFile) {
    let _ = writeln!(
        out,
        "{}  {}  {} bytes  generation {}",
        c.digest_uri, c.path, c.size_bytes, c.generation
    );
}

/// The checks `nokv collect` makes before anything is created or sent (index fields, the local
/// file, the path, `--index-json`): a refused collect leaves nothing behind. Returns the index
/// fields to publish with.
fn collect_precheck(
    file: &Path,
    path: &str,
    fields: &[String],
    index_json: bool,
) -> nokv::Result<nokv::materialize::CollectIndex> {
    let mut index = nokv::materialize::CollectIndex {
        index_json,
        ..Default::default()
    };
    for spec in fields {
        let (name, value) = nokv::index_fields::parse_field_arg(spec)?;
        index.fields.insert(name, value);
    }
    let meta = std::fs::metadata(file).map_err(|source| nokv::Error::LocalIo {
        op: "open",
        path: file.to_path_buf(),
        source,
    })?;
    if !meta.is_file() {
        return Err(nokv::Error::InvalidArgument(format!(
            "{} is not a regular file",
            file.display()
        )));
    }
    Client::normalize(path)?;
    meta::index::projection::validate_index_fields(&index.fields)
        .map_err(|e| nokv::Error::InvalidArgument(e.to_string()))?;
    if index.index_json {
        if meta.len() > nokv::index_fields::MAX_INDEX_JSON_BYTES as u64 {
            return Err(nokv::Error::InvalidArgument(format!(
                "--index-json files are at most {} bytes",
                nokv::index_fields::MAX_INDEX_JSON_BYTES
            )));
        }
        let body = std::fs::read(file).map_err(|source| nokv::Error::LocalIo {
            op: "read",
            path: file.to_path_buf(),
            source,
        })?;
        nokv::index_fields::json_object_fields(&body)?;
    }
    Ok(index)
}

/// A byte progress bar on stderr for collect/materialize; inert when `--quiet` or when stdout
/// is not a terminal.
struct Bar {
    enabled: bool,
    bar: Option<indicatif::ProgressBar>,
}

impl Bar {
    fn new(quiet: bool) -> Bar {
        use std::io::IsTerminal;
        Bar {
            enabled: !quiet && std::io::stdout().is_terminal(),
            bar: None,
        }
    }

    fn event(&mut self, event: nokv::materialize::ProgressEvent<'_>) {
        if !self.enabled {
            return;
        }
        match event {
            nokv::materialize::ProgressEvent::Begin { phase, path, total } => {
                if let Some(old) = self.bar.take() {
                    old.finish_and_clear();
                }
                let bar = indicatif::ProgressBar::new(total);
                if let Ok(style) = indicatif::ProgressStyle::with_template(
                    "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
                ) {
                    bar.set_style(style.progress_chars("=> "));
                }
                bar.set_message(format!("{phase} {path}"));
                self.bar = Some(bar);
            }
            nokv::materialize::ProgressEvent::Advance { done } => {
                if let Some(bar) = &self.bar {
                    bar.set_position(done);
                }
            }
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
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
            eprintln!("nokv: {err}");
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

/// The client-side half of `nokv append`: checks the operation id and the positional argument,
/// then reads the bytes (`--file F`, else stdin). Errors: the envelope to print and the exit
/// code.
pub(crate) fn append_input(
    file: Option<&Path>,
    stdin: Option<&str>,
    operation_id: &str,
) -> std::result::Result<Vec<u8>, (ToolError, u8)> {
    if parse_operation_id(operation_id).is_none() {
        return Err((
            ToolError::invalid_arguments("--operation-id must be exactly 32 hex characters"),
            EXIT_USAGE,
        ));
    }
    if let Some(s) = stdin {
        if s != "-" {
            return Err((
                ToolError::invalid_arguments("the only positional input is `-` (stdin)"),
                EXIT_USAGE,
            ));
        }
    }
    match file {
        Some(f) if f != Path::new("-") => std::fs::read(f).map_err(|e| {
            (
                ToolError::invalid_arguments(format!(
                    "cannot read the input file {}: {}",
                    f.display(),
                    e.kind()
                ))
                .with_detail("file", Value::from(f.display().to_string())),
                EXIT_TOOL_ERROR,
            )
        }),
        _ => {
            let mut b = Vec::new();
            match std::io::stdin().read_to_end(&mut b) {
                Ok(_) => Ok(b),
                Err(e) => Err((
                    ToolError::invalid_arguments(format!("cannot read stdin: {}", e.kind())),
                    EXIT_TOOL_ERROR,
                )),
            }
        }
    }
}

fn run_workbench(dir: &Path, tool: &str, input: Option<&str>, out: &mut dyn Write) -> u8 {
    let (name, input) = match workbench_input(tool, input) {
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
    run_tool(&client, name, &input, out)
}

/// Runs one checked tool call on `store` (embedded or remote), prints its envelope and returns
/// the exit code of the envelope: the one `nokv workbench` path of both front doors.
pub(crate) fn run_tool(store: &dyn Store, name: &str, input: &Value, out: &mut dyn Write) -> u8 {
    let result = store.call_tool(name, input);
    print_json(out, &result);
    envelope_exit_code(&result)
}

/// The client-side checks of `nokv workbench` (tool name, JSON syntax, schema), in that order —
/// all before any store is touched, so a refused call opens, creates and writes nothing.
/// Errors: the envelope to print and the exit code.
pub(crate) fn workbench_input(
    tool: &str,
    input: Option<&str>,
) -> std::result::Result<(&'static str, Value), (Value, u8)> {
    let Some(name) = schema::canonical_tool_name(tool) else {
        return Err((ToolError::unknown_tool(tool).envelope(), EXIT_TOOL_ERROR));
    };
    let text = match input {
        None => "{}".to_string(),
        Some("-") => {
            let mut buf = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut buf) {
                let err = ToolError::invalid_arguments(format!("cannot read stdin: {e}"));
                return Err((err.envelope(), EXIT_USAGE));
            }
            buf
        }
        Some(s) => s.to_string(),
    };
    let input: Value = match serde_json::from_str(if text.trim().is_empty() { "{}" } else { &text })
    {
        Ok(v) => v,
        Err(e) => {
            let err =
                ToolError::invalid_arguments(format!("the tool input is not valid JSON: {e}"));
            return Err((err.envelope(), EXIT_USAGE));
        }
    };
    if let Err(err) = schema::validate(name, &input) {
        return Err((err.envelope(), EXIT_TOOL_ERROR));
    }
    Ok((name, input))
}

/// Whether the command line names the `workbench` subcommand: the first argument that is
/// neither a flag nor the value of `--store` / `--server`.
fn is_workbench_call(args: &[std::ffi::OsString]) -> bool {
    let mut rest = args.iter().skip(1);
    while let Some(a) = rest.next() {
        if a == "--store" || a == "--server" {
            rest.next();
        } else if !a.to_string_lossy().starts_with('-') {
            return a == "workbench";
        }
    }
    false
}

/// The `InvalidArguments` envelope of a command-line usage error under `nokv workbench`: clap's
/// message (plain text) plus `details {usage, reason}`.
/// A usage error found after parsing (conflicting flags): `nokv: …` on stderr and, for
/// `nokv workbench …` (which promises one JSON envelope on stdout), the `InvalidArguments`
/// envelope on `out`; exit 2.
fn usage_error(args: &[std::ffi::OsString], out: &mut dyn Write, message: &str) -> ExitCode {
    eprintln!("nokv: {message}");
    if is_workbench_call(args) {
        print_json(out, &ToolError::invalid_arguments(message).envelope());
    }
    ExitCode::from(EXIT_USAGE)
}

fn usage_envelope(err: &clap::Error) -> Value {
    let rendered = err.render().to_string();
    let first = rendered
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .trim()
        .to_string();
    ToolError::invalid_arguments(format!(
        "{first}; usage: nokv [--store DIR] workbench <tool> ['<json>' | -]"
    ))
    .with_detail(
        "usage",
        "nokv [--store DIR] workbench <tool> ['<json>' | -]",
    )
    .with_detail("reason", format!("{:?}", err.kind()))
    .envelope()
}
