//! `nokv mcp` against a real `nokv serve` child process (not a stub): `nokv --server URL mcp`
//! serves the 18 tools through the server with the server's envelopes, and the remote backend's
//! write resends reuse one request id, so a response lost after the server committed (cut by a
//! proxy in front of the server) is an exact replay that writes once.

mod mcp_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcp_support::{envelope_of, nokv_bin, nokv_schema, McpChild};
use nokv_mcp::{RemoteBackend, RemoteOptions, ToolBackend};
use serde_json::{json, Value};

/// A `nokv serve` child on a free loopback port; killed on drop.
struct Served {
    child: Child,
    url: String,
}

impl Served {
    fn start(store: &std::path::Path, token: Option<&str>) -> Served {
        let mut cmd = Command::new(nokv_bin());
        cmd.args([
            "--store",
            store.to_str().unwrap(),
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env_remove("NOKV_SERVER");
        match token {
            Some(t) => cmd.env("NOKV_TOKEN", t),
            None => cmd.env_remove("NOKV_TOKEN"),
        };
        let child = cmd.spawn().expect("spawn nokv serve");
        // Owned by `Served` from here on, so a failed start still kills and reaps the child.
        let mut served = Served {
            child,
            url: String::new(),
        };
        let mut stderr = BufReader::new(served.child.stderr.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "nokv serve exited before listening"
            );
            if let Some(url) = line.trim().strip_prefix("nokv serve: listening on ") {
                served.url = url.to_string();
                // Keep draining stderr so the child never blocks on a full pipe.
                std::thread::spawn(move || {
                    let mut sink = Vec::new();
                    let _ = stderr.read_to_end(&mut sink);
                });
                return served;
            }
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads one HTTP/1.1 message head and its `Content-Length` body from `r`.
fn read_message(r: &mut BufReader<TcpStream>) -> Option<(Vec<String>, Vec<u8>)> {
    let mut head = Vec::new();
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).ok()? == 0 {
            return None;
        }
        if l == "\r\n" {
            break;
        }
        head.push(l.trim_end().to_string());
    }
    let len = head
        .iter()
        .find_map(|h| {
            let (k, v) = h.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    Some((head, body))
}

/// A proxy in front of the server that forwards one request per connection and drops the
/// response of the first `drop_first` requests whose path contains `victim` — after the server
/// answered, so the write is committed and only its answer is lost.
struct LossyProxy {
    url: String,
    forwarded: Arc<AtomicUsize>,
}

impl LossyProxy {
    fn start(upstream: &str, victim: &'static str, drop_first: usize) -> LossyProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let upstream = upstream.trim_start_matches("http://").to_string();
        let forwarded = Arc::new(AtomicUsize::new(0));
        let dropped = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&forwarded);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut client) = conn else { break };
                let upstream = upstream.clone();
                let (count, dropped) = (Arc::clone(&count), Arc::clone(&dropped));
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(client.try_clone().unwrap());
                    let Some((head, body)) = read_message(&mut reader) else {
                        return;
                    };
                    let hit = head[0].contains(victim);
                    let mut server = TcpStream::connect(&upstream).unwrap();
                    let mut out = String::new();
                    for h in &head {
                        if !h.to_ascii_lowercase().starts_with("connection:") {
                            out.push_str(h);
                            out.push_str("\r\n");
                        }
                    }
                    out.push_str("Connection: close\r\n\r\n");
                    server.write_all(out.as_bytes()).unwrap();
                    server.write_all(&body).unwrap();
                    count.fetch_add(1, Ordering::SeqCst);
                    let mut back = BufReader::new(server);
                    let Some((rhead, rbody)) = read_message(&mut back) else {
                        return;
                    };
                    if hit && dropped.fetch_add(1, Ordering::SeqCst) < drop_first {
                        let _ = client.shutdown(std::net::Shutdown::Both);
                        return;
                    }
                    let mut out = String::new();
                    for h in &rhead {
                        if !h.to_ascii_lowercase().starts_with("connection:") {
                            out.push_str(h);
                            out.push_str("\r\n");
                        }
                    }
                    out.push_str("Connection: close\r\n\r\n");
                    let _ = client.write_all(out.as_bytes());
                    let _ = client.write_all(&rbody);
                    let _ = client.flush();
                });
            }
        });
        LossyProxy { url, forwarded }
    }
}

