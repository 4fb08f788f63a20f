//! The search vocabulary: bounds, predicates, scope, sort keys, requests, pages and statistics.

use crate::error::{Error, Result};
use crate::index::{FieldId, IndexValue};
use crate::path::NormPath;
use std::cmp::Ordering;

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
pub(super) const MAX_PROBED_SOURCES: usize = 8;

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
