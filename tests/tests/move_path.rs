//! Moving one path (docs/metadata-format.md, "Move One Path"): create-only and replace
//! destinations, stale generations (Conflict, nothing moved), directory sources refused,
//! request-id replay, one `artifact_moved` change event, references that follow the revision,
//! snapshots and commits that keep reading the old paths while GC keeps what they hold, and the
//! CLI front door.

mod gc_support;

use std::process::Command;

use gc_support::{assert_fsck_clean, create, gc_until_quiet, open_gc, revision_of};
use nokv::commit::CommitRequest;
use nokv::move_path::MoveOptions;
use nokv::snapshot::SnapshotOptions;
use nokv::{FieldId, IndexValue, PutOptions};
use nokv_tests::ok;
use serde_json::{json, Value};

fn store() -> (tempfile::TempDir, nokv::Client) {
    let tmp = tempfile::tempdir().unwrap();
    let client = open_gc(&tmp.path().join("store"));
    client.create_workbench("wb").unwrap();
    (tmp, client)
}

fn mv(
    client: &nokv::Client,
    from: &str,
    to: &str,
    opts: MoveOptions,
) -> nokv::Result<nokv::move_path::MoveReceipt> {
    client.move_path("wb", from, to, &opts)
}

#[test]
fn move_to_an_absent_path_keeps_the_revision_and_removes_the_source() {
    let (_tmp, client) = store();
    let put = client
        .put("wb", "outputs/draft.txt", b"report body", &create())
        .unwrap();
    let rev = revision_of(&client, "wb", "outputs/draft.txt");
    let objects_before = client.objects().list("").unwrap().len();
    let r = mv(
        &client,
        "outputs/draft.txt",
        "outputs/final/report.txt",
        MoveOptions::default(),
    )
    .unwrap();
    assert_eq!(r.from.as_str(), "outputs/draft.txt");
    assert_eq!(r.to.as_str(), "outputs/final/report.txt");
    assert_eq!(r.from_generation, put.generation);
    assert!(r.generation > put.generation);
    assert_eq!(r.replaced_generation, None);
    assert_eq!(r.size_bytes, 11);
    assert_eq!(r.digest_uri, put.digest_uri);
    assert!(!r.idempotent_replay);
    assert!(matches!(
        client.stat("wb", "outputs/draft.txt"),
        Err(nokv::Error::NotFound { .. })
    ));
    let moved = client.stat("wb", "outputs/final/report.txt").unwrap();
    assert_eq!(moved.generation, r.generation);
    assert_eq!(
        moved.artifact_revision_id.to_hex(),
        rev,
        "the revision moved, no copy"
    );
    assert_eq!(
        client.read_all("wb", "outputs/final/report.txt").unwrap(),
        b"report body"
    );
    assert_eq!(
        client.objects().list("").unwrap().len(),
        objects_before,
        "no object was written"
    );
    assert_fsck_clean(&client);
}

