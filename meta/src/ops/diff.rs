//! Diff of two trees (docs/metadata-format.md, "Diff"): which paths were added, removed or
//! changed between two sides, each a workbench's tree at one read version (the live tree, or a
//! leased snapshot's) or a sealed commit's members.
//!
//! Paths are compared by artifact revision id first: equal ids are the same bytes and need no
//! further look. Different revisions whose body digest, size and content type are all equal are
//! the same content and are not reported either; no object byte is ever read.
//!
//! Two strategies, chosen per call ([`DiffStrategy`]):
//!
//! - **Change events** — both sides belong to the same workspace incarnation and both know their
//!   read version (a tree always; a commit when its record carries `source_read_version`). Every
//!   command that changes a path of a visible incarnation writes a ChangeEvent naming it (both
//!   paths for a move) at its commit version, so the paths that can differ are exactly those
//!   named by the incarnation's events with a commit version in `(lo, hi]` (the two read
//!   versions), plus `metadata/run_manifest.json` for a commit side (a commit's run manifest is
//!   its own staged revision, not the tree's). The ChangeEvent rows of that interval are read
//!   (one ordered scan; events of other workbenches in the interval are read and skipped), then
//!   each named path is read by point on both sides: cost O(events in the interval + named
//!   paths), independent of the tree sizes. When the interval holds more than
//!   [`MAX_EVENTS_SCANNED`] events the diff falls back to the merge scan.
//! - **Merge scan** — any two sides: both trees are scanned in canonical path order and merged;
//!   cost O(paths of both sides).
//!
//! Pages: a call returns at most `limit` changes in canonical path order, strictly after the
//! `after` path, and says whether more follow. Every call reports the rows it read
//! ([`DiffPage::rows_read`]: point reads, hit or miss, plus every row a scan returned).

use std::cell::Cell;
use std::collections::BTreeMap;

use crate::codec::{change_event, path_current, ChangeEvent, CommitMember, CommitState, PathEntry};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, CommitId, RootId, WorkspaceIncarnationId};
use crate::path::{decode_ordered_key, normalize_stored, ordered_key, NormPath};
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, ShardSnapshot, Snapshot, TxnStore, MAX_SCAN_ITEMS};

/// Most ChangeEvent rows the change-event strategy reads before it gives up for the merge scan.
pub const MAX_EVENTS_SCANNED: u64 = 65_536;
/// Largest page one call returns.
pub const MAX_PAGE_CHANGES: usize = 10_000;

/// The run manifest every commit carries as its own member.
const RUN_MANIFEST: &str = "metadata/run_manifest.json";

/// One side of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffSide {
    /// A visible workbench's tree at one read version (the current version for the live tree, a
    /// snapshot's read version for a snapshot).
    Tree {
        /// The workspace incarnation.
        incarnation: WorkspaceIncarnationId,
        /// The read version.
        version: u64,
    },
    /// A sealed commit's members.
    Commit {
        /// The commit.
        commit_id: CommitId,
        /// The incarnation the commit was built from.
        incarnation: WorkspaceIncarnationId,
        /// The read version its build froze the tree at (`None` for records that predate it).
        source_read_version: Option<u64>,
    },
}

impl DiffSide {
    fn incarnation(&self) -> WorkspaceIncarnationId {
        match self {
            DiffSide::Tree { incarnation, .. } | DiffSide::Commit { incarnation, .. } => {
                *incarnation
            }
        }
    }

    fn version(&self) -> Option<u64> {
        match self {
            DiffSide::Tree { version, .. } => Some(*version),
            DiffSide::Commit {
                source_read_version,
                ..
            } => *source_read_version,
        }
    }
}

/// The side of a sealed commit.
///
/// Errors: [`Error::CommitNotFound`]; [`Error::CommitLifecycle`] when the commit is retiring or
/// retired (its members are going away); codec and storage errors.
pub fn commit_side(shard: &MetaShard, commit_id: &CommitId) -> Result<DiffSide> {
    let Some(c) = super::commit::read_commit_record(shard, commit_id)? else {
        return Err(Error::CommitNotFound {
            commit_id: commit_id.to_hex(),
        });
    };
    if c.state != CommitState::Sealed {
        return Err(Error::CommitLifecycle {
            reason: format!(
                "commit is {:?}; only a Sealed commit can be compared",
                c.state
            ),
        });
    }
    Ok(DiffSide::Commit {
        commit_id: *commit_id,
        incarnation: c.source_incarnation,
        source_read_version: c.source_read_version,
    })
}

