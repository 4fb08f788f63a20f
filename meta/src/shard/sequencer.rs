//! The command sequencer: one per shard owner (docs/metadata-format.md, "Metadata Command": commit version =
//! read version + 1, every predicate re-checked in the batch).
//!
//! Without it, every operation plans its command at a freshly *readable* snapshot and the
//! executor fences `read_version` against the engine's newest *accepted* state; concurrent
//! writers of unrelated paths race that fence, lose, re-plan and eventually give up. With it,
//! planning and submission are serialized per shard:
//!
//! 1. [`MetaShard::sequenced`] takes the shard's sequencer lock;
//! 2. the section plans against [`Sequenced::snapshot`], a snapshot of the newest **accepted**
//!    state (`holt::Db::accepted_view`) — every command submitted before it, durable or not;
//! 3. [`Sequenced::execute`] runs the executor's checks against that snapshot and hands the batch
//!    to group commit without waiting for durability (`holt::Db::commit_pipelined`); the next
//!    command plans on top of it at once;
//! 4. the lock is released, then the section waits for the durability of everything it
//!    submitted (one shared `fdatasync` per group) and for the visibility of everything it read.
//!
//! Because the snapshot a command is planned on is exactly the state its batch is validated
//! against, the read-version fence always holds and a predicate fails only for a real reason (a
//! generation that moved, a name that is taken). Writes to different paths never fail or retry
//! for another writer's sake. The executor still re-checks every predicate inside the batch, and
//! the commit version is still `read_version + 1`.
//!
//! A failed group fails every command accepted on top of it: holt poisons its WAL when a group's
//! write or `fdatasync` fails, so every later ticket and submission returns the storage error.
//!
//! Data read from the accepted state is never returned before it is durable: a section that only
//! read (a replayed result, a precondition error, an idempotent no-op) still waits until the
//! accepted version it read is visible before its value or error is returned.
//!
//! Sections are short and CPU-only (point reads, bounded scans, command assembly); object-store
//! I/O never runs inside one. A section must not start another on the same thread (that would
//! deadlock); [`MetaShard::sequenced`] detects it and returns [`Error::InvalidArgument`].
//!
//! The handle's writes live here too, since each runs through the sequencer: the owner step
//! before a write (the lazy owner-epoch advance, RecoveryOutbox and history-floor maintenance),
//! [`MetaShard::prepare_write`], [`MetaShard::execute`] and
//! [`MetaShard::maintain_recovery_outbox`].

use std::cell::RefCell;
use std::sync::MutexGuard;

use super::handle::MetaShard;
use super::history_floor;
use crate::command::executor::{self, Submitted};
use crate::command::{CommandOutcome, MetadataCommand};
use crate::error::{Error, Result};
use crate::outbox::{MaintenanceReport, RetentionPolicy};
use crate::store::{CheckedWrite, PendingWrite, ShardSnapshot, Snapshot, TxnStore, WriteFailure};

thread_local! {
    /// Addresses of the sequencers this thread is inside of (re-entrance detection).
    static HELD: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Marks this thread as inside sequencer `.0` while alive (unwinding included).
struct Held(usize);

impl Held {
    fn enter(id: usize) {
        HELD.with(|h| h.borrow_mut().push(id));
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let id = self.0;
        HELD.with(|h| h.borrow_mut().retain(|held| *held != id));
    }
}

/// One sequenced section: the sequencer lock plus what the section submitted and read.
pub struct Sequenced<'a> {
    shard: &'a MetaShard,
    _guard: MutexGuard<'a, ()>,
    pending: Vec<PendingWrite>,
    /// The newest accepted version any snapshot of this section was taken at.
    read: u64,
    /// The pin on a holt writer lock shared between processes, held from before the section
    /// plans until everything it submitted is durable (`None` otherwise).
    hold: Option<holt::WriterHold>,
}

impl std::fmt::Debug for Sequenced<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sequenced")
            .field("pending", &self.pending.len())
            .field("read", &self.read)
            .finish()
    }
}

