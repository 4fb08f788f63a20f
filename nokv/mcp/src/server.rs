//! The MCP protocol side: the `rmcp` server handler, call admission and the serve loop with its
//! shutdown sequence.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer, RunningService, ServerInitializeError};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::backend::{envelope_is_success, tool_hints, ToolBackend};
use crate::framing::{self, AnsweringTransport, CheckedReader};
use nokv::access::{check_tool, is_reading_tool, ScopeSet};
use nokv::workbench::errors::{ErrorCode, ToolError};
use nokv::workbench::schema;

/// Limits of one MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpOptions {
    /// Most tool calls running at once (default 8; clamped to 1..=1024); further calls wait for
    /// a slot.
    pub max_concurrent_calls: usize,
    /// Largest accepted JSON-RPC message (one stdin line) in bytes (default 128 MiB: a 16 MiB
    /// payload survives base64 or worst-case JSON string escaping). A longer line is dropped
    /// without being buffered and without an answer (no id can be read from a line that is
    /// not read); the session goes on.
    pub max_message_bytes: usize,
    /// The read-only profile (`nokv mcp --read-only`, default false): `tools/list` offers only
    /// the nine reading tools, and a call of any other tool answers the `Forbidden` envelope
    /// (`details.missing_scope`, e.g. `write:run-1`) without reaching the backend.
    pub read_only: bool,
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            max_concurrent_calls: 8,
            max_message_bytes: 128 * 1024 * 1024,
            read_only: false,
        }
    }
}

/// How a [`serve`] session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeOutcome {
    /// The client closed the input (stdin EOF) after the session started.
    InputClosed,
    /// The input closed before any message arrived.
    ClosedBeforeInitialize,
    /// The shutdown future completed (SIGTERM or SIGINT for [`run_stdio`]).
    Signalled,
}

/// Server instructions sent with `initialize`.
const INSTRUCTIONS: &str = "NoKV workbenches: durable, versioned places for an agent's inputs, \
scripts, outputs, logs and metadata. Create a workbench, write files into one of its five \
sections, read, grep and query them, commit the result with a manifest, snapshot and restore. \
Every tool returns one JSON envelope: {\"status\":\"success\", ...} or {\"status\":\"error\", \
\"code\", \"message\", \"retryable\", \"details\"}; retry a call unchanged only when retryable is \
true.";

/// Upper bound of [`McpOptions::max_concurrent_calls`] (larger values are clamped).
const MAX_CONCURRENT_CALLS: usize = 1024;

/// Admission of tool calls: at most `max` at once, none after shutdown began.
#[derive(Debug)]
struct CallGate {
    permits: Arc<Semaphore>,
    max: u32,
    closing: AtomicBool,
}

impl CallGate {
    fn new(max: usize) -> CallGate {
        let max = max.clamp(1, MAX_CONCURRENT_CALLS);
        CallGate {
            permits: Arc::new(Semaphore::new(max)),
            max: u32::try_from(max).unwrap_or(1),
            closing: AtomicBool::new(false),
        }
    }

    /// A slot for one call; `None` once shutdown began.
    async fn enter(&self) -> Option<OwnedSemaphorePermit> {
        if self.closing.load(Ordering::SeqCst) {
            return None;
        }
        Arc::clone(&self.permits).acquire_owned().await.ok()
    }

    /// Refuses new calls and waits until every running call returned its slot. Idempotent.
    async fn close_and_drain(&self) {
        self.closing.store(true, Ordering::SeqCst);
        if let Ok(all) = self.permits.acquire_many(self.max).await {
            self.permits.close();
            drop(all);
        }
    }
}

/// The `rmcp` server handler over a [`ToolBackend`].
struct NokvMcp {
    backend: Arc<dyn ToolBackend>,
    tools: Arc<Vec<Tool>>,
    gate: Arc<CallGate>,
    /// The session's ledger: a call starts in its turn of arrival (see [`framing::wait_turn`]).
    ledger: framing::SharedLedger,
    /// What the session may call: everything, or `read` only ([`McpOptions::read_only`]).
    scopes: ScopeSet,
    /// The read-only profile ([`McpOptions::read_only`]).
    read_only: bool,
}

