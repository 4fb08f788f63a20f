//! The `nokv` binary: one JSON envelope on stdout, exit 0 / 1 (tool error) / 2 (usage error),
//! store selection by `--store` and `$NOKV_STORE`.

use std::process::{Command, Output};

use serde_json::Value;

fn nokv(store: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("run nokv")
}

fn envelope(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON envelope ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn workbench_tools_print_one_envelope_with_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let out = nokv(&store, &["workbench", "create", r#"{"id":"wb"}"#]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(envelope(&out)["status"], "success");

    let out = nokv(
        &store,
        &[
            "workbench",
            "workbench_put_file",
            r#"{"id":"wb","section":"input","path":"a.txt","text":"hi\n"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(envelope(&out)["size_bytes"], 2 + 1);

    let out = nokv(
        &store,
        &[
            "workbench",
            "read",
            r#"{"id":"wb","section":"input","path":"a.txt"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(envelope(&out)["items"][0]["value"], "hi");

    // Tool error → exit 1 with an error envelope.
    let out = nokv(
        &store,
        &[
            "workbench",
            "read",
            r#"{"id":"wb","section":"input","path":"zz"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(envelope(&out)["code"], "NotFound");

    // Unknown tool → UnknownTool envelope, exit 1.
    let out = nokv(&store, &["workbench", "frobnicate"]);
    assert_eq!(out.status.code(), Some(1));
    let env = envelope(&out);
    assert_eq!(env["code"], "UnknownTool");
    assert_eq!(env["details"]["tool"], "frobnicate");

    // Unparsable JSON → usage error, exit 2, still one envelope.
    let out = nokv(&store, &["workbench", "read", "{not json"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(envelope(&out)["code"], "InvalidArguments");

    // Missing JSON defaults to {} (schema then requires id) → exit 1.
    let out = nokv(&store, &["workbench", "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(envelope(&out)["code"], "InvalidArguments");

    // Bad flags → exit 2.
    let out = nokv(&store, &["--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn input_from_stdin_and_store_from_environment() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("env-store");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .env("NOKV_STORE", &store)
        .args(["workbench", "create", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"id":"from-stdin"}"#)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(envelope(&out)["workbench_id"], "from-stdin");
    assert!(store.join("meta").exists(), "store created at $NOKV_STORE");
}

#[test]
fn schema_lists_every_tool() {
    let tmp = tempfile::tempdir().unwrap();
    let out = nokv(&tmp.path().join("s"), &["schema"]);
    assert_eq!(out.status.code(), Some(0));
    let v = envelope(&out);
    let tools = v["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 18);
    assert!(tools
        .iter()
        .all(|t| t["input_schema"].is_object() && t["description"].is_string()));
}

#[test]
fn collect_and_materialize_round_trip_with_digests() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let src = tmp.path().join("data.bin");
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&src, &bytes).unwrap();
    let out = nokv(
        &store,
        &["collect", "wb", src.to_str().unwrap(), "input/data.bin"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dest = tmp.path().join("sandbox");
    let out = nokv(&store, &["materialize", "wb", dest.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(dest.join("input/data.bin")).unwrap(), bytes);
    // Collecting again create-only fails (exit 1); --replace succeeds.
    let out = nokv(
        &store,
        &["collect", "wb", src.to_str().unwrap(), "input/data.bin"],
    );
    assert_eq!(out.status.code(), Some(1));
    let out = nokv(
        &store,
        &[
            "collect",
            "wb",
            src.to_str().unwrap(),
            "input/data.bin",
            "--replace",
        ],
    );
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn refused_calls_touch_no_storage_and_missing_stores_are_not_created() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("never");
    // Schema failure: InvalidArguments, exit 1, no store created.
    let out = nokv(
        &store,
        &["workbench", "put_file", r#"{"id":"a","bogus":1}"#],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(envelope(&out)["code"], "InvalidArguments");
    // A read on a missing store: NotFound, no store created.
    let out = nokv(&store, &["workbench", "stat", r#"{"id":"a"}"#]);
    assert_eq!(out.status.code(), Some(1));
    let env = envelope(&out);
    assert_eq!(env["code"], "NotFound");
    assert!(
        !env.to_string().contains(store.to_str().unwrap()),
        "no host paths: {env}"
    );
    assert!(!store.exists());
    // Unknown tool wins over bad JSON.
    let out = nokv(&store, &["workbench", "frob", "{bad"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(envelope(&out)["code"], "UnknownTool");
    // Usage error inside `workbench`: still one envelope, exit 2.
    let out = nokv(&store, &["workbench"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(envelope(&out)["code"], "InvalidArguments");
    assert!(!store.exists());
}

#[test]
fn concurrent_cli_calls_wait_for_the_store_instead_of_failing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    assert_eq!(
        nokv(&store, &["workbench", "create", r#"{"id":"wb"}"#])
            .status
            .code(),
        Some(0)
    );
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let store = store.clone();
            std::thread::spawn(move || {
                Command::new(env!("CARGO_BIN_EXE_nokv"))
                    .arg("--store")
                    .arg(&store)
                    .args([
                        "workbench",
                        "append",
                        &format!(
                            r#"{{"id":"wb","section":"logs","path":"par.log","text":"p{i}\n"}}"#
                        ),
                    ])
                    .output()
                    .unwrap()
            })
        })
        .collect();
    for h in handles {
        let out = h.join().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let out = nokv(
        &store,
        &[
            "workbench",
            "read",
            r#"{"id":"wb","section":"logs","path":"par.log"}"#,
        ],
    );
    assert_eq!(envelope(&out)["record_count"], 6);
}

#[test]
fn a_store_location_that_is_or_lies_under_a_regular_file_is_invalid_arguments() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, b"not a directory").unwrap();
    for store in [file.clone(), file.join("store")] {
        let out = nokv(&store, &["workbench", "create", r#"{"id":"wb"}"#]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let v = envelope(&out);
        assert_eq!(v["code"], "InvalidArguments", "{v}");
        let message = v["message"].as_str().unwrap();
        assert!(message.contains("not a directory"), "{v}");
        assert!(!message.contains(tmp.path().to_str().unwrap()), "{v}");
        // `nokv init` (text output) says the same on stderr.
        let out = nokv(&store, &["init"]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("invalid argument: the store location is not a directory"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
}
