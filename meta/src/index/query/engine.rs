//! The query engine: picks index sources, probes them and streams candidate rows.

use super::ranges::{join, normalize_ranges, prefix_range, range_of, KeyRange};
use super::row::{ResolvedScope, Row};
use super::types::{
    Op, Predicate, QueryLimits, QueryScope, QueryStats, MAX_PROBED_SOURCES, PROBE_ROWS,
};
use crate::codec::secondary_index::{index_prefix, SecondaryIndexEntry, SecondaryIndexKey};
use crate::codec::{
    change_event, path_current, workspace_current, workspace_incarnation_claim,
    WorkspaceCurrentKey, WorkspaceIncarnationClaim,
};
use crate::codec::{PathEntry, WorkspaceCurrent};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{RootId, WorkspaceIncarnationId};
use crate::index::value_codec::string_prefix_bound;
use crate::index::{FieldId, IndexValue};
use crate::path::{ordered_components, NormPath};
use crate::read::Liveness;
use crate::store::{ScanItem, ScanSpec, Snapshot, MAX_SCAN_ITEMS};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A candidate source of rows.
#[derive(Debug, Clone)]
pub(super) enum Source {
    /// Ordered scans over one field's index rows.
    Index {
        field: FieldId,
        ranges: Vec<KeyRange>,
        rank: u8,
        label: String,
    },
    /// PathCurrent of the workbench in scope (or of every visible workbench).
    Workspaces,
}

impl Source {
    fn rank(&self) -> u8 {
        match self {
            Source::Index { rank, .. } => *rank,
            Source::Workspaces => 4,
        }
    }
}

/// The query engine at one snapshot: scans, visibility cache, budget and statistics.
pub(crate) struct Engine<'a, S: Snapshot> {
    snap: &'a S,
    root: RootId,
    limits: QueryLimits,
    pub(crate) stats: QueryStats,
    visible: HashMap<WorkspaceIncarnationId, Option<Arc<str>>>,
    /// Workbench expiry on the querying process's wall clock (the store clock read once per
    /// query, see [`crate::read::workspace_live`]).
    live: Liveness<'a, S>,
}

impl<'a, S: Snapshot> Engine<'a, S> {
    pub(crate) fn new(snap: &'a S, root: RootId, limits: QueryLimits, wall_unix_ms: u64) -> Self {
        Engine {
            snap,
            root,
            limits,
            stats: QueryStats::default(),
            visible: HashMap::new(),
            live: Liveness::new(snap, wall_unix_ms),
        }
    }

    pub(crate) fn version(&self) -> u64 {
        self.snap.version()
    }

    pub(crate) fn limits(&self) -> QueryLimits {
        self.limits
    }

    /// Counts one examined row against the budget.
    fn examine(&mut self) -> Result<()> {
        self.stats.rows_examined += 1;
        if self.stats.rows_examined > self.limits.max_rows_examined {
            return Err(Error::ResourceExhausted {
                resource: "rows examined",
                maximum: self.limits.max_rows_examined,
            });
        }
        Ok(())
    }

    /// Resolves the scope: an `id` must name a `Visible` workbench at the read version.
    ///
    /// Errors: [`Error::WorkspaceNotFound`]; codec and storage errors.
    pub(crate) fn resolve_scope(&mut self, scope: &QueryScope) -> Result<ResolvedScope> {
        let workspace = match &scope.workbench_id {
            None => None,
            Some(id) => {
                let ws = self
                    .snap
                    .get(
                        Family::WorkspaceCurrent,
                        &workspace_current::key(&self.root, id),
                    )?
                    .map(|b| WorkspaceCurrent::decode(&b))
                    .transpose()?;
                let live = match &ws {
                    Some(ws) => self.live.live(ws)?,
                    None => false,
                };
                match ws {
                    Some(ws) if live => {
                        let name: Arc<str> = Arc::from(id.as_str());
                        self.visible.insert(ws.incarnation, Some(Arc::clone(&name)));
                        Some((ws.incarnation, name, ws))
                    }
                    _ => {
                        return Err(Error::WorkspaceNotFound {
                            workbench_id: id.clone(),
                        })
                    }
                }
            }
        };
        Ok(ResolvedScope {
            workspace,
            path: scope.path.clone(),
        })
    }

