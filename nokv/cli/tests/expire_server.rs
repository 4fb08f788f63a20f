//! Expiring workbenches through `nokv serve`: the Rust remote SDK (`RemoteClient::expire_workbench`
//! → `POST /v1/commands/expire`), the CLI's `--server` path, `NotFound` with the reason through
//! the tool route, and a GC pass on the server removing the expired workbench's paths
//! (docs/metadata-format.md, "Workbench Expiry"). The clock-driven path is
//! `expire_faketime.rs`; here a deadline already passed expires a workbench at once.

mod cli_support;

use std::process::Command;
use std::time::Duration;

use cli_support::{operation_failure, server};
use nokv::expiry::{parse_time, Expiry};
use nokv::lifetime::GcOptions;
use nokv::PutOptions;
use nokv_remote::RemoteClient;
use serde_json::{json, Value};

#[test]
fn expiry_through_the_remote_sdk_the_cli_and_the_tool_route() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(&dir.path().join("s"));
    let remote = RemoteClient::connect(&srv.url(), None).unwrap();
    for wb in ["wb", "other"] {
        remote.create_workbench(wb).unwrap();
        remote
            .put(
                wb,
                "outputs/a.bin",
                b"scratch",
                &PutOptions::create("application/octet-stream", "test"),
            )
            .unwrap();
    }

    // A deadline two hours out, counted on the server's store clock.
    let r = remote
        .expire_workbench("wb", Expiry::After(Duration::from_secs(7_200)))
        .unwrap();
    assert!(!r.expired);
    assert_eq!(r.expires_at_unix_ms, Some(r.clock_unix_ms + 7_200_000));
    assert!(r.commit_version.is_some());
    // Removed again, then a time already passed: expired at once.
    let never = remote.expire_workbench("wb", Expiry::Never).unwrap();
    assert_eq!(never.expires_at_unix_ms, None);
    let past = parse_time("2020-01-01T00:00:00Z").unwrap();
    let r = remote.expire_workbench("wb", Expiry::At(past)).unwrap();
    assert!(r.expired);
    assert_eq!(r.expires_at_unix_ms, Some(past));

    // Every route answers NotFound with the reason; the listing no longer has it.
    let stat = remote
        .call_tool("workbench_stat", &json!({"id": "wb"}))
        .unwrap();
    assert_eq!(stat["code"], "NotFound", "{stat}");
    assert_eq!(stat["details"]["reason"], "expired");
    assert_eq!(stat["details"]["expired_at"], "2020-01-01T00:00:00Z");
    let (code, message) = operation_failure(remote.stat("wb", "outputs/a.bin").unwrap_err());
    assert_eq!(code, "NotFound");
    let found = remote.call_tool("workbench_find", &json!({})).unwrap();
    let ids: Vec<&str> = found["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["workbench_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["other"], "{message}");
    let (code, message) =
        operation_failure(remote.expire_workbench("wb", Expiry::Never).unwrap_err());
    assert_eq!(code, "NotFound");
    assert!(
        message.contains("expired at 2020-01-01T00:00:00Z"),
        "{message}"
    );

    // The CLI through the server prints the same envelope as embedded.
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args(["--server", &srv.url(), "expire", "other", "--after", "7d"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "success");
    assert_eq!(v["expired"], false);
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args(["--server", &srv.url(), "expire", "other", "--after", "soon"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["code"], "InvalidArguments");

    // A GC pass on the server removes the expired workbench's path and collects its body once
    // the retention window lets it go.
    remote
        .config_set("history_retention_versions", "0")
        .unwrap();
    let report = remote.gc(&GcOptions::default()).unwrap();
    let expired = report["expired_workbenches"].as_array().unwrap();
    assert_eq!(expired.len(), 1, "{report}");
    assert_eq!(expired[0]["workbench_id"], "wb");
    assert_eq!(expired[0]["paths_removed"], 1);
    let deleted = report["deleted"].as_array().unwrap();
    assert_eq!(deleted.len(), 1, "{report}");
    assert_eq!(deleted[0]["released_by_expiry"]["workbench_id"], "wb");
    // The live workbench keeps its file.
    assert_eq!(
        remote.read_all("other", "outputs/a.bin").unwrap(),
        b"scratch"
    );
    srv.shutdown().unwrap();
}
