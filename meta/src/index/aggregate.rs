//! Aggregation over the secondary index (docs/workbench.md `workbench_aggregate`): count / sum / avg
//! / min / max over numeric fields, grouped by up to [`MAX_GROUP_BY`] fields, filtered by the
//! same predicates and scope as search, at ONE read version.
//!
//! Rows come from the search executor ([`crate::index::query`]): the same plan, visibility
//! recheck and row budget. Per group:
//!
//! - `count` without a field counts matching artifacts; with a field, those that have it;
//! - `sum`, `avg`, `min`, `max` consider only the numeric values of their field (one numeric
//!   domain; other types are ignored). `sum` is exact for integers (an integer result while no
//!   float took part), `avg` is an `f64`, `min`/`max` return the original value; each is
//!   [`MeasureValue::Null`] when the group has no numeric value.
//!
//! A missing group-by field groups as `None` (shown as JSON `null`); numbers equal by value are
//! one group key. Without `group_by` there is exactly one group (also when nothing matched).
//! Groups are ordered by the sort keys (measure names or group-by fields; `null`s last), then by
//! group key ascending; the first `limit` are returned. More than
//! [`QueryLimits::max_groups`] distinct groups is [`Error::ResourceExhausted`] (`"groups"`).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
use crate::index::query::{
    cmp_sort_value, validate_common, Direction, Engine, Predicate, QueryLimits, QueryScope,
    QueryStats, ValueKey,
};
use crate::index::{FieldId, IndexValue};
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};

/// Most group-by fields.
pub const MAX_GROUP_BY: usize = 8;
/// Most measures.
pub const MAX_MEASURES: usize = 16;
/// Most sort keys.
pub const MAX_AGGREGATE_SORT_KEYS: usize = 8;
/// Most groups returned by one call.
pub const MAX_AGGREGATE_LIMIT: usize = 1000;
/// Longest measure name in bytes.
pub const MAX_MEASURE_NAME_BYTES: usize = 128;

/// An aggregation operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MeasureOp {
    /// Number of rows (or of rows having the field).
    Count,
    /// Sum of the numeric values.
    Sum,
    /// Mean of the numeric values.
    Avg,
    /// Smallest numeric value.
    Min,
    /// Largest numeric value.
    Max,
}

impl MeasureOp {
    /// The contract name.
    pub fn as_str(self) -> &'static str {
        match self {
            MeasureOp::Count => "count",
            MeasureOp::Sum => "sum",
            MeasureOp::Avg => "avg",
            MeasureOp::Min => "min",
            MeasureOp::Max => "max",
        }
    }

    /// Parses a contract name.
    pub fn parse(name: &str) -> Option<MeasureOp> {
        [
            MeasureOp::Count,
            MeasureOp::Sum,
            MeasureOp::Avg,
            MeasureOp::Min,
            MeasureOp::Max,
        ]
        .into_iter()
        .find(|m| m.as_str() == name)
    }
}

/// One measure `{name, op, field}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measure {
    /// Output name (1..=128 bytes, unique within the request).
    pub name: String,
    /// Operator.
    pub op: MeasureOp,
    /// Field (required except for `count`).
    pub field: Option<FieldId>,
}

/// One aggregate sort key: a measure name or a group-by field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggregateSort {
    /// Measure name or group-by field id.
    pub key: String,
    /// Direction.
    pub direction: Direction,
}

/// An aggregate request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggregateRequest {
    /// Scope.
    pub scope: QueryScope,
    /// Predicates (all must hold).
    pub predicates: Vec<Predicate>,
    /// Measures, 1..=[`MAX_MEASURES`].
    pub measures: Vec<Measure>,
    /// Group-by fields (≤ [`MAX_GROUP_BY`], distinct).
    pub group_by: Vec<FieldId>,
    /// Sort keys (≤ [`MAX_AGGREGATE_SORT_KEYS`]).
    pub sort: Vec<AggregateSort>,
    /// Groups returned, 1..=[`MAX_AGGREGATE_LIMIT`].
    pub limit: usize,
}

/// One measure result.
#[derive(Debug, Clone, PartialEq)]
pub enum MeasureValue {
    /// No value (no numeric input).
    Null,
    /// An exact integer (counts; sums of integers).
    Int(i128),
    /// A float (averages; sums involving floats).
    Float(f64),
    /// An original field value (min / max).
    Value(IndexValue),
}

impl MeasureValue {
    fn as_f64(&self) -> Option<f64> {
        match self {
            MeasureValue::Null => None,
            MeasureValue::Int(i) => Some(*i as f64),
            MeasureValue::Float(f) => Some(*f),
            MeasureValue::Value(v) => v.as_f64(),
        }
    }

