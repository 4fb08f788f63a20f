//! `CachedStore` behaviour over a local "remote" (LocalDir behind FaultyStore, so a test can
//! prove that a hit never touches the remote provider).

use std::sync::Arc;

use objstore::testing::FaultyStore;
use objstore::{
    get_verified, sha256_uri, CacheOptions, CachedStore, Error, LocalDir, ObjectStore, PutOutcome,
    ReadPath,
};

type Remote = Arc<FaultyStore<LocalDir>>;

struct Fixture {
    _tmp: tempfile::TempDir,
    remote: Remote,
    cache_dir: std::path::PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().expect("tempdir");
    let remote = Arc::new(FaultyStore::new(
        LocalDir::open(tmp.path().join("remote")).expect("remote"),
    ));
    let cache_dir = tmp.path().join("cache");
    Fixture {
        _tmp: tmp,
        remote,
        cache_dir,
    }
}

fn open(f: &Fixture, max_bytes: u64) -> CachedStore<Remote> {
    CachedStore::open(f.remote.clone(), CacheOptions::new(&f.cache_dir, max_bytes)).expect("cache")
}

fn block(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(seed).wrapping_add(seed))
        .collect()
}

/// Puts `body` at `key` on the remote only (as another process would have).
fn remote_put(f: &Fixture, key: &str, body: &[u8]) -> String {
    f.remote.inner().put(key, body).expect("remote put");
    sha256_uri(body)
}

#[test]
fn miss_then_hit_and_a_hit_never_reads_the_remote() {
    let f = fixture();
    let cache = open(&f, 1 << 20);
    let body = block(5000, 3);
    let digest = remote_put(&f, "nokv/b/0", &body);
    assert_eq!(
        cache.get_verified("nokv/b/0", 5000, &digest).expect("miss"),
        body
    );
    let s = cache.stats();
    assert_eq!((s.hits, s.misses, s.entries, s.bytes), (0, 1, 1, 5000));
    assert!(cache.contains("nokv/b/0", &digest));
    f.remote.fail_gets(true);
    assert_eq!(
        get_verified(&cache, "nokv/b/0", 5000, &digest).expect("hit with remote down"),
        body
    );
    assert_eq!(cache.stats().hits, 1);
    let s = cache.stats();
    assert_eq!(s.io_uring_reads + s.pread_reads, 1);
    match s.read_path {
        ReadPath::IoUring => assert_eq!(s.io_uring_reads, 1),
        ReadPath::Pread => assert_eq!(s.pread_reads, 1),
    }
}

#[test]
fn pread_path_can_be_forced_and_is_reported() {
    let f = fixture();
    let mut options = CacheOptions::new(&f.cache_dir, 1 << 20);
    options.io_uring = false;
    let cache = CachedStore::open(f.remote.clone(), options).expect("cache");
    assert_eq!(cache.read_path(), ReadPath::Pread);
    let body = block(100, 5);
    let digest = remote_put(&f, "k", &body);
    cache.get_verified("k", 100, &digest).expect("miss");
    cache.get_verified("k", 100, &digest).expect("hit");
    let s = cache.stats();
    assert_eq!((s.hits, s.pread_reads, s.io_uring_reads), (1, 1, 0));
}

#[test]
fn a_wrong_expected_digest_is_never_served_from_the_cache() {
    let f = fixture();
    let cache = open(&f, 1 << 20);
    let body = block(300, 7);
    let digest = remote_put(&f, "k", &body);
    cache.get_verified("k", 300, &digest).expect("fill");
    let wrong = sha256_uri(b"something else");
    assert!(matches!(
        cache.get_verified("k", 300, &wrong),
        Err(Error::IntegrityMismatch { .. })
    ));
    assert!(matches!(
        cache.get_verified("k", 300, "sha256:bad"),
        Err(Error::InvalidDigest { .. })
    ));
    assert!(matches!(
        cache.get_verified("k", 301, &digest),
        Err(Error::IntegrityMismatch { .. })
    ));
    assert_eq!(cache.stats().hits, 0);
}

