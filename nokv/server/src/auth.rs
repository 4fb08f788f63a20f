//! Who sent a request: the server's `--token-file` token (an admin), a token of the store's
//! registry (`nokv token create`, [`nokv::access::TokenRegistry`]), or the session cookie of the
//! web view (`/ui/`, see `docs/ui.md`, "Login"). What the caller may then do is decided by
//! [`super::policy`].
//!
//! A browser cannot attach `Authorization: Bearer` to a link, so the web view's login form
//! exchanges a token for a cookie. The cookie never holds the token itself: its value is
//! `hex(SHA-256("nokv.ui.session.v1\0" ‖ token))`, a bearer-equivalent secret. For the
//! `--token-file` token it is recomputed; for a registry token the server remembers, in memory,
//! which token id a session value stands for, and checks that record on every request, so a
//! revoked or expired token's sessions stop at once (a server restart ends them all: log in
//! again). A session is accepted for the web view and for `GET`/`HEAD` of the `/v1/` byte
//! endpoints (the download link); every write still needs the bearer token, so a forged
//! cross-site request can never change the store.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::http::{header, HeaderMap, Method};
use nokv::access::token::same_text;
use nokv::access::{AuthFailure, Caller, Lookup, TokenRegistry};
use sha2::{Digest, Sha256};

/// Name of the web view's session cookie.
pub(crate) const SESSION_COOKIE: &str = "nokv_session";

/// Most web-view sessions of registry tokens a server remembers (the oldest is forgotten).
const MAX_SESSIONS: usize = 4096;

/// How a request authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The server has no token and an empty registry (loopback only): everything is open.
    Open,
    /// A correct `Authorization: Bearer` header.
    Bearer,
    /// A correct web-view session cookie.
    Session,
    /// Neither; the reason (`missing`, `unknown`, `expired`, `revoked`, `registry_unreadable`).
    Denied(&'static str),
}

impl Access {
    /// Whether a request with this access may see the web view's pages and assets.
    pub(crate) fn sees_ui(self) -> bool {
        !matches!(self, Access::Denied(_))
    }
}

/// The web-view sessions of registry tokens: session value → token id.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    map: Mutex<HashMap<String, String>>,
}

impl Sessions {
    /// Remembers that `value` is a session of the token with record `id`.
    pub(crate) fn insert(&self, value: String, id: String) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_SESSIONS {
            map.clear();
        }
        map.insert(value, id);
    }

    fn token_id(&self, value: &str) -> Option<String> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(value).cloned()
    }
}

/// What a server authenticates against.
pub(crate) struct Authority<'a> {
    /// The `--token-file` token (an admin).
    pub(crate) token: Option<&'a str>,
    /// The store's token registry.
    pub(crate) registry: &'a TokenRegistry,
    /// The web view's registry-token sessions.
    pub(crate) sessions: &'a Sessions,
    /// Now, Unix ms (expiry).
    pub(crate) now_ms: u64,
}

impl Authority<'_> {
    /// Whether requests need a token: a `--token-file` token, or any record in the registry.
    pub(crate) fn protected(&self) -> bool {
        self.token.is_some() || self.registry.has_records()
    }

    /// The caller of a presented token text (the `--token-file` token compared in constant
    /// time, else the registry). Errors: the refusal reason.
    pub(crate) fn caller_of(&self, presented: &str) -> Result<Caller, &'static str> {
        let presented = presented.trim();
        if self.token.is_some_and(|t| same_text(presented, t.trim())) {
            return Ok(Caller::admin("admin"));
        }
        self.registry
            .authenticate(presented, self.now_ms)
            .map_err(reason)
    }
}

