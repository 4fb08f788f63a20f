//! `nokv_remote::RemoteClient` — the Rust SDK against a `nokv serve` server.
//!
//! The remote client mirrors [`nokv::Client`]'s data-path operations with the same names and
//! types — [`RemoteClient::create_workbench`], [`RemoteClient::put`],
//! [`RemoteClient::put_reader`], [`RemoteClient::read_all`], [`RemoteClient::read_range`]
//! (and [`RemoteClient::read_range_of_generation`], a range of one pinned revision, and
//! [`RemoteClient::read_range_at`], a range at a read version),
//! [`RemoteClient::stat`], [`RemoteClient::append_idempotent`], and object lifetime:
//! [`RemoteClient::remove`], [`RemoteClient::remove_prefix`], [`RemoteClient::gc`],
//! [`RemoteClient::gc_explain`], [`RemoteClient::fsck`], [`RemoteClient::repair_index`],
//! [`RemoteClient::config_get`] / `config_set` / `config_list` — and reaches every other
//! operation through the two protocol-level calls the CLI uses:
//! [`RemoteClient::call_tool`] (the 18 Workbench tools, exactly the envelopes of
//! [`nokv::workbench::Workbench::call`]) and [`RemoteClient::command`] (the CLI's commit, tag,
//! find, snapshot, restore, operation and demo commands, returning exactly what the CLI prints).
//! Both clients are separate types (no shared trait): the embedded one exposes store internals
//! (`meta()`, `objects()`, readers at a version) that a remote caller cannot have.
//!
//! Failures are typed: [`Error::Connection`] (retryable) when the server cannot be reached or the
//! connection breaks, [`Error::Server`] when the server refuses the request itself (auth,
//! malformed request, limits), and [`Error::OperationFailed`] with the stable Workbench code for
//! an operation error. Every write carries a fresh `Idempotency-Key` that its retries reuse, so a
//! response lost after the server committed is answered by the stored response (the server's
//! request journal) and never writes twice. Calls are retried on connection failures and
//! retryable refusals with exponential backoff (default 4 retries); a streamed upload from a
//! non-replayable reader is not retried.
//!
//! The connection is plain HTTP/1.1 (put TLS in front with a terminating proxy); the bearer token
//! comes from [`RemoteClient::connect`] or `NOKV_TOKEN`.

use std::io::Read;
use std::time::Duration;

mod lifetime;
pub mod routing;

use serde_json::Value;

use nokv::client::{PutOptions, PutReceipt, WriteCondition};
use nokv::error::{Error, Result};

/// Default number of retries after a connection failure or a retryable refusal.
pub const DEFAULT_RETRIES: u32 = 4;

/// A client of one NoKV server. Cheap to clone (connections are pooled and shared).
#[derive(Clone)]
pub struct RemoteClient {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
    retries: u32,
    routing: Option<std::sync::Arc<routing::Routing>>,
}

impl std::fmt::Debug for RemoteClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteClient")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// What a CLI command printed on the server ([`RemoteClient::command`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// The process exit code the CLI would return (0 success, 1 error, 2 usage).
    pub exit_code: u8,
    /// Standard output, byte for byte.
    pub stdout: String,
    /// Standard error (human commands only).
    pub stderr: String,
}

/// The HTTP agent: connect timeout 5 s, `response_timeout` for the response head (none: wait).
fn build_agent(response_timeout: Option<Duration>) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(5)))
        .timeout_recv_response(response_timeout)
        .max_idle_connections_per_host(64)
        .build()
        .into()
}

/// A fresh request id: 32 lowercase hex characters from the OS random source.
pub fn new_request_id() -> Result<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| Error::InvalidArgument(format!("no randomness: {e}")))?;
    Ok(objstore::hex_lower(&b))
}

/// Percent-encodes one path segment or query value (RFC 3986 unreserved characters stay).
pub fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-encodes a workbench-relative path, keeping its `/` separators.
fn encode_path(p: &str) -> String {
    p.split('/')
        .map(encode_component)
        .collect::<Vec<_>>()
        .join("/")
}

