//! Reopen test for the durable codecs: one record of every metadata family is written raw into
//! its registry tree of a real holt store (through `MetaShard::db()`), the store is closed and
//! reopened through the schema gate, and every row decodes back to the record written. The
//! History rows holt wrote for those commits decode with meta's History codec.

#[path = "fixtures/samples.rs"]
mod samples;

use std::collections::BTreeMap;

use meta::codec::*;
use meta::ids::{RootId, SnapshotId, TagName};
use meta::schema::Family;
use meta::{MetaShard, OpenOptions};
use samples::*;

type Check = Box<dyn Fn(&[u8], &[u8])>;
/// History rows per (source family, user key): `(commit_version, previous value)`, newest first.
type HistoryRows = BTreeMap<(Family, Vec<u8>), Vec<(u64, Option<Vec<u8>>)>>;

/// `(family, key, value, decode-and-compare)` for one sample row of every shard-local family
/// that holds workspace records (System, RootFence and RecoveryOutbox belong to the gate and
/// the command layer and are not written raw here).
fn rows(r: RootId) -> Vec<(Family, Vec<u8>, Vec<u8>, Check)> {
    let mut out: Vec<(Family, Vec<u8>, Vec<u8>, Check)> = Vec::new();
    macro_rules! row {
        ($fam:expr, $key:expr, $val:expr, $kdec:expr, $vdec:expr) => {{
            let k = $key;
            let v = $val;
            let (kb, vb) = (k.encode(), v.encode());
            out.push((
                $fam,
                kb,
                vb,
                Box::new(move |kb: &[u8], vb: &[u8]| {
                    assert_eq!($kdec(kb).unwrap(), k, "{:?} key", $fam);
                    assert_eq!($vdec(vb).unwrap(), v, "{:?} value", $fam);
                }),
            ));
        }};
    }
    row!(
        Family::WorkspaceCurrent,
        WorkspaceCurrentKey {
            root: r,
            ..workspace_current_key()
        },
        workspace_current(),
        WorkspaceCurrentKey::decode,
        WorkspaceCurrent::decode
    );
    row!(
        Family::WorkspaceIncarnationClaim,
        WorkspaceIncarnationClaimKey {
            root: r,
            ..claim_key()
        },
        claim(),
        WorkspaceIncarnationClaimKey::decode,
        WorkspaceIncarnationClaim::decode
    );
    row!(
        Family::PathCurrent,
        PathCurrentKey {
            root: r,
            ..path_current_key()
        },
        path_entry(),
        PathCurrentKey::decode,
        PathEntry::decode
    );
    row!(
        Family::ArtifactRevision,
        ArtifactRevisionKey {
            root: r,
            ..artifact_revision_key()
        },
        artifact_revision(),
        ArtifactRevisionKey::decode,
        ArtifactRevision::decode
    );
    {
        let k = ArtifactManifestKey {
            root: r,
            ..manifest_key()
        };
        let v = manifest_row();
        let (kb, vb) = (k.encode(), v.encode_value());
        out.push((
            Family::ArtifactManifest,
            kb,
            vb,
            Box::new(move |kb: &[u8], vb: &[u8]| {
                let key = ArtifactManifestKey::decode(kb).unwrap();
                assert_eq!(key, k);
                assert_eq!(ManifestRow::decode_value(key.object_index, vb).unwrap(), v);
            }),
        ));
    }
    row!(
        Family::RevisionRef,
        RevisionRefKey {
            root: r,
            ..revision_ref_key_path()
        },
        revision_ref(),
        RevisionRefKey::decode,
        RevisionRef::decode
    );
    row!(
        Family::Commit,
        CommitKey {
            root: r,
            ..commit_key()
        },
        commit(),
        CommitKey::decode,
        Commit::decode
    );
    row!(
        Family::CommitMember,
        CommitMemberKey {
            root: r,
            ..commit_member_key()
        },
        commit_member(),
        CommitMemberKey::decode,
        CommitMember::decode
    );
    row!(
        Family::WorkbenchCommitHead,
        WorkbenchCommitHeadKey {
            root: r,
            ..head_key()
        },
        head(),
        WorkbenchCommitHeadKey::decode,
        WorkbenchCommitHead::decode
    );
    row!(
        Family::Tag,
        TagKey {
            root: r,
            ..tag_key()
        },
        tag(),
        TagKey::decode,
        Tag::decode
    );
    row!(
        Family::SnapshotRef,
        SnapshotRefKey {
            root: r,
            ..snapshot_ref_key()
        },
        snapshot_ref(),
        SnapshotRefKey::decode,
        SnapshotRef::decode
    );
    row!(
        Family::SnapshotAlias,
        SnapshotAliasKey {
            root: r,
            ..snapshot_alias_key()
        },
        snapshot_alias(),
        SnapshotAliasKey::decode,
        SnapshotAlias::decode
    );
    row!(
        Family::HistoryHold,
        HistoryHoldKey {
            root: r,
            hold: HoldId::Snapshot(SnapshotId(42))
        },
        history_hold(),
        HistoryHoldKey::decode,
        HistoryHold::decode
    );
    row!(
        Family::CommitConsumer,
        CommitConsumerKey {
            root: r,
            ..consumer_key(ConsumerOwner::Tag {
                incarnation: inc(),
                tag: TagName::new("v1").unwrap(),
            })
        },
        consumer(),
        CommitConsumerKey::decode,
        CommitConsumer::decode
    );
    {
        let k = SecondaryIndexKey {
            root: r,
            ..secondary_index_key()
        };
        let v = secondary_index_entry();
        let (kb, vb) = (k.encode().unwrap(), v.encode());
        out.push((
            Family::SecondaryIndex,
            kb,
            vb,
            Box::new(move |kb: &[u8], vb: &[u8]| {
                assert_eq!(SecondaryIndexKey::decode(kb).unwrap(), k);
                assert_eq!(SecondaryIndexEntry::decode(vb).unwrap(), v);
            }),
        ));
    }
    row!(
        Family::ChangeEvent,
        ChangeEventKey {
            root: r,
            commit_version: 1_000_000,
            event_sequence: 1
        },
        change_event(),
        ChangeEventKey::decode,
        ChangeEvent::decode
    );
    for (op, id) in [
        (publish_operation(), meta::ids::OperationId([0x61; 16])),
        (build_commit_operation(), meta::ids::OperationId([0x62; 16])),
        (restore_operation(), meta::ids::OperationId([0x63; 16])),
        (
            commit_retire_operation(),
            meta::ids::OperationId([0x64; 16]),
        ),
        (gc_operation(), meta::ids::OperationId([0x65; 16])),
    ] {
        let k = OperationKey {
            root: r,
            kind: op.kind(),
            operation_id: id,
        };
        let (kb, vb) = (k.encode(), op.encode());
        out.push((
            Family::Operation,
            kb,
            vb,
            Box::new(move |kb: &[u8], vb: &[u8]| {
                let key = OperationKey::decode(kb).unwrap();
                assert_eq!(key, k);
                assert_eq!(Operation::decode_for_kind(key.kind, vb).unwrap(), op);
            }),
        ));
    }
    row!(
        Family::RestoreMember,
        RestoreMemberKey {
            root: r,
            ..restore_member_key()
        },
        restore_member(),
        RestoreMemberKey::decode,
        RestoreMember::decode
    );
    row!(
        Family::StagedObject,
        StagedObjectKey {
            root: r,
            ..staged_object_key()
        },
        staged_object(),
        StagedObjectKey::decode,
        StagedObject::decode
    );
    row!(
        Family::CommandDedupe,
        CommandDedupeKey {
            root: r,
            ..dedupe_key()
        },
        dedupe(),
        CommandDedupeKey::decode,
        CommandDedupe::decode
    );
    row!(
        Family::GcCandidate,
        GcCandidateKey {
            root: r,
            ..gc_candidate_key()
        },
        gc_candidate(),
        GcCandidateKey::decode,
        GcCandidate::decode
    );
    row!(
        Family::GcBarrier,
        GcBarrierKey { root: r },
        gc_barrier(),
        GcBarrierKey::decode,
        GcBarrier::decode
    );
    out
}

