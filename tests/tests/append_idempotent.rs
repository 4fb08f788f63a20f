//! Durable idempotent append (issue 5): `nokv append … --operation-id HEX32` and
//! `Client::append_idempotent`. A replay after a lost response returns the original receipt and
//! appends nothing; the same id with another intent is a typed refusal; different ids append.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use nokv::{Client, ClientOptions};
use serde_json::Value;

const ID_A: &str = "00112233445566778899aabbccddeeff";
const ID_B: &str = "ffeeddccbbaa99887766554433221100";

/// Runs `nokv_cli append` with `bytes` on stdin; returns (exit code, envelope).
fn append(store: &Path, path: &str, bytes: &[u8], id: &str) -> (i32, Value) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
        .arg("--store")
        .arg(store)
        .args(["append", "wb", path, "-", "--operation-id", id])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A refused call may exit before reading stdin (broken pipe is expected then).
    let _ = child.stdin.take().unwrap().write_all(bytes);
    let out = child.wait_with_output().unwrap();
    let env: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap_or(-1), env)
}

/// A fresh store with the workbench `wb` (the CLI append never creates either).
fn store_with_wb(dir: &Path) -> std::path::PathBuf {
    let store = dir.join("store");
    Client::open(&store)
        .unwrap()
        .create_workbench("wb")
        .unwrap();
    store
}

fn body(store: &Path, path: &str) -> Vec<u8> {
    Client::open(store).unwrap().read_all("wb", path).unwrap()
}

#[test]
fn replayed_append_with_the_same_operation_id_appends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_wb(dir.path());
    let (code, first) = append(&store, "logs/run.log", b"step 1\n", ID_A);
    assert_eq!(code, 0, "{first:#}");
    assert_eq!(first["idempotent_replay"], false);
    assert_eq!(first["created"], true);
    // The response is "lost"; the caller retries the exact same call.
    let (code, replay) = append(&store, "logs/run.log", b"step 1\n", ID_A);
    assert_eq!(code, 0, "{replay:#}");
    assert_eq!(replay["idempotent_replay"], true);
    assert_eq!(replay["generation"], first["generation"]);
    assert_eq!(replay["size_bytes"], 7);
    assert_eq!(replay["digest"], first["digest"]);
    assert_eq!(body(&store, "logs/run.log"), b"step 1\n");
}

#[test]
fn the_same_operation_id_with_other_bytes_is_a_non_retryable_invalid_argument() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_wb(dir.path());
    assert_eq!(append(&store, "logs/run.log", b"a\n", ID_A).0, 0);
    let (code, env) = append(&store, "logs/run.log", b"b\n", ID_A);
    assert_eq!(code, 1, "{env:#}");
    assert_eq!(env["status"], "error");
    assert_eq!(env["code"], "InvalidArguments");
    assert_eq!(env["retryable"], false);
    assert_eq!(env["details"]["reason"], "operation_id_reused");
    assert!(env["details"].get("conflict").is_none(), "{env:#}");
    let msg = env["message"].as_str().unwrap();
    assert!(msg.contains("already bound to a different append"), "{msg}");
    assert!(msg.contains("new operation id"), "{msg}");
    // Another path under the same id is refused the same way.
    let (code, env) = append(&store, "logs/other.log", b"a\n", ID_A);
    assert_eq!(code, 1);
    assert_eq!(env["code"], "InvalidArguments");
    assert_eq!(env["retryable"], false);
    assert_eq!(body(&store, "logs/run.log"), b"a\n");
    // The SDK error is typed.
    let client = Client::open(&store).unwrap();
    let id = nokv::publication::parse_operation_id(ID_A).unwrap();
    let err = client
        .append_idempotent("wb", "logs/run.log", b"b\n", id, None, "t")
        .unwrap_err();
    assert!(
        matches!(
            err,
            nokv::Error::Meta(meta::Error::OperationIntentMismatch { .. })
        ),
        "{err:?}"
    );
}

#[test]
fn append_to_a_missing_workbench_is_not_found_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_wb(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
        .arg("--store")
        .arg(&store)
        .args(["append", "nosuchwb", "logs/run.log", "-"])
        .args(["--operation-id", ID_A])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(b"x\n");
    let out = child.wait_with_output().unwrap();
    let env: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{env:#}");
    assert_eq!(env["code"], "NotFound", "{env:#}");
    assert_eq!(env["retryable"], false);
    assert!(env["details"]["path"]
        .as_str()
        .unwrap()
        .ends_with("/nosuchwb"));
    let client = Client::open(&store).unwrap();
    assert!(matches!(
        client.read_all("nosuchwb", "logs/run.log"),
        Err(nokv::Error::WorkbenchNotFound { .. })
    ));
}

#[test]
fn append_on_a_store_that_does_not_exist_is_not_found_and_creates_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("absent");
    let (code, env) = append(&store, "logs/run.log", b"x\n", ID_A);
    assert_eq!(code, 1, "{env:#}");
    assert_eq!(env["code"], "NotFound");
    assert!(!store.exists());
}

