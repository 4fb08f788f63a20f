//! The main job: the reference research workflow on the real Palmer penguins data.

use std::sync::Arc;

use nokv::snapshot::{ManualClock, DAY_MS};
use nokv::workbench::Workbench;
use nokv_commands::demo::{CommitOutcome, RestoreOutcome, TagOutcome};
use nokv_tests::{fresh_store, ok};
use serde_json::{json, Value};

fn expected() -> Vec<(&'static str, u64, f64, f64)> {
    vec![
        ("Adelie", 151, 3700.66, 189.95),
        ("Chinstrap", 68, 3733.09, 195.82),
        ("Gentoo", 123, 5076.02, 217.19),
    ]
}

#[test]
fn demo_computes_the_published_penguin_summaries() {
    let (_tmp, client) = fresh_store();
    let mut out = Vec::new();
    let report = nokv_commands::demo::run_demo(&client, &mut out).expect("demo runs");
    let printed = String::from_utf8(out).unwrap();
    for ((species, count, mass, flipper), run) in expected().into_iter().zip(&report.runs) {
        assert_eq!(run.species, species);
        assert_eq!(run.count, count);
        assert_eq!(run.mean_body_mass_g, mass);
        assert_eq!(run.mean_flipper_length_mm, flipper);
        assert!(
            printed.contains(&format!("{mass:.2}")),
            "table lacks {mass}: {printed}"
        );
    }
    // The summary reads back as one structured json_object record.
    let wb = Workbench::new(client.clone());
    let read = ok(wb.call(
        "workbench_read",
        &json!({"id":"run-gentoo","section":"outputs","path":"summary.json"}),
    ));
    assert_eq!(read["record_type"], "json_object");
    assert_eq!(read["record_count"], 1);
    assert_eq!(
        read["items"][0]["value"],
        json!({"species":"Gentoo","count":123,"mean_body_mass_g":5076.02,"mean_flipper_length_mm":217.19})
    );
    // Declared outputs, log and params were all collected; the input was copied in.
    for path in [
        "logs/run.log",
        "metadata/params.json",
        "input/penguins.csv",
        "scripts/summarize.sh",
    ] {
        client
            .stat("run-gentoo", path)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    let log = client.read_all("run-gentoo", "logs/run.log").unwrap();
    assert!(!log.is_empty());
    let input = client.read_all("run-adelie", "input/penguins.csv").unwrap();
    assert_eq!(input, nokv_commands::demo::PENGUINS_CSV);
}

/// Ids of every commit of a report: the input commit first, then the runs in species order.
fn commit_ids(report: &nokv_commands::demo::DemoReport) -> Vec<String> {
    std::iter::once(&report.lifecycle.input_commit)
        .chain(&report.lifecycle.run_commits)
        .map(|c| c.commit_id.clone())
        .collect()
}

#[test]
fn demo_commits_input_and_runs_with_lineage_tags_snapshots_restores_and_finds() {
    let (_tmp, client) = fresh_store();
    let mut out = Vec::new();
    let report = nokv_commands::demo::run_demo(&client, &mut out).expect("demo runs");
    let printed = String::from_utf8(out).unwrap();
    let life = &report.lifecycle;

    // Input commit, tagged; every run commit names it as its (recorded) parent.
    let input = &life.input_commit;
    assert_eq!(input.workbench_id, "penguins");
    assert_eq!(input.outcome, CommitOutcome::Created);
    assert!(input.parents.is_empty());
    assert_eq!(life.tag, TagOutcome::Created);
    let tag = client.get_tag("penguins", "penguins-v1").unwrap().unwrap();
    assert_eq!(tag.commit_id.to_hex(), input.commit_id);
    assert_eq!(
        client.commit_head("penguins").unwrap().unwrap().commit_id,
        input.commit_id
    );
    assert_eq!(life.run_commits.len(), 3);
    for (commit, species) in life.run_commits.iter().zip(nokv_commands::demo::SPECIES) {
        assert_eq!(
            commit.workbench_id,
            format!("run-{}", species.to_ascii_lowercase())
        );
        assert_eq!(commit.outcome, CommitOutcome::Created);
        assert_eq!(commit.parents, std::slice::from_ref(&input.commit_id));
        let recorded = client.commit_info(&commit.commit_id).unwrap().unwrap();
        assert_eq!(recorded.parents, std::slice::from_ref(&input.commit_id));
        assert_eq!(recorded.state, "sealed");
        assert!(
            printed.contains(&format!(
                "commit {:<20} {}  parent {}  (new)",
                commit.workbench_id,
                &commit.commit_id[..12],
                &input.commit_id[..12]
            )),
            "{printed}"
        );
    }
    // Consumers of the input commit: its head, the tag and the three child commits.
    let input_info = client.commit_info(&input.commit_id).unwrap().unwrap();
    assert_eq!(input_info.consumer_count, 5);

    // The named snapshot of run-gentoo is alive and was restored.
    assert!(!life.snapshot_reused);
    let snap = client
        .snapshot(
            "run-gentoo",
            &nokv::snapshot::name_selector("gentoo-baseline").unwrap(),
        )
        .unwrap();
    assert_eq!(snap.snapshot_id.get(), life.snapshot_id);
    assert_eq!(snap.status.as_str(), "alive");
    match &life.restore {
        RestoreOutcome::Restored {
            objects_before,
            objects_after,
        } => assert_eq!(
            *objects_after,
            objects_before + 1,
            "only restore_manifest.json is written"
        ),
        other => panic!("expected a fresh restore, got {other:?}"),
    }
    // Five demo files plus metadata/run_manifest.json of the commit.
    assert_eq!(life.restored_paths, Some(6));
    let source = client
        .read_all("run-gentoo", "outputs/summary.json")
        .unwrap();
    let restored = client
        .read_all("run-gentoo-restored", "outputs/summary.json")
        .unwrap();
    assert_eq!(restored, source);
    assert_eq!(life.restored_summary, source);
    assert!(
        printed.contains(
            "read run-gentoo-restored/outputs/summary.json: Gentoo mean_body_mass_g 5076.02, \
             92 bytes, identical to run-gentoo's"
        ),
        "{printed}"
    );
    let manifest: Value = serde_json::from_slice(
        &client
            .read_all("run-gentoo-restored", "metadata/restore_manifest.json")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["restored_from"]["source"],
        json!({"kind": "snapshot", "snapshot_id": life.snapshot_id})
    );

    // find over the committed runs: exactly the three runs, identities verified.
    let found: Vec<(&str, &str)> = life
        .found_runs
        .iter()
        .map(|(id, species, _)| (id.as_str(), species.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            ("run-adelie", "Adelie"),
            ("run-chinstrap", "Chinstrap"),
            ("run-gentoo", "Gentoo")
        ]
    );
    for ((_, _, commit), run) in life.found_runs.iter().zip(&life.run_commits) {
        assert_eq!(commit, &run.commit_id);
    }
    assert!(
        printed.contains("workbench_find {\"committed\":true"),
        "{printed}"
    );
    assert_eq!(
        printed.matches("  true\n").count(),
        3,
        "three verified rows: {printed}"
    );
    assert!(
        printed.contains("4 commits created, 0 replayed"),
        "{printed}"
    );
}

#[test]
fn demo_runs_again_on_the_same_store_and_reuses_its_workbenches() {
    let (tmp, client) = fresh_store();
    let mut first_out = Vec::new();
    let first = nokv_commands::demo::run_demo(&client, &mut first_out).unwrap();
    assert!(first.published > 0);
    let input_head = client.commit_head("penguins").unwrap().unwrap();
    drop(client);
    let client = nokv::Client::open(tmp.path().join("store")).unwrap();
    let mut out = Vec::new();
    let second = nokv_commands::demo::run_demo(&client, &mut out).unwrap();
    let printed = String::from_utf8(out).unwrap();
    assert_eq!(second.published, 0, "identical re-run republishes nothing");
    assert_eq!(
        first.runs, second.runs,
        "same summaries and same generations"
    );
    assert!(
        printed.contains("0 artifacts published in this run"),
        "{printed}"
    );

    // Commits replay: same ids, same manifest generations, nothing new sealed.
    let (a, b) = (&first.lifecycle, &second.lifecycle);
    assert_eq!(commit_ids(&first), commit_ids(&second));
    for (x, y) in std::iter::once((&a.input_commit, &b.input_commit))
        .chain(a.run_commits.iter().zip(&b.run_commits))
    {
        assert_eq!(y.outcome, CommitOutcome::Replayed);
        assert_eq!(x.manifest_generation, y.manifest_generation);
        assert_eq!(x.parents, y.parents);
    }
    assert_eq!(
        client.commit_head("penguins").unwrap().unwrap(),
        input_head,
        "the head and its consumer count are unchanged"
    );
    assert!(
        printed.contains("0 commits created, 4 replayed (idempotent_replay)"),
        "{printed}"
    );
    assert_eq!(
        printed.matches("(idempotent replay").count(),
        4,
        "{printed}"
    );

    // The tag stays, the snapshot is reused by name, the restore replays exactly.
    assert_eq!(b.tag, TagOutcome::Unchanged);
    assert!(printed.contains("tag penguins-v1 unchanged"), "{printed}");
    assert!(b.snapshot_reused);
    assert_eq!(a.snapshot_id, b.snapshot_id);
    assert_eq!(a.snapshot_read_version, b.snapshot_read_version);
    assert_eq!(b.restore, RestoreOutcome::Replayed);
    assert!(
        printed.contains("already restored: exact replay of the completed restore"),
        "{printed}"
    );
    assert_eq!(b.restored_summary, b.source_summary);
    assert_eq!(a.restored_summary, b.restored_summary);
    assert_eq!(a.found_runs, b.found_runs);
}

#[test]
fn demo_after_the_snapshot_lease_ran_out_mints_a_new_snapshot_and_skips_the_restore() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let clock = ManualClock::new(1_700_000_000_000);
    let open = || {
        nokv::Client::open_with(
            &store,
            nokv::ClientOptions {
                clock: Arc::new(clock.clone()),
                ..Default::default()
            },
        )
        .unwrap()
    };
    let client = open();
    let first = nokv_commands::demo::run_demo(&client, &mut Vec::new()).unwrap();
    drop(client);
    // Past the 7-day lease and the reaper's skew grace: the snapshot is no longer alive.
    clock.advance(8 * DAY_MS);
    let client = open();
    let mut out = Vec::new();
    let second = nokv_commands::demo::run_demo(&client, &mut out).expect("a re-run never fails");
    let printed = String::from_utf8(out).unwrap();
    let (a, b) = (&first.lifecycle, &second.lifecycle);
    assert!(!b.snapshot_reused);
    assert_ne!(a.snapshot_id, b.snapshot_id, "a new snapshot was minted");
    let named = client
        .snapshot(
            "run-gentoo",
            &nokv::snapshot::name_selector("gentoo-baseline").unwrap(),
        )
        .unwrap();
    assert_eq!(named.snapshot_id.get(), b.snapshot_id, "latest mint wins");
    match &b.restore {
        RestoreOutcome::Skipped { reason } => assert!(
            reason.contains(&format!("restored earlier from snapshot {}", a.snapshot_id)),
            "{reason}"
        ),
        other => panic!("expected a skipped restore, got {other:?}"),
    }
    assert!(
        printed.contains("-> run-gentoo-restored: skipped: run-gentoo-restored already exists"),
        "{printed}"
    );
    // The destination made by the first run is untouched and still matches its source.
    assert_eq!(b.restored_summary, a.restored_summary);
    assert_eq!(b.restored_summary, b.source_summary);
    assert_eq!(commit_ids(&first), commit_ids(&second));
    assert_eq!(second.published, 0);
}

