//! Bridges between async HTTP bodies and the synchronous SDK (`std::io::Read` / `Write`).
//!
//! Uploads: the connection task pumps request-body frames into a bounded channel while a
//! blocking task reads them through [`ChannelReader`] (memory: the channel depth times one
//! frame). A body over the size limit, an idle client (no frame within the idle timeout) or a
//! broken connection reach the reader as an `io::Error`, so the publication aborts and cleans up
//! exactly like any failed upload: nothing partial becomes visible. The end of the body is an
//! explicit marker the pump sends after the last frame: a pump that stops without it (its task
//! dropped — a shutdown whose drain timeout expired, an aborted connection task) is an error for
//! the reader, never an end of file, so a cut-off body is never published as a complete one.
//!
//! Downloads: a blocking task writes verified blocks into a [`ChannelWriter`]; the response body
//! ([`ChannelBody`]) streams them. A client that goes away closes the channel, and the writer's
//! next `write` fails, which stops the blocking task.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body::Frame;
use http_body_util::BodyExt;
use tokio::sync::mpsc;

/// Why an upload pump stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PumpEnd {
    /// The whole body was delivered.
    Complete,
    /// The body exceeded the limit (bytes).
    TooLarge(u64),
    /// No frame arrived within the idle timeout.
    Idle,
    /// The connection failed mid-body.
    Broken,
    /// The reader stopped early (the publication failed on its own).
    ReaderGone,
}

/// Sends the frames of `body` into `tx` (at most `limit` bytes in total, each frame within
/// `idle`), then the end-of-body marker (an empty chunk; empty data frames are skipped), and
/// closes the channel. Returns how it ended; on any early end the reader receives an error as its
/// last item.
pub(crate) async fn pump(
    mut body: Body,
    tx: mpsc::Sender<io::Result<Bytes>>,
    limit: u64,
    idle: Duration,
) -> PumpEnd {
    let mut total = 0u64;
    loop {
        let frame = match tokio::time::timeout(idle, body.frame()).await {
            Err(_) => {
                let _ = tx
                    .send(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client stopped sending the body",
                    )))
                    .await;
                return PumpEnd::Idle;
            }
            Ok(None) => {
                // The reader may be gone already (its publication failed): nothing to tell it.
                let _ = tx.send(Ok(Bytes::new())).await;
                return PumpEnd::Complete;
            }
            Ok(Some(Err(_))) => {
                let _ = tx
                    .send(Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "the client connection broke mid-body",
                    )))
                    .await;
                return PumpEnd::Broken;
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if data.is_empty() {
            continue; // an empty chunk is the end marker
        }
        total = total.saturating_add(data.len() as u64);
        if total > limit {
            let _ = tx
                .send(Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the body exceeds the server's upload limit",
                )))
                .await;
            return PumpEnd::TooLarge(limit);
        }
        if tx.send(Ok(data)).await.is_err() {
            return PumpEnd::ReaderGone;
        }
    }
}

/// A blocking `Read` over the frames [`pump`] sends: end of file only after the pump's
/// end-of-body marker; a channel closed without it is `ConnectionAborted`.
pub(crate) struct ChannelReader {
    rx: mpsc::Receiver<io::Result<Bytes>>,
    current: Bytes,
    /// The end-of-body marker arrived.
    complete: bool,
    /// Runs once when the end-of-body marker arrives, before the reader reports the end: an
    /// error is returned instead of the end, so the publication reading this body fails and
    /// publishes nothing (the upload route re-checks the caller's token here).
    at_end: Option<Box<dyn FnOnce() -> io::Result<()> + Send>>,
}

impl ChannelReader {
    pub(crate) fn new(rx: mpsc::Receiver<io::Result<Bytes>>) -> Self {
        ChannelReader {
            rx,
            current: Bytes::new(),
            complete: false,
            at_end: None,
        }
    }

    /// The same reader with a check that runs when the whole body has arrived (see `at_end`).
    pub(crate) fn with_end_check(
        mut self,
        check: Box<dyn FnOnce() -> io::Result<()> + Send>,
    ) -> Self {
        self.at_end = Some(check);
        self
    }
}

impl io::Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            if self.complete {
                return Ok(0);
            }
            match self.rx.blocking_recv() {
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "the upload stopped before the end of the body (the server is shutting \
                         down or the connection was dropped)",
                    ))
                }
                Some(Err(e)) => return Err(e),
                Some(Ok(b)) if b.is_empty() => {
                    self.complete = true;
                    if let Some(check) = self.at_end.take() {
                        check()?;
                    }
                }
                Some(Ok(b)) => self.current = b,
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

/// The declared digest of an upload body (`x-nokv-content-sha256`), normalised to the digest URI
/// form `sha256:<64 lowercase hex>`. Accepts that form and bare 64-digit hex in either case (what
/// `sha256sum` prints); `None` for anything else.
pub(crate) fn parse_declared_digest(value: &str) -> Option<String> {
    use objstore::digest::SHA256_PREFIX;
    if value.starts_with(SHA256_PREFIX) {
        // The digest URI form is strict: lowercase hex only.
        return objstore::parse_sha256_uri(value)
            .ok()
            .map(|_| value.to_string());
    }
    (value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("{SHA256_PREFIX}{}", value.to_ascii_lowercase()))
}

