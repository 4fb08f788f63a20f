//! Restore (docs/metadata-format.md, "Restore Closure"; docs/workbench.md `workbench_restore`): shared revisions,
//! zero copied object bytes, invisible staging, one final transition, exact replay, abort and
//! cleanup driven by RestoreMember rows, snapshot and commit sources.

mod restore_support;

use meta::codec::{RestorePhase, SnapshotState};
use meta::ops::snapshot::SnapshotSelector;
use nokv::restore::{FaultPoint, RestoreFailure, RestoreOptions};
use nokv::workbench::Workbench;
use nokv_tests::{err, fresh_store, ok};
use restore_support::*;
use serde_json::{json, Value};

#[test]
fn restore_from_snapshot_shares_revisions_and_writes_only_the_manifest_object() {
    let (_dir, client) = fresh_store();
    let files = source_with_files(&client, "src", 7);
    let snap = snapshot(&client, "src");
    // Replaced after the snapshot: the restore must see the frozen body.
    client
        .put(
            "src",
            &files[0].0,
            b"changed after the snapshot",
            &nokv::PutOptions {
                condition: nokv::WriteCondition::Replace {
                    expected_generation: None,
                },
                ..nokv::PutOptions::create("text/plain", "test")
            },
        )
        .unwrap();
    let objects_before = object_count(&client);
    let receipt = client
        .restore(&from_snapshot("src", "dst", snap))
        .expect("restore");
    assert!(!receipt.idempotent_replay);
    assert_eq!(receipt.member_count, 7);
    assert_eq!(receipt.snapshot_id, Some(snap));
    // Exactly one new object: the restore manifest's single block. No source byte was copied.
    assert_eq!(object_count(&client), objects_before + 1);
    let read = client.meta().read();
    let src_snap = client
        .snapshot_reader("src", &SnapshotSelector::Id(meta::ids::SnapshotId(snap)))
        .unwrap()
        .1;
    let src_inc = read.visible_workspace("src").unwrap().incarnation;
    let dst_inc = read.visible_workspace("dst").unwrap().incarnation;
    assert_ne!(src_inc, dst_inc);
    for (path, body) in &files {
        let p = norm(path);
        let restored = read
            .path_entry(&dst_inc, &p)
            .unwrap()
            .expect("restored path");
        let frozen = src_snap.path_entry(&src_inc, &p).unwrap().unwrap();
        assert_eq!(restored.artifact_revision_id, frozen.artifact_revision_id);
        assert_eq!(restored.generation, frozen.generation);
        assert_eq!(&client.read_all("dst", path).unwrap(), body);
    }
    assert_eq!(
        client.read_all("src", &files[0].0).unwrap(),
        b"changed after the snapshot"
    );
    // The restore manifest (v2 envelope).
    let manifest: Value = serde_json::from_slice(
        &client
            .read_all("dst", "metadata/restore_manifest.json")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["schema"], "nokv.workbench.restore_manifest.v2");
    assert_eq!(manifest["operation_id"], receipt.operation_id.as_str());
    assert_eq!(
        manifest["restored_from"]["source"],
        json!({"kind": "snapshot", "snapshot_id": snap})
    );
    assert_eq!(manifest["source_path"], "/agents/local/wb/src");
    assert_eq!(manifest["destination_path"], "/agents/local/wb/dst");
    assert_eq!(
        client
            .stat("dst", "metadata/restore_manifest.json")
            .unwrap()
            .generation,
        receipt.destination_generation
    );
    // The snapshot's consumer was released with the final command; no hold of the restore is
    // left (only the snapshot's own hold).
    let info = client
        .snapshot("src", &SnapshotSelector::Id(meta::ids::SnapshotId(snap)))
        .unwrap();
    assert_eq!(info.record.consumer_count, 0);
    assert_eq!(info.record.consumer_epoch, 2);
    assert_eq!(info.record.state, SnapshotState::Active);
    assert_eq!(hold_rows(&client), 1);
    assert!(assert_reference_counts_match_rows(&client) > 0);
}

