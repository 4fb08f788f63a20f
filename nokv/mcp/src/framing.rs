//! The stdio framing under the MCP session: what the SDK's line transport does not do by itself.
//!
//! * [`CheckedReader`] sits under the SDK's reader. It splits the input into lines, keeps the
//!   line-length limit (a longer line is dropped without being buffered and without an answer, as
//!   the SDK does), and answers a line that is not JSON with the JSON-RPC 2.0 parse error
//!   `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}` instead of
//!   passing it on (the SDK would drop it silently).
//! * [`LineWriter`] sits under the SDK's writer and shares the output with the [`Outbox`]: the
//!   SDK holds the output from the first byte of a message to its final newline, so an answer
//!   written by the outbox always lands between two whole lines, never inside one.
//! * [`AnsweringTransport`] wraps the SDK's transport. It keeps the [`Ledger`] of requests read
//!   and not yet answered, answers a `tools/call` or `tools/list` whose params have the wrong
//!   shape with `-32602 Invalid params` (the SDK would call the method unknown), and holds back
//!   the end of the input until every request read has been answered: the SDK ends its session
//!   when the input closes and would drop the answers of the calls still running.
//!
//! Invariants: a request is in the ledger from the moment it is handed to the SDK until its
//! answer has been written and flushed (or writing it failed), or the client cancelled it (the
//! SDK never answers a cancelled request); a request id read twice while the first is in flight
//! is one entry, as the SDK answers it once. Every line of the outbox is counted in the ledger
//! from the moment it is queued until it has been written.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use rmcp::model::{
    CallToolRequestParams, ClientNotification, ClientRequest, ErrorData, JsonRpcMessage,
    PaginatedRequestParams, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::{mpsc, watch, Mutex, OwnedMutexGuard};

/// The answer to a line that is not JSON (JSON-RPC 2.0, section 5.1: `id` is null because no id
/// could be read).
pub(crate) const PARSE_ERROR_LINE: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}\n";

/// Bytes read from the input at a time.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// What the session still owes the client.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Requests handed to the SDK and not yet answered.
    pending: HashSet<RequestId>,
    /// Lines queued on the [`Outbox`] and not yet written.
    queued: usize,
    /// Tool calls read and not yet answered, by arrival number: `true` for a tool that writes.
    calls: BTreeMap<u64, bool>,
    /// The arrival number of each tool call in `calls`.
    call_numbers: HashMap<RequestId, u64>,
    /// The next arrival number.
    next_call: u64,
}

impl Ledger {
    /// True when every request read has been answered and every queued line written.
    fn settled(&self) -> bool {
        self.pending.is_empty() && self.queued == 0
    }

    /// Records a tool call in arrival order (a repeated id keeps its first place).
    fn arrive(&mut self, id: &RequestId, writes: bool) {
        if self.call_numbers.contains_key(id) {
            return;
        }
        let n = self.next_call;
        self.next_call += 1;
        self.call_numbers.insert(id.clone(), n);
        self.calls.insert(n, writes);
    }

    /// The call `id` was answered (or cancelled): later calls no longer wait for it.
    fn depart(&mut self, id: &RequestId) {
        if let Some(n) = self.call_numbers.remove(id) {
            self.calls.remove(&n);
        }
    }

    /// Whether the call `id` may start: a write once every call read before it was answered, a
    /// read once every write read before it was answered — so calls sent together take effect
    /// as if run one after another in the order they were sent, and reads still run side by
    /// side. A call this ledger does not know starts at once.
    fn may_start(&self, id: &RequestId) -> bool {
        let Some(&n) = self.call_numbers.get(id) else {
            return true;
        };
        let writes = self.calls.get(&n).copied().unwrap_or(false);
        let mut earlier = self.calls.range(..n);
        if writes {
            earlier.next().is_none()
        } else {
            !earlier.any(|(_, w)| *w)
        }
    }
}

/// Waits until the tool call `id` may start (see [`Ledger`]: calls of one session take effect in
/// the order they were read). Returns at once for a call the ledger does not know, and if the
/// session is gone.
pub(crate) async fn wait_turn(ledger: &SharedLedger, id: &RequestId) {
    let mut rx = ledger.subscribe();
    let _ = rx.wait_for(|l| l.may_start(id)).await;
}

/// The shared ledger; every change wakes the transport waiting at end of input.
pub(crate) type SharedLedger = Arc<watch::Sender<Ledger>>;

