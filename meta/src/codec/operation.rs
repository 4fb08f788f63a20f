//! Operation (docs/metadata-format.md, tag 0x11) — durable multi-step operations with exact replay.
//!
//! Key: `root_id 16 | u8 OperationKind | operation_id 16`.
//!
//! Value: `u16 value_format_version | u8 OperationKind | payload`. The version is per kind
//! (docs/metadata-format.md, "Durable Format Registry"): Publish 1, BuildCommit **5**, Restore **4**,
//! CommitRetire 1, Gc 1. The kind byte repeats the key's kind so a value is self-describing;
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

use sha2::{Digest, Sha256};

use super::cursor::{ClosureCursor, OperationResult};
use super::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{
    ArtifactRevisionId, CommitId, OperationId, RootId, SnapshotId, WorkspaceIncarnationId,
};
use crate::path::NormPath;

const FAMILY: &str = "operation";

/// Value format version of [`PublishOperation`].
pub const PUBLISH_VALUE_VERSION: u16 = 1;
/// Value format version of [`BuildCommitOperation`] (docs/metadata-format.md: version 5).
pub const BUILD_COMMIT_VALUE_VERSION: u16 = 5;
/// Value format version of [`RestoreOperation`] (docs/metadata-format.md: version 4).
pub const RESTORE_VALUE_VERSION: u16 = 4;
/// Value format version of [`CommitRetireOperation`].
pub const COMMIT_RETIRE_VALUE_VERSION: u16 = 1;
/// Value format version of [`GcOperation`].
pub const GC_VALUE_VERSION: u16 = 1;

/// Domain separator of the restore identity digest (docs/metadata-format.md, "Restore Closure").
pub const RESTORE_IDENTITY_DOMAIN: &[u8] = b"nokv.restore.operation.v2\0";

durable_enum!(
    /// Kind of durable operation (discriminants of docs/metadata-format.md).
    OperationKind, "operation" {
        /// Object-first artifact publication.
        Publish = 1,
        /// Commit construction.
        BuildCommit = 2,
        /// Restore/fork into a new destination workbench.
        Restore = 3,
        /// Commit retirement.
        CommitRetire = 4,
        /// Garbage collection of one revision.
        Gc = 5,
    }
);

impl OperationKind {
    /// The value format version this build reads and writes for the kind.
    pub fn value_version(self) -> u16 {
        match self {
            OperationKind::Publish => PUBLISH_VALUE_VERSION,
            OperationKind::BuildCommit => BUILD_COMMIT_VALUE_VERSION,
            OperationKind::Restore => RESTORE_VALUE_VERSION,
            OperationKind::CommitRetire => COMMIT_RETIRE_VALUE_VERSION,
            OperationKind::Gc => GC_VALUE_VERSION,
        }
    }
}

durable_enum!(
    /// Publication phase (discriminants of docs/metadata-format.md).
    PublishPhase, "operation" {
        /// Objects uploading.
        Uploading = 1,
        /// Finalization claimed.
        Finalizing = 2,
        /// Published atomically with the path/revision.
        Published = 3,
        /// Cleanup claimed.
        Aborting = 4,
        /// Cleanup running.
        Cleaning = 5,
        /// Cleanup complete.
        Cleaned = 6,
        /// Ambiguous; awaiting reconciliation.
        Quarantined = 7,
    }
);

durable_enum!(
    /// Commit build phase (discriminants of docs/metadata-format.md).
    BuildCommitPhase, "operation" {
        /// Members, references and parents being written.
        Building = 1,
        /// Closure digests verified; final publication pending.
        Sealing = 2,
        /// Commit published.
        Complete = 3,
        /// Cleanup claimed.
        Aborting = 4,
        /// Cleanup running.
        Cleaning = 5,
        /// Cleanup complete.
        Cleaned = 6,
        /// Ambiguous; awaiting reconciliation.
        Quarantined = 7,
    }
);

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
    /// Commit retirement phase (discriminants of docs/metadata-format.md).
    CommitRetirePhase, "operation" {
        /// Sealed -> Retiring claimed.
        Claiming = 1,
        /// Releasing the closure in bounded batches.
        Releasing = 2,
        /// Retired published.
        Complete = 3,
        /// Ambiguous; awaiting reconciliation.
        Quarantined = 4,
    }
);