#[test]
fn staging_destination_is_invisible_until_the_final_command() {
    let (_dir, client) = fresh_store();
    source_with_files(&client, "src", 5);
    let snap = snapshot(&client, "src");
    let wb = Workbench::new(client.clone());
    let before_search = ok(wb.call("workbench_search", &json!({})));
    let req = from_snapshot("src", "dst", snap);
    for point in [
        FaultPoint::AfterPreparing,
        FaultPoint::AfterCopying,
        FaultPoint::AfterSourceSealed,
        FaultPoint::AfterReady,
    ] {
        let e = client
            .restore_with(
                &req,
                &RestoreOptions {
                    interrupt_after: Some(point),
                },
            )
            .expect_err("interrupted");
        assert!(
            matches!(e, RestoreFailure::Interrupted(p) if p == point),
            "{e}"
        );
        // Every read surface treats the staging destination as absent.
        err(wb.call("workbench_list", &json!({"id": "dst"})), "NotFound");
        err(
            wb.call("workbench_stat", &json!({"id": "dst", "section": "input"})),
            "NotFound",
        );
        err(
            wb.call(
                "workbench_read",
                &json!({"id": "dst", "section": "metadata", "path": "restore_manifest.json"}),
            ),
            "NotFound",
        );
        err(
            wb.call("workbench_search", &json!({"id": "dst"})),
            "NotFound",
        );
        let root_search = ok(wb.call("workbench_search", &json!({})));
        assert_eq!(root_search["match_count"], before_search["match_count"]);
        // The name is reserved: it can be neither created nor published to.
        err(
            wb.call("workbench_create", &json!({"id": "dst"})),
            "AlreadyExists",
        );
        assert!(client.stat("dst", "input/d0/f0000.txt").is_err());
        assert_eq!(
            marker(&client, "dst").unwrap().state,
            meta::WorkspaceState::Staging
        );
    }
    let receipt = client.restore(&req).expect("resume");
    assert!(!receipt.idempotent_replay);
    ok(wb.call(
        "workbench_stat",
        &json!({"id": "dst", "section": "input", "path": "d0/f0000.txt"}),
    ));
    let listed = ok(wb.call("workbench_list", &json!({"id": "dst", "section": "input"})));
    assert_eq!(listed["entry_count"], 3);
    let found = ok(wb.call("workbench_search", &json!({"id": "dst"})));
    assert_eq!(found["match_count"], 6); // five files + the restore manifest
    assert_assert_one_restore_event(&client);
    assert_reference_counts_match_rows(&client);
}

fn assert_assert_one_restore_event(client: &nokv::Client) {
    let events = client.meta().read().changes(None, 10_000).unwrap();
    let dst: Vec<_> = events
        .iter()
        .filter(|(_, _, e)| e.workbench_id == "dst")
        .collect();
    assert_eq!(
        dst.len(),
        1,
        "staging emits nothing; the final command emits one event"
    );
    assert_eq!(dst[0].2.kind, meta::ChangeKind::WorkspaceCreated);
}

#[test]
fn exact_retry_returns_the_original_result_with_idempotent_replay() {
    let (_dir, client) = fresh_store();
    source_with_files(&client, "src", 3);
    let snap = snapshot(&client, "src");
    let wb = Workbench::new(client.clone());
    let call = json!({"id": "src", "destination_id": "dst", "at_snapshot": snap});
    let first = ok(wb.call("workbench_restore", &call));
    assert_eq!(first["state"], "complete");
    assert_eq!(first["idempotent_replay"], false);
    assert_eq!(first["cleanup_pending"], false);
    assert_eq!(first["snapshot_id"], snap);
    assert_eq!(first["commit_id"], Value::Null);
    assert_eq!(
        first["restore_manifest"],
        "/agents/local/wb/dst/metadata/restore_manifest.json"
    );
    assert_eq!(first["operation_id"].as_str().unwrap().len(), 32);
    let objects = object_count(&client);
    // Later writes to the destination do not change the replayed result.
    client
        .put(
            "dst",
            "outputs/later.txt",
            b"x",
            &nokv::PutOptions::create("text/plain", "t"),
        )
        .unwrap();
    let again = ok(wb.call("workbench_restore", &call));
    assert_eq!(again["idempotent_replay"], true);
    for k in ["operation_id", "destination_generation", "read_version"] {
        assert_eq!(again[k], first[k], "{k}");
    }
    assert_eq!(object_count(&client), objects + 1); // only outputs/later.txt
                                                    // A different request for the same destination is refused.
    let other = snapshot(&client, "src");
    err(
        wb.call(
            "workbench_restore",
            &json!({"id": "src", "destination_id": "dst", "at_snapshot": other}),
        ),
        "AlreadyExists",
    );
}

