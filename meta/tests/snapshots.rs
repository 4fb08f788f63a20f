//! Leased snapshots, history holds, the persisted lease clock and the change feed over a real
//! holt store (docs/metadata-format.md, "Snapshot Lifecycle And History Holds", ReadChanges).

use std::path::Path;

#[path = "fixtures/engine.rs"]
mod engine;

use meta::codec::SnapshotState;
use meta::ids::{AliasName, OperationId, SnapshotId};
use meta::ops::changes::{read_changes, ChangeCursor, ChangeScope};
use meta::ops::snapshot::{
    self as snap, CreateSnapshotRequest, RenewSnapshotRequest, RetireSnapshotRequest,
    SnapshotPolicy, SnapshotSelector, SnapshotStatus,
};
use meta::{
    normalize, ArtifactRevisionId, ChangeKind, Error, ManifestRow, MetaShard, PathCondition,
    PublishRequest, RequestId,
};

const T0: u64 = 1_700_000_000_000;
const DAY: u64 = 86_400_000;

fn policy() -> SnapshotPolicy {
    SnapshotPolicy {
        skew_grace_ms: 100,
        history_retention_versions: 0,
    }
}

fn open(dir: &Path) -> MetaShard {
    engine::open(dir)
}

fn digest(tag: &str) -> String {
    use sha2::Digest;
    format!(
        "sha256:{}",
        sha2::Sha256::digest(tag.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

/// Publishes `size` bytes at `path` (create when `expected` is None, else replace).
fn put(shard: &MetaShard, wb: &str, path: &str, size: u64, expected: Option<u64>) -> u64 {
    let rev = ArtifactRevisionId::random().unwrap();
    let req = PublishRequest {
        request_id: RequestId::random().unwrap(),
        workbench_id: wb.to_owned(),
        path: normalize(path).unwrap(),
        condition: match expected {
            None => PathCondition::Create,
            Some(g) => PathCondition::Replace {
                expected_generation: g,
            },
        },
        revision_id: rev,
        logical_size: size,
        body_digest_uri: digest(&format!("body-{path}-{size}")),
        content_type: "text/plain; charset=utf-8".into(),
        producer: "test".into(),
        manifest_id: None,
        manifest: vec![ManifestRow {
            object_index: 0,
            physical_owner_revision: rev,
            physical_object_index: 0,
            object_key: format!("k/{rev}/0"),
            logical_offset: 0,
            object_offset: 0,
            length: size,
            digest_uri: digest(&format!("{rev}")),
            append_segment: None,
        }],
        dependency_depth: 0,
        index_fields: Default::default(),
    };
    shard.publish(req).expect("publish").generation
}

fn mint(shard: &MetaShard, wb: &str, alias: Option<&str>, ttl: u64, wall: u64) -> SnapshotId {
    snap::create(
        shard,
        &CreateSnapshotRequest {
            request_id: RequestId::random().unwrap(),
            workbench_id: wb.into(),
            alias: alias.map(|a| AliasName::new(a).unwrap()),
            ttl_ms: ttl,
            annotation: br#"{"metadata":{},"reason":null}"#.to_vec(),
            require_commit_head: false,
        },
        wall,
        &policy(),
    )
    .expect("create snapshot")
    .snapshot_id
}

fn renew(
    shard: &MetaShard,
    wb: &str,
    sel: SnapshotSelector,
    ttl: u64,
    wall: u64,
) -> meta::Result<u64> {
    snap::renew(
        shard,
        &RenewSnapshotRequest {
            request_id: RequestId::random().unwrap(),
            workbench_id: wb.into(),
            selector: sel,
            ttl_ms: ttl,
        },
        wall,
        &policy(),
    )
    .map(|r| r.record.lease_deadline_unix_ms)
}

fn retire(shard: &MetaShard, wb: &str, sel: SnapshotSelector) -> meta::Result<bool> {
    snap::retire(
        shard,
        &RetireSnapshotRequest {
            request_id: RequestId::random().unwrap(),
            workbench_id: wb.into(),
            selector: sel,
            annotation: None,
        },
        T0,
        &policy(),
    )
    .map(|r| r.changed)
}

fn open_err(shard: &MetaShard, s: SnapshotId, wall: u64) -> Error {
    match snap::open_at(shard, "wb", &id(s), wall, &policy()) {
        Ok(_) => panic!("snapshot {s:?} is still readable"),
        Err(e) => e,
    }
}

fn id(s: SnapshotId) -> SnapshotSelector {
    SnapshotSelector::Id(s)
}

#[test]
fn snapshot_read_of_replaced_path_returns_old_generation() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    let g1 = put(&shard, "wb", "outputs/a.txt", 10, None);
    let s = mint(&shard, "wb", Some("before"), DAY, T0);
    let g2 = put(&shard, "wb", "outputs/a.txt", 20, Some(g1));
    put(&shard, "wb", "outputs/b.txt", 5, None);
    assert!(g2 > g1);

    let (info, reader) = snap::open_at(&shard, "wb", &id(s), T0 + 1, &policy()).unwrap();
    assert_eq!(info.status, SnapshotStatus::Alive);
    let ws = reader.visible_workspace("wb").unwrap();
    let old = reader
        .path_entry(&ws.incarnation, &normalize("outputs/a.txt").unwrap())
        .unwrap()
        .unwrap();
    assert_eq!((old.generation, old.logical_size), (g1, 10));
    assert!(reader
        .path_entry(&ws.incarnation, &normalize("outputs/b.txt").unwrap())
        .unwrap()
        .is_none());
    // By name too.
    let (by_name, _) = snap::open_at(
        &shard,
        "wb",
        &SnapshotSelector::Name(AliasName::new("before").unwrap()),
        T0 + 1,
        &policy(),
    )
    .unwrap();
    assert_eq!(by_name.snapshot_id, s);
    // The live state moved on.
    let live = shard.read();
    let now = live
        .path_entry(&ws.incarnation, &normalize("outputs/a.txt").unwrap())
        .unwrap()
        .unwrap();
    assert_eq!((now.generation, now.logical_size), (g2, 20));
}

#[test]
fn reap_after_skew_grace_expires_reads_and_renewal() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    put(&shard, "wb", "a", 1, None);
    let s = mint(&shard, "wb", None, 1_000, T0);
    // Past the deadline but inside the grace: expired, not reaped; reads refuse, renew revives.
    let r = snap::reap(&shard, T0 + 1_050, &policy()).unwrap();
    assert!(r.claimed.is_empty());
    let err = open_err(&shard, s, T0 + 1_050);
    assert!(
        matches!(
            err,
            Error::SnapshotExpired {
                status: "expired",
                ..
            }
        ),
        "{err:?}"
    );
    let revived = renew(&shard, "wb", id(s), 1_000, T0 + 1_060).unwrap();
    assert_eq!(revived, T0 + 2_060);
    assert!(snap::open_at(&shard, "wb", &id(s), T0 + 1_070, &policy()).is_ok());
    // Past deadline + grace: the reaper claims it and releases the hold.
    let r = snap::reap(&shard, T0 + 2_160, &policy()).unwrap();
    assert_eq!(r.claimed, vec![("wb".to_string(), s)]);
    assert_eq!(r.finalized, 1);
    assert_eq!(snap::min_hold_version(&shard).unwrap(), None);
    let err = open_err(&shard, s, T0 + 2_200);
    assert!(
        matches!(
            err,
            Error::SnapshotExpired {
                status: "reaped",
                ..
            }
        ),
        "{err:?}"
    );
    let err = renew(&shard, "wb", id(s), DAY, T0 + 2_200).unwrap_err();
    assert!(matches!(err, Error::SnapshotExpired { .. }), "{err:?}");
    let listed = snap::list(&shard, "wb", T0 + 2_200, &policy()).unwrap();
    assert_eq!(listed[0].status, SnapshotStatus::Reaped);
    assert_eq!(listed[0].record.state, SnapshotState::Reaped);
}

#[test]
fn clock_going_backwards_does_not_reap_early() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    let s = mint(&shard, "wb", None, 1_000, T0);
    // An owner observed T0+1_050 (inside deadline + grace): persisted high-water.
    assert!(snap::reap(&shard, T0 + 1_050, &policy())
        .unwrap()
        .claimed
        .is_empty());
    // The wall clock jumps back: nothing is reaped, the regression is reported.
    let r = snap::reap(&shard, T0 + 500, &policy()).unwrap();
    assert!(r.clock_regressed && r.claimed.is_empty());
    // Deadline + grace passed and time caught up with the high-water, but not high-water +
    // grace yet: still nothing.
    let r = snap::reap(&shard, T0 + 1_100, &policy()).unwrap();
    assert!(!r.clock_regressed && r.claimed.is_empty());
    // Reopen (a new owner) keeps the persisted clock.
    drop(shard);
    let shard = open(dir.path());
    assert!(snap::reap(&shard, T0 + 1_149, &policy())
        .unwrap()
        .claimed
        .is_empty());
    let r = snap::reap(&shard, T0 + 1_150, &policy()).unwrap();
    assert_eq!(r.claimed, vec![("wb".to_string(), s)]);
    // The lease clock never ran backwards for deadline arithmetic either.
    let reading = meta::ops::lease_clock::observe(&shard, T0, 100).unwrap();
    assert_eq!(reading.now_unix_ms(), T0 + 1_150);
}

