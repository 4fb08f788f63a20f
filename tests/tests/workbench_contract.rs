//! The Workbench contract (docs/workbench.md) for the tools of the first slice: exact results, error
//! codes and "nothing changed" on every refusal.

use nokv::workbench::Workbench;
use nokv_tests::{err, fresh_store, ok};
use serde_json::{json, Value};

fn setup() -> (tempfile::TempDir, Workbench) {
    let (tmp, client) = fresh_store();
    let wb = Workbench::new(client);
    ok(wb.call("workbench_create", &json!({"id": "wb"})));
    (tmp, wb)
}

fn version(wb: &Workbench) -> u64 {
    wb.client().meta().version().unwrap()
}

fn put(wb: &Workbench, section: &str, path: &str, text: &str) -> Value {
    ok(wb.call(
        "workbench_put_file",
        &json!({"id":"wb","section":section,"path":path,"text":text}),
    ))
}

#[test]
fn create_returns_sections_and_is_idempotent() {
    let (_t, wb) = setup();
    let again = ok(wb.call("workbench_create", &json!({"id": "wb"})));
    assert_eq!(again["workbench_id"], "wb");
    assert_eq!(again["path"], "/agents/local/wb/wb");
    assert_eq!(
        again["sections"],
        json!(["input", "scripts", "outputs", "logs", "metadata"])
    );
    err(
        wb.call("workbench_create", &json!({"id": "-bad"})),
        "InvalidArguments",
    );
    err(
        wb.call("workbench_create", &json!({"id": "wb", "x": 1})),
        "InvalidArguments",
    );
}

#[test]
fn put_file_create_only_refuses_an_existing_path() {
    let (_t, wb) = setup();
    let first = put(&wb, "input", "a.txt", "one");
    assert_eq!(first["size_bytes"], 3);
    assert_eq!(first["replace"], false);
    assert_eq!(first["path"], "/agents/local/wb/wb/input/a.txt");
    assert_eq!(first["relative_path"], "a.txt");
    assert_eq!(first["content_type"], "text/plain; charset=utf-8");
    assert_eq!(
        first["digest_uri"],
        "sha256:7692c3ad3540bb803c020b3aee66cd8887123234ea0c6e7143c0add73ff431ed"
    );
    let v = version(&wb);
    err(
        wb.call(
            "workbench_put_file",
            &json!({"id":"wb","section":"input","path":"a.txt","text":"two"}),
        ),
        "AlreadyExists",
    );
    assert_eq!(version(&wb), v, "a refused put commits nothing");
    let read = ok(wb.call(
        "workbench_read",
        &json!({"id":"wb","section":"input","path":"a.txt"}),
    ));
    assert_eq!(read["items"][0]["value"], "one");
}

#[test]
fn replace_with_stale_generation_conflicts_and_changes_nothing() {
    let (_t, wb) = setup();
    let g1 = put(&wb, "outputs", "r.json", "{\"a\":1}")["generation"]
        .as_u64()
        .unwrap();
    let g2 = ok(wb.call(
        "workbench_put_file",
        &json!({"id":"wb","section":"outputs","path":"r.json","text":"{\"a\":2}","replace":true,"expected_generation":g1}),
    ))["generation"]
        .as_u64()
        .unwrap();
    assert!(g2 > g1);
    let v = version(&wb);
    let e = err(
        wb.call(
            "workbench_put_file",
            &json!({"id":"wb","section":"outputs","path":"r.json","text":"{\"a\":3}","replace":true,"expected_generation":g1}),
        ),
        "Conflict",
    );
    assert_eq!(e["details"]["conflict"], "PathGeneration");
    assert_eq!(e["retryable"], true);
    assert_eq!(version(&wb), v);
    let read = ok(wb.call(
        "workbench_read",
        &json!({"id":"wb","section":"outputs","path":"r.json"}),
    ));
    assert_eq!(read["generation"], g2);
    assert_eq!(read["items"][0]["value"], json!({"a":2}));
    // replace=true on a missing path is NotFound; on a directory NotArtifact; never an upsert.
    err(
        wb.call(
            "workbench_put_file",
            &json!({"id":"wb","section":"outputs","path":"nope","text":"x","replace":true}),
        ),
        "NotFound",
    );
    put(&wb, "outputs", "dir/f.txt", "x");
    err(
        wb.call(
            "workbench_put_file",
            &json!({"id":"wb","section":"outputs","path":"dir","text":"x","replace":true}),
        ),
        "NotArtifact",
    );
    // expected_generation without replace is refused.
    err(
        wb.call(
            "workbench_put_file",
            &json!({"id":"wb","section":"outputs","path":"n2","text":"x","expected_generation":1}),
        ),
        "InvalidArguments",
    );
}

