//! `shared_store` — many processes writing to one embedded store, no server (docs/design.md,
//! "Many processes on one store").
//!
//! Creates a store with workbench `shared`, then for `--seconds` runs side by side, each in its
//! own process:
//!
//! * `--rust N` Rust writers (this binary in child mode: `nokv::Client::open`, then
//!   `Client::put` of `outputs/rust<k>-<i>.bin` in a loop; each reports its puts and every wait
//!   for the writer lock its holt engine recorded);
//! * `--cli`: a loop of `nokv --store S workbench put_file` calls (one process per call);
//! * `--mcp`: one `nokv --store S mcp` server driven over stdio with `workbench_put_file` calls;
//! * `--python PY`: one Python process (`PY` must import the `nokv` package) looping
//!   `nokv.open(S).workbench("shared").put(...)`.
//!
//! Every call's wall time is recorded per front door; a failed call is counted with its error
//! code (`store_locked` is `Conflict` with that reason). Afterwards every acknowledged file is
//! read back through a read-only client and compared with what was sent. It prints, as
//! Markdown: per front door the calls, failures, calls/s and call-latency p50/p99/max; the lock
//! waits of the Rust writers (p50/p99/max over every acquisition after their open); the total
//! puts/s; and the verification result. Exit status 1 when any call failed or any acknowledged
//! write is missing.
//!
//! ```text
//! cargo build --release -p nokv-cli -p nokv-benches --bin nokv --bin shared_store
//! target/release/shared_store --seconds 30 --rust 1 --cli --mcp --python python3
//! ```

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The workbench every writer publishes into.
const WB: &str = "shared";

/// One front door's results.
#[derive(Default)]
struct Door {
    name: String,
    /// Acknowledged writes: store path and the exact body sent.
    acked: Vec<(String, Vec<u8>)>,
    /// Wall time of every call, microseconds.
    latencies: Vec<u64>,
    /// Failed calls: their error (code and reason).
    failures: Vec<String>,
    /// Writer-lock waits (microseconds), where the process reports them.
    waits: Vec<u64>,
}

fn usage() -> ! {
    eprintln!(
        "usage: shared_store [--seconds S] [--rust N] [--cli] [--mcp] [--python PY] \
         [--nokv PATH] [--work DIR]\n       shared_store --child STORE NAME MILLIS"
    );
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let [_, store, name, millis] = args.as_slice() else {
            usage()
        };
        rust_child(
            Path::new(store),
            name,
            millis.parse().unwrap_or_else(|_| usage()),
        );
        return;
    }
    let mut seconds = 30u64;
    let mut rust = 1usize;
    let (mut cli, mut mcp) = (false, false);
    let mut python: Option<String> = None;
    let mut nokv_bin: Option<PathBuf> = None;
    let mut work: Option<PathBuf> = None;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => {
                seconds = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| usage())
            }
            "--rust" => {
                rust = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| usage())
            }
            "--cli" => cli = true,
            "--mcp" => mcp = true,
            "--python" => python = Some(it.next().unwrap_or_else(|| usage())),
            "--nokv" => nokv_bin = Some(PathBuf::from(it.next().unwrap_or_else(|| usage()))),
            "--work" => work = Some(PathBuf::from(it.next().unwrap_or_else(|| usage()))),
            _ => usage(),
        }
    }
    let me = std::env::current_exe().expect("current exe");
    let nokv_bin = nokv_bin.unwrap_or_else(|| me.with_file_name("nokv"));
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = work
        .unwrap_or_else(|| tmp.path().to_path_buf())
        .join("store");
    {
        let client = nokv::Client::open(&store).expect("create the store");
        client.create_workbench(WB).expect("create the workbench");
    }
    let millis = seconds * 1000;
    let started = Instant::now();
    let mut threads: Vec<std::thread::JoinHandle<Door>> = Vec::new();
    for k in 0..rust {
        let (me, store) = (me.clone(), store.clone());
        threads.push(std::thread::spawn(move || run_rust(&me, &store, k, millis)));
    }
    if cli {
        let (bin, store) = (nokv_bin.clone(), store.clone());
        threads.push(std::thread::spawn(move || run_cli(&bin, &store, millis)));
    }
    if mcp {
        let (bin, store) = (nokv_bin.clone(), store.clone());
        threads.push(std::thread::spawn(move || run_mcp(&bin, &store, millis)));
    }
    if let Some(py) = python {
        let store = store.clone();
        threads.push(std::thread::spawn(move || run_python(&py, &store, millis)));
    }
    let doors: Vec<Door> = threads
        .into_iter()
        .map(|t| t.join().expect("driver thread"))
        .collect();
    let elapsed = started.elapsed().as_secs_f64();
    let missing = verify(&store, &doors);
    report(&doors, elapsed, &missing);
    let failed: usize = doors.iter().map(|d| d.failures.len()).sum();
    if failed > 0 || !missing.is_empty() {
        std::process::exit(1);
    }
}

