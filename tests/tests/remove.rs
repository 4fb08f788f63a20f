//! Path removal (issue 12, "Remove"): the generation CAS, NotFound afterwards for stat/read,
//! listing/search/catalog no longer showing the path, the `ArtifactRemoved` change event,
//! request-id replay, reserved manifests, prefix removal in batches, and the CLI front door.

mod gc_support;

use std::process::Command;

use gc_support::{all_rows, create, open_gc};
use nokv::lifetime::RemoveOptions;
use nokv::workbench::Workbench;
use nokv::{FieldId, IndexValue, PutOptions};
use nokv_tests::{err, ok};
use serde_json::{json, Value};

fn store() -> (tempfile::TempDir, nokv::Client) {
    let tmp = tempfile::tempdir().unwrap();
    let client = open_gc(&tmp.path().join("store"));
    client.create_workbench("wb").unwrap();
    (tmp, client)
}

#[test]
fn remove_with_stale_generation_conflicts_and_writes_nothing() {
    let (_tmp, client) = store();
    let g = client
        .put("wb", "outputs/a.txt", b"one", &create())
        .unwrap()
        .generation;
    let version = client.meta().version().unwrap();
    let err = client
        .remove(
            "wb",
            "outputs/a.txt",
            &RemoveOptions {
                expected_generation: Some(g + 100),
                request_id: None,
            },
        )
        .unwrap_err();
    match err {
        nokv::Error::GenerationConflict {
            expected, actual, ..
        } => {
            assert_eq!(expected, Some(g + 100));
            assert_eq!(actual, Some(g));
        }
        other => panic!("expected GenerationConflict, got {other:?}"),
    }
    assert_eq!(client.meta().version().unwrap(), version, "nothing written");
    assert_eq!(client.read_all("wb", "outputs/a.txt").unwrap(), b"one");
    // The exact generation removes it.
    let r = client
        .remove(
            "wb",
            "outputs/a.txt",
            &RemoveOptions {
                expected_generation: Some(g),
                request_id: None,
            },
        )
        .unwrap();
    assert_eq!(r.removed_generation, g);
    assert!(!r.idempotent_replay);
}

#[test]
fn removed_path_is_not_found_for_stat_and_read() {
    let (_tmp, client) = store();
    client
        .put("wb", "outputs/a.txt", b"one", &create())
        .unwrap();
    client
        .remove("wb", "outputs/a.txt", &RemoveOptions::default())
        .unwrap();
    assert!(matches!(
        client.stat("wb", "outputs/a.txt"),
        Err(nokv::Error::NotFound { .. })
    ));
    assert!(matches!(
        client.read_all("wb", "outputs/a.txt"),
        Err(nokv::Error::NotFound { .. })
    ));
    assert!(matches!(
        client.remove("wb", "outputs/a.txt", &RemoveOptions::default()),
        Err(nokv::Error::NotFound { .. })
    ));
    // The facade agrees.
    let wb = Workbench::new(client.clone());
    err(
        wb.call(
            "workbench_stat",
            &json!({"id": "wb", "section": "outputs", "path": "a.txt"}),
        ),
        "NotFound",
    );
    err(
        wb.call(
            "workbench_read",
            &json!({"id": "wb", "section": "outputs", "path": "a.txt"}),
        ),
        "NotFound",
    );
    // The path can be created again (a new revision, a new generation).
    let again = client
        .put("wb", "outputs/a.txt", b"two", &create())
        .unwrap();
    assert!(again.created);
    assert_eq!(client.read_all("wb", "outputs/a.txt").unwrap(), b"two");
}

