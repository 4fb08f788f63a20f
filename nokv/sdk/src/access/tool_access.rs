//! What each of the 18 tools needs (docs/server.md, "Scopes"): its action class and the
//! workbenches it touches.

use serde_json::Value;

use super::scope::{Action, Resource, Scope, ScopeSet, Target};
use crate::workbench::errors::ToolError;
use crate::workbench::schema::{canonical_tool_name, READING_TOOLS};

/// The action class of tool `tool` (with or without its `workbench_` prefix): `Read` for the
/// nine reading tools, `Write` for create, put_file, append and edit, `Lifecycle` for commit,
/// the snapshot tools and restore. `None` for a name that is not one of the 18 tools.
pub fn tool_action(tool: &str) -> Option<Action> {
    Some(match canonical_tool_name(tool)? {
        name if READING_TOOLS.contains(&name) => Action::Read,
        "workbench_create" | "workbench_put_file" | "workbench_append" | "workbench_edit" => {
            Action::Write
        }
        _ => Action::Lifecycle,
    })
}

/// Whether `tool` is one of the reading tools (`tools/list` of the read-only profile).
pub fn is_reading_tool(tool: &str) -> bool {
    tool_action(tool) == Some(Action::Read)
}

/// What one tool call needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolNeeds {
    /// Each `(action, workbench)` pair must be granted.
    Workbenches(Vec<(Action, String)>),
    /// A reading call across workbenches (search, aggregate or catalog without `id`, find): it
    /// runs, and its answer keeps only what the caller may read.
    FilteredRead,
    /// Not one of the 18 tools: the facade answers `UnknownTool`, nothing runs.
    Unknown,
}

/// What the call of `tool` with `input` needs. The workbench ids come from `id` and, for
/// restore, `destination_id` (the destination is written: `Lifecycle`; the source is read).
/// An input without a string `id` on a tool that requires one needs `action` on the empty id,
/// which no glob of a valid id matches — the facade refuses such input before it runs anyway.
pub fn tool_needs(tool: &str, input: &Value) -> ToolNeeds {
    let Some(name) = canonical_tool_name(tool) else {
        return ToolNeeds::Unknown;
    };
    let Some(action) = tool_action(name) else {
        return ToolNeeds::Unknown;
    };
    let id = input.get("id").and_then(Value::as_str);
    match (name, id) {
        ("workbench_find", _) => ToolNeeds::FilteredRead,
        ("workbench_search" | "workbench_aggregate" | "workbench_catalog", None) => {
            ToolNeeds::FilteredRead
        }
        ("workbench_restore", id) => {
            let dest = input.get("destination_id").and_then(Value::as_str);
            ToolNeeds::Workbenches(vec![
                (Action::Read, id.unwrap_or_default().to_string()),
                (Action::Lifecycle, dest.unwrap_or_default().to_string()),
            ])
        }
        (_, id) => ToolNeeds::Workbenches(vec![(action, id.unwrap_or_default().to_string())]),
    }
}

/// The `Forbidden` error naming `missing` (docs/server.md, "Scopes").
pub fn forbidden(missing: &Scope) -> ToolError {
    let resource = match &missing.resource {
        Resource::All => None,
        Resource::Root(r) | Resource::Workbench(r) => Some(r.as_str()),
    };
    ToolError::forbidden(&missing.to_string(), missing.action.as_str(), resource)
}

/// Checks the call of `tool` with `input` under `root` against `scopes` before it runs.
///
/// `Ok(true)`: the call runs and its answer needs no filtering; `Ok(false)`: a cross-workbench
/// read ([`ToolNeeds::FilteredRead`]) that runs and whose answer the caller must filter with
/// [`ScopeSet::may_read`] unless it reads everything. An unknown tool is `Ok(true)` (the facade
/// answers `UnknownTool`). Errors: `Forbidden` naming the first missing scope.
pub fn check_tool(
    scopes: &ScopeSet,
    root: Option<&str>,
    tool: &str,
    input: &Value,
) -> Result<bool, ToolError> {
    match tool_needs(tool, input) {
        ToolNeeds::Unknown => Ok(true),
        ToolNeeds::FilteredRead => Ok(scopes.reads_everything(root)),
        ToolNeeds::Workbenches(needs) => {
            for (action, id) in &needs {
                let target = Target::workbench(id).under(root);
                scopes.check(*action, &target).map_err(|m| forbidden(&m))?;
            }
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workbench::schema::TOOL_NAMES;
    use serde_json::json;

    #[test]
    fn nine_tools_read_four_write_five_run_lifecycles() {
        let count = |a| {
            TOOL_NAMES
                .iter()
                .filter(|t| tool_action(t) == Some(a))
                .count()
        };
        assert_eq!(count(Action::Read), 9);
        assert_eq!(count(Action::Write), 4);
        assert_eq!(count(Action::Lifecycle), 5);
        assert_eq!(tool_action("put_file"), Some(Action::Write));
        assert_eq!(tool_action("nope"), None);
    }

    #[test]
    fn restore_reads_its_source_and_writes_its_destination() {
        let needs = tool_needs("restore", &json!({"id": "a", "destination_id": "b"}));
        assert_eq!(
            needs,
            ToolNeeds::Workbenches(vec![
                (Action::Read, "a".into()),
                (Action::Lifecycle, "b".into())
            ])
        );
        assert_eq!(
            tool_needs("search", &json!({"predicates": []})),
            ToolNeeds::FilteredRead
        );
        assert_eq!(
            tool_needs("search", &json!({"id": "a"})),
            ToolNeeds::Workbenches(vec![(Action::Read, "a".into())])
        );
        assert_eq!(tool_needs("find", &json!({})), ToolNeeds::FilteredRead);
        assert_eq!(tool_needs("bogus", &json!({})), ToolNeeds::Unknown);
    }

    #[test]
    fn a_read_only_caller_is_forbidden_every_write_tool_with_its_scope_named() {
        let ro = ScopeSet::read_only();
        let e = check_tool(&ro, None, "put_file", &json!({"id": "run-1"})).unwrap_err();
        assert_eq!(e.code.as_str(), "Forbidden");
        assert_eq!(e.details["missing_scope"], "write:run-1");
        assert_eq!(e.details["action"], "write");
        assert_eq!(e.details["resource"], "run-1");
        let e = check_tool(
            &ro,
            None,
            "restore",
            &json!({"id": "a", "destination_id": "b"}),
        )
        .unwrap_err();
        assert_eq!(e.details["missing_scope"], "lifecycle:b");
        assert_eq!(check_tool(&ro, None, "read", &json!({"id": "a"})), Ok(true));
        assert_eq!(check_tool(&ro, None, "find", &json!({})), Ok(true));
        let runs = ScopeSet::parse(&["write:run-*"]).unwrap();
        assert_eq!(check_tool(&runs, None, "find", &json!({})), Ok(false));
    }
}
