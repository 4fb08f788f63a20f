//! `nokv changes` and `nokv snapshot`: JSON lines with resumable cursors across processes, and
//! the snapshot subcommands' envelopes.

use std::process::{Command, Output};

use serde_json::Value;

fn nokv(store: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("run nokv")
}

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

fn put(store: &std::path::Path, path: &str) {
    let input = format!(r#"{{"id":"wb","section":"input","path":"{path}","text":"x"}}"#);
    let out = nokv(store, &["workbench", "put_file", &input]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn changes_cursor_resumes_in_a_new_process_without_gaps_or_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    assert_eq!(
        nokv(&store, &["workbench", "create", r#"{"id":"wb"}"#])
            .status
            .code(),
        Some(0)
    );
    for i in 0..5 {
        put(&store, &format!("a{i}"));
    }
    // A limit of 0 events is a usage error (it printed one event), and prints no event: only
    // the usage-error envelope (stdout is not a terminal here).
    let zero = nokv(&store, &["changes", "--limit", "0"]);
    assert_eq!(zero.status.code(), Some(2));
    let usage: serde_json::Value = serde_json::from_slice(&zero.stdout).expect("one envelope");
    assert_eq!(usage["code"], "InvalidArguments", "{zero:?}");
    assert_eq!(usage["details"]["command"], "changes");
    let first = nokv(&store, &["changes", "--limit", "3"]);
    assert_eq!(first.status.code(), Some(0));
    let first = lines(&first);
    assert_eq!(first.len(), 3);
    assert_eq!(first[0]["kind"], "workspace_created");
    let cursor = first[2]["cursor"].as_str().unwrap().to_string();
    put(&store, "late");
    let rest = nokv(&store, &["changes", "--after", &cursor]);
    assert_eq!(rest.status.code(), Some(0));
    let rest = lines(&rest);
    let all = lines(&nokv(&store, &["changes"]));
    assert_eq!(all.len(), 1 + 5 + 1);
    let resumed: Vec<&Value> = first.iter().chain(rest.iter()).collect();
    assert_eq!(resumed.len(), all.len());
    for (a, b) in resumed.iter().zip(all.iter()) {
        assert_eq!(a["commit_version"], b["commit_version"]);
        assert_eq!(a["event_sequence"], b["event_sequence"]);
    }
    assert_eq!(rest.last().unwrap()["path"], "input/late");
    // --follow with --limit returns once enough events arrived.
    let followed = nokv(
        &store,
        &["changes", "--follow", "--limit", "2", "--poll-ms", "10"],
    );
    assert_eq!(lines(&followed).len(), 2);
    // A malformed cursor is a tool error.
    assert_eq!(
        nokv(&store, &["changes", "--after", "zz"]).status.code(),
        Some(1)
    );
}

#[test]
fn snapshot_subcommands_print_envelopes() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    nokv(&store, &["workbench", "create", r#"{"id":"wb"}"#]);
    // Not committed: InvalidState envelope, exit 1.
    let out = nokv(&store, &["snapshot", "create", "wb", "--name", "n"]);
    assert_eq!(out.status.code(), Some(1));
    let env: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(env["code"], "InvalidState");
    let out = nokv(&store, &["snapshot", "list", "wb"]);
    assert_eq!(out.status.code(), Some(0));
    let env: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(env["snapshot_count"], 0);
    let out = nokv(&store, &["snapshot", "reap"]);
    assert_eq!(out.status.code(), Some(0));
    let env: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(env["status"], "success");
    assert_eq!(env["claimed"], serde_json::json!([]));
    let out = nokv(&store, &["snapshot", "retire", "wb", "missing"]);
    assert_eq!(out.status.code(), Some(1));
    let env: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(env["code"], "SnapshotNotFound");
}
