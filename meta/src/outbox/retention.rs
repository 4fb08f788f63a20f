//! Retention of RecoveryOutbox records and the verified chain head (see the parent module docs,
//! "Verification" and "Retention").
//!
//! One **maintenance step** is planned at one snapshot and written as one checked write by a writer
//! handle: it reads back and verifies the records after the verified head, moves the head to the
//! System tail, and removes at most [`MAX_PRUNE_STEP`] of the oldest records that the
//! [`RetentionPolicy`] no longer keeps (never a record above the verified head), recording the
//! new pruned chain point. Nothing here is an authoritative mutation: the rows are derived
//! recovery bookkeeping, like the System recovery tail, and get no outbox record of their own.

use super::record::{chunk_key, header_key, OutboxHeader};
use super::verify::{check_anchor, verify, OutboxSummary, Scope};
use crate::codec::system::{
    RecoveryTail, KEY_RECOVERY_PRUNED, KEY_RECOVERY_TAIL, KEY_RECOVERY_VERIFIED,
};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::store::Snapshot;
use crate::store::{Mutation, Predicate};

/// Most records one maintenance step removes (each with its header and chunk rows).
pub const MAX_PRUNE_STEP: u64 = 256;

/// Default [`RetentionPolicy::max_records`].
pub const DEFAULT_MAX_RECORDS: u64 = 1_024;
/// Default [`RetentionPolicy::max_bytes`]: 2 MiB of logical records.
pub const DEFAULT_MAX_BYTES: u64 = 2 * 1024 * 1024;
/// A writer handle runs one maintenance step whenever the shard's commit version has advanced
/// by this many versions since its last step (see the parent module docs, "Retention").
pub const MAINTENANCE_INTERVAL: u64 = 128;

/// How many RecoveryOutbox records below the applied recovery LSN a store keeps.
///
/// The newest records are kept while both bounds hold: at most `max_records` records and at most
/// `max_bytes` bytes of logical records (the sum of their `record_len`). Older records are
/// removed by maintenance steps, oldest first, at most [`MAX_PRUNE_STEP`] per step, and only once
/// they are at or below the verified chain head; records after the head are kept whatever their
/// number until a writer verifies them. Records carry no wall-clock time, so there is no age
/// bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Keep at most this many of the newest records (default [`DEFAULT_MAX_RECORDS`]).
    pub max_records: u64,
    /// Keep at most this many bytes of the newest logical records (default
    /// [`DEFAULT_MAX_BYTES`]).
    pub max_bytes: u64,
    /// A writer handle runs one maintenance step whenever the shard's commit version has
    /// advanced by this many versions since its last step (default
    /// [`MAINTENANCE_INTERVAL`], 128; at least 1). It bounds the records an open has to
    /// verify after the head, and the backlog retention works off per step.
    pub maintenance_interval: u64,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            max_records: DEFAULT_MAX_RECORDS,
            max_bytes: DEFAULT_MAX_BYTES,
            maintenance_interval: MAINTENANCE_INTERVAL,
        }
    }
}

/// The System chain points of a store, read at one view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainPoints {
    /// The applied tail (`System("recovery_tail")`).
    pub tail: RecoveryTail,
    /// The last pruned record (`System("recovery_pruned")`; genesis when absent).
    pub pruned: RecoveryTail,
    /// The verified head (`System("recovery_verified")`; the pruned point when absent).
    pub verified: RecoveryTail,
    /// Stored bytes of the pruned point (`None`: absent), for the step's predicate.
    pruned_bytes: Option<Vec<u8>>,
    /// Stored bytes of the verified head (`None`: absent), for the step's predicate.
    verified_bytes: Option<Vec<u8>>,
}

fn system_point<S: Snapshot>(snap: &S, key: &[u8]) -> Result<Option<(RecoveryTail, Vec<u8>)>> {
    match snap.get(Family::System, key)? {
        None => Ok(None),
        Some(b) => Ok(Some((RecoveryTail::decode(&b)?, b))),
    }
}

