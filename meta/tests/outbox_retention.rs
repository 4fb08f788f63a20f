//! RecoveryOutbox verification bounds and retention (meta::outbox, "Verification" and
//! "Retention"):
//! - an open verifies only the records after the verified chain head; damage below the head is
//!   found by the explicit full verification, damage after it refuses the open;
//! - writers move the head and remove old records in bounded maintenance steps, never past the
//!   head, until the retention policy holds; the pruned chain point keeps the chain verifiable;
//! - a SIGKILL at any moment of a writer that keeps pruning leaves a store that reopens and
//!   verifies in full, with every acknowledged command present.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use meta::codec::system::{RecoveryTail, KEY_RECOVERY_PRUNED, KEY_RECOVERY_VERIFIED};
use meta::outbox::{chunk_key, header_key, OutboxHeader, RetentionPolicy, MAX_PRUNE_STEP};
use meta::{Error, MetaShard, OpenOptions};

fn opts(max_records: u64, interval: u64) -> OpenOptions {
    OpenOptions {
        holt: holt::Options {
            durability: holt::Durability::Buffered,
            ..holt::Options::default()
        },
        outbox_retention: RetentionPolicy {
            max_records,
            max_bytes: u64::MAX,
            maintenance_interval: interval,
        },
        ..OpenOptions::default()
    }
}

/// Writes `n` commands (one workbench each) through a fresh writer handle.
fn write_commands(dir: &Path, o: &OpenOptions, from: u64, n: u64) -> MetaShard {
    let s = MetaShard::open(dir, o.clone()).unwrap();
    for i in from..from + n {
        s.create_workspace(&format!("w{i}")).unwrap();
    }
    s
}

fn tamper(dir: &Path, f: impl FnOnce(&holt::Db, &holt::Tree, &holt::Tree, &mut holt::Batch)) {
    let db = holt::Db::open(dir, holt::Options::default()).unwrap();
    let t = db.tree("recovery_outbox").unwrap();
    let sys = db.tree("system").unwrap();
    let mut b = holt::Batch::new();
    f(&db, &t, &sys, &mut b);
    db.commit(b).unwrap();
}

fn flip_chunk(db: &holt::Db, t: &holt::Tree, b: &mut holt::Batch, lsn: u64) {
    let mut v = db.view().get(t, &chunk_key(lsn, 0)).unwrap().unwrap();
    let last = v.len() - 1;
    v[last] ^= 0x01;
    b.put(t, chunk_key(lsn, 0), v);
}

fn corrupt_at(r: Result<impl std::fmt::Debug, Error>) -> u64 {
    match r {
        Err(Error::RecoveryOutboxCorrupt { lsn, .. }) => lsn,
        other => panic!("expected RecoveryOutboxCorrupt, got {other:?}"),
    }
}

#[test]
fn an_open_verifies_only_records_after_the_verified_head() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(u64::MAX, 1_000_000);
    let head = {
        let s = write_commands(dir.path(), &o, 0, 20);
        let report = s.maintain_recovery_outbox().unwrap();
        assert_eq!(report.verified_lsn, s.recovery_tail().unwrap().applied_lsn);
        assert_eq!(report.pruned_records, 0);
        report.verified_lsn
    };
    // Records after the head: a second writer appends three (epoch advance + two commands).
    drop(write_commands(dir.path(), &o, 200, 2));
    let points = MetaShard::open_read_only(dir.path(), o.clone())
        .unwrap()
        .recovery_chain_points()
        .unwrap();
    // The second writer's epoch advance moved the head to the tail it verified at open.
    assert!(points.verified.applied_lsn >= head);
    let head = points.verified.applied_lsn;
    assert!(points.tail.applied_lsn > head);

    // Damage below the head: the open does not read that record; full verification finds it.
    tamper(dir.path(), |db, t, _, b| flip_chunk(db, t, b, 5));
    let s = MetaShard::open_read_only(dir.path(), o.clone()).unwrap();
    assert_eq!(corrupt_at(s.verify_recovery_outbox()), 5);
    drop(s);
    // Damage after the head refuses every open, writer or read-only.
    tamper(dir.path(), |db, t, _, b| flip_chunk(db, t, b, head + 1));
    assert_eq!(
        corrupt_at(MetaShard::open_read_only(dir.path(), o.clone())),
        head + 1
    );
    assert_eq!(corrupt_at(MetaShard::open(dir.path(), o.clone())), head + 1);
}

