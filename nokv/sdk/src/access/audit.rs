//! The audit trail of a store: `<store>/access/audit/` (docs/server.md, "Audit trail").
//!
//! One JSON object per line, oldest first, each with a sequence number one greater than the
//! line before it: who (`actor`: a token name, `admin`, `anonymous`, `local:<user>`), what
//! (`tool`, `workbench`, `path`, `generation_before`, `generation_after`, `request_id`), when
//! (`time`, `time_unix_ms`, never earlier than the record before) and the `outcome` (`success`,
//! an error code such as `Conflict` or `Forbidden`) with the HTTP `status` when it came through
//! a server.
//!
//! The lines live in segment files named by the sequence number of their first record
//! (`00000000000000000001.log`, 20 digits); a new segment starts once the last one holds
//! [`SEGMENT_BYTES`]. So no call's cost grows with the trail's length: an append reads at most
//! the tail of the last segment (when another process appended since), a query with `since`
//! finds its first segment by a binary search over the segments' first records, a query with
//! `limit` reads segments from the newest back, and [`AuditLog::prune`] deletes whole segments
//! whose every record is older than the retention (setting `audit_retention_days`), never the
//! last one.
//!
//! [`AuditLog::append`] returns only once its line is durable (written, then `fdatasync`;
//! concurrent appends of one process share a sync), so a front door that records before it
//! answers never acknowledges a change whose record a crash could lose. Appends of several
//! processes are serialized by an exclusive lock of `audit/lock`; only the last line of a
//! segment can be torn by a crash, and readers skip a line that does not parse.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// The answer replayed an earlier call with the same request id; nothing was written again.
    pub replayed: bool,
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
    /// See [`AuditEntry::replayed`]; absent from a line when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
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
    /// Only records with a greater sequence number (paging: the last `seq` of the page before).
    pub after_seq: Option<u64>,
    /// At most this many: the newest ones, or with `after_seq` the first ones after it (always
    /// printed oldest first).
    pub limit: Option<usize>,
}

impl AuditFilter {
    fn keeps(&self, r: &AuditRecord) -> bool {
        self.workbench
            .as_deref()
            .is_none_or(|w| r.workbench.as_deref() == Some(w))
            && self.actor.as_deref().is_none_or(|a| r.actor == a)
            && self.since_unix_ms.is_none_or(|t| r.time_unix_ms >= t)
            && self.after_seq.is_none_or(|s| r.seq > s)
    }
}

/// Bytes after which the next record starts a new segment (8 MiB, about 25,000 records).
pub const SEGMENT_BYTES: u64 = 8 << 20;

/// Bytes of a segment's tail (or head) read to find its last (or first) record; a record line
/// is far shorter (paths are at most 4,096 bytes). When no whole record is in the window the
/// whole segment is read.
const PEEK_BYTES: u64 = 64 << 10;

/// The segment being appended to, as this process last left it.
#[derive(Debug)]
struct Writer {
    file: File,
    /// The segment's first sequence number (its name).
    first_seq: u64,
    ino: u64,
    /// The segment's length after this process's last append (another process appended when
    /// the length on disk differs).
    len: u64,
    next_seq: u64,
    /// The time of the last record (a record's time is never earlier).
    last_ms: u64,
}

/// The audit trail of one store (see the module docs). Share one per process.
#[derive(Debug)]
pub struct AuditLog {
    dir: PathBuf,
    segment_bytes: u64,
    writer: Mutex<Option<Writer>>,
    /// The segment (inode) and its bytes known durable (a later sync covers every earlier
    /// write).
    synced: Mutex<(u64, u64)>,
    records: AtomicU64,
    syncs: AtomicU64,
}

/// What one [`AuditLog`] did since it was made ([`AuditLog::counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuditCounters {
    /// Records this handle appended.
    pub records: u64,
    /// `fdatasync` calls of this handle (appends that finished writing before a sync started
    /// share it; a segment roll adds one).
    pub syncs: u64,
}

