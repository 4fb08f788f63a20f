//! The client core: [`RemoteClient`], its constructors (one server, or a root routed through
//! the control plane) and the transport every call goes through — one HTTP exchange, the retry
//! and re-routing policy, JSON bodies and refusals — plus the two protocol-level calls,
//! [`RemoteClient::call_tool`] and [`RemoteClient::command`]. The data path (`files.rs`) and
//! object lifetime (`lifetime.rs`) add their operations over this core.

use std::io::Read;
use std::time::Duration;

use serde_json::Value;

use nokv::error::{Error, Result};

use crate::routing;
use crate::wire::{encode_component, new_request_id, server_error};

/// Default number of retries after a connection failure or a retryable refusal.
pub const DEFAULT_RETRIES: u32 = 4;

/// A client of one NoKV server. Cheap to clone (connections are pooled and shared).
#[derive(Clone)]
pub struct RemoteClient {
    pub(crate) base: String,
    pub(crate) token: Option<String>,
    pub(crate) agent: ureq::Agent,
    pub(crate) retries: u32,
    pub(crate) routing: Option<std::sync::Arc<routing::Routing>>,
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

/// One prepared request body.
pub(crate) enum Payload<'a> {
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
    pub(crate) fn target(&self) -> Result<String> {
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

    pub(crate) fn connection_error(&self, e: &ureq::Error) -> Error {
        Error::Connection {
            url: self.base.clone(),
            reason: e.to_string(),
        }
    }

    /// One HTTP exchange (no retry). Returns the status, the response headers of interest and
    /// the response for the caller to read.
    pub(crate) fn exchange(
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
    pub(crate) fn json_body(
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
    pub(crate) fn read_json(&self, mut resp: ureq::http::Response<ureq::Body>) -> Result<Value> {
        let (status, value) = self.json_body(&mut resp, 512 << 20)?;
        if status == 200 {
            return Ok(value);
        }
        Err(self.refused(status, &value))
    }

    /// A transport refusal as [`Error::Server`]; a `NotOwner` / `LeaseLost` answer also drops
    /// the cached owner of a routed client.
    pub(crate) fn refused(&self, status: u16, value: &Value) -> Error {
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
    pub(crate) fn retrying<T>(&self, mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
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
    pub(crate) fn post_json(&self, path: &str, body: &Value, write: bool) -> Result<Value> {
        let bytes = serde_json::to_vec(body).map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let key = if write { Some(new_request_id()?) } else { None };
        self.retrying(|| {
            let resp = self.exchange("POST", path, key.as_deref(), &[], Payload::Bytes(&bytes))?;
            self.read_json(resp)
        })
    }

    /// `GET` of a JSON envelope (retried on connection failures).
    pub(crate) fn get_json(&self, path: &str) -> Result<Value> {
        self.retrying(|| {
            let resp = self.exchange("GET", path, None, &[], Payload::None)?;
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

    /// `POST /v1/tools/{tool}?request_id=HEX32`: `workbench_put_file` under the caller's request
    /// id (see `nokv::workbench::Workbench::call_with_request_id`); the server's store dedupes
    /// it, so resends after a lost answer (retried like every write) and reruns in later
    /// processes return the first receipt with `idempotent_replay: true`.
    ///
    /// Errors: [`Error::Connection`], [`Error::Server`].
    pub fn call_tool_with_request_id(
        &self,
        tool: &str,
        input: &Value,
        request_id: [u8; 16],
    ) -> Result<Value> {
        self.post_json(
            &format!(
                "/v1/tools/{}?request_id={}",
                encode_component(tool),
                objstore::hex_lower(&request_id)
            ),
            input,
            true,
        )
    }

    /// Runs one of the CLI's commands on the server (`name`: `commit`, `tag`, `find`,
    /// `snapshot`, `restore`, `operation`, `demo`; `args`: the command's arguments as the
    /// protocol DTO, see `docs/server.md`) and returns what the CLI prints.
    ///
    /// Errors: [`Error::Connection`], [`Error::Server`].
    pub fn command(&self, name: &str, args: &Value) -> Result<CommandOutput> {
        let write = !matches!(name, "find" | "ls" | "tree" | "log");
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
}
