//! What one server runs with: its options ([`ServerOptions`]) and the state every request
//! shares ([`AppState`]: the client, the Workbench facade, metrics and the request journal).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use nokv::client::Client;
use nokv::workbench::Workbench;

use super::{auth, journal, metrics};

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
    /// The store's token registry (`<store>/access/tokens.json`), re-read when it changes.
    pub(crate) registry: nokv::access::TokenRegistry,
    /// The web view's sessions of registry tokens.
    pub(crate) sessions: auth::Sessions,
    /// The store's audit trail (`<store>/access/audit/`).
    pub(crate) audit: nokv::access::AuditLog,
}

impl AppState {
    /// What requests authenticate against, now.
    pub(crate) fn authority(&self) -> auth::Authority<'_> {
        auth::Authority {
            token: self.opts.token.as_deref(),
            registry: &self.registry,
            sessions: &self.sessions,
            now_ms: self.client.now_unix_ms(),
        }
    }
}

/// The root a request is served under: the name in its [`PathPrefix`] (`/roots/NAME`), `None`
/// on a single-store server.
pub(crate) fn root_of(req: &axum::http::request::Parts) -> Option<String> {
    req.extensions
        .get::<PathPrefix>()
        .and_then(|p| p.0.strip_prefix("/roots/").map(str::to_string))
}

/// Whether `addr` is a loopback address (127.0.0.0/8 or ::1).
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// The path prefix under which a served root's routes are reached (`/roots/<name>` behind
/// `nokv serve --control`; absent on a single-store server). A request extension set by the
/// control plane's dispatcher; the web view prefixes its links with it.
#[derive(Debug, Clone)]
pub(crate) struct PathPrefix(pub(crate) String);