impl AuditLog {
    /// The audit trail of the store in `store`. Opens nothing yet.
    pub fn at_store(store: &Path) -> Self {
        AuditLog {
            dir: store.join("access").join("audit"),
            segment_bytes: SEGMENT_BYTES,
            writer: Mutex::new(None),
            synced: Mutex::new((0, 0)),
            records: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        }
    }

    /// Records appended and syncs made by this handle so far.
    pub fn counters(&self) -> AuditCounters {
        AuditCounters {
            records: self.records.load(Ordering::Relaxed),
            syncs: self.syncs.load(Ordering::Relaxed),
        }
    }

    /// The directory of the segments.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends `entry` at `now_ms` (or the last record's time, when that is later) and returns
    /// once its line is durable. Errors: [`AccessError::Io`] (the directory, the lock, a read,
    /// the write or the sync failed).
    pub fn append(&self, entry: &AuditEntry, now_ms: u64) -> Result<AuditRecord, AccessError> {
        let (record, end, ino) = {
            let mut guard = lock(&self.writer);
            let lock_file = self.lock_file()?;
            let mut current = match guard.take() {
                Some(w) if self.still_current(&w)? => w,
                _ => self.open_last()?,
            };
            while current.len >= self.segment_bytes {
                current = self.roll(current)?;
            }
            let w = guard.insert(current);
            let time_unix_ms = now_ms.max(w.last_ms);
            let record = AuditRecord {
                seq: w.next_seq,
                time: crate::expiry::format_time(time_unix_ms),
                time_unix_ms,
                actor: entry.actor.clone(),
                tool: entry.tool.clone(),
                workbench: entry.workbench.clone(),
                path: entry.path.clone(),
                generation_before: entry.generation_before,
                generation_after: entry.generation_after,
                request_id: entry.request_id.clone(),
                outcome: entry.outcome.clone(),
                status: entry.status,
                replayed: entry.replayed,
            };
            let mut line =
                serde_json::to_vec(&record).map_err(|e| AccessError::Io(e.to_string()))?;
            line.push(b'\n');
            w.file.write_all(&line).map_err(|e| io("write", e))?;
            w.len += line.len() as u64;
            w.next_seq += 1;
            w.last_ms = time_unix_ms;
            drop(lock_file);
            (record, w.len, w.ino)
        };
        self.records.fetch_add(1, Ordering::Relaxed);
        self.sync_to(ino, end)?;
        Ok(record)
    }

    /// Opens and locks `audit/lock` (creating the directory), serializing appends and prunes
    /// of every process; the lock is released when the file is dropped.
    fn lock_file(&self) -> Result<File, AccessError> {
        fs::create_dir_all(&self.dir).map_err(|e| io("create the directory", e))?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(self.dir.join("lock"))
            .map_err(|e| io("open the lock", e))?;
        file.lock().map_err(|e| io("lock", e))?;
        Ok(file)
    }

    /// Whether `w` is still the last segment as this process left it (no other process
    /// appended, rolled or pruned since).
    fn still_current(&self, w: &Writer) -> Result<bool, AccessError> {
        Ok(match fs::metadata(self.segment_path(w.first_seq)) {
            Ok(m) => m.ino() == w.ino && m.len() == w.len,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(io("stat", e)),
        })
    }