durable_enum!(
    /// GC phase (discriminants of docs/metadata-format.md).
    GcPhase, "operation" {
        /// Waiting to be claimed.
        Queued = 1,
        /// Available -> Deleting claimed.
        Claimed = 2,
        /// Deleting objects.
        Deleting = 3,
        /// Every object confirmed absent.
        Deleted = 4,
        /// Ambiguous provider result.
        Quarantined = 5,
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

/// The Operation key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationKey {
    /// Root.
    pub root: RootId,
    /// Operation kind.
    pub kind: OperationKind,
    /// Operation id.
    pub operation_id: OperationId,
}

impl OperationKey {
    /// `root_id | u8 kind | operation_id` (33 bytes).
    pub fn encode(&self) -> Vec<u8> {
        Enc::new()
            .raw(self.root.as_bytes())
            .u8(self.kind.to_u8())
            .raw(self.operation_id.as_bytes())
            .finish()
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] (unknown kind, length other than 33).
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let k = OperationKey {
            root: RootId(d.b16()?),
            kind: OperationKind::from_u8(d.u8()?)?,
            operation_id: OperationId(d.b16()?),
        };
        d.finish()?;
        Ok(k)
    }
}

/// Success payload of a publish operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishResult {
    /// Commit version of the publishing command.
    pub commit_version: u64,
    /// New path generation; `None` for a staged (CommitStaging/RestoreStaging) revision that
    /// wrote no PathCurrent.
    pub path_generation: Option<u64>,
}

durable_enum!(
    /// Kind of the PathCurrent generation CAS a publication was begun with.
    PublishConditionKind, "operation" {
        /// The path must be absent.
        Create = 1,
        /// The path must exist at an expected generation.
        Replace = 2,
        /// Append: absent (`None`) or at an expected generation.
        Append = 3,
    }
);

/// The PathCurrent condition frozen into a publish operation (the generation CAS of its final
/// command).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishCondition {
    /// The path must be absent.
    Create,
    /// The path must exist with this generation.
    Replace {
        /// Expected generation.
        expected_generation: u64,
    },
    /// `None`: the path must be absent; `Some(g)`: it must be at generation `g`.
    Append {
        /// Expected generation of the base body, if any.
        expected_generation: Option<u64>,
    },
}

impl PublishCondition {
    /// The condition kind.
    pub fn kind(&self) -> PublishConditionKind {
        match self {
            PublishCondition::Create => PublishConditionKind::Create,
            PublishCondition::Replace { .. } => PublishConditionKind::Replace,
            PublishCondition::Append { .. } => PublishConditionKind::Append,
        }
    }

    fn put(&self, e: &mut Enc) {
        e.u8(self.kind().to_u8());
        match self {
            PublishCondition::Create => e.opt_u64(None),
            PublishCondition::Replace {
                expected_generation,
            } => e.opt_u64(Some(*expected_generation)),
            PublishCondition::Append {
                expected_generation,
            } => e.opt_u64(*expected_generation),
        };
    }

    fn get(d: &mut Dec<'_>) -> Result<Self> {
        let kind = PublishConditionKind::from_u8(d.u8()?)?;
        let generation = d.opt_u64()?;
        Ok(match (kind, generation) {
            (PublishConditionKind::Create, None) => PublishCondition::Create,
            (PublishConditionKind::Replace, Some(g)) => PublishCondition::Replace {
                expected_generation: g,
            },
            (PublishConditionKind::Append, g) => PublishCondition::Append {
                expected_generation: g,
            },
            (k, g) => {
                return Err(d.err(format!(
                    "publish condition {k:?} with expected generation {g:?}"
                )))
            }
        })
    }
}

/// The base body an append publication reuses as immutable segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishBase {
    /// Revision whose ArtifactManifest rows are reused (rows `0..row_count`, in order).
    pub revision: ArtifactRevisionId,
    /// Number of reused manifest rows.
    pub row_count: u64,
    /// Bytes covered by the reused rows (the new blocks start at this logical offset).
    pub logical_size: u64,
}