/// A blocking `Write` whose bytes become the frames of a [`ChannelBody`].
pub(crate) struct ChannelWriter {
    tx: mpsc::Sender<io::Result<Bytes>>,
}

impl ChannelWriter {
    /// A writer and the response body it feeds (`depth` chunks in flight).
    pub(crate) fn pair(depth: usize) -> (ChannelWriter, ChannelBody) {
        let (tx, rx) = mpsc::channel(depth);
        (ChannelWriter { tx }, ChannelBody { rx })
    }

    /// A handle that tells whether the response body was dropped (the client went away).
    pub(crate) fn closed_flag(&self) -> ClosedFlag {
        ClosedFlag(self.tx.clone())
    }

    /// Ends the body with an error (the client sees a truncated response, never a complete one).
    pub(crate) fn fail(self, message: String) {
        let _ = self.tx.blocking_send(Err(io::Error::other(message)));
    }
}

impl io::Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.tx
            .blocking_send(Ok(Bytes::copy_from_slice(buf)))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the client went away"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// See [`ChannelWriter::closed_flag`].
pub(crate) struct ClosedFlag(mpsc::Sender<io::Result<Bytes>>);

impl ClosedFlag {
    /// True once the response body was dropped.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

/// A response body fed by a [`ChannelWriter`].
pub(crate) struct ChannelBody {
    rx: mpsc::Receiver<io::Result<Bytes>>,
}

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.rx.poll_recv(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Ok(b))) => Poll::Ready(Some(Ok(Frame::data(b)))),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
        }
    }
}

/// Reads a whole (small) request body: at most `limit` bytes, each frame within `idle`.
///
/// Errors: [`PumpEnd::TooLarge`], [`PumpEnd::Idle`], [`PumpEnd::Broken`].
pub(crate) async fn read_all(
    mut body: Body,
    limit: u64,
    idle: Duration,
) -> Result<Vec<u8>, PumpEnd> {
    let mut out = Vec::new();
    loop {
        match tokio::time::timeout(idle, body.frame()).await {
            Err(_) => return Err(PumpEnd::Idle),
            Ok(None) => return Ok(out),
            Ok(Some(Err(_))) => return Err(PumpEnd::Broken),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if out.len() as u64 + data.len() as u64 > limit {
                        return Err(PumpEnd::TooLarge(limit));
                    }
                    out.extend_from_slice(&data);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_complete_body_reads_to_its_end() {
        let rt = runtime();
        let (tx, rx) = mpsc::channel(2);
        let body = Body::from(vec![7u8; 100_000]);
        let pump = rt.spawn(pump(body, tx, 1 << 20, Duration::from_secs(5)));
        let mut got = Vec::new();
        ChannelReader::new(rx).read_to_end(&mut got).unwrap();
        assert_eq!(got, vec![7u8; 100_000]);
        assert_eq!(rt.block_on(pump).unwrap(), PumpEnd::Complete);
    }

    /// The pump's task dropped mid-body (what a shutdown past its drain timeout does to the
    /// connection tasks): the reader gets an error, never an end of file.
    #[test]
    fn a_pump_dropped_mid_body_is_an_error_not_an_end_of_file() {
        let rt = runtime();
        let (tx, rx) = mpsc::channel(2);
        // A client that sent half its body and then nothing more.
        let (mut client, response_like) = ChannelWriter::pair(4);
        let body = Body::new(response_like);
        let pump = rt.spawn(pump(body, tx, 1 << 20, Duration::from_secs(30)));
        io::Write::write_all(&mut client, b"first half").unwrap();
        let mut reader = ChannelReader::new(rx);
        let mut buf = [0u8; 10];
        reader.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"first half");
        pump.abort();
        let mut rest = Vec::new();
        let err = reader.read_to_end(&mut rest).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);
        assert!(rest.is_empty());
        drop(client);
    }
}

#[cfg(test)]
mod digest_tests {
    use super::*;

    const HELLO: &str = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

    #[test]
    fn declared_digests_are_the_uri_form_or_bare_hex() {
        assert_eq!(parse_declared_digest(HELLO).as_deref(), Some(HELLO));
        let bare = HELLO.trim_start_matches("sha256:");
        assert_eq!(parse_declared_digest(bare).as_deref(), Some(HELLO));
        assert_eq!(
            parse_declared_digest(&bare.to_ascii_uppercase()).as_deref(),
            Some(HELLO)
        );
        for bad in [
            "",
            "zzz",
            "sha256:",
            &HELLO.to_ascii_uppercase(),
            &format!("sha256:{}", bare.to_ascii_uppercase()),
            &HELLO[..HELLO.len() - 1],
            &format!("{HELLO}0"),
            &format!("md5:{bare}"),
            &format!(" {bare}"),
        ] {
            assert_eq!(parse_declared_digest(bad), None, "{bad:?}");
        }
    }
}
