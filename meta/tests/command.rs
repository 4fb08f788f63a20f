//! MetadataCommand validation order (docs/metadata-format.md, "Metadata Command"): schema marker and RootFence,
//! owner epoch, request-id replay (before the read-version fence), read-version fence, then every
//! predicate; a failed check applies nothing.

use meta::codec::system::KEY_OWNER_EPOCH;
use meta::codec::{workspace_current, CommandResult, WorkspaceCurrent, WorkspaceState};
use meta::command::{MetadataCommand, Mutation, Predicate};
use meta::schema::Family;
use meta::{Error, MetaShard, RequestId, WorkspaceIncarnationId};

#[path = "fixtures/engine.rs"]
mod engine;
use engine::{open, raw_get, raw_put, version};

/// A small command writing one WorkspaceCurrent row for `name` at the current version.
fn command(s: &MetaShard, request_id: RequestId, name: &str, digest_byte: u8) -> MetadataCommand {
    let read_version = version(s);
    let ws = WorkspaceCurrent {
        incarnation: WorkspaceIncarnationId::from_bytes([digest_byte; 16]),
        workspace_revision: 1,
        state: WorkspaceState::Visible,
        owning_operation: None,
        created_version: read_version + 1,
        modified_version: read_version + 1,
        expires_at_unix_ms: None,
    };
    let key = workspace_current::key(&s.root_id(), name);
    let mut cmd = s.command_header(
        request_id,
        [digest_byte; 32],
        read_version,
        CommandResult::WorkspaceCreated {
            workspace: ws.clone(),
        },
    );
    cmd.predicates = vec![Predicate::absent(Family::WorkspaceCurrent, key.clone())];
    cmd.mutations = vec![Mutation::put(Family::WorkspaceCurrent, key, ws.encode())];
    cmd
}

fn assert_fenced(r: meta::Result<meta::command::CommandOutcome>, needle: &str) {
    match r {
        Err(Error::Fenced { reason }) => assert!(reason.contains(needle), "{reason:?}"),
        other => panic!("expected Fenced({needle}), got {other:?}"),
    }
}

#[test]
fn commit_version_is_read_version_plus_one_and_the_outcome_names_the_lsn() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let cmd = command(&s, RequestId::random().unwrap(), "a", 1);
    let rv = cmd.read_version;
    let out = s.execute(cmd).unwrap();
    assert_eq!(out.commit_version, rv + 1);
    assert!(!out.idempotent_replay);
    assert_eq!(
        out.recovery_lsn,
        Some(s.recovery_tail().unwrap().applied_lsn)
    );
}

#[test]
fn exact_replay_returns_the_stored_result_even_when_the_read_version_moved() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let id = RequestId::random().unwrap();
    let cmd = command(&s, id, "a", 1);
    let first = s.execute(cmd.clone()).unwrap();
    s.create_workspace("other").unwrap();
    s.create_workspace("more").unwrap();
    let v = version(&s);
    assert!(cmd.read_version < v - 1, "the read version is stale now");
    let again = s.execute(cmd).unwrap();
    assert!(again.idempotent_replay);
    assert_eq!(again.commit_version, first.commit_version);
    assert_eq!(again.result, first.result);
    assert_eq!(again.recovery_lsn, first.recovery_lsn);
    assert_eq!(version(&s), v, "a replay writes nothing");
}

#[test]
fn same_request_id_with_one_changed_input_byte_is_a_replay_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let id = RequestId::random().unwrap();
    let cmd = command(&s, id, "a", 1);
    s.execute(cmd.clone()).unwrap();
    let v = version(&s);
    // Same id, one digest byte different, stale read version: the mismatch wins over the fence.
    let mut changed = cmd.clone();
    changed.command_digest[31] ^= 0x01;
    assert!(matches!(
        s.execute(changed),
        Err(Error::RequestReplayMismatch)
    ));
    // Same id, fresh read version, different digest: still a mismatch, nothing applied.
    let mut fresh = command(&s, id, "b", 2);
    fresh.command_digest = cmd.command_digest;
    fresh.command_digest[0] ^= 0x80;
    assert!(matches!(
        s.execute(fresh),
        Err(Error::RequestReplayMismatch)
    ));
    assert_eq!(version(&s), v);
}

