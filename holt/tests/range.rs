//! Range scans: prefix, start_after, limit, delimiter roll-up, snapshot consistency.

use std::ops::ControlFlow;

use holt::{Batch, Db, Entry, EntryRef, Options, RangeSpec, Tree};

fn setup(keys: &[&[u8]]) -> (Db, Tree) {
    let db = Db::open_memory(Options::default()).unwrap();
    let t = db.create_tree("files", 0x03, true).unwrap();
    let mut b = Batch::new();
    for k in keys {
        b.put(&t, k.to_vec(), k.to_vec());
    }
    db.commit(b).unwrap();
    (db, t)
}

fn scan(t: &Tree, spec: &RangeSpec) -> Vec<Entry> {
    t.range(spec).unwrap().map(|e| e.unwrap()).collect()
}

fn key(k: &[u8]) -> Entry {
    Entry::Key {
        key: k.to_vec(),
        value: k.to_vec(),
    }
}

fn cp(k: &[u8]) -> Entry {
    Entry::CommonPrefix(k.to_vec())
}

const KEYS: &[&[u8]] = &[
    b"",
    b"a",
    b"a/",
    b"a/b",
    b"a/b/c",
    b"a/c",
    b"ab",
    b"b",
    b"b/x",
    b"\x00",
    b"\xff",
    b"\xff/\xff",
];

#[test]
fn prefix_scan_visits_keys_in_byte_order_including_empty_key() {
    let (_db, t) = setup(KEYS);
    let all = scan(&t, &RangeSpec::all());
    let mut sorted: Vec<&[u8]> = KEYS.to_vec();
    sorted.sort();
    assert_eq!(all, sorted.iter().map(|k| key(k)).collect::<Vec<_>>());
    assert_eq!(all[0], key(b""));
    assert_eq!(all[1], key(b"\x00"));
    assert_eq!(
        scan(&t, &RangeSpec::with_prefix("a/")),
        vec![key(b"a/"), key(b"a/b"), key(b"a/b/c"), key(b"a/c")]
    );
    assert_eq!(
        scan(&t, &RangeSpec::with_prefix(b"\xff".to_vec())),
        vec![key(b"\xff"), key(b"\xff/\xff")]
    );
}

#[test]
fn delimiter_rolls_up_groups_and_keeps_prefix_keys() {
    let (_db, t) = setup(KEYS);
    assert_eq!(
        scan(&t, &RangeSpec::all().delimiter(b'/')),
        vec![
            key(b""),
            key(b"\x00"),
            key(b"a"),
            cp(b"a/"),
            key(b"ab"),
            key(b"b"),
            cp(b"b/"),
            key(b"\xff"),
            cp(b"\xff/"),
        ]
    );
    assert_eq!(
        scan(&t, &RangeSpec::with_prefix("a/").delimiter(b'/')),
        vec![key(b"a/"), key(b"a/b"), cp(b"a/b/"), key(b"a/c")]
    );
}

#[test]
fn continuation_after_common_prefix_skips_the_whole_group() {
    let (_db, t) = setup(KEYS);
    let page1 = scan(&t, &RangeSpec::all().delimiter(b'/').limit(4));
    assert_eq!(page1, vec![key(b""), key(b"\x00"), key(b"a"), cp(b"a/")]);
    let page2 = scan(
        &t,
        &RangeSpec::all().delimiter(b'/').start_after("a/").limit(3),
    );
    assert_eq!(page2, vec![key(b"ab"), key(b"b"), cp(b"b/")]);
    // start_after in the middle of a group does not re-emit the group.
    let mid = scan(&t, &RangeSpec::all().delimiter(b'/').start_after("a/b"));
    assert_eq!(mid[0], key(b"ab"));
}

#[test]
fn start_after_and_limit_without_delimiter() {
    let (_db, t) = setup(KEYS);
    assert_eq!(
        scan(&t, &RangeSpec::with_prefix("a").start_after("a/b").limit(2)),
        vec![key(b"a/b/c"), key(b"a/c")]
    );
    assert_eq!(scan(&t, &RangeSpec::all().limit(0)), vec![]);
    // start_after below the prefix is irrelevant.
    assert_eq!(
        scan(&t, &RangeSpec::with_prefix("b").start_after("a")),
        vec![key(b"b"), key(b"b/x")]
    );
}

#[test]
fn delimiter_0xff_group_at_end_of_keyspace() {
    let (_db, t) = setup(&[b"\xff\xff", b"\xff\xff\x01", b"\xfe"]);
    assert_eq!(
        scan(&t, &RangeSpec::all().delimiter(0xff)),
        vec![key(b"\xfe"), cp(b"\xff")]
    );
    assert_eq!(
        scan(
            &t,
            &RangeSpec::with_prefix(b"\xff".to_vec()).delimiter(0xff)
        ),
        vec![cp(b"\xff\xff")]
    );
}