#[test]
fn edit_reports_no_match_and_ambiguity_and_keeps_dollar_literal() {
    let (_t, wb) = setup();
    put(&wb, "scripts", "s.sh", "echo a\necho a\n");
    let v = version(&wb);
    err(
        wb.call("workbench_edit", &json!({"id":"wb","section":"scripts","path":"s.sh","old_string":"zzz","new_string":"y"})),
        "NoMatch",
    );
    let amb = err(
        wb.call("workbench_edit", &json!({"id":"wb","section":"scripts","path":"s.sh","old_string":"echo a","new_string":"y"})),
        "AmbiguousEdit",
    );
    assert_eq!(amb["details"]["matches"], 2);
    assert_eq!(version(&wb), v, "refused edits publish nothing");
    let done = ok(wb.call(
        "workbench_edit",
        &json!({"id":"wb","section":"scripts","path":"s.sh","old_string":"echo a","new_string":"echo $1 $& $0 ${x}","replace_all":true}),
    ));
    assert_eq!(done["replacements"], 2);
    assert_eq!(done["no_change"], false);
    let body = wb.client().read_all("wb", "scripts/s.sh").unwrap();
    assert_eq!(body, b"echo $1 $& $0 ${x}\necho $1 $& $0 ${x}\n");
    // A byte-identical edit publishes nothing and keeps the generation.
    let g = done["generation"].clone();
    let same = ok(wb.call(
        "workbench_edit",
        &json!({"id":"wb","section":"scripts","path":"s.sh","old_string":"$0","new_string":"$0","replace_all":true}),
    ));
    assert_eq!(same["no_change"], true);
    assert_eq!(same["generation"], g);
    // Non-UTF-8 bodies cannot be edited.
    ok(wb.call(
        "workbench_put_file",
        &json!({"id":"wb","section":"input","path":"bin","base64":"/w=="}),
    ));
    err(
        wb.call(
            "workbench_edit",
            &json!({"id":"wb","section":"input","path":"bin","old_string":"a","new_string":"b"}),
        ),
        "InvalidUtf8",
    );
}

#[test]
fn hostile_paths_are_invalid_arguments_and_write_nothing() {
    let (_t, wb) = setup();
    let v = version(&wb);
    let many = vec!["c"; 65].join("/");
    let long = "x".repeat(4097);
    let hostile: Vec<String> = vec![
        "..".into(),
        "../etc/passwd".into(),
        "a/../b".into(),
        "/abs".into(),
        "a\\b".into(),
        "a\u{0}b".into(),
        "a//b".into(),
        "a/".into(),
        "./a".into(),
        many,
        long,
        "input/x.txt".into(), // duplicated section prefix (section = input)
    ];
    for p in &hostile {
        for tool in ["workbench_put_file", "workbench_append"] {
            let e = wb.call(
                tool,
                &json!({"id":"wb","section":"input","path":p,"text":"x"}),
            );
            err(e, "InvalidArguments");
        }
        err(
            wb.call(
                "workbench_edit",
                &json!({"id":"wb","section":"input","path":p,"old_string":"a","new_string":"b"}),
            ),
            "InvalidArguments",
        );
        err(
            wb.call(
                "workbench_read",
                &json!({"id":"wb","section":"input","path":p}),
            ),
            "InvalidArguments",
        );
        err(
            wb.call(
                "workbench_stat",
                &json!({"id":"wb","section":"input","path":p}),
            ),
            "InvalidArguments",
        );
        err(
            wb.call(
                "workbench_list",
                &json!({"id":"wb","section":"input","path":p}),
            ),
            "InvalidArguments",
        );
    }
    // Reserved manifests cannot be written directly.
    for p in ["run_manifest.json", "restore_manifest.json"] {
        err(
            wb.call(
                "workbench_put_file",
                &json!({"id":"wb","section":"metadata","path":p,"text":"{}"}),
            ),
            "InvalidArguments",
        );
    }
    assert_eq!(version(&wb), v, "no hostile call committed anything");
    let listing = ok(wb.call("workbench_list", &json!({"id":"wb","section":"input"})));
    assert_eq!(listing["entries"], json!([]));
}

