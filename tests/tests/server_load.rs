//! Issue 14 load acceptance on loopback: many concurrent remote clients against one `nokv serve`.
//!
//! - `mixed_load_from_64_clients_has_no_unexpected_errors_and_leaves_the_store_consistent`:
//!   64 clients run mixed put / append / stat / list / read / commit calls for a bounded time
//!   (`NOKV_LOAD_SECS`, default 4; the acceptance run uses 60). Every error must be an expected
//!   `Conflict`-family answer (clients that share a workbench race its commit head); each client
//!   logs its acknowledged writes, and afterwards every acknowledged write is present, the
//!   reference counts recomputed from RevisionRef rows equal every revision's
//!   `strong_reference_count`, no publish operation is left open, and the RecoveryOutbox chain
//!   verifies.
//! - `every_acknowledged_write_survives_a_sigkill_of_the_server_under_load`: the server is a
//!   separate `nokv serve` process; 16 clients write and log each acknowledgement to a file; the
//!   server is SIGKILLed mid-load, restarted, and every logged write is present with its exact
//!   generation and digest (`NOKV_LOAD_SECS` bounds the load phase too).

#[allow(dead_code)]
mod commits_support;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use commits_support::assert_reference_counts_match_rows;
use nokv::{Client, PutOptions};
use nokv_remote::RemoteClient;
use nokv_server as server;
use nokv_server::ServerOptions;
use serde_json::{json, Value};

/// The two load tests run one at a time (each wants the machine).
static SERIAL: Mutex<()> = Mutex::new(());