    /// Opens the last segment (creating the first one in an empty trail) for appending, under
    /// the lock: ends a torn last line and reads the last record for the next number and time.
    fn open_last(&self) -> Result<Writer, AccessError> {
        let segments = self.segments()?;
        let Some(&first_seq) = segments.last() else {
            // Under the lock nobody else creates it; `None` would mean it appeared meanwhile.
            return self
                .create_segment(1, 0)?
                .ok_or_else(|| AccessError::Io("audit log: the first segment appeared".into()));
        };
        let path = self.segment_path(first_seq);
        let file = OpenOptions::new()
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io("open", e))?;
        let meta = file.metadata().map_err(|e| io("stat", e))?;
        // A crash may have torn the last line: end it, so the next record starts a line.
        if meta.len() > 0 && !ends_with_newline(&path)? {
            (&file).write_all(b"\n").map_err(|e| io("write", e))?;
        }
        let len = file.metadata().map_err(|e| io("stat", e))?.len();
        // The last record: in this segment, or (when it holds none yet) in the one before.
        let mut last = None;
        for &seq in segments.iter().rev().take(2) {
            last = last_record(&self.segment_path(seq))?;
            if last.is_some() {
                break;
            }
        }
        Ok(Writer {
            file,
            first_seq,
            ino: meta.ino(),
            len,
            next_seq: last
                .as_ref()
                .map_or(first_seq, |r| r.seq + 1)
                .max(first_seq),
            last_ms: last.map_or(0, |r| r.time_unix_ms),
        })
    }

    /// Starts the segment after the full segment `w` (which is made durable first, so a record
    /// never waits on a segment it is not in). When another process started it already, opens
    /// the last segment instead.
    fn roll(&self, w: Writer) -> Result<Writer, AccessError> {
        w.file.sync_data().map_err(|e| io("sync", e))?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        match self.create_segment(w.next_seq, w.last_ms)? {
            Some(next) => Ok(next),
            None => self.open_last(),
        }
    }

    /// Creates the empty segment `first_seq` and makes its name durable; `None` when it exists
    /// already.
    fn create_segment(&self, first_seq: u64, last_ms: u64) -> Result<Option<Writer>, AccessError> {
        let file = match OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(0o600)
            .open(self.segment_path(first_seq))
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
            Err(e) => return Err(io("create a segment", e)),
        };
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("sync the directory", e))?;
        let ino = file.metadata().map_err(|e| io("stat", e))?.ino();
        Ok(Some(Writer {
            file,
            first_seq,
            ino,
            len: 0,
            next_seq: first_seq,
            last_ms,
        }))
    }

    /// Makes segment `ino` durable at least up to byte `end` (one `fdatasync` serves every
    /// append that finished writing before it started).
    fn sync_to(&self, ino: u64, end: u64) -> Result<(), AccessError> {
        let mut synced = lock(&self.synced);
        if synced.0 == ino && synced.1 >= end {
            return Ok(());
        }
        let (file, target) = {
            let guard = lock(&self.writer);
            match guard.as_ref() {
                Some(w) if w.ino == ino => (
                    w.file.try_clone().map_err(|e| io("sync", e))?,
                    (w.ino, w.len),
                ),
                // The segment was rolled (and synced whole) since this append wrote.
                _ => return Ok(()),
            }
        };
        file.sync_data().map_err(|e| io("sync", e))?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        *synced = target;
        Ok(())
    }

    /// The records `filter` keeps, oldest first. Reads the segments from the one where `since`
    /// or `after_seq` begins (all without either); with `limit`, from the newest back until
    /// `limit` records were found, or with `after_seq` forward until they were. Errors:
    /// [`AccessError::Io`].
    pub fn query(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, AccessError> {
        let segments = self.segments()?;
        let mut from = match filter.since_unix_ms {
            None => 0,
            Some(t) => self.first_segment_since(&segments, t)?,
        };
        if let Some(after) = filter.after_seq {
            // The segment holding `after + 1` is the last one named at most that (no read).
            let holding = segments.partition_point(|&first| first <= after.saturating_add(1));
            from = from.max(holding.saturating_sub(1));
        }
        let segments = &segments[from..];
        let forward = |limit: usize| -> Result<Vec<AuditRecord>, AccessError> {
            let mut out = Vec::new();
            for &seq in segments {
                if out.len() >= limit {
                    break;
                }
                out.extend(
                    read_records(&self.segment_path(seq))?
                        .into_iter()
                        .filter(|r| filter.keeps(r))
                        .take(limit - out.len()),
                );
            }
            Ok(out)
        };
        let limit = match (filter.limit, filter.after_seq) {
            (None, _) => return forward(usize::MAX),
            (Some(limit), Some(_)) => return forward(limit),
            (Some(limit), None) => limit,
        };
        // Newest first, segment by segment, until `limit` are found.
        let mut newest_first = Vec::new();
        for &seq in segments.iter().rev() {
            if newest_first.len() >= limit {
                break;
            }
            let records = read_records(&self.segment_path(seq))?;
            newest_first.extend(
                records
                    .into_iter()
                    .rev()
                    .filter(|r| filter.keeps(r))
                    .take(limit - newest_first.len()),
            );
        }
        newest_first.reverse();
        Ok(newest_first)
    }

    /// The index in `segments` of the first segment that may hold a record at or after
    /// `since`: the last one whose first record is earlier (times never decrease).
    fn first_segment_since(&self, segments: &[u64], since: u64) -> Result<usize, AccessError> {
        // Segments [0, lo) start before `since`; [hi, n) start at or after it.
        let (mut lo, mut hi) = (0, segments.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let starts_before = first_record(&self.segment_path(segments[mid]))?
                .is_none_or(|r| r.time_unix_ms < since);
            if starts_before {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo.saturating_sub(1))
    }

    /// Drops the records older than `cutoff_unix_ms` in whole segments: every segment whose
    /// last record is older, oldest first, never the last segment (sequence numbers of the
    /// rest unchanged). Returns how many records were dropped. Errors: [`AccessError::Io`].
    pub fn prune(&self, cutoff_unix_ms: u64) -> Result<usize, AccessError> {
        let _guard = lock(&self.writer);
        if !self.dir.exists() {
            return Ok(0);
        }
        let _lock_file = self.lock_file()?;
        let segments = self.segments()?;
        let mut dropped = 0u64;
        for pair in segments.windows(2) {
            let (seq, next) = (pair[0], pair[1]);
            let path = self.segment_path(seq);
            if last_record(&path)?.is_some_and(|r| r.time_unix_ms >= cutoff_unix_ms) {
                break;
            }
            fs::remove_file(&path).map_err(|e| io("remove a segment", e))?;
            dropped += next.saturating_sub(seq);
        }
        if dropped > 0 {
            File::open(&self.dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io("sync the directory", e))?;
        }
        Ok(usize::try_from(dropped).unwrap_or(usize::MAX))
    }

    /// The first sequence numbers of the segments, ascending (other files are ignored).
    fn segments(&self) -> Result<Vec<u64>, AccessError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io("list", e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let name = entry.map_err(|e| io("list", e))?.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".log")) else {
                continue;
            };
            if stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()) {
                if let Ok(seq) = stem.parse::<u64>() {
                    out.push(seq);
                }
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    fn segment_path(&self, first_seq: u64) -> PathBuf {
        self.dir.join(format!("{first_seq:020}.log"))
    }
}

