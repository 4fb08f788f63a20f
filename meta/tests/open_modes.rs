//! Writer and read-only handles (issue "reads do not write"):
//! - opening an existing store writes nothing, for a writer handle as for a read-only one;
//! - a writer handle advances the owner epoch (one commit, with its RecoveryOutbox record) right
//!   before its first write, exactly once;
//! - a read-only handle takes no lock, reads the state as of its open, and refuses every write
//!   with `Error::ReadOnly`, writing nothing.

use std::path::Path;

use meta::outbox::{chunk_key, decode_chunk, decode_record, RecoveryEntry};
use meta::{
    normalize, ArtifactRevisionId, Error, MetaShard, OpenOptions, PathCondition, PublishRequest,
    RequestId,
};

#[path = "fixtures/files.rs"]
mod files;
use files::files;

fn open(dir: &Path) -> MetaShard {
    MetaShard::open(dir, OpenOptions::default()).unwrap()
}

fn open_ro(dir: &Path) -> MetaShard {
    MetaShard::open_read_only(dir, OpenOptions::default()).unwrap()
}

fn persisted_epoch(s: &MetaShard) -> u64 {
    let sys = s
        .holt_db()
        .expect("a holt-backed shard")
        .tree("system")
        .unwrap();
    let b = s
        .holt_db()
        .expect("a holt-backed shard")
        .view()
        .get(&sys, meta::codec::system::KEY_OWNER_EPOCH)
        .unwrap()
        .unwrap();
    meta::codec::system::decode_owner_epoch(&b).unwrap()
}

fn record(s: &MetaShard, lsn: u64) -> meta::outbox::RecoveryRecord {
    let t = s
        .holt_db()
        .expect("a holt-backed shard")
        .tree("recovery_outbox")
        .unwrap();
    let chunk = s
        .holt_db()
        .expect("a holt-backed shard")
        .view()
        .get(&t, &chunk_key(lsn, 0))
        .unwrap()
        .unwrap();
    decode_record(decode_chunk(&chunk).unwrap()).unwrap()
}

fn request(wb: &str, path: &str) -> PublishRequest {
    let rev = ArtifactRevisionId::random().unwrap();
    PublishRequest {
        request_id: RequestId::random().unwrap(),
        workbench_id: wb.into(),
        path: normalize(path).unwrap(),
        condition: PathCondition::Create,
        revision_id: rev,
        logical_size: 0,
        body_digest_uri: format!("sha256:{}", "0".repeat(64)),
        content_type: "text/plain".into(),
        producer: "open-modes-test".into(),
        manifest_id: None,
        manifest: Vec::new(),
        dependency_depth: 0,
        index_fields: Default::default(),
    }
}

/// A store with one workbench `w` and one file, closed.
fn populated(dir: &Path) {
    let s = open(dir);
    s.create_workspace("w").unwrap();
    s.publish(request("w", "a.txt")).unwrap();
}

#[test]
fn a_writer_open_that_only_reads_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    let before = files(dir.path());
    {
        let s = open(dir.path());
        assert_eq!(
            s.owner_epoch(),
            2,
            "the epoch this handle would write under"
        );
        assert_eq!(persisted_epoch(&s), 1, "not persisted before a write");
        let r = s.read();
        let ws = r.visible_workspace("w").unwrap();
        assert!(r
            .path_entry(&ws.incarnation, &normalize("a.txt").unwrap())
            .unwrap()
            .is_some());
        s.verify_recovery_outbox().unwrap();
    }
    assert_eq!(
        files(dir.path()),
        before,
        "an open that only read changed a file"
    );
}

#[test]
fn the_first_write_advances_the_owner_epoch_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    let s = open(dir.path());
    let tail = s.recovery_tail().unwrap();
    let v = s.holt_db().expect("a holt-backed shard").version();
    s.create_workspace("x").unwrap();
    assert_eq!(persisted_epoch(&s), 2);
    assert_eq!(
        s.holt_db().expect("a holt-backed shard").version(),
        v + 2,
        "epoch advance + the command"
    );
    assert_eq!(s.recovery_tail().unwrap().applied_lsn, tail.applied_lsn + 2);
    assert_eq!(
        record(&s, tail.applied_lsn + 1).entry,
        RecoveryEntry::OwnerEpochAdvance {
            previous_epoch: 1,
            owner_epoch: 2
        }
    );
    assert!(matches!(
        record(&s, tail.applied_lsn + 2).entry,
        RecoveryEntry::MetadataCommand { owner_epoch: 2, .. }
    ));
    // Later writes do not advance again.
    s.publish(request("x", "b.txt")).unwrap();
    assert_eq!(persisted_epoch(&s), 2);
    assert_eq!(s.holt_db().expect("a holt-backed shard").version(), v + 3);
    assert_eq!(
        s.verify_recovery_outbox().unwrap().last_lsn,
        tail.applied_lsn + 3
    );
    drop(s);
    // The next writer handle writes under epoch 3.
    let s = open(dir.path());
    assert_eq!(s.owner_epoch(), 3);
    s.publish(request("x", "c.txt")).unwrap();
    assert_eq!(persisted_epoch(&s), 3);
}

