//! `nokv serve` benchmarks (issue 14), a bench binary:
//!
//! 1. 4 KiB `put` throughput with 1, 4, 16, 64 concurrent clients through one server (each
//!    client its own `RemoteClient` and connection, distinct paths), and the same with threads
//!    sharing one embedded `Client`, for comparison;
//! 2. `stat` latency: through the Rust remote client, through `nokv --server` (a whole process
//!    per call), and embedded (an open `Client`, and `nokv --store`, a whole process per call).
//!
//! The server runs in this process on a loopback port (default durability: every metadata
//! command waits for its WAL fdatasync, shared by group commit). Run:
//! `cargo build --release -p nokv-cli --bin nokv && NOKV_BENCH_BIN=target/release/nokv
//! cargo bench -p nokv-benches --bench server`. `NOKV_BENCH_CLIENTS=1,4,16,64`,
//! `NOKV_BENCH_SECS=5` (per client count), `NOKV_BENCH_STATS=2000` (stat samples; process rows
//! use a tenth).

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nokv::{Client, PutOptions};
use nokv_benches::{env_list, env_u64, percentiles, time_n};
use nokv_remote::RemoteClient;
use nokv_server as server;
use nokv_server::ServerOptions;

/// Runs `clients` writers for `secs` through `put`; returns (acknowledged, failed, seconds).
fn throughput(
    clients: usize,
    secs: u64,
    put: &(dyn Fn(usize, u64) -> bool + Sync),
) -> (u64, u64, f64) {
    let stop = AtomicBool::new(false);
    let ok = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for c in 0..clients {
            let (stop, ok, failed) = (&stop, &ok, &failed);
            s.spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if put(c, i) {
                        ok.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    i += 1;
                }
            });
        }
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
    });
    (
        ok.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        start.elapsed().as_secs_f64(),
    )
}

fn main() {
    let clients = env_list("NOKV_BENCH_CLIENTS", &[1, 4, 16, 64]);
    let secs = env_u64("NOKV_BENCH_SECS").unwrap_or(5);
    let stats = env_u64("NOKV_BENCH_STATS").unwrap_or(2000);
    let body = vec![b'x'; 4096];
    let opts = PutOptions::create("application/octet-stream", "bench");

    println!("## 4 KiB put throughput ({secs} s per row)");
    println!("| clients | server: puts/s | × 1 client | failed | embedded (threads, one Client): puts/s | × 1 thread | failed |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let (mut base_remote, mut base_embedded) = (None, None);
    for &n in &clients {
        let tmp = tempfile::tempdir().expect("tempdir");
        let srv = server::start(ServerOptions {
            store: tmp.path().join("served"),
            listen: "127.0.0.1:0".into(),
            ..ServerOptions::default()
        })
        .expect("server");
        let remotes: Vec<RemoteClient> = (0..n)
            .map(|_| RemoteClient::connect(&srv.url(), None).expect("connect"))
            .collect();
        remotes[0].create_workbench("bench").expect("create");
        let (ok_r, fail_r, t_r) = throughput(n, secs, &|c, i| {
            remotes[c]
                .put("bench", &format!("outputs/c{c}/f{i}"), &body, &opts)
                .is_ok()
        });
        drop(remotes);
        srv.shutdown().expect("shutdown");
        let client = Client::open(tmp.path().join("embedded")).expect("open");
        client.create_workbench("bench").expect("create");
        let (ok_e, fail_e, t_e) = throughput(n, secs, &|c, i| {
            client
                .put("bench", &format!("outputs/c{c}/f{i}"), &body, &opts)
                .is_ok()
        });
        let (rr, re) = (ok_r as f64 / t_r, ok_e as f64 / t_e);
        let br = *base_remote.get_or_insert(rr);
        let be = *base_embedded.get_or_insert(re);
        println!(
            "| {n} | {rr:.0} | {:.2} | {fail_r} | {re:.0} | {:.2} | {fail_e} |",
            rr / br,
            re / be
        );
    }

    println!();
    println!("## stat latency (ms)");
    println!("| path | samples | p50 | p90 | p99 |");
    println!("|---|---:|---:|---:|---:|");
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = tmp.path().join("s");
    {
        let client = Client::open(&store).expect("open");
        client.create_workbench("wb").expect("create");
        client
            .put(
                "wb",
                "input/a.txt",
                b"hello",
                &PutOptions::create("text/plain", "bench"),
            )
            .expect("put");
    }
    let srv = server::start(ServerOptions {
        store: store.clone(),
        listen: "127.0.0.1:0".into(),
        ..ServerOptions::default()
    })
    .expect("server");
    let remote = RemoteClient::connect(&srv.url(), None).expect("connect");
    remote.stat("wb", "input/a.txt").expect("warm");
    let (p50, p90, p99) = percentiles(time_n(stats, || {
        remote.stat("wb", "input/a.txt").expect("stat");
    }));
    println!("| Rust RemoteClient::stat | {stats} | {p50:.3} | {p90:.3} | {p99:.3} |");
    let input = serde_json::json!({"id":"wb","section":"input","path":"a.txt"});
    let (p50, p90, p99) = percentiles(time_n(stats, || {
        remote.call_tool("stat", &input).expect("stat tool");
    }));
    println!(
        "| Rust RemoteClient::call_tool(\"stat\") | {stats} | {p50:.3} | {p90:.3} | {p99:.3} |"
    );
    let bin = std::env::var("NOKV_BENCH_BIN").ok();
    let procs = (stats / 10).max(20);
    if let Some(bin) = &bin {
        let url = srv.url();
        let (p50, p90, p99) = percentiles(time_n(procs, || {
            let out = Command::new(bin)
                .args(["--server", &url, "workbench", "stat"])
                .arg(input.to_string())
                .output()
                .expect("nokv --server");
            assert!(out.status.success());
        }));
        println!("| `nokv --server URL workbench stat` (process) | {procs} | {p50:.3} | {p90:.3} | {p99:.3} |");
    }
    srv.shutdown().expect("shutdown");
    let client = Client::open(&store).expect("open");
    let (p50, p90, p99) = percentiles(time_n(stats, || {
        client.stat("wb", "input/a.txt").expect("stat");
    }));
    println!("| embedded Client::stat | {stats} | {p50:.3} | {p90:.3} | {p99:.3} |");
    let wb = nokv::workbench::Workbench::new(client.clone());
    let (p50, p90, p99) = percentiles(time_n(stats, || {
        let env = wb.call("stat", &input);
        assert_eq!(env["status"], "success");
    }));
    println!("| embedded Workbench::call(\"stat\") | {stats} | {p50:.3} | {p90:.3} | {p99:.3} |");
    drop(wb);
    drop(client);
    if let Some(bin) = &bin {
        let (p50, p90, p99) = percentiles(time_n(procs, || {
            let out = Command::new(bin)
                .args([
                    "--store",
                    store.to_str().expect("utf-8"),
                    "workbench",
                    "stat",
                ])
                .arg(input.to_string())
                .output()
                .expect("nokv --store");
            assert!(out.status.success());
        }));
        println!("| `nokv --store DIR workbench stat` (process) | {procs} | {p50:.3} | {p90:.3} | {p99:.3} |");
    } else {
        println!("(set NOKV_BENCH_BIN to a release `nokv` binary for the whole-process rows)");
    }
}
