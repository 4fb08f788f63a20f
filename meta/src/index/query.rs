//! The typed query executor over SecondaryIndex (docs/design.md, "Discovery And Provenance"; docs/metadata-format.md,
//! "SecondaryIndex", "Namespace And Workspace Visibility"): search with predicates, projection,
//! sort, facets and bounded pages, at ONE read version.
//!
//! # Plan
//!
//! Every predicate that can drive an ordered index scan becomes a *candidate source*: a sorted,
//! non-overlapping list of key ranges over one field's rows (`root | field | encoded value |
//! incarnation | ordered path`):
//!
//! | predicate | key ranges | rank |
//! |---|---|---|
//! | `eq v`, `in [v…]` | one exact range per value *variant* (`Int(5)`, `UInt(5)`, `Float(5.0)` are one number); with an `id` scope the range also fixes the incarnation and the path prefix | 0 |
//! | `prefix s` | the string encodings starting with `s` | 1 |
//! | `gt gte lt lte` | one range inside the operand's typed domain, bounded by the value codec's `order_prefix`; single-operand range predicates on one field and domain are intersected into ONE ordered scan | 2 |
//! | `exists` | every row of the field | 3 |
//!
//! `ne`, `not_exists`, `suffix` and `contains` cannot bound a scan; they are evaluated per row.
//! Without any candidate source the query scans PathCurrent of the workbench in scope (or of every
//! visible workbench for a root-wide query) under the section/path prefix. With several candidates
//! the executor *probes* each (it counts at most [`PROBE_ROWS`] keys of its ranges; the
//! workbench scan of an `id` scope competes too) and scans the one with the fewest rows, ties going
//! to the better rank. No predicate ever reads an object body.
//!
//! # Row check
//!
//! Every candidate row is rechecked at the same read version: the row's incarnation must be the
//! *visible* incarnation of its workbench (WorkspaceIncarnationClaim names the workbench,
//! WorkspaceCurrent must be `Visible` with that incarnation — two point reads, cached per
//! incarnation for the query, so staging or retired incarnations never appear), the path must lie
//! in the scope, the PathCurrent entry is point-read (one read per candidate: it carries every
//! field, so all predicates, sort keys, facets and projections are evaluated from it) and its
//! generation must equal the row's `path_generation`. Work is therefore proportional to the rows
//! of the chosen source, not to the artifacts in scope, and bounded by
//! [`QueryLimits::max_rows_examined`] ([`Error::ResourceExhausted`] beyond).
//!
//! # Semantics
//!
//! - A predicate's operands are *alternatives*: `eq`/`in` match a value equal to any operand;
//!   `ne` matches a present value equal to none; a range matches a present value of the same
//!   typed domain as some operand comparing as required (`gt 4000` never matches a string);
//!   `prefix`/`suffix`/`contains` match present string values (case-sensitive, by bytes).
//!   Missing fields match only `not_exists`.
//! - Numbers form one domain compared by exact value (see [`crate::index::value_codec`]).
//! - Results are ordered by the sort keys (rows lacking a sort field come after the rows that
//!   have it, in either direction), then by workbench id and path ascending — independent of the
//!   plan.
//! - `match_count` and facets cover every match, not just the page.
//!
//! # Continuations
//!
//! A page's [`Resume`] carries the read version it was produced at and the offset of the next
//! row. It continues only while the data in scope is unchanged since that version: for an `id`
//! scope the workbench's `modified_version` must not exceed it, root-wide no ChangeEvent may
//! exist after it (one limit-1 probe). Otherwise [`Error::ReadFenceChanged`]. With the data
//! unchanged, the row sequence at the current version is identical to the one at the cursor's
//! version, so pages never duplicate or skip a row. (Frozen continuation at an older version
//! needs a snapshot's history hold; [`search_at`] runs a query at an explicit retained version.)

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::codec::secondary_index::{index_prefix, SecondaryIndexEntry, SecondaryIndexKey};
use crate::codec::{
    change_event, path_current, workspace_current, workspace_incarnation_claim,
    WorkspaceCurrentKey, WorkspaceIncarnationClaim,
};
use crate::codec::{PathEntry, WorkspaceCurrent, WorkspaceState};
use crate::command::projection::{builtin_value, entry_fields, is_builtin};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{validate_workbench_id, RootId, WorkspaceIncarnationId};
use crate::index::value_codec::{domain_key_bounds, string_prefix_bound};
use crate::index::{FieldId, IndexValue};
use crate::path::{ordered_components, NormPath};
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, Snapshot, TxnStore, MAX_SCAN_ITEMS};

