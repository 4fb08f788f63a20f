//! Moving one path through the server: [`RemoteClient::move_path`] →
//! `POST /v1/workbenches/{id}/move`, which runs [`nokv::Client::move_path`] in `nokv serve`.

use serde_json::json;

use crate::client::RemoteClient;
use crate::wire::{encode_component, envelope_result, request_id_or_new};
use nokv::error::Result;
use nokv::move_path::{MoveOptions, MoveReceipt};

impl RemoteClient {
    /// Moves the file at `from` to `to` (see [`nokv::Client::move_path`]). Without
    /// `options.request_id` a fresh one is sent, so a retry after a lost response is an exact
    /// replay (`idempotent_replay = true`) instead of `NotFound`.
    ///
    /// Errors: [`nokv::Error::OperationFailed`] (`NotFound`, `AlreadyExists`, `Conflict`,
    /// `NotArtifact` for a directory source, `InvalidArguments`, …), [`nokv::Error::Connection`],
    /// [`nokv::Error::Server`].
    pub fn move_path(
        &self,
        workbench_id: &str,
        from: &str,
        to: &str,
        options: &MoveOptions,
    ) -> Result<MoveReceipt> {
        let request_id = request_id_or_new(options.request_id.as_ref())?;
        let body = json!({
            "from": from,
            "to": to,
            "expected_generation": options.expected_generation,
            "expected_destination_generation": options.expected_destination_generation,
            "request_id": request_id,
        });
        let v = self.post_json(
            &format!("/v1/workbenches/{}/move", encode_component(workbench_id)),
            &body,
            true,
        )?;
        MoveReceipt::from_envelope(&envelope_result(v)?)
    }
}
