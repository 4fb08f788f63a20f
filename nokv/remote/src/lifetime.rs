//! Object lifetime through the server: remove, prefix removal, GC, GC explanation, fsck, index
//! repair and the durable settings — the same names as [`nokv::Client`]'s. Removal, index
//! repair and the settings return the embedded client's types; GC, its explanation and fsck
//! return the JSON objects `nokv gc --json`, `nokv gc --explain … --json` and `nokv fsck --json`
//! print (their report types are engine-internal and not part of the protocol).

use serde_json::{json, Value};

use crate::client::{Payload, RemoteClient};
use crate::wire::{
    encode_component, envelope_result, new_request_id, request_id_or_new, server_error,
};
use nokv::client::Client;
use nokv::error::{Error, Result};
use nokv::lifetime::{
    GcOptions, PrefixRemoval, RemoveOptions, RemoveReceipt, RepairReport, SetReceipt, SettingValue,
};

/// A malformed success envelope (a server of another version): typed, never a panic.
fn malformed(what: &str) -> Error {
    Error::Connection {
        url: String::new(),
        reason: format!("the server's answer lacks a valid {what}"),
    }
}

fn u64_field(v: &Value, key: &str) -> Result<u64> {
    v.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| malformed(key))
}

fn str_field<'a>(v: &'a Value, key: &str) -> Result<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| malformed(key))
}

fn setting_from_json(v: &Value) -> Result<SettingValue> {
    let name = str_field(v, "name")?;
    let name = meta::ops::settings::SETTING_NAMES
        .iter()
        .copied()
        .find(|n| *n == name)
        .ok_or_else(|| malformed("setting name"))?;
    Ok(SettingValue {
        name,
        stored: v.get("stored").and_then(Value::as_u64),
        effective: u64_field(v, "effective")?,
    })
}

impl RemoteClient {
    /// The server's Prometheus text (`GET /metrics`): request counts and latencies, group-commit
    /// sizes, open operations and background passes (`nokv_background_runs_total{task="gc"|…}`).
    ///
    /// Errors: [`Error::Connection`], [`Error::Server`].
    pub fn metrics_text(&self) -> Result<String> {
        self.retrying(|| {
            let mut resp = self.exchange("GET", "/metrics", None, &[], Payload::None)?;
            let status = resp.status().as_u16();
            let text = resp
                .body_mut()
                .read_to_string()
                .map_err(|e| self.connection_error(&e))?;
            if status == 200 {
                Ok(text)
            } else {
                Err(server_error(
                    status,
                    &serde_json::from_str(&text).unwrap_or(Value::Null),
                ))
            }
        })
    }

