//! [`MetaShard`], the handle on one logical-shard metadata store: its parts (engine, fence,
//! sequencer lock, owner state), opening it on holt or etcd as a writer or read-only, and its
//! reads. Its writes go through the command sequencer (`sequencer.rs`).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::owner::{Owner, OwnerState};
use super::snapshot_policy::SnapshotPolicy;
use crate::clock::{SystemWallClock, WallClock};
use crate::codec::system::{RecoveryTail, KEY_RECOVERY_TAIL};
use crate::codec::{RootActivationState, RootFence, RootPlacement};
use crate::command::ShardFence;
use crate::error::Result;
use crate::family::Family;
use crate::ids::{LogicalShardId, RootId};
use crate::outbox::{ChainPoints, OutboxSummary, RetentionPolicy};
use crate::read::Reader;
use crate::schema::{open_gate, read_only_gate};
use crate::store::{ShardStore, Snapshot, TxnStore};

/// Options for [`MetaShard::open`] and [`MetaShard::open_read_only`].
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Presentation root to require (existing store) or record (new store). `None`: use the
    /// stored one, or `/agents/local/wb` for a new store.
    pub presentation_root: Option<String>,
    /// Engine options.
    pub holt: holt::Options,
    /// When set, an empty database (no commit, so no schema marker) is refused with
    /// `Error::Storage(holt::Error::Corrupt)` naming the directory instead of being
    /// initialized: the caller knows the store existed (for example its object directory already
    /// holds objects), so empty metadata means lost or damaged metadata, and a fresh schema
    /// written over it would hide that. A missing or empty directory is refused the same way,
    /// before anything is created in it. Nothing is written. Default `false`. Read by
    /// [`MetaShard::open`] and [`MetaShard::open_read_only`] (holt).
    pub require_initialized: bool,
    /// The control plane's RootPlacement of the shard (docs/metadata-format.md, "Placement Authority"): an
    /// empty store is initialized with it (instead of fresh random ids and generation 1); an
    /// existing store must hold the same root, logical shard and placement generation. `None`:
    /// the embedded placement the store was created with.
    pub placement: Option<RootPlacement>,
    /// How many RecoveryOutbox records a writer handle keeps below the applied recovery LSN
    /// (see [`crate::outbox`], "Retention"); unused by read-only handles.
    pub outbox_retention: RetentionPolicy,
    /// When set, every periodic maintenance step of a writer handle (every
    /// [`RetentionPolicy::maintenance_interval`] commit versions) also raises the MVCC history
    /// floor per this policy ([`crate::shard::history_floor::maintain_history_floor`]: never past a
    /// live HistoryHold, keeping `history_retention_versions` versions), so a long-running
    /// writer's MVCC history stays bounded like the reaper keeps it at every writer open.
    /// `None` (default): only explicit calls and the reaper move the floor.
    pub history_policy: Option<SnapshotPolicy>,
}

pub(crate) struct Inner {
    pub(crate) store: ShardStore,
    /// The fence of this handle as of its open; [`Inner::fence`] is the one every command
    /// carries (with the current owner epoch).
    pub(crate) fence_at_open: ShardFence,
    /// The owner epoch commands carry: for a writer handle the epoch it writes under (persisted
    /// by its first write, advanced again at each acquisition of a shared lock); for a
    /// read-only handle the epoch persisted at its open.
    pub(crate) owner_epoch: AtomicU64,
    pub(crate) presentation_root: String,
    /// The command sequencer of this shard owner (see [`crate::shard::sequencer`]).
    pub(crate) sequencer: Sequencer,
    /// Writer state; `None` for a read-only handle.
    pub(crate) owner: Option<Owner>,
    /// The wall clock deadlines are evaluated on (workbench expiry; see
    /// [`MetaShard::set_wall_clock`]).
    pub(crate) wall_clock: RwLock<Arc<dyn WallClock>>,
}

impl Inner {
    /// The fence every command of this handle carries: the fence at open with the owner epoch
    /// the handle writes under now.
    pub(crate) fn fence(&self) -> ShardFence {
        let mut fence = self.fence_at_open.clone();
        fence.owner_epoch = self.owner_epoch.load(Ordering::Acquire);
        fence
    }
}

