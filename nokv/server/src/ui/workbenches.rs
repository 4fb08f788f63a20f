//! The workbench list (`/ui/`): a table of the root's workbenches — name, committed, head
//! commit, workspace generation, size, files, last change — paged with `workbench_find`'s
//! cursor and filtered by a name substring. Sizes and file counts come from one root-wide
//! `workbench_aggregate` over the typed index (`count`, `sum(logical_size)` grouped by
//! `workbench_id`) for the ids of the page; the generation and the last change (the commit
//! version of the workspace's newest change) from one WorkspaceCurrent point read each.
//!
//! The aggregate scans the index rows of every file of the page's workbenches, so its answer
//! is remembered per workbench state: every publication and removal moves a workspace's
//! `workspace_revision`, so `(root, workbench, incarnation, workspace_revision)` names one set
//! of files, and a remembered count for it can never be stale. Only workbenches changed since
//! the last render are aggregated again.

use std::collections::HashMap;

use maud::html;
use serde_json::{json, Value};

use super::layout::{self, segment, Cx, Page, Params};
use super::memo::{workspace_state, Memo};
use super::source::{input, tool};

/// Rows per page.
const PAGE_ROWS: u64 = 50;
/// `workbench_find` pages examined for one filtered page at most.
const FILTER_PAGES: usize = 20;

/// One table row.
struct Row {
    id: String,
    committed: bool,
    head: Option<String>,
    generation: Option<u64>,
    last_change: Option<u64>,
    files: Option<u64>,
    bytes: Option<u64>,
}

/// The page (query: `q` name filter, `cursor` a `workbench_find` cursor).
pub(crate) fn page(cx: &Cx, q: &Params) -> Page {
    let filter = q.get("q").map(str::to_owned);
    let mut cursor = q.get("cursor").map(str::to_owned);
    let mut found: Vec<Value> = Vec::new();
    let mut next: Option<String> = None;
    for _ in 0..FILTER_PAGES {
        let out = match tool(
            cx,
            "workbench_find",
            input(&[
                ("limit", json!(PAGE_ROWS)),
                ("cursor", cursor.clone().map_or(Value::Null, Value::from)),
            ]),
        ) {
            Ok(v) => v,
            Err(e) => return Page::ok("Workbenches", "workbenches", layout::alert(&e)),
        };
        for m in out["matches"].as_array().into_iter().flatten() {
            let id = m["workbench_id"].as_str().unwrap_or_default();
            if filter.as_deref().is_none_or(|f| id.contains(f)) {
                found.push(m.clone());
            }
        }
        next = out["next_cursor"].as_str().map(str::to_owned);
        if next.is_none() || found.len() as u64 >= PAGE_ROWS {
            break;
        }
        cursor = next.clone();
    }
    let rows = rows(cx, &found);
    let body = html! {
        form.inline role="search" method="get" action=(cx.link("", &[])) {
            label { "Workbench name contains"
                input type="search" name="q" value=(filter.clone().unwrap_or_default());
            }
            button type="submit" { "Search" }
        }
        @if rows.is_empty() {
            p.muted { "No workbench matches." }
        } @else {
            table #workbenches {
                caption.muted { (rows.len()) " workbenches on this page" }
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Committed" }
                    th scope="col" { "Head commit" } th.num scope="col" { "Generation" }
                    th.num scope="col" { "Size" } th.num scope="col" { "Files" }
                    th.num scope="col" { "Last change (version)" } th scope="col" { "Views" }
                } }
                tbody {
                    @for r in &rows {
                        tr {
                            td { a.wb href=(cx.link(&format!("wb/{}", segment(&r.id)), &[])) { (r.id) } }
                            td { @if r.committed { "yes" } @else { "no" } }
                            td.mono { @if let Some(h) = &r.head {
                                a href=(cx.link(&format!("commit/{}", segment(h)), &[])) title=(h) { (layout::short(h)) }
                            } @else { span.muted { "—" } } }
                            td.num { (opt(r.generation)) }
                            td.num { (r.bytes.map(layout::bytes).unwrap_or_else(|| "—".into())) }
                            td.num { (opt(r.files)) }
                            td.num { (opt(r.last_change)) }
                            td {
                                a href=(cx.link(&format!("snapshots/{}", segment(&r.id)), &[])) { "snapshots" } " · "
                                a href=(cx.link("lineage", &[("wb", &r.id)])) { "lineage" }
                            }
                        }
                    }
                }
            }
        }
        @if let Some(n) = &next {
            p { a rel="next" href=(cx.link("", &[("cursor", n), ("q", filter.as_deref().unwrap_or(""))])) { "Next page →" } }
        }
    };
    Page::ok("Workbenches", "workbenches", body)
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "—".into(), |n| n.to_string())
}

