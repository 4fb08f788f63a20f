//! `nokv::Client` — the Rust SDK over an embedded store.
//!
//! An embedded store is one directory:
//!
//! ```text
//! <store>/meta/      holt database (metadata: schema-8 trees, WAL, checkpoints)
//! <store>/objects/   LocalDir object provider (revision-owned immutable blocks)
//! ```
//!
//! Publication is object-first and metadata-last (docs/design.md, "Immutable Bodies And Publication"):
//! a body is split into fixed blocks, every block is written under the new revision's own keys
//! (`nokv/artifacts/{logical_shard_id}/{root_id}/{artifact_revision_id}/blocks/{object_index}`)
//! and made durable, and only then one metadata command makes the revision visible. Readers see
//! the previous complete body or the new complete body, never a partial one. Every upload is
//! owned by a durable Publish operation and its StagedObject ledger before its first byte is
//! sent, and [`Client::open`] recovers orphaned operations from that ledger (see
//! [`crate::publication`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use meta::{MetaShard, NormPath, OperationId, PathCondition, WorkspaceCurrent};
use objstore::ObjectStore;

use crate::error::{Error, Result};
use crate::index_fields::IndexFields;
use crate::reservations::ReservationPool;
use crate::writers::Registration;

/// Default block size of new bodies: 4 MiB (docs/metadata-format.md, "Upload And Append").
pub const DEFAULT_BLOCK_SIZE: usize = 4 * 1024 * 1024;
/// Most distinct physical owner revisions a body may reuse blocks from (docs/metadata-format.md).
pub const MAX_DEPENDENCY_OWNERS: usize = 64;
/// Deepest sealed dependency graph a revision may have (docs/metadata-format.md).
pub const MAX_DEPENDENCY_DEPTH: u32 = 8;
/// The five virtual sections of a workbench (docs/design.md, "Stable Workbench Surface").
pub const SECTIONS: [&str; 5] = ["input", "scripts", "outputs", "logs", "metadata"];
/// Paths owned by commit and restore; generic publication refuses them (docs/metadata-format.md).
pub const RESERVED_PATHS: [&str; 2] = [
    "metadata/run_manifest.json",
    "metadata/restore_manifest.json",
];
/// Content type used when a caller names none for binary bodies.
pub const OCTET_STREAM: &str = "application/octet-stream";

/// The default idle grace of a writer lock shared between processes
/// ([`ClientOptions::writer_idle_release`]): 20 ms.
pub const DEFAULT_WRITER_IDLE_RELEASE: std::time::Duration = std::time::Duration::from_millis(20);

