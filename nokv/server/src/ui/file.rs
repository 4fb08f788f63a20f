//! A file (`/ui/file/{id}?path=P[&at=S]`): its metadata card (size, generation, digest,
//! content type, producer, index fields), a preview by type ([`super::preview`]) read with
//! range reads (text and hex dumps paged by byte offset, the line number carried in the link),
//! a Range-capable download link (the `/v1/` endpoint pinned at the read version) and links to
//! the same path at every live snapshot of the workbench. `/ui/raw/{id}` serves an image for
//! the inline preview under a sandboxing policy.

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};
use serde_json::{json, Value};

use super::super::handler::{blocking, Shared};
use super::layout::{self, segment, Cx, Page, Params};
use super::preview::{self, Kind};
use super::source::{at_snapshot, input, open_file, read_range, tool, OpenFile};

/// The page.
pub(crate) fn page(cx: &Cx, workbench: &str, q: &Params) -> Page {
    let Some(path) = q.get("path").map(|p| p.trim_matches('/').to_owned()) else {
        return Page::bad_request("Which file? The link has no path.");
    };
    let at = q.get("at");
    let title = path.rsplit('/').next().unwrap_or(&path).to_owned();
    let file = match open_file(cx, workbench, &path, at) {
        Ok(f) => f,
        Err(e) => return Page::not_found(&e),
    };
    let size = file.entry.logical_size;
    let sample = match read_range(cx, workbench, &file, 0, size.min(4096)) {
        Ok(b) => b,
        Err(e) => return Page::ok(title, "workbenches", layout::alert(&e)),
    };
    let kind = preview::kind(&path, &file.entry.content_type, &sample);
    let preview = render_preview(cx, workbench, &path, at, &file, kind, q);
    let body = html! {
        (super::tree::crumbs(cx, workbench, &path, at))
        (card(cx, workbench, at, &file))
        p {
            a #download href=(cx.download(workbench, &path, Some(file.version()))) download { "Download" }
            span.muted { " (" (layout::bytes(size)) "; supports Range requests; pinned at version " (file.version()) ")" }
            " · " a href=(cx.link("gc", &[("wb", workbench), ("path", &path)])) { "Why is this kept? (GC explain)" }
        }
        (versions(cx, workbench, &path, at))
        h2 { "Preview" }
        (preview)
    };
    Page::ok(title, "workbenches", body)
}

