//! The one canonical-JSON function and the commit identity of `docs/workbench.md` ("commit").
//!
//! Canonical JSON = compact (no insignificant whitespace), object keys sorted recursively by
//! their UTF-8 bytes, array order kept, numbers in the form of
//! [`super::numbers::canonical_number`] (integers as their exact digits; other numbers as their
//! exact decimal value in serde_json's `f64` layout, so a number an `f64` holds exactly keeps the
//! bytes it always had and a longer one is never rounded), strings escaped minimally (`"`, `\`,
//! control characters). The run manifest, its digest, the commit identity and the
//! `run_manifest.json` envelope are all derived from these bytes, so replays reproduce them
//! exactly.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use nokv_protocol::errors::{ErrorCode, ToolError, ToolResult};

/// Deepest nesting a canonical document may have (objects and arrays).
pub const MAX_CANONICAL_DEPTH: usize = 64;
/// Domain separator of the commit identity (docs/workbench.md).
pub const COMMIT_IDENTITY_DOMAIN: &[u8] = b"nokv.workbench.commit_identity.v1\0";
/// Domain separator of the run-manifest projection-input digest (docs/metadata-format.md, "Commit Closure").
pub const PROJECTION_INPUT_DOMAIN: &[u8] = b"nokv.workbench.run_manifest.projection_input.v1\0";
/// `schema` of the published `metadata/run_manifest.json`.
pub const RUN_MANIFEST_SCHEMA: &str = "nokv.workbench.run_manifest.v1";

/// Canonical bytes of `value`. Errors: `CanonicalEncodingFailed` when nesting exceeds
/// [`MAX_CANONICAL_DEPTH`].
pub fn canonical_json(value: &Value) -> ToolResult<Vec<u8>> {
    let sorted = sort_keys(value, 0)?;
    serde_json::to_vec(&sorted).map_err(|e| {
        ToolError::new(
            ErrorCode::CanonicalEncodingFailed,
            format!("cannot encode canonical JSON: {e}"),
        )
    })
}

fn sort_keys(value: &Value, depth: usize) -> ToolResult<Value> {
    if depth > MAX_CANONICAL_DEPTH {
        return Err(ToolError::new(
            ErrorCode::CanonicalEncodingFailed,
            format!("document nests deeper than {MAX_CANONICAL_DEPTH} levels"),
        ));
    }
    Ok(match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(k.clone(), sort_keys(v, depth + 1)?);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| sort_keys(v, depth + 1))
                .collect::<ToolResult<Vec<_>>>()?,
        ),
        Value::Number(n) => Value::Number(
            super::numbers::canonical_number(n)
                .parse()
                .unwrap_or_else(|_| n.clone()),
        ),
        other => other.clone(),
    })
}

/// `sha256:` + lowercase hex of SHA-256 over `bytes`.
pub fn sha256_uri(bytes: &[u8]) -> String {
    objstore::sha256_uri(bytes)
}

/// `manifest_digest_uri = "sha256:" + hex(sha256(canonical(manifest)))`.
pub fn manifest_digest_uri(manifest: &Value) -> ToolResult<String> {
    Ok(sha256_uri(&canonical_json(manifest)?))
}

fn len64(out: &mut Sha256, bytes: &[u8]) {
    out.update((bytes.len() as u64).to_be_bytes());
    out.update(bytes);
}

/// Commit identity (32 bytes) = `sha256("nokv.workbench.commit_identity.v1\0" ‖ len64be(id) ‖ id
/// ‖ len64be(content_digest_uri) ‖ content_digest_uri ‖ len64be(manifest_digest_uri) ‖
/// manifest_digest_uri)` (docs/workbench.md, "commit").
pub fn commit_identity(
    workbench_id: &str,
    content_digest_uri: &str,
    manifest_digest_uri: &str,
) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(COMMIT_IDENTITY_DOMAIN);
    len64(&mut h, workbench_id.as_bytes());
    len64(&mut h, content_digest_uri.as_bytes());
    len64(&mut h, manifest_digest_uri.as_bytes());
    h.finalize().into()
}