/// Options for [`Client::open_with`].
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Size of new object blocks in bytes (default 4 MiB; 1 KiB ..= 64 MiB).
    pub block_size: usize,
    /// Presentation root for a new store (default `/agents/local/wb`). For an existing store it
    /// must equal the stored one or be `None`.
    pub presentation_root: Option<String>,
    /// Create the store when `dir` holds none (default true). With false, opening a missing
    /// store fails with [`Error::StoreNotFound`] and creates nothing.
    pub create_if_missing: bool,
    /// How long one open or one write waits for another process that holds the store's writer
    /// lock (default 30 s). Past it, [`Error::StoreBusy`].
    pub lock_wait: std::time::Duration,
    /// How this handle holds the writer lock of a store whose metadata is holt (docs/design.md,
    /// "Many processes on one store"). `Some(grace)` (the default,
    /// [`DEFAULT_WRITER_IDLE_RELEASE`] = 20 ms): only while a write runs and for `grace` after
    /// the last one — at once when another process is waiting — so CLI calls, MCP servers,
    /// Python and Rust programs write to one store side by side; each acquisition first catches
    /// up with the commands other processes committed meanwhile and advances the owner epoch
    /// with its first command. Reads of a writer handle catch up the same way. `None`: for the
    /// handle's whole life, as `nokv serve` does (every other writer waits, then
    /// [`Error::StoreBusy`]). Ignored for read-only handles and etcd metadata.
    pub writer_idle_release: Option<std::time::Duration>,
    /// Object provider to use instead of the one the store configuration names (tests: a
    /// fault-injecting or instrumented wrapper around the store's own provider). `None`
    /// (default): the configured provider.
    pub objects: Option<Arc<dyn ObjectStore>>,
    /// Run [`Client::recover_operations`] at open (default true). A non-terminal Publish
    /// operation or revision reservation found at open is orphaned unless another writer process
    /// that may own it is alive (see [`crate::writers`]).
    pub recover_at_open: bool,
    /// Snapshot lease/retention policy: skew grace of the reaper and the diagnostic history
    /// retention (see [`meta::ops::snapshot::SnapshotPolicy`]).
    pub snapshot_policy: meta::ops::snapshot::SnapshotPolicy,
    /// Wall clock of lease deadlines and the reaper (injectable in tests; default the system
    /// clock).
    pub clock: Arc<dyn meta::ops::lease_clock::WallClock>,
    /// Shard-owner lease of a store whose metadata lives in etcd (whole seconds, at least 2;
    /// default 10 s): the open client owns the root's logical shard and renews the lease; a
    /// crashed process's store can be reopened once it lapses.
    pub owner_lease_ttl: std::time::Duration,
    /// The address this process serves the shard at, recorded in its shard-owner record so
    /// clients can find it (`host:port`; empty, the default, for an embedded owner). Only for a
    /// store whose metadata lives in etcd; `nokv serve` sets its listen address.
    pub owner_address: String,
    /// Open the store **read-only** (default false; see [`Client::open_read_only`]): no lock
    /// (the handle shares the store with one writer and any number of other readers), the
    /// state as of the open, nothing written — no owner-epoch advance, no recovery pass, no
    /// reaper, no fdatasync — so it works on a read-only file system and on another user's
    /// readable files. Every write answers [`Error::ReadOnlyStore`]. `create_if_missing`,
    /// `lock_wait`, `recover_at_open` are ignored. On a store whose metadata lives in etcd the
    /// handle takes no shard-owner lease.
    pub read_only: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            block_size: DEFAULT_BLOCK_SIZE,
            presentation_root: None,
            create_if_missing: true,
            lock_wait: std::time::Duration::from_secs(30),
            writer_idle_release: Some(DEFAULT_WRITER_IDLE_RELEASE),
            objects: None,
            recover_at_open: true,
            snapshot_policy: meta::ops::snapshot::SnapshotPolicy::default(),
            clock: Arc::new(meta::ops::lease_clock::SystemWallClock),
            owner_lease_ttl: std::time::Duration::from_secs(10),
            owner_address: String::new(),
            read_only: false,
        }
    }
}

/// The precondition of a whole-body publication. Never an upsert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteCondition {
    /// Create-only: fails with [`Error::AlreadyExists`] when the path holds an artifact.
    Create,
    /// Replace-only: fails with [`Error::NotFound`] when absent and with
    /// [`Error::GenerationConflict`] when the generation moved. `None` uses the generation read
    /// just before publication.
    Replace {
        /// Generation the caller last saw.
        expected_generation: Option<u64>,
    },
}

