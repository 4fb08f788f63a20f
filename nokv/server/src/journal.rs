//! Request-id replay for writes: a lost response never writes twice.
//!
//! A client sends every write with an `Idempotency-Key` header (the remote client generates one
//! per logical call and reuses it on every retry). The journal binds the key to a digest of the
//! request (method, path and query, body) and records, durably, that the request **began**
//! before anything of it executes, then the exact response it **finished** with:
//!
//! - a key seen for the first time executes; its response is stored and returned;
//! - the same key with the same digest after it finished returns the stored response byte for
//!   byte (an exact replay), in this process or — from `<store>/server/replay.log` — a later one;
//! - the same key while the first request still runs answers `409 RequestInFlight` (retryable);
//! - the same key with another digest answers `422 RequestIdReused` (not retryable);
//! - a key whose request began in a process that died before it finished answers
//!   `409 OutcomeUnknown` (not retryable): the write may or may not have applied, and executing it
//!   again could apply it twice, so the caller must look at the state instead.
//!
//! Durability: the "began" record is made durable (one shared `fdatasync` for concurrent
//! requests: leader/follower group sync) before the request executes; the "finished" record is
//! written at once and made durable by the next group sync. Retention: finished entries are kept
//! for the configured time and at most [`MAX_ENTRIES`] of them (oldest evicted first); the log is
//! compacted at open and whenever it grows past [`COMPACT_BYTES`].
//!
//! Log format, one record per line: `B <key-hex> <digest-hex> <unix-ms>` (began) and
//! `F <key-hex> <digest-hex> <unix-ms> <status> <base64 body>` (finished). A torn last line is
//! ignored.

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use sha2::{Digest, Sha256};

use nokv::error::{Error, Result};

/// Most finished entries kept in memory and in the log.
pub const MAX_ENTRIES: usize = 200_000;
/// Log size that triggers a compaction (bytes).
pub const COMPACT_BYTES: u64 = 64 << 20;
/// Longest accepted `Idempotency-Key` (bytes).
pub const MAX_KEY_LEN: usize = 128;

#[derive(Debug, Clone)]
enum Entry {
    /// Began in this process, not finished yet.
    Running { digest: [u8; 32] },
    /// Began in an earlier process that never finished it.
    Unknown { digest: [u8; 32] },
    /// Finished with this response.
    Done {
        digest: [u8; 32],
        at_ms: u64,
        status: u16,
        body: Vec<u8>,
    },
}

impl Entry {
    fn digest(&self) -> &[u8; 32] {
        match self {
            Entry::Running { digest } | Entry::Unknown { digest } | Entry::Done { digest, .. } => {
                digest
            }
        }
    }
}

/// What [`Journal::begin`] decided.
#[derive(Debug)]
pub enum Begin {
    /// A new request: execute it, then call [`Journal::finish`] (or [`Journal::abandon`]).
    Fresh,
    /// The stored response of the same request: `(status, body)`.
    Replay(u16, Vec<u8>),
    /// The same key is being executed right now.
    InFlight,
    /// The key was used for a different request.
    Mismatch,
    /// The key's request began in a process that died before it finished.
    Unknown,
}

#[derive(Default)]
struct LogState {
    /// Bytes queued for the next group write.
    buf: Vec<u8>,
    /// Total bytes ever queued / made durable (positions in the stream).
    queued: u64,
    durable: u64,
    syncing: bool,
    failed: Option<String>,
}

/// The replay journal of one server.
pub struct Journal {
    path: PathBuf,
    retention: Duration,
    entries: Mutex<(HashMap<String, Entry>, VecDeque<String>)>,
    log: Mutex<LogState>,
    cond: Condvar,
    file: Mutex<File>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").field("path", &self.path).finish()
    }
}

/// Digest of a request: method, path with query, and body (or a declared body digest).
pub fn request_digest(method: &str, path_and_query: &str, body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"nokv.server.request.v1\0");
    for part in [method.as_bytes(), path_and_query.as_bytes(), body] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.finalize().into()
}

/// Whether `key` is an acceptable `Idempotency-Key`: 1..=128 bytes of `[A-Za-z0-9._:-]`.
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_KEY_LEN
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn io_err(op: &'static str, path: &Path, source: std::io::Error) -> Error {
    Error::LocalIo {
        op,
        path: path.to_path_buf(),
        source,
    }
}

fn encode(key: &str, entry: &Entry) -> Option<String> {
    match entry {
        Entry::Running { digest } | Entry::Unknown { digest } => Some(format!(
            "B {} {} {}\n",
            hex(key.as_bytes()),
            hex(digest),
            now_ms()
        )),
        Entry::Done {
            digest,
            at_ms,
            status,
            body,
        } => Some(format!(
            "F {} {} {at_ms} {status} {}\n",
            hex(key.as_bytes()),
            hex(digest),
            base64::engine::general_purpose::STANDARD.encode(body)
        )),
    }
}

