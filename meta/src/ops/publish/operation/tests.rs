//! The Publish operation state machine (docs/metadata-format.md, "Upload And Append"): mutually exclusive
//! CASes, the fenced Finalizing takeover, ledger-driven cleanup and intent binding.

use std::sync::{Arc, Barrier};

use crate::codec::{
    PublishBase, PublishPhase, StagedCleanupState, StagedObject, StagedProviderState,
};
use crate::error::Error;
use crate::ids::{ArtifactRevisionId, OperationId};
use crate::ops::publish::operation::{
    self as ledger, BeginOutcome, DeleteOutcome, PublishIntent, StagedBlock,
};
use crate::ops::publish::PathCondition;
use crate::path::normalize;
use crate::shard::MetaShard;

fn digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!(
        "sha256:{}",
        crate::ids::to_hex(&sha2::Sha256::digest(bytes))
    )
}

fn shard(dir: &std::path::Path) -> MetaShard {
    let s = crate::test_engine::open(dir);
    s.create_workspace("w").unwrap();
    s
}

fn intent(_s: &MetaShard, id: OperationId, path: &str, condition: PathCondition) -> PublishIntent {
    PublishIntent {
        operation_id: id,
        intent_digest: [7; 32],
        workbench_id: "w".into(),
        path: normalize(path).unwrap(),
        condition,
        revision_id: ArtifactRevisionId::random().unwrap(),
        base: None,
        dependency_depth: 0,
        content_type: "text/plain".into(),
        producer: "test".into(),
        manifest_id: None,
        index_fields: Default::default(),
    }
}

fn block(s: &MetaShard, rev: &ArtifactRevisionId, index: u64, bytes: &[u8]) -> StagedBlock {
    StagedBlock {
        object_key: format!(
            "nokv/artifacts/{}/{}/{}/blocks/{index:016x}",
            s.logical_shard_id(),
            s.root_id(),
            rev
        ),
        length: bytes.len() as u64,
        digest_uri: digest(bytes),
    }
}

/// Begin + one staged block, finalized with the body "hello".
fn finalizing(s: &MetaShard, path: &str) -> (OperationId, PublishIntent) {
    let id = OperationId::random().unwrap();
    let it = intent(s, id, path, PathCondition::Create);
    let b = block(s, &it.revision_id, 0, b"hello");
    assert!(matches!(
        ledger::begin(s, &it, &[b]).unwrap(),
        BeginOutcome::Started(_)
    ));
    let op = ledger::finalize(
        s,
        &id,
        5,
        &digest(b"hello"),
        &[(0, StagedProviderState::Uploaded)],
    )
    .unwrap();
    assert_eq!(op.phase, PublishPhase::Finalizing);
    (id, it)
}

#[test]
fn publication_moves_finalizing_to_published_in_the_path_command() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let (id, it) = finalizing(&s, "outputs/a.txt");
    let receipt = ledger::publish_operation(&s, &id).unwrap();
    let op = ledger::get(&s, &id).unwrap().unwrap();
    assert_eq!(op.phase, PublishPhase::Published);
    match op.result {
        crate::codec::OperationResult::Succeeded(r) => {
            assert_eq!(r.commit_version, receipt.commit_version);
            assert_eq!(r.path_generation, Some(receipt.generation));
        }
        other => panic!("unexpected result {other:?}"),
    }
    let read = s.read();
    let ws = read.visible_workspace("w").unwrap();
    let entry = read
        .path_entry(&ws.incarnation, &normalize("outputs/a.txt").unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(entry.artifact_revision_id, it.revision_id);
    assert_eq!(entry.body_digest_uri, digest(b"hello"));
    // Replays return the stored receipt without a second publication.
    let again = ledger::publish_operation(&s, &id).unwrap();
    assert!(again.idempotent_replay);
    assert_eq!(again.generation, receipt.generation);
    assert_eq!(
        ledger::published_receipt(&s, &id)
            .unwrap()
            .unwrap()
            .generation,
        receipt.generation
    );
    // A published operation cannot be aborted.
    assert!(matches!(
        ledger::abort(&s, &id, "late").unwrap_err(),
        Error::OperationState { .. }
    ));
}

