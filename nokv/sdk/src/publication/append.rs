//! Durable idempotent append ([`Client::append_idempotent`]): the caller's operation id names
//! one Publish operation, so a retry after any failure converges to one append.

use meta::codec::PublishPhase;
use meta::ops::publish::operation::{self as ledger};
use meta::{NormPath, OperationId, PublishReceipt};

use super::plan::{append_intent_digest, OpSpec};
use crate::client::Client;
use crate::error::{Error, Result};

impl Client {
    /// Durable idempotent append: like [`Client::append`], but the Publish operation's id is the
    /// caller's `operation_id` (16 bytes; the CLI takes 32 hex characters), bound to the intent
    /// `(workbench, path, SHA-256 and length of bytes)`. Replaying the same id with the same
    /// intent after a lost response returns the original receipt with `idempotent_replay = true`
    /// and appends nothing, in this or any later process. An attempt that lost the generation
    /// CAS to a concurrent writer is cleaned up and re-begun under the same id (bounded retries).
    ///
    /// Errors: those of [`Client::append`]; `Error::Meta(meta::Error::OperationIntentMismatch)`
    /// when the id was used with another intent (nothing is changed; the Workbench facade's
    /// `Conflict` family, `details.conflict = "OperationState"`);
    /// `Error::Meta(meta::Error::OperationState)` when the same id is running in this process
    /// or a previous attempt is still quarantined.
    pub fn append_idempotent(
        &self,
        workbench_id: &str,
        path: &str,
        bytes: &[u8],
        operation_id: [u8; 16],
        content_type: Option<&str>,
        producer: &str,
    ) -> Result<crate::client::AppendReceipt> {
        self.append_idempotent_with_create_type(
            workbench_id,
            path,
            bytes,
            operation_id,
            content_type,
            crate::json::payload::TEXT_CONTENT_TYPE,
            producer,
        )
    }

