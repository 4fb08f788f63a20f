//! `nokv mcp --server URL` and the remote backend against a stub of the `nokv serve` tool DTO:
//! `POST /v1/tools/{tool}`, JSON input body, bearer token, the envelope as the response body.
//!
//! The stub answers with the real facade over a store in this test process, and records every
//! request and the envelope it answered, so a test can check that envelopes pass through the
//! MCP layer unchanged. Like the server's request journal, the stub runs a write at most once
//! per `Idempotency-Key` and answers a resend with the stored envelope. Scripted faults (a
//! response lost after the call ran, a 503, a body that is not an envelope) exercise the
//! backend's resend rules. `mcp_serve.rs` runs the same paths against a real `nokv serve`.

mod mcp_support;

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_support::{envelope_of, nokv_schema, McpChild};
use nokv::workbench::Workbench;
use nokv::Client;
use nokv_mcp::{RemoteBackend, RemoteOptions, ToolBackend};
use serde_json::{json, Value};

/// What the stub does with the next request.
#[derive(Debug, Clone)]
enum Action {
    /// Run the tool and answer 200 with its envelope.
    Serve,
    /// Run the tool, then close the connection without answering (a lost response).
    RunThenHangUp,
    /// Answer this status and raw body without running anything.
    Reply(u16, &'static str),
}

#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    authorization: Option<String>,
    content_type: Option<String>,
    idempotency_key: Option<String>,
    input: Value,
    answered: Option<Value>,
}

struct Stub {
    url: String,
    workbench: Workbench,
    token: Option<&'static str>,
    script: Mutex<VecDeque<Action>>,
    seen: Mutex<Vec<Seen>>,
    /// Envelope answered per request id (the server's request journal, in memory).
    replies: Mutex<std::collections::HashMap<String, Value>>,
    /// `GET /v1/whoami` requests received.
    whoami: std::sync::atomic::AtomicUsize,
    _store: tempfile::TempDir,
}

impl Stub {
    fn start(token: Option<&'static str>) -> Arc<Stub> {
        let store = tempfile::tempdir().unwrap();
        let client = Client::open(store.path().join("store")).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stub = Arc::new(Stub {
            url,
            workbench: Workbench::new(client),
            token,
            script: Mutex::new(VecDeque::new()),
            seen: Mutex::new(Vec::new()),
            replies: Mutex::new(std::collections::HashMap::new()),
            whoami: std::sync::atomic::AtomicUsize::new(0),
            _store: store,
        });
        let server = Arc::clone(&stub);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { break };
                let s = Arc::clone(&server);
                std::thread::spawn(move || s.handle(conn));
            }
        });
        stub
    }

    fn script(&self, actions: &[Action]) {
        self.script.lock().unwrap().extend(actions.iter().cloned());
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn handle(&self, mut conn: TcpStream) {
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut reader = BufReader::new(conn.try_clone().unwrap());
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_string();
        let path = parts.next().unwrap_or_default().to_string();
        let (mut len, mut authorization, mut content_type, mut key) = (0usize, None, None, None);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                break;
            }
            let (k, v) = h.split_once(':').unwrap_or((h.as_str(), ""));
            let v = v.trim().to_string();
            match k.to_ascii_lowercase().as_str() {
                "content-length" => len = v.parse().unwrap_or(0),
                "authorization" => authorization = Some(v),
                "content-type" => content_type = Some(v),
                "idempotency-key" => key = Some(v),
                _ => {}
            }
        }
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body).unwrap();
        // `nokv mcp --server` asks once at start whether its token may only read; this stub
        // predates the question and answers it like an older server (404), counted apart.
        if method == "GET" && path == "/v1/whoami" {
            self.whoami
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            respond(
                &mut conn,
                404,
                r#"{"status":"error","code":"NotFound","message":"no endpoint","retryable":false,"details":{}}"#,
            );
            return;
        }
        let input: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let mut seen = Seen {
            method,
            path: path.clone(),
            authorization: authorization.clone(),
            content_type,
            idempotency_key: key.clone(),
            input: input.clone(),
            answered: None,
        };
        if let Some(token) = self.token {
            if authorization.as_deref() != Some(&format!("Bearer {token}")) {
                self.seen.lock().unwrap().push(seen);
                respond(&mut conn, 401, "missing or wrong bearer token");
                return;
            }
        }
        let action = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Action::Serve);
        let tool = path.strip_prefix("/v1/tools/").unwrap_or("");
        match action {
            Action::Reply(status, text) => {
                self.seen.lock().unwrap().push(seen);
                respond(&mut conn, status, text);
            }
            Action::Serve | Action::RunThenHangUp => {
                let stored = key
                    .as_ref()
                    .and_then(|k| self.replies.lock().unwrap().get(k).cloned());
                let envelope = match stored {
                    Some(e) => e,
                    None => {
                        let e = self.workbench.call(tool, &input);
                        if let Some(k) = &key {
                            self.replies.lock().unwrap().insert(k.clone(), e.clone());
                        }
                        e
                    }
                };
                seen.answered = Some(envelope.clone());
                self.seen.lock().unwrap().push(seen);
                if matches!(action, Action::Serve) {
                    respond(&mut conn, 200, &envelope.to_string());
                } else {
                    let _ = conn.shutdown(std::net::Shutdown::Both);
                }
            }
        }
    }
}

