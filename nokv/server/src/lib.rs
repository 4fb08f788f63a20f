//! `nokv serve`: one long-running owner process serves many agents (see `docs/server.md`).
//!
//! The server owns the store (holt's directory lock: one owner process at a time) and answers
//! the versioned `/v1/` protocol over HTTP/1.1 (axum on hyper, tokio). Every endpoint calls the
//! same [`nokv::Client`] / Workbench facade / meta operations as the CLI; the command sequencer
//! of the shard (`meta::command::sequencer`) turns the concurrent requests of many agents into
//! pipelined group commits instead of racing writers.
//!
//! - `POST /v1/tools/{tool}`: the tool's JSON input → exactly the envelope `nokv workbench` prints
//!   (HTTP 200 for success and for tool errors);
//! - streaming uploads and downloads with range reads, the CLI's other commands as envelope
//!   endpoints, the change feed as a streaming follow, `/healthz` and Prometheus `/metrics`;
//! - a bearer token (`--token-file F` or `NOKV_TOKEN`) required on every request when set, and
//!   always on a non-loopback address (the server refuses to start without one);
//! - request-id replay: a write sent with `Idempotency-Key` is executed at most once; a retry after
//!   a lost response returns the original response (see [`journal`]);
//! - background: the snapshot reaper and publish-operation recovery, on intervals;
//! - SIGTERM / SIGINT: stop accepting, drain in-flight requests (bounded), close the store.
//!
//! Transport failures (auth, malformed DTOs, limits, timeouts) are 4xx/5xx with a JSON error
//! body of the envelope's shape ([`error::ApiError`]).

mod body;
pub mod control;
pub mod error;
mod feed;
pub mod journal;
mod lifetime;
pub mod metrics;
mod routes;

pub use nokv_protocol::headers::{CONTENT_SHA256, IDEMPOTENCY_KEY, REPLAYED};

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nokv::client::{Client, ClientOptions};
use nokv::error::{Error, Result};
use nokv::workbench::Workbench;

/// Configuration of one server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Store directory (created when missing).
    pub store: PathBuf,
    /// Listen address, e.g. `127.0.0.1:7070` (port 0: any free port).
    pub listen: String,
    /// Bearer token every request must carry (`Authorization: Bearer <token>`). Required when
    /// `listen` is not a loopback address.
    pub token: Option<String>,
    /// Largest JSON request body in bytes (tool inputs, DTOs; default 24 MiB: a 16 MiB payload
    /// in base64 plus its envelope).
    pub max_json_bytes: u64,
    /// Largest streamed upload in bytes (default 64 GiB).
    pub max_upload_bytes: u64,
    /// Largest `append` body in bytes (default 16 MiB, the Workbench payload bound).
    pub max_append_bytes: u64,
    /// Time allowed to receive the request head (slow-loris bound; default 10 s).
    pub header_timeout: Duration,
    /// Longest pause between two body frames of a request (default 30 s).
    pub body_idle_timeout: Duration,
    /// How long SIGTERM waits for in-flight requests before closing anyway (default 30 s).
    pub drain_timeout: Duration,
    /// Background maintenance interval (default 60 s; zero disables): each pass runs the
    /// snapshot reaper, then one GC pass ([`nokv::Client::start_background_maintenance`]);
    /// the request-journal compaction runs on the same interval.
    pub maintenance_interval: Duration,
    /// Publish-operation recovery interval (default 300 s; zero disables). One pass also runs
    /// when the store is opened.
    pub recovery_interval: Duration,
    /// How long finished write responses are kept for request-id replay (default 24 h).
    pub replay_retention: Duration,
    /// Shard-owner lease when the store's metadata lives in etcd (whole seconds, at least 2;
    /// default 10 s). The server stops committing before the lease can have expired
    /// (fail-stop), and another server may take the shard over once it lapses.
    pub owner_lease_ttl: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            store: PathBuf::from(".nokv"),
            listen: "127.0.0.1:7070".into(),
            token: None,
            max_json_bytes: 24 << 20,
            max_upload_bytes: 64 << 30,
            max_append_bytes: 16 << 20,
            header_timeout: Duration::from_secs(10),
            body_idle_timeout: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(30),
            maintenance_interval: Duration::from_secs(60),
            recovery_interval: Duration::from_secs(300),
            replay_retention: Duration::from_secs(24 * 3600),
            owner_lease_ttl: Duration::from_secs(10),
        }
    }
}

