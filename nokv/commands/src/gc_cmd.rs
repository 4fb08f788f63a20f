//! `nokv gc [--dry-run] [--max-revisions N] [--json]` and `nokv gc --explain WB PATH | REVISION`.
//!
//! A pass prints one line per revision deleted, quarantined or interrupted, one line per
//! candidate still waiting with what holds it (snapshot, restore, commit build, retention window,
//! in-flight publication), and a summary line. `--json` prints the same as one JSON object.
//! Exit 0 when the pass ran (also with quarantined or waiting revisions), 1 on an error.

use std::io::Write;
use std::path::Path;

use clap::Args;
use serde_json::{json, Value};

use crate::{EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE};
use nokv::client::Client;
use nokv::expiry::format_time;
use nokv::lifetime::{
    CollectedRevision, Explanation, GcOptions, GcReport, HoldHolder, HoldInfo, Holder, Verdict,
    WaitReason,
};
use nokv::printable::printable;

/// `nokv gc` arguments.
#[derive(Debug, Clone, Args, serde::Serialize, serde::Deserialize)]
pub struct GcArgs {
    /// Report what would be deleted; write and delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Process at most N revisions in this pass.
    #[arg(long, value_name = "N")]
    pub max_revisions: Option<usize>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Explain why a revision is kept: `--explain WB PATH` or `--explain REVISION` (32 hex).
    #[arg(long, num_args = 1..=2, value_names = ["WB|REVISION", "PATH"])]
    pub explain: Option<Vec<String>>,
}

fn hold_text(h: &HoldInfo) -> String {
    match &h.holder {
        HoldHolder::Snapshot {
            workbench_id,
            snapshot_id,
            alias,
        } => format!(
            "snapshot {}{} of {} (history hold at version {})",
            snapshot_id.get(),
            alias
                .as_deref()
                .map_or(String::new(), |a| format!(" \"{a}\"")),
            workbench_id.as_deref().unwrap_or("?"),
            h.read_version
        ),
        HoldHolder::Restore {
            operation_id,
            destination_workbench_id,
        } => format!(
            "restore {} into {} (history hold at version {})",
            operation_id.to_hex(),
            destination_workbench_id.as_deref().unwrap_or("?"),
            h.read_version
        ),
        HoldHolder::BuildCommit {
            operation_id,
            workbench_id,
        } => format!(
            "commit build {} of {} (history hold at version {})",
            operation_id.to_hex(),
            workbench_id.as_deref().unwrap_or("?"),
            h.read_version
        ),
    }
}

fn hold_json(h: &HoldInfo) -> Value {
    let mut v = match &h.holder {
        HoldHolder::Snapshot {
            workbench_id,
            snapshot_id,
            alias,
        } => {
            json!({"kind": "snapshot", "workbench_id": workbench_id, "snapshot_id": snapshot_id.get(), "name": alias})
        }
        HoldHolder::Restore {
            operation_id,
            destination_workbench_id,
        } => {
            json!({"kind": "restore", "operation_id": operation_id.to_hex(), "destination_workbench_id": destination_workbench_id})
        }
        HoldHolder::BuildCommit {
            operation_id,
            workbench_id,
        } => {
            json!({"kind": "commit_build", "operation_id": operation_id.to_hex(), "workbench_id": workbench_id})
        }
    };
    v["read_version"] = Value::from(h.read_version);
    v
}

fn reason_text(r: &WaitReason) -> String {
    match r {
        WaitReason::HistoryHold(h) => hold_text(h),
        WaitReason::RetentionWindow {
            retention_versions,
            tip,
        } => format!(
            "retention window (history_retention_versions = {retention_versions}, tip {tip})"
        ),
        WaitReason::InFlightPublish { operation_id } => {
            format!("in-flight publication {}", operation_id.to_hex())
        }
    }
}

fn reason_json(r: &WaitReason) -> Value {
    match r {
        WaitReason::HistoryHold(h) => hold_json(h),
        WaitReason::RetentionWindow {
            retention_versions,
            tip,
        } => {
            json!({"kind": "retention_window", "history_retention_versions": retention_versions, "tip": tip})
        }
        WaitReason::InFlightPublish { operation_id } => {
            json!({"kind": "in_flight_publication", "operation_id": operation_id.to_hex()})
        }
    }
}