/// A publication's durable state (the StagedObject ledger rows hang off its id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishOperation {
    /// Phase.
    pub phase: PublishPhase,
    /// Revision being created (every staged object key belongs to it).
    pub artifact_revision_id: ArtifactRevisionId,
    /// Caller intent digest: an operation id reused with another intent is refused.
    pub intent_digest: [u8; 32],
    /// Target workbench id.
    pub workbench_id: String,
    /// Target path (normalized).
    pub path: NormPath,
    /// Generation CAS of the final command.
    pub condition: PublishCondition,
    /// Reused append segments, if any.
    pub base: Option<PublishBase>,
    /// Sealed dependency depth of the new revision.
    pub dependency_depth: u32,
    /// Content type (1..=255 bytes).
    pub content_type: String,
    /// Producer / provenance summary.
    pub producer: String,
    /// Optional caller manifest id.
    pub manifest_id: Option<String>,
    /// Encoded custom index fields (the PathEntry `index_projection` form).
    pub index_projection: Vec<(String, Vec<u8>)>,
    /// Number of StagedObject rows written so far (sequences `0..count` relative to the first
    /// own object index; see [`crate::ops::publish_operation`]).
    pub staged_object_count: u64,
    /// Expected body length in bytes (sealed by the Finalizing CAS; `0` before).
    pub expected_length: u64,
    /// Expected `sha256:` body digest URI (sealed by the Finalizing CAS; `None` before).
    pub expected_digest_uri: Option<String>,
    /// Next StagedObject sequence cleanup has not yet settled (Aborting/Cleaning/Quarantined).
    pub cleanup_next_sequence: u64,
    /// Evidence recorded when the operation was quarantined.
    pub quarantine_evidence: Option<String>,
    /// Terminal result.
    pub result: OperationResult<PublishResult>,
}

/// The expected WorkbenchCommitHead a build was frozen against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadRef {
    /// Head commit.
    pub commit_id: CommitId,
    /// Head generation.
    pub head_generation: u64,
}

/// Immutable binding of the staged canonical run manifest (docs/metadata-format.md, "Commit Closure" step 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedManifestBinding {
    /// Publish operation that staged the manifest revision.
    pub publish_operation_id: OperationId,
    /// Incarnation the manifest belongs to.
    pub incarnation: WorkspaceIncarnationId,
    /// Hidden manifest revision.
    pub revision: ArtifactRevisionId,
    /// Manifest body length.
    pub logical_size: u64,
    /// `sha256:` body digest URI (the envelope digest).
    pub body_digest_uri: String,
    /// `sha256:` manifest-rows digest URI.
    pub manifest_digest_uri: String,
    /// Content type (`application/json`).
    pub content_type: String,
}

/// Success payload of a build-commit operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildCommitResult {
    /// Commit version of the sealing command.
    pub commit_version: u64,
    /// New WorkbenchCommitHead generation.
    pub head_generation: u64,
    /// New generation of `metadata/run_manifest.json`.
    pub manifest_generation: u64,
}

