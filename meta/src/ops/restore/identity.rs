//! The deterministic restore identity: destination incarnation, operation id, initialization and member digests, the restore-manifest entry.

use super::state::{
    RestoreError, RestoreManifestDescriptor, Result, RESTORE_INITIALIZATION_DOMAIN,
    RESTORE_MANIFEST_PATH, RESTORE_MEMBER_CHAIN_DOMAIN, RESTORE_MEMBER_ROW_DOMAIN,
};
use crate::codec::{manifest_digest_uri, PathEntry, RestoreSource};
use crate::error::Error;
use crate::ids::{OperationId, RootId, WorkspaceIncarnationId};
use crate::path::{normalize_stored, NormPath};
use sha2::{Digest, Sha256};

/// Domain separator of [`destination_incarnation_for`] (decision recorded here).
pub const RESTORE_DESTINATION_INCARNATION_DOMAIN: &[u8] =
    b"nokv.restore.destination_incarnation.v1\0";

/// The destination incarnation of one restore attempt:
/// `sha256("nokv.restore.destination_incarnation.v1\0" || root_id || u32be(len) || source_workbench_id
/// || source_incarnation || u8 source_kind || source_identity || u32be(len) ||
/// destination_workbench_id || previous_incarnation)[..16]`, where `previous_incarnation` is the
/// incarnation of the `Retired` marker a new attempt reclaims (16 zero bytes for the first).
///
/// Deterministic, so a process lost between writing the restore manifest object and the prepare
/// command re-derives the same operation id (and object key) instead of leaking a second one;
/// still never reused: every attempt after a cleaned one chains the retired incarnation, and the
/// prepare command predicates the WorkspaceIncarnationClaim absent.
pub fn destination_incarnation_for(
    root: &RootId,
    source_workbench_id: &str,
    source_incarnation: &WorkspaceIncarnationId,
    source: &RestoreSource,
    destination_workbench_id: &str,
    previous: Option<&WorkspaceIncarnationId>,
) -> WorkspaceIncarnationId {
    let mut h = Sha256::new();
    h.update(RESTORE_DESTINATION_INCARNATION_DOMAIN);
    h.update(root.as_bytes());
    h.update((source_workbench_id.len() as u32).to_be_bytes());
    h.update(source_workbench_id.as_bytes());
    h.update(source_incarnation.as_bytes());
    match source {
        RestoreSource::Snapshot(id) => {
            h.update([1u8]);
            h.update(id.get().to_be_bytes());
        }
        RestoreSource::Commit(id) => {
            h.update([2u8]);
            h.update(id.as_bytes());
        }
    }
    h.update((destination_workbench_id.len() as u32).to_be_bytes());
    h.update(destination_workbench_id.as_bytes());
    h.update(previous.map_or([0u8; 16], |p| *p.as_bytes()));
    let d: [u8; 32] = h.finalize().into();
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    WorkspaceIncarnationId(id)
}

/// The operation id of an identity digest: its first 16 bytes (docs/metadata-format.md).
pub fn operation_id_of(identity_digest: &[u8; 32]) -> OperationId {
    let mut id = [0u8; 16];
    id.copy_from_slice(&identity_digest[..16]);
    OperationId(id)
}

/// The initialization digest (docs/metadata-format.md, "Restore Closure"):
/// `sha256("nokv.restore.initialization.v3\0" || identity_digest || u32be(1) || u8(1) ||
/// u32be(len path) || "metadata/restore_manifest.json" || u32be(len entry) || encoded_path_entry)`.
pub fn initialization_digest(identity_digest: &[u8; 32], encoded_path_entry: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(RESTORE_INITIALIZATION_DOMAIN);
    h.update(identity_digest);
    h.update(1u32.to_be_bytes());
    h.update([1u8]);
    h.update((RESTORE_MANIFEST_PATH.len() as u32).to_be_bytes());
    h.update(RESTORE_MANIFEST_PATH.as_bytes());
    h.update((encoded_path_entry.len() as u32).to_be_bytes());
    h.update(encoded_path_entry);
    h.finalize().into()
}

/// The digest of one RestoreMember row: `sha256("nokv.restore.member_row.v1\0" ||
/// u64be(member_sequence) || u32be(len path) || path || artifact_revision_id(16) ||
/// u64be(path_generation) || u32be(len entry) || encoded destination PathEntry)`.
pub fn member_row_digest(sequence: u64, path: &NormPath, encoded_entry: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(RESTORE_MEMBER_ROW_DOMAIN);
    h.update(sequence.to_be_bytes());
    h.update((path.as_str().len() as u32).to_be_bytes());
    h.update(path.as_str().as_bytes());
    // The entry bytes start with the value version then the generation and revision id; they
    // are hashed whole, so revision and generation are bound through them.
    h.update((encoded_entry.len() as u32).to_be_bytes());
    h.update(encoded_entry);
    h.finalize().into()
}

/// One link of the member digest chain: `sha256("nokv.restore.member_chain.v1\0" || previous ||
/// row_digest)`, starting from [`EMPTY_MEMBER_DIGEST`].
pub fn chain_member_digest(previous: &[u8; 32], row_digest: &[u8; 32]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(RESTORE_MEMBER_CHAIN_DOMAIN);
    h.update(previous);
    h.update(row_digest);
    h.finalize().into()
}

/// The `PathEntry` sealed into the operation for `metadata/restore_manifest.json`.
pub fn restore_manifest_entry(
    source_read_version: u64,
    desc: &RestoreManifestDescriptor,
) -> PathEntry {
    let generation = source_read_version.saturating_add(1);
    PathEntry {
        generation,
        artifact_revision_id: desc.revision_id,
        logical_size: desc.logical_size,
        body_digest_uri: desc.body_digest_uri.clone(),
        manifest_digest_uri: manifest_digest_uri(&desc.manifest),
        dependency_count: 0,
        dependency_depth: 0,
        content_type: desc.content_type.clone(),
        producer: desc.producer.clone(),
        manifest_id: None,
        created_version: generation,
        modified_version: generation,
        index_projection: Vec::new(),
    }
}

pub(super) fn manifest_path() -> Result<NormPath> {
    normalize_stored(RESTORE_MANIFEST_PATH).map_err(|e| RestoreError::Meta(Error::Path(e)))
}
