//! `nokv mcp`: the 18 Workbench tools as a Model Context Protocol server over stdio
//! (docs/workbench.md, "CLI and MCP").
//!
//! The server speaks JSON-RPC 2.0, one message per line, on stdin/stdout through the official
//! Rust MCP SDK (`rmcp`): `initialize` (and the newer inline lifecycle the SDK negotiates),
//! `tools/list` — exactly the 18 tools, each with its `nokv schema` name, description and input
//! schema — and `tools/call`, whose result is
//! `{content:[{type:"text", text}], structuredContent, isError}` where `structuredContent` is the
//! facade's envelope unchanged, `text` is the same envelope as compact JSON and `isError` is true
//! exactly when the envelope's `status` is `"error"`. A tool error is therefore a result, never a
//! JSON-RPC error; JSON-RPC errors are reserved for messages that are not valid requests.
//!
//! Where the calls go is a [`ToolBackend`]:
//!
//! * [`EmbeddedBackend`] (`nokv mcp [--store DIR]`) runs the [`nokv::workbench::Workbench`]
//!   facade in-process. The store is opened at the first tool call that needs it (only
//!   `workbench_create` may create a missing store, as in `nokv workbench`) and stays open — with
//!   its single-writer lock — until the server exits. An embedded `nokv mcp` is therefore the one
//!   writer process of its store; several agents share one store through `nokv serve` and
//!   `nokv mcp --server URL`.
//! * [`RemoteBackend`] (`nokv mcp --server URL`, bearer token from `NOKV_TOKEN`) sends every call
//!   to a `nokv serve` owner process as `POST {URL}/v1/tools/{tool}` with the JSON input as the
//!   body and returns the envelope the server answered.
//!
//! Serving ([`serve`], [`run_stdio`]): tool calls run concurrently on tokio's blocking pool, at
//! most [`McpOptions::max_concurrent_calls`] at a time; stdout carries only protocol messages
//! (logs go to stderr). The server stops on stdin EOF, SIGTERM or SIGINT: it refuses new calls,
//! waits for the calls in flight to finish and their responses to be written, then closes the
//! backend (the embedded store and its lock) and exits 0.

mod embedded;
mod framing;
mod remote;
mod server;

pub use embedded::EmbeddedBackend;
pub use remote::{RemoteBackend, RemoteOptions, TOOLS_PATH};
pub use server::{run_stdio, serve, McpOptions, ServeOutcome};

use serde_json::Value;

/// Where the MCP server sends tool calls: the embedded facade or a `nokv serve` process.
///
/// Implementations never panic and never fail outside the envelope: every outcome, including a
/// store that cannot be opened or a server that cannot be reached, is one Workbench envelope
/// (`{"status":"success", …}` or `{"status":"error","code","message","retryable","details"}`).
pub trait ToolBackend: Send + Sync {
    /// Runs tool `tool` (with or without its `workbench_` prefix; anything else yields the
    /// `UnknownTool` envelope) on the JSON `input` and returns its envelope. Blocking: may wait
    /// for the store lock, storage I/O or the network.
    fn call(&self, tool: &str, input: &Value) -> Value;

    /// One line for the server's stderr log saying where calls go (never a secret).
    fn describe(&self) -> String;

    /// Releases what the backend holds (the embedded store, its lock and its background maintenance thread).
    /// Called once by the server after the last call returned; a later [`ToolBackend::call`]
    /// may reopen. The default does nothing.
    fn close(&self) {}
}

/// Behaviour hints of one tool, published as MCP tool annotations (`readOnlyHint`,
/// `destructiveHint`, `idempotentHint`) and used by [`RemoteBackend`] to decide which calls may
/// be sent again after the connection broke before the response arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolHints {
    /// The tool never changes the store.
    pub read_only: bool,
    /// The tool may overwrite or retire existing state (put_file with `replace`, edit,
    /// snapshot_retire).
    pub destructive: bool,
    /// Repeating the exact call has no further effect (reads, and the writes whose exact retry
    /// converges by contract: create, commit, snapshot_retire, restore).
    pub idempotent: bool,
}

/// The [`ToolHints`] of a tool (name with or without the `workbench_` prefix); `None` for a name
/// that is not one of the 18 tools.
pub fn tool_hints(tool: &str) -> Option<ToolHints> {
    let name = nokv::workbench::schema::canonical_tool_name(tool)?;
    let read = ToolHints {
        read_only: true,
        destructive: false,
        idempotent: true,
    };
    let write = |destructive, idempotent| ToolHints {
        read_only: false,
        destructive,
        idempotent,
    };
    Some(match name {
        "workbench_list"
        | "workbench_stat"
        | "workbench_read"
        | "workbench_grep"
        | "workbench_search"
        | "workbench_aggregate"
        | "workbench_catalog"
        | "workbench_find"
        | "workbench_snapshot_list" => read,
        "workbench_create" | "workbench_commit" | "workbench_restore" => write(false, true),
        "workbench_snapshot_retire" => write(true, true),
        "workbench_put_file" | "workbench_edit" => write(true, false),
        // append, snapshot (every mint is a new snapshot), snapshot_renew (moves the deadline).
        _ => write(false, false),
    })
}

/// Whether an envelope reports success (`"status": "success"`); anything else is a tool error.
pub fn envelope_is_success(envelope: &Value) -> bool {
    envelope.get("status").and_then(Value::as_str) == Some("success")
}
