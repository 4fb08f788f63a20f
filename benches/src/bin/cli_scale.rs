//! `cli_scale` — does one CLI call's cost stay flat as a store's history grows?
//!
//! Fills one embedded store per size N with N small publications through the Rust SDK
//! ([`nokv::Client::put`], one workbench `bench`, 100 files per directory
//! `outputs/dNNNN/fNNNNNN.txt`, ~100-byte text bodies), then times the **release CLI as whole
//! processes** on every store, interleaved round by round so machine noise hits all sizes alike:
//!
//! * `nokv workbench stat` of one file,
//! * `nokv workbench list` of one directory with `limit` 10,
//! * `nokv workbench put_file` of a new small file (create-only),
//!
//! each under `/usr/bin/time -f %M` (peak RSS in KiB). It prints the median wall time of each
//! call per size, the ratio of the largest size to the smallest, the peak RSS of `stat`, and a
//! **metadata census** per store: for every holt tree (and every History source family) the
//! number of rows and the logical bytes (key + value) per publication, plus the bytes of the
//! metadata directory on disk (checkpoint image and WAL) per publication.
//!
//! ```text
//! cargo build --release -p nokv-cli -p nokv-benches
//! target/release/cli_scale [--sizes 1000,50000] [--runs 5] [--work DIR] [--nokv PATH]
//!                          [--fill-threads 4] [--keep]
//! target/release/cli_scale --census STORE_DIR        # census of an existing store only
//! ```
//!
//! A store whose directory already holds `N` publications (marker file `filled` written after
//! a complete fill) is reused, so a re-run with `--work` on the same directory only times; a
//! store without the marker (an interrupted fill) is topped up to `N`; the
//! stores are deleted at the end unless `--keep` is given. Results go to stdout as Markdown.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nokv::{Client, PutOptions};

/// Files per directory under `outputs/`.
const PER_DIR: u64 = 100;
/// The workbench every publication goes to.
const WORKBENCH: &str = "bench";

struct Args {
    sizes: Vec<u64>,
    runs: usize,
    work: PathBuf,
    work_is_temp: bool,
    nokv: PathBuf,
    fill_threads: usize,
    keep: bool,
    census: Option<PathBuf>,
}

fn usage() -> ! {
    eprintln!(
        "usage: cli_scale [--sizes N,N..] [--runs R] [--work DIR] [--nokv PATH] \
         [--fill-threads T] [--keep] | --census STORE_DIR"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut args = Args {
        sizes: vec![1_000, 50_000],
        runs: 5,
        work: PathBuf::new(),
        work_is_temp: true,
        nokv: PathBuf::new(),
        fill_threads: 4,
        keep: false,
        census: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--sizes" => {
                args.sizes = value()
                    .split(',')
                    .map(|s| s.trim().parse().unwrap_or_else(|_| usage()))
                    .collect();
            }
            "--runs" => args.runs = value().parse().unwrap_or_else(|_| usage()),
            "--work" => {
                args.work = PathBuf::from(value());
                args.work_is_temp = false;
            }
            "--nokv" => args.nokv = PathBuf::from(value()),
            "--fill-threads" => args.fill_threads = value().parse().unwrap_or_else(|_| usage()),
            "--keep" => args.keep = true,
            "--census" => args.census = Some(PathBuf::from(value())),
            _ => usage(),
        }
    }
    if args.sizes.is_empty() || args.runs == 0 || args.fill_threads == 0 {
        usage();
    }
    if args.nokv.as_os_str().is_empty() {
        // The CLI built next to this binary (target/release/nokv).
        let me = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("cli_scale"));
        args.nokv = me.with_file_name("nokv");
    }
    if args.work.as_os_str().is_empty() {
        args.work = std::env::temp_dir().join(format!("nokv-cli-scale-{}", std::process::id()));
    }
    args
}

fn file_path(i: u64) -> String {
    format!("outputs/d{:04}/f{i:06}.txt", i / PER_DIR)
}

