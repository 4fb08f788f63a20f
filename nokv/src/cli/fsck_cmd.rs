//! `nokv fsck [--repair-index] [--json]`.
//!
//! Prints one line per finding (`KIND  SUBJECT: DETAIL`), the unowned provider objects as
//! information, and a summary. Exit 0 when no finding remains, 1 otherwise (unowned objects
//! alone do not fail it). `--repair-index` first rebuilds the SecondaryIndex rows from
//! PathCurrent, then checks.

use std::io::Write;
use std::path::Path;

use clap::Args;
use serde_json::json;

use super::{print_json, EXIT_OK, EXIT_TOOL_ERROR};
use crate::client::{Client, ClientOptions};

/// `nokv fsck` arguments.
#[derive(Debug, Args)]
pub struct FsckArgs {
    /// Rebuild the derived SecondaryIndex rows from PathCurrent (bounded commands) before
    /// checking.
    #[arg(long)]
    pub repair_index: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `nokv fsck`; returns the exit code.
pub fn run_fsck(dir: &Path, args: FsckArgs, out: &mut dyn Write) -> u8 {
    let options = ClientOptions {
        create_if_missing: false,
        ..Default::default()
    };
    let client = match Client::open_with(dir, options) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nokv: {e}");
            return EXIT_TOOL_ERROR;
        }
    };
    let repaired = if args.repair_index {
        match client.repair_index() {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("nokv: index repair failed: {e}");
                return EXIT_TOOL_ERROR;
            }
        }
    } else {
        None
    };
    let outcome = match client.fsck() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("nokv: {e}");
            return EXIT_TOOL_ERROR;
        }
    };
    let r = &outcome.report;
    if args.json {
        print_json(
            out,
            &json!({
                "clean": outcome.is_clean(),
                "findings": r.findings.iter().map(|f| json!({
                    "kind": f.kind.as_str(), "subject": f.subject, "detail": f.detail,
                })).collect::<Vec<_>>(),
                "unowned_objects": outcome.unowned_objects,
                "listing_error": outcome.listing_error,
                "index_repair": repaired.map(|p| json!({
                    "rows_put": p.rows_put, "rows_deleted": p.rows_deleted, "commands": p.commands,
                })),
                "checked": {
                    "revisions": r.stats.revisions,
                    "references": r.stats.references,
                    "paths": r.stats.paths,
                    "index_rows": r.stats.index_rows,
                    "commits": r.stats.commits,
                    "restores": r.stats.restores,
                    "gc_candidates": r.stats.gc_candidates,
                    "outbox_records": r.stats.outbox_records,
                    "read_version": r.stats.read_version,
                },
            }),
        );
    } else {
        if let Some(p) = repaired {
            let _ = writeln!(
                out,
                "repaired index: {} row(s) put, {} stale row(s) deleted in {} command(s)",
                p.rows_put, p.rows_deleted, p.commands
            );
        }
        for f in &r.findings {
            let _ = writeln!(out, "{}  {}: {}", f.kind.as_str(), f.subject, f.detail);
        }
        for k in &outcome.unowned_objects {
            let _ = writeln!(out, "unowned object (information only): {k}");
        }
        if let Some(e) = &outcome.listing_error {
            let _ = writeln!(out, "object listing unavailable (information only): {e}");
        }
        let s = &r.stats;
        let _ = writeln!(
            out,
            "fsck: checked {} revisions, {} references, {} paths, {} index rows, {} commits, {} restores, {} gc candidates, {} outbox records at version {}",
            s.revisions,
            s.references,
            s.paths,
            s.index_rows,
            s.commits,
            s.restores,
            s.gc_candidates,
            s.outbox_records,
            s.read_version
        );
        let _ = if outcome.is_clean() {
            writeln!(out, "fsck: clean")
        } else {
            writeln!(out, "fsck: {} finding(s)", r.findings.len())
        };
    }
    if outcome.is_clean() {
        EXIT_OK
    } else {
        EXIT_TOOL_ERROR
    }
}
