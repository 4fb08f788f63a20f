//! What the audit trail costs a write through `nokv serve` (issue 27), a bench binary.
//!
//! 1. **One client.** Sequential 4 KiB puts through one server (each put is recorded in the
//!    audit trail, durably, before its answer) and, interleaved in the same rounds, the audit
//!    append alone (`AuditLog::append` of a record like a put's, on a store on the same file
//!    system, one `fdatasync` each): the p50 of each and the append's share of a put, the time a
//!    sequential client waits for its record.
//! 2. **Many clients.** `NOKV_BENCH_CLIENTS` clients put for `NOKV_BENCH_SECS` seconds; from the
//!    server's `/metrics`: audit records per audit `fdatasync` beside WAL records per group
//!    commit (how far concurrent records share their syncs).
//!
//! Run: `cargo bench -p nokv-benches --bench audit_cost`. `NOKV_BENCH_PUTS=2000` (samples per
//! row), `NOKV_BENCH_ROUNDS=10`, `NOKV_BENCH_CLIENTS=16`, `NOKV_BENCH_SECS=10`;
//! `NOKV_BENCH_DIR` places the stores (default: the system temp directory).

use nokv::access::{AuditEntry, AuditLog};
use nokv::PutOptions;
use nokv_benches::{bench_dir, env_u64, percentiles, run_for, time_n};
use nokv_remote::RemoteClient;
use nokv_server::{RunningServer, ServerOptions};

/// The server's counter `name` from `/metrics` (0 when absent).
fn metric(agent: &ureq::Agent, server: &RunningServer, name: &str) -> f64 {
    let mut r = agent
        .get(&format!("{}/metrics", server.url()))
        .call()
        .expect("metrics");
    let text = r.body_mut().read_to_string().expect("metrics body");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

fn main() {
    let puts = env_u64("NOKV_BENCH_PUTS").unwrap_or(2000);
    let rounds = env_u64("NOKV_BENCH_ROUNDS").unwrap_or(10).max(1);
    let clients = env_u64("NOKV_BENCH_CLIENTS").unwrap_or(16).max(1) as usize;
    let secs = env_u64("NOKV_BENCH_SECS").unwrap_or(10);
    let tmp = tempfile::tempdir_in(bench_dir()).expect("tempdir");
    let server = nokv_server::start(ServerOptions {
        store: tmp.path().join("served"),
        listen: "127.0.0.1:0".into(),
        maintenance_interval: std::time::Duration::ZERO,
        recovery_interval: std::time::Duration::ZERO,
        ..ServerOptions::default()
    })
    .expect("server");
    let remote = RemoteClient::connect(&server.url(), None).expect("connect");
    remote.create_workbench("bench").expect("create");
    let body = vec![b'x'; 4096];
    let opts = PutOptions::create("application/octet-stream", "bench");
    let trail = AuditLog::at_store(&tmp.path().join("trail"));
    let entry = AuditEntry {
        actor: "anonymous".into(),
        tool: "upload".into(),
        workbench: Some("bench".into()),
        path: Some("outputs/f00000".into()),
        generation_after: Some(1),
        request_id: Some("0123456789abcdef".into()),
        outcome: "success".into(),
        status: Some(200),
        ..AuditEntry::default()
    };

    let per_round = (puts / rounds).max(1);
    let (mut put_samples, mut append_samples) = (Vec::new(), Vec::new());
    let mut paired = Vec::new();
    let mut i = 0u64;
    for round in 0..rounds {
        let mut time_puts = || {
            time_n(per_round, || {
                remote
                    .put("bench", &format!("outputs/f{i:05}"), &body, &opts)
                    .expect("put");
                i += 1;
            })
        };
        let time_appends = || {
            time_n(per_round, || {
                trail.append(&entry, 1).expect("append");
            })
        };
        // Alternate which row goes first.
        let (p, a) = if round % 2 == 0 {
            let p = time_puts();
            (p, time_appends())
        } else {
            let a = time_appends();
            (time_puts(), a)
        };
        paired.push(percentiles(a.clone()).0 / percentiles(p.clone()).0);
        put_samples.extend(p);
        append_samples.extend(a);
    }
    paired.sort_by(f64::total_cmp);
    let (p50, p90, p99) = percentiles(put_samples);
    let (a50, a90, a99) = percentiles(append_samples);
    println!("## one client: a 4 KiB put through nokv serve and the audit append alone (ms; {rounds} interleaved rounds of {per_round})");
    println!("| row | p50 | p90 | p99 |");
    println!("|---|---:|---:|---:|");
    println!(
        "| put through the server (its audit record included) | {p50:.3} | {p90:.3} | {p99:.3} |"
    );
    println!("| audit append alone (write + fdatasync) | {a50:.3} | {a90:.3} | {a99:.3} |");
    println!(
        "append p50 / put p50: {:.3} (median of per-round ratios {:.3})",
        a50 / p50,
        paired[paired.len() / 2]
    );

    let agent = ureq::Agent::new_with_defaults();
    let names = [
        "nokv_audit_records_total",
        "nokv_audit_syncs_total",
        "nokv_group_commit_records_total",
        "nokv_group_commit_groups_total",
    ];
    let before: Vec<f64> = names.iter().map(|n| metric(&agent, &server, n)).collect();
    let remotes: Vec<RemoteClient> = (0..clients)
        .map(|_| RemoteClient::connect(&server.url(), None).expect("connect"))
        .collect();
    let (done, elapsed) = run_for(clients, secs, &|c, k| {
        remotes[c]
            .put("bench", &format!("outputs/c{c}/f{k}"), &body, &opts)
            .expect("put");
    });
    let d: Vec<f64> = names
        .iter()
        .zip(&before)
        .map(|(n, b)| metric(&agent, &server, n) - b)
        .collect();
    println!();
    println!("## {clients} clients for {secs} s");
    println!("| puts/s | audit records | audit fdatasyncs | records per audit sync | WAL records per group commit | audit syncs per put |");
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} |",
        done as f64 / elapsed,
        d[0],
        d[1],
        d[0] / d[1].max(1.0),
        d[2] / d[3].max(1.0),
        d[1] / (done as f64).max(1.0)
    );
    drop(remotes);
    drop(remote);
    server.shutdown().expect("shutdown");
}
