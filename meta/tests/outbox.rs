//! RecoveryOutbox (docs/metadata-format.md): every write entrypoint appends one hash-chained record in its own
//! holt batch, and reopen refuses — naming the LSN, leaving the files byte-identical — a store
//! whose outbox has a gap, a broken chain, a missing/orphan/truncated chunk, a foreign row or a
//! tail that disagrees with System.

use std::path::Path;

#[path = "fixtures/engine.rs"]
mod engine;

use meta::store::TxnStore;

use meta::codec::system::{RecoveryTail, KEY_RECOVERY_TAIL};
use meta::codec::{command_dedupe, CommandDedupe};
use meta::outbox::{
    chunk_key, decode_chunk, decode_record, encode_chunk, header_key, OutboxHeader, RecoveryEntry,
    CHUNK_BYTES,
};
use meta::schema::Family;
use meta::{
    normalize, ArtifactRevisionId, Error, ManifestRow, MetaShard, OpenOptions, PathCondition,
    PublishRequest, RequestId,
};

#[path = "fixtures/files.rs"]
mod files;
use files::files;

fn open(dir: &Path) -> MetaShard {
    engine::open(dir)
}

fn digest(tag: &str) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(tag.as_bytes());
    format!(
        "sha256:{}",
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

fn request(s: &MetaShard, path: &str, rows: u64) -> PublishRequest {
    let rev = ArtifactRevisionId::random().unwrap();
    PublishRequest {
        request_id: RequestId::random().unwrap(),
        workbench_id: "w".into(),
        path: normalize(path).unwrap(),
        condition: PathCondition::Create,
        revision_id: rev,
        logical_size: rows * 4,
        body_digest_uri: digest(path),
        content_type: "text/plain".into(),
        producer: "outbox-test".into(),
        manifest_id: None,
        manifest: (0..rows)
            .map(|i| ManifestRow {
                object_index: i,
                physical_owner_revision: rev,
                physical_object_index: i,
                object_key: format!(
                    "nokv/artifacts/{}/{}/{}/blocks/{i:016x}",
                    s.logical_shard_id(),
                    s.root_id(),
                    rev
                ),
                logical_offset: i * 4,
                object_offset: 0,
                length: 4,
                digest_uri: digest(&format!("{path}-{i}")),
                append_segment: None,
            })
            .collect(),
        dependency_depth: 0,
        index_fields: Default::default(),
    }
}

/// A store with init (LSN 1), a workspace (LSN 2) and two publications (LSN 3, 4), closed.
fn populated(dir: &Path) -> RecoveryTail {
    let s = open(dir);
    s.create_workspace("w").unwrap();
    s.publish(request(&s, "a", 2)).unwrap();
    s.publish(request(&s, "b", 3)).unwrap();
    s.recovery_tail().unwrap()
}

/// Reads every (key, value) of the outbox straight from the TxnStore.
fn outbox_rows(store: &meta::ShardStore) -> Vec<(Vec<u8>, Vec<u8>)> {
    use meta::store::Snapshot;
    store
        .snapshot()
        .rows(Family::RecoveryOutbox, &[], "recovery_outbox")
        .unwrap()
}

/// A read view of a store's rows (the tamper helpers' stand-in for a holt view).
struct RawView(meta::store::ShardSnapshot);

/// Raw puts and deletes applied in one TxnStore write (the stand-in for a holt batch).
#[derive(Default)]
struct RawBatch(Vec<meta::command::Mutation>);

impl RawBatch {
    fn put(&mut self, family: &Family, key: Vec<u8>, value: Vec<u8>) {
        self.0
            .push(meta::command::Mutation::put(*family, key, value));
    }
    fn delete(&mut self, family: &Family, key: Vec<u8>) {
        self.0.push(meta::command::Mutation::Delete {
            family: *family,
            key,
        });
    }
}

/// Applies one raw change to the outbox of the closed shard in `dir`, past the schema gate.
fn tamper(dir: &Path, f: impl FnOnce(&RawView, &Family, &mut RawBatch)) {
    use meta::store::CheckedWrite;
    let store = engine::raw_store(dir);
    let view = RawView(store.snapshot());
    let mut b = RawBatch::default();
    f(&view, &Family::RecoveryOutbox, &mut b);
    store
        .write(CheckedWrite {
            read_version: None,
            predicates: Vec::new(),
            mutations: b.0,
        })
        .expect("raw write");
}

fn get(db: &RawView, t: &Family, key: &[u8]) -> Vec<u8> {
    use meta::store::Snapshot;
    db.0.get(*t, key).unwrap().unwrap()
}

/// Reopen must fail with RecoveryOutboxCorrupt at `lsn`, a message naming it, and no change.
fn assert_refused_at(dir: &Path, lsn: u64, needle: &str) {
    let before = files(dir);
    match engine::open_with(dir, OpenOptions::default()) {
        Err(e @ Error::RecoveryOutboxCorrupt { .. }) => {
            let msg = e.to_string();
            let Error::RecoveryOutboxCorrupt { lsn: got, reason } = e else {
                unreachable!()
            };
            assert_eq!(got, lsn, "{msg}");
            assert!(msg.contains(&format!("LSN {lsn}")), "{msg}");
            assert!(reason.contains(needle), "{reason:?} lacks {needle:?}");
        }
        Err(other) => panic!("expected RecoveryOutboxCorrupt at {lsn}, got {other:?}"),
        Ok(_) => panic!("expected RecoveryOutboxCorrupt at {lsn}, but the store opened"),
    }
    assert_eq!(
        files(dir),
        before,
        "a refused store must stay byte-identical"
    );
}

#[test]
fn every_command_appends_one_chained_record_bound_to_its_dedupe_row() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    assert_eq!(s.recovery_tail().unwrap().applied_lsn, 1);
    s.create_workspace("w").unwrap();
    assert_eq!(s.recovery_tail().unwrap().applied_lsn, 2);
    let req = request(&s, "outputs/x", 3);
    let request_id = req.request_id;
    let receipt = s.publish(req).unwrap();
    let tail = s.recovery_tail().unwrap();
    assert_eq!(tail.applied_lsn, 3);
    let summary = s.verify_recovery_outbox().unwrap();
    assert_eq!(summary.records, 3);

    let db = &RawView(s.store().snapshot());
    let t = Family::RecoveryOutbox;
    let header = OutboxHeader::decode(&get(db, &t, &header_key(3))).unwrap();
    assert_eq!(header.chain_digest, tail.chain_digest);
    let prev = OutboxHeader::decode(&get(db, &t, &header_key(2))).unwrap();
    assert_eq!(header.previous_digest, prev.chain_digest);
    let mut record = Vec::new();
    for i in 0..header.chunk_count {
        record.extend_from_slice(decode_chunk(&get(db, &t, &chunk_key(3, i))).unwrap());
    }
    let rec = decode_record(&record).unwrap();
    assert_eq!(rec.recovery_lsn, 3);
    assert_eq!(rec.commit_version, receipt.commit_version);
    let RecoveryEntry::MetadataCommand {
        request_id: rid,
        read_version,
        result,
        ..
    } = &rec.entry
    else {
        panic!("expected a MetadataCommand record, got {:?}", rec.entry)
    };
    assert_eq!(*rid, request_id);
    assert_eq!(*read_version + 1, receipt.commit_version);
    assert!(
        matches!(result, meta::CommandResult::Published { generation, .. } if *generation == receipt.generation)
    );
    let families: Vec<Family> = rec.mutations.iter().map(|m| m.family()).collect();
    assert!(families.contains(&Family::PathCurrent));
    assert_eq!(
        families
            .iter()
            .filter(|f| **f == Family::ArtifactManifest)
            .count(),
        3
    );
    assert!(!families.contains(&Family::RecoveryOutbox));

    // CommandDedupe v2 binds the result to the recovery LSN.
    let dedupe_tree = Family::CommandDedupe;
    let dedupe = CommandDedupe::decode(&get(
        db,
        &dedupe_tree,
        &command_dedupe::key(&s.root_id(), &request_id),
    ))
    .unwrap();
    assert_eq!(dedupe.recovery_lsn, Some(3));
    assert_eq!(dedupe.commit_version, receipt.commit_version);
}

