//! Acceptance (issue 7): restoring a 10,000-file workbench copies zero object bytes and makes all
//! 10,000 paths visible in one final transition; nothing is visible before it.

mod restore_support;

use nokv::restore::{FaultPoint, RestoreOptions};
use nokv::workbench::Workbench;
use nokv_tests::{err, fresh_store, ok};
use restore_support::*;
use serde_json::json;

const FILES: usize = 10_000;
const PUBLISHED: usize = 40;

#[test]
fn restore_of_ten_thousand_files_copies_no_object_bytes_and_publishes_in_one_transition() {
    let (_dir, client) = fresh_store();
    source_with_files(&client, "src", PUBLISHED);
    fan_out(&client, "src", FILES - PUBLISHED);
    let src_inc = marker(&client, "src").unwrap().incarnation;
    assert_eq!(path_rows(&client, &src_inc), FILES);
    let snap = snapshot(&client, "src");
    let req = from_snapshot("src", "dst", snap);
    let wb = Workbench::new(client.clone());
    let search_before = ok(wb.call("workbench_search", &json!({"limit": 1})));
    let objects_before = object_count(&client);

    // Mid-way: every member is staged, the final command has not run.
    let started = std::time::Instant::now();
    client
        .restore_with(
            &req,
            &RestoreOptions {
                interrupt_after: Some(FaultPoint::AfterReady),
            },
        )
        .expect_err("interrupted before the final command");
    let op = client.restore_operation("dst").unwrap().unwrap();
    assert_eq!(op.member_count, FILES as u64);
    assert_eq!(path_rows(&client, &op.destination_incarnation), FILES + 1);
    err(wb.call("workbench_list", &json!({"id": "dst"})), "NotFound");
    err(
        wb.call(
            "workbench_stat",
            &json!({"id": "dst", "section": "input", "path": "bulk"}),
        ),
        "NotFound",
    );
    err(
        wb.call("workbench_search", &json!({"id": "dst"})),
        "NotFound",
    );
    let search_mid = ok(wb.call("workbench_search", &json!({"limit": 1})));
    assert_eq!(search_mid["match_count"], search_before["match_count"]);

    let receipt = client.restore(&req).expect("final command");
    eprintln!(
        "restore of {FILES} files (debug build, incl. the interrupted run): {:?}",
        started.elapsed()
    );
    assert_eq!(receipt.member_count, FILES as u64);
    // Zero source bytes copied: the only new object is the restore manifest's block.
    assert_eq!(object_count(&client), objects_before + 1);

    // One transition: invisible at the version before the final command, complete at it.
    let cv = receipt.commit_version;
    assert!(client
        .meta()
        .read_at(cv - 1)
        .unwrap()
        .visible_workspace("dst")
        .is_err());
    let at = client.meta().read_at(cv).unwrap();
    let ws = at.visible_workspace("dst").unwrap();
    let (files, more) = at
        .scan_files(&ws.incarnation, None, None, FILES + 10)
        .unwrap();
    assert!(!more);
    assert_eq!(files.len(), FILES + 1);
    let events = client.meta().read().changes(None, 100_000).unwrap();
    assert_eq!(
        events
            .iter()
            .filter(|(_, _, e)| e.workbench_id == "dst")
            .count(),
        1
    );
    // Every destination path shares its source revision.
    let src = client.meta().read();
    for (path, entry) in files.iter().take(500) {
        if path.as_str() == "metadata/restore_manifest.json" {
            continue;
        }
        let s = src.path_entry(&src_inc, path).unwrap().unwrap();
        assert_eq!(s.artifact_revision_id, entry.artifact_revision_id);
    }
    ok(wb.call(
        "workbench_stat",
        &json!({"id": "dst", "section": "input", "path": "bulk"}),
    ));
    let found = ok(wb.call("workbench_search", &json!({"id": "dst", "limit": 1})));
    assert_eq!(found["match_count"], FILES + 1);
    assert_reference_counts_match_rows(&client);
}
