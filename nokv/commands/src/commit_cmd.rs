//! `nokv commit`, `nokv commit retire|show`, `nokv tag set|get|delete|list` and `nokv find`.
//!
//! Every subcommand prints exactly one JSON object on stdout: the success fields (with
//! `"status":"success"`) or the Workbench error envelope; exit 0 on success, 1 on an error.
//!
//! `nokv commit WORKBENCH` commits the live tree through [`nokv::Client::commit`]: the
//! manifest is `--manifest JSON` (an object) or `{"message": M}` from `--message` (or `{}`), and
//! the content digest is `--content-digest` or, by default, [`nokv::Client::tree_content_digest`]
//! of the workbench. `--parent COMMIT` (repeatable) records lineage.

use std::io::Write;
use std::path::Path;

use clap::{Args, Subcommand};
use serde_json::{json, Map, Value};

use crate::{print_json, EXIT_OK, EXIT_TOOL_ERROR};
use meta::ops::tag::{TagCondition, TagInfo};
use nokv::client::Client;
use nokv::commit::CommitRequest;
use nokv::workbench::commit_tools::{commit_error, commit_error_naming};
use nokv::workbench::errors::ToolError;
use nokv::workbench::{store_error, Workbench};

/// `nokv commit` arguments.
#[derive(Debug, Clone, Args, serde::Serialize, serde::Deserialize)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CommitArgs {
    /// `retire` / `show` (omit to commit WORKBENCH).
    #[command(subcommand)]
    pub action: Option<CommitAction>,
    /// Workbench to commit.
    pub workbench: Option<String>,
    /// Commit message; the manifest becomes `{"message": M}` unless `--manifest` is given.
    #[arg(long)]
    pub message: Option<String>,
    /// Manifest JSON object (canonicalized before hashing).
    #[arg(long, value_name = "JSON")]
    pub manifest: Option<String>,
    /// Content digest `sha256:<64 hex>` (default: digest of the live tree).
    #[arg(long, value_name = "URI")]
    pub content_digest: Option<String>,
    /// Parent commit id (64 hex), repeatable.
    #[arg(long = "parent", value_name = "COMMIT")]
    pub parents: Vec<String>,
    /// Move an existing head to this commit.
    #[arg(long)]
    pub replace: bool,
}

/// `nokv commit` sub-actions.
#[derive(Debug, Clone, Subcommand, serde::Serialize, serde::Deserialize)]
pub enum CommitAction {
    /// Retire a commit that has no consumers left (no head, tag, lease or child commit).
    Retire {
        /// Commit id (64 hex).
        commit: String,
    },
    /// Print a commit record (by id) or a workbench's head (`--workbench`).
    Show {
        /// Commit id (64 hex); omit with `--workbench`.
        commit: Option<String>,
        /// Show this workbench's head commit.
        #[arg(long)]
        workbench: Option<String>,
    },
}

/// `nokv tag` actions.
#[derive(Debug, Clone, Subcommand, serde::Serialize, serde::Deserialize)]
pub enum TagCommand {
    /// Create or move a tag to a commit (CAS: `--create` = must be absent, `--expect G` = must
    /// be at generation G).
    Set {
        /// Workbench id.
        workbench: String,
        /// Tag name.
        tag: String,
        /// Commit id (64 hex).
        commit: String,
        /// The tag must not exist yet.
        #[arg(long, conflicts_with = "expect")]
        create: bool,
        /// The tag must be at this generation.
        #[arg(long, value_name = "GENERATION")]
        expect: Option<u64>,
    },
    /// Print a tag.
    Get {
        /// Workbench id.
        workbench: String,
        /// Tag name.
        tag: String,
    },
    /// Delete a tag (the commit is never retired by this).
    Delete {
        /// Workbench id.
        workbench: String,
        /// Tag name.
        tag: String,
        /// The tag must be at this generation.
        #[arg(long, value_name = "GENERATION")]
        expect: Option<u64>,
    },
    /// List a workbench's tags.
    List {
        /// Workbench id.
        workbench: String,
    },
}

/// `nokv find` arguments (the `workbench_find` tool).
#[derive(Debug, Clone, Args, serde::Serialize, serde::Deserialize)]
pub struct FindArgs {
    /// Only committed (`true`) or uncommitted (`false`) workbenches.
    #[arg(long)]
    pub committed: Option<bool>,
    /// ASCII case-insensitive literal substring of the canonical run manifest.
    #[arg(long, value_name = "TEXT")]
    pub pattern: Option<String>,
    /// Include each matching manifest.
    #[arg(long)]
    pub include_manifest: bool,
    /// Continue from a previous `next_cursor`.
    #[arg(long)]
    pub cursor: Option<String>,
    /// Matches per page, 1..=100 (default 50).
    #[arg(long)]
    pub limit: Option<u64>,
}

