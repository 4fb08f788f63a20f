//! `failover` — how long is a root unwritable when its owner dies, and what does a metadata
//! round trip through etcd cost against holt? (issue 15; docs/design.md, "Distribution")
//!
//! Everything runs as real processes on loopback: a three-member etcd cluster (testkit), an
//! s3s-fs object server and `nokv serve` processes of the CLI built next to this binary.
//!
//! 1. **Failover** (`--trials`, default 10): two `nokv serve --control` servers (lease
//!    `--ttl` seconds, objects on s3s-fs) and one root. Per trial a routed client writes once
//!    (warm owner cache), the root's owner is killed with SIGKILL, and the client writes
//!    create-only files until one is acknowledged: **kill → first successful write**. The killed
//!    server is restarted (same state directory) before the next trial, which kills the other.
//! 2. **Latency** (`--ops`, default 300): `put_file` of a 1 KiB file (create-only) and `stat`
//!    of it through one `nokv serve --control` server on an etcd-backed shard, and through a
//!    holt-backed `nokv serve` of a local store, one client, sequential, both with local
//!    objects, interleaved in rounds of 25 so load changes hit both alike; every fifth step
//!    also a `workbench_list` of 50 entries.
//! 3. **Throughput** (`--secs`, default 10): 16 clients publishing 1 KiB files for that long,
//!    first through the etcd-backed shard, then through holt.
//!
//! ```text
//! cargo build --release -p nokv-cli -p nokv-benches --bin nokv --bin failover
//! target/release/failover [--trials 10] [--ttl 3] [--ops 300] [--secs 10] [--nokv PATH]
//! ```
//!
//! s3s-fs must be on `PATH` or in `$CARGO_HOME/bin`; etcd on `PATH`. Results go to stdout as
//! Markdown.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nokv::PutOptions;
use nokv_remote::RemoteClient;

const ACCESS_KEY: &str = "nokv-bench";
const SECRET_KEY: &str = "nokv-bench-secret";
const BUCKET: &str = "nokv-failover";

struct Args {
    trials: usize,
    ttl: u64,
    ops: usize,
    secs: u64,
    nokv: PathBuf,
}

fn usage() -> ! {
    eprintln!("usage: failover [--trials N] [--ttl SECS] [--ops N] [--secs S] [--nokv PATH]");
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        trials: 10,
        ttl: 3,
        ops: 300,
        secs: 10,
        nokv: PathBuf::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--trials" => a.trials = value().parse().unwrap_or_else(|_| usage()),
            "--ttl" => a.ttl = value().parse().unwrap_or_else(|_| usage()),
            "--ops" => a.ops = value().parse().unwrap_or_else(|_| usage()),
            "--secs" => a.secs = value().parse().unwrap_or_else(|_| usage()),
            "--nokv" => a.nokv = PathBuf::from(value()),
            _ => usage(),
        }
    }
    if a.trials == 0 || a.ops == 0 || a.ttl < 2 {
        usage();
    }
    if a.nokv.as_os_str().is_empty() {
        let me = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("failover"));
        a.nokv = me.with_file_name("nokv");
    }
    a
}

fn fail(what: &str) -> ! {
    eprintln!("failover: {what}");
    std::process::exit(1)
}

fn free_port() -> u16 {
    testkit::s3s::free_port().unwrap_or_else(|e| fail(&e.to_string()))
}

fn wait_tcp(addr: &str, within: Duration) {
    if !testkit::s3s::wait_tcp(addr, within) {
        fail(&format!("{addr} did not listen"))
    }
}

/// A child process killed on drop.
struct Proc(Option<Child>);

