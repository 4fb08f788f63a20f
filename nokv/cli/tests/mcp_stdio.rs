//! `nokv mcp` on an embedded store, driven as an MCP client would: JSON-RPC lines over the
//! child's stdin/stdout.

mod mcp_support;

use std::time::Duration;

use mcp_support::{envelope_of, nokv_schema, McpChild};
use nokv::workbench::Workbench;
use nokv::{Client, ClientOptions};
use serde_json::{json, Value};

fn sha256_uri(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Opens the store without waiting for its lock: succeeds only when no process holds it.
fn open_now(dir: &std::path::Path) -> nokv::Result<Client> {
    Client::open_with(
        dir,
        ClientOptions {
            create_if_missing: false,
            lock_wait: Duration::ZERO,
            ..Default::default()
        },
    )
}

#[test]
fn initialize_names_nokv_and_offers_tools() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = McpChild::embedded(&dir.path().join("store"));
    let init = mcp.initialize();
    assert_eq!(init["serverInfo"]["name"], "nokv");
    assert_eq!(init["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        init["protocolVersion"], "2025-06-18",
        "the client's version is accepted"
    );
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    assert!(init["instructions"]
        .as_str()
        .is_some_and(|s| s.contains("envelope")));
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
}

#[test]
fn tools_list_is_exactly_the_18_tools_with_their_nokv_schema() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = McpChild::embedded(&dir.path().join("store"));
    mcp.initialize();
    let listed = mcp.request("tools/list", json!({}));
    let tools = listed["tools"].as_array().expect("tools");
    let schema = nokv_schema();
    let expected = schema["tools"].as_array().expect("schema tools");
    assert_eq!(tools.len(), 18);
    assert_eq!(expected.len(), 18);
    for (tool, want) in tools.iter().zip(expected) {
        assert_eq!(tool["name"], want["name"]);
        assert_eq!(tool["description"], want["description"]);
        assert_eq!(
            tool["inputSchema"], want["input_schema"],
            "{}",
            want["name"]
        );
        let read_only = tool["annotations"]["readOnlyHint"].as_bool().expect("hint");
        let name = want["name"].as_str().unwrap();
        assert_eq!(read_only, nokv_mcp::tool_hints(name).unwrap().read_only);
    }
    assert!(listed.get("nextCursor").is_none(), "one page");
    // Listing tools never touches the store.
    assert!(!dir.path().join("store").exists());
}

#[test]
fn put_read_grep_commit_round_trip_returns_the_facade_envelopes() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut mcp = McpChild::embedded(&store);
    mcp.initialize();

    let created = envelope_of(&mcp.call("workbench_create", json!({"id": "run-1"})));
    assert_eq!(created["status"], "success");
    assert_eq!(created["workbench_id"], "run-1");

    let body = "species,bill_length_mm\nAdelie,39.1\nGentoo,46.1\n";
    let put = envelope_of(&mcp.call(
        "workbench_put_file",
        json!({"id": "run-1", "section": "outputs", "path": "summary.csv", "text": body}),
    ));
    assert_eq!(put["status"], "success", "{put}");
    assert_eq!(put["size_bytes"], body.len());
    assert_eq!(put["digest_uri"], sha256_uri(body.as_bytes()));
    assert_eq!(put["generation"].as_u64().map(|g| g >= 1), Some(true));

    let read_args = json!({"id": "run-1", "section": "outputs", "path": "summary.csv"});
    let read = envelope_of(&mcp.call("workbench_read", read_args.clone()));
    assert_eq!(read["record_type"], "text_lines");
    assert_eq!(read["items"][2]["value"], "Gentoo,46.1");

    // The short name (without the prefix) is the same tool, as in `nokv workbench`.
    let grep = envelope_of(&mcp.call(
        "grep",
        json!({"id": "run-1", "pattern": "gentoo", "recursive": true}),
    ));
    assert_eq!(grep["status"], "success", "{grep}");
    let matches = grep["matches"].as_array().unwrap();
    assert_eq!(matches.len(), 1);
    assert_eq!(matches[0]["line_number"], 3);
    assert_eq!(matches[0]["relative_path"], "summary.csv");

    let commit = envelope_of(&mcp.call(
        "workbench_commit",
        json!({
            "id": "run-1",
            "manifest": {"task": "penguins", "rows": 2},
            "content_digest_uri": sha256_uri(body.as_bytes())
        }),
    ));
    assert_eq!(commit["status"], "success", "{commit}");
    assert_eq!(commit["idempotent_replay"], false);
    assert_eq!(
        commit["path"]
            .as_str()
            .map(|p| p.ends_with("/metadata/run_manifest.json")),
        Some(true)
    );

    mcp.close_stdin();
    assert!(mcp.wait_exit().success());

    // The same read through the facade in this process answers the same envelope: the MCP layer
    // passes envelopes through unchanged, and the writes are durable after the server exits.
    let client = open_now(&store).expect("the server released the store");
    let wb = Workbench::new(client);
    assert_eq!(wb.call("workbench_read", &read_args), read);
    let stat = wb.call(
        "workbench_stat",
        &json!({"id": "run-1", "section": "metadata", "path": "run_manifest.json"}),
    );
    assert_eq!(stat["card"]["generation"], commit["generation"]);
}

