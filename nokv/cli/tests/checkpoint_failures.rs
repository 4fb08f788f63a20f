//! A background merge of the metadata engine that fails (a damaged image block it has to read)
//! loses nothing and leaves no `.tmp` behind, and the store's owners say so: the SDK's
//! `Client::checkpoint_failures` counts it, a long-running owner's maintenance pass warns when
//! the count rises, and every process closing such a store warns once (the CLI: one line on
//! stderr); no warning names a local path, each says to run `nokv fsck`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nokv::{Client, PutOptions};

const MARKER: &str = "application/x-merge-needle";

fn put_files(store: &Path, prefix: &str, n: usize, marker_at: Option<usize>) {
    let client = Client::open(store).unwrap();
    for i in 0..n {
        let content_type = if Some(i) == marker_at {
            MARKER
        } else {
            "text/plain"
        };
        client
            .put(
                "wb",
                &format!("input/{prefix}-{i:04}.txt"),
                format!("body {prefix} {i}").as_bytes(),
                &PutOptions::create(content_type, "test"),
            )
            .unwrap();
    }
}

fn files_with_extension(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

/// Flushes the metadata engine's delta as one more image (no background thread); returns what
/// the flush and the merges the policy then calls for answered.
fn flush(meta: &Path) -> holt::Result<()> {
    let manual = holt::Options {
        checkpoint_wal_bytes: 0,
        ..holt::Options::default()
    };
    holt::Db::open(meta, manual).unwrap().flush()
}

/// A store whose metadata is a base image under three small images of one size tier, the oldest
/// of which has a damaged block (a flipped byte in one path entry): every writer open has a merge
/// of the three due, and that merge must read the damaged block.
fn store_with_a_due_merge_over_a_damaged_block(store: &Path) {
    let meta = store.join("meta");
    Client::open(store).unwrap().create_workbench("wb").unwrap();
    put_files(store, "base", 20, None);
    holt::Db::open(&meta, holt::Options::default())
        .unwrap()
        .checkpoint()
        .unwrap();
    put_files(store, "run1", 2, Some(1));
    flush(&meta).unwrap();
    put_files(store, "run2", 2, None);
    flush(&meta).unwrap();
    put_files(store, "run3", 2, None);
    let images = files_with_extension(&meta, "holt");
    assert_eq!(images.len(), 3, "{images:?}");
    let run1 = images
        .iter()
        .find(|p| {
            let bytes = std::fs::read(p).unwrap();
            bytes.windows(MARKER.len()).any(|w| w == MARKER.as_bytes())
        })
        .expect("the path entry's content type is in the first run")
        .clone();
    let mut bytes = std::fs::read(&run1).unwrap();
    let at = bytes
        .windows(MARKER.len())
        .position(|w| w == MARKER.as_bytes())
        .unwrap();
    bytes[at + 3] ^= 0x01;
    std::fs::write(&run1, &bytes).unwrap();
    // The third run is installed; the merge of the three the policy then calls for fails.
    let flushed = flush(&meta);
    assert!(
        matches!(flushed, Err(holt::Error::Corrupt { .. })),
        "{flushed:?}"
    );
    assert_eq!(files_with_extension(&meta, "holt").len(), 4);
}

/// The warnings this process logs (the process-wide tracing subscriber; this file has one test).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn install() -> Captured {
        let captured = Captured::default();
        let sink = captured.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .init();
        captured
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failed_background_merge_is_counted_loses_nothing_and_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s");
    store_with_a_due_merge_over_a_damaged_block(&store);
    let meta = store.join("meta");

    let captured = Captured::install();
    // The SDK: the open starts the due merge in the background; it fails and is counted.
    {
        let client = Client::open(&store).unwrap();
        client.meta().holt_db().unwrap().wait_checkpointer_idle();
        assert_eq!(client.checkpoint_failures(), 1);
        let stats = client.meta().holt_db().unwrap().stats();
        assert!(
            stats
                .last_checkpoint_error
                .as_deref()
                .is_some_and(|e| e.contains("CRC mismatch")),
            "{stats:?}"
        );
        assert!(files_with_extension(&meta, "tmp").is_empty());
        // Every acknowledged publication outside the damaged block still reads, and writes that
        // do not need that block still succeed.
        for path in [
            "input/base-0001.txt",
            "input/run2-0000.txt",
            "input/run3-0001.txt",
        ] {
            assert!(client.stat("wb", path).is_ok(), "{path}");
        }
        client.create_workbench("after").unwrap();
        // A long-running owner's maintenance pass warns that the count rose.
        let maintenance = client.start_background_maintenance(Duration::from_millis(20));
        let deadline = Instant::now() + Duration::from_secs(30);
        while maintenance.passes() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(maintenance.passes() >= 1);
        maintenance.stop();
        let logged = captured.text();
        assert_eq!(
            logged
                .matches("failed 1 time since the store was opened")
                .count(),
            1,
            "{logged}"
        );
        assert!(!logged.contains("while the store was open"), "{logged}");
    }
    // Dropping the last clone closed the store: one close-time warning.
    let logged = captured.text();
    assert_eq!(
        logged
            .matches("failed 1 time while the store was open")
            .count(),
        1,
        "{logged}"
    );
    assert!(
        !logged.contains(&dir.path().display().to_string()),
        "{logged}"
    );

    // A CLI process that opens the store for writing meets the same failure and says so once,
    // on stderr, when it closes the store; its answer on stdout is unaffected.
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(&store)
        .args(["workbench", "create", r#"{"id":"other"}"#])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "success", "{v}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("background checkpoints"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains("WARN"), "{stderr}");
    assert!(warnings[0].contains("failed 1 time "), "{stderr}");
    assert!(warnings[0].contains("nokv fsck"), "{stderr}");
    assert!(
        !warnings[0].contains(&dir.path().display().to_string()),
        "no local path: {stderr}"
    );
    assert!(files_with_extension(&meta, "tmp").is_empty());

    // A process whose store had no failure says nothing.
    let clean = dir.path().join("clean");
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(&clean)
        .args(["workbench", "create", r#"{"id":"wb"}"#])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("background checkpoints"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
