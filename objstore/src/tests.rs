//! Behaviour tests for `LocalDir`, `get_verified` and `FaultyStore`.

use std::fs;
use std::sync::{Arc, Barrier};

use crate::testing::FaultyStore;
use crate::*;

fn store() -> (tempfile::TempDir, LocalDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = LocalDir::open(dir.path().join("objects")).expect("open");
    (dir, store)
}

fn block(index: u64) -> String {
    block_key(&[0x11; 16], &[0x22; 16], &[0xab; 16], index)
}

/// Every file name below `dir`, recursively (to prove nothing leaked or escaped).
fn all_files(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).expect("read_dir") {
            let e = e.expect("entry");
            if e.file_type().expect("type").is_dir() {
                stack.push(e.path());
            } else {
                out.push(
                    e.path()
                        .strip_prefix(dir)
                        .expect("under dir")
                        .display()
                        .to_string(),
                );
            }
        }
    }
    out.sort();
    out
}

#[test]
fn open_creates_nested_root_and_reports_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("x/y/z");
    let store = LocalDir::open(&root).expect("open");
    assert!(root.is_dir());
    assert_eq!(store.root(), root.as_path());
    assert_eq!(store.provider_name(), "local");
}

#[test]
fn put_then_get_returns_bytes_and_put_overwrites() {
    let (_d, s) = store();
    let key = block(3);
    s.put(&key, b"hello").expect("put");
    assert_eq!(s.get(&key).expect("get"), b"hello");
    assert_eq!(s.object_path(&key).expect("path"), s.root().join(&key));
    s.put(&key, b"replaced bytes").expect("overwrite");
    assert_eq!(s.get(&key).expect("get"), b"replaced bytes");
    s.put("empty", b"").expect("put empty");
    assert_eq!(s.get("empty").expect("get empty"), b"");
}

#[test]
fn objects_survive_reopen() {
    let (_d, s) = store();
    s.put("a/b", b"durable").expect("put");
    let reopened = LocalDir::open(s.root()).expect("reopen");
    assert_eq!(reopened.get("a/b").expect("get"), b"durable");
}

#[test]
fn get_of_absent_key_is_not_found() {
    let (_d, s) = store();
    for key in ["missing", "a/b/c"] {
        match s.get(key) {
            Err(Error::NotFound { key: k }) => assert_eq!(k, key),
            other => panic!("expected NotFound, got {other:?}"),
        }
        assert!(matches!(
            s.get_range(key, 0, 0),
            Err(Error::NotFound { .. })
        ));
    }
    // A path through an existing object (ENOTDIR) is also just absent.
    s.put("file", b"x").expect("put");
    assert!(matches!(s.get("file/child"), Err(Error::NotFound { .. })));
    assert_eq!(s.head("file/child").expect("head"), None);
}

#[test]
fn get_range_returns_exact_slice() {
    let (_d, s) = store();
    s.put("k", b"0123456789").expect("put");
    assert_eq!(s.get_range("k", 0, 10).expect("all"), b"0123456789");
    assert_eq!(s.get_range("k", 3, 4).expect("mid"), b"3456");
    assert_eq!(s.get_range("k", 9, 1).expect("last"), b"9");
    assert_eq!(s.get_range("k", 10, 0).expect("empty at end"), b"");
}

#[test]
fn get_range_past_end_is_out_of_bounds() {
    let (_d, s) = store();
    s.put("k", b"0123456789").expect("put");
    for (offset, len) in [
        (5, 6),
        (10, 1),
        (11, 0),
        (0, 11),
        (u64::MAX, 1),
        (1, u64::MAX),
    ] {
        match s.get_range("k", offset, len) {
            Err(Error::RangeOutOfBounds {
                key,
                offset: o,
                len: l,
                size,
            }) => {
                assert_eq!((key.as_str(), o, l, size), ("k", offset, len, 10));
            }
            other => panic!("({offset}, {len}) expected RangeOutOfBounds, got {other:?}"),
        }
    }
}

