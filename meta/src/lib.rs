//! # meta — NoKV's schema-8 metadata layer
//!
//! `meta` gives workbenches, paths and immutable artifact revisions their durable meaning on top
//! of the `holt` engine, following the normative metadata schema (docs/metadata-format.md). It knows nothing of
//! object storage beyond the object-key strings and digests it records.
//!
//! ## Layering
//!
//! ```text
//! MetaShard            open + schema gate + owner epoch; workspace/publication operations (ops/),
//!   │                  consistent reads (Reader, read.rs)
//!   ▼
//! MetadataCommand      one bounded command: fences, read-version fence, request-id replay,
//!   │                  predicates, mutations, ChangeEvent rows, CommandDedupe (command/)
//!   ▼
//! TxnStore             point reads, bounded prefix/delimiter scans, one checked atomic
//!   │                  multi-keyspace write (store.rs; HoltStore)
//!   ▼
//! holt                 named ART trees, atomic batches, WAL, checkpoints, MVCC history
//! ```
//!
//! - [`path`] is the one shared path normalizer and ordered path codec;
//! - [`codec`] holds one key/value codec per family of docs/metadata-format.md, versioned and
//!   fail-closed;
//! - [`schema`] is the exact tree registry and the fail-closed schema gate;
//! - [`command`] executes a [`command::MetadataCommand`] as exactly one holt batch;
//! - [`ops`] builds commands for workbench creation and publication, rebuilding on a stale read
//!   version at most [`ops::MAX_ATTEMPTS`] times, and drives the durable lifecycle operations:
//!   - [`ops::commit`]: the BuildCommit state machine (Building → Sealing → Complete; abort →
//!     Cleaning → Cleaned | Quarantined) with its frozen request, construction HistoryHold,
//!     staged run manifest, CommitMember rows, commit RevisionRefs, CommitConsumer rows,
//!     WorkbenchCommitHead and lineage parents; CommitRetire with cursors (docs/metadata-format.md, "Commit
//!     Closure");
//!   - [`ops::tag`]: CAS-protected tags on commits (moving or deleting never retires a commit);
//!   - [`ops::find`]: pages of visible workbenches with their heads and run manifests at one
//!     read version (`workbench_find`);
//!   - [`ops::snapshot`] and [`ops::lease_clock`]: SnapshotRef + SnapshotAlias + HistoryHold
//!     minted at one read version, leases on the persisted lease clock, renew (extend-only),
//!     retire, the reaper and the MVCC history floor (docs/metadata-format.md, "Snapshot Lifecycle And History
//!     Holds");
//!   - [`ops::restore`]: the deterministic restore operation (Preparing → Copying →
//!     SourceSealed → Ready → Complete) with RestoreMember rows and shared revisions (docs/metadata-format.md,
//!     "Restore Closure");
//!   - [`ops::changes`]: ReadChanges over ChangeEvent rows with the cursor and visibility rules
//!     of docs/metadata-format.md, "ChangeEvent".
//!
//! - [`outbox`] is the RecoveryOutbox: one hash-chained record per command, owner-epoch advance
//!   and initialization, appended in the same holt batch; opens verify the records after the
//!   verified chain head, and old records are removed per a retention policy (see
//!   [`outbox`], "Verification" and "Retention").
//!
//! - [`index`] is the typed secondary index: the value codec, the projection every publication
//!   writes, and the search / aggregate / catalog executors.
//!
//! - [`ops::publish::operation`] is the Publish operation and its StagedObject ledger: Begin,
//!   staging rows before their bytes are sent, the Uploading -> Finalizing CAS, the publication
//!   command that moves Finalizing -> Published, abort / fenced takeover, ledger-driven cleanup
//!   and quarantine reconciliation.
//!
//! - Object lifetime: [`ops::remove`] (path removal: one bounded command per path, prefix
//!   removal in batches), [`ops::gc`] (the GC state machine over GcCandidate rows: claim
//!   `Available -> Deleting` under the reference epoch and the history floor, object deletion
//!   through a caller-supplied provider, `Deleted` with dependency release, `Quarantined` and
//!   reconciliation, the GcBarrier; [`ops::gc::explain`] names what keeps a revision),
//!   [`ops::fsck`] (typed findings recomputed from authoritative rows; SecondaryIndex repair) and
//!   [`ops::settings`] (the durable `history_retention_versions`).

#![deny(missing_docs)]

// Lets the shared test fixture (`tests/fixtures/engine.rs`, also compiled into the unit tests
// below) name this crate `meta` from inside it.
#[cfg(test)]
extern crate self as meta;

/// The engine switch of the test suites (`NOKV_TEST_ENGINE=etcd`), shared with `meta/tests/`.
#[cfg(test)]
#[path = "../tests/fixtures/engine.rs"]
pub(crate) mod test_engine;

pub mod clock;
pub mod codec;
pub mod command;
pub mod error;
pub mod family;
pub mod ids;
pub mod index;
pub mod ops;
pub mod outbox;
pub mod path;
pub mod read;
pub mod schema;
pub mod shard;
pub mod store;
pub mod workspace_state;

pub use codec::{
    manifest_digest_uri, ArtifactRevision, ChangeEvent, ChangeKind, CommandResult, ManifestRow,
    MovedFrom, PathEntry, RevisionState, WorkspaceCurrent, WorkspaceState,
};
pub use error::{Error, Result};
pub use ids::{
    validate_workbench_id, ArtifactRevisionId, LogicalShardId, OperationId, RequestId, RootId,
    WorkspaceIncarnationId,
};
pub use ops::publish::operation::{BeginOutcome, DeleteOutcome, PublishIntent, StagedBlock};
pub use ops::publish::{PathCondition, PublishReceipt, PublishRequest};
pub use ops::workspace::CreateWorkspaceOutcome;
pub use path::{normalize, NormPath, PathError};
pub use read::{Child, ChildPage, Reader};
pub use shard::sequencer::{self, Sequenced};
pub use shard::{MetaShard, OpenOptions};
pub use store::{HoltStore, ShardStore, TxnStore};
