//! One GC pass: classify the candidates, prune the stale ones, collect the eligible ones.

use super::barrier::{advance_barrier, prospective_floor};
use super::drive::{drive, Driven};
use super::holds::{holds, in_flight_publications, wait_reasons};
use super::rows::{candidates, manifest_rows, owned, read_revision, step_digest};
use super::state::{
    Boundary, CollectedRevision, GcOptions, GcReport, ObjectRemover, WaitingRevision, MAX_ROUNDS,
    PRUNE_BATCH,
};
use crate::codec::{CommandResult, GcCandidate, GcCandidateKey, GcClaimState, RevisionState};
use crate::command::{Mutation, Predicate};
use crate::error::Result;
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, OperationId, RequestId};
use crate::ops::snapshot::SnapshotPolicy;
use crate::ops::{run_step, Step};
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};
use std::collections::{BTreeMap, BTreeSet};

/// How one candidate row stands at a snapshot.
pub(super) enum Class {
    /// Prune the row (superseded epoch, revision missing or Deleted).
    Stale,
    /// Claimed, Deleting or Quarantined: resume.
    InProgress,
    /// Claimable now.
    Eligible,
    /// Zero references, but held: `(last_zero_ref_version, in-flight publish)`.
    Waiting(u64, Option<OperationId>),
    /// Inconsistent rows (left for fsck to name; never claimed).
    Skip,
}

pub(super) fn classify<S: Snapshot>(
    snap: &S,
    key: &GcCandidateKey,
    cand: &GcCandidate,
    floor: u64,
    in_flight: &BTreeMap<ArtifactRevisionId, OperationId>,
) -> Result<Class> {
    let Some((_, row)) = read_revision(snap, &key.root, &key.revision)? else {
        return Ok(Class::Stale);
    };
    if row.state == RevisionState::Deleted || row.reference_epoch != key.reference_epoch {
        return Ok(Class::Stale);
    }
    match row.state {
        RevisionState::Deleting | RevisionState::Quarantined => return Ok(Class::InProgress),
        RevisionState::Deleted => return Ok(Class::Stale),
        RevisionState::Available => {}
    }
    if row.strong_reference_count != 0 || cand.claim_state != GcClaimState::Candidate {
        return Ok(Class::Skip);
    }
    let z = row
        .last_zero_ref_version
        .unwrap_or(cand.last_zero_ref_version);
    let flight = in_flight.get(&key.revision).copied();
    if floor > z && flight.is_none() {
        Ok(Class::Eligible)
    } else {
        Ok(Class::Waiting(z, flight))
    }
}

