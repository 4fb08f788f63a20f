//! Leased snapshots through the Workbench facade (docs/workbench.md `workbench_snapshot*` and
//! `at_snapshot`; docs/metadata-format.md "Snapshot Lifecycle And History Holds"), with an injected clock.

use std::path::Path;
use std::sync::Arc;

use meta::codec::workbench_commit_head::{WorkbenchCommitHead, WorkbenchCommitHeadKey};
use meta::codec::CommandResult;
use meta::command::Mutation;
use meta::ids::CommitId;
use meta::schema::Family;
use nokv::snapshot::{ManualClock, SnapshotPolicy, WallClock};
use nokv::workbench::Workbench;
use nokv::{Client, ClientOptions};
use nokv_tests::{err, ok};
use serde_json::{json, Value};

const T0: u64 = 1_700_000_000_000;
const DAY: u64 = 86_400_000;
const GRACE: u64 = 1_000;

fn open(dir: &Path, clock: &ManualClock) -> Workbench {
    let client = Client::open_with(
        dir,
        ClientOptions {
            snapshot_policy: SnapshotPolicy {
                skew_grace_ms: GRACE,
                history_retention_versions: 0,
            },
            clock: Arc::new(clock.clone()),
            ..Default::default()
        },
    )
    .expect("open store");
    Workbench::new(client)
}

/// Makes `id` a committed workbench: the real `workbench_commit` when this build has it, else a
/// WorkbenchCommitHead row written through a raw metadata command.
fn commit(wb: &Workbench, id: &str) {
    let r = wb.call(
        "workbench_commit",
        &json!({
            "id": id,
            "manifest": {"model": "viking"},
            "content_digest_uri": format!("sha256:{}", "01".repeat(32)),
        }),
    );
    if r["status"] == "success" {
        return;
    }
    let meta = wb.client().meta();
    let read = meta.read();
    let ws = read.visible_workspace(id).unwrap();
    let v = read.version();
    let mut cmd = meta.command_header(
        meta::RequestId::random().unwrap(),
        [7; 32],
        v,
        CommandResult::Applied { value: 1 },
    );
    cmd.mutations = vec![Mutation::put(
        Family::WorkbenchCommitHead,
        WorkbenchCommitHeadKey {
            root: meta.root_id(),
            incarnation: ws.incarnation,
        }
        .encode(),
        WorkbenchCommitHead {
            commit_id: CommitId([7; 32]),
            head_generation: 1,
        }
        .encode(),
    )];
    meta.execute(cmd).expect("write commit head");
}

fn put(wb: &Workbench, path: &str, text: &str, replace: bool) -> Value {
    ok(wb.call(
        "workbench_put_file",
        &json!({"id": "wb", "section": "outputs", "path": path, "text": text, "replace": replace}),
    ))
}

fn setup() -> (tempfile::TempDir, ManualClock, Workbench) {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let wb = open(&tmp.path().join("store"), &clock);
    ok(wb.call("workbench_create", &json!({"id": "wb"})));
    (tmp, clock, wb)
}

#[test]
fn only_a_committed_workbench_can_be_snapshotted() {
    let (_t, _c, wb) = setup();
    let e = err(
        wb.call("workbench_snapshot", &json!({"id": "wb"})),
        "InvalidState",
    );
    assert_eq!(e["details"]["conflict"], "SnapshotLifecycle");
    err(
        wb.call("workbench_snapshot", &json!({"id": "nope"})),
        "NotFound",
    );
}

