//! Tool names, descriptions and JSON-Schema input validation of the 18 Workbench tools
//! (docs/workbench.md, "The tools" and "Common rules"). The input schemas are the JSON Schema
//! draft 2020-12 file `nokv/sdk/schemas/workbench-input-schemas.json`, one schema per tool,
//! each stating docs/workbench.md's input rules for that tool; this module compiles them.
//!
//! Every tool call is validated here first — unknown fields, wrong types, out-of-range limits —
//! before any cross-field check or storage access. Each tool's validator is compiled once, lazily.

use jsonschema::error::ValidationErrorKind;
use nokv_protocol::errors::{ToolError, ToolResult};
use serde_json::{Map, Value};
use std::sync::OnceLock;

/// The embedded schema document (`{"schema", "note", "tools": {name: schema}}`).
const SCHEMA_FILE: &str = include_str!("../../schemas/workbench-input-schemas.json");

/// Schema id of [`describe_all`]'s output.
pub const TOOLS_SCHEMA_ID: &str = "nokv.workbench.tools.v1";

/// Maximum number of validation messages in `details.errors`.
pub const MAX_REPORTED_ERRORS: usize = 8;

/// The nine tools that only read (docs/workbench.md): the read-only profile of `nokv mcp`, the
/// `read` scope, and the CLI calls that open the store read-only.
pub const READING_TOOLS: [&str; 9] = [
    "workbench_list",
    "workbench_stat",
    "workbench_read",
    "workbench_grep",
    "workbench_search",
    "workbench_aggregate",
    "workbench_catalog",
    "workbench_find",
    "workbench_snapshot_list",
];

/// The 18 canonical tool names, in docs/workbench.md order.
pub const TOOL_NAMES: [&str; 18] = [
    "workbench_create",
    "workbench_put_file",
    "workbench_append",
    "workbench_edit",
    "workbench_list",
    "workbench_stat",
    "workbench_read",
    "workbench_grep",
    "workbench_search",
    "workbench_aggregate",
    "workbench_catalog",
    "workbench_find",
    "workbench_commit",
    "workbench_snapshot",
    "workbench_snapshot_renew",
    "workbench_snapshot_retire",
    "workbench_snapshot_list",
    "workbench_restore",
];

const DESCRIPTIONS: [&str; 18] = [
    "Create an empty workbench with the given id; it shows the five virtual sections input, scripts, outputs, logs and metadata, and an exact retry returns the same result.",
    "Write one file (text or base64, at most 16 MiB) into a section: create-only by default, or replace=true to overwrite an existing file, optionally guarded by expected_generation. A path is a file or a directory, never both: creating over a directory is AlreadyExists (details.kind directory), replacing one NotArtifact, writing below a file NotDirectory.",
    "Append text or base64 bytes (at most 16 MiB per call) to a file in a section, creating it when missing; earlier bytes are shared, not rewritten. Appending to a directory is NotArtifact, below a file NotDirectory.",
    "Replace an exact, literal occurrence of old_string with new_string in a UTF-8 file (no regex, no whitespace tolerance); replace_all replaces every occurrence. On NoMatch, details.hints names near misses (line endings, tabs vs spaces, indentation, trailing whitespace, NFC/NFD, case) with their line numbers and the file's exact text; nothing is applied.",
    "List the direct children (files and directories) of a workbench, section or directory, at the live state or a snapshot, one page at a time.",
    "Describe one file or directory (kind, size, generation, content type, digest, producer) without reading the file body.",
    "Read a file as structured records (JSON elements, a YAML document or sequence, or text lines) or as a base64 byte range, page by page. JSON numbers come back exactly as stored (no rounding of large integers or long decimals).",
    "Search files for lines containing any of the given literal, case-insensitive patterns (not regex), optionally recursively and filtered by a file-name glob.",
    "Find files across one workbench or the whole root with typed predicates over indexed fields, with sorting, projected fields and facet counts.",
    "Compute count/sum/avg/min/max measures over indexed fields of matching files, optionally grouped by fields; a count measure takes no field (absent or null).",
    "Show which indexed fields can be filtered, sorted, faceted and aggregated in a workbench or the whole root.",
    "Page over the workbenches of the root, filtering by committed state or by a case-insensitive substring of the run manifest; each match carries manifest_summary (schema, ids, digests, commit time, manifest_keys, manifest_task) and, with include_manifest, manifest = the whole run-manifest envelope.",
    "Commit a workbench: publish metadata/run_manifest.json binding the given manifest to a content digest; an exact retry is an idempotent replay.",
    "Pin the current committed state of a workbench as a named, leased snapshot (ttl_days 1-90, default 7) that reads and restores can use later.",
    "Extend the lease of a snapshot, selected by snapshot_id or name, to ttl_days from now; leases never shrink.",
    "Retire a snapshot, selected by snapshot_id or name, so it can be reaped; the first retirement's reason is kept as retire_annotation {metadata, reason}, and a retry reports retired=false with that first annotation.",
    "List the snapshots of a workbench with their lease deadlines, states (alive, expired, retired, reaped), annotation and retire_annotation.",
    "Restore a snapshot or a commit of a workbench into a new, absent destination workbench of the same root, leaving the source unchanged.",
];

