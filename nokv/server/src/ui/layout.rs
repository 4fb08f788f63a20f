//! The page shell, the request context of a page and the link builder of the web view.
//!
//! Every link a page prints is built here: the path under the server's prefix (`/roots/<name>`
//! behind `--control`), each path segment percent-encoded, query values `urlencoded`. Text is
//! interpolated through `maud`, which escapes it.

use axum::extract::Request;
use axum::http::StatusCode;
use maud::{html, Markup, DOCTYPE};

use super::super::auth::Access;
use super::super::handler::Shared;
use super::super::state::PathPrefix;
/// One path segment of a link, percent-encoded (everything but unreserved characters).
pub(crate) use nokv_protocol::url::encode_component as segment;
use nokv_protocol::url::encode_path;

/// What a page reads from its request: the server state and the prefix of every link.
pub(crate) struct Cx {
    /// The server state (client, Workbench facade, options).
    pub(crate) state: Shared,
    /// The path prefix of this server's routes (`""`, or `/roots/<name>`).
    pub(crate) base: String,
    /// Whether a logout button makes sense (the server has a token).
    pub(crate) session: bool,
}

impl Cx {
    /// The context of `req`.
    pub(crate) fn of(state: Shared, req: &Request) -> Cx {
        let base = req
            .extensions()
            .get::<PathPrefix>()
            .map(|p| p.0.clone())
            .unwrap_or_default();
        let session = matches!(req.extensions().get::<Access>(), Some(Access::Session));
        Cx {
            state,
            base,
            session,
        }
    }

    /// The link to web-view page `page` (e.g. `"wb/run-1"`, segments already encoded) with the
    /// query `pairs` (empty values are left out).
    pub(crate) fn link(&self, page: &str, pairs: &[(&str, &str)]) -> String {
        let mut out = format!("{}/ui/{page}", self.base);
        let query = query(pairs);
        if !query.is_empty() {
            out.push('?');
            out.push_str(&query);
        }
        out
    }

    /// The `/v1/` download link of `path` in `workbench` at read version `version` (live when
    /// `None`): Range-capable, accepted with the session cookie.
    pub(crate) fn download(&self, workbench: &str, path: &str, version: Option<u64>) -> String {
        let mut out = format!(
            "{}/v1/workbenches/{}/files/{}",
            self.base,
            segment(workbench),
            encode_path(path)
        );
        if let Some(v) = version {
            out.push_str(&format!("?version={v}"));
        }
        out
    }
}

/// `k=v&…` with urlencoded values; pairs with an empty value are left out.
pub(crate) fn query(pairs: &[(&str, &str)]) -> String {
    let kept: Vec<(&str, &str)> = pairs
        .iter()
        .copied()
        .filter(|(_, v)| !v.is_empty())
        .collect();
    serde_urlencoded::to_string(kept).unwrap_or_default()
}

/// The decoded query string of a request, in order (repeated names kept: the search form's
/// predicate rows). A query that does not decode is treated as empty.
#[derive(Debug, Default, Clone)]
pub(crate) struct Params(pub(crate) Vec<(String, String)>);

impl Params {
    /// The query of `req`.
    pub(crate) fn of(req: &Request) -> Params {
        Params(
            req.uri()
                .query()
                .and_then(|q| serde_urlencoded::from_str(q).ok())
                .unwrap_or_default(),
        )
    }

    /// The first value of `name`, trimmed; `None` when absent or empty.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// Every value of `name` (empty ones included, so parallel lists stay aligned).
    pub(crate) fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .collect()
    }

    /// The first value of `name` as a number; `None` when absent or not a number.
    pub(crate) fn number(&self, name: &str) -> Option<u64> {
        self.get(name).and_then(|v| v.parse().ok())
    }
}

/// A rendered page before the shell: status, title, which nav item is current, body.
pub(crate) struct Page {
    /// HTTP status.
    pub(crate) status: StatusCode,
    /// `<title>` and `<h1>`.
    pub(crate) title: String,
    /// The nav item this page belongs to (`"workbenches"`, `"lineage"`, …).
    pub(crate) nav: &'static str,
    /// The page's content.
    pub(crate) body: Markup,
}

impl Page {
    /// A 200 page.
    pub(crate) fn ok(title: impl Into<String>, nav: &'static str, body: Markup) -> Page {
        Page {
            status: StatusCode::OK,
            title: title.into(),
            nav,
            body,
        }
    }

    /// A page saying what could not be shown (status 404).
    pub(crate) fn not_found(message: &str) -> Page {
        Page {
            status: StatusCode::NOT_FOUND,
            title: "Not found".into(),
            nav: "",
            body: html! { p.error role="alert" { (message) } },
        }
    }

    /// A page for a refused request (status 400) with the reason.
    pub(crate) fn bad_request(message: &str) -> Page {
        Page {
            status: StatusCode::BAD_REQUEST,
            title: "Bad request".into(),
            nav: "",
            body: html! { p.error role="alert" { (message) } },
        }
    }
}

/// The navigation items: (key, label, page).
const NAV: [(&str, &str, &str); 6] = [
    ("workbenches", "Workbenches", ""),
    ("lineage", "Lineage", "lineage"),
    ("feed", "Live changes", "feed"),
    ("search", "Search", "search"),
    ("aggregate", "Aggregate", "aggregate"),
    ("gc", "GC explain", "gc"),
];

/// The whole HTML document of `page`.
pub(crate) fn shell(cx: &Cx, page: &Page) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (page.title) " · NoKV" }
                link rel="stylesheet" href=(cx.link("assets/style.css", &[]));
                script src=(cx.link("assets/app.js", &[])) defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href=(cx.link("", &[])) { "NoKV" }
                    nav aria-label="Main" {
                        ul {
                            @for (key, label, target) in NAV {
                                li {
                                    @if key == page.nav {
                                        a href=(cx.link(target, &[])) aria-current="page" { (label) }
                                    } @else {
                                        a href=(cx.link(target, &[])) { (label) }
                                    }
                                }
                            }
                        }
                    }
                    @if cx.session {
                        form.logout method="post" action=(cx.link("logout", &[])) {
                            button type="submit" { "Log out" }
                        }
                    }
                }
                main #main {
                    h1 { (page.title) }
                    (page.body)
                }
            }
        }
    }
}

/// A byte count for people: `512 B`, `1.5 KiB`, `3.2 MiB`.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// The first 12 hex digits of a commit id (the full id goes in a `title`).
pub(crate) fn short(hex: &str) -> &str {
    hex.get(..12).unwrap_or(hex)
}

/// An error envelope's message (or a generic line for anything else).
pub(crate) fn envelope_message(v: &serde_json::Value) -> String {
    let code = v.get("code").and_then(|c| c.as_str()).unwrap_or("Error");
    let msg = v
        .get("message")
        .and_then(|m| m.as_str())
        .unwrap_or("the request failed");
    format!("{code}: {msg}")
}

/// An error paragraph (`role="alert"`).
pub(crate) fn alert(message: &str) -> Markup {
    html! { p.error role="alert" { (message) } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_queries_are_encoded() {
        assert_eq!(segment("<script>a b/c"), "%3Cscript%3Ea%20b%2Fc");
        assert_eq!(segment("ok-_.~1"), "ok-_.~1");
        assert_eq!(
            query(&[("path", "a&b=c/<d>"), ("empty", ""), ("at", "x y")]),
            "path=a%26b%3Dc%2F%3Cd%3E&at=x+y"
        );
    }

    #[test]
    fn byte_counts_read_well() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 << 20), "3.0 MiB");
    }
}
