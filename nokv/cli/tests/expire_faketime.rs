//! `nokv expire` with the clock moved by libfaketime (`faketime -f +2d nokv …`): an expired
//! workbench disappears from `workbench_find` and answers `NotFound` with the reason, the next
//! `nokv gc` removes its paths and collects its uncommitted bodies (naming the expiry), its
//! committed state stays restorable, and setting the clock back does not bring it back — both
//! after a GC recorded the expiry and when only the store clock a writer persisted is past the
//! deadline (docs/metadata-format.md, "Workbench Expiry").
//!
//! The test needs Debian's `faketime` on PATH and fails (never skips) without it.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// Runs `nokv --store STORE ARGS`, under `faketime -f OFFSET` when an offset is given.
fn nokv_at(offset: Option<&str>, store: &Path, args: &[&str]) -> Output {
    let bin = env!("CARGO_BIN_EXE_nokv");
    let mut cmd = match offset {
        Some(off) => {
            let mut c = Command::new("faketime");
            c.arg("-f").arg(off).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    cmd.arg("--store").arg(store).args(args);
    match cmd.output() {
        Ok(out) => out,
        Err(e) if offset.is_some() => panic!(
            "`faketime` could not be run ({e}): this test needs Debian's faketime package \
             (apt-get install faketime)"
        ),
        Err(e) => panic!("run nokv: {e}"),
    }
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): stdout {} stderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn ok(offset: Option<&str>, store: &Path, args: &[&str]) -> Value {
    let out = nokv_at(offset, store, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "nokv {args:?}: {} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out)
}

fn tool(offset: Option<&str>, store: &Path, name: &str, input: &str) -> (Option<i32>, Value) {
    let out = nokv_at(offset, store, &["workbench", name, input]);
    (out.status.code(), json(&out))
}

fn listed(offset: Option<&str>, store: &Path) -> Vec<String> {
    let (code, v) = tool(offset, store, "find", "{}");
    assert_eq!(code, Some(0), "{v}");
    v["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .map(|m| m["workbench_id"].as_str().unwrap().to_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn assert_expired(offset: Option<&str>, store: &Path, wb: &str) {
    let (code, v) = tool(offset, store, "stat", &format!(r#"{{"id":"{wb}"}}"#));
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["code"], "NotFound", "{v}");
    assert_eq!(v["details"]["reason"], "expired", "{v}");
    assert!(v["message"].as_str().unwrap().contains("expired at"), "{v}");
}

fn put(store: &Path, wb: &str, section: &str, path: &str, text: &str) {
    let (code, v) = tool(
        None,
        store,
        "put_file",
        &format!(r#"{{"id":"{wb}","section":"{section}","path":"{path}","text":"{text}"}}"#),
    );
    assert_eq!(code, Some(0), "{v}");
}

fn object_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                object_files(&p)
            } else {
                1
            }
        })
        .sum()
}

#[test]
fn an_expired_workbench_vanishes_is_collected_stays_restorable_and_never_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(None, &store, &["workbench", "create", r#"{"id":"wb"}"#]);
    ok(None, &store, &["workbench", "create", r#"{"id":"other"}"#]);
    // No retention window: what GC's rules let go goes in the next pass.
    let cfg = nokv_at(
        None,
        &store,
        &["config", "set", "history_retention_versions", "0"],
    );
    assert_eq!(cfg.status.code(), Some(0));
    put(&store, "wb", "input", "data.csv", "kept by the commit");
    let commit = ok(
        None,
        &store,
        &[
            "commit",
            "wb",
            "--message",
            "first",
            "--content-digest",
            &format!("sha256:{}", "01".repeat(32)),
        ],
    );
    let commit_id = commit["commit_identity"]
        .as_str()
        .expect("commit_identity")
        .trim_start_matches("sha256:")
        .to_owned();
    put(
        &store,
        "wb",
        "outputs",
        "scratch.bin",
        "uncommitted scratch",
    );
    let scratch = ok(
        None,
        &store,
        &["gc", "--explain", "wb", "outputs/scratch.bin", "--json"],
    );
    let scratch_rev = scratch["revision"].as_str().unwrap().to_owned();

    // A deadline one day out; the answer names it.
    let set = ok(None, &store, &["expire", "wb", "--after", "1d"]);
    assert_eq!(set["status"], "success");
    assert_eq!(set["expired"], false);
    assert!(set["expires_at"].as_str().unwrap().ends_with('Z'));
    // Usage errors: none or two of the choices, a bad duration.
    let none = nokv_at(None, &store, &["expire", "wb"]);
    assert_eq!(none.status.code(), Some(2));
    let bad = nokv_at(None, &store, &["expire", "wb", "--after", "soon"]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(json(&bad)["code"], "InvalidArguments");

    // Still there today.
    assert_eq!(listed(None, &store), vec!["other", "wb"]);

    // Two days later (a read-only process): gone from the listing, NotFound with the reason.
    let later = Some("+2d");
    assert_eq!(listed(later, &store), vec!["other"]);
    assert_expired(later, &store, "wb");
    let (code, v) = tool(
        later,
        &store,
        "read",
        r#"{"id":"wb","section":"input","path":"data.csv"}"#,
    );
    assert_eq!(
        (code, &v["code"]),
        (Some(1), &Value::from("NotFound")),
        "{v}"
    );
    // Writes are refused too.
    let (code, v) = tool(
        later,
        &store,
        "put_file",
        r#"{"id":"wb","section":"outputs","path":"late.txt","text":"x"}"#,
    );
    assert_eq!(
        (code, &v["code"]),
        (Some(1), &Value::from("NotFound")),
        "{v}"
    );
    assert_eq!(v["details"]["reason"], "expired", "{v}");

    // The next gc removes its paths and collects the uncommitted body, naming the expiry.
    let objects_before = object_files(&store.join("objects"));
    let report = ok(later, &store, &["gc", "--json"]);
    let expired = report["expired_workbenches"].as_array().unwrap();
    assert_eq!(expired.len(), 1, "{report}");
    assert_eq!(expired[0]["workbench_id"], "wb");
    assert_eq!(expired[0]["marked_expired"], true);
    // input/data.csv, outputs/scratch.bin and the commit's metadata/run_manifest.json.
    assert_eq!(expired[0]["paths_removed"], 3, "{report}");
    let deleted = report["deleted"].as_array().unwrap();
    assert_eq!(deleted.len(), 1, "only the uncommitted body goes: {report}");
    assert_eq!(deleted[0]["revision"], scratch_rev.as_str());
    assert_eq!(deleted[0]["released_by_expiry"]["workbench_id"], "wb");
    assert_eq!(object_files(&store.join("objects")), objects_before - 1);
    // The text report says the same.
    let text = nokv_at(later, &store, &["gc", "--dry-run"]);
    assert_eq!(text.status.code(), Some(0));
    // `--explain` on the removed path names the expiry.
    let why = ok(
        later,
        &store,
        &["gc", "--explain", "wb", "outputs/scratch.bin", "--json"],
    );
    assert!(
        why["verdict"].as_str().unwrap().contains("expired"),
        "{why}"
    );
    assert_eq!(why["expired_at"], set["expires_at"]);

    // The committed state stays restorable.
    let restored = nokv_at(
        later,
        &store,
        &[
            "restore",
            "run",
            "wb",
            "wb-restored",
            "--commit",
            &commit_id,
        ],
    );
    assert_eq!(
        restored.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&restored.stdout)
    );
    let (code, v) = tool(
        later,
        &store,
        "read",
        r#"{"id":"wb-restored","section":"input","path":"data.csv","format":"bytes"}"#,
    );
    assert_eq!(code, Some(0), "{v}");
    // base64 of "kept by the commit".
    assert_eq!(v["bytes"], "a2VwdCBieSB0aGUgY29tbWl0", "{v}");

    // The clock set back (no faketime): still gone, still NotFound, not revivable.
    assert_eq!(listed(None, &store), vec!["other", "wb-restored"]);
    assert_expired(None, &store, "wb");
    let revive = nokv_at(None, &store, &["expire", "wb", "--never"]);
    assert_eq!(revive.status.code(), Some(1));
    assert_eq!(json(&revive)["code"], "NotFound");
    let recreate = nokv_at(None, &store, &["workbench", "create", r#"{"id":"wb"}"#]);
    assert_eq!(recreate.status.code(), Some(1));
    assert_eq!(json(&recreate)["details"]["reason"], "expired");
}

#[test]
fn a_persisted_store_clock_keeps_an_unrecorded_expiry_when_the_clock_goes_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    ok(None, &store, &["workbench", "create", r#"{"id":"short"}"#]);
    ok(
        None,
        &store,
        &["workbench", "create", r#"{"id":"unrelated"}"#],
    );
    ok(None, &store, &["expire", "short", "--after", "90m"]);
    // Three hours later a writer that observes the store clock runs for something unrelated
    // (no gc, nothing touches `short`): the clock's persisted high-water moves past the deadline.
    let later = ok(
        Some("+3h"),
        &store,
        &["expire", "unrelated", "--after", "7d"],
    );
    assert_eq!(later["expired"], false);
    // Back to now: `short` was never recorded Expired, but the store clock is past its deadline.
    assert_eq!(listed(None, &store), vec!["unrelated"]);
    assert_expired(None, &store, "short");
    // An absolute time in the past expires at once.
    ok(None, &store, &["workbench", "create", r#"{"id":"now"}"#]);
    let at = ok(
        None,
        &store,
        &["expire", "now", "--at", "2020-01-01T00:00:00Z"],
    );
    assert_eq!(at["expired"], true);
    assert_expired(None, &store, "now");
}
