//! Operation (docs/metadata-format.md, tag 0x11) — durable multi-step operations with exact replay.
//!
//! Key: `root_id 16 | u8 OperationKind | operation_id 16`.
//!
//! Value: `u16 value_format_version | u8 OperationKind | payload`. The version is per kind
//! (docs/metadata-format.md, "Durable Format Registry"): Publish 1, BuildCommit **5**, Restore **4**,
//! CommitRetire 1, Gc 1, Reserve 1. The kind byte repeats the key's kind so a value is self-describing;
//! [`Operation::decode_for_kind`] also requires it to equal the key's. An unknown kind, a version
//! other than the kind's, or an unknown phase/state fails closed with [`crate::Error::Codec`].
//!
//! Payloads (all integers big-endian; `str`/`bytes` u32-length-prefixed; `option` = tag byte;
//! [`ClosureCursor`] and the result slot as in [`super::cursor`]):
//!
//! ```text
//! Publish v1:       u8 PublishPhase | artifact_revision_id 16 | intent_digest 32 |
//!                   str workbench_id | str path |
//!                   u8 PublishConditionKind | option(u64 expected_generation) |
//!                   option(base_revision 16 | u64 base_row_count | u64 base_logical_size) |
//!                   u32 dependency_depth | str content_type | str producer |
//!                   option(str manifest_id) | u32 n | n × (str field | bytes value) |
//!                   u64 staged_object_count | u64 expected_length |
//!                   option(str expected_digest_uri) | u64 cleanup_next_sequence |
//!                   option(str quarantine_evidence) |
//!                   result(u64 commit_version | option(u64 path_generation))
//!
//! BuildCommit v5:   u8 BuildCommitPhase | commit_id 32 | projection_input_digest 32 |
//!                   initialization_digest 32 | str workbench_id | source_incarnation 16 |
//!                   u64 source_read_version | u64 source_workspace_revision |
//!                   option(commit_id 32 | u64 head_generation) expected_head |
//!                   u8 replace | str content_digest_uri | str manifest_digest_uri |
//!                   option(u64) run_manifest_expected_generation |
//!                   u64 committed_at_unix_seconds |
//!                   option(publish_operation_id 16 | incarnation 16 | revision 16 |
//!                          u64 logical_size | str body_digest_uri | str manifest_digest_uri |
//!                          str content_type) staged_manifest |
//!                   str producer | bytes lineage | u32 n | n × parent commit_id 32 |
//!                   ClosureCursor cursor |
//!                   u64 member_count | member_digest 32 | u64 revision_count |
//!                   revision_digest 32 | u64 parent_count | parent_digest 32 |
//!                   ClosureCursor cleanup_cursor |
//!                   result(u64 commit_version | u64 head_generation | u64 manifest_generation)
//!
//! Restore v4:       u8 RestorePhase | str source_workbench_id | source_incarnation 16 |
//!                   u8 RestoreSourceKind | (u64 snapshot_id | commit_id 32) |
//!                   u64 source_read_version | str destination_workbench_id |
//!                   destination_incarnation 16 | identity_digest 32 |
//!                   initialization_digest 32 | bytes restore_manifest_entry |
//!                   option(str after_path) | u64 next_member_sequence | u8 source_eof |
//!                   u64 member_count | member_digest 32 | u64 cleanup_next_sequence |
//!                   result(u64 commit_version | u64 destination_generation)
//!
//! CommitRetire v1:  u8 CommitRetirePhase | commit_id 32 | u64 expected_consumer_epoch |
//!                   ClosureCursor cursor | result(u64 commit_version)
//!
//! Gc v1:            u8 GcPhase | artifact_revision_id 16 | u64 reference_epoch |
//!                   u64 next_object_index | u64 deleted_object_count |
//!                   option(str quarantine_evidence) | result(u64 commit_version)
//!
//! Reserve v1:       u32 n (1..=32) | n × (artifact_revision_id 16 | str object_key)
//! ```
//!
//! A Publish record freezes the complete publication request at Begin (docs/metadata-format.md, "Upload And
//! Append": the operation and its StagedObject ledger exist before the first byte is sent), so a
//! crash in Finalizing can be resumed from the ledger alone: the own blocks are the StagedObject
//! rows of `artifact_revision_id`, the reused append segments are the first `base_row_count`
//! ArtifactManifest rows of `base_revision`. `expected_length` / `expected_digest_uri` are sealed by
//! the Uploading -> Finalizing CAS (`0` / `None` before). The condition kind discriminants are
//! Create=1, Replace=2 (generation required), Append=3 (generation optional: `None` = absent).
//!
//! `run_manifest_expected_generation` is the exact publication condition of
//! `metadata/run_manifest.json`: `None` = the path must be absent, `Some(g)` = it must be at
//! generation `g`. `source_workspace_revision` is the frozen tree revision the build scans.

