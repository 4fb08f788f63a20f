//! `nokv demo` — the reference research workflow of docs/design.md on real data.
//!
//! 1. workbench `penguins` receives `input/penguins.csv` (Palmer penguins, 344 rows, CC0) and
//!    `scripts/summarize.sh` (POSIX `sh` + `awk`);
//! 2. for each species (Adelie, Chinstrap, Gentoo) a run workbench `run-<species>` gets the input
//!    and the script copied in through the SDK;
//! 3. each run is materialized into a fresh temporary sandbox (under `<store>/demo-sandboxes`,
//!    where leftovers of a killed demo are removed at the next start), digests are verified right
//!    before execution, the script runs there, and the declared outputs are collected back:
//!    `outputs/summary.json`, `logs/run.log`, `metadata/params.json`;
//! 4. the three summaries are read back through the Workbench facade (`workbench_read`, structured)
//!    and printed as a comparison table; the sandboxes are deleted, the store keeps everything;
//! 5. lifecycle step (docs/metadata-format.md "Commit Closure", "Snapshot Lifecycle", "Restore Closure"):
//!    `penguins` is committed (manifest `{"kind":"input",…}`, content digest =
//!    [`Client::tree_content_digest`]) and tagged `penguins-v1`; each run workbench is committed
//!    with the input commit as its parent (manifest `{"kind":"run","species":…,"input_commit":…}`);
//!    `run-gentoo` gets the named snapshot [`SNAPSHOT_NAME`], which is restored into
//!    [`RESTORED_WORKBENCH`] (shared revisions, no object byte copied; the object count before and
//!    after is printed) and the restored `outputs/summary.json` is read back and compared byte for
//!    byte with the source; `workbench_find` then lists the committed runs as a short table;
//! 6. query step: each `outputs/summary.json` is published with `index_json`, so its top-level
//!    scalars (`species`, `count`, `mean_body_mass_g`, `mean_flipper_length_mm`) are typed index
//!    fields; the demo prints a root-wide `workbench_search` for `mean_body_mass_g > 4000` (the
//!    Gentoo run and its restored copy) and a `workbench_aggregate` of the average body mass
//!    grouped by species.
//!
//! Re-running the demo on the same store is safe and honest about what it did:
//!
//! * a file whose bytes, content type and index fields are unchanged is not republished (its
//!   generation stays), a changed one is replaced under a generation CAS;
//! * a commit of unchanged content is an exact retry of the durable BuildCommit request and
//!   replays (`idempotent_replay`), so commit ids are stable; changed content moves the head with
//!   `replace`;
//! * the tag `penguins-v1` is created once and never moved (a re-run reports where it points);
//! * the snapshot is reused by name while it is alive and covers the current commit, else a new
//!   one is minted under the same name (latest mint wins);
//! * the restore of an existing destination is never an error: an identical request replays the
//!   completed operation; any other request (e.g. a newer snapshot) is skipped with a line saying
//!   which restore produced the destination.
//!
//! The demo's outputs are deterministic, so a second run publishes nothing and creates nothing.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use meta::ops::snapshot::SnapshotStatus;
use meta::ops::tag::TagCondition;
use serde_json::{json, Value};

use nokv::client::{Client, PutOptions, WriteCondition};
use nokv::commit::{CommitReceipt, CommitRequest};
use nokv::error::{Error, Result};
use nokv::materialize;
use nokv::restore::{RestoreFailure, RestoreFrom, RestoreRequest};
use nokv::snapshot::{name_selector, SnapshotOptions, DAY_MS};
use nokv::workbench::Workbench;

