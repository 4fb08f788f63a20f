//! Process loss during a commit: the `nokv` CLI (built with the `fault-points` feature) aborts
//! right after each BuildCommit phase boundary; re-running the same request converges to one
//! terminal result — one commit, one head, no visible staging, no leaked references (counts
//! recomputed from RevisionRef rows equal `strong_reference_count`), no leftover history hold.
//!
//! Runs in `cargo test --workspace` (test builds enable nokv/fault-points).

mod commits_support;

use std::path::Path;
use std::process::Command;

use commits_support::{assert_reference_counts_match_rows, row_count};
use serde_json::Value;

const BOUNDARIES: [&str; 7] = [
    "commit-after-building",
    "commit-after-upload",
    "commit-after-stage",
    "commit-after-member-batch",
    "commit-after-parents",
    "commit-after-sealing",
    "commit-after-complete",
];

fn cli(store: &Path, args: &[&str], fault: Option<&str>) -> (Option<i32>, Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nokv_cli"));
    cmd.arg("--store").arg(store).args(args);
    match fault {
        Some(f) => cmd.env("NOKV_FAULT_POINT", f),
        None => cmd.env_remove("NOKV_FAULT_POINT"),
    };
    let out = cmd.output().expect("run nokv_cli");
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), json)
}

fn digest(byte: u8) -> String {
    format!("sha256:{}", format!("{byte:02x}").repeat(32))
}

/// A store with a committed `input` workbench and a `run` workbench of 70 files (two member
/// batches); returns the input commit id.
fn prepare(store: &Path) -> String {
    let client = nokv::Client::open(store).expect("open");
    client.create_workbench("input").unwrap();
    let opts = nokv::PutOptions::create("text/plain", "test");
    client
        .put("input", "input/data.csv", b"a,b\n1,2\n", &opts)
        .unwrap();
    let input = client
        .commit(&nokv::commit::CommitRequest {
            workbench_id: "input".into(),
            manifest: serde_json::json!({"dataset": "d"}),
            content_digest_uri: digest(1),
            replace: false,
            parents: Vec::new(),
        })
        .unwrap();
    client.create_workbench("run").unwrap();
    for i in 0..70 {
        client
            .put(
                "run",
                &format!("outputs/f{i:02}.txt"),
                format!("v{i}").as_bytes(),
                &opts,
            )
            .unwrap();
    }
    input.commit_identity
}

#[test]
fn commit_converges_after_process_loss_at_every_phase_boundary() {
    for boundary in BOUNDARIES {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("store");
        let parent = prepare(&store);
        let content = digest(2);
        let args = [
            "commit",
            "run",
            "--manifest",
            r#"{"model":"viking","task":"ptycho"}"#,
            "--content-digest",
            &content,
            "--parent",
            &parent,
        ];
        let (code, out) = cli(&store, &args, Some(boundary));
        assert_ne!(
            code,
            Some(0),
            "{boundary}: the process should have aborted: {out}"
        );
        assert_ne!(out["status"], "success", "{boundary}");

        let (code, first) = cli(&store, &args, None);
        assert_eq!(code, Some(0), "{boundary}: rerun failed: {first:#}");
        assert_eq!(first["idempotent_replay"], true, "{boundary}");
        let (code, second) = cli(&store, &args, None);
        assert_eq!(code, Some(0), "{boundary}");
        assert_eq!(second["idempotent_replay"], true);
        for f in [
            "generation",
            "commit_identity",
            "tree_digest_uri",
            "envelope_digest_uri",
        ] {
            assert_eq!(first[f], second[f], "{boundary}: {f}");
        }

        let client = nokv::Client::open(&store).unwrap();
        // Exactly two commits (input + run), two build operations, no hold left.
        assert_eq!(row_count(&client, "commit"), 2, "{boundary}");
        assert_eq!(row_count(&client, "history_hold"), 0, "{boundary}");
        let head = client.commit_head("run").unwrap().expect("head");
        assert_eq!(
            Value::from(head.commit_id.clone()),
            first["commit_identity"]
        );
        assert_eq!(head.member_count, 71, "{boundary}");
        assert_eq!(head.parents, vec![parent.clone()]);
        let input = client.commit_info(&parent).unwrap().unwrap();
        assert_eq!(input.consumer_count, 2, "{boundary}: head + one child");
        // Staging is invisible: the manifest is published once at its reserved path.
        let entry = client.stat("run", "metadata/run_manifest.json").unwrap();
        assert_eq!(Value::from(entry.generation), first["generation"]);
        let kinds = assert_reference_counts_match_rows(&client);
        // Commit refs: input {data.csv, m} + run {70 files, m}.
        assert_eq!(kinds.get(&2).copied(), Some(2 + 71), "{boundary}");
    }
}

const ABORT_BOUNDARIES: [&str; 4] = [
    "commit-after-aborting",
    "commit-after-cleaning",
    "commit-after-cleanup-batch",
    "commit-after-cleaned",
];

#[test]
fn aborted_commit_cleanup_converges_after_process_loss_at_every_boundary() {
    for boundary in ABORT_BOUNDARIES {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("store");
        let parent = prepare(&store);
        let (a_digest, b_digest) = (digest(2), digest(3));
        let a = [
            "commit",
            "run",
            "--manifest",
            r#"{"attempt":"a"}"#,
            "--content-digest",
            &a_digest,
            "--parent",
            &parent,
        ];
        let b = [
            "commit",
            "run",
            "--manifest",
            r#"{"attempt":"b"}"#,
            "--content-digest",
            &b_digest,
            "--parent",
            &parent,
        ];
        // A is sealed but not published when its process dies.
        let (code, _) = cli(&store, &a, Some("commit-after-sealing"));
        assert_ne!(code, Some(0), "{boundary}");
        // B (frozen against the same empty head) wins the head.
        let (code, won) = cli(&store, &b, None);
        assert_eq!(code, Some(0), "{boundary}: {won:#}");
        // A's resumption finds the head moved: abort + cleanup, killed at `boundary`.
        let (code, out) = cli(&store, &a, Some(boundary));
        assert_ne!(code, Some(0), "{boundary}: {out:#}");
        assert_ne!(out["status"], "success");
        for _ in 0..2 {
            let (code, out) = cli(&store, &a, None);
            assert_eq!(code, Some(1), "{boundary}: {out:#}");
            assert_eq!(
                out["code"], "WorkbenchCommitConflict",
                "{boundary}: {out:#}"
            );
        }
        let client = nokv::Client::open(&store).unwrap();
        assert_eq!(row_count(&client, "commit"), 2, "{boundary}: input + B");
        assert_eq!(row_count(&client, "history_hold"), 0, "{boundary}");
        let head = client.commit_head("run").unwrap().unwrap();
        assert_eq!(Value::from(head.commit_id), won["commit_identity"]);
        let input = client.commit_info(&parent).unwrap().unwrap();
        assert_eq!(
            input.consumer_count, 2,
            "{boundary}: head + B's child consumer"
        );
        let kinds = assert_reference_counts_match_rows(&client);
        assert_eq!(
            kinds.get(&2).copied(),
            Some(2 + 71),
            "{boundary}: A's refs released"
        );
        // B's manifest is the published one.
        let entry = client.stat("run", "metadata/run_manifest.json").unwrap();
        assert_eq!(Value::from(entry.generation), won["generation"]);
        // A's members are gone: only input (2) and B (71) members remain.
        assert_eq!(row_count(&client, "commit_member"), 73, "{boundary}");
    }
}