impl Proc {
    fn kill9(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Starts `nokv [--store state] serve …extra` on `addr`.
fn serve(nokv: &Path, state: &Path, addr: &str, extra: &[String]) -> Proc {
    let child = Command::new(nokv)
        .arg("--store")
        .arg(state)
        .args(["serve", "--listen", addr, "--maintenance-interval", "0"])
        .args(extra)
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env("AWS_REGION", "us-east-1")
        .env_remove("NOKV_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|_| fail("cannot start nokv serve"));
    wait_tcp(addr, Duration::from_secs(30));
    Proc(Some(child))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn owner_addr(control: &nokv::control::ControlPlane, root: &str) -> Option<String> {
    let rec = control.root_by_name(root).ok()??;
    let (owner, _) = control.shard_owner(&rec.placement.logical_shard_id).ok()?;
    owner.map(|o| o.address)
}

fn main() {
    let args = parse_args();
    let work = tempfile::tempdir().unwrap_or_else(|_| fail("tempdir"));
    let etcd = testkit::etcd::EtcdCluster::start(3).unwrap_or_else(|e| fail(&e.to_string()));
    let control_url = etcd.endpoints().join(",");
    let control = nokv::control::ControlPlane::connect(etcd.endpoints(), "/nokv/")
        .unwrap_or_else(|e| fail(&e.to_string()));
    let s3 = testkit::s3s::S3sFs::start(&work.path().join("s3"), BUCKET, ACCESS_KEY, SECRET_KEY)
        .unwrap_or_else(|e| fail(&e.to_string()));
    let s3_endpoint = s3.endpoint.clone();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("## failover (nokv serve --control)\n");
    println!(
        "machine: {} cores; load average at start: {}; lease TTL {} s; etcd 3 members on loopback",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        args.ttl
    );

    // 1. Failover.
    control
        .create_root("failover", None)
        .unwrap_or_else(|e| fail(&e.to_string()));
    let ttl = args.ttl.to_string();
    let control_args = |objects: bool| -> Vec<String> {
        let mut v = vec![
            "--control".into(),
            control_url.clone(),
            "--lease-ttl".into(),
            ttl.clone(),
        ];
        if objects {
            v.extend([
                "--objects".into(),
                format!("s3://{BUCKET}"),
                "--endpoint".into(),
                s3_endpoint.clone(),
            ]);
        }
        v
    };
    let addrs: Vec<String> = (0..2)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let states: Vec<PathBuf> = (0..2)
        .map(|i| work.path().join(format!("server{i}")))
        .collect();
    let mut servers: Vec<Proc> = (0..2)
        .map(|i| serve(&args.nokv, &states[i], &addrs[i], &control_args(true)))
        .collect();
    let client = RemoteClient::connect_routed(&control_url, "/nokv/", "failover", None)
        .unwrap_or_else(|e| fail(&e.to_string()))
        .with_routing_deadline(Duration::from_secs(120))
        .with_response_timeout(Duration::from_secs(2));
    let opts = PutOptions::create("application/json", "failover-bench");
    let mut n = 0u64;
    let mut put = |client: &RemoteClient| {
        n += 1;
        client.put(
            "fo",
            &format!("outputs/{n:06}.json"),
            format!("{{\"n\":{n}}}").as_bytes(),
            &opts,
        )
    };
    let _ = client.create_workbench("fo");
    let mut times = Vec::new();
    for trial in 0..args.trials {
        put(&client).unwrap_or_else(|e| fail(&format!("warm-up write: {e}")));
        let owner = owner_addr(&control, "failover").unwrap_or_else(|| fail("no owner"));
        let victim = addrs
            .iter()
            .position(|a| *a == owner)
            .unwrap_or_else(|| fail("the owner is not one of the servers"));
        servers[victim].kill9();
        let killed = Instant::now();
        loop {
            match put(&client) {
                Ok(_) => break,
                Err(e) if killed.elapsed() > Duration::from_secs(120) => {
                    fail(&format!("no write within 120 s: {e}"))
                }
                Err(_) => {}
            }
        }
        let took = killed.elapsed();
        eprintln!("trial {trial}: {} ms", ms(took).round());
        times.push(took);
        servers[victim] = serve(
            &args.nokv,
            &states[victim],
            &addrs[victim],
            &control_args(true),
        );
    }
    drop(servers);
    let mut sorted = times.clone();
    sorted.sort();
    let median = match sorted.len() {
        0 => Duration::ZERO,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
    };
    println!(
        "\nkill -9 of the owner → first acknowledged write, {} trials: median {:.0} ms, max {:.0} ms, min {:.0} ms (lease TTL {} s + 2 s = {} ms)\n",
        sorted.len(),
        ms(median),
        ms(*sorted.last().unwrap_or(&Duration::ZERO)),
        ms(*sorted.first().unwrap_or(&Duration::ZERO)),
        args.ttl,
        (args.ttl + 2) * 1000
    );

    // 2. Latency: etcd-backed shard via --control vs holt-backed serve.
    control
        .create_root("latency", None)
        .unwrap_or_else(|e| fail(&e.to_string()));
    let etcd_addr = format!("127.0.0.1:{}", free_port());
    let _etcd_server = serve(
        &args.nokv,
        &work.path().join("lat-etcd"),
        &etcd_addr,
        &control_args(false),
    );
    let holt_addr = format!("127.0.0.1:{}", free_port());
    let _holt_server = serve(&args.nokv, &work.path().join("lat-holt"), &holt_addr, &[]);
    let etcd_client = RemoteClient::connect_routed(&control_url, "/nokv/", "latency", None)
        .unwrap_or_else(|e| fail(&e.to_string()));
    let holt_client = RemoteClient::connect(&format!("http://{holt_addr}"), None)
        .unwrap_or_else(|e| fail(&e.to_string()));
    let body = vec![b'x'; 1024];
    let mut lat: [[Vec<Duration>; 3]; 2] = Default::default(); // [engine][put, stat, list]
    for (e, c) in [&etcd_client, &holt_client].iter().enumerate() {
        // Warm-up: workbench, connection pool, the etcd owner cache.
        let deadline = Instant::now() + Duration::from_secs(60);
        while c.create_workbench("lat").is_err() {
            if Instant::now() > deadline {
                fail(&format!("engine {e}: no server answers"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let rounds = args.ops.div_ceil(25);
    let list_input = serde_json::json!({"id": "lat", "section": "outputs", "limit": 50});
    for r in 0..rounds {
        for (e, c) in [&etcd_client, &holt_client].iter().enumerate() {
            for i in 0..25 {
                let path = format!("outputs/r{r:04}/{i:02}.bin");
                let t = Instant::now();
                c.put(
                    "lat",
                    &path,
                    &body,
                    &PutOptions::create("application/octet-stream", "bench"),
                )
                .unwrap_or_else(|err| fail(&format!("put: {err}")));
                lat[e][0].push(t.elapsed());
                let t = Instant::now();
                c.stat("lat", &path)
                    .unwrap_or_else(|err| fail(&format!("stat: {err}")));
                lat[e][1].push(t.elapsed());
                if i % 5 == 0 {
                    let t = Instant::now();
                    let v = c
                        .call_tool("workbench_list", &list_input)
                        .unwrap_or_else(|err| fail(&format!("list: {err}")));
                    if v.get("status").and_then(serde_json::Value::as_str) != Some("success") {
                        fail(&format!("list: {v}"));
                    }
                    lat[e][2].push(t.elapsed());
                }
            }
        }
    }
    println!("| operation (1 client, sequential) | engine | p50 ms | p99 ms | mean ms |");
    println!("|---|---|---|---|---|");
    let mut p50 = [[0.0f64; 3]; 2];
    for (o, op) in ["put_file 1 KiB", "stat", "list (50 entries)"]
        .iter()
        .enumerate()
    {
        for (e, engine) in ["etcd shard (serve --control)", "holt (serve)"]
            .iter()
            .enumerate()
        {
            let mut v = lat[e][o].clone();
            v.sort();
            let mean = v.iter().map(|d| ms(*d)).sum::<f64>() / v.len().max(1) as f64;
            p50[e][o] = ms(quantile(&v, 0.5));
            println!(
                "| {op} | {engine} | {:.2} | {:.2} | {:.2} |",
                p50[e][o],
                ms(quantile(&v, 0.99)),
                mean
            );
        }
    }
    println!(
        "\np50 ratio etcd/holt: put_file {:.2}×, stat {:.2}×, list {:.2}× ({} put/stat, {} list each)",
        p50[0][0] / p50[1][0].max(1e-9),
        p50[0][1] / p50[1][1].max(1e-9),
        p50[0][2] / p50[1][2].max(1e-9),
        rounds * 25,
        rounds * 5
    );

    // 16 clients, each publishing 1 KiB files for `--secs`, one engine after the other.
    println!(
        "\n| 16 clients, put_file 1 KiB for {} s | engine | puts/s |",
        args.secs
    );
    println!("|---|---|---|");
    let mut rates = [0.0f64; 2];
    for (e, c) in [&etcd_client, &holt_client].iter().enumerate() {
        let stop_at = Instant::now() + Duration::from_secs(args.secs);
        let started = Instant::now();
        let done: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..16)
                .map(|t| {
                    let c = (*c).clone();
                    let body = &body;
                    scope.spawn(move || {
                        let mut n = 0usize;
                        while Instant::now() < stop_at {
                            let path = format!("outputs/t{t:02}/{n:06}.bin");
                            if c.put(
                                "lat",
                                &path,
                                body,
                                &PutOptions::create("application/octet-stream", "bench"),
                            )
                            .is_ok()
                            {
                                n += 1;
                            }
                        }
                        n
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        });
        rates[e] = done as f64 / started.elapsed().as_secs_f64();
        println!(
            "| | {} | {:.1} |",
            ["etcd shard (serve --control)", "holt (serve)"][e],
            rates[e]
        );
    }
    println!(
        "\nthroughput ratio etcd/holt: {:.2}×",
        rates[0] / rates[1].max(1e-9)
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average at end: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}
