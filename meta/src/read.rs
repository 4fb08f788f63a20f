//! `Reader`: consistent metadata reads at one holt read version.
//!
//! Cost model (docs/metadata-format.md, "Namespace And Workspace Visibility"): an exact lookup is one
//! WorkspaceCurrent point read plus one PathCurrent point read; a direct-child listing is one
//! delimiter-aware prefix scan advanced through engine calls of at most 255 items; implicit
//! directory existence is a limit-1 prefix probe. No listing reads ArtifactRevision rows.

use crate::codec::{
    artifact_manifest, artifact_revision, change_event, path_current, workspace_current,
    ArtifactRevision, ChangeEvent, ManifestRow, PathEntry, WorkspaceCurrent, WorkspaceState,
};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{validate_workbench_id, ArtifactRevisionId, RootId, WorkspaceIncarnationId};
use crate::path::{
    decode_child, normalize_stored, ordered_child_name, ordered_key, ChildKey, NormPath,
};
use crate::store::{Predicate, ScanItem, ScanSpec, ShardSnapshot, Snapshot, MAX_SCAN_ITEMS};

/// Whether the marker `ws` is live at `snap` for a process whose wall clock reads `wall_unix_ms`:
/// `Visible` and either without an expiry deadline or with one after the store clock
/// ([`crate::clock::store_clock_now`], one System point read, made only for a marker with a
/// deadline). The one visibility rule of expiry (docs/metadata-format.md, "Workbench Expiry").
/// A scan that judges many markers uses [`Liveness`] (the store clock read once).
///
/// Errors: a corrupt lease-clock row; storage errors.
pub fn workspace_live<S: Snapshot>(
    snap: &S,
    ws: &WorkspaceCurrent,
    wall_unix_ms: u64,
) -> Result<bool> {
    Liveness::new(snap, wall_unix_ms).live(ws)
}

/// [`workspace_live`] for the many markers of one scan at one snapshot (a listing, a query,
/// `find`): the store clock is read at most once, on the first marker whose deadline is after
/// the wall clock, instead of once per such marker.
pub(crate) struct Liveness<'s, S: Snapshot> {
    snap: &'s S,
    wall_unix_ms: u64,
    /// The store clock at `snap`, once read.
    clock_unix_ms: std::cell::Cell<Option<u64>>,
}

impl<'s, S: Snapshot> Liveness<'s, S> {
    /// The rule at `snap` for a process whose wall clock reads `wall_unix_ms`.
    pub(crate) fn new(snap: &'s S, wall_unix_ms: u64) -> Self {
        Liveness {
            snap,
            wall_unix_ms,
            clock_unix_ms: std::cell::Cell::new(None),
        }
    }

    /// Whether `ws` is live (see [`workspace_live`]).
    ///
    /// Errors: a corrupt lease-clock row; storage errors.
    pub(crate) fn live(&self, ws: &WorkspaceCurrent) -> Result<bool> {
        if ws.state != WorkspaceState::Visible {
            return Ok(false);
        }
        match ws.expires_at_unix_ms {
            None => Ok(true),
            Some(d) if d <= self.wall_unix_ms => Ok(false),
            Some(d) => Ok(d > self.store_clock()?),
        }
    }

    fn store_clock(&self) -> Result<u64> {
        if let Some(now) = self.clock_unix_ms.get() {
            return Ok(now);
        }
        let now = crate::clock::store_clock_now(self.snap, self.wall_unix_ms)?;
        self.clock_unix_ms.set(Some(now));
        Ok(now)
    }
}

/// One direct child of a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    /// The child's name (one path component).
    pub name: String,
    /// The published file at exactly this name, if any (an exact file wins over a same-named
    /// implicit directory for presentation).
    pub file: Option<PathEntry>,
    /// True when the name also has descendants (an implicit directory exists under it).
    pub is_dir: bool,
}

/// One page of direct children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildPage {
    /// Children in name (UTF-8 byte) order.
    pub items: Vec<Child>,
    /// True when more children follow the last item.
    pub more: bool,
}

/// Read access at one version. Obtain with [`crate::MetaShard::read`] or
/// [`crate::MetaShard::read_at`].
pub struct Reader {
    snap: ShardSnapshot,
    root: RootId,
    /// The reading process's wall clock at the reader's creation, Unix ms (workbench expiry is
    /// decided on `max(this, persisted high-water)`).
    wall_unix_ms: u64,
}

fn scan_limit(remaining: usize) -> usize {
    remaining.clamp(1, MAX_SCAN_ITEMS)
}

impl Reader {
    pub(crate) fn new(snap: ShardSnapshot, root: RootId, wall_unix_ms: u64) -> Self {
        Reader {
            snap,
            root,
            wall_unix_ms,
        }
    }

