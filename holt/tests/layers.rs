//! Reads across the in-memory delta and several images: thousands of keys in a versioned and an
//! unversioned tree, written, overwritten and deleted in random batches with flushes,
//! checkpoints and reopens in between, checked against a `BTreeMap` model — point reads,
//! delimiter listings at random prefixes and continuation points, paged `RangeIter` scans, and
//! `view_at` at older versions (MVCC history spread over several images).

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use holt::{Batch, Db, Durability, Entry, Options, RangeSpec, Tree};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(r: &mut Rng) -> Vec<u8> {
    format!(
        "ws{}/dir{:02}/sub{}/file{:03}",
        r.below(3),
        r.below(20),
        r.below(4),
        r.below(60)
    )
    .into_bytes()
}

fn model_range(map: &Map, spec: &RangeSpec) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for (k, v) in map {
        if !k.starts_with(&spec.prefix) {
            continue;
        }
        let split = spec
            .delimiter
            .and_then(|d| k[spec.prefix.len()..].iter().position(|&b| b == d));
        let e = match split {
            Some(i) => Entry::CommonPrefix(k[..spec.prefix.len() + i + 1].to_vec()),
            None => Entry::Key {
                key: k.clone(),
                value: v.clone(),
            },
        };
        if out.last() != Some(&e) {
            out.push(e);
        }
    }
    out.retain(|e| {
        let b = match e {
            Entry::Key { key, .. } => key,
            Entry::CommonPrefix(p) => p,
        };
        spec.start_after.as_ref().is_none_or(|sa| b > sa)
    });
    out.truncate(spec.limit.unwrap_or(usize::MAX));
    out
}

fn check(db: &Db, trees: &[Tree], history: &[[Map; 2]], r: &mut Rng, context: &str) {
    let version = db.version();
    assert_eq!(version as usize, history.len() - 1, "{context}");
    let latest = &history[history.len() - 1];
    for (t, tree) in trees.iter().enumerate() {
        let model = &latest[t];
        // Point reads of present keys and of random (mostly absent) ones.
        for _ in 0..200 {
            let k = key(r);
            assert_eq!(
                tree.get(&k).unwrap().as_ref(),
                model.get(&k),
                "{context}: get {k:?}"
            );
        }
        for (k, v) in model.iter().step_by(7) {
            assert_eq!(
                tree.get(k).unwrap().as_ref(),
                Some(v),
                "{context}: get {k:?}"
            );
        }
        // Listings, through both scan forms, with and without paging.
        for _ in 0..20 {
            let full = key(r);
            let cut = r.below(full.len() as u64 + 1) as usize;
            let spec = RangeSpec {
                prefix: if r.below(3) == 0 {
                    Vec::new()
                } else {
                    full[..cut].to_vec()
                },
                start_after: (r.below(2) == 0).then(|| key(r)[..cut].to_vec()),
                delimiter: (r.below(3) != 0).then_some(b'/'),
                limit: (r.below(2) == 0).then(|| r.below(50) as usize),
            };
            let want = model_range(model, &spec);
            let got: Vec<Entry> = tree.range(&spec).unwrap().map(|e| e.unwrap()).collect();
            assert_eq!(got, want, "{context}: range {spec:?}");
            let mut by_cb = Vec::new();
            tree.for_each_in_range(&spec, |e| {
                by_cb.push(e.to_entry());
                ControlFlow::Continue(())
            })
            .unwrap();
            assert_eq!(by_cb, want, "{context}: for_each_in_range {spec:?}");
        }
    }
    // Older versions of the versioned tree (tree 0), and the unversioned tree at its latest.
    let floor = db.history_floor();
    for _ in 0..4 {
        let v = floor + r.below(version - floor + 1);
        let view = db.view_at(v).unwrap();
        let model = &history[v as usize][0];
        let spec = RangeSpec::all().delimiter(b'/');
        let got: Vec<Entry> = view
            .range(
                &trees[0],
                &RangeSpec::with_prefix(format!("ws{}/", r.below(3))),
            )
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        let prefix = match got.first() {
            Some(Entry::Key { key, .. }) => key[..4].to_vec(),
            _ => Vec::new(),
        };
        if !prefix.is_empty() {
            assert_eq!(
                got,
                model_range(model, &RangeSpec::with_prefix(prefix)),
                "{context}: at {v}"
            );
        }
        let got: Vec<Entry> = view
            .range(&trees[0], &spec)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(got, model_range(model, &spec), "{context}: roots at {v}");
        for (k, val) in model.iter().step_by(11) {
            assert_eq!(
                view.get(&trees[0], k).unwrap().as_ref(),
                Some(val),
                "{context}: {k:?} at {v}"
            );
        }
        for _ in 0..30 {
            let k = key(r);
            assert_eq!(
                view.get(&trees[0], &k).unwrap().as_ref(),
                model.get(&k),
                "{context}: {k:?} at {v}"
            );
        }
    }
}

