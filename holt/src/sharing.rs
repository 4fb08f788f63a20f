//! The public side of a writer lock shared between processes ([`crate::WriterLock::Shared`]):
//! [`Db::hold_writer`] (keep the lock across several commits that must see no other writer in
//! between), [`Db::refresh`] (catch up with other writers before reading), the acquisition term
//! and the recorded lock waits. The mechanism is `writer_lock.rs`; the catch-up is
//! `recovery.rs`; docs/holt-format.md, "Sharing the writer lock between processes", describes
//! both.

use crate::db::Db;
use crate::error::Result;

/// A pin on the writer lock ([`Db::hold_writer`]): while it lives this process keeps the lock,
/// so no other process writes between the commits made under it. Dropping it starts the idle
/// grace (the lock is released after it unless another write of this process comes first).
#[must_use = "the lock is held only while the WriterHold lives"]
pub struct WriterHold {
    db: Db,
    term: u64,
}

impl std::fmt::Debug for WriterHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterHold")
            .field("term", &self.term)
            .finish()
    }
}

impl WriterHold {
    /// The acquisition term this hold belongs to: 1 for the lock taken at open, one more for
    /// every later acquisition by this process. Two holds with the same term saw no other
    /// writer in between; a new term means the lock was released and taken again (other
    /// processes may have committed meanwhile, and this database has caught up with them).
    /// Always 1 for [`crate::WriterLock::Held`] and in-memory databases.
    pub fn term(&self) -> u64 {
        self.term
    }
}

impl Drop for WriterHold {
    fn drop(&mut self) {
        self.db.inner.unpin();
    }
}

impl Db {
    /// Pins the writer lock: with [`crate::WriterLock::Shared`], takes it if this process does
    /// not hold it — waiting up to the configured wait — and catches up with every record other
    /// writers committed since this process last held it (their WAL records are replayed, or the
    /// state is recovered again from the images when they flushed); then keeps it until the
    /// returned hold (and every other pin) is dropped plus the idle grace. With
    /// [`crate::WriterLock::Held`] (and for in-memory databases) it returns at once.
    ///
    /// Errors: `Error::ReadOnly` on a read-only database; `Error::Locked` when another process
    /// kept the lock for the whole wait; `Io`; `Corrupt` when the files another writer left
    /// cannot be recovered (the lock is released again, nothing changed).
    pub fn hold_writer(&self) -> Result<WriterHold> {
        if self.inner.is_read_only() {
            return Err(crate::Error::ReadOnly { op: "hold_writer" });
        }
        let term = self.inner.pin()?;
        Ok(WriterHold {
            db: self.clone(),
            term,
        })
    }

    /// Catches up with the commits of writers in other processes, so that [`Db::view`] shows
    /// them: [`Db::hold_writer`] and drop. A no-op (`Ok`) unless the lock is shared; a read-only
    /// database answers `Ok` and stays as of its open. Errors: as [`Db::hold_writer`].
    pub fn refresh(&self) -> Result<()> {
        if self.inner.is_read_only() {
            return Ok(());
        }
        self.hold_writer().map(drop)
    }

    /// Whether this database was opened with [`crate::WriterLock::Shared`].
    pub fn shares_writer_lock(&self) -> bool {
        self.inner.writer_lock().is_some_and(|l| l.is_shared())
    }

    /// Whether this process holds the writer lock right now (always true for
    /// [`crate::WriterLock::Held`] writers; false for read-only and in-memory databases).
    pub fn holds_writer_lock(&self) -> bool {
        self.inner.writer_lock().is_some_and(|l| l.held())
    }

    /// The most recent waits for the writer lock (at most 65,536), in microseconds, oldest
    /// first: one per acquisition after the open's. Empty unless the lock is shared.
    pub fn writer_lock_waits(&self) -> Vec<u64> {
        self.inner
            .writer_lock()
            .map(|l| l.wait_samples())
            .unwrap_or_default()
    }
}
