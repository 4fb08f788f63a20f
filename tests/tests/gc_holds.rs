//! GC never deletes bytes that are still readable (issue 12 acceptance): one test per holder —
//! a visible path; a commit that is tagged, a head, or only a child's parent; a leased snapshot
//! (read `at_snapshot` after the path was replaced and removed); a restore in progress; an
//! in-flight upload; the base of a live appended revision. Each test runs GC passes while the
//! holder exists, checks the bytes through that holder, then (where the holder can go) releases
//! it and checks the next pass collects exactly those objects. `gc --explain` names each holder.

mod gc_support;

use std::collections::BTreeSet;

use gc_support::{body, create, open_gc, own_keys, provider_keys, replace, revision_of};
use meta::ops::snapshot::SnapshotSelector;
use meta::ops::tag::TagCondition;
use nokv::commit::CommitRequest;
use nokv::lifetime::{GcOptions, Holder, RemoveOptions, Verdict, WaitReason};
use nokv::restore::{FaultPoint, RestoreFrom, RestoreOptions, RestoreRequest};
use nokv::snapshot::SnapshotOptions;

fn store() -> (tempfile::TempDir, nokv::Client) {
    let tmp = tempfile::tempdir().unwrap();
    let client = open_gc(&tmp.path().join("store"));
    client.create_workbench("wb").unwrap();
    (tmp, client)
}

fn gc(client: &nokv::Client) -> nokv::lifetime::GcReport {
    client.gc(&GcOptions::default()).expect("gc")
}

fn collected(report: &nokv::lifetime::GcReport) -> BTreeSet<String> {
    report
        .collected
        .iter()
        .map(|c| c.revision.to_hex())
        .collect()
}

fn commit(client: &nokv::Client, wb: &str, tag: u8, parents: Vec<String>, replace: bool) -> String {
    client
        .commit(&CommitRequest {
            workbench_id: wb.into(),
            manifest: serde_json::json!({"run": tag}),
            content_digest_uri: format!("sha256:{}", format!("{tag:02x}").repeat(32)),
            replace,
            parents,
        })
        .expect("commit")
        .commit_identity
}

fn restore_commit_and_read(client: &nokv::Client, commit: &str, dest: &str, path: &str) -> Vec<u8> {
    client
        .restore(&RestoreRequest {
            source_workbench_id: "wb".into(),
            destination_workbench_id: dest.into(),
            from: RestoreFrom::Commit(nokv::commit::parse_commit_id(commit).unwrap()),
        })
        .expect("restore from commit");
    client.read_all(dest, path).expect("read restored")
}

#[test]
fn gc_keeps_the_revision_of_a_visible_path() {
    let (_tmp, client) = store();
    let old = body(1, 3000);
    let new = body(2, 5000);
    client.put("wb", "outputs/a.bin", &old, &create()).unwrap();
    let old_rev = revision_of(&client, "wb", "outputs/a.bin");
    client.put("wb", "outputs/a.bin", &new, &replace()).unwrap();
    let new_rev = revision_of(&client, "wb", "outputs/a.bin");
    let new_keys = own_keys(&client, &new_rev);
    let r = gc(&client);
    assert_eq!(collected(&r), BTreeSet::from([old_rev]));
    assert!(new_keys.is_subset(&provider_keys(&client)));
    assert_eq!(client.read_all("wb", "outputs/a.bin").unwrap(), new);
    let e = client.gc_explain("wb", "outputs/a.bin").unwrap();
    assert_eq!(e.verdict, Verdict::Referenced);
    assert!(matches!(
        &e.holders[..],
        [Holder::Path { workbench_id: Some(w), visible: true, .. }] if w == "wb"
    ));
}