#[test]
fn finalize_and_abort_race_has_exactly_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    for round in 0..8 {
        let id = OperationId::random().unwrap();
        let it = intent(&s, id, &format!("outputs/r{round}"), PathCondition::Create);
        let b = block(&s, &it.revision_id, 0, b"x");
        ledger::begin(&s, &it, &[b]).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let (s1, b1) = (s.clone(), barrier.clone());
        let fin = std::thread::spawn(move || {
            b1.wait();
            ledger::finalize(&s1, &id, 1, &digest(b"x"), &[]).is_ok()
        });
        let (s2, b2) = (s.clone(), barrier);
        let abort = std::thread::spawn(move || {
            b2.wait();
            ledger::abort(&s2, &id, "race").is_ok()
        });
        let finalized = fin.join().unwrap();
        let aborted = abort.join().unwrap();
        assert!(
            finalized ^ aborted,
            "finalize {finalized} abort {aborted}: exactly one CAS must win"
        );
        let phase = ledger::get(&s, &id).unwrap().unwrap().phase;
        assert_eq!(
            phase,
            if finalized {
                PublishPhase::Finalizing
            } else {
                PublishPhase::Aborting
            }
        );
    }
}

#[test]
fn finalizing_takeover_and_publication_have_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    // A plain abort cannot claim a Finalizing operation; a takeover with proof can, and the
    // publication then refuses.
    let (id, _) = finalizing(&s, "outputs/t1");
    assert!(matches!(
        ledger::abort(&s, &id, "late").unwrap_err(),
        Error::OperationState { .. }
    ));
    assert_eq!(
        ledger::take_over(&s, &id, "takeover").unwrap().phase,
        PublishPhase::Aborting
    );
    assert!(matches!(
        ledger::publish_operation(&s, &id).unwrap_err(),
        Error::OperationState { .. }
    ));
    let read = s.read();
    let ws = read.visible_workspace("w").unwrap();
    assert!(read
        .path_entry(&ws.incarnation, &normalize("outputs/t1").unwrap())
        .unwrap()
        .is_none());
    // Concurrently: exactly one of publish / takeover succeeds.
    for round in 0..6 {
        let (id, _) = finalizing(&s, &format!("outputs/c{round}"));
        let barrier = Arc::new(Barrier::new(2));
        let (s1, b1) = (s.clone(), barrier.clone());
        let publ = std::thread::spawn(move || {
            b1.wait();
            ledger::publish_operation(&s1, &id).is_ok()
        });
        let (s2, b2) = (s.clone(), barrier);
        let take = std::thread::spawn(move || {
            b2.wait();
            ledger::take_over(&s2, &id, "takeover").is_ok()
        });
        let (p, t) = (publ.join().unwrap(), take.join().unwrap());
        assert!(p ^ t, "publish {p} takeover {t}: exactly one must win");
        let phase = ledger::get(&s, &id).unwrap().unwrap().phase;
        assert_eq!(
            phase,
            if p {
                PublishPhase::Published
            } else {
                PublishPhase::Aborting
            }
        );
    }
}

#[test]
fn an_operation_id_reused_with_another_intent_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let id = OperationId::random().unwrap();
    let it = intent(
        &s,
        id,
        "logs/a",
        PathCondition::Append {
            expected_generation: None,
        },
    );
    ledger::begin(&s, &it, &[]).unwrap();
    assert!(matches!(
        ledger::begin(&s, &it, &[]).unwrap(),
        BeginOutcome::Existing(_)
    ));
    let mut other = it.clone();
    other.intent_digest = [8; 32];
    assert!(matches!(
        ledger::begin(&s, &other, &[]).unwrap_err(),
        Error::OperationIntentMismatch { .. }
    ));
    assert!(matches!(
        ledger::restart(&s, &other, &[]).unwrap_err(),
        Error::OperationIntentMismatch { .. }
    ));
}