    /// The read version every result of this reader reflects.
    pub fn version(&self) -> u64 {
        self.snap.version()
    }

    /// The WorkspaceCurrent marker of `workbench_id` in any state (one point read).
    ///
    /// Errors: [`Error::InvalidArgument`] for an invalid id; [`Error::Codec`]; storage errors.
    pub fn workspace(&self, workbench_id: &str) -> Result<Option<WorkspaceCurrent>> {
        validate_workbench_id(workbench_id)?;
        self.snap
            .get(
                Family::WorkspaceCurrent,
                &workspace_current::key(&self.root, workbench_id),
            )?
            .map(|b| WorkspaceCurrent::decode(&b))
            .transpose()
    }

    /// The marker of a live workbench: `Visible` and not past its expiry deadline on the store
    /// clock (docs/metadata-format.md, "Workbench Expiry").
    ///
    /// Errors: [`Error::WorkspaceNotFound`] when absent, not `Visible` (staging rows are
    /// invisible) or expired, plus the errors of [`Reader::workspace`].
    pub fn visible_workspace(&self, workbench_id: &str) -> Result<WorkspaceCurrent> {
        match self.workspace(workbench_id)? {
            Some(w) if workspace_live(&self.snap, &w, self.wall_unix_ms)? => Ok(w),
            _ => Err(Error::WorkspaceNotFound {
                workbench_id: workbench_id.to_owned(),
            }),
        }
    }

    /// The store clock at this reader's version, Unix ms: `max(the reading process's wall clock
    /// at the reader's creation, persisted lease-clock high-water)` (docs/metadata-format.md,
    /// "Workbench Expiry").
    ///
    /// Errors: a corrupt lease-clock row; storage errors.
    pub fn store_clock_unix_ms(&self) -> Result<u64> {
        crate::clock::store_clock_now(&self.snap, self.wall_unix_ms)
    }

    /// When `workbench_id` expired, Unix ms (its deadline), if its marker is `Expired` or
    /// `Visible` past its deadline on the store clock; `None` for a live, absent or never-visible
    /// workbench. Front doors use it to say why a workbench is not found.
    ///
    /// Errors: the errors of [`Reader::workspace`]; a corrupt lease-clock row.
    pub fn workspace_expired_at(&self, workbench_id: &str) -> Result<Option<u64>> {
        match self.workspace(workbench_id)? {
            None => Ok(None),
            Some(w) if w.expires_at_unix_ms.is_none() => Ok(None),
            Some(w) => Ok(w.expired_at(crate::clock::store_clock_now(
                &self.snap,
                self.wall_unix_ms,
            )?)),
        }
    }

    /// The PathEntry at exactly `path` (one PathCurrent point read).
    ///
    /// Errors: [`Error::Codec`]; storage errors.
    pub fn path_entry(
        &self,
        inc: &WorkspaceIncarnationId,
        path: &NormPath,
    ) -> Result<Option<PathEntry>> {
        self.snap
            .get(
                Family::PathCurrent,
                &path_current::key(&self.root, inc, path),
            )?
            .map(|b| PathEntry::decode(&b))
            .transpose()
    }

