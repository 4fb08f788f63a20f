//! `nokv serve --control URLS`: a server of the control plane's logical shards (docs/design.md,
//! "Distribution"; see `docs/server.md` and `docs/distribution.md`).
//!
//! Instead of one store, the server serves every root whose etcd-backed logical shard it owns.
//! The acquisition loop ([`shards`]) acquires the shard-owner lease of every shard without a
//! live owner (initial placement, and **takeover** once a dead owner's lease lapses), opens the
//! root through the same open path as every other front door, renews the lease, and stops
//! serving a shard at its fail-stop deadline or when the lease is lost.
//!
//! # Routing
//!
//! A request names its root with a path prefix: `/roots/<name>/<the single-store path>`, e.g.
//! `POST /roots/team-a/v1/tools/workbench_write`. The rest of the path is answered by exactly
//! the routes of the single-store server, on the root's store.
//!
//! - A root this server serves: the request runs (auth, journal, metrics as usual).
//! - A root it served but whose lease lapsed or was taken over: `421 LeaseLost` — nothing runs.
//! - Any other root: `421 NotOwner` with the current owner's address and epoch from the control
//!   plane (`owner_address` null when no server owns it right now), or `404 UnknownRoot`.
//!
//! `GET /healthz` (outside any root) lists the served roots with their shards and epochs.

pub(crate) mod shards;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::error::ApiError;
use super::runtime::{bind, ServerThread};
use super::state::ServerOptions;
use nokv::control::ControlPlane;
use nokv::error::{Error, Result};
use nokv::store_config::{InitOptions, StoreConfig};
use shards::{Acquirer, ObjectsTemplate, ShardTable};

/// Configuration of a `--control` server.
#[derive(Debug, Clone)]
pub struct ControlServerOptions {
    /// The single-store server's options: `store` is this server's **state directory** (one
    /// sub-directory per served root under `roots/<root_id>`: configuration, block cache,
    /// request journal); `listen`, `token`, limits, intervals and `owner_lease_ttl` as there.
    /// Each server needs its own state directory.
    pub server: ServerOptions,
    /// etcd client URLs of the control plane.
    pub control: Vec<String>,
    /// Deployment namespace in etcd (default `/nokv/`).
    pub namespace: String,
    /// The deployment's object namespace: `objects` (`s3://bucket/prefix`, `None` for local
    /// objects in each served root's directory — which another server cannot read, so takeover
    /// needs S3), `endpoint`, `region`, `path_style`, `cache_dir`, `cache_bytes` as
    /// `nokv init` takes them. Each root's objects live under `<prefix>/<first 16 hex of its root_id>`.
    pub objects: InitOptions,
    /// Interval of the acquisition loop (default 500 ms).
    pub poll_interval: Duration,
}

impl Default for ControlServerOptions {
    fn default() -> Self {
        ControlServerOptions {
            server: ServerOptions::default(),
            control: Vec::new(),
            namespace: meta::store::etcd::DEFAULT_NAMESPACE.to_owned(),
            objects: InitOptions::default(),
            poll_interval: Duration::from_millis(500),
        }
    }
}

/// State of the dispatcher.
struct Dispatch {
    control: ControlPlane,
    table: Arc<ShardTable>,
    token: Option<String>,
}

/// A `--control` server running on its own thread (tests, embedding);
/// [`RunningControlServer::shutdown`] drains it like SIGTERM does.
pub struct RunningControlServer {
    addr: SocketAddr,
    thread: ServerThread,
}