fn respond(conn: &mut TcpStream, status: u16, body: &str) {
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body.as_bytes());
    let _ = conn.flush();
}

fn fast_options() -> RemoteOptions {
    RemoteOptions {
        retry_backoff: Duration::from_millis(10),
        ..RemoteOptions::default()
    }
}

fn backend(stub: &Stub, token: Option<&str>) -> RemoteBackend {
    RemoteBackend::new(&stub.url, token.map(str::to_string), fast_options()).unwrap()
}

#[test]
fn remote_calls_post_the_input_and_return_the_server_envelope_unchanged() {
    let stub = Stub::start(Some("s3cret"));
    let remote = backend(&stub, Some("s3cret"));
    let created = remote.call("create", &json!({"id": "wb"}));
    assert_eq!(created["status"], "success");
    let input = json!({"id": "wb", "section": "input", "path": "a.txt", "text": "hello\n"});
    let put = remote.call("workbench_put_file", &input);
    let seen = stub.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].path, "/v1/tools/workbench_create",
        "canonical names on the wire"
    );
    assert_eq!(seen[1].method, "POST");
    assert_eq!(seen[1].path, "/v1/tools/workbench_put_file");
    assert_eq!(seen[1].authorization.as_deref(), Some("Bearer s3cret"));
    assert_eq!(seen[1].content_type.as_deref(), Some("application/json"));
    assert_eq!(seen[1].input, input);
    assert_eq!(seen[1].answered.as_ref(), Some(&put));
    // Tool errors are envelopes from the server too.
    let again = remote.call("workbench_put_file", &input);
    assert_eq!(again["code"], "AlreadyExists");
    assert_eq!(stub.seen()[2].answered.as_ref(), Some(&again));
}

#[test]
fn an_unknown_tool_is_answered_without_a_request() {
    let stub = Stub::start(None);
    let remote = backend(&stub, None);
    let env = remote.call("workbench_../../healthz", &json!({}));
    assert_eq!(env["code"], "UnknownTool");
    assert!(stub.seen().is_empty());
}

#[test]
fn a_missing_or_wrong_token_is_an_unauthorized_tool_error() {
    let stub = Stub::start(Some("s3cret"));
    for token in [None, Some("guess")] {
        let env = backend(&stub, token).call("workbench_create", &json!({"id": "wb"}));
        assert_eq!(env["status"], "error");
        assert_eq!(env["code"], "InvalidArguments");
        assert_eq!(env["details"]["reason"], "unauthorized");
        assert_eq!(env["details"]["http_status"], 401);
        assert!(env["message"].as_str().unwrap().contains("NOKV_TOKEN"));
    }
    assert_eq!(stub.seen().len(), 2, "refused calls are not re-sent");
    assert!(
        stub.seen().iter().all(|s| s.answered.is_none()),
        "nothing ran"
    );
}

