//! `nokv fsck [--repair-index] [--verify-bytes] [--json]`.
//!
//! Prints one line per finding (`KIND  SUBJECT: DETAIL`), the unowned provider objects as
//! information, and a summary. Exit 0 when no finding remains, 1 otherwise (unowned objects
//! alone do not fail it). `--repair-index` first rebuilds the SecondaryIndex rows from
//! PathCurrent, then checks.

use std::io::Write;
use std::path::Path;

use clap::Args;
use meta::ops::fsck::RepairReport;
use serde_json::{json, Value};

use crate::{print_json, EXIT_OK, EXIT_TOOL_ERROR};
use nokv::client::Client;
use nokv::lifetime::FsckOutcome;

/// `nokv fsck` arguments.
#[derive(Debug, Clone, Args, serde::Serialize, serde::Deserialize)]
pub struct FsckArgs {
    /// Rebuild the derived SecondaryIndex rows from PathCurrent (bounded commands) before
    /// checking.
    #[arg(long)]
    pub repair_index: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also read every published block and check it against its recorded length and SHA-256
    /// (`ObjectDamaged` findings); reads every published byte once.
    #[arg(long)]
    #[serde(default)]
    pub verify_bytes: bool,
}

/// Runs `nokv fsck`; returns the exit code. A store that cannot be opened is `nokv: …` on stderr
/// (naming the operator's paths); with `--json` also the tool error envelope on `out` (e.g.
/// `InvalidState` with `details.reason: "metadata_damaged"`), so a JSON reader gets the reason.
pub fn run_fsck(dir: &Path, args: FsckArgs, out: &mut dyn Write) -> u8 {
    // The check reads only: it opens the store read-only (no lock wait beside a running writer,
    // nothing written — not even the owner epoch); repairing the index needs the writer.
    match crate::read_only::open_existing(dir, !args.repair_index) {
        Ok(client) => run_fsck_with(&client, args, out, &mut std::io::stderr()),
        Err(e) => {
            crate::eprint_error(&e);
            if args.json {
                print_json(out, &nokv::workbench::store_error(e).envelope());
            }
            EXIT_TOOL_ERROR
        }
    }
}

/// `nokv fsck` on an open client (the CLI and the server share it): the report on `out`,
/// failures as `nokv: …` on `err`; returns the exit code.
pub(crate) fn run_fsck_with(
    client: &Client,
    args: FsckArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let repaired = if args.repair_index {
        match client.repair_index() {
            Ok(r) => Some(r),
            Err(e) => {
                let _ = writeln!(err, "nokv: index repair failed: {e}");
                return EXIT_TOOL_ERROR;
            }
        }
    } else {
        None
    };
    let checked = if args.verify_bytes {
        client.fsck_verifying_bytes()
    } else {
        client.fsck()
    };
    let outcome = match checked {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(err, "nokv: {e}");
            return EXIT_TOOL_ERROR;
        }
    };
    let r = &outcome.report;
    if args.json {
        print_json(out, &outcome_json(&outcome, repaired.as_ref()));
    } else {
        if let Some(p) = &repaired {
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
        let _ = if r.rows_skipped {
            writeln!(
                out,
                "fsck: checked {} metadata blocks; row checks skipped until the damaged blocks are restored",
                s.metadata_blocks
            )
        } else {
            writeln!(
            out,
            "fsck: checked {} metadata blocks, {} revisions, {} references, {} paths, {} index rows, {} commits, {} restores, {} gc candidates, {} outbox records at version {}",
            s.metadata_blocks,
            s.revisions,
            s.references,
            s.paths,
            s.index_rows,
            s.commits,
            s.restores,
            s.gc_candidates,
            s.outbox_records,
            s.read_version
        )
        };
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

/// The `nokv fsck --json` object of `outcome` (and of the index repair that preceded it).
pub fn outcome_json(outcome: &FsckOutcome, repaired: Option<&RepairReport>) -> Value {
    let r = &outcome.report;
    json!({
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
            "metadata_blocks": r.stats.metadata_blocks,
        },
        "rows_checked": !r.rows_skipped,
    })
}
