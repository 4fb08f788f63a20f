//! Diff (docs/metadata-format.md, "Diff"): golden diffs on the demo store (the run-adelie and
//! run-gentoo commits; run-gentoo against its own snapshot after a replace and a remove), the
//! change-event strategy reading O(changed) rows between two commits of one workbench and
//! agreeing with the merge scan, paging with cursors, patches, and the CLI.

mod gc_support;

use std::process::Command;

use gc_support::{create, replace};
use meta::ops::diff::DiffStrategy;
use nokv::commit::CommitRequest;
use nokv::diff::{change_name, DiffOptions, DiffReport, SideSpec};
use nokv::lifetime::RemoveOptions;
use serde_json::{json, Value};

fn side(s: &str) -> SideSpec {
    SideSpec::parse(s).unwrap()
}

/// `(path, change, a size, b size, a digest, b digest)` of every change of a one-page report.
fn rows(r: &DiffReport) -> Vec<(String, &'static str, Option<u64>, Option<u64>)> {
    r.changes
        .iter()
        .map(|c| {
            (
                c.change.path.as_str().to_string(),
                change_name(c.change.change),
                c.change.a.as_ref().map(|e| e.size_bytes),
                c.change.b.as_ref().map(|e| e.size_bytes),
            )
        })
        .collect()
}

fn demo_store() -> (
    tempfile::TempDir,
    nokv::Client,
    nokv_commands::demo::DemoReport,
) {
    let tmp = tempfile::tempdir().unwrap();
    let client = nokv::Client::open(tmp.path().join("store")).unwrap();
    let mut out = Vec::new();
    let report = nokv_commands::demo::run_demo(&client, &mut out).expect("demo runs");
    (tmp, client, report)
}

fn run_commit(report: &nokv_commands::demo::DemoReport, wb: &str) -> String {
    report
        .lifecycle
        .run_commits
        .iter()
        .find(|c| c.workbench_id == wb)
        .unwrap_or_else(|| panic!("no commit of {wb}"))
        .commit_id
        .clone()
}

#[test]
fn demo_run_commits_diff_golden() {
    let (_tmp, client, report) = demo_store();
    let adelie = run_commit(&report, "run-adelie");
    let gentoo = run_commit(&report, "run-gentoo");
    let r = client
        .diff(&side(&adelie), &side(&gentoo), &DiffOptions::default())
        .unwrap();
    // Two workbenches: the merge scan. The shared input and script have equal content (equal
    // digests in different revisions) and are not reported.
    assert_eq!(r.strategy, DiffStrategy::MergeScan);
    assert_eq!(r.next_cursor, None);
    let golden = GOLDEN_ADELIE_GENTOO;
    let got: Vec<(String, &str, Option<u64>, Option<u64>)> = rows(&r);
    let want: Vec<(String, &str, Option<u64>, Option<u64>)> = golden
        .iter()
        .map(|(p, c, a, b)| (p.to_string(), *c, *a, *b))
        .collect();
    assert_eq!(got, want);
    // Digests: the summaries are the demo's deterministic outputs.
    let summary = r
        .changes
        .iter()
        .find(|c| c.change.path.as_str() == "outputs/summary.json")
        .unwrap();
    assert_eq!(
        summary.change.a.as_ref().unwrap().digest_uri,
        objstore::sha256_uri(
            &client
                .read_all("run-adelie", "outputs/summary.json")
                .unwrap()
        )
    );
    assert_eq!(
        summary.change.b.as_ref().unwrap().digest_uri,
        objstore::sha256_uri(
            &client
                .read_all("run-gentoo", "outputs/summary.json")
                .unwrap()
        )
    );
    let env = r.envelope();
    assert_eq!(env["a"]["kind"], "commit");
    assert_eq!(env["a"]["workbench_id"], "run-adelie");
    assert_eq!(env["b"]["workbench_id"], "run-gentoo");
    assert_eq!(env["count"], golden.len());
}

/// run-adelie → run-gentoo commits: `(path, change, a size, b size)`.
const GOLDEN_ADELIE_GENTOO: &[(&str, &str, Option<u64>, Option<u64>)] = &[
    ("logs/run.log", "changed", Some(137), Some(137)),
    ("metadata/params.json", "changed", Some(401), Some(401)),
    (
        "metadata/run_manifest.json",
        "changed",
        Some(713),
        Some(713),
    ),
    ("outputs/summary.json", "changed", Some(92), Some(92)),
];

