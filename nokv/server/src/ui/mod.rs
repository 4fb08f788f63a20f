//! The read-only web view under `/ui/` (see `docs/ui.md`): server-rendered HTML pages over the
//! same [`nokv::Client`] and Workbench facade calls the `/v1/` routes use, behind the server's
//! token (a login form exchanges it for a session cookie, [`super::auth`]).
//!
//! One file per page (`workbenches`, `tree`, `file`, `lineage`, `snapshots`, `feed`, `gc`,
//! `query`, `login`); `layout` is the page shell and the link builder, `source` opens the
//! state a page reads (live or at a snapshot), `preview` turns a file's bytes into its preview,
//! `dag` lays out the lineage picture, `assets` holds the stylesheet and the one script. Every
//! page answers with the headers of [`headers::harden`]: a strict `Content-Security-Policy` (no inline
//! script, nothing from another origin), `nosniff`, no referrer, no caching. Templates are
//! `maud`, which escapes every interpolated value; stored content never reaches the page
//! unescaped (Markdown goes through an allow-list sanitizer, images only through `<img>` from
//! [`file::raw`] with a sandboxing policy of their own).

mod assets;
mod dag;
mod feed;
mod file;
mod gc;
mod headers;
mod layout;
mod lineage;
mod login;
mod memo;
mod preview;
mod query;
mod snapshots;
mod source;
mod tree;
mod workbenches;

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use super::auth::Access;
use super::handler::{blocking, Shared};
pub(crate) use headers::inert;
use headers::{harden, PAGE_POLICY};
use layout::{Cx, Page, Params};

/// The web view's routes (merged into the server's router; the guard lets every `/ui` path
/// through to [`enter`]).
pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/ui", get(|| async { Redirect::to("ui/") }))
        .route("/ui/", get(page_workbenches))
        .route("/ui/login", get(login::form).post(login::submit))
        .route("/ui/logout", axum::routing::post(login::logout))
        .route("/ui/assets/{name}", get(assets::serve))
        .route("/ui/wb/{id}", get(page_tree))
        .route("/ui/file/{id}", get(page_file))
        .route("/ui/raw/{id}", get(file::raw))
        .route("/ui/lineage", get(page_lineage))
        .route("/ui/commit/{hex}", get(page_commit))
        .route("/ui/snapshots/{id}", get(page_snapshots))
        .route("/ui/feed", get(page_feed))
        .route("/ui/feed/events", get(feed::events))
        .route("/ui/gc", get(page_gc))
        .route("/ui/search", get(page_search))
        .route("/ui/aggregate", get(page_aggregate))
        .route("/ui/{*rest}", get(page_missing))
}

/// The guard's hand-off for a `/ui` path: with access the page runs; without it the login form
/// (and its POST) is all that answers — any other page or asset gets the form with 401.
pub(crate) async fn enter(access: Access, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let login = path == "/ui/login";
    if access.sees_ui() || login {
        let mut req = req;
        req.extensions_mut().insert(access);
        return next.run(req).await;
    }
    let cx_base = req
        .extensions()
        .get::<super::state::PathPrefix>()
        .map(|p| p.0.clone())
        .unwrap_or_default();
    login::refused(&cx_base, None)
}

/// Renders `build` on the blocking pool (pages read the store synchronously) into an HTML
/// response inside the page shell.
async fn render(
    state: Shared,
    req: Request,
    build: impl FnOnce(&Cx, &Params) -> Page + Send + 'static,
) -> Response {
    let cx = Cx::of(state, &req);
    let params = Params::of(&req);
    drop(req);
    let page = blocking(move || {
        let page = build(&cx, &params);
        (page.status, layout::shell(&cx, &page).into_string())
    })
    .await;
    let (status, html) = match page {
        Ok(p) => p,
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "<!DOCTYPE html><title>nokv</title><p>The page failed; reload it.</p>".to_string(),
        ),
    };
    harden(
        (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            )],
            html,
        )
            .into_response(),
        PAGE_POLICY,
    )
}

async fn page_workbenches(State(s): State<Shared>, req: Request) -> Response {
    render(s, req, workbenches::page).await
}

async fn page_tree(State(s): State<Shared>, Path(id): Path<String>, req: Request) -> Response {
    render(s, req, move |cx, q| tree::page(cx, &id, q)).await
}

async fn page_file(State(s): State<Shared>, Path(id): Path<String>, req: Request) -> Response {
    render(s, req, move |cx, q| file::page(cx, &id, q)).await
}

async fn page_lineage(State(s): State<Shared>, req: Request) -> Response {
    render(s, req, lineage::page).await
}

async fn page_commit(State(s): State<Shared>, Path(hex): Path<String>, req: Request) -> Response {
    render(s, req, move |cx, q| lineage::commit_page(cx, &hex, q)).await
}

async fn page_snapshots(State(s): State<Shared>, Path(id): Path<String>, req: Request) -> Response {
    render(s, req, move |cx, _| snapshots::page(cx, &id)).await
}

async fn page_feed(State(s): State<Shared>, req: Request) -> Response {
    render(s, req, feed::page).await
}

async fn page_gc(State(s): State<Shared>, req: Request) -> Response {
    render(s, req, gc::page).await
}

async fn page_search(State(s): State<Shared>, req: Request) -> Response {
    render(s, req, query::search_page).await
}

async fn page_aggregate(State(s): State<Shared>, req: Request) -> Response {
    render(s, req, query::aggregate_page).await
}

async fn page_missing(State(s): State<Shared>, req: Request) -> Response {
    render(s, req, |_, _| Page::not_found("No such page.")).await
}