fn load_secs() -> u64 {
    std::env::var("NOKV_LOAD_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|s: &u64| *s > 0)
        .unwrap_or(4)
}

/// A tiny deterministic generator per client.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// One acknowledged write: workbench, path, generation, whole-body digest.
#[derive(Debug, Clone)]
struct Ack {
    workbench: String,
    path: String,
    generation: u64,
    digest: String,
}

fn sha(bytes: &[u8]) -> String {
    objstore::sha256_uri(bytes)
}

/// The last acknowledgement of each path (a path has one writer, so it is the final state).
fn last_acks(acks: &[Ack]) -> BTreeMap<(String, String), Ack> {
    let mut last: BTreeMap<(String, String), Ack> = BTreeMap::new();
    for a in acks {
        let k = (a.workbench.clone(), a.path.clone());
        if last.get(&k).is_none_or(|b| b.generation < a.generation) {
            last.insert(k, a.clone());
        }
    }
    last
}

fn assert_acks_present(client: &Client, acks: &[Ack]) {
    for ((wb, path), a) in last_acks(acks) {
        let e = client
            .stat(&wb, &path)
            .unwrap_or_else(|e| panic!("acknowledged {wb}/{path} missing: {e:?}"));
        assert_eq!(e.generation, a.generation, "{wb}/{path}");
        assert_eq!(e.body_digest_uri, a.digest, "{wb}/{path}");
    }
}

fn assert_consistent(client: &Client) {
    assert_reference_counts_match_rows(client);
    let summary = client.recover_operations().unwrap();
    assert!(summary.errors.is_empty(), "{summary:?}");
    let open = client.list_operations(false).unwrap();
    assert!(open.is_empty(), "publish operations left open: {open:?}");
    client.meta().verify_recovery_outbox().unwrap();
}

/// One client's loop: mixed calls until `stop`; returns (acks, unexpected errors, counts).
fn client_loop(
    remote: &RemoteClient,
    id: usize,
    stop: &AtomicBool,
    ack_log: &Mutex<std::fs::File>,
) -> (Vec<Ack>, Vec<String>, BTreeMap<String, u64>) {
    let mut rng = Rng(id as u64 * 7919 + 1);
    // Clients 0..8 share workbench `shared` (their commits race its head); the others own one.
    let wb = if id < 8 {
        "shared".to_string()
    } else {
        format!("c{id:02}")
    };
    let mut acks = Vec::new();
    let mut unexpected = Vec::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut puts = 0u64;
    let mut log_body: Vec<u8> = Vec::new();
    let record = |a: Ack, acks: &mut Vec<Ack>| {
        let mut f = ack_log.lock().unwrap();
        let _ = writeln!(
            f,
            "{} {} {} {}",
            a.workbench, a.path, a.generation, a.digest
        );
        acks.push(a);
    };
    while !stop.load(Ordering::Relaxed) {
        let roll = rng.next() % 100;
        let (kind, result): (&str, nokv::Result<Value>) = match roll {
            0..=29 => {
                let path = format!("outputs/k{id:02}/f{puts}");
                let body = format!("client {id} put {puts} {}", rng.next()).repeat(100);
                puts += 1;
                let r = remote.put(
                    &wb,
                    &path,
                    body.as_bytes(),
                    &PutOptions::create("text/plain", "load"),
                );
                if let Ok(r) = &r {
                    record(
                        Ack {
                            workbench: wb.clone(),
                            path,
                            generation: r.generation,
                            digest: r.digest_uri.clone(),
                        },
                        &mut acks,
                    );
                }
                ("put", r.map(|_| Value::Null))
            }
            30..=44 => {
                let line = format!("tick {}\n", rng.next());
                let input = json!({"id": wb, "section": "logs", "path": format!("k{id:02}.log"), "text": line});
                let r = remote.call_tool("append", &input);
                if let Ok(env) = &r {
                    if env["status"] == "success" {
                        log_body.extend_from_slice(line.as_bytes());
                        record(
                            Ack {
                                workbench: wb.clone(),
                                path: format!("logs/k{id:02}.log"),
                                generation: env["generation"].as_u64().unwrap_or(0),
                                digest: sha(&log_body),
                            },
                            &mut acks,
                        );
                    }
                }
                ("append", r)
            }
            45..=64 => {
                let target = acks
                    .last()
                    .map(|a: &Ack| a.path.clone())
                    .unwrap_or_else(|| "outputs".into());
                let r =
                    remote.call_tool("stat", &json!({"id": wb, "section": null, "path": target}));
                ("stat", r)
            }
            65..=79 => (
                "list",
                remote.call_tool(
                    "list",
                    &json!({"id": wb, "section": "outputs", "path": format!("k{id:02}")}),
                ),
            ),
            80..=94 => match acks.iter().rev().find(|a| a.path.starts_with("outputs/")) {
                Some(a) => {
                    let path = a.path.clone();
                    (
                        "read",
                        remote.read_all(&wb, &path).map(|b| Value::from(b.len())),
                    )
                }
                None => ("read", Ok(Value::Null)),
            },
            _ => {
                let input = json!({
                    "id": wb,
                    "manifest": {"client": id, "n": rng.next()},
                    "content_digest_uri": format!("sha256:{:064x}", rng.next()),
                    "replace": true,
                });
                ("commit", remote.call_tool("commit", &input))
            }
        };
        *counts.entry(kind.to_string()).or_default() += 1;
        let failure = match result {
            Err(e) => Some(format!("{kind}: {e:?}")),
            Ok(env) if env.get("status").and_then(Value::as_str) == Some("error") => {
                let code = env["code"].as_str().unwrap_or("?").to_string();
                // Clients sharing a workbench race its commit head and run-manifest path.
                // Before this client's first put its directory does not exist yet.
                let before_first_put = !acks.iter().any(|a| a.path.starts_with("outputs/"));
                let expected = matches!(code.as_str(), "Conflict" | "WorkbenchCommitConflict")
                    || (matches!(kind, "stat" | "list") && code == "NotFound" && before_first_put);
                *counts.entry(format!("{kind} {code}")).or_default() += 1;
                (!expected).then(|| format!("{kind}: {env}"))
            }
            Ok(_) => None,
        };
        if let Some(f) = failure {
            unexpected.push(f);
        }
    }
    (acks, unexpected, counts)
}

#[test]
fn mixed_load_from_64_clients_has_no_unexpected_errors_and_leaves_the_store_consistent() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    const CLIENTS: usize = 64;
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let srv = server::start(ServerOptions {
        store: store.clone(),
        listen: "127.0.0.1:0".into(),
        maintenance_interval: Duration::from_secs(1),
        recovery_interval: Duration::from_secs(2),
        ..ServerOptions::default()
    })
    .unwrap();
    let remote = RemoteClient::connect(&srv.url(), None).unwrap();
    remote.create_workbench("shared").unwrap();
    for id in 8..CLIENTS {
        remote.create_workbench(&format!("c{id:02}")).unwrap();
    }
    let ack_log = Mutex::new(std::fs::File::create(tmp.path().join("acks.log")).unwrap());
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|id| {
                let (remote, stop, ack_log) = (remote.clone(), &stop, &ack_log);
                s.spawn(move || client_loop(&remote, id, stop, ack_log))
            })
            .collect();
        std::thread::sleep(Duration::from_secs(load_secs()));
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let elapsed = started.elapsed();
    let mut acks = Vec::new();
    let mut unexpected = Vec::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for (a, u, c) in results {
        acks.extend(a);
        unexpected.extend(u);
        for (k, n) in c {
            *counts.entry(k).or_default() += n;
        }
    }
    let calls: u64 = counts
        .iter()
        .filter(|(k, _)| !k.contains(' '))
        .map(|(_, n)| n)
        .sum();
    eprintln!(
        "load: {CLIENTS} clients, {:.1} s, {calls} calls ({:.0}/s), {} acknowledged writes, {counts:?}",
        elapsed.as_secs_f64(),
        calls as f64 / elapsed.as_secs_f64(),
        acks.len()
    );
    assert!(
        unexpected.is_empty(),
        "unexpected errors: {:?}",
        &unexpected[..unexpected.len().min(10)]
    );
    assert!(acks.len() > CLIENTS, "the load made progress");
    srv.shutdown().unwrap();
    let client = Client::open(&store).unwrap();
    assert_acks_present(&client, &acks);
    assert_consistent(&client);
}

