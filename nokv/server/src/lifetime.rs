//! The object-lifetime routes: remove, prefix removal, GC (and its explanation), fsck, index
//! repair and the durable store settings. Each handler calls the same [`nokv::Client`] method
//! the CLI and the embedded SDK call and answers one JSON envelope, HTTP 200 for success and for
//! operation errors alike (`{"status":"error","code",…}`, as the tool route), 4xx/5xx only for
//! transport, authentication and DTO failures. Writes honour `Idempotency-Key` (exact replay of
//! the stored response).
//!
//! | Route | Body / query | Success envelope |
//! |---|---|---|
//! | `POST /v1/workbenches/{id}/remove` | `{path, expected_generation?, request_id?}` | `removed` card |
//! | `POST /v1/workbenches/{id}/remove-prefix` | `{prefix}` | `removed`, `kept_reserved`, `batches` |
//! | `POST /v1/gc` | `{dry_run?, max_revisions?}` | `report` (the `nokv gc --json` object) |
//! | `GET /v1/gc/explain` | `?workbench=W&path=P` or `?revision=HEX` | `explanation` |
//! | `POST /v1/fsck` | `{repair_index?}` | `fsck` (the `nokv fsck --json` object) |
//! | `POST /v1/index/repair` | `{}` | `repair {rows_put, rows_deleted, commands}` |
//! | `GET /v1/config` | | `settings [{name, stored, effective}]` |
//! | `GET /v1/config/{name}` | | `setting {name, stored, effective}` |
//! | `PUT /v1/config/{name}` | `{value}` (decimal text or integer) | `receipt {previous, value, commit_version, unchanged}` |

use axum::extract::{Path, Query, Request, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::handler::{
    blocking, idempotency_key, journaled, json_response, read_json, request_id, Shared,
};
use super::journal;
use nokv::client::Client;
use nokv::lifetime::{FsckOutcome, RemoveOptions};
use nokv::workbench::errors::ToolError;
use nokv::workbench::removal_error;
use nokv::workbench::{store_error, tool_error};

/// The lifetime routes, merged into the server's router.
pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/v1/workbenches/{id}/remove", post(remove))
        .route("/v1/workbenches/{id}/remove-prefix", post(remove_prefix))
        .route("/v1/gc", post(gc))
        .route("/v1/gc/explain", get(gc_explain))
        .route("/v1/fsck", post(fsck))
        .route("/v1/index/repair", post(repair_index))
        .route("/v1/config", get(config_list))
        .route("/v1/config/{name}", get(config_get).put(config_set))
}

/// Parses a JSON body into the DTO `T`. Errors: 400 with serde's message.
fn dto<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request(format!("the request body does not fit: {e}")))
}

/// Runs a write: reads the JSON body, parses the DTO, then runs `run` at most once per request
/// id on the blocking pool.
pub(crate) async fn write_route<T, F>(
    state: Shared,
    headers: HeaderMap,
    req: Request,
    run: F,
) -> Result<Response, ApiError>
where
    T: serde::de::DeserializeOwned + Send + 'static,
    F: FnOnce(&Client, T) -> Value + Send + 'static,
{
    let key = idempotency_key(&headers)?;
    let uri = req.uri().to_string();
    let method = req.method().as_str().to_string();
    let (raw, body) = read_json(&state, req.into_body()).await?;
    let parsed: T = dto(body)?;
    let digest = journal::request_digest(&method, &uri, &raw);
    let s = state.clone();
    let (status, body, replayed) =
        blocking(move || journaled(&s, key.as_deref(), digest, || run(&s.client, parsed)))
            .await??;
    Ok(json_response(status, body, replayed))
}

/// Runs a read on the blocking pool and answers its envelope.
pub(crate) async fn read_route(
    state: Shared,
    run: impl FnOnce(&Client) -> Value + Send + 'static,
) -> Result<Response, ApiError> {
    let s = state.clone();
    let value = blocking(move || run(&s.client)).await?;
    Ok(json_response(
        axum::http::StatusCode::OK,
        serde_json::to_vec(&value).unwrap_or_default(),
        false,
    ))
}

/// Body of `POST /v1/workbenches/{id}/remove`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveBody {
    /// Workbench-relative path.
    path: String,
    /// Remove only at this generation.
    expected_generation: Option<u64>,
    /// Replay identity, 32 hex characters.
    request_id: Option<String>,
}

async fn remove(
    State(state): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    write_route(state, headers, req, move |client, b: RemoveBody| {
        let request_id = match request_id(b.request_id.as_deref()) {
            Ok(rid) => rid,
            Err(e) => return ToolError::invalid_arguments(e).envelope(),
        };
        let opts = RemoveOptions {
            expected_generation: b.expected_generation,
            request_id,
        };
        match client.remove(&id, &b.path, &opts) {
            Ok(r) => r.envelope(&id, &client.workbench_path(&id)),
            Err(e) => removal_error(client, &id, e).envelope(),
        }
    })
    .await
}

/// Body of `POST /v1/workbenches/{id}/remove-prefix`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrefixBody {
    /// Workbench-relative prefix (a directory or one file).
    prefix: String,
}

