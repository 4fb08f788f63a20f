//! A path move survives SIGKILL atomically (docs/metadata-format.md, "Move One Path"): a writer
//! process killed at random moments while it moves files leaves, after reopen, every file at
//! exactly one of its two paths — never both, never neither — with its body and revision intact,
//! every acknowledged move at its destination, and reference counts that fsck finds consistent.
//! A move whose reply was lost (the process killed right after the command became durable) is
//! replayed by its request id with the original receipt.

mod gc_support;

use std::process::Command;

use gc_support::{assert_fsck_clean, create};
use serde_json::Value;

const FILES: u64 = 120;

#[test]
fn sigkill_during_moves_leaves_each_file_at_exactly_one_path() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let mut revisions = Vec::new();
    {
        let client = nokv::Client::open(&store).unwrap();
        client.create_workbench("moves").unwrap();
        for i in 0..FILES {
            let path = format!("src/file-{i}.bin");
            client
                .put("moves", &path, &nokv_tests::crash_body(i), &create())
                .unwrap();
            revisions.push(client.stat("moves", &path).unwrap().artifact_revision_id);
        }
    }
    let mut acked = Vec::new();
    let mut next = 0u64;
    for cycle in 0..8u64 {
        if next >= FILES {
            break;
        }
        let got = nokv_tests::crash_writer_killed_after(
            env!("CARGO_BIN_EXE_move_crasher"),
            &store,
            next,
            1 + (cycle * 5) % 7,
        );
        assert!(!got.is_empty());
        next = got.last().unwrap().0 + 1;
        acked.extend(got);
        let client = nokv::Client::open(&store).expect("reopen after SIGKILL");
        for i in 0..FILES {
            let src = client.stat("moves", &format!("src/file-{i}.bin")).ok();
            let dst = client.stat("moves", &format!("dst/file-{i}.bin")).ok();
            let entry = match (&src, &dst) {
                (Some(e), None) | (None, Some(e)) => e,
                (Some(_), Some(_)) => panic!("file {i} is visible at both paths"),
                (None, None) => panic!("file {i} is visible at neither path"),
            };
            assert_eq!(entry.artifact_revision_id, revisions[i as usize]);
            let path = if dst.is_some() { "dst" } else { "src" };
            assert_eq!(
                client
                    .read_all("moves", &format!("{path}/file-{i}.bin"))
                    .unwrap(),
                nokv_tests::crash_body(i)
            );
        }
        for (i, g) in &acked {
            let e = client
                .stat("moves", &format!("dst/file-{i}.bin"))
                .unwrap_or_else(|e| panic!("acknowledged move {i} lost: {e}"));
            assert_eq!(e.generation, *g);
        }
        // Moves after the last acknowledgement read (the one in flight at the kill, and any the
        // writer finished before the kill landed) may have committed; the next cycle starts
        // after them.
        while next < FILES
            && client
                .stat("moves", &format!("dst/file-{next}.bin"))
                .is_ok()
        {
            next += 1;
        }
        assert_fsck_clean(&client);
    }
    assert!(acked.len() >= 8, "the writer made progress: {acked:?}");
}

fn nokv(store: &std::path::Path, fault: Option<&str>, args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nokv_cli"));
    cmd.arg("--store").arg(store).args(args);
    match fault {
        Some(point) => cmd.env(nokv::fault::FAULT_POINT_ENV, point),
        None => cmd.env_remove(nokv::fault::FAULT_POINT_ENV),
    };
    let out = cmd.output().expect("run nokv");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn a_move_whose_reply_was_lost_replays_with_its_request_id() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    {
        let client = nokv::Client::open(&store).unwrap();
        client.create_workbench("wb").unwrap();
        client.put("wb", "a.txt", b"body", &create()).unwrap();
    }
    let id = "00112233445566778899aabbccddeeff";
    let args = ["mv", "wb", "a.txt", "b.txt", "--request-id", id];
    let (code, stdout) = nokv(&store, Some("move-after-command"), &args);
    assert_eq!(
        code, None,
        "killed by the fault point, got {code:?}: {stdout}"
    );
    assert!(stdout.is_empty(), "no reply was printed: {stdout}");
    // The move is durable although nobody heard of it.
    {
        let client = nokv::Client::open_read_only(&store).unwrap();
        assert!(client.stat("wb", "a.txt").is_err());
        assert_eq!(client.read_all("wb", "b.txt").unwrap(), b"body");
    }
    // The retry gets the original receipt instead of NotFound.
    let (code, stdout) = nokv(&store, None, &args);
    assert_eq!(code, Some(0), "{stdout}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["idempotent_replay"], true);
    assert_eq!(v["from"], "a.txt");
    assert_eq!(v["to"], "b.txt");
    let client = nokv::Client::open(&store).unwrap();
    assert_eq!(
        v["generation"].as_u64(),
        Some(client.stat("wb", "b.txt").unwrap().generation)
    );
    assert_fsck_clean(&client);
}
