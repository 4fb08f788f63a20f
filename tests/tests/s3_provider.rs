//! The S3 provider against a real S3-compatible server (s3s-fs). Feature `s3-tests`; see
//! `s3_support` for the environment.
#![cfg(feature = "s3-tests")]

mod s3_support;

use std::time::Duration;

use objstore::{
    get_verified, resolve_ambiguous, sha256_uri, ConditionalPut, Error, ObjectStore, PutOutcome,
    Resolution, RetryPolicy, S3Config, S3,
};
use s3_support::{bytes, config, fresh, open};

#[test]
fn put_get_head_delete_round_trip() {
    let s3 = fresh("roundtrip", "team/store");
    let body = bytes(100_000, 1);
    s3.put("nokv/a/b", &body).expect("put");
    assert_eq!(s3.get("nokv/a/b").expect("get"), body);
    assert_eq!(
        s3.head("nokv/a/b").expect("head").map(|m| m.size),
        Some(100_000)
    );
    assert_eq!(s3.head("nokv/a/missing").expect("head"), None);
    assert!(matches!(
        s3.get("nokv/a/missing"),
        Err(Error::NotFound { .. })
    ));
    s3.put("nokv/a/b", b"second").expect("overwrite");
    assert_eq!(s3.get("nokv/a/b").expect("get"), b"second");
    s3.delete("nokv/a/b").expect("delete");
    s3.delete("nokv/a/b").expect("delete is idempotent");
    assert_eq!(s3.head("nokv/a/b").expect("head"), None);
    s3.put("nokv/empty", b"").expect("empty object");
    assert_eq!(s3.get("nokv/empty").expect("get empty"), Vec::<u8>::new());
    assert_eq!(s3.provider_name(), "s3");
}

#[test]
fn hostile_keys_are_refused_before_any_request() {
    let s3 = S3::open(config("hostile", "")).expect("open");
    for key in ["../x", "/abs", "a//b", "A", "a/.tmp-1"] {
        assert!(
            matches!(s3.put(key, b"x"), Err(Error::InvalidKey { .. })),
            "{key}"
        );
        assert!(
            matches!(s3.get(key), Err(Error::InvalidKey { .. })),
            "{key}"
        );
    }
    assert_eq!(s3.stats().requests, 0);
}

#[test]
fn ranged_reads_return_exact_bytes_and_refuse_out_of_bounds() {
    let s3 = fresh("range", "p");
    let body = bytes(10_000, 2);
    s3.put("obj", &body).expect("put");
    assert_eq!(s3.get_range("obj", 0, 1).expect("first byte"), &body[..1]);
    assert_eq!(
        s3.get_range("obj", 9_999, 1).expect("last byte"),
        &body[9_999..]
    );
    assert_eq!(
        s3.get_range("obj", 1234, 5000).expect("middle"),
        &body[1234..6234]
    );
    assert_eq!(s3.get_range("obj", 0, 10_000).expect("whole"), body);
    assert!(s3
        .get_range("obj", 10_000, 0)
        .expect("empty at end")
        .is_empty());
    for (offset, len) in [(9_999, 2), (10_000, 1), (20_000, 5), (u64::MAX, 2)] {
        match s3.get_range("obj", offset, len) {
            Err(Error::RangeOutOfBounds { size, .. }) => assert_eq!(size, 10_000),
            other => panic!("[{offset},+{len}) gave {other:?}"),
        }
    }
    assert!(matches!(
        s3.get_range("none", 0, 1),
        Err(Error::NotFound { .. })
    ));
}

fn put_if_absent_semantics(mode: ConditionalPut) -> S3 {
    let mut c = config("cas", "x");
    c.conditional_put = mode;
    let s3 = open(c);
    assert_eq!(
        s3.put_if_absent("blk", b"first").expect("create"),
        PutOutcome::Created
    );
    assert_eq!(
        s3.put_if_absent("blk", b"second").expect("second create"),
        PutOutcome::AlreadyExists
    );
    assert_eq!(
        s3.get("blk").expect("get"),
        b"first",
        "existing object untouched"
    );
    s3
}

