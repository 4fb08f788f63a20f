//! The one place `nokv serve` decides whether a caller may make a request (docs/server.md,
//! "Scopes"): every route maps to the action classes and workbenches it needs
//! ([`route_needs`]), the request guard checks them before any handler runs, and the two
//! routes whose target is in their body — `POST /v1/tools/{tool}` and
//! `POST /v1/commands/{command}` — are checked by [`check_tool`] and [`check_command`] here
//! before they run. A refusal is HTTP 403 with the `Forbidden` envelope naming the missing
//! scope; nothing is written. Cross-workbench reads are narrowed to what the caller may read
//! ([`narrow_tool`], [`feed_filter`]).

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use nokv::access::{self, Action, Caller, Scope, Target};
use nokv::client::Client;
use nokv::workbench::errors::ToolError;
use nokv::workbench::Workbench;
use nokv_commands::request::CommandRequest;
use serde_json::{json, Value};

use super::error::ApiError;

/// Most workbenches a restricted caller's cross-workbench search or aggregate is narrowed to
/// (one `in` predicate of the query language holds at most this many values).
const MAX_NARROWED: usize = 64;

/// What a route needs before its handler runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RouteNeeds {
    /// Any authenticated caller (`/healthz`, `/v1/schema`, an unknown route's 404).
    Nothing,
    /// Every `(action, workbench)` pair; `None` is the whole store.
    Scopes(Vec<(Action, Option<String>)>),
    /// Decided by the handler from the body ([`check_tool`], [`check_command`]) or narrowed
    /// to what the caller may read (`GET /v1/changes`).
    InHandler,
}

/// The needs of `method` on the matched route `route` (axum's pattern, e.g.
/// `/v1/workbenches/{id}/files/{*path}`), with `id` the decoded `{id}` parameter and `query`
/// the raw query string.
pub(crate) fn route_needs(
    method: &Method,
    route: &str,
    id: Option<&str>,
    query: Option<&str>,
) -> RouteNeeds {
    let on = |a: Action| RouteNeeds::Scopes(vec![(a, Some(id.unwrap_or_default().to_string()))]);
    let all = |a: Action| RouteNeeds::Scopes(vec![(a, None)]);
    let read = *method == Method::GET || *method == Method::HEAD;
    match route {
        "/healthz" | "/v1/schema" | "/v1/whoami" => RouteNeeds::Nothing,
        "/metrics" => all(Action::Read),
        "/v1/tools/{tool}" | "/v1/commands/{command}" | "/v1/changes" => RouteNeeds::InHandler,
        "/v1/workbenches/{id}" => on(Action::Write),
        "/v1/workbenches/{id}/files/{*path}" if read => on(Action::Read),
        "/v1/workbenches/{id}/files/{*path}"
        | "/v1/workbenches/{id}/append/{*path}"
        | "/v1/workbenches/{id}/remove"
        | "/v1/workbenches/{id}/remove-prefix"
        | "/v1/workbenches/{id}/move" => on(Action::Write),
        "/v1/workbenches/{id}/stat/{*path}" | "/v1/workbenches/{id}/entries" => on(Action::Read),
        "/v1/diff" => RouteNeeds::Scopes(diff_needs(query)),
        "/v1/gc" | "/v1/gc/explain" | "/v1/fsck" | "/v1/index/repair" | "/v1/config"
        | "/v1/config/{name}" | "/v1/audit" => all(Action::Admin),
        _ => RouteNeeds::Nothing,
    }
}

/// `GET /v1/diff?a=…&b=…`: `read` on each side's workbench (a commit id: on everything).
fn diff_needs(query: Option<&str>) -> Vec<(Action, Option<String>)> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(query.unwrap_or_default()).unwrap_or_default();
    ["a", "b"]
        .iter()
        .map(|side| {
            let text = pairs
                .iter()
                .find(|(k, _)| k == side)
                .map(|(_, v)| v.as_str())
                .unwrap_or_default();
            let wb = text.split_once('@').map_or(text, |(w, _)| w);
            let commit = wb.len() == 64 && wb.bytes().all(|b| b.is_ascii_hexdigit());
            (Action::Read, (!commit).then(|| wb.to_string()))
        })
        .collect()
}