/// Options of one publication.
#[derive(Debug, Clone)]
pub struct PutOptions {
    /// Media type recorded on the revision (1..=255 bytes).
    pub content_type: String,
    /// Create or replace.
    pub condition: WriteCondition,
    /// Who published it (free text, e.g. `workbench_put_file` or `nokv collect`).
    pub producer: String,
    /// Optional caller-chosen manifest id shown on stat cards.
    pub manifest_id: Option<String>,
    /// Custom typed index fields published with the body (≤64; see [`crate::index_fields`]).
    /// The built-in fields are always indexed. A replacement publishes exactly these fields;
    /// the previous body's fields are not carried over.
    pub index_fields: IndexFields,
    /// Also project the body's top-level JSON scalar members as index fields (the body must be
    /// a JSON object of at most 16 MiB; see [`crate::index_fields::json_object_fields`]).
    /// Fields given in `index_fields` win over same-named members.
    pub index_json: bool,
    /// The body's digest as the caller knows it (`sha256:` + 64 lowercase hex), if any. A body
    /// whose SHA-256 differs is refused before the publication is sealed: the operation aborts,
    /// its staged blocks are deleted and [`Error::DigestMismatch`] is returned — nothing is
    /// published. Checked on the digest the publication computes anyway (no second pass).
    pub expected_digest_uri: Option<String>,
    /// The caller's request id (16 bytes; the CLI takes 32 hex characters): rerunning the same
    /// put with the same id — after a lost reply, a timeout, in this or any later process —
    /// returns the first receipt with [`PutReceipt::idempotent_replay`] set and writes nothing;
    /// the same id with another workbench, path, content type, condition, manifest id, index
    /// fields or body is refused (`Error::Meta(meta::Error::OperationIntentMismatch)`). `None`
    /// (the default) publishes under a fresh id. See docs/design.md, "Request ids of a put".
    pub request_id: Option<[u8; 16]>,
}

impl PutOptions {
    /// Create-only publication with the given content type and producer, no custom index
    /// fields.
    pub fn create(content_type: &str, producer: &str) -> Self {
        Self {
            content_type: content_type.to_string(),
            condition: WriteCondition::Create,
            producer: producer.to_string(),
            manifest_id: None,
            index_fields: IndexFields::new(),
            index_json: false,
            expected_digest_uri: None,
            request_id: None,
        }
    }
}

/// What a successful publication returns.
#[derive(Debug, Clone)]
pub struct PutReceipt {
    /// Workbench-relative path that was published.
    pub path: NormPath,
    /// New generation of the path (the publishing commit version; unique, never reused).
    pub generation: u64,
    /// Body size in bytes.
    pub size_bytes: u64,
    /// `sha256:` URI of the whole body.
    pub digest_uri: String,
    /// Content type recorded.
    pub content_type: String,
    /// True when the path was absent before.
    pub created: bool,
    /// True when this is the stored receipt of an earlier put with the same
    /// [`PutOptions::request_id`] (nothing was written by this call).
    pub idempotent_replay: bool,
}

/// What a successful append returns.
#[derive(Debug, Clone)]
pub struct AppendReceipt {
    /// Workbench-relative path.
    pub path: NormPath,
    /// New generation.
    pub generation: u64,
    /// Bytes appended by this call.
    pub appended_bytes: u64,
    /// New total body size in bytes.
    pub size_bytes: u64,
    /// True when the append created the artifact.
    pub created: bool,
    /// `sha256:` URI of the appended bytes only (the Workbench `digest`).
    pub delta_digest_uri: String,
    /// `sha256:` URI of the complete resulting body.
    pub body_digest_uri: String,
    /// Content type after the append.
    pub content_type: String,
    /// Distinct owner revisions the new body reuses blocks from (≤ 64).
    pub dependency_count: u32,
    /// Sealed dependency depth of the new revision (≤ 8).
    pub dependency_depth: u32,
    /// True when this is the stored receipt of an earlier call with the same operation id
    /// ([`Client::append_idempotent`]); nothing was appended by this call.
    pub idempotent_replay: bool,
}

/// A workbench as the SDK reports it.
#[derive(Debug, Clone)]
pub struct WorkbenchInfo {
    /// External workbench id.
    pub workbench_id: String,
    /// Presentation path `{root}/{id}`.
    pub path: String,
    /// True when this call created it (false: it already existed and was visible).
    pub created: bool,
    /// The visible marker.
    pub workspace: WorkspaceCurrent,
}

