//! Key and value codecs, one module per metadata family.
//!
//! Shared conventions live in `wire`: unsigned big-endian integers, u32-length-prefixed strings
//! and byte strings, u16-length-prefixed snapshot aliases / tag names / index field ids,
//! one-byte option tags and booleans, and a leading u16 value format version on every value.
//!
//! Every family module offers a typed key (`…Key { … }` with `encode`/`decode`) and a value type
//! with `encode`/`decode`. Key decoders reject wrong widths, trailing bytes, unknown
//! discriminants and invalid names/paths; value decoders reject unknown versions, unknown enum
//! discriminants, unknown option/result tags, truncation and trailing bytes. All failures are
//! [`crate::Error::Codec`] naming the family (tree) name.
//!
//! Value format versions (docs/metadata-format.md, "Durable Format Registry"):
//!
//! | version | families |
//! |---------|----------|
//! | 2 | WorkspaceCurrent, PathCurrent, ArtifactRevision, ArtifactManifest, RevisionRef (publication-owned workspace/path/revision records); Commit, CommitMember (immutable commit records); ChangeEvent; CommandDedupe |
//! | 5 | Operation / BuildCommit |
//! | 4 | Operation / Restore |
//! | 1 | everything else: System records, RootFence, WorkspaceIncarnationClaim, WorkbenchCommitHead, Tag, SnapshotRef, SnapshotAlias, HistoryHold, CommitConsumer, SecondaryIndex, Operation / Publish, CommitRetire, Gc, RestoreMember, StagedObject, GcCandidate, GcBarrier |
//!
//! History rows use holt's own unversioned framing ([`history`]); RecoveryOutbox values belong to
//! the command layer (only their keys are here, [`recovery_outbox`]).

pub(crate) mod wire;

pub mod artifact_manifest;
pub mod artifact_revision;
pub mod change_event;
pub mod command_dedupe;
pub mod commit;
pub mod commit_consumer;
pub mod commit_member;
pub mod cursor;
pub mod field_id;
pub mod gc_barrier;
pub mod gc_candidate;
pub mod history;
pub mod history_hold;
pub mod index_value;
pub mod operation;
pub mod path_current;
pub mod recovery_outbox;
pub mod restore_member;
pub mod revision_ref;
pub mod root_fence;
pub mod secondary_index;
pub mod setting;
pub mod snapshot_alias;
pub mod snapshot_ref;
pub mod staged_object;
pub mod system;
pub mod tag;
pub mod workbench_commit_head;
pub mod workspace_current;
pub mod workspace_incarnation_claim;

pub use artifact_manifest::{manifest_digest_uri, ArtifactManifestKey, ManifestRow};
pub use artifact_revision::{ArtifactRevision, ArtifactRevisionKey, RevisionState};
pub use change_event::{ChangeEvent, ChangeEventKey, ChangeKind, MovedFrom};
pub use command_dedupe::{CommandDedupe, CommandDedupeKey, CommandResult};
pub use commit::{Commit, CommitKey, CommitState};
pub use commit_consumer::{CommitConsumer, CommitConsumerKey, CommitConsumerKind, ConsumerOwner};
pub use commit_member::{CommitMember, CommitMemberKey};
pub use cursor::{ClosureCursor, OperationResult, SetCursor, TerminalError};
pub use gc_barrier::{GcBarrier, GcBarrierKey};
pub use gc_candidate::{GcCandidate, GcCandidateKey, GcClaimState};
pub use history::HistoryKey;
pub use history_hold::{HistoryHold, HistoryHoldKey, HistoryHoldKind, HistoryHoldState, HoldId};
pub use operation::{
    BuildCommitOperation, BuildCommitPhase, BuildCommitResult, CommitRetireOperation,
    CommitRetirePhase, GcOperation, GcPhase, HeadRef, Operation, OperationKey, OperationKind,
    PublishBase, PublishCondition, PublishConditionKind, PublishOperation, PublishPhase,
    PublishResult, ReserveOperation, ReservePhase, ReservedRevision, RestoreCursor,
    RestoreOperation, RestorePhase, RestoreResult, RestoreSource, RestoreSourceKind,
    StagedManifestBinding, MAX_RESERVED_REVISIONS,
};
pub use path_current::{PathCurrentKey, PathEntry};
pub use recovery_outbox::RecoveryOutboxKey;
pub use restore_member::{RestoreMember, RestoreMemberKey};
pub use revision_ref::{RefOwner, ReferenceKind, RevisionRef, RevisionRefKey};
pub use root_fence::{RootActivationState, RootFence};
pub use secondary_index::{SecondaryIndexEntry, SecondaryIndexKey};
pub use snapshot_alias::{SnapshotAlias, SnapshotAliasKey};
pub use snapshot_ref::{SnapshotRef, SnapshotRefKey, SnapshotState};
pub use staged_object::{StagedCleanupState, StagedObject, StagedObjectKey, StagedProviderState};
pub use system::{RootPlacement, RootPlacementLifecycle, SchemaMarker};
pub use tag::{Tag, TagKey};
pub use wire::decode_root_key;
pub use workbench_commit_head::{WorkbenchCommitHead, WorkbenchCommitHeadKey};
pub use workspace_current::{WorkspaceCurrent, WorkspaceCurrentKey, WorkspaceState};
pub use workspace_incarnation_claim::{WorkspaceIncarnationClaim, WorkspaceIncarnationClaimKey};
