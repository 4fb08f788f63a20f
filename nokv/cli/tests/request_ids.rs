//! Request ids of a put (docs/design.md, "Request ids of a put"): rerunning the same
//! `nokv workbench put_file --request-id`, `nokv collect --request-id`, `Client::put` /
//! `put_reader` or `RemoteClient::put` with the same id — the reply was lost, so the caller just
//! runs it again — returns the first receipt with `idempotent_replay: true` and writes nothing;
//! the same id with another body or path is refused (`InvalidArguments`, `request_id_reused`)
//! and writes nothing. Embedded (every CLI call its own process, a reopened SDK client) and
//! through `nokv serve`.

mod cli_support;

use std::path::Path;
use std::process::Output;

use cli_support::{nokv, server};
use nokv::client::{Client, PutOptions, WriteCondition};
use nokv_remote::RemoteClient;
use serde_json::Value;

const ID: &str = "0123456789abcdef0123456789abcdef";

fn envelope(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON envelope ({e}): {} / {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Every Publish operation of the store (published or not), read after the calls: one per body
/// actually written.
fn operations(store: &Path) -> Vec<nokv::publication::OperationInfo> {
    Client::open(store)
        .unwrap()
        .list_operations(true)
        .unwrap()
        .into_iter()
        .filter(|o| o.workbench_id == "wb")
        .collect()
}

/// The put_file and collect script, run on `target`; returns the published generation.
fn put_file_and_collect_replay(target: &[&str], local: &Path) -> u64 {
    let out = nokv(target, &["workbench", "create", r#"{"id":"wb"}"#]);
    assert_eq!(out.status.code(), Some(0));
    let input = r#"{"id":"wb","section":"outputs","path":"report.txt","text":"first body"}"#;
    let first = nokv(
        target,
        &["workbench", "put_file", "--request-id", ID, input],
    );
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let first = envelope(&first);
    assert_eq!(first["idempotent_replay"], false);
    assert_eq!(first["request_id"], ID);
    // The reply was lost: the caller runs the very same call again.
    let again = nokv(
        target,
        &["workbench", "put_file", "--request-id", ID, input],
    );
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    let again = envelope(&again);
    assert_eq!(again["idempotent_replay"], true);
    for field in [
        "generation",
        "digest_uri",
        "size_bytes",
        "path",
        "content_type",
    ] {
        assert_eq!(again[field], first[field], "{field}");
    }
    // Without the id the same call is a second create: AlreadyExists, as before.
    let plain = nokv(target, &["workbench", "put_file", input]);
    assert_eq!(envelope(&plain)["code"], "AlreadyExists");
    // Same id, another body: refused, nothing written.
    let other = r#"{"id":"wb","section":"outputs","path":"report.txt","text":"second body"}"#;
    let refused = nokv(
        target,
        &["workbench", "put_file", "--request-id", ID, other],
    );
    assert_eq!(refused.status.code(), Some(1));
    let refused = envelope(&refused);
    assert_eq!(refused["code"], "InvalidArguments");
    assert_eq!(refused["details"]["reason"], "request_id_reused");
    // Same id, another path: refused too.
    let moved = r#"{"id":"wb","section":"outputs","path":"elsewhere.txt","text":"first body"}"#;
    let refused = envelope(&nokv(
        target,
        &["workbench", "put_file", "--request-id", ID, moved],
    ));
    assert_eq!(refused["details"]["reason"], "request_id_reused");
    // A malformed id is a usage error before anything is opened.
    let bad = nokv(
        target,
        &["workbench", "put_file", "--request-id", "xyz", input],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(envelope(&bad)["code"], "InvalidArguments");
    // The file still holds the first body at the first generation.
    let read = envelope(&nokv(
        target,
        &[
            "workbench",
            "read",
            r#"{"id":"wb","section":"outputs","path":"report.txt","format":"bytes"}"#,
        ],
    ));
    assert_eq!(read["generation"], first["generation"]);

    // collect: the request id is the file's publication id.
    let file = local.join("data.csv");
    std::fs::write(&file, b"a,b\n1,2\n").unwrap();
    let cid = "fedcba9876543210fedcba9876543210";
    let f = file.to_str().unwrap();
    let c1 = nokv(
        target,
        &["collect", "wb", f, "input/data.csv", "--request-id", cid],
    );
    assert_eq!(c1.status.code(), Some(0), "{c1:?}");
    let line1 = String::from_utf8_lossy(&c1.stdout).to_string();
    assert!(!line1.contains("idempotent replay"), "{line1}");
    let c2 = nokv(
        target,
        &["collect", "wb", f, "input/data.csv", "--request-id", cid],
    );
    assert_eq!(c2.status.code(), Some(0), "{c2:?}");
    let line2 = String::from_utf8_lossy(&c2.stdout).to_string();
    assert_eq!(
        line2.trim_end(),
        format!("{}  idempotent replay", line1.trim_end())
    );
    // Another destination path under the same id: refused, named as a reused request id.
    let c3 = nokv(
        target,
        &["collect", "wb", f, "input/other.csv", "--request-id", cid],
    );
    assert_eq!(c3.status.code(), Some(1));
    let err = String::from_utf8_lossy(&c3.stderr);
    assert!(err.contains("request id is already bound"), "{err}");
    // The local file changed: refused as well.
    std::fs::write(&file, b"a,b\n3,4\n").unwrap();
    let c4 = nokv(
        target,
        &["collect", "wb", f, "input/data.csv", "--request-id", cid],
    );
    assert_eq!(c4.status.code(), Some(1));
    first["generation"].as_u64().unwrap()
}

#[test]
fn cli_reruns_with_a_request_id_replay_the_first_receipt_embedded() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let s = store.to_str().unwrap();
    put_file_and_collect_replay(&["--store", s], tmp.path());
    // One publication per body: report.txt once, data.csv once.
    let ops = operations(&store);
    let published: Vec<_> = ops.iter().filter(|o| o.phase == "Published").collect();
    assert_eq!(published.len(), 2, "{ops:?}");
    assert_eq!(published.iter().filter(|o| o.operation_id == ID).count(), 1);
}

#[test]
fn cli_reruns_with_a_request_id_replay_the_first_receipt_through_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let srv = server(&store);
    let url = srv.url();
    put_file_and_collect_replay(&["--server", url.as_str()], tmp.path());
    // A server restart keeps the record (it is the store's, not the request journal's).
    srv.shutdown().unwrap();
    let srv = server(&store);
    let url = srv.url();
    let input = r#"{"id":"wb","section":"outputs","path":"report.txt","text":"first body"}"#;
    let again = envelope(&nokv(
        &["--server", url.as_str()],
        &["workbench", "put_file", "--request-id", ID, input],
    ));
    assert_eq!(again["idempotent_replay"], true);
    srv.shutdown().unwrap();
    let ops = operations(&store);
    assert_eq!(
        ops.iter().filter(|o| o.phase == "Published").count(),
        2,
        "{ops:?}"
    );
}

fn with_id(options: PutOptions, id: [u8; 16]) -> PutOptions {
    PutOptions {
        request_id: Some(id),
        ..options
    }
}

#[test]
fn sdk_put_with_a_request_id_replays_across_a_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let id = [7u8; 16];
    let create = with_id(PutOptions::create("text/plain", "test"), id);
    let first = {
        let client = Client::open(&store).unwrap();
        client.create_workbench("wb").unwrap();
        let r = client
            .put("wb", "outputs/model.bin", b"weights v1", &create)
            .unwrap();
        assert!(!r.idempotent_replay);
        assert!(r.created);
        r
    };
    // A new process (a reopened client) reruns the same put.
    let client = Client::open(&store).unwrap();
    let again = client
        .put("wb", "outputs/model.bin", b"weights v1", &create)
        .unwrap();
    assert!(again.idempotent_replay);
    assert_eq!(again.generation, first.generation);
    assert_eq!(again.digest_uri, first.digest_uri);
    assert!(again.created, "the first receipt, as it was");
    // put_reader with the same id and the same bytes is the same request.
    let streamed = client
        .put_reader("wb", "outputs/model.bin", &b"weights v1"[..], &create)
        .unwrap();
    assert!(streamed.idempotent_replay);
    assert_eq!(streamed.generation, first.generation);
    // Another body, another path, another condition: refused, nothing written.
    for (path, body, options) in [
        ("outputs/model.bin", &b"weights v2"[..], create.clone()),
        ("outputs/other.bin", &b"weights v1"[..], create.clone()),
        (
            "outputs/model.bin",
            &b"weights v1"[..],
            PutOptions {
                condition: WriteCondition::Replace {
                    expected_generation: None,
                },
                ..create.clone()
            },
        ),
    ] {
        match client.put("wb", path, body, &options) {
            Err(e @ nokv::Error::Meta(meta::Error::OperationIntentMismatch { .. })) => {
                let t = nokv::workbench::tool_error(&client, "wb", e);
                assert_eq!(t.code.as_str(), "InvalidArguments");
                assert_eq!(t.details["reason"], "request_id_reused");
            }
            other => panic!("{path}: expected a refusal, got {other:?}"),
        }
    }
    assert!(matches!(
        client.stat("wb", "outputs/other.bin"),
        Err(nokv::Error::NotFound { .. })
    ));
    assert_eq!(
        client.read_all("wb", "outputs/model.bin").unwrap(),
        b"weights v1"
    );
    // A request id of an idempotent append is not a put's: refused.
    let appended = [9u8; 16];
    client
        .append_idempotent("wb", "logs/run.log", b"line\n", appended, None, "test")
        .unwrap();
    assert!(matches!(
        client.put(
            "wb",
            "logs/run.log",
            b"line\n",
            &with_id(PutOptions::create("text/plain", "test"), appended)
        ),
        Err(nokv::Error::Meta(
            meta::Error::OperationIntentMismatch { .. }
        ))
    ));
    // Exactly one publication of model.bin.
    let ops = client.list_operations(true).unwrap();
    assert_eq!(
        ops.iter()
            .filter(|o| o.path == "outputs/model.bin" && o.phase == "Published")
            .count(),
        1
    );
}

#[test]
fn remote_put_with_a_request_id_replays_and_refuses_another_body() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let srv = server(&store);
    let remote = RemoteClient::connect(&srv.url(), None).unwrap();
    remote.create_workbench("wb").unwrap();
    let id = [3u8; 16];
    let create = with_id(PutOptions::create("application/json", "test"), id);
    let first = remote
        .put("wb", "outputs/m.json", br#"{"a":1}"#, &create)
        .unwrap();
    assert!(!first.idempotent_replay);
    // Lost reply: a second client (another process) sends the same put again.
    let other_client = RemoteClient::connect(&srv.url(), None).unwrap();
    let again = other_client
        .put("wb", "outputs/m.json", br#"{"a":1}"#, &create)
        .unwrap();
    assert!(again.idempotent_replay);
    assert_eq!(again.generation, first.generation);
    let streamed = other_client
        .put_reader("wb", "outputs/m.json", &br#"{"a":1}"#[..], &create)
        .unwrap();
    assert!(streamed.idempotent_replay);
    match remote.put("wb", "outputs/m.json", br#"{"a":2}"#, &create) {
        Err(nokv::Error::OperationFailed { code, message }) => {
            assert_eq!(code, "InvalidArguments", "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        remote.read_all("wb", "outputs/m.json").unwrap(),
        br#"{"a":1}"#
    );
    srv.shutdown().unwrap();
    let ops = operations(&store);
    assert_eq!(
        ops.iter().filter(|o| o.phase == "Published").count(),
        1,
        "{ops:?}"
    );
}
