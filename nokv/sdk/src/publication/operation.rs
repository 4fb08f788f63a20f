//! One publication from begin to terminal phase: [`Client::publish_body`] and its failure and
//! cleanup paths (see the folder's module docs).

use std::borrow::Cow;

use meta::codec::{PublishOperation, PublishPhase, StagedProviderState};
use meta::ops::publish::operation::{
    self as ledger, BeginOutcome, PublishIntent, StagedBlock, MAX_LEDGER_ROWS_PER_COMMAND,
};
use meta::OperationId;
use objstore::ObjectStore;

use super::plan::{is_definite_refusal, BodyPlan, Published, Source};
use super::upload::{delete_owned, read_block, send_block, InFlight, LedgerUpload, SendError};
use crate::client::Client;
use crate::error::{Error, Result};

impl Client {
    /// Publishes one body through a Publish operation (see the module docs). The caller has
    /// checked the path and condition; the final command re-checks them atomically.
    pub(crate) fn publish_body(&self, plan: BodyPlan, source: Source<'_>) -> Result<Published> {
        let meta = self.meta().clone();
        let objects = self.objects().clone();
        let id = plan.op.id;
        {
            let mut set = self.in_flight().lock().unwrap_or_else(|p| p.into_inner());
            if !set.insert(id) {
                return Err(Error::Meta(meta::Error::OperationState {
                    operation_id: id.to_hex(),
                    phase: "in flight".into(),
                    wanted: "the same operation is already running in this process".into(),
                }));
            }
        }
        let _guard = InFlight { client: self, id };
        let intent = PublishIntent {
            operation_id: id,
            intent_digest: plan.op.intent_digest,
            workbench_id: plan.workbench_id.clone(),
            path: plan.path.clone(),
            condition: plan.condition,
            revision_id: plan.revision_id,
            base: plan.base,
            dependency_depth: plan.dependency_depth,
            content_type: plan.content_type.clone(),
            producer: plan.producer.clone(),
            manifest_id: plan.manifest_id.clone(),
            index_fields: plan.index_fields.clone(),
        };
        let block_size = self.block_size();
        let first_index = plan.base.map_or(0, |b| b.row_count);
        let first_offset = plan.base.map_or(0, |b| b.logical_size);
        let mut hasher = plan.hasher;
        let mut source = source;
        let mut slice_pos = 0usize;
        let mut buf = Vec::new();
        let mut begun = false;
        let mut index = first_index;
        let mut uploaded = 0u64;
        let mut pending_marks: Vec<(u64, StagedProviderState)> = Vec::new();
        let mut sent_keys: Vec<String> = Vec::new();
        // Ledger commands run so far (begin, then one stage per further group).
        let mut ledger_commands = 0u32;
        loop {
            // Next group of blocks: up to 100 from memory, one from a stream.
            let group: Vec<Cow<'_, [u8]>> = match &mut source {
                Source::Slice(bytes) => {
                    let mut g = Vec::new();
                    while g.len() < MAX_LEDGER_ROWS_PER_COMMAND && slice_pos < bytes.len() {
                        let end = (slice_pos + block_size).min(bytes.len());
                        g.push(Cow::Borrowed(&bytes[slice_pos..end]));
                        slice_pos = end;
                    }
                    g
                }
                Source::Reader(reader) => {
                    if index > first_index {
                        // A full block came before: the body is large, so reserve a whole
                        // block up front instead of growing to it (capacity only, not zeroed).
                        buf.reserve_exact(block_size);
                    }
                    let n = match read_block(*reader, &mut buf, block_size) {
                        Ok(n) => n,
                        // The input failed mid-stream: the operation owns what was sent; abort
                        // it and delete exactly that.
                        Err(e) if begun => {
                            return Err(self.fail_upload(&id, &pending_marks, &sent_keys, e))
                        }
                        Err(e) => return Err(e),
                    };
                    if n == 0 {
                        Vec::new()
                    } else {
                        buf.truncate(n);
                        vec![Cow::Owned(std::mem::take(&mut buf))]
                    }
                }
            };
            if group.is_empty() && begun {
                break;
            }
            let blocks: Vec<StagedBlock> = group
                .iter()
                .enumerate()
                .map(|(i, b)| StagedBlock {
                    object_key: objstore::block_key(
                        meta.logical_shard_id().as_bytes(),
                        meta.root_id().as_bytes(),
                        plan.revision_id.as_bytes(),
                        index.saturating_add(i as u64),
                    ),
                    length: b.len() as u64,
                    digest_uri: objstore::sha256_uri(b),
                })
                .collect();
            // A small body of a fresh operation: publish it under a reserved revision (its key is
            // already owned), with no ledger command of its own.
            if !begun
                && plan.op.reservable
                && !plan.op.restart
                && plan.base.is_none()
                && group.len() == 1
                && group[0].len() <= super::reserved::MAX_RESERVED_BODY
                && match &source {
                    Source::Slice(bytes) => slice_pos == bytes.len(),
                    Source::Reader(_) => group[0].len() < block_size,
                }
            {
                if let Some((reservation, reserved)) = self.reservations().take() {
                    return self.publish_reserved_body(
                        &intent,
                        plan.expected_digest_uri.as_ref(),
                        reservation,
                        reserved,
                        &group[0],
                    );
                }
            }
            // The rows are durable before any of their bytes is sent.
            let first_seq = if !begun {
                begun = true;
                if plan.op.restart {
                    let op = ledger::restart(&meta, &intent, &blocks)?;
                    op.staged_object_count.saturating_sub(blocks.len() as u64)
                } else {
                    match ledger::begin(&meta, &intent, &blocks)? {
                        BeginOutcome::Started(_) => 0,
                        BeginOutcome::Existing(op) => {
                            return Err(Error::Meta(meta::Error::OperationState {
                                operation_id: id.to_hex(),
                                phase: format!("{:?}", op.phase),
                                wanted: "a new operation id".into(),
                            }))
                        }
                    }
                }
            } else {
                match ledger::stage(&meta, &id, &blocks, &pending_marks) {
                    Ok(seq) => seq,
                    Err(e @ meta::Error::OperationState { .. }) => {
                        return Err(self.join_cleanup(&id, &sent_keys, e.into()))
                    }
                    Err(e) => return Err(e.into()),
                }
            };
            pending_marks.clear();
            ledger_commands = ledger_commands.saturating_add(1);
            if group.is_empty() {
                break; // empty body: Begin only
            }
            crate::fault::point("after-begin");
            for (i, (bytes, block)) in group.iter().zip(&blocks).enumerate() {
                let seq = first_seq.saturating_add(i as u64);
                sent_keys.push(block.object_key.clone());
                let mut upload = LedgerUpload {
                    meta: &meta,
                    operation_id: id,
                    sequence: seq,
                };
                let failure = match send_block(
                    objects.as_ref(),
                    &block.object_key,
                    bytes,
                    &block.digest_uri,
                    &mut upload,
                ) {
                    Ok(()) => None,
                    Err(SendError::Ambiguous(e)) => {
                        pending_marks.push((seq, StagedProviderState::Ambiguous));
                        Some(Error::from(e))
                    }
                    // A definite failure stays Uploading (the attempt's outcome is not
                    // confirmed either way; cleanup deletes the key).
                    Err(SendError::Definite(e)) => Some(e),
                };
                if let Some(err) = failure {
                    // Rows of this group that were never sent are recorded Planned.
                    for later in (i + 1)..blocks.len() {
                        pending_marks.push((
                            first_seq.saturating_add(later as u64),
                            StagedProviderState::Planned,
                        ));
                    }
                    return Err(self.fail_upload(&id, &pending_marks, &sent_keys, err));
                }
                pending_marks.push((seq, StagedProviderState::Uploaded));
                hasher.update(bytes);
                uploaded = uploaded.saturating_add(block.length);
                index = index.saturating_add(1);
            }
            if matches!(source, Source::Reader(_)) && group.iter().all(|b| b.len() < block_size) {
                break; // a short block ends a stream
            }
        }
        crate::fault::point("after-upload");
        let size = first_offset.saturating_add(uploaded);
        let digest = hasher.finish();
        if let Some(expected) = plan.expected_digest_uri.as_ref().filter(|e| **e != digest) {
            // The caller declared another body: abort before sealing, nothing is published.
            let err = Error::DigestMismatch {
                path: plan.path.as_str().to_string(),
                expected: expected.clone(),
                actual: digest,
            };
            return Err(self.fail_upload(&id, &pending_marks, &sent_keys, err));
        }
        if ledger_commands <= 1 {
            // The whole body was staged by its begin command: seal and publish in one command
            // (Uploading -> Published), so the put waits for two metadata commits, not three.
            return match self.with_refill(|change| {
                ledger::finalize_and_publish(&meta, &id, size, &digest, &pending_marks, change)
            }) {
                Ok(receipt) => {
                    self.reservations().completed_one();
                    crate::fault::point("after-publish");
                    Ok(Published { receipt })
                }
                Err(e @ meta::Error::OperationState { .. }) => {
                    // Cleanup won the CAS: this late completion joins cleanup.
                    Err(self.join_cleanup(&id, &sent_keys, e.into()))
                }
                Err(e) => {
                    if is_definite_refusal(&e) {
                        // Nothing was written: the operation is still Uploading (or, past the
                        // command bounds, Finalizing): abort it and delete its objects.
                        let refused = format!("publication refused: {e}");
                        if ledger::abort(&meta, &id, &refused).is_ok()
                            || ledger::take_over(&meta, &id, &refused).is_ok()
                        {
                            let _ = self.clean_operation(&id);
                        }
                    }
                    Err(crate::client::map_publish_error(
                        e,
                        &plan.path,
                        &plan.workbench_id,
                        plan.condition,
                    ))
                }
            };
        }
        match ledger::finalize(&meta, &id, size, &digest, &pending_marks) {
            Ok(_) => {}
            Err(e @ meta::Error::OperationState { .. }) => {
                // Cleanup won the CAS: this late completion joins cleanup.
                return Err(self.join_cleanup(&id, &sent_keys, e.into()));
            }
            Err(e) => return Err(e.into()),
        }
        crate::fault::point("after-finalizing-cas");
        match ledger::publish_operation(&meta, &id) {
            Ok(receipt) => {
                self.reservations().completed_one();
                crate::fault::point("after-publish");
                Ok(Published { receipt })
            }
            Err(e) => {
                if is_definite_refusal(&e) {
                    // Take the Finalizing operation over (with proof) and delete its objects.
                    if ledger::take_over(&meta, &id, &format!("publication refused: {e}")).is_ok() {
                        let _ = self.clean_operation(&id);
                    }
                }
                Err(crate::client::map_publish_error(
                    e,
                    &plan.path,
                    &plan.workbench_id,
                    plan.condition,
                ))
            }
        }
    }

    /// A failed upload: record the provider states seen so far (best effort), abort the
    /// operation and delete exactly its ledger-owned keys. Returns `err`.
    fn fail_upload(
        &self,
        id: &OperationId,
        marks: &[(u64, StagedProviderState)],
        sent_keys: &[String],
        err: Error,
    ) -> Error {
        let meta = self.meta();
        if !marks.is_empty() {
            let _ = ledger::stage(meta, id, &[], marks);
        }
        match ledger::abort(meta, id, &format!("upload failed: {err}")) {
            Ok(_) => {
                let _ = self.clean_operation(id);
            }
            Err(_) => {
                let _ = self.join_cleanup(id, sent_keys, Error::Busy);
            }
        }
        err
    }

    /// Another party aborted the operation while this handle was still sending: delete every
    /// key this handle sent (its completions happened before this call), then run the cleanup
    /// pass. Returns `err`.
    fn join_cleanup(&self, id: &OperationId, sent_keys: &[String], err: Error) -> Error {
        for key in sent_keys {
            let _ = self.objects().delete(key);
        }
        if let Ok(Some(op)) = ledger::get(self.meta(), id) {
            if matches!(
                op.phase,
                PublishPhase::Aborting | PublishPhase::Cleaning | PublishPhase::Quarantined
            ) {
                let _ = self.clean_operation(id);
            }
        }
        err
    }

    /// Runs the cleanup (or reconciliation) pass of one aborted operation.
    pub(super) fn clean_operation(&self, id: &OperationId) -> Result<PublishOperation> {
        let objects = self.objects().clone();
        Ok(ledger::clean(self.meta(), id, &mut |row| {
            delete_owned(objects.as_ref(), row)
        })?)
    }
}
