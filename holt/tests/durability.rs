//! Reopen, torn tails, corruption, checkpoints, locking.

use std::fs;
use std::path::{Path, PathBuf};

use holt::{Batch, Db, Durability, Error, Options, RangeSpec};

fn opts() -> Options {
    Options::default()
}

/// Bytes of a WAL segment's header (`docs/holt-format.md`); records follow it.
const HEADER: usize = 24;

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    v.sort();
    v
}

/// The image files (`image-<first>-<last>.holt`) the store is served from.
fn checkpoints(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "holt"))
        .collect();
    v.sort();
    v
}

fn put(db: &Db, tree: &str, k: &str, v: &str) -> u64 {
    let t = db.tree(tree).unwrap();
    let mut b = Batch::new();
    b.put(&t, k, v);
    db.commit(b).unwrap()
}

fn snapshot_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn reopen_after_drop_restores_registry_data_version_and_floor() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        db.create_tree("system", 0xF0, false).unwrap();
        let v = db.create_tree("path_current", 0x03, true).unwrap();
        put(&db, "system", "format", "8");
        put(&db, "path_current", "a", "1");
        put(&db, "path_current", "a", "2");
        let mut b = Batch::new();
        b.delete(&v, "a");
        b.put(&v, "b", "3");
        db.commit(b).unwrap();
        db.set_history_floor(2).unwrap();
        assert_eq!(db.version(), 4);
        let stats = db.stats();
        assert_eq!(stats.commits, 4);
        assert!(stats.wal_syncs >= 7);
        assert_eq!(stats.last_lsn, 7);
    }
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.version(), 4);
    assert_eq!(db.history_floor(), 2);
    let names: Vec<(String, u8, bool)> = db
        .trees()
        .into_iter()
        .map(|t| (t.name, t.tag, t.versioned))
        .collect();
    assert_eq!(
        names,
        vec![
            ("history".to_string(), 0, false),
            ("path_current".to_string(), 3, true),
            ("system".to_string(), 0xF0, false),
        ]
    );
    let v = db.tree("path_current").unwrap();
    assert_eq!(v.get(b"a").unwrap(), None);
    assert_eq!(v.get(b"b").unwrap(), Some(b"3".to_vec()));
    assert_eq!(
        db.view_at(2).unwrap().get(&v, b"a").unwrap(),
        Some(b"1".to_vec())
    );
    assert_eq!(
        db.view_at(3).unwrap().get(&v, b"a").unwrap(),
        Some(b"2".to_vec())
    );
    assert!(matches!(db.view_at(1), Err(Error::HistoryPruned { .. })));
    assert_eq!(
        db.tree("system").unwrap().get(b"format").unwrap(),
        Some(b"8".to_vec())
    );
    assert_eq!(put(&db, "system", "x", "y"), 5);
}

#[test]
fn torn_tail_drops_exactly_the_last_commit() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        db.create_tree("t", 0x01, true).unwrap();
        for i in 1..=5 {
            put(&db, "t", &format!("k{i}"), "value");
        }
    }
    let seg = segments(dir.path()).pop().unwrap();
    let len = fs::metadata(&seg).unwrap().len();
    let f = fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(len - 3).unwrap();
    drop(f);
    let torn_len = len - 3;
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        assert_eq!(db.version(), 4);
        let t = db.tree("t").unwrap();
        assert_eq!(t.get(b"k4").unwrap(), Some(b"value".to_vec()));
        assert_eq!(t.get(b"k5").unwrap(), None);
        assert_eq!(
            fs::metadata(&seg).unwrap().len(),
            torn_len,
            "open must not truncate"
        );
        assert_eq!(put(&db, "t", "k5", "again"), 5);
    }
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.version(), 5);
    assert_eq!(
        db.tree("t").unwrap().get(b"k5").unwrap(),
        Some(b"again".to_vec())
    );
}