/// A commit build with its complete frozen request (value version 5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildCommitOperation {
    /// Phase.
    pub phase: BuildCommitPhase,
    /// Commit identity being built.
    pub commit_id: CommitId,
    /// Opaque Agent projection-input digest.
    pub projection_input_digest: [u8; 32],
    /// `nokv.build-commit.initialization.v5\0` digest of the frozen request.
    pub initialization_digest: [u8; 32],
    /// Source workbench id.
    pub workbench_id: String,
    /// Frozen source incarnation.
    pub source_incarnation: WorkspaceIncarnationId,
    /// Frozen source read version (held by `HistoryHold(BuildCommit, operation_id)`).
    pub source_read_version: u64,
    /// Frozen workspace (tree) revision.
    pub source_workspace_revision: u64,
    /// Expected current head (`None`: no head yet).
    pub expected_head: Option<HeadRef>,
    /// The request's `replace` bit.
    pub replace: bool,
    /// Caller content digest URI.
    pub content_digest_uri: String,
    /// Canonical manifest digest URI.
    pub manifest_digest_uri: String,
    /// Exact run-manifest publication condition (`None`: must be absent).
    pub run_manifest_expected_generation: Option<u64>,
    /// First owner-observed commit time, Unix seconds.
    pub committed_at_unix_seconds: u64,
    /// Staged run-manifest binding, once step 2 ran.
    pub staged_manifest: Option<StagedManifestBinding>,
    /// Producer.
    pub producer: String,
    /// Opaque canonical lineage projection.
    pub lineage: Vec<u8>,
    /// Parent commits in request order.
    pub parents: Vec<CommitId>,
    /// Construction progress.
    pub cursor: ClosureCursor,
    /// Members written so far / sealed.
    pub member_count: u64,
    /// Member digest.
    pub member_digest: [u8; 32],
    /// Unique revisions referenced so far / sealed.
    pub revision_count: u64,
    /// Revision digest.
    pub revision_digest: [u8; 32],
    /// Unique parents attached so far / sealed.
    pub parent_count: u64,
    /// Parent digest.
    pub parent_digest: [u8; 32],
    /// Cleanup progress (Aborting/Cleaning).
    pub cleanup_cursor: ClosureCursor,
    /// Terminal result.
    pub result: OperationResult<BuildCommitResult>,
}

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

/// A commit retirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRetireOperation {
    /// Phase.
    pub phase: CommitRetirePhase,
    /// Commit being retired.
    pub commit_id: CommitId,
    /// Consumer epoch the Sealed -> Retiring CAS expected.
    pub expected_consumer_epoch: u64,
    /// Release progress.
    pub cursor: ClosureCursor,
    /// Terminal result (success payload: commit version that published Retired).
    pub result: OperationResult<u64>,
}

/// Garbage collection of one revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcOperation {
    /// Phase.
    pub phase: GcPhase,
    /// Revision being collected.
    pub artifact_revision_id: ArtifactRevisionId,
    /// Reference epoch the claim expected.
    pub reference_epoch: u64,
    /// Next ArtifactManifest object_index to delete.
    pub next_object_index: u64,
    /// Objects confirmed deleted so far.
    pub deleted_object_count: u64,
    /// Evidence recorded when quarantined.
    pub quarantine_evidence: Option<String>,
    /// Terminal result (success payload: commit version that published Deleted).
    pub result: OperationResult<u64>,
}

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
}