impl ServerHandler for NokvMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("nokv", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let input = Value::Object(request.arguments.unwrap_or_default());
        let name = request.name.into_owned();
        // Calls sent together take effect in the order they were sent: a write waits for every
        // earlier call's answer, a read for every earlier write's.
        framing::wait_turn(&self.ledger, &context.id).await;
        if let Err(mut refused) = check_tool(&self.scopes, None, &name, &input) {
            if self.read_only {
                // No token is involved in the read-only profile: say what the session offers.
                let missing = refused
                    .details
                    .get("missing_scope")
                    .and_then(Value::as_str)
                    .unwrap_or("write")
                    .to_string();
                refused.message = format!(
                    "this MCP session is read-only (nokv mcp --read-only, or a server token that \
                     may only read) and offers only the nine reading tools; {name} needs the \
                     scope {missing}"
                );
            }
            return Ok(CallToolResponse::from(tool_result(refused.envelope())));
        }
        let envelope = match self.gate.enter().await {
            None => ToolError::new(
                ErrorCode::InvalidState,
                "the NoKV MCP server is shutting down; start it again and repeat the call",
            )
            .with_detail("reason", "shutting_down")
            .envelope(),
            Some(permit) => {
                let backend = Arc::clone(&self.backend);
                // The permit lives as long as the blocking work, so a drain waits for the work
                // itself even when the protocol side stopped waiting for the answer.
                let work = tokio::task::spawn_blocking(move || {
                    let envelope = backend.call(&name, &input);
                    drop(permit);
                    envelope
                });
                match work.await {
                    Ok(envelope) => envelope,
                    Err(_) => ToolError::internal(
                        "the tool call stopped on an internal fault before it answered; a write \
                         is either complete or invisible — check with workbench_stat, then retry",
                    )
                    .envelope(),
                }
            }
        };
        Ok(CallToolResponse::from(tool_result(envelope)))
    }
}

/// The `tools/call` result of an envelope: the envelope as `structuredContent`, the same as
/// compact JSON text in `content`, `isError` exactly when it is not a success.
fn tool_result(envelope: Value) -> CallToolResult {
    if envelope_is_success(&envelope) {
        CallToolResult::structured(envelope)
    } else {
        CallToolResult::structured_error(envelope)
    }
}

/// The 18 tools (the nine reading tools with `read_only`) as MCP tool definitions:
/// `nokv schema`'s name, description and input schema, plus behaviour annotations from
/// [`tool_hints`].
///
/// Errors: `InvalidData` when the built-in schema document does not hold an object schema for
/// every tool (a broken build).
fn tool_definitions(read_only: bool) -> io::Result<Vec<Tool>> {
    schema::TOOL_NAMES
        .iter()
        .filter(|name| !read_only || is_reading_tool(name))
        .map(|name| {
            let Some(input_schema) = schema::input_schema(name).as_object() else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("the built-in input schema of {name} is missing"),
                ));
            };
            let mut tool = Tool::new(
                *name,
                schema::tool_description(name),
                Arc::new(input_schema.clone()),
            );
            if let Some(h) = tool_hints(name) {
                tool = tool.with_annotations(
                    ToolAnnotations::new()
                        .read_only(h.read_only)
                        .destructive(h.destructive)
                        .idempotent(h.idempotent)
                        .open_world(false),
                );
            }
            Ok(tool)
        })
        .collect()
}

