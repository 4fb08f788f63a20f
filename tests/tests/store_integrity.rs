//! Store-level integrity: a store with a foreign schema marker is refused before anything is
//! served (and left untouched), and a corrupted block is reported, never returned as data.

use meta::codec::system::{SchemaMarker, KEY_SCHEMA};
use nokv::workbench::Workbench;
use nokv_tests::{err, ok};
use serde_json::json;

fn snapshot_files(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn store_with_a_wrong_schema_marker_is_refused_and_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    {
        let client = nokv::Client::open(&store).unwrap();
        client.create_workbench("wb").unwrap();
    }
    // Rewrite the marker through holt as a format-7 store would carry it.
    {
        let db = holt::Db::open(store.join("meta"), holt::Options::default()).unwrap();
        let system = db.tree("system").unwrap();
        let mut marker = SchemaMarker::current();
        marker.format_version = 7;
        let mut batch = holt::Batch::new();
        batch.put(&system, KEY_SCHEMA.to_vec(), marker.encode());
        db.commit(batch).unwrap();
    }
    let before = snapshot_files(&store);
    let refused = nokv::Client::open(&store).expect_err("format 7 must be refused");
    let msg = refused.to_string();
    assert!(
        matches!(
            refused,
            nokv::Error::Meta(meta::Error::SchemaMismatch { .. })
        ),
        "wrong error: {msg}"
    );
    assert!(
        msg.contains('7'),
        "message names the offending version: {msg}"
    );
    assert_eq!(
        snapshot_files(&store),
        before,
        "a refused store is byte-identical"
    );
}

#[test]
fn corrupted_block_is_object_unavailable_never_data() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let client = nokv::Client::open(&store).unwrap();
    let wb = Workbench::new(client.clone());
    ok(wb.call("workbench_create", &json!({"id":"wb"})));
    ok(wb.call(
        "workbench_put_file",
        &json!({"id":"wb","section":"outputs","path":"r.txt","text":"precious bytes\n"}),
    ));
    // Flip one byte of the only block on disk.
    let blocks: Vec<_> = snapshot_files(&store.join("objects"))
        .into_iter()
        .filter(|(p, _)| p.to_string_lossy().contains("/blocks/"))
        .collect();
    assert_eq!(blocks.len(), 1);
    let (path, mut bytes) = blocks.into_iter().next().unwrap();
    bytes[0] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let e = err(
        wb.call(
            "workbench_read",
            &json!({"id":"wb","section":"outputs","path":"r.txt"}),
        ),
        "ObjectUnavailable",
    );
    assert_eq!(e["retryable"], true);
    // ...but a damaged block is not a passing failure, and the envelope says so.
    assert_eq!(e["details"]["reason"], "object_damaged", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("retrying will not help"), "{e}");
    assert!(!message.contains("fsck"), "fsck reads no bytes: {e}");
    let text = e.to_string();
    assert!(
        !text.contains("nokv/artifacts"),
        "no object keys in messages: {text}"
    );
    assert!(
        !text.contains("recious"),
        "no unverified bytes leak: {text}"
    );
    err(
        wb.call(
            "workbench_read",
            &json!({"id":"wb","section":"outputs","path":"r.txt","format":"bytes"}),
        ),
        "ObjectUnavailable",
    );
    assert!(matches!(
        client.read_all("wb", "outputs/r.txt"),
        Err(nokv::Error::ObjectUnavailable(_))
    ));
}
