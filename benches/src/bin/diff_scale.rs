//! `diff_scale` — does a diff of two commits that share all but a few revisions cost the changed
//! paths, not the tree? (docs/metadata-format.md, "Diff").
//!
//! Fills one embedded store with N small files in workbench `bench` (100 per directory), commits
//! it (commit A), replaces K files, commits again (commit B), then measures
//! [`nokv::Client::diff`] of A and B — the change-event strategy — and, for comparison, the merge
//! scan of the same two commits ([`meta::ops::diff::diff_merge_scan`], every member of both):
//! metadata rows read (point reads plus scanned rows, as the diff counts them), ChangeEvent rows
//! among them, changes found and the median wall time of `--runs` runs. Results go to stdout as
//! Markdown.
//!
//! ```text
//! cargo build --release -p nokv-benches --bin diff_scale
//! target/release/diff_scale [--files 100000] [--changed 10] [--runs 5] [--fill-threads 4]
//!                           [--work DIR]
//! ```

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nokv::commit::CommitRequest;
use nokv::diff::{DiffOptions, SideSpec};
use nokv::{Client, PutOptions};

const WORKBENCH: &str = "bench";

struct Args {
    files: u64,
    changed: u64,
    runs: usize,
    threads: usize,
    work: Option<PathBuf>,
}

fn usage() -> ! {
    eprintln!(
        "usage: diff_scale [--files N] [--changed K] [--runs R] [--fill-threads T] [--work DIR]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut args = Args {
        files: 100_000,
        changed: 10,
        runs: 5,
        threads: 4,
        work: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--files" => args.files = value().parse().unwrap_or_else(|_| usage()),
            "--changed" => args.changed = value().parse().unwrap_or_else(|_| usage()),
            "--runs" => args.runs = value().parse().unwrap_or_else(|_| usage()),
            "--fill-threads" => args.threads = value().parse().unwrap_or_else(|_| usage()),
            "--work" => args.work = Some(PathBuf::from(value())),
            _ => usage(),
        }
    }
    if args.files == 0 || args.changed == 0 || args.changed > args.files || args.runs == 0 {
        usage();
    }
    args
}

fn path(i: u64) -> String {
    format!("data/d{:04}/f{i:07}.txt", i / 100)
}

fn fill(client: &Client, n: u64, threads: usize) -> Result<Duration, String> {
    let started = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for _ in 0..threads.max(1) {
        let (client, next) = (client.clone(), next.clone());
        handles.push(std::thread::spawn(move || -> Result<(), String> {
            let opts = PutOptions::create("text/plain", "diff_scale");
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok(());
                }
                let body = format!("file {i} version 1\n");
                let mut attempts = 0u32;
                loop {
                    match client.put(WORKBENCH, &path(i), body.as_bytes(), &opts) {
                        Ok(_) => break,
                        Err(nokv::Error::Busy) if attempts < 1_000 => {
                            attempts += 1;
                            std::thread::sleep(Duration::from_millis(u64::from(attempts % 20)));
                        }
                        Err(e) => return Err(format!("put {}: {e}", path(i))),
                    }
                }
                if (i + 1) % 20_000 == 0 {
                    eprintln!("  filled ~{}", i + 1);
                }
            }
        }));
    }
    for h in handles {
        h.join().map_err(|_| "filler panicked".to_string())??;
    }
    Ok(started.elapsed())
}

fn commit(client: &Client, step: u64) -> Result<(String, Duration), String> {
    let started = Instant::now();
    let receipt = client
        .commit(&CommitRequest {
            workbench_id: WORKBENCH.into(),
            manifest: serde_json::json!({"step": step}),
            content_digest_uri: client
                .tree_content_digest(WORKBENCH)
                .map_err(|e| e.to_string())?,
            replace: step > 1,
            parents: Vec::new(),
        })
        .map_err(|e| format!("commit: {e}"))?;
    Ok((receipt.commit_identity, started.elapsed()))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args = parse_args();
    let tmp = tempfile::tempdir().expect("temporary directory");
    let store = args
        .work
        .clone()
        .unwrap_or_else(|| tmp.path().join("store"));
    let client = Client::open(&store).expect("open store");
    client
        .create_workbench(WORKBENCH)
        .expect("create workbench");
    eprintln!("filling {} files …", args.files);
    let filled = fill(&client, args.files, args.threads).unwrap_or_else(|e| panic!("{e}"));
    let (a, commit_a) = commit(&client, 1).unwrap_or_else(|e| panic!("{e}"));
    let stride = args.files / args.changed;
    let replace = PutOptions {
        condition: nokv::WriteCondition::Replace {
            expected_generation: None,
        },
        ..PutOptions::create("text/plain", "diff_scale")
    };
    for k in 0..args.changed {
        let i = k * stride;
        client
            .put(
                WORKBENCH,
                &path(i),
                format!("file {i} version 2\n").as_bytes(),
                &replace,
            )
            .expect("replace");
    }
    let (b, commit_b) = commit(&client, 2).unwrap_or_else(|e| panic!("{e}"));

    let sa = SideSpec::parse(&a).expect("side a");
    let sb = SideSpec::parse(&b).expect("side b");
    let mut times = Vec::new();
    let mut report = None;
    for _ in 0..args.runs {
        let started = Instant::now();
        let r = client
            .diff(&sa, &sb, &DiffOptions::default())
            .expect("diff");
        times.push(started.elapsed());
        report = Some(r);
    }
    let report = report.expect("at least one run");

    // The merge scan of the same two commits, paged to the end.
    let ca =
        meta::ops::diff::commit_side(client.meta(), &nokv::commit::parse_commit_id(&a).unwrap())
            .expect("commit a");
    let cb =
        meta::ops::diff::commit_side(client.meta(), &nokv::commit::parse_commit_id(&b).unwrap())
            .expect("commit b");
    let mut merge_times = Vec::new();
    let mut merge_rows = 0;
    let mut merge_changes = 0;
    for _ in 0..args.runs.min(3) {
        let started = Instant::now();
        let (mut rows, mut changes, mut after) = (0u64, 0usize, None);
        loop {
            let page =
                meta::ops::diff::diff_merge_scan(client.meta(), &ca, &cb, after.as_ref(), 10_000)
                    .expect("merge scan");
            rows += page.rows_read;
            changes += page.changes.len();
            after = page.changes.last().map(|c| c.path.clone());
            if !page.more {
                break;
            }
        }
        merge_times.push(started.elapsed());
        merge_rows = rows;
        merge_changes = changes;
    }

    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "## diff_scale: two commits of {} files sharing all but {} revisions",
        args.files, args.changed
    );
    println!();
    println!(
        "machine: {cpus} CPU(s); fill {:.1} s ({:.0} puts/s); commit A {:.1} s; commit B {:.1} s",
        filled.as_secs_f64(),
        args.files as f64 / filled.as_secs_f64(),
        commit_a.as_secs_f64(),
        commit_b.as_secs_f64()
    );
    println!();
    println!("| strategy | changes | rows read | ChangeEvent rows | median time |");
    println!("| --- | --- | --- | --- | --- |");
    println!(
        "| {} (`Client::diff`) | {} | {} | {} | {:.3} ms |",
        nokv::diff::strategy_name(report.strategy),
        report.changes.len(),
        report.rows_read,
        report.events_read,
        median(times).as_secs_f64() * 1e3
    );
    println!(
        "| merge_scan (`diff_merge_scan`) | {} | {} | 0 | {:.3} ms |",
        merge_changes,
        merge_rows,
        median(merge_times).as_secs_f64() * 1e3
    );
}