/// One prepared request body.
enum Payload<'a> {
    None,
    Bytes(&'a [u8]),
    Reader(&'a mut dyn Read),
}

impl RemoteClient {
    /// A client of the server at `url` (`http://host:port`), sending `token` as the bearer token
    /// (else `NOKV_TOKEN` when set). Nothing is sent until the first call.
    ///
    /// Errors: [`Error::InvalidArgument`] for a URL that is not `http://…`.
    pub fn connect(url: &str, token: Option<&str>) -> Result<RemoteClient> {
        let base = url.trim().trim_end_matches('/').to_string();
        let rest = base.strip_prefix("http://").ok_or_else(|| {
            Error::InvalidArgument(format!(
                "server URL {url:?} must start with http:// (put TLS in a terminating proxy)"
            ))
        })?;
        if rest.is_empty() || rest.contains(['/', '?', '#', ' ']) {
            return Err(Error::InvalidArgument(format!(
                "server URL {url:?} must be http://HOST:PORT"
            )));
        }
        let token = token
            .map(str::to_string)
            .or_else(|| std::env::var("NOKV_TOKEN").ok())
            .filter(|t| !t.trim().is_empty());
        let agent = build_agent(None);
        Ok(RemoteClient {
            base,
            token,
            agent,
            retries: DEFAULT_RETRIES,
            routing: None,
        })
    }

    /// A client of root `root` through the control plane at `control` (etcd client URLs,
    /// comma-separated; deployment `namespace`, e.g. [`meta::store::etcd::DEFAULT_NAMESPACE`])
    /// (docs/design.md, "Distribution"): every call resolves root → logical shard → owner from the
    /// control plane (cached) and is sent to `http://<owner>/roots/<root>/…` of that
    /// `nokv serve --control` server. A `NotOwner` / `LeaseLost` answer, a connection failure
    /// or a retryable refusal re-resolves the owner and repeats the call with the same request
    /// id until [`routing::DEFAULT_ROUTING_DEADLINE`] (see [`RemoteClient::with_routing_deadline`])
    /// has passed. Nothing is sent until the first call.
    ///
    /// Errors: [`Error::InvalidArgument`] for a bad URL, namespace or root name;
    /// [`Error::Meta`] when the control-plane client cannot be built.
    #[cfg(feature = "control")]
    pub fn connect_routed(
        control: &str,
        namespace: &str,
        root: &str,
        token: Option<&str>,
    ) -> Result<RemoteClient> {
        let routing = routing::Routing::new(control, namespace, root)?;
        let mut client = Self::connect("http://control-plane", token)?;
        client.agent = build_agent(Some(routing::DEFAULT_RESPONSE_TIMEOUT));
        client.base = routing.describe();
        client.routing = Some(std::sync::Arc::new(routing));
        Ok(client)
    }

    /// The routed client of `NOKV_CONTROL` + `NOKV_ROOT` (namespace `NOKV_ETCD_NAMESPACE`, else
    /// the default; token `NOKV_TOKEN`), or `None` unless both are set.
    ///
    /// Errors: as [`RemoteClient::connect_routed`].
    #[cfg(feature = "control")]
    pub fn from_control_env() -> Result<Option<RemoteClient>> {
        let var = |n: &str| std::env::var(n).ok().filter(|v| !v.trim().is_empty());
        match (var("NOKV_CONTROL"), var("NOKV_ROOT")) {
            (Some(control), Some(root)) => {
                let ns = var("NOKV_ETCD_NAMESPACE")
                    .unwrap_or_else(|| meta::store::etcd::DEFAULT_NAMESPACE.to_owned());
                Ok(Some(Self::connect_routed(&control, &ns, &root, None)?))
            }
            _ => Ok(None),
        }
    }

    /// Sets how long a routed client keeps re-resolving and repeating one call (default
    /// [`routing::DEFAULT_ROUTING_DEADLINE`]); no effect on a client of one server.
    pub fn with_routing_deadline(mut self, deadline: Duration) -> Self {
        if let Some(r) = &self.routing {
            self.routing = Some(std::sync::Arc::new(r.with_deadline(deadline)));
        }
        self
    }

    /// Sets how long a routed client waits for the response head of one attempt (default
    /// [`routing::DEFAULT_RESPONSE_TIMEOUT`]) before it treats the owner as gone (a frozen
    /// process still accepts connections) and re-resolves; a write is then repeated with the
    /// same request id, answered `RequestInFlight` while the first attempt still runs. No effect
    /// on a client of one server (which waits as long as the server takes).
    pub fn with_response_timeout(mut self, timeout: Duration) -> Self {
        if self.routing.is_some() {
            self.agent = build_agent(Some(timeout));
        }
        self
    }

    /// The base URL of the next request: the fixed server, or the root's current owner.
    fn target(&self) -> Result<String> {
        match &self.routing {
            None => Ok(self.base.clone()),
            Some(r) => r.base(),
        }
    }

    /// The client of `NOKV_SERVER` (token `NOKV_TOKEN`), or `None` when it is not set.
    ///
    /// Errors: as [`RemoteClient::connect`].
    pub fn from_env() -> Result<Option<RemoteClient>> {
        match std::env::var("NOKV_SERVER") {
            Ok(url) if !url.trim().is_empty() => Ok(Some(Self::connect(&url, None)?)),
            _ => Ok(None),
        }
    }

    /// Sets how many times a call is retried after a connection failure or a retryable refusal
    /// (0: never).
    pub fn with_retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// The server base URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    fn connection_error(&self, e: &ureq::Error) -> Error {
        Error::Connection {
            url: self.base.clone(),
            reason: e.to_string(),
        }
    }

    /// One HTTP exchange (no retry). Returns the status, the response headers of interest and
    /// the response for the caller to read.
    fn exchange(
        &self,
        method: &str,
        path_and_query: &str,
        key: Option<&str>,
        extra: &[(&str, String)],
        payload: Payload<'_>,
    ) -> Result<ureq::http::Response<ureq::Body>> {
        let base = self.target()?;
        let url = format!("{base}{path_and_query}");
        let mut req = ureq::http::Request::builder().method(method).uri(&url);
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {t}"));
        }
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        for (name, value) in extra {
            req = req.header(*name, value.as_str());
        }
        let result = match payload {
            Payload::None => req
                .body(())
                .map_err(|e| Error::InvalidArgument(e.to_string()))
                .and_then(|r| self.agent.run(r).map_err(|e| self.connection_error(&e))),
            Payload::Bytes(b) => req
                .header("Content-Type", "application/json")
                .body(b.to_vec())
                .map_err(|e| Error::InvalidArgument(e.to_string()))
                .and_then(|r| self.agent.run(r).map_err(|e| self.connection_error(&e))),
            Payload::Reader(r) => req
                .header("Content-Type", "application/octet-stream")
                .body(ureq::SendBody::from_reader(r))
                .map_err(|e| Error::InvalidArgument(e.to_string()))
                .and_then(|r| self.agent.run(r).map_err(|e| self.connection_error(&e))),
        };
        if let (Err(Error::Connection { .. }), Some(r)) = (&result, &self.routing) {
            r.forget(&base);
        }
        result
    }

    /// The status and JSON body of a response (at most `limit` bytes). Errors:
    /// [`Error::Connection`] when the body cannot be read or is not JSON.
    fn json_body(
        &self,
        resp: &mut ureq::http::Response<ureq::Body>,
        limit: u64,
    ) -> Result<(u16, Value)> {
        let status = resp.status().as_u16();
        let bytes = resp
            .body_mut()
            .with_config()
            .limit(limit)
            .read_to_vec()
            .map_err(|e| self.connection_error(&e))?;
        let value = serde_json::from_slice(&bytes).map_err(|_| Error::Connection {
            url: self.base.clone(),
            reason: format!("HTTP {status}: the response is not JSON"),
        })?;
        Ok((status, value))
    }

    /// Reads a JSON response: a 2xx/4xx/5xx body of the envelope's shape. A transport refusal
    /// (non-200 with an error body) becomes [`Error::Server`].
    fn read_json(&self, mut resp: ureq::http::Response<ureq::Body>) -> Result<Value> {
        let (status, value) = self.json_body(&mut resp, 512 << 20)?;
        if status == 200 {
            return Ok(value);
        }
        Err(self.refused(status, &value))
    }

    /// A transport refusal as [`Error::Server`]; a `NotOwner` / `LeaseLost` answer also drops
    /// the cached owner of a routed client.
    fn refused(&self, status: u16, value: &Value) -> Error {
        let e = server_error(status, value);
        if let (Error::Server { code, .. }, Some(r)) = (&e, &self.routing) {
            if routing::is_redirect(code) {
                r.forget_all();
            }
        }
        e
    }

    /// Runs `attempt` with the retry policy: connection failures and retryable refusals are
    /// retried (exponential backoff from 50 ms), anything else is returned.
    fn retrying<T>(&self, mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
        let mut pause = Duration::from_millis(50);
        let mut left = self.retries;
        let rerouting = self
            .routing
            .as_ref()
            .map(|r| std::time::Instant::now() + r.deadline());
        loop {
            match attempt() {
                // A routed call: re-resolve the owner and repeat (same request id) until the
                // routing deadline.
                Err(e) if rerouting.is_some() && routing::reroutes(&e) => {
                    if rerouting.is_some_and(|d| std::time::Instant::now() >= d) {
                        return Err(e);
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                Err(
                    e @ (Error::Connection { .. }
                    | Error::Server {
                        retryable: true, ..
                    }),
                ) if left > 0 => {
                    let _ = e;
                    left -= 1;
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                other => return other,
            }
        }
    }

    /// `POST` of a JSON body answered by one envelope, as a write (a fresh request id reused by
    /// every retry) when `write`.
    fn post_json(&self, path: &str, body: &Value, write: bool) -> Result<Value> {
        let bytes = serde_json::to_vec(body).map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let key = if write { Some(new_request_id()?) } else { None };
        self.retrying(|| {
            let resp = self.exchange("POST", path, key.as_deref(), &[], Payload::Bytes(&bytes))?;
            self.read_json(resp)
        })
    }

    /// `GET /healthz`. Errors: [`Error::Connection`], [`Error::Server`].
    pub fn health(&self) -> Result<Value> {
        self.retrying(|| {
            let resp = self.exchange("GET", "/healthz", None, &[], Payload::None)?;
            self.read_json(resp)
        })
    }

    /// Runs one Workbench tool on the server: `input` → exactly the envelope
    /// [`nokv::workbench::Workbench::call`] returns (success or tool error; a tool error is an
    /// `Ok` envelope, as embedded). Write tools carry a request id reused by every retry.
    ///
    /// Errors: [`Error::Connection`], [`Error::Server`] (transport refusals only).
    pub fn call_tool(&self, tool: &str, input: &Value) -> Result<Value> {
        let name = nokv::workbench::schema::canonical_tool_name(tool).unwrap_or(tool);
        let write = !matches!(
            name,
            "workbench_list"
                | "workbench_stat"
                | "workbench_read"
                | "workbench_grep"
                | "workbench_search"
                | "workbench_aggregate"
                | "workbench_catalog"
                | "workbench_find"
                | "workbench_snapshot_list"
        );
        self.post_json(
            &format!("/v1/tools/{}", encode_component(tool)),
            input,
            write,
        )
    }

    /// Runs one of the CLI's commands on the server (`name`: `commit`, `tag`, `find`,
    /// `snapshot`, `restore`, `operation`, `demo`; `args`: the command's arguments as the
    /// protocol DTO, see `docs/server.md`) and returns what the CLI prints.
    ///
    /// Errors: [`Error::Connection`], [`Error::Server`].
    pub fn command(&self, name: &str, args: &Value) -> Result<CommandOutput> {
        let write = !matches!(name, "find");
        let v = self.post_json(
            &format!("/v1/commands/{}", encode_component(name)),
            args,
            write,
        )?;
        Ok(CommandOutput {
            exit_code: v
                .get("exit_code")
                .and_then(Value::as_u64)
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(1),
            stdout: v
                .get("stdout")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            stderr: v
                .get("stderr")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        })
    }

    /// Creates a workbench, or finds the visible one (idempotent); returns whether this call
    /// created it.
    ///
    /// Errors: [`Error::OperationFailed`] (`InvalidArguments`, `AlreadyExists` for a reserved
    /// name), [`Error::Connection`], [`Error::Server`].
    pub fn create_workbench(&self, workbench_id: &str) -> Result<bool> {
        let v = self.post_json(
            &format!("/v1/workbenches/{}", encode_component(workbench_id)),
            &Value::Null,
            true,
        )?;
        let v = envelope_result(v)?;
        Ok(v.get("created").and_then(Value::as_bool).unwrap_or(false))
    }

    fn upload_query(options: &PutOptions) -> Result<String> {
        let mut q = vec![
            format!("content_type={}", encode_component(&options.content_type)),
            format!("producer={}", encode_component(&options.producer)),
        ];
        if let WriteCondition::Replace {
            expected_generation,
        } = options.condition
        {
            q.push("replace=true".into());
            if let Some(g) = expected_generation {
                q.push(format!("expected_generation={g}"));
            }
        }
        if let Some(m) = &options.manifest_id {
            q.push(format!("manifest_id={}", encode_component(m)));
        }
        if options.index_json {
            q.push("index_json=true".into());
        }
        if !options.index_fields.is_empty() {
            let specs = options
                .index_fields
                .iter()
                .map(|(k, v)| field_arg(k.as_str(), v))
                .collect::<Result<Vec<String>>>()?;
            let text =
                serde_json::to_string(&specs).map_err(|e| Error::InvalidArgument(e.to_string()))?;
            q.push(format!("fields={}", encode_component(&text)));
        }
        Ok(q.join("&"))
    }

    fn put_receipt(v: Value) -> Result<PutReceipt> {
        let v = envelope_result(v)?;
        let rel = v
            .get("relative_path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Ok(PutReceipt {
            path: nokv::Client::normalize(rel)?,
            generation: v.get("generation").and_then(Value::as_u64).unwrap_or(0),
            size_bytes: v.get("size_bytes").and_then(Value::as_u64).unwrap_or(0),
            digest_uri: v
                .get("digest_uri")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            content_type: v
                .get("content_type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            created: v.get("created").and_then(Value::as_bool).unwrap_or(false),
        })
    }

    /// Publishes a whole body held in memory (see [`nokv::Client::put`]): retried with the same
    /// request id after a lost response, so it is applied at most once.
    ///
    /// Errors: [`Error::OperationFailed`] with the Workbench code (`NotFound`, `AlreadyExists`,
    /// `Conflict`, `InvalidArguments`, …), [`Error::Connection`], [`Error::Server`].
    pub fn put(
        &self,
        workbench_id: &str,
        path: &str,
        body: &[u8],
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        let target = format!(
            "/v1/workbenches/{}/files/{}?{}",
            encode_component(workbench_id),
            encode_path(path),
            Self::upload_query(options)?
        );
        let key = new_request_id()?;
        // The declared digest the server checks before publishing: the caller's, else the body's.
        let declared = options
            .expected_digest_uri
            .clone()
            .unwrap_or_else(|| objstore::sha256_uri(body));
        let digest = vec![(nokv_protocol::headers::CONTENT_SHA256, declared)];
        let v = self.retrying(|| {
            let mut reader: &[u8] = body;
            let resp = self.exchange(
                "PUT",
                &target,
                Some(&key),
                &digest,
                Payload::Reader(&mut reader),
            )?;
            self.read_json(resp)
        })?;
        Self::put_receipt(v)
    }

    /// Publishes a body streamed from `reader` (see [`nokv::Client::put_reader`]; memory bounded
    /// by the transfer buffers). Not retried: the stream cannot be replayed — on
    /// [`Error::Connection`] nothing or everything was published (the server publishes only
    /// complete bodies); [`RemoteClient::stat`] tells which.
    ///
    /// Errors: as [`RemoteClient::put`].
    pub fn put_reader(
        &self,
        workbench_id: &str,
        path: &str,
        mut reader: impl Read,
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        let target = format!(
            "/v1/workbenches/{}/files/{}?{}",
            encode_component(workbench_id),
            encode_path(path),
            Self::upload_query(options)?
        );
        let key = new_request_id()?;
        // A declared digest is checked by the server before it publishes (see `PutOptions`).
        let declared: Vec<_> = options
            .expected_digest_uri
            .iter()
            .map(|d| (nokv_protocol::headers::CONTENT_SHA256, d.clone()))
            .collect();
        let resp = self.exchange(
            "PUT",
            &target,
            Some(&key),
            &declared,
            Payload::Reader(&mut reader),
        )?;
        Self::put_receipt(self.read_json(resp)?)
    }

    /// The path entry at `path` (live state; see [`nokv::Client::stat`]).
    ///
    /// Errors: [`Error::OperationFailed`] (`NotFound`, …), [`Error::Connection`],
    /// [`Error::Server`].
    pub fn stat(&self, workbench_id: &str, path: &str) -> Result<meta::PathEntry> {
        let target = format!(
            "/v1/workbenches/{}/stat/{}",
            encode_component(workbench_id),
            encode_path(path)
        );
        let v = self.retrying(|| {
            let resp = self.exchange("GET", &target, None, &[], Payload::None)?;
            self.read_envelope(resp)
        })?;
        let v = envelope_result(v)?;
        entry_from_json(v.get("entry").unwrap_or(&Value::Null))
    }

    /// Reads an error-or-success envelope from an endpoint that uses the status line for
    /// operation errors too (the byte endpoints): any JSON envelope is returned as is.
    fn read_envelope(&self, mut resp: ureq::http::Response<ureq::Body>) -> Result<Value> {
        let (status, value) = self.json_body(&mut resp, 64 << 20)?;
        if status == 200 || value.get("code").is_some_and(|c| !is_transport_code(c)) {
            return Ok(value);
        }
        Err(self.refused(status, &value))
    }

    /// Reads `[offset, offset + len)` of the artifact at `path` (live state; verified by the
    /// server block by block). Errors: as [`RemoteClient::stat`], plus
    /// [`Error::RangeOutOfBounds`].
    pub fn read_range(
        &self,
        workbench_id: &str,
        path: &str,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>> {
        if len == 0 {
            let entry = self.stat(workbench_id, path)?;
            if offset > entry.logical_size {
                return Err(Error::RangeOutOfBounds {
                    offset,
                    len,
                    size: entry.logical_size,
                });
            }
            return Ok(Vec::new());
        }
        self.download_range(workbench_id, path, offset, len, None, None)
    }

    /// The non-empty range read behind the `read_range*` methods: downloads
    /// `[offset, offset + len)` (`len > 0`) at `version` / only at `generation` when given and
    /// checks that exactly `len` bytes came back.
    fn download_range(
        &self,
        workbench_id: &str,
        path: &str,
        offset: u64,
        len: u64,
        version: Option<u64>,
        generation: Option<u64>,
    ) -> Result<Vec<u8>> {
        let end = offset.checked_add(len - 1).ok_or(Error::RangeOutOfBounds {
            offset,
            len,
            size: 0,
        })?;
        let (bytes, size) = self.download(
            workbench_id,
            path,
            Some((offset, end)),
            version,
            generation,
            &mut |r, out| std::io::copy(r, out),
        )?;
        if bytes.len() as u64 != len {
            return Err(Error::RangeOutOfBounds { offset, len, size });
        }
        Ok(bytes)
    }

    /// Reads `[offset, offset + len)` of the artifact at `path` as of read version `version`
    /// (MVCC: e.g. a leased snapshot's read version, whose history the lease holds). `len = 0`
    /// reads nothing and sends nothing.
    ///
    /// Errors: as [`RemoteClient::read_range`]; a version the store no longer holds fails with
    /// the server's error.
    pub fn read_range_at(
        &self,
        workbench_id: &str,
        path: &str,
        version: u64,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        self.download_range(workbench_id, path, offset, len, Some(version), None)
    }

    /// Reads `[offset, offset + len)` of the artifact at `path` (live state) only while the path
    /// is still at `generation`: the read of a file object pinned to one revision. `len = 0`
    /// reads nothing and sends nothing.
    ///
    /// Errors: [`Error::GenerationConflict`] when the path now holds another generation (it was
    /// replaced or removed and published again; the bytes of the other revision are dropped
    /// unread); otherwise as [`RemoteClient::read_range`].
    pub fn read_range_of_generation(
        &self,
        workbench_id: &str,
        path: &str,
        offset: u64,
        len: u64,
        generation: u64,
    ) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        self.download_range(workbench_id, path, offset, len, None, Some(generation))
    }

    /// Reads the whole artifact at `path` (live state).
    ///
    /// Errors: as [`RemoteClient::stat`]; [`Error::OperationFailed`] `ObjectUnavailable` when a
    /// block of the body is lost or damaged (see [`RemoteClient::read_to_writer_at`]).
    pub fn read_all(&self, workbench_id: &str, path: &str) -> Result<Vec<u8>> {
        self.download(workbench_id, path, None, None, None, &mut |r, out| {
            std::io::copy(r, out)
        })
        .map(|(b, _)| b)
    }

    /// Downloads a body (or the inclusive byte range `range`), at `version` when given, through
    /// `copy`; returns the bytes and the body size. With `generation`, a body at another
    /// generation (the server's `x-nokv-generation`) is [`Error::GenerationConflict`], unread.
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    fn download(
        &self,
        workbench_id: &str,
        path: &str,
        range: Option<(u64, u64)>,
        version: Option<u64>,
        generation: Option<u64>,
        copy: &mut dyn FnMut(&mut dyn Read, &mut Vec<u8>) -> std::io::Result<u64>,
    ) -> Result<(Vec<u8>, u64)> {
        let mut target = format!(
            "/v1/workbenches/{}/files/{}",
            encode_component(workbench_id),
            encode_path(path)
        );
        if let Some(v) = version {
            target.push_str(&format!("?version={v}"));
        }
        let extra: Vec<(&str, String)> = range
            .map(|(a, b)| vec![("Range", format!("bytes={a}-{b}"))])
            .unwrap_or_default();
        self.retrying(|| {
            let mut resp = self.exchange("GET", &target, None, &extra, Payload::None)?;
            let status = resp.status().as_u16();
            let size = header(&resp, "content-range")
                .and_then(|v| v.rsplit('/').next())
                .and_then(|v| v.parse().ok())
                .or_else(|| header(&resp, "content-length").and_then(|v| v.parse().ok()))
                .unwrap_or(0u64);
            if let (Some(expected), 200 | 206 | 416) = (generation, status) {
                let actual = header(&resp, "x-nokv-generation").and_then(|v| v.parse::<u64>().ok());
                if actual != Some(expected) {
                    return Err(Error::GenerationConflict {
                        path: path.to_string(),
                        expected: Some(expected),
                        actual,
                    });
                }
            }
            match status {
                200 | 206 => {
                    let start = range.map_or(0, |r| r.0);
                    let end = if status == 200 {
                        Some(size)
                    } else {
                        content_range_end(&resp)
                    };
                    let answered = header(&resp, "x-nokv-generation").map(str::to_string);
                    let mut out = Vec::new();
                    let mut body = resp.body_mut().as_reader();
                    if let Err(e) = copy(&mut body, &mut out) {
                        let at = start + out.len() as u64;
                        self.resume_download(
                            &target,
                            at,
                            end,
                            answered.as_deref(),
                            e,
                            &mut out,
                            &mut |_| {},
                        )?;
                    }
                    Ok((out, size))
                }
                416 => Err(Error::RangeOutOfBounds {
                    offset: range.map_or(0, |r| r.0),
                    len: range.map_or(0, |r| r.1.saturating_sub(r.0) + 1),
                    size,
                }),
                _ => {
                    let v = self.read_envelope(resp)?;
                    envelope_result(v).map(|_| (Vec::new(), size))
                }
            }
        })
    }

    /// Finishes a body download from `target` that broke after its status line, `at` bytes into
    /// the body, with range requests of at most [`RESUME_CHUNK`] bytes up to `end` (exclusive;
    /// the body's size, or the end of the requested range), written to `out`; returns `end`.
    ///
    /// Once the server has sent `200` it can only end a failing stream by cutting the connection
    /// (a block it cannot read, a server that died, a network cut), and bytes it sent just before
    /// may be lost with the connection, so the break offset can lie before the block that
    /// failed. The range requests (the same read version when `target` names one) tell the cases
    /// apart and lose nothing: a block the server cannot serve answers with its error envelope
    /// (`ObjectUnavailable`, reason `object_missing` or `object_damaged`), returned as
    /// [`Error::OperationFailed`]; a transient cut is simply resumed. Each request either
    /// advances or ends the resume, so it ends after at most `(end - at) / RESUME_CHUNK + 1`
    /// requests.
    ///
    /// Errors: [`Error::OperationFailed`] as above; [`Error::Connection`] (retryable) when a
    /// range request cannot connect or breaks too, when `end` is unknown, or when the answer
    /// belongs to another generation than `generation` (the path was replaced meanwhile);
    /// [`Error::LocalIo`] when `out` fails.
    #[allow(clippy::too_many_arguments)]
    fn resume_download(
        &self,
        target: &str,
        mut at: u64,
        end: Option<u64>,
        generation: Option<&str>,
        broke: std::io::Error,
        out: &mut dyn std::io::Write,
        on_progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        let broke_at = at;
        let cut = |detail: String| Error::Connection {
            url: self.base.clone(),
            reason: format!("the body download broke after {broke_at} bytes: {broke}{detail}"),
        };
        let Some(end) = end else {
            return Err(cut(String::new()));
        };
        while at < end {
            let last = at.saturating_add(RESUME_CHUNK).min(end) - 1;
            let range = [("Range", format!("bytes={at}-{last}"))];
            let mut resp = match self.exchange("GET", target, None, &range, Payload::None) {
                Ok(r) => r,
                Err(e) => return Err(cut(format!("; resuming it failed: {e}"))),
            };
            if resp.status().as_u16() != 206 {
                return match self.read_envelope(resp).and_then(envelope_result) {
                    Err(e @ Error::OperationFailed { .. }) => Err(e),
                    _ => Err(cut(String::new())),
                };
            }
            if generation.is_some() && header(&resp, "x-nokv-generation") != generation {
                return Err(cut("; the path now holds another generation".into()));
            }
            let bytes = match resp
                .body_mut()
                .with_config()
                .limit(RESUME_CHUNK)
                .read_to_vec()
            {
                Ok(b) if b.len() as u64 == last - at + 1 => b,
                Ok(_) => return Err(cut("; a resumed range came back short".into())),
                Err(e) => return Err(cut(format!("; resuming it broke too: {e}"))),
            };
            out.write_all(&bytes).map_err(|source| Error::LocalIo {
                op: "write",
                path: std::path::PathBuf::from("<output>"),
                source,
            })?;
            at = last + 1;
            on_progress(at);
        }
        Ok(end)
    }

    /// Streams the body of `path` at read version `version` into `out` (materialize); returns
    /// the bytes written.
    ///
    /// A stream the server cuts is finished with range requests (see `resume_download`).
    ///
    /// Errors: as [`RemoteClient::stat`]; [`Error::OperationFailed`] `ObjectUnavailable` when
    /// a block of the body is lost or damaged; [`Error::Connection`] when the stream broke and
    /// could not be resumed.
    pub fn read_to_writer_at(
        &self,
        workbench_id: &str,
        path: &str,
        version: u64,
        out: &mut dyn std::io::Write,
        on_progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        let target = format!(
            "/v1/workbenches/{}/files/{}?version={version}",
            encode_component(workbench_id),
            encode_path(path)
        );
        let mut resp = self.exchange("GET", &target, None, &[], Payload::None)?;
        if resp.status().as_u16() != 200 {
            let v = self.read_envelope(resp)?;
            envelope_result(v)?;
            return Ok(0);
        }
        let size = header(&resp, "content-length").and_then(|v| v.parse::<u64>().ok());
        let answered = header(&resp, "x-nokv-generation").map(str::to_string);
        let mut body = resp.body_mut().as_reader();
        let mut buf = vec![0u8; 1 << 20];
        let mut written = 0u64;
        loop {
            let n = match body.read(&mut buf) {
                Ok(n) => n,
                Err(e) => {
                    return self.resume_download(
                        &target,
                        written,
                        size,
                        answered.as_deref(),
                        e,
                        out,
                        on_progress,
                    )
                }
            };
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n]).map_err(|source| Error::LocalIo {
                op: "write",
                path: std::path::PathBuf::from("<output>"),
                source,
            })?;
            written += n as u64;
            on_progress(written);
        }
        Ok(written)
    }

    /// Every artifact of `workbench_id` under `prefix`, with the read version they were listed
    /// at (see [`nokv::materialize::list_files`]).
    ///
    /// Errors: [`Error::OperationFailed`] (`NotFound`, …), [`Error::Connection`],
    /// [`Error::Server`].
    pub fn list_files(
        &self,
        workbench_id: &str,
        prefix: Option<&str>,
    ) -> Result<(u64, Vec<(meta::NormPath, meta::PathEntry)>)> {
        let mut target = format!("/v1/workbenches/{}/entries", encode_component(workbench_id));
        if let Some(p) = prefix {
            target.push_str(&format!("?prefix={}", encode_component(p)));
        }
        let v = self.retrying(|| {
            let resp = self.exchange("GET", &target, None, &[], Payload::None)?;
            self.read_envelope(resp)
        })?;
        let v = envelope_result(v)?;
        let version = v.get("read_version").and_then(Value::as_u64).unwrap_or(0);
        let mut files = Vec::new();
        for f in v
            .get("files")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let path = f.get("path").and_then(Value::as_str).unwrap_or_default();
            files.push((
                nokv::Client::normalize(path)?,
                entry_from_json(f.get("entry").unwrap_or(&Value::Null))?,
            ));
        }
        Ok((version, files))
    }

    /// Durable idempotent append (see [`nokv::Client::append_idempotent_with_create_type`]) →
    /// the envelope `nokv append` prints (success or error). `create_type`: the content type of
    /// a file the append creates when `content_type` is `None` (server default
    /// `text/plain; charset=utf-8`).
    ///
    /// Errors: [`Error::Connection`], [`Error::Server`].
    pub fn append_envelope(
        &self,
        workbench_id: &str,
        path: &str,
        bytes: &[u8],
        operation_id: &str,
        content_type: Option<&str>,
        create_type: Option<&str>,
    ) -> Result<Value> {
        let mut target = format!(
            "/v1/workbenches/{}/append/{}?operation_id={}",
            encode_component(workbench_id),
            encode_path(path),
            encode_component(operation_id)
        );
        if let Some(ct) = content_type {
            target.push_str(&format!("&content_type={}", encode_component(ct)));
        }
        if let Some(ct) = create_type {
            target.push_str(&format!("&create_content_type={}", encode_component(ct)));
        }
        let key = new_request_id()?;
        self.retrying(|| {
            let resp = self.exchange("POST", &target, Some(&key), &[], Payload::Bytes(bytes))?;
            self.read_json(resp)
        })
    }

    /// Durable idempotent append returning the receipt fields as the envelope's JSON object
    /// (see [`RemoteClient::append_envelope`]).
    ///
    /// Errors: [`Error::OperationFailed`] with the Workbench code, [`Error::Connection`],
    /// [`Error::Server`].
    pub fn append_idempotent(
        &self,
        workbench_id: &str,
        path: &str,
        bytes: &[u8],
        operation_id: [u8; 16],
        content_type: Option<&str>,
    ) -> Result<Value> {
        let hex = objstore::hex_lower(&operation_id);
        envelope_result(self.append_envelope(
            workbench_id,
            path,
            bytes,
            &hex,
            content_type,
            None,
        )?)
    }

    /// Opens the change feed (`GET /v1/changes`) and returns the response reader of its NDJSON
    /// lines (exactly what `nokv changes` prints).
    ///
    /// Errors: [`Error::Connection`], [`Error::Server`].
    pub fn changes_stream(&self, query: &str) -> Result<Box<dyn Read + Send>> {
        let target = format!("/v1/changes?{query}");
        let resp = self.exchange("GET", &target, None, &[], Payload::None)?;
        if resp.status().as_u16() != 200 {
            let v = self.read_json(resp)?;
            return Err(server_error(400, &v));
        }
        Ok(Box::new(resp.into_body().into_reader()))
    }
}

