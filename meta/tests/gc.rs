//! The GC state machine over a real holt store with a scripted object provider: collection,
//! cursor resumption after a definite failure, quarantine and reconciliation (both outcomes),
//! the retention window and the GcBarrier, stale candidates, dry runs, the budget, and the
//! durable `history_retention_versions` setting.

use std::collections::BTreeSet;
use std::path::Path;

use meta::codec::{GcPhase, Operation, OperationKind, RevisionState};
use meta::ops::gc::{self, Boundary, DeleteOutcome, GcOptions, ProbeOutcome, WaitReason};
use meta::ops::remove::{remove, RemoveRequest};
use meta::ops::settings;
use meta::{
    normalize, ArtifactRevisionId, ManifestRow, MetaShard, OpenOptions, PathCondition,
    PublishRequest, RequestId,
};

#[path = "fixtures/gc_provider.rs"]
mod gc_provider;

use gc_provider::{zero_retention, Provider};

fn open(dir: &Path) -> MetaShard {
    MetaShard::open(dir, OpenOptions::default()).expect("open")
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

fn key(shard: &MetaShard, rev: ArtifactRevisionId, index: u64) -> String {
    format!(
        "nokv/artifacts/{}/{}/{}/blocks/{index:016x}",
        shard.logical_shard_id(),
        shard.root_id(),
        rev
    )
}

/// Publishes a body of `blocks` objects at `path` (create or replace) and records its objects.
fn put(shard: &MetaShard, provider: &mut Provider, path: &str, blocks: u64) -> ArtifactRevisionId {
    let rev = ArtifactRevisionId::random().unwrap();
    let manifest: Vec<ManifestRow> = (0..blocks)
        .map(|i| ManifestRow {
            object_index: i,
            physical_owner_revision: rev,
            physical_object_index: i,
            object_key: key(shard, rev, i),
            logical_offset: i * 10,
            object_offset: 0,
            length: 10,
            digest_uri: digest(&format!("{rev}-{i}")),
            append_segment: None,
        })
        .collect();
    for row in &manifest {
        provider.objects.insert(row.object_key.clone());
    }
    let norm = normalize(path).unwrap();
    let current = shard
        .read()
        .path_entry(
            &shard.read().visible_workspace("w").unwrap().incarnation,
            &norm,
        )
        .unwrap();
    let condition = match current {
        None => PathCondition::Create,
        Some(e) => PathCondition::Replace {
            expected_generation: e.generation,
        },
    };
    shard
        .publish(PublishRequest {
            request_id: RequestId::random().unwrap(),
            workbench_id: "w".into(),
            path: norm,
            condition,
            revision_id: rev,
            logical_size: blocks * 10,
            body_digest_uri: digest(&format!("body-{rev}")),
            content_type: "application/octet-stream".into(),
            producer: "gc-test".into(),
            manifest_id: None,
            manifest,
            dependency_depth: 0,
            index_fields: Default::default(),
        })
        .unwrap();
    rev
}

fn rm(shard: &MetaShard, path: &str) {
    remove(
        shard,
        &RemoveRequest {
            request_id: RequestId::random().unwrap(),
            workbench_id: "w".into(),
            path: normalize(path).unwrap(),
            expected_generation: None,
        },
    )
    .unwrap();
}

fn pass(shard: &MetaShard, provider: &mut Provider) -> gc::GcReport {
    pass_with(shard, provider, &GcOptions::default(), &mut |_| {})
}

fn pass_with(
    shard: &MetaShard,
    provider: &mut Provider,
    opts: &GcOptions,
    observe: &mut dyn FnMut(Boundary),
) -> gc::GcReport {
    gc::run_pass(shard, &zero_retention(), opts, provider, observe).unwrap()
}

fn state(shard: &MetaShard, rev: &ArtifactRevisionId) -> RevisionState {
    shard.read().revision(rev).unwrap().unwrap().state
}

fn gc_op(shard: &MetaShard, rev: &ArtifactRevisionId) -> meta::codec::GcOperation {
    let r = shard.read().revision(rev).unwrap().unwrap();
    let id = gc::operation_id(&shard.root_id(), rev, r.reference_epoch);
    let key = meta::codec::OperationKey {
        root: shard.root_id(),
        kind: OperationKind::Gc,
        operation_id: id,
    }
    .encode();
    let db = shard.holt_db().expect("a holt-backed shard");
    let t = db.tree("operation").unwrap();
    match Operation::decode(&t.get(&key).unwrap().unwrap()).unwrap() {
        Operation::Gc(g) => g,
        other => panic!("{other:?}"),
    }
}

fn rows(shard: &MetaShard, tree: &str) -> usize {
    let db = shard.holt_db().expect("a holt-backed shard");
    let t = db.tree(tree).unwrap();
    t.range(&holt::RangeSpec {
        prefix: Vec::new(),
        start_after: None,
        delimiter: None,
        limit: None,
    })
    .unwrap()
    .count()
}

fn setup() -> (tempfile::TempDir, MetaShard, Provider) {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    shard.create_workspace("w").unwrap();
    (dir, shard, Provider::default())
}

#[test]
fn a_removed_revision_is_collected_with_its_manifest_and_candidate_pruned() {
    let (_d, shard, mut p) = setup();
    let a = put(&shard, &mut p, "outputs/a", 3);
    let b = put(&shard, &mut p, "outputs/b", 2);
    rm(&shard, "outputs/a");
    let mut seen = Vec::new();
    let r = pass_with(&shard, &mut p, &GcOptions::default(), &mut |b| seen.push(b));
    assert_eq!(r.collected.len(), 1);
    assert_eq!(r.collected[0].revision, a);
    assert_eq!(r.collected[0].objects, 3);
    assert_eq!(r.collected[0].object_bytes, 30);
    assert_eq!(state(&shard, &a), RevisionState::Deleted);
    assert_eq!(state(&shard, &b), RevisionState::Available);
    // Only b's objects remain, exactly.
    let expected: BTreeSet<String> = (0..2).map(|i| key(&shard, b, i)).collect();
    assert_eq!(p.objects, expected);
    assert!(
        shard.read().manifest(&a).unwrap().is_empty(),
        "manifest pruned"
    );
    assert_eq!(rows(&shard, "gc_candidate"), 0, "candidate pruned");
    let op = gc_op(&shard, &a);
    assert_eq!(op.phase, GcPhase::Deleted);
    assert_eq!(op.deleted_object_count, 3);
    // The removal was the last commit: the pass advanced the barrier, then collected.
    assert_eq!(
        seen,
        vec![
            Boundary::Barrier,
            Boundary::Claimed,
            Boundary::Deleting,
            Boundary::ObjectDeleted,
            Boundary::Batch,
            Boundary::Deleted
        ]
    );
    assert_eq!(r.barrier_generation, Some(1));
    assert!(meta::ops::fsck::check(&shard).unwrap().findings.is_empty());
}

#[test]
fn a_definite_delete_failure_leaves_deleting_and_the_next_pass_resumes_at_the_cursor() {
    let (_d, shard, mut p) = setup();
    let a = put(&shard, &mut p, "outputs/a", 150);
    rm(&shard, "outputs/a");
    // The 71st DELETE fails (the first batch of 64 was recorded).
    for _ in 0..70 {
        p.deletes.push_back(DeleteOutcome::Deleted);
    }
    p.deletes
        .push_back(DeleteOutcome::Failed("connection refused".into()));
    let r = pass(&shard, &mut p);
    assert_eq!(r.interrupted.len(), 1, "{r:?}");
    assert_eq!(state(&shard, &a), RevisionState::Deleting);
    let op = gc_op(&shard, &a);
    assert_eq!(op.phase, GcPhase::Deleting);
    assert_eq!(op.next_object_index, 70);
    assert_eq!(op.deleted_object_count, 70);
    p.delete_calls.clear();
    let r = pass(&shard, &mut p);
    assert_eq!(r.collected.len(), 1);
    assert_eq!(p.delete_calls.len(), 80, "resumed at object 70");
    assert_eq!(p.delete_calls[0], key(&shard, a, 70));
    assert!(p.objects.is_empty());
    assert_eq!(gc_op(&shard, &a).deleted_object_count, 150);
}

#[test]
fn an_ambiguous_delete_quarantines_and_a_later_pass_reconciles_to_deleted() {
    let (_d, shard, mut p) = setup();
    let a = put(&shard, &mut p, "outputs/a", 4);
    rm(&shard, "outputs/a");
    p.deletes.push_back(DeleteOutcome::Deleted);
    p.deletes.push_back(DeleteOutcome::Quarantined(
        "ambiguous DELETE: timeout".into(),
    ));
    let r = pass(&shard, &mut p);
    assert_eq!(r.quarantined.len(), 1);
    assert!(r.quarantined[0].evidence.contains("ambiguous DELETE"));
    assert_eq!(state(&shard, &a), RevisionState::Quarantined);
    assert_eq!(gc_op(&shard, &a).phase, GcPhase::Quarantined);
    assert_eq!(p.objects.len(), 2, "objects 2 and 3 were never sent");
    // Reconciliation HEADs: objects 2 and 3 are present, so it reopens to Deleting and deletes.
    let r = pass(&shard, &mut p);
    assert_eq!(r.collected.len(), 1, "{r:?}");
    assert!(r.collected[0].reconciled);
    assert_eq!(state(&shard, &a), RevisionState::Deleted);
    assert!(p.objects.is_empty());
    let op = gc_op(&shard, &a);
    assert!(op
        .quarantine_evidence
        .as_deref()
        .is_some_and(|e| e.contains("still present")));
}

#[test]
fn a_quarantined_revision_whose_objects_are_all_absent_goes_straight_to_deleted() {
    let (_d, shard, mut p) = setup();
    let a = put(&shard, &mut p, "outputs/a", 1);
    rm(&shard, "outputs/a");
    p.deletes
        .push_back(DeleteOutcome::Quarantined("ambiguous DELETE: reset".into()));
    pass(&shard, &mut p);
    assert_eq!(state(&shard, &a), RevisionState::Quarantined);
    // The provider cannot answer a HEAD: it stays quarantined.
    p.probes
        .push_back(ProbeOutcome::Failed("unavailable".into()));
    let r = pass(&shard, &mut p);
    assert_eq!(r.quarantined.len(), 1);
    assert_eq!(state(&shard, &a), RevisionState::Quarantined);
    p.delete_calls.clear();
    let r = pass(&shard, &mut p);
    assert_eq!(r.collected.len(), 1);
    assert!(p.delete_calls.is_empty(), "nothing to delete again");
    assert_eq!(state(&shard, &a), RevisionState::Deleted);
}

#[test]
fn the_retention_window_keeps_candidates_and_is_named() {
    let (_d, shard, mut p) = setup();
    settings::set(
        &shard,
        RequestId::random().unwrap(),
        settings::HISTORY_RETENTION_VERSIONS,
        5,
    )
    .unwrap();
    let a = put(&shard, &mut p, "outputs/a", 1);
    rm(&shard, "outputs/a");
    let r = pass(&shard, &mut p);
    assert!(r.collected.is_empty());
    assert_eq!(r.history_retention_versions, 5, "the stored setting wins");
    assert_eq!(r.waiting.len(), 1);
    assert!(matches!(
        r.waiting[0].reasons[..],
        [WaitReason::RetentionWindow {
            retention_versions: 5,
            ..
        }]
    ));
    for i in 0..6 {
        put(&shard, &mut p, &format!("outputs/f{i}"), 1);
    }
    let r = pass(&shard, &mut p);
    assert_eq!(r.collected.len(), 1);
    assert_eq!(state(&shard, &a), RevisionState::Deleted);
}

#[test]
fn a_dry_run_writes_and_deletes_nothing() {
    let (_d, shard, mut p) = setup();
    let a = put(&shard, &mut p, "outputs/a", 2);
    put(&shard, &mut p, "outputs/b", 1);
    rm(&shard, "outputs/a");
    put(&shard, &mut p, "outputs/c", 1); // the candidate is not at the tip
    let version = shard.version().unwrap();
    let floor = meta::TxnStore::history_floor(shard.store()).unwrap();
    let objects = p.objects.clone();
    let r = pass_with(
        &shard,
        &mut p,
        &GcOptions {
            dry_run: true,
            max_revisions: None,
        },
        &mut |_| {},
    );
    assert!(r.dry_run);
    assert_eq!(r.collected.len(), 1);
    assert_eq!(r.collected[0].revision, a);
    assert_eq!(r.collected[0].objects, 2);
    assert_eq!(shard.version().unwrap(), version);
    assert_eq!(meta::TxnStore::history_floor(shard.store()).unwrap(), floor);
    assert_eq!(p.objects, objects);
    assert!(p.delete_calls.is_empty());
    assert_eq!(state(&shard, &a), RevisionState::Available);
}

#[test]
fn max_revisions_bounds_a_pass() {
    let (_d, shard, mut p) = setup();
    for i in 0..5 {
        put(&shard, &mut p, &format!("outputs/f{i}"), 1);
    }
    for i in 0..5 {
        rm(&shard, &format!("outputs/f{i}"));
    }
    let r = pass_with(
        &shard,
        &mut p,
        &GcOptions {
            dry_run: false,
            max_revisions: Some(2),
        },
        &mut |_| {},
    );
    assert_eq!(r.collected.len(), 2);
    assert!(r.budget_exhausted);
    let r = pass(&shard, &mut p);
    assert_eq!(r.collected.len(), 3);
    assert!(p.objects.is_empty());
}

#[test]
fn a_candidate_superseded_by_a_new_reference_is_pruned_not_collected() {
    let (_d, shard, mut p) = setup();
    let a = put(&shard, &mut p, "outputs/a", 1);
    let rows = shard.read().manifest(&a).unwrap();
    rm(&shard, "outputs/a");
    // A new revision reuses a's block: a RevisionDependency reference supersedes the candidate.
    let child = ArtifactRevisionId::random().unwrap();
    shard
        .publish(PublishRequest {
            request_id: RequestId::random().unwrap(),
            workbench_id: "w".into(),
            path: normalize("outputs/child").unwrap(),
            condition: PathCondition::Create,
            revision_id: child,
            logical_size: 10,
            body_digest_uri: digest("child"),
            content_type: "application/octet-stream".into(),
            producer: "gc-test".into(),
            manifest_id: None,
            manifest: rows,
            dependency_depth: 1,
            index_fields: Default::default(),
        })
        .unwrap();
    assert_eq!(rows_of(&shard), 1, "the stale candidate row exists");
    let r = pass(&shard, &mut p);
    assert!(r.collected.is_empty());
    assert_eq!(r.stale_candidates_pruned, 1);
    assert_eq!(rows_of(&shard), 0);
    assert_eq!(state(&shard, &a), RevisionState::Available);
    assert!(p.objects.contains(&key(&shard, a, 0)));
    // Removing the child collects it first, then its base in the same pass.
    rm(&shard, "outputs/child");
    let r = pass(&shard, &mut p);
    let order: Vec<ArtifactRevisionId> = r.collected.iter().map(|c| c.revision).collect();
    assert_eq!(order, vec![child, a]);
    assert_eq!(r.collected[0].objects, 0, "the child owns no object");
    assert_eq!(r.collected[0].released_dependencies, vec![a]);
    assert!(p.objects.is_empty());
}

fn rows_of(shard: &MetaShard) -> usize {
    rows(shard, "gc_candidate")
}

#[test]
fn the_retention_setting_is_durable_and_refuses_unknown_names() {
    let dir = tempfile::tempdir().unwrap();
    {
        let shard = open(dir.path());
        assert_eq!(
            settings::get(&shard, settings::HISTORY_RETENTION_VERSIONS, 1024)
                .unwrap()
                .stored,
            None
        );
        let r = settings::set(
            &shard,
            RequestId::random().unwrap(),
            settings::HISTORY_RETENTION_VERSIONS,
            7,
        )
        .unwrap();
        assert_eq!((r.previous, r.value, r.unchanged), (None, 7, false));
        let again = settings::set(
            &shard,
            RequestId::random().unwrap(),
            settings::HISTORY_RETENTION_VERSIONS,
            7,
        )
        .unwrap();
        assert!(again.unchanged);
        assert!(settings::set(&shard, RequestId::random().unwrap(), "nope", 1).is_err());
        assert!(settings::get(&shard, "nope", 0).is_err());
    }
    let shard = open(dir.path());
    let v = settings::get(&shard, settings::HISTORY_RETENTION_VERSIONS, 1024).unwrap();
    assert_eq!((v.stored, v.effective), (Some(7), 7));
    // The outbox chain covers the setting command.
    shard.verify_recovery_outbox().unwrap();
}
