//! Leased snapshots and history holds (docs/metadata-format.md, "Snapshot Lifecycle And History Holds";
//! families SnapshotRef, SnapshotAlias, HistoryHold).
//!
//! ## Lifecycle
//!
//! - **Create** — one [`crate::command::MetadataCommand`] at one read version `R` writes the
//!   SnapshotRef (`read_version = R`, `Active`, lease deadline on the persisted lease clock,
//!   consumer count/epoch 0), the optional SnapshotAlias (latest mint wins: `alias_generation`
//!   +1, terminal projection cleared) and the `Active` HistoryHold(Snapshot, id) at `R`, plus a
//!   `SnapshotCreated` ChangeEvent. The snapshot id is the command's commit version `R + 1`:
//!   dense, never reused within the root, and exactly the numeric facade id.
//! - **Frozen reads** go through holt `view_at(R)` ([`open_at`]); the hold keeps the history floor
//!   at or below `R` until the hold is released.
//! - **Renew** is extend-only and CASes the exact SnapshotRef (and alias row when selected by
//!   name); it may revive an `Active` snapshot whose deadline passed but that was not claimed.
//! - **Retire** predicates `Active` with zero consumers at the expected consumer epoch, changes
//!   the state to `Retired`, deletes the hold and projects the terminal state onto the alias row
//!   when the alias still resolves to this snapshot (the alias never moves).
//! - **Reap** ([`reap`]) claims, after the skew grace, `Active -> ReapClaimed` with zero
//!   consumers and deletes the hold in the same command, then finalizes `ReapClaimed -> Reaped`
//!   (a crash in between is finished by the next pass). Afterwards it raises the holt history
//!   floor to `min(active holds, version - history_retention_versions)`
//!   ([`maintain_history_floor`]).
//! - **Consumers** (restore/fork): [`attach_consumer_parts`] and [`release_consumer_parts`] build
//!   the predicates and mutations a restore command splices into its own command;
//!   [`attach_consumer`] / [`release_consumer`] run them as standalone commands.
//!
//! Derived status: `alive` (Active, deadline later than the lease clock), `expired` (Active,
//! deadline passed, not yet claimed), `retired`, `reaped` (ReapClaimed or Reaped).
//!
//! ## Holds and the history floor
//!
//! Every HistoryHold row of the root (any kind and state) bounds the floor. A hold must be created
//! with `read_version` equal to the read version of the command that creates it (as every hold
//! written here is); the floor computed from any snapshot at version `V` is then `<= V`, which is
//! never above a hold committed after `V`.

pub use crate::shard::history_floor::{
    maintain_history_floor, min_hold_version, SnapshotPolicy, DEFAULT_HISTORY_RETENTION_VERSIONS,
};

use sha2::{Digest, Sha256};

use crate::codec::{
    snapshot_alias::SnapshotAliasKey, snapshot_ref::SnapshotRefKey, workbench_commit_head,
    workspace_current, workspace_incarnation_claim, ChangeEvent, ChangeKind, CommandResult,
    HistoryHold, HistoryHoldKey, HistoryHoldState, HoldId, SnapshotAlias, SnapshotRef,
    SnapshotState, WorkspaceCurrent, WorkspaceIncarnationClaim, WorkspaceState,
};
use crate::command::executor::{check_handle_fences, replay_lookup};
use crate::command::{CommandOutcome, Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{
    validate_workbench_id, AliasName, OperationId, RequestId, RootId, SnapshotId,
    WorkspaceIncarnationId,
};
use crate::read::Reader;
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};

use super::lease_clock::{self, LeaseReading};

/// Milliseconds in one day (the facade's `ttl_days` unit).
pub const DAY_MS: u64 = 86_400_000;
/// Longest lease one create/renew may grant: 90 days in ms (docs/workbench.md `ttl_days` 1–90).
pub const MAX_TTL_MS: u64 = 90 * DAY_MS;
/// Largest canonical annotation in bytes (docs/workbench.md: ≤4096 bytes).
pub const MAX_ANNOTATION_BYTES: usize = 4096;

/// Selects a snapshot within a workbench: the numeric id, or the alias (resolved to its latest
/// mint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotSelector {
    /// The numeric snapshot id.
    Id(SnapshotId),
    /// The alias (latest mint wins).
    Name(AliasName),
}

/// Derived snapshot status (docs/workbench.md `workbench_snapshot_list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotStatus {
    /// Active and its deadline is later than the lease clock.
    Alive,
    /// Active but its deadline passed; not yet claimed by the reaper (renew may revive it).
    Expired,
    /// Explicitly retired (terminal).
    Retired,
    /// Claimed by the reaper (`ReapClaimed` or `Reaped`; terminal).
    Reaped,
}

impl SnapshotStatus {
    /// The facade name: `alive`, `expired`, `retired` or `reaped`.
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotStatus::Alive => "alive",
            SnapshotStatus::Expired => "expired",
            SnapshotStatus::Retired => "retired",
            SnapshotStatus::Reaped => "reaped",
        }
    }

    /// The status of `record` on the lease clock of `lease`.
    pub fn of(record: &SnapshotRef, lease: &LeaseReading) -> SnapshotStatus {
        match record.state {
            SnapshotState::Active if lease.is_expired(record.lease_deadline_unix_ms) => {
                SnapshotStatus::Expired
            }
            SnapshotState::Active => SnapshotStatus::Alive,
            SnapshotState::Retired => SnapshotStatus::Retired,
            SnapshotState::ReapClaimed | SnapshotState::Reaped => SnapshotStatus::Reaped,
        }
    }
}

/// One snapshot as read at one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// The workbench.
    pub workbench_id: String,
    /// Its (visible) incarnation.
    pub incarnation: WorkspaceIncarnationId,
    /// Numeric snapshot id.
    pub snapshot_id: SnapshotId,
    /// The SnapshotRef value.
    pub record: SnapshotRef,
    /// Derived status on the lease clock of the reading.
    pub status: SnapshotStatus,
    /// Whether the record's alias currently resolves to this snapshot (`false` without alias or
    /// after a later mint of the same name).
    pub alias_current: bool,
    /// The alias row's generation when `alias_current`.
    pub alias_generation: Option<u64>,
}

/// Result of a create/renew/retire/consumer command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotReceipt {
    /// Numeric snapshot id.
    pub snapshot_id: SnapshotId,
    /// The SnapshotRef value after the command.
    pub record: SnapshotRef,
    /// Commit version of the command (the original one on replay; the read version for a
    /// no-op such as retiring an already retired snapshot).
    pub commit_version: u64,
    /// True when an earlier identical request's stored result was returned.
    pub idempotent_replay: bool,
    /// False when nothing was written (retire of an already retired snapshot).
    pub changed: bool,
}