#[test]
fn cleanup_deletes_exactly_the_ledger_rows_and_quarantines_ambiguous_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let id = OperationId::random().unwrap();
    let it = intent(&s, id, "outputs/big", PathCondition::Create);
    let blocks: Vec<StagedBlock> = (0..3u64)
        .map(|i| block(&s, &it.revision_id, i, &[i as u8 + 1]))
        .collect();
    ledger::begin(&s, &it, &blocks[..2]).unwrap();
    assert_eq!(
        ledger::stage(
            &s,
            &id,
            &blocks[2..],
            &[
                (0, StagedProviderState::Uploaded),
                (1, StagedProviderState::Ambiguous)
            ]
        )
        .unwrap(),
        2
    );
    assert_eq!(
        ledger::abort(&s, &id, "provider failed").unwrap().phase,
        PublishPhase::Aborting
    );
    // Staging after the abort claim is refused: a late upload joins cleanup instead.
    assert!(matches!(
        ledger::stage(&s, &id, &[], &[(2, StagedProviderState::Uploaded)]).unwrap_err(),
        Error::OperationState { .. }
    ));
    let mut deleted = Vec::new();
    let op = ledger::clean(&s, &id, &mut |row: &StagedObject| {
        deleted.push(row.object_key.clone());
        if row.provider_state == StagedProviderState::Ambiguous {
            DeleteOutcome::Quarantined("ambiguous".into())
        } else {
            DeleteOutcome::Deleted
        }
    })
    .unwrap();
    let keys: Vec<String> = blocks.iter().map(|b| b.object_key.clone()).collect();
    assert_eq!(deleted, keys, "exactly the ledger-owned keys, in order");
    assert_eq!(op.phase, PublishPhase::Quarantined);
    assert!(op.quarantine_evidence.unwrap().contains("ambiguous"));
    let rows = ledger::ledger(&s, &id).unwrap();
    let states: Vec<StagedCleanupState> = rows.iter().map(|(_, r)| r.cleanup_state).collect();
    assert_eq!(
        states,
        vec![
            StagedCleanupState::Deleted,
            StagedCleanupState::Quarantined,
            StagedCleanupState::Deleted
        ]
    );
    // A later pass reconciles only the quarantined row.
    let mut rechecked = Vec::new();
    let op = ledger::clean(&s, &id, &mut |row: &StagedObject| {
        rechecked.push(row.object_key.clone());
        DeleteOutcome::Deleted
    })
    .unwrap();
    assert_eq!(rechecked, vec![keys[1].clone()]);
    assert_eq!(op.phase, PublishPhase::Cleaned);
}

#[test]
fn a_failed_delete_leaves_the_operation_cleaning_for_the_next_pass() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let id = OperationId::random().unwrap();
    let it = intent(&s, id, "outputs/f", PathCondition::Create);
    let b = block(&s, &it.revision_id, 0, b"z");
    ledger::begin(&s, &it, &[b]).unwrap();
    ledger::abort(&s, &id, "x").unwrap();
    let op = ledger::clean(&s, &id, &mut |_| DeleteOutcome::Failed("down".into())).unwrap();
    assert_eq!(op.phase, PublishPhase::Cleaning);
    let rows = ledger::ledger(&s, &id).unwrap();
    assert_eq!(rows[0].1.cleanup_state, StagedCleanupState::DeletePending);
    let op = ledger::clean(&s, &id, &mut |_| DeleteOutcome::Deleted).unwrap();
    assert_eq!(op.phase, PublishPhase::Cleaned);
}

#[test]
fn an_append_publication_reuses_the_frozen_base_rows() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let (id, base_it) = finalizing(&s, "logs/l");
    let base = ledger::publish_operation(&s, &id).unwrap();
    let id2 = OperationId::random().unwrap();
    let mut it = intent(
        &s,
        id2,
        "logs/l",
        PathCondition::Append {
            expected_generation: Some(base.generation),
        },
    );
    it.base = Some(PublishBase {
        revision: base_it.revision_id,
        row_count: 1,
        logical_size: 5,
    });
    it.dependency_depth = 1;
    let b = block(&s, &it.revision_id, 1, b" world");
    ledger::begin(&s, &it, &[b]).unwrap();
    ledger::finalize(&s, &id2, 11, &digest(b"hello world"), &[]).unwrap();
    let r = ledger::publish_operation(&s, &id2).unwrap();
    assert_eq!(r.entry.logical_size, 11);
    assert_eq!(r.entry.dependency_count, 1);
    let rows = s.read().manifest(&it.revision_id).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].physical_owner_revision, base_it.revision_id);
    assert_eq!(rows[1].physical_owner_revision, it.revision_id);
    assert_eq!(rows[1].logical_offset, 5);
}