#[test]
fn publish_replay_with_one_changed_input_byte_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.create_workspace("w").unwrap();
    let rev = meta::ArtifactRevisionId::random().unwrap();
    let req = meta::PublishRequest {
        request_id: RequestId::random().unwrap(),
        workbench_id: "w".into(),
        path: meta::normalize("a").unwrap(),
        condition: meta::PathCondition::Create,
        revision_id: rev,
        logical_size: 0,
        body_digest_uri: format!("sha256:{}", "0".repeat(64)),
        content_type: "text/plain".into(),
        producer: "p".into(),
        manifest_id: None,
        manifest: vec![],
        dependency_depth: 0,
        index_fields: Default::default(),
    };
    let first = s.publish(req.clone()).unwrap();
    s.create_workspace("x").unwrap();
    let again = s.publish(req.clone()).unwrap();
    assert!(again.idempotent_replay);
    assert_eq!(again.commit_version, first.commit_version);
    let mut changed = req;
    changed.producer = "q".into(); // one input byte
    let v = version(&s);
    assert!(matches!(
        s.publish(changed),
        Err(Error::RequestReplayMismatch)
    ));
    assert_eq!(version(&s), v);
}

#[test]
fn stale_read_version_without_a_stored_result_is_a_read_version_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let cmd = command(&s, RequestId::random().unwrap(), "a", 1);
    s.create_workspace("intervening").unwrap();
    let v = version(&s);
    let tail = s.recovery_tail().unwrap();
    assert!(matches!(
        s.execute(cmd),
        Err(Error::ReadVersionConflict { attempts: 1 })
    ));
    assert_eq!(version(&s), v);
    assert_eq!(s.recovery_tail().unwrap(), tail);
}

#[test]
fn a_failed_predicate_applies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.execute(command(&s, RequestId::random().unwrap(), "a", 1))
        .unwrap();
    let v = version(&s);
    let tail = s.recovery_tail().unwrap();
    // The row exists now, so the Absent predicate fails at the commit boundary.
    let mut cmd = command(&s, RequestId::random().unwrap(), "a", 2);
    cmd.mutations.push(Mutation::put(
        Family::GcBarrier,
        s.root_id().as_bytes().to_vec(),
        vec![0, 1],
    ));
    assert!(matches!(s.execute(cmd), Err(Error::CommandPredicateFailed)));
    assert_eq!(version(&s), v);
    assert_eq!(s.recovery_tail().unwrap(), tail);
    assert!(raw_get(&s, Family::GcBarrier, s.root_id().as_bytes()).is_none());
}

#[test]
fn a_stale_owner_epoch_is_fenced_before_replay() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let s = open(dir.path());
    assert_eq!(s.owner_epoch(), 2);
    // The owner epoch is persisted before the handle's first write.
    s.prepare_write().unwrap();
    let id = RequestId::random().unwrap();
    let cmd = command(&s, id, "a", 1);
    s.execute(cmd.clone()).unwrap();
    let v = version(&s);
    // Even an exact replay is refused under a stale epoch: the owner fence precedes replay.
    let mut stale = cmd;
    stale.owner_epoch = 1;
    assert_fenced(s.execute(stale), "stale owner epoch: command carries 1");
    let mut future = command(&s, RequestId::random().unwrap(), "b", 2);
    future.owner_epoch = 3;
    assert_fenced(s.execute(future), "stale owner epoch: command carries 3");
    assert_eq!(version(&s), v);
}

