//! `nokv audit`: the store's audit trail of mutating calls (docs/server.md, "Audit trail").
//!
//! Prints the matching records oldest first, one compact JSON object per line (the fields of
//! [`nokv::access::AuditRecord`]); a failure prints the error envelope and exits 1. On the
//! embedded store it reads the segments of `<store>/access/audit/` directly (no lock needed); with
//! `--server` the server reads it (an `admin` token is required).

use std::io::Write;

use clap::Args;
use nokv::access::{AuditFilter, AuditLog};
use nokv::workbench::errors::ToolError;

use crate::{print_json, EXIT_OK, EXIT_TOOL_ERROR};

/// `nokv audit` arguments.
#[derive(Debug, Clone, Args, serde::Serialize, serde::Deserialize)]
pub struct AuditArgs {
    /// Only calls on this workbench.
    #[arg(long)]
    pub workbench: Option<String>,
    /// Only calls made with this token (its name; `admin` for the server's --token-file token,
    /// `local:<user>` for the embedded CLI).
    #[arg(long = "token", value_name = "NAME")]
    pub token: Option<String>,
    /// Only calls at or after this time: RFC 3339 (`2026-12-24T18:00:00Z`) or a duration ago
    /// (`90m`, `2h`, `7d`).
    #[arg(long, value_name = "T")]
    pub since: Option<String>,
    /// Only records after this sequence number, oldest first (page through the trail by passing
    /// the last `seq` printed).
    #[arg(long, value_name = "SEQ")]
    pub after: Option<u64>,
    /// At most this many records: the newest ones, or with --after the first ones after it.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

/// The filter of `args` at `now_ms`. Errors: `InvalidArguments` for a `--since` that is neither
/// a time nor a duration.
pub fn filter_of(args: &AuditArgs, now_ms: u64) -> Result<AuditFilter, ToolError> {
    let since_unix_ms = match args.since.as_deref() {
        None => None,
        Some(text) => Some(match nokv::expiry::parse_time(text) {
            Ok(t) => t,
            Err(_) => {
                let ago = nokv::expiry::parse_duration(text).map_err(|_| {
                    ToolError::invalid_arguments(format!(
                        "`{text}` is neither an RFC 3339 time nor a duration (90m, 2h, 7d)"
                    ))
                    .with_detail("field", "since")
                })?;
                now_ms.saturating_sub(u64::try_from(ago.as_millis()).unwrap_or(u64::MAX))
            }
        }),
    };
    Ok(AuditFilter {
        workbench: args.workbench.clone(),
        actor: args.token.clone(),
        since_unix_ms,
        after_seq: args.after,
        limit: args.limit,
    })
}

/// Runs `nokv audit` on `log` at `now_ms`, printing one JSON line per record; returns the exit
/// code.
pub fn run_audit_with(log: &AuditLog, args: &AuditArgs, now_ms: u64, out: &mut dyn Write) -> u8 {
    let records = filter_of(args, now_ms).and_then(|f| {
        log.query(&f)
            .map_err(|e| ToolError::internal(e.to_string()))
    });
    match records {
        Ok(records) => {
            for r in records {
                let line = serde_json::to_string(&r).unwrap_or_default();
                let _ = writeln!(out, "{line}");
            }
            EXIT_OK
        }
        Err(e) => {
            print_json(out, &e.envelope());
            EXIT_TOOL_ERROR
        }
    }
}
