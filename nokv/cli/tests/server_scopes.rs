//! Scoped tokens through `nokv serve` (docs/server.md, "Scopes"): every route and tool against
//! every kind of caller, what a restricted token sees of listings, and a token revoked while its
//! upload streams.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use nokv::access::TokenRegistry;
use nokv::workbench::Workbench;
use nokv::Client;
use nokv_server::{RunningServer, ServerOptions};
use serde_json::{json, Value};

/// Sends one request (`Connection: close`) and returns `(status, body)`; chunked bodies are
/// decoded.
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: &str,
) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let auth = bearer.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{auth}\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    read_response(&mut s)
}

fn read_response(s: &mut TcpStream) -> (u16, Vec<u8>) {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(out.len());
    let head = String::from_utf8_lossy(&out[..split]).to_string();
    let body = out.get(split + 4..).unwrap_or_default().to_vec();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(&body)
    } else {
        body
    };
    (status, body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(pos) = b.windows(2).position(|w| w == b"\r\n") {
        let n = usize::from_str_radix(std::str::from_utf8(&b[..pos]).unwrap_or("0").trim(), 16)
            .unwrap_or(0);
        if n == 0 || b.len() < pos + 2 + n {
            break;
        }
        out.extend_from_slice(&b[pos + 2..pos + 2 + n]);
        b = &b[(pos + 4 + n).min(b.len())..];
    }
    out
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or(Value::Null)
}

/// The tokens of the matrix, by kind.
struct Tokens {
    reader: String,
    runner: String,
    boss: String,
    expired: String,
    revoked: String,
}

/// A store with two workbenches (`inputs`, `run-1`, one file each), the tokens, and a server
/// whose only protection is the registry (no `--token-file`).
fn setup(store: &Path) -> (RunningServer, Tokens) {
    {
        let wb = Workbench::new(Client::open(store).unwrap());
        for (id, section, path) in [("inputs", "input", "a.txt"), ("run-1", "outputs", "r.txt")] {
            assert_eq!(wb.call("create", &json!({"id": id}))["status"], "success");
            let put = wb.call(
                "put_file",
                &json!({"id": id, "section": section, "path": path, "text": format!("{id} alpha\n")}),
            );
            assert_eq!(put["status"], "success", "{put}");
        }
    }
    let reg = TokenRegistry::at_store(store);
    let now = nokv_commands::token_cmd::wall_unix_ms();
    let make = |name: &str, scopes: &[&str]| {
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        reg.create(name, &scopes, None, now).unwrap().token
    };
    let tokens = Tokens {
        reader: make("reader", &["read"]),
        runner: make("runner", &["write:run-*"]),
        boss: make("boss", &["admin"]),
        // Created long ago with a one-second lifetime.
        expired: reg
            .create(
                "old",
                &["admin".to_string()],
                Some(Duration::from_secs(1)),
                1_000,
            )
            .unwrap()
            .token,
        revoked: make("gone", &["admin"]),
    };
    reg.revoke("gone", now).unwrap();
    let server = nokv_server::start(ServerOptions {
        store: store.to_path_buf(),
        listen: "127.0.0.1:0".into(),
        maintenance_interval: Duration::ZERO,
        recovery_interval: Duration::ZERO,
        ..ServerOptions::default()
    })
    .unwrap();
    (server, tokens)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    NoToken,
    Wrong,
    Expired,
    Revoked,
    Reader,
    Runner,
    Boss,
}

const KINDS: [Kind; 7] = [
    Kind::NoToken,
    Kind::Wrong,
    Kind::Expired,
    Kind::Revoked,
    Kind::Reader,
    Kind::Runner,
    Kind::Boss,
];

