//! Workbench expiry (docs/metadata-format.md, "Workbench Expiry") over a real holt store with a
//! manual wall clock: the deadline and its codec, the store clock (`max(wall, persisted
//! high-water)`), `Visible -> Expired` recorded by the first writer, no resurrection by a clock
//! set back, and the GC sweep that removes an expired workbench's paths so GC collects their
//! bodies.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use meta::codec::{workspace_current, RevisionState, WorkspaceCurrent, WorkspaceState};
use meta::ops::expiry::{set_expiry, ExpirySetting};
use meta::ops::gc::{self, GcOptions};
use meta::ops::lease_clock::{self, ManualClock, WallClock};
use meta::store::{Snapshot, TxnStore};
use meta::{
    normalize, ArtifactRevisionId, Error, ManifestRow, MetaShard, OpenOptions, PathCondition,
    PublishRequest, RequestId,
};

/// 2026-12-06T00:00:00Z.
const T0: u64 = 1_796_515_200_000;
const HOUR: u64 = 3_600_000;

#[path = "fixtures/gc_provider.rs"]
mod gc_provider;

use gc_provider::{zero_retention, Provider};

fn open(dir: &Path, clock: &ManualClock) -> MetaShard {
    let shard = MetaShard::open(dir, OpenOptions::default()).expect("open");
    shard.set_wall_clock(Arc::new(clock.clone()));
    shard
}

fn setup() -> (tempfile::TempDir, MetaShard, ManualClock, Provider) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let shard = open(dir.path(), &clock);
    shard.create_workspace("w").unwrap();
    (dir, shard, clock, Provider::default())
}

/// One GC pass with `opts` and no retention window.
fn gc_pass(shard: &MetaShard, p: &mut Provider, opts: &GcOptions) -> gc::GcReport {
    gc::run_pass(shard, &zero_retention(), opts, p, &mut |_| {}).unwrap()
}

/// Publishes a one-block body at `path` of `wb` (create) and records its object.
fn put(
    shard: &MetaShard,
    p: &mut Provider,
    wb: &str,
    path: &str,
) -> meta::Result<ArtifactRevisionId> {
    let rev = ArtifactRevisionId::random().unwrap();
    let key = format!(
        "nokv/artifacts/{}/{}/{}/blocks/{:016x}",
        shard.logical_shard_id(),
        shard.root_id(),
        rev,
        0
    );
    let digest = format!("sha256:{}", "ab".repeat(32));
    shard.publish(PublishRequest {
        request_id: RequestId::random().unwrap(),
        workbench_id: wb.into(),
        path: normalize(path).unwrap(),
        condition: PathCondition::Create,
        revision_id: rev,
        logical_size: 10,
        body_digest_uri: digest.clone(),
        content_type: "application/octet-stream".into(),
        producer: "expiry-test".into(),
        manifest_id: None,
        manifest: vec![ManifestRow {
            object_index: 0,
            physical_owner_revision: rev,
            physical_object_index: 0,
            object_key: key.clone(),
            logical_offset: 0,
            object_offset: 0,
            length: 10,
            digest_uri: digest,
            append_segment: None,
        }],
        dependency_depth: 0,
        index_fields: Default::default(),
    })?;
    p.objects.insert(key);
    Ok(rev)
}

fn marker(shard: &MetaShard, wb: &str) -> (Vec<u8>, WorkspaceCurrent) {
    let bytes = shard
        .store()
        .snapshot()
        .get(
            meta::schema::Family::WorkspaceCurrent,
            &workspace_current::key(&shard.root_id(), wb),
        )
        .unwrap()
        .expect("marker");
    let ws = WorkspaceCurrent::decode(&bytes).unwrap();
    (bytes, ws)
}