#[test]
fn an_owner_epoch_advanced_under_the_handle_fences_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    // Another owner's advance, written straight through the TxnStore.
    raw_put(
        &s,
        Family::System,
        KEY_OWNER_EPOCH,
        meta::codec::system::encode_owner_epoch(9),
    );
    let v = version(&s);
    assert_fenced(
        s.execute(command(&s, RequestId::random().unwrap(), "a", 1)),
        "shard owner epoch is 9",
    );
    assert!(matches!(s.create_workspace("w"), Err(Error::Fenced { .. })));
    assert_eq!(version(&s), v);
}

#[test]
fn a_stale_placement_generation_is_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let mut cmd = command(&s, RequestId::random().unwrap(), "a", 1);
    cmd.placement_generation = 0;
    assert_fenced(s.execute(cmd), "stale placement generation");
}

#[test]
fn a_root_fence_that_is_no_longer_active_fences_commands() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let key = s.root_id().as_bytes().to_vec();
    let mut fence =
        meta::codec::RootFence::decode(&raw_get(&s, Family::RootFence, &key).unwrap()).unwrap();
    fence.activation_state = meta::codec::RootActivationState::Draining;
    raw_put(&s, Family::RootFence, &key, fence.encode());
    assert_fenced(
        s.execute(command(&s, RequestId::random().unwrap(), "a", 1)),
        "not Active",
    );
}

#[test]
fn another_schema_id_root_or_shard_is_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let mut a = command(&s, RequestId::random().unwrap(), "a", 1);
    a.schema_id = "other".into();
    assert_fenced(s.execute(a), "schema id");
    let mut b = command(&s, RequestId::random().unwrap(), "a", 1);
    b.root_id = meta::RootId::random().unwrap();
    assert_fenced(s.execute(b), "this shard serves");
    let mut c = command(&s, RequestId::random().unwrap(), "a", 1);
    c.logical_shard_id = meta::LogicalShardId::random().unwrap();
    assert_fenced(s.execute(c), "this shard serves");
}

#[test]
fn commands_may_not_write_reserved_engine_trees() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    for family in [Family::System, Family::RecoveryOutbox] {
        let mut cmd = command(&s, RequestId::random().unwrap(), "a", 1);
        cmd.mutations
            .push(Mutation::put(family, b"x".to_vec(), b"y".to_vec()));
        assert!(matches!(s.execute(cmd), Err(Error::InvalidArgument(_))));
    }
}

#[test]
fn history_projection_lists_versioned_mutations_only() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let mut cmd = command(&s, RequestId::random().unwrap(), "a", 1);
    cmd.mutations.push(Mutation::Delete {
        family: Family::PathCurrent,
        key: vec![7],
    });
    let proj = cmd.history_projection();
    assert_eq!(proj.len(), 2);
    assert_eq!(proj[0].0, Family::WorkspaceCurrent);
    assert_eq!(proj[1], (Family::PathCurrent, &[7u8][..]));
}

#[test]
fn a_fenced_handle_does_not_serve_a_publish_replay() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.create_workspace("w").unwrap();
    let req = meta::PublishRequest {
        request_id: RequestId::random().unwrap(),
        workbench_id: "w".into(),
        path: meta::normalize("a").unwrap(),
        condition: meta::PathCondition::Create,
        revision_id: meta::ArtifactRevisionId::random().unwrap(),
        logical_size: 0,
        body_digest_uri: format!("sha256:{}", "1".repeat(64)),
        content_type: "text/plain".into(),
        producer: "p".into(),
        manifest_id: None,
        manifest: vec![],
        dependency_depth: 0,
        index_fields: Default::default(),
    };
    s.publish(req.clone()).unwrap();
    raw_put(
        &s,
        Family::System,
        KEY_OWNER_EPOCH,
        meta::codec::system::encode_owner_epoch(5),
    );
    assert!(matches!(s.publish(req), Err(Error::Fenced { .. })));
}
