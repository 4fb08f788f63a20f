//! The audit trail through `nokv serve` (docs/server.md, "Audit trail"): the right actor for
//! every publication and commit of two tokens, refusals recorded, the query route and
//! `nokv audit`, and records that survive SIGKILL of the server for every acknowledged change.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nokv::access::{AuditFilter, AuditLog, TokenRegistry};
use nokv::Client;
use nokv_server::ServerOptions;
use serde_json::{json, Value};

fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    bearer: &str,
    extra: &str,
    body: &str,
) -> Option<(u16, Value)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\nAuthorization: Bearer {bearer}\r\n{extra}\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).ok()?;
    s.write_all(body.as_bytes()).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let split = out.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&out[..split]).to_string();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let body = &out[split + 4..];
    Some((status, serde_json::from_slice(body).unwrap_or(Value::Null)))
}

fn token(store: &std::path::Path, name: &str, scopes: &[&str]) -> String {
    let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
    TokenRegistry::at_store(store)
        .create(
            name,
            &scopes,
            None,
            nokv_commands::token_cmd::wall_unix_ms(),
        )
        .unwrap()
        .token
}

#[test]
fn the_trail_names_the_actor_of_every_publication_and_commit_of_two_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    Client::open(&store).unwrap();
    let pipeline = token(&store, "pipeline", &["write:run-*", "lifecycle:run-*"]);
    let agent = token(&store, "agent", &["write:scratch-*"]);
    let boss = token(&store, "boss", &["admin"]);
    let server = nokv_server::start(ServerOptions {
        store: store.clone(),
        listen: "127.0.0.1:0".into(),
        maintenance_interval: Duration::ZERO,
        recovery_interval: Duration::ZERO,
        ..ServerOptions::default()
    })
    .unwrap();
    let addr = server.addr();
    let tool = |bearer: &str, name: &str, input: Value| {
        http(
            addr,
            "POST",
            &format!("/v1/tools/{name}"),
            bearer,
            "",
            &input.to_string(),
        )
        .unwrap()
    };
    // The pipeline publishes and commits its run; the agent writes its scratch workbench.
    assert_eq!(
        tool(&pipeline, "create", json!({"id": "run-1"})).1["status"],
        "success"
    );
    let (status, up) = http(
        addr,
        "PUT",
        "/v1/workbenches/run-1/files/outputs/model.bin",
        &pipeline,
        "Idempotency-Key: up-1\r\n",
        "weights",
    )
    .unwrap();
    assert_eq!((status, up["generation"].is_u64()), (200, true), "{up}");
    let body = "rows\n";
    let put = tool(
        &pipeline,
        "put_file",
        json!({"id": "run-1", "section": "outputs", "path": "rows.txt", "text": body}),
    )
    .1;
    assert_eq!(put["status"], "success");
    let digest = put["digest_uri"].as_str().unwrap().to_string();
    let commit = tool(
        &pipeline,
        "commit",
        json!({"id": "run-1", "manifest": {"task": "t"}, "content_digest_uri": digest}),
    )
    .1;
    assert_eq!(commit["status"], "success", "{commit}");
    assert_eq!(
        tool(&agent, "create", json!({"id": "scratch-1"})).1["status"],
        "success"
    );
    let note = tool(
        &agent,
        "append",
        json!({"id": "scratch-1", "section": "logs", "path": "n.txt", "text": "a"}),
    )
    .1;
    assert_eq!(note["status"], "success");
    let replaced = tool(&agent, "put_file", json!({"id": "scratch-1", "section": "logs", "path": "n.txt", "text": "b", "replace": true, "expected_generation": note["generation"]})).1;
    assert_eq!(replaced["status"], "success", "{replaced}");
    // A refused write is recorded with its actor; a read is not recorded.
    assert_eq!(
        tool(
            &agent,
            "put_file",
            json!({"id": "run-1", "section": "outputs", "path": "evil", "text": "x"})
        )
        .0,
        403
    );
    assert_eq!(
        tool(
            &agent,
            "read",
            json!({"id": "scratch-1", "section": "logs", "path": "n.txt"})
        )
        .0,
        200
    );
    // The admin runs the reference demo through the server.
    let (status, demo) = http(addr, "POST", "/v1/commands/demo", &boss, "", "null").unwrap();
    assert_eq!(
        (status, demo["exit_code"].as_u64()),
        (200, Some(0)),
        "{demo}"
    );

    let log = AuditLog::at_store(&store);
    let records = log.query(&AuditFilter::default()).unwrap();
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(
        seqs,
        (1..=records.len() as u64).collect::<Vec<_>>(),
        "numbered in order"
    );
    let who = |tool: &str, wb: &str| -> Vec<(String, String)> {
        records
            .iter()
            .filter(|r| r.tool == tool && r.workbench.as_deref() == Some(wb))
            .map(|r| (r.actor.clone(), r.outcome.clone()))
            .collect()
    };
    let ok = |a: &str| vec![(a.to_string(), "success".to_string())];
    assert_eq!(who("workbench_create", "run-1"), ok("pipeline"));
    assert_eq!(who("upload", "run-1"), ok("pipeline"));
    assert_eq!(who("workbench_commit", "run-1"), ok("pipeline"));
    assert_eq!(who("workbench_create", "scratch-1"), ok("agent"));
    assert_eq!(who("workbench_append", "scratch-1"), ok("agent"));
    let put_run = records
        .iter()
        .filter(|r| r.tool == "workbench_put_file" && r.workbench.as_deref() == Some("run-1"))
        .collect::<Vec<_>>();
    assert_eq!(put_run.len(), 2, "{put_run:?}");
    assert_eq!(
        (put_run[0].actor.as_str(), put_run[0].outcome.as_str()),
        ("pipeline", "success")
    );
    assert_eq!(
        (
            put_run[1].actor.as_str(),
            put_run[1].outcome.as_str(),
            put_run[1].status
        ),
        ("agent", "Forbidden", Some(403))
    );
    let upload = records.iter().find(|r| r.tool == "upload").unwrap();
    assert_eq!(upload.path.as_deref(), Some("outputs/model.bin"));
    assert_eq!(upload.request_id.as_deref(), Some("up-1"));
    assert_eq!(upload.generation_after, up["generation"].as_u64());
    let replace = records
        .iter()
        .find(|r| r.tool == "workbench_put_file" && r.workbench.as_deref() == Some("scratch-1"))
        .unwrap();
    assert_eq!(replace.generation_before, note["generation"].as_u64());
    assert_eq!(replace.generation_after, replaced["generation"].as_u64());
    assert!(
        records.iter().all(|r| r.tool != "workbench_read"),
        "reads are not recorded"
    );
    let demo_rec = records.iter().find(|r| r.tool == "demo").unwrap();
    assert_eq!(
        (demo_rec.actor.as_str(), demo_rec.outcome.as_str()),
        ("boss", "success")
    );
    // Every change the demo made has its own record, with the caller as actor, before the
    // `demo` record: 4 workbenches created, 17 files published (2 inputs, then 2 copies and 3
    // outputs for each of 3 runs), 4 commits, the tag, the snapshot and the restore.
    let changes = demo["changes"]
        .as_array()
        .expect("the demo lists its changes");
    let demo_parts: Vec<_> = records
        .iter()
        .filter(|r| r.tool.starts_with("demo: "))
        .collect();
    assert_eq!(demo_parts.len(), changes.len());
    let count = |t: &str| demo_parts.iter().filter(|r| r.tool == t).count();
    assert_eq!(
        [
            count("demo: create"),
            count("demo: put"),
            count("demo: commit"),
            count("demo: tag set"),
            count("demo: snapshot create"),
            count("demo: restore")
        ],
        [4, 17, 4, 1, 1, 1],
        "{demo_parts:?}"
    );
    for (r, c) in demo_parts.iter().zip(changes) {
        assert_eq!(r.actor, "boss");
        assert!(r.seq < demo_rec.seq);
        assert_eq!(r.tool, format!("demo: {}", c["tool"].as_str().unwrap()));
        assert_eq!(r.workbench.as_deref(), c["workbench"].as_str());
        assert_eq!(r.path.as_deref(), c["path"].as_str());
        assert_eq!(r.generation_after, c["generation_after"].as_u64());
    }
    let commits: Vec<_> = demo_parts
        .iter()
        .filter(|r| r.tool == "demo: commit")
        .map(|r| r.workbench.as_deref().unwrap())
        .collect();
    assert_eq!(
        commits,
        ["penguins", "run-adelie", "run-chinstrap", "run-gentoo"]
    );

    // The query route (admin only) and `nokv audit` answer the same lines.
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET /v1/audit?token=agent HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {boss}\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let lines: Vec<Value> = raw
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| v.get("seq").is_some())
        .collect();
    assert_eq!(lines.len(), 4, "{raw}");
    assert!(lines.iter().all(|l| l["actor"] == "agent"));
    assert_eq!(
        http(addr, "GET", "/v1/audit", &pipeline, "", "").unwrap().0,
        403
    );
    let cli = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args([
            "--store",
            store.to_str().unwrap(),
            "audit",
            "--token",
            "agent",
            "--workbench",
            "scratch-1",
        ])
        .env_remove("NOKV_SERVER")
        .output()
        .unwrap();
    let cli_lines: Vec<Value> = String::from_utf8(cli.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(cli_lines.len(), 3);
    assert!(cli_lines
        .iter()
        .all(|l| l["actor"] == "agent" && l["workbench"] == "scratch-1"));
    server.shutdown().unwrap();
}

