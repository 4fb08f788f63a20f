//! `Client::diff`: which paths were added, removed or changed between two sides, each a live
//! workbench, a leased snapshot of one (`WB@SNAPSHOT`) or a sealed commit (64 hex characters);
//! see [`meta::ops::diff`] and docs/metadata-format.md, "Diff".
//!
//! Paths are compared by revision id, then by digest, size and content type; bytes are read only
//! for the optional unified text patch ([`DiffOptions::patch`]). A diff is paged: each page
//! carries an opaque cursor that resumes after its last path and pins the read version of a live
//! side, so the pages of one diff describe one pair of states.

use meta::ids::CommitId;
use meta::ops::diff::{self as ops, ChangeType, DiffEntry, DiffSide, DiffStrategy, PathChange};
use meta::ops::snapshot::SnapshotSelector;
use meta::NormPath;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::client::Client;
use crate::error::{Error, Result};

/// Default page size of [`Client::diff`].
pub const DEFAULT_PAGE: usize = 1000;
/// Default bound of [`DiffOptions::patch_max_bytes`]: 256 KiB per side.
pub const DEFAULT_PATCH_MAX_BYTES: u64 = 256 * 1024;
/// Largest bound [`DiffOptions::patch_max_bytes`] accepts: 4 MiB per side.
pub const MAX_PATCH_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// One side as the caller names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SideSpec {
    /// The live tree of a workbench (`WB`).
    Workbench(String),
    /// A leased snapshot of a workbench (`WB@ID` or `WB@NAME`).
    Snapshot {
        /// The workbench.
        workbench_id: String,
        /// The snapshot (numeric id or name).
        selector: String,
    },
    /// A sealed commit (64 lowercase or uppercase hex characters).
    Commit(CommitId),
}

impl SideSpec {
    /// Parses `WB`, `WB@SNAPSHOT` or a 64-hex-character commit id (a 64-hex-character string
    /// always names a commit).
    ///
    /// Errors: [`Error::InvalidArgument`] for an empty side, an empty workbench or snapshot
    /// part, or an invalid workbench id.
    pub fn parse(s: &str) -> Result<SideSpec> {
        if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return crate::commit::parse_commit_id(&s.to_ascii_lowercase()).map(SideSpec::Commit);
        }
        let (wb, snap) = match s.split_once('@') {
            Some((wb, snap)) => (wb, Some(snap)),
            None => (s, None),
        };
        meta::validate_workbench_id(wb).map_err(|e| {
            Error::InvalidArgument(format!(
                "diff side `{s}` is not WB, WB@SNAPSHOT or a commit id: {e}"
            ))
        })?;
        Ok(match snap {
            None => SideSpec::Workbench(wb.to_string()),
            Some("") => {
                return Err(Error::InvalidArgument(format!(
                    "diff side `{s}` names no snapshot after `@`"
                )))
            }
            Some(sel) => SideSpec::Snapshot {
                workbench_id: wb.to_string(),
                selector: sel.to_string(),
            },
        })
    }

    /// The workbench this side names (empty for a commit).
    fn workbench_id(&self) -> &str {
        match self {
            SideSpec::Workbench(wb) => wb,
            SideSpec::Snapshot { workbench_id, .. } => workbench_id,
            SideSpec::Commit(_) => "",
        }
    }

    /// The canonical text of this side (as [`SideSpec::parse`] reads it).
    pub fn text(&self) -> String {
        match self {
            SideSpec::Workbench(wb) => wb.clone(),
            SideSpec::Snapshot {
                workbench_id,
                selector,
            } => format!("{workbench_id}@{selector}"),
            SideSpec::Commit(id) => id.to_hex(),
        }
    }
}

/// Options of [`Client::diff`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffOptions {
    /// Resume after the last path of an earlier page (its [`DiffReport::next_cursor`]).
    pub cursor: Option<String>,
    /// At most this many changes per page (1..=10,000; default 1,000).
    pub limit: usize,
    /// Attach a unified text diff to each change whose sides are text of at most
    /// `patch_max_bytes` each.
    pub patch: bool,
    /// Size bound per side of [`DiffOptions::patch`] in bytes (at most 4 MiB).
    pub patch_max_bytes: u64,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions {
            cursor: None,
            limit: DEFAULT_PAGE,
            patch: false,
            patch_max_bytes: DEFAULT_PATCH_MAX_BYTES,
        }
    }
}

