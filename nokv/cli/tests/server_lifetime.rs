//! Object lifetime through `nokv serve` with the remote SDK: remove (generation CAS, request-id
//! replay), prefix removal, GC (dry run, bounded pass), GC explanation, fsck, index repair and the
//! durable settings; and the server's background maintenance collecting a removed revision.

use std::path::Path;
use std::time::{Duration, Instant};

use nokv::lifetime::{GcOptions, RemoveOptions};
use nokv::{Client, Error, PutOptions};
use nokv_remote::RemoteClient;
use nokv_server::{RunningServer, ServerOptions};

fn start(store: &Path, maintenance: Duration) -> RunningServer {
    nokv_server::start(ServerOptions {
        store: store.to_path_buf(),
        listen: "127.0.0.1:0".into(),
        maintenance_interval: maintenance,
        recovery_interval: Duration::ZERO,
        ..ServerOptions::default()
    })
    .unwrap()
}

fn code(e: Error) -> String {
    match e {
        Error::OperationFailed { code, .. } => code,
        other => panic!("expected an operation error, got {other:?}"),
    }
}

#[test]
fn remove_and_prefix_removal_through_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(&dir.path().join("s"), Duration::ZERO);
    let remote = RemoteClient::connect(&srv.url(), None).unwrap();
    remote.create_workbench("wb").unwrap();
    let put = |p: &str, b: &[u8]| {
        remote
            .put(
                "wb",
                p,
                b,
                &PutOptions::create("application/octet-stream", "test"),
            )
            .unwrap()
    };
    let a = put("outputs/a.txt", b"alpha");
    put("outputs/deep/b.txt", b"beta");
    put("notes.txt", b"keep");

    // A stale generation is a Conflict and removes nothing.
    let stale = RemoveOptions {
        expected_generation: Some(a.generation + 100),
        request_id: None,
    };
    assert_eq!(
        code(remote.remove("wb", "outputs/a.txt", &stale).unwrap_err()),
        "Conflict"
    );
    assert!(remote.stat("wb", "outputs/a.txt").is_ok());

    // The right generation with a request id; the same id again is the stored receipt.
    let opts = RemoveOptions {
        expected_generation: Some(a.generation),
        request_id: Some([7u8; 16]),
    };
    let r = remote.remove("wb", "outputs/a.txt", &opts).unwrap();
    assert_eq!(r.path.as_str(), "outputs/a.txt");
    assert_eq!(r.removed_generation, a.generation);
    assert_eq!(r.size_bytes, 5);
    assert!(!r.idempotent_replay);
    let again = remote.remove("wb", "outputs/a.txt", &opts).unwrap();
    assert!(again.idempotent_replay);
    assert_eq!(again.commit_version, r.commit_version);
    assert_eq!(
        code(remote.stat("wb", "outputs/a.txt").unwrap_err()),
        "NotFound"
    );
    assert_eq!(
        code(
            remote
                .remove("wb", "outputs/a.txt", &RemoveOptions::default())
                .unwrap_err()
        ),
        "NotFound"
    );

    let gone = remote.remove_prefix("wb", "outputs").unwrap();
    let paths: Vec<&str> = gone.removed.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["outputs/deep/b.txt"]);
    assert!(gone.batches >= 1);
    assert!(remote.stat("wb", "notes.txt").is_ok(), "outside the prefix");
    assert_eq!(
        code(remote.remove_prefix("absent-wb", "x").unwrap_err()),
        "NotFound"
    );
    srv.shutdown().unwrap();

    // What the server did is what the embedded store sees.
    let client = Client::open(dir.path().join("s")).unwrap();
    assert!(client.stat("wb", "outputs/deep/b.txt").is_err());
    assert!(client.fsck().unwrap().is_clean());
}