#[test]
fn different_operation_ids_append_twice() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_wb(dir.path());
    assert_eq!(append(&store, "logs/run.log", b"x\n", ID_A).0, 0);
    let (code, env) = append(&store, "logs/run.log", b"x\n", ID_B);
    assert_eq!(code, 0, "{env:#}");
    assert_eq!(env["idempotent_replay"], false);
    assert_eq!(env["size_bytes"], 4);
    assert_eq!(body(&store, "logs/run.log"), b"x\nx\n");
}

#[test]
fn malformed_operation_ids_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_wb(dir.path());
    for bad in [
        "",
        "0011",
        "zz112233445566778899aabbccddeeff",
        &format!("{ID_A}00"),
    ] {
        let (code, env) = append(&store, "logs/run.log", b"x", bad);
        assert_eq!(code, 2, "{bad:?}: {env:#}");
        assert_eq!(env["code"], "InvalidArguments");
    }
}

/// A process killed after a durable step of its publication (the response is lost with it):
/// recovery at the next open finishes or cleans what it left, and the caller's retry with the
/// same operation id appends exactly once. An append's delta (held in memory, staged by its begin
/// command) is sealed and published by one command: killed after it (`after-publish`), the
/// publication is durable and the retry replays it; killed before it (`after-upload`), recovery
/// cleans the objects and the retry appends. (A separate Finalizing CAS, resumed by recovery,
/// exists only for bodies staged over several ledger commands: tests/tests/publish_ledger.rs.)
#[test]
fn a_response_lost_to_a_crash_is_replayed_without_a_second_append() {
    // (fault point, delta, what recovery at the next open does: resumed / cleaned, and whether
    // the delta is in the body once it ran)
    // (fault point, delta, (resumed, cleaned) by recovery, published before the retry)
    type Case<'a> = (&'a str, &'a [u8], (u64, u64), bool);
    let cases: [Case; 2] = [
        ("after-publish", b"delta\n", (0, 0), true),
        ("after-upload", b"delta\n", (0, 1), false),
    ];
    for (point, delta, (resumed, cleaned), published_before_retry) in cases {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_wb(dir.path());
        assert_eq!(append(&store, "logs/run.log", b"base\n", ID_B).0, 0);
        let mut child = Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
            .arg("--store")
            .arg(&store)
            .args(["append", "wb", "logs/run.log", "-", "--operation-id", ID_A])
            .env("NOKV_FAULT_POINT", point)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(delta).unwrap();
        let stderr = child.stderr.take().unwrap();
        let reached = BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.contains("NOKV_FAULT_POINT reached"));
        assert!(reached, "{point} not reached");
        child.kill().unwrap();
        child.wait().unwrap();

        let mut expected = b"base\n".to_vec();
        expected.extend_from_slice(delta);
        let client = Client::open(&store).unwrap();
        let summary = client.open_recovery().unwrap().as_ref().unwrap().clone();
        assert_eq!(
            (summary.resumed, summary.cleaned),
            (resumed, cleaned),
            "{point}: {summary:?}"
        );
        let after_recovery = client.read_all("wb", "logs/run.log").unwrap();
        if published_before_retry {
            assert_eq!(after_recovery, expected, "{point}");
        } else {
            assert_eq!(after_recovery, b"base\n", "{point}");
        }
        drop(client);
        // The caller never saw a response and retries with the same id.
        let (code, env) = append(&store, "logs/run.log", delta, ID_A);
        assert_eq!(code, 0, "{env:#}");
        assert_eq!(env["idempotent_replay"], published_before_retry);
        assert_eq!(body(&store, "logs/run.log"), expected, "{point}");
        let (_, again) = append(&store, "logs/run.log", delta, ID_A);
        assert_eq!(again["idempotent_replay"], true);
        assert_eq!(body(&store, "logs/run.log"), expected);
    }
}

#[test]
fn the_sdk_replay_returns_the_original_receipt_in_the_same_process() {
    let dir = tempfile::tempdir().unwrap();
    let client = Client::open_with(
        dir.path().join("store"),
        ClientOptions {
            block_size: 1024,
            ..Default::default()
        },
    )
    .unwrap();
    client.create_workbench("wb").unwrap();
    let base: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    client
        .append_idempotent("wb", "logs/b.bin", &base, [1; 16], None, "t")
        .unwrap();
    let delta = vec![7u8; 1500];
    let first = client
        .append_idempotent("wb", "logs/b.bin", &delta, [2; 16], None, "t")
        .unwrap();
    assert!(!first.idempotent_replay);
    assert_eq!(first.dependency_count, 1, "the base blocks are reused");
    let replay = client
        .append_idempotent("wb", "logs/b.bin", &delta, [2; 16], None, "t")
        .unwrap();
    assert!(replay.idempotent_replay);
    assert_eq!(replay.generation, first.generation);
    assert_eq!(replay.body_digest_uri, first.body_digest_uri);
    assert_eq!(replay.delta_digest_uri, objstore::sha256_uri(&delta));
    let mut whole = base.clone();
    whole.extend_from_slice(&delta);
    assert_eq!(client.read_all("wb", "logs/b.bin").unwrap(), whole);
    assert_eq!(first.body_digest_uri, objstore::sha256_uri(&whole));
}