#[test]
fn the_first_write_after_a_reopen_appends_an_owner_epoch_advance_record() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let s = open(dir.path());
    assert_eq!(s.owner_epoch(), 2);
    assert_eq!(
        s.recovery_tail().unwrap().applied_lsn,
        1,
        "the open wrote nothing"
    );
    s.prepare_write().unwrap();
    let tail = s.recovery_tail().unwrap();
    assert_eq!(tail.applied_lsn, 2);
    let db = &RawView(s.store().snapshot());
    let t = Family::RecoveryOutbox;
    let rec = decode_record(decode_chunk(&get(db, &t, &chunk_key(2, 0))).unwrap()).unwrap();
    assert_eq!(
        rec.entry,
        RecoveryEntry::OwnerEpochAdvance {
            previous_epoch: 1,
            owner_epoch: 2
        }
    );
    assert_eq!(rec.commit_version, engine::version(&s));
    let first = decode_record(decode_chunk(&get(db, &t, &chunk_key(1, 0))).unwrap()).unwrap();
    assert!(matches!(
        first.entry,
        RecoveryEntry::StoreInitialization {
            owner_epoch: 1,
            placement_generation: 1,
            ..
        }
    ));
    assert_eq!(first.commit_version, 1);
}

#[test]
fn a_record_larger_than_one_chunk_is_split_and_verifies_on_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        s.create_workspace("w").unwrap();
        s.publish(request(&s, "big", 2_000)).unwrap();
        let db = &RawView(s.store().snapshot());
        let t = Family::RecoveryOutbox;
        let header = OutboxHeader::decode(&get(db, &t, &header_key(3))).unwrap();
        assert!(header.record_len > CHUNK_BYTES as u64);
        assert!(header.chunk_count >= 2);
    }
    // A reopen that only reads appends nothing.
    let s = open(dir.path());
    assert_eq!(s.verify_recovery_outbox().unwrap().records, 3);
}