    /// Order for sorting: `Null` after every value in either direction.
    fn cmp_with(&self, other: &MeasureValue, direction: Direction) -> Ordering {
        let o = match (self, other) {
            (MeasureValue::Null, MeasureValue::Null) => return Ordering::Equal,
            (MeasureValue::Null, _) => return Ordering::Greater,
            (_, MeasureValue::Null) => return Ordering::Less,
            (MeasureValue::Int(a), MeasureValue::Int(b)) => a.cmp(b),
            (MeasureValue::Value(a), MeasureValue::Value(b)) => a.value_cmp(b),
            (a, b) => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                _ => Ordering::Equal,
            },
        };
        match direction {
            Direction::Asc => o,
            Direction::Desc => o.reverse(),
        }
    }
}

/// One group.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// `(group-by field, value)` in request order; `None` when the artifacts lack the field.
    pub key: Vec<(FieldId, Option<IndexValue>)>,
    /// `(measure name, value)` in request order.
    pub values: Vec<(String, MeasureValue)>,
}

/// An aggregate result.
#[derive(Debug, Clone, PartialEq)]
pub struct AggregateResult {
    /// The read version the result reflects.
    pub read_version: u64,
    /// Artifacts in scope matching every predicate.
    pub input_match_count: u64,
    /// Distinct groups.
    pub group_count: u64,
    /// The first `limit` groups in order.
    pub groups: Vec<Group>,
    /// True when groups were cut by `limit`.
    pub truncated: bool,
    /// Work done.
    pub stats: QueryStats,
}

impl AggregateRequest {
    /// Checks caps and cross-field rules. Errors: [`Error::InvalidArgument`]: no or too many
    /// measures, a duplicate / empty / over-long measure name, a non-count measure without a
    /// field, duplicate or too many group-by fields, a sort key naming neither a measure nor a
    /// group-by field, a limit outside 1..=[`MAX_AGGREGATE_LIMIT`], and the scope/predicate
    /// errors of search.
    pub fn validate(&self) -> Result<()> {
        validate_common(&self.scope, &self.predicates)?;
        if self.measures.is_empty() || self.measures.len() > MAX_MEASURES {
            return Err(Error::invalid(format!(
                "1..={MAX_MEASURES} measures are required"
            )));
        }
        let mut names = BTreeSet::new();
        for m in &self.measures {
            if m.name.is_empty() || m.name.len() > MAX_MEASURE_NAME_BYTES {
                return Err(Error::invalid(format!(
                    "measure names are 1..={MAX_MEASURE_NAME_BYTES} bytes"
                )));
            }
            if !names.insert(m.name.as_str()) {
                return Err(Error::invalid(format!(
                    "measure name `{}` is used twice",
                    m.name
                )));
            }
            if m.op != MeasureOp::Count && m.field.is_none() {
                return Err(Error::invalid(format!(
                    "measure `{}` ({}) needs a field",
                    m.name,
                    m.op.as_str()
                )));
            }
        }
        if self.group_by.len() > MAX_GROUP_BY {
            return Err(Error::invalid(format!(
                "at most {MAX_GROUP_BY} group-by fields are allowed"
            )));
        }
        let groups: BTreeSet<&str> = self.group_by.iter().map(FieldId::as_str).collect();
        if groups.len() != self.group_by.len() {
            return Err(Error::invalid("group-by fields must be distinct"));
        }
        if self.sort.len() > MAX_AGGREGATE_SORT_KEYS {
            return Err(Error::invalid(format!(
                "at most {MAX_AGGREGATE_SORT_KEYS} sort keys are allowed"
            )));
        }
        for s in &self.sort {
            if !names.contains(s.key.as_str()) && !groups.contains(s.key.as_str()) {
                return Err(Error::invalid(format!(
                    "sort key `{}` names neither a measure nor a group-by field",
                    s.key
                )));
            }
        }
        if !(1..=MAX_AGGREGATE_LIMIT).contains(&self.limit) {
            return Err(Error::invalid(format!(
                "limit must be 1..={MAX_AGGREGATE_LIMIT}"
            )));
        }
        Ok(())
    }
}

/// Running state of one measure in one group.
#[derive(Debug, Clone)]
enum Acc {
    Count(u64),
    Numeric {
        int_sum: i128,
        float_sum: f64,
        any_float: bool,
        n: u64,
        min: Option<IndexValue>,
        max: Option<IndexValue>,
    },
}

