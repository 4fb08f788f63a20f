//! `nokv mcp`: the Workbench tools as an MCP server over stdio (see [`crate::mcp`]).

use std::path::Path;
use std::sync::Arc;

use crate::mcp::{EmbeddedBackend, McpOptions, RemoteBackend, ToolBackend};

use super::{store_dir, EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE};

/// Arguments of `nokv mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// Most tool calls running at once; further calls wait.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_concurrent_calls: usize,
}

/// Runs `nokv mcp` until stdin closes, SIGTERM or SIGINT; returns the exit code (0 after a clean
/// shutdown, 1 when the session failed, 2 for unusable arguments). Nothing but MCP messages is
/// written to stdout.
///
/// `server_flag` is the global `--server URL` (`nokv --server URL mcp`): every call then goes to
/// that `nokv serve` process (bearer token from $NOKV_TOKEN) instead of opening the store in this
/// process. Without it, $NOKV_SERVER is used when `--store` is not given.
pub fn run_mcp(store_flag: Option<&Path>, server_flag: Option<&str>, args: &McpArgs) -> u8 {
    let server = match (server_flag, store_flag) {
        (Some(_), Some(_)) => {
            eprintln!("nokv mcp: --server and --store exclude each other: pick one");
            return EXIT_USAGE;
        }
        (Some(url), None) => Some(url.to_string()),
        (None, Some(_)) => None,
        (None, None) => std::env::var("NOKV_SERVER")
            .ok()
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty()),
    };
    let backend: Arc<dyn ToolBackend> = match server {
        Some(url) => match RemoteBackend::from_env(&url) {
            Ok(b) => Arc::new(b),
            Err(e) => {
                eprintln!("nokv mcp: {}", e.message);
                return EXIT_USAGE;
            }
        },
        None => Arc::new(EmbeddedBackend::new(store_dir(store_flag))),
    };
    let options = McpOptions {
        max_concurrent_calls: args.max_concurrent_calls.max(1),
        ..McpOptions::default()
    };
    match crate::mcp::run_stdio(backend, &options) {
        Ok(_) => EXIT_OK,
        Err(_) => EXIT_TOOL_ERROR,
    }
}
