//! Tombstones, delimiter roll-up at old and new versions, and incremental history pruning.

use std::sync::Arc;

use holt::{Batch, Db, Durability, Entry, Error, Options, RangeSpec, Tree};

fn scan(view: &holt::View, t: &Tree, spec: &RangeSpec) -> Vec<Entry> {
    view.range(t, spec).unwrap().map(|e| e.unwrap()).collect()
}

fn prefixes(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .map(|e| match e {
            Entry::CommonPrefix(p) => String::from_utf8_lossy(p).into_owned(),
            Entry::Key { key, .. } => format!("key:{}", String::from_utf8_lossy(key)),
        })
        .collect()
}

#[test]
fn tombstone_only_groups_are_hidden_at_latest_and_listed_at_older_versions() {
    let db = Db::open_memory(Options::default()).unwrap();
    let t = db.create_tree("files", 0x04, true).unwrap();
    let mut b = Batch::new();
    for d in 0..20 {
        for f in 0..200 {
            b.put(&t, format!("root/d{d:02}/f{f:04}"), "x");
        }
    }
    let v_full = db.commit(b).unwrap();
    // Delete every key of the even directories, and all but one key of d01.
    let mut b = Batch::new();
    for d in (0..20).step_by(2) {
        for f in 0..200 {
            b.delete(&t, format!("root/d{d:02}/f{f:04}"));
        }
    }
    for f in 1..200 {
        b.delete(&t, format!("root/d01/f{f:04}"));
    }
    let v_deleted = db.commit(b).unwrap();
    // Re-create one key in d04.
    let mut b = Batch::new();
    b.put(&t, "root/d04/f0100", "again");
    let v_recreated = db.commit(b).unwrap();

    let spec = RangeSpec::with_prefix("root/").delimiter(b'/');
    let odd: Vec<String> = (1..20)
        .step_by(2)
        .map(|d| format!("root/d{d:02}/"))
        .collect();
    let mut latest = odd.clone();
    latest.push("root/d04/".to_string());
    latest.sort();
    assert_eq!(prefixes(&scan(&db.view(), &t, &spec)), latest);
    assert_eq!(
        prefixes(&scan(&db.view_at(v_deleted).unwrap(), &t, &spec)),
        odd
    );
    let all: Vec<String> = (0..20).map(|d| format!("root/d{d:02}/")).collect();
    assert_eq!(
        prefixes(&scan(&db.view_at(v_full).unwrap(), &t, &spec)),
        all
    );
    assert_eq!(
        prefixes(&scan(&db.view_at(v_recreated - 1).unwrap(), &t, &spec)),
        odd
    );
    // Paging with limit 1 and start_after walks the same groups.
    let mut paged = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let mut s = spec.clone().limit(1);
        s.start_after = after.clone();
        let page = scan(&db.view(), &t, &s);
        let Some(Entry::CommonPrefix(p)) = page.first() else {
            break;
        };
        after = Some(p.clone());
        paged.push(String::from_utf8_lossy(p).into_owned());
    }
    assert_eq!(paged, latest);
    // Keys of a group: only the survivors, newest state.
    let d01 = scan(&db.view(), &t, &RangeSpec::with_prefix("root/d01/"));
    assert_eq!(prefixes(&d01), vec!["key:root/d01/f0000".to_string()]);
    assert_eq!(
        scan(&db.view(), &t, &RangeSpec::with_prefix("root/d00/")),
        vec![]
    );
}

#[test]
fn history_rows_below_the_floor_are_pruned_and_stay_hidden_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        durability: Durability::Buffered,
        ..Options::default()
    };
    let history_rows = |db: &Db| {
        db.tree("history")
            .unwrap()
            .range(&RangeSpec::all())
            .unwrap()
            .count()
    };
    {
        let db = Db::open(dir.path(), opts).unwrap();
        let t = db.create_tree("t", 0x01, true).unwrap();
        for i in 0..100u32 {
            let mut b = Batch::new();
            b.put(&t, "hot", i.to_string());
            if i % 10 == 0 {
                b.delete(&t, format!("gone{i}"));
                b.put(&t, format!("cold{i}"), "c");
            }
            db.commit(b).unwrap();
        }
        assert_eq!(db.version(), 100);
        // hot: 100 rows (versions 1..=100); cold keys: 10 creation rows.
        assert_eq!(history_rows(&db), 110);
        db.set_history_floor(90).unwrap();
        // Left: hot rows at versions 91..=100 and cold90's row at version 91.
        assert_eq!(history_rows(&db), 11);
    }
    // Replay re-creates the pruned rows in memory; they stay invisible.
    let db = Db::open(dir.path(), opts).unwrap();
    let t = db.tree("t").unwrap();
    assert_eq!(db.history_floor(), 90);
    assert_eq!(history_rows(&db), 11);
    let hot_row = |v: u64| {
        let mut k = vec![0x01, 0, 0, 0, 3];
        k.extend_from_slice(b"hot");
        k.extend_from_slice(&(!v).to_be_bytes());
        k
    };
    let hist = db.tree("history").unwrap();
    assert_eq!(hist.get(&hot_row(50)).unwrap(), None, "pruned row");
    assert_eq!(
        hist.get(&hot_row(95)).unwrap(),
        Some(b"\x0193".to_vec()),
        "kept row: kind 1, value 93"
    );
    assert_eq!(
        db.view_at(90).unwrap().get(&t, b"hot").unwrap(),
        Some(b"89".to_vec())
    );
    assert!(matches!(
        db.view_at(89),
        Err(Error::HistoryPruned {
            requested: 89,
            floor: 90
        })
    ));
    // Commits carry the rest of the sweep; the answers do not change.
    for i in 0..20 {
        let mut b = Batch::new();
        b.put(&t, format!("new{i}"), "n");
        db.commit(b).unwrap();
    }
    assert_eq!(history_rows(&db), 31);
    assert_eq!(
        db.view_at(95).unwrap().get(&t, b"hot").unwrap(),
        Some(b"94".to_vec())
    );
    db.checkpoint().unwrap();
    drop(db);
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(history_rows(&db), 31);
}

