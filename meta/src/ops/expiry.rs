//! Workbench expiry (docs/metadata-format.md, "Workbench Expiry").
//!
//! # The deadline
//!
//! [`set_expiry`] records an expiry deadline (Unix ms) in the workbench's WorkspaceCurrent marker
//! (value format version 3) or removes it ([`ExpirySetting::Never`]), with one command that
//! predicates the exact marker bytes and the persisted lease clock it decided on. A deadline at
//! or before the store clock expires the workbench at once (`Visible -> Expired`).
//!
//! # When a workbench is expired
//!
//! On the *store clock*, `max(wall clock of the deciding process, persisted lease-clock
//! high-water)` ([`crate::clock::store_clock_now`]): a marker in state `Expired`, or a `Visible`
//! marker whose deadline is at or before the store clock, is expired. Every read and write
//! resolves workbenches through [`crate::read::workspace_live`], so an expired workbench is
//! absent from every listing and answers `WorkspaceNotFound` everywhere before any writer has
//! recorded anything.
//!
//! # Why the clock cannot resurrect it
//!
//! Two durable facts, each enough on its own:
//!
//! 1. The first writer that finds a `Visible` marker past its deadline — the GC sweep
//!    ([`sweep`], every pass: `nokv gc` and the server's background maintenance) or
//!    [`set_expiry`] — writes `Visible -> Expired` (predicated on the marker bytes and the
//!    lease-clock row it decided on). `Expired` is terminal and independent of any clock.
//! 2. Every command that observes the lease clock (`set_expiry`, snapshot create and renew, the
//!    reaper while snapshots are live) persists its high-water, which never decreases: once one
//!    ran at or after the deadline, a process whose wall clock was set back still computes a
//!    store clock past the deadline.
//!
//! What neither covers: a deadline that passed while only readers (and writers that observe no
//! clock) ran, followed by a wall clock set back below the deadline before any GC pass. Those
//! readers saw the workbench expired and a later one sees it live again — but no write to it was
//! accepted in between (writers apply the same rule), so no durable state contradicts either
//! answer, and the first GC pass after the deadline makes it final.
//!
//! # Reclamation
//!
//! [`sweep`] (run first by every GC pass) marks expired workbenches `Expired` and removes their
//! PathCurrent rows in bounded batches, each ONE command of the path-removal shape
//! ([`crate::ops::remove`]): the row, its Path RevisionRef (count −1 / epoch +1, a GcCandidate at
//! zero) and its SecondaryIndex rows, without change events (the workbench's events are no
//! longer visible). Commits, tags and snapshots keep their own references and history holds, so
//! GC's rules decide what goes: a revision a commit holds stays, and stays restorable from the
//! commit. The marker, the incarnation claim, the commit head and the tags stay; the name is
//! never reused.
//!
//! # Cost
//!
//! A sweep scans the root's WorkspaceCurrent rows (one row per workbench; there is no index of
//! deadlines) at one snapshot and probes each `Expired` workbench's PathCurrent prefix there once
//! (limit 1): one already emptied costs nothing more. Only a workbench to mark or with paths left
//! takes command sections (the mark, then one per batch of [`MAX_PATHS_PER_BATCH`] paths).

use sha2::{Digest, Sha256};

use crate::codec::{
    path_current, workspace_current, CommandResult, PathEntry, WorkspaceCurrent,
    WorkspaceCurrentKey, WorkspaceState,
};
use crate::command::executor::check_handle_fences;
use crate::command::{Mutation, Predicate, MAX_COMMAND_EVENTS};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{validate_workbench_id, ArtifactRevisionId, RequestId};
use crate::ops::lease_clock::{self, LeaseReading};
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, Snapshot, TxnStore, MAX_SCAN_ITEMS};

use super::remove::{Removal, MAX_PATHS_PER_BATCH};

/// Domain separator of the expiry commands' digests.
const DIGEST_DOMAIN: &[u8] = b"nokv.workspace.expiry.v1\0";

/// What [`set_expiry`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpirySetting {
    /// Expire this many milliseconds after the store clock the command decides on.
    After(u64),
    /// Expire at this Unix millisecond on the store clock (at or before now: at once).
    At(u64),
    /// Never expire (removes a deadline).
    Never,
}