#[test]
fn lru_eviction_keeps_the_cache_under_its_byte_bound() {
    let f = fixture();
    let cache = open(&f, 10_000);
    let mut digests = Vec::new();
    for i in 0..3u8 {
        let body = block(4000, i + 1);
        digests.push(remote_put(&f, &format!("k{i}"), &body));
    }
    cache.get_verified("k0", 4000, &digests[0]).expect("k0");
    cache.get_verified("k1", 4000, &digests[1]).expect("k1");
    // Touch k0 so k1 becomes the least recently used.
    cache.get_verified("k0", 4000, &digests[0]).expect("k0 hit");
    cache.get_verified("k2", 4000, &digests[2]).expect("k2");
    let s = cache.stats();
    assert_eq!((s.entries, s.bytes, s.evictions), (2, 8000, 1));
    assert!(s.bytes <= cache.max_bytes());
    assert!(cache.contains("k0", &digests[0]));
    assert!(!cache.contains("k1", &digests[1]));
    assert!(cache.contains("k2", &digests[2]));
    assert!(!cache.cache_path("k1", &digests[1]).expect("path").exists());
    // An object larger than the bound is served but never cached.
    let huge = block(20_000, 9);
    let hd = remote_put(&f, "huge", &huge);
    assert_eq!(cache.get_verified("huge", 20_000, &hd).expect("huge"), huge);
    assert!(!cache.contains("huge", &hd));
}

#[test]
fn corrupted_cache_file_is_detected_dropped_and_refetched() {
    let f = fixture();
    let cache = open(&f, 1 << 20);
    let body = block(4096, 11);
    let digest = remote_put(&f, "nokv/blk", &body);
    cache.get_verified("nokv/blk", 4096, &digest).expect("fill");
    let path = cache.cache_path("nokv/blk", &digest).expect("path");
    let mut bad = std::fs::read(&path).expect("read cached");
    bad[10] ^= 0x40;
    std::fs::write(&path, &bad).expect("corrupt cached copy");
    assert_eq!(
        cache
            .get_verified("nokv/blk", 4096, &digest)
            .expect("refetched"),
        body
    );
    let s = cache.stats();
    assert_eq!((s.corrupt_refetches, s.hits, s.misses), (1, 0, 2));
    assert_eq!(std::fs::read(&path).expect("rewritten"), body);
    // A truncated cached copy is caught as well.
    std::fs::write(&path, &body[..100]).expect("truncate");
    assert_eq!(
        cache
            .get_verified("nokv/blk", 4096, &digest)
            .expect("again"),
        body
    );
    assert_eq!(cache.stats().corrupt_refetches, 2);
}

#[test]
fn deleting_the_cache_directory_loses_nothing() {
    let f = fixture();
    let cache = open(&f, 1 << 20);
    let body = block(2048, 13);
    let digest = sha256_uri(&body);
    assert_eq!(
        cache.put_if_absent("k", &body).expect("put"),
        PutOutcome::Created
    );
    assert!(
        cache.contains("k", &digest),
        "written blocks populate the cache"
    );
    std::fs::remove_dir_all(&f.cache_dir).expect("delete cache");
    assert_eq!(
        cache.get_verified("k", 2048, &digest).expect("from remote"),
        body
    );
    // The cache repopulates itself (shard directories are recreated).
    assert_eq!(cache.get_verified("k", 2048, &digest).expect("hit"), body);
    assert_eq!(cache.stats().hits, 1);
    drop(cache);
    std::fs::remove_dir_all(&f.cache_dir).expect("delete cache again");
    let reopened = open(&f, 1 << 20);
    assert_eq!(reopened.stats().entries, 0);
    assert_eq!(
        reopened.get_verified("k", 2048, &digest).expect("read"),
        body
    );
}

