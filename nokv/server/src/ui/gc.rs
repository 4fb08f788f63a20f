//! GC explain (`/ui/gc?wb=W&path=P`): why the revision behind a path is kept — its state,
//! references, owned objects, every holder (paths, commits, snapshots, history) and the
//! verdict — from `Client::gc_explain`, presented with the same JSON form as
//! `nokv gc --explain --json` and `GET /v1/gc/explain`.

use maud::html;

use super::layout::{self, segment, Cx, Page, Params};

/// The page.
pub(crate) fn page(cx: &Cx, q: &Params) -> Page {
    let wb = q.get("wb");
    let path = q.get("path");
    let result = match (wb, path) {
        (Some(w), Some(p)) => Some(
            cx.state
                .client
                .gc_explain(w, p)
                .map(|e| nokv_commands::gc_cmd::explanation_json(&e))
                .map_err(|e| nokv::workbench::tool_error(&cx.state.client, w, e)),
        ),
        _ => None,
    };
    let body = html! {
        form.inline method="get" action=(cx.link("gc", &[])) {
            label { "Workbench" input type="text" name="wb" required value=(wb.unwrap_or("")); }
            label { "Path (with its section)" input type="text" name="path" required size="40" value=(path.unwrap_or("")); }
            button type="submit" { "Explain" }
        }
        @match &result {
            None => p.muted { "Name a file to see what keeps its bytes alive." },
            Some(Err(e)) => (layout::alert(&format!("{}: {}", e.code.as_str(), e.message))),
            Some(Ok(x)) => {
                section.card #explanation aria-label="Explanation" {
                    dl {
                        dt { "Verdict" } dd #verdict { strong { (x["verdict"].as_str().unwrap_or_default()) } }
                        dt { "Revision" } dd.mono { (x["revision"].as_str().unwrap_or_default()) }
                        dt { "State" } dd { (x["state"].as_str().unwrap_or_default()) }
                        dt { "Strong references" } dd { (x["strong_reference_count"].to_string()) " (epoch " (x["reference_epoch"].to_string()) ")" }
                        dt { "Size" } dd { (layout::bytes(x["logical_size"].as_u64().unwrap_or(0))) }
                        dt { "Own objects" } dd { (x["own_objects"].to_string()) " (" (layout::bytes(x["own_bytes"].as_u64().unwrap_or(0))) ")" }
                        dt { "Reuses blocks of" } dd { (x["dependency_count"].to_string()) " older revisions" }
                        dt { "History floor / tip" } dd { (x["history_floor"].to_string()) " / " (x["tip"].to_string()) }
                    }
                }
                h2 { "Held by" }
                @let held = x["held_by"].as_array().cloned().unwrap_or_default();
                @if held.is_empty() { p.muted { "Nothing holds it." } }
                @else { ul #holders { @for h in &held { li { (h.as_str().unwrap_or_default()) } } } }
                @if let (Some(w), Some(p)) = (wb, path) {
                    p { a href=(cx.link(&format!("file/{}", segment(w)), &[("path", p)])) { "Open the file" } }
                }
            }
        }
    };
    Page::ok("GC explain", "gc", body)
}