/// Most bytes one range request of a resumed download asks for (one 4 MiB block: the server
/// answers a range from memory).
const RESUME_CHUNK: u64 = 4 << 20;

/// The value of response header `name`, when present and visible ASCII.
fn header<'a>(resp: &'a ureq::http::Response<ureq::Body>, name: &str) -> Option<&'a str> {
    resp.headers().get(name)?.to_str().ok()
}

/// The exclusive end of the range a `206` answers (`Content-Range: bytes a-b/size` → `b + 1`).
fn content_range_end(resp: &ureq::http::Response<ureq::Body>) -> Option<u64> {
    let v = header(resp, "content-range")?;
    let (_, span) = v.split_once(' ')?;
    let (range, _) = span.split_once('/')?;
    let (_, last) = range.split_once('-')?;
    last.parse::<u64>().ok()?.checked_add(1)
}

/// Whether an error code is a transport refusal of the server (not a Workbench code).
fn is_transport_code(code: &Value) -> bool {
    matches!(
        code.as_str(),
        Some(
            "Unauthorized"
                | "Timeout"
                | "Unavailable"
                | "RequestInFlight"
                | "RequestIdReused"
                | "OutcomeUnknown"
                | "Internal"
                | "NotOwner"
                | "LeaseLost"
                | "UnknownRoot"
        )
    )
}