/// A snapshot mint request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateSnapshotRequest {
    /// Replay identity.
    pub request_id: RequestId,
    /// Workbench to freeze (must be `Visible`).
    pub workbench_id: String,
    /// Optional alias; minting an existing name moves it to this snapshot.
    pub alias: Option<AliasName>,
    /// Lease length in ms (1 ..= [`MAX_TTL_MS`]).
    pub ttl_ms: u64,
    /// Canonical `{reason, metadata}` annotation bytes (≤ [`MAX_ANNOTATION_BYTES`]).
    pub annotation: Vec<u8>,
    /// Refuse ([`Error::SnapshotLifecycle`]) unless the workbench has a WorkbenchCommitHead (the
    /// facade's "only a committed workbench can be snapshotted").
    pub require_commit_head: bool,
}

/// A lease renewal request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenewSnapshotRequest {
    /// Replay identity.
    pub request_id: RequestId,
    /// Workbench.
    pub workbench_id: String,
    /// Which snapshot.
    pub selector: SnapshotSelector,
    /// New lease length from the lease clock now, ms (1 ..= [`MAX_TTL_MS`]).
    pub ttl_ms: u64,
}

/// A retirement request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetireSnapshotRequest {
    /// Replay identity.
    pub request_id: RequestId,
    /// Workbench.
    pub workbench_id: String,
    /// Which snapshot.
    pub selector: SnapshotSelector,
    /// Canonical `{metadata, reason}` retire annotation bytes (≤ [`MAX_ANNOTATION_BYTES`]),
    /// stored with the first retirement and never replaced (`None`: the retirement carries
    /// none).
    pub annotation: Option<Vec<u8>>,
}

/// What one reaper pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReapReport {
    /// Snapshots claimed (`Active -> ReapClaimed`, hold released) by this pass.
    pub claimed: Vec<(String, SnapshotId)>,
    /// Snapshots finalized `ReapClaimed -> Reaped` by this pass.
    pub finalized: u64,
    /// Expired snapshots skipped because restore/fork consumers hold them.
    pub skipped_with_consumers: u64,
    /// True when the wall clock was below the persisted high-water (nothing was claimed).
    pub clock_regressed: bool,
    /// The holt history floor after the pass.
    pub history_floor: u64,
}

/// Predicates and mutations a restore/fork command splices into its own command to attach or
/// release a snapshot consumer (docs/metadata-format.md: consumer count/epoch and HistoryHold(Restore) change
/// in the same command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerParts {
    /// Command predicates (exact SnapshotRef bytes, the hold row, the lease clock for attach).
    pub predicates: Vec<Predicate>,
    /// Command mutations (SnapshotRef count/epoch, HistoryHold(Restore, operation_id)).
    pub mutations: Vec<Mutation>,
    /// The snapshot's frozen read version (the source version a restore reads at).
    pub read_version: u64,
    /// The SnapshotRef after the command.
    pub record: SnapshotRef,
}

// ---------------------------------------------------------------------------------------------
// Resolution

/// An alias row: key, stored bytes, decoded value.
type AliasRow = (Vec<u8>, Vec<u8>, SnapshotAlias);

struct Resolved {
    id: SnapshotId,
    key: Vec<u8>,
    bytes: Vec<u8>,
    record: SnapshotRef,
    /// The alias row of the record's alias: (key, bytes, value).
    alias: Option<AliasRow>,
    /// True when the selector was a name (its alias row is then always predicated).
    by_name: bool,
}

fn visible_marker<S: Snapshot>(
    snap: &S,
    root: &RootId,
    workbench_id: &str,
) -> Result<(Vec<u8>, WorkspaceCurrent)> {
    validate_workbench_id(workbench_id)?;
    let not_found = || Error::WorkspaceNotFound {
        workbench_id: workbench_id.to_owned(),
    };
    let bytes = snap
        .get(
            Family::WorkspaceCurrent,
            &workspace_current::key(root, workbench_id),
        )?
        .ok_or_else(not_found)?;
    let ws = WorkspaceCurrent::decode(&bytes)?;
    if ws.state != WorkspaceState::Visible {
        return Err(not_found());
    }
    Ok((bytes, ws))
}

fn alias_key(root: &RootId, inc: &WorkspaceIncarnationId, alias: &AliasName) -> Vec<u8> {
    SnapshotAliasKey {
        root: *root,
        incarnation: *inc,
        alias: alias.clone(),
    }
    .encode()
}

fn ref_key(root: &RootId, inc: &WorkspaceIncarnationId, id: SnapshotId) -> Vec<u8> {
    SnapshotRefKey {
        root: *root,
        incarnation: *inc,
        snapshot_id: id,
    }
    .encode()
}

fn hold_key(root: &RootId, hold: HoldId) -> Vec<u8> {
    HistoryHoldKey { root: *root, hold }.encode()
}

/// [`Resolved`] for a snapshot addressed by id (reaper paths): its row plus the current alias
/// row of its name, if it has one.
fn resolved_by_id<S: Snapshot>(
    snap: &S,
    root: &RootId,
    k: &SnapshotRefKey,
    key: &[u8],
    bytes: &[u8],
    record: &SnapshotRef,
) -> Result<Resolved> {
    let alias = match &record.alias {
        None => None,
        Some(a) => read_alias(snap, alias_key(root, &k.incarnation, a))?,
    };
    Ok(Resolved {
        id: k.snapshot_id,
        key: key.to_vec(),
        bytes: bytes.to_vec(),
        record: record.clone(),
        alias,
        by_name: false,
    })
}

fn read_alias<S: Snapshot>(snap: &S, key: Vec<u8>) -> Result<Option<AliasRow>> {
    Ok(match snap.get(Family::SnapshotAlias, &key)? {
        None => None,
        Some(b) => {
            let v = SnapshotAlias::decode(&b)?;
            Some((key, b, v))
        }
    })
}

