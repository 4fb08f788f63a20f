//! Helpers shared by the NoKV integration tests in `tests/tests/`.

use serde_json::Value;

/// Opens a fresh embedded store in a new temporary directory. Keep the `TempDir` alive.
pub fn fresh_store() -> (tempfile::TempDir, nokv::Client) {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = nokv::Client::open(dir.path().join("store")).expect("open store");
    (dir, client)
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