#[test]
fn a_cleaned_attempt_is_re_begun_under_the_same_id_with_a_fresh_revision() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let id = OperationId::random().unwrap();
    let it = intent(
        &s,
        id,
        "logs/r",
        PathCondition::Append {
            expected_generation: None,
        },
    );
    let b = block(&s, &it.revision_id, 0, b"a");
    ledger::begin(&s, &it, &[b]).unwrap();
    // A published path makes the first attempt lose its generation CAS.
    let (other, _) = finalizing(&s, "logs/r");
    ledger::publish_operation(&s, &other).unwrap();
    ledger::finalize(&s, &id, 1, &digest(b"a"), &[]).unwrap();
    assert!(matches!(
        ledger::publish_operation(&s, &id).unwrap_err(),
        Error::GenerationConflict { .. }
    ));
    ledger::take_over(&s, &id, "lost").unwrap();
    assert_eq!(
        ledger::clean(&s, &id, &mut |_| DeleteOutcome::Deleted)
            .unwrap()
            .phase,
        PublishPhase::Cleaned
    );
    let mut again = it.clone();
    again.revision_id = ArtifactRevisionId::random().unwrap();
    let b2 = block(&s, &again.revision_id, 0, b"a");
    let op = ledger::restart(&s, &again, &[b2]).unwrap();
    assert_eq!(op.phase, PublishPhase::Uploading);
    assert_eq!(op.staged_object_count, 2);
    let rows = ledger::ledger(&s, &id).unwrap();
    assert_eq!(ledger::own_rows(&op, &rows).len(), 1);
    assert_eq!(ledger::own_rows(&op, &rows)[0].0, 1);
}

// ---- pending-operation registry (System rows of non-terminal operations) ----

use crate::codec::system::{pending_operation_key, PENDING_OPERATION_VALUE};
use crate::codec::{Operation, OperationKey, OperationKind};
use crate::command::Mutation;
use crate::family::Family;
use crate::outbox::{self, OutboxHeader, RecoveryRecord};
use crate::store::{Snapshot, TxnStore};

fn registry_key(id: &OperationId) -> Vec<u8> {
    pending_operation_key(OperationKind::Publish, id)
}

fn registered(s: &MetaShard, id: &OperationId) -> bool {
    let snap = s.inner.store.snapshot();
    match snap.get(Family::System, &registry_key(id)).unwrap() {
        None => false,
        Some(v) => {
            assert_eq!(v, PENDING_OPERATION_VALUE.to_vec());
            true
        }
    }
}

/// The RecoveryOutbox record of the last commit (the exact mutations of its batch).
fn last_record(s: &MetaShard) -> RecoveryRecord {
    let lsn = s.recovery_tail().unwrap().applied_lsn;
    let snap = s.inner.store.snapshot();
    let header = snap
        .get(Family::RecoveryOutbox, &outbox::header_key(lsn))
        .unwrap()
        .unwrap();
    let header = OutboxHeader::decode(&header).unwrap();
    let mut record = Vec::new();
    for i in 0..header.chunk_count {
        let chunk = snap
            .get(Family::RecoveryOutbox, &outbox::chunk_key(lsn, i))
            .unwrap()
            .unwrap();
        record.extend_from_slice(outbox::decode_chunk(&chunk).unwrap());
    }
    outbox::decode_record(&record).unwrap()
}

/// What the registry side of one command did.
#[derive(Debug, PartialEq, Eq)]
enum RegistryWrite {
    Inserted,
    Deleted,
    Untouched,
}

/// Checks that the last commit was one command that wrote operation `id` in `phase` and did
/// `registry` to its registry row, and that a snapshot at that commit version shows both.
fn assert_last_command(
    s: &MetaShard,
    id: &OperationId,
    phase: PublishPhase,
    registry: RegistryWrite,
) {
    let rec = last_record(s);
    let op_key = OperationKey {
        root: s.root_id(),
        kind: OperationKind::Publish,
        operation_id: *id,
    }
    .encode();
    let reg = registry_key(id);
    let mut op_phase = None;
    let mut reg_write = RegistryWrite::Untouched;
    for m in &rec.mutations {
        match m {
            Mutation::Put {
                family: Family::Operation,
                key,
                value,
            } if *key == op_key => {
                match Operation::decode_for_kind(OperationKind::Publish, value).unwrap() {
                    Operation::Publish(op) => op_phase = Some(op.phase),
                    other => panic!("unexpected operation {other:?}"),
                }
            }
            Mutation::Put {
                family: Family::System,
                key,
                ..
            } if *key == reg => reg_write = RegistryWrite::Inserted,
            Mutation::Delete {
                family: Family::System,
                key,
            } if *key == reg => reg_write = RegistryWrite::Deleted,
            _ => {}
        }
    }
    assert_eq!(
        op_phase,
        Some(phase),
        "the command writes the operation row"
    );
    assert_eq!(reg_write, registry, "the same command's registry write");
    // Read both rows at the command's commit version.
    let snap = s.inner.store.snapshot();
    assert_eq!(snap.version(), rec.commit_version);
    let now = ledger::get(s, id).unwrap().unwrap();
    assert_eq!(now.phase, phase);
    assert_eq!(
        snap.get(Family::System, &reg).unwrap().is_some(),
        !ledger::is_terminal(phase)
    );
}