fn body(i: u64) -> Vec<u8> {
    format!(
        "run {i}: loss={:.6} accuracy={:.4} note=small artifact body for the CLI scale benchmark\n",
        1.0 / (i as f64 + 1.0),
        (i % 1000) as f64 / 1000.0
    )
    .into_bytes()
}

/// Fills `store` with publications `0..n` (threads take indexes from a shared counter).
fn fill(store: &Path, n: u64, threads: usize) -> Result<Duration, String> {
    let started = Instant::now();
    let client = Client::open(store).map_err(|e| format!("open {}: {e}", store.display()))?;
    client
        .create_workbench(WORKBENCH)
        .map_err(|e| format!("create workbench: {e}"))?;
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for _ in 0..threads {
        let (client, next, done) = (client.clone(), next.clone(), done.clone());
        handles.push(std::thread::spawn(move || -> Result<(), String> {
            let opts = PutOptions::create("text/plain; charset=utf-8", "cli_scale");
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok(());
                }
                let path = file_path(i);
                let mut attempts = 0u32;
                loop {
                    match client.put(WORKBENCH, &path, &body(i), &opts) {
                        Ok(_) => break,
                        // Topping up an interrupted fill: this publication is already there.
                        Err(nokv::Error::AlreadyExists { .. }) => break,
                        // Concurrent fillers race on the shard's read-version fence; back off.
                        Err(
                            nokv::Error::Busy
                            | nokv::Error::Meta(meta::Error::ReadVersionConflict { .. }),
                        ) if attempts < 1_000 => {
                            attempts += 1;
                            std::thread::sleep(Duration::from_millis(u64::from(attempts % 20)));
                        }
                        Err(e) => return Err(format!("put {path}: {e}")),
                    }
                }
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if d % 5_000 == 0 {
                    eprintln!("  filled {d}/{n}");
                }
            }
        }));
    }
    for h in handles {
        h.join()
            .map_err(|_| "filler thread panicked".to_string())??;
    }
    drop(client);
    Ok(started.elapsed())
}

/// One timed CLI process: (wall time, peak RSS KiB, stdout).
fn run_cli(nokv: &Path, store: &Path, tool: &str, input: &str) -> Result<(Duration, u64), String> {
    let started = Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg(nokv)
        .arg("--store")
        .arg(store)
        .arg("workbench")
        .arg(tool)
        .arg(input)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("spawn /usr/bin/time {}: {e}", nokv.display()))?;
    let wall = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || !stdout.contains("\"status\": \"success\"") {
        return Err(format!("{tool} failed: {stdout} {stderr}"));
    }
    let rss = stderr
        .lines()
        .rev()
        .find_map(|l| l.trim().parse::<u64>().ok())
        .ok_or_else(|| format!("no RSS in /usr/bin/time output: {stderr}"))?;
    Ok((wall, rss))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Bytes of every regular file under `dir` (recursively), split into checkpoint images, WAL
/// segments and the rest.
#[derive(Default, Clone, Copy)]
struct DiskUse {
    checkpoint: u64,
    wal: u64,
    other: u64,
}

impl DiskUse {
    fn total(&self) -> u64 {
        self.checkpoint + self.wal + self.other
    }
}

fn disk_use(dir: &Path) -> DiskUse {
    let mut d = DiskUse::default();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&p) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(md) = e.metadata() else { continue };
            if md.is_dir() {
                stack.push(e.path());
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".ckpt") {
                d.checkpoint += md.len();
            } else if name.ends_with(".wal") {
                d.wal += md.len();
            } else {
                d.other += md.len();
            }
        }
    }
    d
}

/// Rows and logical bytes of one census line.
#[derive(Default, Clone, Copy)]
struct Tally {
    rows: u64,
    key_bytes: u64,
    value_bytes: u64,
}

