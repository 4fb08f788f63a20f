//! Restore benchmark (issue 7): restoring a 10,000-file workbench from a leased snapshot into a
//! new workbench through `nokv::Client::restore` (docs/metadata-format.md, "Restore Closure") — prepare, bounded
//! copy batches (PathCurrent + Path RevisionRef + SecondaryIndex rows + RestoreMember per path,
//! shared revisions, no object bytes), seal, verification rescan of members and source, and the
//! one final marker command. Default durability (`Sync`: every metadata command waits for its
//! WAL fdatasync) and the local-directory object store.
//!
//! Fixture: a source workbench with 40 published files whose paths are fanned out to 10,000
//! (`NOKV_BENCH_RESTORE_FILES` overrides) by raw metadata commands that write exactly the rows
//! publication writes for a shared revision; one snapshot. Each iteration restores into a fresh
//! destination id; the store grows by one destination per iteration.
//!
//! Run: `cargo bench -p nokv-benches --bench restore`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use meta::codec::{
    artifact_revision, path_current, revision_ref, ArtifactRevision, PathEntry, RefOwner,
    RevisionRef,
};
use meta::command::{Mutation, Predicate};
use meta::ids::{ArtifactRevisionId, RequestId, SnapshotId};
use meta::ops::snapshot::SnapshotSelector;
use meta::schema::Family;
use nokv::restore::{RestoreFrom, RestoreRequest};
use nokv::{Client, PutOptions};

const PUBLISHED: usize = 40;

fn file_count() -> usize {
    std::env::var("NOKV_BENCH_RESTORE_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &usize| *n > PUBLISHED)
        .unwrap_or(10_000)
}

/// Publishes `PUBLISHED` bodies, then fans their revisions out to `total` paths.
fn load(client: &Client, total: usize) {
    client.create_workbench("src").expect("create");
    for i in 0..PUBLISHED {
        let body = format!("body {i}\n").into_bytes();
        client
            .put(
                "src",
                &format!("input/seed/f{i:03}.txt"),
                &body,
                &PutOptions::create("text/plain", "bench"),
            )
            .expect("put");
    }
    let shard = client.meta();
    let root = shard.root_id();
    let ws = shard.read().visible_workspace("src").expect("source");
    let (files, _) = shard
        .read()
        .scan_files(&ws.incarnation, None, None, PUBLISHED + 1)
        .expect("files");
    let ws_key = meta::codec::workspace_current::key(&root, "src");
    let rev_tree = shard
        .holt_db()
        .expect("holt-backed shard")
        .tree(Family::ArtifactRevision.name())
        .expect("tree");
    let mut next = 0usize;
    let extra = total - PUBLISHED;
    while next < extra {
        let read_version = shard.holt_db().expect("holt-backed shard").version();
        let cv = read_version + 1;
        let view = shard.holt_db().expect("holt-backed shard").view();
        let mut predicates = vec![Predicate::equals(
            Family::WorkspaceCurrent,
            ws_key.clone(),
            ws.encode(),
        )];
        let mut mutations = Vec::new();
        let mut touched: BTreeMap<ArtifactRevisionId, (Vec<u8>, ArtifactRevision)> =
            BTreeMap::new();
        let end = (next + 15).min(extra);
        for i in next..end {
            let (_, template) = &files[i % files.len()];
            let path =
                meta::normalize(&format!("input/bulk/g{:03}/p{i:05}.txt", i / 100)).expect("path");
            let rev = template.artifact_revision_id;
            let slot = touched.entry(rev).or_insert_with(|| {
                let b = view
                    .get(&rev_tree, &artifact_revision::key(&root, &rev))
                    .expect("get")
                    .expect("revision");
                let r = ArtifactRevision::decode(&b).expect("decode");
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
                    "src",
                    &path,
                    None,
                    Some(&entry),
                )
                .expect("index"),
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
            RequestId::random().expect("id"),
            [7; 32],
            read_version,
            meta::CommandResult::WorkspaceCreated {
                workspace: ws.clone(),
            },
        );
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        drop(view);
        shard.execute(cmd).expect("fan-out batch");
        next = end;
    }
}

fn bench_restore(c: &mut Criterion) {
    let total = file_count();
    let dir = tempfile::tempdir().expect("tempdir");
    let client = Client::open(dir.path().join("store")).expect("open");
    load(&client, total);
    let snap = client
        .create_snapshot("src", &nokv::snapshot::SnapshotOptions::default())
        .expect("snapshot")
        .snapshot_id;
    let objects_before = client.objects().list("").expect("list").len();
    let mut n = 0u64;
    let mut restore_one = || -> Duration {
        n += 1;
        let req = RestoreRequest {
            source_workbench_id: "src".into(),
            destination_workbench_id: format!("dst-{n}"),
            from: RestoreFrom::Snapshot(SnapshotSelector::Id(SnapshotId(snap.get()))),
        };
        let t = Instant::now();
        let r = client.restore(&req).expect("restore");
        let elapsed = t.elapsed();
        assert_eq!(r.member_count, total as u64);
        elapsed
    };
    let first = restore_one();
    let objects_after = client.objects().list("").expect("list").len();
    eprintln!(
        "restore of {total} files: first run {first:?}; objects before {objects_before}, after {objects_after} (+1 = the restore manifest)"
    );
    let mut group = c.benchmark_group("restore");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(20));
    group.bench_function(format!("snapshot_{total}_files"), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| restore_one()).sum())
    });
    group.finish();
}

criterion_group!(benches, bench_restore);
criterion_main!(benches);