/// Serves one MCP session over `read`/`write` (newline-delimited JSON-RPC) until the input
/// closes or `shutdown` completes, then drains and closes: new tool calls are refused, calls in
/// flight finish (their answers are still written when the session is alive), and
/// [`ToolBackend::close`] releases the backend.
///
/// When the input closes, the session ends only after every request read has been answered
/// (calls still running and calls read but not yet started alike). A line that is not JSON is
/// answered with the JSON-RPC parse error (`-32700`, `id` null); a `tools/call` or `tools/list`
/// whose params have the wrong shape (e.g. `arguments` not an object) with `-32602` under the
/// request's id. Neither ends the session.
///
/// Errors: the session could not start (the first message was not a valid opening of an MCP
/// session, or writing to `write` failed) or the session task failed; the backend is closed in
/// every case.
pub async fn serve<R, W, S>(
    backend: Arc<dyn ToolBackend>,
    read: R,
    write: W,
    options: &McpOptions,
    shutdown: S,
) -> io::Result<ServeOutcome>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
    S: Future<Output = ()>,
{
    let tools = Arc::new(tool_definitions(options.read_only)?);
    let gate = Arc::new(CallGate::new(options.max_concurrent_calls));
    let ledger = framing::new_ledger();
    let handler = NokvMcp {
        backend: Arc::clone(&backend),
        tools,
        gate: Arc::clone(&gate),
        ledger: Arc::clone(&ledger),
        scopes: if options.read_only {
            ScopeSet::read_only()
        } else {
            ScopeSet::admin()
        },
        read_only: options.read_only,
    };
    let max_line = options.max_message_bytes.max(1);
    let (write, outbox, outbox_task) = framing::output(write, &ledger);
    let outbox_task = tokio::spawn(outbox_task);
    let read = CheckedReader::new(read, max_line, outbox.clone());
    let transport = AnsweringTransport::new(
        AsyncRwTransport::new_server(read, write).with_max_line_length(max_line),
        ledger,
        outbox,
    );
    tokio::pin!(shutdown);
    let started = tokio::select! {
        started = handler.serve(transport) => Some(started),
        () = &mut shutdown => None,
    };
    let outcome = match started {
        None => Ok(ServeOutcome::Signalled),
        Some(Ok(running)) => run(running, &gate, shutdown).await,
        Some(Err(ServerInitializeError::ConnectionClosed(_))) => {
            Ok(ServeOutcome::ClosedBeforeInitialize)
        }
        Some(Err(e)) => Err(io::Error::other(format!(
            "the MCP session could not start: {e}"
        ))),
    };
    gate.close_and_drain().await;
    backend.close();
    outbox_task.abort();
    outcome
}

/// Runs a started session until the input closes or `shutdown` completes.
async fn run<S>(
    running: RunningService<RoleServer, NokvMcp>,
    gate: &CallGate,
    shutdown: std::pin::Pin<&mut S>,
) -> io::Result<ServeOutcome>
where
    S: Future<Output = ()>,
{
    let token = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    let ended = tokio::select! {
        quit = &mut waiting => Some(quit),
        () = shutdown => None,
    };
    match ended {
        Some(quit) => {
            quit.map_err(|e| io::Error::other(format!("the MCP session task failed: {e}")))?;
            Ok(ServeOutcome::InputClosed)
        }
        None => {
            // Let the calls in flight finish while the session can still write their answers,
            // then stop reading.
            gate.close_and_drain().await;
            token.cancel();
            let _ = (&mut waiting).await;
            Ok(ServeOutcome::Signalled)
        }
    }
}

/// `nokv mcp`: serves `backend` on this process's stdin/stdout until stdin closes, SIGTERM or
/// SIGINT (see [`serve`]); logs one line at start and one at the end on stderr, never on stdout.
///
/// Errors: the tokio runtime or the signal handlers could not be set up, or [`serve`] failed.
pub fn run_stdio(backend: Arc<dyn ToolBackend>, options: &McpOptions) -> io::Result<ServeOutcome> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("nokv-mcp")
        .enable_all()
        .build()?;
    eprintln!(
        "nokv mcp: serving {} over stdio; calls go to the {}",
        if options.read_only {
            "the 9 reading Workbench tools (read-only profile)"
        } else {
            "the 18 Workbench tools"
        },
        backend.describe()
    );
    let result = runtime.block_on(async {
        let shutdown = shutdown_signal()?;
        serve(
            Arc::clone(&backend),
            tokio::io::stdin(),
            tokio::io::stdout(),
            options,
            shutdown,
        )
        .await
    });
    // A read of stdin that is still blocked (shutdown by signal) cannot be cancelled; do not
    // wait for it.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match &result {
        Ok(outcome) => eprintln!("nokv mcp: stopped ({outcome:?}); the backend is closed"),
        Err(e) => eprintln!("nokv mcp: {e}"),
    }
    result
}

