//! `GET /v1/changes`: the change feed as NDJSON, exactly the lines `nokv changes` prints (one
//! compact JSON object per event, a final error envelope on failure). With `follow=true` the
//! response stays open and new events stream as they commit; the feed stops when the client
//! goes away or the server shuts down.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::body::ChannelWriter;
use super::state::AppState;
use nokv_commands::snapshot_cmd::ChangesArgs;

/// Query of `GET /v1/changes` (the flags of `nokv changes`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChangesQuery {
    after: Option<String>,
    workbench: Option<String>,
    #[serde(default)]
    follow: bool,
    limit: Option<u64>,
    poll_ms: Option<u64>,
}

pub(crate) async fn changes(
    State(state): State<Arc<AppState>>,
    Query(q): Query<ChangesQuery>,
) -> Response {
    let args = ChangesArgs {
        after: q.after,
        workbench: q.workbench,
        follow: q.follow,
        limit: q.limit,
        poll_ms: q.poll_ms.unwrap_or(500),
    };
    let (mut writer, body) = ChannelWriter::pair(16);
    let closed = writer.closed_flag();
    let s = state.clone();
    tokio::task::spawn_blocking(move || {
        let stop = || closed.is_closed();
        let same = || Ok(s.client.clone());
        nokv_commands::snapshot_cmd::run_changes_with(
            s.client.clone(),
            &args,
            &mut writer,
            &same,
            &stop,
        );
    });
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        )],
        Body::new(body),
    )
        .into_response()
}
