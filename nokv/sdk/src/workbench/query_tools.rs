//! `workbench_search`, `workbench_aggregate`, `workbench_catalog`: typed queries over the
//! secondary index (docs/workbench.md, "search / aggregate / catalog"), executed by
//! [`meta::index`] at one read version; this module only translates JSON and shapes results.
//!
//! Arguments → typed request:
//!
//! - scope: `id` (absent/null: the whole root), `section`, `path` (joined by the shared
//!   normalizer into a workbench-relative prefix);
//! - predicate values: JSON numbers are integers (`Int`, or `UInt` above `i64::MAX`) or floats
//!   of the one numeric domain; a string is a string — and, when it is an RFC 3339 date-time,
//!   also matches timestamp fields (two typed alternatives); `in` takes 1..=64 scalars;
//!   `exists`/`not_exists` take no value (absent or `null`);
//! - `fields` absent projects every field of each match; `fields: []` projects none.
//!
//! Result values: numbers as JSON numbers, timestamps as RFC 3339 strings, bytes as base64
//! strings ([`crate::index_fields::index_value_to_json`]); a missing group-by field is `null`.
//!
//! Search cursors are the facade's tamper-evident cursors bound to the tool, the request digest
//! (scope, predicates, projection, sort, facets — not `limit`), the read version of the page and
//! the offset of the next match. A cursor continues only while nothing in its scope changed
//! (else `ReadFenceChanged`, retryable: run the search again without a cursor).

use meta::index::aggregate::{AggregateRequest, AggregateSort, Measure, MeasureOp, MeasureValue};
use meta::index::catalog::CatalogRequest;
use meta::index::query::{
    Direction, Facet, Op, Predicate, QueryLimits, QueryScope, Resume, SearchRequest, SortKey,
};
use meta::index::{FieldId, IndexValue, Timestamp};
use meta::NormPath;
use serde_json::{Map, Value};

use super::cursor::{self, CursorState, Fence};
use super::error_map::meta_tool_error;
use super::facade::Workbench;
use super::scope::{opt_bool, opt_str, opt_u64, present, split_section, Scope};
use crate::client::Client;
use crate::index_fields::{index_value_to_json, json_scalar_to_index_value};
use nokv_protocol::errors::{ErrorCode, ToolError, ToolResult};

const SEARCH_DEFAULT_LIMIT: u64 = 10;
const SEARCH_MAX_LIMIT: u64 = 10;
const AGGREGATE_DEFAULT_LIMIT: u64 = 20;
const AGGREGATE_MAX_LIMIT: u64 = 100;

/// The parsed scope plus what results need to present it.
struct ToolScope {
    query: QueryScope,
    /// `path` of the result.
    path: String,
}

fn tool_scope(client: &Client, args: &Map<String, Value>) -> ToolResult<ToolScope> {
    let id = opt_str(args, "id");
    let scope = Scope::resolve(
        id.unwrap_or(""),
        opt_str(args, "section"),
        opt_str(args, "path"),
    )?;
    let path = match id {
        Some(id) => present(client, id, scope.full.as_ref()),
        None => client.presentation_root().to_string(),
    };
    Ok(ToolScope {
        query: QueryScope {
            workbench_id: id.map(str::to_owned),
            path: scope.full,
        },
        path,
    })
}

fn field(name: &str, what: &str) -> ToolResult<FieldId> {
    FieldId::new(name).map_err(|_| {
        ToolError::invalid_arguments(format!(
            "{what} `{name}` is not a field id: use 1..=128 ASCII letters, digits, '_', '.' or '-'"
        ))
        .with_detail("field", Value::from(name))
    })
}

fn field_list(args: &Map<String, Value>, key: &str) -> ToolResult<Option<Vec<FieldId>>> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| field(v.as_str().unwrap_or_default(), key))
            .collect::<ToolResult<Vec<_>>>()
            .map(Some),
        Some(_) => Err(ToolError::invalid_arguments(format!(
            "`{key}` must be an array"
        ))),
    }
}

