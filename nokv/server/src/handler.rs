//! The plumbing every route handler shares: the shared state handle, the blocking pool, the
//! request id of a write (`Idempotency-Key`), the request journal that runs a write at most once
//! per request id, JSON bodies in and out, the constant-time token comparison, and the path
//! entry a read route resolves.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::body::{self, PumpEnd};
use super::error::ApiError;
use super::journal::{self, Begin};
use super::state::AppState;
use nokv_protocol::errors::ToolError;
use nokv_protocol::headers::{IDEMPOTENCY_KEY, REPLAYED};

/// The server state every handler shares (axum `State`).
pub(crate) type Shared = Arc<AppState>;

/// The PathCurrent entry of `path` in workbench `id` as `read` sees it (the live state, an
/// older read version or a snapshot's): one WorkspaceCurrent and one PathCurrent point read.
/// Errors: the facade's tool error (`NotFound` for an unknown workbench or path).
pub(crate) fn entry_at(
    client: &nokv::Client,
    read: &meta::Reader,
    id: &str,
    path: &meta::NormPath,
) -> Result<meta::PathEntry, ToolError> {
    let fail = |e: nokv::Error| nokv::workbench::tool_error(client, id, e);
    let ws = read
        .visible_workspace(id)
        .map_err(|e| fail(nokv::client::map_workspace_error(e, id)))?;
    read.path_entry(&ws.incarnation, path)
        .map_err(|e| fail(e.into()))?
        .ok_or_else(|| {
            fail(nokv::Error::NotFound {
                path: path.as_str().to_string(),
            })
        })
}

/// Runs `f` on the blocking pool. Errors: 500 when it panicked.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| ApiError::internal("the request handler failed; retry"))
}

/// The request id of a write, if the client sent one. Errors: 400 for a malformed key.
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    match headers.get(IDEMPOTENCY_KEY) {
        None => Ok(None),
        Some(v) => match v.to_str() {
            Ok(k) if journal::valid_key(k) => Ok(Some(k.to_string())),
            _ => Err(ApiError::bad_request(
                "Idempotency-Key must be 1..=128 characters of [A-Za-z0-9._:-]",
            )),
        },
    }
}

/// The caller's request id of a write (`request_id`, 32 hex characters; the store itself
/// dedupes a write under it, `nokv::publication::parse_operation_id`). Errors: the message
/// for a malformed id (each route answers it in its own way: 400 or an error envelope).
pub(crate) fn request_id(hex: Option<&str>) -> Result<Option<[u8; 16]>, &'static str> {
    match hex {
        None => Ok(None),
        Some(hex) => nokv::publication::parse_operation_id(hex)
            .map(Some)
            .ok_or("request_id must be exactly 32 hex characters"),
    }
}

/// A JSON response with `status`; `replayed` adds the replay header (a stored response of the
/// same request id).
pub(crate) fn json_response(status: StatusCode, body: Vec<u8>, replayed: bool) -> Response {
    let mut r = (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response();
    if replayed {
        r.headers_mut()
            .insert(REPLAYED, HeaderValue::from_static("true"));
    }
    r
}

/// Executes `run` at most once per request id (see [`super::journal`]); returns its envelope
/// (HTTP 200) or the stored response of the same request. Blocking: call on the blocking pool.
pub(crate) fn journaled(
    state: &AppState,
    key: Option<&str>,
    digest: [u8; 32],
    run: impl FnOnce() -> Value,
) -> Result<(StatusCode, Vec<u8>, bool), ApiError> {
    let Some(key) = key else {
        let body = serde_json::to_vec(&run()).unwrap_or_default();
        return Ok((StatusCode::OK, body, false));
    };
    match state
        .journal
        .begin(key, digest)
        .map_err(|e| ApiError::unavailable(format!("the request journal failed: {e}")))?
    {
        Begin::Fresh => {
            let body = serde_json::to_vec(&run()).unwrap_or_default();
            state.journal.finish(key, StatusCode::OK.as_u16(), &body);
            Ok((StatusCode::OK, body, false))
        }
        Begin::Replay(status, body) => Ok((
            StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            body,
            true,
        )),
        other => Err(journal_refusal(other)),
    }
}

/// The API error of a request id the journal will not run now (in flight elsewhere, reused for
/// another request, or whose earlier outcome is unknown).
pub(crate) fn journal_refusal(begin: Begin) -> ApiError {
    match begin {
        Begin::InFlight => ApiError::new(
            StatusCode::CONFLICT,
            "RequestInFlight",
            "a request with this Idempotency-Key is still running; retry shortly",
            true,
        ),
        Begin::Mismatch => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "RequestIdReused",
            "this Idempotency-Key was used for a different request; use a new key per request",
            false,
        ),
        _ => ApiError::new(
            StatusCode::CONFLICT,
            "OutcomeUnknown",
            "a request with this Idempotency-Key began before the server restarted and its \
             outcome is unknown; read the current state instead of repeating the write",
            false,
        ),
    }
}

/// Reads a JSON request body within the server's size and idle limits; an empty or blank body
/// is `{}`. Errors: 413 too large, 408 idle, 400 cut off or not JSON.
pub(crate) async fn read_json(state: &AppState, body: Body) -> Result<(Vec<u8>, Value), ApiError> {
    let bytes = body::read_all(
        body,
        state.opts.max_json_bytes,
        state.opts.body_idle_timeout,
    )
    .await
    .map_err(pump_error)?;
    let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        &bytes
    };
    let value: Value = serde_json::from_slice(text)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))?;
    Ok((bytes, value))
}

/// The API error of a request body that did not arrive whole.
pub(crate) fn pump_error(end: PumpEnd) -> ApiError {
    match end {
        PumpEnd::TooLarge(limit) => ApiError::too_large(limit),
        PumpEnd::Idle => ApiError::timeout("receiving the request body"),
        PumpEnd::Broken | PumpEnd::ReaderGone | PumpEnd::Complete => {
            ApiError::bad_request("the request body was cut off")
        }
    }
}
