//! Ledger-driven publication, recovery and durable idempotent append (docs/metadata-format.md, "Upload And
//! Append"; docs/design.md, "Immutable Bodies And Publication", "Safe Object Lifetime").
//!
//! Every body the SDK publishes goes through one Publish operation of
//! [`meta::ops::publish_operation`]:
//!
//! 1. **Begin** — the operation (phase Uploading, the complete frozen request) and the
//!    StagedObject rows of the first block group are committed in one metadata command before
//!    any byte is sent. A streamed body ([`crate::Client::put_reader`]) is read one block at a
//!    time into memory, hashed, its row committed, then uploaded; a body held in memory stages up
//!    to [`meta::ops::publish_operation::MAX_LEDGER_ROWS_PER_COMMAND`] rows per command.
//! 2. **Upload** — each block is written with `put_if_absent` under its revision-owned key. The
//!    next staging command marks the previous group Uploaded (or Ambiguous when the provider
//!    could not tell, [`objstore::Error::Ambiguous`]).
//! 3. **Finalize** — CAS Uploading -> Finalizing sealing length and digest, then the one
//!    publication command moves Finalizing -> Published with the path, revision, manifest,
//!    references, indexes, event and dedupe result.
//! 4. **Failure** — a failed upload or a definite refusal of the final command aborts the
//!    operation (CAS, with proof of no publication for Finalizing) and deletes exactly the
//!    ledger-owned keys. If the provider is down the operation stays Cleaning and the next
//!    recovery pass finishes it. An upload that completes after another party aborted the
//!    operation joins cleanup: it deletes every key it sent, then runs the cleanup pass.
//!
//! **Recovery** ([`crate::Client::recover_operations`], run at every [`crate::Client::open`]) is
//! driven by the ledger only, never by listing the bucket. It finds the non-terminal operations
//! through the pending-operation registry ([`meta::ops::publish_operation::list_pending`]), so
//! its cost grows with the operations still open, not with every publication ever made. The holt database is held by one
//! process at a time, so at open every non-terminal operation is orphaned; later passes skip the
//! operations this handle has in flight. Uploading / Aborting / Cleaning operations are aborted
//! and cleaned; Finalizing operations whose own objects are all present and verified (length +
//! SHA-256) are resumed to Published, otherwise taken over by abort (with proof) and cleaned;
//! Quarantined operations from an earlier pass are reconciled (DELETE again, then HEAD must
//! report the key absent).
//!
//! Multipart uploads: a block the provider uploads in parts (S3 above its multipart threshold)
//! goes through [`objstore::ObjectStore::put_if_absent_observed`]; the provider reports the
//! upload id before the first part and [`meta::ops::publish_operation::record_upload_id`]
//! records it on the block's StagedObject row in one command, so the parts are ledger-owned
//! before they are sent (if the id cannot be recorded the provider aborts the upload and sends
//! nothing). A process killed mid-upload leaves an open upload that recovery finds in the ledger:
//! cleanup aborts it ([`objstore::ObjectStore::abort_upload`]) before deleting the key, so no
//! parts stay billed and invisible. Crash tests stop after `multipart-after-upload-id` and
//! `multipart-after-first-part` (feature `fault-points`).
//!
//! Append cost: the whole-body digest of an append re-hashes the base body (O(body) per
//! append). Persisting the resumable SHA-256 state would need a field the seed's ArtifactRevision
//! record (value version 2) does not have, so it is left as is.
//!
//! **Durable idempotent append** ([`crate::Client::append_idempotent`]): the caller's 16-byte
//! operation id is the Publish operation's id and its intent digest is
//! `sha256("nokv.append.intent.v1\0" | u32 len | workbench_id | u32 len | path | u64 delta
//! length | delta sha256)`. A replay of a published id returns the original receipt and appends
//! nothing; another intent under the same id is refused with
//! `Error::Meta(meta::Error::OperationIntentMismatch)`; an attempt that lost the path generation
//! CAS ends Cleaned and is re-begun under the same id with a fresh revision.

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::Read;
use std::path::PathBuf;

use meta::codec::{
    PublishBase, PublishOperation, PublishPhase, StagedCleanupState, StagedObject,
    StagedProviderState,
};
use meta::ops::publish_operation::{
    self as ledger, BeginOutcome, DeleteOutcome, PublishIntent, StagedBlock,
    MAX_LEDGER_ROWS_PER_COMMAND,
};
use meta::{ArtifactRevisionId, NormPath, OperationId, PathCondition};
use objstore::{ObjectStore, PutOutcome, Resolution};
use sha2::{Digest, Sha256};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::index_fields::IndexFields;