/// Remembered `(files, bytes)` per workbench state (see the module docs).
static SIZES: Memo<(u64, u64)> = Memo::new(16 * 1024);

fn rows(cx: &Cx, found: &[Value]) -> Vec<Row> {
    let reader = cx.state.client.meta().read();
    let root = cx.state.client.meta().root_id().to_hex();
    let states: Vec<(String, Option<meta::codec::WorkspaceCurrent>)> = found
        .iter()
        .map(|m| {
            let id = m["workbench_id"].as_str().unwrap_or_default().to_owned();
            let ws = reader.workspace(&id).ok().flatten();
            (id, ws)
        })
        .collect();
    let mut sizes: HashMap<String, (Option<u64>, Option<u64>)> = HashMap::new();
    let mut missing = Vec::new();
    for (id, ws) in &states {
        match ws
            .as_ref()
            .and_then(|w| SIZES.get(&workspace_state(&root, id, w)))
        {
            Some((f, b)) => {
                sizes.insert(id.clone(), (Some(f), Some(b)));
            }
            None => missing.push(id.clone()),
        }
    }
    if !missing.is_empty() {
        let fresh = aggregate_sizes(cx, &missing);
        for (id, ws) in &states {
            if !missing.contains(id) {
                continue;
            }
            // Ids the index has no rows for are empty workbenches.
            let got = fresh.get(id).copied().unwrap_or((Some(0), Some(0)));
            if let (Some(w), (Some(f), Some(b))) = (ws, got) {
                SIZES.put(workspace_state(&root, id, w), (f, b));
            }
            sizes.insert(id.clone(), got);
        }
    }
    states
        .into_iter()
        .zip(found)
        .map(|((id, ws), m)| {
            let (files, bytes) = sizes.get(&id).copied().unwrap_or((None, None));
            Row {
                committed: m["committed"].as_bool().unwrap_or(false),
                head: m["commit_identity"].as_str().map(str::to_owned),
                generation: ws.as_ref().map(|w| w.workspace_revision),
                last_change: ws.as_ref().map(|w| w.modified_version),
                files,
                bytes,
                id,
            }
        })
        .collect()
}

/// `(files, bytes)` per workbench id from the typed index; ids the index has no rows for are
/// absent (empty workbenches), every id when the aggregate fails is `(None, None)`.
fn aggregate_sizes(cx: &Cx, ids: &[String]) -> HashMap<String, (Option<u64>, Option<u64>)> {
    let mut out = HashMap::new();
    // The `in` operator takes at most 64 values.
    for chunk in ids.chunks(64) {
        let answer = tool(
            cx,
            "workbench_aggregate",
            json!({
                "measures": [
                    {"name": "files", "op": "count"},
                    {"name": "bytes", "op": "sum", "field": "logical_size"}
                ],
                "group_by": ["workbench_id"],
                "predicates": [{"field": "workbench_id", "op": "in", "value": chunk}],
                "limit": 100
            }),
        );
        match answer {
            Ok(v) => {
                for g in v["groups"].as_array().into_iter().flatten() {
                    if let Some(id) = g["key"]["workbench_id"].as_str() {
                        let files = g["values"]["files"].as_u64();
                        let bytes = g["values"]["bytes"]
                            .as_u64()
                            .or_else(|| g["values"]["bytes"].as_f64().map(|f| f as u64));
                        out.insert(id.to_owned(), (files, bytes));
                    }
                }
            }
            Err(_) => {
                for id in chunk {
                    out.insert(id.clone(), (None, None));
                }
            }
        }
    }
    out
}
