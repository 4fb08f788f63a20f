//! `nokv expire WB --after DURATION | --at TIME | --never` (docs/metadata-format.md, "Workbench
//! Expiry").
//!
//! Prints one JSON envelope: success with the recorded deadline (`expires_at`, RFC 3339, or
//! null), whether the workbench is expired now and the store clock used; or the facade's typed
//! error (`NotFound` with `details.reason = "expired"` for an expired workbench). Exit 0 on
//! success, 1 on an operation error, 2 on a usage error.

use std::io::Write;
use std::path::Path;

use clap::Args;

use crate::{print_json, EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE};
use nokv::client::Client;
use nokv::expiry::{parse_duration, parse_time, receipt_envelope, Expiry};
use nokv::workbench::errors::ToolError;
use nokv::workbench::{store_error, tool_error};

/// `nokv expire` arguments (exactly one of `--after`, `--at`, `--never`).
#[derive(Debug, Clone, Args, serde::Serialize, serde::Deserialize)]
#[command(group(clap::ArgGroup::new("when").required(true).args(["after", "at", "never"])))]
pub struct ExpireArgs {
    /// Workbench id.
    pub workbench: String,
    /// Expire this long from now on the store clock: a number and a unit s, m, h, d or w
    /// (`90m`, `2h`, `7d`, `1d12h`).
    #[arg(long, value_name = "DURATION")]
    #[serde(default)]
    pub after: Option<String>,
    /// Expire at this RFC 3339 time (`2026-12-24T18:00:00Z`); a time already passed expires the
    /// workbench at once.
    #[arg(long, value_name = "TIME")]
    #[serde(default)]
    pub at: Option<String>,
    /// Never expire (removes a deadline).
    #[arg(long)]
    #[serde(default)]
    pub never: bool,
}

/// The argument checks of `nokv expire`, made before the store is opened (the server runs them
/// too: its requests do not pass through clap). Errors: the usage-error envelope.
fn check(args: &ExpireArgs) -> Result<Expiry, ToolError> {
    let given = usize::from(args.after.is_some())
        + usize::from(args.at.is_some())
        + usize::from(args.never);
    if given != 1 {
        return Err(ToolError::invalid_arguments(
            "give exactly one of --after DURATION, --at TIME, --never",
        ));
    }
    let invalid = |e: nokv::Error| ToolError::invalid_arguments(e.to_string());
    if let Some(d) = &args.after {
        return parse_duration(d).map(Expiry::After).map_err(invalid);
    }
    if let Some(t) = &args.at {
        return parse_time(t).map(Expiry::At).map_err(invalid);
    }
    Ok(Expiry::Never)
}

/// Runs `nokv expire`; returns the exit code.
pub fn run_expire(dir: &Path, args: ExpireArgs, out: &mut dyn Write) -> u8 {
    if let Err(err) = check(&args) {
        print_json(out, &err.envelope());
        return EXIT_USAGE;
    }
    match crate::read_only::open_existing(dir, false) {
        Ok(client) => run_expire_with(&client, args, out),
        Err(e) => {
            print_json(out, &store_error(e).envelope());
            EXIT_TOOL_ERROR
        }
    }
}

/// `nokv expire` on an open client (the CLI and the server share it); returns the exit code.
pub(crate) fn run_expire_with(client: &Client, args: ExpireArgs, out: &mut dyn Write) -> u8 {
    let expiry = match check(&args) {
        Ok(e) => e,
        Err(err) => {
            print_json(out, &err.envelope());
            return EXIT_USAGE;
        }
    };
    match client.expire_workbench(&args.workbench, expiry) {
        Ok(receipt) => {
            print_json(out, &receipt_envelope(&receipt));
            EXIT_OK
        }
        Err(e) => {
            print_json(out, &tool_error(client, &args.workbench, e).envelope());
            EXIT_TOOL_ERROR
        }
    }
}