#[test]
fn alias_remint_resolves_to_latest_and_never_falls_back() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    let first = mint(&shard, "wb", Some("nightly"), DAY, T0);
    put(&shard, "wb", "x", 3, None);
    let second = mint(&shard, "wb", Some("nightly"), DAY, T0);
    assert_ne!(first, second);
    let name = SnapshotSelector::Name(AliasName::new("nightly").unwrap());
    let latest = snap::get(&shard, "wb", &name, T0, &policy()).unwrap();
    assert_eq!(latest.snapshot_id, second);
    assert_eq!(latest.alias_generation, Some(2));
    // The older mint stays addressable by id and reads its own state.
    let old = snap::get(&shard, "wb", &id(first), T0, &policy()).unwrap();
    assert!(!old.alias_current);
    assert_eq!(old.status, SnapshotStatus::Alive);
    // Retiring the latest does not move the name back to the older mint.
    assert!(retire(&shard, "wb", name.clone()).unwrap());
    let after = snap::get(&shard, "wb", &name, T0, &policy()).unwrap();
    assert_eq!(after.snapshot_id, second);
    assert_eq!(after.status, SnapshotStatus::Retired);
    // An exact retry of the retirement changes nothing.
    assert!(!retire(&shard, "wb", name).unwrap());
}

