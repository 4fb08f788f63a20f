//! Shared helpers of the object-lifetime tests (`remove.rs`, `gc_*.rs`, `fsck.rs`): stores with
//! GC enabled, raw row access, the provider's object set and an independent recomputation of the
//! objects something still references.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::Path;

use holt::{Entry, RangeSpec};
use meta::codec::ManifestRow;

/// Opens (creating) a store and sets `history_retention_versions = 0`, so GC is bounded only by
/// history holds.
pub fn open_gc(dir: &Path) -> nokv::Client {
    let client = nokv::Client::open(dir).expect("open store");
    client
        .config_set("history_retention_versions", "0")
        .expect("set retention");
    client
}

/// Opens an existing store (retention as stored).
pub fn reopen(dir: &Path) -> nokv::Client {
    nokv::Client::open(dir).expect("reopen store")
}

/// Every `(key, value)` row of a holt tree, at the current version.
pub fn all_rows(client: &nokv::Client, tree: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let db = client.meta().holt_db().expect("a holt-backed shard");
    let tree = db.tree(tree).expect("tree exists");
    let spec = RangeSpec {
        prefix: Vec::new(),
        start_after: None,
        delimiter: None,
        limit: None,
    };
    tree.range(&spec)
        .expect("range")
        .map(|e| match e.expect("entry") {
            Entry::Key { key, value } => (key, value),
            Entry::CommonPrefix(p) => panic!("unexpected rollup {p:?}"),
        })
        .collect()
}

/// Every block object the provider holds (a listing: for assertions only).
pub fn provider_keys(client: &nokv::Client) -> BTreeSet<String> {
    client
        .objects()
        .list("nokv/artifacts/")
        .expect("list")
        .into_iter()
        .collect()
}

/// Total size in bytes of the provider's block objects.
pub fn provider_bytes(client: &nokv::Client) -> u64 {
    provider_keys(client)
        .iter()
        .map(|k| {
            client
                .objects()
                .head(k)
                .expect("head")
                .expect("present")
                .size
        })
        .sum()
}

/// Independent recomputation (raw tree rows only, none of the GC or fsck code): the revisions
/// some RevisionRef row targets, and the object keys their manifests name — the blocks that must
/// still exist.
pub fn referenced_keys(client: &nokv::Client) -> BTreeSet<String> {
    let referenced: BTreeSet<Vec<u8>> = all_rows(client, "revision_ref")
        .into_iter()
        .map(|(k, _)| k[k.len() - 16..].to_vec())
        .collect();
    let mut keys = BTreeSet::new();
    for (k, v) in all_rows(client, "artifact_manifest") {
        // root 16 | revision 16 | u64 object_index
        let rev = &k[16..32];
        if referenced.contains(rev) {
            let idx = u64::from_be_bytes(k[32..40].try_into().expect("index"));
            keys.insert(
                ManifestRow::decode_value(idx, &v)
                    .expect("manifest row")
                    .object_key,
            );
        }
    }
    keys
}

/// Asserts fsck reports nothing (and no unowned object).
pub fn assert_fsck_clean(client: &nokv::Client) {
    let outcome = client.fsck().expect("fsck");
    assert!(
        outcome.report.findings.is_empty(),
        "fsck findings: {:#?}",
        outcome.report.findings
    );
    assert!(
        outcome.unowned_objects.is_empty(),
        "unowned objects: {:?}",
        outcome.unowned_objects
    );
}

/// Put options: create-only text.
pub fn create() -> nokv::PutOptions {
    nokv::PutOptions::create("text/plain", "test")
}

/// Put options: replace whatever generation is current.
pub fn replace() -> nokv::PutOptions {
    nokv::PutOptions {
        condition: nokv::WriteCondition::Replace {
            expected_generation: None,
        },
        ..create()
    }
}

/// Deterministic bytes.
pub fn body(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The revision id (hex) of the artifact at `path`.
pub fn revision_of(client: &nokv::Client, wb: &str, path: &str) -> String {
    client
        .stat(wb, path)
        .expect("stat")
        .artifact_revision_id
        .to_hex()
}

/// The block keys of a revision (hex id) as the manifest names them (own objects only).
pub fn own_keys(client: &nokv::Client, revision_hex: &str) -> BTreeSet<String> {
    let rev = meta::ArtifactRevisionId::from_hex(revision_hex).expect("revision id");
    meta::ops::gc::own_objects(client.meta(), &rev)
        .expect("own objects")
        .into_iter()
        .map(|o| o.key)
        .collect()
}

/// Runs GC passes until one collects nothing more (at most `max` passes); returns the reports.
pub fn gc_until_quiet(client: &nokv::Client, max: usize) -> Vec<nokv::lifetime::GcReport> {
    let mut out = Vec::new();
    for _ in 0..max {
        let r = client.gc(&Default::default()).expect("gc");
        let quiet = r.collected.is_empty();
        out.push(r);
        if quiet {
            break;
        }
    }
    out
}
