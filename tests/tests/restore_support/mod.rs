//! Shared helpers of the restore integration tests: fixtures (source workbenches, snapshots, a
//! bulk fan-out of paths) and invariant checks recomputed from durable rows.

#![allow(dead_code)]

use std::collections::BTreeMap;

use meta::codec::{
    artifact_revision, path_current, revision_ref, workspace_current, ArtifactRevision,
    ArtifactRevisionKey, PathEntry, RefOwner, RestoreOperation, RevisionRef, RevisionRefKey,
    WorkspaceCurrent,
};
use meta::command::{Mutation, Predicate};
use meta::ids::{ArtifactRevisionId, RequestId, SnapshotId, WorkspaceIncarnationId};
use meta::ops::snapshot::SnapshotSelector;
use meta::schema::Family;
use meta::NormPath;
use nokv::restore::{RestoreFrom, RestoreRequest};
use nokv::snapshot::SnapshotOptions;
use nokv::{Client, PutOptions};

/// Publishes `files` small text files under `input/` of a new workbench `id`
/// (`input/f0000.txt` …), returning their bodies.
pub fn source_with_files(client: &Client, id: &str, files: usize) -> Vec<(String, Vec<u8>)> {
    client.create_workbench(id).expect("create source");
    let mut out = Vec::new();
    for i in 0..files {
        let path = format!("input/d{}/f{i:04}.txt", i % 3);
        let body = format!("file {i} of {id}\n").into_bytes();
        client
            .put(id, &path, &body, &PutOptions::create("text/plain", "test"))
            .expect("put");
        out.push((path, body));
    }
    out
}

/// Mints a snapshot of `id` and returns its numeric id.
pub fn snapshot(client: &Client, id: &str) -> u64 {
    client
        .create_snapshot(id, &SnapshotOptions::default())
        .expect("snapshot")
        .snapshot_id
        .get()
}

/// A restore request from snapshot `snap` of `src` into `dst`.
pub fn from_snapshot(src: &str, dst: &str, snap: u64) -> RestoreRequest {
    RestoreRequest {
        source_workbench_id: src.into(),
        destination_workbench_id: dst.into(),
        from: RestoreFrom::Snapshot(SnapshotSelector::Id(SnapshotId(snap))),
    }
}

/// Number of objects in the store's object provider.
pub fn object_count(client: &Client) -> usize {
    client.objects().list("").expect("list objects").len()
}

fn scan_all(client: &Client, family: Family, prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    use meta::store::{Snapshot, TxnStore};
    client
        .meta()
        .store()
        .snapshot()
        .rows(family, prefix, "test rows")
        .expect("rows")
}

/// Recomputes every revision's strong-reference count from its RevisionRef rows and compares
/// it with `ArtifactRevision.strong_reference_count`. Returns the number of revisions checked.
pub fn assert_reference_counts_match_rows(client: &Client) -> usize {
    let mut counted: BTreeMap<ArtifactRevisionId, u64> = BTreeMap::new();
    for (key, _) in scan_all(client, Family::RevisionRef, &[]) {
        let k = RevisionRefKey::decode(&key).expect("revision ref key");
        *counted.entry(k.target).or_default() += 1;
    }
    let revisions = scan_all(client, Family::ArtifactRevision, &[]);
    for (key, value) in &revisions {
        let k = ArtifactRevisionKey::decode(key).expect("revision key");
        let row = ArtifactRevision::decode(value).expect("revision");
        assert_eq!(
            row.strong_reference_count,
            counted.get(&k.revision).copied().unwrap_or(0),
            "revision {} count differs from its RevisionRef rows",
            k.revision
        );
    }
    for target in counted.keys() {
        assert!(
            revisions
                .iter()
                .any(|(k, _)| ArtifactRevisionKey::decode(k).unwrap().revision == *target),
            "RevisionRef targets a missing revision"
        );
    }
    revisions.len()
}

/// PathCurrent rows of one incarnation.
pub fn path_rows(client: &Client, inc: &WorkspaceIncarnationId) -> usize {
    let prefix = path_current::workspace_prefix(&client.meta().root_id(), inc);
    scan_all(client, Family::PathCurrent, &prefix).len()
}

/// RestoreMember rows of one operation.
pub fn member_rows(client: &Client, op: &RestoreOperation) -> usize {
    let mut prefix = client.meta().root_id().as_bytes().to_vec();
    prefix.extend_from_slice(op.operation_id().as_bytes());
    scan_all(client, Family::RestoreMember, &prefix).len()
}