#[test]
fn retire_and_reap_with_live_consumer_are_fork_retention_active() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    let s = mint(&shard, "wb", None, 1_000, T0);
    let op = OperationId([9; 16]);
    let attached = snap::attach_consumer(&shard, "wb", s, op, T0 + 1, &policy()).unwrap();
    assert_eq!(attached.record.consumer_count, 1);
    assert_eq!(attached.record.consumer_epoch, 1);
    let err = retire(&shard, "wb", id(s)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ForkRetentionActive {
                consumer_count: 1,
                ..
            }
        ),
        "{err:?}"
    );
    // The reaper skips it even far past the deadline.
    let r = snap::reap(&shard, T0 + 10 * DAY, &policy()).unwrap();
    assert!(r.claimed.is_empty());
    assert_eq!(r.skipped_with_consumers, 1);
    let released = snap::release_consumer(&shard, "wb", s, op, T0 + 10 * DAY, &policy()).unwrap();
    assert_eq!(released.record.consumer_count, 0);
    assert_eq!(released.record.consumer_epoch, 2);
    assert!(retire(&shard, "wb", id(s)).unwrap());
}

#[test]
fn history_floor_never_passes_an_active_hold() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    let g = put(&shard, "wb", "a", 1, None);
    let s1 = mint(&shard, "wb", None, DAY, T0);
    let r1 = snap::get(&shard, "wb", &id(s1), T0, &policy())
        .unwrap()
        .record
        .read_version;
    let mut g2 = g;
    for i in 0..5 {
        g2 = put(&shard, "wb", "a", 2 + i, Some(g2));
    }
    let s2 = mint(&shard, "wb", None, DAY, T0);
    for i in 0..5 {
        g2 = put(&shard, "wb", "a", 10 + i, Some(g2));
    }
    let floor = snap::maintain_history_floor(&shard, &policy()).unwrap();
    assert_eq!(floor, r1, "floor stops exactly at the oldest hold");
    assert!(shard.read_at(r1).is_ok());
    assert!(retire(&shard, "wb", id(s1)).unwrap());
    let r2 = snap::get(&shard, "wb", &id(s2), T0, &policy())
        .unwrap()
        .record
        .read_version;
    let floor = snap::maintain_history_floor(&shard, &policy()).unwrap();
    assert_eq!(floor, r2);
    assert!(matches!(
        shard.read_at(r1),
        Err(Error::Storage(holt::Error::HistoryPruned { .. }))
    ));
    let (_, reader) = snap::open_at(&shard, "wb", &id(s2), T0, &policy()).unwrap();
    let ws = reader.visible_workspace("wb").unwrap();
    assert_eq!(
        reader
            .path_entry(&ws.incarnation, &normalize("a").unwrap())
            .unwrap()
            .unwrap()
            .logical_size,
        6
    );
    assert!(retire(&shard, "wb", id(s2)).unwrap());
    let tip = engine::version(&shard);
    assert_eq!(
        snap::maintain_history_floor(&shard, &policy()).unwrap(),
        tip
    );
}