/// What one recovery pass did at open or through [`Client::recover_operations`] (see `crate::publication`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoverySummary {
    /// Finalizing operations resumed to Published.
    pub resumed: u64,
    /// Operations aborted (or already aborting) whose objects were all deleted: now Cleaned.
    pub cleaned: u64,
    /// Operations left Quarantined (ambiguous provider outcomes, evidence recorded).
    pub quarantined: u64,
    /// Quarantined operations of an earlier pass reconciled to Cleaned.
    pub reconciled: u64,
    /// Operations still Cleaning (a DELETE failed; the next pass resumes).
    pub pending: u64,
    /// Operations skipped because this handle is still running them.
    pub in_flight: u64,
    /// Revision reservations of an earlier process swept: the objects of their unpublished
    /// revisions deleted, the reservation retired.
    pub swept_reservations: u64,
    /// Other writer processes found alive (docs/design.md, "Many processes on one store"):
    /// when not 0, every operation and reservation this handle does not run was left alone —
    /// it may be theirs — for a pass that finds no other writer.
    pub live_writers: u64,
    /// Per-operation failures (`operation_id: error`), for operations left as they were.
    pub errors: Vec<String>,
}

/// The embedded NoKV client: metadata shard + object provider.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    meta: MetaShard,
    objects: Arc<dyn ObjectStore>,
    block_size: usize,
    /// Publish operations this handle is running (recovery skips them).
    in_flight: Mutex<HashSet<OperationId>>,
    /// Reserved revisions for small puts (`crate::reservations`).
    reservations: ReservationPool,
    /// Outcome of the recovery pass run at open (`None`: disabled).
    open_recovery: Option<std::result::Result<RecoverySummary, String>>,
    snapshot_policy: meta::ops::snapshot::SnapshotPolicy,
    clock: Arc<dyn meta::ops::lease_clock::WallClock>,
    /// The shard-owner lease of an etcd-backed store (released when the last clone drops).
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    ownership: Option<Ownership>,
    /// This writer's registration file, when the store's writer lock is shared between processes
    /// (`crate::writers`); dropped last, after the metadata is closed.
    registration: Option<Registration>,
}

/// The lease type an etcd-backed store's client holds; a build without the `etcd` feature opens
/// holt stores only, so it never holds one.
#[cfg(feature = "etcd")]
pub(crate) type Ownership = crate::control::ShardOwnership;
#[cfg(not(feature = "etcd"))]
pub(crate) type Ownership = std::convert::Infallible;

impl Drop for Inner {
    /// The last clone closing the store warns about failed background checkpoints
    /// (`crate::health`).
    fn drop(&mut self) {
        // Reservations no put is using are retired now (best effort: the sweep at the next
        // open deletes whatever is left, docs/metadata-format.md "Revision reservations").
        if !self.meta.is_read_only() {
            let ids = self.reservations.retirable_at_close();
            for chunk in ids.chunks(8) {
                let _ = meta::ops::publish::operation::retire(&self.meta, chunk);
            }
        }
        crate::health::warn_at_close(&self.meta);
    }
}

impl Client {
    /// Assembles an opened store into a handle (the open paths of `crate::open`): no recovery
    /// result yet, the options' block size, snapshot policy and clock.
    pub(crate) fn from_parts(
        dir: PathBuf,
        meta: MetaShard,
        objects: Arc<dyn ObjectStore>,
        ownership: Option<Ownership>,
        options: &ClientOptions,
    ) -> Client {
        // Deadlines the metadata evaluates (workbench expiry) use the same clock as leases.
        meta.set_wall_clock(options.clock.clone());
        Client {
            inner: Arc::new(Inner {
                dir,
                meta,
                objects,
                block_size: options.block_size,
                in_flight: Mutex::new(HashSet::new()),
                reservations: ReservationPool::default(),
                open_recovery: None,
                snapshot_policy: options.snapshot_policy,
                clock: options.clock.clone(),
                ownership,
                registration: None,
            }),
        }
    }