/// State shared by every request of one server.
pub(crate) struct AppState {
    pub(crate) client: Client,
    pub(crate) workbench: Workbench,
    pub(crate) opts: ServerOptions,
    pub(crate) metrics: metrics::Metrics,
    pub(crate) journal: journal::Journal,
}

/// Whether `addr` is a loopback address (127.0.0.0/8 or ::1).
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// Binds the listen address and checks the authentication rule. Errors:
/// [`Error::InvalidArgument`] for an unparsable address, an empty token, or a non-loopback
/// address without a token; [`Error::LocalIo`] when the address cannot be bound.
fn bind(opts: &ServerOptions) -> Result<(TcpListener, SocketAddr)> {
    let addr: SocketAddr = opts.listen.parse().map_err(|_| {
        Error::InvalidArgument(format!(
            "--listen {:?} is not an address such as 127.0.0.1:7070",
            opts.listen
        ))
    })?;
    if opts.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return Err(Error::InvalidArgument(
            "the bearer token is empty; put a secret in --token-file or NOKV_TOKEN".into(),
        ));
    }
    if opts.token.is_none() && !is_loopback(&addr) {
        return Err(Error::InvalidArgument(format!(
            "refusing to listen on non-loopback address {addr} without a bearer token \
             (--token-file F or NOKV_TOKEN)"
        )));
    }
    let listener = TcpListener::bind(addr).map_err(|source| Error::LocalIo {
        op: "bind",
        path: PathBuf::from(addr.to_string()),
        source,
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| Error::LocalIo {
            op: "listen",
            path: PathBuf::from(addr.to_string()),
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| Error::LocalIo {
        op: "local address",
        path: PathBuf::from(&opts.listen),
        source,
    })?;
    Ok((listener, bound))
}

/// The server thread of a [`RunningServer`] or [`control::RunningControlServer`]: `serve` runs
/// on a new thread named `name` until the future it is given resolves (on
/// [`ServerThread::stop_and_join`] or drop).
struct ServerThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
}

impl ServerThread {
    /// Errors: [`Error::LocalIo`] when the thread cannot be spawned.
    fn spawn(
        name: &str,
        serve: impl FnOnce(StopSignal) -> Result<()> + Send + 'static,
    ) -> Result<Self> {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || serve(stopped(rx)))
            .map_err(|source| Error::LocalIo {
                op: "spawn server thread",
                path: PathBuf::new(),
                source,
            })?;
        Ok(ServerThread {
            stop: Some(tx),
            thread: Some(thread),
        })
    }

    /// Signals the stop, then joins the thread. Errors: a failure of the server loop.
    fn stop_and_join(&mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_else(|_| {
                Err(Error::InvalidArgument("the server thread panicked".into()))
            }),
            None => Ok(()),
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

/// The future a [`ServerThread`]'s server stops on.
type StopSignal = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>>;

fn stopped(rx: tokio::sync::oneshot::Receiver<()>) -> StopSignal {
    Box::pin(async move {
        let _ = rx.await;
    })
}

/// Resolves on SIGTERM or SIGINT: when `nokv serve` (either kind) drains and stops.
async fn termination_signal(drain_timeout: Duration) {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            announce_stopping(drain_timeout);
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    announce_stopping(drain_timeout);
}

/// Tells the operator (stderr) that a signal arrived and what happens next.
fn announce_stopping(drain_timeout: Duration) {
    eprintln!(
        "nokv serve: stopping: no new connections; requests in flight get up to {:.1} s to finish",
        drain_timeout.as_secs_f64()
    );
}

/// The multi-threaded runtime a server runs its connections on. Errors: [`Error::LocalIo`].
fn server_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("nokv-server-io")
        .build()
        .map_err(|source| Error::LocalIo {
            op: "start the server runtime",
            path: PathBuf::new(),
            source,
        })
}

