//! `MetaShard`: the handle on one logical-shard metadata store.

use std::path::Path;
use std::sync::Arc;

use crate::codec::system::{RecoveryTail, KEY_RECOVERY_TAIL};
use crate::codec::{RootActivationState, RootFence, RootPlacement};
use crate::command::ShardFence;
use crate::error::Result;
use crate::ids::{LogicalShardId, RootId};
use crate::ops::publish::{PublishReceipt, PublishRequest};
use crate::ops::workspace::CreateWorkspaceOutcome;
use crate::outbox::OutboxSummary;
use crate::read::Reader;
use crate::schema::open_gate;
use crate::schema::Family;
use crate::store::{ShardStore, Snapshot, TxnStore};

/// Options for [`MetaShard::open`].
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Presentation root to require (existing store) or record (new store). `None`: use the
    /// stored one, or `/agents/local/wb` for a new store.
    pub presentation_root: Option<String>,
    /// Engine options.
    pub holt: holt::Options,
    /// The control plane's RootPlacement of the shard (seed 000, "Placement Authority"): an
    /// empty store is initialized with it (instead of fresh random ids and generation 1); an
    /// existing store must hold the same root, logical shard and placement generation. `None`:
    /// the embedded placement the store was created with.
    pub placement: Option<RootPlacement>,
}

pub(crate) struct Inner {
    pub(crate) store: ShardStore,
    pub(crate) fence: ShardFence,
    pub(crate) presentation_root: String,
}

/// One opened logical-shard metadata store (cheap to clone; `Send + Sync`).
#[derive(Clone)]
pub struct MetaShard {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for MetaShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaShard")
            .field("root_id", &self.inner.fence.root_id)
            .field("logical_shard_id", &self.inner.fence.logical_shard_id)
            .field("owner_epoch", &self.inner.fence.owner_epoch)
            .finish()
    }
}

impl MetaShard {
    /// Opens (or initializes) the store whose holt database lives directly in `dir`, passing the
    /// schema gate (see [`crate::schema`]), verifying the RecoveryOutbox (see [`crate::outbox`];
    /// O(outbox) at every open) and advancing the owner epoch through the outbox.
    ///
    /// Errors: [`crate::Error::SchemaMismatch`] (nothing written),
    /// [`crate::Error::RecoveryOutboxCorrupt`] naming the LSN (nothing written),
    /// [`crate::Error::PresentationRootMismatch`] (nothing written),
    /// [`crate::Error::InvalidArgument`] for an invalid requested presentation root,
    /// [`crate::Error::Storage`] (e.g. `holt::Error::Locked`).
    pub fn open(dir: impl AsRef<Path>, opts: OpenOptions) -> Result<MetaShard> {
        let db = holt::Db::open(dir, opts.holt)?;
        let store = crate::schema::prepare_holt(db, opts.presentation_root.as_deref())?;
        Self::open_gated(store, &opts, None)
    }

