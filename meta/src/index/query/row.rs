//! Rows under evaluation: typed sort values, facet counters and the resolved scope.

use super::types::{Direction, Facet, Predicate};
use crate::codec::{PathEntry, WorkspaceCurrent};
use crate::command::projection::{builtin_value, is_builtin};
use crate::error::Result;
use crate::ids::WorkspaceIncarnationId;
use crate::index::{FieldId, IndexValue};
use crate::path::NormPath;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A value ordered by [`IndexValue::value_cmp`] (numbers equal by value are one key).
#[derive(Debug, Clone)]
pub(crate) struct ValueKey(pub IndexValue);

impl PartialEq for ValueKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.value_eq(&other.0)
    }
}
impl Eq for ValueKey {}
impl PartialOrd for ValueKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ValueKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.value_cmp(&other.0)
    }
}

/// Value counts of one field.
#[derive(Debug, Default)]
pub(crate) struct FacetCounter {
    counts: BTreeMap<ValueKey, u64>,
}

impl FacetCounter {
    pub(crate) fn add(&mut self, v: IndexValue) {
        *self.counts.entry(ValueKey(v)).or_insert(0) += 1;
    }

    /// Distinct values counted so far.
    pub(crate) fn distinct(&self) -> usize {
        self.counts.len()
    }

    /// The facet with at most `buckets` values (count descending, then value ascending).
    pub(crate) fn finish(self, field: FieldId, buckets: usize) -> Facet {
        let distinct = self.counts.len();
        let mut values: Vec<(IndexValue, u64)> =
            self.counts.into_iter().map(|(k, c)| (k.0, c)).collect();
        // Stable: equal counts keep the ascending value order of the map.
        values.sort_by_key(|v| std::cmp::Reverse(v.1));
        values.truncate(buckets);
        Facet {
            field,
            truncated: distinct > values.len(),
            distinct_count: distinct as u64,
            values,
        }
    }
}

/// A scope resolved at the read version.
pub(crate) struct ResolvedScope {
    /// The visible workbench of an `id` scope: incarnation, id, marker.
    pub workspace: Option<(WorkspaceIncarnationId, Arc<str>, WorkspaceCurrent)>,
    /// Path prefix.
    pub path: Option<NormPath>,
}

impl ResolvedScope {
    pub(super) fn admits(&self, inc: &WorkspaceIncarnationId, path: &NormPath) -> bool {
        if let Some((scope_inc, _, _)) = &self.workspace {
            if scope_inc != inc {
                return false;
            }
        }
        match &self.path {
            None => true,
            Some(p) => path == p || path.starts_with_dir(p),
        }
    }
}

/// One candidate artifact handed to a query's row callback.
pub(crate) struct Row<'r> {
    /// Visible workbench id.
    pub workbench_id: &'r Arc<str>,
    /// Workspace incarnation.
    pub incarnation: WorkspaceIncarnationId,
    /// Workbench-relative path.
    pub path: &'r NormPath,
    /// Its PathCurrent entry at the read version.
    pub entry: &'r PathEntry,
}

impl Row<'_> {
    /// The value of `field` (built-in or custom), `None` when absent.
    ///
    /// Errors: [`Error::Codec`] for a malformed stored custom value.
    pub fn get(&self, field: &FieldId) -> Result<Option<IndexValue>> {
        if is_builtin(field.as_str()) {
            return Ok(builtin_value(
                field.as_str(),
                self.workbench_id,
                self.path,
                self.entry,
            ));
        }
        let proj = &self.entry.index_projection;
        match proj.binary_search_by(|(f, _)| f.as_str().cmp(field.as_str())) {
            Ok(i) => Ok(Some(IndexValue::decode(&proj[i].1)?)),
            Err(_) => Ok(None),
        }
    }

    /// Whether every predicate holds. Errors: as [`Row::get`].
    pub fn satisfies(&self, predicates: &[Predicate]) -> Result<bool> {
        for p in predicates {
            if !p.matches(self.get(&p.field)?.as_ref()) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Compares two optional sort values: present before absent, values by value then type.
pub(crate) fn cmp_sort_value(
    a: Option<&IndexValue>,
    b: Option<&IndexValue>,
    direction: Direction,
) -> Ordering {
    match (a, b) {
        (Some(x), Some(y)) => {
            let o = x.value_cmp(y).then_with(|| x.cmp(y));
            match direction {
                Direction::Asc => o,
                Direction::Desc => o.reverse(),
            }
        }
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}