/// A scalar predicate value → typed operand alternatives.
fn operands(value: &Value, op: Op, field_name: &str) -> ToolResult<Vec<IndexValue>> {
    let typed = json_scalar_to_index_value(value)
        .map_err(|e| {
            let reason = match e {
                crate::error::Error::InvalidArgument(msg) => msg,
                other => other.to_string(),
            };
            ToolError::invalid_arguments(format!("predicate on `{field_name}`: {reason}"))
                .with_detail("field", "predicates")
        })?
        .ok_or_else(|| {
            ToolError::invalid_arguments(format!(
                "predicate on `{field_name}`: `{}` takes a scalar value",
                op.as_str()
            ))
        })?;
    let mut out = vec![typed];
    if let (Value::String(s), false) = (value, matches!(op, Op::Prefix | Op::Suffix | Op::Contains))
    {
        if let Some(t) = Timestamp::parse_rfc3339(s) {
            out.push(IndexValue::Timestamp(t));
        }
    }
    Ok(out)
}

fn predicates(args: &Map<String, Value>) -> ToolResult<Vec<Predicate>> {
    let Some(Value::Array(items)) = args.get("predicates") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let name = item
            .get("field")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let field_id = field(name, "predicate field")?;
        let op_name = item.get("op").and_then(Value::as_str).unwrap_or_default();
        let op = Op::parse(op_name).ok_or_else(|| {
            ToolError::invalid_arguments(format!("unknown predicate operator `{op_name}`"))
        })?;
        let value = item.get("value");
        let ops = match (op, value) {
            (Op::Exists | Op::NotExists, None | Some(Value::Null)) => Vec::new(),
            (Op::Exists | Op::NotExists, Some(_)) => {
                return Err(ToolError::invalid_arguments(format!(
                    "predicate on `{name}`: `{op_name}` takes no value"
                )))
            }
            (_, None) => {
                return Err(ToolError::invalid_arguments(format!(
                    "predicate on `{name}`: `{op_name}` needs a value"
                )))
            }
            (Op::In, Some(Value::Array(values))) => {
                if values.is_empty() {
                    return Err(ToolError::invalid_arguments(format!(
                        "predicate on `{name}`: `in` needs at least one value"
                    )));
                }
                let mut all = Vec::new();
                for v in values {
                    all.extend(operands(v, op, name)?);
                }
                all
            }
            (Op::In, Some(_)) => {
                return Err(ToolError::invalid_arguments(format!(
                    "predicate on `{name}`: `in` takes an array of values"
                )))
            }
            (_, Some(Value::Array(_))) => {
                return Err(ToolError::invalid_arguments(format!(
                    "predicate on `{name}`: only `in` takes an array"
                )))
            }
            (_, Some(v)) => operands(v, op, name)?,
        };
        let predicate = Predicate {
            field: field_id,
            op,
            operands: ops,
        };
        predicate
            .validate()
            .map_err(|e| query_error(&e, "predicates"))?;
        out.push(predicate);
    }
    Ok(out)
}

fn direction(item: &Value) -> Direction {
    match item.get("direction").and_then(Value::as_str) {
        Some("desc") => Direction::Desc,
        _ => Direction::Asc,
    }
}

fn limit(args: &Map<String, Value>, default: u64, max: u64) -> ToolResult<usize> {
    let n = opt_u64(args, "limit")?.unwrap_or(default);
    if !(1..=max).contains(&n) {
        return Err(
            ToolError::invalid_arguments(format!("`limit` must be 1..={max}"))
                .with_detail("field", "limit"),
        );
    }
    Ok(n as usize)
}

/// Maps a metadata query error to the contract's codes.
fn query_error(err: &meta::Error, operation: &str) -> ToolError {
    match err {
        meta::Error::InvalidArgument(msg) => ToolError::invalid_arguments(msg.clone()),
        meta::Error::ResourceExhausted { resource, maximum } => ToolError::new(
            ErrorCode::ResourceExhausted,
            format!(
                "{operation} would examine more than {maximum} {resource}; add a selective \
                 predicate (eq, in, prefix or a range on an indexed field) or narrow the scope \
                 with id, section or path"
            ),
        )
        .with_detail("operation", operation)
        .with_detail("resource", *resource)
        .with_detail("maximum", *maximum),
        meta::Error::ReadFenceChanged { .. } => ToolError::new(
            ErrorCode::ReadFenceChanged,
            "the artifacts in scope changed since this cursor was issued; run the query again \
             without a cursor",
        ),
        other => meta_tool_error(other),
    }
}

fn workbench_not_found(client: &Client, id: &str) -> ToolError {
    super::error_map::workbench_not_found(
        client,
        id,
        "does not exist; create it with workbench_create, or omit `id` to query the whole root",
    )
}

