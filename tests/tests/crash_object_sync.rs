//! SIGKILL loops over both object durability modes of the local provider (issue 24): the store
//! is created by the real CLI (`nokv init`, then `--object-sync per-file` for the other mode),
//! then writer processes are killed at random moments — an embedded writer in the middle of a
//! stream of puts (`crash_writer`), and one-shot `nokv workbench put_file` processes. After every
//! kill the store is reopened: each acknowledged put is present with identical bytes, a put in
//! flight is absent or complete, `Client::fsck` is clean and no object is left that nothing
//! owns; at the end `nokv fsck` exits 0.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A small deterministic generator for the kill moments (SplitMix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n.max(1)
    }
}

fn cli(store: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("NOKV_FAULT_POINT")
        .output()
        .expect("run nokv_cli")
}

/// SIGKILL (what `Child::kill` sends on Unix); a child that already exited is left alone.
fn kill(child: &mut std::process::Child) {
    let _ = child.kill();
}

/// Reopens the store and checks it after a kill: fsck clean, nothing unowned.
fn check_store(client: &nokv::Client, when: &str) {
    let fsck = client.fsck().expect("fsck");
    assert!(fsck.is_clean(), "{when}: fsck findings {:?}", fsck.report);
    assert!(
        fsck.unowned_objects.is_empty(),
        "{when}: objects nothing owns after recovery: {:?}",
        fsck.unowned_objects
    );
}

/// Kills `crash_writer` cycles at random moments; returns (kills, acknowledged puts checked).
fn writer_cycles(store: &Path, rng: &mut Rng, cycles: u64) -> (u64, u64) {
    let mut acked: Vec<(u64, u64)> = Vec::new();
    let mut next = 0u64;
    for cycle in 0..cycles {
        let mut writer =
            nokv_tests::CrashWriter::spawn(env!("CARGO_BIN_EXE_crash_writer"), store, next);
        let wanted = 1 + rng.below(4);
        let mut seen = 0;
        while let Some(ack) = writer.next_ack() {
            acked.push(ack);
            seen += 1;
            if seen >= wanted {
                // A random moment inside one of the next puts (or between two).
                std::thread::sleep(Duration::from_micros(rng.below(4000)));
                break;
            }
        }
        writer.kill();
        let last = acked.last().expect("at least one ack").0;

        let client = nokv::Client::open(store).expect("reopen after SIGKILL");
        for (i, g) in &acked {
            let path = format!("outputs/file-{i}.bin");
            let entry = client
                .stat("crash", &path)
                .unwrap_or_else(|e| panic!("cycle {cycle}: acknowledged {path} lost: {e}"));
            assert_eq!(entry.generation, *g);
            let body = client.read_all("crash", &path).expect("read acked body");
            assert_eq!(body, nokv_tests::crash_body(*i), "{path} differs");
        }
        // Puts after the last ACK read: acknowledged unseen or in flight — each complete, or
        // absent from the first absent one on (the writer puts one file at a time).
        let mut i = last + 1;
        while client
            .stat("crash", &format!("outputs/file-{i}.bin"))
            .is_ok()
        {
            let body = client
                .read_all("crash", &format!("outputs/file-{i}.bin"))
                .expect("in-flight body readable");
            assert_eq!(body, nokv_tests::crash_body(i), "file-{i} is partial");
            i += 1;
        }
        check_store(&client, &format!("writer cycle {cycle}"));
        next = i + 1;
    }
    (cycles, acked.len() as u64)
}

/// Kills one-shot `nokv workbench put_file` processes after random delays; returns (kills,
/// acknowledged puts checked).
fn cli_cycles(store: &Path, rng: &mut Rng, rounds: u64) -> (u64, u64) {
    let mut acked = Vec::new();
    let mut kills = 0;
    // How long one whole put_file process takes here: the kills land anywhere in it.
    let started = std::time::Instant::now();
    let args = r#"{"id":"crash","section":"outputs","path":"cli-timed.txt","text":"t"}"#;
    let out = cli(store, &["workbench", "put_file", args]);
    assert!(out.status.success(), "timed put_file: {out:?}");
    let whole = started.elapsed().as_micros() as u64;
    for n in 0..rounds {
        let text = format!("one-shot put {n}; ").repeat(1 + (n as usize * 97) % 400);
        let args = serde_json::json!({
            "id": "crash", "section": "outputs", "path": format!("cli-{n}.txt"), "text": text,
        })
        .to_string();
        let mut child = Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
            .arg("--store")
            .arg(store)
            .args(["workbench", "put_file", &args])
            .env_remove("NOKV_FAULT_POINT")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn nokv put_file");
        std::thread::sleep(Duration::from_micros(rng.below(whole + whole / 4)));
        kill(&mut child);
        let status = child.wait().expect("wait");
        let path = format!("outputs/cli-{n}.txt");
        let client = nokv::Client::open(store).expect("reopen after SIGKILL");
        if status.success() {
            acked.push((path.clone(), text.clone()));
        } else {
            kills += 1;
            // Killed: absent or complete.
            if client.stat("crash", &path).is_ok() {
                let body = client
                    .read_all("crash", &path)
                    .expect("read in-flight body");
                assert_eq!(body, text.as_bytes(), "{path} is partial");
            }
        }
        for (p, t) in &acked {
            let body = client
                .read_all("crash", p)
                .unwrap_or_else(|e| panic!("acknowledged {p} lost: {e}"));
            assert_eq!(body, t.as_bytes(), "{p} differs");
        }
        check_store(&client, &format!("cli round {n}"));
    }
    (kills, acked.len() as u64)
}

const CLI_ROUNDS: u64 = 30;

fn sigkill_loops(init_args: &[&str], expect_sync: Option<&str>, seed: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let out = cli(&store, &[&["init"], init_args].concat());
    assert!(out.status.success(), "init: {out:?}");
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("nokv-store.json")).unwrap()).unwrap();
    assert_eq!(config["objects"]["sync"].as_str(), expect_sync);

    let mut rng = Rng(seed);
    let (writer_kills, writer_acks) = writer_cycles(&store, &mut rng, 20);
    let (cli_kills, cli_acks) = cli_cycles(&store, &mut rng, CLI_ROUNDS);
    println!(
        "{init_args:?}: {writer_kills} writer kills / {writer_acks} acknowledged puts checked; \
         {cli_kills} of {CLI_ROUNDS} one-shot puts killed / {cli_acks} acknowledged"
    );
    let out = cli(&store, &["fsck"]);
    assert!(out.status.success(), "nokv fsck: {out:?}");
}

#[test]
fn syncfs_mode_keeps_every_acknowledged_put_across_sigkills() {
    sigkill_loops(&[], None, 24);
}

#[test]
fn per_file_mode_keeps_every_acknowledged_put_across_sigkills() {
    sigkill_loops(&["--object-sync", "per-file"], Some("per_file"), 42);
}