#[test]
fn tool_errors_are_results_with_is_error_true() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = McpChild::embedded(&dir.path().join("store"));
    mcp.initialize();
    envelope_of(&mcp.call("workbench_create", json!({"id": "wb"})));
    let args = json!({"id": "wb", "section": "input", "path": "a.txt", "text": "one"});
    envelope_of(&mcp.call("workbench_put_file", args.clone()));

    let again = mcp.call("workbench_put_file", args);
    assert_eq!(again["isError"], true);
    let env = envelope_of(&again);
    assert_eq!(env["code"], "AlreadyExists");
    assert_eq!(env["retryable"], false);

    let bad = envelope_of(&mcp.call("workbench_list", json!({"id": "wb", "colour": "red"})));
    assert_eq!(bad["code"], "InvalidArguments");

    let unknown = mcp.call("workbench_teleport", json!({}));
    assert_eq!(unknown["isError"], true);
    let env = envelope_of(&unknown);
    assert_eq!(env["code"], "UnknownTool");
    assert_eq!(env["details"]["tool"], "workbench_teleport");

    // A call without `arguments` is the tool with `{}`: a schema error, still a result.
    let id = mcp.send_request("tools/call", json!({"name": "workbench_stat"}));
    let msg = mcp.response_to(id, &mut Vec::new());
    assert_eq!(envelope_of(&msg["result"])["code"], "InvalidArguments");
}

#[test]
fn a_tool_on_a_missing_store_is_not_found_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut mcp = McpChild::embedded(&store);
    mcp.initialize();
    let env = envelope_of(&mcp.call("workbench_stat", json!({"id": "nothing"})));
    assert_eq!(env["code"], "NotFound");
    assert!(!store.exists(), "no store was created by a read");
    // create may bring the store into existence, in the same session.
    let created = envelope_of(&mcp.call("workbench_create", json!({"id": "nothing"})));
    assert_eq!(created["status"], "success");
    let env = envelope_of(&mcp.call("workbench_stat", json!({"id": "nothing"})));
    assert_eq!(env["status"], "success", "{env}");
}

#[test]
fn stdin_eof_exits_zero_writes_only_protocol_messages_and_releases_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut mcp = McpChild::embedded(&store);
    mcp.initialize();
    envelope_of(&mcp.call("workbench_create", json!({"id": "wb"})));
    // While the server runs, another process's writer shares the store: the server holds the
    // writer lock only while a write runs (plus a short grace), and its next call sees the
    // other writer's workbench.
    let other = Client::open_with(
        &store,
        ClientOptions {
            create_if_missing: false,
            lock_wait: Duration::from_secs(10),
            ..Default::default()
        },
    )
    .expect("the store is shared while the server runs");
    let created = Workbench::new(other.clone()).call("workbench_create", &json!({"id": "beside"}));
    assert_eq!(created["status"], "success", "{created}");
    drop(other);
    let env = envelope_of(&mcp.call("workbench_stat", json!({"id": "beside"})));
    assert_eq!(env["status"], "success", "{env}");
    mcp.close_stdin();
    let status = mcp.wait_exit();
    assert!(status.success(), "{status:?}");
    for line in &mcp.seen {
        let msg: Value = serde_json::from_str(line).expect("stdout carries JSON only");
        assert_eq!(msg["jsonrpc"], "2.0", "{line}");
    }
    assert!(mcp.stderr_text().contains("nokv mcp"), "logs go to stderr");
    open_now(&store).expect("store lock released at exit");
}

