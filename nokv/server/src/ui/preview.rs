//! Previews of a file's bytes, by type: pure functions from bytes (or a parsed value) to
//! markup, so every one is tested without a server. All text goes through `maud`'s escaping;
//! Markdown is rendered by pulldown-cmark and then cleaned by ammonia's allow-list (no script,
//! no event handler, no `javascript:` link survives); nothing here ever emits stored bytes as
//! markup.

use maud::{html, Markup, PreEscaped};
use serde_json::Value;

/// Bytes of a text page (a page ends at the last line break inside it).
pub(crate) const TEXT_PAGE: u64 = 64 * 1024;
/// Bytes a CSV/TSV preview reads at most.
pub(crate) const TABLE_BYTES: u64 = 256 * 1024;
/// Rows a CSV/TSV preview shows at most (the header included).
pub(crate) const TABLE_ROWS: usize = 101;
/// Bytes a Markdown preview renders at most.
pub(crate) const MARKDOWN_BYTES: u64 = 1024 * 1024;
/// Bytes of a hex-dump page.
pub(crate) const HEX_PAGE: u64 = 4096;
/// Nodes a JSON/YAML tree shows at most (the rest is summarized).
const TREE_NODES: usize = 5000;
/// Largest image shown inline (bytes); larger ones are only linked.
pub(crate) const IMAGE_BYTES: u64 = 16 * 1024 * 1024;

/// How a file is previewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Lines with numbers, paged.
    Text,
    /// A collapsible tree of the parsed document (JSON or YAML).
    Structured,
    /// A table of the first rows; the delimiter byte.
    Table(u8),
    /// Rendered and sanitized.
    Markdown,
    /// Inline `<img>`; the safe content type it is served with.
    Image(&'static str),
    /// A hex dump, paged.
    Binary,
}

/// The preview kind of `path` with `content_type` (the type first, then the extension);
/// `sample` (the first bytes) decides between text and binary for anything else.
pub(crate) fn kind(path: &str, content_type: &str, sample: &[u8]) -> Kind {
    let ct = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let ext = path
        .rsplit('/')
        .next()
        .and_then(|n| n.rsplit_once('.'))
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    let image = match (ct.as_str(), ext.as_str()) {
        ("image/png", _) | (_, "png") => Some("image/png"),
        ("image/jpeg", _) | (_, "jpg" | "jpeg") => Some("image/jpeg"),
        ("image/gif", _) | (_, "gif") => Some("image/gif"),
        ("image/webp", _) | (_, "webp") => Some("image/webp"),
        ("image/svg+xml", _) | (_, "svg") => Some("image/svg+xml"),
        _ => None,
    };
    if let Some(t) = image {
        return Kind::Image(t);
    }
    if ct.contains("json") || ext == "json" || ct.contains("yaml") || ext == "yaml" || ext == "yml"
    {
        return Kind::Structured;
    }
    if ct == "text/csv" || ext == "csv" {
        return Kind::Table(b',');
    }
    if ct == "text/tab-separated-values" || ext == "tsv" {
        return Kind::Table(b'\t');
    }
    if ct == "text/markdown" || ext == "md" || ext == "markdown" {
        return Kind::Markdown;
    }
    if ct.starts_with("text/") || looks_textual(sample) {
        return Kind::Text;
    }
    Kind::Binary
}

/// Whether `sample` reads as text: valid UTF-8 (a sequence cut at the end allowed) without NUL
/// or other control bytes than tab, CR, LF, FF.
fn looks_textual(sample: &[u8]) -> bool {
    let valid = match std::str::from_utf8(sample) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    valid
        && !sample
            .iter()
            .any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c))
}

/// The part of a text page to show: `bytes` cut after its last line break unless `at_end`.
/// Returns the shown length.
pub(crate) fn text_cut(bytes: &[u8], at_end: bool) -> usize {
    if at_end {
        return bytes.len();
    }
    match bytes.iter().rposition(|&b| b == b'\n') {
        Some(i) => i + 1,
        None => bytes.len(),
    }
}

