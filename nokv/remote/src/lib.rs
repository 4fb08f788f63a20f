//! `nokv_remote::RemoteClient` — the Rust SDK against a `nokv serve` server.
//!
//! The remote client mirrors [`nokv::Client`]'s data-path operations with the same names and
//! types — [`RemoteClient::create_workbench`], [`RemoteClient::put`],
//! [`RemoteClient::put_reader`], [`RemoteClient::read_all`], [`RemoteClient::read_range`]
//! (and [`RemoteClient::read_range_of_generation`], a range of one pinned revision, and
//! [`RemoteClient::read_range_at`], a range at a read version),
//! [`RemoteClient::stat`], [`RemoteClient::append_idempotent`], and object lifetime:
//! [`RemoteClient::remove`], [`RemoteClient::remove_prefix`], [`RemoteClient::gc`],
//! [`RemoteClient::gc_explain`], [`RemoteClient::fsck`], [`RemoteClient::repair_index`],
//! [`RemoteClient::config_get`] / `config_set` / `config_list` — and reaches every other
//! operation through the two protocol-level calls the CLI uses:
//! [`RemoteClient::call_tool`] (the 18 Workbench tools, exactly the envelopes of
//! [`nokv::workbench::Workbench::call`]) and [`RemoteClient::command`] (the CLI's commit, tag,
//! find, snapshot, restore, operation and demo commands, returning exactly what the CLI prints).
//! Both clients implement [`nokv::Store`], the operations every front door needs from either;
//! beyond it they are separate types: the embedded one exposes store internals (`meta()`,
//! `objects()`, readers at a version) that a remote caller cannot have.
//!
//! Failures are typed: [`Error::Connection`] (retryable) when the server cannot be reached or the
//! connection breaks, [`Error::Server`] when the server refuses the request itself (auth,
//! malformed request, limits), and [`Error::OperationFailed`] with the stable Workbench code for
//! an operation error. Every write carries a fresh `Idempotency-Key` that its retries reuse, so a
//! response lost after the server committed is answered by the stored response (the server's
//! request journal) and never writes twice. Calls are retried on connection failures and
//! retryable refusals with exponential backoff (default 4 retries); a streamed upload from a
//! non-replayable reader is not retried.
//!
//! The connection is plain HTTP/1.1 (put TLS in front with a terminating proxy); the bearer token
//! comes from [`RemoteClient::connect`] or `NOKV_TOKEN`.
//!
//! Modules, each importing only those below it: `wire` (request ids, URL encoding, answers to
//! SDK types; a leaf), [`routing`] (root → owner through the control plane), `client` (the
//! type, its constructors and the transport with retries), then `files` (the data path),
//! `lifetime` (removal, GC, fsck, settings), `expiry` ([`RemoteClient::expire_workbench`]) and
//! `store` ([`nokv::Store`] over the others).

mod client;
mod diff;
mod expiry;
mod files;
mod lifetime;
mod moves;
pub mod routing;
mod store;
mod wire;

pub use client::{CommandOutput, RemoteClient, DEFAULT_RETRIES};
pub use store::error_envelope;
pub use wire::{encode_component, envelope_result, new_request_id};