/// The documented answer of one cell: run, 401 with a reason, or 403 naming a scope. The model
/// is written from docs/server.md, independently of the server's policy code.
#[derive(Debug, PartialEq)]
enum Expect {
    Runs,
    Unauthorized(&'static str),
    Forbidden(String),
}

fn expect(kind: Kind, needs: &[(&str, Option<&str>)]) -> Expect {
    let grants = |action: &str, wb: Option<&str>| match kind {
        Kind::Reader => action == "read",
        Kind::Runner => {
            matches!(action, "read" | "write") && wb.is_some_and(|w| w.starts_with("run-"))
        }
        _ => true,
    };
    match kind {
        Kind::NoToken => return Expect::Unauthorized("missing"),
        Kind::Wrong => return Expect::Unauthorized("unknown"),
        Kind::Expired => return Expect::Unauthorized("expired"),
        Kind::Revoked => return Expect::Unauthorized("revoked"),
        _ => {}
    }
    for (action, wb) in needs {
        if !grants(action, *wb) {
            return Expect::Forbidden(match wb {
                Some(w) => format!("{action}:{w}"),
                None => action.to_string(),
            });
        }
    }
    Expect::Runs
}

/// One matrix row: method, path, body, and the (action, workbench) pairs it needs (empty: any
/// authenticated caller).
type Cell<'a> = (&'a str, String, String, Vec<(&'a str, Option<&'a str>)>);

/// The store's commit version, read with the admin token.
fn version(addr: SocketAddr, boss: &str) -> Value {
    json_of(&http(addr, "GET", "/healthz", Some(boss), "").1)["commit_version"].clone()
}