#[test]
fn put_if_absent_with_if_none_match_never_overwrites() {
    let s3 = put_if_absent_semantics(ConditionalPut::IfNoneMatch);
    assert_eq!(s3.stats().conditional_header, Some(true));
}

#[test]
fn put_if_absent_auto_detects_header_support() {
    let s3 = put_if_absent_semantics(ConditionalPut::Auto);
    // s3s-fs honours If-None-Match: the probe must have found that out.
    assert_eq!(s3.stats().conditional_header, Some(true));
}

#[test]
fn put_if_absent_head_then_put_fallback_never_overwrites() {
    let s3 = put_if_absent_semantics(ConditionalPut::HeadThenPut);
    assert_eq!(s3.stats().conditional_header, Some(false));
}

#[test]
fn bodies_above_the_part_threshold_use_multipart_and_round_trip() {
    let mut c = config("multipart", "mp");
    c.multipart_threshold = 5 * 1024 * 1024;
    c.part_size = 5 * 1024 * 1024;
    let s3 = open(c);
    let body = bytes(12 * 1024 * 1024 + 17, 3);
    let digest = sha256_uri(&body);
    assert_eq!(
        s3.put_if_absent("big", &body).expect("multipart create"),
        PutOutcome::Created
    );
    assert_eq!(s3.stats().multipart_uploads, 1);
    assert_eq!(
        get_verified(&s3, "big", body.len() as u64, &digest).expect("verified read"),
        body
    );
    // A create-only multipart upload over an existing key is refused and aborted.
    assert_eq!(
        s3.put_if_absent("big", &bytes(6 * 1024 * 1024, 4))
            .expect("second"),
        PutOutcome::AlreadyExists
    );
    assert_eq!(s3.stats().multipart_uploads, 2);
    assert_eq!(s3.get("big").expect("get").len(), body.len());
    // Plain put also goes multipart and overwrites.
    let other = bytes(5 * 1024 * 1024 + 1, 5);
    s3.put("big", &other).expect("multipart put");
    assert_eq!(s3.get("big").expect("get"), other);
}

#[test]
fn list_paginates_and_stays_inside_the_prefix() {
    let mut c = config("list", "ns/one");
    c.list_page_size = 2;
    let s3 = open(c.clone());
    let keys: Vec<String> = (0..7).map(|i| format!("nokv/k/{i:02}")).collect();
    for k in &keys {
        s3.put(k, k.as_bytes()).expect("put");
    }
    s3.put("other/x", b"x").expect("put other");
    // A sibling prefix in the same bucket is invisible.
    let mut sibling = c.clone();
    sibling.prefix = "ns/one-more".into();
    let neighbour = S3::open(sibling).expect("open sibling");
    neighbour.put("nokv/k/99", b"n").expect("put sibling");
    let before = s3.stats().requests;
    assert_eq!(s3.list("nokv/k/").expect("list"), keys);
    assert!(
        s3.stats().requests - before >= 4,
        "7 keys at 2 per page take 4 pages"
    );
    let all = s3.list("").expect("list all");
    assert_eq!(all.len(), 8);
    assert!(all.contains(&"other/x".to_string()));
    assert_eq!(s3.list("nokv/k/0").expect("partial segment").len(), 7);
    assert!(s3.list("nothing/").expect("empty").is_empty());
    assert_eq!(
        neighbour.list("").expect("sibling list"),
        vec!["nokv/k/99".to_string()]
    );
}

#[test]
fn corrupted_object_in_the_bucket_fails_verification() {
    let c = config("corrupt", "c");
    let s3 = open(c.clone());
    let body = bytes(64 * 1024, 6);
    let digest = sha256_uri(&body);
    s3.put_if_absent("nokv/blk", &body).expect("put");
    // Overwrite the object behind NoKV's back through a second, independent SDK client.
    let mut evil = bytes(64 * 1024, 6);
    evil[100] ^= 0xff;
    S3::open(c)
        .expect("second client")
        .put("nokv/blk", &evil)
        .expect("overwrite");
    match get_verified(&s3, "nokv/blk", body.len() as u64, &digest) {
        Err(Error::IntegrityMismatch { expected, .. }) => assert_eq!(expected, digest),
        other => panic!("corruption not detected: {other:?}"),
    }
    // A truncated object fails on length.
    S3::open(s3.config().clone())
        .expect("client")
        .put("nokv/blk", &body[..10])
        .expect("trunc");
    assert!(matches!(
        get_verified(&s3, "nokv/blk", body.len() as u64, &digest),
        Err(Error::IntegrityMismatch { .. })
    ));
}

