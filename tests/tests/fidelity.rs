//! Contract fidelity through the facade (issue "contract fidelity", items 2, 4 and 6): exact
//! numbers in structured reads, search projections and index fields; the durable first retire
//! annotation; find's manifest envelope and summary; `"field": null` for a count measure; and
//! one near-miss hint test per normalisation of `workbench_edit`.

use nokv::workbench::Workbench;
use nokv::{Client, PutOptions};
use nokv_tests::{err, fresh_store, ok};
use serde_json::{json, Value};

fn setup() -> (tempfile::TempDir, Workbench) {
    let (tmp, client) = fresh_store();
    let wb = Workbench::new(client);
    ok(wb.call("workbench_create", &json!({"id": "wb"})));
    (tmp, wb)
}

// ---------------------------------------------------------------------------------------------
// Item 2: exact numbers

#[test]
fn structured_reads_return_large_and_long_numbers_digit_for_digit() {
    let (_t, wb) = setup();
    let body = r#"{"big": 12345678901234567890123, "neg_big": -99999999999999999999, "long": 0.1000000000000000000001, "e": 1.5e-400}"#;
    ok(wb.call(
        "workbench_put_file",
        &json!({"id": "wb", "section": "outputs", "path": "n.json", "text": body}),
    ));
    let r = ok(wb.call(
        "workbench_read",
        &json!({"id": "wb", "section": "outputs", "path": "n.json"}),
    ));
    assert_eq!(r["record_type"], "json_object");
    let v = &r["items"][0]["value"];
    assert_eq!(v["big"].to_string(), "12345678901234567890123");
    assert_eq!(v["neg_big"].to_string(), "-99999999999999999999");
    assert_eq!(v["long"].to_string(), "0.1000000000000000000001");
    assert_eq!(v["e"].to_string(), "1.5e-400");
    // The serialized envelope (what the CLI and MCP print) carries the same tokens.
    let text = serde_json::to_string(&r).unwrap();
    assert!(text.contains(r#""big":12345678901234567890123"#), "{text}");
    // A JSON array body: one record per element, each exact.
    ok(wb.call(
        "workbench_put_file",
        &json!({"id": "wb", "section": "outputs", "path": "a.json",
                "text": "[18446744073709551616, 3.14159265358979323846264338327950288]"}),
    ));
    let r = ok(wb.call(
        "workbench_read",
        &json!({"id": "wb", "section": "outputs", "path": "a.json"}),
    ));
    assert_eq!(r["record_type"], "json_array");
    assert_eq!(r["items"][0]["value"].to_string(), "18446744073709551616");
    assert_eq!(
        r["items"][1]["value"].to_string(),
        "3.14159265358979323846264338327950288"
    );
}

#[test]
fn index_json_refuses_numbers_an_index_cannot_hold_and_projects_the_rest_exactly() {
    let (_t, wb) = setup();
    let client: &Client = wb.client();
    let mut options = PutOptions::create("application/json", "test");
    options.index_json = true;
    for body in [
        r#"{"big": 12345678901234567890123}"#,
        r#"{"long": 0.1000000000000000000001}"#,
        r#"{"huge": 1e400}"#,
    ] {
        let v = client.meta().version().unwrap();
        match client.put("wb", "outputs/m.json", body.as_bytes(), &options) {
            Err(nokv::Error::InvalidArgument(msg)) => {
                assert!(msg.contains("exactly"), "{msg}")
            }
            other => panic!("{body}: {other:?}"),
        }
        assert_eq!(client.meta().version().unwrap(), v, "nothing written");
    }
    client
        .put(
            "wb",
            "outputs/m.json",
            br#"{"max": 18446744073709551615, "min": -9223372036854775808, "acc": 0.1, "lr": 2.5e-7, "w": 1.50}"#,
            &options,
        )
        .unwrap();
    let found = ok(wb.call(
        "workbench_search",
        &json!({"id": "wb", "fields": ["max", "min", "acc", "lr", "w"]}),
    ));
    let values = &found["matches"][0]["values"];
    assert_eq!(values["max"].to_string(), "18446744073709551615");
    assert_eq!(values["min"].to_string(), "-9223372036854775808");
    assert_eq!(values["acc"].to_string(), "0.1");
    assert_eq!(values["lr"].to_string(), "2.5e-7");
    assert_eq!(values["w"].to_string(), "1.5");
    // Predicate values: exact ones match, ones an index cannot hold are refused.
    let hit = ok(wb.call(
        "workbench_search",
        &json!({"id": "wb", "predicates": [{"field": "max", "op": "eq",
                                           "value": 18446744073709551615u64}]}),
    ));
    assert_eq!(hit["match_count"], 1);
    let e = err(
        wb.call(
            "workbench_search",
            &json!({"id": "wb", "predicates": [{"field": "acc", "op": "eq",
                    "value": serde_json::from_str::<Value>("0.1000000000000000000001").unwrap()}]}),
        ),
        "InvalidArguments",
    );
    assert!(e["message"]
        .as_str()
        .unwrap()
        .contains("0.1000000000000000000001"));
}

#[test]
fn commit_manifests_keep_exact_numbers_and_known_digests() {
    let (_t, wb) = setup();
    let digest = format!("sha256:{}", "01".repeat(32));
    // The contract's test vector is unchanged.
    let vector = ok(wb.call(
        "workbench_commit",
        &json!({"id": "wb", "manifest": {"model": "viking", "task": "ptycho"},
                "content_digest_uri": digest}),
    ));
    assert!(vector["manifest_digest_uri"]
        .as_str()
        .unwrap()
        .starts_with("sha256:23312ff4"));
    // A manifest with a number beyond f64 is committed exactly and found exactly.
    let manifest: Value = serde_json::from_str(
        r#"{"seed": 12345678901234567890123, "lr": 0.1000000000000000000001}"#,
    )
    .unwrap();
    ok(wb.call(
        "workbench_commit",
        &json!({"id": "wb", "manifest": manifest, "content_digest_uri": digest,
                "replace": true}),
    ));
    let found = ok(wb.call("workbench_find", &json!({"include_manifest": true})));
    let m = &found["matches"][0];
    assert_eq!(m["commit_identity_verified"], true);
    assert_eq!(
        m["manifest"]["manifest"]["seed"].to_string(),
        "12345678901234567890123"
    );
    assert_eq!(
        m["manifest"]["manifest"]["lr"].to_string(),
        "0.1000000000000000000001"
    );
}

// ---------------------------------------------------------------------------------------------
// Item 4: interoperable result shapes

fn committed_snapshot(wb: &Workbench, name: &str) {
    ok(wb.call(
        "workbench_commit",
        &json!({"id": "wb", "manifest": {"task": "t"},
                "content_digest_uri": format!("sha256:{}", "02".repeat(32)), "replace": true}),
    ));
    ok(wb.call("workbench_snapshot", &json!({"id": "wb", "name": name})));
}

#[test]
fn the_first_retire_annotation_is_durable_across_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    {
        let wb = Workbench::new(Client::open(&dir).unwrap());
        ok(wb.call("workbench_create", &json!({"id": "wb"})));
        committed_snapshot(&wb, "s");
        let r = ok(wb.call(
            "workbench_snapshot_retire",
            &json!({"id": "wb", "name": "s", "reason": "first"}),
        ));
        assert_eq!(r["retired"], true);
    }
    let wb = Workbench::new(Client::open(&dir).unwrap());
    let r = ok(wb.call(
        "workbench_snapshot_retire",
        &json!({"id": "wb", "name": "s", "reason": "second"}),
    ));
    assert_eq!(r["retired"], false);
    assert_eq!(
        r["retire_annotation"],
        json!({"metadata": null, "reason": "first"})
    );
    let listed = ok(wb.call("workbench_snapshot_list", &json!({"id": "wb"})));
    let row = &listed["snapshots"][0];
    assert_eq!(row["retire_annotation"], r["retire_annotation"]);
    assert_eq!(row["annotation"], json!({"metadata": {}, "reason": null}));
    assert_eq!(row["state"], "retired");
}

#[test]
fn snapshot_list_rows_carry_null_retire_annotation_until_retired() {
    let (_t, wb) = setup();
    committed_snapshot(&wb, "live");
    let listed = ok(wb.call("workbench_snapshot_list", &json!({"id": "wb"})));
    let row = &listed["snapshots"][0];
    assert_eq!(row["retire_annotation"], Value::Null);
    assert!(row["annotation"].is_object());
}

#[test]
fn aggregate_count_accepts_field_null_and_other_measures_still_need_a_field() {
    let (_t, wb) = setup();
    for p in ["a.txt", "b.txt"] {
        ok(wb.call(
            "workbench_put_file",
            &json!({"id": "wb", "section": "outputs", "path": p, "text": "x"}),
        ));
    }
    let r = ok(wb.call(
        "workbench_aggregate",
        &json!({"id": "wb", "measures": [{"name": "n", "op": "count", "field": null}]}),
    ));
    assert_eq!(r["groups"][0]["values"]["n"], 2);
    err(
        wb.call(
            "workbench_aggregate",
            &json!({"id": "wb", "measures": [{"name": "s", "op": "sum", "field": null}]}),
        ),
        "InvalidArguments",
    );
}

// ---------------------------------------------------------------------------------------------
// Item 6: one near-miss hint test per normalisation

/// Writes `body` to `scripts/f.txt`, edits with `old`, and returns the single hint; the body is
/// unchanged afterwards.
fn hint(body: &str, old: &str) -> Value {
    let (_t, wb) = setup();
    ok(wb.call(
        "workbench_put_file",
        &json!({"id": "wb", "section": "scripts", "path": "f.txt", "text": body}),
    ));
    let before = wb.client().meta().version().unwrap();
    let e = err(
        wb.call(
            "workbench_edit",
            &json!({"id": "wb", "section": "scripts", "path": "f.txt",
                    "old_string": old, "new_string": "REPLACED"}),
        ),
        "NoMatch",
    );
    assert_eq!(
        wb.client().meta().version().unwrap(),
        before,
        "never applied"
    );
    let hints = e["details"]["hints"].as_array().unwrap().clone();
    assert_eq!(hints.len(), 1, "{e}");
    hints[0].clone()
}

#[test]
fn hint_for_line_endings() {
    let h = hint("one\r\ntwo\r\nthree\r\n", "two\nthree");
    assert_eq!(h["differences"], json!(["line_endings"]));
    assert_eq!(
        (h["line_number"].as_u64(), h["end_line_number"].as_u64()),
        (Some(2), Some(3))
    );
    assert_eq!(h["text"], "two\r\nthree");
}

#[test]
fn hint_for_tabs_vs_spaces() {
    let h = hint("if x:\n\treturn 1\n", "if x:\n    return 1");
    assert_eq!(h["differences"], json!(["tabs_vs_spaces"]));
    assert_eq!(h["line_number"], 1);
    assert_eq!(h["text"], "if x:\n\treturn 1");
}

#[test]
fn hint_for_indentation_width() {
    let h = hint("a:\n    b: 1\n    c: 2\n", "a:\n  b: 1\n  c: 2");
    assert_eq!(h["differences"], json!(["indentation"]));
    assert_eq!(h["end_line_number"], 3);
}

#[test]
fn hint_for_trailing_whitespace() {
    let h = hint("x = 1   \ny = 2\n", "x = 1\ny = 2");
    assert_eq!(h["differences"], json!(["trailing_whitespace"]));
    assert_eq!(h["text"], "x = 1   \ny = 2");
}

#[test]
fn hint_for_unicode_normalization() {
    // File in NFD (e + combining acute), old_string in NFC.
    let h = hint("menu: cafe\u{301}\n", "menu: caf\u{e9}");
    assert_eq!(h["differences"], json!(["unicode_normalization"]));
    assert_eq!(h["line_number"], 1);
}

#[test]
fn hint_for_letter_case() {
    let h = hint("Title: Hello World\n", "title: hello world");
    assert_eq!(h["differences"], json!(["case"]));
}

#[test]
fn hint_for_crlf_and_tabs_together_names_both() {
    let h = hint(
        "fn f() {\r\n\tlet x = 1;\r\n\tlet y = 2;\r\n}\r\n",
        "    let x = 1;\n    let y = 2;",
    );
    assert_eq!(h["differences"], json!(["line_endings", "tabs_vs_spaces"]));
    assert_eq!(h["kind"], "line_endings");
    assert_eq!(h["line_number"], 2);
    assert_eq!(h["end_line_number"], 3);
}