#[test]
fn every_route_and_tool_answers_each_kind_of_caller_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let (server, t) = setup(&store);
    let addr = server.addr();
    let digest = format!("sha256:{}", "ab".repeat(32));
    // (method, path, body, needs): `needs` lists (action, workbench) pairs; empty = any caller.
    let cells: Vec<Cell> = vec![
        ("GET", "/healthz".into(), String::new(), vec![]),
        ("GET", "/v1/schema".into(), String::new(), vec![]),
        ("GET", "/metrics".into(), String::new(), vec![("read", None)]),
        ("POST", "/v1/tools/workbench_create".into(), json!({"id": "run-9"}).to_string(), vec![("write", Some("run-9"))]),
        ("POST", "/v1/tools/create".into(), json!({"id": "other"}).to_string(), vec![("write", Some("other"))]),
        ("POST", "/v1/tools/workbench_put_file".into(), json!({"id": "run-1", "section": "outputs", "path": "n.txt", "text": "n"}).to_string(), vec![("write", Some("run-1"))]),
        ("POST", "/v1/tools/workbench_put_file".into(), json!({"id": "inputs", "section": "input", "path": "n.txt", "text": "n"}).to_string(), vec![("write", Some("inputs"))]),
        ("POST", "/v1/tools/workbench_append".into(), json!({"id": "run-1", "section": "logs", "path": "l.txt", "text": "l"}).to_string(), vec![("write", Some("run-1"))]),
        ("POST", "/v1/tools/workbench_edit".into(), json!({"id": "inputs", "section": "input", "path": "a.txt", "old_string": "zzz", "new_string": "y"}).to_string(), vec![("write", Some("inputs"))]),
        ("POST", "/v1/tools/workbench_list".into(), json!({"id": "inputs"}).to_string(), vec![("read", Some("inputs"))]),
        ("POST", "/v1/tools/workbench_list".into(), json!({"id": "run-1"}).to_string(), vec![("read", Some("run-1"))]),
        ("POST", "/v1/tools/workbench_stat".into(), json!({"id": "inputs"}).to_string(), vec![("read", Some("inputs"))]),
        ("POST", "/v1/tools/workbench_read".into(), json!({"id": "inputs", "section": "input", "path": "a.txt"}).to_string(), vec![("read", Some("inputs"))]),
        ("POST", "/v1/tools/workbench_grep".into(), json!({"id": "run-1", "pattern": "alpha", "recursive": true}).to_string(), vec![("read", Some("run-1"))]),
        ("POST", "/v1/tools/workbench_search".into(), json!({"id": "inputs"}).to_string(), vec![("read", Some("inputs"))]),
        ("POST", "/v1/tools/workbench_search".into(), json!({}).to_string(), vec![]),
        ("POST", "/v1/tools/workbench_aggregate".into(), json!({"measures": [{"name": "n", "op": "count"}]}).to_string(), vec![]),
        ("POST", "/v1/tools/workbench_catalog".into(), json!({"id": "run-1"}).to_string(), vec![("read", Some("run-1"))]),
        ("POST", "/v1/tools/workbench_catalog".into(), json!({}).to_string(), vec![("read", None)]),
        ("POST", "/v1/tools/workbench_find".into(), json!({}).to_string(), vec![]),
        ("POST", "/v1/tools/workbench_commit".into(), json!({"id": "run-1", "manifest": {"m": 1}, "content_digest_uri": digest}).to_string(), vec![("lifecycle", Some("run-1"))]),
        ("POST", "/v1/tools/workbench_snapshot".into(), json!({"id": "run-1"}).to_string(), vec![("lifecycle", Some("run-1"))]),
        ("POST", "/v1/tools/workbench_snapshot_renew".into(), json!({"id": "run-1", "snapshot_id": 99}).to_string(), vec![("lifecycle", Some("run-1"))]),
        ("POST", "/v1/tools/workbench_snapshot_retire".into(), json!({"id": "inputs", "snapshot_id": 99}).to_string(), vec![("lifecycle", Some("inputs"))]),
        ("POST", "/v1/tools/workbench_snapshot_list".into(), json!({"id": "run-1"}).to_string(), vec![("read", Some("run-1"))]),
        ("POST", "/v1/tools/workbench_restore".into(), json!({"id": "run-1", "destination_id": "run-5", "at_snapshot": 99}).to_string(), vec![("read", Some("run-1")), ("lifecycle", Some("run-5"))]),
        ("POST", "/v1/workbenches/run-7".into(), String::new(), vec![("write", Some("run-7"))]),
        ("POST", "/v1/workbenches/other2".into(), String::new(), vec![("write", Some("other2"))]),
        ("PUT", "/v1/workbenches/run-1/files/outputs/u.txt".into(), "u".into(), vec![("write", Some("run-1"))]),
        ("PUT", "/v1/workbenches/inputs/files/input/u.txt".into(), "u".into(), vec![("write", Some("inputs"))]),
        ("GET", "/v1/workbenches/inputs/files/input/a.txt".into(), String::new(), vec![("read", Some("inputs"))]),
        ("GET", "/v1/workbenches/run-1/stat/outputs/r.txt".into(), String::new(), vec![("read", Some("run-1"))]),
        ("GET", "/v1/workbenches/inputs/entries".into(), String::new(), vec![("read", Some("inputs"))]),
        ("POST", "/v1/workbenches/run-1/append/logs/x.txt".into(), "x".into(), vec![("write", Some("run-1"))]),
        ("POST", "/v1/workbenches/inputs/remove".into(), json!({"path": "input/nope"}).to_string(), vec![("write", Some("inputs"))]),
        ("POST", "/v1/workbenches/run-1/remove-prefix".into(), json!({"prefix": "tmp/"}).to_string(), vec![("write", Some("run-1"))]),
        ("POST", "/v1/workbenches/inputs/move".into(), json!({"from": "input/nope", "to": "input/b"}).to_string(), vec![("write", Some("inputs"))]),
        ("POST", "/v1/commands/rm".into(), json!({"workbench": "inputs", "path": "input/nope", "recursive": false, "expected_generation": null, "request_id": null}).to_string(), vec![("write", Some("inputs"))]),
        ("POST", "/v1/commands/gc".into(), json!({"dry_run": true, "max_revisions": null, "json": true, "explain": null}).to_string(), vec![("admin", None)]),
        ("POST", "/v1/commands/token".into(), json!("List").to_string(), vec![("admin", None)]),
        ("GET", "/v1/changes".into(), String::new(), vec![]),
        ("GET", "/v1/changes?workbench=inputs".into(), String::new(), vec![("read", Some("inputs"))]),
        ("GET", "/v1/diff?a=inputs&b=run-1".into(), String::new(), vec![("read", Some("inputs")), ("read", Some("run-1"))]),
        ("POST", "/v1/gc".into(), json!({"dry_run": true}).to_string(), vec![("admin", None)]),
        ("GET", "/v1/gc/explain?workbench=inputs&path=input/a.txt".into(), String::new(), vec![("admin", None)]),
        ("POST", "/v1/fsck".into(), json!({}).to_string(), vec![("admin", None)]),
        ("POST", "/v1/index/repair".into(), json!({}).to_string(), vec![("admin", None)]),
        ("GET", "/v1/config".into(), String::new(), vec![("admin", None)]),
        ("GET", "/v1/config/history_retention_versions".into(), String::new(), vec![("admin", None)]),
        ("PUT", "/v1/config/no_such_setting".into(), json!({"value": 1}).to_string(), vec![("admin", None)]),
    ];
    let mut checked = 0;
    for (method, path, body, needs) in &cells {
        for kind in KINDS {
            let token = match kind {
                Kind::NoToken => None,
                Kind::Wrong => Some("nokv_0123456789abcdef_0000000000000000000000000000000000000000000000000000000000000000"),
                Kind::Expired => Some(t.expired.as_str()),
                Kind::Revoked => Some(t.revoked.as_str()),
                Kind::Reader => Some(t.reader.as_str()),
                Kind::Runner => Some(t.runner.as_str()),
                Kind::Boss => Some(t.boss.as_str()),
            };
            let before = version(addr, &t.boss);
            let (status, answer) = http(addr, method, path, token, body);
            let answer = json_of(&answer);
            let cell = format!("{method} {path} {body} as {kind:?}: {status} {answer}");
            match expect(kind, needs) {
                Expect::Runs => {
                    assert!(status != 401 && status != 403, "{cell}");
                    assert!(
                        !matches!(answer["code"].as_str(), Some("Forbidden" | "Unauthorized")),
                        "{cell}"
                    );
                }
                Expect::Unauthorized(reason) => {
                    assert_eq!(status, 401, "{cell}");
                    assert_eq!(answer["code"], "Unauthorized", "{cell}");
                    assert_eq!(answer["details"]["reason"], reason, "{cell}");
                    assert_eq!(
                        version(addr, &t.boss),
                        before,
                        "a refused call wrote: {cell}"
                    );
                }
                Expect::Forbidden(scope) => {
                    assert_eq!(status, 403, "{cell}");
                    assert_eq!(answer["code"], "Forbidden", "{cell}");
                    assert_eq!(answer["details"]["missing_scope"], scope.as_str(), "{cell}");
                    assert_eq!(answer["retryable"], false, "{cell}");
                    assert_eq!(
                        version(addr, &t.boss),
                        before,
                        "a refused call wrote: {cell}"
                    );
                }
            }
            checked += 1;
        }
    }
    assert_eq!(checked, cells.len() * KINDS.len());
    // The web view needs read on everything: a run-scoped token gets the login form.
    assert_eq!(http(addr, "GET", "/ui/", Some(&t.reader), "").0, 200);
    assert_eq!(http(addr, "GET", "/ui/", Some(&t.runner), "").0, 401);
    assert_eq!(http(addr, "GET", "/ui/", None, "").0, 401);
    server.shutdown().unwrap();
}