#[test]
fn flipping_a_byte_in_a_chunk_fails_reopen_naming_the_lsn() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    tamper(dir.path(), |db, t, b| {
        let mut v = get(db, t, &chunk_key(3, 0));
        let last = v.len() - 1;
        v[last] ^= 0x01;
        b.put(t, chunk_key(3, 0), v);
    });
    assert_refused_at(dir.path(), 3, "chain digest mismatch");
}

#[test]
fn truncating_a_chunk_fails_reopen_naming_the_lsn() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    tamper(dir.path(), |db, t, b| {
        let mut v = get(db, t, &chunk_key(4, 0));
        v.truncate(v.len() - 5);
        b.put(t, chunk_key(4, 0), v);
    });
    assert_refused_at(dir.path(), 4, "malformed chunk 0");
}

#[test]
fn a_consistently_reframed_short_chunk_still_fails_strict_framing() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    tamper(dir.path(), |db, t, b| {
        let v = get(db, t, &chunk_key(2, 0));
        let payload = decode_chunk(&v).unwrap();
        b.put(
            t,
            chunk_key(2, 0),
            encode_chunk(&payload[..payload.len() - 1]),
        );
    });
    assert_refused_at(dir.path(), 2, "strict framing");
}

#[test]
fn a_missing_chunk_fails_reopen_naming_the_lsn() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    tamper(dir.path(), |_, t, b| b.delete(t, chunk_key(3, 0)));
    assert_refused_at(dir.path(), 3, "chunk 0 of 1 is missing");
}

