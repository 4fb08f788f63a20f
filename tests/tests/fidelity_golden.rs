//! Golden CLI transcript of the interoperable result shapes (issue "contract fidelity", item 4;
//! docs/workbench.md "snapshot_retire", "snapshot_list", "find", "search / aggregate / catalog"):
//! `tests/golden/fidelity_shapes.json` holds steps `{name, tool, input, exit_code, expected}`
//! replayed in order through the `nokv` binary (`nokv --store S workbench <tool> '<json>'`) on a
//! fresh store, so the transcript builds its own fixture.
//!
//! Volatile values are masked on both sides: numeric `generation`, `read_version`,
//! `snapshot_id`, `manifest_generation`, `lease_expires_unix_ms`, `committed_at_unix_seconds`
//! (commit versions and clocks), string `lease_expires_at`, `expiry_warning`, `next_cursor`,
//! `envelope_digest_uri` (covers the commit time) and `tree_digest_uri` (covers revision ids).
//! Everything else is compared exactly.
//!
//! Regenerate after a deliberate contract change with `NOKV_UPDATE_GOLDEN=1 cargo test -p
//! nokv-tests --test fidelity_golden`, then review the diff.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/fidelity_shapes.json")
}

fn mask(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match (k.as_str(), &*x) {
                    (
                        "generation"
                        | "read_version"
                        | "snapshot_id"
                        | "manifest_generation"
                        | "lease_expires_unix_ms"
                        | "committed_at_unix_seconds",
                        Value::Number(_),
                    ) => *x = json!(format!("<{k}>")),
                    (
                        "lease_expires_at"
                        | "expiry_warning"
                        | "next_cursor"
                        | "envelope_digest_uri"
                        | "tree_digest_uri",
                        Value::String(_),
                    ) => *x = json!(format!("<{k}>")),
                    _ => mask(x),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(mask),
        _ => {}
    }
}

#[test]
fn interoperable_result_shapes_match_the_golden_cli_transcript() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let path = golden_path();
    let text = std::fs::read_to_string(&path).expect("golden file");
    let mut golden: Value = serde_json::from_str(&text).expect("golden JSON");
    let update = std::env::var_os("NOKV_UPDATE_GOLDEN").is_some();
    let steps = golden["steps"].as_array_mut().expect("steps");
    assert!(steps.len() >= 10, "the transcript covers every shape");
    let mut failures = Vec::new();
    for step in steps.iter_mut() {
        let name = step["name"].as_str().unwrap_or("?").to_string();
        let tool = step["tool"].as_str().expect("tool").to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_nokv_cli"))
            .arg("--store")
            .arg(&store)
            .args(["workbench", &tool, &step["input"].to_string()])
            .output()
            .expect("run nokv");
        let code = out.status.code().unwrap_or(-1);
        let mut actual: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "step {name}: stdout is not one JSON envelope ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        mask(&mut actual);
        if update {
            step["exit_code"] = json!(code);
            step["expected"] = actual;
        } else {
            let mut expected = step["expected"].clone();
            mask(&mut expected);
            if actual != expected || step["exit_code"] != json!(code) {
                failures.push(format!(
                    "step {name} (exit {code}, expected {}):\n expected {expected:#}\n actual   {actual:#}",
                    step["exit_code"]
                ));
            }
        }
    }
    if update {
        let mut out = serde_json::to_string_pretty(&golden).unwrap();
        out.push('\n');
        std::fs::write(&path, out).unwrap();
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
