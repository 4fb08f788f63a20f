//! `nokv mcp`: the Workbench tools as an MCP server over stdio (see [`nokv_mcp`]).

use std::path::Path;
use std::sync::Arc;

use nokv_mcp::{EmbeddedBackend, McpOptions, RemoteBackend, ToolBackend};

use nokv_commands::{EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE};

/// Arguments of `nokv mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// Most tool calls running at once; further calls wait.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_concurrent_calls: usize,
    /// The read-only profile: offer only the nine reading tools; any other tool answers the
    /// `Forbidden` envelope. An embedded store is then opened read-only for each call (no lock).
    /// With `--server` and a token that may only read, the profile is on without the flag.
    #[arg(long)]
    pub read_only: bool,
}

/// Runs `nokv mcp` until stdin closes, SIGTERM or SIGINT; returns the exit code (0 after a clean
/// shutdown, 1 when the session failed, 2 for unusable arguments). Nothing but MCP messages is
/// written to stdout.
///
/// `store` is the store directory (`--store`, $NOKV_STORE or ./.nokv); `server` is the
/// `nokv serve` URL every call goes to instead of opening the store in this
/// process (bearer token from $NOKV_TOKEN), as [`crate::server_url`] resolves it for every
/// command: `--server`, else $NOKV_SERVER when `--store` is not given.
pub fn run_mcp(store: &Path, server: Option<&str>, args: &McpArgs) -> u8 {
    let mut read_only = args.read_only;
    let backend: Arc<dyn ToolBackend> = match server {
        Some(url) => {
            match RemoteBackend::from_env(url) {
                Ok(b) => {
                    // A token that may only read gets the read-only profile without the flag.
                    if !read_only && b.token_reads_only() == Some(true) {
                        eprintln!("nokv mcp: the server's token may only read: serving the read-only profile");
                        read_only = true;
                    }
                    Arc::new(b)
                }
                Err(e) => {
                    eprintln!("nokv mcp: {}", e.message);
                    return EXIT_USAGE;
                }
            }
        }
        None if args.read_only => Arc::new(EmbeddedBackend::read_only(store.to_path_buf())),
        None => Arc::new(EmbeddedBackend::new(store.to_path_buf())),
    };
    let options = McpOptions {
        max_concurrent_calls: args.max_concurrent_calls.max(1),
        read_only,
        ..McpOptions::default()
    };
    match nokv_mcp::run_stdio(backend, &options) {
        Ok(_) => EXIT_OK,
        Err(_) => EXIT_TOOL_ERROR,
    }
}
