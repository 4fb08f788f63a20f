//! The lineage picture's layout, done on the server (no layout library, no script): commits
//! are placed in columns by their longest distance from a commit without parents (parents left,
//! the commits built on them right), ordered inside a column by the mean row of their parents
//! (one barycentre pass, so edges mostly run straight), and drawn as an SVG of linked boxes with
//! arrows from each commit to its parents. Pure: ids and labels in, markup out.

use std::collections::{BTreeMap, HashMap};

use maud::{html, Markup};

/// Box width, height and the gaps between columns and rows, in SVG user units (pixels).
const W: u32 = 210;
const H: u32 = 58;
const GAP_X: u32 = 80;
const GAP_Y: u32 = 24;
const PAD: u32 = 16;

/// One commit to draw.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    /// Commit id (64 hex).
    pub(crate) id: String,
    /// Its workbench.
    pub(crate) workbench: String,
    /// Its tags.
    pub(crate) tags: Vec<String>,
    /// Parents (commit ids; those not drawn are ignored).
    pub(crate) parents: Vec<String>,
    /// Where a click goes.
    pub(crate) href: String,
    /// Drawn highlighted (the page's focus).
    pub(crate) focus: bool,
}

/// Column and row of every node (see the module docs).
pub(crate) fn layout(nodes: &[Node]) -> HashMap<String, (u32, u32)> {
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    // Longest path from a root; iterative relaxation, bounded by the node count (a cycle,
    // impossible for commits, would only stop the relaxation).
    let mut depth = vec![0u32; nodes.len()];
    for _ in 0..nodes.len() {
        let mut changed = false;
        for (i, n) in nodes.iter().enumerate() {
            for p in &n.parents {
                if let Some(&j) = index.get(p.as_str()) {
                    if depth[i] < depth[j] + 1 {
                        depth[i] = depth[j] + 1;
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    let mut columns: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, d) in depth.iter().enumerate() {
        columns.entry(*d).or_default().push(i);
    }
    let mut row = vec![0u32; nodes.len()];
    for (col, members) in columns.iter_mut() {
        if *col > 0 {
            let key = |i: &usize| {
                let rows: Vec<u32> = nodes[*i]
                    .parents
                    .iter()
                    .filter_map(|p| index.get(p.as_str()).map(|&j| row[j]))
                    .collect();
                let mean = if rows.is_empty() {
                    0.0
                } else {
                    rows.iter().map(|&r| f64::from(r)).sum::<f64>() / rows.len() as f64
                };
                (mean, nodes[*i].workbench.clone())
            };
            members.sort_by(|a, b| {
                let (ka, kb) = (key(a), key(b));
                ka.0.total_cmp(&kb.0).then_with(|| ka.1.cmp(&kb.1))
            });
        } else {
            members.sort_by(|a, b| nodes[*a].workbench.cmp(&nodes[*b].workbench));
        }
        for (r, &i) in members.iter().enumerate() {
            row[i] = r as u32;
        }
    }
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.clone(), (depth[i], row[i])))
        .collect()
}

fn origin(col: u32, row: u32) -> (u32, u32) {
    (PAD + col * (W + GAP_X), PAD + row * (H + GAP_Y))
}

/// The SVG of `nodes` (see the module docs); `label` is its accessible name.
pub(crate) fn svg(nodes: &[Node], label: &str) -> Markup {
    let place = layout(nodes);
    let cols = place.values().map(|p| p.0 + 1).max().unwrap_or(1);
    let rows = place.values().map(|p| p.1 + 1).max().unwrap_or(1);
    let width = 2 * PAD + cols * W + cols.saturating_sub(1) * GAP_X;
    let height = 2 * PAD + rows * H + rows.saturating_sub(1) * GAP_Y;
    html! {
        svg.dag #dag xmlns="http://www.w3.org/2000/svg" role="group" aria-label=(label)
            width=(width) height=(height) viewBox=(format!("0 0 {width} {height}")) {
            defs {
                marker #arrow viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse" {
                    path d="M 0 0 L 10 5 L 0 10 z" fill="#57606a" {}
                }
            }
            @for n in nodes {
                @for p in &n.parents {
                    @if let (Some(&(cc, cr)), Some(&(pc, pr))) = (place.get(&n.id), place.get(p)) {
                        @let (cx, cy) = origin(cc, cr);
                        @let (px, py) = origin(pc, pr);
                        @let (x1, y1) = (cx, cy + H / 2);
                        @let (x2, y2) = (px + W, py + H / 2);
                        @let mid = (x1 + x2) / 2;
                        path.edge data-child=(n.id) data-parent=(p) marker-end="url(#arrow)"
                            d=(format!("M {x1} {y1} C {mid} {y1}, {mid} {y2}, {x2} {y2}")) {}
                    }
                }
            }
            @for n in nodes {
                @if let Some(&(c, r)) = place.get(&n.id) {
                    @let (x, y) = origin(c, r);
                    a href=(n.href) {
                        g.node.focus[n.focus] data-commit=(n.id) data-workbench=(n.workbench) {
                            title { "commit " (n.id) " of " (n.workbench) }
                            rect x=(x) y=(y) width=(W) height=(H) rx="6" {}
                            text x=(x + 8) y=(y + 18) font-weight="600" { (clip(&n.workbench, 28)) }
                            text x=(x + 8) y=(y + 34) font-family="monospace" { (super::layout::short(&n.id)) }
                            @if !n.tags.is_empty() {
                                text x=(x + 8) y=(y + 50) fill="#953800" { "tag: " (clip(&n.tags.join(", "), 24)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, wb: &str, parents: &[&str]) -> Node {
        Node {
            id: id.into(),
            workbench: wb.into(),
            tags: vec![],
            parents: parents.iter().map(|p| (*p).to_owned()).collect(),
            href: format!("/ui/commit/{id}"),
            focus: false,
        }
    }

    #[test]
    fn parents_sit_left_of_their_children() {
        let nodes = vec![
            node("c1", "run-a", &["p"]),
            node("c2", "run-b", &["p"]),
            node("p", "input", &[]),
            node("g", "report", &["c1", "c2"]),
        ];
        let at = layout(&nodes);
        assert_eq!(at["p"].0, 0);
        assert_eq!(at["c1"].0, 1);
        assert_eq!(at["c2"].0, 1);
        assert_eq!(at["g"].0, 2);
        assert_ne!(at["c1"].1, at["c2"].1);
    }

    #[test]
    fn svg_draws_one_edge_per_known_parent_and_escapes_labels() {
        let nodes = vec![
            node("c", "<b>run</b>", &["p", "unknown"]),
            node("p", "in", &[]),
        ];
        let s = svg(&nodes, "lineage").into_string();
        assert_eq!(s.matches("class=\"edge\"").count(), 1);
        assert!(s.contains("data-child=\"c\" data-parent=\"p\""));
        assert!(!s.contains("<b>run"));
    }
}