/// A new, empty ledger.
pub(crate) fn new_ledger() -> SharedLedger {
    Arc::new(watch::Sender::new(Ledger::default()))
}

/// Whole lines the framing layer writes itself (error answers), in order, between the SDK's
/// messages.
#[derive(Debug, Clone)]
pub(crate) struct Outbox {
    lines: mpsc::UnboundedSender<Vec<u8>>,
    ledger: SharedLedger,
}

impl Outbox {
    /// Queues one line (ending in `\n`) for writing; it is counted in the ledger until written.
    fn push(&self, line: Vec<u8>) {
        self.ledger.send_modify(|l| l.queued += 1);
        if self.lines.send(line).is_err() {
            // The writer is gone (the session is over): nothing will write it.
            self.ledger
                .send_modify(|l| l.queued = l.queued.saturating_sub(1));
        }
    }
}

/// Builds the output side: the writer the SDK writes through, the outbox for the framing layer's
/// own lines, and the task that writes the outbox (spawn it on the session's runtime; it ends
/// when every [`Outbox`] clone is dropped).
pub(crate) fn output<W>(
    write: W,
    ledger: &SharedLedger,
) -> (
    LineWriter<W>,
    Outbox,
    impl Future<Output = ()> + Send + 'static,
)
where
    W: AsyncWrite + Send + Unpin + 'static,
{
    let shared = Arc::new(Mutex::new(write));
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let outbox = Outbox {
        lines: tx,
        ledger: Arc::clone(ledger),
    };
    let writer = LineWriter {
        shared: Arc::clone(&shared),
        guard: None,
        acquiring: None,
        mid_line: false,
    };
    let ledger = Arc::clone(ledger);
    let task = async move {
        while let Some(line) = rx.recv().await {
            {
                let mut out = shared.lock().await;
                // A failed write (the client closed its input) loses only this answer; the SDK
                // sees the same failure on its next write.
                if out.write_all(&line).await.is_ok() {
                    let _ = out.flush().await;
                }
            }
            ledger.send_modify(|l| l.queued = l.queued.saturating_sub(1));
        }
    };
    (writer, outbox, task)
}

/// A pending acquisition of the output.
type Acquiring<W> = Pin<Box<dyn Future<Output = OwnedMutexGuard<W>> + Send>>;

/// The SDK's view of the output: it holds the output from the first byte of a message until a
/// write ends at a newline, so the [`Outbox`] writes only between whole lines.
pub(crate) struct LineWriter<W> {
    shared: Arc<Mutex<W>>,
    guard: Option<OwnedMutexGuard<W>>,
    acquiring: Option<Acquiring<W>>,
    /// The last byte written was not a newline: the output stays held.
    mid_line: bool,
}

impl<W: AsyncWrite + Send + Unpin + 'static> LineWriter<W> {
    /// The output, once this writer holds it.
    fn poll_hold(&mut self, cx: &mut Context<'_>) -> Poll<&mut OwnedMutexGuard<W>> {
        if self.guard.is_none() {
            let shared = &self.shared;
            let acquiring = self
                .acquiring
                .get_or_insert_with(|| Box::pin(Arc::clone(shared).lock_owned()));
            let guard = ready!(acquiring.as_mut().poll(cx));
            self.acquiring = None;
            self.guard = Some(guard);
        }
        match self.guard.as_mut() {
            Some(guard) => Poll::Ready(guard),
            None => Poll::Pending,
        }
    }
}

impl<W: AsyncWrite + Send + Unpin + 'static> AsyncWrite for LineWriter<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let out = ready!(this.poll_hold(cx));
        let result = ready!(Pin::new(&mut **out).poll_write(cx, buf));
        match &result {
            Ok(0) => {}
            Ok(n) => this.mid_line = buf.get(..*n).and_then(<[u8]>::last) != Some(&b'\n'),
            // The output is broken; nothing is held for a line that cannot be finished.
            Err(_) => this.mid_line = false,
        }
        if !this.mid_line {
            this.guard = None;
        }
        Poll::Ready(result)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let out = ready!(this.poll_hold(cx));
        let result = ready!(Pin::new(&mut **out).poll_flush(cx));
        if result.is_err() {
            this.mid_line = false;
        }
        if !this.mid_line {
            this.guard = None;
        }
        Poll::Ready(result)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let out = ready!(this.poll_hold(cx));
        let result = ready!(Pin::new(&mut **out).poll_shutdown(cx));
        this.mid_line = false;
        this.guard = None;
        Poll::Ready(result)
    }
}