#[test]
fn demo_snapshot_against_live_after_a_replace_and_a_remove_golden() {
    let (_tmp, client, report) = demo_store();
    let snap = format!("run-gentoo@{}", nokv_commands::demo::SNAPSHOT_NAME);
    let before = client.stat("run-gentoo", "logs/run.log").unwrap();
    let removed = client.stat("run-gentoo", "metadata/params.json").unwrap();
    let new_log = b"rerun: 124 rows\n";
    client
        .put("run-gentoo", "logs/run.log", new_log, &replace())
        .unwrap();
    client
        .remove(
            "run-gentoo",
            "metadata/params.json",
            &RemoveOptions::default(),
        )
        .unwrap();
    let r = client
        .diff(&side(&snap), &side("run-gentoo"), &DiffOptions::default())
        .unwrap();
    assert_eq!(r.strategy, DiffStrategy::ChangeEvents);
    assert_eq!(
        rows(&r),
        vec![
            (
                "logs/run.log".to_string(),
                "changed",
                Some(before.logical_size),
                Some(new_log.len() as u64)
            ),
            (
                "metadata/params.json".to_string(),
                "removed",
                Some(removed.logical_size),
                None
            ),
        ]
    );
    let log = &r.changes[0].change;
    assert_eq!(log.a.as_ref().unwrap().generation, before.generation);
    assert_eq!(log.a.as_ref().unwrap().digest_uri, before.body_digest_uri);
    assert_eq!(
        log.b.as_ref().unwrap().digest_uri,
        objstore::sha256_uri(new_log)
    );
    // The events after the snapshot (ours and those of the demo's later steps in other
    // workbenches, read and skipped), then two point reads per named path: not the tree.
    let snapshot_version = r.a.read_version.unwrap();
    let events_after = client
        .changes(None)
        .unwrap()
        .map(Result::unwrap)
        .filter(|c| c.commit_version > snapshot_version)
        .count() as u64;
    assert_eq!(r.events_read, events_after);
    assert_eq!(r.rows_read, r.events_read + 4);
    assert_eq!(
        r.a.snapshot_id,
        Some(report.lifecycle.snapshot_id),
        "the named snapshot"
    );
}

fn commit(client: &nokv::Client, step: u64) -> String {
    client
        .commit(&CommitRequest {
            workbench_id: "wb".into(),
            manifest: json!({"step": step}),
            content_digest_uri: client.tree_content_digest("wb").unwrap(),
            replace: step > 1,
            parents: Vec::new(),
        })
        .unwrap()
        .commit_identity
}

#[test]
fn two_commits_of_one_workbench_cost_the_changed_paths_and_agree_with_the_merge_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let client = nokv::Client::open(tmp.path().join("store")).unwrap();
    client.create_workbench("wb").unwrap();
    for i in 0..300u32 {
        client
            .put(
                "wb",
                &format!("data/f{i:04}.txt"),
                format!("v1 {i}\n").as_bytes(),
                &create(),
            )
            .unwrap();
    }
    let a = commit(&client, 1);
    for i in [3u32, 150, 299] {
        client
            .put(
                "wb",
                &format!("data/f{i:04}.txt"),
                format!("v2 {i}\n").as_bytes(),
                &replace(),
            )
            .unwrap();
    }
    client
        .remove("wb", "data/f0010.txt", &RemoveOptions::default())
        .unwrap();
    client
        .put("wb", "data/new.txt", b"new\n", &create())
        .unwrap();
    client
        .move_path(
            "wb",
            "data/f0020.txt",
            "data/moved.txt",
            &Default::default(),
        )
        .unwrap();
    let b = commit(&client, 2);
    let want = vec![
        ("data/f0003.txt", "changed"),
        ("data/f0010.txt", "removed"),
        ("data/f0020.txt", "removed"),
        ("data/f0150.txt", "changed"),
        ("data/f0299.txt", "changed"),
        ("data/moved.txt", "added"),
        ("data/new.txt", "added"),
        ("metadata/run_manifest.json", "changed"),
    ];
    let r = client
        .diff(&side(&a), &side(&b), &DiffOptions::default())
        .unwrap();
    assert_eq!(r.strategy, DiffStrategy::ChangeEvents);
    let got: Vec<(&str, &str)> = r
        .changes
        .iter()
        .map(|c| (c.change.path.as_str(), change_name(c.change.change)))
        .collect();
    assert_eq!(got, want);
    // The events of 7 commands (3 replaces, a removal, a put, a move, the commit of `a`'s run
    // manifest) and two point reads per named path — never the 300 members.
    assert!(r.rows_read < 40, "rows read: {}", r.rows_read);
    // The reverse direction swaps added and removed.
    let back = client
        .diff(&side(&b), &side(&a), &DiffOptions::default())
        .unwrap();
    assert_eq!(
        back.changes
            .iter()
            .filter(|c| change_name(c.change.change) == "added")
            .count(),
        2
    );
    // The merge scan of the same two commits finds the same changes (and reads every member).
    let sa =
        meta::ops::diff::commit_side(client.meta(), &nokv::commit::parse_commit_id(&a).unwrap())
            .unwrap();
    let sb =
        meta::ops::diff::commit_side(client.meta(), &nokv::commit::parse_commit_id(&b).unwrap())
            .unwrap();
    let merged = meta::ops::diff::diff_merge_scan(client.meta(), &sa, &sb, None, 1000).unwrap();
    let merged_paths: Vec<&str> = merged.changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(merged_paths, want.iter().map(|w| w.0).collect::<Vec<_>>());
    assert!(merged.rows_read >= 600, "rows read: {}", merged.rows_read);
    // The live tree against commit `b`: nothing changed since.
    let same = client
        .diff(&side(&b), &side("wb"), &DiffOptions::default())
        .unwrap();
    assert!(same.changes.is_empty(), "{:?}", rows(&same));
}

