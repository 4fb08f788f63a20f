//! `nokv serve` behaviour (issue 14): request-id replay after a lost response, bearer-token
//! authentication, bad input (oversized bodies, malformed DTOs, slow-loris clients, a client that
//! disconnects mid-upload) leaving the store and the ledger consistent, the remote SDK's data
//! path, metrics, and a SIGTERM drain of the real binary.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use nokv::{Client, PutOptions};
use nokv_remote::RemoteClient;
use nokv_server::{RunningServer, ServerOptions};
use serde_json::{json, Value};

fn start(store: &Path, token: Option<&str>) -> RunningServer {
    nokv_server::start(ServerOptions {
        store: store.to_path_buf(),
        listen: "127.0.0.1:0".into(),
        token: token.map(str::to_string),
        header_timeout: Duration::from_millis(800),
        body_idle_timeout: Duration::from_millis(800),
        max_json_bytes: 64 * 1024,
        max_upload_bytes: 8 << 20,
        maintenance_interval: Duration::ZERO,
        recovery_interval: Duration::ZERO,
        ..ServerOptions::default()
    })
    .unwrap()
}

/// Sends one raw HTTP/1.1 request and returns `(status, headers, body)`; `Connection: close`.
fn raw(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let (h, b) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = h
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = if h
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(b.as_bytes())
    } else {
        b.as_bytes().to_vec()
    };
    (status, h.to_string(), body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(pos) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let n = usize::from_str_radix(std::str::from_utf8(&b[..pos]).unwrap_or("0").trim(), 16)
            .unwrap_or(0);
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&b[pos + 2..pos + 2 + n]);
        b = &b[pos + 2 + n + 2..];
    }
}

fn post(addr: std::net::SocketAddr, path: &str, extra: &str, body: &str) -> (u16, String, Vec<u8>) {
    raw(
        addr,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n",
            body.len()
        ),
        body.as_bytes(),
    )
}

fn json(b: &[u8]) -> Value {
    serde_json::from_slice(b).unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(b)))
}