/// The run-manifest projection-input digest of docs/metadata-format.md ("Commit Closure"): every caller-known
/// `run_manifest.v1` input except `committed_at_unix_seconds`.
pub fn projection_input_digest(
    workbench_id: &str,
    workbench_path: &str,
    content_digest_uri: &str,
    canonical_manifest: &[u8],
    manifest_digest_uri: &str,
    commit_identity: &[u8; 32],
) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(PROJECTION_INPUT_DOMAIN);
    len64(&mut h, workbench_id.as_bytes());
    len64(&mut h, workbench_path.as_bytes());
    len64(&mut h, content_digest_uri.as_bytes());
    len64(&mut h, canonical_manifest);
    len64(&mut h, manifest_digest_uri.as_bytes());
    h.update(commit_identity);
    h.finalize().into()
}

/// Canonical bytes of the published `metadata/run_manifest.json`: exactly the keys `schema`,
/// `workbench_id`, `workbench_path`, `content_digest_uri`, `manifest_digest_uri`,
/// `commit_identity` (hex), `committed_at_unix_seconds` and `manifest`.
pub fn run_manifest_envelope(
    workbench_id: &str,
    workbench_path: &str,
    content_digest_uri: &str,
    manifest: &Value,
    committed_at_unix_seconds: u64,
) -> ToolResult<Vec<u8>> {
    let manifest_digest = manifest_digest_uri(manifest)?;
    let identity = commit_identity(workbench_id, content_digest_uri, &manifest_digest);
    let mut env = Map::new();
    env.insert("schema".into(), Value::from(RUN_MANIFEST_SCHEMA));
    env.insert("workbench_id".into(), Value::from(workbench_id));
    env.insert("workbench_path".into(), Value::from(workbench_path));
    env.insert("content_digest_uri".into(), Value::from(content_digest_uri));
    env.insert("manifest_digest_uri".into(), Value::from(manifest_digest));
    env.insert(
        "commit_identity".into(),
        Value::from(objstore::hex_lower(&identity)),
    );
    env.insert(
        "committed_at_unix_seconds".into(),
        Value::from(committed_at_unix_seconds),
    );
    env.insert("manifest".into(), manifest.clone());
    canonical_json(&Value::Object(env))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vector_content_digest() -> String {
        format!("sha256:{}", "01".repeat(32))
    }

    #[test]
    fn commit_identity_reproduces_the_contract_test_vector() {
        let manifest = json!({"task": "ptycho", "model": "viking"});
        let md = manifest_digest_uri(&manifest).unwrap();
        assert!(md.starts_with("sha256:23312ff4"), "{md}");
        let id = objstore::hex_lower(&commit_identity("wb-main", &vector_content_digest(), &md));
        assert!(id.starts_with("9f3a0a15"), "{id}");
        let env = run_manifest_envelope(
            "wb-main",
            "/agents/test/wb/wb-main",
            &vector_content_digest(),
            &manifest,
            1_700_000_000,
        )
        .unwrap();
        assert_eq!(env.len(), 472);
        assert!(sha256_uri(&env).starts_with("sha256:dd01f7d8"));
    }

    #[test]
    fn canonical_json_sorts_keys_recursively_by_bytes_and_keeps_array_order() {
        let v = json!({"b": [3, 1, {"z": 1, "a": 2}], "a": {"é": 1, "e": 2, "Z": 3}});
        let bytes = canonical_json(&v).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#"{"a":{"Z":3,"e":2,"é":1},"b":[3,1,{"a":2,"z":1}]}"#
        );
    }

    #[test]
    fn canonical_json_keeps_large_and_long_numbers_exact() {
        let v: Value = serde_json::from_str(
            r#"{"big":12345678901234567890123,"neg_big":-99999999999999999999,"long":0.1000000000000000000001,"plain":1.50,"e":1e3}"#,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(canonical_json(&v).unwrap()).unwrap(),
            r#"{"big":12345678901234567890123,"e":1000.0,"long":0.1000000000000000000001,"neg_big":-99999999999999999999,"plain":1.5}"#
        );
    }

    #[test]
    fn canonical_json_refuses_excessive_nesting() {
        let mut v = json!(1);
        for _ in 0..(MAX_CANONICAL_DEPTH + 2) {
            v = json!([v]);
        }
        assert_eq!(
            canonical_json(&v).unwrap_err().code,
            ErrorCode::CanonicalEncodingFailed
        );
    }
}
