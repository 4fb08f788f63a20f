//! `MetadataCommand` (seed 000, "Metadata Command"): every durable mutation of the metadata layer
//! is one bounded command executed as exactly one holt batch.
//!
//! History projections are not listed in the command: holt writes the previous value of every
//! versioned tree into its `history` tree inside the same atomic batch. RecoveryOutbox rows are
//! not written by this version of the executor; `CommandDedupe.recovery_lsn` is stored as absent
//! until the outbox exists.

pub mod executor;
pub mod predicate;

pub use executor::{execute, CommandOutcome, ShardFence};
pub use predicate::{Expectation, Mutation, Predicate};

use crate::codec::{ChangeEvent, CommandResult};
use crate::ids::{LogicalShardId, RequestId, RootId};
use crate::schema::Family;

/// Upper bound on command predicates (fixed per operation; seed 000 requires a fixed bound).
pub const MAX_COMMAND_PREDICATES: usize = 192;
/// Upper bound on mutations outside the ArtifactManifest family.
pub const MAX_COMMAND_MUTATIONS: usize = 256;
/// Upper bound on ArtifactManifest rows written by one command.
pub const MAX_MANIFEST_ROWS: usize = 65_536;
/// Upper bound on events emitted by one command.
pub const MAX_COMMAND_EVENTS: usize = 16;

/// One bounded metadata command.
#[derive(Debug, Clone)]
pub struct MetadataCommand {
    /// Must equal `nokv_workspace`.
    pub schema_id: String,
    /// The shard's root.
    pub root_id: RootId,
    /// The shard's logical shard.
    pub logical_shard_id: LogicalShardId,
    /// Placement generation the command was routed with.
    pub placement_generation: u64,
    /// Owner epoch of the handle issuing the command.
    pub owner_epoch: u64,
    /// Replay identity (CommandDedupe key).
    pub request_id: RequestId,
    /// SHA-256 over the command's canonical inputs.
    pub command_digest: [u8; 32],
    /// Version the command was built on; the commit version is `read_version + 1`.
    pub read_version: u64,
    /// Command predicates (in addition to the executor's fence predicates).
    pub predicates: Vec<Predicate>,
    /// Mutations.
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

    /// Number of non-manifest mutations (bounded by [`MAX_COMMAND_MUTATIONS`]).
    pub(crate) fn bounded_mutations(&self) -> usize {
        self.mutations
            .iter()
            .filter(|m| m.family() != Family::ArtifactManifest)
            .count()
    }
}