/// One resolved side of a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideInfo {
    /// The side as given.
    pub spec: SideSpec,
    /// The workbench the side belongs to (a commit's source workbench).
    pub workbench_id: String,
    /// The read version of a tree side, the build's read version of a commit (when recorded).
    pub read_version: Option<u64>,
    /// The numeric snapshot id of a snapshot side.
    pub snapshot_id: Option<u64>,
    side: DiffSide,
}

/// One changed path of a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffChange {
    /// The change.
    pub change: PathChange,
    /// The unified text diff (`--- a/PATH` / `+++ b/PATH`), when asked for and both sides are
    /// UTF-8 text within the bound.
    pub patch: Option<String>,
    /// Why no patch was made when one was asked for (`binary`, `too_large`).
    pub patch_skipped: Option<&'static str>,
}

/// One page of [`Client::diff`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffReport {
    /// Side A.
    pub a: SideInfo,
    /// Side B.
    pub b: SideInfo,
    /// Changed paths in canonical path order.
    pub changes: Vec<DiffChange>,
    /// Resumes after the last change of this page; `None` when the diff is complete.
    pub next_cursor: Option<String>,
    /// The strategy the page was computed with.
    pub strategy: DiffStrategy,
    /// Metadata rows read for this page (see [`meta::ops::diff::DiffPage::rows_read`]).
    pub rows_read: u64,
    /// ChangeEvent rows among them.
    pub events_read: u64,
}

const CURSOR_TAG: &str = "d1";

fn sides_digest(a: &SideSpec, b: &SideSpec) -> [u8; 8] {
    let mut h = Sha256::new();
    h.update(b"nokv.diff.cursor.v1\0");
    for s in [a.text(), b.text()] {
        h.update((s.len() as u32).to_be_bytes());
        h.update(s.as_bytes());
    }
    let d: [u8; 32] = h.finalize().into();
    let mut out = [0u8; 8];
    out.copy_from_slice(&d[..8]);
    out
}

/// A decoded cursor: the pinned versions of the two sides and the last path.
struct Cursor {
    va: u64,
    vb: u64,
    after: NormPath,
}

fn encode_cursor(a: &SideInfo, b: &SideInfo, after: &NormPath) -> String {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&sides_digest(&a.spec, &b.spec));
    bytes.extend_from_slice(&a.read_version.unwrap_or(0).to_be_bytes());
    bytes.extend_from_slice(&b.read_version.unwrap_or(0).to_be_bytes());
    bytes.extend_from_slice(after.as_str().as_bytes());
    format!("{CURSOR_TAG}{}", objstore::hex_lower(&bytes))
}