#[test]
fn payload_rules_are_enforced() {
    let (_t, wb) = setup();
    err(
        wb.call(
            "workbench_put_file",
            &json!({"id":"wb","section":"input","path":"a"}),
        ),
        "InvalidArguments",
    );
    err(
        wb.call(
            "workbench_put_file",
            &json!({"id":"wb","section":"input","path":"a","text":"x","base64":"eA=="}),
        ),
        "InvalidArguments",
    );
    err(
        wb.call(
            "workbench_put_file",
            &json!({"id":"wb","section":"input","path":"a","base64":"!!!"}),
        ),
        "InvalidArguments",
    );
    let big = "x".repeat(16 * 1024 * 1024 + 1);
    let e = err(
        wb.call(
            "workbench_put_file",
            &json!({"id":"wb","section":"input","path":"a","text":big}),
        ),
        "PayloadTooLarge",
    );
    assert_eq!(e["details"]["maximum_bytes"], 16 * 1024 * 1024);
    err(wb.call("workbench_frobnicate", &json!({})), "UnknownTool");
}

#[test]
fn append_creates_then_extends_with_delta_digest() {
    let (_t, wb) = setup();
    let a = ok(wb.call(
        "workbench_append",
        &json!({"id":"wb","section":"logs","path":"run.log","text":"hello\n"}),
    ));
    assert_eq!(a["created"], true);
    assert_eq!(a["appended_bytes"], 6);
    let b = ok(wb.call(
        "workbench_append",
        &json!({"id":"wb","section":"logs","path":"run.log","text":"world\n"}),
    ));
    assert_eq!(b["created"], false);
    assert_eq!(b["size_bytes"], 12);
    assert_eq!(
        b["digest"],
        "sha256:e258d248fda94c63753607f7c4494ee0fcbe92f1a76bfdac795c9d84101eb317"
    );
    assert!(b["generation"].as_u64() > a["generation"].as_u64());
    let body = wb.client().read_all("wb", "logs/run.log").unwrap();
    assert_eq!(body, b"hello\nworld\n");
    let entry = wb.client().stat("wb", "logs/run.log").unwrap();
    assert_eq!(
        entry.body_digest_uri,
        objstore::sha256_uri(b"hello\nworld\n")
    );
}