#[test]
fn an_idempotent_create_of_an_existing_workbench_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    let s = open(dir.path());
    let v = s.holt_db().expect("a holt-backed shard").version();
    let out = s.create_workspace("w").unwrap();
    assert!(!out.created);
    assert_eq!(s.holt_db().expect("a holt-backed shard").version(), v);
    assert_eq!(persisted_epoch(&s), 1);
}

#[test]
fn a_writer_fenced_by_a_newer_owner_before_its_first_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    let s = open(dir.path());
    // Another owner advanced the epoch (written straight through holt).
    let sys = s
        .holt_db()
        .expect("a holt-backed shard")
        .tree("system")
        .unwrap();
    let mut b = holt::Batch::new();
    b.put(
        &sys,
        meta::codec::system::KEY_OWNER_EPOCH.to_vec(),
        meta::codec::system::encode_owner_epoch(7),
    );
    s.holt_db().expect("a holt-backed shard").commit(b).unwrap();
    let v = s.holt_db().expect("a holt-backed shard").version();
    match s.create_workspace("y") {
        Err(Error::Fenced { reason }) => assert!(reason.contains("advanced the owner epoch to 7")),
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert_eq!(s.holt_db().expect("a holt-backed shard").version(), v);
}

#[test]
fn a_read_only_handle_reads_the_state_as_of_its_open() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    let writer = open(dir.path());
    let ro = open_ro(dir.path());
    assert!(ro.is_read_only() && !writer.is_read_only());
    assert_eq!(ro.root_id(), writer.root_id());
    assert_eq!(ro.owner_epoch(), 1);
    writer.create_workspace("later").unwrap();
    assert!(ro.read().visible_workspace("w").is_ok());
    assert!(matches!(
        ro.read().visible_workspace("later"),
        Err(Error::WorkspaceNotFound { .. })
    ));
    let ro2 = open_ro(dir.path());
    assert!(ro2.read().visible_workspace("later").is_ok());
    // Readers hold no lock: a second writer is refused only by the first writer.
    drop(writer);
    let w2 = open(dir.path());
    w2.create_workspace("third").unwrap();
    assert!(ro2.read().visible_workspace("third").is_err());
}

#[test]
fn every_write_through_a_read_only_handle_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    let before = files(dir.path());
    {
        let ro = open_ro(dir.path());
        let v = ro.holt_db().expect("a holt-backed shard").version();
        assert!(matches!(ro.create_workspace("n"), Err(Error::ReadOnly)));
        assert!(matches!(
            ro.publish(request("w", "z.txt")),
            Err(Error::ReadOnly)
        ));
        let cmd = ro.command_header(
            RequestId::random().unwrap(),
            [0; 32],
            v,
            meta::CommandResult::Applied { value: 1 },
        );
        assert!(matches!(ro.execute(cmd), Err(Error::ReadOnly)));
        assert!(matches!(
            ro.maintain_recovery_outbox(),
            Err(Error::ReadOnly)
        ));
        assert!(matches!(
            meta::ops::lease_clock::observe(&ro, 1_000, 0),
            Err(Error::ReadOnly)
        ));
        // Even a raw engine write is refused, typed the same way.
        let sys = ro
            .holt_db()
            .expect("a holt-backed shard")
            .tree("system")
            .unwrap();
        let mut b = holt::Batch::new();
        b.put(&sys, b"x".to_vec(), b"y".to_vec());
        assert!(matches!(
            ro.holt_db()
                .expect("a holt-backed shard")
                .commit(b)
                .map_err(Error::from),
            Err(Error::ReadOnly)
        ));
        assert!(matches!(
            ro.holt_db()
                .expect("a holt-backed shard")
                .set_history_floor(1)
                .map_err(Error::from),
            Err(Error::ReadOnly)
        ));
        assert_eq!(ro.holt_db().expect("a holt-backed shard").version(), v);
        ro.verify_recovery_outbox().unwrap();
    }
    assert_eq!(files(dir.path()), before);
}

#[test]
fn a_read_only_open_refuses_a_store_that_was_never_initialized() {
    let dir = tempfile::tempdir().unwrap();
    drop(holt::Db::open(dir.path(), holt::Options::default()).unwrap());
    let before = files(dir.path());
    assert!(matches!(
        MetaShard::open_read_only(dir.path(), OpenOptions::default()),
        Err(Error::SchemaMismatch {
            kind: meta::schema::SchemaMismatchKind::MissingMarker,
            ..
        })
    ));
    assert_eq!(files(dir.path()), before);
    let missing = dir.path().join("absent");
    assert!(matches!(
        MetaShard::open_read_only(&missing, OpenOptions::default()),
        Err(Error::Storage(holt::Error::Io { .. }))
    ));
    assert!(!missing.exists());
}

#[test]
fn a_read_only_open_checks_the_presentation_root() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    let opts = OpenOptions {
        presentation_root: Some("/elsewhere".into()),
        ..OpenOptions::default()
    };
    assert!(matches!(
        MetaShard::open_read_only(dir.path(), opts),
        Err(Error::PresentationRootMismatch { .. })
    ));
}