/// A server running on its own thread (tests, embedding): [`RunningServer::shutdown`] drains it
/// like SIGTERM does.
pub struct RunningServer {
    addr: SocketAddr,
    thread: ServerThread,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl RunningServer {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, drains in-flight requests (bounded by the drain timeout), closes the
    /// store and joins the server thread. Errors: a failure of the server loop.
    pub fn shutdown(mut self) -> Result<()> {
        self.thread.stop_and_join()
    }
}

/// Opens the store, binds, and serves on a new thread until [`RunningServer::shutdown`].
///
/// Errors: those of [`Client::open_with`] and of binding (see [`serve`]).
pub fn start(opts: ServerOptions) -> Result<RunningServer> {
    let (listener, addr) = bind(&opts)?;
    let state = open_state(opts, addr)?;
    let store = state.opts.store.clone();
    let thread = ServerThread::spawn("nokv-server", move |stop| {
        let result = run_loop(listener, state, stop);
        nokv::address::clear(&store);
        result
    })?;
    Ok(RunningServer { addr, thread })
}

/// Opens the store, binds, prints `listening on http://ADDR` to stderr and serves until SIGTERM
/// or SIGINT, then drains and closes the store. This is `nokv serve`.
///
/// Errors: [`Error::InvalidArgument`] (address, token rule), [`Error::LocalIo`] (bind),
/// [`Error::StoreBusy`] / [`Error::Meta`] (the store cannot be opened).
pub fn serve(opts: ServerOptions) -> Result<()> {
    let (listener, addr) = bind(&opts)?;
    let state = open_state(opts, addr)?;
    eprintln!("nokv serve: listening on http://{addr}");
    let drain_timeout = state.opts.drain_timeout;
    let store = state.opts.store.clone();
    let result = run_loop(listener, state, termination_signal(drain_timeout));
    nokv::address::clear(&store);
    if result.is_ok() {
        eprintln!("nokv serve: stopped; the store is closed");
    }
    result
}

/// Opens the store of `opts` for a server bound at `addr` (recorded as the shard owner's address
/// when the metadata lives in etcd).
fn open_state(opts: ServerOptions, addr: SocketAddr) -> Result<Arc<AppState>> {
    let client = Client::open_with(
        &opts.store,
        ClientOptions {
            // One owner: fail fast instead of waiting 30 s for another process's lock.
            lock_wait: Duration::from_secs(2),
            owner_address: addr.to_string(),
            owner_lease_ttl: opts.owner_lease_ttl,
            ..ClientOptions::default()
        },
    )?;
    let journal = journal::Journal::open(&opts.store.join("server"), opts.replay_retention)?;
    nokv::address::record(&opts.store, &format!("http://{addr}"));
    let workbench = Workbench::new(client.clone());
    Ok(Arc::new(AppState {
        client,
        workbench,
        opts,
        metrics: metrics::Metrics::default(),
        journal,
    }))
}

fn run_loop(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let runtime = server_runtime()?;
    let result = runtime.block_on(accept_loop(listener, state.clone(), shutdown));
    // Background passes and draining connections hold clones of the state; once the runtime is
    // gone only this one is left, and dropping it closes the store (holt finishes a due
    // checkpoint and releases the directory lock).
    runtime.shutdown_timeout(state.opts.drain_timeout);
    drop(state);
    result
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let router = routes::router(state.clone());
    let (stop_background, stopped) = tokio::sync::watch::channel(false);
    let background = routes::spawn_background(state.clone(), stopped);
    let served = accept_connections(listener, router, &state.opts, shutdown).await;
    // A background pass in progress completes (it holds the store), then the loop stops.
    let _ = stop_background.send(true);
    let _ = tokio::time::timeout(state.opts.drain_timeout, background).await;
    served
}

/// Serves HTTP/1.1 connections with `router` until `shutdown`, then stops accepting and drains
/// in-flight requests (bounded by the drain timeout). Shared by the single-store server and the
/// control-plane server ([`control`]).
async fn accept_connections(
    listener: TcpListener,
    router: axum::Router,
    opts: &ServerOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let listener =
        tokio::net::TcpListener::from_std(listener).map_err(|source| Error::LocalIo {
            op: "listen",
            path: PathBuf::new(),
            source,
        })?;
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(opts.header_timeout)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of file descriptors and similar: back off briefly, keep serving.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let service = hyper_util::service::TowerToHyperService::new(router.clone());
                let conn = http.serve_connection(TokioIo::new(stream), service);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    // In-flight requests finish; idle keep-alive connections close.
    if tokio::time::timeout(opts.drain_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        // What was still running is cut off; a cut-off upload is never published.
        eprintln!(
            "nokv serve: the drain timeout ({:.1} s) passed with requests still in flight; they \
             were cut off (an upload cut off is not published; clients may retry)",
            opts.drain_timeout.as_secs_f64()
        );
    }
    Ok(())
}
