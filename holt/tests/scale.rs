//! Large-scale model check (ignored by default; run it in release):
//!
//! ```text
//! cargo test --release -p holt --test scale -- --ignored --nocapture
//! ```
//!
//! 300,000 sequential keys `sync/000000000`, `sync/000000001`, … with 1-byte values plus
//! 120,000 path-shaped keys in a versioned tree, committed in batches to a file-backed database
//! (fdatasync'd commits), checked against a `BTreeMap` model after a WAL-replay reopen and after
//! a checkpoint reopen, including delimiter listings one level below the root prefix.

use std::collections::BTreeMap;
use std::time::Instant;

use holt::{Batch, Db, Entry, Options, RangeSpec, Tree};

const SYNC_KEYS: usize = 300_000;
const PATH_KEYS: usize = 120_000;
const DIRS: usize = 1_000;

fn sync_key(i: usize) -> Vec<u8> {
    format!("sync/{i:09}").into_bytes()
}

fn path_key(i: usize) -> Vec<u8> {
    format!("tree/d{:03}/f{i:06}", i % DIRS).into_bytes()
}

fn all(t: &Tree, spec: &RangeSpec) -> Vec<Entry> {
    t.range(spec).unwrap().map(|e| e.unwrap()).collect()
}

fn common_prefixes(entries: &[Entry]) -> Vec<Vec<u8>> {
    entries
        .iter()
        .map(|e| match e {
            Entry::CommonPrefix(p) => p.clone(),
            Entry::Key { key, .. } => panic!("unexpected key {key:?}"),
        })
        .collect()
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, deleted_dirs: usize, label: &str) {
    let t0 = Instant::now();
    let sync = db.tree("sync").unwrap();
    let paths = db.tree("paths").unwrap();
    for (k, v) in model {
        let t = if k.starts_with(b"sync/") {
            &sync
        } else {
            &paths
        };
        assert_eq!(t.get(k).unwrap().as_ref(), Some(v), "{label}: get {k:?}");
    }
    assert_eq!(sync.get(b"sync/000300000").unwrap(), None);
    // Full scans equal the model.
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = all(&sync, &RangeSpec::all())
        .into_iter()
        .chain(all(&paths, &RangeSpec::all()))
        .map(|e| match e {
            Entry::Key { key, value } => (key, value),
            Entry::CommonPrefix(p) => panic!("unexpected common prefix {p:?}"),
        })
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(scanned == want, "{label}: full scan differs from the model");
    // Delimiter listing at the root: one roll-up per tree.
    assert_eq!(
        common_prefixes(&all(&sync, &RangeSpec::all().delimiter(b'/'))),
        vec![b"sync/".to_vec()]
    );
    assert_eq!(
        common_prefixes(&all(&paths, &RangeSpec::all().delimiter(b'/'))),
        vec![b"tree/".to_vec()]
    );
    // One level below the root prefix: every live directory, in pages of 100.
    let want_dirs: Vec<Vec<u8>> = (deleted_dirs..DIRS)
        .map(|d| format!("tree/d{d:03}/").into_bytes())
        .collect();
    let mut got = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let spec = RangeSpec {
            prefix: b"tree/".to_vec(),
            start_after: after.clone(),
            delimiter: Some(b'/'),
            limit: Some(100),
        };
        let page = common_prefixes(&all(&paths, &spec));
        if page.is_empty() {
            break;
        }
        after = page.last().cloned();
        got.extend(page);
    }
    assert!(got == want_dirs, "{label}: {} roll-ups", got.len());
    // `sync/` one level down lists keys (no further delimiter), paged.
    let page = all(
        &sync,
        &RangeSpec::with_prefix("sync/")
            .delimiter(b'/')
            .start_after("sync/000199999")
            .limit(3),
    );
    assert_eq!(
        page,
        (200_000..200_003)
            .map(|i| Entry::Key {
                key: sync_key(i),
                value: vec![1],
            })
            .collect::<Vec<_>>()
    );
    println!(
        "{label}: verified {} keys in {:?}",
        model.len(),
        t0.elapsed()
    );
}

#[test]
#[ignore = "large (≈420k keys, file-backed); run in release with --ignored"]
fn three_hundred_thousand_sequential_keys_survive_reopen_and_list_with_roll_ups() {
    let dir = tempfile::tempdir().unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let t0 = Instant::now();
    let deleted_dirs = 100;
    let (pre_delete_version, listed_before_delete) = {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let sync = db.create_tree("sync", 0x01, false).unwrap();
        let paths = db.create_tree("paths", 0x02, true).unwrap();
        for chunk in (0..SYNC_KEYS).collect::<Vec<_>>().chunks(1_000) {
            let mut b = Batch::new();
            for &i in chunk {
                b.put(&sync, sync_key(i), vec![1u8]);
                model.insert(sync_key(i), vec![1u8]);
            }
            db.commit(b).unwrap();
        }
        for chunk in (0..PATH_KEYS).collect::<Vec<_>>().chunks(1_000) {
            let mut b = Batch::new();
            for &i in chunk {
                let v = (i as u32).to_le_bytes().to_vec();
                b.put(&paths, path_key(i), v.clone());
                model.insert(path_key(i), v);
            }
            db.commit(b).unwrap();
        }
        let pre_delete_version = db.version();
        // Delete every key of the first 100 directories (12,000 keys become tombstones).
        for chunk in (0..PATH_KEYS)
            .filter(|i| i % DIRS < deleted_dirs)
            .collect::<Vec<_>>()
            .chunks(1_000)
        {
            let mut b = Batch::new();
            for &i in chunk {
                b.delete(&paths, path_key(i));
                model.remove(&path_key(i));
            }
            db.commit(b).unwrap();
        }
        println!(
            "loaded {} keys in {:?} ({} commits)",
            SYNC_KEYS + PATH_KEYS,
            t0.elapsed(),
            db.version()
        );
        check(&db, &model, deleted_dirs, "live");
        let old = db.view_at(pre_delete_version).unwrap();
        let listed: usize = old
            .range(&paths, &RangeSpec::with_prefix("tree/").delimiter(b'/'))
            .unwrap()
            .count();
        (pre_delete_version, listed)
    };
    assert_eq!(listed_before_delete, DIRS);
    let t1 = Instant::now();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    println!("reopen (WAL replay) in {:?}", t1.elapsed());
    check(&db, &model, deleted_dirs, "after WAL replay");
    let old = db.view_at(pre_delete_version).unwrap();
    let paths = db.tree("paths").unwrap();
    assert_eq!(
        old.range(&paths, &RangeSpec::with_prefix("tree/").delimiter(b'/'))
            .unwrap()
            .count(),
        DIRS
    );
    let t2 = Instant::now();
    db.checkpoint().unwrap();
    println!("checkpoint in {:?}", t2.elapsed());
    drop((db, old, paths));
    let t3 = Instant::now();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    println!("reopen (checkpoint) in {:?}", t3.elapsed());
    check(&db, &model, deleted_dirs, "after checkpoint reopen");
    println!("total {:?}", t0.elapsed());
}