#[test]
fn a_run_scoped_token_sees_only_its_workbenches_in_listings_search_and_the_feed() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let (server, t) = setup(&store);
    let addr = server.addr();
    let tool = |name: &str, input: Value, token: &str| {
        let (status, body) = http(
            addr,
            "POST",
            &format!("/v1/tools/{name}"),
            Some(token),
            &input.to_string(),
        );
        (status, json_of(&body))
    };
    // A second run workbench, written by the runner itself.
    assert_eq!(
        tool("create", json!({"id": "run-2"}), &t.runner).1["status"],
        "success"
    );
    let put = tool(
        "put_file",
        json!({"id": "run-2", "section": "outputs", "path": "s.txt", "text": "alpha"}),
        &t.runner,
    )
    .1;
    assert_eq!(put["status"], "success", "{put}");

    let (_, found) = tool("find", json!({}), &t.runner);
    let ids: Vec<&str> = found["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["workbench_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["run-1", "run-2"], "{found}");
    assert_eq!(found["match_count"], 2);
    assert_eq!(
        found["entry_count"], 2,
        "hidden workbenches are not counted"
    );
    let (_, all) = tool("find", json!({}), &t.boss);
    assert_eq!(
        all["match_count"], 3,
        "the admin sees every workbench: {all}"
    );

    // Paging a restricted find never hands out a cursor past what it may see.
    let (_, first) = tool("find", json!({"limit": 1}), &t.runner);
    assert_eq!(first["matches"][0]["workbench_id"], "run-1");
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a second page")
        .to_string();
    let (_, second) = tool("find", json!({"limit": 1, "cursor": cursor}), &t.runner);
    assert_eq!(second["matches"][0]["workbench_id"], "run-2", "{second}");
    assert!(
        second["next_cursor"].is_null() && second["truncated"] == false,
        "nothing visible follows run-2: {second}"
    );
    // A workbench the runner may not see, after its last one: the last page still ends without
    // a cursor (a cursor leading to an empty page would reveal that hidden workbenches follow).
    assert_eq!(
        tool("create", json!({"id": "zeta"}), &t.boss).1["status"],
        "success"
    );
    // (A cursor pins its read version, so the pages are asked for afresh.)
    let (_, first) = tool("find", json!({"limit": 1}), &t.runner);
    let cursor = first["next_cursor"].as_str().expect("a second page");
    let (_, again) = tool("find", json!({"limit": 1, "cursor": cursor}), &t.runner);
    assert_eq!(again["matches"][0]["workbench_id"], "run-2", "{again}");
    assert!(
        again["next_cursor"].is_null() && again["truncated"] == false,
        "a hidden workbench after run-2 leaves no cursor: {again}"
    );
    let (_, boss_page) = tool("find", json!({"limit": 1, "cursor": cursor}), &t.boss);
    assert_eq!(boss_page["matches"][0]["workbench_id"], "run-2");
    assert!(
        boss_page["next_cursor"].is_string(),
        "the admin's cursor goes on to zeta: {boss_page}"
    );

    let (_, search) = tool("search", json!({"fields": ["workbench_id"]}), &t.runner);
    assert_eq!(search["status"], "success", "{search}");
    let wbs: Vec<&str> = search["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["workbench_id"].as_str().unwrap())
        .collect();
    assert!(
        !wbs.is_empty() && wbs.iter().all(|w| w.starts_with("run-")),
        "{search}"
    );
    assert_eq!(
        search["match_count"].as_u64(),
        Some(wbs.len() as u64),
        "{search}"
    );
    let (_, everything) = tool("search", json!({}), &t.reader);
    assert!(
        everything["match_count"].as_u64().unwrap() > wbs.len() as u64,
        "{everything}"
    );

    let (_, agg) = tool(
        "aggregate",
        json!({"measures": [{"name": "n", "op": "count"}], "group_by": ["workbench_id"]}),
        &t.runner,
    );
    assert_eq!(agg["status"], "success", "{agg}");
    assert_eq!(
        agg["input_match_count"].as_u64(),
        Some(wbs.len() as u64),
        "{agg}"
    );
    for g in agg["groups"].as_array().unwrap() {
        assert!(
            g["key"]["workbench_id"]
                .as_str()
                .unwrap()
                .starts_with("run-"),
            "{agg}"
        );
    }

    let (status, catalog) = tool("catalog", json!({}), &t.runner);
    assert_eq!(
        (status, catalog["details"]["missing_scope"].as_str()),
        (403, Some("read"))
    );

    let (status, body) = http(addr, "GET", "/v1/changes", Some(&t.runner), "");
    assert_eq!(status, 200);
    let text = String::from_utf8(body).unwrap();
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        events.iter().any(|e| e["workbench_id"] == "run-2"),
        "{text}"
    );
    assert!(
        events
            .iter()
            .all(|e| e["workbench_id"].as_str().unwrap().starts_with("run-")),
        "{text}"
    );
    let (_, body) = http(addr, "GET", "/v1/changes", Some(&t.reader), "");
    assert!(String::from_utf8(body).unwrap().contains("\"inputs\""));
    server.shutdown().unwrap();
}