#[test]
fn invalid_restore_requests_are_refused_without_side_effects() {
    let (_dir, client) = fresh_store();
    source_with_files(&client, "src", 1);
    let snap = snapshot(&client, "src");
    client.create_workbench("taken").unwrap();
    let wb = Workbench::new(client.clone());
    let cases = [
        (
            json!({"id": "src", "destination_id": "src", "at_snapshot": snap}),
            "InvalidArguments",
        ),
        (
            json!({"id": "src", "destination_id": "d"}),
            "InvalidArguments",
        ),
        (
            json!({"id": "src", "destination_id": "d", "at_snapshot": snap, "at_commit": "ab".repeat(32)}),
            "InvalidArguments",
        ),
        (
            json!({"id": "nope", "destination_id": "d", "at_snapshot": snap}),
            "NotFound",
        ),
        (
            json!({"id": "src", "destination_id": "d", "at_snapshot": snap + 1}),
            "SnapshotNotFound",
        ),
        (
            json!({"id": "src", "destination_id": "d", "at_snapshot": "no-such-name"}),
            "SnapshotNotFound",
        ),
        (
            json!({"id": "src", "destination_id": "taken", "at_snapshot": snap}),
            "AlreadyExists",
        ),
        (
            json!({"id": "src", "destination_id": "d", "at_commit": "ab".repeat(32)}),
            "NotFound",
        ),
    ];
    let objects = object_count(&client);
    for (call, code) in cases {
        err(wb.call("workbench_restore", &call), code);
    }
    assert!(marker(&client, "d").is_none());
    assert_eq!(object_count(&client), objects);
}

#[test]
fn restore_by_snapshot_name_resolves_the_alias_once() {
    let (_dir, client) = fresh_store();
    source_with_files(&client, "src", 2);
    let info = client
        .create_snapshot(
            "src",
            &nokv::snapshot::SnapshotOptions {
                name: Some("before".into()),
                ..Default::default()
            },
        )
        .unwrap();
    let wb = Workbench::new(client.clone());
    let r = ok(wb.call(
        "workbench_restore",
        &json!({"id": "src", "destination_id": "dst", "at_snapshot": "before"}),
    ));
    assert_eq!(r["snapshot_id"], info.snapshot_id.get());
    assert_eq!(r["read_version"], info.record.read_version);
}