    /// Whether data in `scope` may have changed after `version` (see the module docs).
    ///
    /// Errors: codec and storage errors.
    pub(crate) fn changed_since(&mut self, scope: &ResolvedScope, version: u64) -> Result<bool> {
        if let Some((_, _, ws)) = &scope.workspace {
            return Ok(ws.modified_version > version || ws.created_version > version);
        }
        let spec = ScanSpec {
            prefix: change_event::prefix(&self.root),
            start_after: Some(change_event::key(&self.root, version, u32::MAX)),
            delimiter: None,
            limit: 1,
        };
        Ok(!self.snap.scan(Family::ChangeEvent, &spec)?.is_empty())
    }

    /// The visible workbench id of an incarnation at the read version (cached): the claim names
    /// the workbench, whose marker must be `Visible` with exactly this incarnation.
    fn visible_workbench(&mut self, inc: &WorkspaceIncarnationId) -> Result<Option<Arc<str>>> {
        if let Some(v) = self.visible.get(inc) {
            return Ok(v.clone());
        }
        self.stats.visibility_reads += 1;
        let claim = self.snap.get(
            Family::WorkspaceIncarnationClaim,
            &workspace_incarnation_claim::key(&self.root, inc),
        )?;
        let result = match claim {
            None => None,
            Some(b) => {
                let claim = WorkspaceIncarnationClaim::decode(&b)?;
                self.stats.visibility_reads += 1;
                let ws = self.snap.get(
                    Family::WorkspaceCurrent,
                    &workspace_current::key(&self.root, &claim.workbench_id),
                )?;
                match ws.map(|b| WorkspaceCurrent::decode(&b)).transpose()? {
                    Some(ws) if ws.incarnation == *inc && self.live.live(&ws)? => {
                        Some(Arc::from(claim.workbench_id.as_str()))
                    }
                    _ => None,
                }
            }
        };
        self.visible.insert(*inc, result.clone());
        Ok(result)
    }

    /// Every visible workbench of the root (one WorkspaceCurrent prefix scan).
    fn visible_workspaces(&mut self) -> Result<Vec<(WorkspaceIncarnationId, Arc<str>)>> {
        let prefix = self.root.as_bytes().to_vec();
        let mut marker: Option<Vec<u8>> = None;
        let mut out = Vec::new();
        loop {
            let spec = ScanSpec {
                prefix: prefix.clone(),
                start_after: marker.clone(),
                delimiter: None,
                limit: MAX_SCAN_ITEMS,
            };
            let batch = self.snap.scan(Family::WorkspaceCurrent, &spec)?;
            let exhausted = batch.len() < MAX_SCAN_ITEMS;
            for item in batch {
                let ScanItem::Row { key, value } = item else {
                    return Err(Error::codec("workspace_current", "unexpected rollup"));
                };
                self.examine()?;
                let id = WorkspaceCurrentKey::decode(&key)?.workbench_id;
                let ws = WorkspaceCurrent::decode(&value)?;
                if self.live.live(&ws)? {
                    let name: Arc<str> = Arc::from(id.as_str());
                    self.visible.insert(ws.incarnation, Some(Arc::clone(&name)));
                    out.push((ws.incarnation, name));
                }
                marker = Some(key);
            }
            if exhausted {
                return Ok(out);
            }
        }
    }