/// Most predicates per query (docs/workbench.md caps).
pub const MAX_PREDICATES: usize = 64;
/// Most values of one `in` predicate.
pub const MAX_IN_VALUES: usize = 64;
/// Most operand alternatives of one predicate (an `in` value may expand to two typed
/// alternatives, e.g. a string that is also an RFC 3339 timestamp).
pub const MAX_OPERANDS: usize = 2 * MAX_IN_VALUES;
/// Most projected fields.
pub const MAX_FIELDS: usize = 64;
/// Most sort keys.
pub const MAX_SORT_KEYS: usize = 8;
/// Most facet fields.
pub const MAX_FACETS: usize = 16;
/// Most buckets reported per facet (more distinct values set `truncated`).
pub const MAX_FACET_BUCKETS: usize = 256;
/// Largest search page.
pub const MAX_PAGE: usize = 100;
/// Default budget of rows examined per query.
pub const DEFAULT_MAX_ROWS_EXAMINED: u64 = 100_000;
/// Default budget of distinct aggregate groups.
pub const DEFAULT_MAX_GROUPS: usize = 10_000;
/// Keys counted by a selectivity probe of one candidate source.
pub const PROBE_ROWS: u64 = 64;
/// Candidate sources probed at most (the best-ranked ones).
const MAX_PROBED_SOURCES: usize = 8;

/// Work budgets of one query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryLimits {
    /// Rows (index rows, PathCurrent rows and workspace markers) a query may examine; more is
    /// [`Error::ResourceExhausted`] with resource `"rows examined"`.
    pub max_rows_examined: u64,
    /// Distinct groups an aggregate may build; more is [`Error::ResourceExhausted`] with
    /// resource `"groups"`.
    pub max_groups: usize,
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            max_rows_examined: DEFAULT_MAX_ROWS_EXAMINED,
            max_groups: DEFAULT_MAX_GROUPS,
        }
    }
}

/// A predicate operator (docs/workbench.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Equal to an operand.
    Eq,
    /// Present and equal to no operand.
    Ne,
    /// Equal to one of the operands.
    In,
    /// String starting with an operand.
    Prefix,
    /// String ending with an operand.
    Suffix,
    /// String containing an operand.
    Contains,
    /// Greater than (same typed domain).
    Gt,
    /// Greater than or equal.
    Gte,
    /// Less than.
    Lt,
    /// Less than or equal.
    Lte,
    /// The field is present (any value, `null` included).
    Exists,
    /// The field is absent.
    NotExists,
}

impl Op {
    /// Every operator in contract order.
    pub const ALL: [Op; 12] = [
        Op::Eq,
        Op::Ne,
        Op::In,
        Op::Prefix,
        Op::Suffix,
        Op::Contains,
        Op::Gt,
        Op::Gte,
        Op::Lt,
        Op::Lte,
        Op::Exists,
        Op::NotExists,
    ];

    /// The contract name (`eq`, `not_exists`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "eq",
            Op::Ne => "ne",
            Op::In => "in",
            Op::Prefix => "prefix",
            Op::Suffix => "suffix",
            Op::Contains => "contains",
            Op::Gt => "gt",
            Op::Gte => "gte",
            Op::Lt => "lt",
            Op::Lte => "lte",
            Op::Exists => "exists",
            Op::NotExists => "not_exists",
        }
    }

    /// Parses a contract name.
    pub fn parse(name: &str) -> Option<Op> {
        Op::ALL.iter().copied().find(|o| o.as_str() == name)
    }

    fn is_range(self) -> bool {
        matches!(self, Op::Gt | Op::Gte | Op::Lt | Op::Lte)
    }

    fn is_string_op(self) -> bool {
        matches!(self, Op::Prefix | Op::Suffix | Op::Contains)
    }
}

