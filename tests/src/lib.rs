//! Helpers shared by the NoKV integration tests in `tests/tests/`.

use serde_json::Value;

/// Opens a fresh embedded store in a new temporary directory. Keep the `TempDir` alive.
///
/// The engine switch: with `NOKV_TEST_ENGINE=etcd` the store keeps its metadata on an
/// etcd-backed logical shard (`nokv init --metadata-etcd`, a root of its own in a fresh
/// namespace) in the three-member loopback cluster `testkit` starts once per test process;
/// otherwise in holt.
pub fn fresh_store() -> (tempfile::TempDir, nokv::Client) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    if test_engine_is_etcd() {
        init_etcd_store(&store);
    }
    let client = nokv::Client::open(&store).expect("open store");
    (dir, client)
}

/// True when `NOKV_TEST_ENGINE=etcd` (see [`fresh_store`]).
pub fn test_engine_is_etcd() -> bool {
    std::env::var("NOKV_TEST_ENGINE").is_ok_and(|v| v == "etcd")
}

/// Initializes `store` with its metadata on a new root in the shared loopback etcd cluster.
pub fn init_etcd_store(store: &std::path::Path) {
    let cluster = testkit::etcd::shared().expect("a three-member etcd cluster on loopback");
    let ns = format!("/t-{}/", meta::RootId::random().expect("random"));
    nokv::store_config::init_store(
        store,
        &nokv::store_config::InitOptions {
            metadata_etcd: Some(cluster.endpoints().join(",")),
            etcd_namespace: Some(ns),
            root_name: Some("test".into()),
            ..Default::default()
        },
    )
    .expect("init an etcd-backed store");
}

/// Asserts a facade envelope is a success and returns it.
pub fn ok(result: Value) -> Value {
    assert_eq!(
        result.get("status").and_then(Value::as_str),
        Some("success"),
        "expected success, got {result:#}"
    );
    result
}

/// Asserts a facade envelope is an error with `code` and returns it.
pub fn err(result: Value, code: &str) -> Value {
    assert_eq!(
        result.get("status").and_then(Value::as_str),
        Some("error"),
        "expected error {code}, got {result:#}"
    );
    assert_eq!(
        result.get("code").and_then(Value::as_str),
        Some(code),
        "wrong error code in {result:#}"
    );
    result
}

/// Deterministic body of the crash writer's `i`-th file: between 1 byte and ~9 KiB, spanning
/// several 4 KiB blocks when the store uses small blocks.
pub fn crash_body(i: u64) -> Vec<u8> {
    let len = 1 + (i.wrapping_mul(2_654_435_761) % 9_000) as usize;
    (0..len)
        .map(|j| (i as usize).wrapping_mul(31).wrapping_add(j) as u8)
        .collect()
}
