//! The `/v1/` routes, the request guard (authentication, metrics) and the background passes.
//!
//! Every handler runs the store work on tokio's blocking pool (the SDK is synchronous and a
//! durable write waits for its group commit's `fdatasync`); the connection tasks only move bytes.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Extension, MatchedPath, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::auth::{self, Access, Decision};
use super::body::{self, ChannelReader, ChannelWriter, PumpEnd};
use super::error::ApiError;
use super::handler::{
    self, blocking, idempotency_key, journal_refusal, journaled, json_response, pump_error,
    read_json, Shared,
};
use super::journal::{self, Begin};
use super::policy;
use axum::extract::{FromRequestParts, RawPathParams};
use nokv::access::Caller;
use nokv::client::{Client, PutOptions, WriteCondition};
use nokv::workbench::errors::ToolError;
use nokv::workbench::schema;

use nokv_protocol::headers::CONTENT_SHA256;

/// The router of one server.
pub(crate) fn router(state: Shared) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/v1/schema", get(schema_doc))
        .route("/v1/tools/{tool}", post(tool))
        .route("/v1/workbenches/{id}", post(create_workbench))
        .route(
            "/v1/workbenches/{id}/files/{*path}",
            get(download).put(upload),
        )
        .route("/v1/workbenches/{id}/stat/{*path}", get(stat))
        .route("/v1/workbenches/{id}/entries", get(entries))
        .route("/v1/workbenches/{id}/append/{*path}", post(append))
        .route("/v1/commands/{command}", post(command))
        .route("/v1/changes", get(super::feed::changes))
        .route("/v1/audit", get(super::audit::query))
        .route("/v1/whoami", get(whoami))
        .merge(super::lifetime::routes())
        .merge(super::ui::routes())
        .merge(super::moves::routes())
        .merge(super::diff::routes())
        .fallback(no_route)
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

async fn no_route(req: Request) -> ApiError {
    ApiError::no_route(req.uri().path())
}

/// Authentication (bearer token, registry token or the web view's session: [`auth::access`],
/// [`auth::decide`]), the scope check of the route ([`policy::route_needs`]) and metrics around
/// every request. The caller rides along as a request extension for the handlers that check
/// their body ([`policy::check_tool`], [`policy::check_command`]) and record the audit trail.
async fn guard(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let _in_flight = state.metrics.enter();
    let (access, caller) = auth::access(&state.authority(), req.headers());
    let ui = auth::is_ui_path(req.uri().path());
    let response = match auth::decide(access, req.method(), req.uri().path()) {
        Decision::Allow | Decision::AllowInert => match caller {
            Some(caller) => {
                let inert =
                    auth::decide(access, req.method(), req.uri().path()) == Decision::AllowInert;
                let (admitted, pending) = admit(&state, &route, caller, req).await;
                let response = match admitted {
                    Ok(req) if inert => super::ui::inert(next.run(req).await),
                    Ok(req) => next.run(req).await,
                    Err(refusal) => refusal.into_response(),
                };
                match pending {
                    Some(p) => super::audit::finish(&state, p, response).await,
                    None => response,
                }
            }
            None => unauthorized(access),
        },
        Decision::Ui(access) => {
            // The web view shows the whole store: only a caller who may read all of it.
            let access = match &caller {
                Some(c) if !c.scopes.reads_everything(None) => Access::Denied("scope"),
                _ => access,
            };
            let mut req = req;
            if let Some(c) = caller {
                req.extensions_mut().insert(c);
            }
            super::ui::enter(access, req, next).await
        }
        Decision::Refuse => unauthorized(access),
    };
    // The web view answers HTML pages, never API envelopes.
    let response = if ui {
        response
    } else {
        envelope_rejection(response).await
    };
    state
        .metrics
        .observe(&route, response.status().as_u16(), started.elapsed());
    response
}

/// Checks the request's token again once its body has been read, before anything runs: a
/// token revoked or expired while a slow body arrived writes nothing. Errors: 401.
fn still_authorized(state: &Shared, headers: &HeaderMap) -> Result<(), ApiError> {
    match auth::access(&state.authority(), headers).0 {
        Access::Denied(reason) => Err(refusal(reason)),
        _ => Ok(()),
    }
}

/// 401 with `details.reason` (`missing`, `unknown`, `expired`, `revoked`, …).
fn unauthorized(access: Access) -> Response {
    let reason = match access {
        Access::Denied(r) => r,
        _ => "missing",
    };
    refusal(reason).into_response()
}