fn decode_cursor(s: &str, a: &SideSpec, b: &SideSpec) -> Result<Cursor> {
    let bad =
        || Error::InvalidArgument("the diff cursor is malformed or belongs to another diff".into());
    let hex = s.strip_prefix(CURSOR_TAG).ok_or_else(bad)?;
    if hex.len() % 2 != 0 || hex.len() < 48 {
        return Err(bad());
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|p| u8::from_str_radix(p, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(bad)?;
    let (digest, rest) = bytes.split_at(8);
    if digest != sides_digest(a, b) {
        return Err(bad());
    }
    let (va, rest) = rest.split_at(8);
    let (vb, path) = rest.split_at(8);
    let version = |b: &[u8]| {
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        u64::from_be_bytes(w)
    };
    let after = std::str::from_utf8(path)
        .ok()
        .and_then(|p| meta::path::normalize(p).ok())
        .ok_or_else(bad)?;
    Ok(Cursor {
        va: version(va),
        vb: version(vb),
        after,
    })
}

fn side_error(e: meta::Error, workbench_id: &str) -> Error {
    match e {
        meta::Error::WorkspaceNotFound { .. } => Error::WorkbenchNotFound {
            workbench_id: workbench_id.to_string(),
        },
        meta::Error::InvalidArgument(msg) => Error::InvalidArgument(msg),
        other => Error::Meta(other),
    }
}

impl Client {
    /// The workbench an error of [`Client::diff`] of `a` and `b` is about (for the error
    /// envelope's path): the first side that does not resolve now — a missing or expired
    /// workbench or snapshot — else the first side naming a workbench, else empty (two
    /// commits). Call it only on the error path: it resolves the sides again.
    pub fn diff_error_workbench(&self, a: &SideSpec, b: &SideSpec) -> String {
        let failed = [a, b]
            .into_iter()
            .find(|s| !matches!(s, SideSpec::Commit(_)) && self.diff_side(s, None).is_err());
        failed
            .or_else(|| {
                [a, b]
                    .into_iter()
                    .find(|s| !matches!(s, SideSpec::Commit(_)))
            })
            .map(|s| s.workbench_id().to_string())
            .unwrap_or_default()
    }

    /// Resolves one side; `pinned` is the read version a cursor pinned for a live side.
    fn diff_side(&self, spec: &SideSpec, pinned: Option<u64>) -> Result<SideInfo> {
        match spec {
            SideSpec::Workbench(wb) => {
                let reader = match pinned {
                    Some(v) => self.meta().read_at(v).map_err(|_| {
                        Error::InvalidArgument(
                            "the diff cursor's read version is no longer readable; start the \
                             diff again"
                                .into(),
                        )
                    })?,
                    None => self.meta().read(),
                };
                let ws = reader
                    .visible_workspace(wb)
                    .map_err(|e| side_error(e, wb))?;
                Ok(SideInfo {
                    spec: spec.clone(),
                    workbench_id: wb.clone(),
                    read_version: Some(reader.version()),
                    snapshot_id: None,
                    side: DiffSide::Tree {
                        incarnation: ws.incarnation,
                        version: reader.version(),
                    },
                })
            }
            SideSpec::Snapshot {
                workbench_id,
                selector,
            } => {
                let sel: SnapshotSelector = crate::snapshot::parse_selector(selector)?;
                let (info, reader) = self.snapshot_reader(workbench_id, &sel)?;
                Ok(SideInfo {
                    spec: spec.clone(),
                    workbench_id: workbench_id.clone(),
                    read_version: Some(reader.version()),
                    snapshot_id: Some(info.snapshot_id.get()),
                    side: DiffSide::Tree {
                        incarnation: info.incarnation,
                        version: reader.version(),
                    },
                })
            }
            SideSpec::Commit(id) => {
                let side = ops::commit_side(self.meta(), id)?;
                let record =
                    meta::ops::commit::read_commit_record(self.meta(), id)?.ok_or_else(|| {
                        meta::Error::CommitNotFound {
                            commit_id: id.to_hex(),
                        }
                    })?;
                Ok(SideInfo {
                    spec: spec.clone(),
                    workbench_id: record.source_workbench_id,
                    read_version: record.source_read_version,
                    snapshot_id: None,
                    side,
                })
            }
        }
    }

    /// One page of the diff from side `a` to side `b` (docs/metadata-format.md, "Diff"): the
    /// paths only `b` has (`added`), only `a` has (`removed`) and both have with other content
    /// (`changed`), in canonical path order, with each side's generation, size, digest and
    /// content type. It reads O(changed paths) metadata rows when both sides are states of one
    /// workbench incarnation (its live tree, snapshots and commits), else it merges both trees.
    ///
    /// Errors: [`Error::InvalidArgument`] (a malformed side, a cursor of another diff or one
    /// whose pinned version is gone, a `limit` of 0 or a patch bound over 4 MiB);
    /// [`Error::WorkbenchNotFound`]; `Meta(SnapshotNotFound | SnapshotExpired)`;
    /// `Meta(CommitNotFound)`; `Meta(CommitLifecycle)` for a retiring commit;
    /// [`Error::ObjectUnavailable`] when a patch cannot read a body.
    pub fn diff(&self, a: &SideSpec, b: &SideSpec, options: &DiffOptions) -> Result<DiffReport> {
        if options.limit == 0 {
            return Err(Error::InvalidArgument(
                "the page limit must be at least 1".into(),
            ));
        }
        if options.patch_max_bytes > MAX_PATCH_MAX_BYTES {
            return Err(Error::InvalidArgument(format!(
                "the patch bound is at most {MAX_PATCH_MAX_BYTES} bytes"
            )));
        }
        let cursor = options
            .cursor
            .as_deref()
            .map(|c| decode_cursor(c, a, b))
            .transpose()?;
        let pin = |spec: &SideSpec, v: Option<u64>| match spec {
            SideSpec::Workbench(_) => v,
            _ => None,
        };
        let sa = self.diff_side(a, pin(a, cursor.as_ref().map(|c| c.va)))?;
        let sb = self.diff_side(b, pin(b, cursor.as_ref().map(|c| c.vb)))?;
        let page = ops::diff(
            self.meta(),
            &sa.side,
            &sb.side,
            cursor.as_ref().map(|c| &c.after),
            options.limit,
        )?;
        let next_cursor = match (page.more, page.changes.last()) {
            (true, Some(last)) => Some(encode_cursor(&sa, &sb, &last.path)),
            _ => None,
        };
        let mut changes = Vec::with_capacity(page.changes.len());
        for change in page.changes {
            let (patch, patch_skipped) = if options.patch {
                self.patch(&change, options.patch_max_bytes)?
            } else {
                (None, None)
            };
            changes.push(DiffChange {
                change,
                patch,
                patch_skipped,
            });
        }
        Ok(DiffReport {
            a: sa,
            b: sb,
            changes,
            next_cursor,
            strategy: page.strategy,
            rows_read: page.rows_read,
            events_read: page.events_read,
        })
    }

    /// The whole body of one side of a change (empty for an absent side).
    fn side_body(&self, entry: Option<&DiffEntry>) -> Result<Vec<u8>> {
        match entry {
            None => Ok(Vec::new()),
            Some(e) => {
                let rows = self.meta().read().manifest(&e.revision)?;
                self.read_rows(&rows, 0, e.size_bytes)
            }
        }
    }

    /// The unified text diff of one change, or why there is none.
    fn patch(
        &self,
        change: &PathChange,
        bound: u64,
    ) -> Result<(Option<String>, Option<&'static str>)> {
        let sizes = [change.a.as_ref(), change.b.as_ref()]
            .into_iter()
            .flatten()
            .map(|e| e.size_bytes);
        if sizes.clone().any(|s| s > bound) {
            return Ok((None, Some("too_large")));
        }
        let a = self.side_body(change.a.as_ref())?;
        let b = self.side_body(change.b.as_ref())?;
        let (Ok(a), Ok(b)) = (String::from_utf8(a), String::from_utf8(b)) else {
            return Ok((None, Some("binary")));
        };
        if a.contains('\0') || b.contains('\0') {
            return Ok((None, Some("binary")));
        }
        let path = change.path.as_str();
        let from = if change.a.is_some() {
            format!("a/{path}")
        } else {
            "/dev/null".to_string()
        };
        let to = if change.b.is_some() {
            format!("b/{path}")
        } else {
            "/dev/null".to_string()
        };
        let text = similar::TextDiff::from_lines(&a, &b)
            .unified_diff()
            .context_radius(3)
            .header(&from, &to)
            .to_string();
        Ok((Some(text), None))
    }
}

fn entry_json(e: &Option<DiffEntry>) -> Value {
    match e {
        None => Value::Null,
        Some(e) => json!({
            "generation": e.generation,
            "size_bytes": e.size_bytes,
            "digest": e.digest_uri,
            "content_type": e.content_type,
        }),
    }
}

/// The snake-case name of a change type (`added`, `removed`, `changed`).
pub fn change_name(c: ChangeType) -> &'static str {
    match c {
        ChangeType::Added => "added",
        ChangeType::Removed => "removed",
        ChangeType::Changed => "changed",
    }
}

/// The snake-case name of a strategy (`change_events`, `merge_scan`).
pub fn strategy_name(s: DiffStrategy) -> &'static str {
    match s {
        DiffStrategy::ChangeEvents => "change_events",
        DiffStrategy::MergeScan => "merge_scan",
    }
}