#[test]
fn gc_keeps_a_head_commit_a_tagged_commit_and_a_commit_held_only_as_a_parent() {
    let (_tmp, client) = store();
    let v1 = body(3, 4000);
    client
        .put("wb", "outputs/model.bin", &v1, &create())
        .unwrap();
    let rev = revision_of(&client, "wb", "outputs/model.bin");
    let keys = own_keys(&client, &rev);
    let c1 = commit(&client, "wb", 1, Vec::new(), false);
    client
        .set_tag("wb", "v1", &c1, TagCondition::Absent)
        .unwrap();
    client
        .remove("wb", "outputs/model.bin", &RemoveOptions::default())
        .unwrap();

    // 1. Head (and tag).
    assert!(gc(&client)
        .collected
        .iter()
        .all(|c| c.revision.to_hex() != rev));
    assert!(keys.is_subset(&provider_keys(&client)));
    let e = client.gc_explain_revision(&rev).unwrap();
    assert!(
        e.holders
            .iter()
            .any(|h| matches!(h, Holder::Commit { heads, tags, .. }
            if heads == &["wb".to_string()] && tags == &[("wb".to_string(), "v1".to_string())])),
        "{e:?}"
    );
    assert_eq!(
        restore_commit_and_read(&client, &c1, "r-head", "outputs/model.bin"),
        v1
    );

    // 2. Only the tag: a second commit (child of c1) becomes the head.
    client
        .put("wb", "outputs/other.bin", b"o", &create())
        .unwrap();
    let c2 = commit(&client, "wb", 2, vec![c1.clone()], true);
    assert_eq!(client.commit_head("wb").unwrap().unwrap().commit_id, c2);
    client
        .remove_prefix("r-head", "outputs")
        .expect("drop the restored copy's reference");
    assert!(gc(&client)
        .collected
        .iter()
        .all(|c| c.revision.to_hex() != rev));
    assert!(keys.is_subset(&provider_keys(&client)));
    assert_eq!(
        restore_commit_and_read(&client, &c1, "r-tag", "outputs/model.bin"),
        v1
    );
    client.remove_prefix("r-tag", "outputs").unwrap();

    // 3. Only a child's parent: the tag goes; c1 cannot be retired while c2 names it.
    client.delete_tag("wb", "v1", TagCondition::Any).unwrap();
    assert!(client.retire_commit(&c1).is_err(), "a parent cannot retire");
    assert!(gc(&client)
        .collected
        .iter()
        .all(|c| c.revision.to_hex() != rev));
    assert!(keys.is_subset(&provider_keys(&client)));
    let e = client.gc_explain_revision(&rev).unwrap();
    assert!(
        e.holders
            .iter()
            .any(|h| matches!(h, Holder::Commit { children, heads, tags, .. }
            if children.len() == 1 && heads.is_empty() && tags.is_empty())),
        "{e:?}"
    );
    assert_eq!(
        restore_commit_and_read(&client, &c1, "r-parent", "outputs/model.bin"),
        v1
    );
}

#[test]
fn gc_keeps_bytes_a_leased_snapshot_reads_after_the_path_was_replaced_and_removed() {
    let (_tmp, client) = store();
    let v1 = body(4, 6000);
    client.put("wb", "outputs/a.bin", &v1, &create()).unwrap();
    let rev = revision_of(&client, "wb", "outputs/a.bin");
    let keys = own_keys(&client, &rev);
    let snap = client
        .create_snapshot("wb", &SnapshotOptions::default())
        .unwrap();
    client
        .put("wb", "outputs/a.bin", b"v2", &replace())
        .unwrap();
    client
        .remove("wb", "outputs/a.bin", &RemoveOptions::default())
        .unwrap();
    let r = gc(&client);
    assert!(!collected(&r).contains(&rev));
    let waiting = r
        .waiting
        .iter()
        .find(|w| w.revision.to_hex() == rev)
        .expect("the revision waits");
    assert!(
        waiting.reasons.iter().any(|reason| matches!(reason,
            WaitReason::HistoryHold(h) if matches!(&h.holder,
                nokv::lifetime::HoldHolder::Snapshot { snapshot_id, workbench_id: Some(w), .. }
                    if *snapshot_id == snap.snapshot_id && w == "wb"))),
        "{waiting:?}"
    );
    assert!(keys.is_subset(&provider_keys(&client)));
    let (_info, reader) = client
        .snapshot_reader("wb", &SnapshotSelector::Id(snap.snapshot_id))
        .unwrap();
    let inc = reader.visible_workspace("wb").unwrap().incarnation;
    let entry = reader
        .path_entry(&inc, &nokv::Client::normalize("outputs/a.bin").unwrap())
        .unwrap()
        .expect("the snapshot still sees the path");
    assert_eq!(client.read_entry(&reader, &entry).unwrap(), v1);
    drop(reader);
    // Retiring the snapshot releases the hold: the next pass collects it.
    client
        .retire_snapshot("wb", &SnapshotSelector::Id(snap.snapshot_id))
        .unwrap();
    let r = gc(&client);
    assert!(collected(&r).contains(&rev), "{r:?}");
    assert!(keys.is_disjoint(&provider_keys(&client)));
}

