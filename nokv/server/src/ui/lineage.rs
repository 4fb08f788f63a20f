//! Lineage (`/ui/lineage[?wb=W]`) and one commit (`/ui/commit/{hex}`).
//!
//! The graph is the head commit of every committed workbench (`workbench_find` with
//! `committed: true`, paged) and, through `Client::commit_info`, each one's parents across
//! workbenches, transitively; tags come from `Client::list_tags`. It is drawn by [`super::dag`]
//! and listed as a table of edges. With `wb` the picture keeps that workbench's commits, their
//! ancestors and every commit built on them. A commit's page shows its record, its parents, its
//! tags and the runs that used it as an input (the commits in the graph that name it as a
//! parent), with links to its workbench's tree and snapshots.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use maud::{html, Markup};
use serde_json::{json, Value};

use super::dag::{self, Node};
use super::layout::{self, segment, Cx, Page, Params};
use super::source::{input, tool};
use nokv::commit::CommitInfo;

/// Committed workbenches read at most (heads of the picture).
const MAX_HEADS: usize = 500;
/// Commits drawn at most.
const MAX_COMMITS: usize = 1000;

/// The commits known to the page.
struct Graph {
    /// Commit id → its record.
    commits: BTreeMap<String, CommitInfo>,
    /// Commit id → tags naming it (`workbench:tag`).
    tags: BTreeMap<String, Vec<String>>,
    /// Workbench → its head commit id.
    heads: BTreeMap<String, String>,
    /// A bound stopped the collection.
    truncated: bool,
}

impl Graph {
    /// The commits whose parents include `id`.
    fn children(&self, id: &str) -> Vec<&CommitInfo> {
        self.commits
            .values()
            .filter(|c| c.parents.iter().any(|p| p == id))
            .collect()
    }
}

fn collect(cx: &Cx) -> Result<Graph, String> {
    let client = &cx.state.client;
    let mut heads = BTreeMap::new();
    let mut cursor: Option<String> = None;
    let mut truncated = false;
    loop {
        let out = tool(
            cx,
            "workbench_find",
            input(&[
                ("committed", json!(true)),
                ("limit", json!(100)),
                ("cursor", cursor.clone().map_or(Value::Null, Value::from)),
            ]),
        )?;
        for m in out["matches"].as_array().into_iter().flatten() {
            if let (Some(w), Some(c)) = (m["workbench_id"].as_str(), m["commit_identity"].as_str())
            {
                heads.insert(w.to_owned(), c.to_owned());
            }
        }
        cursor = out["next_cursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
        if heads.len() >= MAX_HEADS {
            truncated = true;
            break;
        }
    }
    let mut commits = BTreeMap::new();
    let mut queue: VecDeque<String> = heads.values().cloned().collect();
    while let Some(id) = queue.pop_front() {
        if commits.contains_key(&id) {
            continue;
        }
        if commits.len() >= MAX_COMMITS {
            truncated = true;
            break;
        }
        let info = client
            .commit_info(&id)
            .map_err(|e| format!("the commit {id} could not be read: {e}"))?;
        if let Some(info) = info {
            queue.extend(info.parents.iter().cloned());
            commits.insert(id, info);
        }
    }
    let mut tags: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let workbenches: BTreeSet<String> = commits.values().map(|c| c.workbench_id.clone()).collect();
    for w in workbenches {
        // A workbench that is gone keeps its commits; it simply has no tags to show.
        for t in client.list_tags(&w).unwrap_or_default() {
            tags.entry(t.commit_id.to_hex()).or_default().push(t.name);
        }
    }
    Ok(Graph {
        commits,
        tags,
        heads,
        truncated,
    })
}

/// The ids to draw for focus workbench `wb`: its commits, their ancestors and descendants.
fn focus_set(g: &Graph, wb: &str) -> BTreeSet<String> {
    let mine: Vec<String> = g
        .commits
        .values()
        .filter(|c| c.workbench_id == wb)
        .map(|c| c.commit_id.clone())
        .collect();
    let mut keep: BTreeSet<String> = BTreeSet::new();
    let mut up: VecDeque<String> = mine.iter().cloned().collect();
    while let Some(id) = up.pop_front() {
        if keep.insert(id.clone()) {
            if let Some(c) = g.commits.get(&id) {
                up.extend(c.parents.iter().cloned());
            }
        }
    }
    let mut down: VecDeque<String> = mine.into_iter().collect();
    let mut seen = BTreeSet::new();
    while let Some(id) = down.pop_front() {
        if seen.insert(id.clone()) {
            keep.insert(id.clone());
            down.extend(g.children(&id).into_iter().map(|c| c.commit_id.clone()));
        }
    }
    keep
}

fn commit_link(cx: &Cx, id: &str) -> String {
    cx.link(&format!("commit/{}", segment(id)), &[])
}

/// The lineage page (query: `wb` to focus one workbench).
pub(crate) fn page(cx: &Cx, q: &Params) -> Page {
    let g = match collect(cx) {
        Ok(g) => g,
        Err(e) => return Page::ok("Lineage", "lineage", layout::alert(&e)),
    };
    let focus = q.get("wb");
    let keep = focus.map(|w| focus_set(&g, w));
    let drawn: Vec<&CommitInfo> = g
        .commits
        .values()
        .filter(|c| keep.as_ref().is_none_or(|k| k.contains(&c.commit_id)))
        .collect();
    let nodes: Vec<Node> = drawn
        .iter()
        .map(|c| Node {
            id: c.commit_id.clone(),
            workbench: c.workbench_id.clone(),
            tags: g.tags.get(&c.commit_id).cloned().unwrap_or_default(),
            parents: c.parents.clone(),
            href: commit_link(cx, &c.commit_id),
            focus: focus == Some(c.workbench_id.as_str()),
        })
        .collect();
    let title = match focus {
        Some(w) => format!("Lineage of {w}"),
        None => "Lineage".to_owned(),
    };
    let body = html! {
        @if let Some(w) = focus {
            p { "Commits of " strong { (w) } ", what they were built from and what was built on them. "
                a href=(cx.link("lineage", &[])) { "Show every workbench" } }
        } @else {
            p { "Head commits of every committed workbench and their parents across workbenches. Each box links to its commit." }
        }
        @if g.truncated { p.muted { "Only part of the lineage is shown (the page reads at most " (MAX_HEADS) " workbenches and " (MAX_COMMITS) " commits)." } }
        @if nodes.is_empty() {
            p.muted { "No commit yet." }
        } @else {
            div.scroll { (dag::svg(&nodes, &title)) }
            h2 { "Edges" }
            table #edges {
                thead { tr { th scope="col" { "Commit" } th scope="col" { "Workbench" } th scope="col" { "Parent" } th scope="col" { "Parent's workbench" } } }
                tbody {
                    @for c in &drawn {
                        @for p in &c.parents {
                            tr.edge data-child=(c.commit_id) data-parent=(p) {
                                td.mono { a href=(commit_link(cx, &c.commit_id)) title=(c.commit_id) { (layout::short(&c.commit_id)) } }
                                td { (c.workbench_id) }
                                td.mono { a href=(commit_link(cx, p)) title=(p) { (layout::short(p)) } }
                                td { (g.commits.get(p).map(|x| x.workbench_id.as_str()).unwrap_or("?")) }
                            }
                        }
                    }
                }
            }
        }
    };
    Page::ok(title, "lineage", body)
}