    /// Builds the candidate index sources of `predicates` (see the module docs).
    fn index_sources(
        &self,
        scope: &ResolvedScope,
        predicates: &[Predicate],
    ) -> Result<Vec<Source>> {
        let mut sources = Vec::new();
        // Exact-range suffix an `id` scope adds after an exact value: incarnation + path prefix.
        let scope_suffix = match &scope.workspace {
            None => Vec::new(),
            Some((inc, _, _)) => {
                let mut s = inc.as_bytes().to_vec();
                if let Some(p) = &scope.path {
                    s.extend_from_slice(&ordered_components(p));
                }
                s
            }
        };
        // Range predicates grouped per field for intersection.
        let mut ranged: BTreeMap<FieldId, Vec<&Predicate>> = BTreeMap::new();
        for p in predicates {
            let fp = index_prefix(&self.root, &p.field);
            let label = format!("index {} {}", p.op.as_str(), p.field);
            match p.op {
                Op::Eq | Op::In => {
                    let mut ranges = Vec::new();
                    for o in &p.operands {
                        for variant in o.value_variants() {
                            let mut base = fp.clone();
                            variant.encode_into(&mut base)?;
                            base.extend_from_slice(&scope_suffix);
                            ranges.push(prefix_range(base));
                        }
                    }
                    sources.push(Source::Index {
                        field: p.field.clone(),
                        ranges: normalize_ranges(ranges),
                        rank: 0,
                        label,
                    });
                }
                Op::Prefix => {
                    let mut ranges = Vec::new();
                    for o in &p.operands {
                        if let IndexValue::String(s) = o {
                            ranges.push(prefix_range(join(&fp, &string_prefix_bound(s)?)));
                        }
                    }
                    sources.push(Source::Index {
                        field: p.field.clone(),
                        ranges: normalize_ranges(ranges),
                        rank: 1,
                        label,
                    });
                }
                Op::Gt | Op::Gte | Op::Lt | Op::Lte => {
                    ranged.entry(p.field.clone()).or_default().push(p);
                }
                Op::Exists => sources.push(Source::Index {
                    field: p.field.clone(),
                    ranges: vec![prefix_range(fp)],
                    rank: 3,
                    label,
                }),
                Op::Ne | Op::NotExists | Op::Suffix | Op::Contains => {}
            }
        }
        for (field, preds) in ranged {
            let fp = index_prefix(&self.root, &field);
            let one_domain = preds.iter().all(|p| p.operands.len() == 1)
                && preds
                    .windows(2)
                    .all(|w| w[0].operands[0].domain() == w[1].operands[0].domain());
            if one_domain {
                // Intersect into ONE ordered scan.
                let mut range: Option<KeyRange> = None;
                for p in &preds {
                    let r = range_of(&fp, p.op, &p.operands[0])?;
                    range = Some(match range {
                        None => r,
                        Some(acc) => KeyRange {
                            lower: acc.lower.max(r.lower),
                            upper: match (acc.upper, r.upper) {
                                (Some(a), Some(b)) => Some(a.min(b)),
                                (a, b) => a.or(b),
                            },
                        },
                    });
                }
                let label = format!(
                    "index {} {field}",
                    preds
                        .iter()
                        .map(|p| p.op.as_str())
                        .collect::<Vec<_>>()
                        .join("+")
                );
                sources.push(Source::Index {
                    field,
                    ranges: normalize_ranges(range.into_iter().collect()),
                    rank: 2,
                    label,
                });
            } else {
                for p in preds {
                    let ranges = p
                        .operands
                        .iter()
                        .map(|o| range_of(&fp, p.op, o))
                        .collect::<Result<Vec<_>>>()?;
                    sources.push(Source::Index {
                        field: field.clone(),
                        ranges: normalize_ranges(ranges),
                        rank: 2,
                        label: format!("index {} {field}", p.op.as_str()),
                    });
                }
            }
        }
        sources.sort_by_key(Source::rank);
        Ok(sources)
    }