/// The real input: Palmer penguins (see `examples/penguins/README.md` for origin and licence).
pub const PENGUINS_CSV: &[u8] = include_bytes!("../../../examples/penguins/penguins.csv");
/// The analysis script: `sh summarize.sh SPECIES INPUT_CSV OUTPUT_DIR`.
pub const SUMMARIZE_SH: &[u8] = include_bytes!("../../../examples/penguins/summarize.sh");
/// The species analysed, one run workbench each.
pub const SPECIES: [&str; 3] = ["Adelie", "Chinstrap", "Gentoo"];
/// Id of the input workbench.
pub const INPUT_WORKBENCH: &str = "penguins";
/// Tag set on the input workbench's commit.
pub const INPUT_TAG: &str = "penguins-v1";
/// The run that is snapshotted and restored.
pub const SNAPSHOT_SOURCE: &str = "run-gentoo";
/// Name (alias) of the demo's snapshot of [`SNAPSHOT_SOURCE`].
pub const SNAPSHOT_NAME: &str = "gentoo-baseline";
/// Lease of a snapshot minted by the demo: 7 days (the contract's default), in milliseconds.
pub const SNAPSHOT_TTL_MS: u64 = 7 * DAY_MS;
/// Destination workbench of the demo's restore.
pub const RESTORED_WORKBENCH: &str = "run-gentoo-restored";

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
    /// What the lifecycle step did: commits, tag, snapshot, restore, find.
    pub lifecycle: LifecycleReport,
    /// Every change this run made, in order (what the front doors record in the store's audit
    /// trail, one record each, docs/server.md "Audit trail"); empty on an unchanged re-run.
    pub changes: Vec<DemoChange>,
}

/// One change the demo made: a workbench created, a file published, a commit, the tag, the
/// snapshot or the restore.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DemoChange {
    /// What it was, named as the audit trail names it: `create`, `put`, `commit`, `tag set`,
    /// `snapshot create`, `restore`.
    pub tool: String,
    /// The workbench changed (a restore's destination).
    pub workbench: String,
    /// The workbench-relative path published, when one was (a commit's
    /// `metadata/run_manifest.json`).
    pub path: Option<String>,
    /// The path's generation before (a replaced file).
    pub generation_before: Option<u64>,
    /// The path's generation after.
    pub generation_after: Option<u64>,
}

impl DemoChange {
    fn of(tool: &str, workbench: &str) -> Self {
        DemoChange {
            tool: tool.to_string(),
            workbench: workbench.to_string(),
            path: None,
            generation_before: None,
            generation_after: None,
        }
    }

    /// The changes listed in a `demo` command's answer (`"changes"`, see
    /// [`crate::request::CommandRequest::run`]); none when it lists none.
    pub fn from_answer(answer: &Value) -> Vec<DemoChange> {
        answer
            .get("changes")
            .and_then(|c| serde_json::from_value(c.clone()).ok())
            .unwrap_or_default()
    }

    /// The audit record of this change made by `actor` (outcome `success`).
    pub fn audit_entry(&self, actor: &str) -> nokv::access::AuditEntry {
        nokv::access::AuditEntry {
            actor: actor.to_string(),
            tool: format!("demo: {}", self.tool),
            workbench: Some(self.workbench.clone()),
            path: self.path.clone(),
            generation_before: self.generation_before,
            generation_after: self.generation_after,
            request_id: None,
            outcome: "success".into(),
            status: None,
            replayed: false,
        }
    }
}

/// How one commit of the demo ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    /// A new commit was built and became the workbench head.
    Created,
    /// The same request had already committed: the original result was replayed
    /// (`idempotent_replay: true`), nothing was written.
    Replayed,
    /// The content changed since the last demo run: a new commit replaced the head (`replace`).
    Replaced,
}

impl CommitOutcome {
    fn label(self) -> &'static str {
        match self {
            CommitOutcome::Created => "new",
            CommitOutcome::Replayed => "idempotent replay",
            CommitOutcome::Replaced => "new, replaced the previous head",
        }
    }
}

/// One workbench commit made (or replayed) by the demo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoCommit {
    /// Committed workbench.
    pub workbench_id: String,
    /// Commit id = commit identity (64 lowercase hex).
    pub commit_id: String,
    /// Parent commit ids (64 hex each).
    pub parents: Vec<String>,
    /// Generation of `metadata/run_manifest.json` published by the commit.
    pub manifest_generation: u64,
    /// Created, replayed or replaced.
    pub outcome: CommitOutcome,
}

/// How the tag step ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagOutcome {
    /// The tag did not exist and was created (CAS: must be absent).
    Created,
    /// The tag already pointed at the input commit; nothing was written.
    Unchanged,
    /// The tag points at another (older) commit; the demo never moves it.
    KeptElsewhere {
        /// The commit the tag points at (64 hex).
        commit_id: String,
    },
}

/// How the restore step ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreOutcome {
    /// The restore ran now and published the destination.
    Restored {
        /// Object count of the store before the restore.
        objects_before: usize,
        /// Object count after (the restore writes only its `restore_manifest.json` block).
        objects_after: usize,
    },
    /// The identical request had completed before: the original result was replayed.
    Replayed,
    /// The destination already exists from another restore request (e.g. of an older snapshot);
    /// it was left as it is.
    Skipped {
        /// Why, in words (names the restore that produced the destination when known).
        reason: String,
    },
}

