//! Process loss during garbage collection (issue 12 acceptance): `nokv gc` (built with the
//! `fault-points` feature) is killed with SIGKILL right after each phase boundary of the pass —
//! the GcBarrier command, a claim, Claimed -> Deleting, the first DELETE of a batch before its
//! progress command, a batch's progress command, and the Deleted command. A rerun converges:
//! nothing referenced is deleted, nothing collectable is left behind after the second pass, and
//! fsck is clean.

mod gc_support;

use std::path::Path;
use std::process::Command;

use gc_support::{assert_fsck_clean, body, create, provider_keys, referenced_keys, reopen};
use nokv::lifetime::RemoveOptions;
use nokv::{Client, ClientOptions};

const BOUNDARIES: [&str; 6] = [
    "gc-after-barrier",
    "gc-after-claimed",
    "gc-after-deleting",
    "gc-after-object-deleted",
    "gc-after-batch",
    "gc-after-deleted",
];

fn cli(store: &Path, args: &[&str], fault: Option<&str>) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nokv_cli"));
    cmd.arg("--store").arg(store).args(args);
    match fault {
        Some(f) => cmd.env("NOKV_FAULT_POINT", f),
        None => cmd.env_remove("NOKV_FAULT_POINT"),
    };
    let out = cmd.output().expect("run nokv_cli");
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// A store with small blocks: a 100-block body (two delete batches; left out with `log_only`),
/// an appended log (a dependency release), all removed, and one kept file. Returns the kept body.
///
/// With `log_only` the pass is deterministic about its barrier: the CLI's open writes a command,
/// so the removals are behind the tip; the log's child is the only revision of the first round,
/// and its Deleted command — the last commit — releases the base, which only the GcBarrier can
/// then put behind the history floor.
fn prepare(store: &Path, log_only: bool) -> Vec<u8> {
    let client = Client::open_with(
        store,
        ClientOptions {
            block_size: 1024,
            ..ClientOptions::default()
        },
    )
    .unwrap();
    client
        .config_set("history_retention_versions", "0")
        .unwrap();
    client.create_workbench("wb").unwrap();
    if !log_only {
        client
            .put("wb", "outputs/big.bin", &body(1, 100 * 1024), &create())
            .unwrap();
    }
    client
        .put("wb", "logs/run.log", &body(2, 3000), &create())
        .unwrap();
    client
        .append("wb", "logs/run.log", b"more", None, "t")
        .unwrap();
    let kept = body(3, 5000);
    client
        .put("wb", "outputs/kept.bin", &kept, &create())
        .unwrap();
    if !log_only {
        client
            .remove("wb", "outputs/big.bin", &RemoveOptions::default())
            .unwrap();
    }
    client
        .remove("wb", "logs/run.log", &RemoveOptions::default())
        .unwrap();
    kept
}

#[test]
fn gc_converges_after_sigkill_at_every_phase_boundary() {
    for boundary in BOUNDARIES {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("store");
        let kept = prepare(&store, boundary == "gc-after-barrier");
        let before = {
            let c = reopen(&store);
            provider_keys(&c).len()
        };
        let (code, out) = cli(&store, &["gc"], Some(boundary));
        assert_eq!(
            code, None,
            "{boundary}: the process should have been killed: {out}"
        );
        assert!(out.contains(boundary), "{boundary}: {out}");
        // Rerun, then a second pass that must find nothing.
        let (code, out) = cli(&store, &["gc"], None);
        assert_eq!(code, Some(0), "{boundary}: rerun failed: {out}");
        let (code, out) = cli(&store, &["gc", "--json"], None);
        assert_eq!(code, Some(0), "{boundary}: {out}");
        let second: serde_json::Value = serde_json::from_str(&out).expect("json report");
        assert_eq!(
            second["deleted"],
            serde_json::json!([]),
            "{boundary}: {second:#}"
        );
        assert_eq!(
            second["waiting"],
            serde_json::json!([]),
            "{boundary}: {second:#}"
        );
        assert_eq!(second["quarantined"], serde_json::json!([]), "{boundary}");

        let client = reopen(&store);
        let held = provider_keys(&client);
        assert_eq!(held, referenced_keys(&client), "{boundary}");
        assert!(held.len() < before, "{boundary}: something was collected");
        assert_eq!(client.read_all("wb", "outputs/kept.bin").unwrap(), kept);
        assert_fsck_clean(&client);
    }
}
