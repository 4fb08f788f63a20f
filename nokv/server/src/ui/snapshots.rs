//! A workbench's snapshots (`/ui/snapshots/{id}`): every snapshot from
//! `workbench_snapshot_list` with its name, state, read version, lease expiry (absolute and
//! from now) and reason; each alive one links to the workbench's tree frozen at it.

use maud::html;
use serde_json::json;

use super::layout::{segment, Cx, Page};
use super::source::tool;

/// `ms` from now as people say it: `in 6 d 23 h`, `2 h 5 min ago`.
pub(crate) fn relative(ms_from_now: i128) -> String {
    let past = ms_from_now < 0;
    let total_min = ms_from_now.unsigned_abs() / 60_000;
    let (d, h, m) = (total_min / 1440, (total_min / 60) % 24, total_min % 60);
    let text = if d > 0 {
        format!("{d} d {h} h")
    } else if h > 0 {
        format!("{h} h {m} min")
    } else {
        format!("{m} min")
    };
    if past {
        format!("{text} ago")
    } else {
        format!("in {text}")
    }
}

/// The page.
pub(crate) fn page(cx: &Cx, workbench: &str) -> Page {
    let title = format!("Snapshots of {workbench}");
    let out = match tool(cx, "workbench_snapshot_list", json!({ "id": workbench })) {
        Ok(v) => v,
        Err(e) => return Page::not_found(&e),
    };
    let now = i128::from(cx.state.client.now_unix_ms());
    let snaps = out["snapshots"].as_array().cloned().unwrap_or_default();
    let wb_link = format!("wb/{}", segment(workbench));
    let body = html! {
        (super::tree::crumbs(cx, workbench, "", None))
        @if snaps.is_empty() {
            p.muted { "This workbench has no snapshot. A committed workbench is snapshotted with "
                code { "nokv snapshot" } " or " code { "workbench_snapshot" } "." }
        } @else {
            table #snapshots {
                thead { tr {
                    th.num scope="col" { "Id" } th scope="col" { "Name" } th scope="col" { "State" }
                    th.num scope="col" { "Read version" } th scope="col" { "Lease expires" } th scope="col" { "Reason" }
                    th scope="col" { "Browse" }
                } }
                tbody {
                    @for s in &snaps {
                        @let id = s["snapshot_id"].as_u64().unwrap_or_default().to_string();
                        @let state = s["state"].as_str().unwrap_or_default();
                        @let deadline = s["lease_expires_unix_ms"].as_u64().map(i128::from);
                        tr.snapshot data-state=(state) {
                            td.num { (id) }
                            td { (s["name"].as_str().unwrap_or("—")) }
                            td { (state) }
                            td.num { (s["read_version"].to_string()) }
                            td {
                                time datetime=(s["lease_expires_at"].as_str().unwrap_or_default()) {
                                    (s["lease_expires_at"].as_str().unwrap_or_default())
                                }
                                @if let Some(d) = deadline { span.muted { " (" (relative(d - now)) ")" } }
                            }
                            td { (s["annotation"]["reason"].as_str().unwrap_or("")) }
                            td {
                                @if state == "alive" {
                                    a href=(cx.link(&wb_link, &[("at", &id)])) { "tree at this snapshot" }
                                } @else { span.muted { "no longer readable" } }
                            }
                        }
                    }
                }
            }
        }
        p.muted { "Times are UTC. A snapshot copies no bytes: it pins its read version until the lease expires." }
    };
    Page::ok(title, "workbenches", body)
}

#[cfg(test)]
mod tests {
    use super::relative;

    #[test]
    fn relative_times_read_well() {
        assert_eq!(relative(7 * 86_400_000), "in 7 d 0 h");
        assert_eq!(relative(-(2 * 3_600_000 + 5 * 60_000)), "2 h 5 min ago");
        assert_eq!(relative(30_000), "in 0 min");
    }
}