#[test]
fn abort_at_each_phase_boundary_cleans_up_and_the_same_request_then_completes() {
    for point in [
        FaultPoint::AfterPreparing,
        FaultPoint::AfterCopyBatch,
        FaultPoint::AfterCopying,
        FaultPoint::AfterSourceSealed,
        FaultPoint::AfterReady,
    ] {
        let (_dir, client) = fresh_store();
        // 200 files: several copy batches, so AfterCopyBatch fires before end-of-source.
        source_with_files(&client, "src", 200);
        let snap = snapshot(&client, "src");
        let req = from_snapshot("src", "dst", snap);
        client
            .restore_with(
                &req,
                &RestoreOptions {
                    interrupt_after: Some(point),
                },
            )
            .expect_err("interrupted");
        let op = client.restore_operation("dst").unwrap().expect("operation");
        assert!(path_rows(&client, &op.destination_incarnation) > 0);
        let aborted = client.abort_restore("dst").expect("abort");
        assert_eq!(aborted.phase, RestorePhase::Cleaned, "{point:?}");
        // Cleanup removed every staged row and released the source exactly once.
        assert_eq!(
            path_rows(&client, &op.destination_incarnation),
            0,
            "{point:?}"
        );
        assert_eq!(member_rows(&client, &op), 0);
        assert_eq!(
            marker(&client, "dst").unwrap().state,
            meta::WorkspaceState::Retired
        );
        let info = client
            .snapshot("src", &SnapshotSelector::Id(meta::ids::SnapshotId(snap)))
            .unwrap();
        assert_eq!(info.record.consumer_count, 0);
        assert_eq!(hold_rows(&client), 1);
        assert_reference_counts_match_rows(&client);
        assert_snapshot_invariants(&client);
        // Aborting again is a no-op.
        assert_eq!(
            client.abort_restore("dst").unwrap().phase,
            RestorePhase::Cleaned
        );
        // The same request now converges on a fresh incarnation.
        let receipt = client.restore(&req).expect("restore after abort");
        assert_eq!(receipt.member_count, 200);
        assert_ne!(receipt.operation_id, op.operation_id().to_hex());
        assert_eq!(client.list_snapshots("src").unwrap().len(), 1);
        assert_eq!(
            client
                .snapshot("src", &SnapshotSelector::Id(meta::ids::SnapshotId(snap)))
                .unwrap()
                .record
                .consumer_count,
            0
        );
        assert_reference_counts_match_rows(&client);
    }
}

#[test]
fn interrupted_restore_resumes_from_each_phase_boundary() {
    for point in FaultPoint::ALL {
        let (_dir, client) = fresh_store();
        source_with_files(&client, "src", 150);
        let snap = snapshot(&client, "src");
        let req = from_snapshot("src", "dst", snap);
        let objects = object_count(&client);
        client
            .restore_with(
                &req,
                &RestoreOptions {
                    interrupt_after: Some(point),
                },
            )
            .expect_err("interrupted");
        let receipt = client.restore(&req).expect("resume");
        // Interrupted after the final command: the retry replays the stored result.
        assert_eq!(
            receipt.idempotent_replay,
            point == FaultPoint::AfterComplete
        );
        assert_eq!(receipt.member_count, 150);
        assert_eq!(object_count(&client), objects + 1, "{point:?}");
        assert_eq!(hold_rows(&client), 1);
        assert_reference_counts_match_rows(&client);
        assert_snapshot_invariants(&client);
    }
}

#[test]
fn retiring_a_snapshot_consumed_by_a_restore_is_fork_retention_active() {
    let (_dir, client) = fresh_store();
    source_with_files(&client, "src", 4);
    let snap = snapshot(&client, "src");
    let req = from_snapshot("src", "dst", snap);
    client
        .restore_with(
            &req,
            &RestoreOptions {
                interrupt_after: Some(FaultPoint::AfterPreparing),
            },
        )
        .expect_err("interrupted");
    let wb = Workbench::new(client.clone());
    err(
        wb.call(
            "workbench_snapshot_retire",
            &json!({"id": "src", "snapshot_id": snap, "reason": "done"}),
        ),
        "ForkRetentionActive",
    );
    client.restore(&req).expect("finish");
    ok(wb.call(
        "workbench_snapshot_retire",
        &json!({"id": "src", "snapshot_id": snap, "reason": "done"}),
    ));
}