/// Numbered lines of `text`, the first numbered `first_line`. Returns the markup and the
/// number of the line after the last one shown.
pub(crate) fn text_lines(text: &[u8], first_line: u64) -> (Markup, u64) {
    let text = String::from_utf8_lossy(text);
    let mut lines: Vec<&str> = text.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    let next = first_line + lines.len() as u64;
    let markup = html! {
        table.lines #text-preview {
            caption.muted { "lines " (first_line) "–" (next.saturating_sub(1).max(first_line)) }
            tbody {
                @for (i, line) in lines.iter().enumerate() {
                    tr { td.ln { (first_line + i as u64) } td { (line.strip_suffix('\r').unwrap_or(line)) } }
                }
            }
        }
    };
    (markup, next)
}

/// A table of the first [`TABLE_ROWS`] records of delimited text (the first as header);
/// `complete` says whether `bytes` is the whole file. Ragged rows are shown as they are.
pub(crate) fn table(bytes: &[u8], delimiter: u8, complete: bool) -> Markup {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut error = None;
    for record in reader.records() {
        match record {
            Ok(r) => rows.push(r.iter().map(str::to_owned).collect()),
            // A record cut at the end of a partial read is not an error of the file.
            Err(e) if complete => {
                error = Some(e.to_string());
                break;
            }
            Err(_) => break,
        }
        if rows.len() >= TABLE_ROWS {
            break;
        }
    }
    if !complete && rows.len() < TABLE_ROWS {
        // The last record may be cut by the read window.
        rows.pop();
    }
    let header = if rows.is_empty() {
        Vec::new()
    } else {
        rows.remove(0)
    };
    html! {
        @if let Some(e) = error { p.error role="alert" { "The table could not be read past this point: " (e) } }
        table #table-preview {
            caption.muted { "first " (rows.len()) " rows" }
            thead { tr { @for h in &header { th scope="col" { (h) } } } }
            tbody { @for r in &rows { tr { @for c in r { td { (c) } } } } }
        }
    }
}

/// Markdown rendered to HTML and sanitized (see the module docs).
pub(crate) fn markdown(bytes: &[u8]) -> Markup {
    let text = String::from_utf8_lossy(bytes);
    let mut options = pulldown_cmark::Options::empty();
    options.insert(pulldown_cmark::Options::ENABLE_TABLES);
    options.insert(pulldown_cmark::Options::ENABLE_STRIKETHROUGH);
    options.insert(pulldown_cmark::Options::ENABLE_TASKLISTS);
    let parser = pulldown_cmark::Parser::new_ext(&text, options);
    let mut raw = String::new();
    pulldown_cmark::html::push_html(&mut raw, parser);
    let clean = ammonia::Builder::default()
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .clean(&raw)
        .to_string();
    html! { div.markdown #markdown-preview { (PreEscaped(clean)) } }
}

/// A hex dump of `bytes`, the first at file offset `offset`: offset, 16 bytes in hex, their
/// printable ASCII.
pub(crate) fn hex(bytes: &[u8], offset: u64) -> Markup {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let at = offset + (i as u64) * 16;
        out.push_str(&format!("{at:08x}  "));
        for j in 0..16 {
            match chunk.get(j) {
                Some(b) => out.push_str(&format!("{b:02x} ")),
                None => out.push_str("   "),
            }
            if j == 7 {
                out.push(' ');
            }
        }
        out.push(' ');
        out.extend(chunk.iter().map(|&b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '.'
            }
        }));
        out.push('\n');
    }
    html! { pre.hex #hex-preview { (out) } }
}

/// A collapsible tree of `value` (`<details>`: keyboard-operable without script); the first
/// two levels start open. At most [`TREE_NODES`] nodes are drawn.
pub(crate) fn tree(value: &Value, id: &str) -> Markup {
    let mut budget = TREE_NODES;
    html! {
        p {
            button type="button" data-tree="expand" aria-controls=(id) { "Expand all" } " "
            button type="button" data-tree="collapse" aria-controls=(id) { "Collapse all" }
        }
        div.json #(id) { (node(None, value, 0, &mut budget)) }
        @if budget == 0 { p.muted { "Only the first " (TREE_NODES) " values are shown." } }
    }
}