fn sha256_uri(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

#[test]
fn nokv_mcp_through_a_real_server_serves_the_tools_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&dir.path().join("store"), Some("tok-serve"));
    let mut mcp = McpChild::spawn(
        &["--server", &served.url, "mcp"],
        &[("NOKV_TOKEN", "tok-serve")],
    );
    mcp.initialize();
    let listed = mcp.request("tools/list", json!({}));
    let tools = listed["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 18);
    let schema = nokv_schema();
    for (got, want) in tools.iter().zip(schema["tools"].as_array().unwrap()) {
        assert_eq!(got["name"], want["name"]);
        assert_eq!(got["inputSchema"], want["input_schema"], "{}", want["name"]);
    }
    let ok = |v: &Value| assert_eq!(v["status"], "success", "{v}");
    ok(&envelope_of(
        &mcp.call("workbench_create", json!({"id": "wb"})),
    ));
    ok(&envelope_of(&mcp.call(
        "workbench_put_file",
        json!({"id": "wb", "section": "scripts", "path": "fit.py", "text": "print('fit')\n"}),
    )));
    let read = envelope_of(&mcp.call(
        "workbench_read",
        json!({"id": "wb", "section": "scripts", "path": "fit.py"}),
    ));
    ok(&read);
    let grep = envelope_of(&mcp.call(
        "workbench_grep",
        json!({"id": "wb", "pattern": "FIT", "recursive": true}),
    ));
    ok(&grep);
    assert!(grep.to_string().contains("fit.py"), "{grep}");
    let commit = envelope_of(&mcp.call(
        "workbench_commit",
        json!({
            "id": "wb",
            "manifest": {"task": "fit"},
            "content_digest_uri": sha256_uri(b"print('fit')\n"),
        }),
    ));
    ok(&commit);
    assert_eq!(commit["idempotent_replay"], false);
    // A tool error is a result with isError (checked by envelope_of), not a protocol error.
    let again = envelope_of(&mcp.call(
        "workbench_put_file",
        json!({"id": "wb", "section": "scripts", "path": "fit.py", "text": "x"}),
    ));
    assert_eq!(again["code"], "AlreadyExists", "{again}");
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
}

#[test]
fn a_lost_response_to_an_append_through_a_real_server_is_an_exact_replay() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&dir.path().join("store"), None);
    let proxy = LossyProxy::start(&served.url, "workbench_append", 1);
    let options = RemoteOptions {
        retry_backoff: Duration::from_millis(20),
        ..RemoteOptions::default()
    };
    let remote = RemoteBackend::new(&proxy.url, None, options).unwrap();
    let created = remote.call("workbench_create", &json!({"id": "wb"}));
    assert_eq!(created["status"], "success", "{created}");
    let before = proxy.forwarded.load(Ordering::SeqCst);
    let env = remote.call(
        "workbench_append",
        &json!({"id": "wb", "section": "logs", "path": "run.log", "text": "line\n"}),
    );
    assert_eq!(env["status"], "success", "{env}");
    assert_eq!(
        proxy.forwarded.load(Ordering::SeqCst) - before,
        2,
        "the append reached the server twice (sent, answer lost, resent)"
    );
    let read = remote.call(
        "workbench_read",
        &json!({"id": "wb", "section": "logs", "path": "run.log"}),
    );
    assert_eq!(read["record_count"], 1, "appended exactly once: {read}");
}