impl SideInfo {
    fn json(&self) -> Value {
        let kind = match self.spec {
            SideSpec::Workbench(_) => "workbench",
            SideSpec::Snapshot { .. } => "snapshot",
            SideSpec::Commit(_) => "commit",
        };
        let mut v = json!({
            "spec": self.spec.text(),
            "kind": kind,
            "workbench_id": self.workbench_id,
            "read_version": self.read_version,
        });
        if let (Some(map), Some(id)) = (v.as_object_mut(), self.snapshot_id) {
            map.insert("snapshot_id".into(), Value::from(id));
        }
        if let (Some(map), SideSpec::Commit(id)) = (v.as_object_mut(), &self.spec) {
            map.insert("commit_id".into(), Value::from(id.to_hex()));
        }
        v
    }
}

impl DiffReport {
    /// The success envelope `nokv diff` prints, the server's diff route answers and the Python
    /// SDK returns (without `status`): `a`, `b` (each `{spec, kind, workbench_id, read_version,
    /// snapshot_id?, commit_id?}`), `changes` (`[{path, change, a, b, patch?, patch_skipped?}]`
    /// where `a`/`b` are `{generation, size_bytes, digest, content_type}` or `null`), `count`,
    /// `next_cursor` (`null` when complete), `strategy`, `rows_read`, `events_read`.
    pub fn envelope(&self) -> Value {
        let changes: Vec<Value> = self
            .changes
            .iter()
            .map(|c| {
                let mut v = json!({
                    "path": c.change.path.as_str(),
                    "change": change_name(c.change.change),
                    "a": entry_json(&c.change.a),
                    "b": entry_json(&c.change.b),
                });
                if let Some(map) = v.as_object_mut() {
                    if let Some(p) = &c.patch {
                        map.insert("patch".into(), Value::from(p.as_str()));
                    }
                    if let Some(why) = c.patch_skipped {
                        map.insert("patch_skipped".into(), Value::from(why));
                    }
                }
                v
            })
            .collect();
        json!({
            "status": "success",
            "a": self.a.json(),
            "b": self.b.json(),
            "count": changes.len(),
            "changes": changes,
            "next_cursor": self.next_cursor,
            "strategy": strategy_name(self.strategy),
            "rows_read": self.rows_read,
            "events_read": self.events_read,
        })
    }