/// What the lifecycle step of one demo run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleReport {
    /// The commit of the input workbench `penguins`.
    pub input_commit: DemoCommit,
    /// The run commits, in [`SPECIES`] order; each names the input commit as its parent.
    pub run_commits: Vec<DemoCommit>,
    /// What happened to the tag [`INPUT_TAG`].
    pub tag: TagOutcome,
    /// Numeric id of the snapshot of [`SNAPSHOT_SOURCE`] used for the restore.
    pub snapshot_id: u64,
    /// Read version the snapshot freezes.
    pub snapshot_read_version: u64,
    /// True when an alive snapshot named [`SNAPSHOT_NAME`] was reused (nothing minted).
    pub snapshot_reused: bool,
    /// What the restore into [`RESTORED_WORKBENCH`] did.
    pub restore: RestoreOutcome,
    /// Member count (restored paths, without `restore_manifest.json`) when known.
    pub restored_paths: Option<u64>,
    /// Bytes of `outputs/summary.json` read back from [`RESTORED_WORKBENCH`] (empty only when the
    /// restore was skipped and the existing destination has no readable summary).
    pub restored_summary: Vec<u8>,
    /// Bytes of `outputs/summary.json` of [`SNAPSHOT_SOURCE`] (live state).
    pub source_summary: Vec<u8>,
    /// `(workbench_id, species, commit_identity)` of the committed runs `workbench_find`
    /// returned, in workbench-id order.
    pub found_runs: Vec<(String, String, String)>,
}

impl LifecycleReport {
    /// Commits built by this run (created or replaced).
    pub fn commits_created(&self) -> usize {
        self.all_commits()
            .filter(|c| c.outcome != CommitOutcome::Replayed)
            .count()
    }

    /// Commits replayed by this run (unchanged content).
    pub fn commits_replayed(&self) -> usize {
        self.all_commits()
            .filter(|c| c.outcome == CommitOutcome::Replayed)
            .count()
    }

    fn all_commits(&self) -> impl Iterator<Item = &DemoCommit> {
        std::iter::once(&self.input_commit).chain(self.run_commits.iter())
    }
}

/// Name prefix of the demo's run sandboxes.
const SANDBOX_PREFIX: &str = "sandbox-";

/// The directory the demo's run sandboxes live in: `<store>/demo-sandboxes`. The store is held by
/// one process at a time, so sandboxes found there at start are leftovers of a demo that was
/// killed mid-run (no destructor ran) and are removed first.
///
/// Errors: [`Error::LocalIo`] when the directory cannot be created or a leftover removed.
fn sandbox_parent(client: &Client) -> Result<std::path::PathBuf> {
    let dir = client.dir().join("demo-sandboxes");
    let io = |op: &'static str, path: &std::path::Path| {
        let path = path.to_path_buf();
        move |source| Error::LocalIo { op, path, source }
    };
    std::fs::create_dir_all(&dir).map_err(io("create sandbox directory", &dir))?;
    for entry in std::fs::read_dir(&dir).map_err(io("list sandboxes", &dir))? {
        let entry = entry.map_err(io("list sandboxes", &dir))?;
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(SANDBOX_PREFIX)
        {
            let path = entry.path();
            std::fs::remove_dir_all(&path).map_err(io("remove leftover sandbox", &path))?;
        }
    }
    Ok(dir)
}

