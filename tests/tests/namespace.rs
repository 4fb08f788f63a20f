//! A path is a file or a directory, never both (docs/workbench.md, "Files and directories"): every
//! writer — put_file, append, edit, collect, the SDK and restore — refuses a write whose path is
//! an implicit directory (create → `AlreadyExists` with `details.kind = "directory"`,
//! append/replace/edit → `NotArtifact`) and a write below a file (`NotDirectory`), in both write
//! orders and under racing writers; a refusal writes nothing. Stores that already hold such a
//! clash (written before the rule) still open, and restore never copies the clash.

use std::sync::{Arc, Barrier};

use meta::NormPath;
use nokv::commit::CommitRequest;
use nokv::workbench::Workbench;
use nokv::{Client, PutOptions, WriteCondition};
use nokv_tests::{err, fabricate_clash, fresh_store, ok};
use serde_json::{json, Value};

fn setup() -> (tempfile::TempDir, Workbench) {
    let (tmp, client) = fresh_store();
    let wb = Workbench::new(client);
    ok(wb.call("workbench_create", &json!({"id": "wb"})));
    (tmp, wb)
}

fn version(wb: &Workbench) -> u64 {
    wb.client().meta().version().unwrap()
}

fn put(wb: &Workbench, path: &str) -> Value {
    wb.call(
        "workbench_put_file",
        &json!({"id": "wb", "section": "outputs", "path": path, "text": "x\n"}),
    )
}

/// Walks the whole live namespace of `id` through metadata listings; panics on a name that is
/// both a file and a directory.
fn assert_no_file_and_directory(client: &Client, id: &str) {
    let read = client.meta().read();
    let ws = read.visible_workspace(id).unwrap();
    let mut dirs: Vec<Option<NormPath>> = vec![None];
    while let Some(dir) = dirs.pop() {
        let mut after: Option<String> = None;
        loop {
            let page = read
                .list_children(&ws.incarnation, dir.as_ref(), after.as_deref(), 100)
                .unwrap();
            for child in &page.items {
                let path = match &dir {
                    None => meta::normalize(&child.name).unwrap(),
                    Some(d) => d.join(&child.name).unwrap(),
                };
                assert!(
                    !(child.file.is_some() && child.is_dir),
                    "{path} is both a file and a directory"
                );
                if child.is_dir {
                    dirs.push(Some(path));
                }
            }
            if !page.more {
                break;
            }
            after = page.items.last().map(|c| c.name.clone());
        }
    }
}

#[test]
fn create_over_a_directory_is_already_exists_with_kind_directory() {
    let (_t, wb) = setup();
    ok(put(&wb, "d/child"));
    let v = version(&wb);
    let e = err(put(&wb, "d"), "AlreadyExists");
    assert_eq!(e["details"]["kind"], "directory");
    assert_eq!(e["details"]["path"], "/agents/local/wb/wb/outputs/d");
    assert_eq!(e["retryable"], false);
    assert_eq!(version(&wb), v, "a refused create writes nothing");
    // The listings still show one directory, and the whole workbench materializes.
    let listed = ok(wb.call("workbench_list", &json!({"id": "wb", "section": "outputs"})));
    assert_eq!(listed["entries"][0]["name"], "d");
    assert_eq!(listed["entries"][0]["kind"], "directory");
    ok(wb.call(
        "workbench_list",
        &json!({"id": "wb", "section": "outputs", "path": "d"}),
    ));
    let dest = tempfile::tempdir().unwrap();
    nokv::materialize::materialize(wb.client(), "wb", None, dest.path()).unwrap();
    assert_no_file_and_directory(wb.client(), "wb");
}