/// Domain separator of the idempotent-append intent digest.
pub const APPEND_INTENT_DOMAIN: &[u8] = b"nokv.append.intent.v1\0";
/// Domain separator of the intent digest of ordinary (random-id) publications.
pub const PUBLISH_INTENT_DOMAIN: &[u8] = b"nokv.publish.intent.v1\0";

/// What one recovery pass did (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoverySummary {
    /// Finalizing operations resumed to Published.
    pub resumed: u64,
    /// Operations aborted (or already aborting) whose objects were all deleted: now Cleaned.
    pub cleaned: u64,
    /// Operations left Quarantined (ambiguous provider outcomes, evidence recorded).
    pub quarantined: u64,
    /// Quarantined operations of an earlier pass reconciled to Cleaned.
    pub reconciled: u64,
    /// Operations still Cleaning (a DELETE failed; the next pass resumes).
    pub pending: u64,
    /// Operations skipped because this handle is still running them.
    pub in_flight: u64,
    /// Per-operation failures (`operation_id: error`), for operations left as they were.
    pub errors: Vec<String>,
}

/// One Publish operation as [`Client::list_operations`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationInfo {
    /// Operation id, 32 lowercase hex characters.
    pub operation_id: String,
    /// Phase name (`Uploading`, `Finalizing`, `Published`, `Aborting`, `Cleaning`, `Cleaned`,
    /// `Quarantined`).
    pub phase: String,
    /// Target workbench.
    pub workbench_id: String,
    /// Target workbench-relative path.
    pub path: String,
    /// StagedObject rows owned (all attempts).
    pub staged_objects: u64,
    /// Rows not yet confirmed deleted or published (live ledger rows).
    pub live_objects: u64,
    /// Sealed body length in bytes (0 before Finalizing).
    pub expected_length: u64,
    /// Sealed `sha256:` body digest (before Finalizing: `None`).
    pub expected_digest_uri: Option<String>,
    /// Published path generation, if published.
    pub generation: Option<u64>,
    /// Terminal error or quarantine evidence, if any.
    pub note: Option<String>,
}

/// Where the bytes of a body come from.
pub(crate) enum Source<'a> {
    /// Bytes held in memory: staged up to 100 blocks per command.
    Slice(&'a [u8]),
    /// A stream: one block in memory at a time.
    Reader(&'a mut dyn Read),
}

/// How the operation of one publication is identified.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpSpec {
    /// Operation id.
    pub(crate) id: OperationId,
    /// Intent digest.
    pub(crate) intent_digest: [u8; 32],
    /// Re-begin a Cleaned attempt (idempotent append) instead of Begin.
    pub(crate) restart: bool,
}

impl OpSpec {
    /// A fresh random operation for an ordinary publication of `workbench_id`/`path`.
    pub(crate) fn fresh(workbench_id: &str, path: &NormPath) -> Result<OpSpec> {
        let mut h = Sha256::new();
        h.update(PUBLISH_INTENT_DOMAIN);
        put_str(&mut h, workbench_id);
        put_str(&mut h, path.as_str());
        Ok(OpSpec {
            id: OperationId::random()?,
            intent_digest: h.finalize().into(),
            restart: false,
        })
    }
}

fn put_str(h: &mut Sha256, s: &str) {
    h.update((s.len() as u32).to_be_bytes());
    h.update(s.as_bytes());
}

/// The intent digest of an idempotent append (see the module docs).
pub fn append_intent_digest(workbench_id: &str, path: &NormPath, delta: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(APPEND_INTENT_DOMAIN);
    put_str(&mut h, workbench_id);
    put_str(&mut h, path.as_str());
    h.update((delta.len() as u64).to_be_bytes());
    h.update(Sha256::digest(delta));
    h.finalize().into()
}

