//! `nokv snapshot create|renew|retire|list|reap` and `nokv changes`.
//!
//! The snapshot subcommands run the Workbench snapshot tools and print their JSON envelope
//! (exit 0 on success, 1 on a tool error); `reap` runs one reaper pass and prints its summary.
//! `nokv changes` prints one JSON object per visible change event, each with the opaque `cursor`
//! that resumes right after it (`--after CURSOR`); `--follow` keeps polling for new events (and
//! runs the snapshot reaper on a timer while it does).

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use clap::Subcommand;
use serde_json::{json, Map, Value};

use crate::{print_json, EXIT_OK, EXIT_TOOL_ERROR};
use nokv::client::Client;
use nokv::workbench::{store_error, tool_error, Workbench};

/// `nokv snapshot` actions.
#[derive(Debug, Clone, Subcommand, serde::Serialize, serde::Deserialize)]
pub enum SnapshotCommand {
    /// Mint a leased snapshot of a committed workbench (`workbench_snapshot`).
    Create {
        /// Workbench id.
        workbench: String,
        /// Snapshot name (re-minting a name moves it to the new snapshot).
        #[arg(long)]
        name: Option<String>,
        /// Lease in days, 1..=90 (default 7).
        #[arg(long)]
        ttl_days: Option<u64>,
        /// Why the snapshot exists (1..=256 characters).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Extend a snapshot's lease (`workbench_snapshot_renew`; extend-only).
    Renew {
        /// Workbench id.
        workbench: String,
        /// Snapshot id (digits) or name.
        snapshot: String,
        /// New lease in days from now, 1..=90 (default 7).
        #[arg(long)]
        ttl_days: Option<u64>,
    },
    /// Retire a snapshot and release its history (`workbench_snapshot_retire`).
    Retire {
        /// Workbench id.
        workbench: String,
        /// Snapshot id (digits) or name.
        snapshot: String,
        /// Why it is retired (1..=256 characters).
        #[arg(long)]
        reason: Option<String>,
    },
    /// List a workbench's snapshots with their states (`workbench_snapshot_list`).
    List {
        /// Workbench id.
        workbench: String,
    },
    /// Run the snapshot reaper once: claim expired snapshots past the clock-skew grace, release
    /// their history holds and advance the history floor.
    Reap,
}

fn selector_args(snapshot: &str, args: &mut Map<String, Value>) {
    let selector = crate::snapshot_selector(snapshot);
    let key = if selector.is_u64() {
        "snapshot_id"
    } else {
        "name"
    };
    args.insert(key.into(), selector);
}

/// Runs one `nokv snapshot` action; returns the exit code.
pub fn run_snapshot(dir: &Path, cmd: SnapshotCommand, out: &mut dyn Write) -> u8 {
    let reads_only = matches!(cmd, SnapshotCommand::List { .. });
    let client = match crate::read_only::open_existing(dir, reads_only) {
        Ok(c) => c,
        Err(e) => {
            print_json(out, &store_error(e).envelope());
            return EXIT_TOOL_ERROR;
        }
    };
    run_snapshot_with(&client, cmd, out)
}

/// [`run_snapshot`] on an open client (the server runs it for `nokv --server`).
pub fn run_snapshot_with(client: &Client, cmd: SnapshotCommand, out: &mut dyn Write) -> u8 {
    let client = client.clone();
    let mut args = Map::new();
    let tool = match cmd {
        SnapshotCommand::Create {
            workbench,
            name,
            ttl_days,
            reason,
        } => {
            args.insert("id".into(), Value::from(workbench));
            if let Some(n) = name {
                args.insert("name".into(), Value::from(n));
            }
            if let Some(d) = ttl_days {
                args.insert("ttl_days".into(), Value::from(d));
            }
            if let Some(r) = reason {
                args.insert("reason".into(), Value::from(r));
            }
            "workbench_snapshot"
        }
        SnapshotCommand::Renew {
            workbench,
            snapshot,
            ttl_days,
        } => {
            args.insert("id".into(), Value::from(workbench));
            selector_args(&snapshot, &mut args);
            if let Some(d) = ttl_days {
                args.insert("ttl_days".into(), Value::from(d));
            }
            "workbench_snapshot_renew"
        }
        SnapshotCommand::Retire {
            workbench,
            snapshot,
            reason,
        } => {
            args.insert("id".into(), Value::from(workbench));
            selector_args(&snapshot, &mut args);
            if let Some(r) = reason {
                args.insert("reason".into(), Value::from(r));
            }
            "workbench_snapshot_retire"
        }
        SnapshotCommand::List { workbench } => {
            args.insert("id".into(), Value::from(workbench));
            "workbench_snapshot_list"
        }
        SnapshotCommand::Reap => {
            return match client.reap_snapshots() {
                Ok(report) => {
                    print_json(
                        out,
                        &json!({
                            "status": "success",
                            "claimed": report.claimed.iter().map(|(wb, id)| json!({
                                "workbench_id": wb,
                                "snapshot_id": id.get(),
                            })).collect::<Vec<_>>(),
                            "finalized": report.finalized,
                            "skipped_with_consumers": report.skipped_with_consumers,
                            "clock_regressed": report.clock_regressed,
                            "history_floor": report.history_floor,
                        }),
                    );
                    EXIT_OK
                }
                Err(e) => {
                    print_json(out, &store_error(e).envelope());
                    EXIT_TOOL_ERROR
                }
            };
        }
    };
    let result = Workbench::new(client).call(tool, &Value::Object(args));
    print_json(out, &result);
    if result.get("status").and_then(Value::as_str) == Some("success") {
        EXIT_OK
    } else {
        EXIT_TOOL_ERROR
    }
}

/// Options of `nokv changes`.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ChangesArgs {
    /// Resume strictly after this opaque cursor.
    pub after: Option<String>,
    /// Only this workbench's events.
    pub workbench: Option<String>,
    /// Keep polling for new events.
    pub follow: bool,
    /// Stop after this many events.
    pub limit: Option<u64>,
    /// Poll interval of `--follow`, ms.
    pub poll_ms: u64,
}