#[test]
fn an_error_envelope_with_an_error_status_passes_through() {
    let stub = Stub::start(None);
    let envelope = r#"{"status":"error","code":"Conflict","message":"busy","retryable":true,"details":{"conflict":"Workspace"}}"#;
    stub.script(&[Action::Reply(409, envelope)]);
    let env = backend(&stub, None).call("workbench_list", &json!({"id": "wb"}));
    assert_eq!(env, serde_json::from_str::<Value>(envelope).unwrap());
}

#[test]
fn an_unreachable_server_is_a_retryable_object_unavailable() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let remote =
        RemoteBackend::new(&format!("http://127.0.0.1:{port}"), None, fast_options()).unwrap();
    // Even a non-idempotent write may be re-sent when the connection was refused.
    let env = remote.call(
        "workbench_append",
        &json!({"id": "wb", "section": "logs", "path": "x", "text": "y"}),
    );
    assert_eq!(env["code"], "ObjectUnavailable");
    assert_eq!(env["retryable"], true);
    assert_eq!(env["details"]["reason"], "server_unreachable");
    assert_eq!(env["details"]["attempts"], 3);
}

#[test]
fn a_lost_response_to_an_append_is_resent_with_its_request_id_and_appends_once() {
    let stub = Stub::start(None);
    let remote = backend(&stub, None);
    remote.call("workbench_create", &json!({"id": "wb"}));
    stub.script(&[Action::RunThenHangUp]);
    let input = json!({"id": "wb", "section": "logs", "path": "run.log", "text": "line\n"});
    let env = remote.call("workbench_append", &input);
    assert_eq!(env["status"], "success", "{env}");
    let appends: Vec<Seen> = stub
        .seen()
        .into_iter()
        .filter(|s| s.path.ends_with("workbench_append"))
        .collect();
    assert_eq!(appends.len(), 2, "sent, lost, resent");
    let key = appends[0]
        .idempotency_key
        .clone()
        .expect("a write carries a request id");
    assert_eq!(key.len(), 32);
    assert_eq!(
        appends[1].idempotency_key.as_ref(),
        Some(&key),
        "the resend reuses it"
    );
    assert_eq!(appends[0].answered, appends[1].answered, "an exact replay");
    let read = remote.call(
        "workbench_read",
        &json!({"id": "wb", "section": "logs", "path": "run.log"}),
    );
    assert_eq!(read["record_count"], 1, "appended exactly once: {read}");
}

#[test]
fn a_lost_response_to_an_idempotent_call_is_resent_and_converges() {
    let stub = Stub::start(None);
    stub.script(&[Action::RunThenHangUp]);
    let env = backend(&stub, None).call("workbench_create", &json!({"id": "wb"}));
    assert_eq!(env["status"], "success", "{env}");
    let seen = stub.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].answered, seen[1].answered,
        "the exact retry replays the result"
    );
}

#[test]
fn responses_that_are_not_envelopes_become_typed_errors() {
    let stub = Stub::start(None);
    let remote = backend(&stub, None);
    stub.script(&[
        Action::Reply(503, "overloaded"),
        Action::Reply(503, "overloaded"),
        Action::Reply(503, "overloaded"),
    ]);
    let env = remote.call("workbench_append", &json!({"id": "wb"}));
    assert_eq!(env["code"], "ObjectUnavailable");
    assert_eq!(env["details"]["reason"], "server_unavailable");
    assert_eq!(env["details"]["http_status"], 503);
    assert_eq!(
        env["details"]["attempts"], 3,
        "503 means not processed: re-sent"
    );

    stub.script(&[Action::Reply(200, "<html>hello</html>")]);
    let env = remote.call("workbench_list", &json!({"id": "wb"}));
    assert_eq!(env["code"], "Internal");
    assert_eq!(env["details"]["reason"], "bad_response");
    assert_eq!(env["details"]["attempts"], 1);
    assert!(env["message"].as_str().unwrap().contains("hello"));
}