#[test]
fn corrupt_byte_in_an_earlier_record_fails_open_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        db.create_tree("t", 0x01, false).unwrap();
        for i in 1..=3 {
            put(&db, "t", &format!("key{i}"), "some value bytes");
        }
    }
    let seg = segments(dir.path()).pop().unwrap();
    let mut bytes = fs::read(&seg).unwrap();
    // After the segment header, the first record is the tree creation; flip a payload byte of
    // the second record.
    let first_len = u32::from_le_bytes(bytes[HEADER..HEADER + 4].try_into().unwrap()) as usize + 16;
    bytes[HEADER + first_len + 16 + 3] ^= 0x40;
    fs::write(&seg, &bytes).unwrap();
    let before = snapshot_files(dir.path());
    match Db::open(dir.path(), opts()) {
        Err(Error::Corrupt { file, offset, .. }) => {
            assert_eq!(file, seg);
            assert_eq!(offset, (HEADER + first_len) as u64);
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert_eq!(
        snapshot_files(dir.path()),
        before,
        "a refused open leaves the store byte-identical"
    );
}

#[test]
fn corrupt_length_field_before_valid_records_is_not_mistaken_for_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        db.create_tree("t", 0x01, false).unwrap();
        for i in 1..=3 {
            put(&db, "t", &format!("key{i}"), "v");
        }
    }
    let seg = segments(dir.path()).pop().unwrap();
    let mut bytes = fs::read(&seg).unwrap();
    bytes[HEADER + 2] = 0x7f; // first record's length now runs past end of file
    fs::write(&seg, &bytes).unwrap();
    assert!(matches!(
        Db::open(dir.path(), opts()),
        Err(Error::Corrupt { offset, .. }) if offset == HEADER as u64
    ));
}

#[test]
fn missing_segment_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        db.create_tree("t", 0x01, false).unwrap();
        put(&db, "t", "a", "1");
        db.checkpoint().unwrap();
        put(&db, "t", "b", "2");
        put(&db, "t", "c", "3");
    }
    // Remove the checkpoint: the WAL now lacks the records before it.
    for c in checkpoints(dir.path()) {
        fs::remove_file(c).unwrap();
    }
    assert!(matches!(
        Db::open(dir.path(), opts()),
        Err(Error::Corrupt { .. })
    ));
}

#[test]
fn checkpoint_then_more_commits_then_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        db.create_tree("t", 0x01, true).unwrap();
        db.create_tree("u", 0x02, false).unwrap();
        put(&db, "t", "a", "1");
        put(&db, "t", "a", "2");
        put(&db, "u", "x", "1");
        db.checkpoint().unwrap();
        assert_eq!(checkpoints(dir.path()).len(), 1);
        let wal = segments(dir.path());
        assert_eq!(
            wal.len(),
            1,
            "covered WAL is deleted, its successor exists: {wal:?}"
        );
        assert_eq!(fs::metadata(&wal[0]).unwrap().len(), HEADER as u64);
        put(&db, "t", "a", "3");
        put(&db, "u", "y", "2");
        db.create_tree("w", 0x03, false).unwrap();
        put(&db, "w", "z", "9");
        assert_eq!(db.stats().checkpoints, 1);
    }
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        assert_eq!(db.version(), 6);
        let t = db.tree("t").unwrap();
        assert_eq!(t.get(b"a").unwrap(), Some(b"3".to_vec()));
        assert_eq!(
            db.view_at(1).unwrap().get(&t, b"a").unwrap(),
            Some(b"1".to_vec())
        );
        assert_eq!(
            db.tree("w").unwrap().get(b"z").unwrap(),
            Some(b"9".to_vec())
        );
        db.checkpoint().unwrap();
        db.checkpoint().unwrap();
        assert_eq!(checkpoints(dir.path()).len(), 1);
        put(&db, "u", "after", "1");
    }
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.version(), 7);
    let u = db.tree("u").unwrap();
    let keys: Vec<_> = u.range(&RangeSpec::all()).unwrap().collect();
    assert_eq!(keys.len(), 3);
}

