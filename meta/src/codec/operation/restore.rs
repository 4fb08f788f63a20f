//! Operation payload of the Restore machine (value version 4): phase, source identity, copy
//! cursor, member seal and result; the restore identity digest.

use crate::codec::cursor::OperationResult;
use crate::codec::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{CommitId, OperationId, RootId, SnapshotId, WorkspaceIncarnationId};
use crate::path::NormPath;
use sha2::{Digest, Sha256};

/// Domain separator of the restore identity digest (docs/metadata-format.md, "Restore Closure").
pub const RESTORE_IDENTITY_DOMAIN: &[u8] = b"nokv.restore.operation.v2\0";

durable_enum!(
    /// Restore phase (discriminants of docs/metadata-format.md).
    RestorePhase, "operation" {
        /// Operation and staging marker created.
        Preparing = 1,
        /// Copying source entries.
        Copying = 2,
        /// End of source recorded; member count/digest sealed.
        SourceSealed = 3,
        /// Source closure verified.
        Ready = 4,
        /// Destination published.
        Complete = 5,
        /// Cleanup claimed.
        Aborting = 6,
        /// Cleanup running.
        Cleaning = 7,
        /// Cleanup complete.
        Cleaned = 8,
        /// Ambiguous; awaiting reconciliation.
        Quarantined = 9,
    }
);

durable_enum!(
    /// Kind of restore source (discriminants of docs/metadata-format.md).
    RestoreSourceKind, "operation" {
        /// A leased snapshot (numeric id; aliases are resolved before PrepareRestore).
        Snapshot = 1,
        /// A sealed commit.
        Commit = 2,
    }
);

/// The concrete source of a restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreSource {
    /// A snapshot by numeric id.
    Snapshot(SnapshotId),
    /// A sealed commit.
    Commit(CommitId),
}

impl RestoreSource {
    /// The source kind.
    pub fn kind(&self) -> RestoreSourceKind {
        match self {
            RestoreSource::Snapshot(_) => RestoreSourceKind::Snapshot,
            RestoreSource::Commit(_) => RestoreSourceKind::Commit,
        }
    }

    fn put(&self, e: &mut Enc) {
        e.u8(self.kind().to_u8());
        match self {
            RestoreSource::Snapshot(s) => e.u64(s.get()),
            RestoreSource::Commit(c) => e.raw(c.as_bytes()),
        };
    }

    fn get(d: &mut Dec<'_>) -> Result<Self> {
        Ok(match RestoreSourceKind::from_u8(d.u8()?)? {
            RestoreSourceKind::Snapshot => RestoreSource::Snapshot(SnapshotId(d.u64()?)),
            RestoreSourceKind::Commit => RestoreSource::Commit(CommitId(d.b32()?)),
        })
    }
}

/// Restore copy progress.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RestoreCursor {
    /// Last copied source path (`None`: nothing copied yet).
    pub after_path: Option<NormPath>,
    /// Sequence the next RestoreMember row gets.
    pub next_member_sequence: u64,
    /// End of source recorded.
    pub source_eof: bool,
}

/// Success payload of a restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestoreResult {
    /// Commit version of the final marker command.
    pub commit_version: u64,
    /// Generation of the destination's `metadata/restore_manifest.json`.
    pub destination_generation: u64,
}

/// A restore/fork with its complete source identity (value version 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreOperation {
    /// Phase.
    pub phase: RestorePhase,
    /// Source workbench id.
    pub source_workbench_id: String,
    /// Source incarnation.
    pub source_incarnation: WorkspaceIncarnationId,
    /// Concrete source selector.
    pub source: RestoreSource,
    /// Read version of the source (snapshot read version or commit seal version).
    pub source_read_version: u64,
    /// Destination workbench id.
    pub destination_workbench_id: String,
    /// Fresh destination incarnation.
    pub destination_incarnation: WorkspaceIncarnationId,
    /// Complete 32-byte identity digest; the operation id is its first 16 bytes.
    pub identity_digest: [u8; 32],
    /// Initialization digest (binds the restore-manifest descriptor).
    pub initialization_digest: [u8; 32],
    /// Exact encoded PathEntry of `metadata/restore_manifest.json` sealed into the operation.
    pub restore_manifest_entry: Vec<u8>,
    /// Copy progress.
    pub cursor: RestoreCursor,
    /// Members written so far / sealed.
    pub member_count: u64,
    /// Member digest.
    pub member_digest: [u8; 32],
    /// Next RestoreMember sequence to clean up (Aborting/Cleaning).
    pub cleanup_next_sequence: u64,
    /// Terminal result.
    pub result: OperationResult<RestoreResult>,
}

