//! Ledger-driven publication, recovery and durable idempotent append (docs/metadata-format.md, "Upload And
//! Append"; docs/design.md, "Immutable Bodies And Publication", "Safe Object Lifetime").
//!
//! Every body the SDK publishes goes through one Publish operation of
//! [`meta::ops::publish::operation`]:
//!
//! 1. **Begin** — the operation (phase Uploading, the complete frozen request) and the
//!    StagedObject rows of the first block group are committed in one metadata command before
//!    any byte is sent. A streamed body ([`crate::client::Client::put_reader`]) is read one block at a
//!    time into memory, hashed, its row committed, then uploaded; a body held in memory stages up
//!    to [`meta::ops::publish::operation::MAX_LEDGER_ROWS_PER_COMMAND`] rows per command.
//! 2. **Upload** — each block is written with `put_if_absent` under its revision-owned key. The
//!    next staging command marks the previous group Uploaded (or Ambiguous when the provider
//!    could not tell, [`objstore::Error::Ambiguous`]).
//! 3. **Finalize and publish** — a body whose rows were all staged by its begin command (every
//!    body held in memory up to 100 blocks, and a streamed body of one block: every small put)
//!    is sealed and published by ONE command,
//!    [`meta::ops::publish::operation::finalize_and_publish`]: Uploading -> Published with the
//!    sealed length and digest, the last provider states, the path, revision, manifest,
//!    references, indexes, event and dedupe result. A small put therefore waits for two
//!    metadata commits (begin, publish) around its object flush. A body staged over several
//!    commands first CASes Uploading -> Finalizing (sealing length and digest), then the
//!    publication command moves Finalizing -> Published, so recovery can finish a large body
//!    whose process died after sealing it.
//! 4. **Failure** — a failed upload or a definite refusal of the final command aborts the
//!    operation (CAS; a refused one-command publication left it Uploading; a Finalizing one
//!    needs the proof of no publication) and deletes exactly the
//!    ledger-owned keys. If the provider is down the operation stays Cleaning and the next
//!    recovery pass finishes it. An upload that completes after another party aborted the
//!    operation joins cleanup: it deletes every key it sent, then runs the cleanup pass.
//!
//! **Recovery** ([`crate::client::Client::recover_operations`], run at every [`crate::client::Client::open`]) is
//! driven by the ledger only, never by listing the bucket. It finds the non-terminal operations
//! through the pending-operation registry ([`meta::ops::publish::operation::list_pending`]), so
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
//! upload id before the first part and [`meta::ops::publish::operation::record_upload_id`]
//! records it on the block's StagedObject row in one command, so the parts are ledger-owned
//! before they are sent (if the id cannot be recorded the provider aborts the upload and sends
//! nothing). A process killed mid-upload leaves an open upload that recovery finds in the ledger:
//! cleanup aborts it ([`objstore::ObjectStore::abort_upload`]) before deleting the key, so no
//! parts stay billed and invisible. Crash tests stop after `multipart-after-upload-id` and
//! `multipart-after-first-part` (feature `fault-points`).
//!
//! Append cost: the whole-body digest of an append re-hashes the base body (O(body) per
//! append). Persisting the resumable SHA-256 state would need a field the ArtifactRevision
//! record (docs/metadata-format.md, value version 2) does not have, so it is left as is.
//!
//! **Durable idempotent append** ([`crate::client::Client::append_idempotent`]): the caller's 16-byte
//! operation id is the Publish operation's id and its intent digest is
//! `sha256("nokv.append.intent.v1\0" | u32 len | workbench_id | u32 len | path | u64 delta
//! length | delta sha256)`. A replay of a published id returns the original receipt and appends
//! nothing; another intent under the same id is refused with
//! `Error::Meta(meta::Error::OperationIntentMismatch)`; an attempt that lost the path generation
//! CAS ends Cleaned and is re-begun under the same id with a fresh revision.
//!
//! **Request ids of a put** (`put_request.rs`, [`crate::client::PutOptions::request_id`]): the
//! same mechanism for put and `put_reader` — the caller's id is the Publish operation's id, its
//! intent digest binds it to the request without the body, and the body is compared by digest
//! with the published one (docs/design.md, "Request ids of a put").

mod append;
mod operation;
pub(crate) mod plan;
mod put;
mod put_request;
mod recovery;
mod reserved;
mod upload;

pub use crate::client::RecoverySummary;
pub use plan::{
    append_intent_digest, parse_operation_id, OperationInfo, APPEND_INTENT_DOMAIN,
    PUBLISH_INTENT_DOMAIN,
};
pub use put_request::{put_intent_digest, PUT_INTENT_DOMAIN};