/// What one side holds at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffEntry {
    /// The artifact revision.
    pub revision: ArtifactRevisionId,
    /// The path generation.
    pub generation: u64,
    /// Body size in bytes.
    pub size_bytes: u64,
    /// `sha256:` URI of the body.
    pub digest_uri: String,
    /// Content type.
    pub content_type: String,
}

impl DiffEntry {
    fn same_content(&self, other: &DiffEntry) -> bool {
        self.revision == other.revision
            || (self.digest_uri == other.digest_uri
                && self.size_bytes == other.size_bytes
                && self.content_type == other.content_type)
    }
}

impl From<PathEntry> for DiffEntry {
    fn from(e: PathEntry) -> Self {
        DiffEntry {
            revision: e.artifact_revision_id,
            generation: e.generation,
            size_bytes: e.logical_size,
            digest_uri: e.body_digest_uri,
            content_type: e.content_type,
        }
    }
}

impl From<CommitMember> for DiffEntry {
    fn from(m: CommitMember) -> Self {
        DiffEntry {
            revision: m.artifact_revision_id,
            generation: m.path_generation,
            size_bytes: m.logical_size,
            digest_uri: m.body_digest_uri,
            content_type: m.content_type,
        }
    }
}

/// How a path differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    /// Only side B has it.
    Added,
    /// Only side A has it.
    Removed,
    /// Both have it with different content.
    Changed,
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathChange {
    /// The path.
    pub path: NormPath,
    /// How it differs.
    pub change: ChangeType,
    /// Side A's entry (`None` when added).
    pub a: Option<DiffEntry>,
    /// Side B's entry (`None` when removed).
    pub b: Option<DiffEntry>,
}

/// Which strategy a call used (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffStrategy {
    /// The change events between the two read versions, then point reads of the named paths.
    ChangeEvents,
    /// A merge of both trees in path order.
    MergeScan,
}

/// One page of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffPage {
    /// Changed paths in canonical path order.
    pub changes: Vec<PathChange>,
    /// True when more changes follow the last one (resume with it as `after`).
    pub more: bool,
    /// The strategy this call used.
    pub strategy: DiffStrategy,
    /// Rows this call read: point reads (hit or miss) plus every row a scan returned.
    pub rows_read: u64,
    /// ChangeEvent rows among them.
    pub events_read: u64,
}

/// A snapshot that counts what it reads.
struct Counted<S> {
    inner: S,
    rows: Cell<u64>,
}

impl<S: Snapshot> Counted<S> {
    fn new(inner: S) -> Self {
        Counted {
            inner,
            rows: Cell::new(0),
        }
    }
}

impl<S: Snapshot> Snapshot for Counted<S> {
    fn version(&self) -> u64 {
        self.inner.version()
    }
    fn get(&self, family: Family, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.rows.set(self.rows.get().saturating_add(1));
        self.inner.get(family, key)
    }
    fn scan(&self, family: Family, spec: &ScanSpec) -> Result<Vec<ScanItem>> {
        let items = self.inner.scan(family, spec)?;
        self.rows
            .set(self.rows.get().saturating_add(items.len() as u64));
        Ok(items)
    }
}

/// One side opened for reading: its snapshot, family and key prefix.
struct Opened {
    snap: Counted<ShardSnapshot>,
    family: Family,
    prefix: Vec<u8>,
}

impl Opened {
    fn open(shard: &MetaShard, side: &DiffSide) -> Result<Opened> {
        let root = shard.root_id();
        Ok(match side {
            DiffSide::Tree {
                incarnation,
                version,
            } => {
                let snap = match shard.inner.store.snapshot_at(*version) {
                    Ok(s) => s,
                    Err(Error::Storage(holt::Error::HistoryPruned { .. })) => {
                        return Err(Error::invalid(format!(
                            "read version {version} of a diff side is no longer readable \
                             (its history was pruned); start the diff again"
                        )))
                    }
                    Err(e) => return Err(e),
                };
                Opened {
                    snap: Counted::new(snap),
                    family: Family::PathCurrent,
                    prefix: path_current::workspace_prefix(&root, incarnation),
                }
            }
            DiffSide::Commit { commit_id, .. } => Opened {
                snap: Counted::new(shard.inner.store.snapshot()),
                family: Family::CommitMember,
                prefix: crate::codec::commit_member::commit_prefix(&root, commit_id),
            },
        })
    }

    fn decode(&self, value: &[u8]) -> Result<DiffEntry> {
        Ok(match self.family {
            Family::PathCurrent => PathEntry::decode(value)?.into(),
            _ => CommitMember::decode(value)?.into(),
        })
    }

    fn key(&self, path: &NormPath) -> Vec<u8> {
        let mut k = self.prefix.clone();
        k.extend_from_slice(&ordered_key(path));
        k
    }

