//! `Db::open_read_only` — the contract every holt engine keeps:
//!
//! - the state is the directory's newest checkpoint plus its complete WAL records **as of the
//!   open**; later commits of the writer are not seen until the next open;
//! - no lock is taken: any number of read-only databases share a directory with its writer;
//! - nothing is written: the directory's files stay byte-identical (a torn WAL tail is left
//!   alone), and the open needs only read permission;
//! - every write (`commit`, `create_tree`, `set_history_floor`, `checkpoint`) answers
//!   `Error::ReadOnly`;
//! - a writer that installs checkpoints and drops WAL segments during the open never makes it
//!   fail or see a mixed state; damage that stays is `Error::Corrupt`.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use holt::{Batch, Db, Error, Options, RangeSpec};

fn put(db: &Db, tree: &str, k: &str, v: &str) -> u64 {
    let t = db.tree(tree).unwrap();
    let mut b = Batch::new();
    b.put(&t, k, v);
    db.commit(b).unwrap()
}

fn get(db: &Db, tree: &str, k: &str) -> Option<Vec<u8>> {
    db.tree(tree).unwrap().get(k.as_bytes()).unwrap()
}

/// Every file under `dir` with its bytes, length and modification time.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>, i64, i64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let md = fs::metadata(&p).unwrap();
            if md.is_dir() {
                stack.push(p);
            } else {
                out.push((
                    p.clone(),
                    fs::read(&p).unwrap(),
                    md.mtime(),
                    md.mtime_nsec(),
                ));
            }
        }
    }
    out.sort();
    out
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    v.sort();
    v
}

fn writer_with_data(dir: &Path) -> Db {
    let db = Db::open(dir, Options::default()).unwrap();
    db.create_tree("t", 1, true).unwrap();
    put(&db, "t", "a", "1");
    put(&db, "t", "b", "2");
    db
}

#[test]
fn a_read_only_open_sees_the_state_as_of_its_open() {
    let dir = tempfile::tempdir().unwrap();
    let writer = writer_with_data(dir.path());
    let reader = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert_eq!(reader.version(), 2);
    assert_eq!(get(&reader, "t", "a").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&reader, "t", "b").as_deref(), Some(&b"2"[..]));

    put(&writer, "t", "a", "changed");
    put(&writer, "t", "c", "3");
    // The first reader stays at its open; a new one sees the newer state.
    assert_eq!(reader.version(), 2);
    assert_eq!(get(&reader, "t", "a").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&reader, "t", "c"), None);
    let later = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert_eq!(later.version(), 4);
    assert_eq!(get(&later, "t", "a").as_deref(), Some(&b"changed"[..]));
    assert_eq!(get(&later, "t", "c").as_deref(), Some(&b"3"[..]));
    assert!(later.stats().read_only);
    assert!(!later.stats().in_memory);
    assert!(!writer.stats().read_only);
}

#[test]
fn read_only_opens_share_the_directory_with_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let writer = writer_with_data(dir.path());
    let r1 = Db::open_read_only(dir.path(), Options::default()).unwrap();
    let r2 = Db::open_read_only(dir.path(), Options::default()).unwrap();
    // The writer keeps its exclusive lock against other writers and keeps committing.
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));
    assert_eq!(put(&writer, "t", "d", "4"), 3);
    assert_eq!(r1.version(), 2);
    assert_eq!(r2.version(), 2);
    drop(writer);
    // Readers do not hold the lock: a new writer opens while they are alive.
    let w2 = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(w2.version(), 3);
    assert_eq!(get(&r1, "t", "a").as_deref(), Some(&b"1"[..]));
}

#[test]
fn every_write_of_a_read_only_database_answers_read_only() {
    let dir = tempfile::tempdir().unwrap();
    drop(writer_with_data(dir.path()));
    let before = files(dir.path());
    let db = Db::open_read_only(dir.path(), Options::default()).unwrap();
    let t = db.tree("t").unwrap();
    let mut b = Batch::new();
    b.put(&t, "x", "y");
    assert!(matches!(
        db.commit(b),
        Err(Error::ReadOnly { op: "commit" })
    ));
    assert!(matches!(
        db.create_tree("u", 2, false),
        Err(Error::ReadOnly { op: "create_tree" })
    ));
    assert!(matches!(
        db.set_history_floor(1),
        Err(Error::ReadOnly {
            op: "set_history_floor"
        })
    ));
    assert!(matches!(
        db.checkpoint(),
        Err(Error::ReadOnly { op: "checkpoint" })
    ));
    assert_eq!(db.version(), 2);
    assert_eq!(db.history_floor(), 0);
    assert!(db.tree("u").is_none());
    assert_eq!(get(&db, "t", "x"), None);
    drop(db);
    assert_eq!(files(dir.path()), before);
}

