//! The field catalog (docs/workbench.md `workbench_catalog`): which fields exist in a scope, with
//! which observed types, which operators apply, and — on request — their most common values.
//!
//! One pass over the visible artifacts in scope at ONE read version (the workbench's PathCurrent
//! rows under the section/path prefix, or those of every visible workbench for a root-wide
//! catalog), each counted against [`QueryLimits::max_rows_examined`]. Per field:
//!
//! - observed types: `null`, `bool`, `int`, `uint`, `float`, `timestamp`, `string`, `bytes`;
//! - operators: `eq ne in lt lte gt gte exists not_exists` for every field, plus `prefix suffix
//!   contains` when a string value was observed;
//! - sortable: every field (the value codec's total order); aggregatable: a numeric value was
//!   observed; facetable: a non-bytes value was observed and the field is not `path` or
//!   `generation` (unique per artifact);
//! - facets (`include_facets`): the top [`CATALOG_FACET_BUCKETS`] values of each facetable
//!   field, computed for fields with at most [`MAX_CATALOG_FACET_DISTINCT`] distinct values
//!   (higher-cardinality fields are not faceted; search facets cover them on demand).
//!
//! `field_prefix` keeps only fields whose id starts with it. Child catalogs summarise the next
//! level down: for a root-wide catalog one per visible workbench with artifacts in scope, for a
//! workbench (or a path inside it) one per child directory; at most [`MAX_CHILD_CATALOGS`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::command::projection::entry_fields;
use crate::error::{Error, Result};
use crate::index::query::{
    Engine, Facet, FacetCounter, Op, QueryLimits, QueryScope, QueryStats, MAX_FIELDS,
};
use crate::index::{FieldId, ValueDomain};
use crate::path::NormPath;
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};

/// Values reported per catalog facet.
pub const CATALOG_FACET_BUCKETS: usize = 16;
/// Fields with more distinct values than this in scope are not faceted by the catalog.
pub const MAX_CATALOG_FACET_DISTINCT: usize = 1024;
/// Most child catalogs reported.
pub const MAX_CHILD_CATALOGS: usize = 256;
/// Longest `field_prefix` in bytes.
pub const MAX_FIELD_PREFIX_BYTES: usize = 128;

/// A catalog request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatalogRequest {
    /// Scope.
    pub scope: QueryScope,
    /// Only fields whose id starts with this (`[A-Za-z0-9_.-]*`, ≤128 bytes).
    pub field_prefix: Option<String>,
    /// Compute facets.
    pub include_facets: bool,
}

/// What the catalog knows about one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldInfo {
    /// Field id.
    pub field: FieldId,
    /// Observed type names in value-codec order (`null` … `bytes`).
    pub types: Vec<&'static str>,
    /// Artifacts in scope having the field.
    pub artifact_count: u64,
}

const TYPE_ORDER: [&str; 8] = [
    "null",
    "bool",
    "int",
    "uint",
    "float",
    "timestamp",
    "string",
    "bytes",
];

impl FieldInfo {
    /// Operators that apply (see the module docs), in contract order.
    pub fn operators(&self) -> Vec<Op> {
        let mut ops = vec![
            Op::Eq,
            Op::Ne,
            Op::In,
            Op::Lt,
            Op::Lte,
            Op::Gt,
            Op::Gte,
            Op::Exists,
            Op::NotExists,
        ];
        if self.types.contains(&"string") {
            ops.extend([Op::Prefix, Op::Suffix, Op::Contains]);
        }
        ops
    }

    /// Every field is sortable.
    pub fn sortable(&self) -> bool {
        true
    }

    /// A non-bytes value was observed and the field is not unique per artifact.
    pub fn facetable(&self) -> bool {
        !matches!(self.field.as_str(), "path" | "generation")
            && self.types.iter().any(|t| *t != "bytes")
    }

    /// A numeric value was observed.
    pub fn aggregatable(&self) -> bool {
        self.types
            .iter()
            .any(|t| matches!(*t, "int" | "uint" | "float"))
    }
}

/// A summary of the next level down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildCatalog {
    /// Workbench the child belongs to.
    pub workbench_id: String,
    /// Workbench-relative directory (`None`: the workbench itself, for root-wide catalogs).
    pub path: Option<NormPath>,
    /// Artifacts under the child.
    pub artifact_count: u64,
    /// Fields present under the child (after `field_prefix`), sorted; at most 64.
    pub fields: Vec<FieldId>,
}

/// A catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogResult {
    /// The read version the catalog reflects.
    pub read_version: u64,
    /// Artifacts in scope.
    pub artifact_count: u64,
    /// Fields in scope (after `field_prefix`), sorted by id.
    pub fields: Vec<FieldInfo>,
    /// Facets of the facetable fields (when requested), sorted by field id.
    pub facets: Vec<Facet>,
    /// Child catalogs in (workbench id, path) order.
    pub children: Vec<ChildCatalog>,
    /// True when more children existed than [`MAX_CHILD_CATALOGS`].
    pub children_truncated: bool,
    /// Work done.
    pub stats: QueryStats,
}

#[derive(Default)]
struct FieldAcc {
    types: BTreeSet<usize>,
    count: u64,
    facet: Option<FacetCounter>,
    facet_dropped: bool,
}