/// Everything [`Client::publish_body`] needs besides the bytes.
pub(crate) struct BodyPlan {
    pub(crate) op: OpSpec,
    pub(crate) workbench_id: String,
    pub(crate) path: NormPath,
    pub(crate) condition: PathCondition,
    pub(crate) revision_id: ArtifactRevisionId,
    pub(crate) base: Option<PublishBase>,
    pub(crate) dependency_depth: u32,
    pub(crate) content_type: String,
    pub(crate) producer: String,
    pub(crate) manifest_id: Option<String>,
    pub(crate) index_fields: IndexFields,
    /// Hasher already fed with the reused base bytes (appends), else empty.
    pub(crate) hasher: objstore::Sha256Stream,
    /// The caller's declared digest of the whole body ([`crate::PutOptions::expected_digest_uri`]).
    pub(crate) expected_digest_uri: Option<String>,
}

/// The result of a ledger-driven publication.
pub(crate) struct Published {
    /// The final command's receipt.
    pub(crate) receipt: meta::PublishReceipt,
}

/// Removes the operation from the in-flight set when the publication ends (any way).
struct InFlight<'a> {
    client: &'a Client,
    id: OperationId,
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
enum SendError {
    /// The provider could not tell whether the write landed.
    Ambiguous(objstore::Error),
    /// The write definitely failed (or the key holds other bytes).
    Definite(Error),
}

/// Records a multipart upload id in the ledger before the first part is sent.
struct LedgerUpload<'a> {
    meta: &'a meta::MetaShard,
    operation_id: OperationId,
    sequence: u64,
}

impl objstore::UploadObserver for LedgerUpload<'_> {
    fn upload_started(&mut self, upload_id: &str) -> std::result::Result<(), objstore::Error> {
        ledger::record_upload_id(self.meta, &self.operation_id, self.sequence, upload_id).map_err(
            |e| objstore::Error::Unavailable {
                key: String::new(),
                reason: format!("the multipart upload id could not be recorded: {e}"),
            },
        )?;
        crate::commit::fault_point("multipart-after-upload-id");
        Ok(())
    }

    fn part_sent(&mut self, part_number: u32) {
        if part_number == 1 {
            crate::commit::fault_point("multipart-after-first-part");
        }
    }
}