/// A `nokv serve` child process listening on a free loopback port.
struct Child {
    child: std::process::Child,
    addr: SocketAddr,
}

impl Child {
    fn start(store: &std::path::Path) -> Child {
        let child = Command::new(env!("CARGO_BIN_EXE_nokv"))
            .args([
                "--store",
                store.to_str().unwrap(),
                "serve",
                "--listen",
                "127.0.0.1:0",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env_remove("NOKV_SERVER")
            .env_remove("NOKV_TOKEN")
            .spawn()
            .unwrap();
        // Owned by `Child` from here on: a failed start still kills and reaps the process.
        let mut served = Child {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let mut stderr = BufReader::new(served.child.stderr.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "nokv serve exited"
            );
            if let Some(url) = line.trim().strip_prefix("nokv serve: listening on http://") {
                served.addr = url.parse().unwrap();
                std::thread::spawn(move || {
                    let mut sink = Vec::new();
                    let _ = stderr.read_to_end(&mut sink);
                });
                return served;
            }
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn every_acknowledged_change_has_its_record_after_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    {
        let client = Client::open(&store).unwrap();
        for w in 0..4 {
            client.create_workbench(&format!("run-{w}")).unwrap();
        }
    }
    let writer = token(&store, "writer", &["write:run-*"]);
    let mut server = Child::start(&store);
    let addr = server.addr;
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..4)
        .map(|w| {
            let (acked, stop, writer) = (acked.clone(), stop.clone(), writer.clone());
            std::thread::spawn(move || {
                for i in 0..10_000 {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let key = format!("w{w}-{i}");
                    let input = json!({"id": format!("run-{w}"), "section": "logs", "path": format!("{i}.txt"), "text": "x"});
                    match http(addr, "POST", "/v1/tools/put_file", &writer, &format!("Idempotency-Key: {key}\r\n"), &input.to_string()) {
                        Some((200, v)) if v["status"] == "success" => acked.lock().unwrap().push(key),
                        Some(_) => {}
                        None => return,
                    }
                }
            })
        })
        .collect();
    // Let writes flow, then kill the server mid-stream.
    loop {
        if acked.lock().unwrap().len() >= 60 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // `Child::kill` is SIGKILL on Unix: no drain, no clean close of the store.
    server.child.kill().unwrap();
    stop.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().unwrap();
    }
    drop(server);
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 60);
    let records = AuditLog::at_store(&store)
        .query(&AuditFilter::default())
        .unwrap();
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(
        seqs,
        (1..=records.len() as u64).collect::<Vec<_>>(),
        "no gap, no reordering"
    );
    let recorded: std::collections::HashSet<&str> = records
        .iter()
        .filter(|r| r.outcome == "success" && r.actor == "writer")
        .filter_map(|r| r.request_id.as_deref())
        .collect();
    let missing: Vec<&String> = acked
        .iter()
        .filter(|k| !recorded.contains(k.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "acknowledged without a record: {missing:?}"
    );
    // The store reopens and every acknowledged file is there.
    let client = Client::open(&store).unwrap();
    for key in &acked {
        let (w, i) = key.trim_start_matches('w').split_once('-').unwrap();
        assert!(
            client
                .stat(&format!("run-{w}"), &format!("logs/{i}.txt"))
                .is_ok(),
            "{key}"
        );
    }
}

#[test]
fn a_replayed_call_is_recorded_as_a_replay() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    Client::open(&store)
        .unwrap()
        .create_workbench("run-1")
        .unwrap();
    let pipeline = token(&store, "pipeline", &["write:run-*"]);
    let server = nokv_server::start(ServerOptions {
        store: store.clone(),
        listen: "127.0.0.1:0".into(),
        maintenance_interval: Duration::ZERO,
        recovery_interval: Duration::ZERO,
        ..ServerOptions::default()
    })
    .unwrap();
    let addr = server.addr();
    // The same upload twice under one Idempotency-Key: the second answer is a replay.
    let upload = || {
        http(
            addr,
            "PUT",
            "/v1/workbenches/run-1/files/outputs/a.bin",
            &pipeline,
            "Idempotency-Key: same-1\r\n",
            "bytes",
        )
        .unwrap()
    };
    let (first, second) = (upload(), upload());
    assert_eq!((first.0, second.0), (200, 200));
    assert_eq!(first.1["generation"], second.1["generation"]);
    // The same tool call twice under one Idempotency-Key.
    let put = || {
        http(
            addr,
            "POST",
            "/v1/tools/put_file",
            &pipeline,
            "Idempotency-Key: same-2\r\n",
            &json!({"id": "run-1", "section": "outputs", "path": "b.txt", "text": "b"}).to_string(),
        )
        .unwrap()
    };
    let (a, b) = (put(), put());
    assert_eq!(a.1["status"], "success", "{}", a.1);
    assert_eq!(
        (b.1["status"].clone(), b.1["generation"].clone()),
        (a.1["status"].clone(), a.1["generation"].clone())
    );
    let records = AuditLog::at_store(&store)
        .query(&AuditFilter::default())
        .unwrap();
    let flags: Vec<(&str, bool)> = records
        .iter()
        .map(|r| (r.tool.as_str(), r.replayed))
        .collect();
    assert_eq!(
        flags,
        [
            ("upload", false),
            ("upload", true),
            ("workbench_put_file", false),
            ("workbench_put_file", true)
        ]
    );
    // A replay's line says so; a first call's line has no `replayed` field.
    let lines = std::fs::read_to_string(
        AuditLog::at_store(&store)
            .dir()
            .join("00000000000000000001.log"),
    )
    .unwrap();
    assert_eq!(lines.matches("\"replayed\":true").count(), 2, "{lines}");
    assert_eq!(lines.matches("\"replayed\"").count(), 2, "{lines}");
    server.shutdown().unwrap();
}