#[test]
fn gc_keeps_what_a_restore_in_progress_copies() {
    let (_tmp, client) = store();
    let v1 = body(5, 7000);
    for i in 0..70 {
        client
            .put(
                "wb",
                &format!("outputs/f{i:02}.bin"),
                &body(100 + i, 100),
                &create(),
            )
            .unwrap();
    }
    client.put("wb", "outputs/zz.bin", &v1, &create()).unwrap();
    let rev = revision_of(&client, "wb", "outputs/zz.bin");
    let keys = own_keys(&client, &rev);
    let snap = client
        .create_snapshot("wb", &SnapshotOptions::default())
        .unwrap();
    let req = RestoreRequest {
        source_workbench_id: "wb".into(),
        destination_workbench_id: "copy".into(),
        from: RestoreFrom::Snapshot(SnapshotSelector::Id(snap.snapshot_id)),
    };
    // The first copy batch ran; `outputs/zz.bin` is not copied yet.
    let stopped = client.restore_with(
        &req,
        &RestoreOptions {
            interrupt_after: Some(FaultPoint::AfterCopyBatch),
        },
    );
    assert!(stopped.is_err());
    client.remove_prefix("wb", "outputs").unwrap();
    let r = gc(&client);
    assert!(!collected(&r).contains(&rev));
    let w = r
        .waiting
        .iter()
        .find(|w| w.revision.to_hex() == rev)
        .expect("waits");
    assert!(
        w.reasons.iter().any(|reason| matches!(reason, WaitReason::HistoryHold(h)
            if matches!(&h.holder, nokv::lifetime::HoldHolder::Restore { destination_workbench_id: Some(d), .. } if d == "copy"))),
        "{w:?}"
    );
    assert!(keys.is_subset(&provider_keys(&client)));
    // The restore finishes and serves the bytes.
    client.restore(&req).expect("restore completes");
    assert_eq!(client.read_all("copy", "outputs/zz.bin").unwrap(), v1);
    client
        .retire_snapshot("wb", &SnapshotSelector::Id(snap.snapshot_id))
        .unwrap();
    assert!(!collected(&gc(&client)).contains(&rev));
    assert_eq!(client.read_all("copy", "outputs/zz.bin").unwrap(), v1);
}

#[test]
fn gc_never_touches_the_objects_of_an_in_flight_upload_nor_the_base_it_names() {
    use meta::ops::publish::operation as ledger;
    let (_tmp, client) = store();
    let base = body(6, 2000);
    client.put("wb", "logs/run.log", &base, &create()).unwrap();
    let entry = client.stat("wb", "logs/run.log").unwrap();
    let base_rev = entry.artifact_revision_id;
    let meta = client.meta();
    // An append begun by a process that is still uploading: its ledger owns the new block.
    let new_rev = meta::ArtifactRevisionId::random().unwrap();
    let delta = body(7, 500);
    let key = objstore::block_key(
        meta.logical_shard_id().as_bytes(),
        meta.root_id().as_bytes(),
        new_rev.as_bytes(),
        1,
    );
    let op_id = meta::OperationId::random().unwrap();
    let intent = ledger::PublishIntent {
        operation_id: op_id,
        intent_digest: [9; 32],
        workbench_id: "wb".into(),
        path: nokv::Client::normalize("logs/run.log").unwrap(),
        condition: meta::PathCondition::Append {
            expected_generation: Some(entry.generation),
        },
        revision_id: new_rev,
        base: Some(meta::codec::PublishBase {
            revision: base_rev,
            row_count: 1,
            logical_size: base.len() as u64,
        }),
        dependency_depth: 1,
        content_type: "text/plain".into(),
        producer: "test".into(),
        manifest_id: None,
        index_fields: Default::default(),
    };
    let block = ledger::StagedBlock {
        object_key: key.clone(),
        length: delta.len() as u64,
        digest_uri: objstore::sha256_uri(&delta),
    };
    ledger::begin(meta, &intent, &[block]).unwrap();
    client.objects().put_if_absent(&key, &delta).unwrap();
    // Another writer removes the path: the base has no reference left.
    client
        .remove("wb", "logs/run.log", &RemoveOptions::default())
        .unwrap();
    let r = gc(&client);
    assert!(!collected(&r).contains(&base_rev.to_hex()), "{r:?}");
    let w = r
        .waiting
        .iter()
        .find(|w| w.revision == base_rev)
        .expect("the base waits");
    assert!(w
        .reasons
        .iter()
        .any(|reason| matches!(reason, WaitReason::InFlightPublish { operation_id } if *operation_id == op_id)));
    assert!(
        provider_keys(&client).contains(&key),
        "the staged block survives"
    );
    assert!(own_keys(&client, &base_rev.to_hex()).is_subset(&provider_keys(&client)));
    // The upload finishes; its publication loses the generation CAS (the path was removed), so
    // the ledger cleans it up — and only then is the base collectable.
    let mut full = base.clone();
    full.extend_from_slice(&delta);
    ledger::finalize(
        meta,
        &op_id,
        full.len() as u64,
        &objstore::sha256_uri(&full),
        &[],
    )
    .unwrap();
    assert!(ledger::publish_operation(meta, &op_id).is_err());
    ledger::take_over(meta, &op_id, "path removed").unwrap();
    let summary = client.recover_operations().unwrap();
    assert_eq!(summary.cleaned, 1, "{summary:?}");
    assert!(!provider_keys(&client).contains(&key));
    let r = gc(&client);
    assert!(collected(&r).contains(&base_rev.to_hex()), "{r:?}");
}