    /// Direct children of `dir` (`None` = workspace root) in name order, after the child name
    /// `start_after` (exclusive), at most `limit` items.
    ///
    /// One delimiter (0x00) scan advanced through engine calls of ≤255 items. A name that is
    /// both a file and an implicit directory yields ONE [`Child`] with `file = Some(..)` and
    /// `is_dir = true`.
    ///
    /// Errors: [`Error::InvalidArgument`] for `limit == 0`; [`Error::Path`] for an invalid
    /// `start_after` name;
    /// [`Error::Codec`] for undecodable keys; storage errors.
    pub fn list_children(
        &self,
        inc: &WorkspaceIncarnationId,
        dir: Option<&NormPath>,
        start_after: Option<&str>,
        limit: usize,
    ) -> Result<ChildPage> {
        if limit == 0 {
            return Err(Error::invalid("list limit must be at least 1"));
        }
        let prefix = path_current::children_prefix(&self.root, inc, dir);
        let mut marker = match start_after {
            None => None,
            Some(name) => {
                let mut m = prefix.clone();
                m.extend_from_slice(&ordered_child_name(name)?);
                // Every entry of `name` (rollup `… 0x00`, file `… 0x01`) is ≤ this marker.
                m.push(crate::path::EXACT_TERMINATOR);
                Some(m)
            }
        };
        let mut items: Vec<Child> = Vec::new();
        let mut pending: Option<Child> = None;
        loop {
            // Each child yields at most two entries (rollup + file); fetch enough to see one
            // child past the limit.
            let want = 2 * (limit - items.len()) + 2;
            let spec = ScanSpec {
                prefix: prefix.clone(),
                start_after: marker.clone(),
                delimiter: Some(crate::path::COMPONENT_DELIMITER),
                limit: scan_limit(want),
            };
            let batch = self.snap.scan(Family::PathCurrent, &spec)?;
            let exhausted = batch.len() < spec.limit;
            for item in batch {
                marker = Some(item.marker().to_vec());
                let rest = item
                    .marker()
                    .get(prefix.len()..)
                    .ok_or_else(|| Error::codec("path_current", "scan item outside prefix"))?;
                let child =
                    decode_child(rest).map_err(|e| Error::codec("path_current", e.to_string()))?;
                let (name, file, is_dir) = match (child, item) {
                    (ChildKey::Dir(n), _) => (n, None, true),
                    (ChildKey::File(n), ScanItem::Row { value, .. }) => {
                        (n, Some(PathEntry::decode(&value)?), false)
                    }
                    (ChildKey::File(_), ScanItem::Prefix(_)) => {
                        return Err(Error::codec("path_current", "rollup ends in a terminator"))
                    }
                };
                match pending.as_mut() {
                    Some(p) if p.name == name => {
                        p.is_dir |= is_dir;
                        if file.is_some() {
                            p.file = file;
                        }
                    }
                    _ => {
                        if let Some(done) = pending.take() {
                            items.push(done);
                            if items.len() == limit {
                                return Ok(ChildPage { items, more: true });
                            }
                        }
                        pending = Some(Child { name, file, is_dir });
                    }
                }
            }
            if exhausted {
                break;
            }
        }
        if let Some(done) = pending {
            items.push(done);
        }
        Ok(ChildPage { items, more: false })
    }

    /// Whether any published path lies strictly under `dir` (a limit-1 prefix probe).
    ///
    /// Errors: storage errors.
    pub fn has_descendants(&self, inc: &WorkspaceIncarnationId, dir: &NormPath) -> Result<bool> {
        has_descendants(&self.snap, &self.root, inc, dir)
    }

    /// Whether a file could be created at `path` under the namespace rule (a path is a file or
    /// an implicit directory, never both): no proper prefix of `path` is a file and `path` has
    /// no descendants. The same check the publishing command repeats atomically
    /// ([`namespace_check`]); callers run it before uploading any byte.
    ///
    /// Errors: [`Error::AncestorIsFile`], [`Error::PathIsDirectory`]; storage errors.
    pub fn check_creatable(&self, inc: &WorkspaceIncarnationId, path: &NormPath) -> Result<()> {
        namespace_check(&self.snap, &self.root, inc, path).map(|_| ())
    }

    /// Recursive listing of published files under `under` (`None` = whole workspace) in
    /// canonical key order (a subtree before its same-named file, `a/…` before `a` before `ab`),
    /// strictly after `start_after`, at most `limit` files. Returns `(files, more)`.
    ///
    /// Errors: [`Error::InvalidArgument`] for `limit == 0`; [`Error::Codec`]; storage errors.
    pub fn scan_files(
        &self,
        inc: &WorkspaceIncarnationId,
        under: Option<&NormPath>,
        start_after: Option<&NormPath>,
        limit: usize,
    ) -> Result<(Vec<(NormPath, PathEntry)>, bool)> {
        if limit == 0 {
            return Err(Error::invalid("scan limit must be at least 1"));
        }
        let prefix = path_current::children_prefix(&self.root, inc, under);
        let mut marker = start_after.map(|p| {
            let mut m = path_current::workspace_prefix(&self.root, inc);
            m.extend_from_slice(&ordered_key(p));
            m
        });
        let mut out = Vec::new();
        loop {
            let spec = ScanSpec {
                prefix: prefix.clone(),
                start_after: marker.clone(),
                delimiter: None,
                limit: scan_limit(limit + 1 - out.len()),
            };
            let batch = self.snap.scan(Family::PathCurrent, &spec)?;
            let exhausted = batch.len() < spec.limit;
            for item in batch {
                let ScanItem::Row { key, value } = item else {
                    return Err(Error::codec("path_current", "rollup in a recursive scan"));
                };
                if out.len() == limit {
                    return Ok((out, true));
                }
                let path = path_current::decode_key_path(&key)?;
                out.push((path, PathEntry::decode(&value)?));
                marker = Some(key);
            }
            if exhausted {
                return Ok((out, false));
            }
        }
    }

