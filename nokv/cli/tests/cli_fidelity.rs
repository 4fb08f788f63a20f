//! Contract fidelity through the `nokv` binary: the file-or-directory rule in both write orders,
//! exact numbers in reads, search projections and `index_json`, usage errors as one
//! `InvalidArguments` envelope on stdout (exit 2), and edit near-miss hints.

use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn nokv(store: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("run nokv")
}

fn nokv_stdin(store: &std::path::Path, args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(store)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nokv");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Stdout must be exactly one JSON document.
fn envelope(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON envelope ({e}): {:?} (stderr {:?})",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn tool(store: &std::path::Path, name: &str, input: &str) -> (i32, Value) {
    let out = nokv(store, &["workbench", name, input]);
    (out.status.code().unwrap_or(-1), envelope(&out))
}

fn store() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let (code, env) = tool(&store, "create", r#"{"id":"wb"}"#);
    assert_eq!((code, &env["status"]), (0, &Value::from("success")));
    (tmp, store)
}

#[test]
fn cli_refuses_a_file_over_a_directory_and_a_write_below_a_file() {
    let (_t, s) = store();
    // Directory first, then the file.
    let (code, _) = tool(
        &s,
        "put_file",
        r#"{"id":"wb","section":"outputs","path":"d/child","text":"1"}"#,
    );
    assert_eq!(code, 0);
    let (code, e) = tool(
        &s,
        "put_file",
        r#"{"id":"wb","section":"outputs","path":"d","text":"2"}"#,
    );
    assert_eq!(code, 1);
    assert_eq!(e["code"], "AlreadyExists");
    assert_eq!(e["details"]["kind"], "directory");
    let (code, e) = tool(
        &s,
        "append",
        r#"{"id":"wb","section":"outputs","path":"d","text":"2"}"#,
    );
    assert_eq!((code, e["code"].as_str()), (1, Some("NotArtifact")));
    // File first, then below it.
    let (code, _) = tool(
        &s,
        "put_file",
        r#"{"id":"wb","section":"outputs","path":"a","text":"1"}"#,
    );
    assert_eq!(code, 0);
    let (code, e) = tool(
        &s,
        "put_file",
        r#"{"id":"wb","section":"outputs","path":"a/b","text":"2"}"#,
    );
    assert_eq!((code, e["code"].as_str()), (1, Some("NotDirectory")));
    assert_eq!(e["details"]["file"], "/agents/local/wb/wb/outputs/a");
    // The listing shows one directory and one file, and the workbench materializes.
    let (code, listed) = tool(&s, "list", r#"{"id":"wb","section":"outputs"}"#);
    assert_eq!(code, 0);
    let kinds: Vec<(&str, &str)> = listed["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, [("a", "file"), ("d", "directory")]);
    let dest = s.parent().unwrap().join("out");
    let out = nokv(&s, &["materialize", "wb", dest.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(std::fs::read(dest.join("outputs/d/child")).unwrap(), b"1");
}

#[test]
fn cli_reads_return_numbers_digit_for_digit() {
    let (_t, s) = store();
    let body = r#"{"big": 12345678901234567890123, "neg_big": -99999999999999999999, "long": 0.1000000000000000000001, "plain": 1.50}"#;
    let input = serde_json::json!({
        "id": "wb", "section": "outputs", "path": "n.json", "text": body
    })
    .to_string();
    let (code, _) = tool(&s, "put_file", &input);
    assert_eq!(code, 0);
    let out = nokv(
        &s,
        &[
            "workbench",
            "read",
            r#"{"id":"wb","section":"outputs","path":"n.json"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    for token in [
        "\"big\": 12345678901234567890123",
        "\"neg_big\": -99999999999999999999",
        "\"long\": 0.1000000000000000000001",
        "\"plain\": 1.50",
    ] {
        assert!(text.contains(token), "{token} missing from {text}");
    }
    let env = envelope(&out);
    assert_eq!(env["record_type"], "json_object");
    assert_eq!(
        env["items"][0]["value"]["big"].to_string(),
        "12345678901234567890123"
    );
}

#[test]
fn cli_index_fields_are_exact_or_refused() {
    let (t, s) = store();
    // index_json: a number an index cannot hold exactly refuses the collect; nothing is written.
    let bad = t.path().join("bad.json");
    std::fs::write(&bad, r#"{"big": 12345678901234567890123}"#).unwrap();
    let out = nokv(
        &s,
        &[
            "collect",
            "wb",
            bad.to_str().unwrap(),
            "outputs/bad.json",
            "--index-json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("12345678901234567890123") && stderr.contains("64 bits"),
        "{stderr}"
    );
    let (_, missing) = tool(
        &s,
        "stat",
        r#"{"id":"wb","section":"outputs","path":"bad.json"}"#,
    );
    assert_eq!(missing["code"], "NotFound");
    // Exact values come back exactly in search projections.
    let good = t.path().join("good.json");
    std::fs::write(
        &good,
        r#"{"max": 18446744073709551615, "min": -9223372036854775808, "acc": 0.1, "lr": 2.5e-7}"#,
    )
    .unwrap();
    let out = nokv(
        &s,
        &[
            "collect",
            "wb",
            good.to_str().unwrap(),
            "outputs/good.json",
            "--index-json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = nokv(
        &s,
        &[
            "workbench",
            "search",
            r#"{"id":"wb","fields":["max","min","acc","lr"]}"#,
        ],
    );
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    for token in [
        "\"max\": 18446744073709551615",
        "\"min\": -9223372036854775808",
        "\"acc\": 0.1",
        "\"lr\": 2.5e-7",
    ] {
        assert!(text.contains(token), "{token} missing from {text}");
    }
    // A predicate value an index cannot hold is refused, not rounded into a wrong match.
    let (code, e) = tool(
        &s,
        "search",
        r#"{"id":"wb","predicates":[{"field":"max","op":"eq","value":18446744073709551616}]}"#,
    );
    assert_eq!((code, e["code"].as_str()), (1, Some("InvalidArguments")));
}

#[test]
fn cli_usage_errors_are_one_invalid_arguments_envelope_with_exit_2() {
    let (_t, s) = store();
    let cases: Vec<Vec<&str>> = vec![
        vec!["workbench", "read", "{not json"],
        vec!["workbench", "read", "--bogus"],
        vec!["workbench", "--bogus", "read", "{}"],
        vec!["workbench"],
        vec!["workbench", "read", "{}", "extra"],
        vec!["--no-such-flag", "workbench", "read", "{}"],
    ];
    for args in cases {
        let out = nokv(&s, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let e = envelope(&out);
        assert_eq!(e["status"], "error", "{args:?}");
        assert_eq!(e["code"], "InvalidArguments", "{args:?}");
        assert_eq!(e["retryable"], false);
        assert!(e["details"].is_object());
        assert!(!e["message"].as_str().unwrap().is_empty());
    }
    // Non-JSON on stdin too.
    let out = nokv_stdin(&s, &["workbench", "list", "-"], "id=wb");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(envelope(&out)["code"], "InvalidArguments");
    // Every other subcommand answers a program (stdout is not a terminal here) with the same
    // envelope, naming its own usage; clap's text stays on stderr.
    let out = nokv(&s, &["schema", "--bogus"]);
    assert_eq!(out.status.code(), Some(2));
    let e = envelope(&out);
    assert_eq!(e["code"], "InvalidArguments");
    assert_eq!(e["details"]["usage"], "nokv schema [OPTIONS]");
    assert_eq!(e["details"]["command"], "schema");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--bogus"));
}

#[test]
fn cli_edit_near_miss_names_line_endings_and_tabs() {
    let (_t, s) = store();
    let input = serde_json::json!({
        "id": "wb", "section": "scripts", "path": "main.rs",
        "text": "fn main() {\r\n\tlet x = 1;\r\n\tlet y = 2;\r\n}\r\n"
    })
    .to_string();
    assert_eq!(tool(&s, "put_file", &input).0, 0);
    let (code, e) = tool(
        &s,
        "edit",
        &serde_json::json!({
            "id": "wb", "section": "scripts", "path": "main.rs",
            "old_string": "    let x = 1;\n    let y = 2;", "new_string": "let z = 3;"
        })
        .to_string(),
    );
    assert_eq!((code, e["code"].as_str()), (1, Some("NoMatch")));
    let hint = &e["details"]["hints"][0];
    assert_eq!(
        hint["differences"],
        serde_json::json!(["line_endings", "tabs_vs_spaces"])
    );
    assert_eq!(hint["line_number"], 2);
    assert_eq!(hint["end_line_number"], 3);
    assert_eq!(hint["text"], "\tlet x = 1;\r\n\tlet y = 2;");
    // Nothing was applied.
    let (_, read) = tool(
        &s,
        "read",
        r#"{"id":"wb","section":"scripts","path":"main.rs","format":"bytes"}"#,
    );
    assert_eq!(read["total_size_bytes"], 42);
}