#[test]
fn renew_is_extend_only() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    let s = mint(&shard, "wb", None, 10 * DAY, T0);
    let err = renew(&shard, "wb", id(s), DAY, T0).unwrap_err();
    assert!(matches!(err, Error::SnapshotLifecycle { .. }), "{err:?}");
    assert_eq!(
        renew(&shard, "wb", id(s), 20 * DAY, T0).unwrap(),
        T0 + 20 * DAY
    );
    assert!(retire(&shard, "wb", id(s)).unwrap());
    assert!(matches!(
        renew(&shard, "wb", id(s), 30 * DAY, T0),
        Err(Error::SnapshotLifecycle { .. })
    ));
    assert!(matches!(
        renew(&shard, "wb", id(SnapshotId(u64::MAX)), DAY, T0),
        Err(Error::SnapshotNotFound)
    ));
}

fn drain(
    shard: &MetaShard,
    scope: &ChangeScope,
    mut after: Option<ChangeCursor>,
    page: usize,
) -> (Vec<(u64, u32, ChangeKind)>, Option<ChangeCursor>) {
    let mut out = Vec::new();
    loop {
        let p = read_changes(shard, scope, after, page).unwrap();
        out.extend(
            p.events
                .iter()
                .map(|e| (e.commit_version, e.event_sequence, e.event.kind)),
        );
        after = p.next;
        if !p.more {
            return (out, after);
        }
    }
}