#[test]
fn removed_path_leaves_listing_search_and_catalog() {
    let (_tmp, client) = store();
    let mut opts = PutOptions::create("application/json", "test");
    opts.index_fields.insert(
        FieldId::new("lifetime_probe").unwrap(),
        IndexValue::String("removed-soon".into()),
    );
    client
        .put("wb", "outputs/gone.json", br#"{"x":1}"#, &opts)
        .unwrap();
    client
        .put("wb", "outputs/kept.json", br#"{"x":2}"#, &create())
        .unwrap();
    let wb = Workbench::new(client.clone());
    let search =
        json!({"predicates":[{"field":"lifetime_probe","op":"eq","value":"removed-soon"}]});
    assert_eq!(ok(wb.call("workbench_search", &search))["match_count"], 1);
    let catalog = ok(wb.call("workbench_catalog", &json!({})));
    assert!(catalog.to_string().contains("lifetime_probe"), "{catalog}");

    client
        .remove("wb", "outputs/gone.json", &RemoveOptions::default())
        .unwrap();

    let list = ok(wb.call("workbench_list", &json!({"id": "wb", "section": "outputs"})));
    let names: Vec<String> = list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(!names.iter().any(|n| n.contains("gone")), "{list}");
    assert!(names.iter().any(|n| n.contains("kept")), "{list}");
    assert_eq!(ok(wb.call("workbench_search", &search))["match_count"], 0);
    let catalog = ok(wb.call("workbench_catalog", &json!({})));
    assert!(!catalog.to_string().contains("lifetime_probe"), "{catalog}");
    // No index row of the removed path is left behind.
    for (k, _) in all_rows(&client, "secondary_index") {
        let key = meta::codec::SecondaryIndexKey::decode(&k).unwrap();
        assert_ne!(key.path.as_str(), "outputs/gone.json");
    }
}

#[test]
fn change_feed_shows_artifact_removed() {
    let (_tmp, client) = store();
    let g = client
        .put("wb", "outputs/a.txt", b"one", &create())
        .unwrap()
        .generation;
    let r = client
        .remove("wb", "outputs/a.txt", &RemoveOptions::default())
        .unwrap();
    let events: Vec<nokv::changes::ChangeItem> = client
        .workbench_changes("wb", None)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    let last = events.last().expect("events");
    assert_eq!(last.kind, "artifact_removed");
    assert_eq!(last.path.as_deref(), Some("outputs/a.txt"));
    assert_eq!(last.before_generation, Some(g));
    assert_eq!(last.after_generation, None);
    assert_eq!(last.commit_version, r.commit_version);
}

#[test]
fn remove_replay_with_the_same_request_id_returns_the_original_receipt() {
    let (_tmp, client) = store();
    let g = client
        .put("wb", "outputs/a.txt", b"one", &create())
        .unwrap()
        .generation;
    let opts = RemoveOptions {
        expected_generation: Some(g),
        request_id: Some([7; 16]),
    };
    let first = client.remove("wb", "outputs/a.txt", &opts).unwrap();
    client
        .put("wb", "outputs/b.txt", b"other", &create())
        .unwrap();
    let again = client.remove("wb", "outputs/a.txt", &opts).unwrap();
    assert!(again.idempotent_replay);
    assert_eq!(again.removed_generation, first.removed_generation);
    assert_eq!(again.commit_version, first.commit_version);
    // The same id for another removal is refused.
    let other = client.remove(
        "wb",
        "outputs/b.txt",
        &RemoveOptions {
            expected_generation: None,
            request_id: Some([7; 16]),
        },
    );
    assert!(
        matches!(
            other,
            Err(nokv::Error::Meta(meta::Error::RequestReplayMismatch))
        ),
        "{other:?}"
    );
    assert_eq!(client.read_all("wb", "outputs/b.txt").unwrap(), b"other");
}

#[test]
fn reserved_manifests_are_refused() {
    let (_tmp, client) = store();
    client.put("wb", "inputs/x", b"x", &create()).unwrap();
    client
        .commit(&nokv::commit::CommitRequest {
            workbench_id: "wb".into(),
            manifest: json!({"k": "v"}),
            content_digest_uri: format!("sha256:{}", "ab".repeat(32)),
            replace: false,
            parents: Vec::new(),
        })
        .unwrap();
    let version = client.meta().version().unwrap();
    let e = client
        .remove(
            "wb",
            "metadata/run_manifest.json",
            &RemoveOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(e, nokv::Error::InvalidPath { .. }), "{e:?}");
    assert_eq!(client.meta().version().unwrap(), version);
    assert!(client.stat("wb", "metadata/run_manifest.json").is_ok());
    // A prefix removal keeps it and reports it.
    let r = client.remove_prefix("wb", "metadata").unwrap();
    assert!(r.removed.is_empty());
    assert_eq!(
        r.kept_reserved
            .iter()
            .map(|p| p.as_str().to_string())
            .collect::<Vec<_>>(),
        ["metadata/run_manifest.json"]
    );
    assert!(client.stat("wb", "metadata/run_manifest.json").is_ok());
}

#[test]
fn remove_prefix_removes_everything_under_it_in_bounded_batches() {
    let (_tmp, client) = store();
    for i in 0..40 {
        client
            .put("wb", &format!("outputs/run/f{i:02}.txt"), b"x", &create())
            .unwrap();
    }
    client
        .put("wb", "outputs/runner.txt", b"keep", &create())
        .unwrap();
    client
        .put("wb", "outputs/run2/k.txt", b"keep", &create())
        .unwrap();
    let mut batches = Vec::new();
    let r = client
        .remove_prefix_with("wb", "outputs/run", &mut |b| batches.push(b.len()))
        .unwrap();
    assert_eq!(r.removed.len(), 40);
    assert_eq!(batches, vec![16, 16, 8], "at most 16 paths per command");
    assert_eq!(r.batches, 3);
    // Siblings sharing the name prefix are untouched.
    assert_eq!(
        client.read_all("wb", "outputs/runner.txt").unwrap(),
        b"keep"
    );
    assert_eq!(
        client.read_all("wb", "outputs/run2/k.txt").unwrap(),
        b"keep"
    );
    let events: Vec<_> = client
        .workbench_changes("wb", None)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.kind == "artifact_removed")
        .collect();
    assert_eq!(events.len(), 40);
    // Resumable: a second run finds nothing left.
    assert!(client
        .remove_prefix("wb", "outputs/run")
        .unwrap()
        .removed
        .is_empty());
    // A file prefix removes exactly that file.
    let one = client.remove_prefix("wb", "outputs/runner.txt").unwrap();
    assert_eq!(one.removed.len(), 1);
}

fn cli(store: &std::path::Path, args: &[&str]) -> (Option<i32>, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("NOKV_FAULT_POINT")
        .output()
        .expect("run nokv_cli");
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
    )
}

