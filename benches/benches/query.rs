//! Typed-index search benchmarks (issue 6): a selective predicate over N indexed artifacts
//! (default 100,000; `NOKV_BENCH_QUERY_ARTIFACTS` overrides) does work proportional to its
//! matches, not to the artifacts in scope.
//!
//! Fixture: 100 workbenches × N/100 artifacts, each published through `MetaShard::publish` (one
//! metadata command per artifact, writing PathCurrent and its SecondaryIndex rows) with custom
//! fields `sel10` = i mod (N/10) (an `eq` hits 10 artifacts), `sel1000` = i mod (N/1000) (an `eq`
//! hits 1,000) and `score` = i (a `gte` range hits the top 10 or top 1,000). The load phase uses
//! `Durability::Buffered` (not a durability claim; it only shortens the load).
//!
//! Every benchmark is one root-wide `meta::index::query::search` with `limit` 10 (the contract
//! page): plan, ordered index scan, per-row visibility recheck and PathCurrent read, sort,
//! `match_count`, and the 10-row projection. Before timing, each prints its rows examined and
//! point reads.
//!
//! Run: `cargo bench -p nokv-benches --bench query`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use meta::index::query::{search, Op, Predicate, QueryLimits, QueryScope, SearchRequest};
use meta::index::{FieldId, IndexValue};
use meta::{
    normalize, ArtifactRevisionId, MetaShard, OpenOptions, PathCondition, PublishRequest, RequestId,
};

const WORKBENCHES: u64 = 100;

fn artifact_count() -> u64 {
    std::env::var("NOKV_BENCH_QUERY_ARTIFACTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &u64| *n >= 10_000)
        .unwrap_or(100_000)
}

fn field(name: &str) -> FieldId {
    FieldId::new(name).expect("field id")
}

fn load(shard: &MetaShard, n: u64) {
    let per = n / WORKBENCHES;
    for w in 0..WORKBENCHES {
        let wb = format!("run-{w:03}");
        shard.create_workspace(&wb).expect("create");
        for j in 0..per {
            let i = w * per + j;
            let index_fields = [
                (field("sel10"), IndexValue::UInt(i % (n / 10))),
                (field("sel1000"), IndexValue::UInt(i % (n / 1000))),
                (field("score"), IndexValue::UInt(i)),
            ]
            .into_iter()
            .collect();
            shard
                .publish(PublishRequest {
                    request_id: RequestId::random().expect("id"),
                    workbench_id: wb.clone(),
                    path: normalize(&format!("outputs/a{j:06}.json")).expect("path"),
                    condition: PathCondition::Create,
                    revision_id: ArtifactRevisionId::random().expect("rev"),
                    logical_size: 0,
                    body_digest_uri: format!("sha256:{:064x}", i),
                    content_type: "application/json".into(),
                    producer: "bench".into(),
                    manifest_id: None,
                    manifest: vec![],
                    dependency_depth: 0,
                    index_fields,
                })
                .expect("publish");
        }
    }
}

fn request(field_name: &str, op: Op, value: u64) -> SearchRequest {
    SearchRequest {
        scope: QueryScope::default(),
        predicates: vec![Predicate {
            field: field(field_name),
            op,
            operands: vec![IndexValue::UInt(value)],
        }],
        fields: None,
        sort: vec![],
        facets: vec![],
        limit: 10,
        resume: None,
    }
}

fn query_benches(c: &mut Criterion) {
    let n = artifact_count();
    let dir = tempfile::tempdir().expect("tempdir");
    let shard = MetaShard::open(
        dir.path(),
        OpenOptions {
            holt: holt::Options {
                durability: holt::Durability::Buffered,
                ..holt::Options::default()
            },
            ..OpenOptions::default()
        },
    )
    .expect("open");
    let started = std::time::Instant::now();
    load(&shard, n);
    println!(
        "query bench: loaded {n} indexed artifacts in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let cases = [
        ("eq_10", request("sel10", Op::Eq, 7)),
        ("eq_1000", request("sel1000", Op::Eq, 7)),
        ("range_10", request("score", Op::Gte, n - 10)),
        ("range_1000", request("score", Op::Gte, n - 1000)),
    ];
    for (name, req) in &cases {
        let page = search(&shard, req, QueryLimits::default()).expect("search");
        println!(
            "query/{name}/{n}: matches {} rows_examined {} probe_rows {} path_reads {} \
             visibility_reads {} plan {:?}",
            page.match_count,
            page.stats.rows_examined,
            page.stats.probe_rows,
            page.stats.path_reads,
            page.stats.visibility_reads,
            page.stats.plan
        );
        c.bench_function(&format!("query/{name}/{n}"), |b| {
            b.iter(|| {
                let page = search(&shard, req, QueryLimits::default()).expect("search");
                black_box(page.match_count);
            })
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = query_benches
}
criterion_main!(benches);
