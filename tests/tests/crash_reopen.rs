//! Durability proven by killing a real writer process: every `put_file` that returned before the
//! SIGKILL is present after reopen with identical bytes, and the put in flight is either absent
//! or complete — never partial.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn kill_cycle(store: &std::path::Path, start: u64, acks_before_kill: u64) -> Vec<(u64, u64)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_crash_writer"))
        .arg(store)
        .arg(start.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn crash_writer");
    let stdout = child.stdout.take().expect("stdout");
    let mut acked = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read ack");
        let mut parts = line.split_whitespace();
        assert_eq!(parts.next(), Some("ACK"), "unexpected line {line}");
        let i: u64 = parts.next().unwrap().parse().unwrap();
        let g: u64 = parts.next().unwrap().parse().unwrap();
        acked.push((i, g));
        if acked.len() as u64 >= acks_before_kill {
            // SIGKILL right after put_file returned, while the next put is in flight.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGKILL);
            }
            break;
        }
    }
    let status = child.wait().expect("wait");
    assert!(
        !status.success(),
        "writer must have been killed, got {status:?}"
    );
    acked
}

#[test]
fn acknowledged_puts_survive_sigkill_and_inflight_puts_are_all_or_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mut all_acked = Vec::new();
    let mut next = 0u64;
    for cycle in 0..12u64 {
        let acked = kill_cycle(&store, next, 1 + (cycle * 7) % 5);
        assert!(!acked.is_empty());
        next = acked.last().unwrap().0 + 2; // skip the in-flight index; checked below
        all_acked.extend(acked);
        // Reopen in this process and check everything acknowledged so far.
        let client = nokv::Client::open(&store).expect("reopen after SIGKILL");
        for (i, g) in &all_acked {
            let path = format!("outputs/file-{i}.bin");
            let entry = client
                .stat("crash", &path)
                .unwrap_or_else(|e| panic!("{path} lost: {e}"));
            assert_eq!(entry.generation, *g);
            let body = client.read_all("crash", &path).expect("read acked body");
            assert_eq!(
                body,
                nokv_tests::crash_body(*i),
                "{path} differs after reopen"
            );
        }
        // The put in flight at the kill: absent or complete.
        let inflight = next - 1;
        let path = format!("outputs/file-{inflight}.bin");
        if client.stat("crash", &path).is_ok() {
            let body = client
                .read_all("crash", &path)
                .expect("in-flight body readable");
            assert_eq!(body, nokv_tests::crash_body(inflight));
        }
    }
}