/// Completes on the first SIGTERM or SIGINT. Must be called inside the runtime.
#[cfg(unix)]
fn shutdown_signal() -> io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

/// Completes on Ctrl-C. Must be called inside the runtime.
#[cfg(not(unix))]
fn shutdown_signal() -> io::Result<impl Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

#[cfg(test)]
mod tests {
    //! The protocol layer over an in-memory pipe with scripted backends (the real facade is
    //! exercised through the binary in `nokv/cli/tests/mcp_*.rs`).

    use super::*;
    use serde_json::json;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

    /// Answers every call with a success envelope naming the tool, after an optional gate.
    #[derive(Default)]
    struct Scripted {
        running: AtomicUsize,
        most_running: AtomicUsize,
        calls: AtomicUsize,
        closed_after_calls: Mutex<Option<usize>>,
        /// When set, each call announces itself on `started` and waits for `release`.
        hold: Option<(
            std::sync::mpsc::SyncSender<()>,
            Mutex<std::sync::mpsc::Receiver<()>>,
        )>,
        pause: Duration,
    }

    impl ToolBackend for Scripted {
        fn call(&self, tool: &str, input: &Value) -> Value {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_running.fetch_max(now, Ordering::SeqCst);
            if let Some((started, release)) = &self.hold {
                let _ = started.send(());
                let _ = release.lock().unwrap().recv();
            }
            std::thread::sleep(self.pause);
            self.running.fetch_sub(1, Ordering::SeqCst);
            self.calls.fetch_add(1, Ordering::SeqCst);
            if tool == "fail" {
                return ToolError::internal("scripted failure").envelope();
            }
            json!({"status": "success", "tool": tool, "input": input})
        }

        fn describe(&self) -> String {
            "scripted".into()
        }

        fn close(&self) {
            *self.closed_after_calls.lock().unwrap() = Some(self.calls.load(Ordering::SeqCst));
        }
    }

    struct Peer {
        write: tokio::io::WriteHalf<DuplexStream>,
        lines: Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    }

    impl Peer {
        async fn send(&mut self, msg: Value) {
            self.send_raw(&msg.to_string()).await;
        }

        async fn send_raw(&mut self, line: &str) {
            self.write.write_all(line.as_bytes()).await.unwrap();
            self.write.write_all(b"\n").await.unwrap();
            self.write.flush().await.unwrap();
        }

        async fn next(&mut self) -> Value {
            let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
                .await
                .expect("an answer within 30 s")
                .unwrap()
                .expect("the server closed its output");
            serde_json::from_str(&line).unwrap()
        }

        async fn initialize(&mut self) {
            self.send(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"}}}),
            )
            .await;
            let init = self.next().await;
            assert_eq!(init["id"], 0, "{init}");
            self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await;
        }

        async fn call(&mut self, id: u64, tool: &str) {
            self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": {"n": id}}}))
                .await;
        }
    }