#[test]
fn automatic_checkpoint_after_wal_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        checkpoint_wal_bytes: 4096,
        durability: Durability::Buffered,
        ..Options::default()
    };
    {
        let db = Db::open(dir.path(), o).unwrap();
        db.create_tree("t", 0x01, true).unwrap();
        for i in 0..100u32 {
            put(&db, "t", &format!("k{:03}", i % 17), &"v".repeat(60));
        }
        // Automatic checkpoints run on the background thread; wait for it to settle.
        db.wait_checkpointer_idle();
        assert!(db.stats().checkpoints >= 1);
        assert_eq!(db.stats().checkpoint_failures, 0);
        assert_eq!(db.stats().wal_syncs, 0, "Buffered mode never fdatasyncs");
    }
    assert_eq!(checkpoints(dir.path()).len(), 1);
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(db.version(), 100);
    let t = db.tree("t").unwrap();
    assert_eq!(
        db.view_at(50).unwrap().get(&t, b"k015").unwrap(),
        Some("v".repeat(60).into_bytes())
    );
}

#[test]
fn torn_tail_then_checkpoint_leaves_a_clean_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        db.create_tree("t", 0x01, false).unwrap();
        put(&db, "t", "a", "1");
        put(&db, "t", "b", "2");
    }
    let seg = segments(dir.path()).pop().unwrap();
    let len = fs::metadata(&seg).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(len - 1)
        .unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        assert_eq!(db.version(), 1);
        db.checkpoint().unwrap();
        put(&db, "t", "c", "3");
    }
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.version(), 2);
    assert_eq!(
        db.tree("t").unwrap().get(b"c").unwrap(),
        Some(b"3".to_vec())
    );
}

#[test]
fn double_open_is_locked_until_last_clone_drops() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let clone = db.clone();
    match Db::open(dir.path(), opts()) {
        Err(Error::Locked { path }) => assert_eq!(path, dir.path().join("LOCK")),
        other => panic!("expected Locked, got {other:?}"),
    }
    drop(db);
    assert!(matches!(
        Db::open(dir.path(), opts()),
        Err(Error::Locked { .. })
    ));
    drop(clone);
    Db::open(dir.path(), opts()).unwrap();
}

#[test]
fn non_holt_directory_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("README"), "not a db").unwrap();
    let before = snapshot_files(dir.path());
    assert!(matches!(
        Db::open(dir.path(), opts()),
        Err(Error::Corrupt { .. })
    ));
    assert_eq!(snapshot_files(dir.path()), before);
}

#[test]
fn corrupt_checkpoint_block_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        db.create_tree("t", 0x01, false).unwrap();
        put(&db, "t", "a", "1");
        db.checkpoint().unwrap();
    }
    let ck = checkpoints(dir.path()).pop().unwrap();
    let mut bytes = fs::read(&ck).unwrap();
    let n = bytes.len();
    bytes[n - 30] ^= 1;
    fs::write(&ck, &bytes).unwrap();
    match Db::open(dir.path(), opts()) {
        Err(Error::Corrupt { file, .. }) => assert_eq!(file, ck),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn zero_filled_tail_after_last_record_is_treated_as_torn() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        db.create_tree("t", 0x01, false).unwrap();
        put(&db, "t", "a", "1");
    }
    let seg = segments(dir.path()).pop().unwrap();
    let mut bytes = fs::read(&seg).unwrap();
    bytes.extend_from_slice(&[0u8; 4096]);
    fs::write(&seg, &bytes).unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.version(), 1);
    assert_eq!(put(&db, "t", "b", "2"), 2);
    drop(db);
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.version(), 2);
}

#[test]
fn open_creates_a_missing_directory_and_memory_db_has_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("a").join("b");
    let db = Db::open(&nested, opts()).unwrap();
    assert!(nested.join("LOCK").is_file());
    assert!(nested.join("wal").is_dir());
    assert_eq!(db.version(), 0);
    assert!(!db.stats().in_memory);
    let mem = Db::open_memory(opts()).unwrap();
    mem.checkpoint().unwrap();
    let stats = mem.stats();
    assert!(stats.in_memory);
    assert_eq!(stats.wal_bytes, 0);
    assert_eq!(stats.wal_io, holt::WalIoPath::Blocking);
}

