//! `workbench_create`, `workbench_put_file`, `workbench_append`, `workbench_edit`.

use serde_json::{Map, Value};

use super::edit as edit_match;
use super::error_map::tool_error;
use super::facade::Workbench;
use super::scope::{opt_bool, opt_str, opt_u64, req_str, Scope};
use crate::client::{PutOptions, WriteCondition, SECTIONS};
use crate::json::payload;
use nokv_protocol::errors::{ErrorCode, ToolError, ToolResult};

/// Largest body `workbench_edit` loads (bytes); bigger bodies go through the SDK.
const MAX_EDIT_BYTES: u64 = 16 * 1024 * 1024;
/// Bounded re-read-and-retry rounds of `workbench_edit` when the generation moves.
const EDIT_ATTEMPTS: u32 = 3;

pub(super) fn create(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let client = wb.client();
    let info = client
        .create_workbench(id)
        .map_err(|e| tool_error(client, id, e))?;
    // Only an exact retry of a create is a success (docs/workbench.md "create"). A visible marker that
    // an operation (a restore) published is another incarnation of the name, not a prior create.
    if !info.created && info.workspace.owning_operation.is_some() {
        return Err(ToolError::new(
            ErrorCode::AlreadyExists,
            format!(
                "workbench `{id}` already exists (it was created by a restore, not by workbench_create); choose another id"
            ),
        )
        .with_detail("path", Value::from(info.path)));
    }
    let mut out = Map::new();
    out.insert("workbench_id".into(), Value::from(info.workbench_id));
    out.insert("path".into(), Value::from(info.path));
    out.insert(
        "sections".into(),
        Value::from(SECTIONS.iter().map(|s| Value::from(*s)).collect::<Vec<_>>()),
    );
    Ok(out)
}

pub(super) fn put_file(
    wb: &Workbench,
    args: &Map<String, Value>,
) -> ToolResult<Map<String, Value>> {
    put_file_with(wb, args, None)
}

/// `workbench_put_file`, optionally under the caller's request id (outside the tool's input
/// schema, see [`Workbench::call_with_request_id`]): the result then also carries `request_id`
/// (32 lowercase hex) and `idempotent_replay`.
pub(super) fn put_file_with(
    wb: &Workbench,
    args: &Map<String, Value>,
    request_id: Option<[u8; 16]>,
) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let scope = Scope::resolve_file(id, opt_str(args, "section"), req_str(args, "path")?)?;
    let replace = opt_bool(args, "replace", false);
    let expected = opt_u64(args, "expected_generation")?;
    if expected.is_some() && !replace {
        return Err(ToolError::invalid_arguments(
            "expected_generation is only allowed with replace=true",
        ));
    }
    let (body, default_type) =
        payload::decode_payload(opt_str(args, "text"), opt_str(args, "base64"))?;
    let content_type = opt_str(args, "content_type").unwrap_or(default_type);
    let client = wb.client();
    let full = scope
        .full
        .clone()
        .ok_or_else(|| ToolError::invalid_arguments("path must name a file inside the section"))?;
    let options = PutOptions {
        content_type: content_type.to_string(),
        condition: if replace {
            WriteCondition::Replace {
                expected_generation: expected,
            }
        } else {
            WriteCondition::Create
        },
        producer: "workbench_put_file".into(),
        manifest_id: None,
        index_fields: Default::default(),
        index_json: false,
        expected_digest_uri: None,
        request_id,
    };
    // The SDK applies the namespace rule: a create over a directory is AlreadyExists
    // (`details.kind = "directory"`), a replace of one NotArtifact, a write below a file
    // NotDirectory.
    let receipt = client
        .put(id, full.as_str(), &body, &options)
        .map_err(|e| tool_error(client, id, e))?;
    let mut out = scope.fields(client);
    out.insert("size_bytes".into(), Value::from(receipt.size_bytes));
    out.insert("generation".into(), Value::from(receipt.generation));
    out.insert("digest_uri".into(), Value::from(receipt.digest_uri));
    out.insert("content_type".into(), Value::from(receipt.content_type));
    out.insert("replace".into(), Value::from(replace));
    if let Some(rid) = request_id {
        out.insert("request_id".into(), Value::from(objstore::hex_lower(&rid)));
        out.insert(
            "idempotent_replay".into(),
            Value::from(receipt.idempotent_replay),
        );
    }
    Ok(out)
}