/// The canonical name (`workbench_…`) for `name` given with or without its `workbench_` prefix;
/// `None` for anything else (which the facade reports as `UnknownTool`).
pub fn canonical_tool_name(name: &str) -> Option<&'static str> {
    TOOL_NAMES
        .iter()
        .copied()
        .find(|t| *t == name || t.strip_prefix("workbench_") == Some(name))
}

fn tool_index(name: &str) -> Option<usize> {
    let canonical = canonical_tool_name(name)?;
    TOOL_NAMES.iter().position(|t| *t == canonical)
}

/// Short description of a tool (name with or without prefix); `""` for an unknown name.
pub fn tool_description(name: &str) -> &'static str {
    tool_index(name).map_or("", |i| DESCRIPTIONS[i])
}

fn document() -> Option<&'static Value> {
    static DOC: OnceLock<Option<Value>> = OnceLock::new();
    DOC.get_or_init(|| serde_json::from_str(SCHEMA_FILE).ok())
        .as_ref()
}

static NULL: Value = Value::Null;

/// The JSON Schema (draft 2020-12) of a tool's input (name with or without prefix);
/// `Value::Null` for an unknown name.
pub fn input_schema(name: &str) -> &'static Value {
    canonical_tool_name(name)
        .and_then(|t| {
            document()
                .and_then(|d| d.get("tools"))
                .and_then(|m| m.get(t))
        })
        .unwrap_or(&NULL)
}

/// Everything `nokv schema` prints:
/// `{"schema":"nokv.workbench.tools.v1","tools":[{name, description, input_schema}, …]}` for the
/// 18 tools in [`TOOL_NAMES`] order.
pub fn describe_all() -> Value {
    let tools = TOOL_NAMES
        .iter()
        .map(|name| {
            let mut t = Map::new();
            t.insert("name".into(), Value::from(*name));
            t.insert("description".into(), Value::from(tool_description(name)));
            t.insert("input_schema".into(), input_schema(name).clone());
            Value::Object(t)
        })
        .collect();
    let mut out = Map::new();
    out.insert("schema".into(), Value::from(TOOLS_SCHEMA_ID));
    out.insert("tools".into(), Value::Array(tools));
    Value::Object(out)
}

fn validator(index: usize) -> Option<&'static jsonschema::Validator> {
    static VALIDATORS: [OnceLock<Option<jsonschema::Validator>>; 18] =
        [const { OnceLock::new() }; 18];
    let name = TOOL_NAMES.get(index)?;
    VALIDATORS
        .get(index)?
        .get_or_init(|| jsonschema::draft202012::new(input_schema(name)).ok())
        .as_ref()
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}

