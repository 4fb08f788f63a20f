//! `nokv fsck` reads only: it runs beside a writer that holds the store (a `nokv serve`) without
//! waiting for its lock (it used to wait 30 s, then fail), and a check writes no file;
//! `--repair-index` opens as the writer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use nokv::{Client, PutOptions};
use nokv_server::ServerOptions;

/// Every file under `dir` with its size and modification time.
fn tree(dir: &Path) -> BTreeMap<PathBuf, (u64, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path(), (m.len(), m.modified().unwrap()));
            }
        }
    }
    out
}

fn fsck(store: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(store)
        .arg("fsck")
        .args(extra)
        .output()
        .unwrap()
}

fn store_with_files(store: &Path) {
    let client = Client::open(store).unwrap();
    client.create_workbench("wb").unwrap();
    for i in 0..20 {
        client
            .put(
                "wb",
                &format!("outputs/f{i:02}.txt"),
                format!("file {i}\n").as_bytes(),
                &PutOptions::create("text/plain", "t"),
            )
            .unwrap();
    }
}

#[test]
fn fsck_writes_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    store_with_files(&store);
    let before = tree(&store);
    // Modification times need a tick to differ.
    std::thread::sleep(Duration::from_millis(20));
    let out = fsck(&store, &["--json"]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["clean"], true, "{v}");
    assert_eq!(tree(&store), before, "fsck changed files of the store");
}

#[test]
fn fsck_answers_beside_a_running_server_and_repair_runs_once_it_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s");
    store_with_files(&store);
    let srv = nokv_server::start(ServerOptions {
        store: store.clone(),
        listen: "127.0.0.1:0".into(),
        maintenance_interval: Duration::ZERO,
        recovery_interval: Duration::ZERO,
        ..ServerOptions::default()
    })
    .unwrap();
    // The server holds the store's lock; the check does not need it.
    let out = fsck(&store, &["--json"]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["clean"], true, "{v}");
    srv.shutdown().unwrap();
    // The repair writes: it opens as the writer, which it can once the server is gone.
    let out = fsck(&store, &["--repair-index"]);
    assert!(out.status.success(), "{out:?}");
}
