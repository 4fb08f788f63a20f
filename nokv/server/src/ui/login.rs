//! The login form (`/ui/login`): the only web-view page served without a session. It posts the
//! server's token; a correct one sets the session cookie ([`super::super::auth`]) and goes to
//! the workbench list, a wrong one shows the form again with 401. Nothing of the store is read
//! before the token is checked. The form carries its own small stylesheet inline, allowed by
//! its hash in the page's policy, since the assets themselves need a session.

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use maud::{html, PreEscaped, DOCTYPE};
use sha2::{Digest, Sha256};

use super::super::auth::{session_value, SESSION_COOKIE};
use super::super::handler::{same_secret, Shared};
use super::super::state::PathPrefix;

const LOGIN_STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1b1f24}\
main{max-width:380px;margin:4rem auto;padding:0 1rem}label{display:block;margin:.6rem 0 .2rem}\
input{font:inherit;width:100%;padding:.35rem}button{font:inherit;margin-top:.8rem;padding:.35rem .9rem}\
.error{color:#b42318;font-weight:600}";

fn policy() -> String {
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(LOGIN_STYLE));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; form-action 'self'; \
         frame-ancestors 'none'; base-uri 'none'"
    )
}

fn prefix(req: &Request) -> String {
    req.extensions()
        .get::<PathPrefix>()
        .map(|p| p.0.clone())
        .unwrap_or_default()
}

/// The login page with `status` and an optional error line.
fn login_page(base: &str, status: StatusCode, error: Option<&str>) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Log in · NoKV" }
                style { (PreEscaped(LOGIN_STYLE)) }
            }
            body {
                main {
                    h1 { "NoKV" }
                    p { "This server needs its token. It is kept in a cookie for this server only." }
                    @if let Some(e) = error {
                        p.error role="alert" #login-error { (e) }
                    }
                    form method="post" action=(format!("{base}/ui/login")) {
                        label for="token" { "Token" }
                        input #token type="password" name="token" autocomplete="current-password" required autofocus;
                        button type="submit" { "Log in" }
                    }
                }
            }
        }
    };
    super::headers::harden(
        (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            )],
            markup.into_string(),
        )
            .into_response(),
        &policy(),
    )
}

/// The answer to a web-view request without access: the login form, 401.
pub(crate) fn refused(base: &str, error: Option<&str>) -> Response {
    login_page(base, StatusCode::UNAUTHORIZED, error)
}

/// `GET /ui/login`.
pub(crate) async fn form(State(s): State<Shared>, req: Request) -> Response {
    let base = prefix(&req);
    if s.opts.token.is_none() {
        return see_other(&format!("{base}/ui/"), None);
    }
    login_page(&base, StatusCode::OK, None)
}

fn see_other(location: &str, cookie: Option<String>) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    if let Some(c) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        r.headers_mut().insert(header::SET_COOKIE, c);
    }
    r
}

/// `POST /ui/login` (form field `token`): sets the session cookie and redirects to the
/// workbench list, or answers the form again with 401.
pub(crate) async fn submit(State(s): State<Shared>, req: Request) -> Response {
    let base = prefix(&req);
    let Some(token) = s.opts.token.clone() else {
        return see_other(&format!("{base}/ui/"), None);
    };
    let body: Bytes = match axum::body::to_bytes(req.into_body(), 16 * 1024).await {
        Ok(b) => b,
        Err(_) => return refused(&base, Some("The form could not be read.")),
    };
    let fields: Vec<(String, String)> = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let presented = fields
        .iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    if !same_secret(presented.as_bytes(), token.trim().as_bytes()) {
        return refused(&base, Some("Wrong token."));
    }
    let cookie = format!(
        "{SESSION_COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
        session_value(&token)
    );
    see_other(&format!("{base}/ui/"), Some(cookie))
}

/// `POST /ui/logout`: clears the session cookie.
pub(crate) async fn logout(req: Request) -> Response {
    let base = prefix(&req);
    see_other(
        &format!("{base}/ui/login"),
        Some(format!(
            "{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"
        )),
    )
}