#[test]
fn large_groups_are_skipped_across_chunk_boundaries() {
    let db = Db::open_memory(Options::default()).unwrap();
    let t = db.create_tree("t", 0x01, false).unwrap();
    let mut b = Batch::new();
    for i in 0..200u32 {
        b.put(&t, format!("d{}/f{i:04}", i % 3), "x");
        b.put(&t, format!("f{i:04}"), "y");
    }
    db.commit(b).unwrap();
    let out = scan(&t, &RangeSpec::all().delimiter(b'/'));
    assert_eq!(out.len(), 203);
    assert_eq!(&out[..3], &[cp(b"d0/"), cp(b"d1/"), cp(b"d2/")]);
}

#[test]
fn deleted_keys_do_not_form_common_prefixes() {
    let (db, t) = setup(&[b"a/x", b"b/y", b"c"]);
    let mut b = Batch::new();
    b.delete(&t, "a/x");
    db.commit(b).unwrap();
    assert_eq!(
        scan(&t, &RangeSpec::all().delimiter(b'/')),
        vec![cp(b"b/"), key(b"c")]
    );
    // The old view still sees the group.
    let old = db.view_at(1).unwrap();
    let old_scan: Vec<Entry> = old
        .range(&t, &RangeSpec::all().delimiter(b'/'))
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    assert_eq!(old_scan, vec![cp(b"a/"), cp(b"b/"), key(b"c")]);
}

#[test]
fn view_and_iterator_stay_consistent_while_later_commits_land() {
    let (db, t) = setup(&[b"k1", b"k2", b"k3"]);
    let view = db.view();
    let mut iter = view.range(&t, &RangeSpec::all()).unwrap();
    assert_eq!(iter.next().unwrap().unwrap(), key(b"k1"));
    let mut b = Batch::new();
    b.delete(&t, "k2");
    b.put(&t, "k25", "new");
    b.put(&t, "k3", "changed");
    db.commit(b).unwrap();
    let rest: Vec<Entry> = iter.map(|e| e.unwrap()).collect();
    assert_eq!(rest, vec![key(b"k2"), key(b"k3")]);
    assert_eq!(view.version(), 1);
    assert_eq!(view.get(&t, b"k3").unwrap(), Some(b"k3".to_vec()));
    assert_eq!(t.get(b"k3").unwrap(), Some(b"changed".to_vec()));
    assert_eq!(db.view().version(), 2);
}

fn scan_by_callback(t: &Tree, spec: &RangeSpec) -> Vec<Entry> {
    let mut out = Vec::new();
    t.for_each_in_range(spec, |e| {
        out.push(e.to_entry());
        ControlFlow::Continue(())
    })
    .unwrap();
    out
}

#[test]
fn callback_scan_matches_the_range_iterator_for_every_spec_shape() {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for t in 0..3 {
        for d in 0..40 {
            for f in 0..3 {
                keys.push(format!("t{t}/d{d:03}/f{f}").into_bytes());
            }
        }
        keys.push(format!("t{t}/top").into_bytes());
    }
    keys.push(b"t".to_vec());
    let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
    let (db, t) = setup(&refs);
    // The same keys in an unversioned tree (listings without MVCC filtering take another path).
    let plain = db.create_tree("plain", 0x04, false).unwrap();
    let mut b = Batch::new();
    for k in &keys {
        b.put(&plain, k.clone(), k.clone());
    }
    db.commit(b).unwrap();
    let mut specs = vec![RangeSpec::all(), RangeSpec::all().delimiter(b'/')];
    for p in ["", "t1/", "t1/d0", "t2/d039/", "zz"] {
        for sa in [None, Some("t1/"), Some("t1/d010/"), Some("t1/d010/f1")] {
            for lim in [None, Some(1), Some(7)] {
                let mut s = RangeSpec::with_prefix(p).delimiter(b'/');
                s.start_after = sa.map(|x| x.as_bytes().to_vec());
                s.limit = lim;
                specs.push(s.clone());
                s.delimiter = None;
                specs.push(s);
            }
        }
    }
    for spec in &specs {
        assert_eq!(scan_by_callback(&t, spec), scan(&t, spec), "{spec:?}");
        assert_eq!(scan_by_callback(&plain, spec), scan(&t, spec), "{spec:?}");
        assert_eq!(scan(&plain, spec), scan(&t, spec), "{spec:?}");
    }
    // 3 tenants: 40 dataset groups + one key each.
    assert_eq!(
        scan_by_callback(&t, &RangeSpec::with_prefix("t1/").delimiter(b'/')).len(),
        41
    );
}

#[test]
fn callback_scan_stops_when_the_callback_breaks() {
    let (_db, t) = setup(&[b"a/1", b"b/1", b"c", b"d/1"]);
    let mut seen = Vec::new();
    t.for_each_in_range(&RangeSpec::all().delimiter(b'/'), |e| {
        seen.push(e.to_entry());
        if matches!(e, EntryRef::Key { .. }) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    assert_eq!(seen, vec![cp(b"a/"), cp(b"b/"), key(b"c")]);
}