    /// Records the outcome of the recovery pass run at open (only while the handle is unshared,
    /// before the open returns it).
    pub(crate) fn set_open_recovery(
        &mut self,
        outcome: std::result::Result<RecoverySummary, String>,
    ) {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.open_recovery = Some(outcome);
        }
    }

    /// Registers this handle's writer registration (only while the handle is unshared, before the
    /// open returns it).
    pub(crate) fn set_registration(&mut self, registration: Registration) {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.registration = Some(registration);
        }
    }

    /// How many other writer processes of this store are alive (`crate::writers`); 0 when the
    /// writer lock is not shared.
    pub(crate) fn other_writers_alive(&self) -> u64 {
        self.inner
            .registration
            .as_ref()
            .map_or(0, Registration::others_alive)
    }

    /// True for a client opened read-only ([`ClientOptions::read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.inner.meta.is_read_only()
    }

    /// What the recovery pass at open did (`None` when [`ClientOptions::recover_at_open`] was
    /// false or the client is read-only); `Err` carries the message of a pass that could not
    /// read the operation list.
    pub fn open_recovery(&self) -> Option<&std::result::Result<RecoverySummary, String>> {
        self.inner.open_recovery.as_ref()
    }

    /// Publish operations this handle is running.
    pub(crate) fn in_flight(&self) -> &Mutex<HashSet<OperationId>> {
        &self.inner.in_flight
    }

    /// The handle's reserved revisions.
    pub(crate) fn reservations(&self) -> &ReservationPool {
        &self.inner.reservations
    }

    /// The snapshot lease/retention policy this client was opened with.
    pub fn snapshot_policy(&self) -> &meta::ops::snapshot::SnapshotPolicy {
        &self.inner.snapshot_policy
    }

    /// The wall clock of lease deadlines, Unix milliseconds (injected through
    /// [`ClientOptions::clock`]).
    pub fn now_unix_ms(&self) -> u64 {
        self.inner.clock.now_unix_ms()
    }

    /// The shard-owner lease this client holds on an etcd-backed store's logical shard (`None`
    /// for an embedded holt store).
    #[cfg(feature = "etcd")]
    pub fn ownership(&self) -> Option<&crate::control::ShardOwnership> {
        self.inner.ownership.as_ref()
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The metadata shard (schema-8 semantics over holt).
    pub fn meta(&self) -> &MetaShard {
        &self.inner.meta
    }

    /// The object provider holding the blocks.
    pub fn objects(&self) -> &Arc<dyn ObjectStore> {
        &self.inner.objects
    }

    /// Block size of new bodies in bytes.
    pub fn block_size(&self) -> usize {
        self.inner.block_size
    }

    /// The store's durable presentation root (e.g. `/agents/local/wb`).
    pub fn presentation_root(&self) -> &str {
        self.inner.meta.presentation_root()
    }

    /// Presentation path of a workbench: `{root}/{id}`.
    pub fn workbench_path(&self, workbench_id: &str) -> String {
        format!("{}/{}", self.presentation_root(), workbench_id)
    }

    /// Creates a workbench, or returns the existing visible one (idempotent).
    ///
    /// Errors: [`Error::InvalidArgument`] for an invalid id; [`Error::WorkbenchUnavailable`] when
    /// the name is held by a staging or retired incarnation.
    pub fn create_workbench(&self, workbench_id: &str) -> Result<WorkbenchInfo> {
        meta::validate_workbench_id(workbench_id).map_err(|e| match e {
            meta::Error::InvalidArgument(msg) => Error::InvalidArgument(msg),
            other => Error::InvalidArgument(other.to_string()),
        })?;
        let outcome = self
            .inner
            .meta
            .create_workspace(workbench_id)
            .map_err(|e| match e {
                // A staging (restore) or retired incarnation holds the name.
                meta::Error::WorkspaceUnavailable { .. } => Error::WorkbenchUnavailable {
                    workbench_id: workbench_id.to_string(),
                },
                other => Error::from(other),
            })?;
        Ok(WorkbenchInfo {
            workbench_id: workbench_id.to_string(),
            path: self.workbench_path(workbench_id),
            created: outcome.created,
            workspace: outcome.workspace,
        })
    }

    /// Normalizes a workbench-relative path (section included, e.g. `input/data.csv`) with the one
    /// shared normalizer.
    ///
    /// The limits leave room for the section: a path of at most 4096 bytes / 64 components below
    /// its section (docs/metadata-format.md normalizer rules otherwise unchanged).
    pub fn normalize(path: &str) -> Result<NormPath> {
        meta::path::normalize_stored(path).map_err(|e| Error::InvalidPath {
            path: path.to_string(),
            reason: e.to_string(),
        })
    }

    pub(crate) fn publishable_path(&self, path: &str) -> Result<NormPath> {
        let norm = Self::normalize(path)?;
        if meta::ops::publish::is_reserved(&norm) {
            return Err(Error::InvalidPath {
                path: path.to_string(),
                reason: "this path is owned by commit/restore (or lies below a path that is) and cannot be written directly"
                    .into(),
            });
        }
        if norm.len_components() == 1 && SECTIONS.contains(&norm.as_str()) {
            return Err(Error::InvalidPath {
                path: path.to_string(),
                reason: "a section name cannot be shadowed by a file".into(),
            });
        }
        Ok(norm)
    }
}

