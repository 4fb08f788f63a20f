//! `nokv demo` — the reference research workflow of seed 001 on real data.
//!
//! 1. workbench `penguins` receives `input/penguins.csv` (Palmer penguins, 344 rows, CC0) and
//!    `scripts/summarize.sh` (POSIX `sh` + `awk`);
//! 2. for each species (Adelie, Chinstrap, Gentoo) a run workbench `run-<species>` gets the input
//!    and the script copied in through the SDK;
//! 3. each run is materialized into a fresh temporary sandbox, digests are verified right before
//!    execution, the script runs there, and the declared outputs are collected back:
//!    `outputs/summary.json`, `logs/run.log`, `metadata/params.json`;
//! 4. the three summaries are read back through the Workbench facade (`workbench_read`, structured)
//!    and printed as a comparison table; the sandboxes are deleted, the store keeps everything;
//! 5. query step: each `outputs/summary.json` is published with `index_json`, so its top-level
//!    scalars (`species`, `count`, `mean_body_mass_g`, `mean_flipper_length_mm`) are typed index
//!    fields; the demo prints a root-wide `workbench_search` for `mean_body_mass_g > 4000` (the
//!    Gentoo run) and a `workbench_aggregate` of the average body mass grouped by species.
//!
//! Running the demo again on the same store reuses the same workbenches: a file whose bytes are
//! unchanged is not republished (its generation stays), a changed one is replaced under a
//! generation CAS. The demo's outputs are deterministic, so a second run changes nothing.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::client::{Client, PutOptions, WriteCondition};
use crate::error::{Error, Result};
use crate::materialize;
use crate::workbench::Workbench;

/// The real input: Palmer penguins (see `examples/penguins/README.md` for origin and licence).
pub const PENGUINS_CSV: &[u8] = include_bytes!("../../examples/penguins/penguins.csv");
/// The analysis script: `sh summarize.sh SPECIES INPUT_CSV OUTPUT_DIR`.
pub const SUMMARIZE_SH: &[u8] = include_bytes!("../../examples/penguins/summarize.sh");
/// The species analysed, one run workbench each.
pub const SPECIES: [&str; 3] = ["Adelie", "Chinstrap", "Gentoo"];
/// Id of the input workbench.
pub const INPUT_WORKBENCH: &str = "penguins";

/// One row of the comparison table, as read back from `outputs/summary.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// Run workbench id (`run-adelie`, …).
    pub workbench_id: String,
    /// Species name.
    pub species: String,
    /// Rows with a body mass.
    pub count: u64,
    /// Mean body mass in grams, 2 decimals.
    pub mean_body_mass_g: f64,
    /// Mean flipper length in millimetres, 2 decimals.
    pub mean_flipper_length_mm: f64,
    /// Generation of the summary artifact.
    pub generation: u64,
}

/// Result of one demo run.
#[derive(Debug, Clone)]
pub struct DemoReport {
    /// One summary per species, in [`SPECIES`] order.
    pub runs: Vec<RunSummary>,
    /// Files (re)published by this run; 0 on an unchanged re-run.
    pub published: usize,
    /// Workbenches whose summary matched `mean_body_mass_g > 4000` (`workbench_search`).
    pub heavy_runs: Vec<String>,
    /// `(species, average mean_body_mass_g)` from `workbench_aggregate`, by species.
    pub mass_by_species: Vec<(String, f64)>,
}