#[test]
fn head_reports_size_or_none() {
    let (_d, s) = store();
    assert_eq!(s.head("k").expect("head"), None);
    s.put("k", &[7u8; 1234]).expect("put");
    assert_eq!(s.head("k").expect("head"), Some(ObjectMeta::new(1234)));
}

#[test]
fn delete_removes_and_is_idempotent() {
    let (_d, s) = store();
    s.put("a/k", b"x").expect("put");
    s.delete("a/k").expect("delete");
    assert_eq!(s.head("a/k").expect("head"), None);
    assert!(matches!(s.get("a/k"), Err(Error::NotFound { .. })));
    s.delete("a/k").expect("second delete");
    s.delete("never/existed").expect("delete absent");
}

#[test]
fn directory_prefix_of_a_key_is_not_an_object() {
    let (_d, s) = store();
    s.put("a/b", b"x").expect("put");
    assert!(matches!(s.get("a"), Err(Error::NotFound { .. })));
    assert_eq!(s.head("a").expect("head"), None);
    s.delete("a")
        .expect("delete of a directory name is a no-op");
    assert_eq!(s.get("a/b").expect("still there"), b"x");
    assert!(s.put_if_absent("a", b"y").is_err());
}

#[test]
fn put_if_absent_second_call_reports_already_exists_and_keeps_first_bytes() {
    let (_d, s) = store();
    let key = block(0);
    assert_eq!(
        s.put_if_absent(&key, b"first").expect("first"),
        PutOutcome::Created
    );
    assert_eq!(
        s.put_if_absent(&key, b"second").expect("second"),
        PutOutcome::AlreadyExists
    );
    assert_eq!(s.get(&key).expect("get"), b"first");
}

#[test]
fn concurrent_put_if_absent_creates_exactly_once() {
    let (_d, s) = store();
    let s = Arc::new(s);
    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (s, barrier) = (Arc::clone(&s), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                let bytes = vec![u8::try_from(i).unwrap_or(0); 4096];
                (
                    bytes.clone(),
                    s.put_if_absent("race/k", &bytes).expect("put_if_absent"),
                )
            })
        })
        .collect();
    let results: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().expect("join"))
        .collect();
    let winners: Vec<_> = results
        .iter()
        .filter(|(_, o)| *o == PutOutcome::Created)
        .collect();
    assert_eq!(winners.len(), 1);
    assert_eq!(s.get("race/k").expect("get"), winners[0].0);
    assert_eq!(all_files(&s.root().join("race")), vec!["k".to_owned()]);
}

#[test]
fn list_returns_sorted_keys_with_prefix() {
    let (_d, s) = store();
    let keys = [
        block(2),
        block(0),
        block(1),
        "other/x".to_owned(),
        "nokv/z".to_owned(),
    ];
    for k in &keys {
        s.put(k, b"v").expect("put");
    }
    let rev = revision_prefix(&[0x11; 16], &[0x22; 16], &[0xab; 16]);
    assert_eq!(
        s.list(&rev).expect("list"),
        vec![block(0), block(1), block(2)]
    );
    assert_eq!(
        s.list("").expect("list all"),
        vec![
            block(0),
            block(1),
            block(2),
            "nokv/z".to_owned(),
            "other/x".to_owned()
        ]
    );
    // Plain string prefix, not only whole segments.
    assert_eq!(s.list("oth").expect("partial"), vec!["other/x".to_owned()]);
    assert_eq!(s.list("nokv/z").expect("exact"), vec!["nokv/z".to_owned()]);
    assert!(s.list("nothing/here/").expect("empty").is_empty());
    assert!(s.list("../").expect("impossible prefix").is_empty());
    assert!(matches!(s.list("/abs"), Err(Error::InvalidKey { .. })));
    assert!(matches!(s.list("A"), Err(Error::InvalidKey { .. })));
}

