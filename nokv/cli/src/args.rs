//! The `nokv` command tree as clap parses it ([`Cli`], [`Command`]) and where a command's store
//! or server comes from ([`store_dir`], [`server_url`]). It takes each subcommand's argument
//! types from the module that runs it (this crate's `mcp_cmd`, `root_cmd`, `serve_cmd`,
//! `shard_cmd` and `verify_cmd`, and `nokv-commands`), which never import it back; `lib.rs`
//! dispatches the parsed [`Command`] and `remote_cmd.rs` sends it to a server.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use nokv_commands::{
    browse_cmd, commit_cmd, config_cmd, diff_cmd, expire_cmd, fsck_cmd, gc_cmd, mv_cmd,
    restore_cmd, rm_cmd, snapshot_cmd, OperationAction,
};

use crate::{cat_cmd, mcp_cmd, root_cmd, serve_cmd, shard_cmd, verify_cmd};

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
        /// Request id of a `put_file` call: 32 hex characters (16 bytes), chosen by the caller
        /// per logical put. Rerunning the same call with the same id (after a timeout or a lost
        /// reply) returns the first receipt with `"idempotent_replay": true` and writes nothing;
        /// the same id with another body or path is refused (`InvalidArguments`,
        /// `details.reason = "request_id_reused"`). Kept outside the JSON input, whose schema
        /// is the tool's exact contract.
        #[arg(long, value_name = "HEX32")]
        request_id: Option<String>,
    },
    /// Print every tool's name, description and input schema (JSON).
    Schema,
    /// List a directory of a workbench: `nokv ls WB [PATH] [-l] [--at-snapshot S] [--json]`
    /// (names, directories ending in `/`; `-l` adds kind and size).
    Ls(browse_cmd::LsArgs),
    /// Print one file's body on stdout: `nokv cat WB PATH` (streamed, every block verified).
    Cat(cat_cmd::CatArgs),
    /// Print every file of a workbench (or under PATH) as a tree with sizes:
    /// `nokv tree WB [PATH] [--json]`.
    Tree(browse_cmd::TreeArgs),
    /// Print a workbench's commits, newest first, with their parents and tags:
    /// `nokv log WB [-n N] [--json]`.
    Log(browse_cmd::LogArgs),
    /// Print a shell completion script for `nokv`: `nokv completions bash|zsh|fish|elvish|powershell`
    /// (e.g. `nokv completions bash > /etc/bash_completion.d/nokv`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the `nokv(1)` man page (roff) on stdout (`nokv man > nokv.1`), or with `--dir DIR`
    /// write one page per command there (`nokv.1`, `nokv-ls.1`, …) and list them.
    Man {
        /// Write one page per command into this directory (created when missing).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
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
        /// Request id: 32 hex characters (16 bytes), chosen by the caller per logical collect and
        /// used as the file's publication id. Rerunning the same collect with the same id
        /// returns the first receipt (`idempotent replay`) and writes nothing; the same id with
        /// another file body or destination path is refused.
        #[arg(long, value_name = "HEX32")]
        request_id: Option<String>,
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
    /// Expire a workbench (`nokv expire WB --after DURATION | --at TIME | --never`): once expired
    /// it is not listed and answers NotFound; the next `nokv gc` removes its uncommitted paths
    /// and its commits stay restorable. Prints one JSON envelope.
    Expire(expire_cmd::ExpireArgs),
    /// Move one file to another path of the same workbench in one metadata command, no byte
    /// copied (`nokv mv WB FROM TO [--expected-generation G] [--expected-destination-generation
    /// G] [--request-id HEX32]`); prints one JSON envelope. Directories are not renamed.
    Mv(mv_cmd::MvArgs),
    /// Compare two trees — each a workbench (live), `WB@SNAPSHOT` or a commit id: the added,
    /// removed and changed paths with generations, sizes and digests, paged (`--cursor`); JSON
    /// by default, `--format table` to read; `--patch` adds unified text diffs. Opens the store
    /// read-only.
    Diff(diff_cmd::DiffArgs),
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
        /// How local objects are made durable: `syncfs` (default; one flush of the file system
        /// shared by concurrent puts — for a store on its own or an idle file system) or
        /// `per-file` (an fsync per object and directory — for a file system shared with busy
        /// programs). Local objects only.
        #[arg(long, value_name = "MODE")]
        object_sync: Option<nokv::store_config::ObjectSyncConfig>,
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