fn reason(f: AuthFailure) -> &'static str {
    match f {
        AuthFailure::Unknown => "unknown",
        AuthFailure::Expired => "expired",
        AuthFailure::Revoked => "revoked",
        AuthFailure::Unreadable => "registry_unreadable",
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

/// Classifies a request and names its caller (constant-time secret comparisons). One read of
/// the registry per request.
pub(crate) fn access(auth: &Authority<'_>, headers: &HeaderMap) -> (Access, Option<Caller>) {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if let (Some(presented), Some(token)) = (bearer, auth.token) {
        if same_text(presented, token.trim()) {
            return (Access::Bearer, Some(Caller::admin("admin")));
        }
    }
    match auth.registry.lookup(bearer, auth.now_ms) {
        Lookup::Empty if auth.token.is_none() => {
            return (Access::Open, Some(Caller::admin("anonymous")))
        }
        Lookup::Caller(c) => return (Access::Bearer, Some(c)),
        Lookup::Refused(f) if bearer.is_some() => return (Access::Denied(reason(f)), None),
        // A bearer that is neither the server's token nor a registry token.
        Lookup::Empty if bearer.is_some() => return (Access::Denied("unknown"), None),
        _ => {}
    }
    let Some(value) = cookie(headers, SESSION_COOKIE) else {
        return (Access::Denied("missing"), None);
    };
    if let Some(token) = auth.token {
        if same_text(value, &session_value(token)) {
            return (Access::Session, Some(Caller::admin("admin")));
        }
    }
    match auth.sessions.token_id(value) {
        Some(id) => match auth.registry.caller_by_id(&id, auth.now_ms) {
            Ok(c) => (Access::Session, Some(c)),
            Err(f) => (Access::Denied(reason(f)), None),
        },
        None => (Access::Denied("unknown"), None),
    }
}

/// The `--control` dispatcher's coarse check before a root's own guard decides: without a
/// server token everything passes; with one, the token itself, a bearer of a registry token's
/// shape, or any session cookie (the root's guard verifies them against its own registry).
pub(crate) fn may_reach_root(token: Option<&str>, headers: &HeaderMap) -> bool {
    let Some(token) = token else {
        return true;
    };
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match bearer {
        Some(p) => same_text(p.trim(), token.trim()) || TokenRegistry::token_id(p).is_some(),
        None => cookie(headers, SESSION_COOKIE).is_some(),
    }
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
        Access::Session | Access::Denied(_) => Decision::Refuse,
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
    fn access_tells_bearer_session_registry_and_denied_apart() {
        let dir = tempfile::tempdir().unwrap();
        let registry = TokenRegistry::at_store(dir.path());
        let sessions = Sessions::default();
        let open = Authority {
            token: None,
            registry: &registry,
            sessions: &sessions,
            now_ms: 10,
        };
        assert_eq!(access(&open, &HeaderMap::new()).0, Access::Open);
        let auth = Authority {
            token: Some("tok"),
            ..open
        };
        let (a, c) = access(&auth, &headers(&[("authorization", "Bearer tok")]));
        assert_eq!(a, Access::Bearer);
        assert_eq!(c.unwrap().name, "admin");
        let cookie = format!("a=b; {SESSION_COOKIE}={}", session_value("tok"));
        assert_eq!(
            access(&auth, &headers(&[("cookie", &cookie)])).0,
            Access::Session
        );
        let wrong = format!("{SESSION_COOKIE}={}", session_value("nope"));
        assert_eq!(
            access(&auth, &headers(&[("cookie", &wrong)])).0,
            Access::Denied("unknown")
        );
        assert_eq!(
            access(&auth, &headers(&[("authorization", "Bearer no")])).0,
            Access::Denied("unknown")
        );
        assert_eq!(
            access(&auth, &HeaderMap::new()).0,
            Access::Denied("missing")
        );
        // A registry token, and its session until it is revoked.
        let ci = registry.create("ci", &["read".into()], None, 0).unwrap();
        let bearer = format!("Bearer {}", ci.token);
        let (a, c) = access(&auth, &headers(&[("authorization", &bearer)]));
        assert_eq!((a, c.unwrap().name.as_str()), (Access::Bearer, "ci"));
        let value = session_value(&ci.token);
        sessions.insert(value.clone(), ci.record.id.clone());
        let cookie = format!("{SESSION_COOKIE}={value}");
        assert_eq!(
            access(&auth, &headers(&[("cookie", &cookie)])).0,
            Access::Session
        );
        registry.revoke("ci", 20).unwrap();
        assert_eq!(
            access(&auth, &headers(&[("cookie", &cookie)])).0,
            Access::Denied("revoked")
        );
        assert_eq!(
            access(&auth, &headers(&[("authorization", &bearer)])).0,
            Access::Denied("revoked")
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
            decide(Access::Denied("missing"), &Method::GET, "/ui/"),
            Decision::Ui(Access::Denied("missing"))
        );
        assert_eq!(
            decide(Access::Denied("missing"), &Method::GET, "/uix"),
            Decision::Refuse
        );
    }
}