/// The 401 `Unauthorized` error for `reason`.
fn refusal(reason: &'static str) -> ApiError {
    let mut e = ApiError::unauthorized();
    e.details.insert("reason".into(), Value::from(reason));
    if reason == "expired" || reason == "revoked" {
        e.message = format!("the bearer token was {reason}; ask for a new one");
    }
    e
}

/// The route's scope check ([`policy::route_needs`]); on success the request carries its
/// caller. Also opens the audit record of a mutating request ([`super::audit::pending`]), which
/// a refusal completes too. Errors: 403 `Forbidden`.
async fn admit(
    state: &Shared,
    route: &str,
    caller: Caller,
    req: Request,
) -> (Result<Request, ApiError>, Option<super::audit::Pending>) {
    let (mut parts, body) = req.into_parts();
    let params: Vec<(String, String)> =
        match RawPathParams::from_request_parts(&mut parts, state).await {
            Ok(params) => params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            Err(_) => Vec::new(),
        };
    let id = params
        .iter()
        .find(|(k, _)| k == "id")
        .map(|(_, v)| v.as_str());
    let root = super::state::root_of(&parts);
    let pending = super::audit::pending(
        &parts.method,
        route,
        &params,
        parts.uri.query(),
        &parts.headers,
        &caller,
    );
    let needs = policy::route_needs(&parts.method, route, id, parts.uri.query());
    if let policy::RouteNeeds::Scopes(needs) = &needs {
        if let Err(refusal) = policy::check(&caller, root.as_deref(), needs) {
            return (Err(refusal), pending);
        }
    }
    parts.extensions.insert(caller);
    (Ok(Request::from_parts(parts, body)), pending)
}

/// The request refusals the HTTP stack answers itself — a query string or path that does not
/// deserialize (400), a method the route does not have (405, with an empty body), a wrong
/// content type (415), a JSON body that does not match its DTO (422) — come as plain text.
/// Every answer of this API is a JSON envelope, so they become `InvalidArguments` envelopes
/// with the stack's message (status and an `Allow` header kept).
async fn envelope_rejection(response: Response) -> Response {
    let status = response.status();
    let plain = !response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let refusal = matches!(
        status,
        StatusCode::BAD_REQUEST
            | StatusCode::METHOD_NOT_ALLOWED
            | StatusCode::UNSUPPORTED_MEDIA_TYPE
            | StatusCode::UNPROCESSABLE_ENTITY
            | StatusCode::LENGTH_REQUIRED
    );
    if !(plain && refusal) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 16 * 1024)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_string();
    let message = if !text.is_empty() {
        text
    } else if status == StatusCode::METHOD_NOT_ALLOWED {
        "this endpoint does not accept that HTTP method (see the Allow header)".to_string()
    } else {
        format!("the request was refused ({status})")
    };
    let mut out = ApiError::new(status, "InvalidArguments", message, false).into_response();
    if let Some(allow) = parts.headers.get(header::ALLOW) {
        out.headers_mut().insert(header::ALLOW, allow.clone());
    }
    out
}

async fn healthz(State(state): State<Shared>) -> Response {
    // Null when an etcd-backed shard cannot be read right now (the process is still up); the
    // read may be a network round trip, so it runs off the async workers.
    let client = state.client.clone();
    let version = tokio::task::spawn_blocking(move || client.meta().version().ok())
        .await
        .ok()
        .flatten();
    axum::Json(json!({
        "status": "ok",
        "commit_version": version,
        // Other requests being handled now: the guard counted this health check too.
        "in_flight": state.metrics.in_flight().saturating_sub(1),
    }))
    .into_response()
}

async fn metrics(State(state): State<Shared>) -> Response {
    let s = state.clone();
    let text = tokio::task::spawn_blocking(move || {
        let open = meta::ops::publish::operation::list_pending(s.client.meta())
            .ok()
            .map(|v| v.len());
        let stats = s.client.meta().holt_db().map(|db| db.stats());
        s.metrics.render(stats.as_ref(), open, s.audit.counters())
    })
    .await
    .unwrap_or_default();
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        text,
    )
        .into_response()
}

/// `GET /v1/whoami`: the caller's name, its scopes as written, and `read_only` (no scope grants
/// more than `read`); `nokv mcp --server` serves the read-only profile to a read-only token.
async fn whoami(Extension(caller): Extension<Caller>) -> Response {
    let scopes: Vec<String> = caller
        .scopes
        .scopes()
        .iter()
        .map(ToString::to_string)
        .collect();
    axum::Json(json!({
        "status": "success",
        "name": caller.name,
        "scopes": scopes,
        "read_only": !caller.scopes.writes_anything(),
    }))
    .into_response()
}

