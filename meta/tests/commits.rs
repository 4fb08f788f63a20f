//! Commit closure, tags and retirement at the metadata layer (docs/metadata-format.md "Commit Closure"), plus
//! the command-result codec of the operation steps.

use meta::codec::{BuildCommitPhase, CommandResult, ManifestRow, OperationKind, OperationResult};
use meta::ids::{CommitId, OperationId, RootId};
use meta::ops::commit::{self as build, BuildCommitRequest, StagedManifest, StepOutcome};
use meta::ops::tag::{self, TagCondition};
use meta::MetaShard;

#[path = "fixtures/engine.rs"]
mod engine;

fn digest(byte: u8) -> String {
    format!("sha256:{}", format!("{byte:02x}").repeat(32))
}

fn request(wb: &str, id: u8, replace: bool) -> BuildCommitRequest {
    BuildCommitRequest {
        workbench_id: wb.into(),
        commit_id: CommitId([id; 32]),
        projection_input_digest: [id; 32],
        content_digest_uri: digest(id),
        manifest_digest_uri: digest(id),
        replace,
        producer: "test".into(),
        lineage: b"{}".to_vec(),
        parents: Vec::new(),
        observed_unix_seconds: 1_700_000_000,
    }
}

/// Builds one commit to completion with a metadata-only staged manifest.
fn commit(shard: &MetaShard, req: &BuildCommitRequest) -> build::BuildHandle {
    let h = build::begin(shard, req).unwrap();
    loop {
        match build::step(shard, &h.operation_id).unwrap() {
            StepOutcome::Terminal => break,
            StepOutcome::Advanced(_) => {}
            StepOutcome::NeedsManifest => {
                let rev = build::staged_manifest_revision(&shard.root_id(), &h.operation_id);
                let staged = StagedManifest {
                    revision_id: rev,
                    logical_size: 4,
                    body_digest_uri: digest(0xee),
                    content_type: "application/json".into(),
                    manifest: vec![ManifestRow {
                        object_index: 0,
                        physical_owner_revision: rev,
                        physical_object_index: 0,
                        object_key: "k".into(),
                        logical_offset: 0,
                        object_offset: 0,
                        length: 4,
                        digest_uri: digest(0xee),
                        append_segment: None,
                    }],
                };
                build::stage_manifest(shard, &h.operation_id, &staged).unwrap();
                // Recording the same binding again is a no-op.
                build::stage_manifest(shard, &h.operation_id, &staged).unwrap();
            }
        }
    }
    h
}

#[test]
fn operation_step_results_round_trip_and_unknown_kinds_fail_closed() {
    let r = CommandResult::OperationRecorded {
        kind: OperationKind::BuildCommit,
        operation_id: OperationId([3; 16]),
        phase: 2,
    };
    let bytes = r.encode();
    let mut golden = vec![3u8, 2];
    golden.extend_from_slice(&[3; 16]);
    golden.push(2);
    assert_eq!(bytes, golden);
    assert_eq!(CommandResult::decode(&bytes).unwrap(), r);
    let applied = CommandResult::Applied { value: 7 };
    assert_eq!(applied.encode(), vec![4, 0, 0, 0, 0, 0, 0, 0, 7]);
    assert_eq!(CommandResult::decode(&applied.encode()).unwrap(), applied);
    let mut bad_kind = bytes.clone();
    bad_kind[1] = 9;
    assert!(CommandResult::decode(&bad_kind).is_err());
    assert!(CommandResult::decode(&[5]).is_err());
}

#[test]
fn build_operation_identity_is_deterministic_per_root_and_request() {
    let a = build::build_operation_id(&RootId([1; 16]), &[2; 32]);
    assert_eq!(a, build::build_operation_id(&RootId([1; 16]), &[2; 32]));
    assert_ne!(a, build::build_operation_id(&RootId([9; 16]), &[2; 32]));
    assert_ne!(a, build::build_operation_id(&RootId([1; 16]), &[3; 32]));
}