fn node(key: Option<&str>, value: &Value, depth: usize, budget: &mut usize) -> Markup {
    if *budget == 0 {
        return html! {};
    }
    *budget -= 1;
    let label = html! { @if let Some(k) = key { span.k { (k) } ": " } };
    match value {
        Value::Object(m) => html! {
            details open[depth < 2] {
                summary { (label) "{" (m.len()) "}" }
                @for (k, v) in m { (node(Some(k), v, depth + 1, budget)) }
            }
        },
        Value::Array(a) => html! {
            details open[depth < 2] {
                summary { (label) "[" (a.len()) "]" }
                @for (i, v) in a.iter().enumerate() { (node(Some(&i.to_string()), v, depth + 1, budget)) }
            }
        },
        Value::String(s) => html! { div.leaf { (label) span.s { "\"" (s) "\"" } } },
        other => html! { div.leaf { (label) span.n { (other.to_string()) } } },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_type_then_extension_then_bytes() {
        assert_eq!(kind("a/x.csv", "text/plain", b""), Kind::Table(b','));
        assert_eq!(kind("a/x", "application/json", b""), Kind::Structured);
        assert_eq!(kind("a/x.yml", "", b""), Kind::Structured);
        assert_eq!(
            kind("x.svg", "application/octet-stream", b""),
            Kind::Image("image/svg+xml")
        );
        assert_eq!(kind("x.md", "text/plain", b""), Kind::Markdown);
        assert_eq!(
            kind("x.bin", "application/octet-stream", b"hello\n"),
            Kind::Text
        );
        assert_eq!(
            kind("x.bin", "application/octet-stream", b"\x00\x01"),
            Kind::Binary
        );
    }

    #[test]
    fn hostile_text_is_escaped_everywhere() {
        let evil = b"<script>alert(1)</script>";
        assert!(!text_lines(evil, 1).0.into_string().contains("<script>"));
        assert!(!table(b"h\n<script>x</script>\n", b',', true)
            .into_string()
            .contains("<script>"));
        let v: Value = serde_json::json!({"<b>k</b>": "<img src=x onerror=alert(1)>"});
        let t = tree(&v, "t").into_string();
        assert!(!t.contains("<img") && !t.contains("<b>"));
        assert!(t.contains("&lt;img src=x onerror=alert(1)&gt;"));
    }

    #[test]
    fn markdown_keeps_formatting_and_drops_script() {
        let md = b"# Title\n\n<script>window.x=1</script>\n\n[a](javascript:alert(1)) <img src=x onerror=alert(1)> **bold**";
        let html = markdown(md).into_string();
        assert!(html.contains("<h1>Title</h1>"));
        assert!(html.contains("<strong>bold</strong>"));
        assert!(
            !html.contains("<script") && !html.contains("onerror") && !html.contains("javascript:")
        );
    }

    #[test]
    fn text_pages_end_at_a_line_break_and_number_on() {
        assert_eq!(text_cut(b"a\nb\nc", false), 4);
        assert_eq!(text_cut(b"a\nb\nc", true), 5);
        let (m, next) = text_lines(b"x\ny\n", 10);
        assert_eq!(next, 12);
        assert!(m.into_string().contains(">11<"));
    }

    #[test]
    fn csv_table_has_header_and_cells_and_drops_a_cut_row() {
        let m = table(b"a,b\n1,\"x,y\"\n2,z\n3,partial", b',', false).into_string();
        assert!(m.contains("<th scope=\"col\">a</th>"));
        assert!(m.contains("<td>x,y</td>"));
        assert!(!m.contains("partial"));
    }

    #[test]
    fn hex_dump_shows_offsets_and_ascii() {
        let m = hex(b"ABC\x00", 32).into_string();
        assert!(m.contains("00000020  41 42 43 00"));
        assert!(m.contains("ABC."));
    }
}