pub(super) fn append(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let scope = Scope::resolve_file(id, opt_str(args, "section"), req_str(args, "path")?)?;
    let (body, default_type) =
        payload::decode_payload(opt_str(args, "text"), opt_str(args, "base64"))?;
    let client = wb.client();
    let full = scope
        .full
        .clone()
        .ok_or_else(|| ToolError::invalid_arguments("path must name a file inside the section"))?;
    // Absent content_type keeps the existing type; on create the payload's default applies.
    let receipt = client
        .append_with_create_type(
            id,
            full.as_str(),
            &body,
            opt_str(args, "content_type"),
            default_type,
            "workbench_append",
        )
        .map_err(|e| tool_error(client, id, e))?;
    let mut out = scope.fields(client);
    out.insert("appended_bytes".into(), Value::from(receipt.appended_bytes));
    out.insert("size_bytes".into(), Value::from(receipt.size_bytes));
    out.insert("generation".into(), Value::from(receipt.generation));
    out.insert("created".into(), Value::from(receipt.created));
    out.insert("digest".into(), Value::from(receipt.delta_digest_uri));
    Ok(out)
}

pub(super) fn edit(wb: &Workbench, args: &Map<String, Value>) -> ToolResult<Map<String, Value>> {
    let id = req_str(args, "id")?;
    let scope = Scope::resolve_file(id, opt_str(args, "section"), req_str(args, "path")?)?;
    let old = req_str(args, "old_string")?;
    let new = req_str(args, "new_string")?;
    let replace_all = opt_bool(args, "replace_all", false);
    if old.is_empty() {
        return Err(ToolError::invalid_arguments("old_string must not be empty"));
    }
    let client = wb.client();
    let full = scope
        .full
        .clone()
        .ok_or_else(|| ToolError::invalid_arguments("path must name a file inside the section"))?;
    let presented = super::scope::present(client, id, Some(&full));
    if meta::ops::publish::is_reserved(&full) {
        return Err(ToolError::invalid_arguments(format!(
            "{presented} is owned by commit/restore and cannot be edited"
        )));
    }
    for attempt in 1..=EDIT_ATTEMPTS {
        let read = client.meta().read();
        let ws = read
            .visible_workspace(id)
            .map_err(|e| tool_error(client, id, e.into()))?;
        let entry = match read
            .path_entry(&ws.incarnation, &full)
            .map_err(|e| tool_error(client, id, e.into()))?
        {
            Some(entry) => entry,
            None => {
                // A directory is NotArtifact and a path below a file NotDirectory (the namespace
                // rule); anything else is simply missing.
                let edit = meta::PathCondition::Replace {
                    expected_generation: 0,
                };
                return Err(match read.check_creatable(&ws.incarnation, &full) {
                    Ok(()) => ToolError::not_found(&presented),
                    Err(e) => match crate::client::map_namespace_error(e, &full, edit) {
                        Ok(mapped) => tool_error(client, id, mapped),
                        Err(other) => tool_error(client, id, other.into()),
                    },
                });
            }
        };
        if entry.logical_size > MAX_EDIT_BYTES {
            return Err(ToolError::resource_exhausted(
                "workbench_edit",
                "body_bytes",
                MAX_EDIT_BYTES,
            ));
        }
        let body = client
            .read_entry(&read, &entry)
            .map_err(|e| tool_error(client, id, e))?;
        let text = edit_match::require_utf8(&body)?;
        let outcome = edit_match::apply_edit(text, old, new, replace_all)?;
        let mut out = scope.fields(client);
        out.insert("replacements".into(), Value::from(outcome.replacements));
        if outcome.new_text.as_bytes() == body.as_slice() {
            out.insert("size_bytes".into(), Value::from(entry.logical_size));
            out.insert("generation".into(), Value::from(entry.generation));
            out.insert("no_change".into(), Value::from(true));
            return Ok(out);
        }
        let options = PutOptions {
            content_type: entry.content_type.clone(),
            condition: WriteCondition::Replace {
                expected_generation: Some(entry.generation),
            },
            producer: "workbench_edit".into(),
            manifest_id: entry.manifest_id.clone(),
            // A new body publishes no custom index fields (they described the old one).
            index_fields: Default::default(),
            index_json: false,
            expected_digest_uri: None,
            request_id: None,
        };
        drop(read);
        match client.put(id, full.as_str(), outcome.new_text.as_bytes(), &options) {
            Ok(receipt) => {
                out.insert("size_bytes".into(), Value::from(receipt.size_bytes));
                out.insert("generation".into(), Value::from(receipt.generation));
                out.insert("no_change".into(), Value::from(false));
                return Ok(out);
            }
            Err(crate::error::Error::GenerationConflict { .. }) if attempt < EDIT_ATTEMPTS => {
                continue
            }
            Err(crate::error::Error::GenerationConflict { .. }) => {
                return Err(ToolError::conflict("PathGeneration")
                    .with_detail("path", Value::from(presented.clone()))
                    .with_detail("attempts", Value::from(EDIT_ATTEMPTS)));
            }
            Err(e) => return Err(tool_error(client, id, e)),
        }
    }
    Err(ToolError::conflict("PathGeneration").with_detail("attempts", Value::from(EDIT_ATTEMPTS)))
}