#[test]
fn build_publishes_one_sealed_commit_and_head_then_replays() {
    let dir = tempfile::tempdir().unwrap();
    let shard = engine::open(dir.path());
    shard.create_workspace("wb").unwrap();
    let h = commit(&shard, &request("wb", 1, false));
    assert!(h.created);
    let op = build::read_operation(&shard, &h.operation_id)
        .unwrap()
        .unwrap();
    assert_eq!(op.phase, BuildCommitPhase::Complete);
    assert!(matches!(op.result, OperationResult::Succeeded(_)));
    assert_eq!(op.committed_at_unix_seconds, 1_700_000_000);
    assert_eq!(op.initialization_digest, build::initialization_digest(&op));
    let c = build::read_commit_record(&shard, &CommitId([1; 32]))
        .unwrap()
        .unwrap();
    assert_eq!(c.member_count, 1, "the virtual run manifest");
    assert_eq!(c.consumer_count, 1);
    let seals = build::closure_seals(&shard, &CommitId([1; 32])).unwrap();
    assert_eq!(seals.member_digest, c.member_digest);
    assert_eq!(seals.revision_digest, c.revision_digest);
    assert_eq!(
        build::read_head(&shard, "wb").unwrap().unwrap().commit_id,
        CommitId([1; 32])
    );
    // An exact retry finds the terminal operation, even with a later clock.
    let mut later = request("wb", 1, false);
    later.observed_unix_seconds = 1_800_000_000;
    let again = build::begin(&shard, &later).unwrap();
    assert!(!again.created);
    assert_eq!(again.operation.committed_at_unix_seconds, 1_700_000_000);
    // A new identity without replace conflicts before anything is written.
    let v = engine::version(&shard);
    assert!(matches!(
        build::begin(&shard, &request("wb", 2, false)),
        Err(meta::Error::WorkbenchCommitConflict { .. })
    ));
    assert_eq!(engine::version(&shard), v);
}

#[test]
fn tags_move_between_commits_and_retirement_waits_for_zero_consumers() {
    let dir = tempfile::tempdir().unwrap();
    let shard = engine::open(dir.path());
    shard.create_workspace("wb").unwrap();
    commit(&shard, &request("wb", 1, false));
    let c1 = CommitId([1; 32]);
    let t = tag::set_tag(&shard, "wb", "v1", &c1, TagCondition::Absent).unwrap();
    assert_eq!(tag::get_tag(&shard, "wb", "v1").unwrap().unwrap(), t);
    commit(&shard, &request("wb", 2, true));
    let c2 = CommitId([2; 32]);
    let moved = tag::set_tag(
        &shard,
        "wb",
        "v1",
        &c2,
        TagCondition::Generation(t.tag_generation),
    )
    .unwrap();
    assert_eq!(moved.commit_id, c2);
    let c1_row = build::read_commit_record(&shard, &c1).unwrap().unwrap();
    assert_eq!(c1_row.consumer_count, 0);
    assert_eq!(c1_row.state, meta::codec::CommitState::Sealed);
    assert!(matches!(
        build::retire(&shard, &c2),
        Err(meta::Error::CommitLifecycle { .. })
    ));
    let r = build::retire(&shard, &c1).unwrap();
    assert!(!r.already_retired);
    assert_eq!(
        build::read_commit_record(&shard, &c1)
            .unwrap()
            .unwrap()
            .state,
        meta::codec::CommitState::Retired
    );
    assert!(matches!(
        tag::set_tag(&shard, "wb", "old", &c1, TagCondition::Any),
        Err(meta::Error::CommitLifecycle { .. })
    ));
    assert_eq!(tag::list_tags(&shard, "wb").unwrap().len(), 1);
    assert!(tag::delete_tag(&shard, "wb", "v1", TagCondition::Absent).is_err());
    assert!(tag::delete_tag(&shard, "wb", "v1", TagCondition::Any)
        .unwrap()
        .is_some());
    assert!(tag::list_tags(&shard, "wb").unwrap().is_empty());
}