/// Runs the workflow against `client`, printing progress and the table to `out`.
///
/// Errors: any SDK error; [`Error::InvalidArgument`] when the script fails (its stderr is
/// included) or a summary is not the expected JSON object.
pub fn run_demo(client: &Client, out: &mut dyn Write) -> Result<DemoReport> {
    let mut published = 0usize;
    let mut changes = Vec::new();
    let say = |out: &mut dyn Write, line: String| {
        let _ = writeln!(out, "{line}");
    };
    say(out, format!("store: {}", client.dir().display()));
    let sandbox_parent = sandbox_parent(client)?;
    create(client, INPUT_WORKBENCH, &mut changes)?;
    published += usize::from(put_if_changed(
        client,
        INPUT_WORKBENCH,
        "input/penguins.csv",
        PENGUINS_CSV,
        "text/csv; charset=utf-8",
        false,
        &mut changes,
    )?);
    published += usize::from(put_if_changed(
        client,
        INPUT_WORKBENCH,
        "scripts/summarize.sh",
        SUMMARIZE_SH,
        "text/x-shellscript; charset=utf-8",
        false,
        &mut changes,
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
        create(client, &run_id, &mut changes)?;
        // Copy input and script in through the SDK (read verified, publish).
        for (path, ct) in [
            ("input/penguins.csv", "text/csv; charset=utf-8"),
            ("scripts/summarize.sh", "text/x-shellscript; charset=utf-8"),
        ] {
            let bytes = client.read_all(INPUT_WORKBENCH, path)?;
            published += usize::from(put_if_changed(
                client,
                &run_id,
                path,
                &bytes,
                ct,
                false,
                &mut changes,
            )?);
        }
        let sandbox = tempfile::Builder::new()
            .prefix(SANDBOX_PREFIX)
            .tempdir_in(&sandbox_parent)
            .map_err(|source| Error::LocalIo {
                op: "create sandbox",
                path: sandbox_parent.clone(),
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
                client,
                &run_id,
                path,
                &bytes,
                ct,
                index_json,
                &mut changes,
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
    let lifecycle = lifecycle_step(client, &facade, &runs, out, &mut changes)?;
    say(out, String::new());
    let (heavy_runs, mass_by_species) = query_step(&facade, out)?;
    say(out, String::new());
    say(
        out,
        format!("{published} artifacts published in this run (0 = re-run with identical results)"),
    );
    say(
        out,
        format!(
            "{} commits created, {} replayed (idempotent_replay) in this run",
            lifecycle.commits_created(),
            lifecycle.commits_replayed()
        ),
    );
    Ok(DemoReport {
        runs,
        published,
        heavy_runs,
        mass_by_species,
        lifecycle,
        changes,
    })
}

/// Creates `workbench_id` when it does not exist, noting the change.
fn create(client: &Client, workbench_id: &str, changes: &mut Vec<DemoChange>) -> Result<()> {
    if client.create_workbench(workbench_id)?.created {
        changes.push(DemoChange::of("create", workbench_id));
    }
    Ok(())
}

/// The first 12 hex digits of a commit id, for the printed lines.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The lifecycle step: commits with lineage, the tag, the snapshot, the restore, the read-back of
/// the restored summary and `workbench_find` over the committed runs.
fn lifecycle_step(
    client: &Client,
    facade: &Workbench,
    runs: &[RunSummary],
    out: &mut dyn Write,
    changes: &mut Vec<DemoChange>,
) -> Result<LifecycleReport> {
    let committed = |changes: &mut Vec<DemoChange>, c: &DemoCommit| {
        if c.outcome != CommitOutcome::Replayed {
            changes.push(DemoChange {
                path: Some(meta::ops::commit::RUN_MANIFEST_PATH.to_string()),
                generation_after: Some(c.manifest_generation),
                ..DemoChange::of("commit", &c.workbench_id)
            });
        }
    };
    let input_manifest = json!({
        "kind": "input",
        "dataset": "palmer-penguins",
        "files": ["input/penguins.csv", "scripts/summarize.sh"],
    });
    let input_commit = commit_workbench(client, INPUT_WORKBENCH, input_manifest, Vec::new())?;
    committed(changes, &input_commit);
    let tag = ensure_tag(client, &input_commit.commit_id)?;
    if tag == TagOutcome::Created {
        changes.push(DemoChange::of("tag set", INPUT_WORKBENCH));
    }
    let tag_line = match &tag {
        TagOutcome::Created => format!("tag {INPUT_TAG} created"),
        TagOutcome::Unchanged => format!("tag {INPUT_TAG} unchanged"),
        TagOutcome::KeptElsewhere { commit_id } => {
            format!("tag {INPUT_TAG} kept at {} (not moved)", short(commit_id))
        }
    };
    let _ = writeln!(
        out,
        "commit {:<20} {}  ({}; {tag_line})",
        INPUT_WORKBENCH,
        short(&input_commit.commit_id),
        input_commit.outcome.label()
    );
    let mut run_commits = Vec::new();
    for run in runs {
        let manifest = json!({
            "kind": "run",
            "species": run.species,
            "input_commit": input_commit.commit_id,
            "command": ["sh", "scripts/summarize.sh", run.species, "input/penguins.csv", "outputs"],
            "outputs": ["outputs/summary.json", "logs/run.log", "metadata/params.json"],
        });
        let commit = commit_workbench(
            client,
            &run.workbench_id,
            manifest,
            vec![input_commit.commit_id.clone()],
        )?;
        committed(changes, &commit);
        let _ = writeln!(
            out,
            "commit {:<20} {}  parent {}  ({})",
            run.workbench_id,
            short(&commit.commit_id),
            short(&input_commit.commit_id),
            commit.outcome.label()
        );
        run_commits.push(commit);
    }

    let (snapshot_id, snapshot_read_version, snapshot_reused) = ensure_snapshot(client)?;
    if !snapshot_reused {
        changes.push(DemoChange::of("snapshot create", SNAPSHOT_SOURCE));
    }
    let _ = writeln!(
        out,
        "snapshot {SNAPSHOT_SOURCE} \"{SNAPSHOT_NAME}\": id {snapshot_id} at read version \
         {snapshot_read_version}, alive, {} days lease ({})",
        SNAPSHOT_TTL_MS / DAY_MS,
        if snapshot_reused { "reused" } else { "minted" }
    );

    let (restore, restored_paths) = restore_step(client, snapshot_id)?;
    if matches!(restore, RestoreOutcome::Restored { .. }) {
        changes.push(DemoChange::of("restore", RESTORED_WORKBENCH));
    }
    let restore_line = match &restore {
        RestoreOutcome::Restored {
            objects_before,
            objects_after,
        } => format!(
            "restored {} paths; objects in store {objects_before} -> {objects_after}{}",
            restored_paths.unwrap_or(0),
            if *objects_after == objects_before + 1 {
                " (+1 = restore_manifest.json; no body copied)"
            } else {
                ""
            }
        ),
        RestoreOutcome::Replayed => {
            "already restored: exact replay of the completed restore".to_string()
        }
        RestoreOutcome::Skipped { reason } => format!("skipped: {reason}"),
    };
    let _ = writeln!(
        out,
        "restore {SNAPSHOT_SOURCE}@{SNAPSHOT_NAME} -> {RESTORED_WORKBENCH}: {restore_line}"
    );

    // Read the restored summary back through the facade (structured) and compare the bytes. A
    // skipped restore leaves a destination the demo did not make now: a missing or unreadable
    // summary there is reported, not fatal.
    let source_summary = client.read_all(SNAPSHOT_SOURCE, "outputs/summary.json")?;
    let restored_summary = match read_restored_summary(client, facade) {
        Ok((restored, bytes)) => {
            let _ = writeln!(
                out,
                "read {RESTORED_WORKBENCH}/outputs/summary.json: {} mean_body_mass_g {:.2}, {} \
                 bytes, {} {SNAPSHOT_SOURCE}'s",
                restored.species,
                restored.mean_body_mass_g,
                bytes.len(),
                if bytes == source_summary {
                    "identical to"
                } else {
                    "DIFFERENT from"
                }
            );
            bytes
        }
        Err(e) if matches!(restore, RestoreOutcome::Skipped { .. }) => {
            let _ = writeln!(
                out,
                "read {RESTORED_WORKBENCH}/outputs/summary.json: not readable ({e})"
            );
            Vec::new()
        }
        Err(e) => return Err(e),
    };

    let found_runs = find_step(facade, out)?;
    Ok(LifecycleReport {
        input_commit,
        run_commits,
        tag,
        snapshot_id,
        snapshot_read_version,
        snapshot_reused,
        restore,
        restored_paths,
        restored_summary,
        source_summary,
        found_runs,
    })
}

/// The restored summary, structured (`workbench_read`) and as bytes.
fn read_restored_summary(client: &Client, facade: &Workbench) -> Result<(RunSummary, Vec<u8>)> {
    let read = facade.call(
        "workbench_read",
        &json!({"id": RESTORED_WORKBENCH, "section": "outputs", "path": "summary.json"}),
    );
    let restored = summary_from(RESTORED_WORKBENCH, &read)?;
    let bytes = client.read_all(RESTORED_WORKBENCH, "outputs/summary.json")?;
    Ok((restored, bytes))
}

/// Commits `workbench_id` with `manifest` and the live tree's content digest. The first attempt
/// is the plain request (`replace: false`): unchanged content replays it. A head of other
/// content (`WorkbenchCommitConflict`), or an earlier identical request made with `replace`
/// (`OperationInputMismatch`), is retried once with `replace: true`.
fn commit_workbench(
    client: &Client,
    workbench_id: &str,
    manifest: Value,
    parents: Vec<String>,
) -> Result<DemoCommit> {
    let mut req = CommitRequest {
        workbench_id: workbench_id.to_string(),
        manifest,
        content_digest_uri: client.tree_content_digest(workbench_id)?,
        replace: false,
        parents,
    };
    let receipt: CommitReceipt = match client.commit(&req) {
        Ok(r) => r,
        Err(Error::Meta(
            meta::Error::WorkbenchCommitConflict { .. }
            | meta::Error::OperationInputMismatch { .. },
        )) => {
            req.replace = true;
            client.commit(&req)?
        }
        Err(e) => return Err(e),
    };
    let outcome = if receipt.idempotent_replay {
        CommitOutcome::Replayed
    } else if req.replace {
        CommitOutcome::Replaced
    } else {
        CommitOutcome::Created
    };
    Ok(DemoCommit {
        workbench_id: workbench_id.to_string(),
        commit_id: receipt.commit_identity,
        parents: receipt.parents,
        manifest_generation: receipt.generation,
        outcome,
    })
}

/// Creates [`INPUT_TAG`] on the input commit when absent (CAS: must be absent); never moves it.
fn ensure_tag(client: &Client, commit_id: &str) -> Result<TagOutcome> {
    match client.get_tag(INPUT_WORKBENCH, INPUT_TAG)? {
        Some(t) if t.commit_id.to_hex() == commit_id => Ok(TagOutcome::Unchanged),
        Some(t) => Ok(TagOutcome::KeptElsewhere {
            commit_id: t.commit_id.to_hex(),
        }),
        None => {
            client.set_tag(INPUT_WORKBENCH, INPUT_TAG, commit_id, TagCondition::Absent)?;
            Ok(TagOutcome::Created)
        }
    }
}

/// Reuses the snapshot named [`SNAPSHOT_NAME`] when it is alive and covers the source's current
/// commit head; otherwise mints a new one under that name. Returns `(id, read version, reused)`.
fn ensure_snapshot(client: &Client) -> Result<(u64, u64, bool)> {
    let head_version = client
        .commit_head(SNAPSHOT_SOURCE)?
        .map_or(0, |c| c.created_version);
    match client.snapshot(SNAPSHOT_SOURCE, &name_selector(SNAPSHOT_NAME)?) {
        Ok(info)
            if info.status == SnapshotStatus::Alive
                && info.alias_current
                && info.record.read_version >= head_version =>
        {
            return Ok((info.snapshot_id.get(), info.record.read_version, true));
        }
        Ok(_) | Err(Error::Meta(meta::Error::SnapshotNotFound)) => {}
        Err(e) => return Err(e),
    }
    let info = client.create_snapshot(
        SNAPSHOT_SOURCE,
        &SnapshotOptions {
            name: Some(SNAPSHOT_NAME.to_string()),
            ttl_ms: SNAPSHOT_TTL_MS,
            annotation: br#"{"reason":"nokv demo: the Gentoo run before any re-run"}"#.to_vec(),
            require_commit: true,
        },
    )?;
    Ok((info.snapshot_id.get(), info.record.read_version, false))
}

/// Restores snapshot `snapshot_id` of [`SNAPSHOT_SOURCE`] into [`RESTORED_WORKBENCH`]; an
/// existing destination is replayed (identical request) or skipped, never an error.
fn restore_step(client: &Client, snapshot_id: u64) -> Result<(RestoreOutcome, Option<u64>)> {
    let req = RestoreRequest {
        source_workbench_id: SNAPSHOT_SOURCE.to_string(),
        destination_workbench_id: RESTORED_WORKBENCH.to_string(),
        from: RestoreFrom::Snapshot(meta::ops::snapshot::SnapshotSelector::Id(
            meta::ids::SnapshotId(snapshot_id),
        )),
    };
    let objects_before = count_objects(client)?;
    match client.restore(&req) {
        Ok(r) if r.idempotent_replay => Ok((RestoreOutcome::Replayed, Some(r.member_count))),
        Ok(r) => {
            let objects_after = count_objects(client)?;
            Ok((
                RestoreOutcome::Restored {
                    objects_before,
                    objects_after,
                },
                Some(r.member_count),
            ))
        }
        Err(RestoreFailure::Operation(
            meta::ops::restore::RestoreError::DestinationExists { .. }
            | meta::ops::restore::RestoreError::RequestMismatch,
        )) => {
            let earlier = client
                .restore_operation(RESTORED_WORKBENCH)
                .map_err(restore_error)?;
            let reason = match earlier {
                Some(op) => {
                    let from = match op.source {
                        meta::codec::RestoreSource::Snapshot(id) => {
                            format!("snapshot {}", id.get())
                        }
                        meta::codec::RestoreSource::Commit(id) => {
                            format!("commit {}", short(&id.to_hex()))
                        }
                    };
                    format!(
                        "{RESTORED_WORKBENCH} already exists (restored earlier from {from} of \
                         {}); left as it is",
                        op.source_workbench_id
                    )
                }
                None => format!(
                    "{RESTORED_WORKBENCH} already exists and was not made by a restore; left as \
                     it is"
                ),
            };
            Ok((RestoreOutcome::Skipped { reason }, None))
        }
        Err(e) => Err(restore_error(e)),
    }
}

/// Keeps SDK errors as they are and reports operation errors as a failed operation.
fn restore_error(e: RestoreFailure) -> Error {
    match e {
        RestoreFailure::Sdk(inner) => inner,
        RestoreFailure::Operation(meta::ops::restore::RestoreError::Meta(m)) => Error::Meta(m),
        other => Error::OperationFailed {
            code: "InvalidState".into(),
            message: other.to_string(),
        },
    }
}

/// Number of objects in the store (diagnostics: shows that a restore copies no body).
fn count_objects(client: &Client) -> Result<usize> {
    Ok(client.objects().list("")?.len())
}

/// `workbench_find` over committed runs, printed as a table sorted by workbench id (the parent
/// column is read from the Commit record, where lineage is recorded and consumer-counted).
fn find_step(facade: &Workbench, out: &mut dyn Write) -> Result<Vec<(String, String, String)>> {
    let input = json!({
        "committed": true,
        "manifest_pattern": "\"kind\":\"run\"",
        "include_manifest": true,
    });
    let found = facade.call("workbench_find", &input);
    let matches = found
        .get("matches")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::InvalidArgument(format!("demo find step failed: {found}")))?;
    let _ = writeln!(out, "workbench_find {input}");
    let _ = writeln!(
        out,
        "  {:<14} {:<10} {:<12}  {:<12}  {:>10}  verified",
        "workbench", "species", "commit", "parent", "generation"
    );
    let mut matches: Vec<&Value> = matches.iter().collect();
    matches.sort_by_key(|m| m.get("workbench_id").and_then(Value::as_str).unwrap_or(""));
    let mut runs = Vec::new();
    for m in matches {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("-").to_string();
        let id = text(m.get("workbench_id"));
        // `manifest` is the run-manifest envelope; the run's own manifest is its `manifest`.
        let species = text(m.pointer("/manifest/manifest/species"));
        let commit = text(m.get("commit_identity"));
        // The parent as recorded (and consumer-counted) on the Commit row, not the manifest's.
        let parent = match facade.client().commit_info(&commit) {
            Ok(Some(info)) => info.parents.first().cloned().unwrap_or_else(|| "-".into()),
            Ok(None) | Err(_) => "-".into(),
        };
        let _ = writeln!(
            out,
            "  {:<14} {:<10} {:<12}  {:<12}  {:>10}  {}",
            id,
            species,
            short(&commit),
            short(&parent),
            m.get("manifest_generation")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            m.get("commit_identity_verified")
                .and_then(Value::as_bool)
                .unwrap_or(false)
        );
        runs.push((id, species, commit));
    }
    Ok(runs)
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
    changes: &mut Vec<DemoChange>,
) -> Result<bool> {
    let digest = objstore::sha256_uri(bytes);
    let fields = if index_json {
        nokv::index_fields::json_object_fields(bytes)?
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
        expected_digest_uri: None,
        request_id: None,
    };
    let generation_before = match options.condition {
        WriteCondition::Replace {
            expected_generation,
        } => expected_generation,
        _ => None,
    };
    let receipt = client.put(workbench_id, path, bytes, &options)?;
    changes.push(DemoChange {
        path: Some(path.to_string()),
        generation_before,
        generation_after: Some(receipt.generation),
        ..DemoChange::of("put", workbench_id)
    });
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