#[test]
fn cli_rm_removes_with_cas_replays_by_request_id_and_removes_prefixes() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let g = {
        let client = open_gc(&store);
        client.create_workbench("wb").unwrap();
        client.put("wb", "logs/a.log", b"a", &create()).unwrap();
        client.put("wb", "logs/b.log", b"b", &create()).unwrap();
        client
            .put("wb", "outputs/x.txt", b"x", &create())
            .unwrap()
            .generation
    };
    let stale = (g + 5).to_string();
    let (code, out) = cli(
        &store,
        &["rm", "wb", "outputs/x.txt", "--expected-generation", &stale],
    );
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(out["code"], "Conflict", "{out}");
    let id = "0123456789abcdef0123456789abcdef";
    let gs = g.to_string();
    let args = [
        "rm",
        "wb",
        "outputs/x.txt",
        "--expected-generation",
        &gs,
        "--request-id",
        id,
    ];
    let (code, first) = cli(&store, &args);
    assert_eq!(code, Some(0), "{first}");
    assert_eq!(first["removed_generation"], g);
    assert_eq!(first["idempotent_replay"], false);
    let (code, again) = cli(&store, &args);
    assert_eq!(code, Some(0), "{again}");
    assert_eq!(again["idempotent_replay"], true);
    let (code, missing) = cli(&store, &["rm", "wb", "outputs/x.txt"]);
    assert_eq!(code, Some(1));
    assert_eq!(missing["code"], "NotFound", "{missing}");
    // A directory (a section, or a path with files under it) is not a file: NotArtifact with
    // the way to remove it, nothing removed.
    let (code, d) = cli(&store, &["rm", "wb", "logs"]);
    assert_eq!(code, Some(1), "{d}");
    assert_eq!(d["code"], "NotArtifact", "{d}");
    assert!(d["message"].as_str().unwrap().contains("nokv rm -r"), "{d}");
    let (code, rec) = cli(&store, &["rm", "-r", "wb", "logs"]);
    assert_eq!(code, Some(0), "{rec}");
    assert_eq!(rec["removed_count"], 2);
    let (code, bad) = cli(&store, &["rm", "wb", "x", "--request-id", "zz"]);
    assert_eq!(code, Some(2), "{bad}");
}