#[test]
fn write_below_a_file_is_not_directory() {
    let (_t, wb) = setup();
    ok(put(&wb, "a"));
    let v = version(&wb);
    for path in ["a/b", "a/b/c"] {
        let e = err(put(&wb, path), "NotDirectory");
        assert_eq!(e["details"]["file"], "/agents/local/wb/wb/outputs/a");
        assert_eq!(
            e["details"]["path"],
            format!("/agents/local/wb/wb/outputs/{path}")
        );
    }
    err(
        wb.call(
            "workbench_append",
            &json!({"id": "wb", "section": "outputs", "path": "a/log", "text": "y"}),
        ),
        "NotDirectory",
    );
    err(
        wb.call(
            "workbench_edit",
            &json!({"id": "wb", "section": "outputs", "path": "a/b",
                    "old_string": "x", "new_string": "y"}),
        ),
        "NotDirectory",
    );
    err(
        wb.call(
            "workbench_put_file",
            &json!({"id": "wb", "section": "outputs", "path": "a/b", "text": "z",
                    "replace": true}),
        ),
        "NotDirectory",
    );
    assert_eq!(version(&wb), v);
    // `a` is listed as a file and nothing below it exists.
    let listed = ok(wb.call("workbench_list", &json!({"id": "wb", "section": "outputs"})));
    assert_eq!(listed["entry_count"], 1);
    assert_eq!(listed["entries"][0]["kind"], "file");
    assert_no_file_and_directory(wb.client(), "wb");
}

#[test]
fn append_replace_and_edit_of_a_directory_are_not_artifact() {
    let (_t, wb) = setup();
    // The case: `logs/run/step1.log` exists, then an append to `logs/run`.
    ok(wb.call(
        "workbench_put_file",
        &json!({"id": "wb", "section": "logs", "path": "run/step1.log", "text": "ok\n"}),
    ));
    let v = version(&wb);
    let e = err(
        wb.call(
            "workbench_append",
            &json!({"id": "wb", "section": "logs", "path": "run", "text": "more\n"}),
        ),
        "NotArtifact",
    );
    assert_eq!(e["details"]["path"], "/agents/local/wb/wb/logs/run");
    err(
        wb.call(
            "workbench_put_file",
            &json!({"id": "wb", "section": "logs", "path": "run", "text": "x",
                    "replace": true}),
        ),
        "NotArtifact",
    );
    err(
        wb.call(
            "workbench_edit",
            &json!({"id": "wb", "section": "logs", "path": "run",
                    "old_string": "ok", "new_string": "no"}),
        ),
        "NotArtifact",
    );
    assert_eq!(version(&wb), v);
    assert_no_file_and_directory(wb.client(), "wb");
}

#[test]
fn sdk_writers_return_typed_namespace_errors() {
    let (_t, client) = fresh_store();
    client.create_workbench("w").unwrap();
    let create = PutOptions::create("text/plain", "test");
    client.put("w", "outputs/d/x", b"1", &create).unwrap();
    client.put("w", "outputs/f", b"1", &create).unwrap();
    match client.put("w", "outputs/d", b"2", &create) {
        Err(nokv::Error::DirectoryExists { path }) => assert_eq!(path, "outputs/d"),
        other => panic!("{other:?}"),
    }
    let replace = PutOptions {
        condition: WriteCondition::Replace {
            expected_generation: None,
        },
        ..create.clone()
    };
    assert!(matches!(
        client.put("w", "outputs/d", b"2", &replace),
        Err(nokv::Error::NotArtifact { .. })
    ));
    assert!(matches!(
        client.append("w", "outputs/d", b"2", None, "test"),
        Err(nokv::Error::NotArtifact { .. })
    ));
    match client.put("w", "outputs/f/g", b"2", &create) {
        Err(nokv::Error::NotDirectory { path, file }) => {
            assert_eq!((path.as_str(), file.as_str()), ("outputs/f/g", "outputs/f"))
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        client.append("w", "outputs/f/g/h", b"2", None, "test"),
        Err(nokv::Error::NotDirectory { .. })
    ));
    // collect streams a local file through the same checks.
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("model.bin");
    std::fs::write(&local, b"weights").unwrap();
    assert!(matches!(
        nokv::materialize::collect(&client, "w", &local, "outputs/d", "text/plain", false),
        Err(nokv::Error::DirectoryExists { .. })
    ));
    assert!(matches!(
        nokv::materialize::collect(
            &client,
            "w",
            &local,
            "outputs/f/model.bin",
            "text/plain",
            false
        ),
        Err(nokv::Error::NotDirectory { .. })
    ));
    // Paths below the reserved manifests are refused too (commit/restore publish them as files).
    assert!(matches!(
        client.put("w", "metadata/run_manifest.json/x", b"2", &create),
        Err(nokv::Error::InvalidPath { .. })
    ));
    // Nothing was uploaded for the refusals: every object belongs to a published revision.
    assert_no_file_and_directory(&client, "w");
}

