//! `nokv serve --store DIR --listen ADDR [--token-file F]`: the owner process (see
//! [`nokv_server`] and `docs/server.md`); with `--control URLS [--etcd-namespace NS]
//! [--objects s3://… …]` a server of the control plane's logical shards
//! ([`nokv_server::control`]).
//!
//! The bearer token is read from `--token-file F` (first line, trimmed) or `NOKV_TOKEN`; with a
//! token every request must send `Authorization: Bearer <token>`. A non-loopback `--listen`
//! without a token is refused (usage error). Exit codes: 0 after a clean shutdown (SIGTERM /
//! SIGINT: in-flight requests drained, store closed), 1 when the store cannot be opened or
//! served, 2 for a usage error.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use nokv_commands::{EXIT_OK, EXIT_TOOL_ERROR, EXIT_USAGE};
use nokv_server::ServerOptions;

/// Arguments of `nokv serve` (the store is the global `--store`).
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on (`HOST:PORT`; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:7070", value_name = "ADDR")]
    pub listen: String,
    /// File holding the bearer token (first line). Default: $NOKV_TOKEN.
    #[arg(long, value_name = "F")]
    pub token_file: Option<PathBuf>,
    /// Largest streamed upload in bytes (default 64 GiB).
    #[arg(long, value_name = "BYTES")]
    pub max_upload_bytes: Option<u64>,
    /// Seconds allowed to receive a request head, and between two body chunks (default 10 / 30).
    #[arg(long, value_name = "SECS")]
    pub request_timeout: Option<u64>,
    /// Seconds SIGTERM waits for in-flight requests (default 30).
    #[arg(long, value_name = "SECS")]
    pub drain_timeout: Option<u64>,
    /// Seconds between background maintenance passes — the snapshot reaper, then one GC pass
    /// (default 60; 0 disables).
    #[arg(long, value_name = "SECS", alias = "reaper-interval")]
    pub maintenance_interval: Option<u64>,
    /// Seconds between publish-operation recovery passes (default 300; 0 disables).
    #[arg(long, value_name = "SECS")]
    pub recovery_interval: Option<u64>,
    /// Shard-owner lease in seconds when the store keeps its metadata in etcd (default 10,
    /// at least 2): the server stops committing before it can expire, and another server may
    /// take the shard over once it lapses.
    #[arg(long, value_name = "SECS")]
    pub lease_ttl: Option<u64>,
    /// Serve the control plane's logical shards instead of one store: etcd client URLs,
    /// comma-separated. The server acquires every shard without a live owner (takeover when
    /// an owner's lease lapses) and answers `/roots/<name>/v1/…`; `--store` is its own state
    /// directory. See docs/server.md.
    #[arg(long, value_name = "URLS")]
    pub control: Option<String>,
    /// etcd deployment namespace (default `/nokv/`; with --control).
    #[arg(long, value_name = "NS", requires = "control")]
    pub etcd_namespace: Option<String>,
    /// Object namespace of the deployment, `s3://bucket[/prefix]` (with --control; each root's
    /// objects live under `<prefix>/<first 16 hex of its root id>`). Default: local objects in the state directory,
    /// which no other server can read.
    #[arg(long, value_name = "URL", requires = "control")]
    pub objects: Option<String>,
    /// S3 endpoint URL (with --objects).
    #[arg(long, value_name = "URL", requires = "objects")]
    pub endpoint: Option<String>,
    /// S3 region (with --objects).
    #[arg(long, requires = "objects")]
    pub region: Option<String>,
    /// Path-style S3 addressing (with --objects; implied for an IP or localhost endpoint).
    #[arg(long, requires = "objects")]
    pub path_style: bool,
    /// Block cache directory of each served root, relative to its directory (with --objects).
    #[arg(long, value_name = "DIR", requires = "objects")]
    pub cache_dir: Option<PathBuf>,
    /// Block cache bound in bytes per served root (with --objects; 0 disables it).
    #[arg(long, value_name = "N", requires = "objects")]
    pub cache_bytes: Option<u64>,
}

/// Reads the token: `--token-file` (first line, trimmed), else `NOKV_TOKEN`.
fn token(args: &ServeArgs) -> Result<Option<String>, String> {
    match &args.token_file {
        Some(f) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| format!("cannot read --token-file {}: {e}", f.display()))?;
            let t = text.lines().next().unwrap_or_default().trim().to_string();
            if t.is_empty() {
                return Err(format!("--token-file {} is empty", f.display()));
            }
            Ok(Some(t))
        }
        None => Ok(std::env::var("NOKV_TOKEN")
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())),
    }
}

/// The options of `nokv serve --control URLS`.
fn control_options(
    urls: &str,
    args: &ServeArgs,
    server: ServerOptions,
) -> nokv::Result<nokv_server::control::ControlServerOptions> {
    Ok(nokv_server::control::ControlServerOptions {
        server,
        control: nokv::control::parse_control_url(urls)?,
        namespace: args
            .etcd_namespace
            .clone()
            .unwrap_or_else(|| meta::store::etcd::DEFAULT_NAMESPACE.to_owned()),
        objects: nokv::store_config::InitOptions {
            objects: args.objects.clone(),
            endpoint: args.endpoint.clone(),
            region: args.region.clone(),
            path_style: args.path_style,
            cache_dir: args.cache_dir.clone(),
            cache_bytes: args.cache_bytes,
            ..Default::default()
        },
        ..Default::default()
    })
}

/// Runs `nokv serve`; returns the exit code.
pub fn run_serve(dir: &Path, args: ServeArgs) -> u8 {
    let token = match token(&args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("nokv serve: {e}");
            return EXIT_USAGE;
        }
    };
    let mut opts = ServerOptions {
        store: dir.to_path_buf(),
        listen: args.listen.clone(),
        token,
        ..ServerOptions::default()
    };
    if let Some(b) = args.max_upload_bytes {
        opts.max_upload_bytes = b;
    }
    if let Some(s) = args.request_timeout {
        opts.header_timeout = Duration::from_secs(s.max(1));
        opts.body_idle_timeout = Duration::from_secs(s.max(1));
    }
    if let Some(s) = args.drain_timeout {
        opts.drain_timeout = Duration::from_secs(s);
    }
    if let Some(s) = args.maintenance_interval {
        opts.maintenance_interval = Duration::from_secs(s);
    }
    if let Some(s) = args.recovery_interval {
        opts.recovery_interval = Duration::from_secs(s);
    }
    if let Some(s) = args.lease_ttl {
        opts.owner_lease_ttl = Duration::from_secs(s);
    }
    let served = match &args.control {
        None => nokv_server::serve(opts),
        Some(urls) => {
            control_options(urls, &args, opts).and_then(nokv_server::control::serve_control)
        }
    };
    match served {
        Ok(()) => EXIT_OK,
        Err(e @ nokv::Error::InvalidArgument(_)) => {
            eprintln!("nokv serve: {e}");
            EXIT_USAGE
        }
        Err(e) => {
            eprintln!("nokv serve: {e}");
            EXIT_TOOL_ERROR
        }
    }
}