/// Builds the catalog at the live read version.
///
/// Errors: [`Error::InvalidArgument`] for an invalid id or `field_prefix`;
/// [`Error::WorkspaceNotFound`]; [`Error::ResourceExhausted`] (`"rows examined"`); codec and
/// storage errors.
pub fn catalog(
    shard: &MetaShard,
    req: &CatalogRequest,
    limits: QueryLimits,
) -> Result<CatalogResult> {
    let snap = shard.inner.store.snapshot();
    run_catalog(&snap, shard, req, limits)
}

fn run_catalog<S: Snapshot>(
    snap: &S,
    shard: &MetaShard,
    req: &CatalogRequest,
    limits: QueryLimits,
) -> Result<CatalogResult> {
    crate::index::query::validate_common(&req.scope, &[])?;
    let prefix = req.field_prefix.as_deref().unwrap_or("");
    if prefix.len() > MAX_FIELD_PREFIX_BYTES
        || !prefix
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
    {
        return Err(Error::invalid(
            "field_prefix may contain only ASCII letters, digits, '_', '.' and '-' (≤128 bytes)",
        ));
    }
    let mut engine = Engine::new(snap, shard.root_id(), limits, shard.wall_unix_ms());
    let scope = engine.resolve_scope(&req.scope)?;
    let scope_depth = scope.path.as_ref().map_or(0, NormPath::len_components);
    let root_wide = scope.workspace.is_none();
    let mut fields: BTreeMap<FieldId, FieldAcc> = BTreeMap::new();
    type ChildKey = (Arc<str>, Option<NormPath>);
    let mut children: BTreeMap<ChildKey, (u64, BTreeSet<FieldId>)> = BTreeMap::new();
    let mut children_truncated = false;
    let mut artifacts = 0u64;
    engine.for_each_artifact(&scope, &mut |row| {
        artifacts += 1;
        let child: Option<ChildKey> = if root_wide {
            Some((Arc::clone(row.workbench_id), None))
        } else if row.path.len_components() > scope_depth + 1 {
            let dir: Vec<&str> = row.path.components().take(scope_depth + 1).collect();
            Some((
                Arc::clone(row.workbench_id),
                Some(crate::path::normalize_stored(&dir.join("/"))?),
            ))
        } else {
            None
        };
        let mut child_slot = match child {
            Some(k) if children.contains_key(&k) || children.len() < MAX_CHILD_CATALOGS => {
                let slot = children.entry(k).or_default();
                slot.0 += 1;
                Some(slot)
            }
            Some(_) => {
                children_truncated = true;
                None
            }
            None => None,
        };
        for (field, value) in entry_fields(row.workbench_id, row.path, row.entry)? {
            if !field.as_str().starts_with(prefix) {
                continue;
            }
            if let Some(slot) = child_slot.as_mut() {
                if slot.1.len() < MAX_FIELDS {
                    slot.1.insert(field.clone());
                }
            }
            let acc = fields.entry(field).or_default();
            acc.count += 1;
            let t = value.type_name();
            acc.types
                .insert(TYPE_ORDER.iter().position(|x| *x == t).unwrap_or(0));
            if req.include_facets && !acc.facet_dropped && value.domain() != ValueDomain::Bytes {
                let counter = acc.facet.get_or_insert_with(FacetCounter::default);
                counter.add(value);
                if counter.distinct() > MAX_CATALOG_FACET_DISTINCT {
                    acc.facet_dropped = true;
                    acc.facet = None;
                }
            }
        }
        Ok(())
    })?;
    let mut infos = Vec::with_capacity(fields.len());
    let mut facets = Vec::new();
    for (field, acc) in fields {
        let info = FieldInfo {
            field: field.clone(),
            types: acc.types.iter().map(|i| TYPE_ORDER[*i]).collect(),
            artifact_count: acc.count,
        };
        if req.include_facets && info.facetable() {
            if let Some(counter) = acc.facet {
                facets.push(counter.finish(field, CATALOG_FACET_BUCKETS));
            }
        }
        infos.push(info);
    }
    Ok(CatalogResult {
        read_version: engine.version(),
        artifact_count: artifacts,
        fields: infos,
        facets,
        children: children
            .into_iter()
            .map(|((wb, path), (count, fields))| ChildCatalog {
                workbench_id: wb.to_string(),
                path,
                artifact_count: count,
                fields: fields.into_iter().collect(),
            })
            .collect(),
        children_truncated,
        stats: engine.stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(field: &str, types: &[&'static str]) -> FieldInfo {
        FieldInfo {
            field: FieldId::new(field).unwrap(),
            types: types.to_vec(),
            artifact_count: 1,
        }
    }

    #[test]
    fn operators_and_capabilities_follow_the_observed_types() {
        let s = info("species", &["string"]);
        assert_eq!(s.operators().len(), 12);
        assert!(s.facetable() && !s.aggregatable() && s.sortable());
        let n = info("count", &["int", "float"]);
        assert_eq!(
            n.operators().iter().map(|o| o.as_str()).collect::<Vec<_>>(),
            [
                "eq",
                "ne",
                "in",
                "lt",
                "lte",
                "gt",
                "gte",
                "exists",
                "not_exists"
            ]
        );
        assert!(n.aggregatable() && n.facetable());
        assert!(!info("path", &["string"]).facetable());
        assert!(!info("generation", &["uint"]).facetable());
        assert!(!info("blob", &["bytes"]).facetable());
    }
}
