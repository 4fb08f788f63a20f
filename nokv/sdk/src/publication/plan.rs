//! The shapes of a publication: what is published (`BodyPlan`, `OpSpec`, `Source`), what it
//! returns (`Published`), the intent digests, which metadata errors refuse a final command for
//! good, and the listing of operations ([`OperationInfo`], [`parse_operation_id`]); the recovery
//! summary is `crate::client::RecoverySummary`. A leaf: nothing here touches the client.

use std::io::Read;

use meta::codec::PublishBase;
use meta::{ArtifactRevisionId, NormPath, OperationId, PathCondition};
use sha2::{Digest, Sha256};

use crate::error::Result;
use crate::index_fields::IndexFields;

/// Domain separator of the idempotent-append intent digest.
pub const APPEND_INTENT_DOMAIN: &[u8] = b"nokv.append.intent.v1\0";
/// Domain separator of the intent digest of ordinary (random-id) publications.
pub const PUBLISH_INTENT_DOMAIN: &[u8] = b"nokv.publish.intent.v1\0";

/// One Publish operation as [`Client::list_operations`](crate::client::Client::list_operations) reports it.
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
    /// A fresh operation id of this handle's own (not a caller's idempotency key): a small body
    /// may publish under a reserved revision (see `publication::pool`).
    pub(crate) reservable: bool,
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
            reservable: true,
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

/// Everything [`Client::publish_body`](crate::client::Client::publish_body) needs besides the bytes.
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
    /// The caller's declared digest of the whole body ([`crate::client::PutOptions::expected_digest_uri`]).
    pub(crate) expected_digest_uri: Option<String>,
}

/// The result of a ledger-driven publication.
pub(crate) struct Published {
    /// The final command's receipt.
    pub(crate) receipt: meta::PublishReceipt,
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