async fn schema_doc() -> Response {
    axum::Json(schema::describe_all()).into_response()
}

/// `POST /v1/tools/{tool}`: the tool's JSON input → the envelope `nokv workbench` prints.
async fn tool(
    State(state): State<Shared>,
    Path(name): Path<String>,
    Query(q): Query<ToolQuery>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    let (request_id, key) = request_identity(q.request_id.as_deref(), &headers)?;
    let uri = req.uri().to_string();
    let root = req
        .extensions()
        .get::<super::state::PathPrefix>()
        .and_then(|p| p.0.strip_prefix("/roots/").map(str::to_string));
    let (raw, input) = read_json(&state, req.into_body()).await?;
    still_authorized(&state, &headers)?;
    // The tool's scopes, before anything runs (docs/server.md, "Scopes").
    let whole = policy::check_tool(&caller, root.as_deref(), &name, &input)?;
    let (workbench, input) = if whole {
        (state.workbench.clone(), input)
    } else {
        let s = state.clone();
        let (c, r, n) = (caller.clone(), root.clone(), name.clone());
        let narrowed =
            blocking(move || policy::narrow_tool(&c, r.as_deref(), &s.workbench, &n, &input))
                .await?;
        match narrowed {
            policy::Narrowed::Run(w, i) => (w, i),
            policy::Narrowed::Refused(e) => return Err(e),
            policy::Narrowed::Answer(envelope) => {
                let body = serde_json::to_vec(&envelope).unwrap_or_default();
                return Ok(json_response(StatusCode::OK, body, false));
            }
        }
    };
    let note = tool_note(&name, &input);
    let digest = journal::request_digest("POST", &uri, &raw);
    let s = state.clone();
    let (status, body, replayed) = blocking(move || {
        journaled(&s, key.as_deref(), digest, || match request_id {
            Some(rid) => workbench.call_with_request_id(&name, &input, rid),
            None => workbench.call(&name, &input),
        })
    })
    .await??;
    let mut response = json_response(status, body, replayed);
    response.extensions_mut().insert(note);
    Ok(response)
}

/// What the audit trail records of a tool call beyond its route: the workbench, the path
/// (`section/path`) and a replace's expected generation.
fn tool_note(name: &str, input: &Value) -> super::audit::AuditNote {
    let s = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
    let path = match (s("section"), s("path")) {
        (Some(section), Some(path)) => Some(format!("{section}/{path}")),
        (None, path) => path,
        (Some(section), None) => Some(section),
    };
    super::audit::AuditNote {
        mutating: true,
        tool: nokv::workbench::schema::canonical_tool_name(name).map(str::to_string),
        workbench: s("id"),
        path,
        expected_generation: input.get("expected_generation").and_then(Value::as_u64),
    }
}

/// `POST /v1/workbenches/{id}`: creates the workbench (or finds the visible one).
async fn create_workbench(
    State(state): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let key = idempotency_key(&headers)?;
    let digest = journal::request_digest("POST", &format!("/v1/workbenches/{id}"), b"");
    let s = state.clone();
    let (status, body, replayed) = blocking(move || {
        journaled(&s, key.as_deref(), digest, || {
            match s.client.create_workbench(&id) {
                Ok(info) => json!({
                    "status": "success",
                    "workbench_id": info.workbench_id,
                    "path": info.path,
                    "created": info.created,
                }),
                Err(e) => nokv::workbench::tool_error(&s.client, &id, e).envelope(),
            }
        })
    })
    .await??;
    Ok(json_response(status, body, replayed))
}

/// How a write is made at most once: the caller's `request_id` query parameter (32 hex
/// characters, the store itself dedupes the write durably, without the journal's retention
/// bound or its OutcomeUnknown after a crash, so the journal stays out), else the
/// `Idempotency-Key` header of the request journal. Errors: 400 for a malformed id or key.
fn request_identity(
    request_id: Option<&str>,
    headers: &HeaderMap,
) -> Result<(Option<[u8; 16]>, Option<String>), ApiError> {
    match handler::request_id(request_id).map_err(ApiError::bad_request)? {
        None => Ok((None, idempotency_key(headers)?)),
        rid => Ok((rid, None)),
    }
}

/// Query of `POST /v1/tools/{tool}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolQuery {
    /// The caller's request id of a `workbench_put_file` call, 32 hex characters
    /// (`Workbench::call_with_request_id`).
    request_id: Option<String>,
}

