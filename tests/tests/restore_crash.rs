//! Process loss during restore (issue 7 acceptance): a child process is aborted at each phase
//! boundary (`NOKV_FAULT_POINT`, cargo feature `fault-points`); re-running the same request
//! converges to one terminal result with no visible staging workbench and reference counts that
//! match their RevisionRef rows.
//!
//! Runs in `cargo test --workspace` (test builds enable nokv/fault-points).

mod restore_support;

use std::process::Command;

use nokv::restore::FaultPoint;
use nokv::workbench::Workbench;
use nokv_tests::{err, ok};
use restore_support::*;
use serde_json::json;

fn crash_at(store: &std::path::Path, point: FaultPoint, kind: &str, id: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_restore_crasher"))
        .arg(store)
        .args(["src", "dst", kind, id])
        .env("NOKV_FAULT_POINT", point.as_str())
        .output()
        .expect("spawn restore_crasher");
    assert!(
        !out.status.success(),
        "the child should have died at {}: {}",
        point.as_str(),
        String::from_utf8_lossy(&out.stdout)
    );
}

fn converge(store: &std::path::Path, point: FaultPoint, kind: &str, id: &str, members: u64) {
    let client = nokv::Client::open(store).expect("reopen after process loss");
    let wb = Workbench::new(client.clone());
    if point != FaultPoint::AfterComplete {
        // Nothing of the staging destination is visible after the crash.
        err(wb.call("workbench_list", &json!({"id": "dst"})), "NotFound");
        err(
            wb.call("workbench_search", &json!({"id": "dst"})),
            "NotFound",
        );
    }
    let mut call = json!({"id": "src", "destination_id": "dst"});
    if kind == "snapshot" {
        call["at_snapshot"] = json!(id.parse::<u64>().unwrap());
    } else {
        call["at_commit"] = json!(id);
    }
    let first = ok(wb.call("workbench_restore", &call));
    assert_eq!(
        first["idempotent_replay"],
        point == FaultPoint::AfterComplete,
        "{}",
        point.as_str()
    );
    let again = ok(wb.call("workbench_restore", &call));
    assert_eq!(again["idempotent_replay"], true);
    assert_eq!(again["operation_id"], first["operation_id"]);
    let op = client.restore_operation("dst").unwrap().unwrap();
    assert_eq!(op.member_count, members);
    assert_eq!(
        op.operation_id().to_hex(),
        first["operation_id"].as_str().unwrap()
    );
    // One terminal result; the source attachment was released exactly once.
    assert_eq!(hold_rows(&client), usize::from(kind == "snapshot"));
    assert_reference_counts_match_rows(&client);
    // The child's fresh-incarnation draw happened once: the destination is that operation's.
    assert_eq!(
        marker(&client, "dst").unwrap().incarnation,
        op.destination_incarnation
    );
}

#[test]
fn snapshot_restore_killed_at_each_phase_boundary_converges_on_rerun() {
    for point in FaultPoint::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let snap = {
            let client = nokv::Client::open(&store).unwrap();
            source_with_files(&client, "src", 150);
            snapshot(&client, "src")
        };
        crash_at(&store, point, "snapshot", &snap.to_string());
        converge(&store, point, "snapshot", &snap.to_string(), 150);
    }
}

#[test]
fn commit_restore_killed_at_each_phase_boundary_converges_on_rerun() {
    for point in FaultPoint::ALL {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let (commit, members) = {
            let client = nokv::Client::open(&store).unwrap();
            source_with_files(&client, "src", 120);
            let r = client
                .commit(&nokv::commit::CommitRequest {
                    workbench_id: "src".into(),
                    manifest: json!({"run": 1}),
                    content_digest_uri: format!("sha256:{}", "02".repeat(32)),
                    replace: false,
                    parents: Vec::new(),
                })
                .unwrap();
            let info = client.commit_info(&r.commit_identity).unwrap().unwrap();
            (r.commit_identity, info.member_count)
        };
        crash_at(&store, point, "commit", &commit);
        converge(&store, point, "commit", &commit, members);
        let client = nokv::Client::open(&store).unwrap();
        let info = client.commit_info(&commit).unwrap().unwrap();
        // Head consumer only: the restore's lease was released exactly once.
        assert_eq!(info.consumer_count, 1, "{}", point.as_str());
    }
}
