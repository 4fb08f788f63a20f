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
    /// `Timeout`, `Unavailable`, `RequestIdReused`, `OutcomeUnknown`, `Internal`).
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