/// The server's own refusals (`nokv serve`'s 401 `Unauthorized`, 503 `Unavailable`, 408
/// `Timeout` envelopes) carry codes of the server protocol; an MCP tool result only ever
/// carries Workbench codes.
#[test]
fn the_servers_transport_refusals_become_workbench_codes() {
    let stub = Stub::start(None);
    let remote = backend(&stub, None);
    // The bodies `nokv serve` answers with.
    let body = |e: nokv_server::error::ApiError| -> &'static str {
        Box::leak(e.body().to_string().into_boxed_str())
    };
    let unauthorized = body(nokv_server::error::ApiError::unauthorized());
    let unavailable = body(nokv_server::error::ApiError::unavailable(
        "the server is shutting down",
    ));
    let timeout = body(nokv_server::error::ApiError::timeout("reading the body"));

    stub.script(&[Action::Reply(401, unauthorized)]);
    let env = remote.call("workbench_create", &json!({"id": "wb"}));
    assert_eq!(env["code"], "InvalidArguments", "{env}");
    assert_eq!(env["details"]["reason"], "unauthorized");
    assert_eq!(env["details"]["http_status"], 401);
    assert!(env["message"].as_str().unwrap().contains("bearer token"));

    stub.script(&[
        Action::Reply(503, unavailable),
        Action::Reply(503, unavailable),
        Action::Reply(503, unavailable),
    ]);
    let env = remote.call("workbench_list", &json!({"id": "wb"}));
    assert_eq!(env["code"], "ObjectUnavailable", "{env}");
    assert_eq!(env["retryable"], true);
    assert_eq!(env["details"]["reason"], "server_unavailable");
    assert_eq!(
        env["details"]["attempts"], 3,
        "503 means not processed: re-sent"
    );

    stub.script(&[Action::Reply(408, timeout)]);
    let env = remote.call("workbench_stat", &json!({"id": "wb"}));
    assert_eq!(env["code"], "ObjectUnavailable", "{env}");
    assert_eq!(env["details"]["reason"], "timeout");
}

#[test]
fn unusable_server_urls_and_tokens_are_refused() {
    for url in [
        "ftp://127.0.0.1:1",
        "http://",
        "127.0.0.1:8080",
        "http://h:1/?q=1",
        "http://h:1/#f",
    ] {
        assert!(
            RemoteBackend::new(url, None, RemoteOptions::default()).is_err(),
            "{url}"
        );
    }
    let ok = RemoteBackend::new("http://127.0.0.1:1/prefix/", None, RemoteOptions::default());
    assert_eq!(ok.unwrap().base_url(), "http://127.0.0.1:1/prefix");
    for token in ["", "two words", "tab\t"] {
        let r = RemoteBackend::new(
            "http://127.0.0.1:1",
            Some(token.into()),
            RemoteOptions::default(),
        );
        assert!(r.is_err(), "{token:?}");
    }
}