/// The latest deadline a workbench may have: 9999-12-31T23:59:59.999Z in Unix milliseconds. Its
/// RFC 3339 form has a four-digit year, and the number is below 2^53, so every JSON reader holds
/// it exactly.
pub const MAX_DEADLINE_UNIX_MS: u64 = 253_402_300_799_999;

impl ExpirySetting {
    /// The deadline on a store clock reading `now` (Unix ms). Errors: [`Error::InvalidArgument`]
    /// when the deadline is after [`MAX_DEADLINE_UNIX_MS`].
    fn deadline(self, now: u64) -> Result<Option<u64>> {
        let deadline = match self {
            ExpirySetting::After(ms) => now.checked_add(ms),
            ExpirySetting::At(d) => Some(d),
            ExpirySetting::Never => return Ok(None),
        };
        match deadline {
            Some(d) if d <= MAX_DEADLINE_UNIX_MS => Ok(Some(d)),
            _ => Err(Error::invalid(
                "the expiry is after 9999-12-31T23:59:59.999Z, the latest deadline a workbench \
                 may have (a workbench without a deadline never expires)",
            )),
        }
    }
}

/// The outcome of [`set_expiry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiryReceipt {
    /// The workbench.
    pub workbench_id: String,
    /// The deadline now recorded, Unix ms (`None`: never expires).
    pub expires_at_unix_ms: Option<u64>,
    /// The deadline recorded before, Unix ms.
    pub previous_expires_at_unix_ms: Option<u64>,
    /// True when the new deadline is at or before the store clock: the workbench is `Expired`.
    pub expired: bool,
    /// The store clock the decision was made on, Unix ms.
    pub clock_unix_ms: u64,
    /// Commit version of the change (`None`: the setting was already recorded, nothing written).
    pub commit_version: Option<u64>,
}

/// One expired workbench a [`sweep`] handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredWorkbench {
    /// The workbench.
    pub workbench_id: String,
    /// Its deadline (when it expired), Unix ms.
    pub expired_at_unix_ms: u64,
    /// True when this sweep recorded `Visible -> Expired` (false: already recorded, or a dry
    /// run).
    pub marked: bool,
    /// Paths this sweep removed (in a dry run: would remove).
    pub paths_released: u64,
    /// The distinct revisions whose Path reference this sweep released, in id order (a dry run
    /// lists those it would release).
    pub released_revisions: Vec<ArtifactRevisionId>,
}

fn digest(workbench_id: &str, what: &[u8], deadline: Option<u64>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(DIGEST_DOMAIN);
    h.update((workbench_id.len() as u32).to_be_bytes());
    h.update(workbench_id.as_bytes());
    h.update(what);
    match deadline {
        None => h.update([0u8]),
        Some(d) => {
            h.update([1u8]);
            h.update(d.to_be_bytes());
        }
    }
    h.finalize().into()
}

fn not_found(workbench_id: &str) -> Error {
    Error::WorkspaceNotFound {
        workbench_id: workbench_id.to_owned(),
    }
}

/// The command that writes `next` over the marker `ws_bytes`, bound to the lease clock `lease`.
fn marker_command<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    workbench_id: &str,
    ws_bytes: Vec<u8>,
    next: &WorkspaceCurrent,
    lease: &LeaseReading,
    what: &[u8],
) -> Result<crate::command::MetadataCommand> {
    let read_version = snap.version();
    let key = workspace_current::key(&shard.root_id(), workbench_id);
    let mut cmd = shard.command_header(
        RequestId::random()?,
        digest(workbench_id, what, next.expires_at_unix_ms),
        read_version,
        CommandResult::Applied {
            value: next.expires_at_unix_ms.unwrap_or(0),
        },
    );
    cmd.predicates = vec![
        Predicate::equals(Family::WorkspaceCurrent, key.clone(), ws_bytes),
        lease.predicate(),
    ];
    cmd.mutations = vec![Mutation::put(Family::WorkspaceCurrent, key, next.encode())];
    Ok(cmd)
}