    /// Counts up to [`PROBE_ROWS`] rows of a source.
    fn probe(&mut self, source: &Source, scope: &ResolvedScope) -> Result<u64> {
        let mut counted = 0u64;
        match source {
            Source::Index { field, ranges, .. } => {
                let fp = index_prefix(&self.root, field);
                for r in ranges {
                    if counted >= PROBE_ROWS {
                        break;
                    }
                    let spec = ScanSpec {
                        prefix: fp.clone(),
                        start_after: Some(r.lower.clone()),
                        delimiter: None,
                        limit: (PROBE_ROWS - counted) as usize,
                    };
                    for item in self.snap.scan(Family::SecondaryIndex, &spec)? {
                        if r.upper
                            .as_ref()
                            .is_some_and(|u| item.marker() >= u.as_slice())
                        {
                            break;
                        }
                        counted += 1;
                    }
                }
            }
            Source::Workspaces => match &scope.workspace {
                None => return Ok(u64::MAX),
                Some((inc, _, _)) => {
                    let spec = ScanSpec {
                        prefix: path_current::children_prefix(&self.root, inc, scope.path.as_ref()),
                        start_after: None,
                        delimiter: None,
                        limit: PROBE_ROWS as usize,
                    };
                    counted = self.snap.scan(Family::PathCurrent, &spec)?.len() as u64;
                }
            },
        }
        self.stats.probe_rows += counted;
        Ok(counted)
    }

    /// Picks the source to scan (see the module docs).
    fn choose(&mut self, scope: &ResolvedScope, predicates: &[Predicate]) -> Result<Source> {
        let mut candidates = self.index_sources(scope, predicates)?;
        if candidates.is_empty() {
            return Ok(Source::Workspaces);
        }
        candidates.truncate(MAX_PROBED_SOURCES);
        if scope.workspace.is_some() {
            candidates.push(Source::Workspaces);
        }
        if candidates.len() == 1 {
            return Ok(candidates.remove(0));
        }
        let mut best: Option<(u64, u8, usize)> = None;
        for (i, c) in candidates.iter().enumerate() {
            let n = self.probe(c, scope)?;
            let key = (n, c.rank(), i);
            if best.is_none_or(|b| (key.0, key.1) < (b.0, b.1)) {
                best = Some(key);
            }
            if n == 0 {
                break;
            }
        }
        let i = best.map_or(0, |b| b.2);
        Ok(candidates.swap_remove(i))
    }

