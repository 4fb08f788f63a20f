//! Cost of the namespace rule (a path is a file or a directory, never both) that the publishing
//! command runs when it creates a path: one PathCurrent point read per ancestor plus one limit-1
//! probe of the path's subtree ([`meta::ops::publish::namespace_check`], the same function
//! [`meta::Reader::check_creatable`] runs before an upload).
//!
//! Compared within one run, on a store of 4,096 published paths (`outputs/dNN/fNNNN`, 64
//! directories), against the point read every publication already does:
//!
//! * `namespace/path_entry` — one PathCurrent point read (the baseline every put performs);
//! * `namespace/check/depth2` — the check for a new `outputs/new-N` (1 ancestor);
//! * `namespace/check/depth3` — for a new file in an existing directory, `outputs/d07/new-N`;
//! * `namespace/check/depth16` — for a new 16-component path (15 ancestors).
//!
//! The engine runs with `Durability::Buffered` while the fixture is written (reads are what is
//! measured). Run: `cargo bench -p meta --bench namespace`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use meta::{
    normalize, ArtifactRevisionId, ManifestRow, MetaShard, OpenOptions, PathCondition,
    PublishRequest, RequestId,
};

const PATHS: usize = 4096;

fn digest(tag: &str) -> String {
    use std::fmt::Write;
    // Any well-formed digest URI: the fixture never reads bodies.
    let mut s = String::from("sha256:");
    let mut x: u64 = tag.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    for _ in 0..8 {
        x = x.rotate_left(13).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let _ = write!(s, "{:08x}", x as u32);
    }
    s
}

fn publish(shard: &MetaShard, path: &str) {
    let rev = ArtifactRevisionId::random().unwrap();
    let req = PublishRequest {
        request_id: RequestId::random().unwrap(),
        workbench_id: "wb".into(),
        path: normalize(path).unwrap(),
        condition: PathCondition::Create,
        revision_id: rev,
        logical_size: 1,
        body_digest_uri: digest(path),
        content_type: "text/plain".into(),
        producer: "bench".into(),
        manifest_id: None,
        manifest: vec![ManifestRow {
            object_index: 0,
            physical_owner_revision: rev,
            physical_object_index: 0,
            object_key: format!("bench/{rev}/0"),
            logical_offset: 0,
            object_offset: 0,
            length: 1,
            digest_uri: digest(path),
            append_segment: None,
        }],
        dependency_depth: 0,
        index_fields: Default::default(),
    };
    shard.publish(req).unwrap();
}

fn bench_namespace(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let shard = MetaShard::open(
        dir.path(),
        OpenOptions {
            holt: holt::Options {
                durability: holt::Durability::Buffered,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .unwrap();
    shard.create_workspace("wb").unwrap();
    for i in 0..PATHS {
        publish(&shard, &format!("outputs/d{:02}/f{i:04}", i % 64));
    }
    let read = shard.read();
    let inc = read.visible_workspace("wb").unwrap().incarnation;
    let existing = normalize("outputs/d07/f0007").unwrap();
    let deep = (0..15)
        .map(|i| format!("c{i}"))
        .collect::<Vec<_>>()
        .join("/");
    let mut group = c.benchmark_group("namespace");
    group.bench_function("path_entry", |b| {
        b.iter(|| black_box(read.path_entry(&inc, &existing).unwrap()))
    });
    for (name, path) in [
        ("check/depth2", "outputs/new-file".to_string()),
        ("check/depth3", "outputs/d07/new-file".to_string()),
        ("check/depth16", format!("outputs/{deep}")),
    ] {
        let path = normalize(&path).unwrap();
        group.bench_function(name, |b| {
            b.iter(|| read.check_creatable(&inc, black_box(&path)).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench_namespace);
criterion_main!(benches);
