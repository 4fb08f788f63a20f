//! `nokv serve`: one long-running owner process serves many agents (see `docs/server.md`).
//!
//! The server owns the store (holt's directory lock: one owner process at a time) and answers
//! the versioned `/v1/` protocol over HTTP/1.1 (axum on hyper, tokio). Every endpoint calls the
//! same [`nokv::Client`] / Workbench facade / meta operations as the CLI; the command sequencer
//! of the shard (`meta::shard::sequencer`) turns the concurrent requests of many agents into
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
//! - a read-only web view under `/ui/` (see `docs/ui.md`): server-rendered pages over the same
//!   client and facade calls, behind the same token (a login form and a session cookie);
//! - background: the snapshot reaper and publish-operation recovery, on intervals;
//! - SIGTERM / SIGINT: stop accepting, drain in-flight requests (bounded), close the store.
//!
//! Transport failures (auth, malformed DTOs, limits, timeouts) are 4xx/5xx with a JSON error
//! body of the envelope's shape ([`error::ApiError`]).

mod audit;
mod auth;
mod body;
pub mod control;
mod diff;
pub mod error;
mod feed;
mod handler;
pub mod journal;
mod lifetime;
pub mod metrics;
mod moves;
mod policy;
mod routes;
mod runtime;
mod state;
mod ui;

pub use nokv_protocol::headers::{CONTENT_SHA256, IDEMPOTENCY_KEY, REPLAYED};
pub use state::{is_loopback, ServerOptions};

use runtime::{accept_connections, bind, server_runtime, termination_signal, ServerThread};
use state::AppState;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use nokv::client::{Client, ClientOptions};
use nokv::error::Result;
use nokv::workbench::Workbench;

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
            // The one owner holds the writer lock for its whole life.
            writer_idle_release: None,
            owner_address: addr.to_string(),
            owner_lease_ttl: opts.owner_lease_ttl,
            ..ClientOptions::default()
        },
    )?;
    let journal = journal::Journal::open(&opts.store.join("server"), opts.replay_retention)?;
    nokv::address::record(&opts.store, &format!("http://{addr}"));
    let workbench = Workbench::new(client.clone());
    let opts_store = opts.store.clone();
    Ok(Arc::new(AppState {
        client,
        workbench,
        opts,
        metrics: metrics::Metrics::default(),
        journal,
        registry: nokv::access::TokenRegistry::at_store(&opts_store),
        sessions: auth::Sessions::default(),
        audit: nokv::access::AuditLog::at_store(&opts_store),
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
