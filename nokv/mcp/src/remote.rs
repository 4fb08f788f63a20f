//! The remote backend: tool calls sent to a `nokv serve` owner process over HTTP.
//!
//! Contract (the server's DTO for the 18 tools): `POST {base}/v1/tools/{tool}` with the tool's
//! canonical name (`workbench_…`), the JSON input as the body (`Content-Type:
//! application/json`) and, when a token is configured, `Authorization: Bearer {token}`. The
//! response body is the tool's envelope, whatever the HTTP status.

use std::time::Duration;

use serde_json::Value;

use crate::backend::{tool_hints, ToolBackend};
use nokv::workbench::errors::{ErrorCode, ToolError};
use nokv::workbench::schema;

/// Path prefix of the tool DTO on a `nokv serve` process; the tool name follows.
pub const TOOLS_PATH: &str = "/v1/tools/";

/// Timeouts, limits and retry policy of a [`RemoteBackend`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteOptions {
    /// Longest wait for a TCP (and TLS) connection to the server (default 5 s).
    pub connect_timeout: Duration,
    /// Longest whole exchange of one request, response body included (default 600 s: a grep may
    /// scan up to 512 MiB).
    pub call_timeout: Duration,
    /// Largest response body accepted, in bytes (default 256 MiB); a larger one fails the call
    /// with `Internal`.
    pub max_response_bytes: u64,
    /// Most sends of one call (default 3). A call is sent again when the request cannot have
    /// reached the server (connection refused, name or connect failure, HTTP 503 without an
    /// envelope), when the connection broke after it was sent (every write carries an
    /// `Idempotency-Key` that its resends reuse, so the server applies it at most once and
    /// answers the resend with the stored envelope; reads are side-effect free), and while the
    /// server answers `RequestInFlight` (the first send is still running).
    pub max_attempts: u32,
    /// Wait before the second send; doubled before each further one (default 200 ms).
    pub retry_backoff: Duration,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            connect_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(600),
            max_response_bytes: 256 * 1024 * 1024,
            max_attempts: 3,
            retry_backoff: Duration::from_millis(200),
        }
    }
}

/// [`ToolBackend`] that forwards every call to a `nokv serve` process (see the module docs for
/// the wire contract).
///
/// Outcomes that are not an envelope from the server become envelopes here:
///
/// | what happened | envelope |
/// | --- | --- |
/// | unknown tool name | `UnknownTool` (nothing sent) |
/// | server unreachable after every attempt | `ObjectUnavailable` (retryable), `details.reason: "server_unreachable"` |
/// | connection lost after the call was sent, every attempt (writes resend their request id) | `ObjectUnavailable` (retryable), `details.reason: "connection_lost"` |
/// | HTTP 401 or 403 without a Workbench envelope (the server's `Unauthorized`) | `InvalidArguments`, `details.reason: "unauthorized"` (a 403 `Forbidden` envelope passes through) |
/// | HTTP 502/503/504 (the server's `Unavailable`, or no envelope) | `ObjectUnavailable` (retryable), `details.reason: "server_unavailable"` |
/// | HTTP 408 (the server's `Timeout`) | `ObjectUnavailable` (retryable), `details.reason: "timeout"` |
/// | any other response that is neither a success nor an error with a Workbench code | `Internal`, `details.reason: "bad_response"` |
///
/// Error envelopes with a Workbench code (`InvalidArguments`, `PayloadTooLarge`, `Conflict`, …)
/// pass through unchanged whatever their HTTP status.
///
/// Every synthesized error carries `details.http_status` when a status was received.
#[derive(Debug)]
pub struct RemoteBackend {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
    options: RemoteOptions,
}

/// Why one send produced no envelope.
enum SendFailure {
    /// The request cannot have reached the server.
    NotSent(String),
    /// The request may have reached the server; its response was lost.
    Lost(String),
    /// The server answered with a status and a body that is not an envelope.
    Status(u16, String),
}

