//! # nokv-protocol — what every NoKV front door says on the wire
//!
//! The lowest crate of the `nokv/` folder: no storage, no transport, only the shapes the SDK, the
//! server, the remote client, MCP, the CLI and the Python SDK share, so each is written once.
//!
//! * [`errors`] — the Workbench error codes (docs/workbench.md, "Error codes") and the one JSON
//!   error envelope `{"status":"error","code","message","retryable","details"}` every front door
//!   returns; [`errors::ErrorCode::ALL`] is the list the Python SDK's exception classes are built
//!   from.
//! * [`headers`] — the HTTP header names of the `/v1/` protocol (docs/server.md).
//! * [`url`] — the percent-encoding of a `/v1/` URL's path segments and query values.

pub mod errors;
pub mod headers;
pub mod url;
