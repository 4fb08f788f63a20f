//! The diff route: `GET /v1/diff?a=SIDE&b=SIDE[&cursor=C][&limit=N][&patch=true][&patch_max_bytes=N]`
//! answers the `nokv diff` JSON envelope (docs/server.md). Each side is `WB`, `WB@SNAPSHOT` or a
//! commit id; it calls [`nokv::Client::diff`], as the CLI, the Python SDK and
//! `POST /v1/commands/diff` do. An operation error is an error envelope with HTTP 200.

use axum::extract::{Query, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use super::error::ApiError;
use super::handler::Shared;
use super::lifetime::read_route;
use nokv::diff::{DiffOptions, SideSpec, DEFAULT_PAGE, DEFAULT_PATCH_MAX_BYTES};
use nokv::workbench::diff_error;
use nokv::workbench::errors::ToolError;

/// The diff route, merged into the server's router.
pub(crate) fn routes() -> Router<Shared> {
    Router::new().route("/v1/diff", get(diff))
}

/// Query of `GET /v1/diff`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiffQuery {
    /// Side A.
    a: String,
    /// Side B.
    b: String,
    /// Resume after an earlier page.
    cursor: Option<String>,
    /// Page size (1..=10000).
    limit: Option<usize>,
    /// Attach unified text diffs.
    #[serde(default)]
    patch: bool,
    /// Size bound of a patch per side, in bytes.
    patch_max_bytes: Option<u64>,
}

async fn diff(
    State(state): State<Shared>,
    Query(q): Query<DiffQuery>,
) -> Result<Response, ApiError> {
    read_route(state, move |client| {
        let sides = SideSpec::parse(&q.a).and_then(|a| SideSpec::parse(&q.b).map(|b| (a, b)));
        let (a, b) = match sides {
            Ok(s) => s,
            Err(e) => return ToolError::invalid_arguments(e.to_string()).envelope(),
        };
        let options = DiffOptions {
            cursor: q.cursor,
            limit: q.limit.unwrap_or(DEFAULT_PAGE),
            patch: q.patch,
            patch_max_bytes: q.patch_max_bytes.unwrap_or(DEFAULT_PATCH_MAX_BYTES),
        };
        match client.diff(&a, &b, &options) {
            Ok(report) => report.envelope(),
            Err(e) => diff_error(client, &client.diff_error_workbench(&a, &b), e).envelope(),
        }
    })
    .await
}