    /// [`Client::append_idempotent`] where `create_type` is the content type an append that
    /// creates the artifact gets when `content_type` is `None` (as
    /// [`Client::append_with_create_type`]; decided in the same read as the append).
    ///
    /// Errors: those of [`Client::append_idempotent`]; [`Error::InvalidArgument`] for a
    /// `create_type` that is not 1..=255 printable ASCII characters.
    #[allow(clippy::too_many_arguments)]
    pub fn append_idempotent_with_create_type(
        &self,
        workbench_id: &str,
        path: &str,
        bytes: &[u8],
        operation_id: [u8; 16],
        content_type: Option<&str>,
        create_type: &str,
        producer: &str,
    ) -> Result<crate::client::AppendReceipt> {
        let norm = self.publishable_path(path)?;
        if let Some(ct) = content_type {
            crate::client::validate_content_type(ct)?;
        }
        crate::client::validate_content_type(create_type)?;
        let id = OperationId(operation_id);
        let intent_digest = append_intent_digest(workbench_id, &norm, bytes);
        let delta_digest_uri = objstore::sha256_uri(bytes);
        const ATTEMPTS: usize = 8;
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let spec = match self.caller_operation_start(
                id,
                intent_digest,
                "the same operation is already running in this process",
            )? {
                CallerOperation::Published { path, receipt } => {
                    let PublishReceipt {
                        generation,
                        created,
                        entry,
                        ..
                    } = *receipt;
                    return Ok(crate::client::AppendReceipt {
                        path,
                        generation,
                        appended_bytes: bytes.len() as u64,
                        size_bytes: entry.logical_size,
                        created,
                        delta_digest_uri,
                        body_digest_uri: entry.body_digest_uri,
                        content_type: entry.content_type,
                        dependency_count: entry.dependency_count,
                        dependency_depth: entry.dependency_depth,
                        idempotent_replay: true,
                    });
                }
                CallerOperation::Run(spec) => spec,
            };
            match self.append_once(
                workbench_id,
                &norm,
                bytes,
                content_type,
                create_type,
                producer,
                spec,
            ) {
                Ok(receipt) => {
                    return Ok(crate::client::AppendReceipt {
                        delta_digest_uri,
                        ..receipt
                    })
                }
                Err(e @ Error::GenerationConflict { .. }) => last = Some(e),
                Err(Error::Meta(meta::Error::OperationState { .. })) => {
                    // Lost a race with another holder of the id: decide again from the ledger.
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or(Error::Busy))
    }

    /// Decides what a caller-chosen operation id (an idempotent append's operation id, a put's
    /// request id) means before anything is written, from its Publish operation in the ledger:
    ///
    /// - none: run under the id;
    /// - another intent digest: `Error::Meta(meta::Error::OperationIntentMismatch)`;
    /// - Published: its stored receipt (the caller answers a replay, writing nothing);
    /// - Cleaned (an earlier attempt failed and was cleaned up): run again under the id, the
    ///   operation re-begun with a fresh revision;
    /// - running in this handle: `Error::Meta(meta::Error::OperationState)` with `running` as
    ///   what was wanted;
    /// - an unfinished operation of an earlier process: recovered first (resumed to Published or
    ///   cleaned; Quarantined is `Error::Meta(meta::Error::OperationState)`), then decided again,
    ///   at most [`DECIDE_ATTEMPTS`] times before [`Error::Busy`].
    ///
    /// Errors: those above; [`Error::Meta`] when the ledger cannot be read.
    pub(super) fn caller_operation_start(
        &self,
        id: OperationId,
        intent_digest: [u8; 32],
        running: &str,
    ) -> Result<CallerOperation> {
        for _ in 0..DECIDE_ATTEMPTS {
            let restart = match ledger::get(self.meta(), &id)? {
                None => false,
                Some(op) if op.intent_digest != intent_digest => {
                    return Err(Error::Meta(meta::Error::OperationIntentMismatch {
                        operation_id: id.to_hex(),
                    }))
                }
                Some(op) if op.phase == PublishPhase::Published => {
                    let receipt =
                        ledger::published_receipt(self.meta(), &id)?.ok_or_else(|| {
                            Error::Meta(meta::Error::OperationState {
                                operation_id: id.to_hex(),
                                phase: "Published".into(),
                                wanted: "its stored receipt is missing".into(),
                            })
                        })?;
                    return Ok(CallerOperation::Published {
                        path: op.path,
                        receipt: Box::new(receipt),
                    });
                }
                Some(op) if op.phase == PublishPhase::Cleaned => true,
                Some(op) => {
                    let in_flight = self
                        .in_flight()
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .contains(&id);
                    if in_flight {
                        return Err(Error::Meta(meta::Error::OperationState {
                            operation_id: id.to_hex(),
                            phase: format!("{:?}", op.phase),
                            wanted: running.into(),
                        }));
                    }
                    // An orphan of an earlier process: recover it, then decide again.
                    let after = self.recover_one(&id, &op)?;
                    if after.phase == PublishPhase::Quarantined {
                        return Err(Error::Meta(meta::Error::OperationState {
                            operation_id: id.to_hex(),
                            phase: "Quarantined".into(),
                            wanted: "run `nokv operation recover` once the provider answers".into(),
                        }));
                    }
                    continue;
                }
            };
            return Ok(CallerOperation::Run(OpSpec {
                id,
                intent_digest,
                restart,
                reservable: false,
            }));
        }
        Err(Error::Busy)
    }
}

/// Most recovery rounds before [`Client::caller_operation_start`] gives up deciding (an orphan
/// that keeps changing under it).
const DECIDE_ATTEMPTS: usize = 4;

/// What [`Client::caller_operation_start`] decided.
pub(super) enum CallerOperation {
    /// The operation was published: its path and stored receipt (nothing is to be written).
    Published {
        /// The published path.
        path: NormPath,
        /// The receipt stored with the operation's final command (boxed: a replay is the rare
        /// outcome).
        receipt: Box<PublishReceipt>,
    },
    /// Run under this operation.
    Run(OpSpec),
}
