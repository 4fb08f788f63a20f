//! Criterion comparison: our holt vs upstream holt 0.9.2, redb, fjall and SQLite, side by side in
//! one run on the same data (`NOKV_CMP_KEYS` keys per data set, default 1,000,000; path-shaped
//! and random 24-byte keys, 64-byte values; all engines file-backed and loaded before measuring).
//!
//! Groups: `<dataset>/<workload>` with one benchmark per engine. Each engine's answers are checked
//! before it is timed; a wrong or failing engine is reported on stderr and skipped for that
//! workload (upstream holt's delimiter listing falls back to the seek-past-prefix loop when its
//! native roll-up is wrong). Short settings (10 samples, 2 s measurement) because the machine has
//! two shared cores; durable commits, reopen time and memory are in the `compare_runner` binary.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use nokv_compare::*;

fn engines_for(ds: &Dataset, shape: Shape) -> Vec<(Box<dyn Engine>, tempfile::TempDir)> {
    let root = std::env::var_os("NOKV_CMP_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let only: Option<Vec<Kind>> = std::env::var("NOKV_CMP_ENGINES")
        .ok()
        .map(|s| s.split(',').filter_map(|t| Kind::parse(t.trim())).collect());
    let mut out = Vec::new();
    for kind in Kind::ALL {
        if only.as_ref().is_some_and(|o| !o.contains(&kind)) {
            continue;
        }
        let dir = match tempfile::Builder::new()
            .prefix("nokv-cmp-crit-")
            .tempdir_in(&root)
        {
            Ok(d) => d,
            Err(e) => {
                eprintln!("{}: cannot create temp dir: {e}", kind.label());
                continue;
            }
        };
        let loaded =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Res<Box<dyn Engine>> {
                let e = open_engine(kind, dir.path(), Mode::Fast)?;
                ds.load_into(e.as_ref(), 10_000)?;
                if shape == Shape::Path {
                    load_aux(e.as_ref())?;
                }
                Ok(e)
            }));
        match loaded {
            Ok(Ok(e)) => out.push((e, dir)),
            Ok(Err(err)) => eprintln!("{} failed to load {shape:?} data: {err}", kind.label()),
            Err(_) => eprintln!("{} panicked while loading {shape:?} data", kind.label()),
        }
    }
    out
}

fn bench_shape(c: &mut Criterion, shape: Shape) {
    let n = key_count();
    let ds = Dataset::generate(shape, n);
    let ops = Operands::new(&ds, 2);
    let engines = engines_for(&ds, shape);
    let workloads: Vec<Workload> = match shape {
        Shape::Path => Workload::BOTH
            .iter()
            .chain(&Workload::PATH_ONLY)
            .copied()
            .collect(),
        Shape::Random => Workload::BOTH.to_vec(),
    };
    let ds_name = match shape {
        Shape::Path => "path",
        Shape::Random => "random",
    };
    for w in workloads {
        let mut g = c.benchmark_group(format!("{ds_name}/{}", w.label()));
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        for (e, _) in &engines {
            match prepare(e.as_ref(), &ds, w) {
                Ok(None) => {}
                Ok(Some(native)) => eprintln!(
                    "{}: native roll-up wrong ({native}); timing the seek-past-prefix loop instead",
                    e.name()
                ),
                Err(err) => {
                    eprintln!("{} {}: wrong answer, not timed: {err}", e.name(), w.label());
                    continue;
                }
            }
            let mut seq = 0usize;
            let mut reported = false;
            g.bench_function(e.name(), |b| {
                b.iter(|| {
                    seq += 1;
                    match run_op(e.as_ref(), &ds, &ops, w, seq) {
                        Ok(x) => {
                            black_box(x);
                        }
                        Err(err) if !reported => {
                            reported = true;
                            eprintln!(
                                "{} {}: error during measurement: {err}",
                                e.name(),
                                w.label()
                            );
                        }
                        Err(_) => {}
                    }
                })
            });
        }
        g.finish();
    }
}

fn path(c: &mut Criterion) {
    bench_shape(c, Shape::Path);
}

fn random(c: &mut Criterion) {
    bench_shape(c, Shape::Random);
}

criterion_group!(benches, path, random);
criterion_main!(benches);