#[test]
fn list_and_stat_project_sections_files_and_directories() {
    let (_t, wb) = setup();
    put(&wb, "outputs", "b.txt", "bb");
    put(&wb, "outputs", "a/x.txt", "x");
    put(&wb, "outputs", "a/y.txt", "y");
    let root = ok(wb.call("workbench_list", &json!({"id":"wb"})));
    let names: Vec<&str> = root["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["input", "logs", "metadata", "outputs", "scripts"]);
    let out = ok(wb.call("workbench_list", &json!({"id":"wb","section":"outputs"})));
    assert_eq!(out["entry_count"], 2);
    assert_eq!(out["entries"][0]["name"], "a");
    assert_eq!(out["entries"][0]["kind"], "directory");
    assert_eq!(out["entries"][0]["size_bytes"], Value::Null);
    assert_eq!(out["entries"][1]["name"], "b.txt");
    assert_eq!(out["entries"][1]["kind"], "file");
    assert_eq!(out["entries"][1]["size_bytes"], 2);
    assert_eq!(out["entries"][1]["relative_path"], "b.txt");
    assert_eq!(out["truncated"], false);
    assert_eq!(out["next_cursor"], Value::Null);
    err(
        wb.call(
            "workbench_list",
            &json!({"id":"wb","section":"outputs","path":"b.txt"}),
        ),
        "NotDirectory",
    );
    err(
        wb.call(
            "workbench_list",
            &json!({"id":"wb","section":"outputs","path":"zz"}),
        ),
        "NotFound",
    );
    let st = ok(wb.call(
        "workbench_stat",
        &json!({"id":"wb","section":"outputs","path":"b.txt"}),
    ));
    assert_eq!(st["card"]["kind"], "file");
    assert_eq!(st["card"]["size_bytes"], 2);
    assert_eq!(st["card"]["producer"], "workbench_put_file");
    let dir = ok(wb.call(
        "workbench_stat",
        &json!({"id":"wb","section":"outputs","path":"a"}),
    ));
    assert_eq!(dir["card"]["kind"], "directory");
    assert_eq!(dir["card"]["digest_uri"], Value::Null);
    err(
        wb.call(
            "workbench_stat",
            &json!({"id":"wb","section":"outputs","path":"missing"}),
        ),
        "NotFound",
    );
    err(wb.call("workbench_stat", &json!({"id":"nowb"})), "NotFound");
}

#[test]
fn list_pages_with_cursors_and_detects_fence_changes() {
    let (_t, wb) = setup();
    for i in 0..7 {
        put(&wb, "input", &format!("f{i}.txt"), "x");
    }
    let mut seen = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let page = ok(wb.call(
            "workbench_list",
            &json!({"id":"wb","section":"input","limit":3,"cursor":cursor}),
        ));
        for e in page["entries"].as_array().unwrap() {
            seen.push(e["name"].as_str().unwrap().to_string());
        }
        assert_eq!(page["truncated"], !page["next_cursor"].is_null());
        if page["next_cursor"].is_null() {
            break;
        }
        cursor = page["next_cursor"].clone();
    }
    assert_eq!(
        seen,
        (0..7).map(|i| format!("f{i}.txt")).collect::<Vec<_>>()
    );
    let page = ok(wb.call(
        "workbench_list",
        &json!({"id":"wb","section":"input","limit":3}),
    ));
    let c = page["next_cursor"].clone();
    put(&wb, "input", "late.txt", "x");
    err(
        wb.call(
            "workbench_list",
            &json!({"id":"wb","section":"input","limit":3,"cursor":c}),
        ),
        "ReadFenceChanged",
    );
    let mut tampered = c.as_str().unwrap().to_string();
    tampered.insert(5, 'A');
    err(
        wb.call(
            "workbench_list",
            &json!({"id":"wb","section":"input","limit":3,"cursor":tampered}),
        ),
        "InvalidArguments",
    );
}

#[test]
fn read_structured_bytes_and_not_modified() {
    let (_t, wb) = setup();
    put(&wb, "outputs", "lines.txt", "a\nb\nc\n");
    put(&wb, "outputs", "arr.json", "[1,2,3]");
    put(&wb, "outputs", "cfg.yaml", "k: v\nn: 2\n");
    let lines = ok(wb.call(
        "workbench_read",
        &json!({"id":"wb","section":"outputs","path":"lines.txt","limit":2}),
    ));
    assert_eq!(lines["record_type"], "text_lines");
    assert_eq!(lines["record_count"], 3);
    assert_eq!(
        lines["items"],
        json!([{"index":0,"value":"a"},{"index":1,"value":"b"}])
    );
    assert_eq!(lines["next_cursor"], "r:2");
    let rest = ok(wb.call(
        "workbench_read",
        &json!({"id":"wb","section":"outputs","path":"lines.txt","cursor":"r:2"}),
    ));
    assert_eq!(rest["items"], json!([{"index":2,"value":"c"}]));
    assert_eq!(rest["truncated"], false);
    let arr = ok(wb.call(
        "workbench_read",
        &json!({"id":"wb","section":"outputs","path":"arr.json"}),
    ));
    assert_eq!(arr["record_type"], "json_array");
    assert_eq!(arr["record_count"], 3);
    let yaml = ok(wb.call(
        "workbench_read",
        &json!({"id":"wb","section":"outputs","path":"cfg.yaml"}),
    ));
    assert_eq!(yaml["record_type"], "yaml_mapping");
    assert_eq!(yaml["items"][0]["value"], json!({"k":"v","n":2}));
    let bytes = ok(wb.call(
        "workbench_read",
        &json!({"id":"wb","section":"outputs","path":"lines.txt","format":"bytes","offset":2}),
    ));
    assert_eq!(bytes["bytes_encoding"], "base64");
    assert_eq!(bytes["bytes"], "YgpjCg==");
    let g = bytes["generation"].clone();
    let nm = ok(wb.call(
        "workbench_read",
        &json!({"id":"wb","section":"outputs","path":"lines.txt","if_none_match":g}),
    ));
    assert_eq!(nm["not_modified"], true);
    err(
        wb.call(
            "workbench_read",
            &json!({"id":"wb","section":"outputs","path":"lines.txt","offset":1}),
        ),
        "InvalidArguments",
    );
    err(
        wb.call(
            "workbench_read",
            &json!({"id":"wb","section":"outputs","path":"lines.txt","format":"bytes","offset":99}),
        ),
        "InvalidArguments",
    );
    put(&wb, "outputs", "bad.json", "{nope");
    err(
        wb.call(
            "workbench_read",
            &json!({"id":"wb","section":"outputs","path":"bad.json"}),
        ),
        "StructuredDecodeFailed",
    );
    err(
        wb.call(
            "workbench_read",
            &json!({"id":"wb","section":"outputs","path":"missing"}),
        ),
        "NotFound",
    );
}