async fn remove_prefix(
    State(state): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    write_route(
        state,
        headers,
        req,
        move |client, b: PrefixBody| match client.remove_prefix(&id, &b.prefix) {
            Ok(r) => r.envelope(&id, &b.prefix),
            Err(e) => removal_error(client, &id, e).envelope(),
        },
    )
    .await
}

/// Body of `POST /v1/gc`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GcBody {
    /// Report only; write nothing.
    #[serde(default)]
    dry_run: bool,
    /// At most this many revisions in this pass.
    max_revisions: Option<usize>,
}

async fn gc(
    State(state): State<Shared>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    write_route(state, headers, req, |client, b: GcBody| {
        let opts = meta::ops::gc::GcOptions {
            dry_run: b.dry_run,
            max_revisions: b.max_revisions,
        };
        match client.gc(&opts) {
            Ok(r) => json!({
                "status": "success",
                "report": nokv_commands::gc_cmd::report_json(&r),
            }),
            Err(e) => store_error(e).envelope(),
        }
    })
    .await
}

/// Query of `GET /v1/gc/explain`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExplainQuery {
    /// Workbench id (with `path`).
    workbench: Option<String>,
    /// Workbench-relative path (with `workbench`).
    path: Option<String>,
    /// Revision id, 32 hex characters (instead of `workbench` + `path`).
    revision: Option<String>,
}

async fn gc_explain(
    State(state): State<Shared>,
    Query(q): Query<ExplainQuery>,
) -> Result<Response, ApiError> {
    let target = match q {
        ExplainQuery {
            workbench: Some(w),
            path: Some(p),
            revision: None,
        } => Ok((w, p)),
        ExplainQuery {
            workbench: None,
            path: None,
            revision: Some(r),
        } => Err(r),
        _ => {
            return Err(ApiError::bad_request(
                "gc explain takes ?workbench=W&path=P or ?revision=HEX",
            ))
        }
    };
    read_route(state, move |client| {
        let explained = match &target {
            Ok((w, p)) => client.gc_explain(w, p),
            Err(r) => client.gc_explain_revision(r),
        };
        match explained {
            Ok(e) => json!({
                "status": "success",
                "explanation": nokv_commands::gc_cmd::explanation_json(&e),
            }),
            Err(e) => match &target {
                Ok((w, _)) => tool_error(client, w, e).envelope(),
                Err(_) => store_error(e).envelope(),
            },
        }
    })
    .await
}

/// Body of `POST /v1/fsck`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FsckBody {
    /// Rebuild the SecondaryIndex rows first.
    #[serde(default)]
    repair_index: bool,
}

/// The `nokv fsck --json` object of an outcome (and the index repair that preceded it).
pub(crate) fn fsck_json(
    outcome: &FsckOutcome,
    repaired: Option<&meta::ops::fsck::RepairReport>,
) -> Value {
    nokv_commands::fsck_cmd::outcome_json(outcome, repaired)
}

async fn fsck(
    State(state): State<Shared>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    write_route(state, headers, req, |client, b: FsckBody| {
        let repaired = if b.repair_index {
            match client.repair_index() {
                Ok(r) => Some(r),
                Err(e) => return store_error(e).envelope(),
            }
        } else {
            None
        };
        match client.fsck() {
            Ok(o) => json!({
                "status": "success",
                "fsck": fsck_json(&o, repaired.as_ref()),
            }),
            Err(e) => store_error(e).envelope(),
        }
    })
    .await
}

/// Body of `POST /v1/index/repair` (no fields).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EmptyBody {}

async fn repair_index(
    State(state): State<Shared>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    write_route(state, headers, req, |client, _: EmptyBody| {
        match client.repair_index() {
            Ok(p) => json!({
                "status": "success",
                "repair": {"rows_put": p.rows_put, "rows_deleted": p.rows_deleted, "commands": p.commands},
            }),
            Err(e) => store_error(e).envelope(),
        }
    })
    .await
}

fn setting_json(v: &meta::ops::settings::SettingValue) -> Value {
    json!({"name": v.name, "stored": v.stored, "effective": v.effective})
}

async fn config_list(State(state): State<Shared>) -> Result<Response, ApiError> {
    read_route(state, |client| match client.config_list() {
        Ok(all) => json!({
            "status": "success",
            "settings": all.iter().map(setting_json).collect::<Vec<_>>(),
        }),
        Err(e) => store_error(e).envelope(),
    })
    .await
}

async fn config_get(
    State(state): State<Shared>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    read_route(state, move |client| match client.config_get(&name) {
        Ok(v) => json!({"status": "success", "setting": setting_json(&v)}),
        Err(e) => store_error(e).envelope(),
    })
    .await
}

/// Body of `PUT /v1/config/{name}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetBody {
    /// The new value: decimal text (as the CLI takes it) or a JSON integer.
    value: Value,
}

async fn config_set(
    State(state): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    write_route(state, headers, req, move |client, b: SetBody| {
        let text = match &b.value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match client.config_set(&name, &text) {
            Ok(r) => json!({
                "status": "success",
                "receipt": {
                    "name": name,
                    "previous": r.previous,
                    "value": r.value,
                    "commit_version": r.commit_version,
                    "unchanged": r.unchanged,
                },
            }),
            Err(e) => store_error(e).envelope(),
        }
    })
    .await
}
