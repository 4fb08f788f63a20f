//! A store whose metadata was lost (its WAL emptied, nothing else left of it) while its objects
//! remain is refused as damaged by every opener — writer, `fsck`, reading CLI calls — and none of
//! them writes a fresh schema over it. A new store (no objects yet, or only the namespace marker
//! `nokv init` writes) still initializes normally.

use std::path::Path;
use std::process::Command;

use nokv::{Client, ClientOptions, Error, PutOptions};

fn wal_files(store: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(store.join("meta/wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn sizes(store: &Path) -> Vec<u64> {
    wal_files(store)
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .collect()
}

#[test]
fn emptied_metadata_beside_objects_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    {
        let client = Client::open(&store).unwrap();
        client.create_workbench("wb").unwrap();
        client
            .put(
                "wb",
                "input/a.txt",
                b"hello",
                &PutOptions::create("text/plain", "test"),
            )
            .unwrap();
    }
    // Only the WAL holds this small store's metadata: empty every segment, drop any image.
    for entry in std::fs::read_dir(store.join("meta")).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() && p.file_name().is_some_and(|n| n != "LOCK") {
            std::fs::remove_file(&p).unwrap();
        }
    }
    for wal in wal_files(&store) {
        std::fs::File::create(&wal).unwrap();
    }
    let before = sizes(&store);
    assert!(before.iter().all(|&s| s == 0));

    // The writer open (SDK) refuses: damaged metadata, typed.
    match Client::open_with(&store, ClientOptions::default()) {
        Err(Error::Meta(meta::Error::Storage(holt::Error::Corrupt { reason, .. }))) => {
            assert!(reason.contains("no commit"), "{reason}");
        }
        other => panic!("expected the damaged-metadata refusal, got {other:?}"),
    }
    // fsck (a writer open) fails with the damaged envelope and writes nothing.
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(&store)
        .arg("fsck")
        .output()
        .unwrap();
    assert!(!out.status.success(), "fsck must fail on lost metadata");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("clean"), "{text}");
    assert!(
        text.contains("damaged") || text.contains("no commit"),
        "{text}"
    );
    // A tool call that writes gets the damaged envelope too.
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(&store)
        .args(["workbench", "create", r#"{"id":"other"}"#])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "error", "{v}");
    assert!(v["message"].as_str().unwrap().contains("damaged"), "{v}");
    assert_eq!(
        sizes(&store),
        before,
        "nothing may be written over lost metadata"
    );
}

#[test]
fn a_new_store_and_an_initialized_empty_one_still_open() {
    let dir = tempfile::tempdir().unwrap();
    // Brand new: no directory at all.
    let fresh = dir.path().join("fresh");
    Client::open(&fresh)
        .unwrap()
        .create_workbench("wb")
        .unwrap();
    // `nokv init` writes the namespace marker into objects/ before the metadata exists.
    let inited = dir.path().join("inited");
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(&inited)
        .arg("init")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Client::open(&inited)
        .unwrap()
        .create_workbench("wb")
        .unwrap();
}