/// Reads the tail, the pruned point and the verified head at `snap`.
///
/// Errors: [`Error::Fenced`] without a recovery tail; [`Error::Codec`] for a malformed record;
/// storage errors.
pub fn read_points<S: Snapshot>(snap: &S) -> Result<ChainPoints> {
    let (tail, _) = system_point(snap, KEY_RECOVERY_TAIL)?.ok_or_else(|| Error::Fenced {
        reason: "no System recovery tail is recorded".into(),
    })?;
    let pruned = system_point(snap, KEY_RECOVERY_PRUNED)?;
    let verified = system_point(snap, KEY_RECOVERY_VERIFIED)?;
    let pruned_point = pruned.as_ref().map_or(RecoveryTail::GENESIS, |p| p.0);
    Ok(ChainPoints {
        tail,
        verified: verified.as_ref().map_or(pruned_point, |v| v.0),
        pruned: pruned_point,
        pruned_bytes: pruned.map(|p| p.1),
        verified_bytes: verified.map(|v| v.1),
    })
}

/// Verifies what an open must: the verified head is anchored in the stored chain and every
/// record after it, up to the tail, verifies ([`Scope::Suffix`]).
///
/// Errors: [`Error::RecoveryOutboxCorrupt`]; storage errors.
pub(crate) fn verify_after_head<S: Snapshot>(
    snap: &S,
    points: &ChainPoints,
) -> Result<OutboxSummary> {
    check_anchor(snap, &points.pruned, &points.verified, &points.tail)?;
    verify(snap, &points.verified, Scope::Suffix, &points.tail)
}

/// Verifies every retained record, from the pruned point to the tail ([`Scope::Full`]), and
/// that the verified head is anchored in it.
///
/// Errors: [`Error::RecoveryOutboxCorrupt`]; storage errors.
pub(crate) fn verify_all<S: Snapshot>(snap: &S, points: &ChainPoints) -> Result<OutboxSummary> {
    let summary = verify(snap, &points.pruned, Scope::Full, &points.tail)?;
    check_anchor(snap, &points.pruned, &points.verified, &points.tail)?;
    Ok(summary)
}

/// What one maintenance step did (or, before it is written, will do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MaintenanceReport {
    /// Records read back and verified by this step.
    pub verified_records: u64,
    /// The verified head after the step.
    pub verified_lsn: u64,
    /// Records removed by this step.
    pub pruned_records: u64,
    /// The last removed LSN after the step (0: none ever).
    pub pruned_through_lsn: u64,
    /// Records retained after the step.
    pub retained_records: u64,
    /// True when retention still has records to remove (another step is due).
    pub more_to_prune: bool,
}

/// The rows and predicates of one step.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepPlan {
    pub(crate) predicates: Vec<Predicate>,
    pub(crate) mutations: Vec<Mutation>,
    pub(crate) report: MaintenanceReport,
}

impl StepPlan {
    pub(crate) fn is_empty(&self) -> bool {
        self.mutations.is_empty()
    }
}

fn point_predicate(key: &[u8], stored: &Option<Vec<u8>>) -> Predicate {
    match stored {
        None => Predicate::absent(Family::System, key.to_vec()),
        Some(b) => Predicate::equals(Family::System, key.to_vec(), b.clone()),
    }
}

fn header_at<S: Snapshot>(snap: &S, lsn: u64) -> Result<OutboxHeader> {
    let bytes = snap
        .get(Family::RecoveryOutbox, &header_key(lsn))?
        .ok_or_else(|| Error::RecoveryOutboxCorrupt {
            lsn,
            reason: format!("record LSN {lsn} is missing"),
        })?;
    OutboxHeader::decode(&bytes).map_err(|e| Error::RecoveryOutboxCorrupt {
        lsn,
        reason: format!("malformed header: {e}"),
    })
}