/// The next commit version after `snap`. Errors: [`Error::InvalidArgument`] when exhausted.
fn next_version<S: Snapshot>(snap: &S) -> Result<u64> {
    snap.version()
        .checked_add(1)
        .ok_or_else(|| Error::invalid("commit version exhausted"))
}

/// Records (or removes) the expiry deadline of the live workbench `workbench_id` (see the module
/// docs): observes the lease clock (`skew_grace_ms` as for snapshot leases), then one command
/// predicated on the marker and the clock. Setting the recorded value again writes nothing. A
/// deadline at or before the store clock records `Expired` at once.
///
/// Errors: [`Error::InvalidArgument`] for an invalid id or a deadline beyond the clock's range;
/// [`Error::WorkspaceNotFound`] when the
/// workbench is absent, not visible, or already expired (a `Visible` marker found past its
/// deadline is first recorded `Expired`); [`Error::Fenced`]; [`Error::ReadOnly`];
/// [`Error::ReadVersionConflict`] after [`super::MAX_ATTEMPTS`]; codec and storage errors.
pub fn set_expiry(
    shard: &MetaShard,
    workbench_id: &str,
    setting: ExpirySetting,
    skew_grace_ms: u64,
) -> Result<ExpiryReceipt> {
    validate_workbench_id(workbench_id)?;
    let root = shard.root_id();
    let key = workspace_current::key(&root, workbench_id);
    super::sequenced_retrying(shard, |seq| {
        let lease = lease_clock::observe_in(shard, seq, shard.wall_unix_ms(), skew_grace_ms)?;
        let now = lease.now_unix_ms();
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence())?;
        let ws_bytes = snap
            .get(Family::WorkspaceCurrent, &key)?
            .ok_or_else(|| not_found(workbench_id))?;
        let ws = WorkspaceCurrent::decode(&ws_bytes)?;
        if ws.state != WorkspaceState::Visible {
            return Err(not_found(workbench_id));
        }
        let cv = next_version(&snap)?;
        if ws.expired_at(now).is_some() {
            // Found past its deadline: the first writer that sees it records it.
            let next = WorkspaceCurrent {
                state: WorkspaceState::Expired,
                modified_version: cv,
                ..ws.clone()
            };
            let cmd = marker_command(shard, &snap, workbench_id, ws_bytes, &next, &lease, b"mark")?;
            drop(snap);
            seq.execute(cmd)?;
            return Err(not_found(workbench_id));
        }
        let deadline = setting.deadline(now)?;
        if deadline == ws.expires_at_unix_ms {
            return Ok(ExpiryReceipt {
                workbench_id: workbench_id.to_owned(),
                expires_at_unix_ms: deadline,
                previous_expires_at_unix_ms: ws.expires_at_unix_ms,
                expired: false,
                clock_unix_ms: now,
                commit_version: None,
            });
        }
        let expired = deadline.is_some_and(|d| d <= now);
        let next = WorkspaceCurrent {
            state: if expired {
                WorkspaceState::Expired
            } else {
                WorkspaceState::Visible
            },
            expires_at_unix_ms: deadline,
            modified_version: cv,
            ..ws.clone()
        };
        let cmd = marker_command(shard, &snap, workbench_id, ws_bytes, &next, &lease, b"set")?;
        drop(snap);
        let out = seq.execute(cmd)?;
        Ok(ExpiryReceipt {
            workbench_id: workbench_id.to_owned(),
            expires_at_unix_ms: deadline,
            previous_expires_at_unix_ms: ws.expires_at_unix_ms,
            expired,
            clock_unix_ms: now,
            commit_version: Some(out.commit_version),
        })
    })
}

/// Every marker of the root that is expired on a store clock reading `now` (recorded `Expired`,
/// or `Visible` past its deadline), in workbench-id order: `(id, deadline, marker)`.
fn expired_markers<S: Snapshot>(
    snap: &S,
    shard: &MetaShard,
    now: u64,
) -> Result<Vec<(String, u64, WorkspaceCurrent)>> {
    let mut out = Vec::new();
    snap.for_each_row(
        Family::WorkspaceCurrent,
        shard.root_id().as_bytes(),
        "workspace_current",
        |key, value| {
            let ws = WorkspaceCurrent::decode(value)?;
            if let Some(expired_at) = ws.expired_at(now) {
                out.push((
                    WorkspaceCurrentKey::decode(key)?.workbench_id,
                    expired_at,
                    ws,
                ));
            }
            Ok(())
        },
    )?;
    Ok(out)
}