#[test]
fn change_feed_resumes_from_cursor_without_gaps_or_duplicates_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    shard.create_workspace("other").unwrap();
    let mut g = put(&shard, "wb", "a", 1, None);
    for i in 0..6 {
        g = put(&shard, "wb", "a", 2 + i, Some(g));
        put(&shard, "other", &format!("f{i}"), 1, None);
    }
    let s = mint(&shard, "wb", None, DAY, T0);
    let (all, _) = drain(&shard, &ChangeScope::Root, None, 1000);
    assert_eq!(all.len(), 2 + 7 + 6 + 1);
    assert!(all.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)));
    assert_eq!(all.last().unwrap().2, ChangeKind::SnapshotCreated);

    // Read in pages of 3, stop half way, reopen, resume from the opaque cursor.
    let scope = ChangeScope::Root;
    let first = read_changes(&shard, &scope, None, 3).unwrap();
    let second = read_changes(&shard, &scope, first.next, 3).unwrap();
    let cursor = second.next.unwrap().encode(&shard.root_id(), &scope);
    let mut seen: Vec<_> = first
        .events
        .iter()
        .chain(&second.events)
        .map(|e| (e.commit_version, e.event_sequence, e.event.kind))
        .collect();
    drop(shard);
    let shard = open(dir.path());
    put(&shard, "wb", "late", 1, None);
    let resumed = ChangeCursor::decode(&cursor, &shard.root_id(), &scope).unwrap();
    let (rest, _) = drain(&shard, &scope, Some(resumed), 4);
    seen.extend(rest);
    assert_eq!(seen.len(), all.len() + 1);
    assert_eq!(&seen[..all.len()], &all[..]);
    assert!(seen.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)));

    // Workbench scope filters; a version-only cursor excludes the whole commit.
    let (wb_only, _) = drain(&shard, &ChangeScope::Workbench("wb".into()), None, 2);
    assert_eq!(wb_only.len(), 1 + 7 + 1 + 1);
    let snap_version = s.get();
    let (after_snap, _) = drain(
        &shard,
        &scope,
        Some(ChangeCursor {
            commit_version: snap_version,
            event_sequence: None,
        }),
        10,
    );
    assert_eq!(after_snap.len(), 1);
    // A cursor from the future fails closed.
    assert!(matches!(
        read_changes(
            &shard,
            &scope,
            Some(ChangeCursor {
                commit_version: engine::version(&shard) + 5,
                event_sequence: None,
            }),
            10
        ),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn lease_clock_observations_survive_reopen_and_outbox_verification() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    meta::ops::lease_clock::observe(&shard, T0, 100).unwrap();
    meta::ops::lease_clock::observe(&shard, T0 - 10, 100).unwrap();
    let before = shard.verify_recovery_outbox().unwrap().records;
    // Observing the same high-water again writes nothing.
    meta::ops::lease_clock::observe(&shard, T0, 100).unwrap();
    assert_eq!(shard.verify_recovery_outbox().unwrap().records, before);
    drop(shard);
    let shard = open(dir.path());
    let r = meta::ops::lease_clock::observe(&shard, T0 - 5, 100).unwrap();
    assert_eq!(r.clock.high_water_unix_ms, T0);
    assert_eq!(r.clock.reap_not_before_unix_ms, T0 + 100);
    assert!(r.regressed());
}

#[test]
fn snapshot_event_and_result_codecs_have_golden_bytes_and_reject_unknown_kinds() {
    use meta::codec::{ChangeEvent, CommandResult, SnapshotRef};
    let e = ChangeEvent {
        workbench_id: "w".into(),
        incarnation: meta::WorkspaceIncarnationId([1; 16]),
        kind: ChangeKind::SnapshotCreated,
        path: None,
        before_generation: None,
        after_generation: Some(5),
        moved_from: None,
    };
    let b = e.encode();
    let mut expected = vec![0, 2, 0, 0, 0, 1, b'w'];
    expected.extend_from_slice(&[1; 16]);
    expected.extend_from_slice(&[16, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5]);
    assert_eq!(b, expected);
    assert_eq!(ChangeEvent::decode(&b).unwrap(), e);
    for (kind, tag) in [
        (ChangeKind::SnapshotRenewed, 17u8),
        (ChangeKind::SnapshotRetired, 18),
        (ChangeKind::SnapshotReaped, 19),
    ] {
        assert_eq!(kind.to_u8(), tag);
        assert_eq!(ChangeKind::from_u8(tag).unwrap(), kind);
    }
    let mut unknown = b.clone();
    unknown[7 + 16] = 0xee;
    assert!(ChangeEvent::decode(&unknown).is_err());

    let record = SnapshotRef {
        read_version: 9,
        alias: None,
        lease_deadline_unix_ms: 10,
        state: SnapshotState::Active,
        consumer_count: 0,
        consumer_epoch: 0,
        annotation: b"{}".to_vec(),
        retire_annotation: None,
    };
    let r = CommandResult::SnapshotLifecycle {
        snapshot_id: SnapshotId(10),
        snapshot: record.clone(),
    };
    let bytes = r.encode();
    let mut expected = vec![16, 0, 0, 0, 0, 0, 0, 0, 10];
    let inner = record.encode();
    expected.extend_from_slice(&(inner.len() as u32).to_be_bytes());
    expected.extend_from_slice(&inner);
    assert_eq!(bytes, expected);
    assert_eq!(CommandResult::decode(&bytes).unwrap(), r);
    let mut unknown = bytes;
    unknown[0] = 0xee;
    assert!(CommandResult::decode(&unknown).is_err());
}

#[test]
fn concurrent_renew_and_reap_have_one_winner_and_keep_invariants() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    let ids: Vec<SnapshotId> = (0..8)
        .map(|i| mint(&shard, "wb", Some(&format!("s{i}")), 1_000, T0))
        .collect();
    let late = T0 + 5_000;
    std::thread::scope(|scope| {
        let reaper = scope.spawn(|| {
            for _ in 0..4 {
                snap::reap(&shard, late, &policy()).unwrap();
            }
        });
        let renewer = scope.spawn(|| {
            ids.iter()
                .map(|s| renew(&shard, "wb", id(*s), DAY, late))
                .collect::<Vec<_>>()
        });
        reaper.join().unwrap();
        let outcomes = renewer.join().unwrap();
        for (s, outcome) in ids.iter().zip(outcomes) {
            let state = snap::get(&shard, "wb", &id(*s), late, &policy())
                .unwrap()
                .status;
            match outcome {
                Ok(deadline) => {
                    assert_eq!(deadline, late + DAY);
                    assert_eq!(state, SnapshotStatus::Alive, "renewed {s:?} must survive");
                }
                Err(Error::SnapshotExpired { .. }) => assert_eq!(state, SnapshotStatus::Reaped),
                Err(e) => panic!("unexpected renew error {e:?}"),
            }
        }
    });
    assert_eq!(
        snap::check_invariants(&shard).unwrap(),
        Vec::<String>::new()
    );
}

#[test]
fn invariants_hold_across_the_whole_lifecycle() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("wb").unwrap();
    let a = mint(&shard, "wb", Some("n"), 1_000, T0);
    let b = mint(&shard, "wb", Some("n"), DAY, T0);
    let op = OperationId([4; 16]);
    snap::attach_consumer(&shard, "wb", b, op, T0, &policy()).unwrap();
    assert_eq!(
        snap::check_invariants(&shard).unwrap(),
        Vec::<String>::new()
    );
    snap::reap(&shard, T0 + 2_000, &policy()).unwrap();
    snap::release_consumer(&shard, "wb", b, op, T0 + 2_000, &policy()).unwrap();
    assert!(retire(&shard, "wb", id(b)).unwrap());
    assert_eq!(
        snap::get(&shard, "wb", &id(a), T0, &policy())
            .unwrap()
            .status,
        SnapshotStatus::Reaped
    );
    snap::maintain_history_floor(&shard, &policy()).unwrap();
    assert_eq!(
        snap::check_invariants(&shard).unwrap(),
        Vec::<String>::new()
    );
}
