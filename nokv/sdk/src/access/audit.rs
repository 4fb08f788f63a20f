//! The audit trail of a store: `<store>/access/audit.log` (docs/server.md, "Audit trail").
//!
//! One JSON object per line, oldest first, each with a sequence number one greater than the
//! line before it: who (`actor`: a token name, `admin`, `anonymous`, `local:<user>`), what
//! (`tool`, `workbench`, `path`, `generation_before`, `generation_after`, `request_id`), when
//! (`time`, `time_unix_ms`) and the `outcome` (`success`, an error code such as `Conflict` or
//! `Forbidden`) with the HTTP `status` when it came through a server. [`AuditLog::append`]
//! returns only once its line is durable (written, then `fdatasync`; concurrent appends of one
//! process share a sync), so a front door that records before it answers never acknowledges
//! a change whose record a crash could lose. Appends of several processes are serialized by an
//! exclusive lock of `audit.lock`; only the last line can be torn by a crash, and readers skip a
//! line that does not parse. [`AuditLog::prune`] drops records older than the retention
//! (setting `audit_retention_days`) by rewriting the file (temporary file, fsync, rename).

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::registry::AccessError;

/// What a front door records about one mutating call (the log adds `seq` and the time).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditEntry {
    /// Who made the call.
    pub actor: String,
    /// What was called: a tool name (`workbench_put_file`), a route (`PUT files`) or a command
    /// (`rm`, `token create`).
    pub tool: String,
    /// The workbench, when the call names one.
    pub workbench: Option<String>,
    /// The workbench-relative path, when the call names one.
    pub path: Option<String>,
    /// The path's generation before the call, when known.
    pub generation_before: Option<u64>,
    /// The path's generation after the call, when known.
    pub generation_after: Option<u64>,
    /// The caller's request id (`Idempotency-Key` or `request_id`), when it sent one.
    pub request_id: Option<String>,
    /// `success`, or the error code of the answer.
    pub outcome: String,
    /// The HTTP status of the answer (a server call), else `None`.
    pub status: Option<u16>,
}

/// One stored record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// 1, 2, 3, … in file order.
    pub seq: u64,
    /// RFC 3339 UTC.
    pub time: String,
    /// Unix milliseconds.
    pub time_unix_ms: u64,
    /// See [`AuditEntry::actor`].
    pub actor: String,
    /// See [`AuditEntry::tool`].
    pub tool: String,
    /// See [`AuditEntry::workbench`].
    pub workbench: Option<String>,
    /// See [`AuditEntry::path`].
    pub path: Option<String>,
    /// See [`AuditEntry::generation_before`].
    pub generation_before: Option<u64>,
    /// See [`AuditEntry::generation_after`].
    pub generation_after: Option<u64>,
    /// See [`AuditEntry::request_id`].
    pub request_id: Option<String>,
    /// See [`AuditEntry::outcome`].
    pub outcome: String,
    /// See [`AuditEntry::status`].
    pub status: Option<u16>,
}

/// Which records a query returns (all conditions must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only this workbench.
    pub workbench: Option<String>,
    /// Only this actor (a token name).
    pub actor: Option<String>,
    /// Only records at or after this Unix millisecond.
    pub since_unix_ms: Option<u64>,
    /// At most this many, the newest ones (still printed oldest first).
    pub limit: Option<usize>,
}

impl AuditFilter {
    fn keeps(&self, r: &AuditRecord) -> bool {
        self.workbench
            .as_deref()
            .is_none_or(|w| r.workbench.as_deref() == Some(w))
            && self.actor.as_deref().is_none_or(|a| r.actor == a)
            && self.since_unix_ms.is_none_or(|t| r.time_unix_ms >= t)
    }
}

#[derive(Debug)]
struct Writer {
    file: File,
    ino: u64,
    /// The file length after this process's last append (another process appended when the
    /// length differs).
    len: u64,
    next_seq: u64,
}

/// The audit trail of one store (see the module docs). Share one per process.
#[derive(Debug)]
pub struct AuditLog {
    dir: PathBuf,
    writer: Mutex<Option<Writer>>,
    /// Bytes of the file known durable (a later sync covers every earlier write).
    synced: Mutex<(u64, u64)>,
}

