//! Unit tests of `LocalDir` on the real file system, in both durability modes.

use super::*;
use std::fs;

/// Every directory under `root`, relative, sorted.
fn dirs_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                out.push(e.path().strip_prefix(root).unwrap().display().to_string());
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

const MODES: [ObjectSync; 2] = [ObjectSync::Syncfs, ObjectSync::PerFile];

fn open_in(root: &Path, sync: ObjectSync) -> LocalDir {
    LocalDir::open_with(root, LocalOptions { sync }).unwrap()
}

#[test]
fn delete_removes_the_directories_it_empties_up_to_the_root() {
    for mode in MODES {
        let root = tempfile::tempdir().unwrap();
        let store = open_in(root.path(), mode);
        store.put("a/b/c/k1", b"1").unwrap();
        store.put("a/b/c/k2", b"2").unwrap();
        store.put("a/x/k3", b"3").unwrap();
        // Every directory a put created was made durable before it returned.
        assert!(store.unsynced().is_empty());

        store.delete("a/b/c/k1").unwrap();
        assert_eq!(dirs_under(root.path()), ["a", "a/b", "a/b/c", "a/x"]);
        // The last object of a directory takes the directories it emptied with it.
        store.delete("a/b/c/k2").unwrap();
        assert_eq!(dirs_under(root.path()), ["a", "a/x"]);
        store.delete("a/x/k3").unwrap();
        assert!(dirs_under(root.path()).is_empty());
        assert!(root.path().is_dir(), "the root itself stays");
        // Deleting what is already gone is still fine, and the tree can grow again; the
        // recreated directories are synced again: per file, `a/b/c` for the new entry and
        // the parents of the three directories the put created (`a/b`, `a`, the root).
        store.delete("a/x/k3").unwrap();
        let before = store.stats();
        store.put("a/b/c/k1", b"again").unwrap();
        let after = store.stats();
        assert_eq!(store.get("a/b/c/k1").unwrap(), b"again");
        assert_eq!(store.list("a/").unwrap(), ["a/b/c/k1"]);
        assert!(store.unsynced().is_empty());
        match mode {
            ObjectSync::PerFile => {
                assert_eq!(after.dir_fsyncs - before.dir_fsyncs, 4);
                assert_eq!(after.file_fsyncs - before.file_fsyncs, 1);
                assert_eq!(after.syncfs_calls, 0);
            }
            ObjectSync::Syncfs => {
                // One flush before the rename, one after; no fsync of any file or directory.
                assert_eq!(after.flush_waits - before.flush_waits, 2);
                assert_eq!(after.dir_fsyncs, 0);
                assert_eq!(after.file_fsyncs, 0);
            }
        }
    }
}

#[test]
fn a_temp_file_or_another_object_keeps_its_directory() {
    let root = tempfile::tempdir().unwrap();
    let store = LocalDir::open(root.path()).unwrap();
    store.put("r/blocks/0", b"0").unwrap();
    // A foreign temp file (another key's upload in flight) is not removed by this delete.
    let foreign =
        root.path()
            .join("r/blocks")
            .join(format!("{}{}", temp_stem("r/blocks/9"), "0".repeat(32)));
    fs::write(&foreign, b"partial").unwrap();
    store.delete("r/blocks/0").unwrap();
    assert!(foreign.is_file());
    assert_eq!(dirs_under(root.path()), ["r", "r/blocks"]);
}

#[test]
fn puts_and_deletes_racing_in_one_directory_never_fail() {
    for mode in MODES {
        let root = tempfile::tempdir().unwrap();
        let store = open_in(root.path(), mode);
        std::thread::scope(|s| {
            for t in 0..4 {
                let store = &store;
                s.spawn(move || {
                    for n in 0..150 {
                        // Every thread empties the shared directories again and again while the
                        // others create files in them.
                        let key = format!("nokv/artifacts/rev/blocks/{t}-{n}");
                        store.put(&key, b"x").unwrap();
                        if n % 3 == 0 {
                            assert_eq!(
                                store.put_if_absent(&key, b"x").unwrap(),
                                PutOutcome::AlreadyExists
                            );
                        }
                        assert_eq!(store.get(&key).unwrap(), b"x");
                        store.delete(&key).unwrap();
                    }
                    // One object per thread stays.
                    let key = format!("nokv/artifacts/rev/blocks/{t}-last");
                    assert_eq!(
                        store.put_if_absent(&key, b"y").unwrap(),
                        PutOutcome::Created
                    );
                });
            }
        });
        assert_eq!(store.list("nokv/").unwrap().len(), 4);
        for t in 0..4 {
            store
                .delete(&format!("nokv/artifacts/rev/blocks/{t}-last"))
                .unwrap();
        }
        assert!(dirs_under(root.path()).is_empty());
    }
}