    /// Opens (or initializes) the shard whose metadata lives in an etcd cluster (see
    /// [`crate::store::etcd`]), passing the same schema gate, RecoveryOutbox verification and
    /// owner-epoch advance as [`MetaShard::open`]. Several processes may open one etcd-backed
    /// shard; each open advances the owner epoch, so only the newest handle can commit (the
    /// others get [`crate::Error::Fenced`]).
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
            return Err(crate::Error::invalid(
                "the placement names another logical shard than the etcd keyspace",
            ));
        }
        let store = crate::store::etcd::EtcdStore::open(options)?;
        let store = crate::schema::prepare_etcd(store, opts.presentation_root.as_deref())?;
        let opened = Self::open_gated(store, &opts, Some(shard))?;
        if opened.logical_shard_id() != shard {
            return Err(crate::Error::SchemaMismatch {
                kind: crate::schema::SchemaMismatchKind::InconsistentPlacement,
                reason: format!(
                    "the etcd keyspace of logical shard {shard} holds logical shard {}",
                    opened.logical_shard_id()
                ),
            });
        }
        Ok(opened)
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
        let fence = ShardFence {
            root_id: gate.placement.root_id,
            logical_shard_id: gate.placement.logical_shard_id,
            placement_generation: gate.placement.placement_generation,
            owner_epoch: gate.owner_epoch,
            root_fence_bytes: RootFence {
                logical_shard_id: gate.placement.logical_shard_id,
                placement_generation: gate.placement.placement_generation,
                activation_state: RootActivationState::Active,
            }
            .encode(),
        };
        Ok(MetaShard {
            inner: Arc::new(Inner {
                store,
                fence,
                presentation_root: gate.presentation_root,
            }),
        })
    }

    /// The root this shard serves.
    pub fn root_id(&self) -> RootId {
        self.inner.fence.root_id
    }

    /// The logical shard id (part of every object key).
    pub fn logical_shard_id(&self) -> LogicalShardId {
        self.inner.fence.logical_shard_id
    }

    /// The durable presentation root (e.g. `/agents/local/wb`).
    pub fn presentation_root(&self) -> &str {
        &self.inner.presentation_root
    }

    /// This handle's owner epoch (advanced by one at every open).
    pub fn owner_epoch(&self) -> u64 {
        self.inner.fence.owner_epoch
    }

    /// The System recovery tail: last applied RecoveryOutbox LSN and chain digest.
    ///
    /// Errors: [`crate::Error::Codec`]; storage errors; [`crate::Error::Fenced`] if absent.
    pub fn recovery_tail(&self) -> Result<RecoveryTail> {
        let snap = self.inner.store.snapshot();
        let bytes = snap
            .get(Family::System, KEY_RECOVERY_TAIL)?
            .ok_or_else(|| crate::Error::Fenced {
                reason: "no System recovery tail is recorded".into(),
            })?;
        RecoveryTail::decode(&bytes)
    }

    /// Re-verifies the whole RecoveryOutbox at the current version (the same check the open
    /// performs; O(outbox)).
    ///
    /// Errors: [`crate::Error::RecoveryOutboxCorrupt`]; codec and storage errors.
    pub fn verify_recovery_outbox(&self) -> Result<OutboxSummary> {
        let snap = self.inner.store.snapshot();
        let tail = snap
            .get(Family::System, KEY_RECOVERY_TAIL)?
            .ok_or_else(|| crate::Error::Fenced {
                reason: "no System recovery tail is recorded".into(),
            })?;
        crate::outbox::verify(&snap, &RecoveryTail::decode(&tail)?)
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
        Reader::new(self.inner.store.snapshot(), self.root_id())
    }

    /// A reader at an older `version`.
    ///
    /// Errors: [`crate::Error::Storage`] with `holt::Error::HistoryPruned` below the history
    /// floor or `InvalidArgument` above the current version.
    pub fn read_at(&self, version: u64) -> Result<Reader> {
        Ok(Reader::new(
            self.inner.store.snapshot_at(version)?,
            self.root_id(),
        ))
    }

    /// Creates a `Visible` workbench (see [`crate::ops::workspace::create_workspace`]).
    pub fn create_workspace(&self, workbench_id: &str) -> Result<CreateWorkspaceOutcome> {
        crate::ops::workspace::create_workspace(self, workbench_id)
    }

    /// Publishes one artifact body (see [`crate::ops::publish::publish`]).
    pub fn publish(&self, req: PublishRequest) -> Result<PublishReceipt> {
        crate::ops::publish::publish(self, req)
    }

    /// Executes one raw [`crate::command::MetadataCommand`] under this handle's fence (see
    /// [`crate::command::executor`] for the validation order). The workspace operations above
    /// are built on this; it is public for diagnostics and fault-injection tests.
    ///
    /// Errors: those of [`crate::command::execute`].
    pub fn execute(
        &self,
        cmd: crate::command::MetadataCommand,
    ) -> Result<crate::command::CommandOutcome> {
        crate::command::execute(&self.inner.store, &self.inner.fence, cmd)
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
            root_id: self.inner.fence.root_id,
            logical_shard_id: self.inner.fence.logical_shard_id,
            placement_generation: self.inner.fence.placement_generation,
            owner_epoch: self.inner.fence.owner_epoch,
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