fn card(cx: &Cx, workbench: &str, at: Option<&str>, file: &OpenFile) -> Markup {
    let e = &file.entry;
    // The path as workbench_stat presents it: `{root}/{workbench}/{normalized path}`.
    let presented = format!(
        "{}/{}",
        cx.state.client.workbench_path(workbench),
        file.path.as_str()
    );
    let fields = meta::command::projection::decode_projection(&e.index_projection)
        .map(|f| {
            f.iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_owned(),
                        nokv::index_fields::index_value_to_json(v).to_string(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    html! {
        section.card #card aria-label="Metadata" {
            dl {
                dt { "Path" } dd.mono { (presented) }
                dt { "Size" } dd { (e.logical_size) " bytes (" (layout::bytes(e.logical_size)) ")" }
                dt { "Generation" } dd #generation { (e.generation) }
                dt { "Digest" } dd.mono { (e.body_digest_uri) }
                dt { "Content type" } dd { (e.content_type) }
                dt { "Producer" } dd { (e.producer) }
                @if let Some(m) = &e.manifest_id { dt { "Manifest id" } dd { (m) } }
                dt { "Created / modified (version)" } dd { (e.created_version) " / " (e.modified_version) }
                dt { "Read at" } dd { @if let Some(s) = at { "snapshot " (s) ", " } "version " (file.version()) }
                @if !fields.is_empty() {
                    dt #index-fields { "Index fields" }
                    dd { table.fields { tbody { @for (k, v) in &fields { tr { th scope="row" { (k) } td.mono { (v) } } } } } }
                }
            }
        }
    }
}

/// Links to this path at the live state and at every alive snapshot of the workbench.
fn versions(cx: &Cx, workbench: &str, path: &str, at: Option<&str>) -> Markup {
    let snaps = tool(cx, "workbench_snapshot_list", json!({ "id": workbench }))
        .ok()
        .and_then(|v| v["snapshots"].as_array().cloned())
        .unwrap_or_default();
    let alive: Vec<&Value> = snaps
        .iter()
        .filter(|s| {
            s["state"]
                .as_str()
                .is_none_or(|st| st == "alive" || st == "Alive")
        })
        .collect();
    let file_link = format!("file/{}", segment(workbench));
    html! {
        @if !alive.is_empty() || at.is_some() {
            nav aria-label="Versions" {
                "Versions: "
                a href=(cx.link(&file_link, &[("path", path)])) { "live" }
                @for s in alive {
                    @let id = s["snapshot_id"].as_u64().map(|n| n.to_string()).unwrap_or_default();
                    @let name = s["name"].as_str().map(str::to_owned).unwrap_or_else(|| format!("#{id}"));
                    " · " a href=(cx.link(&file_link, &[("path", path), ("at", &id)])) { "snapshot " (name) }
                }
            }
        }
    }
}

fn render_preview(
    cx: &Cx,
    workbench: &str,
    path: &str,
    at: Option<&str>,
    file: &OpenFile,
    kind: Kind,
    q: &Params,
) -> Markup {
    let size = file.entry.logical_size;
    let at_s = at.unwrap_or("");
    let file_link = format!("file/{}", segment(workbench));
    match kind {
        Kind::Image(_) if size <= preview::IMAGE_BYTES => html! {
            img.preview #image-preview src=(cx.link(&format!("raw/{}", segment(workbench)), &[("path", path), ("at", at_s)])) alt=(format!("Preview of {path}"));
        },
        Kind::Image(_) => {
            html! { p.muted { "This image is too large to show inline; download it." } }
        }
        Kind::Structured => structured(cx, workbench, path, at, file, q),
        Kind::Table(delimiter) => match read_range(cx, workbench, file, 0, preview::TABLE_BYTES) {
            Ok(b) => preview::table(&b, delimiter, size <= preview::TABLE_BYTES),
            Err(e) => layout::alert(&e),
        },
        Kind::Markdown if size <= preview::MARKDOWN_BYTES => {
            match read_range(cx, workbench, file, 0, size) {
                Ok(b) => preview::markdown(&b),
                Err(e) => layout::alert(&e),
            }
        }
        Kind::Markdown | Kind::Text => text(cx, workbench, path, at_s, file, q, &file_link),
        Kind::Binary => {
            let offset = q.number("offset").unwrap_or(0);
            let offset = offset - offset % 16;
            match read_range(cx, workbench, file, offset, preview::HEX_PAGE) {
                Ok(b) => {
                    let end = offset + b.len() as u64;
                    html! {
                        (preview::hex(&b, offset))
                        (pager(cx, &file_link, path, at_s, offset, end, size, None))
                    }
                }
                Err(e) => layout::alert(&e),
            }
        }
    }
}

fn text(
    cx: &Cx,
    workbench: &str,
    path: &str,
    at_s: &str,
    file: &OpenFile,
    q: &Params,
    file_link: &str,
) -> Markup {
    let size = file.entry.logical_size;
    let offset = q.number("offset").unwrap_or(0).min(size);
    let line = q.number("line").unwrap_or(1).max(1);
    match read_range(cx, workbench, file, offset, preview::TEXT_PAGE) {
        Ok(b) => {
            let at_end = offset + b.len() as u64 >= size;
            let shown = preview::text_cut(&b, at_end);
            let (lines, next_line) = preview::text_lines(&b[..shown], line);
            let end = offset + shown as u64;
            html! {
                (lines)
                (pager(cx, file_link, path, at_s, offset, end, size, Some(next_line)))
            }
        }
        Err(e) => layout::alert(&e),
    }
}

/// "next page" / "from the start" links of a paged preview; `next_line` is carried for text.
#[allow(clippy::too_many_arguments)]
fn pager(
    cx: &Cx,
    file_link: &str,
    path: &str,
    at_s: &str,
    offset: u64,
    end: u64,
    size: u64,
    next_line: Option<u64>,
) -> Markup {
    let next_offset = end.to_string();
    let line = next_line.map(|n| n.to_string()).unwrap_or_default();
    html! {
        p.muted {
            "Bytes " (offset) "–" (end) " of " (size) ". "
            @if offset > 0 {
                a href=(cx.link(file_link, &[("path", path), ("at", at_s)])) { "← From the start" } " "
            }
            @if end < size {
                a rel="next" href=(cx.link(file_link, &[("path", path), ("at", at_s), ("offset", &next_offset), ("line", &line)])) { "Next page →" }
            }
        }
    }
}

/// A JSON or YAML document as a tree, read through `workbench_read` (structured: the tool's
/// own parsing, paging of top-level arrays by its cursor); a file the tool cannot structure is
/// shown as text.
fn structured(
    cx: &Cx,
    workbench: &str,
    path: &str,
    at: Option<&str>,
    file: &OpenFile,
    q: &Params,
) -> Markup {
    let (section, rel) = path.split_once('/').unwrap_or(("", path));
    let answer = tool(
        cx,
        "workbench_read",
        input(&[
            ("id", json!(workbench)),
            ("section", json!(section)),
            ("path", json!(rel)),
            ("at_snapshot", at_snapshot(at)),
            ("format", json!("structured")),
            ("limit", json!(300)),
            ("cursor", q.get("records").map_or(Value::Null, |c| json!(c))),
        ]),
    );
    let at_s = at.unwrap_or("");
    let file_link = format!("file/{}", segment(workbench));
    match answer {
        Ok(v) => {
            let items: Vec<Value> = v["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| i["value"].clone())
                .collect();
            let record_type = v["record_type"].as_str().unwrap_or_default();
            let doc = match record_type {
                "json_object" | "yaml_mapping" if items.len() == 1 => items[0].clone(),
                _ => Value::Array(items),
            };
            html! {
                @if record_type == "text_lines" {
                    (text(cx, workbench, path, at_s, file, q, &file_link))
                } @else {
                    p.muted { "Record type " (record_type) ", " (v["record_count"].to_string()) " records." }
                    (preview::tree(&doc, "json-tree"))
                    @if let Some(n) = v["next_cursor"].as_str() {
                        p { a rel="next" href=(cx.link(&file_link, &[("path", path), ("at", at_s), ("records", n)])) { "Next records →" } }
                    }
                }
            }
        }
        Err(e) => html! {
            p.muted { "Shown as text: " (e) }
            (text(cx, workbench, path, at_s, file, q, &file_link))
        },
    }
}

/// `GET /ui/raw/{id}?path=P[&at=S]`: an image's bytes for the inline preview, with the safe
/// image content type its preview kind names (anything else is refused), `nosniff` and a
/// policy that runs nothing (`sandbox`; an SVG's scripts and handlers stay inert even when the
/// URL is opened directly).
pub(crate) async fn raw(State(s): State<Shared>, Path(id): Path<String>, req: Request) -> Response {
    let cx = Cx::of(s, &req);
    let q = Params::of(&req);
    let answer = blocking(
        move || -> Result<(&'static str, Vec<u8>), (StatusCode, String)> {
            let path = q
                .get("path")
                .ok_or((StatusCode::BAD_REQUEST, "no path".to_string()))?
                .to_owned();
            let file =
                open_file(&cx, &id, &path, q.get("at")).map_err(|e| (StatusCode::NOT_FOUND, e))?;
            let Kind::Image(kind) = preview::kind(&path, &file.entry.content_type, &[]) else {
                return Err((StatusCode::UNSUPPORTED_MEDIA_TYPE, "not an image".into()));
            };
            if file.entry.logical_size > preview::IMAGE_BYTES {
                return Err((
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "image too large to preview".into(),
                ));
            }
            let bytes = read_range(&cx, &id, &file, 0, file.entry.logical_size)
                .map_err(|e| (StatusCode::SERVICE_UNAVAILABLE, e))?;
            Ok((kind, bytes))
        },
    )
    .await;
    let response = match answer {
        Ok(Ok((kind, bytes))) => (
            [(header::CONTENT_TYPE, HeaderValue::from_static(kind))],
            bytes,
        )
            .into_response(),
        Ok(Err((status, message))) => (status, message).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "the read failed").into_response(),
    };
    super::headers::harden(
        response,
        "default-src 'none'; style-src 'unsafe-inline'; sandbox",
    )
}