fn pending_ids(s: &MetaShard) -> Vec<OperationId> {
    ledger::list_pending(s)
        .unwrap()
        .into_iter()
        .map(|l| l.operation_id)
        .collect()
}

#[test]
fn registry_row_lives_from_begin_to_published_and_leaves_in_the_publication_command() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let id = OperationId::random().unwrap();
    let it = intent(&s, id, "outputs/reg.txt", PathCondition::Create);
    let b = block(&s, &it.revision_id, 0, b"hello");
    ledger::begin(&s, &it, &[b]).unwrap();
    assert_last_command(&s, &id, PublishPhase::Uploading, RegistryWrite::Inserted);
    assert_eq!(pending_ids(&s), vec![id]);
    ledger::stage(&s, &id, &[], &[(0, StagedProviderState::Uploaded)]).unwrap();
    assert!(registered(&s, &id));
    ledger::finalize(&s, &id, 5, &digest(b"hello"), &[]).unwrap();
    assert_last_command(&s, &id, PublishPhase::Finalizing, RegistryWrite::Untouched);
    assert!(registered(&s, &id));
    let receipt = ledger::publish_operation(&s, &id).unwrap();
    assert_last_command(&s, &id, PublishPhase::Published, RegistryWrite::Deleted);
    assert_eq!(last_record(&s).commit_version, receipt.commit_version);
    assert!(!registered(&s, &id));
    assert!(pending_ids(&s).is_empty());
    // The full scan still lists the terminal operation.
    assert_eq!(ledger::list(&s).unwrap().len(), 1);
}

#[test]
fn registry_row_stays_through_aborting_cleaning_quarantined_and_leaves_when_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let id = OperationId::random().unwrap();
    let it = intent(&s, id, "outputs/q", PathCondition::Create);
    let b = block(&s, &it.revision_id, 0, b"q");
    ledger::begin(&s, &it, &[b]).unwrap();
    ledger::stage(&s, &id, &[], &[(0, StagedProviderState::Ambiguous)]).unwrap();
    ledger::abort(&s, &id, "provider failed").unwrap();
    assert_last_command(&s, &id, PublishPhase::Aborting, RegistryWrite::Untouched);
    assert!(registered(&s, &id));
    // A failed DELETE leaves it Cleaning, still registered.
    let op = ledger::clean(&s, &id, &mut |_| DeleteOutcome::Failed("down".into())).unwrap();
    assert_eq!(op.phase, PublishPhase::Cleaning);
    assert!(registered(&s, &id));
    assert_eq!(pending_ids(&s), vec![id]);
    // An ambiguous outcome quarantines it: still registered (a later pass reconciles it).
    let op = ledger::clean(&s, &id, &mut |_| {
        DeleteOutcome::Quarantined("ambiguous".into())
    })
    .unwrap();
    assert_eq!(op.phase, PublishPhase::Quarantined);
    assert_last_command(&s, &id, PublishPhase::Quarantined, RegistryWrite::Untouched);
    assert!(registered(&s, &id));
    assert_eq!(pending_ids(&s), vec![id]);
    // Reconciled -> Cleaned: the registry row leaves in that command.
    let op = ledger::clean(&s, &id, &mut |_| DeleteOutcome::Deleted).unwrap();
    assert_eq!(op.phase, PublishPhase::Cleaned);
    assert_last_command(&s, &id, PublishPhase::Cleaned, RegistryWrite::Deleted);
    assert!(pending_ids(&s).is_empty());
}