#[test]
fn sigterm_with_stdin_open_exits_zero_and_releases_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut mcp = McpChild::embedded(&store);
    mcp.initialize();
    envelope_of(&mcp.call("workbench_create", json!({"id": "wb"})));
    envelope_of(&mcp.call(
        "workbench_append",
        json!({"id": "wb", "section": "logs", "path": "run.log", "text": "step 1\n"}),
    ));
    mcp.terminate();
    let status = mcp.wait_exit();
    assert!(status.success(), "{status:?}");
    let wb = Workbench::new(open_now(&store).expect("store lock released after SIGTERM"));
    let read = wb.call(
        "workbench_read",
        &json!({"id": "wb", "section": "logs", "path": "run.log"}),
    );
    assert_eq!(read["items"][0]["value"], "step 1");
}

#[test]
fn eof_before_any_message_exits_zero_without_opening_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut mcp = McpChild::embedded(&store);
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
    assert!(mcp.seen.is_empty());
    assert!(!store.exists());
}

#[test]
fn a_line_that_is_not_json_is_a_parse_error_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = McpChild::embedded(&dir.path().join("store"));
    mcp.initialize();
    mcp.send_line("{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/call\",\"params\":");
    let msg = mcp.next_message();
    assert_eq!(
        msg,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}})
    );
    mcp.send_line("not json at all");
    let msg = mcp.next_message();
    assert_eq!(msg["error"]["code"], -32700, "{msg}");
    assert!(msg["id"].is_null(), "{msg}");
    let env = envelope_of(&mcp.call("workbench_create", json!({"id": "alive"})));
    assert_eq!(env["status"], "success", "{env}");
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
}

#[test]
fn non_object_arguments_are_invalid_params_under_the_request_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = McpChild::embedded(&dir.path().join("store"));
    mcp.initialize();
    for arguments in [json!([1, 2]), json!("x"), json!(5)] {
        let id = mcp.send_request(
            "tools/call",
            json!({"name": "workbench_list", "arguments": arguments}),
        );
        let msg = mcp.next_message();
        assert_eq!(msg["id"].as_u64(), Some(id), "{msg}");
        assert_eq!(msg["error"]["code"], -32602, "{msg}");
        let message = msg["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("arguments") && message.contains("object"),
            "{msg}"
        );
        assert!(msg.get("result").is_none(), "{msg}");
    }
    // A missing tool name is invalid params too.
    let id = mcp.send_request("tools/call", json!({"arguments": {}}));
    let msg = mcp.next_message();
    assert_eq!(msg["id"].as_u64(), Some(id), "{msg}");
    assert_eq!(msg["error"]["code"], -32602, "{msg}");
    let env = envelope_of(&mcp.call("workbench_create", json!({"id": "alive"})));
    assert_eq!(env["status"], "success", "{env}");
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
}