/// Query of `PUT /v1/workbenches/{id}/files/{path}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UploadQuery {
    /// Replace an existing artifact (generation CAS) instead of create-only.
    #[serde(default)]
    replace: bool,
    /// Generation the caller last saw (only with `replace`).
    expected_generation: Option<u64>,
    /// Content type (default `application/octet-stream`).
    content_type: Option<String>,
    /// Producer (default `nokv serve`).
    producer: Option<String>,
    /// Caller manifest id.
    manifest_id: Option<String>,
    /// Also index the body's top-level JSON scalar members.
    #[serde(default)]
    index_json: bool,
    /// Custom index fields, a JSON array of `name[:TYPE]=value` strings (the CLI's `--field`).
    fields: Option<String>,
    /// The caller's request id, 32 hex characters ([`PutOptions::request_id`]): the store
    /// itself dedupes the put, so the request journal is not consulted.
    request_id: Option<String>,
}

/// `PUT /v1/workbenches/{id}/files/{path}`: streams the body into one publication (memory
/// bounded by one block plus the channel). Answers the receipt envelope.
async fn upload(
    State(state): State<Shared>,
    Path((id, path)): Path<(String, String)>,
    Query(q): Query<UploadQuery>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    let (request_id, key) = request_identity(q.request_id.as_deref(), &headers)?;
    // Checked before a byte of the body is read: a malformed digest refuses the upload.
    let declared = match headers.get(CONTENT_SHA256) {
        None => None,
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(body::parse_declared_digest)
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "{CONTENT_SHA256} must be the body's SHA-256 as sha256:<64 lowercase hex \
                         digits> (or the 64 hex digits alone)"
                    ))
                })?,
        ),
    };
    let uri = req.uri().to_string();
    let digest = journal::request_digest(
        "PUT",
        &uri,
        declared.as_deref().unwrap_or_default().as_bytes(),
    );
    let mut options = PutOptions::create(
        q.content_type
            .as_deref()
            .unwrap_or(nokv::client::OCTET_STREAM),
        q.producer.as_deref().unwrap_or("nokv serve"),
    );
    options.manifest_id = q.manifest_id.clone();
    options.index_json = q.index_json;
    options.expected_digest_uri = declared.clone();
    options.request_id = request_id;
    if q.replace {
        options.condition = WriteCondition::Replace {
            expected_generation: q.expected_generation,
        };
    } else if q.expected_generation.is_some() {
        return Err(ApiError::bad_request(
            "expected_generation is only allowed with replace=true",
        ));
    }
    if let Some(fields) = &q.fields {
        let specs: Vec<String> = serde_json::from_str(fields).map_err(|_| {
            ApiError::bad_request("fields must be a JSON array of \"name[:TYPE]=value\" strings")
        })?;
        for spec in &specs {
            match nokv::index_fields::parse_field_arg(spec) {
                Ok((name, value)) => {
                    options.index_fields.insert(name, value);
                }
                Err(e) => return Err(ApiError::bad_request(e.to_string())),
            }
        }
    }
    let (tx, rx) = mpsc::channel(8);
    let limit = state.opts.max_upload_bytes;
    let idle = state.opts.body_idle_timeout;
    let pump = body::pump(req.into_body(), tx, limit, idle);
    let s = state.clone();
    let work_key = key.clone();
    // The caller's token is checked again once the whole body has arrived, before anything is
    // published: a token revoked (or expired) during a long upload publishes nothing.
    let refused_at_end = std::sync::Arc::new(std::sync::Mutex::new(None::<Access>));
    let end_state = state.clone();
    let end_headers = headers.clone();
    let end_refusal = refused_at_end.clone();
    let work = blocking(move || {
        let run = || {
            let end_check = Box::new(move || {
                let (access, _) = auth::access(&end_state.authority(), &end_headers);
                if matches!(access, Access::Denied(_)) {
                    if let Ok(mut slot) = end_refusal.lock() {
                        *slot = Some(access);
                    }
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::PermissionDenied,
                        "the bearer token was refused before publication; nothing was published",
                    ));
                }
                Ok(())
            });
            let mut reader = ChannelReader::new(rx).with_end_check(end_check);
            let result = s.client.put_reader(&id, &path, &mut reader, &options);
            // Drain what the client still sends so the pump never blocks on a full channel.
            let mut sink = [0u8; 8192];
            while matches!(std::io::Read::read(&mut reader, &mut sink), Ok(n) if n > 0) {}
            match result {
                // The publication refused a body that differs from its declared digest.
                Err(nokv::Error::DigestMismatch { actual, .. }) if declared.is_some() => json!({
                    "status": "error",
                    "code": "InvalidArguments",
                    "message": "the body's SHA-256 differs from the declared x-nokv-content-sha256; nothing was published",
                    "retryable": false,
                    "details": {"field": CONTENT_SHA256, "declared": declared, "actual": actual},
                }),
                Ok(r) => {
                    json!({
                        "status": "success",
                        "workbench_id": id,
                        "relative_path": r.path.as_str(),
                        "path": format!("{}/{}", s.client.workbench_path(&id), r.path.as_str()),
                        "size_bytes": r.size_bytes,
                        "generation": r.generation,
                        "digest_uri": r.digest_uri,
                        "content_type": r.content_type,
                        "created": r.created,
                        "replace": q.replace,
                        "idempotent_replay": r.idempotent_replay,
                    })
                }
                Err(e) => nokv::workbench::tool_error(&s.client, &id, e).envelope(),
            }
        };
        match &work_key {
            None => Upload::Ran {
                body: serde_json::to_vec(&run()).unwrap_or_default(),
                journaled: false,
            },
            Some(k) => match s.journal.begin(k, digest) {
                Ok(Begin::Fresh) => Upload::Ran {
                    body: serde_json::to_vec(&run()).unwrap_or_default(),
                    journaled: true,
                },
                Ok(Begin::Replay(_, body)) => Upload::Replay(body),
                Ok(other) => Upload::Refused(other),
                Err(e) => Upload::JournalFailed(e.to_string()),
            },
        }
    });
    let (pumped, outcome) = tokio::join!(pump, work);
    let outcome = outcome?;
    let refused = refused_at_end.lock().ok().and_then(|slot| *slot);
    // Nothing was published: a retry with the same key must execute again.
    let abandon = || {
        if let (
            Some(k),
            Upload::Ran {
                journaled: true, ..
            },
        ) = (&key, &outcome)
        {
            state.journal.abandon(k);
        }
    };
    if let Some(access) = refused {
        abandon();
        return Ok(unauthorized(access));
    }
    if matches!(
        pumped,
        PumpEnd::TooLarge(_) | PumpEnd::Idle | PumpEnd::Broken
    ) {
        // The transport failed, so the publication aborted and cleaned up.
        abandon();
        return Err(pump_error(pumped));
    }
    match outcome {
        Upload::Ran { body, journaled } => {
            if let (true, Some(k)) = (journaled, &key) {
                state.journal.finish(k, 200, &body);
            }
            Ok(json_response(StatusCode::OK, body, false))
        }
        Upload::Replay(body) => Ok(json_response(StatusCode::OK, body, true)),
        Upload::Refused(begin) => Err(journal_refusal(begin)),
        Upload::JournalFailed(e) => Err(ApiError::unavailable(format!(
            "the request journal failed: {e}"
        ))),
    }
}