#[test]
fn revoking_a_token_while_its_upload_streams_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let (server, t) = setup(&store);
    let addr = server.addr();
    let reg = TokenRegistry::at_store(&store);
    let now = nokv_commands::token_cmd::wall_unix_ms();
    let uploader = reg
        .create("uploader", &["write:run-*".to_string()], None, now)
        .unwrap()
        .token;

    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!(
        "PUT /v1/workbenches/run-1/files/outputs/big.bin HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\nAuthorization: Bearer {uploader}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    let chunk = vec![b'z'; 64 * 1024];
    for _ in 0..4 {
        s.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .unwrap();
        s.write_all(&chunk).unwrap();
        s.write_all(b"\r\n").unwrap();
    }
    s.flush().unwrap();
    // The upload was admitted and is streaming; now the token is revoked by another process's
    // registry handle, then the body ends.
    reg.revoke("uploader", nokv_commands::token_cmd::wall_unix_ms())
        .unwrap();
    s.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
        .unwrap();
    s.write_all(&chunk).unwrap();
    s.write_all(b"\r\n0\r\n\r\n").unwrap();
    let (status, body) = read_response(&mut s);
    let answer = json_of(&body);
    assert_eq!(status, 401, "{answer}");
    assert_eq!(answer["details"]["reason"], "revoked");
    let (status, stat) = http(
        addr,
        "GET",
        "/v1/workbenches/run-1/stat/outputs/big.bin",
        Some(&t.boss),
        "",
    );
    assert_eq!(
        status,
        404,
        "nothing became visible: {}",
        String::from_utf8_lossy(&stat)
    );
    let (_, list) = http(
        addr,
        "POST",
        "/v1/tools/list",
        Some(&t.boss),
        &json!({"id": "run-1", "section": "outputs"}).to_string(),
    );
    let names: Vec<String> = json_of(&list)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["r.txt"]);
    server.shutdown().unwrap();
}