#[test]
fn restore_from_a_commit_leases_the_commit_and_releases_it() {
    let (_dir, client) = fresh_store();
    let files = source_with_files(&client, "src", 6);
    let committed = client
        .commit(&nokv::commit::CommitRequest {
            workbench_id: "src".into(),
            manifest: json!({"model": "m", "task": "t"}),
            content_digest_uri: format!("sha256:{}", "01".repeat(32)),
            replace: false,
            parents: Vec::new(),
        })
        .expect("commit");
    let before = client
        .commit_info(&committed.commit_identity)
        .unwrap()
        .expect("commit info");
    // Changed after the commit: the restore sees the committed tree.
    client
        .put(
            "src",
            "outputs/after.txt",
            b"after",
            &nokv::PutOptions::create("text/plain", "t"),
        )
        .unwrap();
    let wb = Workbench::new(client.clone());
    let objects = object_count(&client);
    let r = ok(wb.call(
        "workbench_restore",
        &json!({"id": "src", "destination_id": "dst", "at_commit": committed.commit_identity}),
    ));
    assert_eq!(r["commit_id"], committed.commit_identity.as_str());
    assert_eq!(r["snapshot_id"], Value::Null);
    assert_eq!(object_count(&client), objects + 1);
    for (path, body) in &files {
        assert_eq!(&client.read_all("dst", path).unwrap(), body);
    }
    assert!(client.stat("dst", "outputs/after.txt").is_err());
    // The committed run manifest travels with the tree.
    assert!(client.stat("dst", "metadata/run_manifest.json").is_ok());
    let manifest: Value = serde_json::from_slice(
        &client
            .read_all("dst", "metadata/restore_manifest.json")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["restored_from"]["source"],
        json!({"kind": "commit", "commit_id": committed.commit_identity})
    );
    // The Lease consumer was added and released: count back, epoch advanced by two.
    let after = client
        .commit_info(&committed.commit_identity)
        .unwrap()
        .unwrap();
    assert_eq!(after.consumer_count, before.consumer_count);
    assert_eq!(after.consumer_epoch, before.consumer_epoch + 2);
    assert_reference_counts_match_rows(&client);
    // Exact retry.
    let again = ok(wb.call(
        "workbench_restore",
        &json!({"id": "src", "destination_id": "dst", "at_commit": committed.commit_identity}),
    ));
    assert_eq!(again["idempotent_replay"], true);
    assert_eq!(again["operation_id"], r["operation_id"]);
}

#[test]
fn cli_restore_run_status_and_abort() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let snap = {
        let client = nokv::Client::open(&store).unwrap();
        source_with_files(&client, "src", 3);
        snapshot(&client, "src")
    };
    let run = |args: &[&str]| {
        let mut full = vec![
            "nokv".to_string(),
            "--store".into(),
            store.display().to_string(),
        ];
        full.extend(args.iter().map(|a| a.to_string()));
        nokv_cli::main_with_args(full.into_iter().map(std::ffi::OsString::from))
    };
    let snap_arg = snap.to_string();
    assert_eq!(
        run(&["restore", "run", "src", "dst", "--snapshot", &snap_arg]),
        std::process::ExitCode::from(0)
    );
    assert_eq!(
        run(&["restore", "status", "dst"]),
        std::process::ExitCode::from(0)
    );
    // Nothing to abort on a published destination: refused (InvalidState), it stays Complete
    // and visible.
    assert_eq!(
        run(&["restore", "abort", "dst"]),
        std::process::ExitCode::from(1)
    );
    assert_eq!(
        run(&["restore", "run", "src", "dst", "--snapshot", "999"]),
        std::process::ExitCode::from(1)
    );
    assert_eq!(
        run(&["restore", "status", "nobody"]),
        std::process::ExitCode::from(1)
    );
    let client = nokv::Client::open(&store).unwrap();
    assert_eq!(
        client.restore_operation("dst").unwrap().unwrap().phase,
        RestorePhase::Complete
    );
    assert!(client.stat("dst", "input/d0/f0000.txt").is_ok());
}

#[test]
fn concurrent_identical_restores_converge_on_one_operation() {
    let (_dir, client) = fresh_store();
    source_with_files(&client, "src", 120);
    let snap = snapshot(&client, "src");
    let req = from_snapshot("src", "dst", snap);
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let c = client.clone();
            let r = req.clone();
            std::thread::spawn(move || c.restore(&r).expect("restore"))
        })
        .collect();
    let receipts: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(receipts
        .iter()
        .all(|r| r.operation_id == receipts[0].operation_id && r.member_count == 120));
    assert_eq!(
        path_rows(&client, &marker(&client, "dst").unwrap().incarnation),
        121
    );
    assert_reference_counts_match_rows(&client);
    assert_snapshot_invariants(&client);
}

