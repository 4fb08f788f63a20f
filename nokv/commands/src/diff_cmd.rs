//! `nokv diff A B [--format json|table] [--cursor C] [--limit N] [--patch [--patch-max-bytes N]]`.
//!
//! Each side is a workbench (its live tree), `WB@SNAPSHOT` (a snapshot id or name) or a commit id
//! (64 hex characters). Prints one JSON envelope by default (the [`nokv::diff::DiffReport`]
//! envelope, or a typed error envelope), or a readable table with `--format table`. Exit 0 on
//! success, 1 on an operation error, 2 on a usage error. Opens the store read-only.

use std::io::Write;
use std::path::Path;

use clap::{Args, ValueEnum};

use crate::{print_failure as fail, print_json, EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE};
use nokv::client::Client;
use nokv::diff::{DiffOptions, SideSpec, DEFAULT_PAGE, DEFAULT_PATCH_MAX_BYTES};
use nokv::workbench::errors::ToolError;
use nokv::workbench::{diff_error, store_error};

/// How `nokv diff` prints its page.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum DiffFormat {
    /// One JSON envelope (the default).
    #[default]
    Json,
    /// A readable table, then the patches.
    Table,
}

/// `nokv diff` arguments.
#[derive(Debug, Clone, Args, serde::Serialize, serde::Deserialize)]
pub struct DiffArgs {
    /// Side A: `WB` (live), `WB@SNAPSHOT` (id or name) or a commit id.
    pub a: String,
    /// Side B: `WB` (live), `WB@SNAPSHOT` (id or name) or a commit id.
    pub b: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DiffFormat::Json)]
    #[serde(default)]
    pub format: DiffFormat,
    /// Resume after an earlier page (its `next_cursor`).
    #[arg(long, value_name = "CURSOR")]
    #[serde(default)]
    pub cursor: Option<String>,
    /// At most this many changes per page (1..=10000).
    #[arg(long, default_value_t = DEFAULT_PAGE, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    #[serde(default = "default_limit")]
    pub limit: usize,
    /// Add a unified text diff of each changed text file of at most `--patch-max-bytes` per side.
    #[arg(long)]
    #[serde(default)]
    pub patch: bool,
    /// Size bound of `--patch` per side, in bytes (at most 4 MiB).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PATCH_MAX_BYTES)]
    #[serde(default = "default_patch_bound")]
    pub patch_max_bytes: u64,
}

fn default_limit() -> usize {
    DEFAULT_PAGE
}

fn default_patch_bound() -> u64 {
    DEFAULT_PATCH_MAX_BYTES
}

/// The argument checks made before the store is opened: the two parsed sides.
fn check(args: &DiffArgs) -> Result<(SideSpec, SideSpec), ToolError> {
    let a = SideSpec::parse(&args.a).map_err(|e| ToolError::invalid_arguments(e.to_string()))?;
    let b = SideSpec::parse(&args.b).map_err(|e| ToolError::invalid_arguments(e.to_string()))?;
    Ok((a, b))
}

/// Runs `nokv diff` on the store in `dir` (opened read-only); returns the exit code.
pub fn run_diff(dir: &Path, args: DiffArgs, out: &mut dyn Write) -> u8 {
    if let Err(err) = check(&args) {
        return fail(out, err, EXIT_USAGE);
    }
    match crate::read_only::open_existing(dir, true) {
        Ok(client) => run_diff_with(&client, args, out),
        Err(e) => fail(out, store_error(e), EXIT_TOOL_ERROR),
    }
}

/// `nokv diff` on an open client (the CLI and the server share it); returns the exit code.
pub fn run_diff_with(client: &Client, args: DiffArgs, out: &mut dyn Write) -> u8 {
    let (a, b) = match check(&args) {
        Ok(sides) => sides,
        Err(err) => return fail(out, err, EXIT_USAGE),
    };
    let options = DiffOptions {
        cursor: args.cursor.clone(),
        limit: args.limit,
        patch: args.patch,
        patch_max_bytes: args.patch_max_bytes,
    };
    match client.diff(&a, &b, &options) {
        Ok(report) => {
            match args.format {
                DiffFormat::Json => print_json(out, &report.envelope()),
                DiffFormat::Table => {
                    let _ = out.write_all(report.table().as_bytes());
                }
            }
            EXIT_OK
        }
        Err(e) => {
            let wb = client.diff_error_workbench(&a, &b);
            fail(out, diff_error(client, &wb, e), EXIT_TOOL_ERROR)
        }
    }
}
