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

use std::collections::{BTreeSet, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use meta::{
    ArtifactRevisionId, ManifestRow, MetaShard, NormPath, OperationId, PathCondition, PathEntry,
    Reader, WorkspaceCurrent,
};
use objstore::ObjectStore;

use crate::error::{Error, Result};
use crate::index_fields::{json_object_fields, IndexFields, MAX_INDEX_JSON_BYTES};
use crate::publication::{BodyPlan, OpSpec, RecoverySummary, Source};

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
    /// How long to wait for another process that holds the store's lock (default 30 s; one
    /// process owns a store at a time). Past it, [`Error::StoreBusy`].
    pub lock_wait: std::time::Duration,
    /// Object provider to use instead of the one the store configuration names (tests: a
    /// fault-injecting or instrumented wrapper around the store's own provider). `None`
    /// (default): the configured provider.
    pub objects: Option<Arc<dyn ObjectStore>>,
    /// Run [`Client::recover_operations`] at open (default true). Every non-terminal Publish
    /// operation found at open is orphaned: the holt database is held by one process at a time.
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
    /// Outcome of the recovery pass run at open (`None`: disabled).
    open_recovery: Option<std::result::Result<RecoverySummary, String>>,
    snapshot_policy: meta::ops::snapshot::SnapshotPolicy,
    clock: Arc<dyn meta::ops::lease_clock::WallClock>,
    /// The shard-owner lease of an etcd-backed store (released when the last clone drops).
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    ownership: Option<Ownership>,
}

/// The lease type an etcd-backed store's client holds; a build without the `etcd` feature opens
/// holt stores only, so it never holds one.
#[cfg(feature = "etcd")]
type Ownership = crate::control::ShardOwnership;
#[cfg(not(feature = "etcd"))]
type Ownership = std::convert::Infallible;

impl Drop for Inner {
    /// The last clone closing the store warns about failed background checkpoints
    /// (`crate::lifetime::health`).
    fn drop(&mut self) {
        crate::lifetime::health::warn_at_close(&self.meta);
    }
}

impl Client {
    /// Opens (creating when missing) the embedded store in `dir` with default options.
    ///
    /// Errors: [`Error::Meta`] when the schema gate refuses the store (wrong marker, registry or
    /// presentation root) or its files are damaged; [`Error::StoreBusy`] when another process
    /// kept the store locked for the whole lock wait; [`Error::LocalIo`] when the directory cannot
    /// be created.
    pub fn open(dir: impl AsRef<Path>) -> Result<Client> {
        Self::open_with(dir, ClientOptions::default())
    }