impl Sequenced<'_> {
    /// A snapshot of the newest accepted state, including the commands this and earlier sections
    /// submitted that are not durable yet. For planning: its version is the read version of the
    /// next command, and every command predicate is evaluated against exactly this state.
    pub fn snapshot(&mut self) -> ShardSnapshot {
        let snap = self.shard.inner.store.accepted_snapshot();
        self.read = self.read.max(snap.version());
        snap
    }

    /// [`MetaShard::prepare_write`] inside this section: a read-only handle answers
    /// [`Error::ReadOnly`]; a writer handle advances its owner epoch before its first write and
    /// runs the periodic RecoveryOutbox maintenance step. Both are durable commits, so a section
    /// that writes calls this before it takes its [`Sequenced::snapshot`]; called after, a commit
    /// it makes leaves the planned command stale ([`Error::ReadVersionConflict`], the caller
    /// re-plans).
    ///
    /// Errors: those of [`MetaShard::prepare_write`].
    pub fn prepare_write(&mut self) -> Result<()> {
        self.owner_step(true)
    }

    /// [`MetaShard::owner_step`] with this section's acquisition term and pending writes.
    fn owner_step(&mut self, maintain: bool) -> Result<()> {
        let term = self.hold.as_ref().map(holt::WriterHold::term);
        self.shard.owner_step(maintain, term, &mut self.pending)
    }

    /// Executes `cmd` (built on [`Sequenced::snapshot`]) through the executor's checks (see
    /// [`super::executor`]) against the newest accepted state and submits its batch to group
    /// commit. Returns the outcome at once; it is durable when the section ends without error.
    /// An exact request-id replay returns the stored result and submits nothing. A writer handle
    /// whose owner epoch is not persisted yet advances it first (then `cmd`, planned before that
    /// commit, meets a stale read version).
    ///
    /// Errors: [`Error::ReadOnly`] on a read-only handle; those of the owner-epoch advance;
    /// those of [`super::execute`]; nothing is submitted on any error.
    pub fn execute(&mut self, cmd: MetadataCommand) -> Result<CommandOutcome> {
        self.owner_step(false)?;
        let snap = self.snapshot();
        match executor::submit(
            &self.shard.inner.store,
            &self.shard.inner.fence(),
            &snap,
            cmd,
        )? {
            Submitted::Replay(out) => Ok(out),
            Submitted::Pending(out, pending) => {
                self.pending.push(pending);
                Ok(out)
            }
        }
    }

    /// Submits one raw checked write (the lease-clock observation, which is not a
    /// MetadataCommand) to group commit; returns its commit version (durable when the section
    /// ends without error).
    ///
    /// Errors: the write's failure (nothing submitted); [`Error::ReadOnly`] on a read-only
    /// handle and the owner-epoch advance's errors as [`WriteFailure::Other`].
    pub(crate) fn write(&mut self, write: CheckedWrite) -> std::result::Result<u64, WriteFailure> {
        self.owner_step(false).map_err(WriteFailure::Other)?;
        let pending = self.shard.inner.store.write_pipelined(write)?;
        let version = pending.version();
        self.read = self.read.max(version);
        self.pending.push(pending);
        Ok(version)
    }
}