/// The actor of a process working on the store itself (the embedded CLI, an embedded
/// `nokv mcp`): `local:<user>` from `$USER`, else `$LOGNAME`, else `local:uid-<uid>` (the
/// process's user id), else `local:unknown`.
pub fn local_actor() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| {
            fs::metadata("/proc/self")
                .ok()
                .map(|m| format!("uid-{}", m.uid()))
        })
        .unwrap_or_else(|| "unknown".into());
    format!("local:{user}")
}

/// Fills `entry`'s outcome, generations and missing target fields from a front door's answer:
/// a tool or route envelope (`status`/`code`, `generation`, `removed_generation`,
/// `from_generation`, `replaced_generation`, `relative_path`, `workbench_id`), a server
/// command's `{"exit_code","stdout"}` (its stdout read when it is one JSON object), or a refusal
/// envelope (`details.resource`); an `idempotent_replay: true` answer marks the entry
/// `replayed`. `status` is the HTTP status (`None` for the embedded CLI,
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
    entry.replayed |= inner.get("idempotent_replay").and_then(Value::as_bool) == Some(true);
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

fn io(what: &str, e: std::io::Error) -> AccessError {
    AccessError::Io(format!("audit log: {what}: {e}"))
}

/// Every record of a segment that parses, in file order (a torn last line is skipped); a
/// missing segment has none.
fn read_records(path: &Path) -> Result<Vec<AuditRecord>, AccessError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("read", e)),
    };
    let mut out = Vec::new();
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| io("read", e))?;
        if let Ok(r) = serde_json::from_slice::<AuditRecord>(&line) {
            out.push(r);
        }
    }
    Ok(out)
}

