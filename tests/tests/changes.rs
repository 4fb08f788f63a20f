//! The change feed through the SDK (docs/metadata-format.md, ReadChanges): every visible mutation writes one
//! event, events arrive in commit order, and a stored cursor resumes without gaps or duplicates
//! across process restarts (reopen).

use std::sync::Arc;

use nokv::changes::ChangeItem;
use nokv::snapshot::{ManualClock, SnapshotOptions, SnapshotPolicy};
use nokv::{Client, ClientOptions, PutOptions, WriteCondition};

fn open(dir: &std::path::Path) -> Client {
    Client::open_with(
        dir,
        ClientOptions {
            clock: Arc::new(ManualClock::new(1_700_000_000_000)),
            snapshot_policy: SnapshotPolicy {
                skew_grace_ms: 10,
                history_retention_versions: 0,
            },
            ..Default::default()
        },
    )
    .expect("open")
}

fn put(client: &Client, wb: &str, path: &str, body: &str, replace: bool) -> u64 {
    let mut opts = PutOptions::create("text/plain", "test");
    if replace {
        opts.condition = WriteCondition::Replace {
            expected_generation: None,
        };
    }
    client
        .put(wb, path, body.as_bytes(), &opts)
        .unwrap()
        .generation
}

fn drain(client: &Client, after: Option<&str>) -> Vec<ChangeItem> {
    client
        .changes(after)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

#[test]
fn every_visible_mutation_writes_one_event_in_commit_order() {
    let tmp = tempfile::tempdir().unwrap();
    let client = open(tmp.path());
    client.create_workbench("wb").unwrap();
    let g1 = put(&client, "wb", "outputs/a.txt", "one", false);
    let g2 = put(&client, "wb", "outputs/a.txt", "two", true);
    let appended = client
        .append("wb", "logs/run.log", b"line\n", Some("text/plain"), "test")
        .unwrap();
    let snap = client
        .create_snapshot("wb", &SnapshotOptions::default())
        .unwrap();
    client
        .retire_snapshot(
            "wb",
            &nokv::snapshot::parse_selector(&snap.snapshot_id.get().to_string()).unwrap(),
        )
        .unwrap();
    let events = drain(&client, None);
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            "workspace_created",
            "artifact_published",
            "artifact_published",
            "artifact_appended",
            "snapshot_created",
            "snapshot_retired"
        ]
    );
    assert_eq!(events[1].path.as_deref(), Some("outputs/a.txt"));
    assert_eq!(events[1].after_generation, Some(g1));
    assert_eq!(events[2].before_generation, Some(g1));
    assert_eq!(events[2].after_generation, Some(g2));
    assert_eq!(events[3].after_generation, Some(appended.generation));
    assert_eq!(events[4].snapshot_id, Some(snap.snapshot_id.get()));
    assert!(events
        .windows(2)
        .all(|w| (w[0].commit_version, w[0].event_sequence)
            < (w[1].commit_version, w[1].event_sequence)));
    // Scoped feed.
    client.create_workbench("other").unwrap();
    let only_other: Vec<_> = client
        .workbench_changes("other", None)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    assert_eq!(only_other.len(), 1);
    assert_eq!(only_other[0].workbench_id, "other");
}

#[test]
fn change_feed_resumes_from_cursor_without_gaps_or_duplicates_across_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let client = open(tmp.path());
    client.create_workbench("wb").unwrap();
    for i in 0..40 {
        put(&client, "wb", &format!("input/f{i:02}"), "x", false);
    }
    // A consumer reads part of the feed and remembers the cursor of the last processed item.
    let mut feed = client.changes(None).unwrap();
    let mut seen: Vec<(u64, u32)> = Vec::new();
    for item in feed.by_ref().take(17) {
        let item = item.unwrap();
        seen.push((item.commit_version, item.event_sequence));
    }
    let cursor = feed.cursor().unwrap();
    drop(feed);
    drop(client);

    // New process: more writes, then resume.
    let client = open(tmp.path());
    for i in 0..10 {
        put(&client, "wb", &format!("outputs/g{i}"), "y", false);
    }
    for item in drain(&client, Some(&cursor)) {
        seen.push((item.commit_version, item.event_sequence));
    }
    assert_eq!(seen.len(), 1 + 40 + 10);
    let all: Vec<(u64, u32)> = drain(&client, None)
        .iter()
        .map(|e| (e.commit_version, e.event_sequence))
        .collect();
    assert_eq!(seen, all);

    // A caught-up iterator picks up newer events on the next pass (follow mode).
    let mut feed = client.changes(Some(&cursor)).unwrap();
    assert_eq!(feed.by_ref().count(), 1 + 40 + 10 - 17);
    put(&client, "wb", "outputs/late", "z", false);
    let late: Vec<_> = feed.by_ref().collect::<Result<Vec<_>, _>>().unwrap();
    assert_eq!(late.len(), 1);
    assert_eq!(late[0].path.as_deref(), Some("outputs/late"));

    // Foreign or tampered cursors are refused.
    assert!(client.changes(Some("00")).is_err());
    assert!(client.workbench_changes("wb", Some(&cursor)).is_err());
}

#[test]
fn cli_changes_with_a_bad_cursor_prints_one_invalid_arguments_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    {
        let client = open(&store);
        client.create_workbench("wb").unwrap();
    }
    for extra in [&[][..], &["--workbench", "wb"][..]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
            .arg("--store")
            .arg(&store)
            .args(["changes", "--after", "BADCURSOR"])
            .args(extra)
            .output()
            .expect("run nokv_cli");
        assert_eq!(out.status.code(), Some(1));
        let env: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
        assert_eq!(env["status"], "error", "{env:#}");
        assert_eq!(env["code"], "InvalidArguments", "{env:#}");
        assert_eq!(env["retryable"], false);
        let msg = env["message"].as_str().unwrap();
        assert!(!msg.contains("invalid argument"), "doubled prefix: {msg}");
    }
    // The SDK error carries meta's message once.
    let Err(err) = open(&store).changes(Some("BADCURSOR")) else {
        panic!("a malformed cursor must be refused");
    };
    let text = err.to_string();
    assert_eq!(text.matches("invalid argument").count(), 1, "{text}");
}