#[test]
fn stdin_closed_after_1200_pipelined_puts_answers_every_request_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut mcp = McpChild::embedded(&store);
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "nokv-tests", "version": "0"}});
    let mut sent = vec![mcp.send_request("initialize", init)];
    mcp.notify("notifications/initialized");
    sent.push(mcp.send_request(
        "tools/call",
        json!({"name": "workbench_create", "arguments": {"id": "wb"}}),
    ));
    // The puts need the workbench: wait for its creation (calls run concurrently).
    let created = mcp.response_to(sent[1], &mut Vec::new());
    assert_eq!(envelope_of(&created["result"])["status"], "success");
    const PUTS: usize = 1200;
    for i in 0..PUTS {
        sent.push(mcp.send_request(
            "tools/call",
            json!({"name": "workbench_put_file", "arguments": {"id": "wb",
                "section": "outputs", "path": format!("f-{i:04}.txt"), "text": format!("{i}\n")}}),
        ));
    }
    // No answer to a put is read before the input closes: most are still owed at EOF.
    mcp.close_stdin();
    let status = mcp.wait_exit();
    assert!(status.success(), "{status:?}: {}", mcp.stderr_text());
    let mut answers = std::collections::HashMap::<u64, usize>::new();
    for line in &mcp.seen {
        let msg: Value = serde_json::from_str(line).expect("stdout carries JSON only");
        let id = msg["id"]
            .as_u64()
            .unwrap_or_else(|| panic!("not a response: {msg}"));
        assert!(msg.get("error").is_none(), "{msg}");
        if id > sent[1] {
            assert_eq!(envelope_of(&msg["result"])["status"], "success", "{msg}");
        }
        *answers.entry(id).or_default() += 1;
    }
    assert_eq!(answers.len(), PUTS + 2, "every request is answered");
    for id in &sent {
        assert_eq!(
            answers.get(id),
            Some(&1),
            "request {id} answered exactly once"
        );
    }
    let wb = Workbench::new(open_now(&store).expect("the server released the store"));
    let mut files = 0;
    let mut cursor = Value::Null;
    loop {
        let page = wb.call(
            "workbench_list",
            &json!({"id": "wb", "section": "outputs", "limit": 100, "cursor": cursor}),
        );
        assert_eq!(page["status"], "success", "{page}");
        files += page["entries"].as_array().map_or(0, Vec::len);
        cursor = page["next_cursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    assert_eq!(files, PUTS, "every put was executed");
}

#[test]
fn pipelined_calls_all_answer_under_their_own_ids() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut mcp = McpChild::embedded(&store);
    mcp.initialize();
    envelope_of(&mcp.call("workbench_create", json!({"id": "wb"})));
    // 24 writes to distinct paths and 24 reads, sent without waiting for any answer.
    let mut expected = std::collections::HashMap::new();
    for i in 0..24 {
        let path = format!("part-{i:02}.txt");
        let id = mcp.send_request(
            "tools/call",
            json!({"name": "workbench_put_file", "arguments":
                {"id": "wb", "section": "outputs", "path": path, "text": format!("part {i}\n")}}),
        );
        expected.insert(id, ("put", path.clone()));
        let id = mcp.send_request(
            "tools/call",
            json!({"name": "workbench_list", "arguments": {"id": "wb", "section": "outputs"}}),
        );
        expected.insert(id, ("list", path));
    }
    let mut answered = 0;
    while answered < expected.len() {
        let msg = mcp.next_message();
        let id = msg["id"].as_u64().expect("a response");
        let (kind, path) = expected.get(&id).expect("an id we sent");
        let env = envelope_of(&msg["result"]);
        assert_eq!(env["status"], "success", "{kind} {path}: {env}");
        if *kind == "put" {
            assert_eq!(env["relative_path"], path.as_str());
        }
        answered += 1;
    }
    let listed =
        envelope_of(&mcp.call("workbench_list", json!({"id": "wb", "section": "outputs"})));
    assert_eq!(listed["entry_count"], 24, "no write was lost");
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
}