#[test]
fn move_onto_an_existing_file_is_refused_unless_its_generation_is_given() {
    let (_tmp, client) = store();
    client.put("wb", "a.txt", b"new", &create()).unwrap();
    let old = client.put("wb", "b.txt", b"old", &create()).unwrap();
    let version = client.meta().version().unwrap();
    match mv(&client, "a.txt", "b.txt", MoveOptions::default()).unwrap_err() {
        nokv::Error::AlreadyExists { path } => assert_eq!(path, "b.txt"),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    // A stale destination generation: Conflict naming the destination, nothing moved.
    let stale = MoveOptions {
        expected_destination_generation: Some(old.generation + 7),
        ..Default::default()
    };
    match mv(&client, "a.txt", "b.txt", stale).unwrap_err() {
        nokv::Error::GenerationConflict {
            path,
            expected,
            actual,
        } => {
            assert_eq!(path, "b.txt");
            assert_eq!(expected, Some(old.generation + 7));
            assert_eq!(actual, Some(old.generation));
        }
        other => panic!("expected GenerationConflict, got {other:?}"),
    }
    // Replace-at-generation of an absent destination is a Conflict too.
    let absent = MoveOptions {
        expected_destination_generation: Some(5),
        ..Default::default()
    };
    match mv(&client, "a.txt", "c.txt", absent).unwrap_err() {
        nokv::Error::GenerationConflict { path, actual, .. } => {
            assert_eq!(path, "c.txt");
            assert_eq!(actual, None);
        }
        other => panic!("expected GenerationConflict, got {other:?}"),
    }
    assert_eq!(client.meta().version().unwrap(), version, "nothing written");
    assert_eq!(client.read_all("wb", "a.txt").unwrap(), b"new");
    assert_eq!(client.read_all("wb", "b.txt").unwrap(), b"old");
    // The exact destination generation replaces it.
    let replace = MoveOptions {
        expected_destination_generation: Some(old.generation),
        ..Default::default()
    };
    let r = mv(&client, "a.txt", "b.txt", replace).unwrap();
    assert_eq!(r.replaced_generation, Some(old.generation));
    assert_eq!(client.read_all("wb", "b.txt").unwrap(), b"new");
    assert!(client.stat("wb", "a.txt").is_err());
    // The replaced body lost its last reference: GC collects it; the moved one stays.
    let collected: usize = gc_until_quiet(&client, 4)
        .iter()
        .map(|r| r.collected.len())
        .sum();
    assert_eq!(collected, 1);
    assert_eq!(client.read_all("wb", "b.txt").unwrap(), b"new");
    assert_fsck_clean(&client);
}

#[test]
fn stale_source_generation_conflicts_and_moves_nothing() {
    let (_tmp, client) = store();
    let g = client
        .put("wb", "x.bin", b"x", &create())
        .unwrap()
        .generation;
    let version = client.meta().version().unwrap();
    let stale = MoveOptions {
        expected_generation: Some(g + 1),
        ..Default::default()
    };
    match mv(&client, "x.bin", "y.bin", stale).unwrap_err() {
        nokv::Error::GenerationConflict {
            path,
            expected,
            actual,
        } => {
            assert_eq!(path, "x.bin");
            assert_eq!(expected, Some(g + 1));
            assert_eq!(actual, Some(g));
        }
        other => panic!("expected GenerationConflict, got {other:?}"),
    }
    assert_eq!(client.meta().version().unwrap(), version, "nothing written");
    assert_eq!(client.stat("wb", "x.bin").unwrap().generation, g);
    assert!(client.stat("wb", "y.bin").is_err());
    let exact = MoveOptions {
        expected_generation: Some(g),
        ..Default::default()
    };
    assert_eq!(
        mv(&client, "x.bin", "y.bin", exact)
            .unwrap()
            .from_generation,
        g
    );
}

#[test]
fn a_directory_source_is_refused_as_directory_rename() {
    let (_tmp, client) = store();
    client
        .put("wb", "outputs/run/a.txt", b"a", &create())
        .unwrap();
    let err = mv(
        &client,
        "outputs/run",
        "outputs/run2",
        MoveOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, nokv::Error::NotArtifact { .. }), "{err:?}");
    let tool = nokv::workbench::move_error(&client, "wb", err);
    assert_eq!(tool.code.as_str(), "NotArtifact");
    assert!(
        tool.message.contains("directory rename is not supported"),
        "{}",
        tool.message
    );
    assert_eq!(
        tool.details.get("reason").and_then(Value::as_str),
        Some("directory_rename_unsupported")
    );
    // Other refusals: nothing at the source, below a file, onto a directory, reserved, same path.
    assert!(matches!(
        mv(&client, "absent.txt", "b.txt", MoveOptions::default()),
        Err(nokv::Error::NotFound { .. })
    ));
    client.put("wb", "file.txt", b"f", &create()).unwrap();
    assert!(matches!(
        mv(
            &client,
            "file.txt",
            "outputs/run/a.txt/x",
            MoveOptions::default()
        ),
        Err(nokv::Error::NotDirectory { .. })
    ));
    assert!(matches!(
        mv(&client, "file.txt", "outputs/run", MoveOptions::default()),
        Err(nokv::Error::DirectoryExists { .. })
    ));
    assert!(matches!(
        mv(
            &client,
            "file.txt",
            "metadata/run_manifest.json",
            MoveOptions::default()
        ),
        Err(nokv::Error::InvalidPath { .. })
    ));
    assert!(matches!(
        mv(&client, "file.txt", "file.txt", MoveOptions::default()),
        Err(nokv::Error::InvalidArgument(_))
    ));
    // The destination follows a put's rules: no file may shadow a section (`logs` has no file
    // yet, so no directory would stop it), nothing below a reserved manifest path.
    for to in ["logs", "input", "metadata/run_manifest.json/x"] {
        let err = mv(&client, "file.txt", to, MoveOptions::default()).unwrap_err();
        assert!(
            matches!(err, nokv::Error::InvalidPath { .. }),
            "{to}: {err:?}"
        );
        assert!(client.stat("wb", to).is_err(), "{to}");
    }
    assert_eq!(client.read_all("wb", "outputs/run/a.txt").unwrap(), b"a");
    assert_eq!(client.read_all("wb", "file.txt").unwrap(), b"f");
}