fn resolve<S: Snapshot>(
    snap: &S,
    root: &RootId,
    inc: &WorkspaceIncarnationId,
    selector: &SnapshotSelector,
) -> Result<Resolved> {
    let (id, by_name, name_alias) = match selector {
        SnapshotSelector::Id(id) => (*id, false, None),
        SnapshotSelector::Name(name) => {
            let Some(found) = read_alias(snap, alias_key(root, inc, name))? else {
                return Err(Error::SnapshotNotFound);
            };
            (found.2.snapshot_id, true, Some(found))
        }
    };
    let key = ref_key(root, inc, id);
    let bytes = snap
        .get(Family::SnapshotRef, &key)?
        .ok_or(Error::SnapshotNotFound)?;
    let record = SnapshotRef::decode(&bytes)?;
    let alias = match name_alias {
        Some(a) => Some(a),
        None => match &record.alias {
            None => None,
            Some(a) => read_alias(snap, alias_key(root, inc, a))?,
        },
    };
    Ok(Resolved {
        id,
        key,
        bytes,
        record,
        alias,
        by_name,
    })
}

fn info(
    workbench_id: &str,
    inc: WorkspaceIncarnationId,
    r: &Resolved,
    lease: &LeaseReading,
) -> SnapshotInfo {
    let current = r.alias.as_ref().filter(|(_, _, a)| a.snapshot_id == r.id);
    SnapshotInfo {
        workbench_id: workbench_id.to_owned(),
        incarnation: inc,
        snapshot_id: r.id,
        record: r.record.clone(),
        status: SnapshotStatus::of(&r.record, lease),
        alias_current: current.is_some(),
        alias_generation: current.map(|(_, _, a)| a.alias_generation),
    }
}

/// The alias predicate/mutation of a lifecycle change of `r` to terminal `state` (`None`: the
/// record stays Active, only a by-name CAS is needed).
fn alias_rows(r: &Resolved, terminal: Option<SnapshotState>) -> (Vec<Predicate>, Vec<Mutation>) {
    let Some((key, bytes, alias)) = &r.alias else {
        return (Vec::new(), Vec::new());
    };
    let points_here = alias.snapshot_id == r.id;
    let mut preds = Vec::new();
    let mut muts = Vec::new();
    if r.by_name || (points_here && terminal.is_some()) {
        preds.push(Predicate::equals(
            Family::SnapshotAlias,
            key.clone(),
            bytes.clone(),
        ));
    }
    if let (true, Some(state)) = (points_here, terminal) {
        muts.push(Mutation::put(
            Family::SnapshotAlias,
            key.clone(),
            SnapshotAlias {
                terminal_state: Some(state),
                ..*alias
            }
            .encode(),
        ));
    }
    (preds, muts)
}

fn snapshot_event(
    workbench_id: &str,
    inc: WorkspaceIncarnationId,
    kind: ChangeKind,
    id: SnapshotId,
) -> ChangeEvent {
    ChangeEvent {
        workbench_id: workbench_id.to_owned(),
        incarnation: inc,
        kind,
        path: None,
        before_generation: None,
        after_generation: Some(id.get()),
    }
}

fn receipt(out: CommandOutcome) -> Result<SnapshotReceipt> {
    match out.result {
        CommandResult::SnapshotLifecycle {
            snapshot_id,
            snapshot,
        } => Ok(SnapshotReceipt {
            snapshot_id,
            record: snapshot,
            commit_version: out.commit_version,
            idempotent_replay: out.idempotent_replay,
            changed: true,
        }),
        _ => Err(Error::RequestReplayMismatch),
    }
}

fn validate_ttl(ttl_ms: u64) -> Result<()> {
    if ttl_ms == 0 || ttl_ms > MAX_TTL_MS {
        return Err(Error::invalid(format!(
            "lease length must be 1 ..= {MAX_TTL_MS} ms (90 days)"
        )));
    }
    Ok(())
}

fn digest(domain: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(domain);
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    h.finalize().into()
}

