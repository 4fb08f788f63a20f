//! Key and value codecs, one module per seed 000 family.
//!
//! Shared conventions live in `wire`: unsigned big-endian integers, u32-length-prefixed strings,
//! one-byte option tags, and a leading u16 value format version on every value. Value versions
//! follow seed 000 "Durable Format Registry": WorkspaceCurrent, PathCurrent, ArtifactRevision,
//! ArtifactManifest, RevisionRef, ChangeEvent and CommandDedupe use version 2; System records,
//! RootFence, WorkspaceIncarnationClaim and GcCandidate use version 1. Unknown versions, enum
//! discriminants, option tags, truncation and trailing bytes fail with [`crate::Error::Codec`].

pub(crate) mod wire;

pub mod artifact_manifest;
pub mod artifact_revision;
pub mod change_event;
pub mod command_dedupe;
pub mod gc_candidate;
pub mod path_current;
pub mod revision_ref;
pub mod root_fence;
pub mod system;
pub mod workspace_current;
pub mod workspace_incarnation_claim;

pub use artifact_manifest::{manifest_digest_uri, ManifestRow};
pub use artifact_revision::{ArtifactRevision, RevisionState};
pub use change_event::{ChangeEvent, ChangeKind};
pub use command_dedupe::{CommandDedupe, CommandResult};
pub use gc_candidate::{GcCandidate, GcClaimState};
pub use path_current::PathEntry;
pub use revision_ref::{RefOwner, ReferenceKind, RevisionRef};
pub use root_fence::{RootActivationState, RootFence};
pub use system::{RootPlacement, RootPlacementLifecycle, SchemaMarker};
pub use workspace_current::{WorkspaceCurrent, WorkspaceState};
pub use workspace_incarnation_claim::WorkspaceIncarnationClaim;
