//! The CLI through `--server` prints what it prints on an embedded store (issue 14).
//!
//! `every_cli_command_prints_the_same_through_the_server` runs one script of CLI commands —
//! all 18 Workbench tools (successes and tool errors), `commit`, `commit show`, `tag
//! set|get|list|delete`, `find`, `snapshot create|renew|list|retire|reap`, `restore
//! run|status|abort`, `append`, `operation list|recover`, `collect`, `materialize`, `changes`,
//! `rm` (one path with a generation and a request id, prefix), `config list|get|set`, `gc` (dry
//! run, pass, explain), `fsck` (and `--repair-index`) and `schema` — twice: with `--store A` (every call its own process on the embedded store) and with
//! `--server URL` (a server owning store B). Exit codes must be equal and outputs equal after
//! replacing only the fields that differ by design:
//!
//! - commit versions (`generation` and every `*_generation` / `*_version` field such as
//!   `manifest_generation`, `read_version`, `commit_version`; `snapshot_id`):
//!   every embedded CLI process opens the store and advances its owner epoch with one metadata
//!   command, a server opens it once, so the same script commits at different versions;
//! - wall-clock values (`lease_expires_at`, `lease_expires_unix_ms`, `committed_at_unix_seconds`,
//!   the deadline quoted in `expiry_warning`)
//!   and digests of bodies that embed one (`envelope_digest_uri`, the run manifest's `size_bytes`
//!   / `digest_uri`);
//! - store identities: cursors (`cursor`, `next_cursor`, MAC-bound to the store's root id),
//!   restore `operation_id`s (derived from the root id) and digests of bodies embedding them (the
//!   restore manifest); `tree_digest_uri`, sealed over the commit members' artifact revision ids
//!   (random per publication) and path generations; publish operation ids and generations in the
//!   human lines of `operation list` and `collect`;
//! - the materialize destination directory in its summary line;
//! - in `gc --json`: revision ids (`revision`, `released_dependencies`; random per
//!   publication) and the versions `tip` / `history_floor` (commit versions, as above); its
//!   lists (`deleted`, `waiting`, …) are compared as sets, since they come in revision-id order;
//! - `outbox_records` in `fsck --json`: every embedded CLI process's open writes RecoveryOutbox
//!   records (the owner-epoch advance, as above), a server's one open writes them once.
//!
//! `reads_on_one_store_are_identical_through_the_server` then compares the read tools on ONE
//! store, server first, then embedded after shutdown: byte-for-byte equal, nothing ignored.

mod cli_support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn run(target: &[&str], args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nokv"));
    cmd.args(target)
        .args(args)
        .env_remove("NOKV_SERVER")
        .env_remove("NOKV_STORE")
        .env_remove("NOKV_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run nokv");
    if let Some(mut sin) = child.stdin.take() {
        if let Some(bytes) = stdin {
            use std::io::Write;
            sin.write_all(bytes).unwrap();
        }
    }
    child.wait_with_output().expect("wait nokv")
}

const VERSION_KEYS: [&str; 8] = [
    "generation",
    "destination_generation",
    "read_version",
    "commit_version",
    "tag_generation",
    "snapshot_id",
    "created_version",
    "modified_version",
];
const CLOCK_KEYS: [&str; 5] = [
    "expiry_warning",
    "lease_expires_at",
    "lease_expires_unix_ms",
    "committed_at_unix_seconds",
    "envelope_digest_uri",
];
const GC_LISTS: [&str; 4] = ["deleted", "waiting", "quarantined", "interrupted"];
const IDENTITY_KEYS: [&str; 9] = [
    "outbox_records",
    "cursor",
    "next_cursor",
    "operation_id",
    "tree_digest_uri",
    "revision",
    "released_dependencies",
    "tip",
    "history_floor",
];