fn run_error(client: &Client, scope: &QueryScope, err: meta::Error, operation: &str) -> ToolError {
    match (&err, &scope.workbench_id) {
        (meta::Error::WorkspaceNotFound { .. }, Some(id)) => workbench_not_found(client, id),
        _ => query_error(&err, operation),
    }
}

fn values_json(values: &[(FieldId, IndexValue)]) -> Value {
    Value::Object(
        values
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), index_value_to_json(v)))
            .collect(),
    )
}

fn facet_json(facet: &Facet) -> Value {
    let mut m = Map::new();
    m.insert("field".into(), Value::from(facet.field.as_str()));
    m.insert(
        "values".into(),
        Value::Array(
            facet
                .values
                .iter()
                .map(|(v, c)| {
                    let mut b = Map::new();
                    b.insert("value".into(), index_value_to_json(v));
                    b.insert("count".into(), Value::from(*c));
                    Value::Object(b)
                })
                .collect(),
        ),
    );
    m.insert("distinct_count".into(), Value::from(facet.distinct_count));
    m.insert("truncated".into(), Value::from(facet.truncated));
    Value::Object(m)
}

fn location(client: &Client, workbench_id: &str, path: Option<&NormPath>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("workbench_id".into(), Value::from(workbench_id));
    m.insert(
        "path".into(),
        Value::from(present(client, workbench_id, path)),
    );
    let (section, relative) = match path {
        Some(p) => split_section(p),
        None => (None, None),
    };
    m.insert("section".into(), section.map_or(Value::Null, Value::from));
    m.insert(
        "relative_path".into(),
        relative.map_or(Value::Null, Value::from),
    );
    m
}

const SEARCH_TOOL: &str = "workbench_search";

/// `workbench_search`.
pub(super) fn search(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let client = wb.client();
    let scope = tool_scope(client, args)?;
    let mut req = SearchRequest {
        scope: scope.query.clone(),
        predicates: predicates(args)?,
        fields: field_list(args, "fields")?,
        sort: match args.get("sort") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    Ok(SortKey {
                        field: field(
                            item.get("field")
                                .and_then(Value::as_str)
                                .unwrap_or_default(),
                            "sort field",
                        )?,
                        direction: direction(item),
                    })
                })
                .collect::<ToolResult<_>>()?,
            _ => Vec::new(),
        },
        facets: field_list(args, "facets")?.unwrap_or_default(),
        limit: limit(args, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT)?,
        resume: None,
    };
    req.validate().map_err(|e| query_error(&e, SEARCH_TOOL))?;
    let digest = req.digest();
    if let Some(raw) = opt_str(args, "cursor") {
        let state = cursor::decode_cursor(wb.cursor_key(), SEARCH_TOOL, &digest, raw)?;
        let invalid = || {
            ToolError::invalid_arguments(
                "cursor is invalid or belongs to another request; pass the `next_cursor` of the \
                 previous call unchanged with the same arguments, or omit it to start over",
            )
            .with_detail("field", "cursor")
        };
        let Fence::Snapshot { read_version } = state.fence else {
            return Err(invalid());
        };
        let offset: u64 = state.anchor.parse().map_err(|_| invalid())?;
        req.resume = Some(Resume {
            read_version,
            offset,
        });
    }
    let page = meta::index::query::search(client.meta(), &req, QueryLimits::default())
        .map_err(|e| run_error(client, &req.scope, e, SEARCH_TOOL))?;
    let next_cursor = page.next.map(|next| {
        cursor::encode_cursor(
            wb.cursor_key(),
            &CursorState {
                tool: SEARCH_TOOL.into(),
                scope_digest: digest,
                fence: Fence::Snapshot {
                    read_version: next.read_version,
                },
                anchor: next.offset.to_string(),
                extra: Value::Null,
            },
        )
    });
    let mut out = Map::new();
    out.insert("path".into(), Value::from(scope.path));
    out.insert("match_count".into(), Value::from(page.match_count));
    out.insert(
        "matches".into(),
        Value::Array(
            page.matches
                .iter()
                .map(|m| {
                    let mut e = location(client, &m.workbench_id, Some(&m.path));
                    e.insert("values".into(), values_json(&m.values));
                    Value::Object(e)
                })
                .collect(),
        ),
    );
    out.insert(
        "facets".into(),
        Value::Array(page.facets.iter().map(facet_json).collect()),
    );
    out.insert("truncated".into(), Value::from(next_cursor.is_some()));
    out.insert(
        "next_cursor".into(),
        next_cursor.map_or(Value::Null, Value::from),
    );
    Ok(out)
}