/// A store with tree `t` holding `dir/00000`..`dir/01999` (value `value-NNNNN-` × 8), all in
/// one image after a checkpoint; returns the open database.
fn store_of_2000_keys_in_one_image(dir: &Path) -> Db {
    let db = Db::open(dir, opts()).unwrap();
    let t = db.create_tree("t", 0x01, false).unwrap();
    let mut b = Batch::new();
    for i in 0..2000u32 {
        b.put(
            &t,
            format!("dir/{i:05}"),
            format!("value-{i:05}-").repeat(8),
        );
    }
    db.commit(b).unwrap();
    db.checkpoint().unwrap();
    db
}

/// Flips one byte inside the value of key `dir/01234` (a leaf block) of the image file `image`
/// written by [`store_of_2000_keys_in_one_image`]; returns the byte's offset in the file.
fn flip_a_byte_of_the_value_of_01234(image: &Path) -> usize {
    let mut bytes = fs::read(image).unwrap();
    let needle = "value-01234-".repeat(8).into_bytes();
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .unwrap()
        + 3;
    bytes[at] ^= 1;
    fs::write(image, &bytes).unwrap();
    at
}

#[test]
fn a_flipped_byte_in_an_image_block_fails_the_reads_that_touch_it_naming_file_and_block() {
    let dir = tempfile::tempdir().unwrap();
    drop(store_of_2000_keys_in_one_image(dir.path()));
    let image = checkpoints(dir.path()).pop().unwrap();
    let at = flip_a_byte_of_the_value_of_01234(&image);
    let block = at / 4096;

    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.tree("t").unwrap();
    match t.get(b"dir/01234") {
        Err(Error::Corrupt { file, reason, .. }) => {
            assert_eq!(file, image);
            assert_eq!(reason, format!("image block {block} CRC mismatch"));
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // A scan reaching that block fails the same way; keys in other blocks still read.
    let scan: Result<Vec<_>, _> = t
        .range(&RangeSpec::with_prefix("dir/012"))
        .unwrap()
        .collect();
    assert!(matches!(scan, Err(Error::Corrupt { .. })));
    assert_eq!(
        t.get(b"dir/00001").unwrap(),
        Some("value-00001-".repeat(8).into_bytes())
    );
    assert_eq!(
        t.get(b"dir/01999").unwrap(),
        Some("value-01999-".repeat(8).into_bytes())
    );
}

#[test]
fn scrub_checks_every_image_block_and_names_each_damaged_one() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = store_of_2000_keys_in_one_image(dir.path());
        let clean = db.scrub();
        assert_eq!(clean.images, 1);
        assert!(clean.blocks > 20, "{clean:?}");
        assert!(clean.damaged.is_empty(), "{clean:?}");
    }
    let image = checkpoints(dir.path()).pop().unwrap();
    let good = fs::read(&image).unwrap();
    // Two leaf blocks no open and no read below touches.
    let mut bytes = good.clone();
    let mut blocks = Vec::new();
    for key in ["value-00100-", "value-01500-"] {
        let needle = key.repeat(8).into_bytes();
        let at = bytes
            .windows(needle.len())
            .position(|w| w == needle.as_slice())
            .unwrap();
        bytes[at + 5] ^= 0x20;
        blocks.push(at / 4096);
    }
    assert_ne!(blocks[0], blocks[1]);
    fs::write(&image, &bytes).unwrap();
    for read_only in [false, true] {
        let db = if read_only {
            Db::open_read_only(dir.path(), opts()).unwrap()
        } else {
            Db::open(dir.path(), opts()).unwrap()
        };
        assert_eq!(
            db.tree("t").unwrap().get(b"dir/00007").unwrap(),
            Some("value-00007-".repeat(8).into_bytes()),
            "other blocks still read"
        );
        let report = db.scrub();
        let found: Vec<(PathBuf, String)> = report
            .damaged
            .iter()
            .map(|e| match e {
                Error::Corrupt { file, reason, .. } => (file.clone(), reason.clone()),
                other => panic!("expected Corrupt, got {other:?}"),
            })
            .collect();
        let want: Vec<(PathBuf, String)> = blocks
            .iter()
            .map(|b| (image.clone(), format!("image block {b} CRC mismatch")))
            .collect();
        assert_eq!(found, want, "read_only {read_only}");
        // Scrubbing again reports the same damage (bad blocks are never marked checked).
        assert_eq!(db.scrub().damaged.len(), 2);
    }
    // A damaged CRC table page is one report, not one per block it covers.
    let mut bytes = good;
    let n = bytes.len();
    let nblocks = (n as u64 - 64) / 4100;
    let table = (nblocks * 4096) as usize;
    bytes[table + 2] ^= 1;
    fs::write(&image, &bytes).unwrap();
    // (The open reads the meta record, so it may meet the page first.)
    let page_damage = |e: &Error| matches!(e, Error::Corrupt { reason, .. } if reason.contains("CRC table page 0"));
    match Db::open(dir.path(), opts()) {
        Ok(db) => {
            let report = db.scrub();
            assert_eq!(report.damaged.len(), 1, "{report:?}");
            assert!(page_damage(&report.damaged[0]), "{report:?}");
        }
        Err(e) => assert!(page_damage(&e), "{e:?}"),
    }
}