fn selector_bytes(s: &SnapshotSelector) -> Vec<u8> {
    match s {
        SnapshotSelector::Id(id) => {
            let mut v = vec![1u8];
            v.extend_from_slice(&id.get().to_be_bytes());
            v
        }
        SnapshotSelector::Name(n) => {
            let mut v = vec![2u8];
            v.extend_from_slice(n.as_str().as_bytes());
            v
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Create / renew / retire

/// Mints a leased snapshot of `req.workbench_id` at the current read version (see the module
/// docs). The lease clock is observed at `wall_unix_ms` first.
///
/// Errors: [`Error::InvalidArgument`] (ttl, annotation size, workbench id);
/// [`Error::WorkspaceNotFound`]; [`Error::SnapshotLifecycle`] when `require_commit_head` and the
/// workbench has no commit head; [`Error::RequestReplayMismatch`]; [`Error::ReadVersionConflict`]
/// after [`super::MAX_ATTEMPTS`]; [`Error::Fenced`]; codec and storage errors.
pub fn create(
    shard: &MetaShard,
    req: &CreateSnapshotRequest,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotReceipt> {
    validate_workbench_id(&req.workbench_id)?;
    validate_ttl(req.ttl_ms)?;
    if req.annotation.len() > MAX_ANNOTATION_BYTES {
        return Err(Error::invalid(format!(
            "snapshot annotation is {} bytes; at most {MAX_ANNOTATION_BYTES} allowed",
            req.annotation.len()
        )));
    }
    let digest = digest(
        b"nokv.snapshot.create.v1\0",
        &[
            req.workbench_id.as_bytes(),
            req.alias
                .as_ref()
                .map_or(b"" as &[u8], |a| a.as_str().as_bytes()),
            &[
                u8::from(req.alias.is_some()),
                u8::from(req.require_commit_head),
            ],
            &req.ttl_ms.to_be_bytes(),
            &req.annotation,
        ],
    );
    let root = shard.root_id();
    super::sequenced_retrying(shard, |seq| {
        let lease = lease_clock::observe_in(shard, seq, wall_unix_ms, policy.skew_grace_ms)?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence)?;
        if let Some(out) = replay_lookup(&snap, &root, &req.request_id, &digest)? {
            return receipt(out);
        }
        let (ws_bytes, ws) = visible_marker(&snap, &root, &req.workbench_id)?;
        let inc = ws.incarnation;
        let mut predicates = vec![
            Predicate::equals(
                Family::WorkspaceCurrent,
                workspace_current::key(&root, &req.workbench_id),
                ws_bytes,
            ),
            lease.predicate(),
        ];
        if req.require_commit_head {
            let head_key = workbench_commit_head::WorkbenchCommitHeadKey {
                root,
                incarnation: inc,
            }
            .encode();
            let Some(head) = snap.get(Family::WorkbenchCommitHead, &head_key)? else {
                return Err(Error::SnapshotLifecycle {
                    reason: format!(
                        "workbench {:?} has no commit; only a committed workbench can be snapshotted",
                        req.workbench_id
                    ),
                });
            };
            predicates.push(Predicate::equals(
                Family::WorkbenchCommitHead,
                head_key,
                head,
            ));
        }
        let read_version = snap.version();
        let cv = read_version
            .checked_add(1)
            .ok_or_else(|| Error::invalid("commit version exhausted"))?;
        let id = SnapshotId(cv);
        let record = SnapshotRef {
            read_version,
            alias: req.alias.clone(),
            lease_deadline_unix_ms: lease.now_unix_ms().saturating_add(req.ttl_ms),
            state: SnapshotState::Active,
            consumer_count: 0,
            consumer_epoch: 0,
            annotation: req.annotation.clone(),
            retire_annotation: None,
        };
        let rkey = ref_key(&root, &inc, id);
        let hkey = hold_key(&root, HoldId::Snapshot(id));
        predicates.push(Predicate::absent(Family::SnapshotRef, rkey.clone()));
        predicates.push(Predicate::absent(Family::HistoryHold, hkey.clone()));
        let mut mutations = vec![
            Mutation::put(Family::SnapshotRef, rkey, record.encode()),
            Mutation::put(
                Family::HistoryHold,
                hkey,
                HistoryHold {
                    read_version,
                    source_snapshot_id: None,
                    state: HistoryHoldState::Active,
                    created_version: cv,
                }
                .encode(),
            ),
        ];
        if let Some(alias) = &req.alias {
            let akey = alias_key(&root, &inc, alias);
            let generation = match read_alias(&snap, akey.clone())? {
                None => {
                    predicates.push(Predicate::absent(Family::SnapshotAlias, akey.clone()));
                    1
                }
                Some((_, bytes, old)) => {
                    predicates.push(Predicate::equals(
                        Family::SnapshotAlias,
                        akey.clone(),
                        bytes,
                    ));
                    old.alias_generation.saturating_add(1)
                }
            };
            mutations.push(Mutation::put(
                Family::SnapshotAlias,
                akey,
                SnapshotAlias {
                    snapshot_id: id,
                    alias_generation: generation,
                    terminal_state: None,
                }
                .encode(),
            ));
        }
        let mut cmd = shard.command_header(
            req.request_id,
            digest,
            read_version,
            CommandResult::SnapshotLifecycle {
                snapshot_id: id,
                snapshot: record,
            },
        );
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        cmd.event_projection = vec![snapshot_event(
            &req.workbench_id,
            inc,
            ChangeKind::SnapshotCreated,
            id,
        )];
        drop(snap);
        receipt(seq.execute(cmd)?)
    })
}

/// Extends the lease of the selected snapshot to `lease clock now + ttl_ms` (extend-only; may
/// revive an expired but unclaimed snapshot).
///
/// Errors: [`Error::WorkspaceNotFound`]; [`Error::SnapshotNotFound`];
/// [`Error::SnapshotExpired`] (`reaped`) after the reaper's claim; [`Error::SnapshotLifecycle`]
/// for a retired snapshot or a deadline that would move earlier; [`Error::InvalidArgument`];
/// [`Error::ReadVersionConflict`]; [`Error::Fenced`]; codec and storage errors.
pub fn renew(
    shard: &MetaShard,
    req: &RenewSnapshotRequest,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotReceipt> {
    validate_ttl(req.ttl_ms)?;
    let digest = digest(
        b"nokv.snapshot.renew.v1\0",
        &[
            req.workbench_id.as_bytes(),
            &selector_bytes(&req.selector),
            &req.ttl_ms.to_be_bytes(),
        ],
    );
    let root = shard.root_id();
    super::sequenced_retrying(shard, |seq| {
        let lease = lease_clock::observe_in(shard, seq, wall_unix_ms, policy.skew_grace_ms)?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence)?;
        if let Some(out) = replay_lookup(&snap, &root, &req.request_id, &digest)? {
            return receipt(out);
        }
        let (_, ws) = visible_marker(&snap, &root, &req.workbench_id)?;
        let r = resolve(&snap, &root, &ws.incarnation, &req.selector)?;
        match r.record.state {
            SnapshotState::Active => {}
            SnapshotState::ReapClaimed | SnapshotState::Reaped => {
                return Err(Error::SnapshotExpired {
                    snapshot_id: r.id.get(),
                    status: "reaped",
                })
            }
            SnapshotState::Retired => {
                return Err(Error::SnapshotLifecycle {
                    reason: "the snapshot was retired and cannot be renewed".into(),
                })
            }
        }
        let deadline = lease.now_unix_ms().saturating_add(req.ttl_ms);
        if deadline < r.record.lease_deadline_unix_ms {
            return Err(Error::SnapshotLifecycle {
                reason: "renewal is extend-only: the requested lease ends before the current one"
                    .into(),
            });
        }
        let record = SnapshotRef {
            lease_deadline_unix_ms: deadline,
            ..r.record.clone()
        };
        let (mut predicates, _) = alias_rows(&r, None);
        predicates.push(Predicate::equals(
            Family::SnapshotRef,
            r.key.clone(),
            r.bytes.clone(),
        ));
        predicates.push(Predicate::equals(
            Family::HistoryHold,
            hold_key(&root, HoldId::Snapshot(r.id)),
            snap.get(
                Family::HistoryHold,
                &hold_key(&root, HoldId::Snapshot(r.id)),
            )?
            .ok_or_else(|| Error::codec("history_hold", "active snapshot without its hold"))?,
        ));
        predicates.push(lease.predicate());
        let read_version = snap.version();
        let mut cmd = shard.command_header(
            req.request_id,
            digest,
            read_version,
            CommandResult::SnapshotLifecycle {
                snapshot_id: r.id,
                snapshot: record.clone(),
            },
        );
        cmd.predicates = predicates;
        cmd.mutations = vec![Mutation::put(
            Family::SnapshotRef,
            r.key.clone(),
            record.encode(),
        )];
        cmd.event_projection = vec![snapshot_event(
            &req.workbench_id,
            ws.incarnation,
            ChangeKind::SnapshotRenewed,
            r.id,
        )];
        drop(snap);
        receipt(seq.execute(cmd)?)
    })
}

/// Retires the selected snapshot (retirement does not depend on the lease clock; `wall_unix_ms`
/// and `policy` keep the lifecycle calls uniform): `Active -> Retired` with zero consumers at the
/// expected epoch, its hold released, and the request's retire annotation stored in the same
/// SnapshotRef row (value version 2). Retiring an already retired snapshot writes nothing and
/// returns `changed = false` with the stored record — the *first* retirement's annotation, never
/// the retry's.
///
/// Errors: [`Error::InvalidArgument`] for an annotation over [`MAX_ANNOTATION_BYTES`];
/// [`Error::WorkspaceNotFound`]; [`Error::SnapshotNotFound`];
/// [`Error::ForkRetentionActive`] while restore/fork consumers hold it;
/// [`Error::SnapshotExpired`] (`reaped`) after the reaper's claim; [`Error::ReadVersionConflict`];
/// [`Error::Fenced`]; codec and storage errors.
pub fn retire(
    shard: &MetaShard,
    req: &RetireSnapshotRequest,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotReceipt> {
    let _ = (wall_unix_ms, policy);
    if req
        .annotation
        .as_ref()
        .is_some_and(|a| a.len() > MAX_ANNOTATION_BYTES)
    {
        return Err(Error::invalid(format!(
            "retire annotation is longer than {MAX_ANNOTATION_BYTES} bytes"
        )));
    }
    // A request without an annotation keeps its original digest.
    let selector = selector_bytes(&req.selector);
    let mut parts: Vec<&[u8]> = vec![req.workbench_id.as_bytes(), &selector];
    if let Some(a) = &req.annotation {
        parts.push(b"retire_annotation");
        parts.push(a);
    }
    let digest = digest(b"nokv.snapshot.retire.v1\0", &parts);
    let root = shard.root_id();
    super::sequenced_retrying(shard, |seq| {
        seq.prepare_write()?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence)?;
        if let Some(out) = replay_lookup(&snap, &root, &req.request_id, &digest)? {
            return receipt(out);
        }
        let (_, ws) = visible_marker(&snap, &root, &req.workbench_id)?;
        let r = resolve(&snap, &root, &ws.incarnation, &req.selector)?;
        match r.record.state {
            SnapshotState::Active => {}
            SnapshotState::Retired => {
                return Ok(SnapshotReceipt {
                    snapshot_id: r.id,
                    record: r.record,
                    commit_version: snap.version(),
                    idempotent_replay: false,
                    changed: false,
                })
            }
            SnapshotState::ReapClaimed | SnapshotState::Reaped => {
                return Err(Error::SnapshotExpired {
                    snapshot_id: r.id.get(),
                    status: "reaped",
                })
            }
        }
        if r.record.consumer_count > 0 {
            return Err(Error::ForkRetentionActive {
                snapshot_id: r.id.get(),
                consumer_count: r.record.consumer_count,
            });
        }
        let record = SnapshotRef {
            state: SnapshotState::Retired,
            retire_annotation: req.annotation.clone(),
            ..r.record.clone()
        };
        let (mut predicates, mut mutations) = alias_rows(&r, Some(SnapshotState::Retired));
        let hkey = hold_key(&root, HoldId::Snapshot(r.id));
        let hold = snap
            .get(Family::HistoryHold, &hkey)?
            .ok_or_else(|| Error::codec("history_hold", "active snapshot without its hold"))?;
        predicates.push(Predicate::equals(
            Family::SnapshotRef,
            r.key.clone(),
            r.bytes.clone(),
        ));
        predicates.push(Predicate::equals(Family::HistoryHold, hkey.clone(), hold));
        mutations.push(Mutation::put(
            Family::SnapshotRef,
            r.key.clone(),
            record.encode(),
        ));
        mutations.push(Mutation::Delete {
            family: Family::HistoryHold,
            key: hkey,
        });
        let mut cmd = shard.command_header(
            req.request_id,
            digest,
            snap.version(),
            CommandResult::SnapshotLifecycle {
                snapshot_id: r.id,
                snapshot: record,
            },
        );
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        cmd.event_projection = vec![snapshot_event(
            &req.workbench_id,
            ws.incarnation,
            ChangeKind::SnapshotRetired,
            r.id,
        )];
        drop(snap);
        receipt(seq.execute(cmd)?)
    })
}

// ---------------------------------------------------------------------------------------------
// Reads

/// The selected snapshot of a visible workbench with its derived status (read-only; the lease
/// clock is peeked, not written).
///
/// Errors: [`Error::WorkspaceNotFound`]; [`Error::SnapshotNotFound`]; codec and storage errors.
pub fn get(
    shard: &MetaShard,
    workbench_id: &str,
    selector: &SnapshotSelector,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotInfo> {
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let lease = lease_clock::peek(&snap, wall_unix_ms, policy.skew_grace_ms)?;
    let (_, ws) = visible_marker(&snap, &root, workbench_id)?;
    let r = resolve(&snap, &root, &ws.incarnation, selector)?;
    Ok(info(workbench_id, ws.incarnation, &r, &lease))
}

/// Every snapshot of a visible workbench's current incarnation in snapshot-id order (paged scans
/// of ≤255 rows), with derived statuses.
///
/// Errors: [`Error::WorkspaceNotFound`]; codec and storage errors.
pub fn list(
    shard: &MetaShard,
    workbench_id: &str,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<Vec<SnapshotInfo>> {
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let lease = lease_clock::peek(&snap, wall_unix_ms, policy.skew_grace_ms)?;
    let (_, ws) = visible_marker(&snap, &root, workbench_id)?;
    let mut prefix = root.as_bytes().to_vec();
    prefix.extend_from_slice(ws.incarnation.as_bytes());
    let mut out = Vec::new();
    for (key, bytes) in scan_all(&snap, Family::SnapshotRef, prefix)? {
        let k = SnapshotRefKey::decode(&key)?;
        let record = SnapshotRef::decode(&bytes)?;
        let alias = match &record.alias {
            None => None,
            Some(a) => read_alias(&snap, alias_key(&root, &ws.incarnation, a))?,
        };
        let r = Resolved {
            id: k.snapshot_id,
            key,
            bytes,
            record,
            alias,
            by_name: false,
        };
        out.push(info(workbench_id, ws.incarnation, &r, &lease));
    }
    Ok(out)
}

/// Opens a frozen [`Reader`] at the selected snapshot's read version (holt `view_at`), after
/// checking that the snapshot is alive on the lease clock.
///
/// Errors: [`Error::WorkspaceNotFound`]; [`Error::SnapshotNotFound`];
/// [`Error::SnapshotExpired`] with status `expired`, `retired` or `reaped` (also when the
/// history was pruned under a concurrent reap); codec and storage errors.
pub fn open_at(
    shard: &MetaShard,
    workbench_id: &str,
    selector: &SnapshotSelector,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<(SnapshotInfo, Reader)> {
    let info = get(shard, workbench_id, selector, wall_unix_ms, policy)?;
    let expired = |status| Error::SnapshotExpired {
        snapshot_id: info.snapshot_id.get(),
        status,
    };
    match info.status {
        SnapshotStatus::Alive => {}
        SnapshotStatus::Expired => return Err(expired("expired")),
        SnapshotStatus::Retired => return Err(expired("retired")),
        SnapshotStatus::Reaped => return Err(expired("reaped")),
    }
    match shard.read_at(info.record.read_version) {
        Ok(reader) => Ok((info, reader)),
        Err(Error::Storage(holt::Error::HistoryPruned { .. })) => Err(expired("reaped")),
        Err(e) => Err(e),
    }
}

/// All rows of one scan prefix ([`Snapshot::rows`]).
fn scan_all<S: Snapshot>(
    snap: &S,
    family: Family,
    prefix: Vec<u8>,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    snap.rows(family, &prefix, "snapshot")
}

// ---------------------------------------------------------------------------------------------
// Reaper and history floor

/// One reaper pass at wall clock `wall_unix_ms`: observes the lease clock, claims every
/// reapable snapshot of the root (`Active -> ReapClaimed`, hold released, `SnapshotReaped`
/// event), finalizes claimed ones to `Reaped`, then maintains the history floor. A regressed
/// wall clock claims nothing (see [`LeaseReading::may_reap`]).
///
/// Errors: [`Error::Fenced`]; codec and storage errors. Per-snapshot CAS losses are skipped
/// (the next pass re-evaluates them).
pub fn reap(shard: &MetaShard, wall_unix_ms: u64, policy: &SnapshotPolicy) -> Result<ReapReport> {
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let rows = scan_all(&snap, Family::SnapshotRef, root.as_bytes().to_vec())?;
    let mut live = false;
    for (_, bytes) in &rows {
        let state = SnapshotRef::decode(bytes)?.state;
        live |= matches!(state, SnapshotState::Active | SnapshotState::ReapClaimed);
    }
    // The lease clock is observed (a durable command) only when a lease can be acted on; with
    // no live snapshot a read-only reading suffices, so opening a store without snapshots writes
    // nothing for the reaper.
    let lease = if live {
        drop(snap);
        lease_clock::observe(shard, wall_unix_ms, policy.skew_grace_ms)?
    } else {
        let reading = lease_clock::peek(&snap, wall_unix_ms, policy.skew_grace_ms)?;
        drop(snap);
        reading
    };
    let mut report = ReapReport {
        clock_regressed: lease.regressed(),
        ..ReapReport::default()
    };
    for (key, bytes) in rows {
        let k = SnapshotRefKey::decode(&key)?;
        let record = SnapshotRef::decode(&bytes)?;
        match record.state {
            SnapshotState::Active if lease.may_reap(record.lease_deadline_unix_ms) => {
                if record.consumer_count > 0 {
                    report.skipped_with_consumers += 1;
                    continue;
                }
                match claim(shard, &k, &lease) {
                    Ok(Some(wb)) => report.claimed.push((wb, k.snapshot_id)),
                    Ok(None) => {}
                    Err(Error::ReadVersionConflict { .. }) | Err(Error::CommandPredicateFailed) => {
                    }
                    Err(e) => return Err(e),
                }
                if finalize(shard, &k)? {
                    report.finalized += 1;
                }
            }
            SnapshotState::ReapClaimed if finalize(shard, &k)? => report.finalized += 1,
            _ => {}
        }
    }
    report.history_floor = maintain_history_floor(shard, policy)?;
    Ok(report)
}

fn workbench_of<S: Snapshot>(
    snap: &S,
    root: &RootId,
    inc: &WorkspaceIncarnationId,
) -> Result<String> {
    let b = snap
        .get(
            Family::WorkspaceIncarnationClaim,
            &workspace_incarnation_claim::key(root, inc),
        )?
        .ok_or_else(|| {
            Error::codec(
                "workspace_incarnation_claim",
                "snapshot of an unclaimed incarnation",
            )
        })?;
    Ok(WorkspaceIncarnationClaim::decode(&b)?.workbench_id)
}

/// Claims one snapshot (`Active -> ReapClaimed`, hold deleted) if it is still reapable at a fresh
/// snapshot. Returns its workbench id when this call claimed it.
fn claim(shard: &MetaShard, k: &SnapshotRefKey, lease: &LeaseReading) -> Result<Option<String>> {
    let root = shard.root_id();
    super::sequenced_retrying(shard, |seq| {
        seq.prepare_write()?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence)?;
        let key = k.encode();
        let Some(bytes) = snap.get(Family::SnapshotRef, &key)? else {
            return Ok(None);
        };
        let record = SnapshotRef::decode(&bytes)?;
        if record.state != SnapshotState::Active
            || record.consumer_count > 0
            || !lease.may_reap(record.lease_deadline_unix_ms)
        {
            return Ok(None);
        }
        let workbench_id = workbench_of(&snap, &root, &k.incarnation)?;
        let r = resolved_by_id(&snap, &root, k, &key, &bytes, &record)?;
        let next = SnapshotRef {
            state: SnapshotState::ReapClaimed,
            ..record
        };
        let (mut predicates, mut mutations) = alias_rows(&r, Some(SnapshotState::ReapClaimed));
        let hkey = hold_key(&root, HoldId::Snapshot(k.snapshot_id));
        match snap.get(Family::HistoryHold, &hkey)? {
            Some(h) => {
                predicates.push(Predicate::equals(Family::HistoryHold, hkey.clone(), h));
                mutations.push(Mutation::Delete {
                    family: Family::HistoryHold,
                    key: hkey,
                });
            }
            None => predicates.push(Predicate::absent(Family::HistoryHold, hkey)),
        }
        predicates.push(Predicate::equals(Family::SnapshotRef, key.clone(), bytes));
        predicates.push(lease.predicate());
        mutations.push(Mutation::put(Family::SnapshotRef, key, next.encode()));
        let digest = digest(
            b"nokv.snapshot.reap_claim.v1\0",
            &[&k.encode(), &snap.version().to_be_bytes()],
        );
        let mut cmd = shard.command_header(
            RequestId::random()?,
            digest,
            snap.version(),
            CommandResult::SnapshotLifecycle {
                snapshot_id: k.snapshot_id,
                snapshot: next,
            },
        );
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        cmd.event_projection = vec![snapshot_event(
            &workbench_id,
            k.incarnation,
            ChangeKind::SnapshotReaped,
            k.snapshot_id,
        )];
        drop(snap);
        seq.execute(cmd)?;
        Ok(Some(workbench_id))
    })
}

/// `ReapClaimed -> Reaped` (terminal), alias projection updated. Returns whether it wrote.
fn finalize(shard: &MetaShard, k: &SnapshotRefKey) -> Result<bool> {
    let root = shard.root_id();
    super::sequenced_retrying(shard, |seq| {
        seq.prepare_write()?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence)?;
        let key = k.encode();
        let Some(bytes) = snap.get(Family::SnapshotRef, &key)? else {
            return Ok(false);
        };
        let record = SnapshotRef::decode(&bytes)?;
        if record.state != SnapshotState::ReapClaimed {
            return Ok(false);
        }
        let r = resolved_by_id(&snap, &root, k, &key, &bytes, &record)?;
        let next = SnapshotRef {
            state: SnapshotState::Reaped,
            ..record
        };
        let (mut predicates, mut mutations) = alias_rows(&r, Some(SnapshotState::Reaped));
        predicates.push(Predicate::equals(Family::SnapshotRef, key.clone(), bytes));
        mutations.push(Mutation::put(Family::SnapshotRef, key, next.encode()));
        let digest = digest(
            b"nokv.snapshot.reap_finalize.v1\0",
            &[&k.encode(), &snap.version().to_be_bytes()],
        );
        let mut cmd = shard.command_header(
            RequestId::random()?,
            digest,
            snap.version(),
            CommandResult::SnapshotLifecycle {
                snapshot_id: k.snapshot_id,
                snapshot: next,
            },
        );
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        drop(snap);
        seq.execute(cmd)?;
        Ok(true)
    })
}

// ---------------------------------------------------------------------------------------------
// Consumers (restore / fork)

/// Builds the parts that attach restore/fork operation `operation_id` as a consumer of snapshot
/// `snapshot_id` of incarnation `inc`, at `snap` (whose version must be the read version of the
/// command the parts go into): predicates on the exact `Active` SnapshotRef, the lease clock of
/// `lease` and an absent HistoryHold(Restore, operation_id); mutations incrementing
/// `consumer_count`/`consumer_epoch` and creating that `Active` hold at the snapshot's read
/// version with `source_snapshot_id`. docs/metadata-format.md, "Restore Closure".
///
/// Errors: [`Error::SnapshotNotFound`]; [`Error::SnapshotExpired`] unless the snapshot is
/// `Active` with a deadline later than the lease clock; [`Error::SnapshotLifecycle`] when the
/// operation is already attached; codec and storage errors.
pub fn attach_consumer_parts<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    inc: &WorkspaceIncarnationId,
    snapshot_id: SnapshotId,
    operation_id: OperationId,
    lease: &LeaseReading,
) -> Result<ConsumerParts> {
    let root = shard.root_id();
    let r = resolve(snap, &root, inc, &SnapshotSelector::Id(snapshot_id))?;
    let status = SnapshotStatus::of(&r.record, lease);
    if status != SnapshotStatus::Alive {
        return Err(Error::SnapshotExpired {
            snapshot_id: snapshot_id.get(),
            status: status.as_str(),
        });
    }
    let hkey = hold_key(&root, HoldId::Restore(operation_id));
    if snap.get(Family::HistoryHold, &hkey)?.is_some() {
        return Err(Error::SnapshotLifecycle {
            reason: "the operation already holds this snapshot".into(),
        });
    }
    let cv = snap
        .version()
        .checked_add(1)
        .ok_or_else(|| Error::invalid("commit version exhausted"))?;
    let record = SnapshotRef {
        consumer_count: r.record.consumer_count.saturating_add(1),
        consumer_epoch: r.record.consumer_epoch.saturating_add(1),
        ..r.record.clone()
    };
    Ok(ConsumerParts {
        predicates: vec![
            Predicate::equals(Family::SnapshotRef, r.key.clone(), r.bytes.clone()),
            Predicate::absent(Family::HistoryHold, hkey.clone()),
            lease.predicate(),
        ],
        mutations: vec![
            Mutation::put(Family::SnapshotRef, r.key.clone(), record.encode()),
            Mutation::put(
                Family::HistoryHold,
                hkey,
                HistoryHold {
                    read_version: r.record.read_version,
                    source_snapshot_id: Some(snapshot_id),
                    state: HistoryHoldState::Active,
                    created_version: cv,
                }
                .encode(),
            ),
        ],
        read_version: r.record.read_version,
        record,
    })
}

/// Builds the parts that release consumer `operation_id` from snapshot `snapshot_id`: predicates
/// on the exact SnapshotRef and the present HistoryHold(Restore, operation_id); mutations
/// decrementing `consumer_count`, incrementing `consumer_epoch` and deleting the hold. Works in
/// any snapshot state (a snapshot with consumers cannot be retired or reaped).
///
/// Errors: [`Error::SnapshotNotFound`]; [`Error::SnapshotLifecycle`] when the operation holds no
/// consumer on it (or the count is already zero); codec and storage errors.
pub fn release_consumer_parts<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    inc: &WorkspaceIncarnationId,
    snapshot_id: SnapshotId,
    operation_id: OperationId,
) -> Result<ConsumerParts> {
    let root = shard.root_id();
    let r = resolve(snap, &root, inc, &SnapshotSelector::Id(snapshot_id))?;
    let hkey = hold_key(&root, HoldId::Restore(operation_id));
    let Some(hold) = snap.get(Family::HistoryHold, &hkey)? else {
        return Err(Error::SnapshotLifecycle {
            reason: "the operation holds no consumer on this snapshot".into(),
        });
    };
    let decoded = HistoryHold::decode(&hold)?;
    if decoded.source_snapshot_id != Some(snapshot_id) || r.record.consumer_count == 0 {
        return Err(Error::SnapshotLifecycle {
            reason: "the operation's hold does not consume this snapshot".into(),
        });
    }
    let record = SnapshotRef {
        consumer_count: r.record.consumer_count - 1,
        consumer_epoch: r.record.consumer_epoch.saturating_add(1),
        ..r.record.clone()
    };
    Ok(ConsumerParts {
        predicates: vec![
            Predicate::equals(Family::SnapshotRef, r.key.clone(), r.bytes.clone()),
            Predicate::equals(Family::HistoryHold, hkey.clone(), hold),
        ],
        mutations: vec![
            Mutation::put(Family::SnapshotRef, r.key.clone(), record.encode()),
            Mutation::Delete {
                family: Family::HistoryHold,
                key: hkey,
            },
        ],
        read_version: r.record.read_version,
        record,
    })
}

fn consumer_command(
    shard: &MetaShard,
    workbench_id: &str,
    snapshot_id: SnapshotId,
    operation_id: OperationId,
    attach: bool,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotReceipt> {
    let root = shard.root_id();
    super::sequenced_retrying(shard, |seq| {
        let lease = lease_clock::observe_in(shard, seq, wall_unix_ms, policy.skew_grace_ms)?;
        let snap = seq.snapshot();
        check_handle_fences(&snap, &shard.inner.fence)?;
        let (_, ws) = visible_marker(&snap, &root, workbench_id)?;
        let parts = if attach {
            attach_consumer_parts(
                shard,
                &snap,
                &ws.incarnation,
                snapshot_id,
                operation_id,
                &lease,
            )?
        } else {
            release_consumer_parts(shard, &snap, &ws.incarnation, snapshot_id, operation_id)?
        };
        let digest = digest(
            b"nokv.snapshot.consumer.v1\0",
            &[
                &[u8::from(attach)],
                &snapshot_id.get().to_be_bytes(),
                operation_id.as_bytes(),
                &snap.version().to_be_bytes(),
            ],
        );
        let mut cmd = shard.command_header(
            RequestId::random()?,
            digest,
            snap.version(),
            CommandResult::SnapshotLifecycle {
                snapshot_id,
                snapshot: parts.record,
            },
        );
        cmd.predicates = parts.predicates;
        cmd.mutations = parts.mutations;
        drop(snap);
        receipt(seq.execute(cmd)?)
    })
}

/// Attaches `operation_id` as a restore/fork consumer of a snapshot of `workbench_id` in its own
/// command (see [`attach_consumer_parts`]; a restore normally splices the parts into its
/// preparing command instead).
///
/// Errors: those of [`attach_consumer_parts`], plus [`Error::WorkspaceNotFound`],
/// [`Error::ReadVersionConflict`] and [`Error::Fenced`].
pub fn attach_consumer(
    shard: &MetaShard,
    workbench_id: &str,
    snapshot_id: SnapshotId,
    operation_id: OperationId,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotReceipt> {
    consumer_command(
        shard,
        workbench_id,
        snapshot_id,
        operation_id,
        true,
        wall_unix_ms,
        policy,
    )
}

/// Releases consumer `operation_id` from a snapshot of `workbench_id` in its own command (see
/// [`release_consumer_parts`]).
///
/// Errors: those of [`release_consumer_parts`], plus [`Error::WorkspaceNotFound`],
/// [`Error::ReadVersionConflict`] and [`Error::Fenced`].
pub fn release_consumer(
    shard: &MetaShard,
    workbench_id: &str,
    snapshot_id: SnapshotId,
    operation_id: OperationId,
    wall_unix_ms: u64,
    policy: &SnapshotPolicy,
) -> Result<SnapshotReceipt> {
    consumer_command(
        shard,
        workbench_id,
        snapshot_id,
        operation_id,
        false,
        wall_unix_ms,
        policy,
    )
}

// ---------------------------------------------------------------------------------------------
// Invariants

/// Recomputes the snapshot/hold invariants of the root from the rows at one version and returns
/// every violation (empty when consistent). A diagnostic for tests and fsck-style checks:
///
/// - an `Active` SnapshotRef has an `Active` HistoryHold(Snapshot, id) at its read version, and a
///   non-`Active` one has none;
/// - `consumer_count` equals the number of HistoryHold(Restore) rows naming the snapshot;
/// - every SnapshotAlias resolves to an existing SnapshotRef of its incarnation that carries the
///   alias, and its terminal projection matches a non-`Active` state;
/// - the holt history floor is at or below every hold's read version.
///
/// Errors: codec and storage errors.
pub fn check_invariants(shard: &MetaShard) -> Result<Vec<String>> {
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let mut problems = Vec::new();
    let mut holds = std::collections::BTreeMap::new();
    let mut restore_consumers: std::collections::BTreeMap<u64, u64> = Default::default();
    let floor = shard.inner.store.history_floor()?;
    for (key, bytes) in scan_all(&snap, Family::HistoryHold, root.as_bytes().to_vec())? {
        let k = HistoryHoldKey::decode(&key)?;
        let h = HistoryHold::decode(&bytes)?;
        if h.read_version < floor {
            problems.push(format!(
                "hold {:?} at read version {} is below the history floor {floor}",
                k.hold, h.read_version
            ));
        }
        match k.hold {
            HoldId::Snapshot(id) => {
                holds.insert(id.get(), h);
            }
            HoldId::Restore(_) => {
                if let Some(s) = h.source_snapshot_id {
                    *restore_consumers.entry(s.get()).or_default() += 1;
                }
            }
            HoldId::BuildCommit(_) => {}
        }
    }
    let mut refs = std::collections::BTreeMap::new();
    for (key, bytes) in scan_all(&snap, Family::SnapshotRef, root.as_bytes().to_vec())? {
        let k = SnapshotRefKey::decode(&key)?;
        let r = SnapshotRef::decode(&bytes)?;
        let id = k.snapshot_id.get();
        match (r.state, holds.get(&id)) {
            (SnapshotState::Active, Some(h))
                if h.read_version == r.read_version && h.state == HistoryHoldState::Active => {}
            (SnapshotState::Active, _) => {
                problems.push(format!("active snapshot {id} has no matching Active hold"));
            }
            (_, Some(_)) => problems.push(format!(
                "snapshot {id} in state {:?} still has its hold",
                r.state
            )),
            (_, None) => {}
        }
        let consumers = restore_consumers.get(&id).copied().unwrap_or(0);
        if consumers != r.consumer_count {
            problems.push(format!(
                "snapshot {id} counts {} consumer(s) but {consumers} restore hold(s) name it",
                r.consumer_count
            ));
        }
        refs.insert((k.incarnation, id), r);
    }
    for (key, bytes) in scan_all(&snap, Family::SnapshotAlias, root.as_bytes().to_vec())? {
        let k = SnapshotAliasKey::decode(&key)?;
        let a = SnapshotAlias::decode(&bytes)?;
        match refs.get(&(k.incarnation, a.snapshot_id.get())) {
            None => problems.push(format!("alias {} names a missing snapshot", k.alias)),
            Some(r) => {
                if r.alias.as_ref() != Some(&k.alias) {
                    problems.push(format!(
                        "alias {} names a snapshot minted without it",
                        k.alias
                    ));
                }
                let expected = (r.state != SnapshotState::Active).then_some(r.state);
                if a.terminal_state != expected {
                    problems.push(format!(
                        "alias {} projects {:?} but the snapshot is {:?}",
                        k.alias, a.terminal_state, r.state
                    ));
                }
            }
        }
    }
    Ok(problems)
}
