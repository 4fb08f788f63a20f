//! The web view's two static assets, compiled into the binary (no network, no bundler): the
//! stylesheet and the one script (the live feed's polling and the JSON tree's expand/collapse
//! buttons). Served only to a request that may see the web view.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// The stylesheet (`/ui/assets/style.css`).
pub(crate) const STYLE: &str = r#"
:root { --fg:#1b1f24; --muted:#57606a; --line:#d0d7de; --bg:#ffffff; --soft:#f6f8fa; --accent:#0a58ca; --bad:#b42318; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--fg); background:var(--bg); }
a { color:var(--accent); }
a:focus, button:focus, input:focus, select:focus, summary:focus { outline:3px solid #f59e0b; outline-offset:1px; }
.skip { position:absolute; left:-999px; } .skip:focus { left:8px; top:8px; background:#fff; padding:4px; z-index:2; }
header.top { display:flex; align-items:center; gap:1.5rem; padding:.6rem 1.2rem; background:#0d1117; color:#fff; flex-wrap:wrap; }
header.top a { color:#e6edf3; text-decoration:none; }
header.top .brand { font-weight:700; font-size:1.1rem; }
header.top nav ul { list-style:none; display:flex; gap:1rem; margin:0; padding:0; flex-wrap:wrap; }
header.top a[aria-current=page] { border-bottom:2px solid #f59e0b; }
header.top form.logout { margin-left:auto; }
main { padding:1rem 1.2rem 3rem; max-width:1200px; }
h1 { font-size:1.4rem; margin:.3rem 0 1rem; word-break:break-all; }
h2 { font-size:1.1rem; margin:1.4rem 0 .5rem; }
table { border-collapse:collapse; width:100%; margin:.5rem 0; }
th, td { border:1px solid var(--line); padding:.3rem .5rem; text-align:left; vertical-align:top; }
th { background:var(--soft); font-weight:600; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
code, pre, .mono { font-family:ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size:13px; }
.muted { color:var(--muted); }
.error { color:var(--bad); font-weight:600; }
.card { border:1px solid var(--line); border-radius:6px; padding:.6rem 1rem; background:var(--soft); }
.card dl { display:grid; grid-template-columns:max-content 1fr; gap:.2rem 1rem; margin:0; }
.card dt { font-weight:600; } .card dd { margin:0; word-break:break-all; }
.crumbs { margin:.2rem 0 .8rem; } .crumbs a, .crumbs span { margin-right:.3rem; }
.tabs a { margin-right:1rem; }
form.inline { display:flex; gap:.5rem; align-items:end; flex-wrap:wrap; margin:.5rem 0; }
form.inline label { display:flex; flex-direction:column; font-size:.85rem; gap:.15rem; }
input, select, button { font:inherit; padding:.25rem .4rem; }
table.lines { width:auto; border:none; }
table.lines td { border:none; padding:0 .6rem; white-space:pre-wrap; word-break:break-all; }
table.lines td.ln { color:var(--muted); text-align:right; user-select:none; }
pre.hex { background:var(--soft); padding:.6rem; overflow:auto; }
.json details { margin-left:1.1rem; } .json summary { cursor:pointer; }
.json .leaf { margin-left:1.1rem; } .json .k { color:#953800; } .json .s { color:#0a3069; } .json .n { color:#0550ae; }
.markdown { border:1px solid var(--line); padding:.5rem 1rem; border-radius:6px; }
img.preview { max-width:100%; border:1px solid var(--line); background:repeating-conic-gradient(#eee 0 25%, #fff 0 50%) 0 0/16px 16px; }
svg.dag { border:1px solid var(--line); background:#fff; max-width:100%; height:auto; }
svg.dag text { font:12px system-ui, sans-serif; }
svg.dag .node rect { fill:#eef4ff; stroke:#0a58ca; }
svg.dag .node.run rect { fill:#f0fff4; stroke:#1a7f37; }
svg.dag a:focus rect { stroke:#f59e0b; stroke-width:3; }
svg.dag .edge { stroke:#57606a; fill:none; stroke-width:1.4; }
.feed-status { font-size:.85rem; }
.login { max-width:380px; margin:4rem auto; }
"#;

/// The script (`/ui/assets/app.js`): polls the change feed with its cursor on the live feed
/// page and prepends each new event (text only, never HTML); expands or collapses every node
/// of a JSON tree.
pub(crate) const SCRIPT: &str = r#"'use strict';
(function () {
  function feed(box) {
    var url = box.getAttribute('data-events-url');
    var cursor = box.getAttribute('data-cursor');
    var body = document.getElementById('feed-rows');
    var status = document.getElementById('feed-status');
    var cols = ['commit_version', 'workbench_id', 'kind', 'path', 'after_generation'];
    function tick() {
      var u = url + (url.indexOf('?') < 0 ? '?' : '&') + 'after=' + encodeURIComponent(cursor);
      fetch(u, { credentials: 'same-origin', cache: 'no-store' })
        .then(function (r) { if (!r.ok) { throw new Error('HTTP ' + r.status); } return r.json(); })
        .then(function (d) {
          (d.events || []).forEach(function (ev) {
            var tr = document.createElement('tr');
            tr.className = 'event';
            cols.forEach(function (c) {
              var td = document.createElement('td');
              if (c === 'commit_version' || c === 'after_generation') { td.className = 'num'; }
              var v = ev[c];
              td.textContent = (v === null || v === undefined) ? '' : String(v);
              tr.appendChild(td);
            });
            body.insertBefore(tr, body.firstChild);
          });
          if (d.cursor) { cursor = d.cursor; box.setAttribute('data-cursor', cursor); }
          status.textContent = 'Live: checked at ' + new Date().toLocaleTimeString();
        })
        .catch(function (e) { status.textContent = 'Not updating: ' + e.message; })
        .then(function () { setTimeout(tick, 1000); });
    }
    tick();
  }
  function trees() {
    document.querySelectorAll('button[data-tree]').forEach(function (b) {
      b.addEventListener('click', function () {
        var open = b.getAttribute('data-tree') === 'expand';
        var root = document.getElementById(b.getAttribute('aria-controls'));
        if (root) { root.querySelectorAll('details').forEach(function (d) { d.open = open; }); }
      });
    });
  }
  document.addEventListener('DOMContentLoaded', function () {
    var box = document.getElementById('feed');
    if (box) { feed(box); }
    trees();
  });
})();
"#;

/// `GET /ui/assets/{name}`.
pub(crate) async fn serve(Path(name): Path<String>) -> Response {
    let (body, kind) = match name.as_str() {
        "style.css" => (STYLE, "text/css; charset=utf-8"),
        "app.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        _ => return (StatusCode::NOT_FOUND, "no such asset").into_response(),
    };
    super::headers::harden(
        (
            [(header::CONTENT_TYPE, HeaderValue::from_static(kind))],
            body,
        )
            .into_response(),
        "default-src 'none'",
    )
}