/// A store with `t` = {a, b} in an image (checkpoint at LSN 3) and {c, d} only in the WAL
/// segment after it (LSN 4 and 5); returns that segment.
fn store_with_records_after_a_checkpoint(dir: &Path) -> PathBuf {
    let db = Db::open(dir, opts()).unwrap();
    db.create_tree("t", 0x01, false).unwrap();
    put(&db, "t", "a", "1");
    put(&db, "t", "b", "2");
    db.checkpoint().unwrap();
    put(&db, "t", "c", "3");
    put(&db, "t", "d", "4");
    drop(db);
    let wal = segments(dir);
    assert_eq!(wal.len(), 1, "{wal:?}");
    assert!(wal[0].ends_with("wal/00000000000000000004.wal"), "{wal:?}");
    wal[0].clone()
}

/// Both openers refuse the store with `Corrupt` naming `file` and a reason containing
/// `needle`, and neither changes a byte.
fn refused_by_every_opener(dir: &Path, file: &Path, needle: &str) {
    let before = snapshot_files(dir);
    for (opener, result) in [
        ("writer", Db::open(dir, opts())),
        ("read-only", Db::open_read_only(dir, opts())),
    ] {
        match result {
            Err(Error::Corrupt {
                file: f, reason, ..
            }) => {
                assert_eq!(f, file, "{opener}: {reason}");
                assert!(reason.contains(needle), "{opener}: {reason}");
            }
            other => panic!("{opener}: expected Corrupt, got {other:?}"),
        }
    }
    assert_eq!(
        snapshot_files(dir),
        before,
        "a refused open changes nothing"
    );
}

#[test]
fn a_deleted_segment_after_a_checkpoint_is_reported_not_silently_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let seg = store_with_records_after_a_checkpoint(dir.path());
    fs::remove_file(&seg).unwrap();
    refused_by_every_opener(dir.path(), &seg, "missing WAL segment");
}

#[test]
fn an_emptied_segment_is_reported_after_a_checkpoint_and_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let seg = store_with_records_after_a_checkpoint(dir.path());
    fs::File::create(&seg).unwrap();
    refused_by_every_opener(dir.path(), &seg, "no header");

    // No checkpoint yet: the store's only segment, emptied.
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        db.create_tree("t", 0x01, false).unwrap();
        put(&db, "t", "a", "1");
    }
    let seg = segments(dir.path()).pop().unwrap();
    fs::File::create(&seg).unwrap();
    refused_by_every_opener(dir.path(), &seg, "no header");
    // Deleted instead of emptied.
    fs::remove_file(&seg).unwrap();
    refused_by_every_opener(dir.path(), &seg, "missing WAL segment");
}