/// The last LSN retention may remove at `points` (≤ the verified head; `points.pruned` when
/// nothing is due). Reads at most `policy.max_records + 1` headers.
fn prune_cut<S: Snapshot>(snap: &S, points: &ChainPoints, policy: &RetentionPolicy) -> Result<u64> {
    let (pruned, tail) = (points.pruned.applied_lsn, points.tail.applied_lsn);
    let retained = tail.saturating_sub(pruned);
    let mut cut = pruned;
    if retained > policy.max_records {
        cut = tail - policy.max_records;
    }
    // Newest first, sum record lengths until the byte bound is passed; everything at or below
    // the record that passes it goes.
    let mut bytes = 0u64;
    let mut lsn = tail;
    while lsn > cut {
        bytes = bytes.saturating_add(header_at(snap, lsn)?.record_len);
        if bytes > policy.max_bytes {
            cut = lsn;
            break;
        }
        lsn -= 1;
    }
    Ok(cut.min(points.verified.applied_lsn).max(pruned))
}

/// Plans one maintenance step at `snap` (see the module docs). `verified_at_open`, when given, is
/// a chain point this handle verified by reading at its open; the head moves to it without
/// reading those records again. With `read_back`, the records after the head are read back and
/// verified and the head moves to the tail.
///
/// Errors: [`Error::RecoveryOutboxCorrupt`] when a record read back fails verification (nothing
/// is planned); codec and storage errors.
pub(crate) fn plan_step<S: Snapshot>(
    snap: &S,
    policy: &RetentionPolicy,
    verified_at_open: Option<RecoveryTail>,
    read_back: bool,
) -> Result<StepPlan> {
    let mut points = read_points(snap)?;
    let mut plan = StepPlan::default();
    let mut head = points.verified;
    if let Some(v) = verified_at_open {
        if v.applied_lsn > head.applied_lsn && v.applied_lsn <= points.tail.applied_lsn {
            head = v;
        }
    }
    if read_back && points.tail.applied_lsn > head.applied_lsn {
        let from = ChainPoints {
            verified: head,
            ..points.clone()
        };
        let summary = verify_after_head(snap, &from)?;
        plan.report.verified_records = summary.records;
        head = points.tail;
    }
    if head != points.verified {
        plan.predicates.push(point_predicate(
            KEY_RECOVERY_VERIFIED,
            &points.verified_bytes,
        ));
        plan.mutations.push(Mutation::put(
            Family::System,
            KEY_RECOVERY_VERIFIED.to_vec(),
            head.encode(),
        ));
        points.verified = head;
    }
    plan.report.verified_lsn = head.applied_lsn;
    let cut = prune_cut(snap, &points, policy)?;
    let first = points.pruned.applied_lsn + 1;
    let end = cut.min(points.pruned.applied_lsn.saturating_add(MAX_PRUNE_STEP));
    let mut new_pruned = points.pruned;
    for lsn in first..=end {
        let header = header_at(snap, lsn)?;
        plan.mutations.push(Mutation::Delete {
            family: Family::RecoveryOutbox,
            key: header_key(lsn),
        });
        for index in 0..header.chunk_count {
            plan.mutations.push(Mutation::Delete {
                family: Family::RecoveryOutbox,
                key: chunk_key(lsn, index),
            });
        }
        new_pruned = RecoveryTail {
            applied_lsn: lsn,
            chain_digest: header.chain_digest,
        };
        plan.report.pruned_records += 1;
    }
    if new_pruned != points.pruned {
        plan.predicates
            .push(point_predicate(KEY_RECOVERY_PRUNED, &points.pruned_bytes));
        plan.mutations.push(Mutation::put(
            Family::System,
            KEY_RECOVERY_PRUNED.to_vec(),
            new_pruned.encode(),
        ));
    }
    plan.report.pruned_through_lsn = new_pruned.applied_lsn;
    plan.report.retained_records = points
        .tail
        .applied_lsn
        .saturating_sub(new_pruned.applied_lsn);
    plan.report.more_to_prune = cut > end;
    Ok(plan)
}