#[test]
fn every_acknowledged_write_survives_a_sigkill_of_the_server_under_load() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    const CLIENTS: usize = 16;
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let spawn = |port: u16| {
        std::process::Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
            .args(["--store", store.to_str().unwrap(), "serve", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .env_remove("NOKV_TOKEN")
            .env_remove("NOKV_FAULT_POINT")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let wait_up = |remote: &RemoteClient| {
        for _ in 0..800 {
            if remote.health().is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("server did not come up");
    };
    let mut child = spawn(port);
    let remote = RemoteClient::connect(&url, None).unwrap().with_retries(0);
    wait_up(&remote);
    for id in 0..CLIENTS {
        remote.create_workbench(&format!("c{id:02}")).unwrap();
    }
    let log_path = tmp.path().join("acks.log");
    let ack_log = Mutex::new(std::fs::File::create(&log_path).unwrap());
    let stop = AtomicBool::new(false);
    let acked = AtomicU64::new(0);
    std::thread::scope(|s| {
        for id in 0..CLIENTS {
            let (remote, stop, ack_log, acked) = (remote.clone(), &stop, &ack_log, &acked);
            s.spawn(move || {
                let wb = format!("c{id:02}");
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let body = format!("{id}/{i} ").repeat(500);
                    let path = format!("outputs/f{i}");
                    i += 1;
                    match remote.put(
                        &wb,
                        &path,
                        body.as_bytes(),
                        &PutOptions::create("text/plain", "kill"),
                    ) {
                        Ok(r) => {
                            let mut f = ack_log.lock().unwrap();
                            writeln!(f, "{wb} {path} {} {}", r.generation, r.digest_uri).unwrap();
                            f.flush().unwrap();
                            acked.fetch_add(1, Ordering::Relaxed);
                        }
                        // The server died: this write is unacknowledged, the client stops.
                        Err(_) => break,
                    }
                }
            });
        }
        // Load for the bounded time, and at least until every client had a chance to write.
        let deadline = Instant::now() + Duration::from_secs(load_secs().max(1) * 10);
        let min_until = Instant::now() + Duration::from_secs(load_secs());
        while Instant::now() < deadline
            && (Instant::now() < min_until || acked.load(Ordering::Relaxed) < 2 * CLIENTS as u64)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        // SIGKILL: no drain, no clean close.
        child.kill().unwrap();
        child.wait().unwrap();
        stop.store(true, Ordering::Relaxed);
    });
    let acks: Vec<Ack> = std::fs::read_to_string(&log_path)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Ack {
                workbench: f[0].to_string(),
                path: f[1].to_string(),
                generation: f[2].parse().unwrap(),
                digest: f[3].to_string(),
            }
        })
        .collect();
    assert!(
        acks.len() >= CLIENTS,
        "the load made progress before the kill"
    );
    // Restart the server on the same store: it recovers; every acknowledged write is there.
    let mut child = spawn(port);
    wait_up(&remote);
    for a in &acks {
        let e = remote
            .stat(&a.workbench, &a.path)
            .unwrap_or_else(|e| panic!("acknowledged {a:?} lost: {e:?}"));
        assert_eq!(
            (e.generation, &e.body_digest_uri),
            (a.generation, &a.digest)
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let client = Client::open(&store).unwrap();
    assert_acks_present(&client, &acks);
    assert_consistent(&client);
}