#[test]
fn stdin_closed_after_pipelined_puts_through_a_real_server_answers_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&dir.path().join("store"), Some("tok-eof"));
    let mut mcp = McpChild::spawn(
        &["--server", &served.url, "mcp"],
        &[("NOKV_TOKEN", "tok-eof")],
    );
    mcp.initialize();
    let created = envelope_of(&mcp.call("workbench_create", json!({"id": "wb"})));
    assert_eq!(created["status"], "success", "{created}");
    let answered_before = mcp.seen.len();
    let mut sent = Vec::new();
    for i in 0..300 {
        sent.push(mcp.send_request(
            "tools/call",
            json!({"name": "workbench_put_file", "arguments": {"id": "wb",
                "section": "outputs", "path": format!("f-{i:03}.txt"), "text": format!("{i}\n")}}),
        ));
    }
    // No answer to a put is read before the input closes.
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
    let mut answers = std::collections::HashMap::<u64, usize>::new();
    for line in &mcp.seen[answered_before..] {
        let msg: Value = serde_json::from_str(line).unwrap();
        assert_eq!(envelope_of(&msg["result"])["status"], "success", "{msg}");
        *answers
            .entry(msg["id"].as_u64().expect("a response"))
            .or_default() += 1;
    }
    assert_eq!(answers.len(), sent.len(), "every put is answered");
    assert!(sent.iter().all(|id| answers.get(id) == Some(&1)));
}

#[test]
fn a_scoped_token_through_mcp_is_forbidden_what_it_lacks_and_a_read_token_gets_the_read_only_profile(
) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    {
        let client = nokv::Client::open(&store).unwrap();
        client.create_workbench("inputs").unwrap();
    }
    let reg = nokv::access::TokenRegistry::at_store(&store);
    let scratch = reg
        .create(
            "scratcher",
            &["read".to_string(), "write:scratch-*".to_string()],
            None,
            0,
        )
        .unwrap()
        .token;
    let reviewer = reg
        .create("reviewer", &["read".to_string()], None, 0)
        .unwrap()
        .token;
    // No --token-file: the registry alone protects the server.
    let served = Served::start(&store, None);
    // A token that may write somewhere: every tool is listed, the server refuses what it lacks
    // and the Forbidden envelope passes through.
    let mut mcp = McpChild::spawn(
        &["--server", &served.url, "mcp"],
        &[("NOKV_TOKEN", scratch.as_str())],
    );
    mcp.initialize();
    let tools = mcp.request("tools/list", json!({}));
    assert_eq!(tools["tools"].as_array().unwrap().len(), 18);
    let refused = envelope_of(&mcp.call(
        "workbench_put_file",
        json!({"id": "inputs", "section": "input", "path": "a", "text": "x"}),
    ));
    assert_eq!(refused["code"], "Forbidden", "{refused}");
    assert_eq!(refused["details"]["missing_scope"], "write:inputs");
    let created = envelope_of(&mcp.call("workbench_create", json!({"id": "scratch-1"})));
    assert_eq!(created["status"], "success", "{created}");
    let listed = envelope_of(&mcp.call("workbench_list", json!({"id": "inputs"})));
    assert_eq!(listed["status"], "success", "{listed}");
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
    // A token that may only read gets the read-only profile, with or without the flag.
    for flags in [&["mcp"][..], &["mcp", "--read-only"][..]] {
        let mut args = vec!["--server", served.url.as_str()];
        args.extend_from_slice(flags);
        let mut ro = McpChild::spawn(&args, &[("NOKV_TOKEN", reviewer.as_str())]);
        ro.initialize();
        let tools = ro.request("tools/list", json!({}));
        assert_eq!(tools["tools"].as_array().unwrap().len(), 9, "{flags:?}");
        let refused = envelope_of(&ro.call("workbench_create", json!({"id": "new"})));
        assert_eq!(
            refused["details"]["missing_scope"], "write:new",
            "{refused}"
        );
        ro.close_stdin();
        assert!(ro.wait_exit().success());
    }
    // The trail holds the server's refusal and the one write, each with its actor.
    let records = nokv::access::AuditLog::at_store(&store)
        .query(&nokv::access::AuditFilter::default())
        .unwrap();
    let seen: Vec<(&str, &str, &str)> = records
        .iter()
        .map(|r| (r.actor.as_str(), r.tool.as_str(), r.outcome.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("scratcher", "workbench_put_file", "Forbidden"),
            ("scratcher", "workbench_create", "success")
        ]
    );
}
