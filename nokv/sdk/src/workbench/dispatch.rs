//! [`Workbench::call`]: the schema check of a tool call, then its dispatch to the tool that runs
//! it (one module per group of tools), and the one success or error envelope it answers.

use serde_json::{Map, Value};

use super::facade::Workbench;
use super::{
    commit_tools, query_tools, read_tools, restore_tools, schema, snapshot_tools, write_tools,
};
use nokv_protocol::errors::{ErrorCode, ToolError, ToolResult};

impl Workbench {
    /// Runs one tool and returns its JSON envelope (success or error). `tool` may carry or omit the
    /// `workbench_` prefix; an unknown name yields the `UnknownTool` envelope.
    pub fn call(&self, tool: &str, input: &Value) -> Value {
        match self.call_tool(tool, input) {
            Ok(mut fields) => {
                let mut out = Map::new();
                out.insert("status".into(), Value::from("success"));
                out.append(&mut fields);
                Value::Object(out)
            }
            Err(err) => err.envelope(),
        }
    }

    /// Runs `workbench_put_file` (the only tool that takes one) under the caller's 16-byte request
    /// id and returns its envelope: a rerun with the same id returns the first receipt with
    /// `idempotent_replay: true` and writes nothing; the same id with another request or body is
    /// `InvalidArguments` with `details.reason = "request_id_reused"` (see
    /// [`crate::client::PutOptions::request_id`]). The id travels beside the input, never in it:
    /// the tool's input schema is the exact contract of docs/workbench.md, which has no such
    /// field. The success envelope adds `request_id` and `idempotent_replay` to the tool's
    /// fields. Any other tool is `InvalidArguments` (`details.reason = "request_id_unsupported"`).
    pub fn call_with_request_id(&self, tool: &str, input: &Value, request_id: [u8; 16]) -> Value {
        let run = || -> ToolResult<Map<String, Value>> {
            let name =
                schema::canonical_tool_name(tool).ok_or_else(|| ToolError::unknown_tool(tool))?;
            if name != "workbench_put_file" {
                return Err(ToolError::invalid_arguments(format!(
                    "a request id applies to workbench_put_file only, not to {name} (an append \
                     takes an operation id: `nokv append --operation-id`)"
                ))
                .with_detail("reason", Value::from("request_id_unsupported")));
            }
            schema::validate(name, input)?;
            let args = input.as_object().cloned().unwrap_or_default();
            write_tools::put_file_with(self, &args, Some(request_id))
        };
        match run() {
            Ok(mut fields) => {
                let mut out = Map::new();
                out.insert("status".into(), Value::from("success"));
                out.append(&mut fields);
                Value::Object(out)
            }
            Err(err) => err.envelope(),
        }
    }

    /// Runs one tool and returns its result fields (without `status`) or a typed error.
    pub fn call_tool(&self, tool: &str, input: &Value) -> ToolResult<Map<String, Value>> {
        let name =
            schema::canonical_tool_name(tool).ok_or_else(|| ToolError::unknown_tool(tool))?;
        schema::validate(name, input)?;
        let args = input.as_object().cloned().unwrap_or_default();
        match name {
            "workbench_create" => write_tools::create(self, &args),
            "workbench_put_file" => write_tools::put_file(self, &args),
            "workbench_append" => write_tools::append(self, &args),
            "workbench_edit" => write_tools::edit(self, &args),
            "workbench_list" => read_tools::list(self, &args),
            "workbench_stat" => read_tools::stat(self, &args),
            "workbench_read" => read_tools::read(self, &args),
            "workbench_grep" => read_tools::grep(self, &args),
            "workbench_search" => query_tools::search(self, &args),
            "workbench_aggregate" => query_tools::aggregate(self, &args),
            "workbench_catalog" => query_tools::catalog(self, &args),
            "workbench_commit" => commit_tools::commit(self, &args),
            "workbench_find" => commit_tools::find(self, &args),
            "workbench_snapshot" => snapshot_tools::snapshot(self, &args),
            "workbench_snapshot_renew" => snapshot_tools::renew(self, &args),
            "workbench_snapshot_retire" => snapshot_tools::retire(self, &args),
            "workbench_snapshot_list" => snapshot_tools::list(self, &args),
            "workbench_restore" => restore_tools::restore(self, &args),
            other => Err(ToolError::new(
                ErrorCode::InvalidState,
                format!("`{other}` is part of the Workbench contract but is not available in this build yet"),
            )
            .with_detail("tool", Value::from(other))),
        }
    }
}