#[test]
fn request_id_replay_returns_the_first_receipt_and_another_command_is_refused() {
    let (_tmp, client) = store();
    client.put("wb", "a.txt", b"a", &create()).unwrap();
    let opts = MoveOptions {
        request_id: Some([7; 16]),
        ..Default::default()
    };
    let first = mv(&client, "a.txt", "b.txt", opts).unwrap();
    client.put("wb", "later.txt", b"later", &create()).unwrap();
    let again = mv(&client, "a.txt", "b.txt", opts).unwrap();
    assert!(again.idempotent_replay);
    assert_eq!(
        nokv::move_path::MoveReceipt {
            idempotent_replay: false,
            ..again
        },
        first
    );
    // The same id for another move is refused, typed.
    let err = mv(&client, "later.txt", "c.txt", opts).unwrap_err();
    let tool = nokv::workbench::move_error(&client, "wb", err);
    assert_eq!(
        tool.details.get("reason").and_then(Value::as_str),
        Some("request_id_reused")
    );
    assert!(client.stat("wb", "later.txt").is_ok());
}

#[test]
fn the_change_feed_shows_one_artifact_moved_event() {
    let (_tmp, client) = store();
    let g = client
        .put("wb", "a.txt", b"a", &create())
        .unwrap()
        .generation;
    let before: Vec<_> = client.changes(None).unwrap().map(Result::unwrap).collect();
    let r = mv(&client, "a.txt", "dir/b.txt", MoveOptions::default()).unwrap();
    let after: Vec<_> = client
        .changes(before.last().map(|c| c.cursor.as_str()))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(after.len(), 1, "one event: {after:?}");
    let e = &after[0];
    assert_eq!(e.kind, "artifact_moved");
    assert_eq!(e.path.as_deref(), Some("dir/b.txt"));
    assert_eq!(e.before_generation, None);
    assert_eq!(e.after_generation, Some(r.generation));
    assert_eq!(e.moved_from.as_deref(), Some("a.txt"));
    assert_eq!(e.moved_from_generation, Some(g));
    assert_eq!(e.commit_version, r.commit_version);
}

#[test]
fn index_rows_follow_the_moved_path() {
    let (_tmp, client) = store();
    let mut opts = PutOptions::create("application/json", "test");
    opts.index_fields.insert(
        FieldId::new("species").unwrap(),
        IndexValue::String("Gentoo".into()),
    );
    client.put("wb", "outputs/a.json", b"{}", &opts).unwrap();
    mv(
        &client,
        "outputs/a.json",
        "outputs/b.json",
        MoveOptions::default(),
    )
    .unwrap();
    let wb = nokv::workbench::Workbench::new(client.clone());
    let search = json!({"predicates":[{"field":"species","op":"eq","value":"Gentoo"}]});
    let found = ok(wb.call("workbench_search", &search));
    assert_eq!(found["match_count"], 1, "{found}");
    assert!(found.to_string().contains("outputs/b.json"), "{found}");
    assert!(!found.to_string().contains("outputs/a.json"), "{found}");
    assert_fsck_clean(&client);
}

