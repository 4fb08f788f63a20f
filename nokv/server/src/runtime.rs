//! The serving machinery shared by the single-store server and the control-plane server:
//! binding the listen address under the authentication rule, the server thread and its tokio
//! runtime, the stop signals, and the HTTP/1.1 accept loop with a bounded drain.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use nokv::error::{Error, Result};

use super::state::{is_loopback, ServerOptions};

/// Binds the listen address and checks the authentication rule. Errors:
/// [`Error::InvalidArgument`] for an unparsable address, an empty token, or a non-loopback
/// address without a token; [`Error::LocalIo`] when the address cannot be bound.
pub(crate) fn bind(opts: &ServerOptions) -> Result<(TcpListener, SocketAddr)> {
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
    if opts.token.is_none()
        && !is_loopback(&addr)
        && !nokv::access::TokenRegistry::at_store(&opts.store).has_records()
    {
        return Err(Error::InvalidArgument(format!(
            "refusing to listen on non-loopback address {addr} without a bearer token \
             (--token-file F or NOKV_TOKEN, or tokens made with `nokv token create`)"
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
pub(crate) struct ServerThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
}

impl ServerThread {
    /// Errors: [`Error::LocalIo`] when the thread cannot be spawned.
    pub(crate) fn spawn(
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
    pub(crate) fn stop_and_join(&mut self) -> Result<()> {
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
pub(crate) type StopSignal =
    std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>>;

pub(crate) fn stopped(rx: tokio::sync::oneshot::Receiver<()>) -> StopSignal {
    Box::pin(async move {
        let _ = rx.await;
    })
}

/// Resolves on SIGTERM or SIGINT: when `nokv serve` (either kind) drains and stops.
pub(crate) async fn termination_signal(drain_timeout: Duration) {
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
pub(crate) fn announce_stopping(drain_timeout: Duration) {
    eprintln!(
        "nokv serve: stopping: no new connections; requests in flight get up to {:.1} s to finish",
        drain_timeout.as_secs_f64()
    );
}

/// The multi-threaded runtime a server runs its connections on. Errors: [`Error::LocalIo`].
pub(crate) fn server_runtime() -> Result<tokio::runtime::Runtime> {
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

/// Serves HTTP/1.1 connections with `router` until `shutdown`, then stops accepting and drains
/// in-flight requests (bounded by the drain timeout). Shared by the single-store server and the
/// control-plane server ([`control`]).
pub(crate) async fn accept_connections(
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