#[test]
fn a_lost_response_retried_with_its_request_id_is_an_exact_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let srv = start(&store, None);
    let addr = srv.addr();
    let (st, _, b) = post(addr, "/v1/tools/workbench_create", "", r#"{"id":"wb"}"#);
    assert_eq!((st, json(&b)["status"].clone()), (200, json!("success")));

    // The first attempt: the client sends the whole request, the server commits, and the
    // connection is cut before the client read the response.
    let body = r#"{"id":"wb","section":"input","path":"a.txt","text":"hello"}"#;
    let mut first = TcpStream::connect(addr).unwrap();
    write!(
        first,
        "POST /v1/tools/workbench_put_file HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: put-a-1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let remote = RemoteClient::connect(&srv.url(), None).unwrap();
    let mut entry = None;
    for _ in 0..400 {
        if let Ok(e) = remote.stat("wb", "input/a.txt") {
            entry = Some(e);
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let entry = entry.expect("the request was committed");
    // The response is lost: the connection goes away unread.
    first.shutdown(std::net::Shutdown::Both).unwrap();
    drop(first);

    // The retry with the same request id: the original response, not AlreadyExists.
    let (st, head, b1) = post(
        addr,
        "/v1/tools/workbench_put_file",
        "Idempotency-Key: put-a-1\r\n",
        body,
    );
    assert_eq!(st, 200);
    assert!(
        head.to_ascii_lowercase().contains("x-nokv-replayed: true"),
        "{head}"
    );
    let env = json(&b1);
    assert_eq!(env["status"], "success", "{env}");
    assert_eq!(env["generation"], json!(entry.generation));
    // A second retry is byte-for-byte the same response.
    let (_, _, b2) = post(
        addr,
        "/v1/tools/workbench_put_file",
        "Idempotency-Key: put-a-1\r\n",
        body,
    );
    assert_eq!(b1, b2);
    // Written exactly once: one publication event for the path, generation unchanged.
    assert_eq!(
        remote.stat("wb", "input/a.txt").unwrap().generation,
        entry.generation
    );
    // A different request under the same id is refused; a new id executes (AlreadyExists).
    let (st, _, b) = post(
        addr,
        "/v1/tools/workbench_put_file",
        "Idempotency-Key: put-a-1\r\n",
        r#"{"id":"wb","section":"input","path":"a.txt","text":"other"}"#,
    );
    assert_eq!(
        (st, json(&b)["code"].clone()),
        (422, json!("RequestIdReused"))
    );
    let (st, _, b) = post(
        addr,
        "/v1/tools/workbench_put_file",
        "Idempotency-Key: put-a-2\r\n",
        body,
    );
    assert_eq!(
        (st, json(&b)["code"].clone()),
        (200, json!("AlreadyExists"))
    );
    srv.shutdown().unwrap();

    // The replay survives a restart of the server (the journal is durable).
    let srv = start(&store, None);
    let (st, _, b3) = post(
        srv.addr(),
        "/v1/tools/workbench_put_file",
        "Idempotency-Key: put-a-1\r\n",
        body,
    );
    assert_eq!((st, &b3), (200, &b1));
    srv.shutdown().unwrap();
    let client = Client::open(&store).unwrap();
    let published: Vec<_> = client
        .workbench_changes("wb", None)
        .unwrap()
        .map(|i| i.unwrap())
        .filter(|i| i.path.as_deref() == Some("input/a.txt"))
        .collect();
    assert_eq!(published.len(), 1, "{published:?}");
}

#[test]
fn the_remote_sdk_writes_reads_ranges_and_retries_writes_without_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = start(&tmp.path().join("s"), Some("s3cret"));
    let remote = RemoteClient::connect(&srv.url(), Some("s3cret")).unwrap();
    assert!(remote.create_workbench("wb").unwrap());
    assert!(!remote.create_workbench("wb").unwrap());
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let r = remote
        .put(
            "wb",
            "outputs/blob.bin",
            &body,
            &PutOptions::create("application/octet-stream", "t"),
        )
        .unwrap();
    assert_eq!(r.size_bytes, body.len() as u64);
    assert_eq!(remote.read_all("wb", "outputs/blob.bin").unwrap(), body);
    assert_eq!(
        remote
            .read_range("wb", "outputs/blob.bin", 1000, 5000)
            .unwrap(),
        body[1000..6000].to_vec()
    );
    assert!(matches!(
        remote.read_range("wb", "outputs/blob.bin", body.len() as u64, 1),
        Err(nokv::Error::RangeOutOfBounds { .. })
    ));
    let e = remote.stat("wb", "outputs/blob.bin").unwrap();
    assert_eq!(
        (e.generation, e.logical_size),
        (r.generation, body.len() as u64)
    );
    match remote.stat("wb", "outputs/none") {
        Err(nokv::Error::OperationFailed { code, .. }) => assert_eq!(code, "NotFound"),
        other => panic!("{other:?}"),
    }
    // Streamed upload from a reader, replace under the generation it saw.
    let mut opts = PutOptions::create("text/plain", "t");
    opts.condition = nokv::WriteCondition::Replace {
        expected_generation: Some(r.generation),
    };
    let r2 = remote
        .put_reader("wb", "outputs/blob.bin", &b"small"[..], &opts)
        .unwrap();
    assert!(r2.generation > r.generation);
    match remote.put_reader("wb", "outputs/blob.bin", &b"again"[..], &opts) {
        Err(nokv::Error::OperationFailed { code, .. }) => assert_eq!(code, "Conflict"),
        other => panic!("{other:?}"),
    }
    // Wrong or missing token: typed refusals, not retried.
    let bad = RemoteClient::connect(&srv.url(), Some("nope")).unwrap();
    match bad.health() {
        Err(nokv::Error::Server {
            status: 401,
            code,
            retryable: false,
            ..
        }) => {
            assert_eq!(code, "Unauthorized")
        }
        other => panic!("{other:?}"),
    }
    // A server that is gone: a typed, retryable connection error.
    let url = srv.url();
    srv.shutdown().unwrap();
    let gone = RemoteClient::connect(&url, Some("s3cret"))
        .unwrap()
        .with_retries(1);
    let e = gone.health().unwrap_err();
    assert!(
        matches!(e, nokv::Error::Connection { .. }) && e.is_retryable(),
        "{e:?}"
    );
}

#[test]
fn missing_or_wrong_tokens_are_refused_on_every_route_and_touch_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = start(&tmp.path().join("s"), Some("tok"));
    let addr = srv.addr();
    for (path, extra) in [
        ("/v1/tools/workbench_create", ""),
        (
            "/v1/tools/workbench_create",
            "Authorization: Bearer wrong\r\n",
        ),
        ("/v1/tools/workbench_create", "Authorization: tok\r\n"),
        ("/v1/commands/find", ""),
    ] {
        let (st, _, b) = post(addr, path, extra, r#"{"id":"wb"}"#);
        assert_eq!(st, 401, "{path} {extra}");
        assert_eq!(json(&b)["code"], "Unauthorized");
    }
    for path in ["/healthz", "/metrics", "/v1/changes"] {
        let (st, _, _) = raw(
            addr,
            &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
            b"",
        );
        assert_eq!(st, 401, "{path}");
    }
    let (st, _, b) = post(
        addr,
        "/v1/tools/workbench_list",
        "Authorization: Bearer tok\r\n",
        r#"{"id":"wb"}"#,
    );
    assert_eq!((st, json(&b)["code"].clone()), (200, json!("NotFound")));
    // A non-loopback listener without a token refuses to start.
    let err = nokv_server::start(ServerOptions {
        store: tmp.path().join("t"),
        listen: "0.0.0.0:0".into(),
        ..ServerOptions::default()
    })
    .unwrap_err();
    assert!(matches!(err, nokv::Error::InvalidArgument(_)), "{err:?}");
    srv.shutdown().unwrap();
}

#[test]
fn bad_input_is_refused_with_typed_errors_and_leaves_the_store_consistent() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let srv = start(&store, None);
    let addr = srv.addr();
    post(addr, "/v1/tools/workbench_create", "", r#"{"id":"wb"}"#);

    // Oversized JSON body (limit 64 KiB in this test): 413, nothing written.
    let big = format!(
        r#"{{"id":"wb","section":"input","path":"big.txt","text":"{}"}}"#,
        "x".repeat(100_000)
    );
    let (st, _, b) = post(addr, "/v1/tools/workbench_put_file", "", &big);
    assert_eq!(
        (st, json(&b)["code"].clone()),
        (413, json!("PayloadTooLarge"))
    );
    // Malformed DTOs: not JSON → 400; bad query → 400; unknown endpoint → 404; unknown tool →
    // the tool envelope (200).
    let (st, _, b) = post(addr, "/v1/tools/workbench_put_file", "", "{nope");
    assert_eq!(
        (st, json(&b)["code"].clone()),
        (400, json!("InvalidArguments"))
    );
    let (st, _, b) = post(addr, "/v1/commands/commit", "", r#"{"bogus":[1]}"#);
    assert_eq!(
        (st, json(&b)["code"].clone()),
        (400, json!("InvalidArguments"))
    );
    let (st, _, _) = raw(
        addr,
        "PUT /v1/workbenches/wb/files/input/q.bin?replace=maybe HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        b"",
    );
    assert_eq!(st, 400);
    let (st, _, b) = post(addr, "/v2/everything", "", "{}");
    assert_eq!((st, json(&b)["code"].clone()), (404, json!("NotFound")));
    let (st, _, b) = post(addr, "/v1/tools/workbench_teleport", "", "{}");
    assert_eq!((st, json(&b)["code"].clone()), (200, json!("UnknownTool")));
    // Oversized streamed upload (limit 8 MiB; blocks are 4 MiB, so the first block was already
    // staged and sent): 413, the publication aborted and cleaned up.
    let payload = vec![7u8; 9 << 20];
    let (st, _, b) = raw(
        addr,
        &format!(
            "PUT /v1/workbenches/wb/files/input/huge.bin HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            payload.len()
        ),
        &payload,
    );
    assert_eq!(
        (st, json(&b)["code"].clone()),
        (413, json!("PayloadTooLarge"))
    );

    // Slow-loris: a client that sends part of a request head and stalls is disconnected after
    // the header timeout; the server keeps serving others.
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.write_all(b"POST /v1/tools/workbench_list HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut buf = Vec::new();
    let _ = slow.read_to_end(&mut buf);
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "slow client was never cut off"
    );
    // A client that stalls mid-body is answered 408 (or cut off) and nothing is written.
    let mut stall = TcpStream::connect(addr).unwrap();
    stall
        .write_all(b"PUT /v1/workbenches/wb/files/input/stalled.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
        .unwrap();
    stall.write_all(&[1u8; 5000]).unwrap();
    stall
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut resp = Vec::new();
    let _ = stall.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );

    // A client that disconnects mid-upload.
    {
        let mut cut = TcpStream::connect(addr).unwrap();
        cut.write_all(b"PUT /v1/workbenches/wb/files/input/cut.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 7000000\r\n\r\n")
            .unwrap();
        // More than one 4 MiB block: the first block is staged in the ledger and uploaded
        // before the connection breaks.
        cut.write_all(&vec![2u8; 5_000_000]).unwrap();
        cut.shutdown(std::net::Shutdown::Both).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1500));
    // The server is healthy and still serves.
    let (st, _, b) = post(
        addr,
        "/v1/tools/workbench_list",
        "",
        r#"{"id":"wb","section":"input"}"#,
    );
    assert_eq!(st, 200);
    let env = json(&b);
    assert_eq!(env["status"], "success");
    assert_eq!(
        env["entry_count"], 0,
        "no partial artifact is visible: {env}"
    );
    srv.shutdown().unwrap();

    // Store and ledger consistent: no artifact, every aborted publication cleaned (none left
    // pending or quarantined), no ledger-owned object left behind.
    let client = Client::open(&store).unwrap();
    for p in [
        "input/big.txt",
        "input/huge.bin",
        "input/stalled.bin",
        "input/cut.bin",
    ] {
        assert!(
            matches!(client.stat("wb", p), Err(nokv::Error::NotFound { .. })),
            "{p}"
        );
    }
    let summary = client.recover_operations().unwrap();
    assert!(summary.errors.is_empty(), "{summary:?}");
    let ops = client.list_operations(true).unwrap();
    // The oversized and the cut upload had begun (a block staged and sent) before they broke.
    assert!(ops.len() >= 2, "{ops:?}");
    for op in &ops {
        assert_eq!(op.phase, "Cleaned", "{op:?}");
        assert_eq!(op.live_objects, 0, "{op:?}");
    }
    assert!(client.ledger_owned_keys().unwrap().is_empty());
    // No block of any aborted upload is left in the object store.
    let mut stack = vec![store.join("objects")];
    let mut blocks = Vec::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                blocks.push(e.path());
            }
        }
    }
    assert!(blocks.is_empty(), "orphan objects: {blocks:?}");
}