/// Runs the workflow against `client`, printing progress and the table to `out`.
///
/// Errors: any SDK error; [`Error::InvalidArgument`] when the script fails (its stderr is
/// included) or a summary is not the expected JSON object.
pub fn run_demo(client: &Client, out: &mut dyn Write) -> Result<DemoReport> {
    let mut published = 0usize;
    let say = |out: &mut dyn Write, line: String| {
        let _ = writeln!(out, "{line}");
    };
    say(out, format!("store: {}", client.dir().display()));
    client.create_workbench(INPUT_WORKBENCH)?;
    published += usize::from(put_if_changed(
        client,
        INPUT_WORKBENCH,
        "input/penguins.csv",
        PENGUINS_CSV,
        "text/csv; charset=utf-8",
        false,
    )?);
    published += usize::from(put_if_changed(
        client,
        INPUT_WORKBENCH,
        "scripts/summarize.sh",
        SUMMARIZE_SH,
        "text/x-shellscript; charset=utf-8",
        false,
    )?);
    say(
        out,
        format!(
            "workbench {INPUT_WORKBENCH}: input/penguins.csv ({} bytes), scripts/summarize.sh",
            PENGUINS_CSV.len()
        ),
    );

    for species in SPECIES {
        let run_id = format!("run-{}", species.to_ascii_lowercase());
        client.create_workbench(&run_id)?;
        // Copy input and script in through the SDK (read verified, publish).
        for (path, ct) in [
            ("input/penguins.csv", "text/csv; charset=utf-8"),
            ("scripts/summarize.sh", "text/x-shellscript; charset=utf-8"),
        ] {
            let bytes = client.read_all(INPUT_WORKBENCH, path)?;
            published += usize::from(put_if_changed(client, &run_id, path, &bytes, ct, false)?);
        }
        let sandbox = tempfile::Builder::new()
            .prefix("nokv-sandbox-")
            .tempdir()
            .map_err(|source| Error::LocalIo {
                op: "create sandbox",
                path: std::env::temp_dir(),
                source,
            })?;
        let root = sandbox.path();
        let files = materialize::materialize(client, &run_id, Some("input"), root)?;
        let mut all = files;
        all.extend(materialize::materialize(
            client,
            &run_id,
            Some("scripts"),
            root,
        )?);
        materialize::verify_materialized(&all)?;
        for dir in ["outputs", "logs", "metadata"] {
            mkdir(&root.join(dir))?;
        }
        let params = json!({
            "species": species,
            "input": "input/penguins.csv",
            "input_digest_uri": digest_of(&all, "input/penguins.csv"),
            "script": "scripts/summarize.sh",
            "script_digest_uri": digest_of(&all, "scripts/summarize.sh"),
            "command": ["sh", "scripts/summarize.sh", species, "input/penguins.csv", "outputs"],
        });
        let params_bytes = serde_json::to_vec_pretty(&params)
            .map_err(|e| Error::InvalidArgument(format!("params: {e}")))?;
        write_file(&root.join("metadata/params.json"), &params_bytes)?;
        let output = Command::new("sh")
            .arg("scripts/summarize.sh")
            .arg(species)
            .arg("input/penguins.csv")
            .arg("outputs")
            .current_dir(root)
            .output()
            .map_err(|source| Error::LocalIo {
                op: "run sh",
                path: root.join("scripts/summarize.sh"),
                source,
            })?;
        let mut log = output.stdout.clone();
        log.extend_from_slice(&output.stderr);
        write_file(&root.join("logs/run.log"), &log)?;
        if !output.status.success() {
            return Err(Error::InvalidArgument(format!(
                "summarize.sh failed for {species}: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        // The summary's top-level scalars become typed index fields (index_json).
        for (path, ct, index_json) in [
            ("outputs/summary.json", "application/json", true),
            ("logs/run.log", "text/plain; charset=utf-8", false),
            ("metadata/params.json", "application/json", false),
        ] {
            let bytes = std::fs::read(root.join(path)).map_err(|source| Error::LocalIo {
                op: "read output",
                path: root.join(path),
                source,
            })?;
            published += usize::from(put_if_changed(
                client, &run_id, path, &bytes, ct, index_json,
            )?);
        }
        say(
            out,
            format!("run {run_id}: materialized, verified, executed, collected 3 outputs"),
        );
        drop(sandbox);
    }

    // Read the summaries back through the facade, structured.
    let facade = Workbench::new(client.clone());
    let mut runs = Vec::new();
    for species in SPECIES {
        let run_id = format!("run-{}", species.to_ascii_lowercase());
        let result = facade.call(
            "workbench_read",
            &json!({"id": run_id, "section": "outputs", "path": "summary.json"}),
        );
        runs.push(summary_from(&run_id, &result)?);
    }
    say(out, String::new());
    say(
        out,
        format!(
            "{:<10} {:>6} {:>17} {:>23}  {:<14} {:>10}",
            "species",
            "count",
            "mean_body_mass_g",
            "mean_flipper_length_mm",
            "workbench",
            "generation"
        ),
    );
    for r in &runs {
        say(
            out,
            format!(
                "{:<10} {:>6} {:>17.2} {:>23.2}  {:<14} {:>10}",
                r.species,
                r.count,
                r.mean_body_mass_g,
                r.mean_flipper_length_mm,
                r.workbench_id,
                r.generation
            ),
        );
    }
    say(out, String::new());
    let (heavy_runs, mass_by_species) = query_step(&facade, out)?;
    say(out, String::new());
    say(
        out,
        format!("{published} artifacts published in this run (0 = re-run with identical results)"),
    );
    Ok(DemoReport {
        runs,
        published,
        heavy_runs,
        mass_by_species,
    })
}

/// Workbench ids found by the search, and `(species, average)` from the aggregate.
type QueryStep = (Vec<String>, Vec<(String, f64)>);

/// The query step: a root-wide search and an aggregate over the summaries' index fields.
fn query_step(facade: &Workbench, out: &mut dyn Write) -> Result<QueryStep> {
    let bad = |what: &str, result: &Value| {
        Error::InvalidArgument(format!("demo query step: {what}: {result}"))
    };
    let search = json!({
        "predicates": [{"field": "mean_body_mass_g", "op": "gt", "value": 4000}],
        "fields": ["species", "mean_body_mass_g"],
    });
    let found = facade.call("workbench_search", &search);
    let matches = found
        .get("matches")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("search failed", &found))?;
    let _ = writeln!(out, "workbench_search {search}");
    let mut heavy = Vec::new();
    for m in matches {
        let id = m
            .get("workbench_id")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("match without workbench_id", &found))?;
        let _ = writeln!(
            out,
            "  -> {}  {}",
            m.get("path").and_then(Value::as_str).unwrap_or_default(),
            m.get("values").cloned().unwrap_or(Value::Null)
        );
        heavy.push(id.to_string());
    }
    let aggregate = json!({
        "measures": [{"name": "avg_mean_body_mass_g", "op": "avg", "field": "mean_body_mass_g"}],
        "group_by": ["species"],
        "predicates": [{"field": "mean_body_mass_g", "op": "exists"}],
    });
    let grouped = facade.call("workbench_aggregate", &aggregate);
    let groups = grouped
        .get("groups")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("aggregate failed", &grouped))?;
    let _ = writeln!(out, "workbench_aggregate {aggregate}");
    let mut by_species = Vec::new();
    for g in groups {
        let species = g
            .pointer("/key/species")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("group without species", &grouped))?;
        let avg = g
            .pointer("/values/avg_mean_body_mass_g")
            .and_then(Value::as_f64)
            .ok_or_else(|| bad("group without an average", &grouped))?;
        let _ = writeln!(out, "  -> {species:<10} {avg:>10.2}");
        by_species.push((species.to_string(), avg));
    }
    Ok((heavy, by_species))
}

