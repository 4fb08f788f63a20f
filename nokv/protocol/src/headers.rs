//! HTTP header names of the `nokv serve` `/v1/` protocol (docs/server.md), shared by the server
//! that reads them and the remote clients (Rust, MCP over a server) that send them.

/// Request header carrying a write's request id (1–128 visible ASCII bytes): a retried mutating
/// request with the same id answers the first request's stored response.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Response header set to `true` on an exact replay of a stored response.
pub const REPLAYED: &str = "x-nokv-replayed";
/// Optional request header of an upload: `sha256:<64 lowercase hex>` of the body, bound into the
/// request-id digest and checked against what was stored.
pub const CONTENT_SHA256: &str = "x-nokv-content-sha256";