/// Up to [`PEEK_BYTES`] of `path` from its start (`tail` false) or its end; `None` when the
/// file does not exist.
fn peek(path: &Path, tail: bool) -> Result<Option<Vec<u8>>, AccessError> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("read", e)),
    };
    let len = f.metadata().map_err(|e| io("stat", e))?.len();
    let start = if tail {
        len.saturating_sub(PEEK_BYTES)
    } else {
        0
    };
    let mut buf = Vec::new();
    f.seek(SeekFrom::Start(start))
        .and_then(|_| f.take(PEEK_BYTES).read_to_end(&mut buf))
        .map_err(|e| io("read", e))?;
    Ok(Some(buf))
}

/// The first record of a segment (its head, or the whole segment when the head holds none).
fn first_record(path: &Path) -> Result<Option<AuditRecord>, AccessError> {
    let Some(head) = peek(path, false)? else {
        return Ok(None);
    };
    match head.split(|&b| b == b'\n').find_map(parse) {
        Some(r) => Ok(Some(r)),
        None => Ok(read_records(path)?.into_iter().next()),
    }
}

/// The last record of a segment (its tail, or the whole segment when the tail holds none).
fn last_record(path: &Path) -> Result<Option<AuditRecord>, AccessError> {
    let Some(tail) = peek(path, true)? else {
        return Ok(None);
    };
    match tail.split(|&b| b == b'\n').rev().find_map(parse) {
        Some(r) => Ok(Some(r)),
        None => Ok(read_records(path)?.pop()),
    }
}

fn parse(line: &[u8]) -> Option<AuditRecord> {
    serde_json::from_slice(line).ok()
}