/// The per-shard sequencer lock (one per [`MetaShard`] handle; holt's directory lock makes that
/// one per store per process).
#[derive(Debug, Default)]
pub(crate) struct Sequencer {
    pub(super) lock: Mutex<()>,
}

impl Sequencer {
    pub(super) fn id(&self) -> usize {
        self as *const Sequencer as usize
    }
}

/// One opened logical-shard metadata store (cheap to clone; `Send + Sync`): a **writer** handle
/// ([`MetaShard::open`], holding the store's exclusive lock) or a **read-only** handle
/// ([`MetaShard::open_read_only`], no lock, the state as of its open, every write refused with
/// [`crate::Error::ReadOnly`]).
#[derive(Clone)]
pub struct MetaShard {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for MetaShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaShard")
            .field("root_id", &self.inner.fence_at_open.root_id)
            .field(
                "logical_shard_id",
                &self.inner.fence_at_open.logical_shard_id,
            )
            .field(
                "owner_epoch",
                &self.inner.owner_epoch.load(Ordering::Acquire),
            )
            .field("read_only", &self.inner.owner.is_none())
            .finish()
    }
}

fn fence_of(gate: &crate::schema::GateOutcome, owner_epoch: u64) -> ShardFence {
    ShardFence {
        root_id: gate.placement.root_id,
        logical_shard_id: gate.placement.logical_shard_id,
        placement_generation: gate.placement.placement_generation,
        owner_epoch,
        root_fence_bytes: RootFence {
            logical_shard_id: gate.placement.logical_shard_id,
            placement_generation: gate.placement.placement_generation,
            activation_state: RootActivationState::Active,
        }
        .encode(),
    }
}