impl std::fmt::Debug for RunningControlServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningControlServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl RunningControlServer {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, drains in-flight requests, closes every served root (releasing its
    /// shard-owner lease so another server can take it over at once) and joins the thread.
    ///
    /// Errors: a failure of the server loop.
    pub fn shutdown(mut self) -> Result<()> {
        self.thread.stop_and_join()
    }
}

/// Validates `opts`, binds and connects to the control plane.
fn prepare(
    opts: &ControlServerOptions,
) -> Result<(
    std::net::TcpListener,
    SocketAddr,
    ControlPlane,
    ObjectsTemplate,
)> {
    if opts.control.is_empty() {
        return Err(Error::InvalidArgument(
            "--control names no etcd endpoint".into(),
        ));
    }
    if opts.objects.metadata_etcd.is_some()
        || opts.objects.etcd_namespace.is_some()
        || opts.objects.root_name.is_some()
    {
        return Err(Error::InvalidArgument(
            "a --control server takes its roots from the control plane; it has no --root or --metadata-etcd".into(),
        ));
    }
    let template =
        StoreConfig::from_init(&opts.objects).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    let (listener, addr) = bind(&opts.server)?;
    let control = ControlPlane::connect(opts.control.clone(), &opts.namespace)?;
    std::fs::create_dir_all(&opts.server.store).map_err(|source| Error::LocalIo {
        op: "create the state directory",
        path: opts.server.store.clone(),
        source,
    })?;
    Ok((
        listener,
        addr,
        control,
        ObjectsTemplate {
            objects: template.objects,
            cache: template.cache,
        },
    ))
}

/// Binds and serves on a new thread until [`RunningControlServer::shutdown`].
///
/// Errors: as [`serve_control`] before it starts serving.
pub fn start_control(opts: ControlServerOptions) -> Result<RunningControlServer> {
    let (listener, addr, control, objects) = prepare(&opts)?;
    let thread = ServerThread::spawn("nokv-control-server", move |stop| {
        run(listener, addr, control, objects, opts, stop)
    })?;
    Ok(RunningControlServer { addr, thread })
}

/// `nokv serve --control URLS`: binds, prints `listening on http://ADDR` to stderr, serves the
/// shards it acquires until SIGTERM or SIGINT, then drains and releases every shard.
///
/// Errors: [`Error::InvalidArgument`] (no endpoint, address, token rule, object options),
/// [`Error::LocalIo`] (bind, state directory), [`Error::Meta`] (the control plane client
/// cannot be built).
pub fn serve_control(opts: ControlServerOptions) -> Result<()> {
    let (listener, addr, control, objects) = prepare(&opts)?;
    eprintln!(
        "nokv serve: listening on http://{addr} (control plane {})",
        opts.control.join(",")
    );
    let drain_timeout = opts.server.drain_timeout;
    let result = run(
        listener,
        addr,
        control,
        objects,
        opts,
        super::termination_signal(drain_timeout),
    );
    if result.is_ok() {
        eprintln!("nokv serve: stopped; every store it served is closed");
    }
    result
}

fn run(
    listener: std::net::TcpListener,
    addr: SocketAddr,
    control: ControlPlane,
    objects: ObjectsTemplate,
    opts: ControlServerOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let runtime = super::server_runtime()?;
    let table = Arc::new(ShardTable::default());
    let stop = Arc::new(AtomicBool::new(false));
    let acquirer = Acquirer {
        control: control.clone(),
        base: opts.server.clone(),
        objects,
        address: addr.to_string(),
        poll: opts.poll_interval.max(Duration::from_millis(50)),
        table: table.clone(),
        runtime: runtime.handle().clone(),
        stop: stop.clone(),
    };
    let loop_thread = std::thread::Builder::new()
        .name("nokv-shard-acquire".into())
        .spawn(move || acquirer.run())
        .map_err(|source| Error::LocalIo {
            op: "spawn the acquisition loop",
            path: PathBuf::new(),
            source,
        })?;
    let dispatch = Arc::new(Dispatch {
        control,
        table: table.clone(),
        token: opts.server.token.clone(),
    });
    let router = axum::Router::new()
        .fallback(dispatch_request)
        .with_state(dispatch);
    let result = runtime.block_on(super::accept_connections(
        listener,
        router,
        &opts.server,
        shutdown,
    ));
    stop.store(true, Ordering::Release);
    let _ = loop_thread.join();
    let served = table.drain();
    runtime.shutdown_timeout(opts.server.drain_timeout);
    // The last references: dropping them closes each root's store and revokes its lease.
    drop(served);
    result
}

async fn dispatch_request(State(d): State<Arc<Dispatch>>, mut req: Request) -> Response {
    let path = req.uri().path().to_owned();
    // The served root's own guard decides again on the rewritten path (the web view's login
    // form, a session's read-only downloads); here only what can never pass is refused.
    let access = super::auth::access(d.token.as_deref(), req.headers());
    let inner = path
        .strip_prefix("/roots/")
        .and_then(|r| r.split_once('/'))
        .map_or(path.as_str(), |(_, rest)| rest);
    let inner = format!("/{inner}");
    if super::auth::decide(access, req.method(), &inner) == super::auth::Decision::Refuse {
        return ApiError::unauthorized().into_response();
    }
    if path == "/healthz" {
        return health(&d);
    }
    let Some((root, rest)) = path.strip_prefix("/roots/").and_then(|r| {
        r.split_once('/')
            .map(|(a, b)| (a.to_owned(), format!("/{b}")))
    }) else {
        return ApiError::no_route(&path).into_response();
    };
    match d.table.get(&root) {
        Some(served) if served.is_serving() => {
            let target = match req.uri().query() {
                Some(q) => format!("{rest}?{q}"),
                None => rest,
            };
            let Ok(uri) = target.parse::<Uri>() else {
                return ApiError::bad_request("malformed request path").into_response();
            };
            *req.uri_mut() = uri;
            // The web view builds its links under the root's prefix.
            req.extensions_mut()
                .insert(super::state::PathPrefix(format!("/roots/{root}")));
            let service = hyper_util::service::TowerToHyperService::new(served.router.clone());
            match hyper::service::Service::call(&service, req).await {
                Ok(resp) => resp,
                Err(never) => match never {},
            }
        }
        Some(served) => {
            let epoch = served.epoch;
            let current = locate(&d, &root).await;
            ApiError::lease_lost(&root, epoch, current).into_response()
        }
        None => locate(&d, &root).await.into_response(),
    }
}

/// The `NotOwner` (or `UnknownRoot`) answer for `root`, read from the control plane.
async fn locate(d: &Arc<Dispatch>, root: &str) -> ApiError {
    if nokv::control::placement::validate_root_name(root).is_err() {
        return ApiError::unknown_root(root);
    }
    let control = d.control.clone();
    let name = root.to_owned();
    let found = super::handler::blocking(move || -> Result<Option<_>> {
        let Some(record) = control.root_by_name(&name)? else {
            return Ok(None);
        };
        let shard = record.placement.logical_shard_id;
        let (owner, last) = control.shard_owner(&shard)?;
        Ok(Some((shard, owner, last)))
    })
    .await;
    match found {
        Ok(Ok(None)) => ApiError::unknown_root(root),
        Ok(Ok(Some((shard, owner, last)))) => ApiError::not_owner(
            root,
            Some(shard.to_string()),
            owner.map(|o| (o.address, o.epoch)),
            last,
        ),
        Ok(Err(e)) => ApiError::unavailable(format!("the control plane cannot be read: {e}")),
        Err(e) => e,
    }
}

/// `GET /healthz` of a `--control` server: the served roots.
fn health(d: &Dispatch) -> Response {
    let roots: Vec<Value> = d
        .table
        .all()
        .iter()
        .map(|s| {
            json!({
                "root": s.root,
                "logical_shard_id": s.shard.to_string(),
                "owner_epoch": s.epoch,
                "serving": s.is_serving(),
            })
        })
        .collect();
    axum::Json(json!({"status": "ok", "roots": roots})).into_response()
}