/// Whether the file is empty or its last byte is a newline.
fn ends_with_newline(path: &Path) -> Result<bool, AccessError> {
    let mut f = File::open(path).map_err(|e| io("read", e))?;
    let len = f.metadata().map_err(|e| io("stat", e))?.len();
    if len == 0 {
        return Ok(true);
    }
    let mut last = [0u8; 1];
    f.seek(SeekFrom::Start(len - 1))
        .and_then(|_| f.read_exact(&mut last))
        .map_err(|e| io("read", e))?;
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

    /// A trail whose segments roll after `bytes` (the records here are about 200 bytes).
    fn small(dir: &Path, bytes: u64) -> AuditLog {
        AuditLog {
            segment_bytes: bytes,
            ..AuditLog::at_store(dir)
        }
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_pruning_keeps_sequence_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let log = small(dir.path(), 1);
        for t in [1_000, 2_000, 3_000] {
            log.append(&entry("ci", "run-1"), t).unwrap();
        }
        // One record per segment (each segment is full after one line).
        assert_eq!(log.segments().unwrap(), [1, 2, 3]);
        let mut f = OpenOptions::new()
            .append(true)
            .open(log.segment_path(3))
            .unwrap();
        f.write_all(b"{\"seq\":4,\"ti").unwrap();
        assert_eq!(log.query(&AuditFilter::default()).unwrap().len(), 3);
        // Another process appends after the torn line: its record is whole.
        let after = small(dir.path(), 1);
        assert_eq!(after.append(&entry("ci", "run-1"), 3_500).unwrap().seq, 4);
        assert_eq!(log.query(&AuditFilter::default()).unwrap().len(), 4);
        assert_eq!(log.prune(2_000).unwrap(), 1);
        let left = log.query(&AuditFilter::default()).unwrap();
        assert_eq!(left.iter().map(|r| r.seq).collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(log.append(&entry("ci", "run-1"), 4_000).unwrap().seq, 5);
        // Pruning never deletes the last segment, even when all of it is old.
        assert_eq!(log.prune(u64::MAX).unwrap(), 3);
        let left = log.query(&AuditFilter::default()).unwrap();
        assert_eq!(left.iter().map(|r| r.seq).collect::<Vec<_>>(), [5]);
        assert_eq!(log.append(&entry("ci", "run-1"), 5_000).unwrap().seq, 6);
    }

    #[test]
    fn segments_roll_and_queries_read_only_the_segments_they_need() {
        let dir = tempfile::tempdir().unwrap();
        let log = small(dir.path(), 1_000);
        let other = small(dir.path(), 1_000);
        for i in 0..100u64 {
            // Two processes alternate; times run forward.
            let by = if i % 3 == 0 { &other } else { &log };
            let wb = format!("run-{}", i % 5);
            assert_eq!(
                by.append(&entry("ci", &wb), 10_000 + i * 10).unwrap().seq,
                i + 1
            );
        }
        let segments = log.segments().unwrap();
        assert!(segments.len() > 10, "{segments:?}");
        assert_eq!(segments[0], 1);
        // Every record once, in order, across the segments.
        let all = log.query(&AuditFilter::default()).unwrap();
        assert_eq!(
            all.iter().map(|r| r.seq).collect::<Vec<_>>(),
            (1..=100).collect::<Vec<_>>()
        );
        // `since` starts in the right segment, whichever it is.
        for since in [0, 10_000, 10_005, 10_500, 10_990, 10_991, 20_000] {
            let got = log
                .query(&AuditFilter {
                    since_unix_ms: Some(since),
                    ..AuditFilter::default()
                })
                .unwrap();
            let want: Vec<u64> = all
                .iter()
                .filter(|r| r.time_unix_ms >= since)
                .map(|r| r.seq)
                .collect();
            assert_eq!(
                got.iter().map(|r| r.seq).collect::<Vec<_>>(),
                want,
                "{since}"
            );
        }
        // `limit` with a filter: the newest matches, oldest first.
        let last = log
            .query(&AuditFilter {
                workbench: Some("run-2".into()),
                limit: Some(7),
                ..AuditFilter::default()
            })
            .unwrap();
        assert_eq!(
            last.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [68, 73, 78, 83, 88, 93, 98]
        );
        // Paging forward with `after_seq`: pages of 9 (one filtered by workbench) cover the
        // trail once, in order, whatever segment a page starts in.
        for workbench in [None, Some("run-3")] {
            let (mut after, mut seen) = (0u64, Vec::new());
            loop {
                let page = log
                    .query(&AuditFilter {
                        workbench: workbench.map(str::to_string),
                        after_seq: Some(after),
                        limit: Some(9),
                        ..AuditFilter::default()
                    })
                    .unwrap();
                let Some(last) = page.last() else { break };
                after = last.seq;
                seen.extend(page.iter().map(|r| r.seq));
            }
            let want: Vec<u64> = all
                .iter()
                .filter(|r| workbench.is_none_or(|w| r.workbench.as_deref() == Some(w)))
                .map(|r| r.seq)
                .collect();
            assert_eq!(seen, want, "{workbench:?}");
        }
        // A clock that goes back does not make times go back.
        let r = log.append(&entry("ci", "run-0"), 5).unwrap();
        assert_eq!((r.seq, r.time_unix_ms), (101, 10_990));
        // Pruning drops whole segments whose last record is older than the cutoff.
        let first_kept = log
            .query(&AuditFilter::default())
            .unwrap()
            .into_iter()
            .find(|r| r.time_unix_ms >= 10_500)
            .unwrap()
            .seq;
        let dropped = log.prune(10_500).unwrap();
        let left = log.query(&AuditFilter::default()).unwrap();
        assert_eq!(left[0].seq, dropped as u64 + 1);
        assert!(left[0].seq <= first_kept && left[0].time_unix_ms < 10_500 + 100);
        assert_eq!(left.last().unwrap().seq, 101);
        assert_eq!(log.segments().unwrap()[0], left[0].seq);
    }

    #[test]
    fn a_crash_between_roll_and_first_record_continues_the_numbering() {
        let dir = tempfile::tempdir().unwrap();
        let log = small(dir.path(), 1);
        log.append(&entry("ci", "run-1"), 1_000).unwrap();
        log.append(&entry("ci", "run-1"), 2_000).unwrap();
        // An empty last segment, as a crash right after a roll leaves it.
        File::create(log.segment_path(3)).unwrap();
        let next = small(dir.path(), 1)
            .append(&entry("ci", "run-1"), 500)
            .unwrap();
        assert_eq!((next.seq, next.time_unix_ms), (3, 2_000));
        assert_eq!(log.segments().unwrap(), [1, 2, 3]);
    }
}