/// Two writers of `d` and `d/x` started together, many rounds, in both roles: exactly one wins
/// each round, the loser gets the namespace error, and the store never holds a clash.
#[test]
fn racing_writers_of_a_path_and_its_child_never_both_win() {
    let (_t, wb) = setup();
    for round in 0..24 {
        let (file, child) = (format!("r{round}"), format!("r{round}/x"));
        let barrier = Arc::new(Barrier::new(2));
        let spawn = |path: String, append: bool| {
            let (wb, barrier) = (wb.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let tool = if append {
                    "workbench_append"
                } else {
                    "workbench_put_file"
                };
                wb.call(
                    tool,
                    &json!({"id": "wb", "section": "outputs", "path": path, "text": "x"}),
                )
            })
        };
        let a = spawn(file.clone(), round % 2 == 1);
        let b = spawn(child.clone(), round % 3 == 0);
        let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
        let wins = [&ra, &rb]
            .iter()
            .filter(|r| r["status"] == "success")
            .count();
        assert_eq!(wins, 1, "round {round}: {ra} / {rb}");
        if ra["status"] == "success" {
            assert_eq!(rb["code"], "NotDirectory", "{rb}");
        } else {
            let expected = if round % 2 == 1 {
                "NotArtifact"
            } else {
                "AlreadyExists"
            };
            assert_eq!(ra["code"], expected, "{ra}");
        }
    }
    assert_no_file_and_directory(wb.client(), "wb");
    let dest = tempfile::tempdir().unwrap();
    nokv::materialize::materialize(wb.client(), "wb", None, dest.path()).unwrap();
}

#[test]
fn a_store_that_already_holds_a_clash_opens_and_restore_refuses_to_copy_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let client = Client::open(&dir).unwrap();
    client.create_workbench("old").unwrap();
    let create = PutOptions::create("text/plain", "test");
    client.put("old", "outputs/d/child", b"1", &create).unwrap();
    client.put("old", "outputs/z", b"2", &create).unwrap();
    fabricate_clash(&client, "old", "outputs/d", "outputs/z");
    drop(client);

    // It still opens and serves reads.
    let client = Client::open(&dir).unwrap();
    let wb = Workbench::new(client.clone());
    let listed = ok(wb.call(
        "workbench_list",
        &json!({"id": "old", "section": "outputs"}),
    ));
    assert_eq!(listed["entries"][0]["name"], "d");
    ok(wb.call(
        "workbench_read",
        &json!({"id": "old", "section": "outputs", "path": "d/child"}),
    ));

    // Restore (from a commit and from a snapshot) is refused and leaves no destination.
    let commit = client
        .commit(&CommitRequest {
            workbench_id: "old".into(),
            manifest: json!({"task": "clash"}),
            content_digest_uri: format!("sha256:{}", "ab".repeat(32)),
            replace: false,
            parents: Vec::new(),
        })
        .unwrap();
    let snapshot = ok(wb.call(
        "workbench_snapshot",
        &json!({"id": "old", "name": "before"}),
    ));
    for (dest, selector) in [
        ("from-commit", json!({"at_commit": commit.commit_identity})),
        (
            "from-snapshot",
            json!({"at_snapshot": snapshot["snapshot_id"]}),
        ),
    ] {
        let mut args = json!({"id": "old", "destination_id": dest});
        args.as_object_mut()
            .unwrap()
            .extend(selector.as_object().unwrap().clone());
        for _attempt in 0..2 {
            let e = err(wb.call("workbench_restore", &args), "NotDirectory");
            assert_eq!(e["retryable"], false);
            assert!(e["message"].as_str().unwrap().contains("outputs/d"), "{e}");
            err(wb.call("workbench_list", &json!({"id": dest})), "NotFound");
        }
    }
    // The snapshot is no longer held by a restore: it can be retired.
    ok(wb.call(
        "workbench_snapshot_retire",
        &json!({"id": "old", "name": "before"}),
    ));
}