    /// Every manifest row of a revision in object_index order (paged scans of ≤255 rows).
    ///
    /// Errors: [`Error::Codec`]; storage errors.
    pub fn manifest(&self, rev: &ArtifactRevisionId) -> Result<Vec<ManifestRow>> {
        let prefix = artifact_manifest::prefix(&self.root, rev);
        let mut out = Vec::new();
        self.snap.for_each_row(
            Family::ArtifactManifest,
            &prefix,
            "artifact_manifest",
            |key, value| {
                let idx = artifact_manifest::decode_key_index(key)?;
                out.push(ManifestRow::decode_value(idx, value)?);
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// The ArtifactRevision row (one point read). Errors: [`Error::Codec`]; storage errors.
    pub fn revision(&self, rev: &ArtifactRevisionId) -> Result<Option<ArtifactRevision>> {
        self.snap
            .get(
                Family::ArtifactRevision,
                &artifact_revision::key(&self.root, rev),
            )?
            .map(|b| ArtifactRevision::decode(&b))
            .transpose()
    }

    /// Root-wide change events strictly after the log position `after`
    /// (`(commit_version, event_sequence)`), at most `limit`, as
    /// `(commit_version, event_sequence, event)`.
    ///
    /// Errors: [`Error::Codec`]; storage errors.
    pub fn changes(
        &self,
        after: Option<(u64, u32)>,
        limit: usize,
    ) -> Result<Vec<(u64, u32, ChangeEvent)>> {
        let prefix = change_event::prefix(&self.root);
        let mut marker = after.map(|(v, s)| change_event::key(&self.root, v, s));
        let mut out = Vec::new();
        while out.len() < limit {
            let spec = ScanSpec {
                prefix: prefix.clone(),
                start_after: marker.clone(),
                delimiter: None,
                limit: scan_limit(limit - out.len()),
            };
            let batch = self.snap.scan(Family::ChangeEvent, &spec)?;
            let exhausted = batch.len() < spec.limit;
            for item in batch {
                let ScanItem::Row { key, value } = item else {
                    return Err(Error::codec("change_event", "unexpected rollup"));
                };
                let (v, s) = change_event::decode_key(&key)?;
                out.push((v, s, ChangeEvent::decode(&value)?));
                marker = Some(key);
            }
            if exhausted {
                break;
            }
        }
        Ok(out)
    }
}

/// The namespace rule of a path about to be created (docs/workbench.md, "Files and directories"),
/// checked at `snap`:
/// - no proper prefix (ancestor) of `path` is a file: one PathCurrent point read per ancestor
///   (at most 64), shallowest first;
/// - `path` has no descendants: one limit-1 scan of its subtree prefix `ordered(path) 0x00`
///   (the metadata format's key order puts that subtree immediately before the exact row, so the probe
///   never sees `path` itself or a longer sibling such as `path\u{1}` or `pathx`).
///
/// Returns the `Absent` predicates of the ancestor rows for the publishing command to
/// re-assert. The descendant probe has no predicate form; the command's read-version fence
/// covers it (see the module docs).
///
/// Errors: [`Error::AncestorIsFile`] naming the shallowest ancestor that is a file;
/// [`Error::PathIsDirectory`]; storage errors.
pub fn namespace_check<S: Snapshot>(
    snap: &S,
    root: &RootId,
    inc: &WorkspaceIncarnationId,
    path: &NormPath,
) -> Result<Vec<Predicate>> {
    let text = path.as_str();
    let mut predicates = Vec::new();
    for (i, _) in text.match_indices('/') {
        let ancestor = normalize_stored(&text[..i])?;
        let key = path_current::key(root, inc, &ancestor);
        if snap.get(Family::PathCurrent, &key)?.is_some() {
            return Err(Error::AncestorIsFile {
                file: ancestor.as_str().to_owned(),
            });
        }
        predicates.push(Predicate::absent(Family::PathCurrent, key));
    }
    if has_descendants(snap, root, inc, path)? {
        return Err(Error::PathIsDirectory);
    }
    Ok(predicates)
}

/// Whether any published path of incarnation `inc` lies strictly under `path` at `snap`: one
/// limit-1 prefix probe of PathCurrent (the implicit-directory test of the namespace rule).
///
/// Errors: storage errors.
pub(crate) fn has_descendants<S: Snapshot>(
    snap: &S,
    root: &RootId,
    inc: &WorkspaceIncarnationId,
    path: &NormPath,
) -> Result<bool> {
    let probe = ScanSpec {
        prefix: path_current::children_prefix(root, inc, Some(path)),
        start_after: None,
        delimiter: None,
        limit: 1,
    };
    Ok(!snap.scan(Family::PathCurrent, &probe)?.is_empty())
}