#[test]
fn a_read_only_open_writes_nothing_and_leaves_a_torn_tail_alone() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = writer_with_data(dir.path());
        db.checkpoint().unwrap();
        put(&db, "t", "after", "ckpt");
    }
    // A torn final record: a header promising more payload than the file holds.
    let seg = segments(dir.path()).pop().unwrap();
    let mut bytes = fs::read(&seg).unwrap();
    bytes.extend_from_slice(&[200, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5]);
    fs::write(&seg, &bytes).unwrap();
    let before = files(dir.path());
    std::thread::sleep(Duration::from_millis(20));
    {
        let db = Db::open_read_only(dir.path(), Options::default()).unwrap();
        assert_eq!(db.version(), 3);
        assert_eq!(get(&db, "t", "after").as_deref(), Some(&b"ckpt"[..]));
        let listing: Vec<_> = db
            .tree("t")
            .unwrap()
            .range(&RangeSpec::all())
            .unwrap()
            .collect::<holt::Result<_>>()
            .unwrap();
        assert_eq!(listing.len(), 3);
    }
    assert_eq!(files(dir.path()), before, "a read-only open changed a file");
    // The writer still owns the torn tail and cuts it at its first write.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(put(&db, "t", "z", "1"), 4);
}

#[test]
fn a_read_only_open_of_a_missing_or_foreign_directory_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent");
    assert!(matches!(
        Db::open_read_only(&missing, Options::default()),
        Err(Error::Io { .. })
    ));
    assert!(!missing.exists());
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    assert!(matches!(
        Db::open_read_only(&empty, Options::default()),
        Err(Error::Corrupt { .. })
    ));
    assert_eq!(fs::read_dir(&empty).unwrap().count(), 0);
}

#[test]
fn a_read_only_database_reads_mvcc_history_down_to_the_floor() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = writer_with_data(dir.path());
        put(&db, "t", "a", "v3");
        put(&db, "t", "a", "v4");
        db.set_history_floor(2).unwrap();
    }
    let db = Db::open_read_only(dir.path(), Options::default()).unwrap();
    let t = db.tree("t").unwrap();
    assert_eq!(
        db.view_at(3).unwrap().get(&t, b"a").unwrap().unwrap(),
        b"v3"
    );
    assert_eq!(db.view_at(2).unwrap().get(&t, b"a").unwrap().unwrap(), b"1");
    assert_eq!(db.view().get(&t, b"a").unwrap().unwrap(), b"v4");
    assert!(matches!(
        db.view_at(1),
        Err(Error::HistoryPruned {
            requested: 1,
            floor: 2
        })
    ));
}

#[test]
fn damage_before_the_tail_fails_a_read_only_open() {
    let dir = tempfile::tempdir().unwrap();
    drop(writer_with_data(dir.path()));
    let seg = segments(dir.path()).pop().unwrap();
    let mut bytes = fs::read(&seg).unwrap();
    // Flip a payload byte of the first record (the tree creation); later records still
    // validate, so this is damage, not a torn tail.
    bytes[20] ^= 0x40;
    fs::write(&seg, &bytes).unwrap();
    match Db::open_read_only(dir.path(), Options::default()) {
        Err(Error::Corrupt { file, .. }) => assert_eq!(file, seg),
        Err(other) => panic!("expected Corrupt, got {other:?}"),
        Ok(_) => panic!("a damaged WAL opened"),
    }
}

