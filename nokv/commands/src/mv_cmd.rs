//! `nokv mv WB FROM TO [--expected-generation G] [--expected-destination-generation G]
//! [--request-id HEX32]`.
//!
//! Prints one JSON envelope (success: the move receipt; error: the facade's typed error
//! envelope). Exit 0 on success, 1 on an operation error, 2 on a usage error. A missing store or
//! workbench is `NotFound` (mv never creates either).

use std::io::Write;
use std::path::Path;

use clap::Args;

use crate::{print_failure as fail, print_json, request_id_arg, EXIT_OK, EXIT_TOOL_ERROR};
use nokv::client::Client;
use nokv::move_path::MoveOptions;
use nokv::workbench::errors::ToolError;
use nokv::workbench::{move_error, store_error};

/// `nokv mv` arguments.
#[derive(Debug, Clone, Args, serde::Serialize, serde::Deserialize)]
pub struct MvArgs {
    /// Workbench id.
    pub workbench: String,
    /// The file to move (workbench-relative; a directory is refused: directory rename is not
    /// supported).
    pub from: String,
    /// The new path (workbench-relative). Must be absent unless
    /// `--expected-destination-generation` is given.
    pub to: String,
    /// Move only if FROM is at this generation (else `Conflict`, nothing moved).
    #[arg(long, value_name = "G")]
    pub expected_generation: Option<u64>,
    /// Replace the file at TO, which must be at this generation (else `Conflict`, nothing
    /// moved). Without it TO must be absent (`AlreadyExists` otherwise).
    #[arg(long, value_name = "G")]
    #[serde(default)]
    pub expected_destination_generation: Option<u64>,
    /// Request id (32 hex characters): retrying with the same id after a lost answer returns the
    /// original result (`idempotent_replay: true`) instead of `NotFound`.
    #[arg(long, value_name = "HEX32")]
    #[serde(default)]
    pub request_id: Option<String>,
}

/// The argument checks made before the store is opened: the parsed request id. Errors: the
/// usage-error envelope and exit code.
fn check(args: &MvArgs) -> Result<Option<[u8; 16]>, (ToolError, u8)> {
    request_id_arg(args.request_id.as_deref())
}

/// Runs `nokv mv`; returns the exit code.
pub fn run_mv(dir: &Path, args: MvArgs, out: &mut dyn Write) -> u8 {
    if let Err((err, code)) = check(&args) {
        return fail(out, err, code);
    }
    match crate::read_only::open_existing(dir, false) {
        Ok(client) => run_mv_with(&client, args, out),
        Err(e) => fail(out, store_error(e), EXIT_TOOL_ERROR),
    }
}

/// `nokv mv` on an open client (the CLI and the server share it); returns the exit code.
pub fn run_mv_with(client: &Client, args: MvArgs, out: &mut dyn Write) -> u8 {
    let request_id = match check(&args) {
        Ok(id) => id,
        Err((err, code)) => return fail(out, err, code),
    };
    let wb = &args.workbench;
    let opts = MoveOptions {
        expected_generation: args.expected_generation,
        expected_destination_generation: args.expected_destination_generation,
        request_id,
    };
    match client.move_path(wb, &args.from, &args.to, &opts) {
        Ok(r) => {
            print_json(out, &r.envelope(wb, &client.workbench_path(wb)));
            EXIT_OK
        }
        Err(e) => fail(out, move_error(client, wb, e), EXIT_TOOL_ERROR),
    }
}