fn tree(db: &holt::Db, f: Family) -> holt::Tree {
    db.tree(f.name())
        .unwrap_or_else(|| panic!("registry tree {} missing", f.name()))
}

#[test]
fn one_record_of_every_family_survives_reopen_and_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let shard = MetaShard::open(dir.path(), OpenOptions::default()).unwrap();
    let root = shard.root_id();
    let written = rows(root);
    let families: std::collections::BTreeSet<Family> = written.iter().map(|r| r.0).collect();
    // Every versioned family except RootFence (owned by the schema gate) is covered.
    let expected: std::collections::BTreeSet<Family> = Family::ALL
        .into_iter()
        .filter(|f| f.versioned() && *f != Family::RootFence)
        .collect();
    assert_eq!(families, expected);

    let db = shard.holt_db().unwrap();
    let mut batch = holt::Batch::new();
    for (f, k, v, _) in &written {
        batch.put(&tree(db, *f), k.clone(), v.clone());
    }
    let first = db.commit(batch).unwrap();
    // Overwrite the GcBarrier and delete the Tag so holt records previous values in History.
    let barrier_key = GcBarrierKey { root }.encode();
    let tag_key_bytes = TagKey { root, ..tag_key() }.encode();
    let mut batch = holt::Batch::new();
    batch.put(
        &tree(db, Family::GcBarrier),
        barrier_key.clone(),
        GcBarrier { generation: 5 }.encode(),
    );
    batch.delete(&tree(db, Family::Tag), tag_key_bytes.clone());
    let second = db.commit(batch).unwrap();
    drop(shard);

    let shard = MetaShard::open(dir.path(), OpenOptions::default()).unwrap();
    assert_eq!(shard.root_id(), root);
    let db = shard.holt_db().unwrap();
    let view = db.view();
    for (f, k, v, check) in &written {
        let stored = view.get(&tree(db, *f), k).unwrap();
        if *f == Family::Tag {
            assert_eq!(stored, None, "tag row was deleted");
            check(k, v);
            continue;
        }
        let stored = stored.unwrap_or_else(|| panic!("{f:?} row missing after reopen"));
        if *f == Family::GcBarrier {
            assert_eq!(
                GcBarrier::decode(&stored).unwrap(),
                GcBarrier { generation: 5 }
            );
            check(k, v);
            continue;
        }
        assert_eq!(&stored, v, "{f:?} bytes changed across reopen");
        check(k, &stored);
    }

    // Every History row holt wrote decodes with meta's History codec and names a family.
    let history = db.tree("history").expect("history tree");
    let mut by_key: HistoryRows = BTreeMap::new();
    for entry in view.range(&history, &holt::RangeSpec::all()).unwrap() {
        let holt::Entry::Key { key, value } = entry.unwrap() else {
            panic!("no delimiter was requested");
        };
        let hk = HistoryKey::decode(&key).unwrap();
        let prev = meta::codec::history::decode_value(&value).unwrap();
        by_key
            .entry((hk.source, hk.user_key))
            .or_default()
            .push((hk.commit_version, prev));
    }
    let old_barrier = gc_barrier().encode();
    assert_eq!(
        by_key[&(Family::GcBarrier, barrier_key)],
        vec![(second, Some(old_barrier)), (first, None)],
        "newest first: overwrite at the second commit, creation at the first"
    );
    let old_tag = tag().encode();
    assert_eq!(
        by_key[&(Family::Tag, tag_key_bytes)],
        vec![(second, Some(old_tag)), (first, None)]
    );
    for (f, k, _, _) in &written {
        assert!(
            by_key.contains_key(&(*f, k.clone())),
            "{f:?}: creation history row missing"
        );
    }
}