/// The 403 answer naming `missing`.
pub(crate) fn forbidden(missing: &Scope) -> ApiError {
    from_tool_error(access::forbidden(missing))
}

/// A `Forbidden` tool error as the HTTP 403 answer.
fn from_tool_error(e: ToolError) -> ApiError {
    let mut out = ApiError::new(StatusCode::FORBIDDEN, "Forbidden", e.message, false);
    out.details = e.details;
    out
}

/// Checks `needs` for `caller` under `root`. Errors: 403 naming the first missing scope.
pub(crate) fn check(
    caller: &Caller,
    root: Option<&str>,
    needs: &[(Action, Option<String>)],
) -> Result<(), ApiError> {
    for (action, wb) in needs {
        let target = Target {
            root,
            workbench: wb.as_deref(),
        };
        caller
            .scopes
            .check(*action, &target)
            .map_err(|m| forbidden(&m))?;
    }
    Ok(())
}

/// Checks a tool call before it runs. `Ok(true)`: run it as is; `Ok(false)`: a
/// cross-workbench read to narrow with [`narrow_tool`]. Errors: 403.
pub(crate) fn check_tool(
    caller: &Caller,
    root: Option<&str>,
    tool: &str,
    input: &Value,
) -> Result<bool, ApiError> {
    access::check_tool(&caller.scopes, root, tool, input).map_err(from_tool_error)
}

/// Checks a store command before it runs. Errors: 403.
pub(crate) fn check_command(
    caller: &Caller,
    root: Option<&str>,
    request: &CommandRequest,
) -> Result<(), ApiError> {
    check(caller, root, &request.needs())
}

/// How a restricted caller's cross-workbench read runs.
pub(crate) enum Narrowed {
    /// Run this input on this facade.
    Run(Workbench, Value),
    /// Refused (403), nothing ran.
    Refused(ApiError),
    /// Answer this envelope without running anything.
    Answer(Value),
}

/// Narrows a cross-workbench read (`ToolNeeds::FilteredRead`) of a caller who may not read
/// everything: `find` runs on a facade that skips hidden workbenches; `search` and `aggregate`
/// get one more predicate, `workbench_id in [the visible workbenches the caller may read]`, so
/// their counts, facets and cursors cover only those (more than 64 of them: `ResourceExhausted`,
/// pass `id`); a root-wide `catalog` is refused (it would name fields of every workbench).
pub(crate) fn narrow_tool(
    caller: &Caller,
    root: Option<&str>,
    workbench: &Workbench,
    tool: &str,
    input: &Value,
) -> Narrowed {
    let name = nokv::workbench::schema::canonical_tool_name(tool).unwrap_or_default();
    let scopes = caller.scopes.clone();
    let root_owned = root.map(str::to_string);
    match name {
        "workbench_find" => {
            let visible: nokv::workbench::Visibility =
                Arc::new(move |id: &str| scopes.may_read(root_owned.as_deref(), id));
            Narrowed::Run(workbench.restricted(visible), input.clone())
        }
        "workbench_search" | "workbench_aggregate" => {
            let ids = match readable_workbenches(workbench.client(), caller, root) {
                Ok(ids) => ids,
                Err(e) => return Narrowed::Answer(e.envelope()),
            };
            if ids.len() > MAX_NARROWED {
                return Narrowed::Answer(
                    ToolError::resource_exhausted(
                        name,
                        "readable workbenches",
                        MAX_NARROWED as u64,
                    )
                    .envelope(),
                );
            }
            let predicate = match ids.len() {
                // No workbench id starts with `-`: a predicate no row satisfies.
                0 => json!({"field": "workbench_id", "op": "eq", "value": "-"}),
                _ => json!({"field": "workbench_id", "op": "in", "value": ids}),
            };
            let mut narrowed = input.clone();
            if let Some(o) = narrowed.as_object_mut() {
                let list = o
                    .entry("predicates")
                    .or_insert_with(|| Value::Array(Vec::new()));
                // A malformed `predicates` is refused by the schema check as before.
                if let Value::Array(items) = list {
                    items.push(predicate);
                }
            }
            Narrowed::Run(workbench.clone(), narrowed)
        }
        _ => Narrowed::Refused(forbidden(&Scope::needed(Action::Read, &Target::store()))),
    }
}

