//! `MetadataCommand` (docs/metadata-format.md, "Metadata Command"): every durable mutation of the metadata layer
//! is one bounded command executed as exactly one holt batch.
//!
//! A command carries the fields that section lists: schema id, root id, logical shard,
//! placement generation, owner epoch, request id, command digest, read version, predicates,
//! mutations, history projection, event projection and deterministic result. The history
//! projection is derived, not listed: holt writes the previous value of every mutated key of a
//! versioned family into its `history` tree (docs/metadata-format.md History key layout) inside
//! the same atomic batch; [`MetadataCommand::history_projection`] names those keys. The executor
//! adds the ChangeEvent rows, the CommandDedupe row (bound to the recovery LSN) and the
//! RecoveryOutbox rows (see [`crate::outbox`]) to the same batch; validation order is documented
//! in [`executor`].
//!
//! ```text
//! command/
//!   metadata.rs    MetadataCommand and its bounds
//!   projection.rs  the SecondaryIndex rows of a published path (its index projection)
//!   executor.rs    execute: the checks, then one checked atomic write
//! ```

pub mod executor;
mod metadata;
/// The predicates and mutations of a command (a store-level vocabulary, see
/// [`crate::store::predicate`]).
pub use crate::store::predicate;
pub mod projection;

pub use executor::{execute, CommandOutcome, ShardFence};
pub use metadata::{
    MetadataCommand, MAX_ATTEMPTS, MAX_COMMAND_EVENTS, MAX_COMMAND_MUTATIONS,
    MAX_COMMAND_PREDICATES, MAX_INDEX_MUTATIONS, MAX_MANIFEST_ROWS,
};
pub use predicate::{Expectation, Mutation, Predicate};
