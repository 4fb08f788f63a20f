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

/// One step of a multi-command operation, planned at one snapshot: nothing to write (with the
/// value to return), or one command to execute and then the value.
pub(crate) enum Step<T> {
    /// Nothing to write; the value.
    Done(T),
    /// Execute the command, then return the value.
    Command(Box<crate::command::MetadataCommand>, T),
}

/// Plans a step at a fresh snapshot (handle fences checked first) and executes its command; on a
/// stale read version or a failed predicate it re-plans, so the re-read names the precise error,
/// at most [`MAX_ATTEMPTS`] times. Shared by the publish ledger, commits and tags.
///
/// Errors: those of `plan` and of the command; [`crate::Error::ReadVersionConflict`] after
/// [`MAX_ATTEMPTS`] attempts.
pub(crate) fn run_step<T>(
    shard: &crate::shard::MetaShard,
    mut plan: impl FnMut(&crate::store::ShardSnapshot) -> crate::Result<Step<T>>,
) -> crate::Result<T> {
    use crate::store::TxnStore;
    let store = &shard.inner.store;
    for _ in 0..MAX_ATTEMPTS {
        let snap = store.snapshot();
        crate::command::executor::check_handle_fences(&snap, &shard.inner.fence)?;
        let step = plan(&snap)?;
        drop(snap);
        match step {
            Step::Done(v) => return Ok(v),
            Step::Command(cmd, v) => match crate::command::execute(store, &shard.inner.fence, *cmd)
            {
                Ok(_) => return Ok(v),
                Err(crate::Error::ReadVersionConflict { .. })
                | Err(crate::Error::CommandPredicateFailed) => continue,
                Err(e) => return Err(e),
            },
        }
    }
    Err(crate::Error::ReadVersionConflict {
        attempts: MAX_ATTEMPTS,
    })
}

#[cfg(test)]
mod bounded_tests;
#[cfg(test)]
mod publish_operation_tests;