/// The child: a Rust writer publishing for `millis`; prints `ACK <path> <µs>` per put, then
/// `WAIT <µs>` per lock wait, then `DONE`. Bodies are `<name>:<i>` repeated to 1 KiB.
fn rust_child(store: &Path, name: &str, millis: u64) {
    let client = nokv::Client::open(store).expect("open");
    let deadline = Instant::now() + Duration::from_millis(millis);
    let stdout = std::io::stdout();
    let mut i = 0u64;
    while Instant::now() < deadline {
        let path = format!("outputs/{name}-{i}.bin");
        let body = body_of(name, i);
        let t = Instant::now();
        let options = nokv::PutOptions::create("application/octet-stream", "shared_store");
        let line = match client.put(WB, &path, &body, &options) {
            Ok(_) => format!("ACK {path} {}", t.elapsed().as_micros()),
            Err(e) => format!(
                "FAIL {} {}",
                t.elapsed().as_micros(),
                nokv::workbench::store_error(e).envelope()
            ),
        };
        let mut out = stdout.lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
        i += 1;
    }
    let waits = client
        .meta()
        .holt_db()
        .map(holt::Db::writer_lock_waits)
        .unwrap_or_default();
    let mut out = stdout.lock();
    for w in waits {
        let _ = writeln!(out, "WAIT {w}");
    }
    let _ = writeln!(out, "DONE");
}

fn body_of(name: &str, i: u64) -> Vec<u8> {
    format!("{name}:{i}:").bytes().cycle().take(1024).collect()
}

fn run_rust(me: &Path, store: &Path, k: usize, millis: u64) -> Door {
    let name = format!("rust{k}");
    let mut door = Door {
        name: format!("Rust Client ({name})"),
        ..Door::default()
    };
    let mut child = Command::new(me)
        .args(["--child"])
        .arg(store)
        .arg(&name)
        .arg(millis.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the Rust writer");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    for line in out.lines() {
        let line = line.expect("read");
        let parts: Vec<&str> = line.splitn(3, ' ').collect();
        match parts.as_slice() {
            ["ACK", path, us] => {
                let i: u64 = path
                    .rsplit('-')
                    .next()
                    .and_then(|s| s.strip_suffix(".bin"))
                    .and_then(|s| s.parse().ok())
                    .expect("index");
                door.acked.push((path.to_string(), body_of(&name, i)));
                door.latencies.push(us.parse().unwrap_or(0));
            }
            ["FAIL", us, err] => {
                door.latencies.push(us.parse().unwrap_or(0));
                door.failures.push(err.to_string());
            }
            ["WAIT", us] => door.waits.push(us.parse().unwrap_or(0)),
            ["DONE"] => break,
            _ => door.failures.push(format!("unexpected output: {line}")),
        }
    }
    let status = child.wait().expect("wait");
    if !status.success() {
        door.failures.push(format!("exit {status}"));
    }
    door
}

/// The error of a failed envelope: `code` plus `details.reason` when present.
fn failure_of(env: &Value) -> String {
    match env["details"]["reason"].as_str() {
        Some(r) => format!("{} ({r})", env["code"]),
        None => format!("{} {}", env["code"], env["message"]),
    }
}

fn run_cli(bin: &Path, store: &Path, millis: u64) -> Door {
    let mut door = Door {
        name: "CLI loop (nokv workbench put_file)".into(),
        ..Door::default()
    };
    let deadline = Instant::now() + Duration::from_millis(millis);
    let mut i = 0u64;
    while Instant::now() < deadline {
        let text = format!("cli:{i}");
        let args =
            json!({"id": WB, "section": "outputs", "path": format!("cli-{i}.txt"), "text": text});
        let t = Instant::now();
        let out = Command::new(bin)
            .arg("--store")
            .arg(store)
            .args(["workbench", "put_file"])
            .arg(args.to_string())
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .expect("run nokv");
        door.latencies.push(t.elapsed().as_micros() as u64);
        let env: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        if out.status.success() && env["status"] == "success" {
            door.acked
                .push((format!("outputs/cli-{i}.txt"), text.into_bytes()));
        } else {
            door.failures.push(failure_of(&env));
        }
        i += 1;
    }
    door
}

fn run_mcp(bin: &Path, store: &Path, millis: u64) -> Door {
    let mut door = Door {
        name: "MCP over stdio (nokv mcp)".into(),
        ..Door::default()
    };
    let mut child = Command::new(bin)
        .arg("--store")
        .arg(store)
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn nokv mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut send = |msg: Value| {
        writeln!(stdin, "{msg}").expect("write to nokv mcp");
        stdin.flush().expect("flush");
    };
    let mut next_response = |id: u64| -> Value {
        for line in lines.by_ref() {
            let msg: Value = serde_json::from_str(&line.expect("read")).unwrap_or(Value::Null);
            if msg["id"] == id {
                return msg;
            }
        }
        Value::Null
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "shared_store", "version": "0"}}}),
    );
    next_response(0);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let deadline = Instant::now() + Duration::from_millis(millis);
    let mut i = 0u64;
    while Instant::now() < deadline {
        let text = format!("mcp:{i}");
        let id = i + 1;
        let t = Instant::now();
        send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "workbench_put_file",
            "arguments": {"id": WB, "section": "outputs", "path": format!("mcp-{i}.txt"), "text": text}}}),
        );
        let msg = next_response(id);
        door.latencies.push(t.elapsed().as_micros() as u64);
        let env = msg["result"]["structuredContent"].clone();
        if env["status"] == "success" {
            door.acked
                .push((format!("outputs/mcp-{i}.txt"), text.into_bytes()));
        } else {
            door.failures.push(failure_of(&env));
        }
        i += 1;
    }
    // End of input: the server answers what it has and exits.
    drop(stdin);
    let _ = child.wait();
    door
}