fn decode(line: &str) -> Option<(String, Entry)> {
    let mut it = line.split(' ');
    let kind = it.next()?;
    let key = String::from_utf8(unhex(it.next()?)?).ok()?;
    let digest: [u8; 32] = unhex(it.next()?)?.try_into().ok()?;
    let at_ms: u64 = it.next()?.parse().ok()?;
    match kind {
        "B" => Some((key, Entry::Unknown { digest })),
        "F" => {
            let status: u16 = it.next()?.parse().ok()?;
            let body = base64::engine::general_purpose::STANDARD
                .decode(it.next()?)
                .ok()?;
            Some((
                key,
                Entry::Done {
                    digest,
                    at_ms,
                    status,
                    body,
                },
            ))
        }
        _ => None,
    }
}

impl Journal {
    /// Opens (creating) the journal in `dir`, loading `replay.log`: finished entries within
    /// `retention` are kept, requests that began without finishing become "outcome unknown".
    /// The log is rewritten compacted.
    ///
    /// Errors: [`Error::LocalIo`].
    pub fn open(dir: &Path, retention: Duration) -> Result<Journal> {
        std::fs::create_dir_all(dir).map_err(|e| io_err("create directory", dir, e))?;
        let path = dir.join("replay.log");
        let mut map: HashMap<String, Entry> = HashMap::new();
        let mut order = VecDeque::new();
        match File::open(&path) {
            Ok(f) => {
                for line in BufReader::new(f).lines() {
                    let Ok(line) = line else { break };
                    // A torn or foreign line ends nothing: skip it.
                    if let Some((key, entry)) = decode(&line) {
                        if !map.contains_key(&key) {
                            order.push_back(key.clone());
                        }
                        map.insert(key, entry);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("open", &path, e)),
        }
        let journal = Journal {
            file: Mutex::new(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| io_err("open", &path, e))?,
            ),
            path,
            retention,
            entries: Mutex::new((map, order)),
            log: Mutex::new(LogState::default()),
            cond: Condvar::new(),
        };
        journal.compact()?;
        Ok(journal)
    }

    /// Decides what to do with a request carrying `key` whose digest is `digest` (see the module
    /// docs). On [`Begin::Fresh`] the "began" record is durable when this returns.
    ///
    /// Errors: [`Error::LocalIo`] when the record cannot be made durable (the request must not
    /// execute).
    pub fn begin(&self, key: &str, digest: [u8; 32]) -> Result<Begin> {
        {
            let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            match guard.0.get(key) {
                Some(e) if e.digest() != &digest => return Ok(Begin::Mismatch),
                Some(Entry::Running { .. }) => return Ok(Begin::InFlight),
                Some(Entry::Unknown { .. }) => return Ok(Begin::Unknown),
                Some(Entry::Done { status, body, .. }) => {
                    return Ok(Begin::Replay(*status, body.clone()))
                }
                None => {}
            }
            guard.0.insert(key.to_string(), Entry::Running { digest });
            guard.1.push_back(key.to_string());
        }
        let line = encode(key, &Entry::Running { digest }).unwrap_or_default();
        if let Err(e) = self.append(line.as_bytes(), true) {
            self.abandon(key);
            return Err(e);
        }
        Ok(Begin::Fresh)
    }

    /// Stores the response of a [`Begin::Fresh`] request (durable with the next group sync).
    pub fn finish(&self, key: &str, status: u16, body: &[u8]) {
        let entry = {
            let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            let Some(Entry::Running { digest }) = guard.0.get(key).cloned() else {
                return;
            };
            let entry = Entry::Done {
                digest,
                at_ms: now_ms(),
                status,
                body: body.to_vec(),
            };
            guard.0.insert(key.to_string(), entry.clone());
            self.evict(&mut guard);
            entry
        };
        if let Some(line) = encode(key, &entry) {
            let _ = self.append(line.as_bytes(), false);
        }
    }

    /// Forgets a [`Begin::Fresh`] request that did not execute at all (e.g. rejected before it
    /// touched the store); a retry executes it. Its durable "began" record turns into
    /// "outcome unknown" only if the process dies before a later `finish` of the same key.
    pub fn abandon(&self, key: &str) {
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(guard.0.get(key), Some(Entry::Running { .. })) {
            guard.0.remove(key);
            guard.1.retain(|k| k != key);
        }
    }

    fn evict(&self, guard: &mut (HashMap<String, Entry>, VecDeque<String>)) {
        let horizon = now_ms().saturating_sub(self.retention.as_millis() as u64);
        while let Some(front) = guard.1.front().cloned() {
            let expired = match guard.0.get(&front) {
                Some(Entry::Done { at_ms, .. }) => *at_ms < horizon || guard.0.len() > MAX_ENTRIES,
                Some(Entry::Unknown { .. }) => guard.0.len() > MAX_ENTRIES,
                Some(Entry::Running { .. }) => false,
                None => true,
            };
            if !expired {
                break;
            }
            guard.1.pop_front();
            guard.0.remove(&front);
        }
    }

    /// Appends `bytes` to the log; with `sync`, returns once they are durable (group sync).
    fn append(&self, bytes: &[u8], sync: bool) -> Result<()> {
        let mut st = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = &st.failed {
            return Err(io_err(
                "write",
                &self.path,
                std::io::Error::other(f.clone()),
            ));
        }
        st.buf.extend_from_slice(bytes);
        st.queued += bytes.len() as u64;
        let mine = st.queued;
        if !sync {
            return Ok(());
        }
        loop {
            if st.durable >= mine {
                return Ok(());
            }
            if let Some(f) = &st.failed {
                return Err(io_err(
                    "fdatasync",
                    &self.path,
                    std::io::Error::other(f.clone()),
                ));
            }
            if st.syncing {
                st = self.cond.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            st.syncing = true;
            let buf = std::mem::take(&mut st.buf);
            let end = st.queued;
            drop(st);
            let res = {
                let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
                f.write_all(&buf).and_then(|()| f.sync_data())
            };
            st = self.log.lock().unwrap_or_else(|p| p.into_inner());
            st.syncing = false;
            match res {
                Ok(()) => st.durable = end,
                Err(e) => st.failed = Some(e.to_string()),
            }
            self.cond.notify_all();
        }
    }

    /// Rewrites the log with the live entries only (when it is over [`COMPACT_BYTES`], or
    /// always at open). Running requests keep their "began" record.
    ///
    /// Errors: [`Error::LocalIo`].
    pub fn compact(&self) -> Result<()> {
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let mut st = self.log.lock().unwrap_or_else(|p| p.into_inner());
        // Flush what is queued first so the rewrite sees every record.
        let pending = std::mem::take(&mut st.buf);
        file.write_all(&pending)
            .and_then(|()| file.sync_data())
            .map_err(|e| io_err("fdatasync", &self.path, e))?;
        st.durable = st.queued;
        let mut text = String::new();
        {
            let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            self.evict(&mut guard);
            let (map, order) = &*guard;
            for key in order {
                if let Some(line) = map.get(key).and_then(|e| encode(key, e)) {
                    text.push_str(&line);
                }
            }
        }
        let tmp = self.path.with_extension("log.tmp");
        let mut out = File::create(&tmp).map_err(|e| io_err("create", &tmp, e))?;
        out.write_all(text.as_bytes())
            .and_then(|()| out.sync_all())
            .map_err(|e| io_err("write", &tmp, e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| io_err("rename", &self.path, e))?;
        if let Some(dir) = self.path.parent() {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        *file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| io_err("open", &self.path, e))?;
        Ok(())
    }

    /// Compacts when the log has grown past [`COMPACT_BYTES`]. Errors: as [`Journal::compact`].
    pub fn compact_if_needed(&self) -> Result<()> {
        let len = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        if len > COMPACT_BYTES {
            self.compact()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_request_replays_exactly_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let d = request_digest("POST", "/v1/tools/put", b"{}");
        {
            let j = Journal::open(dir.path(), Duration::from_secs(3600)).unwrap();
            assert!(matches!(j.begin("k1", d).unwrap(), Begin::Fresh));
            assert!(matches!(j.begin("k1", d).unwrap(), Begin::InFlight));
            j.finish("k1", 200, b"{\"status\":\"success\"}");
            match j.begin("k1", d).unwrap() {
                Begin::Replay(200, body) => assert_eq!(body, b"{\"status\":\"success\"}"),
                other => panic!("{other:?}"),
            }
            let other = request_digest("POST", "/v1/tools/put", b"{\"x\":1}");
            assert!(matches!(j.begin("k1", other).unwrap(), Begin::Mismatch));
            // Began, never finished: a crash leaves its outcome unknown.
            assert!(matches!(j.begin("k2", d).unwrap(), Begin::Fresh));
        }
        let j = Journal::open(dir.path(), Duration::from_secs(3600)).unwrap();
        assert!(matches!(j.begin("k1", d).unwrap(), Begin::Replay(200, _)));
        assert!(matches!(j.begin("k2", d).unwrap(), Begin::Unknown));
    }

    #[test]
    fn expired_entries_are_dropped_and_torn_lines_ignored() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("replay.log"),
            format!(
                "F {} {} 1 200 e30=\nF 6b32 zz\n",
                hex(b"old"),
                hex(&[0u8; 32])
            ),
        )
        .unwrap();
        let j = Journal::open(dir.path(), Duration::from_secs(60)).unwrap();
        assert!(matches!(j.begin("old", [0; 32]).unwrap(), Begin::Fresh));
        assert!(valid_key("a-B_1:2.3"));
        assert!(!valid_key("") && !valid_key("a b") && !valid_key(&"x".repeat(129)));
    }
}