/// Up to `want` PathCurrent rows of the incarnation of `ws`, in key order.
fn paths_of<S: Snapshot>(
    snap: &S,
    shard: &MetaShard,
    ws: &WorkspaceCurrent,
    want: usize,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let spec = ScanSpec {
        prefix: path_current::children_prefix(&shard.root_id(), &ws.incarnation, None),
        start_after: None,
        delimiter: None,
        limit: want.clamp(1, MAX_SCAN_ITEMS),
    };
    snap.scan(Family::PathCurrent, &spec)?
        .into_iter()
        .map(|item| match item {
            ScanItem::Row { key, value } => Ok((key, value)),
            ScanItem::Prefix(_) => Err(Error::codec("path_current", "rollup in a recursive scan")),
        })
        .collect()
}

/// Records `Visible -> Expired` for the marker `bytes` of `workbench_id` if it is still exactly
/// that marker and still past its deadline on the store clock (one command). Returns whether this
/// call wrote it.
fn mark_expired(shard: &MetaShard, workbench_id: &str, skew_grace_ms: u64) -> Result<bool> {
    let key = workspace_current::key(&shard.root_id(), workbench_id);
    super::run_step(shard, |snap| {
        let Some(bytes) = snap.get(Family::WorkspaceCurrent, &key)? else {
            return Ok(super::Step::Done(false));
        };
        let ws = WorkspaceCurrent::decode(&bytes)?;
        let lease = lease_clock::peek(snap, shard.wall_unix_ms(), skew_grace_ms)?;
        if ws.state != WorkspaceState::Visible || ws.expired_at(lease.now_unix_ms()).is_none() {
            return Ok(super::Step::Done(false));
        }
        let next = WorkspaceCurrent {
            state: WorkspaceState::Expired,
            modified_version: next_version(snap)?,
            ..ws
        };
        let cmd = marker_command(shard, snap, workbench_id, bytes, &next, &lease, b"mark")?;
        Ok(super::Step::Command(Box::new(cmd), true))
    })
}

/// Removes the next batch of PathCurrent rows of the `Expired` workbench `workbench_id` in ONE
/// command (see the module docs). Returns the removed paths' revisions (empty: nothing left).
fn reclaim_batch(shard: &MetaShard, workbench_id: &str) -> Result<Vec<ArtifactRevisionId>> {
    let root = shard.root_id();
    let ws_key = workspace_current::key(&root, workbench_id);
    let want = MAX_PATHS_PER_BATCH.min(MAX_COMMAND_EVENTS);
    super::run_step(shard, |snap| {
        let Some(ws_bytes) = snap.get(Family::WorkspaceCurrent, &ws_key)? else {
            return Ok(super::Step::Done(Vec::new()));
        };
        let ws = WorkspaceCurrent::decode(&ws_bytes)?;
        if ws.state != WorkspaceState::Expired {
            return Ok(super::Step::Done(Vec::new()));
        }
        let rows = paths_of(snap, shard, &ws, want)?;
        if rows.is_empty() {
            return Ok(super::Step::Done(Vec::new()));
        }
        let cv = next_version(snap)?;
        let mut removal = Removal::new(root, &ws, workbench_id, cv);
        let mut released = Vec::new();
        for (key, bytes) in rows {
            let path = path_current::decode_key_path(&key)?;
            let entry = PathEntry::decode(&bytes)?;
            if !removal.add(snap, &path, bytes, &entry)? {
                break;
            }
            released.push(entry.artifact_revision_id);
        }
        // The workbench's events are no longer visible: the reclamation emits none.
        removal.events.clear();
        removal.finish(ws_key.clone(), ws_bytes)?;
        let mut cmd = shard.command_header(
            RequestId::random()?,
            digest(workbench_id, b"reclaim", ws.expires_at_unix_ms),
            snap.version(),
            CommandResult::Applied {
                value: released.len() as u64,
            },
        );
        cmd.predicates = removal.predicates;
        cmd.mutations = removal.mutations;
        Ok(super::Step::Command(Box::new(cmd), released))
    })
}

