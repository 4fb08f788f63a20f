//! The response headers of the web view (a leaf of `ui/`): [`harden`], which every page
//! carries with its `Content-Security-Policy`, and [`inert`], which a `/v1/` answer sent to a
//! browser session carries so stored bytes never render as a page of this origin.

use axum::http::{header, HeaderValue};
use axum::response::Response;

/// Marks a `/v1/` answer sent to a browser session (the download link) inert: a sandboxing
/// policy, no content sniffing, and `attachment` so stored HTML or SVG never renders as a page
/// of this origin.
pub(crate) fn inert(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment"),
    );
    response
}

/// The page policy: scripts and styles only from this server's `/ui/assets/`, images from it
/// (previews) and `data:` (none are produced from stored bytes), fetches to itself (the live
/// feed), forms to itself, never framed.
pub(super) const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
     base-uri 'none'";

/// The headers every page carries (see the module docs); `policy` is its CSP.
pub(super) fn harden(mut response: Response, policy: &str) -> Response {
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(policy) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}