/// One predicate `{field, op, operands}`; see the module docs for the operand semantics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predicate {
    /// Field (index) id.
    pub field: FieldId,
    /// Operator.
    pub op: Op,
    /// Operand alternatives (empty for `exists`/`not_exists`).
    pub operands: Vec<IndexValue>,
}

impl Predicate {
    /// Checks the operand shape. Errors: [`Error::InvalidArgument`]: `exists`/`not_exists` with
    /// operands; any other operator without one or with more than [`MAX_OPERANDS`]; a non-string
    /// operand of `prefix`/`suffix`/`contains`; a `null` range bound; an unencodable operand.
    pub fn validate(&self) -> Result<()> {
        let op = self.op.as_str();
        let field = &self.field;
        match self.op {
            Op::Exists | Op::NotExists if !self.operands.is_empty() => {
                return Err(Error::invalid(format!(
                    "predicate on `{field}`: `{op}` takes no value"
                )))
            }
            Op::Exists | Op::NotExists => {}
            _ if self.operands.is_empty() => {
                return Err(Error::invalid(format!(
                    "predicate on `{field}`: `{op}` needs a value"
                )))
            }
            _ => {}
        }
        if self.operands.len() > MAX_OPERANDS {
            return Err(Error::invalid(format!(
                "predicate on `{field}` has more than {MAX_OPERANDS} operands"
            )));
        }
        for v in &self.operands {
            if self.op.is_string_op() && !matches!(v, IndexValue::String(_)) {
                return Err(Error::invalid(format!(
                    "predicate on `{field}`: `{op}` needs a string value"
                )));
            }
            if self.op.is_range() && matches!(v, IndexValue::Null) {
                return Err(Error::invalid(format!(
                    "predicate on `{field}`: `{op}` cannot compare with null"
                )));
            }
            v.encode()
                .map_err(|e| Error::invalid(format!("predicate on `{field}`: {e}")))?;
        }
        Ok(())
    }

    /// Whether a row whose field holds `value` (`None`: absent) satisfies the predicate.
    pub fn matches(&self, value: Option<&IndexValue>) -> bool {
        let Some(v) = value else {
            return self.op == Op::NotExists;
        };
        let any = |f: &dyn Fn(&IndexValue) -> bool| self.operands.iter().any(f);
        let string = |f: &dyn Fn(&str, &str) -> bool| match v {
            IndexValue::String(s) => self.operands.iter().any(|o| match o {
                IndexValue::String(p) => f(s, p),
                _ => false,
            }),
            _ => false,
        };
        let ranged = |ok: &dyn Fn(Ordering) -> bool| {
            any(&|o| o.domain() == v.domain() && ok(v.value_cmp(o)))
        };
        match self.op {
            Op::Exists => true,
            Op::NotExists => false,
            Op::Eq | Op::In => any(&|o| v.value_eq(o)),
            Op::Ne => !any(&|o| v.value_eq(o)),
            Op::Prefix => string(&|s, p| s.starts_with(p)),
            Op::Suffix => string(&|s, p| s.ends_with(p)),
            Op::Contains => string(&|s, p| s.contains(p)),
            Op::Gt => ranged(&|o| o == Ordering::Greater),
            Op::Gte => ranged(&|o| o != Ordering::Less),
            Op::Lt => ranged(&|o| o == Ordering::Less),
            Op::Lte => ranged(&|o| o != Ordering::Greater),
        }
    }
}

/// The scope of a query: one workbench (`workbench_id`) or the whole root, optionally narrowed
/// to a workbench-relative path prefix (a section such as `outputs`, or `outputs/run1`): an
/// artifact is in scope when its path equals the prefix or lies below it component-wise.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryScope {
    /// Workbench id; `None` for root-wide.
    pub workbench_id: Option<String>,
    /// Workbench-relative path prefix; `None` for everything.
    pub path: Option<NormPath>,
}

/// Sort direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Ascending.
    Asc,
    /// Descending.
    Desc,
}

/// One sort key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    /// Field to sort by.
    pub field: FieldId,
    /// Direction.
    pub direction: Direction,
}

/// Where a continued search resumes: the read version its previous page was produced at and
/// the number of rows already returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    /// Read version of the previous page.
    pub read_version: u64,
    /// Rows already returned (the next page starts here).
    pub offset: u64,
}