    /// Starts `serve` on an in-memory pipe; returns the client side and the server task.
    fn start(
        backend: Arc<Scripted>,
        options: McpOptions,
        shutdown: tokio::sync::oneshot::Receiver<()>,
    ) -> (Peer, tokio::task::JoinHandle<io::Result<ServeOutcome>>) {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (sr, sw) = tokio::io::split(server);
        let task = tokio::spawn(async move {
            serve(backend, sr, sw, &options, async {
                let _ = shutdown.await;
            })
            .await
        });
        let (cr, cw) = tokio::io::split(client);
        (
            Peer {
                write: cw,
                lines: BufReader::new(cr).lines(),
            },
            task,
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn results_carry_the_envelope_and_is_error_follows_its_status() {
        let backend = Arc::new(Scripted::default());
        let (_stop, stop_rx) = tokio::sync::oneshot::channel();
        let (mut peer, task) = start(Arc::clone(&backend), McpOptions::default(), stop_rx);
        peer.initialize().await;
        peer.call(1, "workbench_stat").await;
        let ok = peer.next().await;
        assert_eq!(ok["result"]["isError"], false);
        assert_eq!(
            ok["result"]["structuredContent"],
            json!({"status": "success", "tool": "workbench_stat", "input": {"n": 1}})
        );
        peer.call(2, "fail").await;
        let err = peer.next().await;
        assert_eq!(err["result"]["isError"], true);
        assert_eq!(err["result"]["structuredContent"]["code"], "Internal");
        let text = err["result"]["content"][0]["text"].as_str().unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap(),
            err["result"]["structuredContent"]
        );
        drop(peer);
        assert_eq!(task.await.unwrap().unwrap(), ServeOutcome::InputClosed);
        assert_eq!(*backend.closed_after_calls.lock().unwrap(), Some(2));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_beyond_the_limit_wait_for_a_slot() {
        let backend = Arc::new(Scripted {
            pause: Duration::from_millis(30),
            ..Scripted::default()
        });
        let options = McpOptions {
            max_concurrent_calls: 2,
            ..McpOptions::default()
        };
        let (_stop, stop_rx) = tokio::sync::oneshot::channel();
        let (mut peer, task) = start(Arc::clone(&backend), options, stop_rx);
        peer.initialize().await;
        for id in 1..=8 {
            peer.call(id, "workbench_list").await;
        }
        let mut ids = Vec::new();
        for _ in 1..=8 {
            let msg = peer.next().await;
            assert_eq!(msg["result"]["isError"], false, "{msg}");
            ids.push(msg["id"].as_u64().unwrap());
        }
        ids.sort_unstable();
        assert_eq!(ids, (1..=8).collect::<Vec<_>>());
        assert!(backend.most_running.load(Ordering::SeqCst) <= 2);
        drop(peer);
        task.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_answers_the_call_in_flight_before_closing_the_backend() {
        let (started_tx, started_rx) = std::sync::mpsc::sync_channel(1);
        let (release_tx, release_rx) = std::sync::mpsc::channel();
        let backend = Arc::new(Scripted {
            hold: Some((started_tx, Mutex::new(release_rx))),
            ..Scripted::default()
        });
        let (stop, stop_rx) = tokio::sync::oneshot::channel();
        let (mut peer, task) = start(Arc::clone(&backend), McpOptions::default(), stop_rx);
        peer.initialize().await;
        peer.call(7, "workbench_put_file").await;
        tokio::task::spawn_blocking(move || started_rx.recv().unwrap())
            .await
            .unwrap();
        stop.send(()).unwrap();
        // The server is draining: the backend is not closed while the call still runs.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(*backend.closed_after_calls.lock().unwrap(), None);
        release_tx.send(()).unwrap();
        let answer = peer.next().await;
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        assert_eq!(task.await.unwrap().unwrap(), ServeOutcome::Signalled);
        assert_eq!(*backend.closed_after_calls.lock().unwrap(), Some(1));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn input_closed_with_calls_running_or_queued_answers_every_one() {
        let backend = Arc::new(Scripted {
            pause: Duration::from_millis(5),
            ..Scripted::default()
        });
        let options = McpOptions {
            max_concurrent_calls: 2,
            ..McpOptions::default()
        };
        let (_stop, stop_rx) = tokio::sync::oneshot::channel();
        let (mut peer, task) = start(Arc::clone(&backend), options, stop_rx);
        peer.initialize().await;
        for id in 1..=100 {
            peer.call(id, "workbench_put_file").await;
        }
        // End of input right after the last call: most calls are still queued or running.
        peer.write.shutdown().await.unwrap();
        let mut ids = Vec::new();
        while let Ok(Some(line)) =
            tokio::time::timeout(Duration::from_secs(30), peer.lines.next_line())
                .await
                .expect("an answer or the end of output within 30 s")
        {
            let msg: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(msg["result"]["isError"], false, "{msg}");
            ids.push(msg["id"].as_u64().unwrap());
        }
        ids.sort_unstable();
        assert_eq!(ids, (1..=100).collect::<Vec<_>>(), "one answer per call");
        assert_eq!(task.await.unwrap().unwrap(), ServeOutcome::InputClosed);
        assert_eq!(*backend.closed_after_calls.lock().unwrap(), Some(100));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_call_is_not_waited_for_at_end_of_input() {
        let (started_tx, started_rx) = std::sync::mpsc::sync_channel(1);
        let (release_tx, release_rx) = std::sync::mpsc::channel();
        let backend = Arc::new(Scripted {
            hold: Some((started_tx, Mutex::new(release_rx))),
            ..Scripted::default()
        });
        let (_stop, stop_rx) = tokio::sync::oneshot::channel();
        let (mut peer, task) = start(Arc::clone(&backend), McpOptions::default(), stop_rx);
        peer.initialize().await;
        peer.call(9, "workbench_put_file").await;
        tokio::task::spawn_blocking(move || started_rx.recv().unwrap())
            .await
            .unwrap();
        peer.send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 9, "reason": "no longer needed"}}),
        )
        .await;
        peer.write.shutdown().await.unwrap();
        release_tx.send(()).unwrap();
        // The SDK answers no cancelled request; the session ends without its answer.
        let ended = tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("the session ends within 30 s");
        assert_eq!(ended.unwrap().unwrap(), ServeOutcome::InputClosed);
        assert_eq!(*backend.closed_after_calls.lock().unwrap(), Some(1));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_oversized_message_is_dropped_without_ending_the_session() {
        let backend = Arc::new(Scripted::default());
        let options = McpOptions {
            max_message_bytes: 4096,
            ..McpOptions::default()
        };
        let (_stop, stop_rx) = tokio::sync::oneshot::channel();
        let (mut peer, task) = start(Arc::clone(&backend), options, stop_rx);
        peer.initialize().await;
        let big = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "workbench_put_file", "arguments": {"text": "x".repeat(10_000)}}});
        peer.send(big).await;
        // The SDK drops a line over the limit without buffering it (there is no id to answer);
        // the next message is served normally.
        peer.call(2, "workbench_stat").await;
        let ok = peer.next().await;
        assert_eq!(ok["id"], 2, "{ok}");
        assert_eq!(ok["result"]["isError"], false);
        assert_eq!(
            backend.calls.load(Ordering::SeqCst),
            1,
            "the oversized call never ran"
        );
        drop(peer);
        task.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn input_closed_before_any_message_ends_cleanly() {
        let backend = Arc::new(Scripted::default());
        let (_stop, stop_rx) = tokio::sync::oneshot::channel();
        let (peer, task) = start(Arc::clone(&backend), McpOptions::default(), stop_rx);
        drop(peer);
        assert_eq!(
            task.await.unwrap().unwrap(),
            ServeOutcome::ClosedBeforeInitialize
        );
        assert_eq!(*backend.closed_after_calls.lock().unwrap(), Some(0));
    }

    #[test]
    fn read_only_tool_definitions_are_the_reading_tools_only() {
        let tools = tool_definitions(true).unwrap();
        assert_eq!(tools.len(), 9);
        for tool in &tools {
            assert!(
                tool_hints(&tool.name).is_some_and(|h| h.read_only),
                "{}",
                tool.name
            );
        }
    }

    #[test]
    fn tool_definitions_are_the_18_schema_tools() {
        let tools = tool_definitions(false).unwrap();
        assert_eq!(tools.len(), 18);
        for (tool, name) in tools.iter().zip(schema::TOOL_NAMES) {
            assert_eq!(tool.name, name);
            assert_eq!(
                Value::Object(tool.input_schema.as_ref().clone()),
                *schema::input_schema(name)
            );
            assert_eq!(
                tool.description.as_deref(),
                Some(schema::tool_description(name))
            );
        }
    }
}