#[test]
fn an_orphan_chunk_fails_reopen_naming_its_lsn() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    tamper(dir.path(), |db, t, b| {
        let v = get(db, t, &chunk_key(2, 0));
        b.put(t, chunk_key(2, 1), v);
    });
    assert_refused_at(dir.path(), 2, "orphan chunk 1 of LSN 2");
}

#[test]
fn a_chunk_beyond_the_last_header_is_an_orphan() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    tamper(dir.path(), |db, t, b| {
        let v = get(db, t, &chunk_key(4, 0));
        b.put(t, chunk_key(9, 0), v);
    });
    assert_refused_at(dir.path(), 9, "orphan chunk 0 of LSN 9");
}

#[test]
fn a_missing_header_is_a_gap_in_the_lsn_sequence() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    tamper(dir.path(), |_, t, b| b.delete(t, header_key(2)));
    assert_refused_at(dir.path(), 2, "LSN 2 is missing");
}

#[test]
fn a_corrupted_previous_digest_breaks_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    tamper(dir.path(), |db, t, b| {
        let mut h = OutboxHeader::decode(&get(db, t, &header_key(3))).unwrap();
        h.previous_digest[0] ^= 0xff;
        b.put(t, header_key(3), h.encode());
    });
    assert_refused_at(dir.path(), 3, "previous digest");
}

#[test]
fn dropping_the_last_record_disagrees_with_the_system_tail() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    tamper(dir.path(), |_, t, b| {
        b.delete(t, header_key(4));
        b.delete(t, chunk_key(4, 0));
    });
    assert_refused_at(dir.path(), 4, "System recovery tail names LSN 4");
}

#[test]
fn a_record_beyond_the_system_tail_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tail = populated(dir.path());
    tamper(dir.path(), |db, t, b| {
        let h3 = OutboxHeader::decode(&get(db, t, &header_key(3))).unwrap();
        b.put(
            &Family::System,
            KEY_RECOVERY_TAIL.to_vec(),
            RecoveryTail {
                applied_lsn: tail.applied_lsn - 1,
                chain_digest: h3.chain_digest,
            }
            .encode(),
        );
    });
    assert_refused_at(dir.path(), 4, "beyond the System recovery tail");
}

#[test]
fn a_tail_digest_that_differs_from_the_chain_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut tail = populated(dir.path());
    tail.chain_digest[5] ^= 0x10;
    tamper(dir.path(), |_, _, b| {
        b.put(&Family::System, KEY_RECOVERY_TAIL.to_vec(), tail.encode());
    });
    assert_refused_at(dir.path(), 4, "tail digest differs");
}

#[test]
fn a_foreign_row_in_the_outbox_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    tamper(dir.path(), |_, t, b| b.put(t, vec![0x02, 0x00], vec![1]));
    assert_refused_at(dir.path(), 5, "foreign row 0200");
}

#[test]
fn a_malformed_header_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    populated(dir.path());
    tamper(dir.path(), |_, t, b| b.put(t, vec![0x00, 0xff], vec![1]));
    assert_refused_at(dir.path(), 5, "malformed header key");
}

#[test]
fn the_untampered_store_reopens_and_keeps_appending() {
    let dir = tempfile::tempdir().unwrap();
    let tail = populated(dir.path());
    let rows_before = outbox_rows(&engine::raw_store(dir.path())).len();
    let s = open(dir.path());
    // The open writes nothing; the first write adds the epoch advance (one record of one
    // chunk) before its own record.
    assert_eq!(s.recovery_tail().unwrap().applied_lsn, tail.applied_lsn);
    assert_eq!(outbox_rows(s.store()).len(), rows_before);
    s.publish(request(&s, "c", 1)).unwrap();
    assert_eq!(
        s.verify_recovery_outbox().unwrap().records,
        tail.applied_lsn + 2
    );
}