impl RestoreOperation {
    /// The operation id this record must be stored under: the first 16 bytes of
    /// `identity_digest` (docs/metadata-format.md).
    pub fn operation_id(&self) -> OperationId {
        let mut id = [0u8; 16];
        id.copy_from_slice(&self.identity_digest[..16]);
        OperationId(id)
    }
}

/// The restore identity digest (docs/metadata-format.md, "Restore Closure"):
/// `sha256("nokv.restore.operation.v2\0" | root_id | u32be(len) | source_workbench_id |
/// source_incarnation | u8 source_kind | source_identity | u32be(len) | destination_workbench_id |
/// destination_incarnation)`, where `source_identity` is the u64be snapshot id or the 32-byte
/// commit id.
pub fn restore_identity_digest(
    root: &RootId,
    source_workbench_id: &str,
    source_incarnation: &WorkspaceIncarnationId,
    source: &RestoreSource,
    destination_workbench_id: &str,
    destination_incarnation: &WorkspaceIncarnationId,
) -> [u8; 32] {
    let mut e = Enc::new();
    e.raw(RESTORE_IDENTITY_DOMAIN)
        .raw(root.as_bytes())
        .str(source_workbench_id)
        .raw(source_incarnation.as_bytes());
    source.put(&mut e);
    e.str(destination_workbench_id)
        .raw(destination_incarnation.as_bytes());
    Sha256::digest(e.finish()).into()
}

/// Encodes the RestoreOperation payload (after the version and kind bytes).
pub(super) fn put_restore(r: &RestoreOperation, e: &mut Enc) {
    e.u8(r.phase.to_u8())
        .str(&r.source_workbench_id)
        .raw(r.source_incarnation.as_bytes());
    r.source.put(e);
    e.u64(r.source_read_version)
        .str(&r.destination_workbench_id)
        .raw(r.destination_incarnation.as_bytes())
        .raw(&r.identity_digest)
        .raw(&r.initialization_digest)
        .bytes(&r.restore_manifest_entry)
        .opt_str(r.cursor.after_path.as_ref().map(NormPath::as_str))
        .u64(r.cursor.next_member_sequence)
        .bool(r.cursor.source_eof)
        .u64(r.member_count)
        .raw(&r.member_digest)
        .u64(r.cleanup_next_sequence);
    r.result.put(e, |v, e| {
        e.u64(v.commit_version).u64(v.destination_generation);
    });
}

pub(super) fn decode_restore(d: &mut Dec<'_>) -> Result<RestoreOperation> {
    let phase = RestorePhase::from_u8(d.u8()?)?;
    let source_workbench_id = d.string()?;
    let source_incarnation = WorkspaceIncarnationId(d.b16()?);
    let source = RestoreSource::get(d)?;
    let source_read_version = d.u64()?;
    let destination_workbench_id = d.string()?;
    let destination_incarnation = WorkspaceIncarnationId(d.b16()?);
    let identity_digest = d.b32()?;
    let initialization_digest = d.b32()?;
    let restore_manifest_entry = d.bytes()?.to_vec();
    let after_path = if d.opt_tag()? {
        Some(d.norm_path()?)
    } else {
        None
    };
    let cursor = RestoreCursor {
        after_path,
        next_member_sequence: d.u64()?,
        source_eof: d.bool()?,
    };
    let member_count = d.u64()?;
    let member_digest = d.b32()?;
    let cleanup_next_sequence = d.u64()?;
    let result = OperationResult::get(d, |d| {
        Ok(RestoreResult {
            commit_version: d.u64()?,
            destination_generation: d.u64()?,
        })
    })?;
    Ok(RestoreOperation {
        phase,
        source_workbench_id,
        source_incarnation,
        source,
        source_read_version,
        destination_workbench_id,
        destination_incarnation,
        identity_digest,
        initialization_digest,
        restore_manifest_entry,
        cursor,
        member_count,
        member_digest,
        cleanup_next_sequence,
        result,
    })
}