    /// Removes the artifact at `path` (see [`Client::remove`]). Without
    /// `options.request_id` a fresh one is sent, so a retry after a lost response is an exact
    /// replay (`idempotent_replay = true`) instead of `NotFound`.
    ///
    /// Errors: [`Error::OperationFailed`] (`NotFound`, `Conflict` for a generation that moved,
    /// `InvalidArguments`, …), [`Error::Connection`], [`Error::Server`].
    pub fn remove(
        &self,
        workbench_id: &str,
        path: &str,
        options: &RemoveOptions,
    ) -> Result<RemoveReceipt> {
        let request_id = request_id_or_new(options.request_id.as_ref())?;
        let body = json!({
            "path": path,
            "expected_generation": options.expected_generation,
            "request_id": request_id,
        });
        let v = self.post_json(
            &format!("/v1/workbenches/{}/remove", encode_component(workbench_id)),
            &body,
            true,
        )?;
        let v = envelope_result(v)?;
        Ok(RemoveReceipt {
            path: Client::normalize(str_field(&v, "relative_path")?)?,
            removed_generation: u64_field(&v, "removed_generation")?,
            size_bytes: u64_field(&v, "size_bytes")?,
            digest_uri: str_field(&v, "digest")?.to_string(),
            commit_version: u64_field(&v, "commit_version")?,
            idempotent_replay: v
                .get("idempotent_replay")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// Removes everything under `prefix` in bounded batches (see [`Client::remove_prefix`]).
    ///
    /// Errors: [`Error::OperationFailed`], [`Error::Connection`], [`Error::Server`].
    pub fn remove_prefix(&self, workbench_id: &str, prefix: &str) -> Result<PrefixRemoval> {
        let v = self.post_json(
            &format!(
                "/v1/workbenches/{}/remove-prefix",
                encode_component(workbench_id)
            ),
            &json!({ "prefix": prefix }),
            true,
        )?;
        let v = envelope_result(v)?;
        let mut out = PrefixRemoval {
            batches: u64_field(&v, "batches")?,
            ..PrefixRemoval::default()
        };
        for r in v
            .get("removed")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("removed"))?
        {
            out.removed.push((
                Client::normalize(str_field(r, "relative_path")?)?,
                u64_field(r, "generation")?,
            ));
        }
        for p in v
            .get("kept_reserved")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("kept_reserved"))?
        {
            let p = p.as_str().ok_or_else(|| malformed("kept_reserved"))?;
            out.kept_reserved.push(Client::normalize(p)?);
        }
        Ok(out)
    }

    /// Runs one GC pass on the server (see [`Client::gc`]); returns the `nokv gc --json`
    /// report object.
    ///
    /// Errors: [`Error::OperationFailed`], [`Error::Connection`], [`Error::Server`].
    pub fn gc(&self, options: &GcOptions) -> Result<Value> {
        let body = json!({"dry_run": options.dry_run, "max_revisions": options.max_revisions});
        let v = envelope_result(self.post_json("/v1/gc", &body, true)?)?;
        v.get("report").cloned().ok_or_else(|| malformed("report"))
    }

    /// Why the revision at `workbench_id`/`path` is kept (see [`Client::gc_explain`]); the
    /// `nokv gc --explain WB PATH --json` object.
    ///
    /// Errors: [`Error::OperationFailed`], [`Error::Connection`], [`Error::Server`].
    pub fn gc_explain(&self, workbench_id: &str, path: &str) -> Result<Value> {
        self.explain(&format!(
            "workbench={}&path={}",
            encode_component(workbench_id),
            encode_component(path)
        ))
    }

    /// Why revision `revision` (32 hex characters) is kept (see
    /// [`Client::gc_explain_revision`]).
    ///
    /// Errors: [`Error::OperationFailed`], [`Error::Connection`], [`Error::Server`].
    pub fn gc_explain_revision(&self, revision: &str) -> Result<Value> {
        self.explain(&format!("revision={}", encode_component(revision)))
    }

    fn explain(&self, query: &str) -> Result<Value> {
        let v = envelope_result(self.get_json(&format!("/v1/gc/explain?{query}"))?)?;
        v.get("explanation")
            .cloned()
            .ok_or_else(|| malformed("explanation"))
    }

    /// Checks the store on the server (see [`Client::fsck`]); returns the `nokv fsck --json`
    /// object (`clean`, `findings`, `unowned_objects`, `checked`, …).
    ///
    /// Errors: [`Error::OperationFailed`], [`Error::Connection`], [`Error::Server`].
    pub fn fsck(&self) -> Result<Value> {
        let v = envelope_result(self.post_json("/v1/fsck", &json!({}), true)?)?;
        v.get("fsck").cloned().ok_or_else(|| malformed("fsck"))
    }

    /// Rebuilds the SecondaryIndex rows on the server (see [`Client::repair_index`]).
    ///
    /// Errors: [`Error::OperationFailed`], [`Error::Connection`], [`Error::Server`].
    pub fn repair_index(&self) -> Result<RepairReport> {
        let v = envelope_result(self.post_json("/v1/index/repair", &json!({}), true)?)?;
        let r = v.get("repair").ok_or_else(|| malformed("repair"))?;
        Ok(RepairReport {
            rows_put: u64_field(r, "rows_put")?,
            rows_deleted: u64_field(r, "rows_deleted")?,
            commands: u64_field(r, "commands")?,
        })
    }

    /// A durable setting (see [`Client::config_get`]).
    ///
    /// Errors: [`Error::OperationFailed`] (`InvalidArguments` for an unknown name),
    /// [`Error::Connection`], [`Error::Server`].
    pub fn config_get(&self, name: &str) -> Result<SettingValue> {
        let v = envelope_result(self.get_json(&format!("/v1/config/{}", encode_component(name)))?)?;
        setting_from_json(v.get("setting").ok_or_else(|| malformed("setting"))?)
    }

    /// Every durable setting (see [`Client::config_list`]).
    ///
    /// Errors: [`Error::OperationFailed`], [`Error::Connection`], [`Error::Server`].
    pub fn config_list(&self) -> Result<Vec<SettingValue>> {
        let v = envelope_result(self.get_json("/v1/config")?)?;
        v.get("settings")
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("settings"))?
            .iter()
            .map(setting_from_json)
            .collect()
    }

    /// Stores `value` (decimal text) for setting `name` (see [`Client::config_set`]).
    ///
    /// Errors: [`Error::OperationFailed`] (`InvalidArguments`), [`Error::Connection`],
    /// [`Error::Server`].
    pub fn config_set(&self, name: &str, value: &str) -> Result<SetReceipt> {
        let body = serde_json::to_vec(&json!({ "value": value }))
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let key = new_request_id()?;
        let path = format!("/v1/config/{}", encode_component(name));
        let v = self.retrying(|| {
            let resp = self.exchange("PUT", &path, Some(&key), &[], Payload::Bytes(&body))?;
            self.read_json(resp)
        })?;
        let v = envelope_result(v)?;
        let r = v.get("receipt").ok_or_else(|| malformed("receipt"))?;
        Ok(SetReceipt {
            previous: r.get("previous").and_then(Value::as_u64),
            value: u64_field(r, "value")?,
            commit_version: u64_field(r, "commit_version")?,
            unchanged: r.get("unchanged").and_then(Value::as_bool).unwrap_or(false),
        })
    }
}
