//! [`nokv::Store`] for [`RemoteClient`]: the same operations as the embedded client, sent to a
//! running `nokv serve` (or the routed owner of a root).

use std::io::Read;

use meta::PathEntry;
use nokv::client::{PutOptions, PutReceipt};
use nokv::error::{Error, Result};
use nokv::lifetime::{PrefixRemoval, RemoveOptions, RemoveReceipt};
use nokv::Store;
use serde_json::Value;

use crate::client::RemoteClient;

impl Store for RemoteClient {
    fn describe(&self) -> String {
        format!("server {}", self.url())
    }

    /// A call that did not reach a tool answers [`error_envelope`].
    fn call_tool(&self, tool: &str, input: &Value) -> Value {
        RemoteClient::call_tool(self, tool, input).unwrap_or_else(error_envelope)
    }

    fn call_tool_with_request_id(&self, tool: &str, input: &Value, request_id: [u8; 16]) -> Value {
        RemoteClient::call_tool_with_request_id(self, tool, input, request_id)
            .unwrap_or_else(error_envelope)
    }

    fn put(
        &self,
        workbench_id: &str,
        path: &str,
        body: &[u8],
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        RemoteClient::put(self, workbench_id, path, body, options)
    }

    fn put_reader(
        &self,
        workbench_id: &str,
        path: &str,
        reader: &mut dyn Read,
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        RemoteClient::put_reader(self, workbench_id, path, reader, options)
    }

    fn stat(&self, workbench_id: &str, path: &str) -> Result<PathEntry> {
        RemoteClient::stat(self, workbench_id, path)
    }

    fn read_range(&self, workbench_id: &str, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        RemoteClient::read_range(self, workbench_id, path, offset, len)
    }

    fn read_all(&self, workbench_id: &str, path: &str) -> Result<Vec<u8>> {
        RemoteClient::read_all(self, workbench_id, path)
    }

    fn remove(
        &self,
        workbench_id: &str,
        path: &str,
        options: &RemoveOptions,
    ) -> Result<RemoveReceipt> {
        RemoteClient::remove(self, workbench_id, path, options)
    }

    fn remove_prefix(&self, workbench_id: &str, prefix: &str) -> Result<PrefixRemoval> {
        RemoteClient::remove_prefix(self, workbench_id, prefix)
    }

    fn move_path(
        &self,
        workbench_id: &str,
        from: &str,
        to: &str,
        options: &nokv::move_path::MoveOptions,
    ) -> Result<nokv::move_path::MoveReceipt> {
        RemoteClient::move_path(self, workbench_id, from, to, options)
    }
}

/// The Workbench error envelope of a remote client error — what a tool call answers when it did
/// not reach a tool: [`Error::OperationFailed`] keeps its Workbench code; a connection failure is
/// `Unavailable` (retryable, `details.url` and `details.reason`); a refusal of the server keeps
/// the server's code and retryability (`Unauthorized`, `Timeout`, …; the server's `details` plus
/// `details.http_status`); a generation conflict is `Conflict` (`PathGeneration`); anything else
/// maps like an embedded SDK error of the same kind ([`nokv::workbench::store_error`]).
pub fn error_envelope(err: nokv::Error) -> Value {
    match err {
        Error::OperationFailed { code, message } => serde_json::json!({
            "status": "error", "code": code, "message": message, "details": {},
        }),
        Error::Connection {
            ref url,
            ref reason,
        } => serde_json::json!({
            "status": "error",
            "code": "Unavailable",
            "message": err.to_string(),
            "retryable": true,
            "details": {"url": url, "reason": reason},
        }),
        Error::Server {
            status,
            code,
            message,
            retryable,
            details,
        } => {
            let mut details = *details;
            details.insert("http_status".into(), serde_json::Value::from(status));
            serde_json::json!({
                "status": "error",
                "code": code,
                "message": message,
                "retryable": retryable,
                "details": details,
            })
        }
        // A pinned file object whose path now holds another revision.
        Error::GenerationConflict {
            path,
            expected,
            actual,
        } => nokv::workbench::errors::ToolError::conflict("PathGeneration")
            .with_detail("relative_path", Value::from(path))
            .with_detail("expected_generation", Value::from(expected))
            .with_detail("actual_generation", Value::from(actual))
            .envelope(),
        other => nokv::workbench::store_error(other).envelope(),
    }
}
