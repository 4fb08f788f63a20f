//! The live change feed (`/ui/feed[?wb=W]`): the newest events of the root (or of one
//! workbench), then every new one as it commits. The page carries the feed's opaque cursor;
//! its script polls `/ui/feed/events?after=CURSOR` once a second and gets the events after it
//! and the cursor to resume from (`Client::changes` / `Client::workbench_changes`, the feed
//! `nokv changes` and `GET /v1/changes` read), so no event is lost or repeated between polls.

use std::collections::VecDeque;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;
use meta::ops::changes::{ChangeCursor, ChangeScope};
use serde_json::{json, Value};

use super::super::handler::{blocking, Shared};
use super::layout::{self, Cx, Page, Params};
use nokv::changes::ChangeItem;

/// Events shown when the page opens (the newest).
const RECENT: usize = 50;
/// Commit versions looked back for them.
const LOOKBACK_VERSIONS: u64 = 500;
/// Events one poll returns at most (the rest come with the next poll).
const POLL_MAX: usize = 200;

fn scope(wb: Option<&str>) -> ChangeScope {
    wb.map_or(ChangeScope::Root, |w| ChangeScope::Workbench(w.to_owned()))
}

fn changes(cx: &Cx, wb: Option<&str>, after: Option<&str>) -> nokv::Result<nokv::changes::Changes> {
    let client = &cx.state.client;
    match wb {
        Some(w) => client.workbench_changes(w, after),
        None => client.changes(after),
    }
}

fn item_json(i: &ChangeItem) -> Value {
    json!({
        "commit_version": i.commit_version,
        "workbench_id": i.workbench_id,
        "kind": i.kind,
        "path": i.path,
        "after_generation": i.after_generation.or(i.snapshot_id),
    })
}

/// The page (query: `wb` one workbench).
pub(crate) fn page(cx: &Cx, q: &Params) -> Page {
    let wb = q.get("wb");
    let client = &cx.state.client;
    let now = match client.meta().version() {
        Ok(v) => v,
        Err(e) => return Page::ok("Live changes", "feed", layout::alert(&e.to_string())),
    };
    let root = client.meta().root_id();
    let s = scope(wb);
    let from = ChangeCursor {
        commit_version: now.saturating_sub(LOOKBACK_VERSIONS),
        event_sequence: None,
    }
    .encode(&root, &s);
    let mut recent: VecDeque<ChangeItem> = VecDeque::new();
    let mut cursor = ChangeCursor {
        commit_version: now,
        event_sequence: None,
    }
    .encode(&root, &s);
    let mut error = None;
    match changes(cx, wb, Some(&from)) {
        Ok(feed) => {
            for item in feed {
                match item {
                    Ok(i) => {
                        cursor = i.cursor.clone();
                        recent.push_back(i);
                        if recent.len() > RECENT {
                            recent.pop_front();
                        }
                    }
                    Err(e) => {
                        error = Some(e.to_string());
                        break;
                    }
                }
            }
        }
        Err(e) => error = Some(e.to_string()),
    }
    let events_url = cx.link("feed/events", &[("wb", wb.unwrap_or(""))]);
    let body = html! {
        form.inline method="get" action=(cx.link("feed", &[])) {
            label { "Only workbench" input type="text" name="wb" value=(wb.unwrap_or("")); }
            button type="submit" { "Filter" }
        }
        @if let Some(e) = error { (layout::alert(&e)) }
        p #feed-status .feed-status.muted role="status" aria-live="polite" { "Connecting…" }
        div #feed data-events-url=(events_url) data-cursor=(cursor) {
            table {
                caption.muted { "Newest first; new events appear at the top." }
                thead { tr {
                    th.num scope="col" { "Version" } th scope="col" { "Workbench" } th scope="col" { "Event" }
                    th scope="col" { "Path" } th.num scope="col" { "Generation / snapshot" }
                } }
                tbody #feed-rows {
                    @for i in recent.iter().rev() {
                        tr.event {
                            td.num { (i.commit_version) } td { (i.workbench_id) } td { (i.kind) }
                            td { (i.path.clone().unwrap_or_default()) }
                            td.num { (i.after_generation.or(i.snapshot_id).map(|g| g.to_string()).unwrap_or_default()) }
                        }
                    }
                }
            }
        }
    };
    Page::ok("Live changes", "feed", body)
}

/// `GET /ui/feed/events?after=CURSOR[&wb=W]`: `{"events":[…],"cursor":C}` (JSON; 400 with
/// `{"error"}` for a bad cursor or workbench id).
pub(crate) async fn events(State(s): State<Shared>, req: Request) -> Response {
    let cx = Cx::of(s, &req);
    let q = Params::of(&req);
    let answer = blocking(move || -> Result<Value, String> {
        let after = q.get("after");
        let feed = changes(&cx, q.get("wb"), after).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        let mut cursor = after.map(str::to_owned);
        for item in feed.take(POLL_MAX) {
            let i = item.map_err(|e| e.to_string())?;
            cursor = Some(i.cursor.clone());
            out.push(item_json(&i));
        }
        Ok(json!({ "events": out, "cursor": cursor }))
    })
    .await;
    let response = match answer {
        Ok(Ok(v)) => axum::Json(v).into_response(),
        Ok(Err(e)) => (StatusCode::BAD_REQUEST, axum::Json(json!({ "error": e }))).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    };
    super::headers::harden(response, "default-src 'none'")
}