#[test]
fn gc_explain_fsck_repair_and_settings_through_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(&dir.path().join("s"), Duration::ZERO);
    let remote = RemoteClient::connect(&srv.url(), None).unwrap();

    let all = remote.config_list().unwrap();
    assert!(all.iter().any(|s| s.name == "history_retention_versions"));
    let set = remote
        .config_set("history_retention_versions", "0")
        .unwrap();
    assert_eq!(set.value, 0);
    assert!(!set.unchanged);
    let got = remote.config_get("history_retention_versions").unwrap();
    assert_eq!((got.stored, got.effective), (Some(0), 0));
    assert_eq!(
        code(
            remote
                .config_set("history_retention_versions", "many")
                .unwrap_err()
        ),
        "InvalidArguments"
    );
    assert_eq!(
        code(remote.config_get("bogus").unwrap_err()),
        "InvalidArguments"
    );

    remote.create_workbench("wb").unwrap();
    remote
        .put(
            "wb",
            "tmp.bin",
            &[1u8; 4096],
            &PutOptions::create("application/octet-stream", "test"),
        )
        .unwrap();
    let kept = remote
        .put(
            "wb",
            "kept.bin",
            b"kept",
            &PutOptions::create("application/octet-stream", "test"),
        )
        .unwrap();
    remote
        .remove("wb", "tmp.bin", &RemoveOptions::default())
        .unwrap();

    let why = remote.gc_explain("wb", "kept.bin").unwrap();
    assert!(why.is_object(), "{why}");
    assert!(
        why.to_string().contains(&kept.digest_uri) || why.get("verdict").is_some(),
        "{why}"
    );
    assert_eq!(
        code(remote.gc_explain_revision("nothex").unwrap_err()),
        "InvalidArguments"
    );

    let dry = remote
        .gc(&GcOptions {
            dry_run: true,
            max_revisions: None,
        })
        .unwrap();
    assert_eq!(dry["dry_run"], true);
    let pass = remote
        .gc(&GcOptions {
            dry_run: false,
            max_revisions: Some(8),
        })
        .unwrap();
    assert_eq!(pass["dry_run"], false);
    let deleted = pass["deleted"].as_array().unwrap().len();
    let waiting = pass["waiting"].as_array().unwrap().len();
    assert_eq!(
        deleted + waiting,
        1,
        "the removed revision is collected or waits: {pass}"
    );

    let fsck = remote.fsck().unwrap();
    assert_eq!(fsck["clean"], true, "{fsck}");
    let repaired = remote.repair_index().unwrap();
    assert_eq!(repaired.rows_deleted, 0);
    srv.shutdown().unwrap();

    let client = Client::open(dir.path().join("s")).unwrap();
    assert_eq!(
        client
            .config_get("history_retention_versions")
            .unwrap()
            .stored,
        Some(0)
    );
    assert!(client.fsck().unwrap().is_clean());
}

#[test]
fn the_server_runs_background_gc_that_collects_a_removed_revision() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start(&dir.path().join("s"), Duration::from_millis(200));
    let remote = RemoteClient::connect(&srv.url(), None).unwrap();
    remote
        .config_set("history_retention_versions", "0")
        .unwrap();
    remote.create_workbench("wb").unwrap();
    remote
        .put(
            "wb",
            "tmp.bin",
            &[9u8; 8192],
            &PutOptions::create("application/octet-stream", "test"),
        )
        .unwrap();
    remote
        .remove("wb", "tmp.bin", &RemoveOptions::default())
        .unwrap();
    // Later commits move the tip past the removal so the floor (retention 0) passes it.
    remote
        .put(
            "wb",
            "after.txt",
            b"x",
            &PutOptions::create("application/octet-stream", "test"),
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let dry = remote
            .gc(&GcOptions {
                dry_run: true,
                max_revisions: None,
            })
            .unwrap();
        let metrics = remote.metrics_text().unwrap();
        let gc_ran = metrics
            .lines()
            .any(|l| l.starts_with("nokv_background_runs_total{task=\"gc\",outcome=\"ok\"}"));
        if gc_ran
            && dry["deleted"].as_array().unwrap().is_empty()
            && dry["waiting"].as_array().unwrap().is_empty()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "background GC did not collect the removed revision: {dry}\n{metrics}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(remote.fsck().unwrap()["clean"], true);
    srv.shutdown().unwrap();
}