#[test]
fn nokv_mcp_with_server_flag_serves_the_server_envelopes() {
    let stub = Stub::start(Some("tok-123"));
    let mut mcp = McpChild::spawn(
        &["mcp", "--server", &stub.url],
        &[("NOKV_TOKEN", "tok-123")],
    );
    let init = mcp.initialize();
    assert_eq!(init["serverInfo"]["name"], "nokv");
    let listed = mcp.request("tools/list", json!({}));
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let schema = nokv_schema();
    let want: Vec<&str> = schema["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, want);
    assert!(
        stub.seen().is_empty(),
        "listing tools asks the server nothing"
    );
    assert_eq!(
        stub.whoami.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one question at start: may the token only read?"
    );

    let calls = [
        ("workbench_create", json!({"id": "shared"})),
        (
            "workbench_put_file",
            json!({"id": "shared", "section": "scripts", "path": "fit.py", "text": "print('fit')\n"}),
        ),
        (
            "workbench_read",
            json!({"id": "shared", "section": "scripts", "path": "fit.py"}),
        ),
        (
            "workbench_grep",
            json!({"id": "shared", "pattern": "FIT", "recursive": true}),
        ),
        (
            "workbench_put_file",
            json!({"id": "shared", "section": "scripts", "path": "fit.py", "text": "again"}),
        ),
    ];
    for (i, (tool, args)) in calls.iter().enumerate() {
        let result = mcp.call(tool, args.clone());
        let env = envelope_of(&result);
        let seen = stub.seen();
        assert_eq!(seen.len(), i + 1);
        assert_eq!(seen[i].path, format!("/v1/tools/{tool}"));
        assert_eq!(&seen[i].input, args);
        assert_eq!(
            seen[i].answered.as_ref(),
            Some(&env),
            "passed through unchanged"
        );
    }
    let last = envelope_of(&mcp.call(
        "workbench_put_file",
        json!({"id": "shared", "section": "scripts", "path": "fit.py", "text": "x"}),
    ));
    assert_eq!(last["code"], "AlreadyExists");
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
}

#[test]
fn server_and_store_flags_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let out = std::process::Command::new(mcp_support::nokv_bin())
        .args([
            "--store",
            store.to_str().unwrap(),
            "mcp",
            "--server",
            "http://127.0.0.1:1",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("exclude"));
}

#[test]
fn two_mcp_servers_share_one_store_through_the_server() {
    let stub = Stub::start(None);
    let mut a = McpChild::spawn(&["mcp", "--server", &stub.url], &[]);
    // NOKV_SERVER selects the server when neither --server nor --store is given.
    let mut b = McpChild::spawn(&["mcp"], &[("NOKV_SERVER", stub.url.as_str())]);
    a.initialize();
    b.initialize();
    assert_eq!(
        envelope_of(&a.call("workbench_create", json!({"id": "team"})))["status"],
        "success"
    );
    for i in 0..5 {
        for (who, mcp) in [("a", &mut a), ("b", &mut b)] {
            let env = envelope_of(&mcp.call(
                "workbench_append",
                json!({"id": "team", "section": "logs", "path": "shared.log", "text": format!("{who} {i}\n")}),
            ));
            assert_eq!(env["status"], "success", "{env}");
        }
    }
    let read = envelope_of(&b.call(
        "workbench_read",
        json!({"id": "team", "section": "logs", "path": "shared.log"}),
    ));
    let lines: Vec<&str> = read["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["value"].as_str().unwrap())
        .collect();
    assert_eq!(
        lines,
        ["a 0", "b 0", "a 1", "b 1", "a 2", "b 2", "a 3", "b 3", "a 4", "b 4"]
    );
    a.close_stdin();
    b.close_stdin();
    assert!(a.wait_exit().success());
    assert!(b.wait_exit().success());
}

#[test]
fn read_only_mcp_over_a_server_never_sends_a_write() {
    let stub = Stub::start(None);
    let mut mcp = McpChild::spawn(&["mcp", "--read-only", "--server", &stub.url], &[]);
    mcp.initialize();
    let listed = mcp.request("tools/list", json!({}));
    let tools = listed["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 9);
    assert!(tools
        .iter()
        .all(|t| t["annotations"]["readOnlyHint"] == true));
    let refused = envelope_of(&mcp.call(
        "workbench_put_file",
        json!({"id": "shared", "section": "input", "path": "a", "text": "x"}),
    ));
    assert_eq!(refused["code"], "Forbidden");
    assert_eq!(refused["details"]["missing_scope"], "write:shared");
    assert!(stub.seen().is_empty(), "a refused write reaches no server");
    let read = envelope_of(&mcp.call(
        "workbench_stat",
        json!({"id": "shared", "section": "input", "path": "a"}),
    ));
    let seen = stub.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/tools/workbench_stat");
    assert_eq!(seen[0].answered.as_ref(), Some(&read));
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
}
