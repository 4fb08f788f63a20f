//! Workspace operations built from one [`crate::command::MetadataCommand`] each.
//!
//! Every operation reads at one version, builds its command with `read_version` set to that
//! version, and on [`crate::Error::ReadVersionConflict`] or
//! [`crate::Error::CommandPredicateFailed`] re-reads and rebuilds, at most [`MAX_ATTEMPTS`]
//! times. A re-read turns a failed predicate into the precise typed error.

pub mod changes;
pub mod commit;
pub mod find;
pub mod lease_clock;
pub mod publish;
pub mod publish_operation;
pub mod restore;
pub mod snapshot;
pub mod tag;
pub mod workspace;

/// Bounded rebuild/retry budget per operation.
pub const MAX_ATTEMPTS: u32 = 32;

#[cfg(test)]
mod bounded_tests;
#[cfg(test)]
mod publish_operation_tests;