/// A search request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest {
    /// Scope.
    pub scope: QueryScope,
    /// Predicates, all of which must hold (≤ [`MAX_PREDICATES`]).
    pub predicates: Vec<Predicate>,
    /// Fields to project per match; `None` projects every field of the artifact
    /// (≤ [`MAX_FIELDS`]).
    pub fields: Option<Vec<FieldId>>,
    /// Sort keys (≤ [`MAX_SORT_KEYS`]).
    pub sort: Vec<SortKey>,
    /// Facet fields (≤ [`MAX_FACETS`]).
    pub facets: Vec<FieldId>,
    /// Page size, 1..=[`MAX_PAGE`].
    pub limit: usize,
    /// Continuation of an earlier page.
    pub resume: Option<Resume>,
}

/// One facet: value counts of a field over every match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facet {
    /// Field.
    pub field: FieldId,
    /// `(value, count)` by count descending then value ascending; at most
    /// [`MAX_FACET_BUCKETS`] (numbers equal by value share one bucket).
    pub values: Vec<(IndexValue, u64)>,
    /// Distinct values among the matches.
    pub distinct_count: u64,
    /// True when `distinct_count` exceeds the buckets returned.
    pub truncated: bool,
}

/// One matching artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchMatch {
    /// Workbench id.
    pub workbench_id: String,
    /// Workbench-relative path.
    pub path: NormPath,
    /// Projected fields the artifact has, sorted by field id (requested-but-absent fields are
    /// omitted).
    pub values: Vec<(FieldId, IndexValue)>,
}

/// What a query did (for benchmarks and diagnostics; never part of the tool results).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryStats {
    /// The chosen source, e.g. `index eq mean_body_mass_g` or `scan workbench`.
    pub plan: String,
    /// Rows examined by the scan (index rows, PathCurrent rows, workspace markers).
    pub rows_examined: u64,
    /// Keys counted by selectivity probes.
    pub probe_rows: u64,
    /// PathCurrent point reads.
    pub path_reads: u64,
    /// WorkspaceIncarnationClaim + WorkspaceCurrent point reads for the visibility recheck.
    pub visibility_reads: u64,
}

/// One search page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPage {
    /// The read version every part of the page reflects.
    pub read_version: u64,
    /// Matches in scope (all pages).
    pub match_count: u64,
    /// This page.
    pub matches: Vec<SearchMatch>,
    /// Facets over every match, in request order.
    pub facets: Vec<Facet>,
    /// Continuation when more matches follow.
    pub next: Option<Resume>,
    /// Work done.
    pub stats: QueryStats,
}

fn put_bytes(h: &mut Sha256, b: &[u8]) {
    h.update((b.len() as u64).to_be_bytes());
    h.update(b);
}

/// Hashes a scope and predicates canonically (length-prefixed parts).
pub(crate) fn hash_query(h: &mut Sha256, scope: &QueryScope, predicates: &[Predicate]) {
    for part in [
        &scope.workbench_id,
        &scope.path.as_ref().map(|p| p.as_str().to_owned()),
    ] {
        match part {
            None => h.update([0u8]),
            Some(s) => {
                h.update([1u8]);
                put_bytes(h, s.as_bytes());
            }
        }
    }
    h.update((predicates.len() as u64).to_be_bytes());
    for p in predicates {
        put_bytes(h, p.field.as_str().as_bytes());
        put_bytes(h, p.op.as_str().as_bytes());
        h.update((p.operands.len() as u64).to_be_bytes());
        for o in &p.operands {
            put_bytes(h, &o.encode().unwrap_or_default());
        }
    }
}

pub(crate) fn hash_fields(h: &mut Sha256, fields: &[FieldId]) {
    h.update((fields.len() as u64).to_be_bytes());
    for f in fields {
        put_bytes(h, f.as_str().as_bytes());
    }
}