#[test]
fn demo_leaves_a_destination_it_did_not_restore_alone_and_still_succeeds() {
    let (_tmp, client) = fresh_store();
    client.create_workbench("run-gentoo-restored").unwrap();
    let mut out = Vec::new();
    let report = nokv_commands::demo::run_demo(&client, &mut out)
        .expect("an occupied destination is no error");
    let printed = String::from_utf8(out).unwrap();
    match &report.lifecycle.restore {
        RestoreOutcome::Skipped { reason } => {
            assert!(reason.contains("was not made by a restore"), "{reason}")
        }
        other => panic!("expected a skipped restore, got {other:?}"),
    }
    assert!(
        printed.contains("read run-gentoo-restored/outputs/summary.json: not readable"),
        "{printed}"
    );
    assert!(report.lifecycle.restored_summary.is_empty());
    // The workbench the user made is untouched: still empty.
    assert!(matches!(
        client.stat("run-gentoo-restored", "outputs/summary.json"),
        Err(nokv::Error::NotFound { .. })
    ));
    assert_eq!(report.lifecycle.commits_created(), 4);
}

#[test]
fn demo_removes_sandboxes_left_by_a_killed_run_and_leaves_none_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let client = nokv::Client::open(dir.path()).unwrap();
    // What a demo killed mid-run leaves: a sandbox with materialized inputs.
    let leftover = dir.path().join("demo-sandboxes/sandbox-killed");
    std::fs::create_dir_all(leftover.join("input")).unwrap();
    std::fs::write(leftover.join("input/penguins.csv"), b"partial").unwrap();
    let mut out = Vec::new();
    nokv_commands::demo::run_demo(&client, &mut out).expect("demo runs");
    let remaining: Vec<_> = std::fs::read_dir(dir.path().join("demo-sandboxes"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(remaining.is_empty(), "sandboxes left: {remaining:?}");
}
