//! [`Store`]: one store, whichever way it is reached — the embedded [`Client`] or a running
//! `nokv serve` through the remote client (crate `nokv-remote`). Front doors that do the same
//! thing on both (the CLI, `nokv mcp`, the Python binding) call it through this trait instead of
//! matching on where the store lives; operations only one side has stay inherent methods of that
//! client.
//!
//! Every method has the contract of the [`Client`] method of the same name: same arguments,
//! same receipts, same [`Error`] variants for the same refusals. A remote implementation adds the
//! transport's errors ([`Error::Connection`], retryable, and [`Error::Server`]).

use std::io::Read;

use meta::PathEntry;
use serde_json::Value;

use crate::client::{Client, PutOptions, PutReceipt};
use crate::error::Result;
use crate::lifetime::{PrefixRemoval, RemoveOptions, RemoveReceipt};
use crate::workbench::Workbench;

/// One NoKV store (see the module docs). Implementations are `Send + Sync`: one value serves
/// any number of threads.
pub trait Store: Send + Sync {
    /// One line saying where the store is (a directory, or a server URL; never a secret).
    fn describe(&self) -> String;

    /// Runs Workbench tool `tool` (with or without its `workbench_` prefix) on the JSON `input`
    /// and returns its envelope (docs/workbench.md): `{"status":"success", …}` or the error
    /// envelope. Never fails outside the envelope: a transport failure is an error envelope too.
    fn call_tool(&self, tool: &str, input: &Value) -> Value;

    /// Runs `workbench_put_file` under the caller's 16-byte request id
    /// ([`Workbench::call_with_request_id`]): a rerun returns the first receipt with
    /// `idempotent_replay: true`. Never fails outside the envelope.
    fn call_tool_with_request_id(&self, tool: &str, input: &Value, request_id: [u8; 16]) -> Value;

    /// Publishes `body` at `path` of `workbench_id` ([`Client::put`]).
    ///
    /// Errors: those of [`Client::put`] (plus the transport's, remote).
    fn put(
        &self,
        workbench_id: &str,
        path: &str,
        body: &[u8],
        options: &PutOptions,
    ) -> Result<PutReceipt>;

    /// Publishes the bytes of `reader` at `path`, streamed ([`Client::put_reader`]).
    ///
    /// Errors: those of [`Client::put_reader`] (plus the transport's, remote).
    fn put_reader(
        &self,
        workbench_id: &str,
        path: &str,
        reader: &mut dyn Read,
        options: &PutOptions,
    ) -> Result<PutReceipt>;

    /// The current entry of `path` ([`Client::stat`]).
    ///
    /// Errors: those of [`Client::stat`] (plus the transport's, remote).
    fn stat(&self, workbench_id: &str, path: &str) -> Result<PathEntry>;

    /// Bytes `[offset, offset + len)` of the body at `path` ([`Client::read_range`]).
    ///
    /// Errors: those of [`Client::read_range`] (plus the transport's, remote).
    fn read_range(&self, workbench_id: &str, path: &str, offset: u64, len: u64) -> Result<Vec<u8>>;

    /// The whole body at `path` ([`Client::read_all`]).
    ///
    /// Errors: those of [`Client::read_all`] (plus the transport's, remote).
    fn read_all(&self, workbench_id: &str, path: &str) -> Result<Vec<u8>>;

    /// Removes one path ([`Client::remove`]).
    ///
    /// Errors: those of [`Client::remove`] (plus the transport's, remote).
    fn remove(
        &self,
        workbench_id: &str,
        path: &str,
        options: &RemoveOptions,
    ) -> Result<RemoveReceipt>;

    /// Removes every path under `prefix` ([`Client::remove_prefix`]).
    ///
    /// Errors: those of [`Client::remove_prefix`] (plus the transport's, remote).
    fn remove_prefix(&self, workbench_id: &str, prefix: &str) -> Result<PrefixRemoval>;

    /// Moves one file to another path of the same workbench ([`Client::move_path`]).
    ///
    /// Errors: those of [`Client::move_path`] (plus the transport's, remote).
    fn move_path(
        &self,
        workbench_id: &str,
        from: &str,
        to: &str,
        options: &crate::move_path::MoveOptions,
    ) -> Result<crate::move_path::MoveReceipt>;
}

impl Store for Client {
    fn describe(&self) -> String {
        format!("store {}", self.dir().display())
    }

    fn call_tool(&self, tool: &str, input: &Value) -> Value {
        Workbench::new(self.clone()).call(tool, input)
    }

    fn call_tool_with_request_id(&self, tool: &str, input: &Value, request_id: [u8; 16]) -> Value {
        Workbench::new(self.clone()).call_with_request_id(tool, input, request_id)
    }

    fn put(
        &self,
        workbench_id: &str,
        path: &str,
        body: &[u8],
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        Client::put(self, workbench_id, path, body, options)
    }

    fn put_reader(
        &self,
        workbench_id: &str,
        path: &str,
        reader: &mut dyn Read,
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        Client::put_reader(self, workbench_id, path, reader, options)
    }

    fn stat(&self, workbench_id: &str, path: &str) -> Result<PathEntry> {
        Client::stat(self, workbench_id, path)
    }

    fn read_range(&self, workbench_id: &str, path: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        Client::read_range(self, workbench_id, path, offset, len)
    }

    fn read_all(&self, workbench_id: &str, path: &str) -> Result<Vec<u8>> {
        Client::read_all(self, workbench_id, path)
    }

    fn remove(
        &self,
        workbench_id: &str,
        path: &str,
        options: &RemoveOptions,
    ) -> Result<RemoveReceipt> {
        Client::remove(self, workbench_id, path, options)
    }

    fn remove_prefix(&self, workbench_id: &str, prefix: &str) -> Result<PrefixRemoval> {
        Client::remove_prefix(self, workbench_id, prefix)
    }

    fn move_path(
        &self,
        workbench_id: &str,
        from: &str,
        to: &str,
        options: &crate::move_path::MoveOptions,
    ) -> Result<crate::move_path::MoveReceipt> {
        Client::move_path(self, workbench_id, from, to, options)
    }
}