/// The expired workbench whose sweep (in this pass) released `rev`, if any: `(workbench,
/// expired at)`.
fn expiry_of(r: &GcReport, rev: &meta::ArtifactRevisionId) -> Option<(String, String)> {
    r.expired_workbenches
        .iter()
        .find(|w| w.released_revisions.contains(rev))
        .map(|w| (w.workbench_id.clone(), format_time(w.expired_at_unix_ms)))
}

fn collected_json(r: &GcReport, c: &CollectedRevision) -> Value {
    json!({
        "released_by_expiry": expiry_of(r, &c.revision).map(|(wb, at)| json!({"workbench_id": wb, "expired_at": at})),
        "revision": c.revision.to_hex(),
        "logical_size": c.logical_size,
        "objects": c.objects,
        "object_bytes": c.object_bytes,
        "released_dependencies": c.released_dependencies.iter().map(|r| r.to_hex()).collect::<Vec<_>>(),
        "commit_version": c.commit_version,
        "reconciled": c.reconciled,
    })
}

/// The JSON form of a pass report.
pub fn report_json(r: &GcReport) -> Value {
    json!({
        "dry_run": r.dry_run,
        "tip": r.tip,
        "history_floor": r.history_floor,
        "history_retention_versions": r.history_retention_versions,
        "barrier_generation": r.barrier_generation,
        "deleted": r.collected.iter().map(|c| collected_json(r, c)).collect::<Vec<_>>(),
        "expired_workbenches": r.expired_workbenches.iter().map(|w| json!({
            "workbench_id": w.workbench_id,
            "expired_at": format_time(w.expired_at_unix_ms),
            "marked_expired": w.marked,
            "paths_removed": w.paths_released,
            "released_revisions": w.released_revisions.iter().map(|r| r.to_hex()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "objects_deleted": r.objects_deleted(),
        "bytes_deleted": r.bytes_deleted(),
        "quarantined": r.quarantined.iter().map(|q| json!({"revision": q.revision.to_hex(), "evidence": q.evidence})).collect::<Vec<_>>(),
        "interrupted": r.interrupted.iter().map(|i| json!({"revision": i.revision.to_hex(), "reason": i.reason})).collect::<Vec<_>>(),
        "waiting": r.waiting.iter().map(|w| json!({
            "revision": w.revision.to_hex(),
            "last_zero_ref_version": w.last_zero_ref_version,
            "held_by": w.reasons.iter().map(reason_json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "stale_candidates_pruned": r.stale_candidates_pruned,
        "budget_exhausted": r.budget_exhausted,
    })
}

fn print_report(r: &GcReport, out: &mut dyn Write) {
    let verb = if r.dry_run { "would delete" } else { "deleted" };
    for w in &r.expired_workbenches {
        let _ = writeln!(
            out,
            "workbench {} expired at {}: {}{} path(s), releasing {} revision(s)",
            w.workbench_id,
            format_time(w.expired_at_unix_ms),
            if w.marked { "recorded expired; " } else { "" },
            if r.dry_run {
                format!("would remove {}", w.paths_released)
            } else {
                format!("removed {}", w.paths_released)
            },
            w.released_revisions.len()
        );
    }
    for c in &r.collected {
        let deps = if c.released_dependencies.is_empty() {
            String::new()
        } else {
            format!(
                ", released {} dependency reference(s)",
                c.released_dependencies.len()
            )
        };
        let _ = writeln!(
            out,
            "{verb} revision {}: {} object(s), {} bytes{deps}{}{}",
            c.revision,
            c.objects,
            c.object_bytes,
            if c.reconciled { " (reconciled)" } else { "" },
            expiry_of(r, &c.revision).map_or(String::new(), |(wb, at)| format!(
                " (released by the expiry of workbench {wb} at {at})"
            ))
        );
    }
    for q in &r.quarantined {
        let _ = writeln!(out, "quarantined revision {}: {}", q.revision, q.evidence);
    }
    for i in &r.interrupted {
        let _ = writeln!(
            out,
            "interrupted revision {} (resumed by the next pass): {}",
            i.revision, i.reason
        );
    }
    for w in &r.waiting {
        let held: Vec<String> = w.reasons.iter().map(reason_text).collect();
        let _ = writeln!(
            out,
            "waiting revision {} (last reference gone at version {}): held by {}",
            w.revision,
            w.last_zero_ref_version,
            if held.is_empty() {
                "the history floor".to_owned()
            } else {
                held.join("; ")
            }
        );
    }
    let _ = writeln!(
        out,
        "gc{}: {verb} {} revision(s) ({} object(s), {} bytes); quarantined {}; interrupted {}; {} candidate(s) waiting for the history floor; history floor {} at tip {} (history_retention_versions {}){}{}",
        if r.dry_run { " --dry-run" } else { "" },
        r.collected.len(),
        r.objects_deleted(),
        r.bytes_deleted(),
        r.quarantined.len(),
        r.interrupted.len(),
        r.waiting.len(),
        r.history_floor,
        r.tip,
        r.history_retention_versions,
        r.barrier_generation
            .map_or(String::new(), |g| format!("; gc barrier advanced to {g}")),
        if r.budget_exhausted {
            "; --max-revisions reached, run again for the rest"
        } else {
            ""
        },
    );
}

fn holder_text(h: &Holder) -> String {
    match h {
        Holder::Path {
            workbench_id,
            path,
            visible,
            generation,
            expired_at_unix_ms,
            ..
        } => format!(
            "path {}/{}{}{}",
            workbench_id.as_deref().unwrap_or("?"),
            path,
            generation.map_or(String::new(), |g| format!(" (generation {g})")),
            match expired_at_unix_ms {
                Some(at) => format!(
                    " [workbench expired at {}: the next gc removes this path]",
                    format_time(*at)
                ),
                None if *visible => String::new(),
                None => " [not visible: a restore is staging it]".to_owned(),
            }
        ),
        Holder::Commit {
            commit_id,
            state,
            heads,
            tags,
            leases,
            children,
        } => {
            let mut parts =
                vec![state.map_or_else(|| "being built".to_owned(), |s| format!("{s:?}"))];
            for h in heads {
                parts.push(format!("head of {h}"));
            }
            for (w, t) in tags {
                parts.push(format!("tag {w}:{t}"));
            }
            for l in leases {
                parts.push(format!("leased by restore {}", l.to_hex()));
            }
            for c in children {
                parts.push(format!("parent of commit {}", c.to_hex()));
            }
            format!("commit {} ({})", commit_id.to_hex(), parts.join("; "))
        }
        Holder::Dependent {
            child,
            child_state,
            child_references,
        } => format!(
            "appended revision {child} reuses its blocks ({}, {child_references} reference(s))",
            child_state.map_or_else(|| "missing".to_owned(), |s| format!("{s:?}"))
        ),
        Holder::HistoryHold(h) => hold_text(h),
        Holder::RetentionWindow {
            retention_versions,
            tip,
        } => format!(
            "retention window (history_retention_versions = {retention_versions}, tip {tip})"
        ),
        Holder::InFlightPublish {
            operation_id,
            phase,
            workbench_id,
            path,
        } => format!(
            "in-flight publication {} ({phase:?}) of {workbench_id}/{path}",
            operation_id.to_hex()
        ),
    }
}

fn verdict_text(v: &Verdict) -> String {
    match v {
        Verdict::Referenced => "kept: referenced".into(),
        Verdict::Waiting => "kept: waiting for the history floor".into(),
        Verdict::CollectableNextPass => "collectable at the next pass".into(),
        Verdict::BeingCollected { phase } => format!("being collected (Gc {phase:?})"),
        Verdict::Quarantined { evidence } => format!("quarantined: {evidence}"),
        Verdict::Deleted { commit_version } => match commit_version {
            Some(v) => format!("deleted at version {v}"),
            None => "deleted".into(),
        },
    }
}

/// The JSON form of an explanation.
pub fn explanation_json(e: &Explanation) -> Value {
    json!({
        "revision": e.revision.to_hex(),
        "state": format!("{:?}", e.state),
        "strong_reference_count": e.strong_reference_count,
        "reference_epoch": e.reference_epoch,
        "last_zero_ref_version": e.last_zero_ref_version,
        "logical_size": e.logical_size,
        "own_objects": e.own_objects,
        "own_bytes": e.own_bytes,
        "dependency_count": e.dependency_count,
        "held_by": e.holders.iter().map(holder_text).collect::<Vec<_>>(),
        "released_by_expiry": e.released_by_expiry.iter().map(|x| json!({
            "workbench_id": x.workbench_id,
            "path": x.path.as_str(),
            "expired_at": format_time(x.expired_at_unix_ms),
        })).collect::<Vec<_>>(),
        "verdict": verdict_text(&e.verdict),
        "history_floor": e.history_floor,
        "tip": e.tip,
    })
}

fn print_explanation(e: &Explanation, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "revision {}: {:?}, {} reference(s) (epoch {}), {} bytes in {} own object(s)",
        e.revision,
        e.state,
        e.strong_reference_count,
        e.reference_epoch,
        e.logical_size,
        e.own_objects
    );
    if e.holders.is_empty() {
        let _ = writeln!(out, "held by: nothing");
    } else {
        let _ = writeln!(out, "held by:");
        for h in &e.holders {
            let _ = writeln!(out, "  {}", printable(&holder_text(h)));
        }
    }
    for x in &e.released_by_expiry {
        let _ = writeln!(
            out,
            "released by expiry: path {}/{} went when workbench {} expired at {}",
            x.workbench_id,
            printable(x.path.as_str()),
            x.workbench_id,
            format_time(x.expired_at_unix_ms)
        );
    }
    let _ = writeln!(out, "verdict: {}", verdict_text(&e.verdict));
}

/// `--explain WB PATH` of a workbench that expired and whose paths the sweep removed: the
/// answer names the expiry (exit 0), as JSON (`workbench_id`, `path`, `expired_at`, `verdict`)
/// or text.
fn print_expired_path(wb: &str, path: &str, at: u64, json_out: bool, out: &mut dyn Write) {
    let verdict = format!(
        "removed: workbench {wb} expired at {}; gc removed its paths and collects each body nothing else holds (its commits, tags and snapshots keep theirs; a commit stays restorable)",
        format_time(at)
    );
    if json_out {
        crate::print_json(
            out,
            &json!({"workbench_id": wb, "path": path, "expired_at": format_time(at), "verdict": verdict}),
        );
    } else {
        let _ = writeln!(out, "path {wb}/{}: {verdict}", printable(path));
    }
}

/// Runs `nokv gc`; returns the exit code. `--explain` only reads, so it opens the store
/// read-only (no lock: it answers beside a running writer such as `nokv serve`).
pub fn run_gc(dir: &Path, args: GcArgs, out: &mut dyn Write) -> u8 {
    match crate::read_only::open_existing(dir, args.explain.is_some()) {
        Ok(client) => run_gc_with(&client, args, out, &mut std::io::stderr()),
        Err(e) => {
            crate::eprint_error(&e);
            EXIT_TOOL_ERROR
        }
    }
}

/// `nokv gc` on an open client (the CLI and the server share it): the report on `out`,
/// failures as `nokv: …` on `err`; returns the exit code.
pub(crate) fn run_gc_with(
    client: &Client,
    args: GcArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    if let Some(target) = args.explain {
        let explained = match target.as_slice() {
            [rev] => client.gc_explain_revision(rev),
            [wb, path] => client.gc_explain(wb, path),
            _ => {
                let _ = writeln!(err, "nokv: --explain takes WB PATH or a revision id");
                return EXIT_USAGE;
            }
        };
        return match explained {
            Ok(e) => {
                if args.json {
                    crate::print_json(out, &explanation_json(&e));
                } else {
                    print_explanation(&e, out);
                }
                EXIT_OK
            }
            Err(nokv::Error::WorkbenchNotFound { .. }) if target.len() == 2 => {
                match client.workbench_expired_at(&target[0]) {
                    Ok(Some(at)) => {
                        print_expired_path(&target[0], &target[1], at, args.json, out);
                        EXIT_OK
                    }
                    _ => {
                        let _ = writeln!(err, "nokv: workbench `{}` does not exist", target[0]);
                        EXIT_TOOL_ERROR
                    }
                }
            }
            Err(e) => {
                let _ = writeln!(err, "nokv: {e}");
                EXIT_TOOL_ERROR
            }
        };
    }
    let opts = GcOptions {
        dry_run: args.dry_run,
        max_revisions: args.max_revisions,
    };
    match client.gc(&opts) {
        Ok(r) => {
            if args.json {
                crate::print_json(out, &report_json(&r));
            } else {
                print_report(&r, out);
            }
            EXIT_OK
        }
        Err(e) => {
            let _ = writeln!(err, "nokv: {e}");
            EXIT_TOOL_ERROR
        }
    }
}
