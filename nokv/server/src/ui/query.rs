//! Search and aggregate forms over the typed index (`/ui/search`, `/ui/aggregate`): the form's
//! rows become the `predicates`, `fields`, `sort`, `measures` and `group_by` of
//! `workbench_search` / `workbench_aggregate` (their own validation and limits), and the
//! results are tables. A value box holds JSON when it parses as JSON (`4000`, `true`,
//! `"text"`), else the text itself; for `in` a comma-separated list. The field names the
//! catalog (`workbench_catalog`) knows are offered as suggestions.
//!
//! The catalog scans the index rows of every file it covers, so its field names are remembered
//! per state: within one workbench per `(root, workbench, incarnation, workspace_revision)`
//! (every publication and removal moves the revision), root-wide per the root's read version.
//! A page with results then costs its query alone. Suggestions only: a remembered list never
//! decides what a search may do, the tool's own validation does.

use maud::{html, Markup};
use serde_json::{json, Map, Value};

use super::layout::{self, segment, Cx, Page, Params};
use super::memo::{workspace_state, Memo};
use super::source::tool;

/// Predicate rows of the form.
const PREDICATE_ROWS: usize = 3;
/// Measure rows of the aggregate form.
const MEASURE_ROWS: usize = 3;
/// The operators of a predicate.
const OPS: [&str; 13] = [
    "eq",
    "ne",
    "gt",
    "gte",
    "lt",
    "lte",
    "in",
    "prefix",
    "suffix",
    "contains",
    "exists",
    "not_exists",
    "",
];
/// The operators of a measure.
const MEASURE_OPS: [&str; 5] = ["count", "sum", "avg", "min", "max"];

fn value_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// The predicates of the form's rows (`f`, `op`, `v` repeated); rows without a field are
/// skipped.
fn predicates(q: &Params) -> Vec<Value> {
    let (fields, ops, values) = (q.all("f"), q.all("op"), q.all("v"));
    let mut out = Vec::new();
    for (i, field) in fields.iter().enumerate() {
        if field.is_empty() {
            continue;
        }
        let op = ops
            .get(i)
            .copied()
            .filter(|o| !o.is_empty())
            .unwrap_or("eq");
        let text = values.get(i).copied().unwrap_or("");
        let mut p = Map::new();
        p.insert("field".into(), json!(field));
        p.insert("op".into(), json!(op));
        match op {
            "exists" | "not_exists" => {}
            "in" => {
                p.insert(
                    "value".into(),
                    Value::Array(text.split(',').map(|t| value_of(t.trim())).collect()),
                );
            }
            _ => {
                p.insert("value".into(), value_of(text));
            }
        }
        out.push(Value::Object(p));
    }
    out
}

