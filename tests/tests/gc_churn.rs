//! The churn acceptance of issue 12: 100 paths each replaced 20 times, 1,000 appends to 10 logs
//! (with rematerialisations), 50 paths removed, 2 commits retired, a snapshot reaped and a
//! restore aborted — then one `gc`: the provider holds exactly the blocks of revisions something
//! still references (checked against an independent recomputation from raw rows), object bytes
//! are at most 1.1× the live bytes, every visible path still reads back, and fsck reports
//! nothing.

mod gc_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use gc_support::{
    assert_fsck_clean, body, create, provider_bytes, provider_keys, referenced_keys, replace,
};
use meta::ops::snapshot::SnapshotSelector;
use nokv::commit::CommitRequest;
use nokv::lifetime::{GcOptions, RemoveOptions};
use nokv::restore::{FaultPoint, RestoreFrom, RestoreOptions, RestoreRequest};
use nokv::snapshot::{ManualClock, SnapshotOptions, SnapshotPolicy, SnapshotStatus};
use nokv::{Client, ClientOptions};

const PATHS: usize = 100;
const REPLACES: usize = 20;
const LOGS: usize = 10;
const APPENDS: usize = 1000;
const REMOVED: usize = 50;

fn commit(client: &Client, wb: &str, n: u8) -> String {
    client
        .commit(&CommitRequest {
            workbench_id: wb.into(),
            manifest: serde_json::json!({"step": n}),
            content_digest_uri: format!("sha256:{}", format!("{n:02x}").repeat(32)),
            replace: true,
            parents: Vec::new(),
        })
        .expect("commit")
        .commit_identity
}