#[test]
fn a_segment_overwritten_from_its_start_or_with_a_damaged_header_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let seg = store_with_records_after_a_checkpoint(dir.path());
    let good = fs::read(&seg).unwrap();
    let mut bad = good.clone();
    bad[..HEADER].fill(0);
    fs::write(&seg, &bad).unwrap();
    refused_by_every_opener(dir.path(), &seg, "no header");
    for i in 8..HEADER {
        let mut bad = good.clone();
        bad[i] ^= 0x04;
        fs::write(&seg, &bad).unwrap();
        refused_by_every_opener(dir.path(), &seg, "header");
    }
    fs::write(&seg, &good).unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.version(), 4);
}

#[test]
fn a_store_format_newer_than_this_holt_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    store_with_records_after_a_checkpoint(dir.path());
    fs::write(dir.path().join("FORMAT"), "holt store format 7\n").unwrap();
    let before = snapshot_files(dir.path());
    for result in [
        Db::open(dir.path(), opts()),
        Db::open_read_only(dir.path(), opts()),
    ] {
        match result {
            Err(Error::Unsupported(m)) => assert!(m.contains("format 7"), "{m}"),
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }
    assert_eq!(snapshot_files(dir.path()), before);
}

#[test]
fn a_lost_format_marker_loses_nothing_and_the_writer_restores_it() {
    let dir = tempfile::tempdir().unwrap();
    store_with_records_after_a_checkpoint(dir.path());
    fs::remove_file(dir.path().join("FORMAT")).unwrap();
    {
        let db = Db::open_read_only(dir.path(), opts()).unwrap();
        assert_eq!(db.version(), 4);
    }
    assert!(
        !dir.path().join("FORMAT").exists(),
        "read-only writes nothing"
    );
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        assert_eq!(db.version(), 4);
        assert_eq!(
            db.tree("t").unwrap().get(b"d").unwrap(),
            Some(b"4".to_vec())
        );
    }
    assert_eq!(
        fs::read_to_string(dir.path().join("FORMAT")).unwrap(),
        "holt store format 2\n"
    );
    // Strict again: the segment after the images must exist.
    let seg = segments(dir.path()).pop().unwrap();
    fs::remove_file(&seg).unwrap();
    assert!(matches!(
        Db::open(dir.path(), opts()),
        Err(Error::Corrupt { .. })
    ));
}

#[test]
fn a_lost_format_marker_together_with_the_segment_is_still_reported_through_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let seg = store_with_records_after_a_checkpoint(dir.path());
    fs::remove_file(dir.path().join("FORMAT")).unwrap();
    fs::remove_file(&seg).unwrap();
    // The newest image was written by a format-2 store: its successor segment must exist.
    refused_by_every_opener(dir.path(), &seg, "missing WAL segment");
    assert!(!dir.path().join("FORMAT").exists());
}

#[test]
fn a_segment_creation_interrupted_before_its_rename_leaves_a_tmp_that_is_ignored_then_removed() {
    let dir = tempfile::tempdir().unwrap();
    let seg = store_with_records_after_a_checkpoint(dir.path());
    // What a crash between writing the header and the rename leaves (any bytes).
    let stale = dir.path().join("wal/00000000000000000004.wal.tmp");
    fs::write(&stale, b"HOLTWAL2 torn").unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        assert_eq!(db.version(), 4);
        put(&db, "t", "e", "5");
        db.checkpoint().unwrap();
    }
    assert!(!stale.exists(), "the checkpoint covering it removed it");
    assert!(!seg.exists());
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.version(), 5);
}

/// The `.tmp` files (of images, WAL segments and legacy checkpoints) under `dir`.
fn tmp_files(dir: &Path) -> Vec<PathBuf> {
    snapshot_files(dir)
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p.extension().is_some_and(|e| e == "tmp"))
        .collect()
}

