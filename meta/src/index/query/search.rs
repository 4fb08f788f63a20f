//! The search entry points: one page at one read version.

use super::engine::Engine;
use super::row::{cmp_sort_value, FacetCounter, Row};
use super::types::{
    QueryLimits, Resume, SearchMatch, SearchPage, SearchRequest, MAX_FACET_BUCKETS,
};
use crate::command::projection::entry_fields;
use crate::error::{Error, Result};
use crate::ids::{RootId, WorkspaceIncarnationId};
use crate::index::IndexValue;
use crate::path::NormPath;
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};
use std::cmp::Ordering;
use std::sync::Arc;

/// Runs a search at the live read version with the given budgets.
///
/// Errors: [`Error::InvalidArgument`] (caps, operands, a continuation newer than the store or
/// past the matches); [`Error::WorkspaceNotFound`] for an `id` that is not a visible
/// workbench; [`Error::ReadFenceChanged`] for a continuation whose data changed;
/// [`Error::ResourceExhausted`]; codec and storage errors.
pub fn search(shard: &MetaShard, req: &SearchRequest, limits: QueryLimits) -> Result<SearchPage> {
    let snap = shard.inner.store.snapshot();
    run_search(&snap, shard.root_id(), req, limits, shard.wall_unix_ms())
}

/// Runs a search at an explicit retained read `version` (MVCC history; e.g. the version before
/// a replacement, or a snapshot's read version).
///
/// Errors: those of [`search`]; [`Error::Storage`] with `HistoryPruned` below the history floor
/// or `InvalidArgument` above the current version.
pub fn search_at(
    shard: &MetaShard,
    version: u64,
    req: &SearchRequest,
    limits: QueryLimits,
) -> Result<SearchPage> {
    let snap = shard.inner.store.snapshot_at(version)?;
    run_search(&snap, shard.root_id(), req, limits, shard.wall_unix_ms())
}

pub(super) struct Hit {
    pub(super) workbench_id: Arc<str>,
    pub(super) incarnation: WorkspaceIncarnationId,
    pub(super) path: NormPath,
    pub(super) sort: Vec<Option<IndexValue>>,
}

pub(super) fn run_search<S: Snapshot>(
    snap: &S,
    root: RootId,
    req: &SearchRequest,
    limits: QueryLimits,
    wall_unix_ms: u64,
) -> Result<SearchPage> {
    req.validate()?;
    let mut engine = Engine::new(snap, root, limits, wall_unix_ms);
    let scope = engine.resolve_scope(&req.scope)?;
    let offset = match req.resume {
        None => 0,
        Some(r) => {
            if r.read_version > engine.version() {
                return Err(Error::invalid(
                    "the continuation was issued at a newer read version than this store's",
                ));
            }
            if r.read_version < engine.version() && engine.changed_since(&scope, r.read_version)? {
                return Err(Error::ReadFenceChanged {
                    read_version: r.read_version,
                });
            }
            r.offset
        }
    };
    let mut hits: Vec<Hit> = Vec::new();
    let mut facets: Vec<FacetCounter> =
        req.facets.iter().map(|_| FacetCounter::default()).collect();
    // Sources never yield a path twice: index rows are unique per (field, value, incarnation,
    // path), a path has one value per field, and the scanned ranges are disjoint.
    engine.for_each_match(&scope, &req.predicates, &mut |row| {
        for (f, counter) in req.facets.iter().zip(facets.iter_mut()) {
            if let Some(v) = row.get(f)? {
                counter.add(v);
            }
        }
        hits.push(Hit {
            workbench_id: Arc::clone(row.workbench_id),
            incarnation: row.incarnation,
            path: row.path.clone(),
            sort: req
                .sort
                .iter()
                .map(|k| row.get(&k.field))
                .collect::<Result<_>>()?,
        });
        Ok(())
    })?;
    hits.sort_by(|a, b| {
        for (i, k) in req.sort.iter().enumerate() {
            let o = cmp_sort_value(a.sort[i].as_ref(), b.sort[i].as_ref(), k.direction);
            if o != Ordering::Equal {
                return o;
            }
        }
        a.workbench_id
            .cmp(&b.workbench_id)
            .then_with(|| a.path.cmp(&b.path))
    });
    let total = hits.len() as u64;
    if offset > total {
        return Err(Error::invalid(
            "the continuation points past the last match",
        ));
    }
    let start = offset as usize;
    let end = start.saturating_add(req.limit).min(hits.len());
    let mut matches = Vec::with_capacity(end - start);
    for hit in &hits[start..end] {
        let entry = engine
            .path_entry(&hit.incarnation, &hit.path)?
            .ok_or_else(|| Error::codec("path_current", "matched path vanished at one version"))?;
        let values = match &req.fields {
            None => entry_fields(&hit.workbench_id, &hit.path, &entry)?,
            Some(fields) => {
                let row = Row {
                    workbench_id: &hit.workbench_id,
                    incarnation: hit.incarnation,
                    path: &hit.path,
                    entry: &entry,
                };
                let mut out = Vec::new();
                for f in fields {
                    if let Some(v) = row.get(f)? {
                        out.push((f.clone(), v));
                    }
                }
                out.sort_by(|a, b| a.0.cmp(&b.0));
                out.dedup_by(|a, b| a.0 == b.0);
                out
            }
        };
        matches.push(SearchMatch {
            workbench_id: hit.workbench_id.to_string(),
            path: hit.path.clone(),
            values,
        });
    }
    let next = (end < hits.len()).then_some(Resume {
        read_version: engine.version(),
        offset: end as u64,
    });
    Ok(SearchPage {
        read_version: engine.version(),
        match_count: total,
        matches,
        facets: req
            .facets
            .iter()
            .zip(facets)
            .map(|(f, c)| c.finish(f.clone(), MAX_FACET_BUCKETS))
            .collect(),
        next,
        stats: engine.stats,
    })
}