impl AuditLog {
    /// The audit trail of the store in `store`. Opens nothing yet.
    pub fn at_store(store: &Path) -> Self {
        AuditLog {
            dir: store.join("access"),
            writer: Mutex::new(None),
            synced: Mutex::new((0, 0)),
        }
    }

    /// The log file's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join("audit.log")
    }

    /// Appends `entry` at `now_ms` and returns once its line is durable. Errors:
    /// [`AccessError::Io`] (the directory, the lock, the write or the sync failed).
    pub fn append(&self, entry: &AuditEntry, now_ms: u64) -> Result<AuditRecord, AccessError> {
        let io = |what: &str, e: std::io::Error| AccessError::Io(format!("audit log: {what}: {e}"));
        let (record, end, ino) = {
            let mut guard = lock(&self.writer);
            fs::create_dir_all(&self.dir).map_err(|e| io("create the directory", e))?;
            let lock_file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .open(self.dir.join("audit.lock"))
                .map_err(|e| io("open the lock", e))?;
            lock_file.lock().map_err(|e| io("lock", e))?;
            let path = self.path();
            let on_disk = fs::metadata(&path).ok();
            let stale = match (guard.as_ref(), &on_disk) {
                (Some(w), Some(m)) => w.ino != m.ino() || w.len != m.len(),
                _ => true,
            };
            if stale {
                let file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .mode(0o600)
                    .open(&path)
                    .map_err(|e| io("open", e))?;
                // A crash may have torn the last line: end it, so the next record starts a line.
                if !ends_with_newline(&path)? {
                    (&file).write_all(b"\n").map_err(|e| io("write", e))?;
                }
                let meta = file.metadata().map_err(|e| io("stat", e))?;
                let last = read_records(&path)?.last().map_or(0, |r| r.seq);
                *guard = Some(Writer {
                    file,
                    ino: meta.ino(),
                    len: meta.len(),
                    next_seq: last + 1,
                });
            }
            let Some(w) = guard.as_mut() else {
                return Err(AccessError::Io("audit log: not open".into()));
            };
            let record = AuditRecord {
                seq: w.next_seq,
                time: crate::expiry::format_time(now_ms),
                time_unix_ms: now_ms,
                actor: entry.actor.clone(),
                tool: entry.tool.clone(),
                workbench: entry.workbench.clone(),
                path: entry.path.clone(),
                generation_before: entry.generation_before,
                generation_after: entry.generation_after,
                request_id: entry.request_id.clone(),
                outcome: entry.outcome.clone(),
                status: entry.status,
            };
            let mut line =
                serde_json::to_vec(&record).map_err(|e| AccessError::Io(e.to_string()))?;
            line.push(b'\n');
            w.file.write_all(&line).map_err(|e| io("write", e))?;
            w.len += line.len() as u64;
            w.next_seq += 1;
            drop(lock_file);
            (record, w.len, w.ino)
        };
        self.sync_to(ino, end)?;
        Ok(record)
    }

    /// Makes the file durable at least up to byte `end` (one `fdatasync` serves every append
    /// that finished writing before it started).
    fn sync_to(&self, ino: u64, end: u64) -> Result<(), AccessError> {
        let mut synced = lock(&self.synced);
        if synced.0 == ino && synced.1 >= end {
            return Ok(());
        }
        let (file, target) = {
            let guard = lock(&self.writer);
            let Some(w) = guard.as_ref() else {
                return Err(AccessError::Io("audit log: not open".into()));
            };
            (
                w.file
                    .try_clone()
                    .map_err(|e| AccessError::Io(e.to_string()))?,
                (w.ino, w.len),
            )
        };
        file.sync_data()
            .map_err(|e| AccessError::Io(format!("audit log: sync: {e}")))?;
        *synced = target;
        Ok(())
    }

    /// The records `filter` keeps, oldest first. Errors: [`AccessError::Io`].
    pub fn query(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, AccessError> {
        let mut out: Vec<AuditRecord> = read_records(&self.path())?
            .into_iter()
            .filter(|r| filter.keeps(r))
            .collect();
        if let Some(limit) = filter.limit {
            let skip = out.len().saturating_sub(limit);
            out.drain(..skip);
        }
        Ok(out)
    }

    /// Drops the records older than `cutoff_unix_ms` (sequence numbers of the rest unchanged);
    /// returns how many were dropped. Errors: [`AccessError::Io`].
    pub fn prune(&self, cutoff_unix_ms: u64) -> Result<usize, AccessError> {
        let io = |what: &str, e: std::io::Error| AccessError::Io(format!("audit log: {what}: {e}"));
        let mut guard = lock(&self.writer);
        let path = self.path();
        if !path.exists() {
            return Ok(0);
        }
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(self.dir.join("audit.lock"))
            .map_err(|e| io("open the lock", e))?;
        lock_file.lock().map_err(|e| io("lock", e))?;
        let records = read_records(&path)?;
        let keep = records
            .iter()
            .filter(|r| r.time_unix_ms >= cutoff_unix_ms)
            .count();
        let dropped = records.len() - keep;
        if dropped == 0 {
            return Ok(0);
        }
        let tmp = self.dir.join("audit.log.tmp");
        {
            let mut f = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(|e| io("write", e))?;
            for r in records.iter().filter(|r| r.time_unix_ms >= cutoff_unix_ms) {
                let mut line = serde_json::to_vec(r).map_err(|e| AccessError::Io(e.to_string()))?;
                line.push(b'\n');
                f.write_all(&line).map_err(|e| io("write", e))?;
            }
            f.sync_all().map_err(|e| io("sync", e))?;
        }
        fs::rename(&tmp, &path).map_err(|e| io("replace", e))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("sync the directory", e))?;
        // The next append reopens the new file.
        *guard = None;
        Ok(dropped)
    }
}

