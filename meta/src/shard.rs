//! `MetaShard`: the handle on one logical-shard metadata store.

use std::path::Path;
use std::sync::Arc;

use crate::codec::system::{RecoveryTail, KEY_RECOVERY_TAIL};
use crate::codec::{RootActivationState, RootFence};
use crate::command::ShardFence;
use crate::error::Result;
use crate::ids::{LogicalShardId, RootId};
use crate::ops::publish::{PublishReceipt, PublishRequest};
use crate::ops::workspace::CreateWorkspaceOutcome;
use crate::outbox::OutboxSummary;
use crate::read::Reader;
use crate::schema::open_gate;
use crate::schema::Family;
use crate::store::{HoltStore, Snapshot, TxnStore};

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
    /// The command sequencer of this shard owner (see [`crate::command::sequencer`]).
    pub(crate) sequencer: crate::command::sequencer::Sequencer,
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
                sequencer: Default::default(),
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
        let db = self.inner.store.db();
        let view = db.view();
        let sys = db.tree(Family::System.name());
        let tree = db.tree(Family::RecoveryOutbox.name());
        let (Some(sys), Some(tree)) = (sys, tree) else {
            return Err(crate::Error::Fenced {
                reason: "reserved trees missing".into(),
            });
        };
        let tail = view
            .get(&sys, KEY_RECOVERY_TAIL)?
            .ok_or_else(|| crate::Error::Fenced {
                reason: "no System recovery tail is recorded".into(),
            })?;
        crate::outbox::verify(&view, &tree, &RecoveryTail::decode(&tail)?)
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

    /// Executes one raw [`crate::command::MetadataCommand`] under this handle's fence (see
    /// [`crate::command::executor`] for the validation order) through the command sequencer
    /// (its `read_version` must be the newest accepted version, see
    /// [`crate::command::sequencer`]); returns once it is durable. The workspace operations above
    /// are built on this; it is public for diagnostics and fault-injection tests.
    ///
    /// Errors: those of [`crate::command::execute`].
    pub fn execute(
        &self,
        cmd: crate::command::MetadataCommand,
    ) -> Result<crate::command::CommandOutcome> {
        self.sequenced(|seq| seq.execute(cmd))
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