/// A content type is 1..=255 bytes of printable ASCII (no control characters such as CR/LF).
pub(crate) fn validate_content_type(ct: &str) -> Result<()> {
    if ct.is_empty() || ct.len() > 255 || !ct.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(Error::InvalidArgument(
            "content_type must be 1..=255 printable ASCII characters".into(),
        ));
    }
    Ok(())
}

pub fn map_workspace_error(err: meta::Error, workbench_id: &str) -> Error {
    match err {
        meta::Error::WorkspaceNotFound { .. } => Error::WorkbenchNotFound {
            workbench_id: workbench_id.to_string(),
        },
        other => Error::from(other),
    }
}

/// Maps a refusal of the namespace rule (a path is a file or a directory, never both) to the
/// SDK's typed errors: a create over a directory is [`Error::DirectoryExists`], a replace or
/// append of one [`Error::NotArtifact`], any write below a file [`Error::NotDirectory`].
/// Other errors are returned unchanged.
pub(crate) fn map_namespace_error(
    err: meta::Error,
    path: &NormPath,
    condition: PathCondition,
) -> std::result::Result<Error, meta::Error> {
    let path = path.as_str().to_string();
    match err {
        meta::Error::PathIsDirectory if condition == PathCondition::Create => {
            Ok(Error::DirectoryExists { path })
        }
        meta::Error::PathIsDirectory => Ok(Error::NotArtifact { path }),
        meta::Error::AncestorIsFile { file } => Ok(Error::NotDirectory { path, file }),
        other => Err(other),
    }
}

/// Maps a publication refusal of the metadata layer to the SDK's typed errors.
pub(crate) fn map_publish_error(
    err: meta::Error,
    path: &NormPath,
    workbench_id: &str,
    condition: PathCondition,
) -> Error {
    let err = match map_namespace_error(err, path, condition) {
        Ok(mapped) => return mapped,
        Err(other) => other,
    };
    match err {
        meta::Error::WorkspaceNotFound { .. } => Error::WorkbenchNotFound {
            workbench_id: workbench_id.to_string(),
        },
        meta::Error::PathAlreadyExists => Error::AlreadyExists {
            path: path.as_str().to_string(),
        },
        meta::Error::PathNotFound => Error::NotFound {
            path: path.as_str().to_string(),
        },
        meta::Error::GenerationConflict { expected, actual } => Error::GenerationConflict {
            path: path.as_str().to_string(),
            expected: (expected != 0).then_some(expected),
            actual: (actual != 0).then_some(actual),
        },
        meta::Error::ReadVersionConflict { .. } => Error::Busy,
        other => Error::from(other),
    }
}