/// The actor of a process working on the store itself (the embedded CLI, an embedded
/// `nokv mcp`): `local:<user>` from `$USER`, else `$LOGNAME`, else `local:unknown`.
pub fn local_actor() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    format!("local:{user}")
}

/// Fills `entry`'s outcome, generations and missing target fields from a front door's answer:
/// a tool or route envelope (`status`/`code`, `generation`, `removed_generation`,
/// `from_generation`, `replaced_generation`, `relative_path`, `workbench_id`), a server
/// command's `{"exit_code","stdout"}` (its stdout read when it is one JSON object), or a refusal
/// envelope (`details.resource`). `status` is the HTTP status (`None` for the embedded CLI,
/// whose `answer` is what it printed, with `exit_code` added).
pub fn describe_answer(entry: &mut AuditEntry, status: Option<u16>, answer: &serde_json::Value) {
    use serde_json::Value;
    entry.status = status;
    let inner: Value = match answer.get("stdout").and_then(Value::as_str) {
        Some(text) => serde_json::from_str(text).unwrap_or(Value::Null),
        None => answer.clone(),
    };
    let http = || status.map_or_else(|| "error".to_string(), |s| format!("http {s}"));
    entry.outcome = match (answer.get("exit_code").and_then(Value::as_u64), &inner) {
        (Some(0), _) => "success".into(),
        (Some(_), v) if v.get("code").and_then(Value::as_str).is_some() => {
            v["code"].as_str().unwrap_or("error").into()
        }
        (Some(n), _) => format!("exit_code {n}"),
        (None, v) if v.get("status").and_then(Value::as_str) == Some("success") => "success".into(),
        (None, v) => v
            .get("code")
            .and_then(Value::as_str)
            .map_or_else(http, str::to_string),
    };
    let u = |k: &str| inner.get(k).and_then(Value::as_u64);
    entry.generation_after = u("generation");
    entry.generation_before = u("removed_generation")
        .or(u("from_generation"))
        .or(u("replaced_generation"))
        .or(entry.generation_before);
    if entry.path.is_none() {
        entry.path = inner
            .get("relative_path")
            .or(inner.get("from"))
            .and_then(Value::as_str)
            .map(str::to_string);
    }
    if entry.workbench.is_none() {
        entry.workbench = inner
            .get("workbench_id")
            .or(inner.get("details").and_then(|d| d.get("resource")))
            .and_then(Value::as_str)
            .map(str::to_string);
    }
}