/// A writer commits `a = b = i` in every batch with a tiny checkpoint threshold, so it installs
/// checkpoints and drops WAL segments all the time; read-only opens racing with it always
/// succeed, see `a == b`, and never go back in time.
#[test]
fn a_read_only_open_tolerates_checkpoints_and_segment_drops_of_a_concurrent_writer() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        durability: holt::Durability::Buffered,
        checkpoint_wal_bytes: 2048,
        ..Options::default()
    };
    let writer = Db::open(dir.path(), opts).unwrap();
    writer.create_tree("t", 1, false).unwrap();
    put(&writer, "t", "a", "0");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let committed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let w = {
        let (writer, stop, committed) = (writer.clone(), stop.clone(), committed.clone());
        std::thread::spawn(move || {
            let t = writer.tree("t").unwrap();
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                committed.store(i, std::sync::atomic::Ordering::Relaxed);
                let mut b = Batch::new();
                let v = format!("{i:0>200}");
                b.put(&t, "a", v.as_bytes());
                b.put(&t, "b", v.as_bytes());
                writer.commit(b).unwrap();
                if i.is_multiple_of(16) {
                    writer.checkpoint().unwrap();
                }
            }
            i
        })
    };
    // Until 400 opens raced at least 64 commits (several checkpoints and segment drops); on a
    // loaded machine the writer thread may get little time, so the bound is generous.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut opens = 0;
    let mut last_version = 0;
    while Instant::now() < deadline
        && (opens < 400 || committed.load(std::sync::atomic::Ordering::Relaxed) < 64)
    {
        let db = Db::open_read_only(dir.path(), Options::default()).unwrap();
        let (a, b) = (get(&db, "t", "a"), get(&db, "t", "b"));
        if db.version() > 1 {
            assert_eq!(a, b, "a read-only open saw half of a batch");
        }
        assert!(
            db.version() >= last_version,
            "a later open went back in time"
        );
        last_version = db.version();
        opens += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let commits = w.join().unwrap();
    assert!(
        opens > 10 && commits > 16,
        "opens {opens}, commits {commits}"
    );
    assert!(writer.stats().checkpoints > 0);
}

/// Makes every directory under (and including) `dir` 0555 and every file 0444.
fn write_protect(dir: &Path) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            write_protect(&p);
        } else {
            fs::set_permissions(&p, fs::Permissions::from_mode(0o444)).unwrap();
        }
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o555)).unwrap();
}

fn running_as_root() -> bool {
    let probe = tempfile::tempfile().unwrap();
    probe.metadata().unwrap().uid() == 0
}

const CHILD_DIR_ENV: &str = "HOLT_READ_ONLY_CHILD_DIR";

/// Run by [`a_read_only_open_needs_only_read_permission`] in a child process without write
/// permission on the store (another user when the tests run as root).
#[test]
#[ignore = "spawned by a_read_only_open_needs_only_read_permission"]
fn child_reads_a_store_it_may_not_write() {
    let dir = PathBuf::from(std::env::var_os(CHILD_DIR_ENV).expect("child needs its store dir"));
    // The process really cannot write there.
    assert!(fs::File::create(dir.join("probe")).is_err());
    let db = Db::open_read_only(&dir, Options::default()).unwrap();
    assert_eq!(db.version(), 3);
    assert_eq!(get(&db, "t", "a").as_deref(), Some(&b"1"[..]));
    assert_eq!(get(&db, "t", "late").as_deref(), Some(&b"wal"[..]));
    assert!(matches!(
        Db::open(&dir, Options::default()),
        Err(Error::Io { .. })
    ));
}

/// A store whose files the process may read but not write (files of another user: as root the
/// child drops to uid/gid 65534 with `setpriv`; otherwise permission bits already bind) opens
/// read-only and answers reads.
#[test]
fn a_read_only_open_needs_only_read_permission() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    {
        let db = writer_with_data(&store);
        db.checkpoint().unwrap();
        put(&db, "t", "late", "wal");
    }
    write_protect(&store);
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    // A copy of this test binary the other user can certainly execute.
    let exe = dir.path().join("read_only_test_exe");
    fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = if running_as_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let out = cmd
        .args([
            "--ignored",
            "--exact",
            "child_reads_a_store_it_may_not_write",
        ])
        .env(CHILD_DIR_ENV, &store)
        .output()
        .expect("spawn the child test");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Restore write permission so the temporary directory can be removed.
    for p in [&store, &store.join("wal")] {
        fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    assert!(out.status.success(), "child failed: {text}");
    assert!(
        text.contains("1 passed"),
        "the child test did not run: {text}"
    );
}