/// The visible workbenches of the store that `caller` may read, in key order.
fn readable_workbenches(
    client: &Client,
    caller: &Caller,
    root: Option<&str>,
) -> Result<Vec<String>, ToolError> {
    let mut ids = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = meta::ops::find::find_page(client.meta(), None, after.as_deref(), 254)
            .map_err(|e| ToolError::internal(format!("listing workbenches failed: {e}")))?;
        for c in &page.candidates {
            if caller.scopes.may_read(root, &c.workbench_id) {
                ids.push(c.workbench_id.clone());
            }
        }
        after = page.candidates.last().map(|c| c.workbench_id.clone());
        if !page.more || after.is_none() || ids.len() > MAX_NARROWED {
            return Ok(ids);
        }
    }
}

/// Which NDJSON lines of the change feed a caller sees.
pub(crate) type LineKeep = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// The change feed's line filter for a caller who may not read everything: keeps an event line
/// whose `workbench_id` the caller may read, and every line that is not an event (a final
/// error envelope). `None`: no filter needed.
pub(crate) fn feed_filter(caller: &Caller, root: Option<&str>) -> Option<LineKeep> {
    if caller.scopes.reads_everything(root) {
        return None;
    }
    let scopes = caller.scopes.clone();
    let root = root.map(str::to_string);
    Some(Arc::new(move |line: &[u8]| {
        match serde_json::from_slice::<Value>(line) {
            Ok(v) => match v.get("workbench_id").and_then(Value::as_str) {
                Some(id) => scopes.may_read(root.as_deref(), id),
                None => v.get("status").is_some(),
            },
            Err(_) => false,
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workbench_route_names_its_workbench() {
        let put = route_needs(
            &Method::PUT,
            "/v1/workbenches/{id}/files/{*path}",
            Some("r"),
            None,
        );
        assert_eq!(
            put,
            RouteNeeds::Scopes(vec![(Action::Write, Some("r".into()))])
        );
        let get = route_needs(
            &Method::GET,
            "/v1/workbenches/{id}/files/{*path}",
            Some("r"),
            None,
        );
        assert_eq!(
            get,
            RouteNeeds::Scopes(vec![(Action::Read, Some("r".into()))])
        );
        assert_eq!(
            route_needs(&Method::POST, "/v1/gc", None, None),
            RouteNeeds::Scopes(vec![(Action::Admin, None)])
        );
        assert_eq!(
            route_needs(&Method::GET, "/v1/diff", None, Some("a=x&b=y%40snap")),
            RouteNeeds::Scopes(vec![
                (Action::Read, Some("x".into())),
                (Action::Read, Some("y".into()))
            ])
        );
        assert_eq!(
            route_needs(&Method::POST, "/v1/tools/{tool}", None, None),
            RouteNeeds::InHandler
        );
    }

    #[test]
    fn a_refusal_is_a_403_forbidden_naming_the_scope() {
        let caller = Caller {
            name: "ci".into(),
            scopes: nokv::access::ScopeSet::parse(&["write:run-*"]).unwrap(),
        };
        let err = check(&caller, None, &[(Action::Write, Some("inputs".into()))]).unwrap_err();
        assert_eq!(err.status, StatusCode::FORBIDDEN);
        assert_eq!(err.code, "Forbidden");
        assert_eq!(err.details["missing_scope"], "write:inputs");
        assert!(check(&caller, None, &[(Action::Read, Some("run-1".into()))]).is_ok());
    }
}