/// The input under the SDK's line reader: passes on every line that is JSON, answers every other
/// non-blank line with [`PARSE_ERROR_LINE`] through the [`Outbox`], drops lines longer than the
/// limit. A last line without a newline is completed with one.
pub(crate) struct CheckedReader<R> {
    inner: R,
    max_line_bytes: usize,
    outbox: Outbox,
    /// The line being read (at most `max_line_bytes`, its newline included).
    line: Vec<u8>,
    /// Skipping the rest of a line over the limit.
    discarding: bool,
    /// Checked lines not yet handed to the reader above, from `out_pos`.
    out: Vec<u8>,
    out_pos: usize,
    chunk: Box<[u8]>,
    chunk_pos: usize,
    chunk_end: usize,
    eof: bool,
}

impl<R> CheckedReader<R> {
    /// Wraps `inner`; a line (newline included) over `max_line_bytes` is dropped.
    pub(crate) fn new(inner: R, max_line_bytes: usize, outbox: Outbox) -> CheckedReader<R> {
        CheckedReader {
            inner,
            max_line_bytes: max_line_bytes.max(1),
            outbox,
            line: Vec::new(),
            discarding: false,
            out: Vec::new(),
            out_pos: 0,
            chunk: vec![0; READ_CHUNK_BYTES].into_boxed_slice(),
            chunk_pos: 0,
            chunk_end: 0,
            eof: false,
        }
    }

    /// Takes bytes from the chunk up to the next newline into the current line, judging the line
    /// when it is whole.
    fn take_from_chunk(&mut self) {
        let available = self
            .chunk
            .get(self.chunk_pos..self.chunk_end)
            .unwrap_or_default();
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        let piece = available.get(..take).unwrap_or_default();
        self.chunk_pos += take;
        if self.discarding {
            self.discarding = newline.is_none();
        } else if self.line.len().saturating_add(take) > self.max_line_bytes {
            self.line.clear();
            self.discarding = newline.is_none();
        } else {
            self.line.extend_from_slice(piece);
            if newline.is_some() {
                self.finish_line();
            }
        }
    }

    /// Judges the whole line in `line`: passes it on, drops it, or answers it.
    fn finish_line(&mut self) {
        match judge(&self.line) {
            Judgement::Json => {
                // `out` is drained whenever a line is finished.
                std::mem::swap(&mut self.out, &mut self.line);
                self.out_pos = 0;
            }
            Judgement::Blank => {}
            Judgement::NotJson => self.outbox.push(PARSE_ERROR_LINE.to_vec()),
        }
        self.line.clear();
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for CheckedReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let rest = this.out.get(this.out_pos..).unwrap_or_default();
            if !rest.is_empty() {
                let n = rest.len().min(buf.remaining());
                buf.put_slice(rest.get(..n).unwrap_or_default());
                this.out_pos += n;
                if this.out_pos >= this.out.len() {
                    this.out.clear();
                    this.out_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            if this.chunk_pos < this.chunk_end {
                this.take_from_chunk();
                continue;
            }
            let mut chunk = ReadBuf::new(&mut this.chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut chunk))?;
            let n = chunk.filled().len();
            this.chunk_pos = 0;
            this.chunk_end = n;
            if n == 0 {
                this.eof = true;
                if !this.discarding && !this.line.is_empty() {
                    // The last line lacks its newline: complete it (within the limit).
                    if this.line.len() < this.max_line_bytes {
                        this.line.push(b'\n');
                        this.finish_line();
                    } else {
                        this.line.clear();
                    }
                }
            }
        }
    }
}

/// How a whole input line is treated.
#[derive(Debug, PartialEq, Eq)]
enum Judgement {
    /// JSON: passed on to the SDK.
    Json,
    /// Empty or white space only: dropped without an answer.
    Blank,
    /// Not JSON (or not UTF-8): answered with a parse error.
    NotJson,
}

/// Judges one line (its newline included) as the SDK will read it: without the newline, a
/// carriage return before it, and a leading UTF-8 byte order mark.
fn judge(line: &[u8]) -> Judgement {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Judgement::Blank;
    }
    if std::str::from_utf8(line).is_err() {
        return Judgement::NotJson;
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    match Skim.deserialize(&mut de).and_then(|()| de.end()) {
        Ok(()) => Judgement::Json,
        Err(_) => Judgement::NotJson,
    }
}

