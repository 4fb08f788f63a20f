//! The blocking bridge from synchronous code to etcd-client's async API, and the
//! classification of etcd failures — shared by the etcd TxnStore and nokv's control plane.
//!
//! One multi-thread tokio runtime (two workers) per process drives every etcd request. A call
//! spawns its future on that runtime and waits on a channel, so it works from any thread —
//! including a thread that is itself inside another tokio runtime (a blocking wait there never
//! nests runtimes, which would panic).

use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();

fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("nokv-etcd")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| unavailable(format!("cannot start the etcd client runtime: {e}"), false))
}

/// A [`Error::StoreUnavailable`].
pub fn unavailable(reason: impl Into<String>, write_outcome_unknown: bool) -> Error {
    Error::StoreUnavailable {
        reason: reason.into(),
        write_outcome_unknown,
    }
}

/// Runs `fut` to completion on the shared runtime and returns its output.
///
/// Errors: [`Error::StoreUnavailable`] when the runtime cannot start or the task ended without
/// an answer.
pub fn run<F, T>(fut: F) -> Result<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let rt = runtime()?;
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    rt.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv()
        .map_err(|_| unavailable("an etcd request task ended without an answer", false))
}

/// What one failed etcd request means for the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Worth repeating after a pause (no member reachable, no leader, leader changed, deadline,
    /// a member behind the requested revision). A write may have applied.
    Transient(String),
    /// The requested revision was compacted away.
    Compacted,
    /// The request exceeds `--max-txn-ops` or `--max-request-bytes` (nothing applied).
    TooLarge(String),
    /// Anything else (nothing applied: etcd validates before proposing).
    Permanent(String),
}

/// Classifies an etcd-client error.
pub fn classify(e: &etcd_client::Error) -> Failure {
    use tonic::Code;
    match e {
        etcd_client::Error::GRpcStatus(s) => {
            let msg = s.message().to_owned();
            match s.code() {
                Code::OutOfRange if msg.contains("compacted") => Failure::Compacted,
                Code::OutOfRange if msg.contains("future revision") => Failure::Transient(msg),
                Code::InvalidArgument
                    if msg.contains("too many operations") || msg.contains("too large") =>
                {
                    Failure::TooLarge(msg)
                }
                Code::ResourceExhausted if msg.contains("larger than max") => {
                    Failure::TooLarge(msg)
                }
                Code::ResourceExhausted => Failure::Permanent(format!(
                    "{msg} (the etcd database is full: compact history, defragment, or raise --quota-backend-bytes)"
                )),
                Code::Unavailable
                | Code::DeadlineExceeded
                | Code::Cancelled
                | Code::Aborted
                | Code::Unknown => Failure::Transient(format!("{:?}: {msg}", s.code())),
                code => Failure::Permanent(format!("{code:?}: {msg}")),
            }
        }
        etcd_client::Error::TransportError(t) => Failure::Transient(format!("transport: {t}")),
        etcd_client::Error::IoError(io) => Failure::Transient(format!("I/O: {io}")),
        other => Failure::Permanent(other.to_string()),
    }
}

/// Exponential backoff between attempts: 10 ms doubling to 500 ms, never past `deadline`.
pub struct Backoff {
    pause: Duration,
    deadline: Instant,
}

impl Backoff {
    /// A backoff that gives up at `now + window`.
    pub fn new(window: Duration) -> Self {
        Backoff {
            pause: Duration::from_millis(10),
            deadline: Instant::now() + window,
        }
    }

    /// Sleeps before the next attempt; false when the window is spent (no sleep then).
    pub fn wait(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.deadline {
            return false;
        }
        std::thread::sleep(self.pause.min(self.deadline - now));
        self.pause = (self.pause * 2).min(Duration::from_millis(500));
        true
    }
}