impl MetaShard {
    /// Runs `section` under this shard's command sequencer (see the module docs): planning and
    /// submission are serialized, planning reads the newest accepted state, and the section's
    /// commands are pipelined into group commit. After the section the lock is released, then
    /// this call waits until every submitted command is durable and every version the section
    /// read is visible, and only then returns the section's value or error.
    ///
    /// Generic over the section's error type `E` (any error a [`crate::Error`] converts into).
    ///
    /// Errors: the section's error; else the first durability failure of a submitted command
    /// ([`Error::Storage`]: the group's I/O error or `Poisoned` — nothing of that command is
    /// visible); [`Error::InvalidArgument`] when called from inside a section on the same
    /// thread.
    pub fn sequenced<T, E: From<Error>>(
        &self,
        section: impl FnOnce(&mut Sequenced<'_>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let sequencer = &self.inner.sequencer;
        let id = sequencer.id();
        if HELD.with(|h| h.borrow().contains(&id)) {
            return Err(Error::invalid(
                "a metadata command section was started inside another on the same shard",
            )
            .into());
        }
        let guard = sequencer.lock.lock().unwrap_or_else(|p| p.into_inner());
        // A writer handle on a shared lock takes it (catching up with other writers) before
        // anything is planned.
        let hold = match &self.inner.owner {
            Some(_) => self.inner.store.hold_writer()?,
            None => None,
        };
        let mut seq = Sequenced {
            shard: self,
            _guard: guard,
            pending: Vec::new(),
            read: 0,
            hold,
        };
        // A new acquisition of a shared lock advances the owner epoch before the section plans
        // anything (pipelined: the section's first command joins its fdatasync), so every
        // snapshot of the section sees the new epoch and every command header built in it
        // carries it (docs/metadata-format.md, "Owner epochs of a shared writer lock").
        let advance = match seq.hold {
            Some(_) => seq.owner_step(false),
            None => Ok(()),
        };
        let value = match advance {
            Ok(()) => {
                Held::enter(id);
                let _held = Held(id);
                section(&mut seq)
            }
            Err(e) => Err(e.into()),
        };
        let Sequenced {
            shard: _,
            _guard: guard,
            pending,
            read,
            hold,
        } = seq;
        drop(guard);
        // The lock is released here: the next section plans on top while this one waits.
        let mut failure = None;
        for p in pending {
            if let Err(e) = p.wait() {
                failure.get_or_insert(e);
            }
        }
        if let Some(e) = failure {
            return Err(e.into());
        }
        if read > 0 {
            self.inner.store.wait_visible(read)?;
        }
        drop(hold);
        value
    }
}

/// The writes of a handle, each through the sequencer.
impl MetaShard {
    /// Runs before every write of this handle: a read-only handle answers
    /// [`crate::Error::ReadOnly`]; a writer handle advances the owner epoch at its first write,
    /// and afterwards runs one RecoveryOutbox maintenance step whenever the commit version has
    /// advanced by [`RetentionPolicy::maintenance_interval`] since the last one. Both are
    /// commits, made under the command sequencer (see [`crate::shard::sequencer`]); inside a
    /// sequenced section the operations call [`crate::shard::sequencer::Sequenced::prepare_write`]
    /// instead. A caller that plans raw commands for [`MetaShard::execute`] calls this first
    /// and plans at the version after it.
    ///
    /// Errors: [`crate::Error::ReadOnly`]; those of the epoch advance
    /// ([`crate::Error::Fenced`] when another owner advanced the epoch); a maintenance step that
    /// finds a corrupt record ([`crate::Error::RecoveryOutboxCorrupt`]) refuses the write;
    /// [`crate::Error::InvalidArgument`] when called inside a sequenced section of this shard.
    pub fn prepare_write(&self) -> Result<()> {
        self.sequenced(|seq| seq.prepare_write())
    }

    /// The owner side of [`MetaShard::prepare_write`], run with the sequencer held: with
    /// `maintain` false only the lazy epoch advance (used by the raw [`MetaShard::execute`],
    /// whose caller planned its command at a version a maintenance commit would make stale).
    /// `term` is the section's acquisition of a holt lock shared between processes (`None`
    /// otherwise): its advance is pipelined into `pending`, so the section's first command
    /// shares its fdatasync (docs/metadata-format.md, "Owner epochs of a shared writer lock").
    pub(crate) fn owner_step(
        &self,
        maintain: bool,
        term: Option<u64>,
        pending: &mut Vec<PendingWrite>,
    ) -> Result<()> {
        let Some(owner) = &self.inner.owner else {
            return Err(crate::error::Error::ReadOnly);
        };
        let store = &self.inner.store;
        let mut st = owner.state();
        match term {
            Some(term) => {
                let current = self.owner_epoch();
                if let Some((epoch, write)) =
                    owner.advance_for_term(store, &mut st, term, current)?
                {
                    self.inner
                        .owner_epoch
                        .store(epoch, std::sync::atomic::Ordering::Release);
                    st.last_step_version = write.version();
                    pending.push(write);
                    return Ok(());
                }
            }
            None => {
                if owner.advance_once(store, &mut st)? {
                    st.last_step_version = store.version();
                    return Ok(());
                }
            }
        }
        let interval = owner.retention.maintenance_interval.max(1);
        if maintain && store.version() >= st.last_step_version.saturating_add(interval) {
            st.last_step_version = store.version();
            match self.maintenance_step(&owner.retention) {
                Ok(_) => {}
                Err(e @ crate::error::Error::RecoveryOutboxCorrupt { .. }) => return Err(e),
                // A lost race or a transient failure leaves the step to the next interval.
                Err(_) => {}
            }
            if let Some(policy) = &owner.history_policy {
                // Best effort like the reaper's: a failure leaves the floor for the next step.
                let _ = history_floor::maintain_history_floor(self, policy);
            }
            st.last_step_version = store.version();
        }
        Ok(())
    }