/// Walks a JSON value the way `serde_json::Value` parsing does (string escapes, nesting limit)
/// without keeping anything.
struct Skim;

impl<'de> DeserializeSeed<'de> for Skim {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(Skim)
    }
}

impl<'de> Visitor<'de> for Skim {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Skim)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Skim)?.is_some() {
            map.next_value_seed(Skim)?;
        }
        Ok(())
    }
}

/// The SDK's transport with the [`Ledger`] kept, malformed params answered, and the end of the
/// input held back until every request read has been answered.
pub(crate) struct AnsweringTransport<T> {
    inner: T,
    ledger: SharedLedger,
    outbox: Outbox,
    input_closed: bool,
}

impl<T> AnsweringTransport<T> {
    /// Wraps `inner`, whose reader is a [`CheckedReader`] and whose writer a [`LineWriter`]
    /// sharing `outbox` and `ledger`.
    pub(crate) fn new(inner: T, ledger: SharedLedger, outbox: Outbox) -> AnsweringTransport<T> {
        AnsweringTransport {
            inner,
            ledger,
            outbox,
            input_closed: false,
        }
    }
}

impl<T> Transport<RoleServer> for AnsweringTransport<T>
where
    T: Transport<RoleServer, Error = io::Error>,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        let answers = match &item {
            JsonRpcMessage::Response(response) => Some(response.id.clone()),
            JsonRpcMessage::Error(error) => error.id.clone(),
            JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => None,
        };
        let sending = self.inner.send(item);
        let ledger = Arc::clone(&self.ledger);
        async move {
            let result = sending.await;
            if let Some(id) = answers {
                ledger.send_modify(|l| {
                    l.pending.remove(&id);
                    l.depart(&id);
                });
            }
            result
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.input_closed {
                let mut settled = self.ledger.subscribe();
                let _ = settled.wait_for(Ledger::settled).await;
                return None;
            }
            let Some(message) = self.inner.receive().await else {
                self.input_closed = true;
                continue;
            };
            match &message {
                JsonRpcMessage::Request(request) => {
                    if let Some(error) = params_error(&request.request) {
                        let answer = ServerJsonRpcMessage::error(error, Some(request.id.clone()));
                        match serde_json::to_vec(&answer) {
                            Ok(mut line) => {
                                line.push(b'\n');
                                self.outbox.push(line);
                            }
                            Err(_) => return Some(message),
                        }
                        continue;
                    }
                    let id = request.id.clone();
                    let call = match &request.request {
                        ClientRequest::CallToolRequest(call) => Some(
                            crate::backend::tool_hints(&call.params.name)
                                .is_some_and(|h| !h.read_only),
                        ),
                        _ => None,
                    };
                    self.ledger.send_modify(|l| {
                        if let Some(writes) = call {
                            l.arrive(&id, writes);
                        }
                        l.pending.insert(id);
                    });
                }
                JsonRpcMessage::Notification(notification) => {
                    if let ClientNotification::CancelledNotification(cancelled) =
                        &notification.notification
                    {
                        if let Some(id) = &cancelled.params.request_id {
                            self.ledger.send_modify(|l| {
                                l.pending.remove(id);
                                l.depart(id);
                            });
                        }
                    }
                }
                JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {}
            }
            return Some(message);
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.inner.close().await
    }
}

/// The `-32602 Invalid params` error of a request for a method this server serves whose params
/// the SDK could not read (it hands such a request on as a custom one), or `None`.
fn params_error(request: &ClientRequest) -> Option<ErrorData> {
    let ClientRequest::CustomRequest(custom) = request else {
        return None;
    };
    let params = custom.params.as_ref();
    let message = match custom.method.as_str() {
        "tools/call" => tools_call_problem(params),
        "tools/list" => {
            match params.map(|p| serde_json::from_value::<PaginatedRequestParams>(p.clone())) {
                None | Some(Ok(_)) => return None,
                Some(Err(e)) => format!(
                "the params of tools/list must be an object with an optional cursor string: {e}"
            ),
            }
        }
        _ => return None,
    };
    Some(ErrorData::invalid_params(message, None))
}