#[test]
fn a_verified_head_that_is_not_anchored_in_the_chain_refuses_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(u64::MAX, 1_000_000);
    let head = write_commands(dir.path(), &o, 0, 5)
        .maintain_recovery_outbox()
        .unwrap()
        .verified_lsn;
    tamper(dir.path(), |_, _, sys, b| {
        b.put(
            sys,
            KEY_RECOVERY_VERIFIED.to_vec(),
            RecoveryTail {
                applied_lsn: head,
                chain_digest: [7; 32],
            }
            .encode(),
        );
    });
    assert_eq!(
        corrupt_at(MetaShard::open_read_only(dir.path(), o.clone())),
        head
    );
    tamper(dir.path(), |_, _, sys, b| {
        b.put(
            sys,
            KEY_RECOVERY_VERIFIED.to_vec(),
            RecoveryTail {
                applied_lsn: head + 50,
                chain_digest: [7; 32],
            }
            .encode(),
        );
    });
    assert_eq!(corrupt_at(MetaShard::open(dir.path(), o)), head + 50);
}

#[test]
fn retention_removes_old_records_in_bounded_steps_until_the_policy_holds() {
    let dir = tempfile::tempdir().unwrap();
    // No automatic steps: the backlog builds up, then explicit steps work it off.
    let backlog = opts(10, 1_000_000);
    let s = write_commands(dir.path(), &backlog, 0, 700);
    let tail = s.recovery_tail().unwrap().applied_lsn;
    assert!(tail > 700);
    assert_eq!(s.verify_recovery_outbox().unwrap().records, tail);
    let mut steps = 0;
    loop {
        let r = s.maintain_recovery_outbox().unwrap();
        steps += 1;
        assert!(r.pruned_records <= MAX_PRUNE_STEP, "{r:?}");
        if !r.more_to_prune {
            assert_eq!(r.retained_records, 10);
            assert_eq!(r.pruned_through_lsn, tail - 10);
            break;
        }
        assert!(steps < 100);
    }
    assert!(
        steps >= 3,
        "a 690-record backlog takes at least three steps of 256"
    );
    let summary = s.verify_recovery_outbox().unwrap();
    assert_eq!(summary.records, 10);
    assert_eq!(summary.first_lsn, tail - 9);
    // Pruned records are gone from the tree; the retained ones are intact.
    let t = s
        .holt_db()
        .expect("a holt-backed shard")
        .tree("recovery_outbox")
        .unwrap();
    assert!(s
        .holt_db()
        .expect("a holt-backed shard")
        .view()
        .get(&t, &header_key(1))
        .unwrap()
        .is_none());
    assert!(s
        .holt_db()
        .expect("a holt-backed shard")
        .view()
        .get(&t, &header_key(tail))
        .unwrap()
        .is_some());
    // The pruned point carries the chain digest of the last removed record.
    let points = s.recovery_chain_points().unwrap();
    assert_eq!(points.pruned.applied_lsn, tail - 10);
    let first = OutboxHeader::decode(
        &s.holt_db()
            .expect("a holt-backed shard")
            .view()
            .get(&t, &header_key(tail - 9))
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(first.previous_digest, points.pruned.chain_digest);
    drop(s);
    // A pruned store reopens (writer and read-only) and keeps appending and verifying.
    let ro = MetaShard::open_read_only(dir.path(), backlog.clone()).unwrap();
    assert_eq!(ro.verify_recovery_outbox().unwrap().records, 10);
    let s = write_commands(dir.path(), &backlog, 1000, 3);
    assert_eq!(s.verify_recovery_outbox().unwrap().last_lsn, tail + 4);
}

#[test]
fn writers_keep_the_outbox_bounded_as_they_write() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(32, 16);
    let s = write_commands(dir.path(), &o, 0, 600);
    let points = s.recovery_chain_points().unwrap();
    let retained = points.tail.applied_lsn - points.pruned.applied_lsn;
    // At most the policy plus what accumulated since the last step.
    assert!(retained <= 32 + 16 + 1, "retained {retained}");
    assert!(points.tail.applied_lsn - points.verified.applied_lsn <= 16 + 1);
    assert_eq!(s.verify_recovery_outbox().unwrap().records, retained);
}