#[test]
fn calls_sent_together_take_effect_in_the_order_they_were_sent() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut mcp = McpChild::embedded(&store);
    mcp.initialize();
    // A create, then for each file a put, a read of it, an edit of it and a read after the edit,
    // all sent before any answer is read: each call depends on the ones before it.
    let mut sent = vec![mcp.send_request(
        "tools/call",
        json!({"name": "workbench_create", "arguments": {"id": "wb"}}),
    )];
    const FILES: usize = 60;
    for i in 0..FILES {
        let path = format!("f-{i:03}.txt");
        for (name, args) in [
            (
                "workbench_put_file",
                json!({"id": "wb", "section": "outputs", "path": path, "text": format!("old {i}\n")}),
            ),
            (
                "workbench_read",
                json!({"id": "wb", "section": "outputs", "path": path}),
            ),
            (
                "workbench_edit",
                json!({"id": "wb", "section": "outputs", "path": path,
                    "old_string": "old", "new_string": "new"}),
            ),
            (
                "workbench_read",
                json!({"id": "wb", "section": "outputs", "path": path}),
            ),
        ] {
            sent.push(mcp.send_request("tools/call", json!({"name": name, "arguments": args})));
        }
    }
    mcp.close_stdin();
    let status = mcp.wait_exit();
    assert!(status.success(), "{status:?}: {}", mcp.stderr_text());
    let mut by_id = std::collections::HashMap::<u64, Value>::new();
    for line in &mcp.seen {
        let msg: Value = serde_json::from_str(line).expect("stdout carries JSON only");
        if let Some(id) = msg["id"].as_u64() {
            by_id.insert(id, msg);
        }
    }
    for (k, id) in sent.iter().enumerate() {
        let msg = by_id
            .get(id)
            .unwrap_or_else(|| panic!("request {id} unanswered"));
        let env = envelope_of(&msg["result"]);
        assert_eq!(env["status"], "success", "call {k}: {msg}");
        if k > 0 {
            let i = (k - 1) / 4;
            match (k - 1) % 4 {
                1 => assert!(env.to_string().contains(&format!("old {i}")), "{env}"),
                3 => assert!(env.to_string().contains(&format!("new {i}")), "{env}"),
                _ => {}
            }
        }
    }
}

/// Writes one file through a short embedded session, then closes it (releasing the lock).
fn seed_store(store: &std::path::Path) {
    let client = Client::open_with(store, ClientOptions::default()).expect("open");
    let wb = Workbench::new(client);
    assert_eq!(
        wb.call("create", &json!({"id": "run-1"}))["status"],
        "success"
    );
    let put = wb.call(
        "put_file",
        &json!({"id": "run-1", "section": "input", "path": "a.txt", "text": "alpha\n"}),
    );
    assert_eq!(put["status"], "success", "{put}");
}

#[test]
fn read_only_profile_lists_only_the_nine_reading_tools() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut mcp = McpChild::spawn(
        &["--store", store.to_str().unwrap(), "mcp", "--read-only"],
        &[],
    );
    mcp.initialize();
    let listed = mcp.request("tools/list", json!({}));
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "workbench_list",
            "workbench_stat",
            "workbench_read",
            "workbench_grep",
            "workbench_search",
            "workbench_aggregate",
            "workbench_catalog",
            "workbench_find",
            "workbench_snapshot_list",
        ]
    );
    // Every listed tool keeps its exact nokv schema and is annotated read-only.
    let schema = nokv_schema();
    for tool in listed["tools"].as_array().unwrap() {
        let want = schema["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == tool["name"])
            .expect("known tool");
        assert_eq!(tool["inputSchema"], want["input_schema"]);
        assert_eq!(tool["annotations"]["readOnlyHint"], true);
    }
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
}