/// What the blocking half of an upload did.
enum Upload {
    /// The publication ran (`journaled`: under a fresh request id) and answered `body`.
    Ran { body: Vec<u8>, journaled: bool },
    /// The stored response of the same request.
    Replay(Vec<u8>),
    /// The journal refused the request id.
    Refused(Begin),
    /// The journal could not record the request.
    JournalFailed(String),
}

/// HTTP status of a tool error on the byte endpoints (which cannot carry an envelope on
/// success, so their errors use the status line too; the body is the error envelope).
fn error_status(err: &ToolError) -> StatusCode {
    use nokv::workbench::errors::ErrorCode as C;
    match err.code {
        C::NotFound | C::SnapshotNotFound => StatusCode::NOT_FOUND,
        C::InvalidArguments => StatusCode::BAD_REQUEST,
        C::NotArtifact | C::NotDirectory => StatusCode::CONFLICT,
        C::ObjectUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        C::SnapshotExpired => StatusCode::GONE,
        _ => StatusCode::CONFLICT,
    }
}

fn tool_failure(err: ToolError) -> Response {
    (error_status(&err), axum::Json(err.envelope())).into_response()
}

/// Query of the byte and stat endpoints.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadQuery {
    /// Read at this commit version (a listing's `read_version`), else the live state.
    version: Option<u64>,
}

