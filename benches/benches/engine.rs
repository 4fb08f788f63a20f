//! Engine and metadata benchmarks (criterion).
//!
//! * `holt/get_hit_layers` — point reads on a file-backed holt db holding `N` path-shaped keys
//!   (`tenant-NN/dataset-NNN/run-NNNN/outputs/file-NNNNN.json`, 64-byte values) as the load left
//!   it: several images (automatic flushes and merges) plus the in-memory delta, warm.
//! * `holt/get_hit` / `holt/get_miss` — the same after `Db::checkpoint`: served from one image.
//! * `holt/list_delimiter` — one delimiter listing returning the run-level common prefixes of one
//!   dataset.
//! * `holt/reopen_first_get` — `Db::open` of that store plus one point read (the WAL tail is
//!   empty: what every open pays whatever the number of keys).
//! * `holt/commit_durable` — one fdatasync'd single-put commit (Durability::Sync).
//! * `meta/stat` — one WorkspaceCurrent + one PathCurrent point read through `meta::Reader`.
//!
//! Run: `cargo bench -p nokv-benches --bench engine` (set `NOKV_BENCH_KEYS` to change N,
//! default 200,000).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use holt::{Batch, Db, Durability, Options, RangeSpec};

fn key_count() -> usize {
    std::env::var("NOKV_BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000)
}

fn path_key(i: usize) -> Vec<u8> {
    format!(
        "tenant-{:02}/dataset-{:03}/run-{:04}/outputs/file-{:05}.json",
        i % 16,
        (i / 16) % 100,
        (i / 1600) % 10_000,
        i
    )
    .into_bytes()
}

fn loaded_db(dir: &std::path::Path, n: usize) -> (Db, holt::Tree) {
    let db = Db::open(
        dir,
        Options {
            durability: Durability::Buffered, // load phase only; labelled: not a durability claim
            ..Options::default()
        },
    )
    .expect("open");
    let tree = db.create_tree("paths", 1, false).expect("tree");
    let value = vec![0x5a_u8; 64];
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let mut batch = Batch::new();
        for &i in chunk {
            batch.put(&tree, path_key(i), value.clone());
        }
        db.commit(batch).expect("load");
    }
    (db, tree)
}

fn holt_benches(c: &mut Criterion) {
    let n = key_count();
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, tree) = loaded_db(dir.path(), n);
    db.wait_checkpointer_idle();
    let mut i = 0usize;
    c.bench_function(&format!("holt/get_hit_layers/{n}"), |b| {
        b.iter(|| {
            i = (i + 7919) % n;
            black_box(tree.get(&path_key(i)).expect("get"));
        })
    });
    db.checkpoint().expect("checkpoint");
    c.bench_function(&format!("holt/get_hit/{n}"), |b| {
        b.iter(|| {
            i = (i + 7919) % n;
            black_box(tree.get(&path_key(i)).expect("get"));
        })
    });
    c.bench_function(&format!("holt/get_miss/{n}"), |b| {
        b.iter(|| {
            i = (i + 7919) % n;
            let mut k = path_key(i);
            k.push(b'!');
            black_box(tree.get(&k).expect("get"));
        })
    });
    let spec = RangeSpec {
        prefix: b"tenant-03/dataset-042/".to_vec(),
        start_after: None,
        delimiter: Some(b'/'),
        limit: Some(1000),
    };
    c.bench_function(&format!("holt/list_delimiter/{n}"), |b| {
        b.iter(|| {
            let entries = tree.range(&spec).expect("range").count();
            black_box(entries);
        })
    });
    drop(tree);
    drop(db);
    c.bench_function(&format!("holt/reopen_first_get/{n}"), |b| {
        b.iter(|| {
            i = (i + 7919) % n;
            let db = Db::open(dir.path(), Options::default()).expect("open");
            let tree = db.tree("paths").expect("tree");
            black_box(tree.get(&path_key(i)).expect("get"));
        })
    });

    let dir2 = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir2.path(), Options::default()).expect("open");
    let t = db.create_tree("t", 1, false).expect("tree");
    let mut k = 0u64;
    c.bench_function("holt/commit_durable_fdatasync", |b| {
        b.iter(|| {
            k += 1;
            let mut batch = Batch::new();
            batch.put(&t, k.to_be_bytes().to_vec(), vec![1u8; 64]);
            black_box(db.commit(batch).expect("commit"));
        })
    });
}

fn meta_benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = nokv::Client::open(dir.path().join("store")).expect("store");
    client.create_workbench("bench").expect("create");
    for i in 0..1000 {
        let options = nokv::PutOptions::create("text/plain", "bench");
        client
            .put("bench", &format!("outputs/f{i:04}.txt"), b"x", &options)
            .expect("put");
    }
    let path = meta::normalize("outputs/f0500.txt").expect("path");
    c.bench_function("meta/stat_exact_1000_paths", |b| {
        b.iter(|| {
            let read = client.meta().read();
            let ws = read.visible_workspace("bench").expect("ws");
            black_box(read.path_entry(&ws.incarnation, &path).expect("entry"));
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = holt_benches, meta_benches
}
criterion_main!(benches);
