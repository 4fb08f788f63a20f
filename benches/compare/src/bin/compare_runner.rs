//! Non-criterion comparison runner: prints Markdown tables.
//!
//! ```text
//! compare_runner all                 # everything below, in order
//! compare_runner micro path|random   # single-op latencies, engines interleaved round by round
//! compare_runner durable             # durable commits/s with 1, 4, 16 committer threads
//! compare_runner reopen              # load N, checkpoint, N/10 single commits, close; a fresh
//!                                    # process times open + one get and reads its RSS
//! compare_runner rss [ENGINE SHAPE]  # RSS delta per key around loading, one child process each
//! compare_runner probe               # upstream-holt correctness probes, against both holts
//! compare_runner profile WORKLOAD [ENGINE] [SHAPE]  # one workload in a loop (for `perf record`)
//! ```
//!
//! Environment: `NOKV_CMP_KEYS` (default 1,000,000), `NOKV_CMP_DIR` (where the engines' files go;
//! default the system temp dir), `NOKV_CMP_ROUND_MS` (micro: time per engine per round, default
//! 400), `NOKV_CMP_ROUNDS` (default 5), `NOKV_CMP_DURABLE_SECS` (per engine and thread count,
//! default 3), `NOKV_CMP_ENGINES` (comma-separated subset: ours,upstream,redb,fjall,sqlite),
//! `NOKV_CMP_COMMIT_DELAY_US` (our holt's group-commit delay, default holt's 50 µs).

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nokv_compare::*;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.replace('_', "").parse().ok())
        .unwrap_or(default)
}