#[test]
fn metrics_and_health_report_requests_group_commits_and_open_operations() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = start(&tmp.path().join("s"), None);
    let remote = RemoteClient::connect(&srv.url(), None).unwrap();
    remote.create_workbench("wb").unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let remote = remote.clone();
            s.spawn(move || {
                remote
                    .put(
                        "wb",
                        &format!("outputs/{t}"),
                        b"x",
                        &PutOptions::create("text/plain", "t"),
                    )
                    .unwrap();
            });
        }
    });
    let health = remote.health().unwrap();
    assert_eq!(health["status"], "ok");
    // Nothing else is running: the health check does not count itself.
    assert_eq!(health["in_flight"], 0, "{health}");
    let (st, _, body) = raw(
        srv.addr(),
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"",
    );
    assert_eq!(st, 200);
    let text = String::from_utf8_lossy(&body);
    for needle in [
        "nokv_http_requests_total{route=\"/v1/workbenches/{id}/files/{*path}\",status=\"200\"} 8",
        "nokv_http_request_duration_seconds_count{route=\"/v1/workbenches/{id}/files/{*path}\"} 8",
        "nokv_group_commit_size_bucket{le=\"+Inf\"}",
        "nokv_open_operations{kind=\"publish\"} 0",
        "nokv_http_requests_in_flight 1",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
    srv.shutdown().unwrap();
}