#[test]
fn delete_removes_the_keys_own_leftover_temp_files_and_no_others() {
    let root = tempfile::tempdir().unwrap();
    let store = LocalDir::open(root.path()).unwrap();
    let dir = root.path().join("nokv/artifacts/s/r/rev/blocks");
    fs::create_dir_all(&dir).unwrap();
    // What a writer of block 3 killed before its rename leaves behind, next to an
    // in-flight temp of block 4 and a published block 5.
    let dead = dir.join(format!(
        "{}{}",
        temp_stem("nokv/artifacts/s/r/rev/blocks/3"),
        "0".repeat(32)
    ));
    let other = dir.join(format!(
        "{}{}",
        temp_stem("nokv/artifacts/s/r/rev/blocks/4"),
        "1".repeat(32)
    ));
    fs::write(&dead, b"partial").unwrap();
    fs::write(&other, b"partial").unwrap();
    store
        .put("nokv/artifacts/s/r/rev/blocks/5", b"kept")
        .unwrap();

    store.delete("nokv/artifacts/s/r/rev/blocks/3").unwrap();

    assert!(!dead.exists(), "the deleted key's temp file is gone");
    assert!(other.exists(), "another key's temp file is untouched");
    assert_eq!(
        store.get("nokv/artifacts/s/r/rev/blocks/5").unwrap(),
        b"kept".to_vec()
    );
}

#[test]
fn both_modes_put_get_overwrite_and_delete() {
    for mode in MODES {
        let root = tempfile::tempdir().unwrap();
        let store = open_in(&root.path().join("objects"), mode);
        assert_eq!(store.sync_mode(), mode);
        let key = "nokv/artifacts/s/r/rev/blocks/0";
        assert_eq!(
            store.put_if_absent(key, b"first").unwrap(),
            PutOutcome::Created
        );
        assert_eq!(
            store.put_if_absent(key, b"second").unwrap(),
            PutOutcome::AlreadyExists
        );
        assert_eq!(store.get(key).unwrap(), b"first");
        store.put(key, b"replaced").unwrap();
        assert_eq!(store.get_range(key, 2, 3).unwrap(), b"pla");
        store.delete(key).unwrap();
        assert_eq!(store.head(key).unwrap(), None);
        assert!(dirs_under(&root.path().join("objects")).is_empty());
        // Reopened, the provider reads what the first one wrote.
        store.put("k", b"v").unwrap();
        drop(store);
        let again = open_in(&root.path().join("objects"), mode);
        assert_eq!(again.get("k").unwrap(), b"v");
    }
}

#[test]
fn opening_an_existing_root_costs_no_flush() {
    for mode in MODES {
        let root = tempfile::tempdir().unwrap();
        let created = open_in(&root.path().join("a/objects"), mode);
        let s = created.stats();
        match mode {
            // `a` and `a/objects` were created: their entries are made durable.
            ObjectSync::PerFile => assert_eq!((s.dir_fsyncs, s.syncfs_calls), (3, 0)),
            ObjectSync::Syncfs => assert_eq!((s.dir_fsyncs, s.syncfs_calls), (0, 1)),
        }
        let reopened = open_in(&root.path().join("a/objects"), mode);
        assert_eq!(reopened.stats(), LocalStats::default());
    }
}