impl Acc {
    fn new(op: MeasureOp) -> Acc {
        match op {
            MeasureOp::Count => Acc::Count(0),
            _ => Acc::Numeric {
                int_sum: 0,
                float_sum: 0.0,
                any_float: false,
                n: 0,
                min: None,
                max: None,
            },
        }
    }

    fn add(&mut self, value: Option<&IndexValue>, counts_row: bool) {
        match self {
            Acc::Count(c) => {
                if counts_row || value.is_some() {
                    *c += 1;
                }
            }
            Acc::Numeric {
                int_sum,
                float_sum,
                any_float,
                n,
                min,
                max,
            } => {
                let Some(v) = value else { return };
                match v {
                    IndexValue::Int(i) => *int_sum += i128::from(*i),
                    IndexValue::UInt(u) => *int_sum += i128::from(*u),
                    IndexValue::Float(f) => {
                        *float_sum += f.get();
                        *any_float = true;
                    }
                    _ => return,
                }
                *n += 1;
                if min
                    .as_ref()
                    .is_none_or(|m| v.value_cmp(m) == Ordering::Less)
                {
                    *min = Some(v.clone());
                }
                if max
                    .as_ref()
                    .is_none_or(|m| v.value_cmp(m) == Ordering::Greater)
                {
                    *max = Some(v.clone());
                }
            }
        }
    }

    fn finish(&self, op: MeasureOp) -> MeasureValue {
        match (self, op) {
            (Acc::Count(c), _) => MeasureValue::Int(i128::from(*c)),
            (Acc::Numeric { n: 0, .. }, _) => MeasureValue::Null,
            (
                Acc::Numeric {
                    int_sum,
                    float_sum,
                    any_float,
                    n,
                    min,
                    max,
                },
                op,
            ) => match op {
                MeasureOp::Sum if !*any_float => MeasureValue::Int(*int_sum),
                MeasureOp::Sum => MeasureValue::Float(*int_sum as f64 + *float_sum),
                MeasureOp::Avg => MeasureValue::Float((*int_sum as f64 + *float_sum) / *n as f64),
                MeasureOp::Min => min.clone().map_or(MeasureValue::Null, MeasureValue::Value),
                MeasureOp::Max => max.clone().map_or(MeasureValue::Null, MeasureValue::Value),
                MeasureOp::Count => MeasureValue::Null,
            },
        }
    }
}

/// Runs an aggregate at the live read version.
///
/// Errors: [`Error::InvalidArgument`] (see [`AggregateRequest::validate`]);
/// [`Error::WorkspaceNotFound`]; [`Error::ResourceExhausted`] (`"rows examined"`, `"groups"`);
/// codec and storage errors.
pub fn aggregate(
    shard: &MetaShard,
    req: &AggregateRequest,
    limits: QueryLimits,
) -> Result<AggregateResult> {
    let snap = shard.inner.store.snapshot();
    run_aggregate(&snap, shard, req, limits)
}

type GroupKey = Vec<Option<ValueKey>>;

