//! Reading CLI calls open the store read-only (nokv_cli::read_only):
//! - they write nothing at all (every file of the store is byte-identical, mtime included);
//! - two reader processes at a time run next to a writer that holds the store's lock and keeps
//!   publishing: no reader waits for the lock or fails, and none sees part of a command (every
//!   listed file reads back whole, with the bytes its path promises);
//! - a write through a read-only SDK handle is the typed, non-retryable read-only refusal.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use nokv::{Client, ClientOptions, PutOptions};
use serde_json::{json, Value};

fn nokv(store: &Path, tool: &str, input: &Value) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(store)
        .args(["workbench", tool, &input.to_string()])
        .output()
        .expect("run nokv");
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON envelope ({e}): {} {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn ok(store: &Path, tool: &str, input: Value) -> Value {
    let (code, v) = nokv(store, tool, &input);
    assert_eq!(code, 0, "{tool} {input}: {v}");
    v
}

/// Every file under `dir` with its bytes and modification time.
fn files(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, i64, i64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let md = std::fs::metadata(&p).unwrap();
            if md.is_dir() {
                stack.push(p);
            } else {
                out.insert(
                    p.clone(),
                    (std::fs::read(&p).unwrap(), md.mtime(), md.mtime_nsec()),
                );
            }
        }
    }
    out
}

/// A store with files, a commit and a snapshot, so every reading tool has something to read.
/// Returns the snapshot id.
fn populated(store: &Path) -> u64 {
    ok(store, "create", json!({"id": "wb"}));
    ok(
        store,
        "put_file",
        json!({"id":"wb","section":"input","path":"penguins.json",
               "text":"[{\"species\":\"Adelie\",\"mass\":3750},{\"species\":\"Gentoo\",\"mass\":5000}]"}),
    );
    ok(
        store,
        "put_file",
        json!({"id":"wb","section":"outputs","path":"notes.txt","text":"penguin notes\nline two\n"}),
    );
    ok(
        store,
        "commit",
        json!({"id":"wb","manifest":{"task":"read-only test"},
               "content_digest_uri": format!("sha256:{}", "ab".repeat(32))}),
    );
    ok(store, "snapshot", json!({"id":"wb","name":"base"}))["snapshot_id"]
        .as_u64()
        .unwrap()
}

/// The reading tools of docs/workbench.md with one valid input each.
fn read_calls() -> Vec<(&'static str, Value)> {
    vec![
        (
            "stat",
            json!({"id":"wb","section":"input","path":"penguins.json"}),
        ),
        ("list", json!({"id":"wb","section":"input"})),
        (
            "read",
            json!({"id":"wb","section":"input","path":"penguins.json"}),
        ),
        (
            "read",
            json!({"id":"wb","section":"input","path":"penguins.json","at_snapshot":"base"}),
        ),
        (
            "grep",
            json!({"id":"wb","pattern":"penguin","recursive":true}),
        ),
        ("search", json!({"id":"wb"})),
        ("aggregate", json!({"measures":[{"name":"n","op":"count"}]})),
        ("catalog", json!({"id":"wb"})),
        ("find", json!({})),
        ("snapshot_list", json!({"id":"wb"})),
    ]
}

