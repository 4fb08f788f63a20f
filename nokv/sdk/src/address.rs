//! The address record of a running `nokv serve`: `<store>/server/address.json`,
//! `{"url": "http://ADDR", "pid": N}`, written once the server owns the store and serves, removed
//! when it stops. A writer that finds the store locked reads it (see [`serving`]) to say where
//! the store is served instead of waiting out a lock that a server never releases.
//!
//! The record is a hint, never an authority: it counts only while its process is alive and runs
//! `serve`, so a record left behind by a killed server is ignored (and replaced by the next
//! server), and callers consult it only about a lock they could not take.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The record's file under the store directory.
fn record_path(store: &Path) -> PathBuf {
    store.join("server").join("address.json")
}

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    url: String,
    pid: u32,
}

/// Records that this process serves `store` at `url`. Best effort: a record that cannot be
/// written only costs a clearer error message elsewhere (the temp file is renamed into place,
/// so a reader never sees half a record).
pub fn record(store: &Path, url: &str) {
    let path = record_path(store);
    let tmp = path.with_extension("json.tmp");
    let Ok(body) = serde_json::to_vec(&Record {
        url: url.to_string(),
        pid: std::process::id(),
    }) else {
        return;
    };
    if std::fs::write(&tmp, body).is_ok() && std::fs::rename(&tmp, &path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Removes this process's record (a record another process wrote meanwhile is kept).
pub fn clear(store: &Path) {
    let path = record_path(store);
    if read(&path).is_some_and(|r| r.pid == std::process::id()) {
        let _ = std::fs::remove_file(path);
    }
}

fn read(path: &Path) -> Option<Record> {
    let bytes = std::fs::read(path).ok()?;
    // A record is tiny; anything large or malformed is not one.
    if bytes.len() > 4096 {
        return None;
    }
    serde_json::from_slice(&bytes).ok()
}

/// The URL of the `nokv serve` process recorded in `store`, when that process is alive and is a
/// server (Linux: `/proc/<pid>` exists and its command line has the `serve` argument, so a record
/// left by a killed server whose pid another program reused does not count). Elsewhere (no
/// `/proc`) a record counts as it is: confirm it with the store's lock before relying on it.
pub fn serving(store: &Path) -> Option<String> {
    let r = read(&record_path(store))?;
    let proc_root = Path::new("/proc");
    let server = !proc_root.is_dir()
        || std::fs::read(proc_root.join(r.pid.to_string()).join("cmdline"))
            .is_ok_and(|cmd| cmd.split(|b| *b == 0).any(|arg| arg == b"serve"));
    (server && r.url.starts_with("http")).then_some(r.url)
}