#[test]
fn a_direct_cleanup_to_cleaned_and_a_restart_move_the_registry_row_in_their_commands() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let id = OperationId::random().unwrap();
    let it = intent(&s, id, "outputs/c", PathCondition::Create);
    let b = block(&s, &it.revision_id, 0, b"c");
    ledger::begin(&s, &it, &[b]).unwrap();
    ledger::abort(&s, &id, "x").unwrap();
    let op = ledger::clean(&s, &id, &mut |_| DeleteOutcome::Deleted).unwrap();
    assert_eq!(op.phase, PublishPhase::Cleaned);
    assert_last_command(&s, &id, PublishPhase::Cleaned, RegistryWrite::Deleted);
    assert!(!registered(&s, &id));
    let mut again = it.clone();
    again.revision_id = ArtifactRevisionId::random().unwrap();
    let b2 = block(&s, &again.revision_id, 0, b"c");
    ledger::restart(&s, &again, &[b2]).unwrap();
    assert_last_command(&s, &id, PublishPhase::Uploading, RegistryWrite::Inserted);
    assert_eq!(pending_ids(&s), vec![id]);
}

#[test]
fn the_registry_survives_reopen_and_lists_only_non_terminal_operations() {
    let dir = tempfile::tempdir().unwrap();
    let (orphan, done) = {
        let s = shard(dir.path());
        let (done, _) = finalizing(&s, "outputs/done");
        ledger::publish_operation(&s, &done).unwrap();
        let orphan = OperationId::random().unwrap();
        let it = intent(&s, orphan, "outputs/orphan", PathCondition::Create);
        let b = block(&s, &it.revision_id, 0, b"o");
        ledger::begin(&s, &it, &[b]).unwrap();
        (orphan, done)
    };
    let s = crate::test_engine::open(dir.path());
    let pending = ledger::list_pending(&s).unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].operation_id, orphan);
    assert_eq!(pending[0].operation.phase, PublishPhase::Uploading);
    let all: Vec<OperationId> = ledger::list(&s)
        .unwrap()
        .into_iter()
        .map(|l| l.operation_id)
        .collect();
    assert!(all.contains(&done) && all.contains(&orphan));
}

#[test]
fn commands_may_write_registry_rows_but_no_other_system_key() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    // A registry key naming an operation of an unknown kind is not a registry key.
    let mut bad = registry_key(&OperationId([1; 16]));
    bad[17] = 0xff;
    for key in [bad, b"pending_operation".to_vec(), b"lease_clock".to_vec()] {
        let mut cmd = s.command_header(
            crate::ids::RequestId::random().unwrap(),
            [1; 32],
            s.inner.store.version(),
            crate::codec::CommandResult::Applied { value: 0 },
        );
        cmd.mutations
            .push(Mutation::put(Family::System, key, vec![0, 1]));
        assert!(matches!(s.execute(cmd), Err(Error::InvalidArgument(_))));
    }
}

#[test]
fn sealed_publication_moves_uploading_to_published_in_one_command() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let id = OperationId::random().unwrap();
    let it = intent(&s, id, "outputs/sealed.txt", PathCondition::Create);
    let b = block(&s, &it.revision_id, 0, b"hello");
    ledger::begin(&s, &it, &[b]).unwrap();
    let before = s.version().unwrap();
    let receipt = ledger::finalize_and_publish(
        &s,
        &id,
        5,
        &digest(b"hello"),
        &[(0, StagedProviderState::Uploaded)],
        &Default::default(),
    )
    .unwrap();
    // One command: the commit version is the next one, and it is the path's generation.
    assert_eq!(s.version().unwrap(), before + 1);
    assert_eq!(receipt.commit_version, before + 1);
    assert_eq!(receipt.generation, before + 1);
    assert!(!receipt.idempotent_replay);
    let op = ledger::get(&s, &id).unwrap().unwrap();
    assert_eq!(op.phase, PublishPhase::Published);
    assert_eq!(op.expected_length, 5);
    assert_eq!(
        op.expected_digest_uri.as_deref(),
        Some(digest(b"hello").as_str())
    );
    // The same command recorded the row's provider state and left the pending registry.
    let rows = ledger::ledger(&s, &id).unwrap();
    assert_eq!(rows[0].1.provider_state, StagedProviderState::Uploaded);
    assert!(ledger::list_pending(&s)
        .unwrap()
        .iter()
        .all(|o| o.operation_id != id));
    let read = s.read();
    let ws = read.visible_workspace("w").unwrap();
    let entry = read
        .path_entry(&ws.incarnation, &normalize("outputs/sealed.txt").unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(entry.artifact_revision_id, it.revision_id);
    assert_eq!(entry.logical_size, 5);
    // A retry (lost response) returns the stored receipt and writes nothing.
    let again =
        ledger::finalize_and_publish(&s, &id, 5, &digest(b"hello"), &[], &Default::default())
            .unwrap();
    assert!(again.idempotent_replay);
    assert_eq!(again.generation, receipt.generation);
    assert_eq!(s.version().unwrap(), before + 1);
}

