//! Commit benchmark (issue 7): one durable commit of a workbench with N published files
//! (default 1,000; `NOKV_BENCH_COMMIT_FILES` overrides) through `nokv::Client::commit` (docs/metadata-format.md,
//! "Commit Closure"): begin (frozen request + HistoryHold), run-manifest upload and staging,
//! ⌈(N+1)/64⌉ member batches (CommitMember rows + one RevisionRef(Commit) per new revision),
//! the seal's verification rescan, and the single publishing command. Default durability
//! (`Sync`: every metadata command waits for its WAL fdatasync), local-directory objects.
//!
//! Each iteration commits the same tree under a new identity with `replace = true`, so every
//! iteration builds a complete closure of N+1 members and N+1 commit references.
//!
//! Run: `cargo bench -p nokv-benches --bench commit`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use nokv::commit::CommitRequest;
use nokv::{Client, PutOptions};

fn file_count() -> usize {
    std::env::var("NOKV_BENCH_COMMIT_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or(1_000)
}

fn bench_commit(c: &mut Criterion) {
    let n = file_count();
    let dir = tempfile::tempdir().expect("tempdir");
    let client = Client::open(dir.path().join("store")).expect("open");
    client.create_workbench("run").expect("create");
    let opts = PutOptions::create("text/plain", "bench");
    for i in 0..n {
        client
            .put(
                "run",
                &format!("outputs/f{i:05}.txt"),
                format!("{i}\n").as_bytes(),
                &opts,
            )
            .expect("put");
    }
    let mut round = 0u64;
    let mut group = c.benchmark_group("commit");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function(format!("commit_{n}_files"), |b| {
        b.iter(|| {
            round += 1;
            client
                .commit(&CommitRequest {
                    workbench_id: "run".into(),
                    manifest: serde_json::json!({ "round": round }),
                    content_digest_uri: format!("sha256:{:064x}", round),
                    replace: true,
                    parents: Vec::new(),
                })
                .expect("commit")
        })
    });
    group.finish();
}

criterion_group!(benches, bench_commit);
criterion_main!(benches);
