//! `nokv collect --field/--index-json` and `nokv workbench search|aggregate|catalog` through the
//! binary: typed fields from the command line, one JSON envelope per call, and search cursors
//! that continue across separate processes (each reopens the store) while nothing changed.

use std::process::{Command, Output};

use serde_json::{json, Value};

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
fn collected_fields_are_typed_and_searchable_from_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let file = tmp.path().join("summary.json");
    std::fs::write(&file, br#"{"species":"Gentoo","mean_body_mass_g":5076.02}"#).unwrap();
    for (wb, count) in [("run-a", "123"), ("run-b", "68")] {
        let spec = format!("count:int={count}");
        let out = nokv(
            &store,
            &[
                "-q",
                "collect",
                wb,
                file.to_str().unwrap(),
                "outputs/summary.json",
                "--index-json",
                "--field",
                &spec,
                "--field",
                "label=heavy",
                "--field",
                "at:ts=2024-05-01T12:00:00Z",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    let search = |input: Value| {
        let out = nokv(&store, &["workbench", "search", &input.to_string()]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        envelope(&out)
    };
    let r = search(json!({"predicates":[{"field":"count","op":"gt","value":100}]}));
    assert_eq!(r["match_count"], 1);
    let values = &r["matches"][0]["values"];
    assert_eq!(r["matches"][0]["workbench_id"], "run-a");
    assert_eq!(values["count"], 123);
    assert_eq!(values["label"], "heavy");
    assert_eq!(values["at"], "2024-05-01T12:00:00Z");
    assert_eq!(values["species"], "Gentoo");
    assert_eq!(values["producer"], "nokv collect");
    // Paging across processes: each call reopens the store; the cursor still continues.
    let query = json!({"predicates":[{"field":"label","op":"eq","value":"heavy"}],"limit":1});
    let first = search(query.clone());
    let mut next = query.clone();
    next["cursor"] = first["next_cursor"].clone();
    let second = search(next);
    assert_eq!(second["matches"][0]["workbench_id"], "run-b");
    assert_eq!(second["next_cursor"], Value::Null);
    // aggregate and catalog answer through the same binary.
    let out = nokv(
        &store,
        &[
            "workbench",
            "workbench_aggregate",
            r#"{"measures":[{"name":"total","op":"sum","field":"count"}]}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(envelope(&out)["groups"][0]["values"]["total"], 191);
    let out = nokv(
        &store,
        &["workbench", "catalog", r#"{"field_prefix":"co"}"#],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        envelope(&out)["catalog"]["field_types"]["count"],
        json!(["int"])
    );
    // A query error is one error envelope with exit code 1.
    let out = nokv(&store, &["workbench", "search", r#"{"id":"missing"}"#]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(envelope(&out)["code"], "NotFound");
}

#[test]
fn invalid_field_arguments_refuse_the_collect_and_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    let file = tmp.path().join("a.json");
    std::fs::write(&file, b"[1,2,3]").unwrap();
    for extra in [
        &["--field", "bad name=1"][..],
        &["--field", "n:int=x"],
        &["--field", "generation=1"],
        &["--index-json"],
    ] {
        let mut args = vec![
            "-q",
            "collect",
            "wb",
            file.to_str().unwrap(),
            "outputs/a.json",
        ];
        args.extend_from_slice(extra);
        let out = nokv(&store, &args);
        assert_eq!(out.status.code(), Some(1), "{extra:?}");
    }
    // The workbench was never created.
    let out = nokv(&store, &["workbench", "list", r#"{"id":"wb"}"#]);
    assert_eq!(envelope(&out)["code"], "NotFound");
}
