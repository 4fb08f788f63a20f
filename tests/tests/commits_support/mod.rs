//! Shared checks of the commit tests: reference counts recomputed from rows.

use std::collections::BTreeMap;

use meta::codec::ArtifactRevision;

fn all_rows(client: &nokv::Client, tree: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    use meta::store::{Snapshot, TxnStore};
    let family = meta::schema::Family::from_name(tree).expect("family exists");
    client
        .meta()
        .store()
        .snapshot()
        .rows(family, &[], "test rows")
        .expect("rows")
}

/// Asserts that every ArtifactRevision's `strong_reference_count` equals the number of
/// RevisionRef rows targeting it (the target is the key's last 16 bytes), and returns the
/// number of RevisionRef rows per reference kind byte (key byte 16).
pub fn assert_reference_counts_match_rows(client: &nokv::Client) -> BTreeMap<u8, usize> {
    let mut per_target: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let mut per_kind: BTreeMap<u8, usize> = BTreeMap::new();
    for (key, _) in all_rows(client, "revision_ref") {
        *per_target
            .entry(key[key.len() - 16..].to_vec())
            .or_default() += 1;
        *per_kind.entry(key[16]).or_default() += 1;
    }
    for (key, value) in all_rows(client, "artifact_revision") {
        let rev = ArtifactRevision::decode(&value).expect("revision decodes");
        let rows = per_target.get(&key[16..]).copied().unwrap_or(0);
        assert_eq!(
            rev.strong_reference_count,
            rows,
            "revision {:02x?}: count {} but {} RevisionRef rows",
            &key[16..],
            rev.strong_reference_count,
            rows
        );
    }
    per_kind
}

/// Number of rows in a tree.
pub fn row_count(client: &nokv::Client, tree: &str) -> usize {
    all_rows(client, tree).len()
}