/// JSON pointer `/a/0/b` → `a.0.b` (with `~1`/`~0` unescaped).
fn dotted(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .map(|seg| seg.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

fn join_field(parent: &str, child: &str) -> String {
    if parent.is_empty() {
        child.to_string()
    } else {
        format!("{parent}.{child}")
    }
}

fn one_of_message(tool: &str, field: &str) -> String {
    match (tool, field) {
        ("workbench_put_file" | "workbench_append", "") => {
            "give exactly one of `text` (UTF-8) or `base64` (standard alphabet) as the payload"
                .to_string()
        }
        ("workbench_snapshot_retire", "") => {
            "give exactly one of `snapshot_id` or `name` to select the snapshot".to_string()
        }
        ("workbench_restore", "") => {
            "give exactly one of `at_snapshot` (snapshot id or name) or `at_commit` (64 hex digits)"
                .to_string()
        }
        (_, "at_snapshot") => "invalid value for `at_snapshot`: use a snapshot id (integer ≥ 0), \
                               a snapshot name (1–128 characters) or null"
            .to_string(),
        (_, "id") => {
            "invalid value for `id`: a workbench id starts with an ASCII letter or digit, \
                      continues with letters, digits, `_` or `-`, at most 128 bytes (or null)"
                .to_string()
        }
        (_, f) => format!("invalid value for `{f}`: it matches none of the allowed forms"),
    }
}

/// Validates a tool's arguments against its JSON schema.
///
/// `tool` may be given with or without the `workbench_` prefix. Errors: `UnknownTool
/// {tool}` for an unknown name; `InvalidArguments` for a schema violation, whose message names the
/// offending field (unknown fields first, then missing ones, then wrong values) and whose
/// `details` carry `field` (dotted path, e.g. `predicates.0.op`; empty for the whole object) and
/// `errors` (up to [`MAX_REPORTED_ERRORS`] messages `"<field>: <problem>"`); `Internal` if the
/// embedded schema cannot be compiled (a build defect).
pub fn validate(tool: &str, input: &Value) -> ToolResult<()> {
    let index = tool_index(tool).ok_or_else(|| ToolError::unknown_tool(tool))?;
    let canonical = TOOL_NAMES[index];
    let v = validator(index).ok_or_else(|| {
        ToolError::internal(format!(
            "the embedded input schema of {canonical} could not be compiled; this is a build defect, please report it"
        ))
    })?;
    if !input.is_object() {
        return Err(ToolError::invalid_arguments(format!(
            "the arguments of {canonical} must be a JSON object"
        ))
        .with_detail("field", "")
        .with_detail(
            "errors",
            vec![Value::from("(root): expected a JSON object")],
        ));
    }
    // (rank, field, message, detail line)
    let mut found: Vec<(u8, String, String, String)> = Vec::new();
    let allowed = input_schema(canonical)
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.keys()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let mut push = |rank: u8, field: String, message: String| {
        let label = if field.is_empty() {
            "(root)".to_string()
        } else {
            field.clone()
        };
        let detail = format!("{label}: {message}");
        found.push((rank, field, message, detail));
    };
    for err in v.iter_errors(input).take(256) {
        let at = dotted(err.instance_path().as_str());
        match err.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                for name in unexpected.iter().take(MAX_REPORTED_ERRORS) {
                    let field = join_field(&at, name);
                    let message = if at.is_empty() {
                        format!("unknown field `{field}`; {canonical} accepts only {allowed}")
                    } else {
                        format!("unknown field `{field}`; remove it")
                    };
                    push(0, field, message);
                }
            }
            ValidationErrorKind::Required { property } => {
                let name = property
                    .as_str()
                    .map_or_else(|| property.to_string(), str::to_string);
                let field = join_field(&at, &name);
                let message = format!("missing required field `{field}`");
                push(1, field, message);
            }
            ValidationErrorKind::OneOfNotValid { .. }
            | ValidationErrorKind::OneOfMultipleValid { .. } => {
                let message = one_of_message(canonical, &at);
                push(2, at, message);
            }
            _ => {
                let shown = if at.is_empty() {
                    "arguments".to_string()
                } else {
                    format!("`{at}`")
                };
                let message = format!(
                    "invalid value for {shown}: {}",
                    truncate(&err.to_string(), 200)
                );
                push(2, at, message);
            }
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    found.sort_by_key(|f| f.0);
    let errors: Vec<Value> = found
        .iter()
        .take(MAX_REPORTED_ERRORS)
        .map(|f| Value::from(f.3.clone()))
        .collect();
    let (_, field, message, _) = &found[0];
    let extra = if found.len() > 1 {
        format!(" ({} problems in total, see details.errors)", found.len())
    } else {
        String::new()
    };
    Err(ToolError::invalid_arguments(format!(
        "{message}{extra}; run `nokv schema` for the exact input schema"
    ))
    .with_detail("field", field.as_str())
    .with_detail("errors", errors))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nokv_protocol::errors::ErrorCode;
    use serde_json::json;

    #[test]
    fn embedded_schema_has_exactly_the_18_tools() {
        let doc = document().expect("embedded schema parses");
        let tools = doc["tools"].as_object().expect("tools map");
        assert_eq!(tools.len(), 18);
        for name in TOOL_NAMES {
            assert!(tools.contains_key(name), "{name}");
            assert!(input_schema(name).is_object());
            assert!(
                validator(tool_index(name).unwrap()).is_some(),
                "{name} compiles"
            );
            assert!(!tool_description(name).is_empty());
        }
    }

    #[test]
    fn tool_names_resolve_with_or_without_prefix() {
        assert_eq!(canonical_tool_name("read"), Some("workbench_read"));
        assert_eq!(
            canonical_tool_name("workbench_read"),
            Some("workbench_read")
        );
        assert_eq!(
            canonical_tool_name("snapshot_renew"),
            Some("workbench_snapshot_renew")
        );
        assert_eq!(canonical_tool_name("workbench_workbench_read"), None);
        assert_eq!(canonical_tool_name("Read"), None);
        assert_eq!(canonical_tool_name(""), None);
        assert_eq!(input_schema("nope"), &Value::Null);
        assert_eq!(tool_description("nope"), "");
    }

    #[test]
    fn describe_all_lists_every_tool_in_order() {
        let d = describe_all();
        assert_eq!(d["schema"], "nokv.workbench.tools.v1");
        let tools = d["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 18);
        assert_eq!(tools[0]["name"], "workbench_create");
        assert_eq!(tools[17]["name"], "workbench_restore");
        assert_eq!(
            tools[6]["input_schema"]["properties"]["limit"]["maximum"],
            300
        );
    }

    #[test]
    fn valid_inputs_pass() {
        let ok = [
            ("create", json!({"id": "wb-1"})),
            (
                "put_file",
                json!({"id": "wb-1", "section": "input", "path": "a.csv", "text": "x"}),
            ),
            (
                "read",
                json!({"id": "wb-1", "section": "outputs", "path": "s.json", "at_snapshot": "nightly", "limit": 300}),
            ),
            (
                "list",
                json!({"id": "wb-1", "section": null, "at_snapshot": 3}),
            ),
            (
                "grep",
                json!({"id": "wb-1", "pattern": "x", "recursive": true}),
            ),
            (
                "aggregate",
                json!({"measures": [{"name": "n", "op": "count"}]}),
            ),
            ("find", json!({})),
            ("snapshot_retire", json!({"id": "wb-1", "name": "n"})),
            (
                "restore",
                json!({"id": "a", "destination_id": "b", "at_snapshot": 0}),
            ),
        ];
        for (tool, input) in ok {
            assert!(
                validate(tool, &input).is_ok(),
                "{tool}: {:?}",
                validate(tool, &input)
            );
        }
    }

    #[test]
    fn unknown_fields_are_rejected_by_name() {
        let e = validate("create", &json!({"id": "wb-1", "idd": "x"})).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        assert_eq!(e.details["field"], "idd");
        assert!(e.message.contains("`idd`"), "{}", e.message);
        let e = validate(
            "search",
            &json!({"predicates": [{"field": "f", "op": "eq", "value": 1, "extra": true}]}),
        )
        .unwrap_err();
        assert_eq!(e.details["field"], "predicates.0.extra");
    }

    #[test]
    fn wrong_types_are_rejected_naming_the_field() {
        let e = validate(
            "read",
            &json!({"id": "wb-1", "section": "outputs", "path": "a", "limit": "10"}),
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        assert_eq!(e.details["field"], "limit");
        assert!(e.message.contains("`limit`"), "{}", e.message);
        let e = validate(
            "grep",
            &json!({"id": "wb-1", "pattern": "x", "recursive": "yes"}),
        )
        .unwrap_err();
        assert_eq!(e.details["field"], "recursive");
        let e = validate("list", &json!({"id": "wb-1", "limit": 101})).unwrap_err();
        assert_eq!(e.details["field"], "limit");
        let e = validate("create", &json!({"id": "-bad"})).unwrap_err();
        assert_eq!(e.details["field"], "id");
        let e = validate("list", &json!({"id": "wb-1", "section": "other"})).unwrap_err();
        assert_eq!(e.details["field"], "section");
    }

    #[test]
    fn missing_required_fields_are_named() {
        let e = validate(
            "edit",
            &json!({"id": "wb-1", "section": "scripts", "path": "a"}),
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        assert!(
            e.message.contains("missing required field"),
            "{}",
            e.message
        );
        let errors = e.details["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 2);
    }

    #[test]
    fn payload_one_of_reports_text_or_base64() {
        let e = validate(
            "put_file",
            &json!({"id": "wb-1", "section": "input", "path": "a", "text": "x", "base64": "eA=="}),
        )
        .unwrap_err();
        assert!(e.message.contains("exactly one of `text`"), "{}", e.message);
        let e = validate(
            "append",
            &json!({"id": "wb-1", "section": "input", "path": "a"}),
        )
        .unwrap_err();
        assert!(e.message.contains("exactly one of `text`"), "{}", e.message);
        let e = validate("restore", &json!({"id": "a", "destination_id": "b"})).unwrap_err();
        assert!(e.message.contains("at_commit"), "{}", e.message);
    }

    #[test]
    fn error_list_is_capped_at_eight_and_does_not_echo_payload() {
        let mut input = Map::new();
        input.insert("id".into(), json!("wb-1"));
        for i in 0..20 {
            input.insert(format!("bogus{i}"), json!(i));
        }
        let e = validate("create", &Value::Object(input)).unwrap_err();
        assert_eq!(e.details["errors"].as_array().unwrap().len(), 8);

        let secret = "S".repeat(10_000);
        let e = validate(
            "put_file",
            &json!({"id": "wb-1", "section": "input", "path": "a", "text": secret, "base64": "x"}),
        )
        .unwrap_err();
        assert!(e.envelope().to_string().len() < 4000);
    }

    #[test]
    fn non_object_arguments_and_unknown_tools_are_rejected() {
        assert_eq!(
            validate("create", &json!([1])).unwrap_err().code,
            ErrorCode::InvalidArguments
        );
        let e = validate("workbench_nope", &json!({})).unwrap_err();
        assert_eq!(e.code, ErrorCode::UnknownTool);
        assert_eq!(e.details["tool"], "workbench_nope");
    }
}