/// Logical bytes per holt tree of the store's metadata database (History split by source
/// family tag, RecoveryOutbox by header/chunk rows). Opens the database read-only: nothing is
/// written (the on-disk bytes it reports stay as measured), and a store a writer holds works.
fn census(meta_dir: &Path) -> Result<BTreeMap<String, Tally>, String> {
    let db = holt::Db::open_read_only(meta_dir, holt::Options::default())
        .map_err(|e| format!("open {}: {e}", meta_dir.display()))?;
    let mut out: BTreeMap<String, Tally> = BTreeMap::new();
    let names: BTreeMap<u8, String> = db.trees().into_iter().map(|t| (t.tag, t.name)).collect();
    for info in db.trees() {
        let tree = db
            .tree(&info.name)
            .ok_or_else(|| format!("tree {} vanished", info.name))?;
        for entry in tree
            .range(&holt::RangeSpec::all())
            .map_err(|e| e.to_string())?
        {
            let holt::Entry::Key { key, value } = entry.map_err(|e| e.to_string())? else {
                continue;
            };
            let label = match info.name.as_str() {
                "history" => format!(
                    "history/{}",
                    key.first()
                        .and_then(|t| names.get(t))
                        .map_or("?", String::as_str)
                ),
                "recovery_outbox" => match key.first() {
                    Some(0) => "recovery_outbox/header".to_string(),
                    Some(1) => "recovery_outbox/chunk".to_string(),
                    _ => "recovery_outbox/other".to_string(),
                },
                other => other.to_string(),
            };
            let t = out.entry(label).or_default();
            t.rows += 1;
            t.key_bytes += key.len() as u64;
            t.value_bytes += value.len() as u64;
        }
    }
    Ok(out)
}

fn print_census(store: &Path, publications: u64) -> Result<(), String> {
    let meta_dir = store.join("meta");
    let disk = disk_use(&meta_dir);
    let c = census(&meta_dir)?;
    let per = |b: u64| b as f64 / publications.max(1) as f64;
    println!(
        "\n#### Census of {} ({publications} publications)\n",
        store.display()
    );
    println!("| tree / family | rows | rows per pub. | key+value bytes | bytes per pub. |");
    println!("|---|---:|---:|---:|---:|");
    let mut total = Tally::default();
    for (name, t) in &c {
        total.rows += t.rows;
        total.key_bytes += t.key_bytes;
        total.value_bytes += t.value_bytes;
        println!(
            "| {name} | {} | {:.2} | {} | {:.0} |",
            t.rows,
            per(t.rows),
            t.key_bytes + t.value_bytes,
            per(t.key_bytes + t.value_bytes)
        );
    }
    println!(
        "| **total logical** | {} | {:.2} | {} | **{:.0}** |",
        total.rows,
        per(total.rows),
        total.key_bytes + total.value_bytes,
        per(total.key_bytes + total.value_bytes)
    );
    println!(
        "\nOn disk (`meta/`): checkpoint {} B + WAL {} B + other {} B = {} B, **{:.0} B per publication**.",
        disk.checkpoint,
        disk.wal,
        disk.other,
        disk.total(),
        per(disk.total())
    );
    Ok(())
}