/// Resolves `(reader, entry)` of `id`/`path` at `version` (live when `None`).
fn lookup(
    client: &Client,
    id: &str,
    path: &str,
    version: Option<u64>,
) -> Result<(meta::Reader, meta::PathEntry), ToolError> {
    let fail = |e: nokv::Error| nokv::workbench::tool_error(client, id, e);
    let norm = Client::normalize(path).map_err(fail)?;
    let read = match version {
        Some(v) => client.meta().read_at(v).map_err(|e| match e {
            // A version the caller chose that the store cannot serve: a bad argument, not a
            // failure of the store.
            meta::Error::Storage(holt::Error::HistoryPruned { floor, .. }) => {
                ToolError::invalid_arguments(format!(
                    "version {v} is older than the oldest version this store still keeps ({floor})"
                ))
                .with_detail("field", "version")
                .with_detail("reason", "history_pruned")
                .with_detail("floor", floor)
            }
            meta::Error::Storage(holt::Error::InvalidArgument(_)) => {
                let current = client.meta().version().unwrap_or_default();
                ToolError::invalid_arguments(format!(
                    "version {v} is newer than the store's current version {current}"
                ))
                .with_detail("field", "version")
                .with_detail("reason", "version_in_future")
                .with_detail("current", current)
            }
            other => fail(other.into()),
        })?,
        None => client.meta().read(),
    };
    let entry = handler::entry_at(client, &read, id, &norm)?;
    Ok((read, entry))
}

/// A parsed `Range: bytes=…` header: `(offset, len)` within `size`, or `Err(())` when
/// unsatisfiable.
fn parse_range(value: &str, size: u64) -> Option<Result<(u64, u64), ()>> {
    let spec = value.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return Some(Err(()));
    }
    let (a, b) = spec.split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    let range = if a.is_empty() {
        let n: u64 = b.parse().ok()?;
        if n == 0 || size == 0 {
            return Some(Err(()));
        }
        let n = n.min(size);
        (size - n, n)
    } else {
        let start: u64 = a.parse().ok()?;
        if start >= size {
            return Some(Err(()));
        }
        let end = if b.is_empty() {
            size - 1
        } else {
            let e: u64 = b.parse().ok()?;
            if e < start {
                return Some(Err(()));
            }
            e.min(size - 1)
        };
        (start, end - start + 1)
    };
    Some(Ok(range))
}

fn entry_headers(entry: &meta::PathEntry) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&entry.content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if let Ok(v) = HeaderValue::from_str(&format!("\"g{}\"", entry.generation)) {
        h.insert(header::ETAG, v);
    }
    if let Ok(v) = HeaderValue::from_str(&entry.generation.to_string()) {
        h.insert("x-nokv-generation", v);
    }
    if let Ok(v) = HeaderValue::from_str(&entry.body_digest_uri) {
        h.insert("x-nokv-digest-uri", v);
    }
    h
}

/// `GET /v1/workbenches/{id}/files/{path}`: the verified body, streamed; `Range: bytes=a-b`
/// answers 206 with that range (416 when unsatisfiable).
async fn download(
    State(state): State<Shared>,
    Path((id, path)): Path<(String, String)>,
    Query(q): Query<ReadQuery>,
    headers: HeaderMap,
    method: Method,
) -> Result<Response, ApiError> {
    let s = state.clone();
    let wb = id.clone();
    let found = blocking(move || lookup(&s.client, &id, &path, q.version)).await?;
    let (read, entry) = match found {
        Ok(x) => x,
        Err(e) => return Ok(tool_failure(e)),
    };
    let size = entry.logical_size;
    let mut h = entry_headers(&entry);
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_range(v, size));
    if let Some(range) = range {
        let Ok((offset, len)) = range else {
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                h.insert(header::CONTENT_RANGE, v);
            }
            return Ok((StatusCode::RANGE_NOT_SATISFIABLE, h).into_response());
        };
        if let Ok(v) = HeaderValue::from_str(&format!("bytes {offset}-{}/{size}", offset + len - 1))
        {
            h.insert(header::CONTENT_RANGE, v);
        }
        if method == Method::HEAD {
            return Ok((StatusCode::PARTIAL_CONTENT, h).into_response());
        }
        let s = state.clone();
        let answer =
            blocking(
                move || match s.client.read_entry_range(&read, &entry, offset, len) {
                    Ok(b) => Ok(b),
                    // The same mapping as the read tool: a missing block is 503 ObjectUnavailable.
                    Err(e) => Err(nokv::workbench::tool_error(&s.client, &wb, e)),
                },
            )
            .await?;
        return Ok(match answer {
            Ok(b) => (StatusCode::PARTIAL_CONTENT, h, b).into_response(),
            Err(e) => tool_failure(e),
        });
    }
    if let Ok(v) = HeaderValue::from_str(&size.to_string()) {
        h.insert(header::CONTENT_LENGTH, v);
    }
    if method == Method::HEAD {
        return Ok((StatusCode::OK, h).into_response());
    }
    let (mut writer, body) = ChannelWriter::pair(4);
    let s = state.clone();
    tokio::task::spawn_blocking(move || {
        match s
            .client
            .read_to_writer(&read, &entry, &mut writer, &mut |_| {})
        {
            Ok(_) => {}
            Err(e) => {
                // The status line (200) is gone: the client sees the connection cut, so say
                // why here.
                tracing::warn!(
                    workbench = %wb,
                    size,
                    "a download was cut off: the body could not be read: {e}"
                );
                writer.fail(format!("the body could not be read: {e}"))
            }
        }
    });
    Ok((StatusCode::OK, h, Body::new(body)).into_response())
}