/// True when `dir` is missing or holds no entry at all (a directory that cannot be listed for
/// another reason counts as holding something: the open reports that error).
fn holds_no_file(dir: &Path) -> bool {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// The refusal of [`OpenOptions::require_initialized`]: `Storage(holt::Error::Corrupt)` naming
/// `dir`.
fn lost_metadata(dir: &Path) -> crate::error::Error {
    crate::error::Error::Storage(holt::Error::Corrupt {
        file: dir.to_path_buf(),
        offset: 0,
        reason: "the metadata holds no commit although the store already has objects \
                 (metadata lost or truncated); refusing to initialize a new schema over it"
            .to_owned(),
    })
}

impl MetaShard {
    /// Opens (or initializes) the store whose holt database lives directly in `dir` as a
    /// **writer**: takes the store's exclusive lock, passes the schema gate (see
    /// [`crate::schema`]) and verifies the RecoveryOutbox records after the verified chain head
    /// (see [`crate::outbox`]; bounded, not O(history)). Opening an existing store writes
    /// nothing: the owner epoch is advanced through the outbox right before this handle's first
    /// write (one commit, which also carries an outbox maintenance step), so a handle that only
    /// reads leaves the store untouched. Initializing an empty store is one commit.
    ///
    /// Errors: [`crate::Error::SchemaMismatch`] (nothing written),
    /// `Error::Storage(holt::Error::Corrupt)` for an empty database with
    /// [`OpenOptions::require_initialized`] (nothing written),
    /// [`crate::Error::RecoveryOutboxCorrupt`] naming the LSN (nothing written),
    /// [`crate::Error::PresentationRootMismatch`] (nothing written),
    /// [`crate::Error::InvalidArgument`] for an invalid requested presentation root,
    /// [`crate::Error::Storage`] (e.g. `holt::Error::Locked` while another writer has the store,
    /// `holt::Error::Io` on a read-only file system or without write permission).
    pub fn open(dir: impl AsRef<Path>, opts: OpenOptions) -> Result<MetaShard> {
        let dir = dir.as_ref();
        if opts.require_initialized && holds_no_file(dir) {
            // holt would initialize a missing or empty directory.
            return Err(lost_metadata(dir));
        }
        let db = holt::Db::open(dir, opts.holt)?;
        if opts.require_initialized && db.version() == 0 {
            return Err(lost_metadata(dir));
        }
        let store = crate::schema::prepare_holt(db, opts.presentation_root.as_deref())?;
        Self::open_gated(store, &opts, None)
    }

    /// Opens (or initializes) the shard whose metadata lives in an etcd cluster (see
    /// [`crate::store::etcd`]), passing the same schema gate and RecoveryOutbox verification as
    /// [`MetaShard::open`], with the same lazy owner-epoch advance before the first write.
    /// Several processes may open one etcd-backed shard; the first write of each handle
    /// advances the owner epoch, so a handle whose epoch another handle has since advanced can
    /// no longer commit ([`crate::Error::Fenced`]).
    ///
    /// Errors: those of [`MetaShard::open`] (holt errors aside), plus
    /// [`crate::Error::StoreUnavailable`] when the cluster cannot serve the open.
    #[cfg(feature = "etcd")]
    pub fn open_etcd(
        options: crate::store::etcd::EtcdOptions,
        opts: OpenOptions,
    ) -> Result<MetaShard> {
        let shard = options.logical_shard_id;
        if opts
            .placement
            .as_ref()
            .is_some_and(|p| p.logical_shard_id != shard)
        {
            return Err(crate::error::Error::invalid(
                "the placement names another logical shard than the etcd keyspace",
            ));
        }
        let store = crate::store::etcd::EtcdStore::open(options)?;
        let store = crate::schema::prepare_etcd(store, opts.presentation_root.as_deref())?;
        let opened = Self::open_gated(store, &opts, Some(shard))?;
        if opened.logical_shard_id() != shard {
            return Err(crate::error::Error::SchemaMismatch {
                kind: crate::error::SchemaMismatchKind::InconsistentPlacement,
                reason: format!(
                    "the etcd keyspace of logical shard {shard} holds logical shard {}",
                    opened.logical_shard_id()
                ),
            });
        }
        Ok(opened)
    }

    /// Opens the existing etcd-backed shard **read-only**: the same schema gate and verification
    /// of the RecoveryOutbox records after the verified head as [`MetaShard::open_etcd`], the
    /// state as of this call, and nothing is ever written (no owner lease or epoch is needed).
    /// Every write through the handle answers [`crate::Error::ReadOnly`].
    ///
    /// Errors: [`crate::Error::SchemaMismatch`] (also for a shard that was never initialized),
    /// [`crate::Error::RecoveryOutboxCorrupt`], [`crate::Error::PresentationRootMismatch`],
    /// [`crate::Error::InvalidArgument`], [`crate::Error::StoreUnavailable`].
    #[cfg(feature = "etcd")]
    pub fn open_etcd_read_only(
        options: crate::store::etcd::EtcdOptions,
        opts: OpenOptions,
    ) -> Result<MetaShard> {
        let store = crate::store::etcd::EtcdStore::open(options)?;
        let store =
            crate::schema::prepare_etcd_read_only(store, opts.presentation_root.as_deref())?;
        Self::open_read_only_gated(store, &opts)
    }

    /// The read-only half both engines share: the read-only schema gate, the fence at the
    /// stored owner epoch, and a handle without an owner (every write answers
    /// [`crate::Error::ReadOnly`]).
    fn open_read_only_gated(store: ShardStore, opts: &OpenOptions) -> Result<MetaShard> {
        let gate = read_only_gate(
            &store,
            opts.presentation_root.as_deref(),
            opts.placement.as_ref(),
        )?;
        let fence = fence_of(&gate, gate.owner_epoch);
        Ok(MetaShard {
            inner: Arc::new(Inner {
                store,
                owner_epoch: AtomicU64::new(fence.owner_epoch),
                fence_at_open: fence,
                presentation_root: gate.presentation_root,
                sequencer: Default::default(),
                owner: None,
                wall_clock: RwLock::new(Arc::new(SystemWallClock)),
            }),
        })
    }

    fn open_gated(
        store: ShardStore,
        opts: &OpenOptions,
        init_shard: Option<LogicalShardId>,
    ) -> Result<MetaShard> {
        let gate = open_gate(
            &store,
            opts.presentation_root.as_deref(),
            opts.placement.as_ref(),
            init_shard,
        )?;
        let owner_epoch = if gate.initialized {
            gate.owner_epoch
        } else {
            gate.owner_epoch
                .checked_add(1)
                .ok_or_else(|| crate::error::Error::invalid("owner epoch exhausted"))?
        };
        let fence = fence_of(&gate, owner_epoch);
        let version = store.version();
        Ok(MetaShard {
            inner: Arc::new(Inner {
                store,
                owner_epoch: AtomicU64::new(fence.owner_epoch),
                fence_at_open: fence,
                presentation_root: gate.presentation_root,
                sequencer: Default::default(),
                owner: Some(Owner {
                    state: Mutex::new(OwnerState {
                        epoch_at_open: gate.owner_epoch,
                        // The open's acquisition is term 1 (see `holt::WriterHold::term`).
                        advanced_term: gate.initialized.then_some(1),
                        verified_at_open: gate.verified_tail,
                        last_step_version: version,
                    }),
                    retention: opts.outbox_retention,
                    history_policy: opts.history_policy,
                }),
                wall_clock: RwLock::new(Arc::new(SystemWallClock)),
            }),
        })
    }

    /// Opens the existing store in `dir` **read-only**: no lock (any number of read-only
    /// handles share the store with its one writer), the state as of this call
    /// (`holt::Db::open_read_only`: the mapped images plus the complete WAL records after them),
    /// the same schema gate as [`MetaShard::open`] and the same verification of the
    /// RecoveryOutbox records after the verified head — and nothing is ever written: no owner
    /// epoch advance, no outbox maintenance, no fdatasync. Works on a read-only file system and
    /// on another user's readable files. Every write through the handle answers
    /// [`crate::Error::ReadOnly`]. Later commits of a writer are not seen; open again.
    ///
    /// Errors: [`crate::Error::SchemaMismatch`] (also for a store that was never initialized),
    /// [`crate::Error::RecoveryOutboxCorrupt`], [`crate::Error::PresentationRootMismatch`],
    /// [`crate::Error::InvalidArgument`] for an invalid requested presentation root,
    /// [`crate::Error::Storage`] (`holt::Error::Io` for a missing or unreadable directory,
    /// `holt::Error::Corrupt` for damaged files, and for an empty or missing database with
    /// [`OpenOptions::require_initialized`]).
    pub fn open_read_only(dir: impl AsRef<Path>, opts: OpenOptions) -> Result<MetaShard> {
        let dir = dir.as_ref();
        if opts.require_initialized && holds_no_file(dir) {
            return Err(lost_metadata(dir));
        }
        let db = holt::Db::open_read_only(dir, opts.holt)?;
        if opts.require_initialized && db.version() == 0 {
            return Err(lost_metadata(dir));
        }
        let store = crate::schema::prepare_holt_read_only(db, opts.presentation_root.as_deref())?;
        Self::open_read_only_gated(store, &opts)
    }

    /// True for a handle from [`MetaShard::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.inner.owner.is_none()
    }

    /// The root this shard serves.
    pub fn root_id(&self) -> RootId {
        self.inner.fence_at_open.root_id
    }

    /// The logical shard id (part of every object key).
    pub fn logical_shard_id(&self) -> LogicalShardId {
        self.inner.fence_at_open.logical_shard_id
    }

    /// The durable presentation root (e.g. `/agents/local/wb`).
    pub fn presentation_root(&self) -> &str {
        &self.inner.presentation_root
    }

    /// This handle's owner epoch: for a writer handle the epoch it writes under (the persisted
    /// epoch + 1 for an existing store, persisted by the handle's first write; 1 for a store it
    /// initialized; with a writer lock shared between processes, the epoch its latest
    /// acquisition advanced to); for a read-only handle the epoch persisted at its open.
    pub fn owner_epoch(&self) -> u64 {
        self.inner.owner_epoch.load(Ordering::Acquire)
    }

    /// The System recovery tail: last applied RecoveryOutbox LSN and chain digest.
    ///
    /// Errors: [`crate::Error::Codec`]; storage errors; [`crate::Error::Fenced`] if absent.
    pub fn recovery_tail(&self) -> Result<RecoveryTail> {
        let snap = self.inner.store.snapshot();
        let bytes = snap
            .get(Family::System, KEY_RECOVERY_TAIL)?
            .ok_or_else(|| crate::error::Error::Fenced {
                reason: "no System recovery tail is recorded".into(),
            })?;
        RecoveryTail::decode(&bytes)
    }

    /// The RecoveryOutbox chain points at the current version: tail, pruned point and verified
    /// head (see [`crate::outbox`], "Verification").
    ///
    /// Errors: [`crate::Error::Fenced`] without a tail; codec and storage errors.
    pub fn recovery_chain_points(&self) -> Result<ChainPoints> {
        crate::outbox::read_points(&self.inner.store.snapshot())
    }

    /// Full verification of the RecoveryOutbox at the current version: every retained record
    /// from the pruned chain point to the System tail (hash chain, framing, missing/orphan
    /// chunks, foreign rows, nothing left below the pruned point) and the anchoring of the
    /// verified head. O(retained records) — the explicit check behind `nokv verify` (and
    /// `nokv fsck`); opens verify only the records after the verified head. Works on read-only
    /// handles; writes nothing.
    ///
    /// Errors: [`crate::Error::RecoveryOutboxCorrupt`] naming the first bad LSN; codec and
    /// storage errors.
    pub fn verify_recovery_outbox(&self) -> Result<OutboxSummary> {
        let snap = self.inner.store.snapshot();
        let points = crate::outbox::read_points(&snap)?;
        crate::outbox::verify_all(&snap, &points)
    }

    /// The engine backing this shard (holt or etcd).
    pub fn store(&self) -> &ShardStore {
        &self.inner.store
    }

    /// The holt database of a holt-backed shard (diagnostics, checkpoints, stats); `None` for an
    /// etcd-backed one.
    pub fn holt_db(&self) -> Option<&holt::Db> {
        self.inner.store.holt_db()
    }

    /// The shard's current commit version (the read version a command built now would carry).
    ///
    /// Errors: [`crate::Error::StoreUnavailable`] when an etcd-backed shard cannot be read.
    pub fn version(&self) -> Result<u64> {
        let snap = self.inner.store.snapshot();
        // An etcd snapshot that could not be taken reports its failure on the first read.
        snap.get(Family::System, crate::codec::system::KEY_SCHEMA)?;
        Ok(snap.version())
    }

    /// A reader at the current version.
    pub fn read(&self) -> Reader {
        Reader::new(
            self.inner.store.snapshot(),
            self.root_id(),
            self.wall_unix_ms(),
        )
    }

    /// Installs the wall clock this handle evaluates deadlines on (workbench expiry,
    /// docs/metadata-format.md, "Workbench Expiry"); the default is the operating system's clock.
    /// The SDK installs its `ClientOptions::clock`, so tests drive expiry with a manual clock.
    pub fn set_wall_clock(&self, clock: Arc<dyn WallClock>) {
        *self
            .inner
            .wall_clock
            .write()
            .unwrap_or_else(|p| p.into_inner()) = clock;
    }

    /// The installed wall clock now, Unix ms (see [`MetaShard::set_wall_clock`]). The store
    /// clock a deadline is compared with is `max(this, persisted high-water)`
    /// ([`crate::clock::store_clock_now`]).
    pub fn wall_unix_ms(&self) -> u64 {
        self.inner
            .wall_clock
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .now_unix_ms()
    }

    /// A reader at an older `version`.
    ///
    /// Errors: [`crate::Error::Storage`] with `holt::Error::HistoryPruned` below the history
    /// floor or `InvalidArgument` above the current version.
    pub fn read_at(&self, version: u64) -> Result<Reader> {
        Ok(Reader::new(
            self.inner.store.snapshot_at(version)?,
            self.root_id(),
            self.wall_unix_ms(),
        ))
    }

    /// A command skeleton carrying this handle's identity and fence fields (schema id, root,
    /// logical shard, placement generation, owner epoch) with no predicates, mutations or events.
    pub fn command_header(
        &self,
        request_id: crate::ids::RequestId,
        command_digest: [u8; 32],
        read_version: u64,
        result: crate::codec::CommandResult,
    ) -> crate::command::MetadataCommand {
        crate::command::MetadataCommand {
            schema_id: crate::codec::system::SCHEMA_ID.to_owned(),
            root_id: self.inner.fence_at_open.root_id,
            logical_shard_id: self.inner.fence_at_open.logical_shard_id,
            placement_generation: self.inner.fence_at_open.placement_generation,
            owner_epoch: self.inner.owner_epoch.load(Ordering::Acquire),
            request_id,
            command_digest,
            read_version,
            predicates: Vec::new(),
            mutations: Vec::new(),
            event_projection: Vec::new(),
            result,
        }
    }
}
