//! Diff through the server: [`RemoteClient::diff`] → `GET /v1/diff`, which runs
//! [`nokv::Client::diff`] in `nokv serve`.

use serde_json::Value;

use crate::client::RemoteClient;
use crate::wire::{encode_component, envelope_result};
use nokv::diff::DiffOptions;
use nokv::error::Result;

impl RemoteClient {
    /// One page of the diff from side `a` to side `b` (each `WB`, `WB@SNAPSHOT` or a commit id;
    /// see [`nokv::Client::diff`]): the JSON object `nokv diff` prints, without `status`.
    ///
    /// Errors: [`nokv::Error::OperationFailed`] (`NotFound`, `InvalidArguments`, …),
    /// [`nokv::Error::Connection`], [`nokv::Error::Server`].
    pub fn diff(&self, a: &str, b: &str, options: &DiffOptions) -> Result<Value> {
        let mut query = format!(
            "/v1/diff?a={}&b={}&limit={}&patch={}&patch_max_bytes={}",
            encode_component(a),
            encode_component(b),
            options.limit,
            options.patch,
            options.patch_max_bytes
        );
        if let Some(c) = &options.cursor {
            query.push_str(&format!("&cursor={}", encode_component(c)));
        }
        envelope_result(self.get_json(&query)?)
    }
}