    /// Calls `on_match` for every visible artifact in `scope` satisfying every predicate, at the
    /// read version, in plan order (callers sort). See the module docs for the plan and checks.
    ///
    /// Errors: [`Error::ResourceExhausted`] past the row budget; [`Error::Codec`] for an index
    /// row without its PathCurrent entry or with another generation; storage errors; whatever
    /// `on_match` returns.
    pub(crate) fn for_each_match(
        &mut self,
        scope: &ResolvedScope,
        predicates: &[Predicate],
        on_match: &mut dyn FnMut(&Row<'_>) -> Result<()>,
    ) -> Result<()> {
        match self.choose(scope, predicates)? {
            Source::Index {
                field,
                ranges,
                label,
                ..
            } => {
                self.stats.plan = label;
                self.scan_index(&field, &ranges, scope, predicates, on_match)
            }
            Source::Workspaces => {
                self.stats.plan = if scope.workspace.is_some() {
                    "scan workbench".into()
                } else {
                    "scan root".into()
                };
                self.for_each_artifact(scope, &mut |row| {
                    if row.satisfies(predicates)? {
                        on_match(row)?;
                    }
                    Ok(())
                })
            }
        }
    }

    fn scan_index(
        &mut self,
        field: &FieldId,
        ranges: &[KeyRange],
        scope: &ResolvedScope,
        predicates: &[Predicate],
        on_match: &mut dyn FnMut(&Row<'_>) -> Result<()>,
    ) -> Result<()> {
        let fp = index_prefix(&self.root, field);
        for range in ranges {
            let mut marker = range.lower.clone();
            'range: loop {
                let spec = ScanSpec {
                    prefix: fp.clone(),
                    start_after: Some(marker.clone()),
                    delimiter: None,
                    limit: MAX_SCAN_ITEMS,
                };
                let batch = self.snap.scan(Family::SecondaryIndex, &spec)?;
                let exhausted = batch.len() < MAX_SCAN_ITEMS;
                for item in batch {
                    let ScanItem::Row { key, value } = item else {
                        return Err(Error::codec("secondary_index", "unexpected rollup"));
                    };
                    if range.upper.as_ref().is_some_and(|u| key >= *u) {
                        break 'range;
                    }
                    self.examine()?;
                    let k = SecondaryIndexKey::decode(&key)?;
                    marker = key;
                    if !scope.admits(&k.incarnation, &k.path) {
                        continue;
                    }
                    let Some(wb) = self.visible_workbench(&k.incarnation)? else {
                        continue;
                    };
                    let entry = self.path_entry(&k.incarnation, &k.path)?.ok_or_else(|| {
                        Error::codec(
                            "secondary_index",
                            "index row names a path without a PathCurrent entry",
                        )
                    })?;
                    if SecondaryIndexEntry::decode(&value)?.path_generation != entry.generation {
                        return Err(Error::codec(
                            "secondary_index",
                            "index row generation differs from its PathCurrent entry",
                        ));
                    }
                    let row = Row {
                        workbench_id: &wb,
                        incarnation: k.incarnation,
                        path: &k.path,
                        entry: &entry,
                    };
                    if row.satisfies(predicates)? {
                        on_match(&row)?;
                    }
                }
                if exhausted {
                    break;
                }
            }
        }
        Ok(())
    }

    /// One PathCurrent point read.
    pub(crate) fn path_entry(
        &mut self,
        inc: &WorkspaceIncarnationId,
        path: &NormPath,
    ) -> Result<Option<PathEntry>> {
        self.stats.path_reads += 1;
        self.snap
            .get(
                Family::PathCurrent,
                &path_current::key(&self.root, inc, path),
            )?
            .map(|b| PathEntry::decode(&b))
            .transpose()
    }

    /// Calls `on_row` for every visible artifact in scope (no predicates): PathCurrent scans of
    /// the workbench in scope or of every visible workbench, under the path prefix, plus the
    /// exact prefix path itself when it is a file. Every PathCurrent row and workspace marker
    /// counts against the row budget.
    ///
    /// Errors: [`Error::ResourceExhausted`]; codec and storage errors; `on_row`'s errors.
    pub(crate) fn for_each_artifact(
        &mut self,
        scope: &ResolvedScope,
        on_row: &mut dyn FnMut(&Row<'_>) -> Result<()>,
    ) -> Result<()> {
        let workspaces = match &scope.workspace {
            Some((inc, name, _)) => vec![(*inc, Arc::clone(name))],
            None => self.visible_workspaces()?,
        };
        for (inc, name) in workspaces {
            if let Some(p) = &scope.path {
                self.examine()?;
                if let Some(entry) = self.path_entry(&inc, p)? {
                    on_row(&Row {
                        workbench_id: &name,
                        incarnation: inc,
                        path: p,
                        entry: &entry,
                    })?;
                }
            }
            let prefix = path_current::children_prefix(&self.root, &inc, scope.path.as_ref());
            let mut marker: Option<Vec<u8>> = None;
            loop {
                let spec = ScanSpec {
                    prefix: prefix.clone(),
                    start_after: marker.clone(),
                    delimiter: None,
                    limit: MAX_SCAN_ITEMS,
                };
                let batch = self.snap.scan(Family::PathCurrent, &spec)?;
                let exhausted = batch.len() < MAX_SCAN_ITEMS;
                for item in batch {
                    let ScanItem::Row { key, value } = item else {
                        return Err(Error::codec("path_current", "unexpected rollup"));
                    };
                    self.examine()?;
                    let path = path_current::decode_key_path(&key)?;
                    let entry = PathEntry::decode(&value)?;
                    marker = Some(key);
                    on_row(&Row {
                        workbench_id: &name,
                        incarnation: inc,
                        path: &path,
                        entry: &entry,
                    })?;
                }
                if exhausted {
                    break;
                }
            }
        }
        Ok(())
    }
}