#[test]
fn grep_finds_case_insensitive_literals_recursively() {
    let (_t, wb) = setup();
    put(&wb, "logs", "a.log", "Error: one\nfine\nERROR two\n");
    put(&wb, "logs", "deep/b.log", "no\nerror three\n");
    put(&wb, "logs", "deep/c.txt", "error four\n");
    let flat = ok(wb.call(
        "workbench_grep",
        &json!({"id":"wb","section":"logs","pattern":"error","recursive":false}),
    ));
    assert_eq!(flat["matches"].as_array().unwrap().len(), 2);
    assert_eq!(flat["files_scanned"], 1);
    let deep = ok(wb.call(
        "workbench_grep",
        &json!({"id":"wb","section":"logs","pattern":"error","recursive":true,"glob":"*.log"}),
    ));
    let m = deep["matches"].as_array().unwrap();
    assert_eq!(m.len(), 3);
    assert_eq!(m[2]["relative_path"], "deep/b.log");
    assert_eq!(m[2]["line_number"], 2);
    assert_eq!(m[2]["snippet"], "error three");
    // Paging over matches.
    let p1 = ok(wb.call(
        "workbench_grep",
        &json!({"id":"wb","section":"logs","pattern":"error|one","recursive":true,"limit":2}),
    ));
    assert_eq!(p1["matches"].as_array().unwrap().len(), 2);
    let p2 = ok(wb.call(
        "workbench_grep",
        &json!({"id":"wb","section":"logs","pattern":"error|one","recursive":true,"limit":2,"cursor":p1["next_cursor"]}),
    ));
    assert_eq!(p2["matches"].as_array().unwrap().len(), 2);
    assert_eq!(p2["truncated"], false);
    err(
        wb.call(
            "workbench_grep",
            &json!({"id":"wb","pattern":"x","recursive":true,"glob":"a/b"}),
        ),
        "InvalidArguments",
    );
}

#[test]
fn integral_floats_and_oversized_integers_are_never_silently_dropped() {
    let (_t, wb) = setup();
    let g1 = put(&wb, "input", "a.txt", "one")["generation"]
        .as_u64()
        .unwrap();
    ok(wb.call(
        "workbench_put_file",
        &json!({"id":"wb","section":"input","path":"a.txt","text":"two","replace":true,"expected_generation":g1}),
    ));
    let v = version(&wb);
    // A stale generation written as a float is still a CAS on that generation.
    let stale = json!({"id":"wb","section":"input","path":"a.txt","text":"X","replace":true,"expected_generation":(g1 as f64)});
    let e = err(wb.call("workbench_put_file", &stale), "Conflict");
    assert_eq!(e["details"]["conflict"], "PathGeneration");
    // Larger than u64: refused, not treated as absent.
    let huge: Value = serde_json::from_str(
        r#"{"id":"wb","section":"input","path":"a.txt","text":"X","replace":true,"expected_generation":18446744073709551616}"#,
    )
    .unwrap();
    err(wb.call("workbench_put_file", &huge), "InvalidArguments");
    assert_eq!(version(&wb), v);
    assert_eq!(wb.client().read_all("wb", "input/a.txt").unwrap(), b"two");
    // offset 1.0 is offset 1.
    let r = ok(wb.call(
        "workbench_read",
        &json!({"id":"wb","section":"input","path":"a.txt","format":"bytes","offset":1.0}),
    ));
    assert_eq!(r["bytes"], "d28="); // "wo"
}