#[test]
fn the_byte_bound_limits_the_retained_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(u64::MAX, 1_000_000);
    let s = write_commands(dir.path(), &o, 0, 50);
    drop(s);
    let sizes = {
        let s = MetaShard::open_read_only(dir.path(), o.clone()).unwrap();
        let tail = s.recovery_tail().unwrap().applied_lsn;
        let t = s
            .holt_db()
            .expect("a holt-backed shard")
            .tree("recovery_outbox")
            .unwrap();
        (1..=tail)
            .map(|l| {
                OutboxHeader::decode(
                    &s.holt_db()
                        .expect("a holt-backed shard")
                        .view()
                        .get(&t, &header_key(l))
                        .unwrap()
                        .unwrap(),
                )
                .unwrap()
                .record_len
            })
            .collect::<Vec<_>>()
    };
    // A bound that holds roughly the newest five records.
    let bound: u64 = sizes.iter().rev().take(5).sum();
    o.outbox_retention.max_bytes = bound;
    let s = MetaShard::open(dir.path(), o).unwrap();
    while s.maintain_recovery_outbox().unwrap().more_to_prune {}
    let summary = s.verify_recovery_outbox().unwrap();
    assert!(summary.record_bytes <= bound, "{summary:?} over {bound}");
    assert!(summary.records >= 4 && summary.records <= 6, "{summary:?}");
}

#[test]
fn a_record_left_below_the_pruned_point_fails_full_verification() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(5, 1_000_000);
    let (pruned, header, chunk) = {
        let s = write_commands(dir.path(), &o, 0, 30);
        let t = s
            .holt_db()
            .expect("a holt-backed shard")
            .tree("recovery_outbox")
            .unwrap();
        let h = s
            .holt_db()
            .expect("a holt-backed shard")
            .view()
            .get(&t, &header_key(3))
            .unwrap()
            .unwrap();
        let c = s
            .holt_db()
            .expect("a holt-backed shard")
            .view()
            .get(&t, &chunk_key(3, 0))
            .unwrap()
            .unwrap();
        while s.maintain_recovery_outbox().unwrap().more_to_prune {}
        (s.recovery_chain_points().unwrap().pruned.applied_lsn, h, c)
    };
    assert!(pruned > 3);
    tamper(dir.path(), |_, t, _, b| {
        b.put(t, header_key(3), header);
        b.put(t, chunk_key(3, 0), chunk);
    });
    // Below the verified head the open does not look; the full verification does.
    let s = MetaShard::open_read_only(dir.path(), o).unwrap();
    match s.verify_recovery_outbox() {
        Err(Error::RecoveryOutboxCorrupt { lsn: 3, reason }) => {
            assert!(reason.contains("below the pruned chain point"), "{reason}")
        }
        other => panic!("expected corruption at LSN 3, got {other:?}"),
    }
}

#[test]
fn a_pruned_point_that_disagrees_with_the_chain_fails_full_verification() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(5, 1_000_000);
    let pruned = {
        let s = write_commands(dir.path(), &o, 0, 30);
        while s.maintain_recovery_outbox().unwrap().more_to_prune {}
        s.recovery_chain_points().unwrap().pruned
    };
    tamper(dir.path(), |_, _, sys, b| {
        b.put(
            sys,
            KEY_RECOVERY_PRUNED.to_vec(),
            RecoveryTail {
                applied_lsn: pruned.applied_lsn,
                chain_digest: [9; 32],
            }
            .encode(),
        );
    });
    let s = MetaShard::open_read_only(dir.path(), o).unwrap();
    assert_eq!(
        corrupt_at(s.verify_recovery_outbox()),
        pruned.applied_lsn + 1
    );
}

// ---------------------------------------------------------------------------------------------
// SIGKILL: a writer that keeps pruning dies at random moments.

const CHILD_DIR_ENV: &str = "META_OUTBOX_KILL_CHILD_DIR";
const CHILD_FIRST_ENV: &str = "META_OUTBOX_KILL_FIRST";
const READY: &str = "OUTBOX-CHILD-READY";

