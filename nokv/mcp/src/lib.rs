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
//!   `workbench_create` may create a missing store, as in `nokv workbench`) and stays open until
//!   the server exits, holding the store's writer lock only while a call writes (plus a short
//!   idle grace), so other agents' CLI, Python and MCP processes write to the same store between
//!   its calls; agents on other machines share one store through `nokv serve` and
//!   `nokv mcp --server URL`.
//! * [`RemoteBackend`] (`nokv mcp --server URL`, bearer token from `NOKV_TOKEN`) sends every call
//!   to a `nokv serve` owner process as `POST {URL}/v1/tools/{tool}` with the JSON input as the
//!   body and returns the envelope the server answered.
//!
//! The read-only profile ([`McpOptions::read_only`], `nokv mcp --read-only`) offers only the
//! nine reading tools in `tools/list` and answers any other call with the `Forbidden` envelope
//! (`details.missing_scope`) without reaching the backend; its embedded backend
//! ([`EmbeddedBackend::read_only`]) opens the store read-only for each call.
//!
//! Serving ([`serve`], [`run_stdio`]): tool calls run concurrently on tokio's blocking pool, at
//! most [`McpOptions::max_concurrent_calls`] at a time; stdout carries only protocol messages
//! (logs go to stderr). The server stops on stdin EOF, SIGTERM or SIGINT: it refuses new calls,
//! waits for the calls in flight to finish and their responses to be written, then closes the
//! backend (the embedded store and its lock) and exits 0.

mod backend;
mod embedded;
mod framing;
mod remote;
mod server;

pub use backend::{envelope_is_success, tool_hints, ToolBackend, ToolHints};
pub use embedded::EmbeddedBackend;
pub use remote::{RemoteBackend, RemoteOptions, TOOLS_PATH};
pub use server::{run_stdio, serve, McpOptions, ServeOutcome};