#[test]
fn churn_then_gc_leaves_exactly_the_referenced_blocks_and_a_clean_fsck() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let client = Client::open_with(
        tmp.path().join("store"),
        ClientOptions {
            clock: clock.clone(),
            snapshot_policy: SnapshotPolicy {
                skew_grace_ms: 0,
                history_retention_versions: 0,
            },
            ..ClientOptions::default()
        },
    )
    .unwrap();
    client.create_workbench("churn").unwrap();
    // The model of every visible body.
    let mut model: BTreeMap<(String, String), Vec<u8>> = BTreeMap::new();

    // 100 paths, each created then replaced 20 times.
    for round in 0..=REPLACES {
        for p in 0..PATHS {
            let path = format!("outputs/p{p:03}.bin");
            let bytes = body((round * PATHS + p) as u64, 600 + (p * 7 + round * 13) % 900);
            let opts = if round == 0 { create() } else { replace() };
            client.put("churn", &path, &bytes, &opts).unwrap();
            model.insert(("churn".into(), path), bytes);
        }
        if round == 10 {
            // A leased snapshot that will expire and be reaped; it holds round-10 bodies.
            client
                .create_snapshot(
                    "churn",
                    &SnapshotOptions {
                        ttl_ms: 60_000,
                        ..SnapshotOptions::default()
                    },
                )
                .unwrap();
        }
    }

    // 1,000 appends to 10 logs: every 9th append rematerialises (dependency depth > 8).
    let mut rematerialised = 0;
    for i in 0..APPENDS {
        let log = i % LOGS;
        let path = format!("logs/l{log}.log");
        let delta = format!("line {i} of log {log}\n").into_bytes();
        let r = client.append("churn", &path, &delta, None, "test").unwrap();
        if r.dependency_depth == 0 && r.size_bytes > delta.len() as u64 {
            rematerialised += 1;
        }
        model
            .entry(("churn".into(), path))
            .or_default()
            .extend_from_slice(&delta);
    }
    assert!(rematerialised >= 100, "{rematerialised} rematerialisations");

    // Two commits retired: each is committed, then replaced as the head, then retired.
    client.create_workbench("rel").unwrap();
    for step in 1..=3u8 {
        for f in 0..5 {
            let path = format!("outputs/r{f}.bin");
            let bytes = body(10_000 + u64::from(step) * 10 + f, 1500);
            let opts = if step == 1 { create() } else { replace() };
            client.put("rel", &path, &bytes, &opts).unwrap();
            model.insert(("rel".into(), path), bytes);
        }
        let id = commit(&client, "rel", step);
        if step > 1 {
            // The previous commit lost the head and has no tag or child: retire it.
            let previous = client
                .list_tags("rel")
                .unwrap()
                .into_iter()
                .find(|t| t.name == "prev")
                .map(|t| t.commit_id.to_hex());
            if let Some(prev) = previous {
                client
                    .delete_tag("rel", "prev", meta::ops::tag::TagCondition::Any)
                    .unwrap();
                client.retire_commit(&prev).unwrap();
            }
        }
        client
            .set_tag("rel", "prev", &id, meta::ops::tag::TagCondition::Any)
            .unwrap();
    }
    // The tag names the head; dropping it leaves the head as the only consumer.
    client
        .delete_tag("rel", "prev", meta::ops::tag::TagCondition::Any)
        .unwrap();

    // 50 paths removed.
    for p in 0..REMOVED {
        let path = format!("outputs/p{p:03}.bin");
        client
            .remove("churn", &path, &RemoveOptions::default())
            .unwrap();
        model.remove(&("churn".to_string(), path));
    }

    // A restore aborted after its first copy batch.
    let snap2 = client
        .create_snapshot("churn", &SnapshotOptions::default())
        .unwrap();
    let req = RestoreRequest {
        source_workbench_id: "churn".into(),
        destination_workbench_id: "aborted".into(),
        from: RestoreFrom::Snapshot(SnapshotSelector::Id(snap2.snapshot_id)),
    };
    assert!(client
        .restore_with(
            &req,
            &RestoreOptions {
                interrupt_after: Some(FaultPoint::AfterCopyBatch),
            },
        )
        .is_err());
    client.abort_restore("aborted").unwrap();
    client
        .retire_snapshot("churn", &SnapshotSelector::Id(snap2.snapshot_id))
        .unwrap();

    // The first snapshot expires and is reaped.
    clock.advance(120_000);
    let reaped = client.reap_snapshots().unwrap();
    assert_eq!(reaped.claimed.len(), 1, "{reaped:?}");
    let snaps = client.list_snapshots("churn").unwrap();
    assert!(snaps.iter().any(|s| s.status == SnapshotStatus::Reaped));

    let before = provider_bytes(&client);
    let report = client.gc(&GcOptions::default()).unwrap();
    assert!(
        report.quarantined.is_empty() && report.interrupted.is_empty(),
        "{report:?}"
    );
    assert!(
        report.waiting.is_empty(),
        "nothing holds history: {:?}",
        report.waiting
    );
    assert!(!report.collected.is_empty());

    // Exactly the referenced blocks remain (independent recomputation from raw rows).
    let held = provider_keys(&client);
    let expected = referenced_keys(&client);
    let extra: BTreeSet<_> = held.difference(&expected).collect();
    let missing: BTreeSet<_> = expected.difference(&held).collect();
    assert!(
        extra.is_empty(),
        "{} unreferenced objects remain",
        extra.len()
    );
    assert!(
        missing.is_empty(),
        "{} referenced objects are gone",
        missing.len()
    );

    // Object bytes ≤ 1.1 × live bytes (distinct visible revisions and the remaining commit).
    let mut live_revisions = BTreeMap::new();
    for (wb, path) in model.keys() {
        let e = client.stat(wb, path).unwrap();
        live_revisions.insert(e.artifact_revision_id, e.logical_size);
    }
    for wb in ["churn", "rel"] {
        if let Ok(e) = client.stat(wb, "metadata/run_manifest.json") {
            live_revisions.insert(e.artifact_revision_id, e.logical_size);
        }
    }
    let live: u64 = live_revisions.values().sum();
    let after = provider_bytes(&client);
    assert!(
        after * 10 <= live * 11,
        "object bytes {after} > 1.1 × live bytes {live} (before gc: {before})"
    );
    assert!(after < before);

    // Every visible body still reads back.
    for ((wb, path), bytes) in &model {
        assert_eq!(&client.read_all(wb, path).unwrap(), bytes, "{wb}/{path}");
    }
    assert_fsck_clean(&client);

    // A second pass finds nothing left to collect.
    let again = client.gc(&GcOptions::default()).unwrap();
    assert!(again.collected.is_empty(), "{again:?}");
}