#[test]
fn reads_across_the_delta_and_several_images_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        durability: Durability::Buffered,
        // Small automatic flushes: the background thread flushes and merges as batches land.
        checkpoint_wal_bytes: 24 << 10,
        ..Options::default()
    };
    let mut r = Rng(0x1a7e25);
    let mut db = Db::open(dir.path(), opts).unwrap();
    let mut trees = vec![
        db.create_tree("versioned", 0x01, true).unwrap(),
        db.create_tree("plain", 0x02, false).unwrap(),
    ];
    let mut history: Vec<[Map; 2]> = vec![Default::default()];
    let mut most_images = 0;
    for round in 0..60 {
        for _ in 0..(5 + r.below(25)) {
            let mut next = history[history.len() - 1].clone();
            let mut b = Batch::new();
            for _ in 0..(1 + r.below(12)) {
                let t = r.below(2) as usize;
                let k = key(&mut r);
                if r.below(4) == 0 {
                    b.delete(&trees[t], k.clone());
                    next[t].remove(&k);
                } else {
                    let v = format!("r{round}-{}", r.below(1000)).into_bytes();
                    b.put(&trees[t], k.clone(), v.clone());
                    next[t].insert(k, v);
                }
            }
            db.commit(b).unwrap();
            history.push(next);
        }
        match r.below(10) {
            0 => db.checkpoint().unwrap(),
            1..=3 => db.flush().unwrap(),
            4 => {
                drop(trees);
                drop(db);
                db = Db::open(dir.path(), opts).unwrap();
                trees = vec![db.tree("versioned").unwrap(), db.tree("plain").unwrap()];
            }
            5 if history.len() > 20 => {
                let f = (history.len() - 10) as u64;
                if f > db.history_floor() {
                    db.set_history_floor(f).unwrap();
                }
            }
            _ => {}
        }
        most_images = most_images.max(db.stats().images);
        check(&db, &trees, &history, &mut r, &format!("round {round}"));
    }
    eprintln!(
        "{} versions, at most {most_images} images at once; final stats {:?}",
        history.len() - 1,
        db.stats()
    );
    assert!(most_images >= 3, "the run should build up several images");
}

/// A read-only database maps the writer's images at its open; the writer then flushes more
/// images and merges everything into a new base, deleting the files the reader mapped. The
/// reader keeps serving its state as of its open (point reads, a delimiter listing, `view_at`),
/// and a read-only open after the merge sees the writer's newest state from the new image.
#[test]
fn a_read_only_database_keeps_reading_images_the_writer_merged_away() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = Options {
        checkpoint_wal_bytes: 0,
        durability: Durability::Buffered,
        ..Options::default()
    };
    let writer = Db::open(tmp.path(), opts).unwrap();
    let files = writer.create_tree("files", 0x01, true).unwrap();
    let put = |k: String, v: &str| {
        let mut b = Batch::new();
        b.put(&files, k.into_bytes(), v.as_bytes().to_vec());
        writer.commit(b).unwrap()
    };
    for round in 0..3 {
        for i in 0..200 {
            put(format!("d{}/k{i:03}", i % 4), &format!("r{round}"));
        }
        writer.flush().unwrap();
    }
    let v_old = put("d0/k000".into(), "delta");
    let images_before: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("image-"))
        .collect();
    assert!(!images_before.is_empty(), "{images_before:?}");

    let reader = Db::open_read_only(tmp.path(), opts).unwrap();
    for i in 0..200 {
        put(format!("d{}/k{i:03}", i % 4), "after");
    }
    writer.checkpoint().unwrap();
    for name in &images_before {
        assert!(
            !tmp.path().join(name).exists(),
            "{name} survived the checkpoint"
        );
    }

    let rt = reader.tree("files").unwrap();
    assert_eq!(rt.get(b"d0/k000").unwrap().as_deref(), Some(&b"delta"[..]));
    for i in 1..200 {
        let k = format!("d{}/k{i:03}", i % 4);
        assert_eq!(
            rt.get(k.as_bytes()).unwrap().as_deref(),
            Some(&b"r2"[..]),
            "{k}"
        );
    }
    let spec = RangeSpec {
        delimiter: Some(b'/'),
        ..RangeSpec::all()
    };
    let groups: Vec<Entry> = rt.range(&spec).unwrap().map(|e| e.unwrap()).collect();
    let want: Vec<Entry> = (0..4)
        .map(|d| Entry::CommonPrefix(format!("d{d}/").into_bytes()))
        .collect();
    assert_eq!(groups, want);
    let old = reader.view_at(v_old - 1).unwrap();
    assert_eq!(
        old.get(&rt, b"d0/k000").unwrap().as_deref(),
        Some(&b"r2"[..])
    );

    let fresh = Db::open_read_only(tmp.path(), opts).unwrap();
    let ft = fresh.tree("files").unwrap();
    assert_eq!(ft.get(b"d0/k000").unwrap().as_deref(), Some(&b"after"[..]));
    assert_eq!(fresh.version(), writer.version());
}