/// The Python writer: prints `ACK <i> <µs>` or `FAIL <µs> <error>` per put, then `DONE`.
const PYTHON_WRITER: &str = r#"
import sys, time, nokv
store, millis = sys.argv[1], int(sys.argv[2])
wb = nokv.open(store).workbench("shared")
deadline = time.monotonic() + millis / 1000
i = 0
while time.monotonic() < deadline:
    t = time.monotonic()
    try:
        wb.put(f"outputs/py-{i}.txt", f"py:{i}")
        print(f"ACK {i} {int((time.monotonic() - t) * 1e6)}", flush=True)
    except nokv.errors.NoKVError as e:
        print(f"FAIL {int((time.monotonic() - t) * 1e6)} {type(e).__name__} {e}", flush=True)
    i += 1
print("DONE", flush=True)
"#;

fn run_python(py: &str, store: &Path, millis: u64) -> Door {
    let mut door = Door {
        name: "Python (nokv.open)".into(),
        ..Door::default()
    };
    let mut child = Command::new(py)
        .args(["-c", PYTHON_WRITER])
        .arg(store)
        .arg(millis.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn python");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    for line in out.lines() {
        let line = line.expect("read");
        let parts: Vec<&str> = line.splitn(3, ' ').collect();
        match parts.as_slice() {
            ["ACK", i, us] => {
                door.acked.push((
                    format!("outputs/py-{i}.txt"),
                    format!("py:{i}").into_bytes(),
                ));
                door.latencies.push(us.parse().unwrap_or(0));
            }
            ["FAIL", us, err] => {
                door.latencies.push(us.parse().unwrap_or(0));
                door.failures.push(err.to_string());
            }
            ["DONE"] => break,
            _ => door.failures.push(format!("unexpected output: {line}")),
        }
    }
    let status = child.wait().expect("wait");
    if !status.success() {
        door.failures.push(format!("python exited {status}"));
    }
    door
}

/// Every acknowledged write read back through a read-only client; returns the ones missing or
/// different.
fn verify(store: &Path, doors: &[Door]) -> Vec<String> {
    let client = nokv::Client::open_read_only(store).expect("open read-only");
    let mut missing = Vec::new();
    for door in doors {
        for (path, body) in &door.acked {
            match client.read_all(WB, path) {
                Ok(read) if read == *body => {}
                Ok(_) => missing.push(format!("{path}: different bytes")),
                Err(e) => missing.push(format!("{path}: {e}")),
            }
        }
    }
    missing
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(us: u64) -> String {
    format!("{:.1}", us as f64 / 1000.0)
}

fn report(doors: &[Door], elapsed: f64, missing: &[String]) {
    println!("| front door | calls | failed | calls/s | p50 ms | p99 ms | max ms |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut total = 0usize;
    for d in doors {
        let mut l = d.latencies.clone();
        l.sort_unstable();
        total += d.acked.len();
        println!(
            "| {} | {} | {} | {:.1} | {} | {} | {} |",
            d.name,
            l.len(),
            d.failures.len(),
            l.len() as f64 / elapsed,
            ms(pct(&l, 0.5)),
            ms(pct(&l, 0.99)),
            ms(l.last().copied().unwrap_or(0))
        );
    }
    let mut waits: Vec<u64> = doors.iter().flat_map(|d| d.waits.iter().copied()).collect();
    waits.sort_unstable();
    println!();
    println!(
        "writer-lock waits of the Rust writers: {} acquisitions, p50 {} ms, p99 {} ms, max {} ms",
        waits.len(),
        ms(pct(&waits, 0.5)),
        ms(pct(&waits, 0.99)),
        ms(waits.last().copied().unwrap_or(0))
    );
    println!(
        "acknowledged writes: {total} in {elapsed:.1} s ({:.1} puts/s over all processes)",
        total as f64 / elapsed
    );
    let mut failures: Vec<&String> = doors.iter().flat_map(|d| &d.failures).collect();
    failures.sort();
    failures.dedup();
    for f in failures.iter().take(10) {
        println!("failure: {f}");
    }
    if missing.is_empty() {
        println!("verified: every acknowledged write is present with its bytes");
    } else {
        println!(
            "MISSING {} acknowledged writes, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
    }
}