/// Opens the existing store (read-only for the reading actions, see [`crate::read_only`]).
fn open(dir: &Path, read_only: bool, out: &mut dyn Write) -> Option<Client> {
    match crate::read_only::open_existing(dir, read_only) {
        Ok(c) => Some(c),
        Err(e) => {
            print_json(out, &store_error(e).envelope());
            None
        }
    }
}

fn success(out: &mut dyn Write, fields: Map<String, Value>) -> u8 {
    let mut v = Map::new();
    v.insert("status".into(), Value::from("success"));
    v.extend(fields);
    print_json(out, &Value::Object(v));
    EXIT_OK
}

fn failure(out: &mut dyn Write, err: ToolError) -> u8 {
    print_json(out, &err.envelope());
    EXIT_TOOL_ERROR
}

fn tag_json(t: &TagInfo) -> Value {
    json!({"tag": t.name, "commit_id": t.commit_id.to_hex(), "tag_generation": t.tag_generation})
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Runs `nokv commit …`; returns the exit code.
pub fn run_commit(dir: &Path, args: CommitArgs, out: &mut dyn Write) -> u8 {
    let reads_only = matches!(args.action, Some(CommitAction::Show { .. }));
    let Some(client) = open(dir, reads_only, out) else {
        return EXIT_TOOL_ERROR;
    };
    run_commit_with(&client, args, out)
}

/// [`run_commit`] on an open client (the server runs it for `nokv --server`).
pub fn run_commit_with(client: &Client, args: CommitArgs, out: &mut dyn Write) -> u8 {
    let client = client.clone();
    match args.action {
        Some(CommitAction::Retire { commit }) => match client.retire_commit(&commit) {
            Ok(r) => success(
                out,
                obj(json!({
                    "commit_id": commit,
                    "retired": !r.already_retired,
                    "state": "retired",
                    "commit_version": r.commit_version,
                })),
            ),
            Err(e) => failure(out, commit_error_no_workbench(&client, e)),
        },
        Some(CommitAction::Show { commit, workbench }) => {
            let found = match (commit, workbench) {
                (Some(c), None) => client.commit_info(&c),
                (None, Some(w)) => client.commit_head(&w),
                _ => {
                    return failure(
                        out,
                        ToolError::invalid_arguments("give exactly one of COMMIT or --workbench"),
                    )
                }
            };
            match found {
                Ok(Some(c)) => success(
                    out,
                    obj(json!({
                        "commit_id": c.commit_id,
                        "workbench_id": c.workbench_id,
                        "state": c.state,
                        "tree_digest_uri": c.tree_digest_uri,
                        "content_digest_uri": c.content_digest_uri,
                        "manifest_digest_uri": c.manifest_digest_uri,
                        "member_count": c.member_count,
                        "unique_revision_count": c.unique_revision_count,
                        "parents": c.parents,
                        "consumer_count": c.consumer_count,
                        "consumer_epoch": c.consumer_epoch,
                    })),
                ),
                Ok(None) => failure(
                    out,
                    ToolError::new(
                        nokv::workbench::errors::ErrorCode::NotFound,
                        "no such commit",
                    ),
                ),
                Err(e) => failure(out, commit_error_no_workbench(&client, e)),
            }
        }
        None => {
            let Some(wb) = args.workbench else {
                return failure(
                    out,
                    ToolError::invalid_arguments("usage: nokv commit WORKBENCH [--message M]"),
                );
            };
            let manifest = match (&args.manifest, &args.message) {
                (Some(m), _) => match serde_json::from_str::<Value>(m) {
                    Ok(v) if v.is_object() => v,
                    _ => {
                        return failure(
                            out,
                            ToolError::invalid_arguments("--manifest must be a JSON object"),
                        )
                    }
                },
                (None, Some(msg)) => json!({ "message": msg }),
                (None, None) => json!({}),
            };
            let content = match args.content_digest {
                Some(c) => c,
                None => match client.tree_content_digest(&wb) {
                    Ok(c) => c,
                    Err(e) => return failure(out, commit_error(&client, &wb, e)),
                },
            };
            let req = CommitRequest {
                workbench_id: wb.clone(),
                manifest,
                content_digest_uri: content,
                replace: args.replace,
                parents: args.parents,
            };
            match client.commit(&req) {
                Ok(r) => success(
                    out,
                    obj(json!({
                        "workbench_id": r.workbench_id,
                        "workbench_path": r.workbench_path,
                        "path": r.path,
                        "size_bytes": r.size_bytes,
                        "generation": r.generation,
                        "content_digest_uri": r.content_digest_uri,
                        "manifest_digest_uri": r.manifest_digest_uri,
                        "commit_identity": r.commit_identity,
                        "envelope_digest_uri": r.envelope_digest_uri,
                        "tree_digest_uri": r.tree_digest_uri,
                        "replace": r.replace,
                        "idempotent_replay": r.idempotent_replay,
                        "parents": r.parents,
                    })),
                ),
                Err(e) => failure(out, commit_error_naming(&client, &wb, e, "--replace")),
            }
        }
    }
}

/// Runs `nokv tag …`; returns the exit code.
pub fn run_tag(dir: &Path, cmd: TagCommand, out: &mut dyn Write) -> u8 {
    let reads_only = matches!(cmd, TagCommand::Get { .. } | TagCommand::List { .. });
    let Some(client) = open(dir, reads_only, out) else {
        return EXIT_TOOL_ERROR;
    };
    run_tag_with(&client, cmd, out)
}

/// [`run_tag`] on an open client (the server runs it for `nokv --server`).
pub fn run_tag_with(client: &Client, cmd: TagCommand, out: &mut dyn Write) -> u8 {
    let client = client.clone();
    match cmd {
        TagCommand::Set {
            workbench,
            tag,
            commit,
            create,
            expect,
        } => {
            let cond = match (create, expect) {
                (true, _) => TagCondition::Absent,
                (false, Some(g)) => TagCondition::Generation(g),
                (false, None) => TagCondition::Any,
            };
            match client.set_tag(&workbench, &tag, &commit, cond) {
                Ok(t) => success(out, obj(tag_json(&t))),
                Err(e) => failure(out, commit_error(&client, &workbench, e)),
            }
        }
        TagCommand::Get { workbench, tag } => match client.get_tag(&workbench, &tag) {
            Ok(Some(t)) => success(out, obj(tag_json(&t))),
            Ok(None) => failure(
                out,
                ToolError::new(
                    nokv::workbench::errors::ErrorCode::NotFound,
                    format!("workbench `{workbench}` has no tag `{tag}`"),
                ),
            ),
            Err(e) => failure(out, commit_error(&client, &workbench, e)),
        },
        TagCommand::Delete {
            workbench,
            tag,
            expect,
        } => {
            let cond = expect.map_or(TagCondition::Any, TagCondition::Generation);
            match client.delete_tag(&workbench, &tag, cond) {
                Ok(t) => success(out, obj(json!({"tag": tag, "deleted": t.is_some()}))),
                Err(e) => failure(out, commit_error(&client, &workbench, e)),
            }
        }
        TagCommand::List { workbench } => match client.list_tags(&workbench) {
            Ok(tags) => success(
                out,
                obj(json!({
                    "workbench_id": workbench,
                    "tag_count": tags.len(),
                    "tags": tags.iter().map(tag_json).collect::<Vec<_>>(),
                })),
            ),
            Err(e) => failure(out, commit_error(&client, &workbench, e)),
        },
    }
}

/// Runs `nokv find …` through the `workbench_find` tool; returns the exit code.
pub fn run_find(dir: &Path, args: FindArgs, out: &mut dyn Write) -> u8 {
    let Some(client) = open(dir, true, out) else {
        return EXIT_TOOL_ERROR;
    };
    run_find_with(&client, args, out)
}

/// [`run_find`] on an open client (the server runs it for `nokv --server`).
pub fn run_find_with(client: &Client, args: FindArgs, out: &mut dyn Write) -> u8 {
    let client = client.clone();
    let mut input = Map::new();
    if let Some(c) = args.committed {
        input.insert("committed".into(), Value::from(c));
    }
    if let Some(p) = args.pattern {
        input.insert("manifest_pattern".into(), Value::from(p));
    }
    if args.include_manifest {
        input.insert("include_manifest".into(), Value::from(true));
    }
    if let Some(c) = args.cursor {
        input.insert("cursor".into(), Value::from(c));
    }
    if let Some(l) = args.limit {
        input.insert("limit".into(), Value::from(l));
    }
    let env = Workbench::new(client).call("workbench_find", &Value::Object(input));
    let ok = env.get("status").and_then(Value::as_str) == Some("success");
    print_json(out, &env);
    if ok {
        EXIT_OK
    } else {
        EXIT_TOOL_ERROR
    }
}

/// [`commit_error`] for commands addressed by commit id alone (`commit retire`, `commit show`):
/// the envelope names no workbench path.
fn commit_error_no_workbench(client: &Client, err: nokv::Error) -> ToolError {
    let mut e = commit_error(client, "-", err);
    e.details.remove("path");
    e
}
