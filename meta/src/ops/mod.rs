//! Workspace operations built from one [`crate::command::MetadataCommand`] each.
//!
//! Every write plans its command inside a section of the shard's command sequencer
//! ([`crate::shard::MetaShard::sequenced`], see [`crate::shard::sequencer`]): at a snapshot of
//! the newest accepted state, with `read_version` set to that snapshot's version, submitted to
//! group commit before the next section plans. Concurrent writers therefore never meet a stale
//! read version; a failed predicate means the operation's own precondition is false. Operations
//! still re-plan on [`crate::Error::ReadVersionConflict`] or
//! [`crate::Error::CommandPredicateFailed`] (at most [`MAX_ATTEMPTS`] times), so the re-read
//! names the precise typed error.

pub mod changes;
pub mod commit;
pub mod diff;
pub mod expiry;
pub mod find;
pub mod fsck;
pub mod gc;
pub mod lease_clock;
pub mod move_path;
pub mod publish;
pub mod remove;
pub mod restore;
pub mod settings;
pub mod snapshot;
pub mod tag;
pub mod workspace;

/// How many times an operation rebuilds a command (see [`crate::command::MAX_ATTEMPTS`]).
pub use crate::command::MAX_ATTEMPTS;

/// One step of a multi-command operation, planned at one snapshot: nothing to write (with the
/// value to return), or one command to execute and then the value.
pub(crate) enum Step<T> {
    /// Nothing to write; the value.
    Done(T),
    /// Execute the command, then return the value.
    Command(Box<crate::command::MetadataCommand>, T),
}

/// Plans a step inside a command-sequencer section (after
/// [`crate::shard::sequencer::Sequenced::prepare_write`]), at a snapshot of the newest accepted state
/// (handle fences checked first), and submits its command; on a stale read version or a failed
/// predicate it re-plans, so the re-read names the precise error, at most [`MAX_ATTEMPTS`] times.
/// Returns once the command is durable. Shared by the publish ledger, commits and tags.
///
/// Errors: those of `plan` and of the command; [`crate::Error::ReadVersionConflict`] after
/// [`MAX_ATTEMPTS`] attempts.
pub(crate) fn run_step<T>(
    shard: &crate::shard::MetaShard,
    mut plan: impl FnMut(&crate::store::ShardSnapshot) -> crate::error::Result<Step<T>>,
) -> crate::error::Result<T> {
    for _ in 0..MAX_ATTEMPTS {
        let attempt = shard.sequenced(|seq| {
            seq.prepare_write()?;
            let snap = seq.snapshot();
            crate::command::executor::check_handle_fences(&snap, &shard.inner.fence())?;
            let step = plan(&snap)?;
            drop(snap);
            match step {
                Step::Done(v) => Ok(v),
                Step::Command(cmd, v) => seq.execute(*cmd).map(|_| v),
            }
        });
        match attempt {
            Err(crate::error::Error::ReadVersionConflict { .. })
            | Err(crate::error::Error::CommandPredicateFailed) => continue,
            other => return other,
        }
    }
    Err(crate::error::Error::ReadVersionConflict {
        attempts: MAX_ATTEMPTS,
    })
}

/// Runs `section` as one command-sequencer section ([`crate::shard::MetaShard::sequenced`]),
/// again on a stale read version or a failed predicate (the re-read names the precise error), at
/// most [`MAX_ATTEMPTS`] times.
///
/// Errors: the section's; [`crate::Error::ReadVersionConflict`] after [`MAX_ATTEMPTS`] attempts.
pub(crate) fn sequenced_retrying<T>(
    shard: &crate::shard::MetaShard,
    mut section: impl FnMut(&mut crate::shard::sequencer::Sequenced<'_>) -> crate::error::Result<T>,
) -> crate::error::Result<T> {
    for _ in 0..MAX_ATTEMPTS {
        match shard.sequenced(&mut section) {
            Err(crate::error::Error::ReadVersionConflict { .. })
            | Err(crate::error::Error::CommandPredicateFailed) => continue,
            other => return other,
        }
    }
    Err(crate::error::Error::ReadVersionConflict {
        attempts: MAX_ATTEMPTS,
    })
}

#[cfg(test)]
mod bounded_tests;