fn normalize(v: &mut Value) {
    match v {
        Value::Object(map) => {
            let manifest_file = map.get("path").and_then(Value::as_str).is_some_and(|p| {
                p.ends_with("run_manifest.json") || p.ends_with("restore_manifest.json")
            }) || map
                .get("relative_path")
                .and_then(Value::as_str)
                .is_some_and(|p| p.ends_with("_manifest.json"));
            for (k, val) in map.iter_mut() {
                let by_design = VERSION_KEYS.contains(&k.as_str())
                    || k.ends_with("_generation")
                    || k.ends_with("_version")
                    || CLOCK_KEYS.contains(&k.as_str())
                    || IDENTITY_KEYS.contains(&k.as_str())
                    || (manifest_file
                        && matches!(
                            k.as_str(),
                            "size_bytes" | "digest_uri" | "manifest_size_bytes"
                        ));
                if by_design && !val.is_null() {
                    *val = Value::from("<by design>");
                } else {
                    normalize(val);
                    // GC lists come in revision-id order, and revision ids are random.
                    if let (true, Value::Array(items)) = (GC_LISTS.contains(&k.as_str()), val) {
                        items.sort_by_key(|i| i.to_string());
                    }
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

/// Human text with the by-design fields replaced: `generation N` (a commit version) and
/// 32-hex-character operation ids (random per publication).
fn normalize_text(text: &str) -> String {
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| {
            line.split(' ')
                .map(|w| {
                    if w.len() == 32 && w.bytes().all(|b| b.is_ascii_hexdigit()) {
                        "<id>".to_string()
                    } else {
                        w.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let mut out = lines.join("\n");
    while let Some(pos) = out.find("generation ") {
        let start = pos + "generation ".len();
        let end = out[start..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(out.len(), |e| start + e);
        if end == start {
            break;
        }
        out.replace_range(pos..end, "generation=<by design>");
    }
    out
}

/// Stdout as a sequence of normalized JSON values (one envelope, or NDJSON lines), else the
/// text itself.
fn comparable(out: &Output) -> Vec<Value> {
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut values = Vec::new();
    let stream = serde_json::Deserializer::from_str(&text).into_iter::<Value>();
    for v in stream {
        match v {
            Ok(mut v) => {
                normalize(&mut v);
                values.push(v);
            }
            Err(_) => return vec![Value::from(normalize_text(&text))],
        }
    }
    values
}

/// One step of the script: CLI arguments and optional stdin.
struct Step {
    args: Vec<String>,
    stdin: Option<Vec<u8>>,
}

fn step(args: &[&str]) -> Step {
    Step {
        args: args.iter().map(|s| s.to_string()).collect(),
        stdin: None,
    }
}

fn tool(name: &str, input: &str) -> Step {
    step(&["workbench", name, input])
}

fn script(local: &Path) -> Vec<Step> {
    let csv = local.join("penguins.csv");
    std::fs::write(&csv, "species,mass\nAdelie,3750\nGentoo,5000\n").unwrap();
    let digest = format!("sha256:{}", "01".repeat(32));
    let mut s = vec![
        step(&["schema"]),
        tool("create", r#"{"id":"wb"}"#),
        tool("create", r#"{"id":"wb"}"#),
        tool(
            "put_file",
            r#"{"id":"wb","section":"input","path":"notes.txt","text":"alpha\nbeta\nGamma\n"}"#,
        ),
        tool(
            "put_file",
            r#"{"id":"wb","section":"outputs","path":"metrics.json","text":"{\"loss\":0.25,\"epoch\":3}","content_type":"application/json"}"#,
        ),
        tool(
            "put_file",
            r#"{"id":"wb","section":"input","path":"notes.txt","text":"x"}"#,
        ),
        tool(
            "put_file",
            r#"{"id":"wb","section":"input","path":"notes.txt","text":"alpha\nbeta\nGamma\ndelta\n","replace":true}"#,
        ),
        tool(
            "append",
            r#"{"id":"wb","section":"logs","path":"run.log","text":"step 1\n"}"#,
        ),
        tool(
            "append",
            r#"{"id":"wb","section":"logs","path":"run.log","text":"step 2\n"}"#,
        ),
        tool(
            "edit",
            r#"{"id":"wb","section":"input","path":"notes.txt","old_string":"beta","new_string":"BETA"}"#,
        ),
        tool(
            "edit",
            r#"{"id":"wb","section":"input","path":"notes.txt","old_string":"nothing","new_string":"x"}"#,
        ),
        tool("list", r#"{"id":"wb"}"#),
        tool("list", r#"{"id":"wb","section":"input","limit":1}"#),
        tool(
            "stat",
            r#"{"id":"wb","section":"input","path":"notes.txt"}"#,
        ),
        tool(
            "stat",
            r#"{"id":"wb","section":"input","path":"missing.txt"}"#,
        ),
        tool(
            "read",
            r#"{"id":"wb","section":"input","path":"notes.txt"}"#,
        ),
        tool(
            "read",
            r#"{"id":"wb","section":"outputs","path":"metrics.json","format":"bytes","offset":2,"limit":5}"#,
        ),
        tool("grep", r#"{"id":"wb","pattern":"gamma","recursive":true}"#),
        tool(
            "search",
            r#"{"id":"wb","predicates":[{"field":"content_type","op":"prefix","value":"text/"}]}"#,
        ),
        tool(
            "aggregate",
            r#"{"measures":[{"name":"n","op":"count"}],"group_by":["content_type"],"id":"wb"}"#,
        ),
        tool("catalog", r#"{"id":"wb"}"#),
        tool("nonexistent_tool", "{}"),
        tool("read", "{not json"),
        tool("stat", r#"{"id":"wb","bogus":1}"#),
        step(&[
            "append",
            "wb",
            "logs/cli.log",
            "--operation-id",
            &"ab".repeat(16),
            "-",
        ]),
    ];
    s.last_mut().unwrap().stdin = Some(b"appended through the CLI\n".to_vec());
    s.extend([
        step(&["append", "wb", "logs/cli.log", "--operation-id", "nothex", "-"]),
        step(&["collect", "wb", csv.to_str().unwrap(), "input/penguins.csv"]),
        step(&["collect", "wb", local.join("absent.bin").to_str().unwrap(), "input/x.bin"]),
        step(&["commit", "wb", "--message", "first", "--content-digest", &digest]),
        tool(
            "commit",
            &format!(
                r#"{{"id":"wb","manifest":{{"task":"t"}},"content_digest_uri":"{digest}","replace":true}}"#
            ),
        ),
        tool(
            "commit",
            &format!(
                r#"{{"id":"wb","manifest":{{"task":"t"}},"content_digest_uri":"{digest}","replace":true}}"#
            ),
        ),
        step(&["commit", "show", "--workbench", "wb"]),
        step(&["find", "--committed", "true"]),
        tool("find", r#"{"committed":true,"include_manifest":true}"#),
        step(&["tag", "list", "wb"]),
        step(&["tag", "get", "wb", "absent"]),
        tool("snapshot", r#"{"id":"wb","name":"s1","reason":"checkpoint"}"#),
        step(&["snapshot", "create", "wb", "--name", "s2"]),
        tool("snapshot_renew", r#"{"id":"wb","name":"s1","ttl_days":9}"#),
        tool("snapshot_list", r#"{"id":"wb"}"#),
        step(&["snapshot", "list", "wb"]),
        tool(
            "list",
            r#"{"id":"wb","section":"input","at_snapshot":"s1"}"#,
        ),
        tool(
            "restore",
            r#"{"id":"wb","destination_id":"wb-copy","at_snapshot":"s1"}"#,
        ),
        tool(
            "restore",
            r#"{"id":"wb","destination_id":"wb-copy","at_snapshot":"s1"}"#,
        ),
        step(&["restore", "status", "wb-copy"]),
        step(&["restore", "abort", "wb-copy"]),
        step(&["restore", "run", "wb", "wb-other", "--snapshot", "s2"]),
        tool("snapshot_retire", r#"{"id":"wb","name":"s2","reason":"done"}"#),
        step(&["snapshot", "retire", "wb", "s1", "--reason", "done"]),
        step(&["snapshot", "reap"]),
        tool("list", r#"{"id":"wb-copy"}"#),
        step(&["rm", "wb", "input/notes.txt", "--expected-generation", "999"]),
        step(&["rm", "wb", "input/notes.txt", "--request-id", &"cd".repeat(16)]),
        step(&["rm", "wb", "input/notes.txt", "--request-id", &"cd".repeat(16)]),
        step(&["rm", "wb", "input/absent.txt"]),
        step(&["rm", "-r", "wb", "logs", "--request-id", &"cd".repeat(16)]),
        step(&["rm", "-r", "wb", "logs"]),
        step(&["config", "list"]),
        step(&["config", "set", "history_retention_versions", "0"]),
        step(&["config", "get", "history_retention_versions"]),
        step(&["config", "get", "bogus"]),
        step(&["gc", "--dry-run", "--json"]),
        step(&["gc", "--json"]),
        step(&["gc", "--explain", "not-a-revision"]),
        step(&["fsck", "--json"]),
        step(&["fsck", "--repair-index", "--json"]),
        step(&["operation", "list"]),
        step(&["operation", "recover"]),
        step(&["changes", "--workbench", "wb", "--limit", "5"]),
        step(&["changes", "--after", "garbage"]),
        step(&["materialize", "wb", local.join("sandbox").to_str().unwrap(), "--prefix", "input"]),
    ]);
    s
}

#[test]
fn every_cli_command_prints_the_same_through_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    let local_a = tmp.path().join("local-a");
    let local_b = tmp.path().join("local-b");
    std::fs::create_dir_all(&local_a).unwrap();
    std::fs::create_dir_all(&local_b).unwrap();
    let server = cli_support::server(&b);
    let url = server.url();
    let embedded_target = ["--store", a.to_str().unwrap()];
    let remote_target = ["--server", url.as_str()];
    let steps_a = script(&local_a);
    let steps_b = script(&local_b);
    assert!(steps_a.len() > 50);
    for (sa, sb) in steps_a.iter().zip(&steps_b) {
        let context = sa.args.join(" ");
        let args_a: Vec<&str> = sa.args.iter().map(String::as_str).collect();
        let args_b: Vec<&str> = sb.args.iter().map(String::as_str).collect();
        let ea = run(&embedded_target, &args_a, sa.stdin.as_deref());
        let eb = run(&remote_target, &args_b, sb.stdin.as_deref());
        assert_eq!(
            ea.status.code(),
            eb.status.code(),
            "{context}: exit codes differ\nembedded: {}\nremote: {}\nremote stderr: {}",
            String::from_utf8_lossy(&ea.stdout),
            String::from_utf8_lossy(&eb.stdout),
            String::from_utf8_lossy(&eb.stderr)
        );
        let (mut ca, mut cb) = (comparable(&ea), comparable(&eb));
        if context.starts_with("materialize") {
            // The summary names the local destination directory, which differs per run.
            for v in [&mut ca, &mut cb] {
                if let Some(Value::String(t)) = v.first_mut() {
                    *t = t.replace(local_a.to_str().unwrap(), "<local>");
                    *t = t.replace(local_b.to_str().unwrap(), "<local>");
                }
            }
        }
        assert_eq!(ca, cb, "{context}: outputs differ");
        // Human stderr lines (collect/materialize failures) match too, minus local paths.
        let strip = |o: &Output| {
            String::from_utf8_lossy(&o.stderr)
                .replace(local_a.to_str().unwrap(), "<local>")
                .replace(local_b.to_str().unwrap(), "<local>")
        };
        assert_eq!(strip(&ea), strip(&eb), "{context}: stderr differs");
    }
    // The materialized trees are identical and verified.
    let read = |root: &Path| {
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        for entry in std::fs::read_dir(root.join("sandbox").join("input")).unwrap() {
            let e = entry.unwrap();
            files.push((
                e.file_name().to_string_lossy().to_string(),
                std::fs::read(e.path()).unwrap(),
            ));
        }
        files.sort();
        files
    };
    assert_eq!(read(&local_a), read(&local_b));
    assert!(!read(&local_b).is_empty());
    server.shutdown().unwrap();
}

#[test]
fn reads_on_one_store_are_identical_through_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let reads = [
        r#"{"id":"wb"}"#,
        r#"{"id":"wb","section":"input","limit":1}"#,
    ];
    let mut steps = vec![
        tool("create", r#"{"id":"wb"}"#),
        tool(
            "put_file",
            r#"{"id":"wb","section":"input","path":"a.txt","text":"one\ntwo\n"}"#,
        ),
        tool(
            "put_file",
            r#"{"id":"wb","section":"input","path":"b.txt","text":"three\n"}"#,
        ),
    ];
    for s in &steps {
        let args: Vec<&str> = s.args.iter().map(String::as_str).collect();
        let out = run(&["--store", store.to_str().unwrap()], &args, None);
        assert_eq!(out.status.code(), Some(0));
    }
    steps.clear();
    let read_steps = [
        tool("list", reads[0]),
        tool("list", reads[1]),
        tool("stat", r#"{"id":"wb","section":"input","path":"a.txt"}"#),
        tool("read", r#"{"id":"wb","section":"input","path":"a.txt"}"#),
        tool("grep", r#"{"id":"wb","pattern":"two","recursive":true}"#),
        tool("search", r#"{"id":"wb"}"#),
        tool("catalog", r#"{"id":"wb"}"#),
        tool("find", r#"{}"#),
    ];
    let server = cli_support::server(&store);
    let url = server.url();
    let remote: Vec<Output> = read_steps
        .iter()
        .map(|s| {
            let args: Vec<&str> = s.args.iter().map(String::as_str).collect();
            run(&["--server", url.as_str()], &args, None)
        })
        .collect();
    server.shutdown().unwrap();
    for (s, r) in read_steps.iter().zip(&remote) {
        let args: Vec<&str> = s.args.iter().map(String::as_str).collect();
        let e = run(&["--store", store.to_str().unwrap()], &args, None);
        assert_eq!(e.status.code(), r.status.code(), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&e.stdout),
            String::from_utf8_lossy(&r.stdout),
            "{args:?}"
        );
    }
}

#[test]
fn an_explicit_store_wins_over_nokv_server_and_both_flags_are_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let store_arg = store.to_str().unwrap();
    let created = run(
        &["--store", store_arg],
        &["workbench", "create", r#"{"id":"wb1"}"#],
        None,
    );
    assert!(created.status.success(), "{created:?}");
    // NOKV_SERVER names a port nothing listens on: with --store the local store answers.
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args(["--store", store_arg, "workbench", "stat", r#"{"id":"wb1"}"#])
        .env("NOKV_SERVER", "http://127.0.0.1:1")
        .env_remove("NOKV_STORE")
        .env_remove("NOKV_TOKEN")
        .output()
        .expect("run nokv");
    assert!(out.status.success(), "{out:?}");
    let env: Value = serde_json::from_slice(&out.stdout).expect("envelope");
    assert_eq!(env["status"], "success", "{env}");
    let both = run(
        &["--store", store_arg, "--server", "http://127.0.0.1:1"],
        &["workbench", "stat", r#"{"id":"wb1"}"#],
        None,
    );
    assert_eq!(both.status.code(), Some(2), "{both:?}");
    let stderr = String::from_utf8_lossy(&both.stderr);
    assert!(
        stderr.contains("--server and --store exclude each other"),
        "{stderr}"
    );
    // A workbench call still gets its one JSON envelope on stdout.
    let env: Value = serde_json::from_slice(&both.stdout).expect("envelope on stdout");
    assert_eq!(env["code"], "InvalidArguments", "{env}");
    assert!(
        env["message"]
            .as_str()
            .unwrap()
            .contains("--server and --store exclude each other"),
        "{env}"
    );
}
