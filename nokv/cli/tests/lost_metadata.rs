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
    store_with_one_object(&store);
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
    assert_damaged_envelope(&v, &store);
    assert_eq!(
        sizes(&store),
        before,
        "nothing may be written over lost metadata"
    );
}

/// The refusal of a store whose metadata is damaged or lost: `InvalidState`, not retryable,
/// `details.reason: "metadata_damaged"`, a message saying so and naming no local path.
fn assert_damaged_envelope(v: &serde_json::Value, store: &Path) {
    assert_eq!(v["status"], "error", "{v}");
    assert_eq!(v["code"], "InvalidState", "{v}");
    assert_eq!(v["retryable"], false, "{v}");
    assert_eq!(v["details"]["reason"], "metadata_damaged", "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(message.contains("damaged"), "{v}");
    assert!(!message.contains(&store.display().to_string()), "{v}");
}

/// Runs `nokv --store STORE ARGS…` and returns its JSON envelope (stdout) and exit success.
fn nokv_json(store: &Path, args: &[&str]) -> (serde_json::Value, bool) {
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.success())
}

fn store_with_one_object(store: &Path) {
    let client = Client::open(store).unwrap();
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

#[test]
fn a_deleted_metadata_directory_beside_objects_is_refused_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    store_with_one_object(&store);
    std::fs::remove_dir_all(store.join("meta")).unwrap();

    match Client::open_with(&store, ClientOptions::default()) {
        Err(Error::Meta(meta::Error::Storage(holt::Error::Corrupt { reason, .. }))) => {
            assert!(reason.contains("no commit"), "{reason}");
        }
        other => panic!("expected the damaged-metadata refusal, got {other:?}"),
    }
    assert!(!store.join("meta").exists(), "the writer created metadata");
    // A reading tool (read-only open) and a writing one both answer "damaged", not "create a
    // workbench first" or "never initialized".
    for args in [
        &["workbench", "list", r#"{"id":"wb"}"#][..],
        &[
            "workbench",
            "stat",
            r#"{"id":"wb","section":"input","path":"a.txt"}"#,
        ],
        &["workbench", "create", r#"{"id":"other"}"#],
        &[
            "workbench",
            "put_file",
            r#"{"id":"wb","section":"input","path":"b.txt","text":"x"}"#,
        ],
    ] {
        let (v, ok) = nokv_json(&store, args);
        assert!(!ok, "{args:?}: {v}");
        assert_damaged_envelope(&v, &store);
    }
    // `fsck --json` gives the same envelope on stdout.
    let (v, ok) = nokv_json(&store, &["fsck", "--json"]);
    assert!(!ok, "{v}");
    assert_damaged_envelope(&v, &store);
    // fsck says damaged too, not "no store here".
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(&store)
        .arg("fsck")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        text.contains("damaged") || text.contains("no commit"),
        "{text}"
    );
    assert!(!text.contains("no NoKV store exists"), "{text}");
    assert!(!store.join("meta").exists(), "a CLI call created metadata");
}

#[test]
fn emptied_metadata_beside_objects_is_damaged_for_read_only_calls_too() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    store_with_one_object(&store);
    // Lose everything but the lock and the (emptied) WAL directory.
    std::fs::remove_dir_all(store.join("meta")).unwrap();
    std::fs::create_dir_all(store.join("meta/wal")).unwrap();
    std::fs::write(store.join("meta/LOCK"), b"").unwrap();
    let (v, ok) = nokv_json(
        &store,
        &[
            "workbench",
            "stat",
            r#"{"id":"wb","section":"input","path":"a.txt"}"#,
        ],
    );
    assert!(!ok, "{v}");
    assert_damaged_envelope(&v, &store);
    let message = v["message"].as_str().unwrap();
    assert!(!message.contains("open it for writing"), "{v}");
    assert!(sizes(&store).is_empty(), "nothing written into meta/wal");
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

/// `nokv fsck` reads every metadata image block, not only those its row checks touch: a
/// flipped byte in a block holding one publication's path entry is a `DamagedMetadataBlock`
/// finding naming the image file, and fsck fails.
#[test]
fn fsck_reports_a_damaged_metadata_image_block() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    let marker = "application/x-fsck-scrub-needle";
    {
        let client = Client::open(&store).unwrap();
        client.create_workbench("wb").unwrap();
        for i in 0..200 {
            let content_type = if i == 150 { marker } else { "text/plain" };
            client
                .put(
                    "wb",
                    &format!("input/file-{i:04}.txt"),
                    format!("body {i}").as_bytes(),
                    &PutOptions::create(content_type, "test"),
                )
                .unwrap();
        }
    }
    // Write the metadata as one image (what an automatic checkpoint does on a larger store).
    holt::Db::open(store.join("meta"), holt::Options::default())
        .unwrap()
        .checkpoint()
        .unwrap();
    let clean = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(&store)
        .arg("fsck")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&clean.stdout).into_owned();
    assert!(clean.status.success(), "{text}");
    assert!(text.contains("fsck: clean"), "{text}");
    assert!(!text.contains(" 0 metadata blocks"), "{text}");

    let image = std::fs::read_dir(store.join("meta"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "holt"))
        .expect("an image after the checkpoint");
    let mut bytes = std::fs::read(&image).unwrap();
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker.as_bytes())
        .expect("the path entry's content type is in the image");
    bytes[at + 3] ^= 0x01;
    std::fs::write(&image, &bytes).unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(&store)
        .arg("fsck")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(!text.contains("fsck: clean"), "{text}");
    assert!(text.contains("DamagedMetadataBlock"), "{text}");
    assert!(
        text.contains(&format!("image block {} CRC mismatch", at / 4096)),
        "{text}"
    );
    assert!(text.contains(&image.display().to_string()), "{text}");
    assert!(text.contains("row checks skipped"), "{text}");
}