fn listed(shard: &MetaShard) -> Vec<String> {
    meta::ops::find::find_page(shard, None, None, 100)
        .unwrap()
        .candidates
        .into_iter()
        .map(|c| c.workbench_id)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

fn not_found<T: std::fmt::Debug>(r: meta::Result<T>) -> bool {
    matches!(r, Err(Error::WorkspaceNotFound { .. }))
}

#[test]
fn a_deadline_is_recorded_as_version_3_and_hides_the_workbench_once_passed() {
    let (_d, shard, clock, _p) = setup();
    shard.create_workspace("other").unwrap();
    let r = set_expiry(&shard, "w", ExpirySetting::At(T0 + HOUR), 0).unwrap();
    assert_eq!(r.expires_at_unix_ms, Some(T0 + HOUR));
    assert!(!r.expired);
    assert!(r.commit_version.is_some());
    let (bytes, ws) = marker(&shard, "w");
    assert_eq!(bytes[..2], [0, 3], "a marker with a deadline is version 3");
    assert_eq!(ws.state, WorkspaceState::Visible);
    assert!(shard.read().visible_workspace("w").is_ok());
    assert_eq!(listed(&shard), vec!["other".to_owned(), "w".to_owned()]);
    // The same deadline again writes nothing.
    let again = set_expiry(&shard, "w", ExpirySetting::At(T0 + HOUR), 0).unwrap();
    assert_eq!(again.commit_version, None);

    clock.set(T0 + HOUR);
    assert!(not_found(shard.read().visible_workspace("w")));
    assert_eq!(
        shard.read().workspace_expired_at("w").unwrap(),
        Some(T0 + HOUR)
    );
    assert_eq!(listed(&shard), vec!["other".to_owned()]);
    assert_eq!(shard.read().workspace_expired_at("other").unwrap(), None);
    // Nothing was recorded by reading: the marker is still Visible.
    assert_eq!(marker(&shard, "w").1.state, WorkspaceState::Visible);
}

#[test]
fn never_removes_the_deadline_and_gives_back_version_2_bytes() {
    let (_d, shard, clock, _p) = setup();
    let (before, _) = marker(&shard, "w");
    set_expiry(&shard, "w", ExpirySetting::At(T0 + HOUR), 0).unwrap();
    let r = set_expiry(&shard, "w", ExpirySetting::Never, 0).unwrap();
    assert_eq!(r.previous_expires_at_unix_ms, Some(T0 + HOUR));
    assert_eq!(r.expires_at_unix_ms, None);
    let (after, ws) = marker(&shard, "w");
    assert_eq!(after[..2], [0, 2]);
    assert_eq!(
        ws.incarnation,
        WorkspaceCurrent::decode(&before).unwrap().incarnation
    );
    clock.set(T0 + 1_000 * HOUR);
    assert!(shard.read().visible_workspace("w").is_ok());
}

#[test]
fn a_past_deadline_expires_at_once_and_the_name_is_never_reused() {
    let (_d, shard, _clock, mut p) = setup();
    let r = set_expiry(&shard, "w", ExpirySetting::At(T0 - 1), 0).unwrap();
    assert!(r.expired);
    assert_eq!(marker(&shard, "w").1.state, WorkspaceState::Expired);
    assert!(not_found(shard.read().visible_workspace("w")));
    assert!(not_found(put(&shard, &mut p, "w", "outputs/x")));
    assert!(not_found(set_expiry(&shard, "w", ExpirySetting::Never, 0)));
    match shard.create_workspace("w") {
        Err(Error::WorkspaceUnavailable { state, .. }) => {
            assert_eq!(state, WorkspaceState::Expired)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn writers_refuse_an_expired_workbench_and_the_first_one_records_expired() {
    let (_d, shard, clock, mut p) = setup();
    put(&shard, &mut p, "w", "outputs/a").unwrap();
    set_expiry(&shard, "w", ExpirySetting::At(T0 + HOUR), 0).unwrap();
    clock.set(T0 + 2 * HOUR);
    // A publication is refused before anything is written.
    assert!(not_found(put(&shard, &mut p, "w", "outputs/b")));
    assert_eq!(marker(&shard, "w").1.state, WorkspaceState::Visible);
    // set_expiry is a writer that sees the passed deadline: it records Expired and refuses.
    assert!(not_found(set_expiry(&shard, "w", ExpirySetting::Never, 0)));
    let (_, ws) = marker(&shard, "w");
    assert_eq!(ws.state, WorkspaceState::Expired);
    assert_eq!(ws.expires_at_unix_ms, Some(T0 + HOUR));
    // Recorded Expired is independent of any clock.
    clock.set(T0);
    assert!(not_found(shard.read().visible_workspace("w")));
    assert!(listed(&shard).is_empty());
}

#[test]
fn the_persisted_high_water_keeps_an_unrecorded_expiry_when_the_clock_goes_back() {
    let (dir, shard, clock, _p) = setup();
    set_expiry(&shard, "w", ExpirySetting::At(T0 + HOUR), 0).unwrap();
    clock.set(T0 + 2 * HOUR);
    // A writer observes the clock (as every writer open does through the reaper) but never
    // touches the workbench.
    lease_clock::observe(&shard, clock.now_unix_ms(), 0).unwrap();
    assert_eq!(marker(&shard, "w").1.state, WorkspaceState::Visible);
    drop(shard);
    let back = ManualClock::new(T0);
    let reopened = open(dir.path(), &back);
    assert!(not_found(reopened.read().visible_workspace("w")));
    assert_eq!(
        reopened.read().store_clock_unix_ms().unwrap(),
        T0 + 2 * HOUR
    );
    assert!(listed(&reopened).is_empty());
}

#[test]
fn the_gc_sweep_records_expiry_removes_paths_and_collects_uncommitted_bodies() {
    let (_d, shard, clock, mut p) = setup();
    shard.create_workspace("keep").unwrap();
    let a = put(&shard, &mut p, "w", "outputs/a").unwrap();
    let b = put(&shard, &mut p, "w", "logs/b").unwrap();
    let kept = put(&shard, &mut p, "keep", "outputs/k").unwrap();
    set_expiry(&shard, "w", ExpirySetting::At(T0 + HOUR), 0).unwrap();

    // Before the deadline a pass leaves everything.
    let r = gc_pass(&shard, &mut p, &GcOptions::default());
    assert!(r.expired_workbenches.is_empty());
    assert!(r.collected.is_empty());

    clock.set(T0 + 2 * HOUR);
    // A dry run reports the sweep and writes nothing.
    let dry = gc_pass(
        &shard,
        &mut p,
        &GcOptions {
            dry_run: true,
            max_revisions: None,
        },
    );
    assert_eq!(dry.expired_workbenches.len(), 1);
    assert_eq!(dry.expired_workbenches[0].paths_released, 2);
    assert!(!dry.expired_workbenches[0].marked);
    assert_eq!(marker(&shard, "w").1.state, WorkspaceState::Visible);

    let r = gc_pass(&shard, &mut p, &GcOptions::default());
    assert_eq!(r.expired_workbenches.len(), 1);
    let e = &r.expired_workbenches[0];
    assert_eq!(e.workbench_id, "w");
    assert_eq!(e.expired_at_unix_ms, T0 + HOUR);
    assert!(e.marked);
    assert_eq!(e.paths_released, 2);
    let mut released = vec![a, b];
    released.sort();
    assert_eq!(e.released_revisions, released);
    let collected: BTreeSet<_> = r.collected.iter().map(|c| c.revision).collect();
    assert_eq!(collected, [a, b].into_iter().collect());
    assert_eq!(
        shard.read().revision(&a).unwrap().unwrap().state,
        RevisionState::Deleted
    );
    assert_eq!(
        shard.read().revision(&kept).unwrap().unwrap().state,
        RevisionState::Available
    );
    assert_eq!(p.objects.len(), 1, "only the live workbench's body is left");
    let (_, ws) = marker(&shard, "w");
    assert_eq!(ws.state, WorkspaceState::Expired);
    let inc = ws.incarnation;
    assert!(shard
        .read()
        .list_children(&inc, None, None, 10)
        .unwrap()
        .items
        .is_empty());
    // A second pass finds nothing more to do for it.
    let again = gc_pass(&shard, &mut p, &GcOptions::default());
    assert!(again.expired_workbenches.is_empty());
    assert!(meta::ops::fsck::check(&shard).unwrap().findings.is_empty());
}

#[test]
fn a_snapshot_of_an_expired_workbench_keeps_its_bodies_from_gc() {
    let (_d, shard, clock, mut p) = setup();
    let a = put(&shard, &mut p, "w", "outputs/a").unwrap();
    meta::ops::snapshot::create(
        &shard,
        &meta::ops::snapshot::CreateSnapshotRequest {
            request_id: RequestId::random().unwrap(),
            workbench_id: "w".into(),
            alias: None,
            ttl_ms: 100 * HOUR,
            annotation: Vec::new(),
            require_commit_head: false,
        },
        clock.now_unix_ms(),
        &zero_retention(),
    )
    .expect("snapshot");
    set_expiry(&shard, "w", ExpirySetting::At(T0 + HOUR), 0).unwrap();
    clock.set(T0 + 2 * HOUR);
    let r = gc_pass(&shard, &mut p, &GcOptions::default());
    assert_eq!(r.expired_workbenches[0].paths_released, 1);
    assert!(
        r.collected.is_empty(),
        "the snapshot's history hold keeps it"
    );
    assert_eq!(r.waiting.len(), 1);
    assert_eq!(r.waiting[0].revision, a);
    assert_eq!(
        shard.read().revision(&a).unwrap().unwrap().state,
        RevisionState::Available
    );
    // The explanation names the expiry that released the path.
    let e = gc::explain::explain_revision(&shard, &a, &zero_retention()).unwrap();
    assert_eq!(e.released_by_expiry.len(), 1);
    assert_eq!(e.released_by_expiry[0].workbench_id, "w");
    assert_eq!(e.released_by_expiry[0].path.as_str(), "outputs/a");
    assert_eq!(e.released_by_expiry[0].expired_at_unix_ms, T0 + HOUR);
}