impl SearchRequest {
    /// SHA-256 over everything that defines the row sequence and its shape — scope, predicates,
    /// projection, sort and facets — but not `limit` or `resume` (domain
    /// `nokv.query.search.v1`). Continuations are bound to it.
    pub fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"nokv.query.search.v1\0");
        hash_query(&mut h, &self.scope, &self.predicates);
        match &self.fields {
            None => h.update([0u8]),
            Some(f) => {
                h.update([1u8]);
                hash_fields(&mut h, f);
            }
        }
        h.update((self.sort.len() as u64).to_be_bytes());
        for k in &self.sort {
            put_bytes(&mut h, k.field.as_str().as_bytes());
            h.update([u8::from(k.direction == Direction::Desc)]);
        }
        hash_fields(&mut h, &self.facets);
        h.finalize().into()
    }

    /// Checks every cap and operand. Errors: [`Error::InvalidArgument`].
    pub fn validate(&self) -> Result<()> {
        validate_common(&self.scope, &self.predicates)?;
        if self.fields.as_ref().is_some_and(|f| f.len() > MAX_FIELDS) {
            return Err(Error::invalid(format!(
                "at most {MAX_FIELDS} fields may be projected"
            )));
        }
        if self.sort.len() > MAX_SORT_KEYS {
            return Err(Error::invalid(format!(
                "at most {MAX_SORT_KEYS} sort keys are allowed"
            )));
        }
        if self.facets.len() > MAX_FACETS {
            return Err(Error::invalid(format!(
                "at most {MAX_FACETS} facets are allowed"
            )));
        }
        if !(1..=MAX_PAGE).contains(&self.limit) {
            return Err(Error::invalid(format!("limit must be 1..={MAX_PAGE}")));
        }
        Ok(())
    }
}

/// Checks the scope id and the predicates. Errors: [`Error::InvalidArgument`].
pub(crate) fn validate_common(scope: &QueryScope, predicates: &[Predicate]) -> Result<()> {
    if let Some(id) = &scope.workbench_id {
        validate_workbench_id(id)?;
    }
    if predicates.len() > MAX_PREDICATES {
        return Err(Error::invalid(format!(
            "at most {MAX_PREDICATES} predicates are allowed"
        )));
    }
    predicates.iter().try_for_each(Predicate::validate)
}

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
    fn admits(&self, inc: &WorkspaceIncarnationId, path: &NormPath) -> bool {
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

/// `[lower, upper)` over full SecondaryIndex keys. `lower` is never a complete key (it is a
/// value-level prefix), so a scan "strictly after `lower`" returns exactly the keys `>= lower`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyRange {
    lower: Vec<u8>,
    upper: Option<Vec<u8>>,
}

