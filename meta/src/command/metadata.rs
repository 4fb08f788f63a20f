//! [`MetadataCommand`], the one shape of every durable mutation, and the bounds the executor
//! holds it to (docs/metadata-format.md, "Metadata Command"). A leaf under `executor.rs`.

use crate::codec::{ChangeEvent, CommandResult};
use crate::family::Family;
use crate::ids::{LogicalShardId, RequestId, RootId};
use crate::store::predicate::{Mutation, Predicate};

/// Upper bound on command predicates (fixed per operation; docs/metadata-format.md requires a fixed bound).
pub const MAX_COMMAND_PREDICATES: usize = 192;
/// Upper bound on mutations outside the ArtifactManifest family.
pub const MAX_COMMAND_MUTATIONS: usize = 256;
/// Upper bound on ArtifactManifest rows written by one command.
pub const MAX_MANIFEST_ROWS: usize = 65_536;
/// Upper bound on SecondaryIndex mutations of one command: one publication's index projection,
/// puts of the new rows plus deletes of the old ones (docs/metadata-format.md: "a fixed upper bound on
/// predicates and mutations apart from bounded manifest and index rows").
pub const MAX_INDEX_MUTATIONS: usize = super::projection::MAX_INDEX_MUTATIONS;
/// Upper bound on events emitted by one command.
pub const MAX_COMMAND_EVENTS: usize = 16;

/// One bounded metadata command.
#[derive(Debug, Clone)]
pub struct MetadataCommand {
    /// Must equal `nokv_workspace` (else [`crate::Error::Fenced`]).
    pub schema_id: String,
    /// The shard's root.
    pub root_id: RootId,
    /// The shard's logical shard.
    pub logical_shard_id: LogicalShardId,
    /// Placement generation the command was routed with; must equal the Active RootFence's.
    pub placement_generation: u64,
    /// Owner epoch of the handle issuing the command; must equal the persisted owner epoch
    /// (a stale epoch is [`crate::Error::Fenced`]).
    pub owner_epoch: u64,
    /// Replay identity (CommandDedupe key).
    pub request_id: RequestId,
    /// SHA-256 over the command's canonical inputs.
    pub command_digest: [u8; 32],
    /// Version the command was built on; the commit version is `read_version + 1`.
    pub read_version: u64,
    /// Command predicates (in addition to the executor's fence predicates).
    pub predicates: Vec<Predicate>,
    /// Mutations (never on the reserved `recovery_outbox` tree; on the reserved `system` tree
    /// only the pending-operation registry rows of [`crate::codec::system`]).
    pub mutations: Vec<Mutation>,
    /// Change events, written at `root | read_version+1 | sequence` from sequence 0.
    pub event_projection: Vec<ChangeEvent>,
    /// The deterministic result stored in CommandDedupe.
    pub result: CommandResult,
}

impl MetadataCommand {
    /// The commit version this command will get if it applies.
    pub fn commit_version(&self) -> u64 {
        self.read_version.saturating_add(1)
    }

    /// The history projection: `(family, key)` of every mutation on a versioned family, in
    /// mutation order. holt records each key's previous value (or absence) in `history` at the
    /// command's commit version, in the same batch.
    pub fn history_projection(&self) -> Vec<(Family, &[u8])> {
        self.mutations
            .iter()
            .filter(|m| m.family().versioned())
            .map(|m| match m {
                Mutation::Put { family, key, .. } | Mutation::Delete { family, key } => {
                    (*family, key.as_slice())
                }
            })
            .collect()
    }

    /// Number of mutations outside the ArtifactManifest and SecondaryIndex families (bounded by
    /// [`MAX_COMMAND_MUTATIONS`]).
    pub(crate) fn bounded_mutations(&self) -> usize {
        self.mutations
            .iter()
            .filter(|m| {
                !matches!(
                    m.family(),
                    Family::ArtifactManifest | Family::SecondaryIndex
                )
            })
            .count()
    }

    /// Number of mutations of `family`.
    pub(crate) fn family_mutations(&self, family: Family) -> usize {
        self.mutations
            .iter()
            .filter(|m| m.family() == family)
            .count()
    }
}

/// How many times an operation rebuilds a command after a stale read version or a failed
/// predicate before it gives up with [`crate::Error::ReadVersionConflict`].
pub const MAX_ATTEMPTS: u32 = 32;