#[test]
fn reading_calls_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    populated(&store);
    let before = files(&store);
    std::thread::sleep(std::time::Duration::from_millis(20));
    for (tool, input) in read_calls() {
        ok(&store, tool, input);
    }
    for args in [
        vec!["find"],
        vec!["snapshot", "list", "wb"],
        vec!["tag", "list", "wb"],
        vec!["changes", "--limit", "3"],
        vec!["verify"],
        vec!["config", "list"],
        vec!["config", "get", "history_retention_versions"],
        vec!["gc", "--explain", "wb", "input/penguins.json"],
        vec!["fsck"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
            .arg("--store")
            .arg(&store)
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    assert_eq!(
        files(&store),
        before,
        "a reading call changed a file of the store"
    );
}

#[test]
fn two_readers_never_wait_for_the_writer_and_never_see_part_of_a_command() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    populated(&store);
    // The writer: this process holds the store's lock for the whole test and keeps publishing
    // files whose bytes name their own path. A reader that waited for the lock would fail with
    // StoreBusy (after 30 s) instead of succeeding.
    let writer = Client::open(&store).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let published = Arc::new(AtomicU64::new(0));
    let w = {
        let (writer, stop, published) = (writer.clone(), stop.clone(), published.clone());
        std::thread::spawn(move || {
            let opts = PutOptions::create("application/json", "read-only-test");
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let path = format!("outputs/live/f{i:05}.json");
                // At most 300 bytes, so one `read` page of format `bytes` returns it whole.
                let body = json!({"path": path, "i": i, "pad": "x".repeat((i % 7) as usize * 30)});
                writer
                    .put("wb", &path, body.to_string().as_bytes(), &opts)
                    .unwrap();
                published.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut seen_max = 0usize;
                for round in 0..6 {
                    for (tool, input) in read_calls() {
                        ok(&store, tool, input);
                    }
                    let list = ok(
                        &store,
                        "list",
                        json!({"id":"wb","section":"outputs","path":"live"}),
                    );
                    let entries = list["entries"].as_array().unwrap().clone();
                    // A later process never sees fewer files (no going back in time).
                    assert!(entries.len() >= seen_max, "reader {r} round {round}");
                    seen_max = entries.len();
                    // Every listed file reads back whole: the path entry, its revision and its
                    // manifest rows came from one command.
                    for e in entries.iter().rev().take(3) {
                        let rel = e["relative_path"].as_str().unwrap().to_string();
                        let read = ok(
                            &store,
                            "read",
                            json!({"id":"wb","section":"outputs","path":rel,"format":"bytes",
                                   "limit":300}),
                        );
                        let bytes = base64_decode(read["bytes"].as_str().unwrap());
                        assert_eq!(
                            bytes.len() as u64,
                            read["total_size_bytes"].as_u64().unwrap()
                        );
                        let body: Value = serde_json::from_slice(&bytes).unwrap();
                        assert_eq!(body["path"], format!("outputs/{rel}"));
                    }
                }
                seen_max
            })
        })
        .collect();
    let seen: Vec<usize> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    w.join().unwrap();
    assert!(published.load(Ordering::Relaxed) > 0);
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
    // A writing call does wait for the lock: with the writer still open it cannot get in.
    drop(writer);
    ok(
        &store,
        "put_file",
        json!({"id":"wb","section":"outputs","path":"after.txt","text":"x"}),
    );
}

fn base64_decode(s: &str) -> Vec<u8> {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut buf = 0u32;
    let mut bits = 0;
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = A.iter().position(|&a| a == c).expect("base64") as u32;
        buf = (buf << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
        }
    }
    out
}

#[test]
fn a_write_through_a_read_only_client_is_the_typed_read_only_refusal() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    populated(&store);
    let before = files(&store);
    let ro = Client::open_read_only(&store).unwrap();
    assert!(ro.is_read_only());
    assert!(ro.open_recovery().is_none());
    let body = ro.read_all("wb", "input/penguins.json").unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()[1]["species"],
        "Gentoo"
    );
    match ro.put(
        "wb",
        "outputs/x.txt",
        b"x",
        &PutOptions::create("text/plain", "t"),
    ) {
        Err(nokv::Error::ReadOnlyStore { reason }) => assert_eq!(reason, "opened read-only"),
        other => panic!("expected ReadOnlyStore, got {other:?}"),
    }
    assert!(matches!(
        ro.create_workbench("other"),
        Err(nokv::Error::ReadOnlyStore { .. })
    ));
    let wb = nokv::workbench::Workbench::new(ro);
    for (tool, input) in [
        (
            "workbench_put_file",
            json!({"id":"wb","section":"outputs","path":"y.txt","text":"y"}),
        ),
        ("workbench_create", json!({"id":"other"})),
        (
            "workbench_append",
            json!({"id":"wb","section":"logs","path":"l.txt","text":"y"}),
        ),
        ("workbench_snapshot", json!({"id":"wb"})),
    ] {
        let env = wb.call(tool, &input);
        assert_eq!(env["status"], "error", "{tool}: {env}");
        assert_eq!(env["code"], "InvalidState", "{tool}: {env}");
        assert_eq!(env["retryable"], false);
        assert_eq!(env["details"]["reason"], "read_only_store", "{tool}: {env}");
        assert_eq!(env["details"]["cause"], "opened read-only");
    }
    // Reads through the same facade work.
    let env = wb.call(
        "workbench_stat",
        &json!({"id":"wb","section":"input","path":"penguins.json"}),
    );
    assert_eq!(env["status"], "success", "{env}");
    drop(wb);
    assert_eq!(files(&store), before);
    // A read-only open of a missing store creates nothing.
    let missing = tmp.path().join("absent");
    assert!(matches!(
        Client::open_with(
            &missing,
            ClientOptions {
                read_only: true,
                ..Default::default()
            }
        ),
        Err(nokv::Error::StoreNotFound)
    ));
    assert!(!missing.exists());
}
