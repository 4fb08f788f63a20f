//! Sending blocks under a Publish operation: the in-flight guard, one block's durable put with
//! its ambiguous/definite failure, the multipart upload id recorded in the ledger, and the
//! deletion of a ledger-owned object.

use std::io::Read;
use std::path::PathBuf;

use meta::codec::{StagedCleanupState, StagedObject, StagedProviderState};
use meta::ops::publish::operation::{self as ledger, DeleteOutcome};
use meta::OperationId;
use objstore::{ObjectStore, PutOutcome, Resolution};

use crate::client::Client;
use crate::error::{Error, Result};

/// Removes the operation from the in-flight set when the publication ends (any way).
pub(super) struct InFlight<'a> {
    pub(super) client: &'a Client,
    pub(super) id: OperationId,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut set = self
            .client
            .in_flight()
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        set.remove(&self.id);
    }
}

/// Why a block upload failed.
pub(super) enum SendError {
    /// The provider could not tell whether the write landed.
    Ambiguous(objstore::Error),
    /// The write definitely failed (or the key holds other bytes).
    Definite(Error),
}

/// Records a multipart upload id in the ledger before the first part is sent.
pub(super) struct LedgerUpload<'a> {
    pub(super) meta: &'a meta::MetaShard,
    pub(super) operation_id: OperationId,
    pub(super) sequence: u64,
}

impl objstore::UploadObserver for LedgerUpload<'_> {
    fn upload_started(&mut self, upload_id: &str) -> std::result::Result<(), objstore::Error> {
        ledger::record_upload_id(self.meta, &self.operation_id, self.sequence, upload_id).map_err(
            |e| objstore::Error::Unavailable {
                key: String::new(),
                reason: format!("the multipart upload id could not be recorded: {e}"),
            },
        )?;
        crate::fault::point("multipart-after-upload-id");
        Ok(())
    }

    fn part_sent(&mut self, part_number: u32) {
        if part_number == 1 {
            crate::fault::point("multipart-after-first-part");
        }
    }
}

/// Writes one block under its fresh revision-owned key; `upload` sees a multipart upload start
/// (the ledger records its id on the block's row before the first part,
/// [`LedgerUpload`]; a reserved key refuses parts).
pub(super) fn send_block(
    objects: &dyn ObjectStore,
    key: &str,
    bytes: &[u8],
    digest_uri: &str,
    upload: &mut dyn objstore::UploadObserver,
) -> std::result::Result<(), SendError> {
    match objects.put_if_absent_observed(key, bytes, upload) {
        Ok(PutOutcome::Created) => Ok(()),
        Ok(PutOutcome::AlreadyExists) => {
            match objstore::resolve_ambiguous(objects, key, bytes.len() as u64, digest_uri) {
                Ok(Resolution::Landed) => Ok(()),
                Ok(_) => Err(SendError::Definite(Error::ObjectUnavailable(
                    "another object already exists under a fresh block key".into(),
                ))),
                Err(e) => Err(SendError::Definite(e.into())),
            }
        }
        Err(e @ objstore::Error::Ambiguous { .. }) => Err(SendError::Ambiguous(e)),
        Err(e) => Err(SendError::Definite(e.into())),
    }
}

/// The provider DELETE used by cleanup: exactly the ledger-owned key of `row`.
///
/// Cleanup (row Owned/DeletePending): DELETE (nothing for a row recorded Planned: never sent);
/// a row whose upload was ambiguous is quarantined
/// even after a successful DELETE (a delayed copy may still land). Reconciliation (row
/// Quarantined, a later pass): DELETE, then HEAD must report the key absent.
pub(crate) fn delete_owned(objects: &dyn ObjectStore, row: &StagedObject) -> DeleteOutcome {
    let reconcile = row.cleanup_state == StagedCleanupState::Quarantined;
    if row.provider_state == StagedProviderState::Planned && !reconcile {
        // Recorded as never sent: there is nothing to delete.
        return DeleteOutcome::Deleted;
    }
    // A multipart upload the ledger owns is aborted first, so its parts are freed (an upload
    // that completed or was already aborted answers "no such upload", which is success).
    if let Some(upload_id) = &row.upload_id {
        match objects.abort_upload(&row.object_key, upload_id) {
            Ok(()) => {}
            Err(objstore::Error::Ambiguous { reason, .. }) => {
                return DeleteOutcome::Quarantined(format!("ambiguous multipart abort: {reason}"))
            }
            Err(e) => return DeleteOutcome::Failed(e.to_string()),
        }
    }
    match objects.delete(&row.object_key) {
        Ok(()) => {}
        Err(objstore::Error::Ambiguous { reason, .. }) => {
            return DeleteOutcome::Quarantined(format!("ambiguous DELETE: {reason}"))
        }
        Err(e) => return DeleteOutcome::Failed(e.to_string()),
    }
    if reconcile {
        return match objects.head(&row.object_key) {
            Ok(None) => DeleteOutcome::Deleted,
            Ok(Some(_)) => DeleteOutcome::Quarantined("object still present after DELETE".into()),
            Err(e) => DeleteOutcome::Failed(e.to_string()),
        };
    }
    if row.provider_state == StagedProviderState::Ambiguous {
        return DeleteOutcome::Quarantined(
            "ambiguous upload: deleted, but a delayed copy may still land; re-checked by the next recovery pass"
                .into(),
        );
    }
    DeleteOutcome::Deleted
}

pub(super) fn read_block(reader: &mut dyn Read, buf: &mut Vec<u8>, limit: usize) -> Result<usize> {
    // `read_to_end` grows `buf` as bytes arrive and initialises only what each read is handed,
    // so a small body costs a small buffer, not a zeroed block (a 4 MiB memset and its page
    // faults for every 4 KiB streamed put). It retries `Interrupted` itself.
    buf.clear();
    reader
        .take(limit as u64)
        .read_to_end(buf)
        .map_err(|source| Error::LocalIo {
            op: "read body",
            path: PathBuf::from("<input>"),
            source,
        })
}