#[test]
fn read_only_profile_refuses_every_write_tool_with_forbidden_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    seed_store(&store);
    let mut mcp = McpChild::spawn(
        &["--store", store.to_str().unwrap(), "mcp", "--read-only"],
        &[],
    );
    mcp.initialize();
    let digest = sha256_uri(b"x");
    let writes = [
        ("workbench_create", json!({"id": "run-2"}), "write:run-2"),
        (
            "workbench_put_file",
            json!({"id": "run-1", "section": "input", "path": "b.txt", "text": "b"}),
            "write:run-1",
        ),
        (
            "append",
            json!({"id": "run-1", "section": "input", "path": "a.txt", "text": "more"}),
            "write:run-1",
        ),
        (
            "workbench_edit",
            json!({"id": "run-1", "section": "input", "path": "a.txt", "old_string": "alpha", "new_string": "beta"}),
            "write:run-1",
        ),
        (
            "workbench_commit",
            json!({"id": "run-1", "manifest": {}, "content_digest_uri": digest}),
            "lifecycle:run-1",
        ),
        (
            "workbench_snapshot",
            json!({"id": "run-1"}),
            "lifecycle:run-1",
        ),
        (
            "workbench_snapshot_renew",
            json!({"id": "run-1", "snapshot_id": 0}),
            "lifecycle:run-1",
        ),
        (
            "workbench_snapshot_retire",
            json!({"id": "run-1", "snapshot_id": 0}),
            "lifecycle:run-1",
        ),
        (
            "workbench_restore",
            json!({"id": "run-1", "destination_id": "copy", "at_snapshot": 0}),
            "lifecycle:copy",
        ),
    ];
    for (tool, args, scope) in writes {
        let result = mcp.call(tool, args);
        assert_eq!(result["isError"], true, "{tool}");
        let env = envelope_of(&result);
        assert_eq!(env["code"], "Forbidden", "{tool}: {env}");
        assert_eq!(env["retryable"], false);
        assert_eq!(env["details"]["missing_scope"], scope, "{tool}");
        let message = env["message"].as_str().unwrap();
        assert!(
            message.contains("read-only")
                && message.contains(tool)
                && !message.contains("token does not grant"),
            "the refusal names the read-only profile, not a token: {message}"
        );
    }
    // Reads work, see the seeded file, and the store holds exactly what was seeded.
    let read = envelope_of(&mcp.call(
        "workbench_read",
        json!({"id": "run-1", "section": "input", "path": "a.txt"}),
    ));
    assert_eq!(read["items"][0]["value"], "alpha", "{read}");
    let listed =
        envelope_of(&mcp.call("workbench_list", json!({"id": "run-1", "section": "input"})));
    assert_eq!(listed["entry_count"], 1, "{listed}");
    let missing = envelope_of(&mcp.call("workbench_stat", json!({"id": "run-2"})));
    assert_eq!(missing["code"], "NotFound", "{missing}");
    // The read-only profile holds no lock: a writer opens the store while it runs.
    let writer = open_now(&store).expect("no lock held by the read-only server");
    drop(writer);
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
}

#[test]
fn read_only_profile_reads_what_a_writer_published_after_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    seed_store(&store);
    let mut mcp = McpChild::spawn(
        &["--store", store.to_str().unwrap(), "mcp", "--read-only"],
        &[],
    );
    mcp.initialize();
    let first = envelope_of(&mcp.call(
        "workbench_stat",
        json!({"id": "run-1", "section": "input", "path": "b.txt"}),
    ));
    assert_eq!(first["code"], "NotFound");
    {
        let wb = Workbench::new(open_now(&store).expect("open"));
        let put = wb.call(
            "put_file",
            &json!({"id": "run-1", "section": "input", "path": "b.txt", "text": "b"}),
        );
        assert_eq!(put["status"], "success");
    }
    let later = envelope_of(&mcp.call(
        "workbench_stat",
        json!({"id": "run-1", "section": "input", "path": "b.txt"}),
    ));
    assert_eq!(later["status"], "success", "{later}");
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
}

#[test]
fn embedded_write_tools_are_in_the_audit_trail_with_the_local_user() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut mcp = McpChild::spawn(
        &["--store", store.to_str().unwrap(), "mcp"],
        &[("USER", "ana")],
    );
    mcp.initialize();
    envelope_of(&mcp.call("workbench_create", json!({"id": "run-1"})));
    let put = envelope_of(&mcp.call(
        "workbench_put_file",
        json!({"id": "run-1", "section": "input", "path": "a.txt", "text": "a"}),
    ));
    envelope_of(&mcp.call("workbench_stat", json!({"id": "run-1"})));
    mcp.close_stdin();
    assert!(mcp.wait_exit().success());
    let records = nokv::access::AuditLog::at_store(&store)
        .query(&nokv::access::AuditFilter::default())
        .unwrap();
    let tools: Vec<&str> = records.iter().map(|r| r.tool.as_str()).collect();
    assert_eq!(
        tools,
        ["workbench_create", "workbench_put_file"],
        "reads are not recorded"
    );
    assert!(records
        .iter()
        .all(|r| r.actor == "local:ana" && r.outcome == "success"));
    assert_eq!(records[1].path.as_deref(), Some("input/a.txt"));
    assert_eq!(records[1].generation_after, put["generation"].as_u64());
}
