//! What token checks cost `stat` through `nokv serve` (issue 27: at most 5 % on the p50), a
//! bench binary.
//!
//! Three servers in this process, each on its own store holding one workbench with one file,
//! answer `RemoteClient::stat` (`GET /v1/workbenches/{id}/stat/{path}`):
//!
//! * `open` — no token (loopback), no registry: the baseline;
//! * `token-file` — the server's single `--token-file` token (one constant-time compare);
//! * `registry` — a registry token scoped `read:wb-*` among 100 others (a `stat` of the registry
//!   file, an id lookup, one HMAC-SHA256 under the token's salt, the scope check).
//!
//! The rows are measured in interleaved rounds (each round times every server in turn), so a
//! drift of the machine falls on all of them alike; the ratio column is p50 / p50 of `open`.
//! Run: `cargo bench -p nokv-benches --bench server_auth`. `NOKV_BENCH_STATS=20000` (samples per
//! server), `NOKV_BENCH_ROUNDS=10`.

use std::time::Duration;

use nokv::access::TokenRegistry;
use nokv::{Client, PutOptions};
use nokv_benches::{env_u64, percentiles, time_n};
use nokv_remote::RemoteClient;
use nokv_server::{RunningServer, ServerOptions};

/// A server over a fresh store with `wb-1/input/a.txt`; `registry` tokens are made first.
fn served(
    dir: &std::path::Path,
    token: Option<&str>,
    registry: bool,
) -> (RunningServer, Option<String>) {
    {
        let client = Client::open(dir).expect("open");
        client.create_workbench("wb-1").expect("create");
        client
            .put(
                "wb-1",
                "input/a.txt",
                b"alpha",
                &PutOptions::create("text/plain", "bench"),
            )
            .expect("put");
    }
    let secret = registry.then(|| {
        let reg = TokenRegistry::at_store(dir);
        for i in 0..100 {
            reg.create(&format!("other-{i}"), &["write:run-*".to_string()], None, 0)
                .expect("token");
        }
        reg.create("agent", &["read:wb-*".to_string()], None, 0)
            .expect("token")
            .token
    });
    let server = nokv_server::start(ServerOptions {
        store: dir.to_path_buf(),
        listen: "127.0.0.1:0".into(),
        token: token.map(str::to_string),
        maintenance_interval: Duration::ZERO,
        recovery_interval: Duration::ZERO,
        ..ServerOptions::default()
    })
    .expect("server");
    (server, secret.or(token.map(str::to_string)))
}

fn main() {
    let stats = env_u64("NOKV_BENCH_STATS").unwrap_or(20_000);
    let rounds = env_u64("NOKV_BENCH_ROUNDS").unwrap_or(10).max(1);
    let tmp = tempfile::tempdir().expect("tempdir");
    let configs = [
        ("open", None, false),
        ("token-file", Some("bench-secret-token"), false),
        ("registry (read:wb-*, 101 tokens)", None, true),
    ];
    let mut running = Vec::new();
    for (i, (name, token, registry)) in configs.iter().enumerate() {
        let (server, secret) = served(&tmp.path().join(format!("s{i}")), *token, *registry);
        let remote = RemoteClient::connect(&server.url(), secret.as_deref()).expect("connect");
        remote.stat("wb-1", "input/a.txt").expect("warm");
        running.push((*name, server, remote, Vec::new()));
    }
    let per_round = (stats / rounds).max(1);
    for _ in 0..rounds {
        for (_, _, remote, samples) in running.iter_mut() {
            samples.extend(time_n(per_round, || {
                remote.stat("wb-1", "input/a.txt").expect("stat");
            }));
        }
    }
    println!("## stat through nokv serve, by authentication (ms; {rounds} interleaved rounds)");
    println!("| server | samples | p50 | p90 | p99 | p50 / open |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut base = None;
    for (name, server, remote, samples) in running {
        let n = samples.len();
        let (p50, p90, p99) = percentiles(samples);
        let b = *base.get_or_insert(p50);
        println!(
            "| {name} | {n} | {p50:.4} | {p90:.4} | {p99:.4} | {:.3} |",
            p50 / b
        );
        drop(remote);
        server.shutdown().expect("shutdown");
    }
}