fn server_error(status: u16, v: &Value) -> Error {
    Error::Server {
        status,
        code: v
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("Internal")
            .to_string(),
        message: v
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the server refused the request")
            .to_string(),
        retryable: v.get("retryable").and_then(Value::as_bool).unwrap_or(false) || status == 503,
        details: Box::new(
            v.get("details")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        ),
    }
}

/// A success envelope as is; an error envelope as [`Error::OperationFailed`] with its code.
pub fn envelope_result(v: Value) -> Result<Value> {
    if v.get("status").and_then(Value::as_str) == Some("success") {
        return Ok(v);
    }
    Err(Error::OperationFailed {
        code: v
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("Internal")
            .to_string(),
        message: v
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the operation failed")
            .to_string(),
    })
}

/// A [`meta::PathEntry`] from its JSON card (`server::routes::entry_json`).
fn entry_from_json(v: &Value) -> Result<meta::PathEntry> {
    use base64::Engine as _;
    let bad = |what: &str| Error::Connection {
        url: String::new(),
        reason: format!("the server's path entry lacks a valid {what}"),
    };
    let s = |k: &str| -> Result<String> {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| bad(k))
    };
    let n = |k: &str| -> Result<u64> { v.get(k).and_then(Value::as_u64).ok_or_else(|| bad(k)) };
    let mut projection = Vec::new();
    for pair in v
        .get("index_projection")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = pair
            .get(0)
            .and_then(Value::as_str)
            .ok_or_else(|| bad("index_projection"))?;
        let bytes = pair
            .get(1)
            .and_then(Value::as_str)
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .ok_or_else(|| bad("index_projection"))?;
        projection.push((name.to_string(), bytes));
    }
    Ok(meta::PathEntry {
        generation: n("generation")?,
        artifact_revision_id: meta::ArtifactRevisionId::from_hex(&s("artifact_revision_id")?)
            .map_err(|_| bad("artifact_revision_id"))?,
        logical_size: n("logical_size")?,
        body_digest_uri: s("body_digest_uri")?,
        manifest_digest_uri: s("manifest_digest_uri")?,
        dependency_count: u32::try_from(n("dependency_count")?)
            .map_err(|_| bad("dependency_count"))?,
        dependency_depth: u32::try_from(n("dependency_depth")?)
            .map_err(|_| bad("dependency_depth"))?,
        content_type: s("content_type")?,
        producer: s("producer")?,
        manifest_id: v
            .get("manifest_id")
            .and_then(Value::as_str)
            .map(str::to_string),
        created_version: n("created_version")?,
        modified_version: n("modified_version")?,
        index_projection: projection,
    })
}

/// One typed index field as the `name:TYPE=value` spec the server parses with
/// [`nokv::index_fields::parse_field_arg`] (the CLI's `--field` syntax).
///
/// Errors: [`Error::InvalidArgument`] for a byte-string value (no `--field` type carries one).
fn field_arg(name: &str, value: &nokv::IndexValue) -> Result<String> {
    use nokv::IndexValue as V;
    Ok(match value {
        V::Null => format!("{name}=null"),
        V::Bool(b) => format!("{name}:bool={b}"),
        V::Int(i) => format!("{name}:int={i}"),
        V::UInt(u) => format!("{name}:uint={u}"),
        V::Float(f) => format!("{name}:float={:?}", f.get()),
        V::Timestamp(t) => format!("{name}:ts={}", t.to_rfc3339()),
        V::String(s) => format!("{name}:str={s}"),
        V::Bytes(_) => {
            return Err(Error::InvalidArgument(format!(
                "index field `{name}`: byte-string values cannot be sent to a server"
            )))
        }
    })
}