/// Every record of the file that parses, in file order (a torn last line is skipped); a
/// missing file has none.
fn read_records(path: &Path) -> Result<Vec<AuditRecord>, AccessError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(AccessError::Io(format!("audit log: read: {e}"))),
    };
    let mut out = Vec::new();
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| AccessError::Io(format!("audit log: read: {e}")))?;
        if let Ok(r) = serde_json::from_slice::<AuditRecord>(&line) {
            out.push(r);
        }
    }
    Ok(out)
}

/// Whether the file is empty or its last byte is a newline.
fn ends_with_newline(path: &Path) -> Result<bool, AccessError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = File::open(path).map_err(|e| AccessError::Io(format!("audit log: read: {e}")))?;
    let len = f
        .metadata()
        .map_err(|e| AccessError::Io(format!("audit log: stat: {e}")))?
        .len();
    if len == 0 {
        return Ok(true);
    }
    let mut last = [0u8; 1];
    f.seek(SeekFrom::Start(len - 1))
        .and_then(|_| f.read_exact(&mut last))
        .map_err(|e| AccessError::Io(format!("audit log: read: {e}")))?;
    Ok(last[0] == b'\n')
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(actor: &str, wb: &str) -> AuditEntry {
        AuditEntry {
            actor: actor.into(),
            tool: "workbench_put_file".into(),
            workbench: Some(wb.into()),
            path: Some("outputs/a".into()),
            generation_after: Some(1),
            outcome: "success".into(),
            ..AuditEntry::default()
        }
    }

    #[test]
    fn appends_are_numbered_in_order_and_filtered_by_query() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::at_store(dir.path());
        log.append(&entry("ci", "run-1"), 1_000).unwrap();
        // A second handle (another process) appends in between.
        AuditLog::at_store(dir.path())
            .append(&entry("bob", "inputs"), 2_000)
            .unwrap();
        let third = log.append(&entry("ci", "run-2"), 3_000).unwrap();
        assert_eq!(third.seq, 3);
        let all = log.query(&AuditFilter::default()).unwrap();
        assert_eq!(all.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
        let ci = log
            .query(&AuditFilter {
                actor: Some("ci".into()),
                ..AuditFilter::default()
            })
            .unwrap();
        assert_eq!(ci.len(), 2);
        let since = log
            .query(&AuditFilter {
                since_unix_ms: Some(2_000),
                workbench: Some("inputs".into()),
                ..AuditFilter::default()
            })
            .unwrap();
        assert_eq!(since.len(), 1);
        assert_eq!(since[0].actor, "bob");
        let last = log
            .query(&AuditFilter {
                limit: Some(1),
                ..AuditFilter::default()
            })
            .unwrap();
        assert_eq!(last[0].seq, 3);
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_pruning_keeps_sequence_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::at_store(dir.path());
        for t in [1_000, 2_000, 3_000] {
            log.append(&entry("ci", "run-1"), t).unwrap();
        }
        let mut f = OpenOptions::new().append(true).open(log.path()).unwrap();
        f.write_all(b"{\"seq\":4,\"ti").unwrap();
        assert_eq!(log.query(&AuditFilter::default()).unwrap().len(), 3);
        // Another process appends after the torn line: its record is whole.
        let after = AuditLog::at_store(dir.path());
        assert_eq!(after.append(&entry("ci", "run-1"), 3_500).unwrap().seq, 4);
        assert_eq!(log.query(&AuditFilter::default()).unwrap().len(), 4);
        assert_eq!(log.prune(2_000).unwrap(), 1);
        let left = log.query(&AuditFilter::default()).unwrap();
        assert_eq!(left.iter().map(|r| r.seq).collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(log.append(&entry("ci", "run-1"), 4_000).unwrap().seq, 5);
    }
}