/// Runs `nokv changes`; prints one compact JSON object per event. A failure (store missing,
/// malformed or foreign `--after` cursor, …) ends the output with one standard error envelope
/// `{"status":"error","code":…,"message":…,"retryable":…,"details":{…}}` on stdout, exit 1.
///
/// The store is opened read-only (no lock, nothing written); with `--follow` every poll reopens
/// it read-only and resumes after the last printed cursor, so a follower never blocks writers.
pub fn run_changes(dir: &Path, args: &ChangesArgs, out: &mut dyn Write) -> u8 {
    let client = match crate::read_only::open_existing(dir, true) {
        Ok(c) => c,
        Err(e) => {
            print_json(out, &store_error(e).envelope());
            return EXIT_TOOL_ERROR;
        }
    };
    let reopen = || crate::read_only::open_existing(dir, true);
    run_changes_with(client, args, out, &reopen, &|| false)
}

/// [`run_changes`] on an open client. Every `--follow` round after the first reads through the
/// client `next_round` returns (the CLI reopens its read-only handle; a server's writer client
/// sees new commits as they land and returns itself) and resumes after the last printed cursor;
/// `stop` is polled between rounds (a server stops when the client went away).
pub fn run_changes_with(
    mut client: Client,
    args: &ChangesArgs,
    out: &mut dyn Write,
    next_round: &dyn Fn() -> nokv::Result<Client>,
    stop: &dyn Fn() -> bool,
) -> u8 {
    let result = (|| -> nokv::Result<()> {
        let mut after = args.after.clone();
        let mut printed = 0u64;
        loop {
            let feed = match &args.workbench {
                Some(wb) => client.workbench_changes(wb, after.as_deref())?,
                None => client.changes(after.as_deref())?,
            };
            for item in feed {
                let item = item?;
                let mut line = json!({
                    "cursor": item.cursor,
                    "commit_version": item.commit_version,
                    "event_sequence": item.event_sequence,
                    "workbench_id": item.workbench_id,
                    "kind": item.kind,
                    "path": item.path,
                    "before_generation": item.before_generation,
                    "after_generation": item.after_generation,
                    "snapshot_id": item.snapshot_id,
                });
                // Only a move names a second path (docs/metadata-format.md, "ChangeEvent").
                if let (Some(map), Some(from)) = (line.as_object_mut(), &item.moved_from) {
                    map.insert("moved_from".into(), json!(from));
                    map.insert(
                        "moved_from_generation".into(),
                        json!(item.moved_from_generation),
                    );
                }
                let text = serde_json::to_string(&line).unwrap_or_default();
                let _ = writeln!(out, "{text}");
                let _ = out.flush();
                after = Some(item.cursor);
                printed += 1;
                if args.limit.is_some_and(|l| printed >= l) {
                    return Ok(());
                }
            }
            if !args.follow || stop() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(args.poll_ms.max(10)));
            client = next_round()?;
        }
    })();
    match result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            let err = match &args.workbench {
                Some(wb) => tool_error(&client, wb, e),
                None => store_error(e),
            };
            print_json(out, &err.envelope());
            EXIT_TOOL_ERROR
        }
    }
}