    /// Opens the existing embedded store in `dir` read-only with default options (see
    /// [`ClientOptions::read_only`]): the metadata as of this call through
    /// `meta::MetaShard::open_read_only`, the object provider opened without creating or syncing
    /// anything (an S3 store is read without its local block cache). Reads work exactly as on a
    /// writer handle; every write answers [`Error::ReadOnlyStore`] and writes nothing.
    ///
    /// Errors: [`Error::StoreNotFound`] when `dir` holds no store (nothing is created);
    /// [`Error::Meta`] when the schema gate refuses the store or its files are damaged or
    /// unreadable; [`Error::StoreConfig`] / [`Error::NamespaceMismatch`] for the object
    /// configuration.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Client> {
        Self::open_with(
            dir,
            ClientOptions {
                read_only: true,
                ..ClientOptions::default()
            },
        )
    }

    /// Opens the embedded store in `dir` with explicit options.
    ///
    /// A writer open (the default) takes the store's lock; an existing store is not written by
    /// the open itself — the owner epoch advances right before the first write of this handle —
    /// except by the recovery pass and the snapshot reaper, which write only when they find
    /// work. A store whose files cannot be written (read-only file system, another user's files)
    /// answers [`Error::ReadOnlyStore`]; open it with [`ClientOptions::read_only`] to read it.
    pub fn open_with(dir: impl AsRef<Path>, options: ClientOptions) -> Result<Client> {
        let dir = dir.as_ref().to_path_buf();
        if !(1024..=64 * 1024 * 1024).contains(&options.block_size) {
            return Err(Error::InvalidArgument(format!(
                "block size {} is outside 1 KiB ..= 64 MiB",
                options.block_size
            )));
        }
        if options.read_only {
            return Self::open_read_only_with(dir, options);
        }
        let store_config = crate::store_config::StoreConfig::load(&dir)?;
        let etcd_metadata = store_config
            .as_ref()
            .map(|c| &c.metadata)
            .filter(|m| !m.is_holt());
        // Missing metadata beside objects is lost metadata (the holt open below refuses it as
        // damaged), never "no store".
        if !options.create_if_missing
            && etcd_metadata.is_none()
            && !dir.join("meta").is_dir()
            && !holds_objects(&dir.join("objects"))
        {
            return Err(Error::StoreNotFound);
        }
        std::fs::create_dir_all(&dir).map_err(|source| store_dir_error(&dir, source))?;
        let deadline = std::time::Instant::now() + options.lock_wait;
        let mut backoff = std::time::Duration::from_millis(2);
        let (meta, ownership) = if let Some(metadata) = etcd_metadata {
            #[cfg(not(feature = "etcd"))]
            {
                let _ = metadata;
                return Err(crate::store_config::etcd_unsupported());
            }
            #[cfg(feature = "etcd")]
            let (meta, ownership) = crate::control::embedded::open_shard(
                metadata,
                meta::OpenOptions {
                    presentation_root: options.presentation_root.clone(),
                    // Long-running writers keep their MVCC history bounded between reaper runs.
                    history_policy: Some(options.snapshot_policy),
                    ..Default::default()
                },
                options.lock_wait,
                options.owner_lease_ttl,
                &options.owner_address,
            )?;
            #[cfg(feature = "etcd")]
            (meta, Some(ownership))
        } else {
            (
                Self::open_holt_meta(&dir, &options, deadline, &mut backoff)?,
                None,
            )
        };
        // Provider from the persisted store configuration (LocalDir at <store>/objects when the
        // store has none; S3 behind the block cache otherwise, namespace marker checked).
        let objects: Arc<dyn ObjectStore> = match &options.objects {
            Some(objects) => objects.clone(),
            None => crate::store_config::open_objects(&dir, store_config.as_ref())?,
        };
        let mut client = Client {
            inner: Arc::new(Inner {
                dir,
                meta,
                objects,
                block_size: options.block_size,
                in_flight: Mutex::new(HashSet::new()),
                open_recovery: None,
                snapshot_policy: options.snapshot_policy,
                clock: options.clock,
                ownership,
            }),
        };
        if options.recover_at_open {
            // Orphans are recovered before the handle is used; a failure (e.g. the provider is
            // unreachable) leaves them for the next pass and never blocks reads.
            let outcome = client.recover_operations().map_err(|e| e.to_string());
            if let Some(inner) = Arc::get_mut(&mut client.inner) {
                inner.open_recovery = Some(outcome);
            }
        }
        // The snapshot reaper runs at every writer open (best effort; see crate::snapshot).
        let _ = client.reap_snapshots();
        Ok(client)
    }

    /// Opens the holt metadata in `<dir>/meta`, waiting out another process's lock.
    fn open_holt_meta(
        dir: &Path,
        options: &ClientOptions,
        deadline: std::time::Instant,
        backoff: &mut std::time::Duration,
    ) -> Result<MetaShard> {
        // Objects are only ever written after the metadata was initialized: empty metadata
        // beside objects is lost metadata, never a new store.
        let require_initialized = holds_objects(&dir.join("objects"));
        let meta = loop {
            let opened = MetaShard::open(
                dir.join("meta"),
                meta::OpenOptions {
                    presentation_root: options.presentation_root.clone(),
                    // Long-running writers keep their MVCC history bounded between reaper runs.
                    history_policy: Some(options.snapshot_policy),
                    require_initialized,
                    ..Default::default()
                },
            );
            match opened {
                Err(meta::Error::Storage(holt::Error::Locked { .. })) => {
                    // A running server holds the lock for as long as it runs: say where it
                    // serves instead of waiting for it.
                    if let Some(url) = crate::address::serving(dir) {
                        return Err(Error::StoreServed { url });
                    }
                    if std::time::Instant::now() >= deadline {
                        return Err(Error::StoreBusy);
                    }
                    std::thread::sleep(*backoff);
                    *backoff = (*backoff * 2).min(std::time::Duration::from_millis(100));
                }
                Err(meta::Error::Storage(holt::Error::Io { source, .. }))
                    if not_writable(&source).is_some() =>
                {
                    return Err(Error::ReadOnlyStore {
                        reason: not_writable(&source).unwrap_or_default().into(),
                    });
                }
                other => break other?,
            }
        };
        Ok(meta)
    }

    /// [`Client::open_with`] for [`ClientOptions::read_only`].
    fn open_read_only_with(dir: PathBuf, options: ClientOptions) -> Result<Client> {
        let store_config = crate::store_config::StoreConfig::load(&dir)?;
        // As for a writer: empty or missing metadata beside objects is lost metadata.
        let require_initialized = holds_objects(&dir.join("objects"));
        let open = meta::OpenOptions {
            presentation_root: options.presentation_root.clone(),
            require_initialized,
            ..Default::default()
        };
        let meta = match store_config.as_ref().map(|c| &c.metadata) {
            #[cfg(feature = "etcd")]
            Some(metadata) if !metadata.is_holt() => {
                crate::control::embedded::open_shard_read_only(metadata, open)?
            }
            #[cfg(not(feature = "etcd"))]
            Some(metadata) if !metadata.is_holt() => {
                return Err(crate::store_config::etcd_unsupported())
            }
            _ => {
                if !dir.join("meta").is_dir() && !require_initialized {
                    return Err(Error::StoreNotFound);
                }
                MetaShard::open_read_only(dir.join("meta"), open)?
            }
        };
        let objects: Arc<dyn ObjectStore> = match &options.objects {
            Some(objects) => objects.clone(),
            None => crate::store_config::open_objects_read_only(&dir, store_config.as_ref())?,
        };
        Ok(Client {
            inner: Arc::new(Inner {
                dir,
                meta,
                objects,
                block_size: options.block_size,
                in_flight: Mutex::new(HashSet::new()),
                open_recovery: None,
                snapshot_policy: options.snapshot_policy,
                clock: options.clock,
                ownership: None,
            }),
        })
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

    /// Publishes a whole body held in memory. See [`Client::put_reader`].
    pub fn put(
        &self,
        workbench_id: &str,
        path: &str,
        body: &[u8],
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        self.put_source(workbench_id, path, Source::Slice(body), options)
    }

    /// Publishes a body streamed from `reader` (memory bounded by one block; with
    /// `index_json` the body is buffered, at most 16 MiB).
    ///
    /// The precondition and the index fields are checked before any byte is uploaded and again,
    /// atomically, by the publishing metadata command, which also writes the artifact's
    /// SecondaryIndex rows. Errors: [`Error::WorkbenchNotFound`], [`Error::AlreadyExists`],
    /// [`Error::NotFound`], [`Error::GenerationConflict`], [`Error::DirectoryExists`] (create)
    /// or [`Error::NotArtifact`] (replace) when the path is an implicit directory,
    /// [`Error::NotDirectory`] when a proper prefix of the path is a file (a path is a file or a
    /// directory, never both), [`Error::InvalidPath`] (also for the
    /// reserved run/restore manifests, paths below them, and paths that would shadow a section),
    /// [`Error::InvalidArgument`] for invalid index fields or an `index_json` body that is not a
    /// JSON object (or is larger than 16 MiB), [`Error::ObjectUnavailable`], [`Error::LocalIo`]
    /// when the reader fails.
    pub fn put_reader(
        &self,
        workbench_id: &str,
        path: &str,
        mut reader: impl Read,
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        self.put_source(workbench_id, path, Source::Reader(&mut reader), options)
    }

    /// [`Client::put`] / [`Client::put_reader`]: a body in memory stages up to 100 block rows
    /// per metadata command; a stream stages one block at a time.
    fn put_source(
        &self,
        workbench_id: &str,
        path: &str,
        mut source: Source<'_>,
        options: &PutOptions,
    ) -> Result<PutReceipt> {
        let path = self.publishable_path(path)?;
        validate_content_type(&options.content_type)?;
        let mut index_fields = options.index_fields.clone();
        let buffered = if options.index_json {
            let body = match source {
                Source::Slice(bytes) => {
                    if bytes.len() > MAX_INDEX_JSON_BYTES {
                        return Err(Error::InvalidArgument(format!(
                            "index_json bodies are at most {MAX_INDEX_JSON_BYTES} bytes; publish larger bodies with explicit index_fields"
                        )));
                    }
                    bytes.to_vec()
                }
                Source::Reader(ref mut reader) => read_capped(*reader, MAX_INDEX_JSON_BYTES)?,
            };
            for (field, value) in json_object_fields(&body)? {
                index_fields.entry(field).or_insert(value);
            }
            Some(body)
        } else {
            None
        };
        meta::index::projection::validate_index_fields(&index_fields)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let read = self.inner.meta.read();
        let ws = read
            .visible_workspace(workbench_id)
            .map_err(|e| map_workspace_error(e, workbench_id))?;
        let current = read.path_entry(&ws.incarnation, &path)?;
        if current.is_none() {
            // The namespace rule, checked before any byte is uploaded (the publishing command
            // repeats it atomically).
            let wanted = match options.condition {
                WriteCondition::Create => PathCondition::Create,
                WriteCondition::Replace { .. } => PathCondition::Replace {
                    expected_generation: 0,
                },
            };
            read.check_creatable(&ws.incarnation, &path)
                .map_err(|e| map_publish_error(e, &path, workbench_id, wanted))?;
        }
        let condition = match (options.condition, &current) {
            (WriteCondition::Create, Some(_)) => {
                return Err(Error::AlreadyExists {
                    path: path.as_str().to_string(),
                })
            }
            (WriteCondition::Create, None) => PathCondition::Create,
            (WriteCondition::Replace { .. }, None) => {
                return Err(Error::NotFound {
                    path: path.as_str().to_string(),
                })
            }
            (
                WriteCondition::Replace {
                    expected_generation,
                },
                Some(entry),
            ) => {
                let expected = expected_generation.unwrap_or(entry.generation);
                if expected != entry.generation {
                    return Err(Error::GenerationConflict {
                        path: path.as_str().to_string(),
                        expected: Some(expected),
                        actual: Some(entry.generation),
                    });
                }
                PathCondition::Replace {
                    expected_generation: expected,
                }
            }
        };
        drop(read);
        let revision_id = ArtifactRevisionId::random()?;
        let plan = BodyPlan {
            op: OpSpec::fresh(workbench_id, &path)?,
            workbench_id: workbench_id.to_string(),
            path: path.clone(),
            condition,
            revision_id,
            base: None,
            dependency_depth: 0,
            content_type: options.content_type.clone(),
            producer: options.producer.clone(),
            manifest_id: options.manifest_id.clone(),
            index_fields,
            hasher: objstore::Sha256Stream::new(),
            expected_digest_uri: options.expected_digest_uri.clone(),
        };
        let published = match &buffered {
            Some(body) => self.publish_body(plan, Source::Slice(body))?,
            None => self.publish_body(plan, source)?,
        };
        let receipt = published.receipt;
        Ok(PutReceipt {
            path,
            generation: receipt.generation,
            size_bytes: receipt.entry.logical_size,
            digest_uri: receipt.entry.body_digest_uri.clone(),
            content_type: options.content_type.clone(),
            created: receipt.created,
        })
    }

    /// Appends `bytes` to the artifact at `path`, creating it when missing.
    ///
    /// The new revision reuses the base revision's blocks (immutable segments) and adds blocks for
    /// the appended bytes only; it is published under a generation CAS, retried a bounded number
    /// of times when another writer moved the path. When the reuse would exceed 64 distinct owner
    /// revisions or a dependency depth of 8, the whole body is rematerialised under the new
    /// revision with zero dependencies (docs/metadata-format.md, "Upload And Append").
    ///
    /// `content_type`: `None` keeps the existing type (or `text/plain; charset=utf-8` on create).
    ///
    /// Errors: [`Error::WorkbenchNotFound`], [`Error::NotArtifact`] when the path is an implicit
    /// directory, [`Error::NotDirectory`] when a proper prefix of it is a file,
    /// [`Error::GenerationConflict`] after the bounded retries, [`Error::InvalidPath`],
    /// [`Error::InvalidArgument`], [`Error::ObjectUnavailable`].
    pub fn append(
        &self,
        workbench_id: &str,
        path: &str,
        bytes: &[u8],
        content_type: Option<&str>,
        producer: &str,
    ) -> Result<AppendReceipt> {
        self.append_with_create_type(
            workbench_id,
            path,
            bytes,
            content_type,
            crate::workbench::payload::TEXT_CONTENT_TYPE,
            producer,
        )
    }

    /// Like [`Client::append`], but `create_type` is the content type used when the append
    /// creates the artifact and `content_type` is `None` (the Workbench facade passes the
    /// payload's default: text or `application/octet-stream`). Decided inside the same read as
    /// the append itself, so no extra lookup is needed.
    pub fn append_with_create_type(
        &self,
        workbench_id: &str,
        path: &str,
        bytes: &[u8],
        content_type: Option<&str>,
        create_type: &str,
        producer: &str,
    ) -> Result<AppendReceipt> {
        let path = self.publishable_path(path)?;
        if let Some(ct) = content_type {
            validate_content_type(ct)?;
        }
        let delta_digest_uri = objstore::sha256_uri(bytes);
        const ATTEMPTS: usize = 8;
        let mut last_conflict = None;
        for _ in 0..ATTEMPTS {
            match self.append_once(
                workbench_id,
                &path,
                bytes,
                content_type,
                create_type,
                producer,
                OpSpec::fresh(workbench_id, &path)?,
            ) {
                Ok(receipt) => {
                    return Ok(AppendReceipt {
                        delta_digest_uri,
                        ..receipt
                    })
                }
                Err(err @ Error::GenerationConflict { .. }) => last_conflict = Some(err),
                Err(err) => return Err(err),
            }
        }
        Err(last_conflict.unwrap_or(Error::Busy))
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn append_once(
        &self,
        workbench_id: &str,
        path: &NormPath,
        bytes: &[u8],
        content_type: Option<&str>,
        create_type: &str,
        producer: &str,
        op: OpSpec,
    ) -> Result<AppendReceipt> {
        let read = self.inner.meta.read();
        let ws = read
            .visible_workspace(workbench_id)
            .map_err(|e| map_workspace_error(e, workbench_id))?;
        let base = read.path_entry(&ws.incarnation, path)?;
        if base.is_none() {
            // The namespace rule, checked before any byte is uploaded (the publishing command
            // repeats it atomically).
            let append = PathCondition::Append {
                expected_generation: None,
            };
            read.check_creatable(&ws.incarnation, path)
                .map_err(|e| map_publish_error(e, path, workbench_id, append))?;
        }
        let revision_id = ArtifactRevisionId::random()?;
        // An append extends the same artifact: its custom index fields carry over.
        let index_fields = match &base {
            Some(entry) => meta::index::projection::decode_projection(&entry.index_projection)?,
            None => IndexFields::new(),
        };
        let mut plan = BodyPlan {
            op,
            workbench_id: workbench_id.to_string(),
            path: path.clone(),
            condition: PathCondition::Append {
                expected_generation: None,
            },
            revision_id,
            base: None,
            dependency_depth: 0,
            content_type: content_type.unwrap_or(create_type).to_string(),
            producer: producer.to_string(),
            manifest_id: None,
            index_fields,
            hasher: objstore::Sha256Stream::new(),
            expected_digest_uri: None,
        };
        let published = match &base {
            None => {
                drop(read);
                self.publish_body(plan, Source::Slice(bytes))?
            }
            Some(entry) => {
                let base_rows = read.manifest(&entry.artifact_revision_id)?;
                plan.content_type = content_type.unwrap_or(&entry.content_type).to_string();
                plan.condition = PathCondition::Append {
                    expected_generation: Some(entry.generation),
                };
                // Distinct physical owners and the depth the new revision would have.
                let mut owners: BTreeSet<ArtifactRevisionId> = BTreeSet::new();
                for row in &base_rows {
                    owners.insert(row.physical_owner_revision);
                }
                let mut max_owner_depth = 0u32;
                for owner in &owners {
                    let rev = read.revision(owner)?.ok_or_else(|| {
                        Error::ObjectUnavailable(
                            "a base revision of the artifact is missing".into(),
                        )
                    })?;
                    max_owner_depth = max_owner_depth.max(rev.dependency_depth);
                }
                drop(read);
                let depth = if owners.is_empty() {
                    0
                } else {
                    max_owner_depth + 1
                };
                let over_limit =
                    owners.len() > MAX_DEPENDENCY_OWNERS || depth > MAX_DEPENDENCY_DEPTH;
                if over_limit {
                    // Rematerialise: copy the whole base body plus the delta under the new
                    // revision (streamed block by block, each staged before it is sent).
                    let base_body = self.read_rows(&base_rows, 0, entry.logical_size)?;
                    let mut chained = std::io::Read::chain(&base_body[..], bytes);
                    self.publish_body(plan, Source::Reader(&mut chained))?
                } else {
                    // Whole-body digest: hash the base body (verified block by block) plus the
                    // delta (O(body) per append; see the crate docs).
                    for row in &base_rows {
                        let block = objstore::get_verified(
                            self.inner.objects.as_ref(),
                            &row.object_key,
                            row.length,
                            &row.digest_uri,
                        )?;
                        plan.hasher.update(&block);
                    }
                    plan.base = Some(meta::codec::PublishBase {
                        revision: entry.artifact_revision_id,
                        row_count: base_rows.len() as u64,
                        logical_size: entry.logical_size,
                    });
                    plan.dependency_depth = depth;
                    self.publish_body(plan, Source::Slice(bytes))?
                }
            }
        };
        let receipt = published.receipt;
        Ok(AppendReceipt {
            path: path.clone(),
            generation: receipt.generation,
            appended_bytes: bytes.len() as u64,
            size_bytes: receipt.entry.logical_size,
            created: base.is_none(),
            delta_digest_uri: String::new(),
            body_digest_uri: receipt.entry.body_digest_uri.clone(),
            content_type: receipt.entry.content_type.clone(),
            dependency_count: receipt.entry.dependency_count,
            dependency_depth: receipt.entry.dependency_depth,
            idempotent_replay: false,
        })
    }

    /// Reads `[offset, offset + len)` of a published body, touching only the blocks it needs and
    /// verifying each block's SHA-256 before returning any of its bytes.
    ///
    /// Errors: [`Error::RangeOutOfBounds`] when the range exceeds the body;
    /// [`Error::ObjectUnavailable`] when a block is missing or corrupt.
    pub fn read_entry_range(
        &self,
        reader: &Reader,
        entry: &PathEntry,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>> {
        let end = offset.checked_add(len).ok_or(Error::RangeOutOfBounds {
            offset,
            len,
            size: entry.logical_size,
        })?;
        if end > entry.logical_size {
            return Err(Error::RangeOutOfBounds {
                offset,
                len,
                size: entry.logical_size,
            });
        }
        let rows = reader.manifest(&entry.artifact_revision_id)?;
        self.read_rows(&rows, offset, len)
    }

    /// Reads a whole published body (verified).
    pub fn read_entry(&self, reader: &Reader, entry: &PathEntry) -> Result<Vec<u8>> {
        self.read_entry_range(reader, entry, 0, entry.logical_size)
    }

    /// Reads a byte range of the artifact at `path` in the live state.
    pub fn read_range(
        &self,
        workbench_id: &str,
        path: &str,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>> {
        let (read, entry) = self.lookup(workbench_id, path)?;
        self.read_entry_range(&read, &entry, offset, len)
    }

    /// Reads the whole artifact at `path` in the live state.
    pub fn read_all(&self, workbench_id: &str, path: &str) -> Result<Vec<u8>> {
        let (read, entry) = self.lookup(workbench_id, path)?;
        self.read_entry(&read, &entry)
    }

    /// The path entry (generation, size, digest, content type …) at `path`, live state.
    pub fn stat(&self, workbench_id: &str, path: &str) -> Result<PathEntry> {
        Ok(self.lookup(workbench_id, path)?.1)
    }

    /// Streams a published body into `out`, verifying every block; returns bytes written.
    pub fn read_to_writer(
        &self,
        reader: &Reader,
        entry: &PathEntry,
        out: &mut dyn std::io::Write,
        on_progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        let rows = reader.manifest(&entry.artifact_revision_id)?;
        let mut written = 0u64;
        for row in &rows {
            let block = objstore::get_verified(
                self.inner.objects.as_ref(),
                &row.object_key,
                row.length,
                &row.digest_uri,
            )?;
            out.write_all(&block).map_err(|source| Error::LocalIo {
                op: "write",
                path: PathBuf::from("<output>"),
                source,
            })?;
            written += row.length;
            on_progress(written);
        }
        Ok(written)
    }

    fn lookup(&self, workbench_id: &str, path: &str) -> Result<(Reader, PathEntry)> {
        let path = Self::normalize(path)?;
        let read = self.inner.meta.read();
        let ws = read
            .visible_workspace(workbench_id)
            .map_err(|e| map_workspace_error(e, workbench_id))?;
        let entry = read
            .path_entry(&ws.incarnation, &path)?
            .ok_or_else(|| Error::NotFound {
                path: path.as_str().to_string(),
            })?;
        Ok((read, entry))
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

    fn read_rows(&self, rows: &[ManifestRow], offset: u64, len: u64) -> Result<Vec<u8>> {
        let end = offset + len;
        let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0).min(1 << 26));
        for row in rows {
            let row_end = row.logical_offset + row.length;
            if row_end <= offset || row.logical_offset >= end {
                continue;
            }
            // Rows always cover one whole block object (object_offset 0, length = object size),
            // so the recorded digest verifies exactly the bytes we slice from.
            let block = objstore::get_verified(
                self.inner.objects.as_ref(),
                &row.object_key,
                row.length,
                &row.digest_uri,
            )?;
            let from = offset.max(row.logical_offset) - row.logical_offset;
            let to = end.min(row_end) - row.logical_offset;
            let slice = block.get(from as usize..to as usize).ok_or_else(|| {
                Error::ObjectUnavailable("a block is shorter than recorded".into())
            })?;
            out.extend_from_slice(slice);
        }
        if out.len() as u64 != len {
            return Err(Error::ObjectUnavailable(
                "the manifest does not cover the requested range".into(),
            ));
        }
        Ok(out)
    }
}

/// The error of creating the store directory `dir`: a location that is (or lies under) a
/// regular file is `InvalidArgument` (a wrong `--store`, not a failure of NoKV); no write
/// permission or a read-only file system is `ReadOnlyStore`; anything else `LocalIo`.
pub(crate) fn store_dir_error(dir: &Path, source: std::io::Error) -> Error {
    use std::io::ErrorKind;
    if let Some(reason) = not_writable(&source) {
        return Error::ReadOnlyStore {
            reason: reason.into(),
        };
    }
    match source.kind() {
        ErrorKind::AlreadyExists | ErrorKind::NotADirectory => Error::InvalidArgument(
            "the store location is not a directory (it is, or lies under, a regular file); \
             choose a directory"
                .into(),
        ),
        _ => Error::LocalIo {
            op: "create store directory",
            path: dir.to_path_buf(),
            source,
        },
    }
}

/// Why an I/O error means the store cannot be written by this process: `Some("read-only file
/// system")` for `EROFS`, `Some("no write permission")` for `EACCES`/`EPERM`, `None` otherwise.
pub(crate) fn not_writable(e: &std::io::Error) -> Option<&'static str> {
    match e.kind() {
        std::io::ErrorKind::ReadOnlyFilesystem => Some("read-only file system"),
        std::io::ErrorKind::PermissionDenied => Some("no write permission"),
        _ => None,
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

/// Reads the whole of `reader`, refusing more than `max` bytes with [`Error::InvalidArgument`].
fn read_capped(reader: &mut dyn Read, max: usize) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    reader
        .take(max as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|source| Error::LocalIo {
            op: "read body",
            path: PathBuf::from("<input>"),
            source,
        })?;
    if body.len() > max {
        return Err(Error::InvalidArgument(format!(
            "index_json bodies are at most {max} bytes; publish larger bodies with explicit index_fields"
        )));
    }
    Ok(body)
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

/// Whether the local object directory `objects` holds any object other than the namespace
/// marker `nokv init` writes before the metadata exists (at most two short `read_dir` steps; a
/// missing or unreadable directory counts as empty). Objects are published only after the
/// metadata was initialized, so one there means the store existed.
fn holds_objects(objects: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(objects) else {
        return false;
    };
    for entry in entries.flatten() {
        if entry.file_name() != "nokv" {
            return true;
        }
        let Ok(inner) = std::fs::read_dir(entry.path()) else {
            return true;
        };
        if inner.flatten().any(|e| e.file_name() != "namespace.json") {
            return true;
        }
    }
    false
}