/// Writes one block under its fresh revision-owned key; a multipart upload's id is recorded on
/// the block's ledger row (`upload`) before its first part.
fn send_block(
    objects: &dyn ObjectStore,
    key: &str,
    bytes: &[u8],
    digest_uri: &str,
    upload: &mut LedgerUpload<'_>,
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

fn read_block(reader: &mut dyn Read, buf: &mut Vec<u8>, limit: usize) -> Result<usize> {
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

/// Fault points for crash tests (cargo feature `fault-points`): when `NOKV_FAULT_POINT` names
/// `point`, the process reports it on stderr and stops there until it is killed.
#[cfg(feature = "fault-points")]
pub fn fault_point(point: &str) {
    if std::env::var("NOKV_FAULT_POINT").is_ok_and(|v| v == point) {
        eprintln!("NOKV_FAULT_POINT reached: {point}");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

/// Fault points are compiled out without the `fault-points` feature.
#[cfg(not(feature = "fault-points"))]
#[inline(always)]
pub fn fault_point(_point: &str) {}

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
            if group.is_empty() {
                break; // empty body: Begin only
            }
            fault_point("after-begin");
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
        fault_point("after-upload");
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
        match ledger::finalize(&meta, &id, size, &digest, &pending_marks) {
            Ok(_) => {}
            Err(e @ meta::Error::OperationState { .. }) => {
                // Cleanup won the CAS: this late completion joins cleanup.
                return Err(self.join_cleanup(&id, &sent_keys, e.into()));
            }
            Err(e) => return Err(e.into()),
        }
        fault_point("after-finalizing-cas");
        match ledger::publish_operation(&meta, &id) {
            Ok(receipt) => Ok(Published { receipt }),
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
    fn clean_operation(&self, id: &OperationId) -> Result<PublishOperation> {
        let objects = self.objects().clone();
        Ok(ledger::clean(self.meta(), id, &mut |row| {
            delete_owned(objects.as_ref(), row)
        })?)
    }

    /// Recovers every orphaned Publish operation from the ledger (never by listing the bucket;
    /// see the module docs): Uploading/Aborting/Cleaning are aborted and cleaned, Finalizing
    /// ones are resumed to Published when their objects are present and verified (else taken
    /// over by abort with proof and cleaned), Quarantined ones from an earlier pass are
    /// reconciled. Operations this handle is running are skipped. Per-operation failures are
    /// collected in [`RecoverySummary::errors`] and leave that operation for the next pass.
    ///
    /// The operations are found through the pending-operation registry
    /// ([`meta::ops::publish_operation::list_pending`]): cost O(non-terminal operations), not
    /// O(publications ever made).
    ///
    /// Errors: [`Error::Meta`] when the operation list cannot be read.
    pub fn recover_operations(&self) -> Result<RecoverySummary> {
        let ops = ledger::list_pending(self.meta())?;
        let in_flight: HashSet<OperationId> = self
            .in_flight()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut summary = RecoverySummary::default();
        for listed in ops {
            let id = listed.operation_id;
            let op = listed.operation;
            if ledger::is_terminal(op.phase) {
                continue;
            }
            if in_flight.contains(&id) {
                summary.in_flight += 1;
                continue;
            }
            // A publication of this handle may have finished since the list was read.
            if ledger::get(self.meta(), &id)?.is_some_and(|now| ledger::is_terminal(now.phase)) {
                continue;
            }
            match self.recover_one(&id, &op) {
                Ok(after) => match (op.phase, after.phase) {
                    (_, PublishPhase::Published) => summary.resumed += 1,
                    (PublishPhase::Quarantined, PublishPhase::Cleaned) => summary.reconciled += 1,
                    (_, PublishPhase::Cleaned) => summary.cleaned += 1,
                    (_, PublishPhase::Quarantined) => summary.quarantined += 1,
                    _ => summary.pending += 1,
                },
                Err(e) => summary.errors.push(format!("{}: {e}", id.to_hex())),
            }
        }
        Ok(summary)
    }

    /// Recovers one orphaned operation; returns its record afterwards.
    fn recover_one(&self, id: &OperationId, listed: &PublishOperation) -> Result<PublishOperation> {
        let meta = self.meta();
        // Act on the current row (it may have moved since the list was read).
        let current = ledger::get(meta, id)?;
        let op = current.as_ref().unwrap_or(listed);
        match op.phase {
            PublishPhase::Published | PublishPhase::Cleaned => Ok(op.clone()),
            PublishPhase::Quarantined | PublishPhase::Aborting | PublishPhase::Cleaning => {
                self.clean_operation(id)
            }
            PublishPhase::Uploading => {
                ledger::abort(meta, id, "orphaned upload aborted by recovery")?;
                self.clean_operation(id)
            }
            PublishPhase::Finalizing => {
                let refusal = match self.verify_own_objects(id) {
                    Err(
                        e @ (objstore::Error::NotFound { .. }
                        | objstore::Error::IntegrityMismatch { .. }),
                    ) => {
                        // The message never carries the object key (nokv's error mapping).
                        format!(
                            "its objects are not all present and verified: {}",
                            Error::from(e)
                        )
                    }
                    Err(e) => return Err(e.into()),
                    Ok(()) => match ledger::publish_operation(meta, id) {
                        Ok(_) => return Ok(ledger::get(meta, id)?.unwrap_or_else(|| op.clone())),
                        Err(e) if is_definite_refusal(&e) => e.to_string(),
                        Err(e) => return Err(e.into()),
                    },
                };
                ledger::take_over(
                    meta,
                    id,
                    &format!("recovery could not resume the publication: {refusal}"),
                )?;
                self.clean_operation(id)
            }
        }
    }

    /// Verifies every own object of a Finalizing operation (present, exact length and SHA-256).
    fn verify_own_objects(&self, id: &OperationId) -> std::result::Result<(), objstore::Error> {
        let objects =
            ledger::own_objects(self.meta(), id).map_err(|e| objstore::Error::Unavailable {
                key: String::new(),
                reason: format!("ledger unreadable: {e}"),
            })?;
        for (key, len, digest) in objects {
            objstore::get_verified(self.objects().as_ref(), &key, len, &digest)?;
        }
        Ok(())
    }

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
            crate::workbench::payload::TEXT_CONTENT_TYPE,
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
            let existing = ledger::get(self.meta(), &id)?;
            let restart = match &existing {
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
                    let entry = receipt.entry;
                    return Ok(crate::client::AppendReceipt {
                        path: op.path.clone(),
                        generation: receipt.generation,
                        appended_bytes: bytes.len() as u64,
                        size_bytes: entry.logical_size,
                        created: receipt.created,
                        delta_digest_uri,
                        body_digest_uri: entry.body_digest_uri,
                        content_type: entry.content_type,
                        dependency_count: entry.dependency_count,
                        dependency_depth: entry.dependency_depth,
                        idempotent_replay: true,
                    });
                }
                Some(op) if op.phase == PublishPhase::Cleaned => true,
                Some(op) => {
                    let running = self
                        .in_flight()
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .contains(&id);
                    if running {
                        return Err(Error::Meta(meta::Error::OperationState {
                            operation_id: id.to_hex(),
                            phase: format!("{:?}", op.phase),
                            wanted: "the same operation is already running in this process".into(),
                        }));
                    }
                    // An orphan of an earlier process: recover it, then decide again.
                    let after = self.recover_one(&id, op)?;
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
            let spec = OpSpec {
                id,
                intent_digest,
                restart,
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

    /// Publish operations of this store, in operation-id order: the non-terminal ones, read
    /// through the pending-operation registry (O(non-terminal operations)); with
    /// `include_terminal` (`nokv operation list --all`) every one, by a full scan of the
    /// Operation family (one bounded scan per 255 operations).
    ///
    /// Errors: [`Error::Meta`].
    pub fn list_operations(&self, include_terminal: bool) -> Result<Vec<OperationInfo>> {
        let mut out = Vec::new();
        let listed_ops = if include_terminal {
            ledger::list(self.meta())?
        } else {
            ledger::list_pending(self.meta())?
        };
        for listed in listed_ops {
            let op = listed.operation;
            if !include_terminal && ledger::is_terminal(op.phase) {
                continue;
            }
            let rows = ledger::ledger(self.meta(), &listed.operation_id)?;
            let live = if op.phase == PublishPhase::Published {
                0
            } else {
                rows.iter()
                    .filter(|(_, r)| r.cleanup_state != StagedCleanupState::Deleted)
                    .count() as u64
            };
            let (generation, note) = match &op.result {
                meta::codec::OperationResult::Succeeded(r) => (r.path_generation, None),
                meta::codec::OperationResult::Failed(t) => {
                    (None, Some(format!("{}: {}", t.code, t.message)))
                }
                meta::codec::OperationResult::Pending => (None, None),
            };
            out.push(OperationInfo {
                operation_id: listed.operation_id.to_hex(),
                phase: format!("{:?}", op.phase),
                workbench_id: op.workbench_id.clone(),
                path: op.path.as_str().to_string(),
                staged_objects: rows.len() as u64,
                live_objects: live,
                expected_length: op.expected_length,
                expected_digest_uri: op.expected_digest_uri.clone(),
                generation,
                note: op.quarantine_evidence.clone().or(note),
            });
        }
        Ok(out)
    }

    /// The object keys the StagedObject ledger still owns: rows of every operation that is not
    /// Published whose cleanup is not confirmed (Deleted). With the ArtifactManifest rows of
    /// visible revisions this is the complete set of objects the store may hold (crash tests
    /// compare it with a listing).
    ///
    /// Errors: [`Error::Meta`].
    pub fn ledger_owned_keys(&self) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        for listed in ledger::list(self.meta())? {
            if listed.operation.phase == PublishPhase::Published {
                continue;
            }
            for (_, row) in ledger::ledger(self.meta(), &listed.operation_id)? {
                if row.cleanup_state != StagedCleanupState::Deleted {
                    keys.push(row.object_key);
                }
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }
}

/// True for errors after which the final publication command can never apply as built (the
/// path condition failed, the workbench is gone, a base revision is unavailable, the request
/// is invalid): the Finalizing operation is then taken over by abort. Storage and fence errors
/// are not definite (the command may not have been evaluated).
pub(crate) fn is_definite_refusal(e: &meta::Error) -> bool {
    matches!(
        e,
        meta::Error::PathAlreadyExists
            | meta::Error::PathNotFound
            | meta::Error::PathIsDirectory
            | meta::Error::AncestorIsFile { .. }
            | meta::Error::GenerationConflict { .. }
            | meta::Error::WorkspaceNotFound { .. }
            | meta::Error::WorkspaceUnavailable { .. }
            | meta::Error::RevisionUnavailable { .. }
            | meta::Error::InvalidArgument(_)
            | meta::Error::RequestReplayMismatch
            | meta::Error::ReadVersionConflict { .. }
    )
}

/// Parses a 32-hex-character operation id.
pub fn parse_operation_id(hex: &str) -> Option<[u8; 16]> {
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}
