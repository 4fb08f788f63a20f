//! Caller-chosen request ids of a put ([`PutOptions::request_id`]): the durable dedupe that makes
//! a rerun of the same put return its first receipt (docs/design.md, "Request ids of a put").
//!
//! The request id is the Publish operation's id, exactly as an idempotent append's operation id
//! is (`publication/append.rs`): the operation row, kept forever once terminal, and the
//! CommandDedupe row of its final command are the record, so a replay works in any later
//! process, embedded or behind `nokv serve`. The operation's intent digest binds the id to the
//! request without its body ([`put_intent_digest`]); the body is compared by its SHA-256 against
//! the published one, so a streamed body needs no second pass on a first run.
//!
//! What a put with a request id does first, before the checks of an ordinary put (decided by the
//! one decider of caller-chosen operation ids, `Client::caller_operation_start` in
//! `publication/append.rs`, plus the body comparison):
//!
//! - no operation under the id: the put runs under it (never through a reserved revision, whose
//!   operation id is the handle's own);
//! - an operation with another intent digest (another workbench, path, content type, condition,
//!   manifest id, index fields, or an append): refused with
//!   `Error::Meta(meta::Error::OperationIntentMismatch)`, nothing changed;
//! - a Published operation: the body's digest is computed (a stream is read to its end) and
//!   compared with the published one — equal returns the stored receipt with
//!   `idempotent_replay = true` and writes nothing; different is the same refusal;
//! - a Cleaned operation (an earlier attempt failed and was cleaned up): the put runs again
//!   under the id (the operation is re-begun with a fresh revision);
//! - an operation this handle is running: `Error::Meta(meta::Error::OperationState)`;
//! - an unfinished operation of an earlier process: recovered first (resumed to Published or
//!   cleaned), then decided again.

use std::io::Read;

use meta::{NormPath, OperationId};
use sha2::{Digest, Sha256};

use super::append::CallerOperation;
use super::plan::{OpSpec, Source};
use crate::client::{Client, PutOptions, PutReceipt, WriteCondition};
use crate::error::{Error, Result};

/// Domain separator of the intent digest of a put with a request id.
pub const PUT_INTENT_DOMAIN: &[u8] = b"nokv.put.intent.v1\0";

/// The intent digest of a put with a request id: `sha256("nokv.put.intent.v1\0" | str
/// workbench_id | str path | str content_type | condition | option(str manifest_id) | u32 field
/// count | (str name | u32 len | encoded value)* | u8 index_json)`, where `str` is a u32
/// big-endian length and the bytes, `condition` is `0` (create), `1` (replace the generation
/// just read) or `2 | u64 expected_generation`, and the fields are the caller's custom index
/// fields in name order, each value in its projection encoding. The body is not part of it (see
/// the module docs).
///
/// Errors: [`Error::InvalidArgument`] when an index field cannot be encoded.
pub fn put_intent_digest(
    workbench_id: &str,
    path: &NormPath,
    options: &PutOptions,
) -> Result<[u8; 32]> {
    let mut h = Sha256::new();
    h.update(PUT_INTENT_DOMAIN);
    put_str(&mut h, workbench_id);
    put_str(&mut h, path.as_str());
    put_str(&mut h, &options.content_type);
    match options.condition {
        WriteCondition::Create => h.update([0u8]),
        WriteCondition::Replace {
            expected_generation: None,
        } => h.update([1u8]),
        WriteCondition::Replace {
            expected_generation: Some(g),
        } => {
            h.update([2u8]);
            h.update(g.to_be_bytes());
        }
    }
    match &options.manifest_id {
        None => h.update([0u8]),
        Some(m) => {
            h.update([1u8]);
            put_str(&mut h, m);
        }
    }
    let fields = meta::index::projection::encode_projection(&options.index_fields)
        .map_err(|e| Error::InvalidArgument(e.to_string()))?;
    h.update((fields.len() as u32).to_be_bytes());
    for (name, value) in &fields {
        put_str(&mut h, name);
        h.update((value.len() as u32).to_be_bytes());
        h.update(value);
    }
    h.update([u8::from(options.index_json)]);
    Ok(h.finalize().into())
}

fn put_str(h: &mut Sha256, s: &str) {
    h.update((s.len() as u32).to_be_bytes());
    h.update(s.as_bytes());
}

/// What a put with a request id does after looking at its operation.
pub(super) enum PutStart {
    /// The stored receipt of the first run (nothing is written).
    Replay(PutReceipt),
    /// Run the put under this operation.
    Run(OpSpec),
}

impl Client {
    /// Decides a put with request id `request_id` (see the module docs); `source` is consumed
    /// only when a published operation's body has to be compared.
    ///
    /// Errors: `Error::Meta(meta::Error::OperationIntentMismatch)` when the id is bound to another
    /// request or another body; `Error::Meta(meta::Error::OperationState)` when the id is
    /// running in this process or its earlier attempt is quarantined; [`Error::LocalIo`] when a
    /// stream to compare fails; [`Error::InvalidArgument`]; [`Error::Meta`].
    pub(super) fn put_request_start(
        &self,
        workbench_id: &str,
        path: &NormPath,
        source: &mut Source<'_>,
        options: &PutOptions,
        request_id: [u8; 16],
    ) -> Result<PutStart> {
        let id = OperationId(request_id);
        let intent_digest = put_intent_digest(workbench_id, path, options)?;
        match self.caller_operation_start(
            id,
            intent_digest,
            "the same request is already running in this process",
        )? {
            CallerOperation::Published { path, receipt } => {
                let receipt = *receipt;
                if source_digest(source)? != receipt.entry.body_digest_uri {
                    return Err(Error::Meta(meta::Error::OperationIntentMismatch {
                        operation_id: id.to_hex(),
                    }));
                }
                Ok(PutStart::Replay(PutReceipt {
                    path,
                    generation: receipt.generation,
                    size_bytes: receipt.entry.logical_size,
                    digest_uri: receipt.entry.body_digest_uri,
                    content_type: receipt.entry.content_type,
                    created: receipt.created,
                    idempotent_replay: true,
                }))
            }
            CallerOperation::Run(spec) => Ok(PutStart::Run(spec)),
        }
    }
}

/// The `sha256:` URI of the whole body of `source` (a stream is read to its end).
fn source_digest(source: &mut Source<'_>) -> Result<String> {
    match source {
        Source::Slice(bytes) => Ok(objstore::sha256_uri(bytes)),
        Source::Reader(reader) => {
            let mut hasher = objstore::Sha256Stream::new();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => hasher.update(buf.get(..n).unwrap_or_default()),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(source) => {
                        return Err(Error::LocalIo {
                            op: "read body",
                            path: std::path::PathBuf::from("<input>"),
                            source,
                        })
                    }
                }
            }
            Ok(hasher.finish())
        }
    }
}
