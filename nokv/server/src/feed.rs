//! `GET /v1/changes`: the change feed as NDJSON, exactly the lines `nokv changes` prints (one
//! compact JSON object per event, a final error envelope on failure). With `follow=true` the
//! response stays open and new events stream as they commit; the feed stops when the client
//! goes away or the server shuts down.

use std::sync::Arc;

use axum::body::Body;
use std::io::Write;

use axum::extract::{Extension, Query, Request, State};
use nokv::access::{Action, Caller};

use super::error::ApiError;
use super::policy;
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

/// `GET /v1/changes`. A caller who may not read every workbench gets only the events of the
/// workbenches it may read (docs/server.md, "Scopes"); with `workbench=W` it needs `read` on W.
pub(crate) async fn changes(
    State(state): State<Arc<AppState>>,
    Query(q): Query<ChangesQuery>,
    Extension(caller): Extension<Caller>,
    req: Request,
) -> Result<Response, ApiError> {
    let root = req
        .extensions()
        .get::<super::state::PathPrefix>()
        .and_then(|p| p.0.strip_prefix("/roots/").map(str::to_string));
    let filter = match &q.workbench {
        Some(w) => {
            policy::check(&caller, root.as_deref(), &[(Action::Read, Some(w.clone()))])?;
            None
        }
        None => policy::feed_filter(&caller, root.as_deref()),
    };
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
        let mut filtered;
        let out: &mut dyn Write = match filter {
            None => &mut writer,
            Some(keep) => {
                filtered = LineFilter {
                    inner: &mut writer,
                    keep,
                    line: Vec::new(),
                };
                &mut filtered
            }
        };
        nokv_commands::snapshot_cmd::run_changes_with(s.client.clone(), &args, out, &same, &stop);
    });
    Ok((
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-ndjson"),
        )],
        Body::new(body),
    )
        .into_response())
}

/// Passes on only the whole lines `keep` accepts (the feed's NDJSON, one event per line).
struct LineFilter<'a> {
    inner: &'a mut dyn Write,
    keep: policy::LineKeep,
    line: Vec<u8>,
}

impl Write for LineFilter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for &b in buf {
            self.line.push(b);
            if b == b'\n' {
                let line = std::mem::take(&mut self.line);
                if (self.keep)(&line) {
                    self.inner.write_all(&line)?;
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
