//! What every backend of the MCP server shares: the [`ToolBackend`] trait calls go through, the
//! tools' behaviour hints and the envelope's success test. A leaf: it imports nothing of this
//! crate.

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
/// `destructiveHint`, `idempotentHint`) and used by the remote backend to decide which calls may
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
        name if nokv::workbench::schema::READING_TOOLS.contains(&name) => read,
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