#[test]
fn resolve_ambiguous_decides_by_head_and_digest() {
    let s3 = fresh("resolve", "r");
    let body = bytes(3000, 7);
    let digest = sha256_uri(&body);
    assert_eq!(
        s3.resolve_ambiguous("k", 3000, &digest).expect("absent"),
        Resolution::Absent
    );
    s3.put("k", &body).expect("put");
    assert_eq!(
        resolve_ambiguous(&s3, "k", 3000, &digest).expect("landed"),
        Resolution::Landed
    );
    let mut other = body.clone();
    other[0] ^= 1;
    s3.put("k", &other).expect("put other");
    assert_eq!(
        s3.resolve_ambiguous("k", 3000, &digest).expect("different"),
        Resolution::Different { size: 3000 }
    );
    s3.put("k", b"short").expect("put short");
    assert_eq!(
        s3.resolve_ambiguous("k", 3000, &digest)
            .expect("different size"),
        Resolution::Different { size: 5 }
    );
    assert!(matches!(
        s3.resolve_ambiguous("k", 3000, "sha256:nope"),
        Err(Error::InvalidDigest { .. })
    ));
}

fn unanswered(endpoint: String) -> S3Config {
    let mut c = S3Config::new("bucket-x", "p");
    c.endpoint = Some(endpoint);
    c.path_style = true;
    c.conditional_put = ConditionalPut::IfNoneMatch;
    c.attempt_timeout = Duration::from_millis(300);
    c.connect_timeout = Duration::from_millis(300);
    c.retry = RetryPolicy {
        max_attempts: 2,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(2),
    };
    c
}

#[test]
fn write_sent_without_an_answer_is_ambiguous() {
    s3_support::endpoint(); // credentials in the environment
    let s3 = S3::open(unanswered(s3_support::black_hole(Duration::from_secs(20)))).expect("open");
    match s3.put("k", b"payload") {
        Err(Error::Ambiguous { op, key, .. }) => {
            assert_eq!(op, "put");
            assert_eq!(key, "k");
        }
        other => panic!("expected Ambiguous, got {other:?}"),
    }
    assert!(matches!(
        s3.put_if_absent("k2", b"payload"),
        Err(Error::Ambiguous {
            op: "put_if_absent",
            ..
        })
    ));
    let stats = s3.stats();
    assert_eq!(stats.ambiguous, 2);
    assert_eq!(stats.retries, 2, "each call retried once before giving up");
    // A read that gets no answer is merely unavailable (retryable), never ambiguous.
    let err = s3.get("k").expect_err("no answer");
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert!(err.is_retryable());
}

#[test]
fn refused_connection_is_unavailable_not_ambiguous() {
    s3_support::endpoint();
    let s3 = S3::open(unanswered(s3_support::refused_endpoint())).expect("open");
    let err = s3.put("k", b"payload").expect_err("refused");
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    assert_eq!(s3.stats().requests, 2, "retried up to max_attempts");
}

#[test]
fn missing_bucket_is_a_permanent_refusal() {
    let c = config("nobucket", "p");
    let s3 = S3::open(c).expect("open"); // bucket never created
    match s3.list("") {
        Err(Error::Refused { status, .. }) => assert_eq!(status, Some(404)),
        other => panic!("expected Refused, got {other:?}"),
    }
    assert_eq!(s3.stats().retries, 0);
}

#[test]
fn provider_works_when_called_from_inside_a_tokio_runtime() {
    let s3 = fresh("nested", "n");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("caller runtime");
    let got = rt.block_on(async {
        s3.put("k", b"inside").expect("put inside runtime");
        s3.get("k").expect("get inside runtime")
    });
    assert_eq!(got, b"inside");
    drop(rt);
    // Dropping the provider inside a runtime must not panic either.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("caller runtime");
    rt.block_on(async move { drop(s3) });
}