#[test]
fn temp_files_left_by_a_crash_are_invisible() {
    let (_d, s) = store();
    s.put("a/real", b"r").expect("put");
    let stray = s
        .root()
        .join("a")
        .join(".tmp-00112233445566778899aabbccddeeff");
    fs::write(&stray, b"half-written").expect("write stray");
    fs::write(s.root().join(".tmp-top"), b"x").expect("write stray");
    assert_eq!(s.list("").expect("list"), vec!["a/real".to_owned()]);
    assert!(matches!(
        s.get("a/.tmp-00112233445566778899aabbccddeeff"),
        Err(Error::InvalidKey { .. })
    ));
    // Foreign names that are not valid keys are not listed either.
    fs::write(s.root().join("a").join("UPPER"), b"x").expect("write foreign");
    assert_eq!(s.list("a/").expect("list"), vec!["a/real".to_owned()]);
}

#[test]
fn writes_leave_no_temp_files_behind() {
    let (_d, s) = store();
    s.put("d/k1", b"1").expect("put");
    s.put("d/k1", b"2").expect("overwrite");
    s.put_if_absent("d/k2", b"3").expect("pia");
    s.put_if_absent("d/k2", b"4").expect("pia again");
    assert_eq!(
        all_files(s.root()),
        vec!["d/k1".to_owned(), "d/k2".to_owned()]
    );
}

#[test]
fn hostile_keys_are_rejected_without_touching_disk() {
    let outer = tempfile::tempdir().expect("tempdir");
    let s = LocalDir::open(outer.path().join("root")).expect("open");
    let hostile = [
        "../x",
        "/abs",
        "a//b",
        "a/./b",
        "a/../../x",
        "a\\b",
        "a\0b",
        "Upper",
        "",
        "a/",
        ".",
    ];
    for key in hostile {
        let is_invalid = |r: Result<(), Error>| matches!(r, Err(Error::InvalidKey { .. }));
        assert!(is_invalid(s.put(key, b"x")), "put {key:?}");
        assert!(
            is_invalid(s.put_if_absent(key, b"x").map(|_| ())),
            "put_if_absent {key:?}"
        );
        assert!(is_invalid(s.get(key).map(|_| ())), "get {key:?}");
        assert!(
            is_invalid(s.get_range(key, 0, 0).map(|_| ())),
            "get_range {key:?}"
        );
        assert!(is_invalid(s.head(key).map(|_| ())), "head {key:?}");
        assert!(is_invalid(s.delete(key)), "delete {key:?}");
        assert!(
            is_invalid(s.object_path(key).map(|_| ())),
            "object_path {key:?}"
        );
    }
    assert!(all_files(outer.path()).is_empty());
}

#[test]
fn get_verified_returns_bytes_that_match() {
    let (_d, s) = store();
    s.put("k", b"abc").expect("put");
    let uri = sha256_uri(b"abc");
    assert_eq!(get_verified(&s, "k", 3, &uri).expect("verified"), b"abc");
}

#[test]
fn get_verified_detects_a_byte_flipped_on_disk() {
    let (_d, s) = store();
    let key = block(9);
    let body = vec![0x5au8; 4096];
    s.put(&key, &body).expect("put");
    let path = s.object_path(&key).expect("path");
    let mut on_disk = fs::read(&path).expect("read");
    on_disk[1000] ^= 0x80;
    fs::write(&path, &on_disk).expect("corrupt");
    let expected = sha256_uri(&body);
    match get_verified(&s, &key, 4096, &expected) {
        Err(Error::IntegrityMismatch {
            key: k,
            expected: e,
            actual,
        }) => {
            assert_eq!(k, key);
            assert_eq!(e, expected);
            assert_eq!(actual, sha256_uri(&on_disk));
        }
        other => panic!("expected IntegrityMismatch, got {other:?}"),
    }
}

