//! The block cache in front of the S3 provider (s3s-fs). Feature `s3-tests`.
#![cfg(feature = "s3-tests")]

mod s3_support;

use objstore::{sha256_uri, CacheOptions, CachedStore, ObjectStore};

#[test]
fn cached_s3_hit_miss_eviction_and_corruption_refetch() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cfg = s3_support::config("cache", "c");
    let s3 = s3_support::open(cfg.clone());
    let cache =
        CachedStore::open(s3, CacheOptions::new(tmp.path().join("cache"), 300_000)).expect("cache");
    let bodies: Vec<Vec<u8>> = (0..3).map(|i| s3_support::bytes(120_000, i + 1)).collect();
    let digests: Vec<String> = bodies.iter().map(|b| sha256_uri(b)).collect();
    for (i, b) in bodies.iter().enumerate() {
        // Written through another client: this cache has never seen them.
        objstore::S3::open(cfg.clone())
            .expect("writer")
            .put(&format!("blk/{i}"), b)
            .expect("put");
    }
    for i in 0..3 {
        assert_eq!(
            cache
                .get_verified(&format!("blk/{i}"), 120_000, &digests[i])
                .expect("miss"),
            bodies[i]
        );
    }
    let s = cache.stats();
    assert_eq!((s.misses, s.hits, s.evictions, s.entries), (3, 0, 1, 2));
    let requests = cache.remote().stats().requests;
    assert_eq!(
        cache
            .get_verified("blk/2", 120_000, &digests[2])
            .expect("hit"),
        bodies[2]
    );
    assert_eq!(
        cache.remote().stats().requests,
        requests,
        "a hit sends no request"
    );
    // Corrupt the cached copy: detected, dropped, refetched from the bucket.
    let path = cache.cache_path("blk/2", &digests[2]).expect("path");
    std::fs::write(&path, b"garbage").expect("corrupt");
    assert_eq!(
        cache
            .get_verified("blk/2", 120_000, &digests[2])
            .expect("refetch"),
        bodies[2]
    );
    assert_eq!(cache.stats().corrupt_refetches, 1);
    // Deleting the whole cache loses nothing.
    std::fs::remove_dir_all(tmp.path().join("cache")).expect("rm cache");
    for i in 0..3 {
        assert_eq!(
            cache
                .get_verified(&format!("blk/{i}"), 120_000, &digests[i])
                .expect("after rm"),
            bodies[i]
        );
    }
}