#[test]
fn sigterm_drains_the_in_flight_upload_then_closes_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args(["--store", store.to_str().unwrap(), "serve", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .env_remove("NOKV_TOKEN")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let remote = RemoteClient::connect(&url, None).unwrap();
    let mut up = false;
    for _ in 0..400 {
        if remote.health().is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(up, "server did not come up");
    remote.create_workbench("wb").unwrap();
    // Start an upload, send half of it, deliver SIGTERM, then finish the upload.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"PUT /v1/workbenches/wb/files/input/slow.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\nConnection: close\r\n\r\n")
        .unwrap();
    s.write_all(&[9u8; 100_000]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    std::thread::sleep(Duration::from_millis(200));
    s.write_all(&[9u8; 100_000]).unwrap();
    let mut resp = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = s.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"status\":\"success\""), "{text}");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    // The operator is told what happened, in order; nothing was cut off.
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    let listening = log.find("nokv serve: listening on http://127.0.0.1:");
    let stopping = log.find("nokv serve: stopping: no new connections");
    let stopped = log.find("nokv serve: stopped; the store is closed");
    assert!(
        listening.is_some() && stopping.is_some() && stopped.is_some(),
        "{log}"
    );
    assert!(listening < stopping && stopping < stopped, "{log}");
    assert!(!log.contains("drain timeout"), "{log}");
    // Closed cleanly: the store opens at once (lock released) with the drained upload in it.
    let client = Client::open_with(
        &store,
        nokv::ClientOptions {
            lock_wait: Duration::from_millis(100),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        client.read_all("wb", "input/slow.bin").unwrap(),
        vec![9u8; 200_000]
    );
}

#[test]
fn sigterm_cuts_off_a_stalled_upload_after_the_drain_timeout_says_so_and_publishes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args(["--store", store.to_str().unwrap(), "serve", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--drain-timeout", "1"])
        .env_remove("NOKV_TOKEN")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let remote = RemoteClient::connect(&format!("http://127.0.0.1:{port}"), None).unwrap();
    let mut up = false;
    for _ in 0..400 {
        if remote.health().is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(up, "server did not come up");
    remote.create_workbench("wb").unwrap();
    // Half of an upload, then silence: the drain timeout (1 s) passes with it in flight.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"PUT /v1/workbenches/wb/files/input/stalled.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\nConnection: close\r\n\r\n")
        .unwrap();
    s.write_all(&[7u8; 100_000]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(
        log.contains("nokv serve: the drain timeout (1.0 s) passed with requests still in flight"),
        "{log}"
    );
    assert!(
        log.contains("nokv serve: stopped; the store is closed"),
        "{log}"
    );
    drop(s);
    // The cut-off upload was not published.
    let client = Client::open_with(
        &store,
        nokv::ClientOptions {
            lock_wait: Duration::from_secs(5),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(matches!(
        client.read_all("wb", "input/stalled.bin"),
        Err(nokv::Error::NotFound { .. })
    ));
}

#[test]
fn a_body_that_differs_from_its_declared_sha256_is_never_published() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let srv = start(&store, None);
    let remote = RemoteClient::connect(&format!("http://{}", srv.addr()), None).unwrap();
    remote.create_workbench("wb").unwrap();
    let put = |path: &str, query: &str, digest: &str, body: &[u8]| {
        let (st, _, resp) = raw(
            srv.addr(),
            &format!(
                "PUT /v1/workbenches/wb/files/{path}{query} HTTP/1.1\r\nHost: x\r\n\
                 x-nokv-content-sha256: {digest}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            ),
            body,
        );
        let v: Value = serde_json::from_slice(&resp).unwrap_or(Value::Null);
        (st, v)
    };
    let sha = |b: &[u8]| objstore::sha256_uri(b);
    // Create-only with the digest of another body: refused, nothing at the path.
    let (_, v) = put("outputs/m.txt", "", &sha(b"world"), b"hello");
    assert_eq!(v["status"], "error", "{v}");
    assert_eq!(v["code"], "InvalidArguments", "{v}");
    assert_eq!(v["details"]["actual"], sha(b"hello"), "{v}");
    assert_eq!(v["details"]["declared"], sha(b"world"), "{v}");
    // The right digest (bare uppercase hex, as sha256sum prints it after upper-casing) works.
    let bare = sha(b"hello")[7..].to_ascii_uppercase();
    let (_, v) = put("outputs/m.txt", "", &bare, b"hello");
    assert_eq!(v["status"], "success", "{v}");
    // A replacement with a wrong digest leaves the file as it was.
    let (_, v) = put("outputs/m.txt", "?replace=true", &sha(b"good"), b"CORRUPT");
    assert_eq!(v["code"], "InvalidArguments", "{v}");
    // A body of several blocks (5 MiB) with a wrong digest: its staged blocks are deleted.
    let big = vec![3u8; 5 << 20];
    let (_, v) = put("outputs/big.bin", "", &sha(b"other"), &big);
    assert_eq!(v["code"], "InvalidArguments", "{v}");
    // A malformed digest is refused before the body is read.
    for bad in ["zzz", "sha256:ABC", "md5:00"] {
        let (st, v) = put("outputs/bad.txt", "", bad, b"hello");
        assert_eq!(st, 400, "{bad}: {v}");
        assert_eq!(v["code"], "InvalidArguments", "{bad}: {v}");
    }
    srv.shutdown().unwrap();

    let client = Client::open(&store).unwrap();
    assert_eq!(client.read_all("wb", "outputs/m.txt").unwrap(), b"hello");
    for missing in ["outputs/big.bin", "outputs/bad.txt"] {
        assert!(matches!(
            client.read_all("wb", missing),
            Err(nokv::Error::NotFound { .. })
        ));
    }
    let outcome = client.fsck().unwrap();
    assert!(outcome.report.findings.is_empty(), "{:?}", outcome.report);
    assert!(
        outcome.unowned_objects.is_empty(),
        "{:?}",
        outcome.unowned_objects
    );
}

#[test]
fn a_read_at_a_version_newer_than_the_store_is_invalid_arguments_not_internal() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let srv = start(&store, None);
    let remote = RemoteClient::connect(&format!("http://{}", srv.addr()), None).unwrap();
    remote.create_workbench("wb").unwrap();
    let (st, _, _) = raw(
        srv.addr(),
        "PUT /v1/workbenches/wb/files/outputs/a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n",
        b"hi",
    );
    assert_eq!(st, 200);
    for target in [
        "/v1/workbenches/wb/files/outputs/a.txt?version=1000",
        "/v1/workbenches/wb/stat/outputs/a.txt?version=18446744073709551615",
    ] {
        let (st, _, body) = raw(
            srv.addr(),
            &format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
            b"",
        );
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(st, 400, "{target}: {v}");
        assert_eq!(v["code"], "InvalidArguments", "{v}");
        assert_eq!(v["details"]["reason"], "version_in_future", "{v}");
        assert_eq!(v["retryable"], false, "{v}");
    }
    srv.shutdown().unwrap();
}

#[test]
fn refusals_of_the_http_stack_and_bad_ids_are_json_invalid_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = start(&tmp.path().join("s"), None);
    let remote = RemoteClient::connect(&format!("http://{}", srv.addr()), None).unwrap();
    remote.create_workbench("wb").unwrap();
    let cases: [(&str, &[u8], u16); 4] = [
        // A query string that does not deserialize.
        (
            "PUT /v1/workbenches/wb/files/outputs/a.txt?replace=true&expected_generation=abc HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n",
            b"hi",
            400,
        ),
        (
            "GET /v1/workbenches/wb/files/outputs/a.txt?version=-1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            b"",
            400,
        ),
        // A method the route does not have.
        (
            "DELETE /v1/schema HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            b"",
            405,
        ),
        // A workbench id the metadata layer refuses (`../`).
        (
            "PUT /v1/workbenches/..%2F/files/outputs/a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n",
            b"hi",
            0,
        ),
    ];
    for (head, body, status) in cases {
        let (st, headers, resp) = raw(srv.addr(), head, body);
        let v: Value = serde_json::from_slice(&resp).unwrap_or_else(|e| {
            panic!("{head}: not JSON ({e}): {}", String::from_utf8_lossy(&resp))
        });
        if status != 0 {
            assert_eq!(st, status, "{head}: {v}");
        }
        assert_eq!(v["status"], "error", "{head}: {v}");
        assert_eq!(v["code"], "InvalidArguments", "{head}: {v}");
        assert!(!v["message"].as_str().unwrap_or("").is_empty(), "{v}");
        if status == 405 {
            assert!(headers.to_ascii_lowercase().contains("allow:"), "{headers}");
        }
    }
    srv.shutdown().unwrap();
}

#[test]
fn a_refusal_keeps_its_details_through_the_remote_client_and_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = start(&tmp.path().join("s"), None);
    let remote = RemoteClient::connect(&srv.url(), None).unwrap();
    remote.call_tool("create", &json!({"id": "wb"})).unwrap();
    // A tool call over the server's JSON limit (64 KiB here) is refused by the server itself.
    let text = "x".repeat(100_000);
    let args = json!({"id": "wb", "section": "input", "path": "big.txt", "text": text});
    match remote.call_tool("put_file", &args) {
        Err(nokv::Error::Server {
            status: 413,
            code,
            details,
            ..
        }) => {
            assert_eq!(code, "PayloadTooLarge");
            assert_eq!(details["maximum_bytes"], json!(64 * 1024), "{details:?}");
        }
        other => panic!("{other:?}"),
    }
    // `nokv --server` prints the server's envelope with its details, as embedded errors do.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args(["--server", &srv.url(), "workbench", "put_file"])
        .arg(args.to_string())
        .env_remove("NOKV_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["code"], "PayloadTooLarge", "{v}");
    assert_eq!(v["details"]["maximum_bytes"], json!(64 * 1024), "{v}");
    assert!(matches!(
        remote.stat("wb", "input/big.txt"),
        Err(nokv::Error::OperationFailed { .. }) | Err(nokv::Error::NotFound { .. })
    ));
    srv.shutdown().unwrap();
}

/// Creates the store with workbench `wb` holding `input/big.bin`, a body of `mib` MiB (4 MiB
/// blocks), and returns the body.
fn store_with_big_file(store: &Path, mib: u32) -> Vec<u8> {
    let body: Vec<u8> = (0..mib << 20).map(|i| (i % 251) as u8).collect();
    let client = Client::open(store).unwrap();
    client.create_workbench("wb").unwrap();
    client
        .put(
            "wb",
            "input/big.bin",
            &body,
            &PutOptions::create("application/octet-stream", "t"),
        )
        .unwrap();
    body
}

#[test]
fn a_range_read_of_a_missing_block_is_object_unavailable_with_its_reason_like_the_read_tool() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let body = store_with_big_file(&store, 5);
    // The second 4 MiB block disappears behind the metadata's back.
    let mut stack = vec![store.join("objects")];
    let mut second = None;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else if e.file_name() == "0000000000000001" {
                second = Some(e.path());
            }
        }
    }
    std::fs::remove_file(second.expect("a second block")).unwrap();
    let srv = start(&store, None);
    let addr = srv.addr();
    let get = |range: &str| {
        raw(
            addr,
            &format!(
                "GET /v1/workbenches/wb/files/input/big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes={range}\r\nConnection: close\r\n\r\n"
            ),
            b"",
        )
    };
    // Bytes of the block that is there are served; a range in the lost block is the documented
    // 503 ObjectUnavailable (it was 409 Internal), as the read tool answers embedded.
    let (st, _, b) = get("10-19");
    assert_eq!((st, b.as_slice()), (206, &body[10..20]));
    let (st, _, b) = get("5000000-5000010");
    let v = json(&b);
    assert_eq!(
        (st, v["code"].clone()),
        (503, json!("ObjectUnavailable")),
        "{v}"
    );
    // A lost block says so: retrying will not bring it back.
    assert_eq!(v["details"]["reason"], "object_missing", "{v}");
    assert!(v["message"].as_str().unwrap().contains("nokv fsck"), "{v}");
    let remote = RemoteClient::connect(&srv.url(), None).unwrap();
    let tool = remote
        .call_tool(
            "read",
            &json!({"id": "wb", "section": "input", "path": "big.bin", "format": "bytes", "offset": 5000000, "limit": 10}),
        )
        .unwrap();
    assert_eq!(tool["code"], "ObjectUnavailable", "{tool}");
    assert_eq!(tool["details"]["reason"], "object_missing", "{tool}");
    // A whole-body download has sent its 200 before it reaches the lost block, so the server can
    // only cut the stream; the client says why instead of reporting a broken connection.
    let lost = |e: nokv::Error| match e {
        nokv::Error::OperationFailed { code, message } => {
            assert_eq!(code, "ObjectUnavailable", "{message}");
            assert!(message.contains("nokv fsck"), "{message}");
        }
        other => panic!("expected ObjectUnavailable, got {other:?}"),
    };
    lost(remote.read_all("wb", "input/big.bin").unwrap_err());
    let (version, files) = remote.list_files("wb", None).unwrap();
    assert_eq!(files.len(), 1);
    let mut sink = Vec::new();
    lost(
        remote
            .read_to_writer_at("wb", "input/big.bin", version, &mut sink, &mut |_| {})
            .unwrap_err(),
    );
    assert!(sink.len() <= 4 << 20, "{} bytes", sink.len());
    assert_eq!(sink.as_slice(), &body[..sink.len()]);
    // The first block is intact: a read that ends before the lost block still succeeds.
    assert_eq!(
        remote
            .read_range("wb", "input/big.bin", 0, 4 << 20)
            .unwrap(),
        &body[..4 << 20]
    );
    srv.shutdown().unwrap();
}

/// A loopback TCP proxy in front of `upstream` that cuts the first whole-file download it
/// carries (a `GET …/files/…` without `Range`) after `budget` response bytes — a network cut in
/// the middle of a body — and passes everything else through. Returns its address; the proxy
/// threads end with the test process.
fn cutting_proxy(upstream: std::net::SocketAddr, budget: usize) -> std::net::SocketAddr {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let cut_done = Arc::new(AtomicBool::new(false));
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(upstream) else {
                continue;
            };
            let armed = Arc::new(AtomicBool::new(false));
            let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let (arm, done) = (Arc::clone(&armed), Arc::clone(&cut_done));
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 << 10];
                while let Ok(n) = c_in.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let head = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
                    if head.starts_with("get /v1/workbenches/")
                        && head.contains("/files/")
                        && !head.contains("\r\nrange:")
                        && !done.swap(true, Ordering::SeqCst)
                    {
                        arm.store(true, Ordering::SeqCst);
                    }
                    if s_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 << 10];
                let mut sent = 0usize;
                while let Ok(n) = s_in.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let n = if armed.load(Ordering::SeqCst) {
                        n.min(budget - sent)
                    } else {
                        n
                    };
                    if c_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    sent += n;
                    if armed.load(Ordering::SeqCst) && sent >= budget {
                        let _ = c_out.shutdown(std::net::Shutdown::Both);
                        let _ = s_in.shutdown(std::net::Shutdown::Both);
                        break;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn a_download_cut_by_the_network_is_resumed_with_range_requests_and_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    // Three blocks (4 + 4 + 1 MiB): the cut lands in the first, the resume crosses the others.
    let body = store_with_big_file(&store, 9);
    let srv = start(&store, None);
    // Whole-body read: the first download is cut 1.5 MiB in, the client finishes it.
    let proxy = cutting_proxy(srv.addr(), 3 << 19);
    let remote = RemoteClient::connect(&format!("http://{proxy}"), None)
        .unwrap()
        .with_retries(0);
    assert!(remote.read_all("wb", "input/big.bin").unwrap() == body);
    // Materialize's streaming read at a read version, through a fresh proxy.
    let proxy = cutting_proxy(srv.addr(), 3 << 19);
    let remote = RemoteClient::connect(&format!("http://{proxy}"), None)
        .unwrap()
        .with_retries(0);
    let (version, _) = remote.list_files("wb", None).unwrap();
    let mut sink = Vec::new();
    let mut progress = 0;
    let n = remote
        .read_to_writer_at("wb", "input/big.bin", version, &mut sink, &mut |done| {
            progress = done
        })
        .unwrap();
    assert_eq!((n, progress), (body.len() as u64, body.len() as u64));
    assert!(sink == body);
    srv.shutdown().unwrap();
}

#[test]
fn a_writer_beside_a_running_server_is_told_where_it_serves_and_a_killed_servers_record_is_ignored()
{
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let spawn = |port: u16| {
        std::process::Command::new(env!("CARGO_BIN_EXE_nokv"))
            .args(["--store", store.to_str().unwrap(), "serve", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .env_remove("NOKV_TOKEN")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let free_port = || {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let wait_up = |url: &str| {
        let remote = RemoteClient::connect(url, None).unwrap();
        for _ in 0..400 {
            if remote.health().is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("server did not come up");
    };
    let cli_put = |path: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_nokv"))
            .args(["--store", store.to_str().unwrap(), "workbench", "put_file"])
            .arg(format!(
                r#"{{"id":"wb","section":"input","path":"{path}","text":"x"}}"#
            ))
            .env_remove("NOKV_SERVER")
            .output()
            .unwrap();
        (out.status.code(), json(&out.stdout))
    };
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut child = spawn(port);
    wait_up(&url);
    RemoteClient::connect(&url, None)
        .unwrap()
        .create_workbench("wb")
        .unwrap();
    // A writer opening the store itself is refused at once with where to send the call (it
    // waited 30 s for a lock the server never releases, then said to retry).
    let (code, v) = cli_put("a.txt");
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["code"], "InvalidState", "{v}");
    assert_eq!(v["retryable"], false, "{v}");
    assert_eq!(v["details"]["reason"], "store_served", "{v}");
    assert_eq!(v["details"]["server_url"], url.as_str(), "{v}");
    assert!(v["message"].as_str().unwrap().contains("--server"), "{v}");
    // The same call through the server works.
    let remote = RemoteClient::connect(&url, None).unwrap();
    let ok = remote
        .call_tool(
            "put_file",
            &json!({"id":"wb","section":"input","path":"a.txt","text":"x"}),
        )
        .unwrap();
    assert_eq!(ok["status"], "success", "{ok}");
    // A killed server leaves its record behind; it is ignored once the lock is free.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(store.join("server/address.json").is_file());
    let (code, v) = cli_put("b.txt");
    assert_eq!(code, Some(0), "{v}");
    // A server stopped by SIGTERM removes its record.
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut child = spawn(port);
    wait_up(&url);
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(!store.join("server/address.json").exists());
}

#[test]
fn a_handle_opened_before_a_server_started_is_told_where_it_serves_at_its_next_write() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let client = Client::open_with(
        &store,
        nokv::ClientOptions {
            lock_wait: Duration::from_secs(2),
            ..Default::default()
        },
    )
    .unwrap();
    client.create_workbench("wb").unwrap();
    // The handle releases the lock after its idle grace; the server then takes it for its life.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args(["--store", store.to_str().unwrap(), "serve", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .env_remove("NOKV_TOKEN")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let remote = RemoteClient::connect(&url, None).unwrap();
    let mut up = false;
    for _ in 0..800 {
        if remote.health().is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let put = client.put(
        "wb",
        "input/a.txt",
        b"x",
        &PutOptions::create("text/plain", "test"),
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(up, "server did not come up");
    match put {
        Err(nokv::Error::StoreServed { url: served }) => assert_eq!(served, url),
        other => panic!("expected StoreServed, got {other:?}"),
    }
    // Once the server is gone the handle writes again.
    client
        .put(
            "wb",
            "input/b.txt",
            b"y",
            &PutOptions::create("text/plain", "test"),
        )
        .unwrap();
}