/// Counts what a sweep would release from the workbench `ws` (dry run): paths and distinct
/// revisions, reading every PathCurrent row of the incarnation.
fn would_release<S: Snapshot>(
    snap: &S,
    shard: &MetaShard,
    ws: &WorkspaceCurrent,
) -> Result<(u64, Vec<ArtifactRevisionId>)> {
    let mut paths = 0u64;
    let mut revisions = Vec::new();
    snap.for_each_row(
        Family::PathCurrent,
        &path_current::children_prefix(&shard.root_id(), &ws.incarnation, None),
        "path_current",
        |_, value| {
            paths += 1;
            revisions.push(PathEntry::decode(value)?.artifact_revision_id);
            Ok(())
        },
    )?;
    revisions.sort();
    revisions.dedup();
    Ok((paths, revisions))
}

/// The expiry sweep of a GC pass (see the module docs): on the store clock, records every
/// workbench found past its deadline as `Expired` (predicated on the marker and the lease-clock
/// row it decided on), and removes the PathCurrent rows of every `Expired` workbench in bounded
/// batches until none is left. It writes nothing when nothing expired. With `dry_run` it writes
/// nothing and reports what it would do. Returns the workbenches that
/// were marked or still held paths (an `Expired` workbench already empty is not listed).
///
/// Errors: [`Error::Fenced`]; [`Error::ReadOnly`] (a write due on a read-only handle);
/// [`Error::ReadVersionConflict`]; codec and storage errors.
pub fn sweep(
    shard: &MetaShard,
    skew_grace_ms: u64,
    dry_run: bool,
) -> Result<Vec<ExpiredWorkbench>> {
    // The sweep reads the store clock without writing it: a pass with nothing expired commits
    // nothing, and a marker it finds past its deadline is recorded Expired (the durable fact).
    let snap = shard.inner.store.snapshot();
    let now = crate::clock::store_clock_now(&snap, shard.wall_unix_ms())?;
    let expired = expired_markers(&snap, shard, now)?;
    let mut out = Vec::new();
    for (id, expired_at, ws) in expired {
        if dry_run {
            let (paths, revisions) = would_release(&snap, shard, &ws)?;
            if ws.state == WorkspaceState::Visible || paths > 0 {
                out.push(ExpiredWorkbench {
                    workbench_id: id,
                    expired_at_unix_ms: expired_at,
                    marked: false,
                    paths_released: paths,
                    released_revisions: revisions,
                });
            }
            continue;
        }
        // An Expired incarnation never gains a path (every writer refuses it), so one whose
        // paths are gone at this snapshot — every expired workbench on every pass after its
        // reclamation — costs this limit-1 probe and no command section.
        if ws.state == WorkspaceState::Expired && paths_of(&snap, shard, &ws, 1)?.is_empty() {
            continue;
        }
        let marked =
            ws.state == WorkspaceState::Visible && mark_expired(shard, &id, skew_grace_ms)?;
        let mut released = Vec::new();
        let mut paths = 0u64;
        loop {
            let batch = reclaim_batch(shard, &id)?;
            if batch.is_empty() {
                break;
            }
            paths += batch.len() as u64;
            released.extend(batch);
        }
        if marked || paths > 0 {
            released.sort();
            released.dedup();
            out.push(ExpiredWorkbench {
                workbench_id: id,
                expired_at_unix_ms: expired_at,
                marked,
                paths_released: paths,
                released_revisions: released,
            });
        }
    }
    Ok(out)
}

impl MetaShard {
    /// Records or removes a workbench's expiry deadline (see [`set_expiry`]).
    pub fn set_workspace_expiry(
        &self,
        workbench_id: &str,
        setting: ExpirySetting,
        skew_grace_ms: u64,
    ) -> Result<ExpiryReceipt> {
        set_expiry(self, workbench_id, setting, skew_grace_ms)
    }
}
