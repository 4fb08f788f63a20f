//! Golden result transcripts of the three query tools: `tests/golden/query_tools.json` holds
//! request → expected envelope pairs, replayed against a deterministically built store.
//!
//! Volatile values are masked on both sides before comparing: every numeric `generation`
//! (a commit version: it moves whenever the number of commits before the fixture changes) becomes
//! `"<generation>"`, and every string `next_cursor` (an HMAC keyed by the store's random root
//! id) becomes `"<cursor>"`. Everything else — digests, sizes, orders, counts, messages — is
//! compared exactly.
//!
//! Regenerate after a deliberate contract change with `NOKV_UPDATE_GOLDEN=1 cargo test -p
//! nokv-tests --test query_golden`, then review the diff.

use std::path::PathBuf;

use nokv::workbench::Workbench;
use nokv::{Client, FieldId, IndexValue, PutOptions, Timestamp};
use nokv_tests::fresh_store;
use serde_json::{json, Value};

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/query_tools.json")
}

fn mask(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match (k.as_str(), &*x) {
                    ("generation", Value::Number(_)) => *x = json!("<generation>"),
                    ("next_cursor", Value::String(_)) => *x = json!("<cursor>"),
                    _ => mask(x),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(mask),
        _ => {}
    }
}

fn put(client: &Client, wb: &str, path: &str, body: &str, fields: Vec<(&str, IndexValue)>) {
    client.create_workbench(wb).unwrap();
    let mut options = PutOptions::create("application/json", "golden");
    options.index_fields = fields
        .into_iter()
        .map(|(k, v)| (FieldId::new(k).unwrap(), v))
        .collect();
    client.put(wb, path, body.as_bytes(), &options).unwrap();
}

/// Three experiment workbenches with metrics, a model file and a log each.
fn fixture(client: &Client) {
    let ts = |s: &str| IndexValue::Timestamp(Timestamp::parse_rfc3339(s).unwrap());
    for (wb, model, dataset, accuracy, epochs, finished) in [
        (
            "exp-a",
            "resnet",
            "cifar10",
            0.91,
            10i64,
            "2024-05-01T10:00:00Z",
        ),
        (
            "exp-b",
            "resnet",
            "cifar100",
            0.87,
            20,
            "2024-05-02T10:00:00Z",
        ),
        (
            "exp-c",
            "vit",
            "cifar10",
            0.95,
            10,
            "2024-05-03T10:00:00.5Z",
        ),
    ] {
        put(
            client,
            wb,
            "outputs/metrics.json",
            &format!(r#"{{"accuracy":{accuracy},"epochs":{epochs}}}"#),
            vec![
                ("model", IndexValue::String(model.into())),
                ("dataset", IndexValue::String(dataset.into())),
                ("accuracy", IndexValue::float(accuracy).unwrap()),
                ("epochs", IndexValue::Int(epochs)),
                ("finished_at", ts(finished)),
            ],
        );
        put(
            client,
            wb,
            "outputs/model/weights.bin",
            &format!("weights of {wb}"),
            vec![("model", IndexValue::String(model.into()))],
        );
        put(client, wb, "logs/train.log", "epoch 1\n", vec![]);
    }
}

#[test]
fn query_tool_results_match_the_golden_transcripts() {
    let (_tmp, client) = fresh_store();
    fixture(&client);
    let wb = Workbench::new(client);
    let path = golden_path();
    let text = std::fs::read_to_string(&path).expect("golden file");
    let mut golden: Value = serde_json::from_str(&text).expect("golden JSON");
    let update = std::env::var_os("NOKV_UPDATE_GOLDEN").is_some();
    let cases = golden["cases"].as_array_mut().expect("cases");
    assert!(cases.len() >= 10, "the transcript covers every tool");
    let mut failures = Vec::new();
    for case in cases.iter_mut() {
        let name = case["name"].as_str().unwrap_or("?").to_string();
        let tool = case["tool"].as_str().expect("tool").to_string();
        let mut actual = wb.call(&tool, &case["input"]);
        mask(&mut actual);
        if update {
            case["expected"] = actual;
        } else {
            let mut expected = case["expected"].clone();
            mask(&mut expected);
            if actual != expected {
                failures.push(format!(
                    "case {name}:\n expected {expected:#}\n actual   {actual:#}"
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
