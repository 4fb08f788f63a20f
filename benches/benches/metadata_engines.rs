//! Metadata engines side by side (issue 15): the same embedded `nokv::Client` workload on a
//! holt-backed store (`<store>/meta`, `Durability::Sync`) and on an etcd-backed store
//! (`nokv init --metadata-etcd`, the root's logical shard in a three-member etcd cluster on
//! loopback whose members keep their data on the same disk as the holt store, so both pay their
//! fsyncs).
//!
//! Workload per engine, on one workbench:
//!
//! * `put_file` — `Client::put` of a new 4 KiB file (the Publish operation's ledger commands, the
//!   block upload to the local object directory, the publishing command): latency of
//!   `NOKV_BENCH_OPS` sequential calls (default 200);
//! * `stat` — `Client::stat` of a random published file: latency;
//! * `list` — `workbench_list` of a directory of 100 files: latency;
//! * `put_file x16` and `stat x16` — 16 client threads (clones of one `Client`) each doing
//!   `NOKV_BENCH_OPS / 4` calls: aggregate throughput.
//!
//! Prints one table (median, p99 in microseconds; throughput in operations per second). A bench
//! binary rather than criterion: each sample writes durable state, and both engines must run in
//! the same process against the same etcd cluster for the ratio to mean anything.
//!
//! Run: `cargo bench -p nokv-benches --bench metadata_engines` (needs `etcd` on `PATH`).

use std::time::{Duration, Instant};

use nokv::workbench::Workbench;
use nokv::{Client, PutOptions};
use serde_json::json;

const CLIENTS: usize = 16;
const LIST_FILES: usize = 100;

fn ops() -> usize {
    std::env::var("NOKV_BENCH_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n >= 16)
        .unwrap_or(200)
}

struct Row {
    name: String,
    median_us: f64,
    p99_us: f64,
}

fn latency(name: &str, n: usize, mut f: impl FnMut(usize)) -> Row {
    let mut samples: Vec<Duration> = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f(i);
        samples.push(t.elapsed());
    }
    samples.sort();
    let at = |q: f64| {
        let idx = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[idx].as_secs_f64() * 1e6
    };
    Row {
        name: name.to_owned(),
        median_us: at(0.5),
        p99_us: at(0.99),
    }
}

/// Aggregate successful operations per second of 16 threads, and how many calls failed with a
/// read-version conflict or `Busy` after the retries (optimistic commands on one workspace).
fn throughput(
    client: &Client,
    n_each: usize,
    f: fn(&Client, usize, usize) -> bool,
) -> (f64, usize) {
    let start = Instant::now();
    let ok = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..CLIENTS {
            let c = client.clone();
            let ok = &ok;
            s.spawn(move || {
                for i in 0..n_each {
                    if f(&c, t, i) {
                        ok.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let ok = ok.into_inner();
    (
        ok as f64 / start.elapsed().as_secs_f64(),
        CLIENTS * n_each - ok,
    )
}

fn put_x16(c: &Client, t: usize, i: usize) -> bool {
    match c.put(
        "wb",
        &format!("input/par/t{t:02}/f{i:05}.txt"),
        &[b'x'; 4096],
        &PutOptions::create("text/plain", "bench"),
    ) {
        Ok(_) => true,
        Err(nokv::Error::Meta(meta::Error::ReadVersionConflict { .. }) | nokv::Error::Busy) => {
            false
        }
        Err(e) => panic!("put: {e:?}"),
    }
}

fn stat_x16(c: &Client, t: usize, i: usize) -> bool {
    c.stat("wb", &format!("input/seq/f{:05}.txt", (t * 7919 + i) % 64))
        .expect("stat");
    true
}

struct EngineRun {
    engine: &'static str,
    rows: Vec<Row>,
    put16: (f64, usize),
    stat16: (f64, usize),
}

fn run(engine: &'static str, client: Client) -> EngineRun {
    let n = ops();
    client.create_workbench("wb").expect("workbench");
    let wb = Workbench::new(client.clone());
    let body = vec![b'x'; 4096];
    let mut rows = Vec::new();
    rows.push(latency("put_file 4 KiB", n, |i| {
        client
            .put(
                "wb",
                &format!("input/seq/f{i:05}.txt"),
                &body,
                &PutOptions::create("text/plain", "bench"),
            )
            .expect("put");
    }));
    let mut x = 0x9e37_79b9_u64;
    rows.push(latency("stat", n, |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        client
            .stat("wb", &format!("input/seq/f{:05}.txt", x % n as u64))
            .expect("stat");
    }));
    for i in 0..LIST_FILES {
        client
            .put(
                "wb",
                &format!("input/dir/f{i:03}.txt"),
                b"small",
                &PutOptions::create("text/plain", "bench"),
            )
            .expect("put");
    }
    rows.push(latency("list (100 entries)", n, |_| {
        let v = wb.call(
            "workbench_list",
            &json!({"id": "wb", "section": "input", "path": "dir"}),
        );
        assert_eq!(v["entries"].as_array().map(Vec::len), Some(LIST_FILES));
    }));
    let each = n / 4;
    let put16 = throughput(&client, each, put_x16);
    let stat16 = throughput(&client, each, stat_x16);
    EngineRun {
        engine,
        rows,
        put16,
        stat16,
    }
}

fn main() {
    // Criterion-style flags (`--bench`) are accepted and ignored.
    let scratch = tempfile::tempdir_in(std::env::current_dir().expect("cwd")).expect("tempdir");
    // etcd members on disk (not tmpfs), like the holt store.
    let etcd_dir = scratch.path().join("etcd");
    std::fs::create_dir_all(&etcd_dir).expect("etcd dir");
    std::env::set_var("NOKV_TEST_ETCD_DIR", &etcd_dir);
    let cluster = testkit::etcd::EtcdCluster::start(3).expect("a three-member etcd cluster");

    let holt_client = Client::open(scratch.path().join("holt-store")).expect("holt store");
    let holt = run("holt", holt_client);

    let etcd_store = scratch.path().join("etcd-store");
    nokv::store_config::init_store(
        &etcd_store,
        &nokv::store_config::InitOptions {
            metadata_etcd: Some(cluster.endpoints().join(",")),
            root_name: Some("bench".into()),
            ..Default::default()
        },
    )
    .expect("init etcd-backed store");
    let etcd_client = Client::open(&etcd_store).expect("etcd store");
    let etcd = run("etcd", etcd_client);

    println!(
        "{:<22} {:>14} {:>14} {:>14} {:>14} {:>10}",
        "operation", "holt median", "holt p99", "etcd median", "etcd p99", "etcd/holt"
    );
    for (h, e) in holt.rows.iter().zip(&etcd.rows) {
        println!(
            "{:<22} {:>11.0} us {:>11.0} us {:>11.0} us {:>11.0} us {:>9.2}x",
            h.name,
            h.median_us,
            h.p99_us,
            e.median_us,
            e.p99_us,
            e.median_us / h.median_us
        );
    }
    for (name, h, e) in [
        ("put_file x16 (ops/s)", holt.put16, etcd.put16),
        ("stat x16 (ops/s)", holt.stat16, etcd.stat16),
    ] {
        println!(
            "{:<22} {:>14.0} {:>14} {:>14.0} {:>14} {:>9.2}x",
            name,
            h.0,
            format!("{} failed", h.1),
            e.0,
            format!("{} failed", e.1),
            e.0 / h.0
        );
    }
    println!("engines: {} and {}", holt.engine, etcd.engine);
    drop(cluster);
}