#[test]
fn a_refused_sealed_publication_writes_nothing_and_leaves_the_operation_uploading() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    // The path is taken first.
    let (first, _) = finalizing(&s, "outputs/taken.txt");
    ledger::publish_operation(&s, &first).unwrap();
    let id = OperationId::random().unwrap();
    let it = intent(&s, id, "outputs/taken.txt", PathCondition::Create);
    let b = block(&s, &it.revision_id, 0, b"other");
    ledger::begin(&s, &it, &[b]).unwrap();
    let before = s.version().unwrap();
    let err = ledger::finalize_and_publish(
        &s,
        &id,
        5,
        &digest(b"other"),
        &[(0, StagedProviderState::Uploaded)],
        &Default::default(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::PathAlreadyExists), "{err:?}");
    assert_eq!(s.version().unwrap(), before, "nothing was committed");
    let op = ledger::get(&s, &id).unwrap().unwrap();
    assert_eq!(op.phase, PublishPhase::Uploading);
    assert_eq!(op.expected_digest_uri, None);
    // The caller aborts it like any failed upload; the ledger still owns the object.
    let aborted = ledger::abort(&s, &id, "refused").unwrap();
    assert_eq!(aborted.phase, PublishPhase::Aborting);
}

#[test]
fn sealed_publication_and_abort_race_has_exactly_one_winner() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    for round in 0..8 {
        let id = OperationId::random().unwrap();
        let it = intent(&s, id, &format!("outputs/s{round}"), PathCondition::Create);
        let b = block(&s, &it.revision_id, 0, b"x");
        ledger::begin(&s, &it, &[b]).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let (s1, b1) = (s.clone(), barrier.clone());
        let publish = std::thread::spawn(move || {
            b1.wait();
            ledger::finalize_and_publish(&s1, &id, 1, &digest(b"x"), &[], &Default::default())
                .is_ok()
        });
        let (s2, b2) = (s.clone(), barrier);
        let abort = std::thread::spawn(move || {
            b2.wait();
            ledger::abort(&s2, &id, "race").is_ok()
        });
        let (p, a) = (publish.join().unwrap(), abort.join().unwrap());
        assert!(p ^ a, "round {round}: publish {p}, abort {a}");
        let phase = ledger::get(&s, &id).unwrap().unwrap().phase;
        assert_eq!(
            phase,
            if p {
                PublishPhase::Published
            } else {
                PublishPhase::Aborting
            }
        );
    }
}

#[test]
fn sealed_publication_of_a_finalizing_operation_publishes_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let (id, it) = finalizing(&s, "outputs/f.txt");
    let receipt =
        ledger::finalize_and_publish(&s, &id, 5, &digest(b"hello"), &[], &Default::default())
            .unwrap();
    assert!(!receipt.idempotent_replay);
    assert_eq!(
        ledger::get(&s, &id).unwrap().unwrap().phase,
        PublishPhase::Published
    );
    let read = s.read();
    let ws = read.visible_workspace("w").unwrap();
    let entry = read
        .path_entry(&ws.incarnation, &normalize("outputs/f.txt").unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(entry.artifact_revision_id, it.revision_id);
}

fn reserved(s: &MetaShard, n: usize) -> Vec<crate::codec::ReservedRevision> {
    (0..n)
        .map(|_| {
            let rev = ArtifactRevisionId::random().unwrap();
            crate::codec::ReservedRevision {
                revision: rev,
                object_key: block(s, &rev, 0, b"k").object_key,
            }
        })
        .collect()
}