fn main() {
    let args = parse_args();
    if let Some(store) = &args.census {
        // Counts every row of the store; the publication count is read from the marker when
        // the store was filled by this benchmark.
        let n = std::fs::read_to_string(store.join("filled"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1);
        if let Err(e) = print_census(store, n) {
            eprintln!("cli_scale: {e}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(e) = run(&args) {
        eprintln!("cli_scale: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), String> {
    if !args.nokv.is_file() {
        return Err(format!(
            "no CLI at {} (cargo build --release -p nokv-cli, or --nokv PATH)",
            args.nokv.display()
        ));
    }
    std::fs::create_dir_all(&args.work).map_err(|e| format!("mkdir: {e}"))?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "### cli_scale: {} ; {} cores ; loadavg at start {}",
        args.nokv.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut stores = Vec::new();
    for &n in &args.sizes {
        let store = args.work.join(format!("store-{n}"));
        let marker = store.join("filled");
        if std::fs::read_to_string(&marker)
            .ok()
            .as_deref()
            .map(str::trim)
            == Some(&n.to_string())
        {
            eprintln!("reusing {}", store.display());
        } else {
            // A store without the marker is an interrupted fill of this size: it is topped up
            // (create-only puts of publications already present count as done).
            eprintln!("filling {} with {n} publications", store.display());
            let took = fill(&store, n, args.fill_threads)?;
            std::fs::write(&marker, n.to_string()).map_err(|e| format!("marker: {e}"))?;
            println!(
                "filled {n} publications in {:.1} s ({:.0}/s, {} threads)",
                took.as_secs_f64(),
                n as f64 / took.as_secs_f64(),
                args.fill_threads
            );
        }
        stores.push((n, store));
    }
    // Census before any CLI call (the put_file runs below add a few publications).
    let mut censuses = Vec::new();
    for (n, store) in &stores {
        let disk = disk_use(&store.join("meta"));
        censuses.push((*n, disk));
    }

    let stat_input =
        format!(r#"{{"id":"{WORKBENCH}","section":"outputs","path":"d0000/f000007.txt"}}"#);
    let list_input =
        format!(r#"{{"id":"{WORKBENCH}","section":"outputs","path":"d0000","limit":10}}"#);
    // [size][tool] -> wall seconds; rss of stat per size.
    let tools = ["stat", "list", "put_file"];
    let mut walls: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); tools.len()]; stores.len()];
    let mut rss: Vec<Vec<f64>> = vec![Vec::new(); stores.len()];
    // One warm-up round (page cache), then the timed rounds.
    for round in 0..=args.runs {
        for (si, (_, store)) in stores.iter().enumerate() {
            for (ti, tool) in tools.iter().enumerate() {
                let input = match *tool {
                    "stat" => stat_input.clone(),
                    "list" => list_input.clone(),
                    _ => format!(
                        r#"{{"id":"{WORKBENCH}","section":"outputs","path":"new/r{round}-{}.txt","text":"one more small artifact"}}"#,
                        std::process::id()
                    ),
                };
                let (wall, kib) = run_cli(&args.nokv, store, tool, &input)?;
                if round > 0 {
                    walls[si][ti].push(wall.as_secs_f64() * 1e3);
                    if *tool == "stat" {
                        rss[si].push(kib as f64 / 1024.0);
                    }
                }
            }
        }
    }
    println!(
        "\n| publications | stat wall | list wall | put_file wall | peak RSS of stat | metadata on disk per pub. |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut med = Vec::new();
    for (si, (n, _)) in stores.iter().enumerate() {
        let m: Vec<f64> = (0..tools.len())
            .map(|ti| median(&mut walls[si][ti].clone()))
            .collect();
        let r = median(&mut rss[si].clone());
        let disk = censuses[si].1;
        println!(
            "| {n} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} MiB | {:.0} B |",
            m[0],
            m[1],
            m[2],
            r,
            disk.total() as f64 / *n as f64
        );
        med.push((m, r));
    }
    if med.len() >= 2 {
        let (first, last) = (&med[0], &med[med.len() - 1]);
        println!(
            "| ratio {} / {} | {:.2}× | {:.2}× | {:.2}× | {:.2}× | |",
            stores[stores.len() - 1].0,
            stores[0].0,
            last.0[0] / first.0[0],
            last.0[1] / first.0[1],
            last.0[2] / first.0[2],
            last.1 / first.1
        );
    }
    println!(
        "\nMedians of {} interleaved rounds after one warm-up round; wall = whole process (spawn to exit) under /usr/bin/time.",
        args.runs
    );
    for (n, store) in &stores {
        print_census(store, *n)?;
    }
    if !args.keep {
        for (_, store) in &stores {
            let _ = std::fs::remove_dir_all(store);
        }
        if args.work_is_temp {
            let _ = std::fs::remove_dir_all(&args.work);
        }
    }
    Ok(())
}
