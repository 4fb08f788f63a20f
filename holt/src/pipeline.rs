//! Pipelined commits: acceptance now, durability later.
//!
//! [`Db::commit`] validates a batch against the newest *accepted* state, queues its WAL record
//! for group commit and waits until that record is durable and visible. A caller that serializes
//! its own planning (a command sequencer: plan against the newest accepted state, submit, let
//! the next command plan on top) must not hold its lock across that wait, or concurrent
//! committers could never share an `fdatasync`. These two additive calls split the commit:
//!
//! - [`Db::accepted_view`] reads the newest accepted state — every batch accepted so far, durable
//!   or not. It is for *planning only*: a batch built from it validates against exactly the state
//!   it read, but data read from it must not be returned to anyone before it is durable
//!   ([`Db::wait_visible`] with the view's version says when).
//! - [`Db::commit_pipelined`] validates the batch (version expectation and predicates, against
//!   the newest accepted state) and accepts it — it becomes the state the next batch is validated
//!   against — and returns a [`CommitTicket`] at once. [`CommitTicket::wait`] returns the commit
//!   version once the WAL record is durable and the commit is visible to readers.
//!
//! Commit versions stay dense and ordered by acceptance: a ticket's version is the accepted
//! version it was validated against plus one. Failure is ordered too: when the group commit that
//! carries a record fails (write or `fdatasync` error), the WAL is poisoned, so every batch
//! accepted on top of it — whose predicates may have relied on it — fails as well: tickets in
//! the failed group return the I/O error, tickets queued behind it `Error::Poisoned`, and later
//! submissions are refused with `Error::Poisoned`. Nothing that failed becomes visible; the
//! database must be reopened (recovery then keeps a durable prefix of the accepted commits).

use crate::batch::Batch;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::tree::View;

/// A batch accepted by [`Db::commit_pipelined`] whose durability is pending.
///
/// Wait on it with [`CommitTicket::wait`]. Dropping a ticket without waiting still waits for the
/// record to become durable (ignoring the outcome), so an accepted commit is never left queued
/// behind without a writer.
#[must_use = "a pipelined commit is acknowledged only by CommitTicket::wait"]
pub struct CommitTicket {
    db: Db,
    version: u64,
    /// LSN of the queued record; `None` once waited for (or for an in-memory database).
    pending_lsn: Option<u64>,
    /// Holds a pin on the writer lock until the record is durable.
    pinned: bool,
}

impl std::fmt::Debug for CommitTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitTicket")
            .field("version", &self.version)
            .field("pending", &self.pending_lsn.is_some())
            .finish()
    }
}

impl CommitTicket {
    /// The commit version the batch was accepted at (the accepted version it was validated
    /// against plus one). It is durable and readable only after [`CommitTicket::wait`] returned.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Waits until the batch's WAL record is durable (`Durability::Sync`: fdatasync;
    /// `Buffered`: write) and the commit is visible to readers, then returns its commit version.
    /// Concurrent tickets share one group commit.
    ///
    /// Errors: `Io` when the group carrying this record failed to write or sync; `Poisoned` when
    /// an earlier group failed (this record was accepted on top of it and is never written). In
    /// both cases nothing of this batch is visible.
    pub fn wait(mut self) -> Result<u64> {
        self.finish()
    }

    fn finish(&mut self) -> Result<u64> {
        let durable = match self.pending_lsn.take() {
            Some(lsn) => self.db.inner.await_durable(lsn),
            None => Ok(()),
        };
        if std::mem::take(&mut self.pinned) {
            self.db.inner.unpin();
        }
        durable?;
        self.db.inner.commit_acknowledged();
        Ok(self.version)
    }
}

impl Drop for CommitTicket {
    fn drop(&mut self) {
        if self.pending_lsn.is_some() {
            // The outcome has no one to report to; the record is made durable (or the log is
            // poisoned) either way, exactly as if the ticket had been waited for.
            let _ = self.finish();
        } else if std::mem::take(&mut self.pinned) {
            self.db.inner.unpin();
        }
    }
}

impl Db {
    /// A consistent view of the newest **accepted** state: every batch accepted so far, including
    /// pipelined ones whose group commit has not reached `fdatasync` yet. Never blocks behind a
    /// commit.
    ///
    /// For planning only: batches built from it validate against exactly what it shows, but its
    /// contents must not be returned to a caller before they are durable — wait with
    /// [`Db::wait_visible`]`(view.version())` first. Readers that return data use [`Db::view`].
    pub fn accepted_view(&self) -> View {
        let state = self.inner.accepted();
        View {
            version: state.version,
            state,
            db_id: self.inner.id(),
        }
    }

    /// Validates `batch` against the newest accepted state and accepts it without waiting for
    /// durability (see the module docs): the version expectation and every predicate are checked
    /// first and on failure nothing is accepted; otherwise the batch becomes part of the state
    /// the next batch is validated against and its WAL record is queued for group commit.
    /// [`CommitTicket::wait`] returns once it is durable and visible.
    ///
    /// Errors (nothing accepted): `InvalidArgument` (empty batch, key > 64 KiB, value > 16 MiB,
    /// write to the `history` tree), `UnknownTree`, `VersionMismatch`, `PredicateFailed`,
    /// `Poisoned` after a WAL failure.
    pub fn commit_pipelined(&self, batch: Batch) -> Result<CommitTicket> {
        if batch.is_empty() {
            return Err(Error::InvalidArgument("empty batch".into()));
        }
        self.inner.pin()?;
        let accepted = match self.inner.accept(|tip| self.inner.build_commit(tip, batch)) {
            Ok(a) => a,
            Err(e) => {
                self.inner.unpin();
                return Err(e);
            }
        };
        Ok(CommitTicket {
            db: self.clone(),
            version: accepted.state.version,
            pending_lsn: accepted.pending_lsn,
            pinned: true,
        })
    }
}

#[cfg(test)]
mod tests;
