//! `nokv rm WB PATH [--expected-generation G] [--request-id HEX32]` and `nokv rm -r WB PREFIX`.
//!
//! Prints one JSON envelope (success: what was removed; error: the facade's typed error
//! envelope). Exit 0 on success, 1 on an operation error, 2 on a usage error. A missing store or
//! workbench is `NotFound` (rm never creates either).

use std::io::Write;
use std::path::Path;

use clap::Args;

use crate::{
    print_failure as fail, print_json, request_id_arg, EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE,
};
use nokv::client::Client;
use nokv::lifetime::RemoveOptions;
use nokv::workbench::errors::ToolError;
use nokv::workbench::removal_error;
use nokv::workbench::store_error;

/// `nokv rm` arguments.
#[derive(Debug, Clone, Args, serde::Serialize, serde::Deserialize)]
pub struct RmArgs {
    /// Remove everything under PATH (a directory prefix, or a file) in bounded batches; each path
    /// disappears atomically. Rerun to resume after an interruption.
    #[arg(short = 'r', long)]
    pub recursive: bool,
    /// Workbench id.
    pub workbench: String,
    /// Workbench-relative path, e.g. `outputs/model.bin` (with `-r`: a prefix such as `outputs`).
    pub path: String,
    /// Remove only if the path is at this generation (else `Conflict`, nothing removed).
    #[arg(long, value_name = "G")]
    pub expected_generation: Option<u64>,
    /// Request id (32 hex characters): retrying with the same id after a lost answer returns the
    /// original result (`idempotent_replay: true`) instead of `NotFound`.
    #[arg(long, value_name = "HEX32")]
    pub request_id: Option<String>,
}

/// The argument checks of `nokv rm`, made before the store is opened: the parsed request id.
/// Errors: the usage-error envelope and exit code.
fn check(args: &RmArgs) -> Result<Option<[u8; 16]>, (ToolError, u8)> {
    if args.recursive && (args.expected_generation.is_some() || args.request_id.is_some()) {
        return Err((
            ToolError::invalid_arguments(
                "--expected-generation and --request-id apply to one path, not to `rm -r`",
            ),
            EXIT_USAGE,
        ));
    }
    request_id_arg(args.request_id.as_deref())
}

/// Runs `nokv rm`; returns the exit code.
pub fn run_rm(dir: &Path, args: RmArgs, out: &mut dyn Write) -> u8 {
    if let Err((err, code)) = check(&args) {
        return fail(out, err, code);
    }
    match crate::read_only::open_existing(dir, false) {
        Ok(client) => run_rm_with(&client, args, out),
        Err(e) => fail(out, store_error(e), EXIT_TOOL_ERROR),
    }
}

/// `nokv rm` on an open client (the CLI and the server share it); returns the exit code.
pub(crate) fn run_rm_with(client: &Client, args: RmArgs, out: &mut dyn Write) -> u8 {
    let request_id = match check(&args) {
        Ok(id) => id,
        Err((err, code)) => return fail(out, err, code),
    };
    let wb = &args.workbench;
    let result = if args.recursive {
        client
            .remove_prefix(wb, &args.path)
            .map(|r| r.envelope(wb, &args.path))
    } else {
        let opts = RemoveOptions {
            expected_generation: args.expected_generation,
            request_id,
        };
        client
            .remove(wb, &args.path, &opts)
            .map(|r| r.envelope(wb, &client.workbench_path(wb)))
    };
    match result {
        Ok(envelope) => {
            print_json(out, &envelope);
            EXIT_OK
        }
        Err(e) => fail(out, removal_error(client, wb, e), EXIT_TOOL_ERROR),
    }
}
