//! `MetaShard`: the handle on one logical-shard metadata store.

use std::path::Path;
use std::sync::Arc;

use crate::codec::{RootActivationState, RootFence};
use crate::command::ShardFence;
use crate::error::Result;
use crate::ids::{LogicalShardId, RootId};
use crate::ops::publish::{PublishReceipt, PublishRequest};
use crate::ops::workspace::CreateWorkspaceOutcome;
use crate::read::Reader;
use crate::schema::open_gate;
use crate::store::{HoltStore, TxnStore};

/// Options for [`MetaShard::open`].
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Presentation root to require (existing store) or record (new store). `None`: use the
    /// stored one, or `/agents/local/wb` for a new store.
    pub presentation_root: Option<String>,
    /// Engine options.
    pub holt: holt::Options,
}

pub(crate) struct Inner {
    pub(crate) store: HoltStore,
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
    /// schema gate (see [`crate::schema`]) and advancing the owner epoch.
    ///
    /// Errors: [`crate::Error::SchemaMismatch`] (nothing written),
    /// [`crate::Error::PresentationRootMismatch`] (nothing written),
    /// [`crate::Error::InvalidArgument`] for an invalid requested presentation root,
    /// [`crate::Error::Storage`] (e.g. `holt::Error::Locked`).
    pub fn open(dir: impl AsRef<Path>, opts: OpenOptions) -> Result<MetaShard> {
        let db = holt::Db::open(dir, opts.holt)?;
        let gate = open_gate(&db, opts.presentation_root.as_deref())?;
        let store = HoltStore::new(db)?;
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

    /// The underlying holt database (diagnostics, checkpoints, stats).
    pub fn db(&self) -> &holt::Db {
        self.inner.store.db()
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

    /// A command skeleton carrying this handle's identity and fence fields.
    pub(crate) fn command_header(
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