#[test]
fn snapshot_read_of_replaced_path_returns_old_bytes_and_generation_until_reaped() {
    let (_t, clock, wb) = setup();
    let first = put(&wb, "r.txt", "old body\n", false);
    commit(&wb, "wb");
    let s = ok(wb.call(
        "workbench_snapshot",
        &json!({"id": "wb", "name": "before", "reason": "pre-replace", "ttl_days": 1}),
    ));
    assert_eq!(s["state"], "alive");
    assert_eq!(s["name"], "before");
    assert_eq!(s["ttl_days"], 1);
    assert_eq!(s["lease_expires_unix_ms"], T0 + DAY);
    assert_eq!(s["lease_expires_at"], "2023-11-15T22:13:20.000Z");
    assert_eq!(
        s["annotation"],
        json!({"reason": "pre-replace", "metadata": {}})
    );
    assert!(s.get("expiry_warning").is_none());
    let sid = s["snapshot_id"].as_u64().unwrap();
    let second = put(&wb, "r.txt", "new body, longer\n", true);
    put(&wb, "later.txt", "x", false);
    assert_ne!(first["generation"], second["generation"]);

    for sel in [json!(sid), json!("before")] {
        let r = ok(wb.call(
            "workbench_read",
            &json!({"id": "wb", "section": "outputs", "path": "r.txt", "at_snapshot": sel}),
        ));
        assert_eq!(r["generation"], first["generation"]);
        assert_eq!(r["items"], json!([{"index": 0, "value": "old body"}]));
        assert_eq!(r["at_snapshot"], sel);
        let st = ok(wb.call(
            "workbench_stat",
            &json!({"id": "wb", "section": "outputs", "path": "r.txt", "at_snapshot": sel}),
        ));
        assert_eq!(st["card"]["generation"], first["generation"]);
        assert_eq!(st["card"]["size_bytes"], 9);
        let l = ok(wb.call(
            "workbench_list",
            &json!({"id": "wb", "section": "outputs", "at_snapshot": sel}),
        ));
        let names: Vec<&str> = l["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["r.txt"]);
    }
    // Live state has the new body.
    let live = ok(wb.call(
        "workbench_read",
        &json!({"id": "wb", "section": "outputs", "path": "r.txt"}),
    ));
    assert_eq!(live["generation"], second["generation"]);

    // Past deadline + skew grace the reaper claims it: reads and renewals are SnapshotExpired.
    clock.set(T0 + DAY + GRACE);
    wb.client().reap_snapshots().unwrap();
    let read_args = json!({"id": "wb", "section": "outputs", "path": "r.txt", "at_snapshot": sid});
    let e = err(wb.call("workbench_read", &read_args), "SnapshotExpired");
    assert_eq!(e["details"]["state"], "reaped");
    err(
        wb.call(
            "workbench_stat",
            &json!({"id": "wb", "at_snapshot": "before"}),
        ),
        "SnapshotExpired",
    );
    err(
        wb.call(
            "workbench_snapshot_renew",
            &json!({"id": "wb", "snapshot_id": sid}),
        ),
        "SnapshotExpired",
    );
    let listed = ok(wb.call("workbench_snapshot_list", &json!({"id": "wb"})));
    assert_eq!(listed["snapshot_count"], 1);
    assert_eq!(listed["snapshots"][0]["state"], "reaped");
}

#[test]
fn snapshot_cursor_pages_stay_at_the_snapshot_read_version() {
    let (_t, _c, wb) = setup();
    for i in 0..5 {
        put(&wb, &format!("f{i}"), "x", false);
    }
    commit(&wb, "wb");
    let sid = ok(wb.call("workbench_snapshot", &json!({"id": "wb"})))["snapshot_id"].clone();
    let page = ok(wb.call(
        "workbench_list",
        &json!({"id": "wb", "section": "outputs", "at_snapshot": sid, "limit": 2}),
    ));
    put(&wb, "f0a", "y", false);
    let next = ok(wb.call(
        "workbench_list",
        &json!({"id": "wb", "section": "outputs", "at_snapshot": sid, "limit": 10,
                "cursor": page["next_cursor"]}),
    ));
    let names: Vec<&str> = next["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["f2", "f3", "f4"]);
    // The snapshot cursor does not continue a live listing.
    err(
        wb.call(
            "workbench_list",
            &json!({"id": "wb", "section": "outputs", "cursor": page["next_cursor"]}),
        ),
        "InvalidArguments",
    );
}

#[test]
fn default_ttl_mint_warns_and_renew_is_extend_only() {
    let (_t, clock, wb) = setup();
    commit(&wb, "wb");
    let s = ok(wb.call("workbench_snapshot", &json!({"id": "wb", "name": "n"})));
    assert_eq!(s["ttl_days"], 7);
    assert!(s["expiry_warning"].as_str().unwrap().contains("7-day"));
    let e = err(
        wb.call(
            "workbench_snapshot_renew",
            &json!({"id": "wb", "name": "n", "ttl_days": 1}),
        ),
        "InvalidState",
    );
    assert_eq!(e["details"]["conflict"], "SnapshotLifecycle");
    clock.advance(DAY);
    let r = ok(wb.call(
        "workbench_snapshot_renew",
        &json!({"id": "wb", "name": "n", "ttl_days": 30}),
    ));
    assert_eq!(r["renewed"], true);
    assert_eq!(r["lease_expires_unix_ms"], T0 + DAY + 30 * DAY);
    err(
        wb.call("workbench_snapshot_renew", &json!({"id": "wb"})),
        "InvalidArguments",
    );
    err(
        wb.call(
            "workbench_snapshot_renew",
            &json!({"id": "wb", "name": "missing"}),
        ),
        "SnapshotNotFound",
    );
}

#[test]
fn alias_remint_resolves_to_the_latest_snapshot() {
    let (_t, _c, wb) = setup();
    put(&wb, "a.txt", "one", false);
    commit(&wb, "wb");
    let first = ok(wb.call(
        "workbench_snapshot",
        &json!({"id": "wb", "name": "nightly"}),
    ));
    let g = put(&wb, "a.txt", "two", true)["generation"].clone();
    let second = ok(wb.call(
        "workbench_snapshot",
        &json!({"id": "wb", "name": "nightly"}),
    ));
    assert_ne!(first["snapshot_id"], second["snapshot_id"]);
    let r = ok(wb.call(
        "workbench_read",
        &json!({"id": "wb", "section": "outputs", "path": "a.txt", "at_snapshot": "nightly"}),
    ));
    assert_eq!(r["generation"], g);
    // The first mint stays readable by id.
    let r = ok(wb.call(
        "workbench_read",
        &json!({"id": "wb", "section": "outputs", "path": "a.txt",
                "at_snapshot": first["snapshot_id"]}),
    ));
    assert_eq!(r["items"][0]["value"], "one");
    let list = ok(wb.call("workbench_snapshot_list", &json!({"id": "wb"})));
    assert_eq!(list["snapshot_count"], 2);
}

#[test]
fn retire_reports_first_success_then_false_and_refuses_live_consumers() {
    let (_t, clock, wb) = setup();
    commit(&wb, "wb");
    let s = ok(wb.call("workbench_snapshot", &json!({"id": "wb", "name": "keep"})));
    let sid = s["snapshot_id"].as_u64().unwrap();
    let op = meta::ids::OperationId([3; 16]);
    let meta = wb.client().meta();
    let policy = *wb.client().snapshot_policy();
    meta::ops::snapshot::attach_consumer(
        meta,
        "wb",
        meta::ids::SnapshotId(sid),
        op,
        clock.now_unix_ms(),
        &policy,
    )
    .unwrap();
    err(
        wb.call(
            "workbench_snapshot_retire",
            &json!({"id": "wb", "name": "keep"}),
        ),
        "ForkRetentionActive",
    );
    meta::ops::snapshot::release_consumer(
        meta,
        "wb",
        meta::ids::SnapshotId(sid),
        op,
        clock.now_unix_ms(),
        &policy,
    )
    .unwrap();
    let r = ok(wb.call(
        "workbench_snapshot_retire",
        &json!({"id": "wb", "snapshot_id": sid, "reason": "done"}),
    ));
    assert_eq!(r["retired"], true);
    assert_eq!(r["state"], "retired");
    assert_eq!(r["name"], "keep");
    assert_eq!(
        r["retire_annotation"],
        json!({"metadata": null, "reason": "done"})
    );
    let again = ok(wb.call(
        "workbench_snapshot_retire",
        &json!({"id": "wb", "snapshot_id": sid}),
    ));
    assert_eq!(again["retired"], false);
    // A retry keeps (and returns) the first retirement's annotation, with or without a reason.
    assert_eq!(again["retire_annotation"], r["retire_annotation"]);
    let other = ok(wb.call(
        "workbench_snapshot_retire",
        &json!({"id": "wb", "snapshot_id": sid, "reason": "another"}),
    ));
    assert_eq!(other["retired"], false);
    assert_eq!(other["retire_annotation"], r["retire_annotation"]);
    err(
        wb.call("workbench_stat", &json!({"id": "wb", "at_snapshot": sid})),
        "SnapshotExpired",
    );
}

#[test]
fn background_reaper_claims_expired_snapshots_and_reopen_runs_it_too() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let clock = ManualClock::new(T0);
    let wb = open(&store, &clock);
    ok(wb.call("workbench_create", &json!({"id": "wb"})));
    commit(&wb, "wb");
    let a = ok(wb.call("workbench_snapshot", &json!({"id": "wb", "ttl_days": 1})));
    let b = ok(wb.call("workbench_snapshot", &json!({"id": "wb", "ttl_days": 3})));
    clock.set(T0 + DAY + GRACE);
    let reaper = wb
        .client()
        .start_reaper(std::time::Duration::from_millis(20));
    let state = |wb: &Workbench, s: &Value| -> String {
        let list = ok(wb.call("workbench_snapshot_list", &json!({"id": "wb"})));
        list["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["snapshot_id"] == s["snapshot_id"])
            .unwrap()["state"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Bounded wait for the timer thread (a condition, not a timing assertion).
    let mut reaped = false;
    for _ in 0..500 {
        if state(&wb, &a) == "reaped" {
            reaped = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    reaper.stop();
    assert!(reaped, "the background reaper claimed the expired snapshot");
    assert_eq!(state(&wb, &b), "alive");
    drop(wb);
    // A later open reaps the second one once its lease has passed.
    clock.set(T0 + 3 * DAY + GRACE);
    let wb = open(&store, &clock);
    assert_eq!(state(&wb, &b), "reaped");
}

#[test]
fn restore_from_a_snapshot_releases_its_consumer_and_keeps_invariants() {
    let (_t, _clock, wb) = setup();
    put(&wb, "a.txt", "frozen", false);
    commit(&wb, "wb");
    let s = ok(wb.call("workbench_snapshot", &json!({"id": "wb", "name": "src"})));
    put(&wb, "a.txt", "moved on", true);
    let r = ok(wb.call(
        "workbench_restore",
        &json!({"id": "wb", "destination_id": "wb-restored", "at_snapshot": "src"}),
    ));
    assert_eq!(r["snapshot_id"], s["snapshot_id"]);
    let restored = ok(wb.call(
        "workbench_read",
        &json!({"id": "wb-restored", "section": "outputs", "path": "a.txt"}),
    ));
    assert_eq!(restored["items"][0]["value"], "frozen");
    let meta = wb.client().meta();
    assert_eq!(
        meta::ops::snapshot::check_invariants(meta).unwrap(),
        Vec::<String>::new()
    );
    // The finished restore no longer consumes the snapshot: it can be retired.
    let retired = ok(wb.call(
        "workbench_snapshot_retire",
        &json!({"id": "wb", "name": "src"}),
    ));
    assert_eq!(retired["retired"], true);
    // The restored workbench appears in the change feed.
    let kinds: Vec<String> = wb
        .client()
        .workbench_changes("wb-restored", None)
        .unwrap()
        .map(|e| e.unwrap().kind)
        .collect();
    assert!(
        !kinds.is_empty(),
        "the restore's publication is a visible event"
    );
}