    fn point(&self, path: &NormPath) -> Result<Option<DiffEntry>> {
        self.snap
            .get(self.family, &self.key(path))?
            .map(|v| self.decode(&v))
            .transpose()
    }

    /// The next at most [`MAX_SCAN_ITEMS`] rows strictly after `after` (an ordered path key).
    fn batch(&self, after: &[u8]) -> Result<Vec<(Vec<u8>, DiffEntry)>> {
        let mut start = self.prefix.clone();
        start.extend_from_slice(after);
        let spec = ScanSpec {
            prefix: self.prefix.clone(),
            start_after: if after.is_empty() { None } else { Some(start) },
            delimiter: None,
            limit: MAX_SCAN_ITEMS,
        };
        let mut out = Vec::new();
        for item in self.snap.scan(self.family, &spec)? {
            let ScanItem::Row { key, value } = item else {
                return Err(Error::codec("diff", "rollup in a recursive scan"));
            };
            let ordered = key
                .get(self.prefix.len()..)
                .ok_or_else(|| Error::codec("diff", "scan returned a key outside its prefix"))?
                .to_vec();
            out.push((ordered, self.decode(&value)?));
        }
        Ok(out)
    }
}

fn classify(path: NormPath, a: Option<DiffEntry>, b: Option<DiffEntry>) -> Option<PathChange> {
    let change = match (&a, &b) {
        (None, None) => return None,
        (None, Some(_)) => ChangeType::Added,
        (Some(_), None) => ChangeType::Removed,
        (Some(x), Some(y)) if x.same_content(y) => return None,
        (Some(_), Some(_)) => ChangeType::Changed,
    };
    Some(PathChange { path, change, a, b })
}

/// The paths the incarnation's change events in `(lo, hi]` name, as ordered path keys; `None`
/// when more than [`MAX_EVENTS_SCANNED`] events lie in the interval.
fn event_paths(
    snap: &Counted<ShardSnapshot>,
    root: &RootId,
    incarnation: &WorkspaceIncarnationId,
    lo: u64,
    hi: u64,
) -> Result<Option<BTreeMap<Vec<u8>, NormPath>>> {
    let mut paths = BTreeMap::new();
    let mut scanned = 0u64;
    let mut marker = change_event::key(root, lo, u32::MAX);
    loop {
        let spec = ScanSpec {
            prefix: change_event::prefix(root),
            start_after: Some(marker.clone()),
            delimiter: None,
            limit: MAX_SCAN_ITEMS,
        };
        let batch = snap.scan(Family::ChangeEvent, &spec)?;
        let exhausted = batch.len() < MAX_SCAN_ITEMS;
        for item in batch {
            let ScanItem::Row { key, value } = item else {
                return Err(Error::codec("change_event", "rollup in a recursive scan"));
            };
            let (version, _) = change_event::decode_key(&key)?;
            if version > hi {
                return Ok(Some(paths));
            }
            marker = key;
            scanned += 1;
            if scanned > MAX_EVENTS_SCANNED {
                return Ok(None);
            }
            let event = ChangeEvent::decode(&value)?;
            if event.incarnation != *incarnation {
                continue;
            }
            for p in event
                .path
                .into_iter()
                .chain(event.moved_from.map(|m| m.path))
            {
                paths.insert(ordered_key(&p), p);
            }
        }
        if exhausted {
            return Ok(Some(paths));
        }
    }
}

/// One page of the diff from side `a` to side `b` (see the module docs): at most `limit`
/// (clamped to 1..=[`MAX_PAGE_CHANGES`]) changes strictly after `after`.
///
/// Errors: [`Error::InvalidArgument`] when a tree side's read version is no longer readable;
/// codec and storage errors.
pub fn diff(
    shard: &MetaShard,
    a: &DiffSide,
    b: &DiffSide,
    after: Option<&NormPath>,
    limit: usize,
) -> Result<DiffPage> {
    diff_with(shard, a, b, after, limit, false)
}

/// [`diff`] by the merge scan whatever the sides (the fallback strategy, exposed so tests and
/// benchmarks can compare the two). Same results; cost O(paths of both sides).
///
/// Errors: those of [`diff`].
pub fn diff_merge_scan(
    shard: &MetaShard,
    a: &DiffSide,
    b: &DiffSide,
    after: Option<&NormPath>,
    limit: usize,
) -> Result<DiffPage> {
    diff_with(shard, a, b, after, limit, true)
}