/// The JSON card of one path entry (the SDK's `PathEntry`; `index_projection` values base64).
pub(crate) fn entry_json(entry: &meta::PathEntry) -> Value {
    use base64::Engine as _;
    json!({
        "generation": entry.generation,
        "artifact_revision_id": entry.artifact_revision_id.to_hex(),
        "logical_size": entry.logical_size,
        "body_digest_uri": entry.body_digest_uri,
        "manifest_digest_uri": entry.manifest_digest_uri,
        "dependency_count": entry.dependency_count,
        "dependency_depth": entry.dependency_depth,
        "content_type": entry.content_type,
        "producer": entry.producer,
        "manifest_id": entry.manifest_id,
        "created_version": entry.created_version,
        "modified_version": entry.modified_version,
        "index_projection": entry.index_projection.iter().map(|(k, v)| {
            json!([k, base64::engine::general_purpose::STANDARD.encode(v)])
        }).collect::<Vec<_>>(),
    })
}

/// `GET /v1/workbenches/{id}/stat/{path}`: `{"status":"success","entry":{…}}`.
async fn stat(
    State(state): State<Shared>,
    Path((id, path)): Path<(String, String)>,
    Query(q): Query<ReadQuery>,
) -> Result<Response, ApiError> {
    let s = state.clone();
    let found = blocking(move || lookup(&s.client, &id, &path, q.version)).await?;
    Ok(match found {
        Ok((_, entry)) => {
            axum::Json(json!({"status": "success", "entry": entry_json(&entry)})).into_response()
        }
        Err(e) => tool_failure(e),
    })
}

/// Query of `GET /v1/workbenches/{id}/entries`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EntriesQuery {
    /// Only this workbench-relative prefix (or file).
    prefix: Option<String>,
}