fn put_cursor(e: &mut Enc, c: &ClosureCursor) {
    c.put(e);
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
        }
    }

    /// Encodes the value: `u16 kind's version | u8 kind | payload`.
    pub fn encode(&self) -> Vec<u8> {
        let kind = self.kind();
        let mut e = Enc::version(kind.value_version());
        e.u8(kind.to_u8());
        match self {
            Operation::Publish(p) => {
                e.u8(p.phase.to_u8())
                    .raw(p.artifact_revision_id.as_bytes())
                    .raw(&p.intent_digest)
                    .str(&p.workbench_id)
                    .norm_path(&p.path);
                p.condition.put(&mut e);
                match &p.base {
                    None => e.u8(0),
                    Some(b) => e
                        .u8(1)
                        .raw(b.revision.as_bytes())
                        .u64(b.row_count)
                        .u64(b.logical_size),
                };
                e.u32(p.dependency_depth)
                    .str(&p.content_type)
                    .str(&p.producer)
                    .opt_str(p.manifest_id.as_deref())
                    .count(p.index_projection.len());
                for (field, value) in &p.index_projection {
                    e.str(field).bytes(value);
                }
                e.u64(p.staged_object_count)
                    .u64(p.expected_length)
                    .opt_str(p.expected_digest_uri.as_deref())
                    .u64(p.cleanup_next_sequence)
                    .opt_str(p.quarantine_evidence.as_deref());
                p.result.put(&mut e, |r, e| {
                    e.u64(r.commit_version).opt_u64(r.path_generation);
                });
            }
            Operation::BuildCommit(b) => {
                e.u8(b.phase.to_u8())
                    .raw(b.commit_id.as_bytes())
                    .raw(&b.projection_input_digest)
                    .raw(&b.initialization_digest)
                    .str(&b.workbench_id)
                    .raw(b.source_incarnation.as_bytes())
                    .u64(b.source_read_version)
                    .u64(b.source_workspace_revision);
                match &b.expected_head {
                    None => e.u8(0),
                    Some(h) => e.u8(1).raw(h.commit_id.as_bytes()).u64(h.head_generation),
                };
                e.bool(b.replace)
                    .str(&b.content_digest_uri)
                    .str(&b.manifest_digest_uri)
                    .opt_u64(b.run_manifest_expected_generation)
                    .u64(b.committed_at_unix_seconds);
                match &b.staged_manifest {
                    None => e.u8(0),
                    Some(s) => e
                        .u8(1)
                        .raw(s.publish_operation_id.as_bytes())
                        .raw(s.incarnation.as_bytes())
                        .raw(s.revision.as_bytes())
                        .u64(s.logical_size)
                        .str(&s.body_digest_uri)
                        .str(&s.manifest_digest_uri)
                        .str(&s.content_type),
                };
                e.str(&b.producer).bytes(&b.lineage).count(b.parents.len());
                for p in &b.parents {
                    e.raw(p.as_bytes());
                }
                put_cursor(&mut e, &b.cursor);
                e.u64(b.member_count)
                    .raw(&b.member_digest)
                    .u64(b.revision_count)
                    .raw(&b.revision_digest)
                    .u64(b.parent_count)
                    .raw(&b.parent_digest);
                put_cursor(&mut e, &b.cleanup_cursor);
                b.result.put(&mut e, |r, e| {
                    e.u64(r.commit_version)
                        .u64(r.head_generation)
                        .u64(r.manifest_generation);
                });
            }
            Operation::Restore(r) => {
                e.u8(r.phase.to_u8())
                    .str(&r.source_workbench_id)
                    .raw(r.source_incarnation.as_bytes());
                r.source.put(&mut e);
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
                r.result.put(&mut e, |v, e| {
                    e.u64(v.commit_version).u64(v.destination_generation);
                });
            }
            Operation::CommitRetire(c) => {
                e.u8(c.phase.to_u8())
                    .raw(c.commit_id.as_bytes())
                    .u64(c.expected_consumer_epoch);
                put_cursor(&mut e, &c.cursor);
                c.result.put(&mut e, |v, e| {
                    e.u64(*v);
                });
            }
            Operation::Gc(g) => {
                e.u8(g.phase.to_u8())
                    .raw(g.artifact_revision_id.as_bytes())
                    .u64(g.reference_epoch)
                    .u64(g.next_object_index)
                    .u64(g.deleted_object_count)
                    .opt_str(g.quarantine_evidence.as_deref());
                g.result.put(&mut e, |v, e| {
                    e.u64(*v);
                });
            }
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
            OperationKind::CommitRetire => Operation::CommitRetire(CommitRetireOperation {
                phase: CommitRetirePhase::from_u8(d.u8()?)?,
                commit_id: CommitId(d.b32()?),
                expected_consumer_epoch: d.u64()?,
                cursor: ClosureCursor::get(&mut d)?,
                result: OperationResult::get(&mut d, |d| d.u64())?,
            }),
            OperationKind::Gc => Operation::Gc(GcOperation {
                phase: GcPhase::from_u8(d.u8()?)?,
                artifact_revision_id: ArtifactRevisionId(d.b16()?),
                reference_epoch: d.u64()?,
                next_object_index: d.u64()?,
                deleted_object_count: d.u64()?,
                quarantine_evidence: d.opt_string()?,
                result: OperationResult::get(&mut d, |d| d.u64())?,
            }),
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

fn decode_publish(d: &mut Dec<'_>) -> Result<PublishOperation> {
    let phase = PublishPhase::from_u8(d.u8()?)?;
    let artifact_revision_id = ArtifactRevisionId(d.b16()?);
    let intent_digest = d.b32()?;
    let workbench_id = d.string()?;
    let path = d.norm_path()?;
    let condition = PublishCondition::get(d)?;
    let base = if d.opt_tag()? {
        Some(PublishBase {
            revision: ArtifactRevisionId(d.b16()?),
            row_count: d.u64()?,
            logical_size: d.u64()?,
        })
    } else {
        None
    };
    let dependency_depth = d.u32()?;
    let content_type = d.string()?;
    let producer = d.string()?;
    let manifest_id = d.opt_string()?;
    let n = d.count()?;
    let mut index_projection = Vec::new();
    for _ in 0..n {
        let field = d.string()?;
        let value = d.bytes()?.to_vec();
        index_projection.push((field, value));
    }
    let staged_object_count = d.u64()?;
    let expected_length = d.u64()?;
    let expected_digest_uri = d.opt_string()?;
    let cleanup_next_sequence = d.u64()?;
    let quarantine_evidence = d.opt_string()?;
    let result = OperationResult::get(d, |d| {
        Ok(PublishResult {
            commit_version: d.u64()?,
            path_generation: d.opt_u64()?,
        })
    })?;
    Ok(PublishOperation {
        phase,
        artifact_revision_id,
        intent_digest,
        workbench_id,
        path,
        condition,
        base,
        dependency_depth,
        content_type,
        producer,
        manifest_id,
        index_projection,
        staged_object_count,
        expected_length,
        expected_digest_uri,
        cleanup_next_sequence,
        quarantine_evidence,
        result,
    })
}

fn decode_build(d: &mut Dec<'_>) -> Result<BuildCommitOperation> {
    let phase = BuildCommitPhase::from_u8(d.u8()?)?;
    let commit_id = CommitId(d.b32()?);
    let projection_input_digest = d.b32()?;
    let initialization_digest = d.b32()?;
    let workbench_id = d.string()?;
    let source_incarnation = WorkspaceIncarnationId(d.b16()?);
    let source_read_version = d.u64()?;
    let source_workspace_revision = d.u64()?;
    let expected_head = if d.opt_tag()? {
        Some(HeadRef {
            commit_id: CommitId(d.b32()?),
            head_generation: d.u64()?,
        })
    } else {
        None
    };
    let replace = d.bool()?;
    let content_digest_uri = d.string()?;
    let manifest_digest_uri = d.string()?;
    let run_manifest_expected_generation = d.opt_u64()?;
    let committed_at_unix_seconds = d.u64()?;
    let staged_manifest = if d.opt_tag()? {
        Some(StagedManifestBinding {
            publish_operation_id: OperationId(d.b16()?),
            incarnation: WorkspaceIncarnationId(d.b16()?),
            revision: ArtifactRevisionId(d.b16()?),
            logical_size: d.u64()?,
            body_digest_uri: d.string()?,
            manifest_digest_uri: d.string()?,
            content_type: d.string()?,
        })
    } else {
        None
    };
    let producer = d.string()?;
    let lineage = d.bytes()?.to_vec();
    let n = d.count()?;
    let mut parents = Vec::new();
    for _ in 0..n {
        parents.push(CommitId(d.b32()?));
    }
    let cursor = ClosureCursor::get(d)?;
    let member_count = d.u64()?;
    let member_digest = d.b32()?;
    let revision_count = d.u64()?;
    let revision_digest = d.b32()?;
    let parent_count = d.u64()?;
    let parent_digest = d.b32()?;
    let cleanup_cursor = ClosureCursor::get(d)?;
    let result = OperationResult::get(d, |d| {
        Ok(BuildCommitResult {
            commit_version: d.u64()?,
            head_generation: d.u64()?,
            manifest_generation: d.u64()?,
        })
    })?;
    Ok(BuildCommitOperation {
        phase,
        commit_id,
        projection_input_digest,
        initialization_digest,
        workbench_id,
        source_incarnation,
        source_read_version,
        source_workspace_revision,
        expected_head,
        replace,
        content_digest_uri,
        manifest_digest_uri,
        run_manifest_expected_generation,
        committed_at_unix_seconds,
        staged_manifest,
        producer,
        lineage,
        parents,
        cursor,
        member_count,
        member_digest,
        revision_count,
        revision_digest,
        parent_count,
        parent_digest,
        cleanup_cursor,
        result,
    })
}

fn decode_restore(d: &mut Dec<'_>) -> Result<RestoreOperation> {
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
