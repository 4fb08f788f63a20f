//! Several writer processes on one embedded store, no server (docs/design.md, "Many processes on
//! one store"): each holds the writer lock only while a write runs, so
//!
//! - concurrent writer processes all make progress — no put fails with `StoreBusy`
//!   (`store_locked`) — and every acknowledged put is present with its bytes afterwards, fsck
//!   clean;
//! - a process SIGKILLed while it holds the lock releases it at once: another writer gets it
//!   well within its lock wait and nothing acknowledged is lost.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use nokv::{Client, ClientOptions, PutOptions};

const BIN: &str = env!("CARGO_BIN_EXE_shared_writer");

fn spawn(store: &Path, name: &str, what: &str) -> (Child, std::io::Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(BIN)
        .arg(store)
        .arg(name)
        .arg(what)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn shared_writer");
    let out = BufReader::new(child.stdout.take().expect("stdout")).lines();
    (child, out)
}

/// The acknowledged `(i, generation)` of one writer's output, up to `DONE`, and how many times
/// it took the writer lock after its open.
fn acks(lines: std::io::Lines<BufReader<ChildStdout>>) -> (Vec<(u64, u64)>, usize) {
    let mut out = Vec::new();
    let mut waits = None;
    for line in lines {
        let line = line.expect("read");
        if line == "DONE" {
            return (out, waits.expect("a WAITS line"));
        }
        if let Some(n) = line.strip_prefix("WAITS ") {
            waits = Some(n.parse().unwrap());
            continue;
        }
        if waits.is_some() {
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(parts.first(), Some(&"ACK"), "unexpected line {line}");
        out.push((parts[1].parse().unwrap(), parts[2].parse().unwrap()));
    }
    panic!("writer output ended without DONE");
}

/// Every acknowledged file of every writer is present with its generation and bytes.
fn check_acked(client: &Client, acked: &BTreeMap<String, Vec<(u64, u64)>>) {
    for (name, list) in acked {
        for (i, generation) in list {
            let path = format!("outputs/{name}-{i}.bin");
            let entry = client
                .stat("shared", &path)
                .unwrap_or_else(|e| panic!("{path} lost: {e}"));
            assert_eq!(entry.generation, *generation, "{path}");
            assert_eq!(
                client.read_all("shared", &path).expect("read"),
                nokv_tests::shared_body(name, *i),
                "{path} differs"
            );
        }
    }
}

fn check_fsck(client: &Client) {
    let fsck = client.fsck().expect("fsck");
    assert!(fsck.is_clean(), "fsck findings {:?}", fsck.report);
    assert!(
        fsck.unowned_objects.is_empty(),
        "objects nothing owns: {:?}",
        fsck.unowned_objects
    );
}

#[test]
fn three_writer_processes_interleave_without_store_locked_and_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    // Created first, so the writers only open it.
    Client::open(&store)
        .unwrap()
        .create_workbench("shared")
        .unwrap();
    let names = ["w0", "w1", "w2"];
    let children: Vec<_> = names
        .iter()
        .map(|name| (name.to_string(), spawn(&store, name, "3000")))
        .collect();
    let mut acked = BTreeMap::new();
    for (name, (mut child, lines)) in children {
        let (list, acquisitions) = acks(lines);
        let status = child.wait().expect("wait");
        // A put that failed (StoreBusy included) exits 1.
        assert!(status.success(), "{name} failed: {status:?}");
        assert!(!list.is_empty(), "{name} published nothing");
        // The lock went back and forth: every writer took it again after its open.
        assert!(acquisitions > 0, "{name} never took the lock again");
        acked.insert(name, list);
    }
    let client = Client::open(&store).unwrap();
    check_acked(&client, &acked);
    check_fsck(&client);
}

#[test]
fn a_writer_killed_while_holding_the_lock_releases_it_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    Client::open(&store)
        .unwrap()
        .create_workbench("shared")
        .unwrap();
    let (mut holder, mut lines) = spawn(&store, "holder", "hold");
    let ack = lines.next().expect("ack line").expect("read");
    assert!(ack.starts_with("ACK 0 "), "{ack}");
    let generation: u64 = ack.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert_eq!(lines.next().expect("line").expect("read"), "HOLDING");

    let other = |wait: Duration| {
        Client::open_with(
            &store,
            ClientOptions {
                lock_wait: wait,
                ..ClientOptions::default()
            },
        )
    };
    // While it holds the lock, another writer cannot write.
    let blocked = other(Duration::from_millis(200)).and_then(|c| {
        c.put(
            "shared",
            "outputs/blocked.bin",
            b"x",
            &PutOptions::create("application/octet-stream", "test"),
        )
    });
    assert!(
        matches!(blocked, Err(nokv::Error::StoreBusy)),
        "{blocked:?}"
    );

    let _ = holder.kill();
    let status = holder.wait().expect("wait");
    assert!(!status.success(), "the holder must have died of the kill");

    // The kernel released its flock with the process: the next writer gets the lock within a
    // wait far below the default 30 s, and the holder's acknowledged put is there.
    let client = other(Duration::from_secs(5)).expect("open after the kill");
    client
        .put(
            "shared",
            "outputs/after-kill.bin",
            b"after",
            &PutOptions::create("application/octet-stream", "test"),
        )
        .expect("write after the kill");
    assert_eq!(
        client.read_all("shared", "outputs/after-kill.bin").unwrap(),
        b"after"
    );
    let mut acked = BTreeMap::new();
    acked.insert("holder".to_string(), vec![(0, generation)]);
    check_acked(&client, &acked);
    check_fsck(&client);
}