impl RemoteBackend {
    /// A backend for the server at `url` (`http://host:port` or `https://…`, optionally with a
    /// path prefix; a trailing `/` is ignored) sending `token` as a bearer token when given.
    ///
    /// Errors (`InvalidArguments`): a URL that is not absolute `http`/`https` with a host, or
    /// that carries a query or fragment; a token that is empty or not visible ASCII.
    pub fn new(
        url: &str,
        token: Option<String>,
        options: RemoteOptions,
    ) -> Result<Self, ToolError> {
        let base = validate_base_url(url)?;
        if let Some(t) = &token {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(ToolError::invalid_arguments(
                    "the bearer token must be non-empty visible ASCII (no spaces or control characters)",
                ));
            }
        }
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(options.connect_timeout))
            .timeout_global(Some(options.call_timeout))
            .max_redirects(0)
            .user_agent(format!("nokv-mcp/{}", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(RemoteBackend {
            base,
            token,
            agent: ureq::Agent::new_with_config(config),
            options,
        })
    }

    /// [`RemoteBackend::new`] with the token from `NOKV_TOKEN` (unset or blank: no token;
    /// surrounding whitespace is trimmed) and default [`RemoteOptions`].
    pub fn from_env(url: &str) -> Result<Self, ToolError> {
        let token = std::env::var("NOKV_TOKEN")
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        Self::new(url, token, RemoteOptions::default())
    }

    /// The server's base URL as used (no trailing `/`).
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// Whether the server says this backend's token may only read (`GET /v1/whoami`:
    /// `read_only` true). `None` when the server cannot be asked or answers otherwise (an older
    /// server, no connection): the caller then decides without it.
    pub fn token_reads_only(&self) -> Option<bool> {
        let mut request = self
            .agent
            .get(format!("{}/v1/whoami", self.base))
            .header("Accept", "application/json");
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let mut response = request.call().ok()?;
        if response.status().as_u16() != 200 {
            return None;
        }
        let bytes = response
            .body_mut()
            .with_config()
            .limit(64 * 1024)
            .read_to_vec()
            .ok()?;
        let v: Value = serde_json::from_slice(&bytes).ok()?;
        v.get("read_only").and_then(Value::as_bool)
    }

    /// The endpoint URL of a canonical tool name.
    fn endpoint(&self, tool: &str) -> String {
        format!("{}{TOOLS_PATH}{tool}", self.base)
    }

    fn send_once(&self, url: &str, body: &[u8], key: Option<&str>) -> Result<Value, SendFailure> {
        let mut request = self
            .agent
            .post(url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json");
        if let Some(key) = key {
            request = request.header(nokv_protocol::headers::IDEMPOTENCY_KEY, key);
        }
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let mut response = request.send(body).map_err(classify)?;
        let status = response.status().as_u16();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(self.options.max_response_bytes)
            .read_to_vec()
            .map_err(|e| match e {
                ureq::Error::BodyExceedsLimit(limit) => SendFailure::Status(
                    status,
                    format!("the response body is larger than {limit} bytes"),
                ),
                other => SendFailure::Lost(other.to_string()),
            })?;
        match serde_json::from_slice::<Value>(&bytes) {
            // A refusal of the request itself (401 `Unauthorized`, 503 `Unavailable`, 408
            // `Timeout`, …) carries a code of the server protocol, not a Workbench code: it is
            // mapped to one like a refusal without an envelope (`status_error`).
            Ok(v) if is_envelope(&v) && status != 200 && !has_workbench_code(&v) => {
                let message = v.get("message").and_then(Value::as_str).unwrap_or_default();
                Err(SendFailure::Status(status, snippet(message.as_bytes())))
            }
            Ok(v) if is_envelope(&v) => Ok(v),
            _ => Err(SendFailure::Status(status, snippet(&bytes))),
        }
    }
}

impl ToolBackend for RemoteBackend {
    fn call(&self, tool: &str, input: &Value) -> Value {
        let Some(name) = schema::canonical_tool_name(tool) else {
            return ToolError::unknown_tool(tool).envelope();
        };
        let body = match serde_json::to_vec(input) {
            Ok(b) => b,
            Err(e) => {
                return ToolError::invalid_arguments(format!(
                    "the tool input cannot be encoded: {e}"
                ))
                .envelope()
            }
        };
        let hints = tool_hints(name);
        // Every write carries one request id that its resends reuse: the server runs it at most
        // once and answers a resend with the stored envelope, so a lost response is safe to
        // retry for every tool.
        let key = if hints.is_some_and(|h| h.read_only) {
            None
        } else {
            match nokv_remote::new_request_id() {
                Ok(k) => Some(k),
                Err(e) => return nokv::workbench::store_error(e).envelope(),
            }
        };
        let idempotent = key.is_some() || hints.is_some_and(|h| h.idempotent);
        let url = self.endpoint(name);
        let mut backoff = self.options.retry_backoff;
        let mut attempt = 1u32;
        loop {
            let failure = match self.send_once(&url, &body, key.as_deref()) {
                // The first send is still running on the server: wait for its stored answer.
                Ok(envelope) if is_in_flight(&envelope) => SendFailure::Status(409, String::new()),
                Ok(envelope) => return envelope,
                Err(failure) => failure,
            };
            let may_resend = match &failure {
                SendFailure::NotSent(_) => true,
                SendFailure::Lost(_) => idempotent,
                SendFailure::Status(status, _) => *status == 503 || *status == 409,
            };
            if !may_resend || attempt >= self.options.max_attempts.max(1) {
                return self
                    .failure_envelope(failure, idempotent, attempt)
                    .envelope();
            }
            std::thread::sleep(backoff);
            backoff = backoff.saturating_mul(2);
            attempt += 1;
        }
    }

    fn describe(&self) -> String {
        format!(
            "server {} ({})",
            self.base,
            if self.token.is_some() {
                "bearer token from NOKV_TOKEN"
            } else {
                "no token"
            }
        )
    }
}

impl RemoteBackend {
    fn failure_envelope(&self, failure: SendFailure, idempotent: bool, attempts: u32) -> ToolError {
        let err = match failure {
            SendFailure::NotSent(why) => ToolError::object_unavailable(format!(
                "the NoKV server at {} cannot be reached ({why}); check that `nokv serve` runs \
                 there and retry",
                self.base
            ))
            .with_detail("reason", "server_unreachable"),
            SendFailure::Lost(why) if idempotent => ToolError::object_unavailable(format!(
                "the connection to the NoKV server at {} broke before its answer arrived ({why}); \
                 this call is safe to retry",
                self.base
            ))
            .with_detail("reason", "connection_lost"),
            SendFailure::Lost(why) => ToolError::internal(format!(
                "the connection to the NoKV server at {} broke after the request was sent \
                 ({why}); the write may or may not have been applied — check the current state \
                 (workbench_stat / workbench_list) before repeating it",
                self.base
            ))
            .with_detail("reason", "outcome_unknown"),
            SendFailure::Status(status, body) => status_error(&self.base, status, &body),
        };
        err.with_detail("attempts", attempts)
    }
}

/// The error for a response that is not an envelope.
fn status_error(base: &str, status: u16, body: &str) -> ToolError {
    let said = if body.is_empty() {
        String::new()
    } else {
        format!(": {body}")
    };
    let err = match status {
        401 | 403 => ToolError::new(
            ErrorCode::InvalidArguments,
            format!(
                "the NoKV server at {base} refused the request (HTTP {status}{said}); set \
                 NOKV_TOKEN to the server's bearer token"
            ),
        )
        .with_detail("reason", "unauthorized"),
        502..=504 => ToolError::object_unavailable(format!(
            "the NoKV server at {base} is unavailable (HTTP {status}{said}); retry"
        ))
        .with_detail("reason", "server_unavailable"),
        408 => ToolError::object_unavailable(format!(
            "the NoKV server at {base} timed out the request (HTTP 408{said}); retry"
        ))
        .with_detail("reason", "timeout"),
        _ => ToolError::internal(format!(
            "the server at {base} did not answer with a Workbench envelope (HTTP {status}{said}); \
             is it a `nokv serve` of this version?"
        ))
        .with_detail("reason", "bad_response"),
    };
    err.with_detail("http_status", status)
}

/// Whether a transport error happened before the request could reach the server.
fn classify(err: ureq::Error) -> SendFailure {
    use ureq::Error as E;
    let not_sent = match &err {
        E::ConnectionFailed | E::HostNotFound => true,
        E::Timeout(t) => matches!(t, ureq::Timeout::Connect | ureq::Timeout::Resolve),
        E::Io(io) => matches!(
            io.kind(),
            std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::AddrNotAvailable
        ),
        E::BadUri(_) | E::Http(_) | E::Tls(_) | E::RequireHttpsOnly(_) => true,
        _ => false,
    };
    if not_sent {
        SendFailure::NotSent(err.to_string())
    } else {
        SendFailure::Lost(err.to_string())
    }
}

/// Whether the envelope `v` is a success or an error with a Workbench code (docs/workbench.md).
fn has_workbench_code(v: &Value) -> bool {
    v.get("code")
        .and_then(Value::as_str)
        .is_none_or(|c| ErrorCode::parse(c).is_some())
}

/// Whether `v` is the server's refusal of a resend whose first send is still running.
fn is_in_flight(v: &Value) -> bool {
    v.get("code").and_then(Value::as_str) == Some("RequestInFlight")
}

/// An envelope is a JSON object whose `status` is `"success"` or `"error"`.
fn is_envelope(v: &Value) -> bool {
    matches!(
        v.get("status").and_then(Value::as_str),
        Some("success") | Some("error")
    )
}

/// At most 200 characters of a non-envelope body, for error messages.
fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let trimmed = text.trim();
    let mut out: String = trimmed.chars().take(200).collect();
    if trimmed.chars().count() > 200 {
        out.push('…');
    }
    out
}

/// Checks a base URL and returns it without a trailing `/`.
fn validate_base_url(url: &str) -> Result<String, ToolError> {
    let bad = |why: &str| {
        ToolError::invalid_arguments(format!(
            "--server {url:?} is not a usable server URL ({why}); expected e.g. http://127.0.0.1:7070"
        ))
    };
    let uri: ureq::http::Uri = url.parse().map_err(|_| bad("it does not parse"))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        _ => return Err(bad("the scheme must be http or https")),
    }
    if uri.authority().is_none_or(|a| a.host().is_empty()) {
        return Err(bad("it names no host"));
    }
    if uri.query().is_some() || url.contains('#') {
        return Err(bad("it must not carry a query or fragment"));
    }
    Ok(url.trim_end_matches('/').to_string())
}