/// HistoryHold rows of the whole root.
pub fn hold_rows(client: &Client) -> usize {
    scan_all(
        client,
        Family::HistoryHold,
        client.meta().root_id().as_bytes(),
    )
    .len()
}

/// The raw marker of a workbench in any state.
pub fn marker(client: &Client, id: &str) -> Option<WorkspaceCurrent> {
    client.meta().read().workspace(id).expect("marker")
}

/// Fans the files of `src` out to `total` paths (`input/bulk/gNNN/pNNNNN.txt`), each a new
/// path reference to one of the already published revisions, written by raw metadata commands
/// (bounded batches; PathCurrent, Path RevisionRef, revision count/epoch, SecondaryIndex rows).
/// This builds a large workbench quickly without publishing thousands of bodies; every row is
/// exactly what publication would have written for a shared revision.
pub fn fan_out(client: &Client, src: &str, total: usize) {
    let shard = client.meta();
    let root = shard.root_id();
    let read = shard.read();
    let ws = read.visible_workspace(src).expect("source");
    let (files, _) = read
        .scan_files(&ws.incarnation, None, None, 1000)
        .expect("files");
    drop(read);
    assert!(!files.is_empty());
    let mut next = 0usize;
    while next < total {
        let snap = shard.read();
        let read_version = snap.version();
        let cv = read_version + 1;
        let ws_key = workspace_current::key(&root, src);
        let ws_bytes = ws.encode();
        let mut predicates = vec![Predicate::equals(
            Family::WorkspaceCurrent,
            ws_key,
            ws_bytes,
        )];
        let mut mutations = Vec::new();
        let mut touched: BTreeMap<ArtifactRevisionId, (Vec<u8>, ArtifactRevision)> =
            BTreeMap::new();
        let end = (next + 15).min(total);
        for i in next..end {
            let (_, template) = &files[i % files.len()];
            let path =
                meta::normalize(&format!("input/bulk/g{:03}/p{i:05}.txt", i / 100)).expect("path");
            let rev = template.artifact_revision_id;
            let slot = touched.entry(rev).or_insert_with(|| {
                let b = {
                    use meta::store::{Snapshot, TxnStore};
                    shard
                        .store()
                        .snapshot()
                        .get(
                            Family::ArtifactRevision,
                            &artifact_revision::key(&root, &rev),
                        )
                        .unwrap()
                        .unwrap()
                };
                let r = ArtifactRevision::decode(&b).unwrap();
                (b, r)
            });
            slot.1.strong_reference_count += 1;
            slot.1.reference_epoch += 1;
            let entry = PathEntry {
                generation: cv,
                created_version: cv,
                modified_version: cv,
                ..template.clone()
            };
            mutations.push(Mutation::put(
                Family::RevisionRef,
                revision_ref::key(
                    &root,
                    &RefOwner::Path {
                        incarnation: ws.incarnation,
                        path: path.clone(),
                    },
                    &rev,
                ),
                RevisionRef {
                    reference_epoch_at_add: slot.1.reference_epoch,
                    created_version: cv,
                }
                .encode(),
            ));
            let pkey = path_current::key(&root, &ws.incarnation, &path);
            predicates.push(Predicate::absent(Family::PathCurrent, pkey.clone()));
            mutations.push(Mutation::put(Family::PathCurrent, pkey, entry.encode()));
            mutations.extend(
                meta::index::projection::index_mutations(
                    &root,
                    &ws.incarnation,
                    src,
                    &path,
                    None,
                    Some(&entry),
                )
                .expect("index rows"),
            );
        }
        for (rev, (bytes, row)) in touched {
            let key = artifact_revision::key(&root, &rev);
            predicates.push(Predicate::equals(
                Family::ArtifactRevision,
                key.clone(),
                bytes,
            ));
            mutations.push(Mutation::put(Family::ArtifactRevision, key, row.encode()));
        }
        let mut cmd = shard.command_header(
            RequestId::random().unwrap(),
            [7; 32],
            read_version,
            meta::CommandResult::WorkspaceCreated {
                workspace: ws.clone(),
            },
        );
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        drop(snap);
        shard.execute(cmd).expect("fan-out batch");
        next = end;
    }
}

/// The normalized stored path of a section-relative path.
pub fn norm(p: &str) -> NormPath {
    meta::normalize(p).expect("path")
}

/// The snapshot module's own consumer/hold invariants (counts recomputed from HistoryHold rows).
pub fn assert_snapshot_invariants(client: &Client) {
    assert_eq!(
        meta::ops::snapshot::check_invariants(client.meta()).expect("check"),
        Vec::<String>::new()
    );
}
