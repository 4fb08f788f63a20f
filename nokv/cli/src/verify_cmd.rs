//! `nokv verify` — the explicit full verification of the RecoveryOutbox chain.
//!
//! Opening a store verifies only the outbox records after the verified chain head (see
//! `meta::outbox`, "Verification"). `nokv verify` opens the store **read-only** (no lock: it runs
//! next to a writer and other readers, and writes nothing) and verifies every retained record,
//! from the pruned chain point to the System tail, through
//! [`meta::MetaShard::verify_recovery_outbox`] — the same check `nokv fsck` runs.
//!
//! `--maintain` then opens the store as the writer (waiting for the lock like any writing call)
//! and runs bounded outbox maintenance steps ([`meta::MetaShard::maintain_recovery_outbox`]:
//! verify and advance the head, remove at most 256 old records per step) until the retention
//! policy holds or `--max-steps` steps ran — the way to work off the backlog of a store written
//! before retention existed.
//!
//! Output: one JSON envelope. Success:
//! `{"status":"success","outbox":{first_lsn,last_lsn,records,chunks,record_bytes,pruned_through_lsn,
//! verified_head_lsn},"version":N,"history_floor":N,"maintenance":{steps,pruned_records,
//! retained_records,more_to_prune}|null}`; a broken chain is `InvalidState` with
//! `details.reason = "recovery_outbox_corrupt"` and `details.lsn`, exit 1.

use std::io::Write;
use std::path::Path;

use clap::Args;
use serde_json::{json, Value};

use nokv::workbench::errors::{ErrorCode, ToolError};
use nokv::workbench::store_error;
use nokv_commands::{print_json, EXIT_OK, EXIT_TOOL_ERROR};

/// Arguments of `nokv verify`.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// After verifying, run RecoveryOutbox maintenance steps as the writer (takes the store's
    /// lock) until retention holds.
    #[arg(long)]
    pub maintain: bool,
    /// Most maintenance steps `--maintain` runs (each removes at most 256 records).
    #[arg(long, default_value_t = 10_000)]
    pub max_steps: u64,
}

fn corrupt_error(lsn: u64, reason: &str) -> ToolError {
    ToolError::new(
        ErrorCode::InvalidState,
        format!(
            "the recovery outbox chain is broken at LSN {lsn} ({reason}); nothing was changed — \
             restore the store from a backup"
        ),
    )
    .with_detail("reason", Value::from("recovery_outbox_corrupt"))
    .with_detail("lsn", Value::from(lsn))
}

fn meta_failure(e: meta::Error) -> ToolError {
    match e {
        meta::Error::RecoveryOutboxCorrupt { lsn, reason } => corrupt_error(lsn, &reason),
        other => store_error(nokv::Error::from(other)),
    }
}

/// Runs `nokv verify`; returns the exit code.
pub fn run_verify(dir: &Path, args: &VerifyArgs, out: &mut dyn Write) -> u8 {
    let fail = |out: &mut dyn Write, e: ToolError| {
        print_json(out, &e.envelope());
        EXIT_TOOL_ERROR
    };
    let client = match nokv_commands::read_only::open_existing(dir, true) {
        Ok(c) => c,
        Err(nokv::Error::Meta(meta::Error::RecoveryOutboxCorrupt { lsn, reason })) => {
            return fail(out, corrupt_error(lsn, &reason))
        }
        Err(e) => return fail(out, store_error(e)),
    };
    let shard = client.meta();
    let summary = match shard.verify_recovery_outbox() {
        Ok(s) => s,
        Err(e) => return fail(out, meta_failure(e)),
    };
    let points = match shard.recovery_chain_points() {
        Ok(p) => p,
        Err(e) => return fail(out, meta_failure(e)),
    };
    let version = match shard.version() {
        Ok(v) => v,
        Err(e) => return fail(out, meta_failure(e)),
    };
    let history_floor = match meta::TxnStore::history_floor(shard.store()) {
        Ok(v) => v,
        Err(e) => return fail(out, meta_failure(e)),
    };
    let mut env = json!({
        "status": "success",
        "outbox": {
            "first_lsn": summary.first_lsn,
            "last_lsn": summary.last_lsn,
            "records": summary.records,
            "chunks": summary.chunks,
            "record_bytes": summary.record_bytes,
            "pruned_through_lsn": points.pruned.applied_lsn,
            "verified_head_lsn": points.verified.applied_lsn,
        },
        "version": version,
        "history_floor": history_floor,
        "maintenance": Value::Null,
    });
    drop(client);
    if args.maintain {
        let writer = match nokv_commands::read_only::open_existing(dir, false) {
            Ok(c) => c,
            Err(e) => return fail(out, store_error(e)),
        };
        let (mut steps, mut pruned) = (0u64, 0u64);
        let mut last = meta::outbox::MaintenanceReport::default();
        while steps < args.max_steps {
            match writer.meta().maintain_recovery_outbox() {
                Ok(report) => {
                    steps += 1;
                    pruned += report.pruned_records;
                    last = report;
                    if !report.more_to_prune {
                        break;
                    }
                }
                Err(e) => return fail(out, meta_failure(e)),
            }
        }
        env["maintenance"] = json!({
            "steps": steps,
            "pruned_records": pruned,
            "pruned_through_lsn": last.pruned_through_lsn,
            "verified_head_lsn": last.verified_lsn,
            "retained_records": last.retained_records,
            "more_to_prune": last.more_to_prune,
        });
    }
    print_json(out, &env);
    EXIT_OK
}
