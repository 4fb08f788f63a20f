//! Who may send a request: the bearer token of API clients and the session cookie of the web
//! view (`/ui/`, see `docs/ui.md`, "Login").
//!
//! A browser cannot attach `Authorization: Bearer` to a link, so the web view's login form
//! exchanges the token for a cookie. The cookie never holds the token itself: its value is
//! `hex(SHA-256("nokv.ui.session.v1\0" ‖ token))`, a bearer-equivalent secret that stays valid
//! exactly as long as the server's token does (`HttpOnly`, `SameSite=Strict`, `Path=/`). A
//! session is accepted for the web view and for `GET`/`HEAD` of the `/v1/` byte endpoints (the
//! download link); every write still needs the bearer token, so a forged cross-site request
//! can never change the store.

use axum::http::{header, HeaderMap, Method};
use sha2::{Digest, Sha256};

use super::handler::same_secret;

/// Name of the web view's session cookie.
pub(crate) const SESSION_COOKIE: &str = "nokv_session";

/// How a request authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The server has no token (loopback only): everything is open.
    Open,
    /// A correct `Authorization: Bearer` header.
    Bearer,
    /// A correct web-view session cookie.
    Session,
    /// Neither.
    Denied,
}

impl Access {
    /// Whether a request with this access may see the web view's pages and assets.
    pub(crate) fn sees_ui(self) -> bool {
        !matches!(self, Access::Denied)
    }
}

/// The session cookie's value for `token`: 64 lowercase hex digits.
pub(crate) fn session_value(token: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"nokv.ui.session.v1\0");
    h.update(token.trim().as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The value of cookie `name` in the request's `Cookie` headers, if any.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// Classifies a request against the server's `token` (constant-time comparisons).
pub(crate) fn access(token: Option<&str>, headers: &HeaderMap) -> Access {
    let Some(token) = token else {
        return Access::Open;
    };
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if bearer.is_some_and(|p| same_secret(p.trim().as_bytes(), token.trim().as_bytes())) {
        return Access::Bearer;
    }
    let expected = session_value(token);
    if cookie(headers, SESSION_COOKIE)
        .is_some_and(|c| same_secret(c.as_bytes(), expected.as_bytes()))
    {
        return Access::Session;
    }
    Access::Denied
}

/// Whether `path` (without a `/roots/<name>` prefix) belongs to the web view.
pub(crate) fn is_ui_path(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

/// What the front guard does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Run it.
    Allow,
    /// Run it, and mark the answer inert for a browser (a session-authenticated download:
    /// `Content-Security-Policy: sandbox`, `nosniff`, `Content-Disposition: attachment`).
    AllowInert,
    /// A web-view path: the web view decides (pages without access answer the login form).
    Ui(Access),
    /// 401.
    Refuse,
}

/// The guard's decision for `method path` with `access` (see the module docs).
pub(crate) fn decide(access: Access, method: &Method, path: &str) -> Decision {
    if is_ui_path(path) {
        return Decision::Ui(access);
    }
    match access {
        Access::Open | Access::Bearer => Decision::Allow,
        Access::Session if *method == Method::GET || *method == Method::HEAD => {
            Decision::AllowInert
        }
        Access::Session | Access::Denied => Decision::Refuse,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn session_cookie_is_derived_not_the_token() {
        let v = session_value("s3cret");
        assert_eq!(v.len(), 64);
        assert!(!v.contains("s3cret"));
        assert_eq!(v, session_value("s3cret\n"));
        assert_ne!(v, session_value("other"));
    }

    #[test]
    fn access_tells_bearer_session_and_denied_apart() {
        let t = Some("tok");
        assert_eq!(access(None, &HeaderMap::new()), Access::Open);
        assert_eq!(
            access(t, &headers(&[("authorization", "Bearer tok")])),
            Access::Bearer
        );
        let c = format!("a=b; {SESSION_COOKIE}={}", session_value("tok"));
        assert_eq!(access(t, &headers(&[("cookie", &c)])), Access::Session);
        let wrong = format!("{SESSION_COOKIE}={}", session_value("nope"));
        assert_eq!(access(t, &headers(&[("cookie", &wrong)])), Access::Denied);
        assert_eq!(
            access(t, &headers(&[("authorization", "Bearer no")])),
            Access::Denied
        );
    }

    #[test]
    fn a_session_never_writes_through_the_api() {
        assert_eq!(
            decide(Access::Session, &Method::GET, "/v1/workbenches/a/files/x"),
            Decision::AllowInert
        );
        assert_eq!(
            decide(Access::Session, &Method::PUT, "/v1/workbenches/a/files/x"),
            Decision::Refuse
        );
        assert_eq!(
            decide(
                Access::Session,
                &Method::POST,
                "/v1/tools/workbench_put_file"
            ),
            Decision::Refuse
        );
        assert_eq!(
            decide(Access::Denied, &Method::GET, "/ui/"),
            Decision::Ui(Access::Denied)
        );
        assert_eq!(
            decide(Access::Denied, &Method::GET, "/uix"),
            Decision::Refuse
        );
    }
}
