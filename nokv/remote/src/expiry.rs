//! Expiring workbenches through the server: [`RemoteClient::expire_workbench`], the same name
//! and types as [`nokv::Client::expire_workbench`], run as `POST /v1/commands/expire` (the server
//! runs `nokv expire` on its store; docs/server.md).

use serde_json::json;

use crate::client::RemoteClient;
use crate::wire::envelope_result;
use nokv::error::{Error, Result};
use nokv::expiry::{format_time, receipt_from_envelope, Expiry, ExpiryReceipt};

impl RemoteClient {
    /// Records, moves or removes the expiry deadline of a workbench on the server (see
    /// [`nokv::Client::expire_workbench`]). [`Expiry::After`] counts from the server's store
    /// clock; [`Expiry::At`] is sent as an RFC 3339 time with its milliseconds.
    ///
    /// Errors: [`Error::OperationFailed`] (`NotFound` for an absent or expired workbench, its
    /// message saying when it expired; `InvalidArguments`), [`Error::Connection`],
    /// [`Error::Server`]; [`Error::InvalidArgument`] for a duration beyond the protocol's range.
    pub fn expire_workbench(&self, workbench_id: &str, expiry: Expiry) -> Result<ExpiryReceipt> {
        let args = match expiry {
            Expiry::After(d) => {
                let ms = u64::try_from(d.as_millis()).map_err(|_| {
                    Error::InvalidArgument("the expiry is beyond the clock's range".into())
                })?;
                // Whole seconds go as seconds; the duration grammar has no sub-second unit.
                let secs = ms.div_ceil(1000);
                json!({"workbench": workbench_id, "after": format!("{secs}s"), "never": false})
            }
            Expiry::At(ms) => {
                json!({"workbench": workbench_id, "at": format_time(ms), "never": false})
            }
            Expiry::Never => json!({"workbench": workbench_id, "never": true}),
        };
        let out = self.command("expire", &args)?;
        let v: serde_json::Value =
            serde_json::from_str(out.stdout.trim()).map_err(|e| Error::Connection {
                url: self.url().to_string(),
                reason: format!("the server's expire answer is not JSON: {e}"),
            })?;
        let v = envelope_result(v)?;
        receipt_from_envelope(&v).map_err(|e| Error::Connection {
            url: self.url().to_string(),
            reason: e.to_string(),
        })
    }
}