/// The smallest byte string greater than every string starting with `p` (`None`: unbounded).
fn prefix_successor(p: &[u8]) -> Option<Vec<u8>> {
    let mut s = p.to_vec();
    while let Some(last) = s.pop() {
        if last < 0xff {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

fn prefix_range(p: Vec<u8>) -> KeyRange {
    KeyRange {
        upper: prefix_successor(&p),
        lower: p,
    }
}

fn join(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(a.len() + b.len());
    v.extend_from_slice(a);
    v.extend_from_slice(b);
    v
}

/// Sorts and merges overlapping ranges, so a scan never visits a key twice.
fn normalize_ranges(mut ranges: Vec<KeyRange>) -> Vec<KeyRange> {
    ranges.retain(|r| r.upper.as_ref().is_none_or(|u| *u > r.lower));
    ranges.sort_by(|a, b| a.lower.cmp(&b.lower));
    let mut out: Vec<KeyRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        if let Some(last) = out.last_mut() {
            let overlaps = last.upper.as_ref().is_none_or(|u| r.lower < *u);
            if overlaps {
                last.upper = match (last.upper.take(), r.upper) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                continue;
            }
        }
        out.push(r);
    }
    out
}

/// A candidate source of rows.
#[derive(Debug, Clone)]
enum Source {
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
}

impl<'a, S: Snapshot> Engine<'a, S> {
    pub(crate) fn new(snap: &'a S, root: RootId, limits: QueryLimits) -> Self {
        Engine {
            snap,
            root,
            limits,
            stats: QueryStats::default(),
            visible: HashMap::new(),
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
                match ws {
                    Some(ws) if ws.state == WorkspaceState::Visible => {
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
                    Some(ws) if ws.state == WorkspaceState::Visible && ws.incarnation == *inc => {
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
                if ws.state == WorkspaceState::Visible {
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

/// The key range of one range predicate operand inside its typed domain.
fn range_of(fp: &[u8], op: Op, operand: &IndexValue) -> Result<KeyRange> {
    let (dlo, dhi) = domain_key_bounds(operand.domain());
    let at = join(fp, &operand.order_prefix()?);
    let after = prefix_successor(&at);
    Ok(match op {
        Op::Gt => KeyRange {
            lower: after.unwrap_or_else(|| join(fp, &dhi)),
            upper: Some(join(fp, &dhi)),
        },
        Op::Gte => KeyRange {
            lower: at,
            upper: Some(join(fp, &dhi)),
        },
        Op::Lt => KeyRange {
            lower: join(fp, &dlo),
            upper: Some(at),
        },
        _ => KeyRange {
            lower: join(fp, &dlo),
            upper: after,
        },
    })
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

/// Runs a search at the live read version with the given budgets.
///
/// Errors: [`Error::InvalidArgument`] (caps, operands, a continuation newer than the store or
/// past the matches); [`Error::WorkspaceNotFound`] for an `id` that is not a visible
/// workbench; [`Error::ReadFenceChanged`] for a continuation whose data changed;
/// [`Error::ResourceExhausted`]; codec and storage errors.
pub fn search(shard: &MetaShard, req: &SearchRequest, limits: QueryLimits) -> Result<SearchPage> {
    let snap = shard.inner.store.snapshot();
    run_search(&snap, shard.root_id(), req, limits)
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
    run_search(&snap, shard.root_id(), req, limits)
}

struct Hit {
    workbench_id: Arc<str>,
    incarnation: WorkspaceIncarnationId,
    path: NormPath,
    sort: Vec<Option<IndexValue>>,
}

fn run_search<S: Snapshot>(
    snap: &S,
    root: RootId,
    req: &SearchRequest,
    limits: QueryLimits,
) -> Result<SearchPage> {
    req.validate()?;
    let mut engine = Engine::new(snap, root, limits);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> IndexValue {
        IndexValue::String(v.into())
    }

    fn pred(field: &str, op: Op, operands: Vec<IndexValue>) -> Predicate {
        Predicate {
            field: FieldId::new(field).unwrap(),
            op,
            operands,
        }
    }

    #[test]
    fn operators_follow_the_documented_semantics() {
        let num = IndexValue::float(4076.5).unwrap();
        let gt = pred("m", Op::Gt, vec![IndexValue::Int(4000)]);
        assert!(gt.matches(Some(&num)));
        assert!(!gt.matches(Some(&IndexValue::Int(4000))));
        assert!(!gt.matches(Some(&s("5000"))), "ranges stay in their domain");
        assert!(!gt.matches(None));
        assert!(
            pred("m", Op::Gte, vec![IndexValue::UInt(4000)]).matches(Some(&IndexValue::Int(4000)))
        );
        assert!(pred("m", Op::Lte, vec![IndexValue::float(4000.0).unwrap()])
            .matches(Some(&IndexValue::Int(4000))));
        assert!(pred("m", Op::Lt, vec![IndexValue::Int(0)]).matches(Some(&IndexValue::Int(-1))));
        assert!(pred("m", Op::Eq, vec![IndexValue::Int(5)])
            .matches(Some(&IndexValue::float(5.0).unwrap())));
        let in_ = pred("s", Op::In, vec![s("Adelie"), s("Gentoo")]);
        assert!(in_.matches(Some(&s("Gentoo"))) && !in_.matches(Some(&s("Chinstrap"))));
        let ne = pred("s", Op::Ne, vec![s("Gentoo")]);
        assert!(ne.matches(Some(&s("Adelie"))) && !ne.matches(Some(&s("Gentoo"))));
        assert!(!ne.matches(None), "ne needs a present value");
        assert!(pred("s", Op::Prefix, vec![s("Gen")]).matches(Some(&s("Gentoo"))));
        assert!(pred("s", Op::Suffix, vec![s("too")]).matches(Some(&s("Gentoo"))));
        assert!(pred("s", Op::Contains, vec![s("nto")]).matches(Some(&s("Gentoo"))));
        assert!(!pred("s", Op::Contains, vec![s("NTO")]).matches(Some(&s("Gentoo"))));
        assert!(!pred("s", Op::Prefix, vec![s("1")]).matches(Some(&IndexValue::Int(12))));
        assert!(pred("s", Op::Exists, vec![]).matches(Some(&IndexValue::Null)));
        assert!(pred("s", Op::NotExists, vec![]).matches(None));
        assert!(!pred("s", Op::NotExists, vec![]).matches(Some(&IndexValue::Null)));
    }

    #[test]
    fn predicate_shapes_are_validated() {
        for bad in [
            pred("f", Op::Exists, vec![IndexValue::Int(1)]),
            pred("f", Op::Eq, vec![]),
            pred("f", Op::Prefix, vec![IndexValue::Int(1)]),
            pred("f", Op::Gt, vec![IndexValue::Null]),
            pred("f", Op::Eq, vec![s(&"x".repeat(5000))]),
            pred("f", Op::In, vec![IndexValue::Int(1); MAX_OPERANDS + 1]),
        ] {
            assert!(
                matches!(bad.validate(), Err(Error::InvalidArgument(_))),
                "{bad:?}"
            );
        }
        assert!(pred("f", Op::NotExists, vec![]).validate().is_ok());
    }

    #[test]
    fn ranges_are_sorted_and_merged() {
        let r = |a: &[u8], b: &[u8]| KeyRange {
            lower: a.to_vec(),
            upper: Some(b.to_vec()),
        };
        let merged = normalize_ranges(vec![
            r(b"c", b"d"),
            r(b"a", b"b2"),
            r(b"b", b"c"),
            r(b"x", b"x"),
        ]);
        // Overlaps merge; touching ranges stay apart (they share no key); empty ones vanish.
        assert_eq!(merged, vec![r(b"a", b"c"), r(b"c", b"d")]);
        assert_eq!(prefix_successor(&[1, 0xff, 0xff]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xff]), None);
    }

    #[test]
    fn range_bounds_enclose_exactly_the_matching_values() {
        let fp = b"F".to_vec();
        let key = |v: &IndexValue| join(&fp, &v.encode().unwrap());
        let values = [
            IndexValue::Null,
            IndexValue::Bool(true),
            IndexValue::Int(-5),
            IndexValue::Int(3999),
            IndexValue::Int(4000),
            IndexValue::UInt(4000),
            IndexValue::float(4000.0).unwrap(),
            IndexValue::float(4000.5).unwrap(),
            IndexValue::UInt(u64::MAX),
            s("4001"),
        ];
        for op in [Op::Gt, Op::Gte, Op::Lt, Op::Lte] {
            let r = range_of(&fp, op, &IndexValue::Int(4000)).unwrap();
            let p = pred("f", op, vec![IndexValue::Int(4000)]);
            for v in &values {
                // A full key continues after the value with incarnation and path bytes.
                for tail in [[0x00u8; 20], [0xff; 20]] {
                    let mut k = key(v);
                    k.extend_from_slice(&tail);
                    let inside = k > r.lower && r.upper.as_ref().is_none_or(|u| k < *u);
                    assert_eq!(inside, p.matches(Some(v)), "{op:?} {v:?}");
                }
            }
        }
    }

    #[test]
    fn search_digest_ignores_limit_and_resume_only() {
        let base = SearchRequest {
            scope: QueryScope::default(),
            predicates: vec![pred("m", Op::Gt, vec![IndexValue::Int(1)])],
            fields: None,
            sort: vec![],
            facets: vec![],
            limit: 10,
            resume: None,
        };
        let mut other = base.clone();
        other.limit = 3;
        other.resume = Some(Resume {
            read_version: 9,
            offset: 3,
        });
        assert_eq!(base.digest(), other.digest());
        let mut sorted = base.clone();
        sorted.sort.push(SortKey {
            field: FieldId::new("m").unwrap(),
            direction: Direction::Desc,
        });
        assert_ne!(base.digest(), sorted.digest());
        let mut scoped = base.clone();
        scoped.scope.workbench_id = Some("wb".into());
        assert_ne!(base.digest(), scoped.digest());
    }
}