#[test]
fn a_background_merge_that_meets_a_damaged_block_is_counted_leaves_no_tmp_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    drop(store_of_2000_keys_in_one_image(dir.path()));
    // Damage the leaf block holding the value of dir/01234: a merge into a new base reads it.
    flip_a_byte_of_the_value_of_01234(&checkpoints(dir.path()).pop().unwrap());

    let o = Options {
        checkpoint_wal_bytes: 4096,
        durability: Durability::Buffered,
        ..Options::default()
    };
    let written = {
        let db = Db::open(dir.path(), o).unwrap();
        let t = db.tree("t").unwrap();
        // Small flushes pile up above the base until they reach half of it and the policy
        // merges everything into a new base, which must read the damaged block. Bounded: the
        // base is under 1 MiB, so far fewer than 2,000 commits of 1 KiB reach that.
        let mut written = 0u32;
        while db.stats().checkpoint_failures == 0 && written < 2000 {
            let mut b = Batch::new();
            b.put(&t, format!("new/{written:05}"), vec![b'n'; 1024]);
            db.commit(b).unwrap();
            written += 1;
            if written.is_multiple_of(16) {
                db.wait_checkpointer_idle();
            }
        }
        db.wait_checkpointer_idle();
        let stats = db.stats();
        assert!(stats.checkpoint_failures >= 1, "{stats:?}");
        let err = stats.last_checkpoint_error.clone().unwrap();
        assert!(err.contains("CRC mismatch"), "{err}");
        assert!(stats.images >= 2, "the flushes were installed: {stats:?}");
        assert_eq!(tmp_files(dir.path()), Vec::<PathBuf>::new());
        // Writes still succeed and every acknowledged key reads, except through the damaged
        // block.
        put(&db, "t", "after", "failure");
        for i in 0..written {
            assert_eq!(
                t.get(format!("new/{i:05}").as_bytes()).unwrap(),
                Some(vec![b'n'; 1024])
            );
        }
        assert_eq!(
            t.get(b"dir/00001").unwrap(),
            Some("value-00001-".repeat(8).into_bytes())
        );
        assert!(matches!(t.get(b"dir/01234"), Err(Error::Corrupt { .. })));
        // A manual checkpoint meets the same block: a typed error, and no `.tmp` either.
        assert!(matches!(db.checkpoint(), Err(Error::Corrupt { .. })));
        assert_eq!(tmp_files(dir.path()), Vec::<PathBuf>::new());
        written
    };
    // Nothing acknowledged was lost: the reopened store has every write.
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.tree("t").unwrap();
    assert_eq!(t.get(b"after").unwrap(), Some(b"failure".to_vec()));
    assert_eq!(
        t.get(format!("new/{:05}", written - 1).as_bytes()).unwrap(),
        Some(vec![b'n'; 1024])
    );
    assert_eq!(
        t.get(b"dir/01999").unwrap(),
        Some("value-01999-".repeat(8).into_bytes())
    );
}

#[test]
fn a_stale_image_tmp_is_ignored_by_every_opener_and_removed_by_the_next_flush() {
    let dir = tempfile::tempdir().unwrap();
    store_with_records_after_a_checkpoint(dir.path());
    // What a failed or interrupted image write of an older version left: an empty `.tmp`.
    let stale = dir
        .path()
        .join("image-00000000000000000001-00000000000000000005.tmp");
    fs::write(&stale, b"").unwrap();
    assert_eq!(Db::open_read_only(dir.path(), opts()).unwrap().version(), 4);
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.version(), 4);
    assert!(stale.exists(), "open modifies no file");
    put(&db, "t", "e", "5");
    db.flush().unwrap();
    assert_eq!(tmp_files(dir.path()), Vec::<PathBuf>::new());
    assert_eq!(
        db.tree("t").unwrap().get(b"e").unwrap(),
        Some(b"5".to_vec())
    );
}
