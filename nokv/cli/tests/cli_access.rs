//! `nokv token` and `nokv audit` on the embedded store (docs/server.md, "Tokens" and "Audit
//! trail").

mod cli_support;

use cli_support::nokv;
use serde_json::Value;

fn json_out(o: &std::process::Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or(Value::Null)
}

#[test]
fn token_create_prints_the_secret_once_and_list_never_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = ["--store", store.to_str().unwrap()];
    let missing = nokv(&s, &["token", "create", "ci", "--scope", "read"]);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(json_out(&missing)["code"], "NotFound");
    assert!(!store.exists(), "nothing is created for a missing store");
    assert!(nokv(&s, &["workbench", "create", r#"{"id":"a"}"#])
        .status
        .success());
    let created = nokv(
        &s,
        &[
            "token",
            "create",
            "ci",
            "--scope",
            "write:run-*",
            "--expires",
            "2h",
        ],
    );
    assert!(created.status.success());
    let c = json_out(&created);
    let secret = c["token"].as_str().unwrap().to_string();
    assert!(secret.starts_with("nokv_"));
    assert_eq!(c["scopes"], serde_json::json!(["write:run-*"]));
    assert!(c["expires_at"].is_string());
    let bad = nokv(&s, &["token", "create", "x", "--scope", "write:a/b"]);
    assert_eq!(json_out(&bad)["code"], "InvalidArguments");
    let dup = nokv(&s, &["token", "create", "ci", "--scope", "read"]);
    assert_eq!(json_out(&dup)["code"], "AlreadyExists");
    let listed = nokv(&s, &["token", "list"]);
    let text = String::from_utf8(listed.stdout).unwrap();
    assert!(!text.contains(&secret[20..]), "list never shows a secret");
    let list: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(list["tokens"][0]["state"], "active");
    let revoked = nokv(&s, &["token", "revoke", "ci"]);
    assert_eq!(json_out(&revoked)["state"], "revoked");
    // The registry file holds no secret.
    let file = std::fs::read_to_string(store.join("access/tokens.json")).unwrap();
    assert!(!file.contains(&secret[20..]));
}

#[test]
fn embedded_commands_are_audited_with_the_local_user() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let s = ["--store", store.to_str().unwrap()];
    assert!(nokv(&s, &["workbench", "create", r#"{"id":"a"}"#])
        .status
        .success());
    let put = nokv(
        &s,
        &[
            "workbench",
            "put_file",
            r#"{"id":"a","section":"input","path":"x.txt","text":"hi"}"#,
        ],
    );
    let generation = json_out(&put)["generation"].as_u64();
    assert!(nokv(
        &s,
        &[
            "workbench",
            "read",
            r#"{"id":"a","section":"input","path":"x.txt"}"#
        ]
    )
    .status
    .success());
    assert!(nokv(&s, &["rm", "a", "input/x.txt"]).status.success());
    let failed = nokv(&s, &["rm", "a", "input/x.txt"]);
    assert!(!failed.status.success());
    let out = nokv(&s, &["audit", "--workbench", "a"]);
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tools: Vec<&str> = lines.iter().map(|l| l["tool"].as_str().unwrap()).collect();
    assert_eq!(
        tools,
        ["workbench_create", "workbench_put_file", "rm", "rm"]
    );
    assert!(lines
        .iter()
        .all(|l| l["actor"].as_str().unwrap().starts_with("local:")));
    assert_eq!(lines[1]["generation_after"].as_u64(), generation);
    assert_eq!(lines[2]["generation_before"].as_u64(), generation);
    assert_eq!(lines[2]["outcome"], "success");
    assert_eq!(lines[3]["outcome"], "NotFound");
    let bad = nokv(&s, &["audit", "--since", "yesterday"]);
    assert_eq!(json_out(&bad)["code"], "InvalidArguments");
    // Paging: the first two records after sequence number 1.
    let page = nokv(&s, &["audit", "--after", "1", "--limit", "2"]);
    let seqs: Vec<u64> = String::from_utf8(page.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, [2, 3]);

    // The embedded demo: each publication and commit is its own record, by the local user; an
    // unchanged re-run changes nothing and adds only its `demo` record.
    assert!(nokv(&s, &["demo"]).status.success());
    let records = |args: &[&str]| -> Vec<Value> {
        let out = nokv(&s, &[&["audit"], args].concat());
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let first = records(&["--workbench", "run-gentoo"]);
    let tools: Vec<&str> = first.iter().map(|l| l["tool"].as_str().unwrap()).collect();
    assert_eq!(
        tools,
        [
            "demo: create",
            "demo: put",
            "demo: put",
            "demo: put",
            "demo: put",
            "demo: put",
            "demo: commit",
            "demo: snapshot create"
        ]
    );
    assert!(first
        .iter()
        .all(|l| l["actor"].as_str().unwrap().starts_with("local:")));
    let before = records(&[]).len();
    assert!(nokv(&s, &["demo"]).status.success());
    let after = records(&[]);
    assert_eq!(after.len(), before + 1);
    assert_eq!(after.last().unwrap()["tool"], "demo");
}

#[test]
fn without_user_or_logname_the_local_actor_is_the_user_id() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nokv"))
        .args(["--store", store.to_str().unwrap()])
        .args(["workbench", "create", r#"{"id":"a"}"#])
        .env_remove("USER")
        .env_remove("LOGNAME")
        .env_remove("NOKV_SERVER")
        .output()
        .unwrap();
    assert!(out.status.success());
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
    let lines = nokv(&["--store", store.to_str().unwrap()], &["audit"]);
    let record: Value = serde_json::from_slice(&lines.stdout).unwrap();
    assert_eq!(record["actor"], format!("local:uid-{uid}"));
}
