//! `nokv verify`: the explicit full verification of the retained RecoveryOutbox chain
//! (docs/recovery-outbox.md). An open verifies only the records after the verified chain head,
//! so damage below the head is found by `nokv verify`, not by the reading calls; `verify` itself
//! writes nothing, and `--maintain` removes old records per the retention policy as the writer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

fn nokv(store: &Path, args: &[&str]) -> (i32, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("spawn nokv");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let v = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON envelope ({e}): {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn tool(store: &Path, name: &str, input: Value) -> Value {
    let (code, v) = nokv(store, &["workbench", name, &input.to_string()]);
    assert_eq!(code, 0, "{name}: {v}");
    v
}

/// Path → (bytes, mtime) of every file under `dir`.
fn files(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let md = std::fs::metadata(&p).unwrap();
            if md.is_dir() {
                stack.push(p);
            } else {
                out.insert(
                    p.clone(),
                    (std::fs::read(&p).unwrap(), md.modified().unwrap()),
                );
            }
        }
    }
    out
}

/// A store with one workbench and `n` files, each published by its own writer process.
fn populated(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let init = Command::new(env!("CARGO_BIN_EXE_nokv"))
        .arg("--store")
        .arg(dir.path())
        .arg("init")
        .output()
        .expect("spawn nokv init");
    assert!(init.status.success(), "{init:?}");
    tool(dir.path(), "create", json!({"id": "wb"}));
    for i in 0..n {
        tool(
            dir.path(),
            "put_file",
            json!({"id": "wb", "section": "outputs", "path": format!("f{i}.txt"), "text": format!("body {i}\n")}),
        );
    }
    dir
}

#[test]
fn verify_reports_the_whole_retained_chain_writes_nothing_and_maintain_keeps_the_policy() {
    let dir = populated(4);
    let before = files(dir.path());
    let (code, v) = nokv(dir.path(), &["verify"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "success", "{v}");
    let outbox = &v["outbox"];
    // Nothing pruned yet (default retention keeps 1,024 records): the chain starts at LSN 1.
    assert_eq!(outbox["first_lsn"], 1, "{v}");
    assert_eq!(outbox["pruned_through_lsn"], 0, "{v}");
    let last = outbox["last_lsn"].as_u64().unwrap();
    // Initialization, the workbench, and per put at least its commands and an epoch advance.
    assert!(last >= 1 + 1 + 4 * 2, "{v}");
    assert_eq!(outbox["records"].as_u64().unwrap(), last, "{v}");
    let head = outbox["verified_head_lsn"].as_u64().unwrap();
    assert!(head >= 2 && head <= last, "{v}");
    assert!(v["maintenance"].is_null(), "{v}");
    assert_eq!(files(dir.path()), before, "verify wrote to the store");

    // --maintain runs as the writer; with the default policy nothing is old enough to remove,
    // and the head reaches the tail it verified.
    let (code, v) = nokv(dir.path(), &["verify", "--maintain"]);
    assert_eq!(code, 0, "{v}");
    let m = &v["maintenance"];
    assert!(m["steps"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(m["pruned_records"], 0, "{v}");
    assert_eq!(m["more_to_prune"], false, "{v}");
    assert!(m["verified_head_lsn"].as_u64().unwrap() >= last, "{v}");
    // The store still verifies and serves reads.
    let (code, v) = nokv(dir.path(), &["verify"]);
    assert_eq!(code, 0, "{v}");
    tool(
        dir.path(),
        "stat",
        json!({"id": "wb", "section": "outputs", "path": "f3.txt"}),
    );
}

#[test]
fn verify_finds_damage_below_the_verified_head_that_opens_do_not_read() {
    let dir = populated(3);
    let (code, v) = nokv(dir.path(), &["verify"]);
    assert_eq!(code, 0, "{v}");
    let head = v["outbox"]["verified_head_lsn"].as_u64().unwrap();
    let lsn = 2;
    assert!(head > lsn, "the head must be past the damaged record: {v}");

    // Flip one byte of the record's first chunk (no process holds the store now).
    {
        let db = holt::Db::open(dir.path().join("meta"), holt::Options::default()).unwrap();
        let t = db.tree("recovery_outbox").unwrap();
        let key = meta::outbox::chunk_key(lsn, 0);
        let mut value = db.view().get(&t, &key).unwrap().expect("chunk present");
        let last = value.len() - 1;
        value[last] ^= 0x01;
        let mut b = holt::Batch::new();
        b.put(&t, key, value);
        db.commit(b).unwrap();
    }

    // Opens verify only after the head: reading calls still answer.
    tool(
        dir.path(),
        "stat",
        json!({"id": "wb", "section": "outputs", "path": "f0.txt"}),
    );
    // The full verification finds the damaged record and names it.
    let before = files(dir.path());
    let (code, v) = nokv(dir.path(), &["verify"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["status"], "error", "{v}");
    assert_eq!(v["code"], "InvalidState", "{v}");
    assert_eq!(v["details"]["reason"], "recovery_outbox_corrupt", "{v}");
    assert_eq!(v["details"]["lsn"], lsn, "{v}");
    assert_eq!(
        files(dir.path()),
        before,
        "a failed verify wrote to the store"
    );
    // --maintain refuses too (it verifies first) and changes nothing.
    let (code, v) = nokv(dir.path(), &["verify", "--maintain"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["details"]["reason"], "recovery_outbox_corrupt", "{v}");
    assert_eq!(files(dir.path()), before);
}
