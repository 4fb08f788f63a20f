//! Transport-level failures of the server: authentication, malformed DTOs, limits, timeouts.
//!
//! Operation outcomes — success and tool/operation errors — are always HTTP 200 with the
//! envelope the CLI prints. Only failures of the request itself use 4xx/5xx; their JSON body has
//! the same shape as a tool error envelope, so a client prints it the same way:
//! `{"status":"error","code":STRING,"message":STRING,"retryable":BOOL,"details":OBJECT}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

/// One transport-level failure.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status (4xx or 5xx).
    pub status: StatusCode,
    /// Stable error code (`Unauthorized`, `InvalidArguments`, `PayloadTooLarge`, `NotFound`,
    /// `Timeout`, `Unavailable`, `RequestIdReused`, `OutcomeUnknown`, `Internal`; on a
    /// `--control` server also `NotOwner`, `LeaseLost`, `UnknownRoot`).
    pub code: &'static str,
    /// What was wrong and what to do.
    pub message: String,
    /// Whether repeating the same request may succeed.
    pub retryable: bool,
    /// Extra fields.
    pub details: Map<String, Value>,
}

impl ApiError {
    /// A failure with no details.
    pub fn new(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
        retryable: bool,
    ) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retryable,
            details: Map::new(),
        }
    }

    /// 401: missing or wrong bearer token.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "a valid bearer token is required (Authorization: Bearer <token>)",
            false,
        )
    }

    /// 400: the request DTO is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "InvalidArguments", message, false)
    }

    /// 413: the body is over `maximum` bytes.
    pub fn too_large(maximum: u64) -> Self {
        let mut e = Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PayloadTooLarge",
            format!("the request body exceeds the server's limit of {maximum} bytes"),
            false,
        );
        e.details
            .insert("maximum_bytes".into(), Value::from(maximum));
        e
    }

    /// 408: the client was too slow sending the request.
    pub fn timeout(what: &str) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "Timeout",
            format!("the request timed out while {what}; retry"),
            true,
        )
    }

    /// 404: no such endpoint.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("no endpoint {path}; see docs/server.md for the /v1 protocol"),
            false,
        )
    }

    /// 503: the server is shutting down or overloaded.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "Unavailable",
            message,
            true,
        )
    }

    /// 500: a failure inside the server.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal", message, true)
    }

    /// 421 `NotOwner`: this server does not own the logical shard of `root` (docs/design.md,
    /// "Distribution"). `details`: `root`, `logical_shard_id` (when the root exists),
    /// `owner_address` (`host:port`, null when no server owns it now or the owner is an
    /// embedded process) and `owner_epoch` (the current owner's epoch, else the last epoch
    /// granted). Retryable: a routing client re-resolves the owner and repeats the request with
    /// the same request id.
    pub fn not_owner(
        root: &str,
        shard: Option<String>,
        owner: Option<(String, u64)>,
        last_epoch: u64,
    ) -> Self {
        let mut e = Self::new(
            StatusCode::MISDIRECTED_REQUEST,
            "NotOwner",
            match &owner {
                Some((addr, epoch)) if !addr.is_empty() => format!(
                    "this server does not own the shard of root {root:?}; its owner is {addr} (epoch {epoch})"
                ),
                Some((_, epoch)) => format!(
                    "this server does not own the shard of root {root:?}; an embedded process owns it (epoch {epoch})"
                ),
                None => format!(
                    "this server does not own the shard of root {root:?} and no server owns it right now; retry shortly"
                ),
            },
            true,
        );
        e.details.insert("root".into(), Value::from(root));
        e.details.insert(
            "logical_shard_id".into(),
            shard.map_or(Value::Null, Value::from),
        );
        let (address, epoch) = match owner {
            Some((a, epoch)) => ((!a.is_empty()).then_some(a), epoch),
            None => (None, last_epoch),
        };
        e.details.insert(
            "owner_address".into(),
            address.map_or(Value::Null, Value::from),
        );
        e.details.insert("owner_epoch".into(), Value::from(epoch));
        e
    }

    /// 421 `LeaseLost`: this server owned the shard of `root` under `epoch` but its shard-owner
    /// lease lapsed or was taken over, so it stopped serving it (fail-stop; docs/metadata-format.md, owner
    /// epoch fencing). Nothing of the request was executed. `details` as
    /// [`ApiError::not_owner`] plus `lost_epoch`. Retryable through the control plane.
    pub fn lease_lost(root: &str, lost_epoch: u64, current: ApiError) -> Self {
        let mut e = Self::new(
            StatusCode::MISDIRECTED_REQUEST,
            "LeaseLost",
            format!(
                "this server lost the shard-owner lease of root {root:?} (epoch {lost_epoch}) and no longer serves it; nothing was executed"
            ),
            true,
        );
        e.details = current.details;
        e.details
            .insert("lost_epoch".into(), Value::from(lost_epoch));
        e
    }

    /// 404 `UnknownRoot`: the control plane has no root named `root`.
    pub fn unknown_root(root: &str) -> Self {
        let mut e = Self::new(
            StatusCode::NOT_FOUND,
            "UnknownRoot",
            format!(
                "the control plane has no root named {root:?}; create it with `nokv root create`"
            ),
            false,
        );
        e.details.insert("root".into(), Value::from(root));
        e
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({
            "status": "error",
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "details": Value::Object(self.details.clone()),
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body())).into_response()
    }
}