#[test]
fn floor_moves_interleave_with_concurrent_commits() {
    let db = Db::open_memory(Options::default()).unwrap();
    let t = db.create_tree("t", 0x01, true).unwrap();
    for i in 0..2000u32 {
        let mut b = Batch::new();
        b.put(&t, format!("k{:03}", i % 300), i.to_string());
        if i % 7 == 0 {
            b.delete(&t, format!("k{:03}", (i + 1) % 300));
        }
        db.commit(b).unwrap();
    }
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let db = db.clone();
            let t = t.clone();
            std::thread::spawn(move || {
                for i in 0..200u32 {
                    let mut b = Batch::new();
                    b.put(&t, format!("w{w}/{i:04}"), "x");
                    db.commit(b).unwrap();
                }
            })
        })
        .collect();
    let mut floors = Vec::new();
    for f in [500u64, 1000, 1500, 2000] {
        let want: Vec<Entry> = scan(&db.view_at(f).unwrap(), &t, &RangeSpec::with_prefix("k"));
        db.set_history_floor(f).unwrap();
        let got: Vec<Entry> = scan(&db.view_at(f).unwrap(), &t, &RangeSpec::with_prefix("k"));
        assert_eq!(got, want, "reads at the floor {f} change after pruning");
        floors.push(db.history_floor());
    }
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(floors, vec![500, 1000, 1500, 2000]);
    assert_eq!(db.version(), 2600);
    for w in 0..3 {
        let n = scan(&db.view(), &t, &RangeSpec::with_prefix(format!("w{w}/"))).len();
        assert_eq!(n, 200);
    }
    // Every history row left is newer than the floor.
    let hist = db.tree("history").unwrap();
    let versions: Vec<u64> = hist
        .range(&RangeSpec::all())
        .unwrap()
        .map(|e| match e.unwrap() {
            Entry::Key { key, .. } => {
                let tail: [u8; 8] = key[key.len() - 8..].try_into().unwrap();
                !u64::from_be_bytes(tail)
            }
            Entry::CommonPrefix(_) => unreachable!("no delimiter"),
        })
        .collect();
    assert!(!versions.is_empty());
    assert!(versions.iter().all(|&v| v > 2000), "{versions:?}");
}

#[test]
fn wait_visible_returns_true_for_visible_and_false_for_uncommitted_versions() {
    let db = Db::open_memory(Options::default()).unwrap();
    let t = db.create_tree("t", 0x01, false).unwrap();
    assert!(db
        .wait_visible(0, std::time::Duration::from_secs(0))
        .unwrap());
    let mut b = Batch::new();
    b.put(&t, "k", "v");
    let v = db.commit(b).unwrap();
    assert!(db
        .wait_visible(v, std::time::Duration::from_secs(0))
        .unwrap());
    assert!(!db
        .wait_visible(v + 1, std::time::Duration::from_millis(20))
        .unwrap());
}

#[test]
fn wait_visible_wakes_when_another_thread_commits_durably() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let t = db.create_tree("t", 0x01, false).unwrap();
    let started = Arc::new(std::sync::Barrier::new(2));
    let waiter = {
        let db = db.clone();
        let started = Arc::clone(&started);
        std::thread::spawn(move || {
            started.wait();
            let ok = db
                .wait_visible(3, std::time::Duration::from_secs(120))
                .unwrap();
            (ok, db.version(), db.view().version())
        })
    };
    started.wait();
    for i in 0..3 {
        let mut b = Batch::new();
        b.put(&t, format!("k{i}"), "v");
        db.commit(b).unwrap();
    }
    let (ok, version, view_version) = waiter.join().unwrap();
    assert!(ok);
    assert!(version >= 3 && view_version >= 3);
}
