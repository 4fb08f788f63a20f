//! The audit trail of `nokv serve` (docs/server.md, "Audit trail"): every mutating call — a
//! write, lifecycle or admin route, a tool that is not a reading tool, a command that changes
//! the store or its tokens — is recorded in the store's [`AuditLog`] with its caller, target,
//! generations, request id and outcome, durably, before its answer leaves the server. Refusals
//! of an authenticated caller (403 `Forbidden`) are recorded too.
//!
//! The guard opens a [`Pending`] record from what the route says (method, matched route, path
//! parameters, request id) before the handler runs; handlers whose target is in their body add
//! an [`AuditNote`] to the response; [`finish`] reads the answer (the envelope's outcome and
//! generations) and appends the record. If the record cannot be written the answer becomes 500
//! `Internal`: a change is never acknowledged without its record.

use axum::body::Body;
use axum::extract::{Extension, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use nokv::access::{tool_action, Action, AuditEntry, Caller};
use serde_json::Value;

use super::error::ApiError;
use super::handler::Shared;
use nokv_commands::audit_cmd::AuditArgs;
use nokv_protocol::headers::{IDEMPOTENCY_KEY, REPLAYED};

/// Largest answer body the trail reads for its outcome (larger answers record `success` or
/// the status only).
const MAX_READ: usize = 64 << 20;

/// What a handler knows about its call that the route does not say (tools and commands).
#[derive(Debug, Clone, Default)]
pub(crate) struct AuditNote {
    /// False: the call changed nothing (a reading command), so nothing is recorded.
    pub(crate) mutating: bool,
    /// The tool or command name.
    pub(crate) tool: Option<String>,
    /// The workbench it named.
    pub(crate) workbench: Option<String>,
    /// The workbench-relative path it named.
    pub(crate) path: Option<String>,
    /// The generation the caller expected (a replace), when given.
    pub(crate) expected_generation: Option<u64>,
}

/// A record opened by the guard, completed by [`finish`].
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    entry: AuditEntry,
}

/// The record a mutating request will get, or `None` for a request that changes nothing.
pub(crate) fn pending(
    method: &Method,
    route: &str,
    params: &[(String, String)],
    query: Option<&str>,
    headers: &HeaderMap,
    caller: &Caller,
) -> Option<Pending> {
    if *method == Method::GET || *method == Method::HEAD {
        return None;
    }
    let param = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let tool = match route {
        "/v1/tools/{tool}" => {
            let name = param("tool")?;
            if !matches!(tool_action(&name), Some(a) if a != Action::Read) {
                return None;
            }
            nokv::workbench::schema::canonical_tool_name(&name)?.to_string()
        }
        "/v1/commands/{command}" => param("command")?,
        "/v1/workbenches/{id}" => "create".into(),
        "/v1/workbenches/{id}/files/{*path}" => "upload".into(),
        "/v1/workbenches/{id}/append/{*path}" => "append".into(),
        "/v1/workbenches/{id}/remove" => "remove".into(),
        "/v1/workbenches/{id}/remove-prefix" => "remove-prefix".into(),
        "/v1/workbenches/{id}/move" => "move".into(),
        "/v1/gc" => "gc".into(),
        "/v1/fsck" => "fsck".into(),
        "/v1/index/repair" => "index repair".into(),
        "/v1/config/{name}" => format!("config set {}", param("name").unwrap_or_default()),
        _ => return None,
    };
    let request_id = headers
        .get(IDEMPOTENCY_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| {
            let pairs: Vec<(String, String)> =
                serde_urlencoded::from_str(query.unwrap_or_default()).unwrap_or_default();
            pairs
                .into_iter()
                .find(|(k, _)| k == "request_id")
                .map(|(_, v)| v)
        });
    Some(Pending {
        entry: AuditEntry {
            actor: caller.name.clone(),
            tool,
            workbench: param("id"),
            path: param("path"),
            request_id,
            ..AuditEntry::default()
        },
    })
}

/// Completes `pending` from the answer, appends it durably, and returns the answer (500
/// `Internal` instead when the record could not be written).
pub(crate) async fn finish(state: &Shared, pending: Pending, response: Response) -> Response {
    let mut entry = pending.entry;
    if let Some(note) = response.extensions().get::<AuditNote>().cloned() {
        if !note.mutating {
            return response;
        }
        if let Some(t) = note.tool {
            entry.tool = t;
        }
        entry.workbench = note.workbench.or(entry.workbench);
        entry.path = note.path.or(entry.path);
        entry.generation_before = note.expected_generation;
    }
    let status = response.status();
    entry.replayed = response.headers().contains_key(REPLAYED);
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_READ).await.ok();
    let answer: Value = bytes
        .as_deref()
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or(Value::Null);
    nokv::access::audit::describe_answer(&mut entry, Some(status.as_u16()), &answer);
    // A command that made several changes (the demo) lists them: one record each, first.
    let changes: Vec<AuditEntry> = nokv_commands::demo::DemoChange::from_answer(&answer)
        .iter()
        .map(|c| AuditEntry {
            status: entry.status,
            request_id: entry.request_id.clone(),
            ..c.audit_entry(&entry.actor)
        })
        .collect();
    let s = state.clone();
    let appended = tokio::task::spawn_blocking(move || {
        let now = s.client.now_unix_ms();
        for change in &changes {
            s.audit.append(change, now)?;
        }
        s.audit.append(&entry, now)
    })
    .await;
    match (appended, bytes) {
        (Ok(Ok(_)), Some(bytes)) => Response::from_parts(parts, Body::from(bytes)),
        (Ok(Ok(_)), None) => ApiError::internal(
            "the answer could not be read back for the audit trail; check the state before retrying",
        )
        .into_response(),
        (Ok(Err(e)), _) => ApiError::internal(format!(
            "the call ran but its audit record could not be written ({e}); check the state \
             before retrying"
        ))
        .into_response(),
        (Err(_), _) => ApiError::internal(
            "the audit record could not be written; check the state before retrying",
        )
        .into_response(),
    }
}

/// `GET /v1/audit?workbench=&token=&since=&after=&limit=`: the trail as NDJSON, exactly the lines of
/// `nokv audit` (an `admin` route).
pub(crate) async fn query(
    State(state): State<Shared>,
    Query(args): Query<AuditArgs>,
    Extension(_caller): Extension<Caller>,
) -> Response {
    let s = state.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let now = s.client.now_unix_ms();
        let code = nokv_commands::audit_cmd::run_audit_with(&s.audit, &args, now, &mut out);
        (code, out)
    })
    .await;
    match out {
        Ok((0, body)) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/x-ndjson"),
            )],
            body,
        )
            .into_response(),
        Ok((_, body)) => (
            StatusCode::BAD_REQUEST,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(_) => ApiError::internal("the audit query failed").into_response(),
    }
}

/// Drops the records older than the store's `audit_retention_days` (0: keep forever); run by
/// the maintenance pass.
pub(crate) fn prune(state: &Shared) {
    let days = state
        .client
        .config_get(meta::ops::settings::AUDIT_RETENTION_DAYS)
        .map(|s| s.effective)
        .unwrap_or(nokv::lifetime::DEFAULT_AUDIT_RETENTION_DAYS);
    if days == 0 {
        return;
    }
    let cutoff = state
        .client
        .now_unix_ms()
        .saturating_sub(days.saturating_mul(86_400_000));
    let _ = state.audit.prune(cutoff);
}