const AGGREGATE_TOOL: &str = "workbench_aggregate";

fn measure_json(v: &MeasureValue) -> Value {
    match v {
        MeasureValue::Null => Value::Null,
        MeasureValue::Int(i) => {
            if let Ok(x) = i64::try_from(*i) {
                Value::from(x)
            } else if let Ok(x) = u64::try_from(*i) {
                Value::from(x)
            } else {
                serde_json::Number::from_f64(*i as f64).map_or(Value::Null, Value::Number)
            }
        }
        MeasureValue::Float(f) => {
            serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
        }
        MeasureValue::Value(v) => index_value_to_json(v),
    }
}

/// `workbench_aggregate`.
pub(super) fn aggregate(
    wb: &Workbench,
    args: &Map<String, Value>,
) -> ToolResult<Map<String, Value>> {
    let client = wb.client();
    let scope = tool_scope(client, args)?;
    let mut measures = Vec::new();
    if let Some(Value::Array(items)) = args.get("measures") {
        for item in items {
            let name = item.get("name").and_then(Value::as_str).unwrap_or_default();
            let op_name = item.get("op").and_then(Value::as_str).unwrap_or_default();
            let op = MeasureOp::parse(op_name).ok_or_else(|| {
                ToolError::invalid_arguments(format!("unknown measure operator `{op_name}`"))
            })?;
            let measure_field = match item.get("field").and_then(Value::as_str) {
                Some(f) => Some(field(f, "measure field")?),
                None => None,
            };
            measures.push(Measure {
                name: name.to_owned(),
                op,
                field: measure_field,
            });
        }
    }
    let req = AggregateRequest {
        scope: scope.query.clone(),
        predicates: predicates(args)?,
        measures,
        group_by: field_list(args, "group_by")?.unwrap_or_default(),
        sort: match args.get("sort") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| AggregateSort {
                    key: item
                        .get("field")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    direction: direction(item),
                })
                .collect(),
            _ => Vec::new(),
        },
        limit: limit(args, AGGREGATE_DEFAULT_LIMIT, AGGREGATE_MAX_LIMIT)?,
    };
    let res = meta::index::aggregate::aggregate(client.meta(), &req, QueryLimits::default())
        .map_err(|e| run_error(client, &req.scope, e, AGGREGATE_TOOL))?;
    let mut out = Map::new();
    out.insert("path".into(), Value::from(scope.path));
    out.insert(
        "input_match_count".into(),
        Value::from(res.input_match_count),
    );
    out.insert("row_count".into(), Value::from(res.groups.len() as u64));
    out.insert("group_count".into(), Value::from(res.group_count));
    out.insert(
        "groups".into(),
        Value::Array(
            res.groups
                .iter()
                .map(|g| {
                    let mut o = Map::new();
                    o.insert(
                        "key".into(),
                        Value::Object(
                            g.key
                                .iter()
                                .map(|(k, v)| {
                                    (
                                        k.as_str().to_owned(),
                                        v.as_ref().map_or(Value::Null, index_value_to_json),
                                    )
                                })
                                .collect(),
                        ),
                    );
                    o.insert(
                        "values".into(),
                        Value::Object(
                            g.values
                                .iter()
                                .map(|(k, v)| (k.clone(), measure_json(v)))
                                .collect(),
                        ),
                    );
                    Value::Object(o)
                })
                .collect(),
        ),
    );
    out.insert("truncated".into(), Value::from(res.truncated));
    Ok(out)
}

const CATALOG_TOOL: &str = "workbench_catalog";

