//! `nokv commit`, `nokv commit show|retire`, `nokv tag set|get|delete|list` and `nokv find`:
//! one JSON object on stdout, exit 0 on success and 1 on an error.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn cli(store: &Path, args: &[&str]) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
        .arg("--store")
        .arg(store)
        .args(args)
        .env_remove("NOKV_FAULT_POINT")
        .output()
        .expect("run nokv_cli");
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json)
}

#[test]
fn cli_commits_tags_finds_and_retires() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    {
        let client = nokv::Client::open(&store).unwrap();
        let opts = nokv::PutOptions::create("text/plain", "test");
        for id in ["input", "run-1"] {
            client.create_workbench(id).unwrap();
            client
                .put(id, "outputs/a.txt", id.as_bytes(), &opts)
                .unwrap();
        }
    }
    let (code, input) = cli(&store, &["commit", "input", "--message", "Penguins v1"]);
    assert_eq!(code, 0, "{input:#}");
    assert_eq!(input["idempotent_replay"], false);
    let input_id = input["commit_identity"].as_str().unwrap().to_owned();
    // The same request again is an exact replay.
    let (code, again) = cli(&store, &["commit", "input", "--message", "Penguins v1"]);
    assert_eq!(code, 0);
    assert_eq!(again["idempotent_replay"], true);
    assert_eq!(again["commit_identity"], input["commit_identity"]);
    // Another message without --replace conflicts.
    let (code, conflict) = cli(&store, &["commit", "input", "--message", "v2"]);
    assert_eq!(code, 1);
    assert_eq!(conflict["code"], "WorkbenchCommitConflict");
    // The hint names this command's flag, not the tool's JSON field.
    let hint = conflict["message"].as_str().unwrap();
    assert!(
        hint.contains("--replace") && !hint.contains("replace=true"),
        "{hint}"
    );

    let (code, tag) = cli(
        &store,
        &["tag", "set", "input", "penguins-v1", &input_id, "--create"],
    );
    assert_eq!(code, 0, "{tag:#}");
    let generation = tag["tag_generation"].as_u64().unwrap();
    let (code, dup) = cli(
        &store,
        &["tag", "set", "input", "penguins-v1", &input_id, "--create"],
    );
    assert_eq!(code, 1, "create-only on an existing tag: {dup:#}");
    assert_eq!(dup["code"], "Conflict");
    let (code, same) = cli(&store, &["tag", "set", "input", "penguins-v1", &input_id]);
    assert_eq!(code, 0, "setting the same commit writes nothing: {same:#}");
    assert_eq!(same["tag_generation"], generation);
    let (code, got) = cli(&store, &["tag", "get", "input", "penguins-v1"]);
    assert_eq!(code, 0);
    assert_eq!(got["commit_id"], Value::from(input_id.clone()));
    let (_, list) = cli(&store, &["tag", "list", "input"]);
    assert_eq!(list["tag_count"], 1);

    let (code, run) = cli(
        &store,
        &[
            "commit",
            "run-1",
            "--message",
            "run 1",
            "--parent",
            &input_id,
        ],
    );
    assert_eq!(code, 0, "{run:#}");
    assert_eq!(run["parents"], serde_json::json!([input_id.clone()]));
    let (_, show) = cli(&store, &["commit", "show", &input_id]);
    assert_eq!(show["consumer_count"], 3, "head + tag + child: {show:#}");
    let (_, head) = cli(&store, &["commit", "show", "--workbench", "run-1"]);
    assert_eq!(head["commit_id"], run["commit_identity"]);

    let (code, found) = cli(
        &store,
        &["find", "--committed", "true", "--pattern", "run 1"],
    );
    assert_eq!(code, 0, "{found:#}");
    assert_eq!(found["match_count"], 1);
    assert_eq!(found["matches"][0]["workbench_id"], "run-1");

    let (code, refused) = cli(&store, &["commit", "retire", &input_id]);
    assert_eq!(code, 1);
    assert_eq!(refused["code"], "InvalidState");
    let (code, stale) = cli(
        &store,
        &[
            "tag",
            "delete",
            "input",
            "penguins-v1",
            "--expect",
            &(generation + 1).to_string(),
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(stale["code"], "Conflict");
    let (code, deleted) = cli(&store, &["tag", "delete", "input", "penguins-v1"]);
    assert_eq!(code, 0);
    assert_eq!(deleted["deleted"], true);
    let (_, missing) = cli(&store, &["tag", "get", "input", "penguins-v1"]);
    assert_eq!(missing["code"], "NotFound");
    let (_, bad) = cli(&store, &["commit", "show", "nothex"]);
    assert_eq!(bad["code"], "InvalidArguments");
}

/// A store with workbench `wb` (one file) committed once; returns the commit id.
fn committed_store(store: &Path) -> String {
    {
        let client = nokv::Client::open(store).unwrap();
        client.create_workbench("wb").unwrap();
        client
            .put(
                "wb",
                "outputs/a.txt",
                b"a",
                &nokv::PutOptions::create("text/plain", "test"),
            )
            .unwrap();
    }
    let (code, c) = cli(store, &["commit", "wb", "--message", "m"]);
    assert_eq!(code, 0, "{c:#}");
    c["commit_identity"].as_str().unwrap().to_owned()
}

#[test]
fn invalid_tag_names_are_invalid_arguments_not_internal_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let commit = committed_store(&store);
    let long = "t".repeat(300);
    for args in [
        vec!["tag", "set", "wb", "", commit.as_str()],
        vec!["tag", "set", "wb", long.as_str(), commit.as_str()],
        vec!["tag", "get", "wb", ""],
        vec!["tag", "delete", "wb", ""],
    ] {
        let (code, env) = cli(&store, &args);
        assert_eq!(code, 1, "{args:?}: {env:#}");
        assert_eq!(env["status"], "error", "{args:?}");
        assert_eq!(env["code"], "InvalidArguments", "{args:?}: {env:#}");
        assert_eq!(env["retryable"], false);
        let msg = env["message"].as_str().unwrap();
        assert!(msg.starts_with("tag name"), "{args:?}: {msg}");
    }
    // The rule's limit itself (128 bytes) is accepted.
    let max = "t".repeat(128);
    let (code, env) = cli(&store, &["tag", "set", "wb", &max, &commit]);
    assert_eq!(code, 0, "{env:#}");
}

#[test]
fn commit_with_an_unknown_parent_is_not_found_with_the_workbench_path() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    committed_store(&store);
    nokv::Client::open(&store)
        .unwrap()
        .create_workbench("child")
        .unwrap();
    let unknown = "ab".repeat(32);
    let (code, env) = cli(
        &store,
        &["commit", "child", "--message", "c", "--parent", &unknown],
    );
    assert_eq!(code, 1, "{env:#}");
    assert_eq!(env["code"], "NotFound", "{env:#}");
    assert!(
        env["details"]["path"].as_str().unwrap().ends_with("/child"),
        "{env:#}"
    );
    assert_eq!(env["details"]["commit_id"], Value::from(unknown));
}
