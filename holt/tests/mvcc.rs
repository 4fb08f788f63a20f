//! MVCC history: view_at across overwrite/delete/re-create, floors, pruning.

use holt::{Batch, Db, Entry, Error, Options, RangeSpec, Tree};

fn commit(db: &Db, f: impl FnOnce(&mut Batch)) -> u64 {
    let mut b = Batch::new();
    f(&mut b);
    db.commit(b).unwrap()
}

fn keys_at(db: &Db, t: &Tree, v: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.view_at(v)
        .unwrap()
        .range(t, &RangeSpec::all())
        .unwrap()
        .map(|e| match e.unwrap() {
            Entry::Key { key, value } => (key, value),
            Entry::CommonPrefix(p) => panic!("unexpected common prefix {p:?}"),
        })
        .collect()
}

fn kv(k: &str, v: &str) -> (Vec<u8>, Vec<u8>) {
    (k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

#[test]
fn view_at_reads_versioned_tree_across_overwrite_delete_recreate() {
    let db = Db::open_memory(Options::default()).unwrap();
    let t = db.create_tree("path_current", 0x03, true).unwrap();
    let v1 = commit(&db, |b| {
        b.put(&t, "k", "one");
        b.put(&t, "other", "x");
    });
    let v2 = commit(&db, |b| b.put(&t, "k", "two"));
    let v3 = commit(&db, |b| b.delete(&t, "k"));
    let v4 = commit(&db, |b| b.put(&t, "unrelated", "u"));
    let v5 = commit(&db, |b| b.put(&t, "k", "five"));
    assert_eq!((v1, v2, v3, v4, v5), (1, 2, 3, 4, 5));

    let get = |v: u64| db.view_at(v).unwrap().get(&t, b"k").unwrap();
    assert_eq!(get(0), None);
    assert_eq!(get(1), Some(b"one".to_vec()));
    assert_eq!(get(2), Some(b"two".to_vec()));
    assert_eq!(get(3), None);
    assert_eq!(get(4), None);
    assert_eq!(get(5), Some(b"five".to_vec()));

    assert_eq!(keys_at(&db, &t, 0), vec![]);
    assert_eq!(keys_at(&db, &t, 1), vec![kv("k", "one"), kv("other", "x")]);
    assert_eq!(keys_at(&db, &t, 3), vec![kv("other", "x")]);
    assert_eq!(
        keys_at(&db, &t, 4),
        vec![kv("other", "x"), kv("unrelated", "u")]
    );
    assert_eq!(
        keys_at(&db, &t, 5),
        vec![kv("k", "five"), kv("other", "x"), kv("unrelated", "u")]
    );
    assert!(matches!(db.view_at(6), Err(Error::InvalidArgument(_))));
}

#[test]
fn history_rows_use_the_seed_key_layout() {
    let db = Db::open_memory(Options::default()).unwrap();
    let t = db.create_tree("workspace_current", 0x02, true).unwrap();
    commit(&db, |b| b.put(&t, "ab", "1"));
    commit(&db, |b| b.put(&t, "ab", "2"));
    let hist = db.tree("history").unwrap();
    let rows: Vec<Entry> = hist
        .range(&RangeSpec::all())
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    let row = |v: u64, val: &[u8]| {
        let mut k = vec![0x02, 0, 0, 0, 2, b'a', b'b'];
        k.extend_from_slice(&(!v).to_be_bytes());
        Entry::Key {
            key: k,
            value: val.to_vec(),
        }
    };
    // Newest first thanks to the inverted commit version.
    assert_eq!(rows, vec![row(2, b"\x011"), row(1, b"\x00")]);
}

#[test]
fn unversioned_tree_reads_latest_state_in_old_views() {
    let db = Db::open_memory(Options::default()).unwrap();
    let t = db.create_tree("plain", 0x05, false).unwrap();
    commit(&db, |b| b.put(&t, "k", "1"));
    commit(&db, |b| b.put(&t, "k", "2"));
    assert_eq!(
        db.view_at(1).unwrap().get(&t, b"k").unwrap(),
        Some(b"2".to_vec())
    );
    assert_eq!(
        db.tree("history")
            .unwrap()
            .range(&RangeSpec::all())
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn history_floor_prunes_and_rejects_older_views() {
    let db = Db::open_memory(Options::default()).unwrap();
    let t = db.create_tree("t", 0x01, true).unwrap();
    commit(&db, |b| b.put(&t, "k", "1")); // 1
    commit(&db, |b| b.put(&t, "k", "2")); // 2
    commit(&db, |b| b.put(&t, "gone", "g")); // 3
    commit(&db, |b| b.delete(&t, "gone")); // 4
    commit(&db, |b| b.put(&t, "k", "5")); // 5
    let pinned = db.view_at(1).unwrap();

    assert!(matches!(
        db.set_history_floor(6),
        Err(Error::InvalidArgument(_))
    ));
    db.set_history_floor(4).unwrap();
    assert_eq!(db.history_floor(), 4);
    db.set_history_floor(2).unwrap();
    assert_eq!(db.history_floor(), 4, "the floor never moves down");
    match db.view_at(3) {
        Err(Error::HistoryPruned { requested, floor }) => assert_eq!((requested, floor), (3, 4)),
        other => panic!("expected HistoryPruned, got {other:?}"),
    }
    let at4 = db.view_at(4).unwrap();
    assert_eq!(at4.get(&t, b"k").unwrap(), Some(b"2".to_vec()));
    assert_eq!(at4.get(&t, b"gone").unwrap(), None);
    // Only the row needed by read versions >= 4 survives: k's row at version 5.
    let hist = db.tree("history").unwrap();
    assert_eq!(hist.range(&RangeSpec::all()).unwrap().count(), 1);
    // An earlier view keeps its pinned snapshot.
    assert_eq!(pinned.get(&t, b"k").unwrap(), Some(b"1".to_vec()));
    assert_eq!(pinned.get(&t, b"gone").unwrap(), None);
}
