//! Typed errors of the metadata layer.
//!
//! Every failure the facade has to distinguish is its own variant; storage failures from holt are
//! wrapped unchanged in [`Error::Storage`]. Nothing in this crate panics on caller or disk input.

use crate::path::PathError;

/// Result alias used throughout `meta`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors returned by the metadata layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A durable value or key failed to decode (unknown value format version, unknown enum
    /// discriminant, truncation, trailing bytes, invalid UTF-8). `family` is the metadata family
    /// name (e.g. `"path_current"`).
    #[error("corrupt {family} record: {reason}")]
    Codec {
        /// Metadata family (tree) name of the record.
        family: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// A relative path was rejected by the one shared normalizer (docs/metadata-format.md, "Ids, Names, And Keys").
    #[error("invalid path: {0}")]
    Path(#[from] PathError),
    /// A caller argument was invalid (workbench id, digest URI, manifest shape, reserved path, …).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The store is not an exact schema-8 NoKV workspace store (docs/metadata-format.md, "Schema Gate"). Nothing
    /// was written to it.
    #[error("schema mismatch ({kind:?}): {reason}")]
    SchemaMismatch {
        /// The class of the (first) difference.
        kind: SchemaMismatchKind,
        /// Which part of the marker, registry, or placement records differs (every registry
        /// difference is listed, separated by `; `).
        reason: String,
    },
    /// The store was created with another presentation root than the one requested at open.
    #[error("presentation root mismatch: store has {stored:?}, open requested {requested:?}")]
    PresentationRootMismatch {
        /// Durable presentation root recorded at store creation.
        stored: String,
        /// Presentation root requested by the caller.
        requested: String,
    },
    /// No `Visible` WorkspaceCurrent marker exists for this workbench id.
    #[error("workbench {workbench_id:?} not found")]
    WorkspaceNotFound {
        /// The external workbench id.
        workbench_id: String,
    },
    /// The workbench name is held by a `Staging` or `Retired` marker and cannot be created or used.
    #[error("workbench {workbench_id:?} is unavailable (state {state:?})")]
    WorkspaceUnavailable {
        /// The external workbench id.
        workbench_id: String,
        /// The durable state of the marker.
        state: crate::workspace_state::WorkspaceState,
    },
    /// A create-only publication found an existing PathCurrent entry.
    #[error("path already exists")]
    PathAlreadyExists,
    /// A replace publication found no PathCurrent entry.
    #[error("path not found")]
    PathNotFound,
    /// The path to be created is an implicit directory: published paths lie below it. A path is
    /// a file or a directory, never both (docs/workbench.md, "Files and directories"); the
    /// publishing command refuses it (facade: `AlreadyExists` with `details.kind =
    /// "directory"` for a create, `NotArtifact` for a replace or append).
    #[error("path is a directory: published paths lie below it")]
    PathIsDirectory,
    /// A proper prefix of the path to be created is a published file, so nothing can be written
    /// below it (facade `NotDirectory`). `file` is that prefix, workbench-relative.
    #[error("{file} is a file; nothing can be written below it")]
    AncestorIsFile {
        /// The workbench-relative path of the file that is a proper prefix of the target.
        file: String,
    },
    /// A path move was refused because of its destination (docs/metadata-format.md, "Move One
    /// Path"): the inner error is what a publication at the destination would have been refused
    /// with (`PathAlreadyExists`, `GenerationConflict` with `actual = 0` for an absent
    /// destination, `PathIsDirectory`, `AncestorIsFile`). Errors without this wrapper concern
    /// the source path. Nothing was written.
    #[error("move destination refused: {0}")]
    MoveDestination(Box<Error>),
    /// The path generation differs from the expected one. `0` stands for "absent".
    #[error("generation conflict: expected {expected}, actual {actual}")]
    GenerationConflict {
        /// Generation the caller expected (`0` = the path must be absent).
        expected: u64,
        /// Generation found at the read version (`0` = the path is absent).
        actual: u64,
    },
    /// A request id was reused with a different command digest (docs/metadata-format.md, "Metadata Command").
    #[error("request id reused with different inputs")]
    RequestReplayMismatch,
    /// The command's read version was stale at commit (another commit intervened) and the bounded
    /// rebuild/retry budget was exhausted.
    #[error("read version conflict after {attempts} attempt(s)")]
    ReadVersionConflict {
        /// How many times the command was built and submitted.
        attempts: u32,
    },
    /// A command predicate failed at the holt commit boundary; nothing was applied. The ops layer
    /// re-reads and reports a precise error instead, so callers of [`crate::MetaShard`] normally
    /// do not see this variant.
    #[error("command predicate failed; nothing applied")]
    CommandPredicateFailed,
    /// The shard's schema marker, RootFence, or owner epoch no longer matches this handle (another
    /// owner opened the store, or placement changed). Reopen the store.
    #[error("shard fenced: {reason}")]
    Fenced {
        /// Which fence failed.
        reason: String,
    },
    /// A referenced ArtifactRevision is missing or not `Available`, so no reference may be added.
    #[error("artifact revision {revision} unavailable: {reason}")]
    RevisionUnavailable {
        /// Hex ArtifactRevisionId.
        revision: String,
        /// Missing or its state.
        reason: String,
    },
    /// The RecoveryOutbox failed verification at open (docs/metadata-format.md, "RecoveryOutbox"): a gap in the
    /// LSN sequence, a broken hash chain, a missing or orphan chunk, malformed framing, or a
    /// disagreement with the System recovery tail. The store is refused and left unchanged.
    #[error("recovery outbox corrupt at LSN {lsn}: {reason}")]
    RecoveryOutboxCorrupt {
        /// The recovery LSN the failure was detected at.
        lsn: u64,
        /// What was wrong.
        reason: String,
    },
    /// A metadata query exceeded one of its bounded budgets (see [`crate::index::query`]): more
    /// than `maximum` of `resource` (e.g. `"rows examined"`, `"groups"`). Nothing was returned;
    /// narrow the scope or add a selective predicate.
    #[error("query exceeded its budget of {maximum} {resource}")]
    ResourceExhausted {
        /// What ran out (`"rows examined"`, `"groups"`).
        resource: &'static str,
        /// The budget.
        maximum: u64,
    },
    /// A query continuation was issued at `read_version` and the data in its scope changed
    /// since (a publication in the workbench, or any change event in the root): its page
    /// sequence can no longer be continued without duplicates or gaps. Restart the query.
    #[error("the data in scope changed since read version {read_version}")]
    ReadFenceChanged {
        /// Read version the continuation was issued at.
        read_version: u64,
    },
    /// A durable operation (docs/metadata-format.md, Operation family) is missing or not in a phase the
    /// requested step may start from (e.g. finalizing a publication that cleanup already
    /// claimed: the Uploading -> Finalizing and Uploading -> Aborting CASes have one winner).
    #[error("operation {operation_id} is {phase}; {wanted}")]
    OperationState {
        /// Hex operation id.
        operation_id: String,
        /// The phase found (`"absent"` when there is no row).
        phase: String,
        /// What the step needed.
        wanted: String,
    },
    /// An operation id was reused with a different intent (another path, other bytes, …); the
    /// first intent stays bound to the id and nothing was changed.
    #[error("operation {operation_id} was begun with a different intent")]
    OperationIntentMismatch {
        /// Hex operation id.
        operation_id: String,
    },
    /// A commit was requested for a workbench whose current WorkbenchCommitHead names another
    /// commit identity and `replace` was false (docs/metadata-format.md, "Commit Closure"; facade
    /// `WorkbenchCommitConflict`). `head` is the current head's 64-hex commit id.
    #[error("the workbench already has a different commit head; commit with replace to move it")]
    WorkbenchCommitConflict {
        /// 64 lowercase hex characters of the current head commit id.
        head: String,
    },
    /// No Commit record exists for this commit id (64 lowercase hex).
    #[error("commit {commit_id} not found")]
    CommitNotFound {
        /// 64 lowercase hex characters.
        commit_id: String,
    },
    /// A commit, tag or build operation is in a lifecycle state that forbids the request
    /// (e.g. attaching a consumer to a non-Sealed commit, retiring a commit that still has
    /// consumers, a build that was cleaned up). Facade code `InvalidState`.
    #[error("invalid commit lifecycle state: {reason}")]
    CommitLifecycle {
        /// What state was found and what the request needed.
        reason: String,
    },
    /// A tag compare-and-swap failed: the tag's generation differs from the expected one
    /// (`0` stands for "absent").
    #[error("tag changed concurrently: expected generation {expected}, actual {actual}")]
    TagConflict {
        /// Generation the caller expected (`0` = must be absent).
        expected: u64,
        /// Generation found (`0` = absent).
        actual: u64,
    },
    /// A retry of a durable operation (BuildCommit) carried inputs that differ from the frozen
    /// durable request of the same operation identity (docs/metadata-format.md, "Metadata Command").
    #[error("operation input mismatch: {reason}")]
    OperationInputMismatch {
        /// Which input differs.
        reason: String,
    },
    /// No SnapshotRef (or SnapshotAlias) matches the selector in the workbench's current
    /// incarnation (docs/metadata-format.md, SnapshotRef/SnapshotAlias; facade `SnapshotNotFound`).
    #[error("snapshot not found")]
    SnapshotNotFound,
    /// The snapshot's lease has passed on the shard lease clock, or the reaper claimed it
    /// (`ReapClaimed`/`Reaped`; facade `SnapshotExpired`). `status` is `expired` or `reaped`.
    #[error("snapshot {snapshot_id} is {status}")]
    SnapshotExpired {
        /// Numeric snapshot id.
        snapshot_id: u64,
        /// Derived status: `expired` or `reaped`.
        status: &'static str,
    },
    /// A snapshot lifecycle transition was refused (renew shortening the lease, renewing a
    /// retired snapshot, …); facade `InvalidState` with conflict `SnapshotLifecycle`.
    #[error("snapshot lifecycle: {reason}")]
    SnapshotLifecycle {
        /// What was found and what the request needed.
        reason: String,
    },
    /// Retire/reap found live restore/fork consumers on the snapshot (docs/metadata-format.md: "a live consumer
    /// returns the stable ForkRetentionActive facade error").
    #[error("snapshot {snapshot_id} still has {consumer_count} restore/fork consumer(s)")]
    ForkRetentionActive {
        /// Numeric snapshot id.
        snapshot_id: u64,
        /// Live consumers at the read version.
        consumer_count: u64,
    },
    /// The handle was opened read-only ([`crate::MetaShard::open_read_only`]): it serves reads
    /// and refuses every write; nothing was written. Open the store for writing (a writer
    /// handle) to change it. Not retryable through the same handle.
    #[error("the store is open read-only; writes are refused and nothing was written")]
    ReadOnly,
    /// The engine reported an error (I/O, corruption, lock, pruned history, …). Every engine
    /// reports history below its floor (or compacted away) as `holt::Error::HistoryPruned`, the
    /// storage-neutral "that version is gone" signal the operations match on.
    #[error("storage: {0}")]
    Storage(holt::Error),
    /// A remote metadata engine (etcd) could not serve the request within its retry window: no
    /// reachable member, no leader, a request deadline, a full database (`--quota-backend-bytes`),
    /// or a refused request. Reads may be retried. For a write, `write_outcome_unknown` says
    /// whether a sent attempt may still have applied: retrying the same metadata command (same
    /// request id) then returns its stored result instead of applying it twice.
    #[error("metadata store unavailable: {reason}")]
    StoreUnavailable {
        /// What failed (engine and reason).
        reason: String,
        /// True when a write attempt was sent without an answer.
        write_outcome_unknown: bool,
    },
}

/// Engine errors pass through as [`Error::Storage`], except a write refused by a read-only holt
/// database, which is [`Error::ReadOnly`] like every other write through a read-only handle.
impl From<holt::Error> for Error {
    fn from(e: holt::Error) -> Self {
        match e {
            holt::Error::ReadOnly { .. } => Error::ReadOnly,
            e => Error::Storage(e),
        }
    }
}

impl Error {
    /// Shorthand for a [`Error::Codec`] error.
    pub(crate) fn codec(family: &'static str, reason: impl Into<String>) -> Self {
        Error::Codec {
            family,
            reason: reason.into(),
        }
    }

    /// Shorthand for a [`Error::SchemaMismatch`] error.
    pub(crate) fn schema(kind: SchemaMismatchKind, reason: impl Into<String>) -> Self {
        Error::SchemaMismatch {
            kind,
            reason: reason.into(),
        }
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        Error::InvalidArgument(reason.into())
    }
}

/// The class of a [`Error::SchemaMismatch`] (docs/metadata-format.md, "Schema Gate": missing, malformed,
/// unknown-version or inconsistent stores are rejected).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaMismatchKind {
    /// A registry tree (a family of docs/metadata-format.md, a reserved engine tree or holt
    /// `history`) is absent.
    MissingTree,
    /// A tree outside the registry exists.
    ExtraTree,
    /// A registry tree carries another tag.
    WrongTreeTag,
    /// A registry tree carries the wrong versioned (MVCC history) flag.
    WrongVersionedFlag,
    /// A non-empty store has no `System("schema")` marker (e.g. data rows without a marker).
    MissingMarker,
    /// The marker does not decode (truncated, trailing bytes, invalid UTF-8).
    MalformedMarker,
    /// The marker's value_format_version is not 1.
    UnknownMarkerVersion,
    /// The marker names another schema id (a store of another schema).
    ForeignSchemaId,
    /// The marker's format_version is not 8.
    UnsupportedFormatVersion,
    /// A required System record (placement, presentation root, owner epoch, recovery tail) or
    /// the placed root's RootFence row is absent.
    MissingRecord,
    /// A System record or the RootFence row does not decode.
    MalformedRecord,
    /// Placement and RootFence disagree, or the root is not Active.
    InconsistentPlacement,
}
