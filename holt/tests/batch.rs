//! Batches: atomicity, predicates, versions, limits, registry.

use holt::{Batch, Db, Error, Expect, Options};

fn db_with_trees() -> (Db, holt::Tree, holt::Tree, holt::Tree) {
    let db = Db::open_memory(Options::default()).unwrap();
    let a = db.create_tree("alpha", 0x01, true).unwrap();
    let b = db.create_tree("beta", 0x02, false).unwrap();
    let c = db.create_tree("gamma", 0x03, true).unwrap();
    (db, a, b, c)
}

#[test]
fn failing_predicate_across_three_trees_applies_nothing() {
    let (db, a, b, c) = db_with_trees();
    let mut seed = Batch::new();
    seed.put(&a, "k", "a0");
    seed.put(&b, "k", "b0");
    seed.put(&c, "k", "c0");
    assert_eq!(db.commit(seed).unwrap(), 1);

    let mut batch = Batch::new();
    batch.put(&a, "k", "a1");
    batch.delete(&b, "k");
    batch.put(&c, "new", "c1");
    batch.expect(&a, "k", Expect::Equals(b"a0".to_vec()));
    batch.expect(&b, "k", Expect::Present);
    batch.expect(&c, "k", Expect::Equals(b"wrong".to_vec()));
    match db.commit(batch) {
        Err(Error::PredicateFailed { tree, key, .. }) => {
            assert_eq!(tree, "gamma");
            assert_eq!(key, b"k");
        }
        other => panic!("expected PredicateFailed, got {other:?}"),
    }
    assert_eq!(db.version(), 1);
    assert_eq!(a.get(b"k").unwrap(), Some(b"a0".to_vec()));
    assert_eq!(b.get(b"k").unwrap(), Some(b"b0".to_vec()));
    assert_eq!(c.get(b"new").unwrap(), None);
    // No history rows were written by the failed batch either.
    let hist = db.tree("history").unwrap();
    let rows = hist.range(&holt::RangeSpec::all()).unwrap().count();
    assert_eq!(rows, 2, "only the two creation rows of the first commit");
}

#[test]
fn passing_predicates_apply_every_tree() {
    let (db, a, b, c) = db_with_trees();
    let mut batch = Batch::new();
    batch.expect(&a, "x", Expect::Absent);
    batch.put(&a, "x", "1");
    batch.put(&b, "y", "2");
    batch.put(&c, "z", "3");
    assert_eq!(db.commit(batch).unwrap(), 1);
    let mut batch = Batch::new();
    batch.expect(&a, "x", Expect::Equals(b"1".to_vec()));
    batch.expect(&b, "y", Expect::Present);
    batch.expect(&c, "missing", Expect::Absent);
    batch.delete(&c, "z");
    assert_eq!(db.commit(batch).unwrap(), 2);
    assert_eq!(c.get(b"z").unwrap(), None);
}

#[test]
fn expect_version_must_match_current_version() {
    let (db, a, _, _) = db_with_trees();
    let mut b1 = Batch::new();
    b1.expect_version(0);
    b1.put(&a, "k", "v");
    assert_eq!(db.commit(b1).unwrap(), 1);
    let mut stale = Batch::new();
    stale.expect_version(0);
    stale.put(&a, "k", "w");
    match db.commit(stale) {
        Err(Error::VersionMismatch { expected, actual }) => {
            assert_eq!((expected, actual), (0, 1));
        }
        other => panic!("expected VersionMismatch, got {other:?}"),
    }
    assert_eq!(a.get(b"k").unwrap(), Some(b"v".to_vec()));
    let mut fresh = Batch::new();
    fresh.expect_version(1);
    assert_eq!(
        db.commit(fresh).unwrap(),
        2,
        "a predicate-only batch commits"
    );
}

#[test]
fn commit_versions_are_dense_from_one() {
    let (db, a, b, _) = db_with_trees();
    assert_eq!(db.version(), 0);
    for i in 1..=20u64 {
        let mut batch = Batch::new();
        batch.put(if i % 2 == 0 { &a } else { &b }, i.to_be_bytes(), "v");
        assert_eq!(db.commit(batch).unwrap(), i);
        assert_eq!(db.version(), i);
    }
    let mut failing = Batch::new();
    failing.expect(&a, "nope", Expect::Present);
    assert!(db.commit(failing).is_err());
    let mut next = Batch::new();
    next.put(&a, "x", "y");
    assert_eq!(
        db.commit(next).unwrap(),
        21,
        "failed batches consume no version"
    );
}

#[test]
fn later_put_of_same_key_in_batch_wins() {
    let (db, a, _, _) = db_with_trees();
    let mut batch = Batch::new();
    batch.put(&a, "k", "1");
    batch.delete(&a, "k");
    batch.put(&a, "k", "3");
    db.commit(batch).unwrap();
    assert_eq!(a.get(b"k").unwrap(), Some(b"3".to_vec()));
    // The pre-batch value (absent) is what history records for version 1.
    assert_eq!(db.view_at(0).unwrap().get(&a, b"k").unwrap(), None);
}