#[test]
fn a_new_process_first_put_syncs_only_what_it_created() {
    // What a one-shot `nokv` process pays: the store's directories exist from earlier runs.
    let root = tempfile::tempdir().unwrap();
    let objects = root.path().join("objects");
    open_in(&objects, ObjectSync::PerFile)
        .put_if_absent("nokv/artifacts/s/r/rev1/blocks/0", b"earlier")
        .unwrap();

    // Per file: a new revision creates `rev2` and `rev2/blocks`: the file, `blocks` (its
    // entry), `rev2` and `r` (the parents of the two new directories); nothing above `r`.
    let store = open_in(&objects, ObjectSync::PerFile);
    store
        .put_if_absent("nokv/artifacts/s/r/rev2/blocks/0", b"new revision")
        .unwrap();
    let s = store.stats();
    assert_eq!((s.file_fsyncs, s.dir_fsyncs), (1, 3));
    // Another block of an existing revision: the file and its directory only.
    let store = open_in(&objects, ObjectSync::PerFile);
    store
        .put_if_absent("nokv/artifacts/s/r/rev2/blocks/1", b"same revision")
        .unwrap();
    let s = store.stats();
    assert_eq!((s.file_fsyncs, s.dir_fsyncs), (1, 1));

    // Group flush: one syncfs, no fsync at all.
    let store = open_in(&objects, ObjectSync::Syncfs);
    store
        .put_if_absent("nokv/artifacts/s/r/rev3/blocks/0", b"grouped")
        .unwrap();
    let s = store.stats();
    assert_eq!(
        (s.syncfs_calls, s.flush_waits, s.file_fsyncs, s.dir_fsyncs),
        (1, 1, 0, 0)
    );
    assert_eq!(
        store.get("nokv/artifacts/s/r/rev2/blocks/0").unwrap(),
        b"new revision"
    );
}

#[test]
fn a_directory_another_writer_created_and_has_not_synced_is_synced_by_its_user() {
    let root = tempfile::tempdir().unwrap();
    let store = open_in(root.path(), ObjectSync::PerFile);
    // Writer A has created `r` and `r/blocks` and not yet made them durable.
    let mut a = store.new_dirs();
    store
        .make_dirs(&root.path().join("r/blocks"), &mut a)
        .unwrap();
    assert_eq!(a.created.len(), 2);

    // Writer B finds both there: it syncs `r/blocks` for its entry, and `r` and the root for
    // A's directories, before it returns.
    let before = store.stats().dir_fsyncs;
    assert_eq!(
        store.put_if_absent("r/blocks/1", b"b").unwrap(),
        PutOutcome::Created
    );
    assert_eq!(store.stats().dir_fsyncs - before, 3);

    // Once A has made them durable, a user of the directory syncs only its own entry.
    store
        .make_durable("r/blocks/0", &root.path().join("r/blocks"), &mut a)
        .unwrap();
    drop(a);
    assert!(store.unsynced().is_empty());
    let before = store.stats().dir_fsyncs;
    store.put_if_absent("r/blocks/2", b"c").unwrap();
    assert_eq!(store.stats().dir_fsyncs - before, 1);
}

#[test]
fn a_writer_whose_sync_failed_leaves_its_directories_to_be_synced_by_others() {
    let root = tempfile::tempdir().unwrap();
    let store = open_in(root.path(), ObjectSync::PerFile);
    let mut a = store.new_dirs();
    store
        .make_dirs(&root.path().join("r/blocks"), &mut a)
        .unwrap();
    // A fails before making them durable (dropped without `make_durable`).
    drop(a);
    assert_eq!(store.unsynced().len(), 2);
    let before = store.stats().dir_fsyncs;
    store.put_if_absent("r/blocks/1", b"b").unwrap();
    assert_eq!(store.stats().dir_fsyncs - before, 3);
}

#[test]
fn sixteen_writers_share_syncfs_flushes() {
    let root = tempfile::tempdir().unwrap();
    let store = open_in(root.path(), ObjectSync::Syncfs);
    let (threads, each) = (16u64, 25u64);
    let block = |t: u64, i: u64| {
        crate::keys::block_key(&[1; 16], &[2; 16], &[(t % 4) as u8; 16], t * 1000 + i)
    };
    let body = |t: u64, i: u64| format!("writer {t} block {i} ").repeat(200).into_bytes();
    std::thread::scope(|s| {
        for t in 0..threads {
            let store = &store;
            s.spawn(move || {
                for i in 0..each {
                    assert_eq!(
                        store.put_if_absent(&block(t, i), &body(t, i)).unwrap(),
                        PutOutcome::Created
                    );
                }
            });
        }
    });
    for t in 0..threads {
        for i in 0..each {
            assert_eq!(store.get(&block(t, i)).unwrap(), body(t, i));
        }
    }
    let puts = threads * each;
    let s = store.stats();
    assert_eq!(s.flush_waits, puts);
    assert_eq!((s.file_fsyncs, s.dir_fsyncs), (0, 0));
    println!(
        "{puts} puts from {threads} writers: {} syncfs calls ({:.1} puts per flush)",
        s.syncfs_calls,
        puts as f64 / s.syncfs_calls.max(1) as f64
    );
    assert!(
        s.syncfs_calls < puts,
        "{} syncfs calls for {puts} puts",
        s.syncfs_calls
    );
}