#[test]
fn restart_rebuilds_the_index_and_keeps_lru_order() {
    let f = fixture();
    let mut digests = Vec::new();
    {
        let cache = open(&f, 1 << 20);
        for i in 0..3u8 {
            let body = block(1000, i + 20);
            let d = remote_put(&f, &format!("k{i}"), &body);
            cache
                .get_verified(&format!("k{i}"), 1000, &d)
                .expect("fill");
            digests.push(d);
            // Distinct modification times order the entries across the restart.
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        cache
            .get_verified("k0", 1000, &digests[0])
            .expect("touch k0");
    }
    // A leftover temp file from a crashed insert is removed at open.
    let shard = std::fs::read_dir(&f.cache_dir)
        .expect("cache dir")
        .flatten()
        .next()
        .expect("a shard")
        .path();
    std::fs::write(shard.join(".tmp-0011"), b"partial").expect("temp");
    let cache = open(&f, 2000);
    let s = cache.stats();
    assert_eq!(
        (s.entries, s.bytes),
        (2, 2000),
        "reopened with a smaller bound"
    );
    assert!(!shard.join(".tmp-0011").exists());
    // k1 was the least recently used before the restart.
    assert!(!cache.contains("k1", &digests[1]));
    assert!(cache.contains("k0", &digests[0]));
    assert!(cache.contains("k2", &digests[2]));
    f.remote.fail_gets(true);
    cache
        .get_verified("k2", 1000, &digests[2])
        .expect("hit after restart");
    assert_eq!(cache.stats().hits, 1);
}

#[test]
fn writes_go_to_the_remote_first_and_failures_cache_nothing() {
    let f = fixture();
    let cache = open(&f, 1 << 20);
    f.remote.fail_puts_after(0);
    assert!(cache.put("k", b"abc").is_err());
    assert!(!cache.contains("k", &sha256_uri(b"abc")));
    assert_eq!(cache.stats().entries, 0);
    f.remote.clear_faults();
    cache.put("k", b"abc").expect("put");
    assert_eq!(f.remote.inner().get("k").expect("remote has it"), b"abc");
    // An existing object is not replaced in the cache by put_if_absent's offered bytes.
    assert_eq!(
        cache.put_if_absent("k", b"xyz").expect("pia"),
        PutOutcome::AlreadyExists
    );
    assert!(!cache.contains("k", &sha256_uri(b"xyz")));
    // Overwrite replaces the cached copy; delete drops it.
    cache.put("k", b"new").expect("overwrite");
    assert!(cache.contains("k", &sha256_uri(b"new")));
    assert!(!cache.contains("k", &sha256_uri(b"abc")));
    cache.delete("k").expect("delete");
    assert!(!cache.contains("k", &sha256_uri(b"new")));
    assert_eq!(cache.stats().entries, 0);
}

#[test]
fn remote_corruption_is_reported_and_never_cached() {
    let f = fixture();
    let cache = open(&f, 1 << 20);
    let body = block(512, 17);
    let digest = remote_put(&f, "k", &body);
    f.remote.corrupt_gets(true);
    assert!(matches!(
        cache.get_verified("k", 512, &digest),
        Err(Error::IntegrityMismatch { .. })
    ));
    assert!(!cache.contains("k", &digest));
    f.remote.clear_faults();
    assert_eq!(cache.get_verified("k", 512, &digest).expect("clean"), body);
}

#[test]
fn resolve_ambiguous_after_a_lost_acknowledgement() {
    let f = fixture();
    let body = block(700, 19);
    let digest = sha256_uri(&body);
    f.remote.set_put_failures_ambiguous(true);
    f.remote.fail_nth_put(1);
    assert!(f.remote.put_if_absent("k", &body).is_err());
    assert_eq!(
        objstore::resolve_ambiguous(f.remote.as_ref(), "k", 700, &digest).expect("resolve"),
        objstore::Resolution::Landed
    );
    assert_eq!(
        objstore::resolve_ambiguous(f.remote.as_ref(), "other", 700, &digest).expect("resolve"),
        objstore::Resolution::Absent
    );
}