/// Publishes `bytes` at `path` unless the artifact already holds exactly these bytes (same
/// SHA-256), content type and index fields: creates when absent, replaces under a generation
/// CAS when different. With `index_json` the body's top-level JSON scalars are published as
/// index fields. Returns true when something was published.
fn put_if_changed(
    client: &Client,
    workbench_id: &str,
    path: &str,
    bytes: &[u8],
    content_type: &str,
    index_json: bool,
) -> Result<bool> {
    let digest = objstore::sha256_uri(bytes);
    let fields = if index_json {
        crate::index_fields::json_object_fields(bytes)?
    } else {
        Default::default()
    };
    let condition = match client.stat(workbench_id, path) {
        Ok(entry)
            if entry.body_digest_uri == digest
                && entry.content_type == content_type
                && meta::index::projection::decode_projection(&entry.index_projection)?
                    == fields =>
        {
            return Ok(false)
        }
        Ok(entry) => WriteCondition::Replace {
            expected_generation: Some(entry.generation),
        },
        Err(Error::NotFound { .. }) => WriteCondition::Create,
        Err(e) => return Err(e),
    };
    let options = PutOptions {
        content_type: content_type.to_string(),
        condition,
        producer: "nokv demo".into(),
        manifest_id: None,
        index_fields: fields,
        index_json: false,
    };
    client.put(workbench_id, path, bytes, &options)?;
    Ok(true)
}

fn summary_from(run_id: &str, result: &Value) -> Result<RunSummary> {
    let bad = |why: &str| Error::InvalidArgument(format!("summary of {run_id}: {why}: {result}"));
    if result.get("status").and_then(Value::as_str) != Some("success") {
        return Err(bad("read failed"));
    }
    if result.get("record_type").and_then(Value::as_str) != Some("json_object") {
        return Err(bad("not a json_object"));
    }
    let value = result
        .get("items")
        .and_then(|i| i.get(0))
        .and_then(|i| i.get("value"))
        .ok_or_else(|| bad("no record"))?;
    Ok(RunSummary {
        workbench_id: run_id.to_string(),
        species: value
            .get("species")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("species"))?
            .to_string(),
        count: value
            .get("count")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("count"))?,
        mean_body_mass_g: value
            .get("mean_body_mass_g")
            .and_then(Value::as_f64)
            .ok_or_else(|| bad("mean_body_mass_g"))?,
        mean_flipper_length_mm: value
            .get("mean_flipper_length_mm")
            .and_then(Value::as_f64)
            .ok_or_else(|| bad("mean_flipper_length_mm"))?,
        generation: result
            .get("generation")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("generation"))?,
    })
}

fn digest_of(files: &[materialize::MaterializedFile], path: &str) -> String {
    files
        .iter()
        .find(|f| f.path == path)
        .map(|f| f.digest_uri.clone())
        .unwrap_or_default()
}

fn mkdir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|source| Error::LocalIo {
        op: "create directory",
        path: path.to_path_buf(),
        source,
    })
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(|source| Error::LocalIo {
        op: "write",
        path: path.to_path_buf(),
        source,
    })
}