/// `workbench_catalog`.
pub(super) fn catalog(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let client = wb.client();
    let scope = tool_scope(client, args)?;
    let req = CatalogRequest {
        scope: scope.query.clone(),
        field_prefix: opt_str(args, "field_prefix").map(str::to_owned),
        include_facets: opt_bool(args, "include_facets", false),
    };
    let cat = meta::index::catalog::catalog(client.meta(), &req, QueryLimits::default())
        .map_err(|e| run_error(client, &req.scope, e, CATALOG_TOOL))?;
    // Fields grouped by their operator set (base operators first, then string operators).
    let mut groups: Vec<(Vec<&'static str>, Vec<Value>)> = Vec::new();
    for f in &cat.fields {
        let ops: Vec<&'static str> = f.operators().iter().map(|o| o.as_str()).collect();
        match groups.iter_mut().find(|(o, _)| *o == ops) {
            Some((_, fields)) => fields.push(Value::from(f.field.as_str())),
            None => groups.push((ops, vec![Value::from(f.field.as_str())])),
        }
    }
    groups.sort_by_key(|(ops, _)| ops.len());
    let names = |pred: &dyn Fn(&meta::index::catalog::FieldInfo) -> bool| {
        Value::Array(
            cat.fields
                .iter()
                .filter(|f| pred(f))
                .map(|f| Value::from(f.field.as_str()))
                .collect(),
        )
    };
    let mut body = Map::new();
    body.insert(
        "filterable".into(),
        Value::Array(
            groups
                .into_iter()
                .map(|(ops, fields)| {
                    let mut g = Map::new();
                    g.insert(
                        "operators".into(),
                        Value::Array(ops.into_iter().map(Value::from).collect()),
                    );
                    g.insert("fields".into(), Value::Array(fields));
                    Value::Object(g)
                })
                .collect(),
        ),
    );
    body.insert("sortable".into(), names(&|f| f.sortable()));
    body.insert("facetable".into(), names(&|f| f.facetable()));
    body.insert(
        "facets".into(),
        Value::Array(cat.facets.iter().map(facet_json).collect()),
    );
    body.insert("aggregatable".into(), names(&|f| f.aggregatable()));
    body.insert(
        "field_types".into(),
        Value::Object(
            cat.fields
                .iter()
                .map(|f| {
                    (
                        f.field.as_str().to_owned(),
                        Value::Array(f.types.iter().map(|t| Value::from(*t)).collect()),
                    )
                })
                .collect(),
        ),
    );
    let mut out = Map::new();
    out.insert("path".into(), Value::from(scope.path));
    out.insert("catalog_empty".into(), Value::from(cat.fields.is_empty()));
    out.insert("catalog".into(), Value::Object(body));
    out.insert(
        "child_catalogs".into(),
        Value::Array(
            cat.children
                .iter()
                .map(|c| {
                    let mut e = location(client, &c.workbench_id, c.path.as_ref());
                    let name = c
                        .path
                        .as_ref()
                        .map_or(c.workbench_id.as_str(), NormPath::file_name);
                    e.insert("name".into(), Value::from(name));
                    e.insert("artifact_count".into(), Value::from(c.artifact_count));
                    e.insert(
                        "fields".into(),
                        Value::Array(c.fields.iter().map(|f| Value::from(f.as_str())).collect()),
                    );
                    Value::Object(e)
                })
                .collect(),
        ),
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn budget_fence_and_argument_errors_map_to_the_contract_codes() {
        let e = query_error(
            &meta::Error::ResourceExhausted {
                resource: "rows examined",
                maximum: 100_000,
            },
            SEARCH_TOOL,
        );
        assert_eq!(e.code, ErrorCode::ResourceExhausted);
        assert_eq!(e.details["operation"], "workbench_search");
        assert_eq!(e.details["resource"], "rows examined");
        assert_eq!(e.details["maximum"], 100_000);
        let e = query_error(
            &meta::Error::ReadFenceChanged { read_version: 3 },
            SEARCH_TOOL,
        );
        assert_eq!(e.code, ErrorCode::ReadFenceChanged);
        assert!(e.retryable());
        let e = query_error(&meta::Error::InvalidArgument("x".into()), SEARCH_TOOL);
        assert_eq!(e.code, ErrorCode::InvalidArguments);
    }

    #[test]
    fn a_timestamp_string_matches_strings_and_timestamps_except_for_string_operators() {
        let v = json!("2024-01-01T00:00:00Z");
        let eq = operands(&v, Op::Eq, "f").unwrap();
        assert_eq!(eq.len(), 2);
        assert!(matches!(eq[1], IndexValue::Timestamp(_)));
        assert_eq!(operands(&v, Op::Prefix, "f").unwrap().len(), 1);
        assert_eq!(operands(&json!("Gentoo"), Op::Eq, "f").unwrap().len(), 1);
        assert_eq!(
            operands(&json!(4000), Op::Gt, "f").unwrap(),
            vec![IndexValue::Int(4000)]
        );
        assert!(operands(&json!([1]), Op::Eq, "f").is_err());
    }
}