#[test]
fn the_token_file_token_is_an_admin_beside_registry_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    Client::open(&store).unwrap();
    let reg = TokenRegistry::at_store(&store);
    let reader = reg
        .create(
            "reader",
            &["read".to_string()],
            None,
            nokv_commands::token_cmd::wall_unix_ms(),
        )
        .unwrap()
        .token;
    let server = nokv_server::start(ServerOptions {
        store: store.clone(),
        listen: "127.0.0.1:0".into(),
        token: Some("legacy-secret".into()),
        maintenance_interval: Duration::ZERO,
        recovery_interval: Duration::ZERO,
        ..ServerOptions::default()
    })
    .unwrap();
    let addr = server.addr();
    let (status, body) = http(
        addr,
        "POST",
        "/v1/tools/create",
        Some("legacy-secret"),
        &json!({"id": "w"}).to_string(),
    );
    assert_eq!(
        (status, json_of(&body)["status"].as_str()),
        (200, Some("success"))
    );
    let (status, body) = http(
        addr,
        "POST",
        "/v1/gc",
        Some("legacy-secret"),
        &json!({"dry_run": true}).to_string(),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let (status, body) = http(
        addr,
        "POST",
        "/v1/tools/create",
        Some(&reader),
        &json!({"id": "w2"}).to_string(),
    );
    assert_eq!(
        (status, json_of(&body)["details"]["missing_scope"].as_str()),
        (403, Some("write:w2"))
    );
    assert_eq!(
        http(
            addr,
            "POST",
            "/v1/tools/stat",
            Some(&reader),
            &json!({"id": "w"}).to_string()
        )
        .0,
        200
    );
    server.shutdown().unwrap();
}

#[test]
fn a_token_revoked_while_a_tool_body_arrives_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let (server, t) = setup(&store);
    let addr = server.addr();
    let reg = TokenRegistry::at_store(&store);
    let now = nokv_commands::token_cmd::wall_unix_ms();
    let slow = reg
        .create("slow", &["write:run-*".to_string()], None, now)
        .unwrap()
        .token;
    let body =
        json!({"id": "run-1", "section": "outputs", "path": "late.txt", "text": "x".repeat(4096)})
            .to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!(
        "POST /v1/tools/put_file HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\nAuthorization: Bearer {slow}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&body.as_bytes()[..100]).unwrap();
    s.flush().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    reg.revoke("slow", nokv_commands::token_cmd::wall_unix_ms())
        .unwrap();
    s.write_all(&body.as_bytes()[100..]).unwrap();
    let (status, answer) = read_response(&mut s);
    let answer = json_of(&answer);
    assert_eq!(status, 401, "{answer}");
    assert_eq!(answer["details"]["reason"], "revoked");
    let (status, _) = http(
        addr,
        "GET",
        "/v1/workbenches/run-1/stat/outputs/late.txt",
        Some(&t.boss),
        "",
    );
    assert_eq!(status, 404, "nothing was written");
    server.shutdown().unwrap();
}