#[test]
fn a_reserved_publication_is_one_command_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let res = ledger::reserve(&s, reserved(&s, 4), &[]).unwrap();
    assert_eq!(ledger::list_reservations(&s).unwrap(), vec![res.clone()]);
    // fsck's ownership sees every reserved key.
    let owned = crate::ops::fsck::object_keys(&s).unwrap().owned;
    assert!(res.revisions.iter().all(|r| owned.contains(&r.object_key)));

    let id = OperationId::random().unwrap();
    let mut it = intent(&s, id, "outputs/r.txt", PathCondition::Create);
    it.revision_id = res.revisions[1].revision;
    let b = block(&s, &it.revision_id, 0, b"hello");
    let before = s.version().unwrap();
    let receipt = ledger::publish_reserved(&s, &res.id, &it, &b, &Default::default()).unwrap();
    assert_eq!(s.version().unwrap(), before + 1, "one command");
    assert!(!receipt.idempotent_replay);
    let op = ledger::get(&s, &id).unwrap().unwrap();
    assert_eq!(op.phase, PublishPhase::Published);
    assert_eq!(op.expected_length, 5);
    let rows = ledger::ledger(&s, &id).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].1.provider_state, StagedProviderState::Uploaded);
    assert!(s.read().revision(&it.revision_id).unwrap().is_some());
    assert!(s
        .read()
        .revision(&res.revisions[0].revision)
        .unwrap()
        .is_none());
    assert!(ledger::list_pending(&s).unwrap().is_empty());
    let read = s.read();
    let ws = read.visible_workspace("w").unwrap();
    let entry = read
        .path_entry(&ws.incarnation, &normalize("outputs/r.txt").unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(entry.artifact_revision_id, it.revision_id);
    assert_eq!(entry.body_digest_uri, digest(b"hello"));
    // A retry after a lost response returns the stored receipt.
    let again = ledger::publish_reserved(&s, &res.id, &it, &b, &Default::default()).unwrap();
    assert!(again.idempotent_replay);
    assert_eq!(again.generation, receipt.generation);
    assert_eq!(s.version().unwrap(), before + 1);
}

#[test]
fn a_reserved_publication_needs_its_reservation_and_commits_nothing_when_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let res = ledger::reserve(&s, reserved(&s, 2), &[]).unwrap();
    // A revision the reservation does not hold.
    let id = OperationId::random().unwrap();
    let it = intent(&s, id, "outputs/x.txt", PathCondition::Create);
    let b = block(&s, &it.revision_id, 0, b"x");
    assert!(matches!(
        ledger::publish_reserved(&s, &res.id, &it, &b, &Default::default()).unwrap_err(),
        Error::InvalidArgument(_)
    ));
    // A refusal (the path is taken) commits nothing.
    let (first, _) = finalizing(&s, "outputs/taken.txt");
    ledger::publish_operation(&s, &first).unwrap();
    let mut it = intent(&s, id, "outputs/taken.txt", PathCondition::Create);
    it.revision_id = res.revisions[0].revision;
    let b = block(&s, &it.revision_id, 0, b"x");
    let before = s.version().unwrap();
    assert!(matches!(
        ledger::publish_reserved(&s, &res.id, &it, &b, &Default::default()).unwrap_err(),
        Error::PathAlreadyExists
    ));
    assert_eq!(s.version().unwrap(), before);
    assert!(ledger::get(&s, &id).unwrap().is_none());
    // A retired (or swept) reservation can no longer publish.
    ledger::retire(&s, &[res.id]).unwrap();
    assert!(ledger::list_reservations(&s).unwrap().is_empty());
    let mut it = intent(&s, id, "outputs/late.txt", PathCondition::Create);
    it.revision_id = res.revisions[1].revision;
    let b = block(&s, &it.revision_id, 0, b"x");
    assert!(matches!(
        ledger::publish_reserved(&s, &res.id, &it, &b, &Default::default()).unwrap_err(),
        Error::OperationState { .. }
    ));
    // Retiring twice is a no-op; a new reservation may retire old ones in its command.
    ledger::retire(&s, &[res.id]).unwrap();
    let a = ledger::reserve(&s, reserved(&s, 1), &[]).unwrap();
    let b2 = ledger::reserve(&s, reserved(&s, 1), &[a.id]).unwrap();
    assert_eq!(ledger::list_reservations(&s).unwrap(), vec![b2]);
    assert!(matches!(
        ledger::reserve(&s, Vec::new(), &[]).unwrap_err(),
        Error::InvalidArgument(_)
    ));
}