/// `GET /v1/workbenches/{id}/entries?prefix=P`: every artifact under `P` at one read version —
/// `{"status":"success","read_version":V,"files":[{"path","entry"}…]}` — which `materialize`
/// then downloads at `?version=V`.
async fn entries(
    State(state): State<Shared>,
    Path(id): Path<String>,
    Query(q): Query<EntriesQuery>,
) -> Result<Response, ApiError> {
    let s = state.clone();
    let listed = blocking(move || {
        nokv::materialize::list_files(&s.client, &id, q.prefix.as_deref())
            .map_err(|e| nokv::workbench::tool_error(&s.client, &id, e))
    })
    .await?;
    Ok(match listed {
        Ok((version, files)) => axum::Json(json!({
            "status": "success",
            "read_version": version,
            "files": files.iter().map(|(p, e)| json!({"path": p.as_str(), "entry": entry_json(e)})).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(e) => tool_failure(e),
    })
}

/// Query of `POST /v1/workbenches/{id}/append/{path}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AppendQuery {
    /// 32 hex characters: the durable idempotency key of this append (`nokv append`).
    operation_id: String,
    /// Content type (default: keep the existing type).
    content_type: Option<String>,
    /// Content type of a file the append creates when `content_type` is absent (default
    /// `text/plain; charset=utf-8`, as `nokv append`).
    create_content_type: Option<String>,
}

/// `POST /v1/workbenches/{id}/append/{path}?operation_id=HEX32`: the bytes of the body appended
/// as a durable idempotent operation → the envelope `nokv append` prints.
async fn append(
    State(state): State<Shared>,
    Path((id, path)): Path<(String, String)>,
    Query(q): Query<AppendQuery>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    let key = idempotency_key(&headers)?;
    let uri = req.uri().to_string();
    let bytes = body::read_all(
        req.into_body(),
        state.opts.max_append_bytes,
        state.opts.body_idle_timeout,
    )
    .await
    .map_err(pump_error)?;
    still_authorized(&state, &headers)?;
    let digest = journal::request_digest("POST", &uri, &bytes);
    let s = state.clone();
    let (status, body, replayed) = blocking(move || {
        journaled(&s, key.as_deref(), digest, || {
            nokv_commands::append_envelope(
                &s.client,
                &id,
                &path,
                &bytes,
                &q.operation_id,
                q.content_type.as_deref(),
                q.create_content_type.as_deref(),
            )
            .0
        })
    })
    .await??;
    Ok(json_response(status, body, replayed))
}

/// `POST /v1/commands/{command}`: one of the CLI's envelope commands (commit, tag, snapshot,
/// restore, find, operation) with its arguments as a JSON DTO → the envelope the CLI prints.
async fn command(
    State(state): State<Shared>,
    Path(name): Path<String>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    let key = idempotency_key(&headers)?;
    let uri = req.uri().to_string();
    let root = req
        .extensions()
        .get::<super::state::PathPrefix>()
        .and_then(|p| p.0.strip_prefix("/roots/").map(str::to_string));
    let (raw, args) = read_json(&state, req.into_body()).await?;
    let request = nokv_commands::request::CommandRequest::parse(&name, args)
        .map_err(ApiError::bad_request)?;
    still_authorized(&state, &headers)?;
    let note = super::audit::AuditNote {
        mutating: request.mutates(),
        tool: Some(request.audit_name()),
        workbench: request.workbench(),
        path: request.path(),
        expected_generation: None,
    };
    if let Err(refused) = policy::check_command(&caller, root.as_deref(), &request) {
        // The trail records the refusal only of a command that would have changed something.
        let mut response = refused.into_response();
        response.extensions_mut().insert(note);
        return Ok(response);
    }
    // A created token's secret is in the answer: it is never kept in the request journal.
    let key = match request {
        nokv_commands::request::CommandRequest::Token(_) => None,
        _ => key,
    };
    let digest = journal::request_digest("POST", &uri, &raw);
    let s = state.clone();
    let (status, body, replayed) =
        blocking(move || journaled(&s, key.as_deref(), digest, || request.run(&s.client)))
            .await??;
    let mut response = json_response(status, body, replayed);
    response.extensions_mut().insert(note);
    Ok(response)
}

/// The background passes: maintenance (snapshot reaper + GC, on its own thread, see
/// [`Client::start_background_maintenance`]) with the request-journal compaction on its
/// interval, and publish-operation recovery on its interval. Each pass of this loop runs on the
/// blocking pool; outcomes are counted in the metrics and the next pass retries.
pub(crate) fn spawn_background(
    state: Shared,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let maintenance = state.opts.maintenance_interval;
        let recovery = state.opts.recovery_interval;
        let tick = [maintenance, recovery]
            .into_iter()
            .filter(|d| !d.is_zero())
            .min()
            .unwrap_or(Duration::from_secs(3600))
            .min(Duration::from_secs(1));
        let handle = (!maintenance.is_zero())
            .then(|| state.client.start_background_maintenance(maintenance));
        let mut seen_passes = 0u64;
        let mut last_compaction = Instant::now();
        let mut last_recovery = Instant::now();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(tick) => {}
                _ = stop.changed() => break,
            }
            if *stop.borrow() {
                break;
            }
            if let Some(h) = &handle {
                let passes = h.passes();
                if passes > seen_passes {
                    seen_passes = passes;
                    if let Some(r) = h.last() {
                        let label = |ok: bool| if ok { "ok" } else { "error" };
                        state.metrics.background("reaper", label(r.reap.is_ok()));
                        state.metrics.background("gc", label(r.gc.is_ok()));
                    }
                }
            }
            if !maintenance.is_zero() && last_compaction.elapsed() >= maintenance {
                last_compaction = Instant::now();
                let s = state.clone();
                let _ = blocking(move || {
                    let compacted = s.journal.compact_if_needed();
                    super::audit::prune(&s);
                    compacted
                })
                .await;
            }
            if !recovery.is_zero() && last_recovery.elapsed() >= recovery {
                last_recovery = Instant::now();
                let s = state.clone();
                let ok = blocking(move || {
                    s.client
                        .recover_operations()
                        .is_ok_and(|r| r.errors.is_empty())
                })
                .await
                .unwrap_or(false);
                state
                    .metrics
                    .background("recovery", if ok { "ok" } else { "error" });
            }
        }
        // A maintenance pass in progress completes (it holds the store), then the thread stops.
        if let Some(h) = handle {
            let _ = blocking(move || h.stop()).await;
        }
    })
}