fn diff_with(
    shard: &MetaShard,
    a: &DiffSide,
    b: &DiffSide,
    after: Option<&NormPath>,
    limit: usize,
    force_merge: bool,
) -> Result<DiffPage> {
    let limit = limit.clamp(1, MAX_PAGE_CHANGES);
    let root = shard.root_id();
    let sa = Opened::open(shard, a)?;
    let sb = Opened::open(shard, b)?;
    let after_key = after.map(ordered_key).unwrap_or_default();
    let mut page = DiffPage {
        changes: Vec::new(),
        more: false,
        strategy: DiffStrategy::MergeScan,
        rows_read: 0,
        events_read: 0,
    };
    let touched = match (a.version(), b.version()) {
        (Some(va), Some(vb)) if !force_merge && a.incarnation() == b.incarnation() => {
            let feed = Counted::new(shard.inner.store.snapshot());
            let found = event_paths(&feed, &root, &a.incarnation(), va.min(vb), va.max(vb))?;
            page.events_read = feed.rows.get();
            page.rows_read = feed.rows.get();
            found
        }
        _ => None,
    };
    match touched {
        Some(mut paths) => {
            page.strategy = DiffStrategy::ChangeEvents;
            if matches!(a, DiffSide::Commit { .. }) || matches!(b, DiffSide::Commit { .. }) {
                let p = normalize_stored(RUN_MANIFEST)?;
                paths.insert(ordered_key(&p), p);
            }
            let mut rest = paths
                .into_iter()
                .filter(|(k, _)| after.is_none() || k.as_slice() > after_key.as_slice());
            for (_, path) in rest.by_ref() {
                if let Some(c) = classify(path.clone(), sa.point(&path)?, sb.point(&path)?) {
                    page.changes.push(c);
                    if page.changes.len() == limit {
                        break;
                    }
                }
            }
            // More only if a later named path differs; checking costs its point reads.
            if page.changes.len() == limit {
                for (_, path) in rest {
                    if classify(path.clone(), sa.point(&path)?, sb.point(&path)?).is_some() {
                        page.more = true;
                        break;
                    }
                }
            }
        }
        None => merge(&sa, &sb, &after_key, limit, &mut page)?,
    }
    page.rows_read = page
        .rows_read
        .saturating_add(sa.snap.rows.get())
        .saturating_add(sb.snap.rows.get());
    Ok(page)
}

/// A buffered ordered cursor over one side.
struct Cursor<'o> {
    side: &'o Opened,
    buffer: std::collections::VecDeque<(Vec<u8>, DiffEntry)>,
    marker: Vec<u8>,
    exhausted: bool,
}

impl<'o> Cursor<'o> {
    fn new(side: &'o Opened, after: &[u8]) -> Self {
        Cursor {
            side,
            buffer: std::collections::VecDeque::new(),
            marker: after.to_vec(),
            exhausted: false,
        }
    }

    fn peek(&mut self) -> Result<Option<&(Vec<u8>, DiffEntry)>> {
        if self.buffer.is_empty() && !self.exhausted {
            let batch = self.side.batch(&self.marker)?;
            self.exhausted = batch.len() < MAX_SCAN_ITEMS;
            if let Some((k, _)) = batch.last() {
                self.marker = k.clone();
            }
            self.buffer.extend(batch);
        }
        Ok(self.buffer.front())
    }

    fn pop(&mut self) -> Option<(Vec<u8>, DiffEntry)> {
        self.buffer.pop_front()
    }
}

fn merge(sa: &Opened, sb: &Opened, after: &[u8], limit: usize, page: &mut DiffPage) -> Result<()> {
    let mut ca = Cursor::new(sa, after);
    let mut cb = Cursor::new(sb, after);
    loop {
        let ka = ca.peek()?.map(|(k, _)| k.clone());
        let kb = cb.peek()?.map(|(k, _)| k.clone());
        let (key, ea, eb) = match (ka, kb) {
            (None, None) => return Ok(()),
            (Some(x), None) => (x, ca.pop().map(|r| r.1), None),
            (None, Some(y)) => (y, None, cb.pop().map(|r| r.1)),
            (Some(x), Some(y)) => match x.cmp(&y) {
                std::cmp::Ordering::Less => (x, ca.pop().map(|r| r.1), None),
                std::cmp::Ordering::Greater => (y, None, cb.pop().map(|r| r.1)),
                std::cmp::Ordering::Equal => (x, ca.pop().map(|r| r.1), cb.pop().map(|r| r.1)),
            },
        };
        let path = decode_ordered_key(&key)?;
        if let Some(c) = classify(path, ea, eb) {
            if page.changes.len() == limit {
                page.more = true;
                return Ok(());
            }
            page.changes.push(c);
        }
    }
}