#[test]
fn restore_from_a_retired_snapshot_answers_like_a_read_at_it() {
    let (_dir, client) = fresh_store();
    source_with_files(&client, "src", 2);
    let snap = snapshot(&client, "src");
    let wb = Workbench::new(client.clone());
    ok(wb.call(
        "workbench_snapshot_retire",
        &json!({"id": "src", "snapshot_id": snap, "reason": "done"}),
    ));
    let read = err(
        wb.call(
            "workbench_read",
            &json!({"id": "src", "section": "input", "path": "d0/f0000.txt", "at_snapshot": snap}),
        ),
        "SnapshotExpired",
    );
    let restored = err(
        wb.call(
            "workbench_restore",
            &json!({"id": "src", "destination_id": "dst", "at_snapshot": snap}),
        ),
        "SnapshotExpired",
    );
    assert_eq!(restored["details"]["state"], "retired", "{restored:#}");
    assert_eq!(restored["details"]["state"], read["details"]["state"]);
    assert_eq!(restored["details"]["snapshot_id"], snap);
    assert_eq!(restored["retryable"], false);
    assert!(marker(&client, "dst").is_none());
}

#[test]
fn create_with_the_id_of_a_restored_workbench_is_already_exists() {
    let (_dir, client) = fresh_store();
    source_with_files(&client, "src", 1);
    let snap = snapshot(&client, "src");
    let wb = Workbench::new(client.clone());
    ok(wb.call(
        "workbench_restore",
        &json!({"id": "src", "destination_id": "dst", "at_snapshot": snap}),
    ));
    let e = err(
        wb.call("workbench_create", &json!({"id": "dst"})),
        "AlreadyExists",
    );
    assert!(e["details"]["path"].as_str().unwrap().ends_with("/dst"));
    assert_eq!(e["retryable"], false);
    // An exact retry of a real create is still a success.
    ok(wb.call("workbench_create", &json!({"id": "fresh"})));
    ok(wb.call("workbench_create", &json!({"id": "fresh"})));
    // The restored workbench is untouched.
    assert!(client.stat("dst", "metadata/restore_manifest.json").is_ok());
}

/// Runs the `nokv_cli` binary on `store`; returns (exit code, stdout as JSON).
fn cli_json(store: &std::path::Path, args: &[&str]) -> (i32, Value) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("NOKV_FAULT_POINT")
        .output()
        .expect("run nokv_cli");
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON value ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (out.status.code().unwrap_or(-1), json)
}

#[test]
fn cli_restore_status_and_abort_print_the_standard_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let snap = {
        let client = nokv::Client::open(&store).unwrap();
        source_with_files(&client, "src", 2);
        snapshot(&client, "src")
    };
    let (code, env) = cli_json(&store, &["restore", "status", "nobody"]);
    assert_eq!(code, 1, "{env:#}");
    assert_eq!(env["status"], "error");
    assert_eq!(env["code"], "NotFound");
    assert!(env["details"]["path"]
        .as_str()
        .unwrap()
        .ends_with("/nobody"));
    let (code, env) = cli_json(&store, &["restore", "abort", "nobody"]);
    assert_eq!(code, 1, "{env:#}");
    assert_eq!(env["code"], "NotFound");
    assert!(env.get("error").is_none());

    let snap_arg = snap.to_string();
    let (code, env) = cli_json(
        &store,
        &["restore", "run", "src", "dst", "--snapshot", &snap_arg],
    );
    assert_eq!(code, 0, "{env:#}");
    let (code, status) = cli_json(&store, &["restore", "status", "dst"]);
    assert_eq!(code, 0, "{status:#}");
    assert_eq!(status["status"], "success");
    assert_eq!(status["phase"], "Complete");
    let (code, env) = cli_json(&store, &["restore", "abort", "dst"]);
    assert_eq!(code, 1, "{env:#}");
    assert_eq!(env["status"], "error");
    assert_eq!(env["code"], "InvalidState");
    assert_eq!(env["retryable"], false);
    assert_eq!(
        env["message"],
        "the restore already completed; nothing to abort"
    );
    assert_eq!(env["details"]["operation_id"], status["operation_id"]);
    let client = nokv::Client::open(&store).unwrap();
    assert!(client.stat("dst", "input/d0/f0000.txt").is_ok());
}