#[test]
fn path_limits_apply_to_the_path_relative_to_its_section() {
    let (_t, wb) = setup();
    let deep = vec!["d"; 64].join("/");
    ok(wb.call(
        "workbench_put_file",
        &json!({"id":"wb","section":"outputs","path":deep,"text":"x"}),
    ));
    let long = "y".repeat(4096);
    ok(wb.call(
        "workbench_put_file",
        &json!({"id":"wb","section":"outputs","path":long,"text":"x"}),
    ));
    let read = ok(wb.call(
        "workbench_read",
        &json!({"id":"wb","section":"outputs","path":deep}),
    ));
    assert_eq!(read["items"][0]["value"], "x");
    let listing = ok(wb.call("workbench_list", &json!({"id":"wb","section":"outputs"})));
    assert_eq!(listing["entry_count"], 2);
    let found = ok(wb.call(
        "workbench_grep",
        &json!({"id":"wb","section":"outputs","pattern":"x","recursive":true}),
    ));
    assert_eq!(found["matches"].as_array().unwrap().len(), 2);
    let too_deep = vec!["d"; 65].join("/");
    err(
        wb.call(
            "workbench_put_file",
            &json!({"id":"wb","section":"outputs","path":too_deep,"text":"x"}),
        ),
        "InvalidArguments",
    );
}

#[test]
fn reserved_manifests_cannot_be_edited_or_appended() {
    let (_t, wb) = setup();
    for tool in ["workbench_append", "workbench_put_file"] {
        err(
            wb.call(
                tool,
                &json!({"id":"wb","section":"metadata","path":"run_manifest.json","text":"{}"}),
            ),
            "InvalidArguments",
        );
    }
    err(
        wb.call(
            "workbench_edit",
            &json!({"id":"wb","section":"metadata","path":"restore_manifest.json","old_string":"a","new_string":"b"}),
        ),
        "InvalidArguments",
    );
}

#[test]
fn content_type_with_control_characters_is_refused() {
    let (_t, wb) = setup();
    err(
        wb.call(
            "workbench_put_file",
            &json!({"id":"wb","section":"input","path":"a","text":"x","content_type":"text/plain\r\nX-Evil: 1"}),
        ),
        "InvalidArguments",
    );
}

#[test]
fn grep_matches_lines_of_bodies_with_stray_binary_bytes() {
    let (_t, wb) = setup();
    // "\xffneedle\n" as base64
    ok(wb.call(
        "workbench_put_file",
        &json!({"id":"wb","section":"logs","path":"b.log","base64":"/25lZWRsZQo="}),
    ));
    let g = ok(wb.call(
        "workbench_grep",
        &json!({"id":"wb","section":"logs","pattern":"needle","recursive":false}),
    ));
    assert_eq!(g["matches"].as_array().unwrap().len(), 1);
}

#[test]
fn materialize_refuses_a_path_that_is_both_file_and_directory() {
    if nokv_tests::test_engine_is_etcd() {
        // The clash is fabricated by writing holt rows directly (`fabricate_clash`).
        eprintln!("holt-only test skipped on etcd: fabricates rows through holt");
        return;
    }
    let (tmp, wb) = setup();
    put(&wb, "logs", "d/x", "inner");
    put(&wb, "logs", "e", "outer");
    // Every writer now refuses the clash; an older store may still hold one.
    err(
        wb.call(
            "workbench_put_file",
            &json!({"id":"wb","section":"logs","path":"d","text":"outer"}),
        ),
        "AlreadyExists",
    );
    nokv_tests::fabricate_clash(wb.client(), "wb", "logs/d", "logs/e");
    let dest = tmp.path().join("sandbox");
    let e = nokv::materialize::materialize(wb.client(), "wb", None, &dest).unwrap_err();
    assert!(matches!(e, nokv::Error::InvalidArgument(_)), "{e}");
    assert!(
        !dest.join("logs").exists(),
        "nothing written before the refusal"
    );
    // A narrower prefix works.
    let files = nokv::materialize::materialize(wb.client(), "wb", Some("logs/d/x"), &dest).unwrap();
    assert_eq!(files.len(), 1);
}