/// What is wrong with the params of a `tools/call` the SDK could not read.
fn tools_call_problem(params: Option<&Value>) -> String {
    let Some(Value::Object(params)) = params else {
        return "tools/call needs params: an object with name (the tool, a string) and \
                arguments (an object)"
            .to_owned();
    };
    match params.get("name") {
        Some(Value::String(_)) => {}
        Some(other) => {
            return format!(
                "params.name of tools/call must be the tool's name as a string, not {}",
                json_kind(other)
            )
        }
        None => return "params.name of tools/call is missing: name the tool to call".to_owned(),
    }
    match params.get("arguments") {
        None | Some(Value::Null | Value::Object(_)) => {}
        Some(other) => {
            return format!(
                "params.arguments of tools/call must be a JSON object of the tool's inputs, not {}",
                json_kind(other)
            )
        }
    }
    match serde_json::from_value::<CallToolRequestParams>(Value::Object(params.clone())) {
        Ok(_) => "the params of tools/call could not be read".to_owned(),
        Err(e) => format!("the params of tools/call could not be read: {e}"),
    }
}

/// A JSON value's kind, with an article, for messages.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, DuplexStream};

    /// An input that hands out at most three bytes per read, so lines cross every boundary.
    struct Trickle(Vec<u8>, usize);

    impl AsyncRead for Trickle {
        fn poll_read(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            let end = (this.1 + 3).min(this.0.len()).min(this.1 + buf.remaining());
            buf.put_slice(&this.0[this.1..end]);
            this.1 = end;
            Poll::Ready(Ok(()))
        }
    }

    /// The output side over an in-memory pipe; returns the SDK's writer, the outbox, the ledger
    /// and the far end of the pipe.
    fn pipe_output() -> (LineWriter<DuplexStream>, Outbox, SharedLedger, DuplexStream) {
        let (near, far) = tokio::io::duplex(1 << 16);
        let ledger = new_ledger();
        let (writer, outbox, task) = output(near, &ledger);
        tokio::spawn(task);
        (writer, outbox, ledger, far)
    }

    /// Everything `input` yields through a [`CheckedReader`] with a `max`-byte line limit, and
    /// what the outbox wrote meanwhile.
    async fn check(input: &[u8], max: usize) -> (Vec<u8>, Vec<u8>) {
        let (writer, outbox, ledger, mut far) = pipe_output();
        let mut reader = CheckedReader::new(Trickle(input.to_vec(), 0), max, outbox);
        let mut passed = Vec::new();
        reader.read_to_end(&mut passed).await.unwrap();
        drop(reader);
        drop(writer);
        let mut settled = ledger.subscribe();
        settled.wait_for(Ledger::settled).await.unwrap();
        let mut written = Vec::new();
        // The outbox task ended with the last outbox clone: the pipe is closed.
        far.read_to_end(&mut written).await.unwrap();
        (passed, written)
    }

    #[test]
    fn lines_are_judged_as_the_sdk_reads_them() {
        assert_eq!(judge(b"{\"a\":[1,2.5,\"x\\u00e9\"]}\n"), Judgement::Json);
        assert_eq!(judge(b"\xEF\xBB\xBF{}\r\n"), Judgement::Json);
        assert_eq!(judge(b"123456789012345678901234567890\n"), Judgement::Json);
        assert_eq!(judge(b"\n"), Judgement::Blank);
        assert_eq!(judge(b"  \t\r\n"), Judgement::Blank);
        assert_eq!(judge(b"{\"a\":\n"), Judgement::NotJson);
        assert_eq!(judge(b"{} {}\n"), Judgement::NotJson);
        assert_eq!(judge(b"hello\n"), Judgement::NotJson);
        assert_eq!(judge(b"\"\xff\"\n"), Judgement::NotJson);
        assert_eq!(judge(b"\"bad \\q escape\"\n"), Judgement::NotJson);
        let deep = format!("{}{}\n", "[".repeat(200), "]".repeat(200));
        assert_eq!(
            judge(deep.as_bytes()),
            Judgement::NotJson,
            "deeper than the SDK's parser goes"
        );
    }

    #[tokio::test]
    async fn json_lines_pass_in_order_and_other_lines_are_answered() {
        let input = b"{\"id\":1}\nnot json\n\n{\"id\":2}\r\n{\"id\":\n[3]";
        let (passed, written) = check(input, 1024).await;
        assert_eq!(passed, b"{\"id\":1}\n{\"id\":2}\r\n[3]\n".to_vec());
        assert_eq!(written, PARSE_ERROR_LINE.repeat(2));
        let answer: Value = serde_json::from_slice(PARSE_ERROR_LINE).unwrap();
        assert_eq!(answer["id"], Value::Null);
        assert_eq!(answer["error"]["code"], -32700);
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_dropped_without_an_answer() {
        let long = format!("{{\"pad\":\"{}\"}}\n", "x".repeat(100));
        let input = format!("{long}{{\"id\":1}}\n{long}");
        // The limit counts the newline: a 9-byte line fits a limit of 9.
        let (passed, written) = check(input.as_bytes(), 9).await;
        assert_eq!(passed, b"{\"id\":1}\n".to_vec());
        assert!(written.is_empty(), "{}", String::from_utf8_lossy(&written));
    }

    #[tokio::test]
    async fn an_answer_waits_for_the_end_of_a_message_written_in_pieces() {
        let (mut writer, outbox, ledger, mut far) = pipe_output();
        writer.write_all(b"{\"jsonrpc\":").await.unwrap();
        outbox.push(PARSE_ERROR_LINE.to_vec());
        // The outbox cannot write while the message is unfinished.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(ledger.borrow().queued, 1);
        writer.write_all(b"\"2.0\"}\n").await.unwrap();
        writer.flush().await.unwrap();
        writer.write_all(b"{\"n\":2}\n").await.unwrap();
        writer.flush().await.unwrap();
        drop(outbox);
        let mut settled = ledger.subscribe();
        settled.wait_for(Ledger::settled).await.unwrap();
        drop(writer);
        let mut written = Vec::new();
        far.read_to_end(&mut written).await.unwrap();
        let text = String::from_utf8(written).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(
            lines[0], "{\"jsonrpc\":\"2.0\"}",
            "the message stayed whole"
        );
        assert!(lines.contains(&"{\"n\":2}"), "{text}");
        assert!(lines.contains(&std::str::from_utf8(PARSE_ERROR_LINE).unwrap().trim_end()));
    }

    #[test]
    fn calls_start_in_their_turn_of_arrival() {
        let id = |n: i64| RequestId::Number(n);
        let mut l = Ledger::default();
        // read 1, write 2, read 3, read 4, write 5
        for (n, writes) in [(1, false), (2, true), (3, false), (4, false), (5, true)] {
            l.arrive(&id(n), writes);
        }
        // A repeated id keeps its first place.
        l.arrive(&id(2), false);
        let starts = |l: &Ledger| {
            (1..=5)
                .filter(|&n| l.call_numbers.contains_key(&id(n)) && l.may_start(&id(n)))
                .collect::<Vec<_>>()
        };
        // The first read starts; the write waits for it; later reads wait for the write.
        assert_eq!(starts(&l), vec![1]);
        l.depart(&id(1));
        assert_eq!(starts(&l), vec![2]);
        l.depart(&id(2));
        // Reads run side by side; the next write waits for both.
        assert_eq!(starts(&l), vec![3, 4]);
        l.depart(&id(4));
        assert_eq!(starts(&l), vec![3]);
        l.depart(&id(3));
        assert_eq!(starts(&l), vec![5]);
        // A call the ledger does not know (or no longer knows) starts at once.
        assert!(l.may_start(&id(99)));
        l.depart(&id(5));
        assert!(l.calls.is_empty() && l.call_numbers.is_empty());
    }

    #[test]
    fn malformed_tools_call_params_are_named() {
        let call = |params: Value| {
            params_error(&ClientRequest::CustomRequest(
                rmcp::model::CustomRequest::new("tools/call", Some(params)),
            ))
            .map(|e| (e.code.0, e.message.into_owned()))
        };
        let (code, message) = call(serde_json::json!({"name": "t", "arguments": [1, 2]})).unwrap();
        assert_eq!(code, -32602);
        assert!(
            message.contains("arguments") && message.contains("an array"),
            "{message}"
        );
        let (_, message) = call(serde_json::json!({"name": "t", "arguments": "x"})).unwrap();
        assert!(message.contains("a string"), "{message}");
        let (_, message) = call(serde_json::json!({"arguments": {}})).unwrap();
        assert!(message.contains("params.name"), "{message}");
        let (_, message) = call(serde_json::json!([1])).unwrap();
        assert!(message.contains("needs params"), "{message}");
        let other = ClientRequest::CustomRequest(rmcp::model::CustomRequest::new(
            "custom/thing",
            Some(serde_json::json!([1])),
        ));
        assert!(
            params_error(&other).is_none(),
            "unknown methods stay the SDK's -32601"
        );
    }
}
