//! Move and diff through `nokv serve`: `RemoteClient::move_path` (`POST
//! /v1/workbenches/{id}/move`: create-only, replace at a generation, Conflict, request-id replay,
//! a directory refused) and `RemoteClient::diff` (`GET /v1/diff`) against a live workbench and
//! its snapshot, plus `nokv --server URL mv|diff` through `POST /v1/commands/{command}`.

mod cli_support;

use std::process::Command;

use cli_support::{operation_failure, server};
use nokv::diff::DiffOptions;
use nokv::move_path::MoveOptions;
use nokv::PutOptions;
use nokv_remote::RemoteClient;
use serde_json::Value;

#[test]
fn move_and_diff_through_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(&dir.path().join("s"));
    let remote = RemoteClient::connect(&srv.url(), None).unwrap();
    remote.create_workbench("wb").unwrap();
    let put = |p: &str, b: &[u8]| {
        remote
            .put("wb", p, b, &PutOptions::create("text/plain", "test"))
            .unwrap()
    };
    put("outputs/a.txt", b"alpha\n");
    let b = put("outputs/b.txt", b"beta\n");
    put("outputs/dir/c.txt", b"gamma\n");
    let cli = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
            .arg("--server")
            .arg(srv.url())
            .args(args)
            .env_remove("NOKV_STORE")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (status, text) = cli(&["commit", "wb", "--message", "base"]);
    assert_eq!(status, Some(0), "{text}");
    let (status, text) = cli(&["snapshot", "create", "wb", "--name", "before"]);
    assert_eq!(status, Some(0), "{text}");

    // Create-only onto an existing file: AlreadyExists; at a stale generation: Conflict.
    let (c, _) = operation_failure(
        remote
            .move_path(
                "wb",
                "outputs/a.txt",
                "outputs/b.txt",
                &MoveOptions::default(),
            )
            .unwrap_err(),
    );
    assert_eq!(c, "AlreadyExists");
    let stale = MoveOptions {
        expected_destination_generation: Some(b.generation + 1),
        ..Default::default()
    };
    let (c, _) = operation_failure(
        remote
            .move_path("wb", "outputs/a.txt", "outputs/b.txt", &stale)
            .unwrap_err(),
    );
    assert_eq!(c, "Conflict");
    let (c, message) = operation_failure(
        remote
            .move_path("wb", "outputs/dir", "outputs/dir2", &MoveOptions::default())
            .unwrap_err(),
    );
    assert_eq!(c, "NotArtifact");
    assert!(
        message.contains("directory rename is not supported"),
        "{message}"
    );
    // Replace at the exact generation, with a request id that replays.
    let opts = MoveOptions {
        expected_destination_generation: Some(b.generation),
        request_id: Some([3; 16]),
        ..Default::default()
    };
    let first = remote
        .move_path("wb", "outputs/a.txt", "outputs/b.txt", &opts)
        .unwrap();
    assert_eq!(first.replaced_generation, Some(b.generation));
    let again = remote
        .move_path("wb", "outputs/a.txt", "outputs/b.txt", &opts)
        .unwrap();
    assert!(again.idempotent_replay);
    assert_eq!(again.generation, first.generation);
    assert_eq!(remote.read_all("wb", "outputs/b.txt").unwrap(), b"alpha\n");

    // The snapshot against the live tree: a removed and a changed path, by change events.
    let v = remote
        .diff(
            "wb@before",
            "wb",
            &DiffOptions {
                patch: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(v["strategy"], "change_events", "{v}");
    let changes: Vec<(String, String)> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_string(),
                c["change"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        vec![
            ("outputs/a.txt".to_string(), "removed".to_string()),
            ("outputs/b.txt".to_string(), "changed".to_string()),
        ]
    );
    let patch = v["changes"][1]["patch"].as_str().unwrap();
    assert!(
        patch.contains("-beta") && patch.contains("+alpha"),
        "{patch}"
    );
    let err = remote
        .diff("wb@absent-snapshot", "wb", &DiffOptions::default())
        .unwrap_err();
    assert_eq!(operation_failure(err).0, "SnapshotNotFound");
    let err = remote
        .diff(&"ab".repeat(32), "wb", &DiffOptions::default())
        .unwrap_err();
    assert_eq!(operation_failure(err).0, "NotFound");

    // The CLI through the server answers the same envelopes.
    let (status, text) = cli(&["mv", "wb", "outputs/dir", "outputs/dir2"]);
    assert_eq!(status, Some(1), "{text}");
    let refused: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(refused["details"]["reason"], "directory_rename_unsupported");
    let (status, text) = cli(&["mv", "wb", "outputs/dir/c.txt", "outputs/c.txt"]);
    assert_eq!(status, Some(0), "{text}");
    let moved: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(moved["to"], "outputs/c.txt");
    let (status, text) = cli(&["diff", "wb@before", "wb", "--format", "table"]);
    assert_eq!(status, Some(0), "{text}");
    assert!(
        text.contains("added") && text.contains("outputs/c.txt"),
        "{text}"
    );
    assert!(
        text.contains("removed") && text.contains("outputs/dir/c.txt"),
        "{text}"
    );
}