fn kill_opts() -> OpenOptions {
    OpenOptions {
        outbox_retention: RetentionPolicy {
            max_records: 8,
            max_bytes: u64::MAX,
            maintenance_interval: 4,
        },
        ..OpenOptions::default()
    }
}

/// The child: creates workbenches `k{first}`, `k{first+1}`, … forever (durable commits, small
/// retention, a maintenance step every few commits) and prints each acknowledged id.
#[test]
#[ignore = "spawned by a_sigkilled_pruning_writer_leaves_a_verifiable_store"]
fn child_writes_and_prunes_until_killed() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let first: u64 = std::env::var(CHILD_FIRST_ENV).unwrap().parse().unwrap();
    let s = MetaShard::open(&dir, kill_opts()).unwrap();
    println!("{READY}");
    for i in first.. {
        s.create_workspace(&format!("k{i}")).unwrap();
        println!("ack {i}");
    }
}

#[test]
fn a_sigkilled_pruning_writer_leaves_a_verifiable_store() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    drop(MetaShard::open(dir.path(), kill_opts()).unwrap());
    let exe = std::env::current_exe().unwrap();
    let mut acked: Vec<u64> = Vec::new();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut cycles = 0u64;
    while cycles < 12 && Instant::now() < deadline {
        let first = cycles * 1_000_000;
        let mut child = Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "child_writes_and_prunes_until_killed",
                "--nocapture",
            ])
            .env(CHILD_DIR_ENV, dir.path())
            .env(CHILD_FIRST_ENV, first.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Wait for READY, then let it run a random 50..400 ms and kill it.
        let ready_by = Instant::now() + Duration::from_secs(20);
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(l) if l.contains(READY) => break,
                Ok(_) => {}
                Err(_) if Instant::now() > ready_by => panic!("child never got ready"),
                Err(_) => {}
            }
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(50 + seed % 350));
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        for line in rx.try_iter() {
            if let Some(id) = line.strip_prefix("ack ").and_then(|n| n.parse().ok()) {
                acked.push(id);
            }
        }
        // Reopen read-only (bounded check of the suffix), then verify in full.
        let ro = MetaShard::open_read_only(dir.path(), kill_opts()).unwrap();
        ro.verify_recovery_outbox().unwrap();
        let r = ro.read();
        for id in &acked {
            assert!(
                r.visible_workspace(&format!("k{id}")).is_ok(),
                "acknowledged k{id} lost after kill {cycles}"
            );
        }
        cycles += 1;
    }
    assert!(
        cycles >= 3 && acked.len() > 20,
        "cycles {cycles} acked {}",
        acked.len()
    );
    let s = MetaShard::open(dir.path(), kill_opts()).unwrap();
    let points = s.recovery_chain_points().unwrap();
    assert!(points.pruned.applied_lsn > 0, "retention removed records");
    assert!(
        points.tail.applied_lsn - points.pruned.applied_lsn <= 8 + 4 + 2,
        "{points:?}"
    );
    println!(
        "outbox kill: {cycles} kills, {} acknowledged commands",
        acked.len()
    );
}

#[test]
fn a_long_running_writer_keeps_its_mvcc_history_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(u64::MAX, 16);
    o.history_policy = Some(meta::ops::snapshot::SnapshotPolicy {
        history_retention_versions: 64,
        ..Default::default()
    });
    let s = write_commands(dir.path(), &o, 0, 400);
    let (version, floor) = (
        s.holt_db().expect("a holt-backed shard").version(),
        s.holt_db().expect("a holt-backed shard").history_floor(),
    );
    // The floor trails the tip by the retention plus at most one maintenance interval.
    assert!(
        floor + 64 <= version && version - floor <= 64 + 16 + 2,
        "{floor} {version}"
    );
    // Without the policy the floor stays where it was.
    let o = opts(u64::MAX, 16);
    let dir2 = tempfile::tempdir().unwrap();
    let s2 = write_commands(dir2.path(), &o, 0, 100);
    assert_eq!(
        s2.holt_db().expect("a holt-backed shard").history_floor(),
        0
    );
}