#[test]
fn gc_keeps_the_base_of_a_live_appended_revision() {
    let (_tmp, client) = store();
    let base = body(8, 3000);
    client.put("wb", "logs/run.log", &base, &create()).unwrap();
    let base_rev = revision_of(&client, "wb", "logs/run.log");
    let base_keys = own_keys(&client, &base_rev);
    client
        .append("wb", "logs/run.log", b"tail-1", None, "test")
        .unwrap();
    let child_rev = revision_of(&client, "wb", "logs/run.log");
    assert_eq!(
        client.stat("wb", "logs/run.log").unwrap().dependency_count,
        1
    );
    let r = gc(&client);
    assert!(!collected(&r).contains(&base_rev), "{r:?}");
    assert!(base_keys.is_subset(&provider_keys(&client)));
    let mut expected = base.clone();
    expected.extend_from_slice(b"tail-1");
    assert_eq!(client.read_all("wb", "logs/run.log").unwrap(), expected);
    let e = client.gc_explain_revision(&base_rev).unwrap();
    assert!(
        e.holders
            .iter()
            .any(|h| matches!(h, Holder::Dependent { child, .. } if child.to_hex() == child_rev)),
        "{e:?}"
    );
    // Removing the log frees the child, whose collection releases the base: one pass takes both
    // (the child's own objects first).
    client
        .remove("wb", "logs/run.log", &RemoveOptions::default())
        .unwrap();
    let r = gc(&client);
    let order: Vec<String> = r.collected.iter().map(|c| c.revision.to_hex()).collect();
    assert_eq!(order, vec![child_rev.clone(), base_rev.clone()], "{r:?}");
    assert!(provider_keys(&client).is_empty());
    let e = client.gc_explain_revision(&base_rev).unwrap();
    assert!(matches!(
        e.verdict,
        Verdict::Deleted {
            commit_version: Some(_)
        }
    ));
}

#[test]
fn dry_run_previews_the_revisions_that_only_the_quiet_tip_holds_as_the_pass_collects_them() {
    let tmp = tempfile::tempdir().unwrap();
    let client = open_gc(&tmp.path().join("store"));
    client.create_workbench("wb").unwrap();
    let mut revs = BTreeSet::new();
    for (i, name) in ["outputs/a.bin", "outputs/b.bin"].iter().enumerate() {
        client
            .put("wb", name, &body(i as u64 + 1, 64), &create())
            .unwrap();
        revs.insert(revision_of(&client, "wb", name));
    }
    // The removals are the newest commands: with retention 0, `a` is eligible at the pass's
    // first round and only the quiet tip keeps `b` (the pass commits one barrier, or its own
    // commands move the tip, then collects it). The dry run said `b` was waiting for the
    // retention window — with or without another eligible revision beside it.
    for name in ["outputs/a.bin", "outputs/b.bin"] {
        client
            .remove("wb", name, &RemoveOptions::default())
            .unwrap();
    }
    let dry = client
        .gc(&GcOptions {
            dry_run: true,
            max_revisions: None,
        })
        .unwrap();
    let previewed: BTreeSet<String> = dry.collected.iter().map(|c| c.revision.to_hex()).collect();
    assert_eq!(previewed, revs, "{dry:?}");
    assert!(dry.waiting.is_empty(), "{dry:?}");
    // Nothing was written or deleted by the dry run; the pass collects exactly those revisions.
    for rev in &revs {
        assert_eq!(own_keys(&client, rev).len(), 1);
    }
    let pass = client.gc(&GcOptions::default()).unwrap();
    let collected: BTreeSet<String> = pass.collected.iter().map(|c| c.revision.to_hex()).collect();
    assert_eq!(collected, revs, "{pass:?}");
}