    /// A readable table of the page: one line per change (`CHANGE PATH A B`, each side as
    /// `generation size digest-prefix`), then the patches, then the cursor line when more
    /// follow.
    pub fn table(&self) -> String {
        let side = |e: &Option<DiffEntry>| match e {
            None => "-".to_string(),
            Some(e) => {
                let digest = e
                    .digest_uri
                    .strip_prefix("sha256:")
                    .unwrap_or(&e.digest_uri);
                format!(
                    "g{} {}B {}",
                    e.generation,
                    e.size_bytes,
                    digest.get(..12).unwrap_or(digest)
                )
            }
        };
        let width = self
            .changes
            .iter()
            .map(|c| {
                crate::printable::printable(c.change.path.as_str())
                    .chars()
                    .count()
            })
            .max()
            .unwrap_or(4)
            .max(4);
        let mut out = format!(
            "diff {} -> {}: {} change(s)\n",
            crate::printable::printable(&self.a.spec.text()),
            crate::printable::printable(&self.b.spec.text()),
            self.changes.len()
        );
        if !self.changes.is_empty() {
            out.push_str(&format!(
                "{:<8} {:<width$}  {:<32}  {}\n",
                "CHANGE", "PATH", "A", "B"
            ));
        }
        for c in &self.changes {
            out.push_str(&format!(
                "{:<8} {:<width$}  {:<32}  {}\n",
                change_name(c.change.change),
                crate::printable::printable(c.change.path.as_str()),
                side(&c.change.a),
                side(&c.change.b),
            ));
        }
        for c in &self.changes {
            if let Some(p) = &c.patch {
                out.push('\n');
                out.push_str(p);
            }
        }
        if let Some(cur) = &self.next_cursor {
            out.push_str(&format!("more changes follow: --cursor {cur}\n"));
        }
        out
    }
}
