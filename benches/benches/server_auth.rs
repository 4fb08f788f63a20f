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
//! The rows are measured in interleaved rounds (each round times every server in turn, starting
//! with a different one), so a drift of the machine falls on all of them alike; the ratio column
//! is p50 / p50 of `open`.
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
    // `NOKV_BENCH_REVERSE=1` starts the servers in the opposite order (a check that the start
    // order does not decide the result).
    let reverse = env_u64("NOKV_BENCH_REVERSE").unwrap_or(0) == 1;
    let mut started: Vec<_> = configs.iter().enumerate().collect();
    if reverse {
        started.reverse();
    }
    let mut running = Vec::new();
    for (i, (name, token, registry)) in started {
        let (server, secret) = served(&tmp.path().join(format!("s{i}")), *token, *registry);
        let remote = RemoteClient::connect(&server.url(), secret.as_deref()).expect("connect");
        remote.stat("wb-1", "input/a.txt").expect("warm");
        running.push((i, (*name, server, remote, Vec::new())));
    }
    running.sort_by_key(|(i, _)| *i);
    let mut running: Vec<_> = running.into_iter().map(|(_, r)| r).collect();
    let per_round = (stats / rounds).max(1);
    let n = running.len();
    // Per round and server: the round's p50, so each server's p50 can be compared with the open
    // server's p50 of the same round (paired, which cancels drift between rounds).
    let mut round_p50 = vec![Vec::new(); n];
    for round in 0..rounds as usize {
        // Each round starts with another server, so no server is always first or last.
        for k in 0..n {
            let i = (round + k) % n;
            let (_, _, remote, samples) = &mut running[i];
            let timed = time_n(per_round, || {
                remote.stat("wb-1", "input/a.txt").expect("stat");
            });
            round_p50[i].push(percentiles(timed.clone()).0);
            samples.extend(timed);
        }
    }
    println!("## stat through nokv serve, by authentication (ms; {rounds} interleaved rounds)");
    println!(
        "| server | samples | p50 | p90 | p99 | p50 / open | median of per-round p50 ratios |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut base = None;
    let open_rounds = round_p50[0].clone();
    for (i, (name, server, remote, samples)) in running.into_iter().enumerate() {
        let count = samples.len();
        let (p50, p90, p99) = percentiles(samples);
        let b = *base.get_or_insert(p50);
        let mut ratios: Vec<f64> = round_p50[i]
            .iter()
            .zip(&open_rounds)
            .map(|(x, o)| x / o)
            .collect();
        ratios.sort_by(f64::total_cmp);
        let paired = ratios[ratios.len() / 2];
        println!(
            "| {name} | {count} | {p50:.4} | {p90:.4} | {p99:.4} | {:.3} | {paired:.3} |",
            p50 / b
        );
        drop(remote);
        server.shutdown().expect("shutdown");
    }

    // The check itself, in this process: what the guard runs for a registry token (the
    // registry file's stat, the id lookup, one HMAC-SHA256, the scope check).
    let dir = tmp.path().join("check");
    std::fs::create_dir_all(&dir).expect("dir");
    let reg = TokenRegistry::at_store(&dir);
    for i in 0..100 {
        reg.create(&format!("other-{i}"), &["write:run-*".to_string()], None, 0)
            .expect("token");
    }
    let secret = reg
        .create("agent", &["read:wb-*".to_string()], None, 0)
        .expect("token")
        .token;
    let target = nokv::access::Target::workbench("wb-1");
    let checks = stats.max(1000);
    let timed = time_n(checks, || {
        let caller = reg.authenticate(&secret, 1).expect("authenticate");
        assert!(caller.scopes.allows(nokv::access::Action::Read, &target));
    });
    let (c50, c90, c99) = percentiles(timed);
    println!();
    println!("## the registry token check alone, in process ({checks} checks)");
    println!("| p50 µs | p90 µs | p99 µs |");
    println!("|---:|---:|---:|");
    println!(
        "| {:.2} | {:.2} | {:.2} |",
        c50 * 1000.0,
        c90 * 1000.0,
        c99 * 1000.0
    );
}