fn run_aggregate<S: Snapshot>(
    snap: &S,
    shard: &MetaShard,
    req: &AggregateRequest,
    limits: QueryLimits,
) -> Result<AggregateResult> {
    req.validate()?;
    let mut engine = Engine::new(snap, shard.root_id(), limits, shard.wall_unix_ms());
    let scope = engine.resolve_scope(&req.scope)?;
    let max_groups = engine.limits().max_groups;
    let mut groups: BTreeMap<GroupKey, Vec<Acc>> = BTreeMap::new();
    if req.group_by.is_empty() {
        groups.insert(
            Vec::new(),
            req.measures.iter().map(|m| Acc::new(m.op)).collect(),
        );
    }
    let mut input = 0u64;
    engine.for_each_match(&scope, &req.predicates, &mut |row| {
        input += 1;
        let key: GroupKey = req
            .group_by
            .iter()
            .map(|f| Ok(row.get(f)?.map(ValueKey)))
            .collect::<Result<_>>()?;
        if !groups.contains_key(&key) && groups.len() >= max_groups {
            return Err(Error::ResourceExhausted {
                resource: "groups",
                maximum: max_groups as u64,
            });
        }
        let accs = groups
            .entry(key)
            .or_insert_with(|| req.measures.iter().map(|m| Acc::new(m.op)).collect());
        for (m, acc) in req.measures.iter().zip(accs.iter_mut()) {
            let value = match &m.field {
                Some(f) => row.get(f)?,
                None => None,
            };
            acc.add(value.as_ref(), m.field.is_none());
        }
        Ok(())
    })?;
    let group_count = groups.len() as u64;
    let mut out: Vec<Group> = groups
        .into_iter()
        .map(|(key, accs)| Group {
            key: req
                .group_by
                .iter()
                .cloned()
                .zip(key.into_iter().map(|k| k.map(|v| v.0)))
                .collect(),
            values: req
                .measures
                .iter()
                .zip(&accs)
                .map(|(m, a)| (m.name.clone(), a.finish(m.op)))
                .collect(),
        })
        .collect();
    out.sort_by(|a, b| {
        for s in &req.sort {
            let o = match req.measures.iter().position(|m| m.name == s.key) {
                Some(i) => a.values[i].1.cmp_with(&b.values[i].1, s.direction),
                None => match req.group_by.iter().position(|g| g.as_str() == s.key) {
                    Some(i) => {
                        cmp_sort_value(a.key[i].1.as_ref(), b.key[i].1.as_ref(), s.direction)
                    }
                    None => Ordering::Equal,
                },
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        for (x, y) in a.key.iter().zip(&b.key) {
            let o = cmp_sort_value(x.1.as_ref(), y.1.as_ref(), Direction::Asc);
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    });
    let truncated = out.len() > req.limit;
    out.truncate(req.limit);
    Ok(AggregateResult {
        read_version: engine.version(),
        input_match_count: input,
        group_count,
        groups: out,
        truncated,
        stats: engine.stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_accumulators_are_exact_for_integers_and_ignore_other_types() {
        let mut sum = Acc::new(MeasureOp::Sum);
        for v in [
            IndexValue::Int(i64::MAX),
            IndexValue::UInt(u64::MAX),
            IndexValue::String("9".into()),
        ] {
            sum.add(Some(&v), false);
        }
        sum.add(None, false);
        assert_eq!(
            sum.finish(MeasureOp::Sum),
            MeasureValue::Int(i128::from(i64::MAX) + i128::from(u64::MAX))
        );
        let mut mixed = Acc::new(MeasureOp::Avg);
        for v in [IndexValue::Int(1), IndexValue::float(2.5).unwrap()] {
            mixed.add(Some(&v), false);
        }
        assert_eq!(mixed.finish(MeasureOp::Avg), MeasureValue::Float(1.75));
        assert_eq!(mixed.finish(MeasureOp::Sum), MeasureValue::Float(3.5));
        assert_eq!(
            mixed.finish(MeasureOp::Max),
            MeasureValue::Value(IndexValue::float(2.5).unwrap())
        );
        assert_eq!(
            mixed.finish(MeasureOp::Min),
            MeasureValue::Value(IndexValue::Int(1))
        );
        assert_eq!(
            Acc::new(MeasureOp::Avg).finish(MeasureOp::Avg),
            MeasureValue::Null
        );
        let mut count = Acc::new(MeasureOp::Count);
        count.add(None, true);
        count.add(None, false);
        count.add(Some(&IndexValue::Null), false);
        assert_eq!(count.finish(MeasureOp::Count), MeasureValue::Int(2));
    }

    #[test]
    fn null_measures_sort_last_in_both_directions() {
        let one = MeasureValue::Int(1);
        let two = MeasureValue::Float(2.0);
        assert_eq!(one.cmp_with(&two, Direction::Asc), Ordering::Less);
        assert_eq!(one.cmp_with(&two, Direction::Desc), Ordering::Greater);
        for d in [Direction::Asc, Direction::Desc] {
            assert_eq!(MeasureValue::Null.cmp_with(&one, d), Ordering::Greater);
        }
    }

    #[test]
    fn requests_are_validated() {
        let f = |s: &str| FieldId::new(s).unwrap();
        let good = AggregateRequest {
            scope: QueryScope::default(),
            predicates: vec![],
            measures: vec![Measure {
                name: "n".into(),
                op: MeasureOp::Count,
                field: None,
            }],
            group_by: vec![f("species")],
            sort: vec![AggregateSort {
                key: "n".into(),
                direction: Direction::Desc,
            }],
            limit: 20,
        };
        assert!(good.validate().is_ok());
        let mut bad = good.clone();
        bad.measures.push(bad.measures[0].clone());
        assert!(bad.validate().is_err(), "duplicate measure name");
        let mut bad = good.clone();
        bad.measures[0].op = MeasureOp::Sum;
        assert!(bad.validate().is_err(), "sum needs a field");
        let mut bad = good.clone();
        bad.sort[0].key = "other".into();
        assert!(bad.validate().is_err(), "unknown sort key");
        let mut bad = good.clone();
        bad.group_by.push(f("species"));
        assert!(bad.validate().is_err(), "duplicate group-by");
        let mut bad = good;
        bad.measures.clear();
        assert!(bad.validate().is_err(), "no measure");
    }
}