/// Runs one garbage-collection pass (see the module docs): raises the history floor (the durable
/// `history_retention_versions` wins over `policy`), prunes stale candidates, advances the
/// GcBarrier when a quiescent tip is all that holds a candidate, then claims, resumes and
/// reconciles revisions — at most `opts.max_revisions` — deleting their own objects through
/// `remover`. `observe` is called after each phase boundary's command (crash tests stop there).
///
/// Per-revision provider failures do not fail the pass: they are reported (quarantined,
/// interrupted) and the next pass resumes. A lost CAS (another collector or a reference
/// addition won) skips that revision.
///
/// Errors: [`Error::Fenced`] (not the current owner); [`Error::Codec`] for corrupt rows of a
/// revision being collected (its dependency set disagrees with its seal, a dependency reference
/// is missing); storage errors.
pub fn run_pass(
    shard: &MetaShard,
    policy: &SnapshotPolicy,
    opts: &GcOptions,
    remover: &mut dyn ObjectRemover,
    observe: &mut dyn FnMut(Boundary),
) -> Result<GcReport> {
    let root = shard.root_id();
    let retention =
        crate::ops::settings::history_retention_versions(shard, policy.history_retention_versions)?;
    let mut report = GcReport {
        dry_run: opts.dry_run,
        history_retention_versions: retention,
        ..GcReport::default()
    };
    // Expired workbenches first: their released paths become candidates of this same pass.
    report.expired_workbenches =
        crate::ops::expiry::sweep(shard, policy.skew_grace_ms, opts.dry_run)?;
    let mut budget = opts.max_revisions.unwrap_or(usize::MAX);
    let mut barrier_this_round = false;
    for _round in 0..MAX_ROUNDS {
        if !opts.dry_run {
            // A pass writes: the owner epoch advances before its first check (lazy epoch).
            shard.prepare_write()?;
            let snap = shard.inner.store.snapshot();
            crate::command::executor::check_handle_fences(&snap, &shard.inner.fence())?;
        }
        let floor = if opts.dry_run {
            prospective_floor(shard, retention)?
        } else {
            crate::ops::snapshot::maintain_history_floor(shard, policy)?
        };
        let in_flight = in_flight_publications(shard)?;
        let snap = shard.inner.store.snapshot();
        let tip = snap.version();
        let mut stale = Vec::new();
        let mut work = Vec::new();
        let mut waiting = Vec::new();
        for (key, bytes) in candidates(&snap, &root)? {
            let cand = GcCandidate::decode(&bytes)?;
            match classify(&snap, &key, &cand, floor, &in_flight)? {
                Class::Stale => stale.push((key, bytes)),
                Class::InProgress | Class::Eligible => work.push(key),
                Class::Waiting(z, flight) => waiting.push((key, z, flight)),
                Class::Skip => {}
            }
        }
        drop(snap);
        report.tip = tip;
        report.history_floor = floor;
        report.stale_candidates_pruned += stale.len() as u64;
        if !opts.dry_run {
            prune(shard, &stale)?;
        }
        // Holders are named only when something waits.
        let hold_list = if waiting.is_empty() {
            Vec::new()
        } else {
            holds(shard)?
        };
        let min_hold = hold_list.iter().map(|h| h.read_version).min();
        report.waiting = waiting
            .iter()
            .map(|(key, z, flight)| WaitingRevision {
                revision: key.revision,
                last_zero_ref_version: *z,
                reasons: wait_reasons(*z, floor, tip, retention, &hold_list, *flight),
            })
            .collect();
        // A quiescent tip is all that keeps a candidate: one barrier command makes the tip pass
        // it.
        let tip_only = |z: u64, flight: &Option<_>| {
            flight.is_none() && tip.saturating_sub(retention) == z && min_hold.is_none_or(|h| h > z)
        };
        let any_tip_only = waiting.iter().any(|(_, z, flight)| tip_only(*z, flight));
        if any_tip_only && opts.dry_run {
            // The real pass commits that barrier (or its own commands move the tip) and then
            // collects these candidates: preview them as collected instead of waiting.
            let tip_held: Vec<_> = waiting
                .iter()
                .filter(|(_, z, flight)| tip_only(*z, flight))
                .map(|(key, _, _)| *key)
                .collect();
            report
                .waiting
                .retain(|w| !tip_held.iter().any(|k| k.revision == w.revision));
            work.extend(tip_held);
        }
        if work.is_empty() {
            if any_tip_only && !barrier_this_round && !opts.dry_run {
                report.barrier_generation = Some(advance_barrier(shard)?);
                observe(Boundary::Barrier);
                barrier_this_round = true;
                continue;
            }
            break;
        }
        barrier_this_round = false;
        let mut progressed = false;
        for key in work {
            if budget == 0 {
                report.budget_exhausted = true;
                break;
            }
            budget -= 1;
            if opts.dry_run {
                if let Some(c) = preview(shard, &key)? {
                    report.collected.push(c);
                }
                continue;
            }
            match drive(shard, &key, remover, observe)? {
                Driven::Collected(c) => {
                    progressed = true;
                    report.collected.push(c);
                }
                Driven::Quarantined(q) => report.quarantined.push(q),
                Driven::Interrupted(i) => report.interrupted.push(i),
                Driven::Skipped => {}
            }
        }
        if opts.dry_run || !progressed || report.budget_exhausted {
            break;
        }
    }
    // Report the final state of the floor and tip.
    if !opts.dry_run {
        report.tip = shard.version()?;
        report.history_floor = shard.store().history_floor()?;
        let done: BTreeSet<ArtifactRevisionId> =
            report.collected.iter().map(|c| c.revision).collect();
        report.waiting.retain(|w| !done.contains(&w.revision));
    }
    Ok(report)
}

/// Prunes stale candidate rows (each predicated unchanged) in commands of ≤ [`PRUNE_BATCH`].
pub(super) fn prune(shard: &MetaShard, stale: &[(GcCandidateKey, Vec<u8>)]) -> Result<()> {
    for chunk in stale.chunks(PRUNE_BATCH) {
        run_step(shard, |snap| {
            let mut cmd = shard.command_header(
                RequestId::random()?,
                step_digest(
                    b"prune",
                    &OperationId([0; 16]),
                    &snap.version().to_be_bytes(),
                ),
                snap.version(),
                CommandResult::Applied {
                    value: chunk.len() as u64,
                },
            );
            for (key, bytes) in chunk {
                let k = key.encode();
                match snap.get(Family::GcCandidate, &k)? {
                    Some(now) if &now == bytes => {
                        cmd.predicates
                            .push(Predicate::equals(Family::GcCandidate, k.clone(), now));
                        cmd.mutations.push(Mutation::Delete {
                            family: Family::GcCandidate,
                            key: k,
                        });
                    }
                    _ => {}
                }
            }
            if cmd.mutations.is_empty() {
                return Ok(Step::Done(()));
            }
            Ok(Step::Command(Box::new(cmd), ()))
        })?;
    }
    Ok(())
}

/// What a dry run would collect for `key` (own objects at the current version).
pub(super) fn preview(
    shard: &MetaShard,
    key: &GcCandidateKey,
) -> Result<Option<CollectedRevision>> {
    let snap = shard.inner.store.snapshot();
    let Some((_, row)) = read_revision(&snap, &key.root, &key.revision)? else {
        return Ok(None);
    };
    let rows = manifest_rows(&snap, &key.root, &key.revision, 0, usize::MAX)?;
    let own = owned(&key.revision, &rows);
    let deps: BTreeSet<ArtifactRevisionId> = rows
        .iter()
        .map(|r| r.physical_owner_revision)
        .filter(|o| *o != key.revision)
        .collect();
    Ok(Some(CollectedRevision {
        revision: key.revision,
        logical_size: row.logical_size,
        objects: own.len() as u64,
        object_bytes: own.iter().map(|o| o.length).sum(),
        released_dependencies: deps.into_iter().collect(),
        commit_version: None,
        reconciled: row.state == RevisionState::Quarantined,
    }))
}
