//! The move route: `POST /v1/workbenches/{id}/move` with `{from, to, expected_generation?,
//! expected_destination_generation?, request_id?}` answers the `nokv mv` envelope. It calls
//! [`nokv::Client::move_path`], as the CLI, the Python SDK and `POST /v1/commands/mv` do; an
//! operation error is an error envelope with HTTP 200 (as the tool route), and the write honours
//! `Idempotency-Key` like every write route (docs/server.md).

use axum::extract::{Path, Request, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde::Deserialize;

use super::error::ApiError;
use super::handler::{request_id, Shared};
use super::lifetime::write_route;
use nokv::move_path::MoveOptions;
use nokv::workbench::errors::ToolError;
use nokv::workbench::move_error;

/// The move route, merged into the server's router.
pub(crate) fn routes() -> Router<Shared> {
    Router::new().route("/v1/workbenches/{id}/move", post(move_file))
}

/// Body of `POST /v1/workbenches/{id}/move`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MoveBody {
    /// Workbench-relative source path.
    from: String,
    /// Workbench-relative destination path.
    to: String,
    /// Move only when the source is at this generation.
    expected_generation: Option<u64>,
    /// Replace the destination, which must be at this generation.
    expected_destination_generation: Option<u64>,
    /// Replay identity, 32 hex characters.
    request_id: Option<String>,
}

async fn move_file(
    State(state): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    write_route(state, headers, req, move |client, b: MoveBody| {
        let request_id = match request_id(b.request_id.as_deref()) {
            Ok(rid) => rid,
            Err(e) => return ToolError::invalid_arguments(e).envelope(),
        };
        let opts = MoveOptions {
            expected_generation: b.expected_generation,
            expected_destination_generation: b.expected_destination_generation,
            request_id,
        };
        match client.move_path(&id, &b.from, &b.to, &opts) {
            Ok(r) => r.envelope(&id, &client.workbench_path(&id)),
            Err(e) => move_error(client, &id, e).envelope(),
        }
    })
    .await
}