fn list(text: Option<&str>) -> Vec<String> {
    text.unwrap_or("")
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Remembered field-name lists per state (see the module docs).
static NAMES: Memo<Vec<String>> = Memo::new(1024);

/// The state the field names of `wb` (or the root's, for `None`) belong to; `None` when the
/// workbench has no marker (nothing is remembered then).
fn state_key(cx: &Cx, wb: Option<&str>) -> Option<String> {
    let reader = cx.state.client.meta().read();
    let root = cx.state.client.meta().root_id().to_hex();
    match wb {
        None => Some(format!("{root}/*/{}", reader.version())),
        Some(id) => {
            let ws = reader.workspace(id).ok().flatten()?;
            Some(workspace_state(&root, id, &ws))
        }
    }
}

/// The catalog's field names (suggestions), within workbench `wb` or root-wide; remembered
/// per state.
fn field_names(cx: &Cx, wb: Option<&str>) -> Vec<String> {
    let key = state_key(cx, wb);
    if let Some(names) = key.as_deref().and_then(|k| NAMES.get(k)) {
        return names;
    }
    let Some(names) = catalog_names(cx, wb) else {
        return Vec::new();
    };
    if let Some(k) = key {
        NAMES.put(k, names.clone());
    }
    names
}

/// The field names `workbench_catalog` reports, sorted; `None` when the catalog fails.
fn catalog_names(cx: &Cx, wb: Option<&str>) -> Option<Vec<String>> {
    let mut input = json!({});
    if let Some(w) = wb {
        input["id"] = json!(w);
    }
    let out = tool(cx, "workbench_catalog", input).ok()?;
    let mut names: Vec<String> = out["catalog"]["filterable"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["fields"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    Some(names)
}

fn predicate_rows(q: &Params, names: &[String]) -> Markup {
    let (fields, ops, values) = (q.all("f"), q.all("op"), q.all("v"));
    html! {
        datalist #fields { @for n in names { option value=(n) {} } }
        fieldset {
            legend { "Where" }
            @for i in 0..PREDICATE_ROWS {
                div.inline {
                    label { "Field" input type="text" name="f" list="fields" value=(fields.get(i).copied().unwrap_or("")); }
                    label { "Operator"
                        select name="op" {
                            @for op in OPS {
                                @let chosen = ops.get(i).copied().unwrap_or("") == op;
                                option value=(op) selected[chosen] { (if op.is_empty() { "—" } else { op }) }
                            }
                        }
                    }
                    label { "Value" input type="text" name="v" value=(values.get(i).copied().unwrap_or("")); }
                }
            }
        }
    }
}

fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The query pairs of `q` with `cursor` replaced by `next`.
fn next_page<'a>(q: &'a Params, next: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut pairs: Vec<(&str, &str)> =
        q.0.iter()
            .filter(|(k, _)| k != "cursor")
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
    pairs.push(("cursor", next));
    pairs
}

/// The search page (query: `wb`, rows `f`/`op`/`v`, `fields`, `sort`, `dir`, `cursor`, `run`).
pub(crate) fn search_page(cx: &Cx, q: &Params) -> Page {
    let wb = q.get("wb");
    let names = field_names(cx, wb);
    let shown = list(q.get("fields"));
    let result = q.get("run").map(|_| {
        let mut input = json!({ "limit": 10 });
        if let Some(w) = wb {
            input["id"] = json!(w);
        }
        let preds = predicates(q);
        if !preds.is_empty() {
            input["predicates"] = Value::Array(preds);
        }
        if !shown.is_empty() {
            input["fields"] = json!(shown);
        }
        if let Some(s) = q.get("sort") {
            input["sort"] = json!([{ "field": s, "direction": q.get("dir").unwrap_or("asc") }]);
        }
        if let Some(c) = q.get("cursor") {
            input["cursor"] = json!(c);
        }
        tool(cx, "workbench_search", input)
    });
    let body = html! {
        form method="get" action=(cx.link("search", &[])) {
            input type="hidden" name="run" value="1";
            div.inline {
                label { "Workbench (empty: the whole root)" input type="text" name="wb" value=(wb.unwrap_or("")); }
                label { "Show fields (comma-separated)" input type="text" name="fields" size="40" value=(shown.join(",")); }
                label { "Sort by" input type="text" name="sort" list="fields" value=(q.get("sort").unwrap_or("")); }
                label { "Direction" select name="dir" {
                    option value="asc" selected[q.get("dir") != Some("desc")] { "ascending" }
                    option value="desc" selected[q.get("dir") == Some("desc")] { "descending" }
                } }
            }
            (predicate_rows(q, &names))
            button type="submit" { "Search" }
        }
        @match &result {
            None => p.muted { "Fields: " (names.join(", ")) },
            Some(Err(e)) => (layout::alert(e)),
            Some(Ok(out)) => {
                @let matches = out["matches"].as_array().cloned().unwrap_or_default();
                p #match-count { (out["match_count"].to_string()) " matches on this page" }
                table #results {
                    thead { tr {
                        th scope="col" { "Workbench" } th scope="col" { "Path" }
                        @for f in &shown { th scope="col" { (f) } }
                    } }
                    tbody {
                        @for m in &matches {
                            @let w = m["workbench_id"].as_str().unwrap_or_default();
                            @let section = m["section"].as_str().unwrap_or_default();
                            @let rel = m["relative_path"].as_str().unwrap_or_default();
                            @let full = if section.is_empty() { rel.to_owned() } else { format!("{section}/{rel}") };
                            tr {
                                td { (w) }
                                td { a href=(cx.link(&format!("file/{}", segment(w)), &[("path", &full)])) { (full) } }
                                @for f in &shown { td { (cell(&m["values"][f.as_str()])) } }
                            }
                        }
                    }
                }
                @if let Some(n) = out["next_cursor"].as_str() {
                    p { a rel="next" href=(cx.link("search", &next_page(q, n))) { "Next page →" } }
                }
            }
        }
    };
    Page::ok("Search the index", "search", body)
}

/// The aggregate page (query: `wb`, rows `f`/`op`/`v`, measure rows `mn`/`mo`/`mf`, `group`,
/// `run`).
pub(crate) fn aggregate_page(cx: &Cx, q: &Params) -> Page {
    let wb = q.get("wb");
    let names = field_names(cx, wb);
    let groups = list(q.get("group"));
    let (mn, mo, mf) = (q.all("mn"), q.all("mo"), q.all("mf"));
    let mut measures = Vec::new();
    for (i, op) in mo.iter().enumerate() {
        let field = mf.get(i).copied().unwrap_or("");
        if op.is_empty() || (field.is_empty() && *op != "count") {
            continue;
        }
        let name = mn.get(i).copied().filter(|n| !n.is_empty()).map_or_else(
            || format!("{op}_{field}").trim_end_matches('_').to_owned(),
            str::to_owned,
        );
        let mut m = json!({ "name": name, "op": op });
        if !field.is_empty() {
            m["field"] = json!(field);
        }
        measures.push(m);
    }
    let result = q.get("run").map(|_| {
        let mut input = json!({ "measures": measures, "limit": 100 });
        if let Some(w) = wb {
            input["id"] = json!(w);
        }
        let preds = predicates(q);
        if !preds.is_empty() {
            input["predicates"] = Value::Array(preds);
        }
        if !groups.is_empty() {
            input["group_by"] = json!(groups);
        }
        tool(cx, "workbench_aggregate", input)
    });
    let body = html! {
        form method="get" action=(cx.link("aggregate", &[])) {
            input type="hidden" name="run" value="1";
            div.inline {
                label { "Workbench (empty: the whole root)" input type="text" name="wb" value=(wb.unwrap_or("")); }
                label { "Group by (comma-separated)" input type="text" name="group" size="30" value=(groups.join(",")); }
            }
            fieldset {
                legend { "Measures" }
                @for i in 0..MEASURE_ROWS {
                    div.inline {
                        label { "Name" input type="text" name="mn" value=(mn.get(i).copied().unwrap_or("")); }
                        label { "Operation" select name="mo" {
                            option value="" { "—" }
                            @for op in MEASURE_OPS {
                                option value=(op) selected[mo.get(i).copied() == Some(op)] { (op) }
                            }
                        } }
                        label { "Field" input type="text" name="mf" list="fields" value=(mf.get(i).copied().unwrap_or("")); }
                    }
                }
            }
            (predicate_rows(q, &names))
            button type="submit" { "Aggregate" }
        }
        @match &result {
            None => p.muted { "Fields: " (names.join(", ")) },
            Some(Err(e)) => (layout::alert(e)),
            Some(Ok(out)) => {
                @let rows = out["groups"].as_array().cloned().unwrap_or_default();
                @let measure_names: Vec<String> = measures.iter().filter_map(|m| m["name"].as_str().map(str::to_owned)).collect();
                p { (out["input_match_count"].to_string()) " matching files in " (out["group_count"].to_string()) " groups" }
                table #aggregate {
                    thead { tr {
                        @for g in &groups { th scope="col" { (g) } }
                        @for m in &measure_names { th.num scope="col" { (m) } }
                    } }
                    tbody {
                        @for r in &rows {
                            tr {
                                @for g in &groups { td { (cell(&r["key"][g.as_str()])) } }
                                @for m in &measure_names { td.num { (cell(&r["values"][m.as_str()])) } }
                            }
                        }
                    }
                }
            }
        }
    };
    Page::ok("Aggregate the index", "aggregate", body)
}