fn commit_rows(cx: &Cx, list: &[&CommitInfo]) -> Markup {
    html! {
        tbody {
            @for c in list {
                tr {
                    td.mono { a href=(commit_link(cx, &c.commit_id)) title=(c.commit_id) { (layout::short(&c.commit_id)) } }
                    td { a href=(cx.link(&format!("wb/{}", segment(&c.workbench_id)), &[])) { (c.workbench_id) } }
                    td { (c.state) }
                }
            }
        }
    }
}

/// One commit's page.
pub(crate) fn commit_page(cx: &Cx, hex: &str, _q: &Params) -> Page {
    let client = &cx.state.client;
    let info = match client.commit_info(hex) {
        Ok(Some(i)) => i,
        Ok(None) => return Page::not_found("No such commit."),
        Err(e) => return Page::bad_request(&format!("Not a commit id: {e}")),
    };
    let g = collect(cx);
    let (children, tags, is_head) = match &g {
        Ok(g) => (
            g.children(&info.commit_id),
            g.tags.get(&info.commit_id).cloned().unwrap_or_default(),
            g.heads.get(&info.workbench_id) == Some(&info.commit_id),
        ),
        Err(_) => (Vec::new(), Vec::new(), false),
    };
    let parents: Vec<CommitInfo> = info
        .parents
        .iter()
        .filter_map(|p| client.commit_info(p).ok().flatten())
        .collect();
    let parent_refs: Vec<&CommitInfo> = parents.iter().collect();
    let wb = segment(&info.workbench_id);
    let body = html! {
        section.card #commit aria-label="Commit" {
            dl {
                dt { "Commit" } dd.mono { (info.commit_id) }
                dt { "Workbench" } dd { a href=(cx.link(&format!("wb/{wb}"), &[])) { (info.workbench_id) } }
                dt { "State" } dd { (info.state) @if is_head { " (the workbench's head)" } }
                dt { "Tags" } dd { @if tags.is_empty() { span.muted { "none" } } @else { (tags.join(", ")) } }
                dt { "Tree digest" } dd.mono { (info.tree_digest_uri) }
                dt { "Content digest" } dd.mono { (info.content_digest_uri) }
                dt { "Manifest digest" } dd.mono { (info.manifest_digest_uri) }
                dt { "Members" } dd { (info.member_count) " paths, " (info.unique_revision_count) " revisions" }
                dt { "Consumers" } dd { (info.consumer_count) }
                dt { "Sealed at version" } dd { (info.created_version) }
            }
        }
        p.tabs {
            @if is_head {
                a href=(cx.link(&format!("wb/{wb}"), &[])) { "Committed tree (the workbench's head)" }
                a href=(cx.link(&format!("file/{wb}"), &[("path", meta::ops::commit::RUN_MANIFEST_PATH)])) { "Run manifest" }
            }
            a href=(cx.link(&format!("snapshots/{wb}"), &[])) { "Snapshots (frozen trees)" }
            a href=(cx.link("lineage", &[("wb", &info.workbench_id)])) { "Lineage picture" }
        }
        h2 { "Parents" }
        @if parent_refs.is_empty() { p.muted { "None: built from no earlier commit." } }
        @else { table #parents { thead { tr { th { "Commit" } th { "Workbench" } th { "State" } } } (commit_rows(cx, &parent_refs)) } }
        h2 { "Runs that used this input commit" }
        @if children.is_empty() { p.muted { "No commit in the lineage names this one as a parent." } }
        @else { table #children { thead { tr { th { "Commit" } th { "Workbench" } th { "State" } } } (commit_rows(cx, &children)) } }
    };
    Page::ok(
        format!("Commit {}", layout::short(&info.commit_id)),
        "lineage",
        body,
    )
}