    /// One RecoveryOutbox maintenance step written through the store (the caller holds the
    /// owner state lock and has advanced the epoch).
    fn maintenance_step(&self, retention: &RetentionPolicy) -> Result<MaintenanceReport> {
        let mut last = Ok(MaintenanceReport::default());
        for _ in 0..3 {
            // The newest accepted state: commands of earlier sequenced sections may still be on
            // their way to durability.
            let view = self.inner.store.accepted_snapshot();
            let plan = crate::outbox::plan_step(&view, retention, None, true)?;
            drop(view);
            if plan.is_empty() {
                return Ok(plan.report);
            }
            let report = plan.report;
            match self.inner.store.write(CheckedWrite {
                read_version: None,
                predicates: plan.predicates,
                mutations: plan.mutations,
            }) {
                Ok(_) => return Ok(report),
                Err(WriteFailure::Other(e)) => return Err(e),
                Err(_) => {
                    last = Err(crate::error::Error::ReadVersionConflict { attempts: 3 });
                }
            }
        }
        last
    }

    /// Runs one RecoveryOutbox maintenance step now (see [`crate::outbox`], "Retention"):
    /// reads back and verifies the records after the verified head, moves the head to the
    /// tail, and removes at most [`crate::outbox::MAX_PRUNE_STEP`] records the retention policy
    /// no longer keeps. A writer handle that has not written yet first advances its owner epoch
    /// (whose commit carries the step). Call it repeatedly while
    /// [`MaintenanceReport::more_to_prune`] is true to work off a backlog in bounded steps.
    ///
    /// Errors: [`crate::Error::ReadOnly`] for a read-only handle;
    /// [`crate::Error::RecoveryOutboxCorrupt`] when a record read back fails verification
    /// (nothing written); [`crate::Error::Fenced`]; [`crate::Error::ReadVersionConflict`] when
    /// concurrent maintenance kept winning; codec and storage errors.
    pub fn maintain_recovery_outbox(&self) -> Result<MaintenanceReport> {
        let Some(owner) = &self.inner.owner else {
            return Err(crate::error::Error::ReadOnly);
        };
        // Under the command sequencer, like every other commit of the handle.
        self.sequenced(|seq| {
            seq.owner_step(false)?;
            let store = &self.inner.store;
            let mut st = owner.state();
            let report = self.maintenance_step(&owner.retention)?;
            st.last_step_version = store.version();
            Ok(report)
        })
    }

    /// Executes one raw [`crate::command::MetadataCommand`] under this handle's fence (see
    /// [`crate::command::executor`] for the validation order) through the command sequencer
    /// (its `read_version` must be the newest accepted version, see
    /// [`crate::shard::sequencer`]); returns once it is durable. The workspace operations above
    /// are built on this; it is public for diagnostics and fault-injection tests.
    ///
    /// A writer handle that has not written yet advances its owner epoch first (a commit): plan
    /// raw commands after [`MetaShard::prepare_write`], or the first one meets a stale read
    /// version. `execute` itself never runs an outbox maintenance step.
    ///
    /// Errors: [`crate::Error::ReadOnly`] on a read-only handle; those of the owner-epoch
    /// advance before a writer handle's first write; those of [`crate::command::execute`].
    pub fn execute(
        &self,
        cmd: crate::command::MetadataCommand,
    ) -> Result<crate::command::CommandOutcome> {
        self.sequenced(|seq| seq.execute(cmd))
    }
}
