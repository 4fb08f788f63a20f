//! Helpers shared by the NoKV integration tests in `tests/tests/`.

use meta::codec::{
    artifact_revision, path_current, revision_ref, ArtifactRevision, CommandResult, RefOwner,
    RevisionRef,
};
use meta::command::{Mutation, Predicate};
use meta::schema::Family;
use meta::RequestId;
use nokv::Client;
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

/// Writes a PathCurrent row for `file` that shares the revision of the existing file `from`, with
/// its reference bookkeeping — what an older NoKV could publish next to `file/…` descendants.
pub fn fabricate_clash(client: &Client, id: &str, file: &str, from: &str) {
    let shard = client.meta();
    let read = shard.read();
    let ws = read.visible_workspace(id).unwrap();
    let root = shard.root_id();
    let (file, from) = (
        meta::normalize(file).unwrap(),
        meta::normalize(from).unwrap(),
    );
    let mut entry = read.path_entry(&ws.incarnation, &from).unwrap().unwrap();
    let rev = entry.artifact_revision_id;
    let rev_key = artifact_revision::key(&root, &rev);
    let rev_bytes = shard
        .db()
        .tree("artifact_revision")
        .unwrap()
        .get(&rev_key)
        .unwrap()
        .unwrap();
    let mut row = ArtifactRevision::decode(&rev_bytes).unwrap();
    row.strong_reference_count += 1;
    row.reference_epoch += 1;
    let cv = read.version() + 1;
    entry.generation = cv;
    entry.created_version = cv;
    entry.modified_version = cv;
    let mut cmd = shard.command_header(
        RequestId::random().unwrap(),
        [9; 32],
        read.version(),
        CommandResult::Applied { value: 0 },
    );
    let path_key = path_current::key(&root, &ws.incarnation, &file);
    cmd.predicates = vec![
        Predicate::absent(Family::PathCurrent, path_key.clone()),
        Predicate::equals(Family::ArtifactRevision, rev_key.clone(), rev_bytes),
    ];
    cmd.mutations = vec![
        Mutation::put(Family::PathCurrent, path_key, entry.encode()),
        Mutation::put(
            Family::RevisionRef,
            revision_ref::key(
                &root,
                &RefOwner::Path {
                    incarnation: ws.incarnation,
                    path: file,
                },
                &rev,
            ),
            RevisionRef {
                reference_epoch_at_add: row.reference_epoch,
                created_version: cv,
            }
            .encode(),
        ),
        Mutation::put(Family::ArtifactRevision, rev_key, row.encode()),
    ];
    drop(read);
    shard.execute(cmd).unwrap();
}
