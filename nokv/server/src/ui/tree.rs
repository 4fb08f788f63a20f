//! A workbench's file tree (`/ui/wb/{id}`): its five sections, then one directory at a time,
//! each page one `workbench_list` call (at most 100 entries, the tool's cursor for the next
//! page), so a directory of any size is read lazily, page by page. With `at` (a snapshot id or
//! name) the tree is the snapshot's.

use maud::{html, Markup};
use serde_json::{json, Value};

use super::layout::{self, segment, Cx, Page, Params};
use super::source::{at_snapshot, input, tool};

/// Entries per page (the tool's maximum).
const PAGE_ENTRIES: u64 = 100;

/// The workbench-relative path of a listed entry (`section/relative`).
pub(crate) fn full_path(entry: &Value) -> String {
    let section = entry["section"].as_str().unwrap_or_default();
    let rel = entry["relative_path"].as_str().unwrap_or_default();
    [section, rel]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("/")
}

/// Breadcrumbs of `path` in `workbench` (each ancestor a link to its listing).
pub(crate) fn crumbs(cx: &Cx, workbench: &str, path: &str, at: Option<&str>) -> Markup {
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let wb_link = format!("wb/{}", segment(workbench));
    let at = at.unwrap_or("");
    html! {
        nav.crumbs aria-label="Breadcrumb" {
            a href=(cx.link(&wb_link, &[("at", at)])) { (workbench) }
            @for (i, part) in parts.iter().enumerate() {
                span aria-hidden="true" { "/" }
                @if i + 1 == parts.len() {
                    span aria-current="location" { (part) }
                } @else {
                    a href=(cx.link(&wb_link, &[("path", &parts[..=i].join("/")), ("at", at)])) { (part) }
                }
            }
            @if !at.is_empty() { span.muted { " (snapshot " (at) ")" } }
        }
    }
}

/// The page (query: `path` the directory, `at` a snapshot, `cursor` the next page).
pub(crate) fn page(cx: &Cx, workbench: &str, q: &Params) -> Page {
    let path = q.get("path").unwrap_or("").trim_matches('/').to_owned();
    let at = q.get("at");
    let out = tool(
        cx,
        "workbench_list",
        input(&[
            ("id", json!(workbench)),
            (
                "path",
                if path.is_empty() {
                    Value::Null
                } else {
                    json!(path)
                },
            ),
            ("at_snapshot", at_snapshot(at)),
            ("cursor", q.get("cursor").map_or(Value::Null, |c| json!(c))),
            ("limit", json!(PAGE_ENTRIES)),
        ]),
    );
    let title = format!("Workbench {workbench}");
    let out = match out {
        Ok(v) => v,
        Err(e) => {
            return Page {
                status: axum::http::StatusCode::NOT_FOUND,
                ..Page::ok(title, "workbenches", layout::alert(&e))
            }
        }
    };
    let entries = out["entries"].as_array().cloned().unwrap_or_default();
    let at_s = at.unwrap_or("");
    let wb_link = format!("wb/{}", segment(workbench));
    let body = html! {
        (crumbs(cx, workbench, &path, at))
        p.tabs {
            a href=(cx.link(&format!("snapshots/{}", segment(workbench)), &[])) { "Snapshots" }
            a href=(cx.link("lineage", &[("wb", workbench)])) { "Lineage" }
            a href=(cx.link("search", &[("wb", workbench)])) { "Search this workbench" }
        }
        @if entries.is_empty() {
            p.muted { "This directory is empty." }
        } @else {
            table #tree {
                caption.muted { (entries.len()) " entries" @if out["truncated"].as_bool() == Some(true) { " (more on the next page)" } }
                thead { tr { th scope="col" { "Name" } th scope="col" { "Kind" } th.num scope="col" { "Size" } } }
                tbody {
                    @for e in &entries {
                        @let full = full_path(e);
                        @let name = e["name"].as_str().unwrap_or_default();
                        @let dir = e["kind"].as_str() == Some("directory");
                        tr {
                            td {
                                @if dir {
                                    a.dir href=(cx.link(&wb_link, &[("path", &full), ("at", at_s)])) { (name) "/" }
                                } @else {
                                    a.file href=(cx.link(&format!("file/{}", segment(workbench)), &[("path", &full), ("at", at_s)])) { (name) }
                                }
                            }
                            td { (if dir { "directory" } else { "file" }) }
                            td.num { @if let Some(n) = e["size_bytes"].as_u64() { (layout::bytes(n)) } }
                        }
                    }
                }
            }
        }
        @if let Some(next) = out["next_cursor"].as_str() {
            p { a rel="next" href=(cx.link(&wb_link, &[("path", &path), ("at", at_s), ("cursor", next)])) { "Next page →" } }
        }
    };
    Page::ok(title, "workbenches", body)
}