#[test]
fn get_verified_detects_length_mismatch_and_bad_digest_uri() {
    let (_d, s) = store();
    s.put("k", b"abcd").expect("put");
    let uri = sha256_uri(b"abc");
    match get_verified(&s, "k", 3, &uri) {
        Err(Error::IntegrityMismatch {
            expected, actual, ..
        }) => assert_eq!((expected.as_str(), actual.as_str()), ("3 bytes", "4 bytes")),
        other => panic!("expected IntegrityMismatch, got {other:?}"),
    }
    assert!(matches!(
        get_verified(&s, "k", 4, &uri.to_uppercase()),
        Err(Error::InvalidDigest { .. })
    ));
    assert!(matches!(
        get_verified(&s, "absent", 3, &uri),
        Err(Error::NotFound { .. })
    ));
}

#[test]
fn faulty_store_fails_only_the_nth_put() {
    let (_d, s) = store();
    let f = FaultyStore::new(s);
    f.fail_nth_put(2);
    f.put("k1", b"1").expect("put 1");
    let err = f.put("k2", b"2").expect_err("put 2 fails");
    assert!(matches!(err, Error::Unavailable { .. }) && err.is_retryable());
    f.put("k3", b"3").expect("put 3");
    assert_eq!(f.put_count(), 3);
    assert_eq!(
        f.head("k2").expect("head"),
        None,
        "non-ambiguous fault never wrote"
    );
    assert_eq!(
        f.list("").expect("list"),
        vec!["k1".to_owned(), "k3".to_owned()]
    );
}

#[test]
fn faulty_store_fails_every_put_after_n() {
    let (_d, s) = store();
    let f = FaultyStore::new(s);
    f.fail_puts_after(1);
    assert_eq!(
        f.put_if_absent("k1", b"1").expect("first"),
        PutOutcome::Created
    );
    assert!(matches!(
        f.put_if_absent("k2", b"2"),
        Err(Error::Unavailable { .. })
    ));
    assert!(matches!(f.put("k3", b"3"), Err(Error::Unavailable { .. })));
    f.clear_faults();
    f.put("k3", b"3").expect("after clear");
    assert_eq!(
        f.inner().list("").expect("list"),
        vec!["k1".to_owned(), "k3".to_owned()]
    );
}

#[test]
fn faulty_store_ambiguous_failure_still_lands_the_write() {
    let (_d, s) = store();
    let f = FaultyStore::new(s);
    f.fail_nth_put(1);
    f.set_put_failures_ambiguous(true);
    assert!(matches!(
        f.put("k", b"landed"),
        Err(Error::Unavailable { .. })
    ));
    assert_eq!(f.get("k").expect("get"), b"landed");
}

#[test]
fn faulty_store_corrupted_reads_fail_verification() {
    let (_d, s) = store();
    let f = FaultyStore::new(s);
    f.put("k", b"abc").expect("put");
    f.corrupt_gets(true);
    assert_ne!(f.get("k").expect("get"), b"abc");
    assert_ne!(f.get_range("k", 0, 1).expect("range"), b"a");
    assert!(matches!(
        get_verified(&f, "k", 3, &sha256_uri(b"abc")),
        Err(Error::IntegrityMismatch { .. })
    ));
    f.corrupt_gets(false);
    f.fail_gets(true);
    assert!(matches!(f.get("k"), Err(Error::Unavailable { .. })));
    assert!(matches!(f.head("k"), Err(Error::Unavailable { .. })));
    f.clear_faults();
    assert_eq!(
        get_verified(&f, "k", 3, &sha256_uri(b"abc")).expect("clean"),
        b"abc"
    );
}

#[test]
fn shared_and_boxed_stores_are_object_stores() {
    let (_d, s) = store();
    let shared: Arc<dyn ObjectStore> = Arc::new(s);
    let wrapped = FaultyStore::new(Arc::clone(&shared));
    wrapped.put("k", b"v").expect("put");
    let boxed: Box<dyn ObjectStore> = Box::new(Arc::clone(&shared));
    assert_eq!(boxed.get("k").expect("get"), b"v");
    assert_eq!(boxed.provider_name(), "local");
}