fn data_root() -> PathBuf {
    std::env::var_os("NOKV_CMP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

fn tempdir(tag: &str) -> tempfile::TempDir {
    let root = data_root();
    let _ = std::fs::create_dir_all(&root);
    match tempfile::Builder::new()
        .prefix(&format!("nokv-cmp-{tag}-"))
        .tempdir_in(&root)
    {
        Ok(d) => d,
        Err(e) => {
            eprintln!("cannot create a temp dir under {}: {e}", root.display());
            std::process::exit(2);
        }
    }
}

fn kinds() -> Vec<Kind> {
    match std::env::var("NOKV_CMP_ENGINES") {
        Ok(s) => s.split(',').filter_map(|t| Kind::parse(t.trim())).collect(),
        Err(_) => Kind::ALL.to_vec(),
    }
}

/// Runs `f`, turning a panic into an error string.
fn guarded<T>(f: impl FnOnce() -> Res<T>) -> Res<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(format!(
            "panicked: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

fn shape_of(s: &str) -> Shape {
    if s == "random" {
        Shape::Random
    } else {
        Shape::Path
    }
}

// ------------------------------------------------------------------------------------------------
// micro: single-operation latencies
// ------------------------------------------------------------------------------------------------

struct Loaded {
    kind: Kind,
    engine: Box<dyn Engine>,
    _dir: tempfile::TempDir,
    seq: usize,
    /// Per workload: Err(reason) if it was not measured.
    skip: Vec<(Workload, String)>,
}

fn micro(shape: Shape) {
    let n = key_count();
    let ds = Dataset::generate(shape, n);
    let ops = Operands::new(&ds, 1);
    // Reads first, on the settled store (each engine checkpointed after loading: ours serves
    // them from one image), then the writes, then the reads again on top of those writes (ours:
    // the in-memory delta and newer images above the base image).
    let workloads: Vec<Workload> = match shape {
        Shape::Path => vec![
            Workload::GetHit,
            Workload::GetMiss,
            Workload::List8,
            Workload::List1000,
            Workload::Scan100,
            Workload::Put,
            Workload::Batch3,
            Workload::GetHit,
            Workload::GetMiss,
            Workload::List8,
            Workload::List1000,
            Workload::Scan100,
        ],
        Shape::Random => vec![
            Workload::GetHit,
            Workload::GetMiss,
            Workload::Put,
            Workload::GetHit,
            Workload::GetMiss,
        ],
    };
    // Row labels: a read repeated after a write workload is marked as such.
    let first_write = workloads
        .iter()
        .position(|w| is_write(*w))
        .unwrap_or(usize::MAX);
    let row_label = |wi: usize, w: Workload| -> String {
        if wi > first_write && !is_write(w) {
            format!("{} (after writes)", w.label())
        } else {
            w.label().to_string()
        }
    };
    let mut loaded: Vec<Loaded> = Vec::new();
    for kind in kinds() {
        let dir = tempdir(kind.token());
        let t0 = Instant::now();
        let r = guarded(|| {
            let e = open_engine(kind, dir.path(), Mode::Fast)?;
            ds.load_into(e.as_ref(), 10_000)?;
            if shape == Shape::Path {
                load_aux(e.as_ref())?;
            }
            // Settle: each engine's checkpoint/flush, so no engine's background work from the
            // load (our checkpointer thread, upstream's checkpointer, compactions) overlaps the
            // timed rounds.
            e.checkpoint()?;
            Ok(e)
        });
        match r {
            Ok(engine) => {
                eprintln!(
                    "[micro {shape:?}] loaded {n} keys into {} in {:.1} s ({} on disk)",
                    kind.label(),
                    t0.elapsed().as_secs_f64(),
                    mib(dir_size(dir.path()))
                );
                let l = Loaded {
                    kind,
                    engine,
                    _dir: dir,
                    seq: 0,
                    skip: Vec::new(),
                };
                loaded.push(l);
            }
            Err(e) => {
                eprintln!("[micro {shape:?}] {} failed to load: {e}", kind.label());
                println!("- {} failed to load {n} {shape:?} keys: {e}", kind.label());
            }
        }
    }
    let rounds = env_u64("NOKV_CMP_ROUNDS", 5) as usize;
    let round = Duration::from_millis(env_u64("NOKV_CMP_ROUND_MS", 400));
    // results[w][engine] = per-round ns/op
    let mut results: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); loaded.len()]; workloads.len()];
    let mut errors: Vec<Vec<Option<String>>> = vec![vec![None; loaded.len()]; workloads.len()];
    // Write workloads: worst single-operation latency seen (stalls hide in per-round means).
    let mut worst: Vec<Vec<Duration>> = vec![vec![Duration::ZERO; loaded.len()]; workloads.len()];
    // Upstream holt listings timed with the seek loop because its roll-up answered wrongly.
    let mut fell_back: Vec<(Workload, String)> = Vec::new();
    for (wi, &w) in workloads.iter().enumerate() {
        // Validate right before timing: earlier workloads' writes are in the engines by now.
        for l in loaded.iter_mut() {
            match guarded(|| prepare(l.engine.as_ref(), &ds, w)) {
                Ok(None) => {}
                Ok(Some(native)) => {
                    eprintln!("[micro {shape:?}] {} native roll-up wrong for {}: {native}; timing the seek loop", l.kind.label(), w.label());
                    fell_back.push((w, native));
                }
                Err(e) => {
                    eprintln!(
                        "[micro {shape:?}] {} {}: WRONG: {e}",
                        l.kind.label(),
                        w.label()
                    );
                    l.skip.push((w, format!("wrong answer: {e}")));
                }
            }
        }
        for _ in 0..rounds {
            for (ei, l) in loaded.iter_mut().enumerate() {
                if l.skip.iter().any(|(s, _)| *s == w) || errors[wi][ei].is_some() {
                    continue;
                }
                let start = Instant::now();
                let mut count = 0u64;
                let mut err = None;
                'outer: while start.elapsed() < round {
                    for _ in 0..16 {
                        let t = Instant::now();
                        let r = run_op(l.engine.as_ref(), &ds, &ops, w, l.seq);
                        if is_write(w) {
                            worst[wi][ei] = worst[wi][ei].max(t.elapsed());
                        }
                        match r {
                            Ok(x) => {
                                black_box(x);
                            }
                            Err(e) => {
                                err = Some(e);
                                break 'outer;
                            }
                        }
                        l.seq += 1;
                        count += 1;
                    }
                }
                let el = start.elapsed();
                if let Some(e) = err {
                    eprintln!(
                        "[micro {shape:?}] {} {} error: {e}",
                        l.kind.label(),
                        w.label()
                    );
                    errors[wi][ei] = Some(e);
                    continue;
                }
                results[wi][ei].push(el.as_nanos() as f64 / count.max(1) as f64);
            }
        }
    }
    println!();
    println!("#### Single-operation latency, {n} {shape:?} keys (median of {rounds} interleaved rounds; lower is better)");
    println!();
    let mut header = "| workload |".to_string();
    let mut sep = "|---|".to_string();
    for l in &loaded {
        let method = if l.engine.native_rollup() { "" } else { " ²" };
        header += &format!(" {}{method} |", l.kind.label());
        sep += "---:|";
    }
    println!("{header}\n{sep}");
    for (wi, &w) in workloads.iter().enumerate() {
        let mut row = format!("| {} |", row_label(wi, w));
        for (ei, l) in loaded.iter().enumerate() {
            let cell = if let Some((_, why)) = l.skip.iter().find(|(s, _)| *s == w) {
                format!("— ({})", shorten(why))
            } else if let Some(e) = &errors[wi][ei] {
                format!("error: {}", shorten(e))
            } else {
                let mut v = results[wi][ei].clone();
                v.sort_by(|a, b| a.total_cmp(b));
                let mark = if l.kind == Kind::Upstream && fell_back.iter().any(|(f, _)| *f == w) {
                    " ¹"
                } else {
                    ""
                };
                v.get(v.len() / 2)
                    .map_or("—".into(), |m| format!("{}{mark}", fmt_ns(*m)))
            };
            row += &format!(" {cell} |");
        }
        println!("{row}");
    }
    for (wi, &w) in workloads.iter().enumerate().filter(|(_, w)| is_write(**w)) {
        let mut row = format!("| max single `{}` |", w.label());
        for d in &worst[wi] {
            row += &format!(" {} |", fmt_ns(d.as_nanos() as f64));
        }
        println!("{row}");
    }
    println!();
    println!("² no delimiter roll-up: listings use the seek-past-prefix loop.");
    for (w, why) in &fell_back {
        println!(
            "¹ {}: native roll-up answered wrongly for `{}` ({}); the seek-past-prefix loop was timed instead.",
            Kind::Upstream.label(),
            w.label(),
            why
        );
    }
    // Ratios vs our holt.
    if let Some(oi) = loaded.iter().position(|l| l.kind == Kind::Ours) {
        println!();
        println!("Ratio (engine time / our holt time; >1 means our holt is faster):");
        println!();
        println!("{header}\n{sep}");
        for (wi, &w) in workloads.iter().enumerate() {
            let med = |ei: usize| {
                let mut v = results[wi][ei].clone();
                v.sort_by(|a, b| a.total_cmp(b));
                v.get(v.len() / 2).copied()
            };
            let mut row = format!("| {} |", row_label(wi, w));
            for ei in 0..loaded.len() {
                let cell = match (med(ei), med(oi)) {
                    (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
                    _ => "—".into(),
                };
                row += &format!(" {cell} |");
            }
            println!("{row}");
        }
    }
    println!();
}

fn is_write(w: Workload) -> bool {
    matches!(w, Workload::Put | Workload::Batch3)
}

fn shorten(s: &str) -> String {
    let s = s.replace('|', "/");
    if s.len() > 90 {
        format!(
            "{}…",
            &s[..s
                .char_indices()
                .take_while(|(i, _)| *i < 90)
                .last()
                .map_or(0, |(i, c)| i + c.len_utf8())]
        )
    } else {
        s
    }
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

// ------------------------------------------------------------------------------------------------
// durable: concurrent committers
// ------------------------------------------------------------------------------------------------

fn durable() {
    let n = key_count();
    let ds = Dataset::generate(Shape::Path, n);
    let secs = env_u64("NOKV_CMP_DURABLE_SECS", 3);
    let threads = [1usize, 4, 16];
    println!();
    println!("#### Durable commits (one put per commit, each durable before it returns), {n} path keys preloaded, {secs} s per cell; commits/s (higher is better)");
    println!();
    println!("| engine | 1 committer | 4 committers | 16 committers | 16 vs 1 |");
    println!("|---|---:|---:|---:|---:|");
    let seq = Arc::new(AtomicU64::new(1 << 40));
    let mut notes = Vec::new();
    for kind in kinds() {
        let dir = tempdir(kind.token());
        let r = guarded(|| {
            let e: Arc<dyn Engine> = Arc::from(open_engine(kind, dir.path(), Mode::Durable)?);
            ds.load_into(e.as_ref(), 10_000)?;
            e.checkpoint()?;
            let mut rates = Vec::new();
            for &t in &threads {
                let stop = Arc::new(AtomicBool::new(false));
                let done = Arc::new(AtomicU64::new(0));
                let mut hs = Vec::new();
                for _ in 0..t {
                    let mut c = e.committer()?;
                    let (stop, done, seq) = (stop.clone(), done.clone(), seq.clone());
                    hs.push(std::thread::spawn(move || -> Res<()> {
                        let v = value_for(7);
                        while !stop.load(Ordering::Relaxed) {
                            let k = path_new_key(seq.fetch_add(1, Ordering::Relaxed));
                            c.put(&k, &v)?;
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(())
                    }));
                }
                let start = Instant::now();
                std::thread::sleep(Duration::from_secs(secs));
                stop.store(true, Ordering::Relaxed);
                let mut err = None;
                for h in hs {
                    match h.join() {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => err = Some(e),
                        Err(_) => err = Some("committer thread panicked".into()),
                    }
                }
                let el = start.elapsed().as_secs_f64();
                if let Some(e) = err {
                    return Err(e);
                }
                rates.push(done.load(Ordering::Relaxed) as f64 / el);
            }
            Ok((e.name(), rates, e.stats_note()))
        });
        match r {
            Ok((name, r, note)) => {
                if let Some(n) = note {
                    notes.push(format!("{}: {n}", name.replace(" (seek loop)", "")));
                }
                println!(
                    "| {} | {:.0} | {:.0} | {:.0} | {:.2}× |",
                    name.replace(" (seek loop)", ""),
                    r[0],
                    r[1],
                    r[2],
                    r[2] / r[0].max(1e-9)
                )
            }
            Err(e) => println!("| {} | error: {} | | | |", kind.label(), shorten(&e)),
        }
    }
    println!();
    for n in notes {
        println!("- {n}");
    }
    println!();
}

// ------------------------------------------------------------------------------------------------
// reopen and rss: one child process per engine
// ------------------------------------------------------------------------------------------------

fn self_exe() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("compare_runner"))
}

/// Child: load N, checkpoint, N/10 single commits, drop — into `dir` (the parent owns it).
fn reopen_prep_child(kind: Kind, dir: &std::path::Path) -> Res<()> {
    let n = key_count();
    let ds = Dataset::generate(Shape::Path, n);
    let e = open_engine(kind, dir, Mode::Fast)?;
    ds.load_into(e.as_ref(), 10_000)?;
    e.checkpoint()?;
    let v = value_for(3);
    for i in 0..(n / 10) as u64 {
        e.put(&path_new_key(i), &v)?;
    }
    drop(e);
    println!("RESULT {}", dir_size(dir));
    Ok(())
}

/// Child, in a fresh process: time open + one get of the store `reopen_prep_child` left in
/// `dir`, and the process's RSS before the open, right after it and after the get. Prints
/// `RESULT <secs> <disk bytes> <rss before> <rss after open> <rss after get>`.
fn reopen_child(kind: Kind, dir: &std::path::Path) -> Res<()> {
    let n = key_count();
    let probe = path_key(n / 2);
    let want = value_for(n / 2);
    let last_new = path_new_key((n / 10) as u64 - 1);
    let disk = dir_size(dir);
    let rss0 = rss_bytes()?;
    let t0 = Instant::now();
    let e = open_engine(kind, dir, Mode::Fast)?;
    let rss1 = rss_bytes()?;
    let got = e.get(&probe)?;
    let el = t0.elapsed().as_secs_f64();
    let rss2 = rss_bytes()?;
    if got.as_deref() != Some(want.as_slice()) {
        return Err("after reopen a loaded key is missing or wrong".into());
    }
    if e.get(&last_new)?.is_none() {
        return Err("after reopen the last post-checkpoint commit is missing".into());
    }
    println!("RESULT {el} {disk} {rss0} {rss1} {rss2}");
    Ok(())
}

/// Child: RSS delta around open + load of N keys. Prints `RESULT <bytes> <disk bytes>`.
fn rss_child(kind: Kind, shape: Shape) -> Res<()> {
    let n = key_count();
    let ds = Dataset::generate(shape, n);
    let dir = tempdir(kind.token());
    let before = rss_bytes()?;
    let e = open_engine(kind, dir.path(), Mode::Fast)?;
    ds.load_into(e.as_ref(), 10_000)?;
    // Touch every key once so a lazily loading engine has its working set resident ("warm").
    for k in ds.keys.iter().step_by(1) {
        black_box(e.get(k)?);
    }
    let after = rss_bytes()?;
    println!(
        "RESULT {} {}",
        after.saturating_sub(before),
        dir_size(dir.path())
    );
    drop(e);
    Ok(())
}

fn run_child(args: &[&str]) -> Res<Vec<f64>> {
    let out = Command::new(self_exe())
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("RESULT ") {
            return Ok(rest
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect());
        }
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(format!(
        "child {:?} exited with {}: {}",
        args,
        out.status,
        stdout
            .lines()
            .chain(stderr.lines())
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("")
    ))
}

fn reopen_all() {
    let n = key_count();
    println!();
    println!("#### Reopen: {n} path keys loaded, checkpointed, then {} single-put commits, closed; a fresh process times open + one get (lower is better) and reads its RSS", n / 10);
    println!();
    println!(
        "| engine | open + first get | files on disk | RSS right after open | RSS after the get |"
    );
    println!("|---|---:|---:|---:|---:|");
    for kind in kinds() {
        let dir = tempdir(kind.token());
        let path = dir.path().to_string_lossy().to_string();
        let row = run_child(&["reopen-prep-child", kind.token(), &path])
            .and_then(|_| run_child(&["reopen-child", kind.token(), &path]));
        match row {
            Ok(v) if v.len() >= 5 => println!(
                "| {} | {:.1} ms | {} | {} | {} |",
                kind.label(),
                v[0] * 1e3,
                mib(v[1] as u64),
                mib(v[3] as u64),
                mib(v[4] as u64)
            ),
            Ok(_) => println!("| {} | error: malformed child output | | | |", kind.label()),
            Err(e) => println!("| {} | error: {} | | | |", kind.label(), shorten(&e)),
        }
    }
    println!();
}

fn rss_all() {
    let n = key_count();
    println!();
    println!("#### Resident memory: RSS delta (/proc/self/statm) around open + load of {n} keys + one get of each, separate process per cell (bytes/key; lower is better)");
    println!();
    println!("| engine | path keys: RSS/key | path: disk/key | random keys: RSS/key | random: disk/key |");
    println!("|---|---:|---:|---:|---:|");
    for kind in kinds() {
        let mut row = format!("| {} |", kind.label());
        for shape in ["path", "random"] {
            match run_child(&["rss-child", kind.token(), shape]) {
                Ok(v) if v.len() >= 2 => {
                    row += &format!(" {:.0} B | {:.0} B |", v[0] / n as f64, v[1] / n as f64)
                }
                Ok(_) => row += " error | |",
                Err(e) => row += &format!(" error: {} | |", shorten(&e)),
            }
        }
        println!("{row}");
    }
    println!();
}

// ------------------------------------------------------------------------------------------------
// probe: the two upstream-holt correctness findings of issue 3, against both holts
// ------------------------------------------------------------------------------------------------

/// Child: delimiter listing one level below the root prefix after loading `n` path keys.
/// Prints `RESULT <returned> <expected>`.
fn probe_list_child(kind: Kind, n: usize) -> Res<()> {
    let ds = Dataset::generate(Shape::Path, n);
    let dir = tempdir(kind.token());
    let e = open_engine(kind, dir.path(), Mode::Fast)?;
    ds.load_into(e.as_ref(), 10_000)?;
    let p = format!("tenant-{LIST_TENANT:02}/");
    let got = e.list(p.as_bytes(), b'/', 100_000)?;
    let prefixes = got
        .iter()
        .filter(|l| matches!(l, Listed::Prefix(_)))
        .count();
    println!("RESULT {} {}", prefixes, expected_datasets(n, LIST_TENANT));
    Ok(())
}

/// Child: `count` sequential single-put commits `sync/000000000`, … with 1-byte values.
/// Prints `RESULT <ok commits> <failed at or -1>` and the error on stderr.
fn probe_seq_child(kind: Kind, count: usize) -> Res<()> {
    let dir = tempdir(kind.token());
    let e = open_engine(kind, dir.path(), Mode::Fast)?;
    let mut failed_at: i64 = -1;
    let mut ok = 0usize;
    for i in 0..count {
        let k = format!("sync/{i:09}");
        match guarded(|| e.put(k.as_bytes(), b"x")) {
            Ok(()) => ok += 1,
            Err(err) => {
                eprintln!("ERROR at key #{} ({}): {err}", i + 1, k);
                failed_at = i as i64 + 1;
                break;
            }
        }
    }
    // Verify a sample of what was acknowledged.
    let mut missing = 0usize;
    for i in (0..ok).step_by(997).chain(ok.checked_sub(1)) {
        if e.get(format!("sync/{i:09}").as_bytes())?.is_none() {
            missing += 1;
        }
    }
    println!("RESULT {ok} {failed_at} {missing}");
    Ok(())
}

fn probe_all() {
    println!();
    println!("#### Correctness probes (issue 3): upstream holt 0.9.2 vs our holt");
    println!();
    println!("Delimiter listing of `tenant-03/` (one level below the root) with delimiter `/`, file-backed, shuffled load:");
    println!();
    println!("| keys loaded | engine | common prefixes returned | expected |");
    println!("|---:|---|---:|---:|");
    let n = key_count();
    let mut sizes = vec![50_000usize, 100_000, 200_000];
    if n > 200_000 {
        sizes.push(n);
    }
    for &sz in &sizes {
        for kind in [Kind::Upstream, Kind::Ours] {
            match run_child(&["probe-list-child", kind.token(), &sz.to_string()]) {
                Ok(v) if v.len() >= 2 => {
                    let flag = if v[0] == v[1] { "" } else { " **wrong**" };
                    println!(
                        "| {sz} | {} | {:.0}{flag} | {:.0} |",
                        kind.label(),
                        v[0],
                        v[1]
                    )
                }
                Ok(_) => println!(
                    "| {sz} | {} | error: malformed child output | |",
                    kind.label()
                ),
                Err(e) => println!("| {sz} | {} | error: {} | |", kind.label(), shorten(&e)),
            }
        }
    }
    println!();
    println!("Upstream holt only, listing variants (delimiter `/`; expected: root 8, `tenant-03/` {DATASETS}, `tenant-03/dataset-005/` 5 (1 below 40,000 keys, per-run count otherwise)):");
    println!();
    println!("| keys | load order | load API | listing prefix | expected | `range()` pass 1, 2 | `scan_keys()` pass 1, 2 | returned by `range()` (first … last) |");
    println!("|---:|---|---|---|---:|---|---|---|");
    for &sz in sizes.iter().filter(|&&s| s >= 100_000) {
        for (sorted, single) in [(false, false), (true, false), (true, true)] {
            let out = Command::new(self_exe())
                .args([
                    "probe-variants-child",
                    &sz.to_string(),
                    if sorted { "sorted" } else { "shuffled" },
                    if single { "puts" } else { "batches" },
                ])
                .output();
            let order = if sorted { "sorted" } else { "shuffled" };
            let api = if single {
                "single puts"
            } else {
                "10k-key atomic batches"
            };
            match out {
                Ok(o) => {
                    let so = String::from_utf8_lossy(&o.stdout);
                    // prefix -> (range counts, scan_keys counts, first seen)
                    let mut rows: Vec<(String, Vec<String>, Vec<String>, String)> = Vec::new();
                    for l in so.lines().filter_map(|l| l.strip_prefix("VARIANT ")) {
                        let mut parts = l.split('\t');
                        let name = parts.next().unwrap_or("?");
                        let c = parts.next().unwrap_or("?").to_string();
                        let seen = parts.next().unwrap_or("").to_string();
                        let (prefix, call) = name.split_once(": ").unwrap_or((name, ""));
                        if !rows.iter().any(|r| r.0 == prefix) {
                            rows.push((prefix.to_string(), Vec::new(), Vec::new(), seen));
                        }
                        if let Some(r) = rows.iter_mut().find(|r| r.0 == prefix) {
                            if call.starts_with("range") {
                                r.1.push(c);
                            } else {
                                r.2.push(c);
                            }
                        }
                    }
                    if rows.is_empty() {
                        let se = String::from_utf8_lossy(&o.stderr);
                        println!(
                            "| {sz} | {order} | {api} | — | | failed ({}): {} | | |",
                            o.status,
                            shorten(
                                so.lines()
                                    .chain(se.lines())
                                    .rfind(|l| !l.trim().is_empty())
                                    .unwrap_or("")
                            )
                        );
                    }
                    for (prefix, r, k, seen) in rows {
                        let want = if prefix == "\"\"" {
                            TENANTS
                        } else if prefix.contains("dataset-005") {
                            5.min(sz.div_ceil(TENANTS * DATASETS))
                        } else {
                            DATASETS
                        };
                        let all_ok = r.iter().chain(&k).all(|c| *c == want.to_string());
                        let flag = if all_ok { "" } else { " **wrong**" };
                        println!(
                            "| {sz} | {order} | {api} | `{}` | {want} | {}{flag} | {} | `{seen}` |",
                            prefix.trim_matches('"'),
                            r.join(", "),
                            k.join(", ")
                        );
                    }
                }
                Err(e) => {
                    println!("| {sz} | {order} | {api} | — | | could not start child: {e} | | |")
                }
            }
        }
    }
    println!();
    let count = 300_000usize;
    println!("{count} sequential single-put commits `sync/000000000`, `sync/000000001`, … with 1-byte values, file-backed:");
    println!();
    println!(
        "| engine | commits acknowledged | first failure | sampled acknowledged keys missing |"
    );
    println!("|---|---:|---|---:|");
    for kind in [Kind::Upstream, Kind::Ours] {
        let out = Command::new(self_exe())
            .args(["probe-seq-child", kind.token(), &count.to_string()])
            .output();
        match out {
            Ok(out) => {
                let stdout = String::from_utf8_lossy(&out.stdout);
                let stderr = String::from_utf8_lossy(&out.stderr);
                let err_line = stderr
                    .lines()
                    .find(|l| l.starts_with("ERROR"))
                    .map(|s| s.to_string());
                match stdout.lines().find_map(|l| l.strip_prefix("RESULT ")) {
                    Some(r) => {
                        let v: Vec<i64> = r
                            .split_whitespace()
                            .filter_map(|x| x.parse().ok())
                            .collect();
                        let fail = match (v.get(1), &err_line) {
                            (Some(-1), _) | (None, _) => "none".to_string(),
                            (Some(_), Some(l)) => shorten(l),
                            (Some(i), None) => format!("at key #{i}"),
                        };
                        println!(
                            "| {} | {} | {} | {} |",
                            kind.label(),
                            v.first().copied().unwrap_or(-1),
                            fail,
                            v.get(2).copied().unwrap_or(-1)
                        );
                    }
                    None => println!(
                        "| {} | — | process failed ({}): {} | |",
                        kind.label(),
                        out.status,
                        shorten(
                            stdout
                                .lines()
                                .chain(stderr.lines())
                                .rfind(|l| !l.trim().is_empty())
                                .unwrap_or("")
                        )
                    ),
                }
            }
            Err(e) => println!("| {} | — | could not start child: {e} | |", kind.label()),
        }
    }
    println!();
}

/// Loads one engine, then runs one workload in a tight loop for `NOKV_CMP_PROFILE_SECS`
/// (default 10) seconds and prints the mean latency — a target for `perf record`.
fn profile(w: &str, kind: Kind, shape: Shape) -> Res<()> {
    let w = Workload::BOTH
        .iter()
        .chain(&Workload::PATH_ONLY)
        .copied()
        .find(|x| x.label() == w)
        .ok_or_else(|| format!("unknown workload {w:?}"))?;
    let n = key_count();
    let ds = Dataset::generate(shape, n);
    let ops = Operands::new(&ds, 3);
    let dir = tempdir(kind.token());
    let e = open_engine(kind, dir.path(), Mode::Fast)?;
    ds.load_into(e.as_ref(), 10_000)?;
    if shape == Shape::Path {
        load_aux(e.as_ref())?;
    }
    e.checkpoint()?;
    // Optionally leave fresh writes above the checkpoint (as the micro runs' earlier write
    // workloads do), so reads go through the in-memory delta and newer images too.
    let puts = env_u64("NOKV_CMP_PROFILE_PUTS", 0);
    let v = value_for(5);
    for i in 0..puts {
        e.put(&ds.new_key(i), &v)?;
    }
    if let Some(native) = prepare(e.as_ref(), &ds, w)? {
        eprintln!("native roll-up wrong ({native}); timing the seek loop");
    }
    let secs = env_u64("NOKV_CMP_PROFILE_SECS", 10);
    eprintln!("loaded {n} keys; running {} for {secs} s", w.label());
    let start = Instant::now();
    let mut count = 0usize;
    while start.elapsed() < Duration::from_secs(secs) {
        for _ in 0..64 {
            black_box(run_op(e.as_ref(), &ds, &ops, w, count)?);
            count += 1;
        }
    }
    println!(
        "{} {}: {} per op ({count} ops)",
        kind.label(),
        w.label(),
        fmt_ns(start.elapsed().as_nanos() as f64 / count.max(1) as f64)
    );
    Ok(())
}

fn child_result(r: Res<()>) {
    if let Err(e) = r {
        eprintln!("ERROR {e}");
        println!("FAILED {e}");
        std::process::exit(1);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let kind_arg = |i: usize| a.get(i).and_then(|s| Kind::parse(s));
    match a.first().copied().unwrap_or("all") {
        "micro" => micro(shape_of(a.get(1).copied().unwrap_or("path"))),
        "durable" => durable(),
        "reopen" => reopen_all(),
        "rss" => rss_all(),
        "probe" => probe_all(),
        "profile" => child_result(guarded(|| {
            profile(
                a.get(1).copied().unwrap_or("get_hit"),
                kind_arg(2).unwrap_or(Kind::Ours),
                shape_of(a.get(3).copied().unwrap_or("path")),
            )
        })),
        "all" => {
            println!("NOKV_CMP_KEYS = {}", key_count());
            probe_all();
            micro(Shape::Path);
            micro(Shape::Random);
            durable();
            reopen_all();
            rss_all();
        }
        "reopen-prep-child" => match (kind_arg(1), a.get(2)) {
            (Some(k), Some(d)) => {
                child_result(guarded(|| reopen_prep_child(k, std::path::Path::new(d))))
            }
            _ => child_result(Err("usage: reopen-prep-child ENGINE DIR".into())),
        },
        "reopen-child" => match (kind_arg(1), a.get(2)) {
            (Some(k), Some(d)) => {
                child_result(guarded(|| reopen_child(k, std::path::Path::new(d))))
            }
            _ => child_result(Err("usage: reopen-child ENGINE DIR".into())),
        },
        "rss-child" => match kind_arg(1) {
            Some(k) => child_result(guarded(|| {
                rss_child(k, shape_of(a.get(2).copied().unwrap_or("path")))
            })),
            None => child_result(Err("usage: rss-child ENGINE SHAPE".into())),
        },
        "probe-list-child" => match (kind_arg(1), a.get(2).and_then(|s| s.parse().ok())) {
            (Some(k), Some(n)) => child_result(guarded(|| probe_list_child(k, n))),
            _ => child_result(Err("usage: probe-list-child ENGINE N".into())),
        },
        "probe-variants-child" => match a.get(1).and_then(|s| s.parse().ok()) {
            Some(n) => child_result(guarded(|| {
                let dir = tempdir("variants");
                for (name, c, first) in upstream_list_variants(
                    dir.path(),
                    n,
                    a.get(2).copied() == Some("sorted"),
                    a.get(3).copied() == Some("puts"),
                )? {
                    println!("VARIANT {name}\t{c}\t{first}");
                }
                Ok(())
            })),
            None => child_result(Err(
                "usage: probe-variants-child N sorted|shuffled puts|batches".into(),
            )),
        },
        "probe-seq-child" => match (kind_arg(1), a.get(2).and_then(|s| s.parse().ok())) {
            (Some(k), Some(n)) => child_result(guarded(|| probe_seq_child(k, n))),
            _ => child_result(Err("usage: probe-seq-child ENGINE COUNT".into())),
        },
        other => {
            eprintln!("unknown command {other:?}; see the module docs (all|micro|durable|reopen|rss|probe)");
            std::process::exit(2);
        }
    }
}