#[test]
fn snapshots_and_commits_keep_the_old_paths_and_gc_keeps_their_bodies() {
    let (_tmp, client) = store();
    client
        .put("wb", "outputs/a.txt", b"first", &create())
        .unwrap();
    let old_b = client
        .put("wb", "outputs/b.txt", b"second", &create())
        .unwrap();
    let commit = client
        .commit(&CommitRequest {
            workbench_id: "wb".into(),
            manifest: json!({"step": 1}),
            content_digest_uri: client.tree_content_digest("wb").unwrap(),
            replace: false,
            parents: Vec::new(),
        })
        .unwrap();
    let snap = client
        .create_snapshot("wb", &SnapshotOptions::default())
        .unwrap();
    // Move a over b: b's old body loses its path reference but the commit and snapshot hold it.
    mv(
        &client,
        "outputs/a.txt",
        "outputs/b.txt",
        MoveOptions {
            expected_destination_generation: Some(old_b.generation),
            ..Default::default()
        },
    )
    .unwrap();
    let collected: usize = gc_until_quiet(&client, 4)
        .iter()
        .map(|r| r.collected.len())
        .sum();
    assert_eq!(collected, 0, "the commit holds both bodies");
    // The snapshot still reads both old paths.
    let selector = meta::ops::snapshot::SnapshotSelector::Id(snap.snapshot_id);
    let (_, reader) = client.snapshot_reader("wb", &selector).unwrap();
    let ws = reader.visible_workspace("wb").unwrap();
    for (path, body) in [
        ("outputs/a.txt", &b"first"[..]),
        ("outputs/b.txt", &b"second"[..]),
    ] {
        let entry = reader
            .path_entry(&ws.incarnation, &meta::normalize(path).unwrap())
            .unwrap()
            .expect("the snapshot keeps the old path");
        assert_eq!(client.read_entry(&reader, &entry).unwrap(), body);
    }
    // The commit's members are unchanged.
    let diff = client
        .diff(
            &nokv::diff::SideSpec::parse(&commit.commit_identity).unwrap(),
            &nokv::diff::SideSpec::parse("wb").unwrap(),
            &Default::default(),
        )
        .unwrap();
    let changes: Vec<(String, &str)> = diff
        .changes
        .iter()
        .map(|c| {
            (
                c.change.path.as_str().to_string(),
                nokv::diff::change_name(c.change.change),
            )
        })
        .collect();
    assert_eq!(
        changes,
        vec![
            ("outputs/a.txt".to_string(), "removed"),
            ("outputs/b.txt".to_string(), "changed"),
        ]
    );
    // The live tree reads the moved body.
    assert_eq!(client.read_all("wb", "outputs/b.txt").unwrap(), b"first");
    assert_fsck_clean(&client);
}

fn cli(store: &std::path::Path, args: &[&str]) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("run nokv");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn cli_mv_moves_replaces_replays_and_refuses_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    {
        let client = nokv::Client::open(&store).unwrap();
        client.create_workbench("wb").unwrap();
        client.put("wb", "outputs/a.txt", b"a", &create()).unwrap();
        client
            .put("wb", "outputs/dir/x.txt", b"x", &create())
            .unwrap();
    }
    let id = "0123456789abcdef0123456789abcdef";
    let (code, v) = cli(
        &store,
        &[
            "mv",
            "wb",
            "outputs/a.txt",
            "outputs/b.txt",
            "--request-id",
            id,
        ],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "success");
    assert_eq!(v["from"], "outputs/a.txt");
    assert_eq!(v["to"], "outputs/b.txt");
    assert_eq!(v["replaced_generation"], Value::Null);
    assert_eq!(v["idempotent_replay"], false);
    let (code, again) = cli(
        &store,
        &[
            "mv",
            "wb",
            "outputs/a.txt",
            "outputs/b.txt",
            "--request-id",
            id,
        ],
    );
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["idempotent_replay"], true);
    assert_eq!(again["generation"], v["generation"]);
    let (code, e) = cli(&store, &["mv", "wb", "outputs/dir", "outputs/dir2"]);
    assert_eq!(code, 1);
    assert_eq!(e["code"], "NotArtifact");
    assert_eq!(e["details"]["reason"], "directory_rename_unsupported");
    let (code, e) = cli(&store, &["mv", "wb", "outputs/b.txt", "outputs/dir/x.txt"]);
    assert_eq!(code, 1);
    assert_eq!(e["code"], "AlreadyExists");
    let x_gen = {
        let client = nokv::Client::open_read_only(&store).unwrap();
        client.stat("wb", "outputs/dir/x.txt").unwrap().generation
    };
    let (code, e) = cli(
        &store,
        &[
            "mv",
            "wb",
            "outputs/b.txt",
            "outputs/dir/x.txt",
            "--expected-destination-generation",
            &(x_gen + 1).to_string(),
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(e["code"], "Conflict");
    let (code, r) = cli(
        &store,
        &[
            "mv",
            "wb",
            "outputs/b.txt",
            "outputs/dir/x.txt",
            "--expected-destination-generation",
            &x_gen.to_string(),
        ],
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["replaced_generation"], x_gen);
    let (code, e) = cli(&store, &["mv", "wb", "a", "b", "--request-id", "xyz"]);
    assert_eq!(code, 2);
    assert_eq!(e["code"], "InvalidArguments");
}