use super::wire::{Dec, Enc};
use crate::error::Result;

mod commit;
mod gc;
mod kind;
mod publish;
mod reserve;
mod restore;

pub use commit::*;
pub use gc::*;
pub use kind::*;
pub use publish::*;
pub use reserve::*;
pub use restore::*;

/// One operation record, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    /// Publish (value version 1).
    Publish(PublishOperation),
    /// BuildCommit (value version 5; boxed: the record is large).
    BuildCommit(Box<BuildCommitOperation>),
    /// Restore (value version 4; boxed: the record is large).
    Restore(Box<RestoreOperation>),
    /// CommitRetire (value version 1).
    CommitRetire(CommitRetireOperation),
    /// Gc (value version 1).
    Gc(GcOperation),
    /// Reserve (value version 1).
    Reserve(ReserveOperation),
}

impl Operation {
    /// The operation kind.
    pub fn kind(&self) -> OperationKind {
        match self {
            Operation::Publish(_) => OperationKind::Publish,
            Operation::BuildCommit(_) => OperationKind::BuildCommit,
            Operation::Restore(_) => OperationKind::Restore,
            Operation::CommitRetire(_) => OperationKind::CommitRetire,
            Operation::Gc(_) => OperationKind::Gc,
            Operation::Reserve(_) => OperationKind::Reserve,
        }
    }

    /// Encodes the value: `u16 kind's version | u8 kind | payload`.
    pub fn encode(&self) -> Vec<u8> {
        let kind = self.kind();
        let mut e = Enc::version(kind.value_version());
        e.u8(kind.to_u8());
        match self {
            Operation::Publish(p) => put_publish(p, &mut e),
            Operation::BuildCommit(b) => put_build(b, &mut e),
            Operation::Restore(r) => put_restore(r, &mut e),
            Operation::CommitRetire(c) => put_retire(c, &mut e),
            Operation::Gc(g) => put_gc(g, &mut e),
            Operation::Reserve(r) => put_reserve(r, &mut e),
        }
        e.finish()
    }

    /// Decodes a value of any kind.
    ///
    /// Errors: [`crate::Error::Codec`] for an unknown kind, a value version other than the
    /// kind's, an unknown phase/source kind/result tag, truncation or trailing bytes.
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        let version = d.u16()?;
        let kind = OperationKind::from_u8(d.u8()?)?;
        if version != kind.value_version() {
            return Err(d.err(format!(
                "unknown value format version {version} for {kind:?} (supported: {})",
                kind.value_version()
            )));
        }
        let op = match kind {
            OperationKind::Publish => Operation::Publish(decode_publish(&mut d)?),
            OperationKind::BuildCommit => Operation::BuildCommit(Box::new(decode_build(&mut d)?)),
            OperationKind::Restore => Operation::Restore(Box::new(decode_restore(&mut d)?)),
            OperationKind::CommitRetire => Operation::CommitRetire(decode_retire(&mut d)?),
            OperationKind::Gc => Operation::Gc(decode_gc(&mut d)?),
            OperationKind::Reserve => Operation::Reserve(decode_reserve(&mut d)?),
        };
        d.finish()?;
        Ok(op)
    }

    /// Decodes a value stored under a key of `kind`; a value of another kind fails closed.
    ///
    /// Errors: as [`Operation::decode`], plus [`crate::Error::Codec`] on a kind mismatch.
    pub fn decode_for_kind(kind: OperationKind, b: &[u8]) -> Result<Self> {
        let op = Self::decode(b)?;
        if op.kind() != kind {
            return Err(crate::error::Error::codec(
                FAMILY,
                format!("value of kind {:?} under a {kind:?} key", op.kind()),
            ));
        }
        Ok(op)
    }
}
