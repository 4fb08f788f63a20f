//! The main job: the reference research workflow on the real Palmer penguins data.

use nokv::workbench::Workbench;
use nokv_tests::{fresh_store, ok};
use serde_json::json;

fn expected() -> Vec<(&'static str, u64, f64, f64)> {
    vec![
        ("Adelie", 151, 3700.66, 189.95),
        ("Chinstrap", 68, 3733.09, 195.82),
        ("Gentoo", 123, 5076.02, 217.19),
    ]
}

#[test]
fn demo_computes_the_published_penguin_summaries() {
    let (_tmp, client) = fresh_store();
    let mut out = Vec::new();
    let report = nokv::demo::run_demo(&client, &mut out).expect("demo runs");
    let printed = String::from_utf8(out).unwrap();
    for ((species, count, mass, flipper), run) in expected().into_iter().zip(&report.runs) {
        assert_eq!(run.species, species);
        assert_eq!(run.count, count);
        assert_eq!(run.mean_body_mass_g, mass);
        assert_eq!(run.mean_flipper_length_mm, flipper);
        assert!(
            printed.contains(&format!("{mass:.2}")),
            "table lacks {mass}: {printed}"
        );
    }
    // The summary reads back as one structured json_object record.
    let wb = Workbench::new(client.clone());
    let read = ok(wb.call(
        "workbench_read",
        &json!({"id":"run-gentoo","section":"outputs","path":"summary.json"}),
    ));
    assert_eq!(read["record_type"], "json_object");
    assert_eq!(read["record_count"], 1);
    assert_eq!(
        read["items"][0]["value"],
        json!({"species":"Gentoo","count":123,"mean_body_mass_g":5076.02,"mean_flipper_length_mm":217.19})
    );
    // Declared outputs, log and params were all collected; the input was copied in.
    for path in [
        "logs/run.log",
        "metadata/params.json",
        "input/penguins.csv",
        "scripts/summarize.sh",
    ] {
        client
            .stat("run-gentoo", path)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    let log = client.read_all("run-gentoo", "logs/run.log").unwrap();
    assert!(!log.is_empty());
    let input = client.read_all("run-adelie", "input/penguins.csv").unwrap();
    assert_eq!(input, nokv::demo::PENGUINS_CSV);
}

#[test]
fn demo_runs_again_on_the_same_store_and_reuses_its_workbenches() {
    let (tmp, client) = fresh_store();
    let first = nokv::demo::run_demo(&client, &mut Vec::new()).unwrap();
    assert!(first.published > 0);
    drop(client);
    let client = nokv::Client::open(tmp.path().join("store")).unwrap();
    let second = nokv::demo::run_demo(&client, &mut Vec::new()).unwrap();
    assert_eq!(second.published, 0, "identical re-run republishes nothing");
    assert_eq!(
        first.runs, second.runs,
        "same summaries and same generations"
    );
}