#[test]
fn empty_batch_oversized_key_and_value_are_invalid() {
    let (db, a, _, _) = db_with_trees();
    assert!(matches!(
        db.commit(Batch::new()),
        Err(Error::InvalidArgument(_))
    ));
    let mut big_key = Batch::new();
    big_key.put(&a, vec![0u8; holt::MAX_KEY_LEN + 1], "v");
    assert!(matches!(db.commit(big_key), Err(Error::InvalidArgument(_))));
    let mut big_val = Batch::new();
    big_val.put(&a, "k", vec![0u8; holt::MAX_VALUE_LEN + 1]);
    assert!(matches!(db.commit(big_val), Err(Error::InvalidArgument(_))));
    let mut max = Batch::new();
    max.put(&a, vec![7u8; holt::MAX_KEY_LEN], "v");
    max.put(&a, "", "empty key");
    assert_eq!(db.commit(max).unwrap(), 1);
    assert_eq!(a.get(b"").unwrap(), Some(b"empty key".to_vec()));
    assert_eq!(db.version(), 1);
}

#[test]
fn history_tree_is_reserved_and_engine_written() {
    let (db, _, _, _) = db_with_trees();
    let infos = db.trees();
    assert_eq!(infos[0].name, "history");
    assert_eq!(infos[0].tag, 0);
    assert!(!infos[0].versioned);
    let tags: Vec<u8> = infos.iter().map(|t| t.tag).collect();
    assert_eq!(tags, vec![0, 1, 2, 3]);
    assert!(matches!(
        db.create_tree("history", 0x40, false),
        Err(Error::TreeExists { .. })
    ));
    assert!(matches!(
        db.create_tree("other", 0x00, false),
        Err(Error::TagInUse { tag: 0 })
    ));
    assert!(matches!(
        db.create_tree("alpha", 0x41, false),
        Err(Error::TreeExists { .. })
    ));
    assert!(matches!(
        db.create_tree("Bad-Name", 0x42, false),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        db.create_tree(&"x".repeat(65), 0x42, false),
        Err(Error::InvalidArgument(_))
    ));
    let hist = db.tree("history").unwrap();
    let mut batch = Batch::new();
    batch.put(&hist, "k", "v");
    assert!(matches!(db.commit(batch), Err(Error::InvalidArgument(_))));
    assert_eq!(db.version(), 0, "tree creation consumes no commit version");
}

#[test]
fn tree_handle_from_another_db_is_unknown() {
    let (db, _, _, _) = db_with_trees();
    let (_other, foreign, _, _) = db_with_trees();
    let mut batch = Batch::new();
    batch.put(&foreign, "k", "v");
    assert!(matches!(db.commit(batch), Err(Error::UnknownTree { .. })));
    assert!(matches!(
        db.view().get(&foreign, b"k"),
        Err(Error::UnknownTree { .. })
    ));
}

#[test]
fn tree_handle_outliving_its_db_reports_closed() {
    let (db, a, _, _) = db_with_trees();
    drop(db);
    assert!(matches!(a.get(b"k"), Err(Error::Closed)));
}

#[test]
fn io_uring_request_is_honoured_or_refused_as_unsupported() {
    let opts = Options {
        wal_io: holt::WalIo::IoUring,
        ..Options::default()
    };
    let dir = tempfile::tempdir().unwrap();
    match Db::open(dir.path(), opts) {
        Ok(db) => assert_eq!(db.stats().wal_io, holt::WalIoPath::IoUring),
        Err(e) => assert!(matches!(e, Error::Unsupported(_)), "{e:?}"),
    }
}

#[test]
fn concurrent_committers_get_distinct_dense_versions() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let t = db.create_tree("t", 0x01, true).unwrap();
    let mut handles = Vec::new();
    for th in 0..4u8 {
        let db = db.clone();
        let t = t.clone();
        handles.push(std::thread::spawn(move || {
            let mut versions = Vec::new();
            for i in 0..25u8 {
                let mut b = Batch::new();
                b.put(&t, [th, i], [i]);
                versions.push(db.commit(b).unwrap());
            }
            versions
        }));
    }
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort();
    assert_eq!(all, (1..=100).collect::<Vec<u64>>());
    let stats = db.stats();
    assert_eq!(stats.commits, 100);
    assert!(stats.wal_syncs >= 1 && stats.wal_syncs <= 101);
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.version(), 100);
    let t = db.tree("t").unwrap();
    assert_eq!(t.get(&[3, 24]).unwrap(), Some(vec![24]));
}

#[test]
fn db_tree_view_and_iterator_move_across_threads() {
    let (db, a, _, _) = db_with_trees();
    let mut b = Batch::new();
    b.put(&a, "k", "v");
    db.commit(b).unwrap();
    let view = db.view();
    let iter = view.range(&a, &holt::RangeSpec::all()).unwrap();
    let shared = std::sync::Arc::new((db.clone(), a.clone(), view));
    let got = std::thread::spawn(move || {
        let (db, a, view) = &*shared;
        let n = iter.count();
        (n, view.get(a, b"k").unwrap(), db.version())
    })
    .join()
    .unwrap();
    assert_eq!(got, (1, Some(b"v".to_vec()), 1));
}