#[test]
fn pages_resume_with_the_cursor_and_pin_the_live_version() {
    let tmp = tempfile::tempdir().unwrap();
    let client = nokv::Client::open(tmp.path().join("store")).unwrap();
    client.create_workbench("wb").unwrap();
    client.create_workbench("other").unwrap();
    for i in 0..7u32 {
        client
            .put(
                "wb",
                &format!("f{i}.txt"),
                format!("{i}").as_bytes(),
                &create(),
            )
            .unwrap();
    }
    let mut pages = Vec::new();
    let mut cursor = None;
    loop {
        let r = client
            .diff(
                &side("other"),
                &side("wb"),
                &DiffOptions {
                    cursor: cursor.clone(),
                    limit: 3,
                    ..Default::default()
                },
            )
            .unwrap();
        pages.push(rows(&r).into_iter().map(|x| x.0).collect::<Vec<_>>());
        // A write between pages does not show up in later pages: the live side is pinned.
        client
            .put(
                "wb",
                &format!("late{}.txt", pages.len()),
                b"late",
                &create(),
            )
            .unwrap();
        match r.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(
        pages,
        vec![
            vec!["f0.txt", "f1.txt", "f2.txt"],
            vec!["f3.txt", "f4.txt", "f5.txt"],
            vec!["f6.txt"],
        ]
    );
    // A cursor belongs to its two sides.
    let first = client
        .diff(
            &side("other"),
            &side("wb"),
            &DiffOptions {
                limit: 1,
                ..Default::default()
            },
        )
        .unwrap();
    let err = client
        .diff(
            &side("wb"),
            &side("other"),
            &DiffOptions {
                cursor: first.next_cursor,
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(matches!(err, nokv::Error::InvalidArgument(_)), "{err:?}");
}

#[test]
fn patch_shows_text_changes_and_skips_binary_and_large_bodies() {
    let tmp = tempfile::tempdir().unwrap();
    let client = nokv::Client::open(tmp.path().join("store")).unwrap();
    client.create_workbench("a").unwrap();
    client.create_workbench("b").unwrap();
    client
        .put("a", "notes.txt", b"one\ntwo\nthree\n", &create())
        .unwrap();
    client
        .put("b", "notes.txt", b"one\n2\nthree\n", &create())
        .unwrap();
    client
        .put("a", "blob.bin", &[0u8, 159, 146, 150], &create())
        .unwrap();
    client
        .put("b", "blob.bin", &[1u8, 159, 146, 150], &create())
        .unwrap();
    client
        .put("b", "big.txt", &vec![b'x'; 2048], &create())
        .unwrap();
    let r = client
        .diff(
            &side("a"),
            &side("b"),
            &DiffOptions {
                patch: true,
                patch_max_bytes: 1024,
                ..Default::default()
            },
        )
        .unwrap();
    let by_path = |p: &str| {
        r.changes
            .iter()
            .find(|c| c.change.path.as_str() == p)
            .unwrap()
    };
    assert_eq!(by_path("big.txt").patch_skipped, Some("too_large"));
    assert_eq!(by_path("blob.bin").patch_skipped, Some("binary"));
    assert_eq!(
        by_path("notes.txt").patch.as_deref(),
        Some("--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n")
    );
}

fn cli(store: &std::path::Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("run nokv");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn cli_diff_prints_json_and_a_table() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    {
        let client = nokv::Client::open(&store).unwrap();
        client.create_workbench("a").unwrap();
        client.create_workbench("b").unwrap();
        client.put("a", "x.txt", b"x1\n", &create()).unwrap();
        client.put("b", "x.txt", b"x2\n", &create()).unwrap();
        client.put("b", "y.txt", b"y\n", &create()).unwrap();
    }
    let (code, text) = cli(&store, &["diff", "a", "b"]);
    assert_eq!(code, 0, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["status"], "success");
    assert_eq!(v["count"], 2);
    assert_eq!(v["changes"][0]["path"], "x.txt");
    assert_eq!(v["changes"][0]["change"], "changed");
    assert_eq!(v["changes"][1]["change"], "added");
    assert_eq!(v["changes"][1]["a"], Value::Null);
    assert_eq!(v["changes"][1]["b"]["size_bytes"], 2);
    let (code, table) = cli(&store, &["diff", "a", "b", "--format", "table", "--patch"]);
    assert_eq!(code, 0, "{table}");
    assert!(table.starts_with("diff a -> b: 2 change(s)\n"), "{table}");
    assert!(table.contains("changed  x.txt"), "{table}");
    assert!(table.contains("-x1\n+x2\n"), "{table}");
    let (code, text) = cli(&store, &["diff", "a", "absent"]);
    assert_eq!(code, 1, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["code"], "NotFound");
    let (code, text) = cli(&store, &["diff", "a@", "b"]);
    assert_eq!(code, 2, "{text}");
}
