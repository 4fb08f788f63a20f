//! The schema gate (docs/metadata-format.md, "Schema Gate") and the exact tree registry.
//!
//! Every family owns one named holt tree with a stable one-byte tag. The registry this build
//! accepts is exactly: the 23 docs/metadata-format.md families (`root_fence` 0x01 … `workspace_incarnation_claim`
//! 0x17, all versioned so holt keeps their MVCC history), the reserved unversioned engine trees
//! `system` (0xF0) and `recovery_outbox` (0xF1), and holt's own `history` tree (0x00).
//!
//! Startup is fail-closed:
//! - an empty store (only `history`, version 0) is initialized: every tree is created and ONE
//!   batch writes the `System("schema")` marker, the embedded RootPlacement (Active, placement
//!   generation 1), the presentation root, owner epoch 1, the matching Active RootFence row and
//!   RecoveryOutbox LSN 1 with the System recovery tail. A store at version 0 whose registry is a
//!   subset of the expected one is an interrupted initialization (trees are created one by one
//!   before the single initializing commit) and is completed the same way; no data can exist at
//!   version 0. A version-0 store with a foreign, mis-tagged or mis-flagged tree is refused;
//! - a nonempty store opens only when, in this order: the registry (names, tags, versioned flags)
//!   matches exactly; the marker exists, has value_format_version 1, decodes exactly, names
//!   `nokv_workspace` and format_version 8; the placement, presentation root, owner epoch,
//!   recovery tail and recovery chain point records decode; the RootFence row matches the
//!   placement and both are Active; and the RecoveryOutbox records after the verified chain head
//!   verify against the tail ([`crate::outbox`], "Verification"). Otherwise
//!   [`Error::SchemaMismatch`] (with a [`SchemaMismatchKind`]) or
//!   [`Error::RecoveryOutboxCorrupt`] names the difference, and nothing is written — the store's
//!   files stay byte-identical (holt's open modifies no file);
//! - opening an existing store writes nothing at all, for a writer as for a read-only handle
//!   (`holt::Db::open_read_only`; [`crate::MetaShard::open_read_only`]). A writer handle
//!   advances the owner epoch by one commit — which also appends an `OwnerEpochAdvance`
//!   RecoveryOutbox record and carries one outbox maintenance step — right before its first
//!   write; a handle that only reads never advances it.

use crate::codec::system::{
    decode_owner_epoch, decode_presentation_root, encode_owner_epoch, encode_presentation_root,
    validate_presentation_root, RecoveryTail, SchemaMarker, DEFAULT_PRESENTATION_ROOT,
    FORMAT_VERSION, KEY_OWNER_EPOCH, KEY_PRESENTATION_ROOT, KEY_RECOVERY_TAIL, KEY_ROOT_PLACEMENT,
    KEY_SCHEMA, MARKER_VALUE_VERSION, SCHEMA_ID,
};
use crate::codec::{
    root_fence, RootActivationState, RootFence, RootPlacement, RootPlacementLifecycle,
};
use crate::error::{Error, Result};
use crate::ids::{LogicalShardId, RootId};
use crate::outbox::RecoveryEntry;
use crate::store::{
    CheckedWrite, HoltStore, RegistryEntry, ShardStore, Snapshot, TxnStore, WriteFailure,
};
use crate::store::{Mutation, Predicate};

pub use crate::error::SchemaMismatchKind;
pub use crate::family::{Family, HISTORY_TAG, HISTORY_TREE};

/// Everything the gate learned (or created) about the shard.
#[derive(Debug, Clone)]
pub(crate) struct GateOutcome {
    pub(crate) placement: RootPlacement,
    pub(crate) presentation_root: String,
    /// The persisted owner epoch at open (1 after initialization).
    pub(crate) owner_epoch: u64,
    /// This open initialized the store: the handle already owns epoch 1.
    pub(crate) initialized: bool,
    /// The recovery tail whose chain this open verified (after the verified head).
    pub(crate) verified_tail: RecoveryTail,
}

/// Compares a store's registry with the expected one; `allow_missing` accepts a subset (used
/// only at version 0, where holt creates trees one by one and etcd writes its registry record
/// before the initializing commit).
fn registry_differences(
    infos: &[RegistryEntry],
    allow_missing: bool,
) -> Vec<(SchemaMismatchKind, String)> {
    let mut diffs = Vec::new();
    for info in infos {
        if info.name == HISTORY_TREE {
            if info.tag != HISTORY_TAG {
                diffs.push((
                    SchemaMismatchKind::WrongTreeTag,
                    format!("history tree has tag {:#04x}", info.tag),
                ));
            }
            continue;
        }
        match Family::from_name(&info.name) {
            None => diffs.push((
                SchemaMismatchKind::ExtraTree,
                format!("extra tree {} (tag {:#04x})", info.name, info.tag),
            )),
            Some(f) => {
                if info.tag != f.tag() {
                    diffs.push((
                        SchemaMismatchKind::WrongTreeTag,
                        format!(
                            "tree {} has tag {:#04x}, expected {:#04x}",
                            info.name,
                            info.tag,
                            f.tag()
                        ),
                    ));
                }
                if info.versioned != f.versioned() {
                    diffs.push((
                        SchemaMismatchKind::WrongVersionedFlag,
                        format!(
                            "tree {} has versioned={}, expected {}",
                            info.name,
                            info.versioned,
                            f.versioned()
                        ),
                    ));
                }
            }
        }
    }
    if !allow_missing {
        if !infos.iter().any(|i| i.name == HISTORY_TREE) {
            diffs.push((
                SchemaMismatchKind::MissingTree,
                "missing tree history".to_owned(),
            ));
        }
        for f in Family::ALL {
            if !infos.iter().any(|i| i.name == f.name()) {
                diffs.push((
                    SchemaMismatchKind::MissingTree,
                    format!("missing tree {}", f.name()),
                ));
            }
        }
    }
    diffs
}

fn registry_error(diffs: Vec<(SchemaMismatchKind, String)>) -> Result<()> {
    match diffs.first() {
        None => Ok(()),
        Some((kind, _)) => Err(Error::schema(
            *kind,
            diffs
                .iter()
                .map(|(_, r)| r.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        )),
    }
}

/// Decodes the marker, naming the exact mismatch.
fn check_marker(bytes: &[u8]) -> Result<()> {
    if let [hi, lo, ..] = bytes {
        let v = u16::from_be_bytes([*hi, *lo]);
        if v != MARKER_VALUE_VERSION {
            return Err(Error::schema(
                SchemaMismatchKind::UnknownMarkerVersion,
                format!(
                    "schema marker value_format_version {v} (supported: {MARKER_VALUE_VERSION})"
                ),
            ));
        }
    }
    let marker = SchemaMarker::decode(bytes).map_err(|e| {
        Error::schema(
            SchemaMismatchKind::MalformedMarker,
            format!("malformed schema marker: {e}"),
        )
    })?;
    if marker.schema_id != SCHEMA_ID {
        return Err(Error::schema(
            SchemaMismatchKind::ForeignSchemaId,
            format!(
                "schema_id {:?} (supported: {SCHEMA_ID:?})",
                marker.schema_id
            ),
        ));
    }
    if marker.format_version != FORMAT_VERSION {
        return Err(Error::schema(
            SchemaMismatchKind::UnsupportedFormatVersion,
            format!(
                "format_version {} (supported: {FORMAT_VERSION})",
                marker.format_version
            ),
        ));
    }
    Ok(())
}

fn malformed(what: &str, e: Error) -> Error {
    Error::schema(
        SchemaMismatchKind::MalformedRecord,
        format!("malformed {what}: {e}"),
    )
}

/// Binds a holt database to the registry: an empty database (version 0) whose registry is a
/// subset of the expected one gets its missing trees (the initializing commit follows in
/// [`open_gate`]); a non-empty one must match exactly. Nothing is written otherwise.
///
/// Errors: [`Error::InvalidArgument`] for an invalid requested presentation root (checked first,
/// so a refused open creates nothing); [`Error::SchemaMismatch`]; holt errors.
pub(crate) fn prepare_holt(db: holt::Db, requested_root: Option<&str>) -> Result<ShardStore> {
    if let Some(r) = requested_root {
        validate_presentation_root(r)?;
    }
    let empty = db.version() == 0;
    registry_error(registry_differences(&HoltStore::registry_of(&db), empty))?;
    if empty {
        HoltStore::create_missing_trees(&db)?;
    }
    Ok(ShardStore::Holt(HoltStore::new(db)?))
}

/// Binds a read-only holt database to the registry: it must match exactly (an empty database
/// may carry a subset; [`read_only_gate`] then refuses it). Nothing is created or written.
///
/// Errors: as [`prepare_holt`].
pub(crate) fn prepare_holt_read_only(
    db: holt::Db,
    requested_root: Option<&str>,
) -> Result<ShardStore> {
    if let Some(r) = requested_root {
        validate_presentation_root(r)?;
    }
    let empty = db.version() == 0;
    registry_error(registry_differences(&HoltStore::registry_of(&db), empty))?;
    if empty {
        return Err(Error::schema(
            SchemaMismatchKind::MissingMarker,
            "the store was never initialized (no schema marker); open it for writing once",
        ));
    }
    Ok(ShardStore::Holt(HoltStore::new(db)?))
}

/// The etcd counterpart of [`prepare_holt`]: an empty shard (clock absent) gets its registry
/// record; a non-empty one must carry exactly the expected registry.
///
/// Errors: as [`prepare_holt`]; [`Error::StoreUnavailable`].
#[cfg(feature = "etcd")]
pub(crate) fn prepare_etcd(
    store: crate::store::etcd::EtcdStore,
    requested_root: Option<&str>,
) -> Result<ShardStore> {
    if let Some(r) = requested_root {
        validate_presentation_root(r)?;
    }
    let snap = store.snapshot();
    // A failed snapshot reports version 0: read through it so the failure surfaces here.
    snap.get(Family::System, KEY_SCHEMA)?;
    let empty = snap.version() == 0;
    let registry = store.registry()?;
    registry_error(registry_differences(&registry, empty))?;
    if empty && registry.is_empty() {
        store.create_registry()?;
    }
    Ok(ShardStore::Etcd(store))
}

/// The read-only counterpart of [`prepare_etcd`]: the shard must be initialized and carry
/// exactly the expected registry; nothing is written.
///
/// Errors: as [`prepare_etcd`]; [`Error::SchemaMismatch`] for an empty shard.
#[cfg(feature = "etcd")]
pub(crate) fn prepare_etcd_read_only(
    store: crate::store::etcd::EtcdStore,
    requested_root: Option<&str>,
) -> Result<ShardStore> {
    if let Some(r) = requested_root {
        validate_presentation_root(r)?;
    }
    let snap = store.snapshot();
    snap.get(Family::System, KEY_SCHEMA)?;
    if snap.version() == 0 {
        return Err(Error::schema(
            SchemaMismatchKind::MissingMarker,
            "the shard was never initialized (no schema marker); open it for writing once",
        ));
    }
    registry_error(registry_differences(&store.registry()?, false))?;
    Ok(ShardStore::Etcd(store))
}

/// How many times the gate re-reads after another opener's commit raced its own.
const GATE_ATTEMPTS: u32 = 8;

/// Opens or initializes the shard behind `store` (registry already bound by [`prepare_holt`] or
/// `prepare_etcd`) for a writer handle. Writes nothing unless the store is empty
/// (initialization); the owner epoch of an existing store is advanced later, by
/// [`advance_owner_epoch`] before the handle's first write. `placement`: the control plane's
/// RootPlacement for the shard — used at initialization instead of fresh random ids, and
/// required to match the stored placement otherwise.
/// `init_shard`: the logical shard an initialization without `placement` records (an etcd
/// keyspace is named by its shard); `None` draws a fresh random one.
pub(crate) fn open_gate<S: TxnStore>(
    store: &S,
    requested_root: Option<&str>,
    placement: Option<&RootPlacement>,
    init_shard: Option<LogicalShardId>,
) -> Result<GateOutcome> {
    if let Some(r) = requested_root {
        validate_presentation_root(r)?;
    }
    let mut attempt = 0;
    loop {
        attempt += 1;
        match gate_once(store, requested_root, placement, init_shard) {
            Err(Error::ReadVersionConflict { .. }) if attempt < GATE_ATTEMPTS => {
                store.wait_for_version(store.version());
            }
            other => return other,
        }
    }
}

fn gate_once<S: TxnStore>(
    store: &S,
    requested_root: Option<&str>,
    placement: Option<&RootPlacement>,
    init_shard: Option<LogicalShardId>,
) -> Result<GateOutcome> {
    let view = store.snapshot();
    let marker = view.get(Family::System, KEY_SCHEMA)?;
    if view.version() == 0 {
        return initialize(
            store,
            requested_root.unwrap_or(DEFAULT_PRESENTATION_ROOT),
            placement,
            init_shard,
        );
    }
    check_existing(&view, marker, requested_root, placement)
}

/// The checks of [`open_gate`] for a read-only handle: the store must already be initialized
/// (an empty store is [`SchemaMismatchKind::MissingMarker`]); nothing is ever written.
pub(crate) fn read_only_gate<S: TxnStore>(
    store: &S,
    requested_root: Option<&str>,
    placement: Option<&RootPlacement>,
) -> Result<GateOutcome> {
    if let Some(r) = requested_root {
        validate_presentation_root(r)?;
    }
    let view = store.snapshot();
    let marker = view.get(Family::System, KEY_SCHEMA)?;
    if view.version() == 0 {
        return Err(Error::schema(
            SchemaMismatchKind::MissingMarker,
            "the store was never initialized (no schema marker); open it for writing once",
        ));
    }
    check_existing(&view, marker, requested_root, placement)
}

/// Every check of a nonempty store at `view` (whose schema marker read is `marker`), in the
/// documented order, ending with the RecoveryOutbox records after the verified head. Writes
/// nothing.
fn check_existing<V: Snapshot>(
    view: &V,
    marker: Option<Vec<u8>>,
    requested_root: Option<&str>,
    placement: Option<&RootPlacement>,
) -> Result<GateOutcome> {
    let read = |key: &[u8], what: &str| -> Result<Vec<u8>> {
        view.get(Family::System, key)?.ok_or_else(|| {
            Error::schema(
                SchemaMismatchKind::MissingRecord,
                format!("missing {what} record"),
            )
        })
    };
    let marker = marker.ok_or_else(|| {
        Error::schema(
            SchemaMismatchKind::MissingMarker,
            "missing schema marker in a non-empty store",
        )
    })?;
    check_marker(&marker)?;
    let stored = RootPlacement::decode(&read(KEY_ROOT_PLACEMENT, "root placement")?)
        .map_err(|e| malformed("root placement", e))?;
    if let Some(p) = placement {
        if p.root_id != stored.root_id
            || p.logical_shard_id != stored.logical_shard_id
            || p.placement_generation != stored.placement_generation
        {
            return Err(Error::schema(
                SchemaMismatchKind::InconsistentPlacement,
                format!(
                    "the shard holds root {} on logical shard {} at placement generation {}; the placement names root {} on {} at generation {}",
                    stored.root_id,
                    stored.logical_shard_id,
                    stored.placement_generation,
                    p.root_id,
                    p.logical_shard_id,
                    p.placement_generation
                ),
            ));
        }
    }
    let placement = stored;
    let presentation_root =
        decode_presentation_root(&read(KEY_PRESENTATION_ROOT, "presentation root")?)
            .map_err(|e| malformed("presentation root", e))?;
    let epoch_bytes = read(KEY_OWNER_EPOCH, "owner epoch")?;
    let epoch = decode_owner_epoch(&epoch_bytes).map_err(|e| malformed("owner epoch", e))?;
    let tail_bytes = read(KEY_RECOVERY_TAIL, "recovery tail")?;
    RecoveryTail::decode(&tail_bytes).map_err(|e| malformed("recovery tail", e))?;
    let points = crate::outbox::read_points(view).map_err(|e| match e {
        Error::Codec { .. } => malformed("recovery chain point", e),
        other => other,
    })?;
    let fence_bytes = view
        .get(Family::RootFence, &root_fence::key(&placement.root_id))?
        .ok_or_else(|| {
            Error::schema(
                SchemaMismatchKind::MissingRecord,
                "missing RootFence row for the placed root",
            )
        })?;
    let fence = RootFence::decode(&fence_bytes).map_err(|e| malformed("RootFence row", e))?;
    if fence.logical_shard_id != placement.logical_shard_id
        || fence.placement_generation != placement.placement_generation
    {
        return Err(Error::schema(
            SchemaMismatchKind::InconsistentPlacement,
            "RootFence row does not match the root placement",
        ));
    }
    if fence.activation_state != RootActivationState::Active
        || placement.lifecycle != RootPlacementLifecycle::Active
    {
        return Err(Error::schema(
            SchemaMismatchKind::InconsistentPlacement,
            format!(
                "root is not active (fence {:?}, placement {:?})",
                fence.activation_state, placement.lifecycle
            ),
        ));
    }
    crate::outbox::verify_after_head(view, &points)?;
    if let Some(r) = requested_root {
        if r != presentation_root {
            return Err(Error::PresentationRootMismatch {
                stored: presentation_root,
                requested: r.to_owned(),
            });
        }
    }
    Ok(GateOutcome {
        placement,
        presentation_root,
        owner_epoch: epoch,
        initialized: false,
        verified_tail: points.tail,
    })
}

/// Advances the persisted owner epoch from `from_epoch` to `from_epoch + 1` in one commit that
/// also appends an `OwnerEpochAdvance` RecoveryOutbox record and carries one RecoveryOutbox
/// maintenance step (the verified head moves to `verified_at_open`, the tail the handle verified
/// at its open, and at most [`crate::outbox::MAX_PRUNE_STEP`] old records are removed per
/// `retention`). Returns the new epoch.
///
/// Errors: [`Error::Fenced`] when the persisted epoch is no longer `from_epoch` (another owner
/// advanced it since this handle opened) or the tail is missing; [`Error::InvalidArgument`] when
/// the epoch or the commit version is exhausted; [`Error::ReadVersionConflict`] when other
/// commits kept racing with it; codec and storage errors.
pub(crate) fn advance_owner_epoch<S: TxnStore>(
    store: &S,
    from_epoch: u64,
    verified_at_open: RecoveryTail,
    retention: &crate::outbox::RetentionPolicy,
) -> Result<u64> {
    for _ in 0..crate::command::MAX_ATTEMPTS {
        let view = store.snapshot();
        let (next, write) =
            plan_owner_epoch_advance(&view, Some(from_epoch), Some(verified_at_open), retention)?;
        drop(view);
        match store.write(write) {
            Ok(_) => return Ok(next),
            Err(WriteFailure::ReadVersion { actual, .. }) => {
                // Another commit landed since the view; wait until it is readable and re-plan.
                store.wait_for_version(actual);
            }
            Err(WriteFailure::Predicate { .. }) => {}
            Err(WriteFailure::Other(e)) => return Err(e),
        }
    }
    Err(Error::ReadVersionConflict {
        attempts: crate::command::MAX_ATTEMPTS,
    })
}

/// The owner-epoch advance of a writer whose store lock is shared between processes, made at
/// each acquisition of the lock (docs/metadata-format.md, "Owner epochs of a shared writer
/// lock"): planned on the newest accepted state and submitted to group commit without waiting
/// for durability, so the first command of the acquisition — planned on top of it in the same
/// sequenced section — shares its WAL write and fdatasync. Advances from whatever epoch is
/// persisted now (other processes advance it at their own acquisitions; the lock, held by the
/// caller, keeps them out until the section ends). `verified` is the tail the handle verified at
/// its open, for its first acquisition only. `unless_still`: the epoch this handle advanced to at
/// an earlier acquisition — when it is still the persisted one, no other writer advanced since
/// (every writer advances before its first command), so every earlier holder is already fenced
/// and nothing is written (`None`). Otherwise returns the new epoch and the pending write (wait
/// on it before acknowledging anything planned on it).
///
/// Errors: [`Error::Fenced`] without a persisted epoch or tail; [`Error::InvalidArgument`] when
/// the epoch or the commit version is exhausted; a refused write (nothing submitted); codec and
/// storage errors.
pub(crate) fn advance_owner_epoch_pipelined<S: TxnStore>(
    store: &S,
    verified: Option<RecoveryTail>,
    unless_still: Option<u64>,
    retention: &crate::outbox::RetentionPolicy,
) -> Result<Option<(u64, crate::store::PendingWrite)>> {
    let view = store.accepted_snapshot();
    if let Some(ours) = unless_still {
        if let Some(bytes) = view.get(Family::System, KEY_OWNER_EPOCH)? {
            if decode_owner_epoch(&bytes)? == ours {
                return Ok(None);
            }
        }
    }
    let (next, write) = plan_owner_epoch_advance(&view, None, verified, retention)?;
    drop(view);
    match store.write_pipelined(write) {
        Ok(pending) => Ok(Some((next, pending))),
        Err(WriteFailure::Other(e)) => Err(e),
        Err(_) => Err(Error::ReadVersionConflict { attempts: 1 }),
    }
}

/// Plans the owner-epoch advance at `view`: the new epoch and the checked write (epoch row,
/// `OwnerEpochAdvance` outbox record, one maintenance step). With `expected`, the persisted
/// epoch must equal it ([`Error::Fenced`] otherwise).
fn plan_owner_epoch_advance<V: Snapshot>(
    view: &V,
    expected: Option<u64>,
    verified: Option<RecoveryTail>,
    retention: &crate::outbox::RetentionPolicy,
) -> Result<(u64, CheckedWrite)> {
    let epoch_bytes = view
        .get(Family::System, KEY_OWNER_EPOCH)?
        .ok_or_else(|| Error::Fenced {
            reason: "no owner epoch is recorded".into(),
        })?;
    let epoch = decode_owner_epoch(&epoch_bytes)?;
    if let Some(from_epoch) = expected.filter(|e| *e != epoch) {
        return Err(Error::Fenced {
            reason: format!(
                "another owner advanced the owner epoch to {epoch} since this handle opened \
                 at {from_epoch}; reopen the store"
            ),
        });
    }
    let tail_bytes = view
        .get(Family::System, KEY_RECOVERY_TAIL)?
        .ok_or_else(|| Error::Fenced {
            reason: "no System recovery tail is recorded".into(),
        })?;
    let tail = RecoveryTail::decode(&tail_bytes)?;
    let step = crate::outbox::plan_step(view, retention, verified, false)?;
    let read_version = view.version();
    let next = epoch
        .checked_add(1)
        .ok_or_else(|| Error::invalid("owner epoch exhausted"))?;
    let commit_version = read_version
        .checked_add(1)
        .ok_or_else(|| Error::invalid("commit version exhausted"))?;
    let mutations = vec![Mutation::put(
        Family::System,
        KEY_OWNER_EPOCH.to_vec(),
        encode_owner_epoch(next),
    )];
    let appended = crate::outbox::append(
        &tail,
        commit_version,
        &RecoveryEntry::OwnerEpochAdvance {
            previous_epoch: epoch,
            owner_epoch: next,
        },
        &mutations,
    )?;
    let mut predicates = vec![
        Predicate::equals(Family::System, KEY_OWNER_EPOCH.to_vec(), epoch_bytes),
        Predicate::equals(Family::System, KEY_RECOVERY_TAIL.to_vec(), tail_bytes),
    ];
    predicates.extend(step.predicates);
    let write = CheckedWrite {
        read_version: Some(read_version),
        predicates,
        mutations: mutations
            .into_iter()
            .chain(appended.rows)
            .chain(step.mutations)
            .collect(),
    };
    Ok((next, write))
}

/// Applies one gate write. A lost race with another opener is a [`Error::ReadVersionConflict`]
/// (the gate re-reads); nothing is applied on any error.
fn commit<S: TxnStore>(store: &S, write: CheckedWrite) -> Result<u64> {
    store.write(write).map_err(|f| match f {
        WriteFailure::ReadVersion { .. } | WriteFailure::Predicate { .. } => {
            Error::ReadVersionConflict { attempts: 1 }
        }
        WriteFailure::Other(e) => e,
    })
}

fn initialize<S: TxnStore>(
    store: &S,
    presentation_root: &str,
    placement: Option<&RootPlacement>,
    init_shard: Option<LogicalShardId>,
) -> Result<GateOutcome> {
    let placement = match placement {
        Some(p) => RootPlacement {
            lifecycle: RootPlacementLifecycle::Active,
            ..*p
        },
        None => RootPlacement {
            root_id: RootId::random()?,
            logical_shard_id: match init_shard {
                Some(s) => s,
                None => LogicalShardId::random()?,
            },
            placement_generation: 1,
            lifecycle: RootPlacementLifecycle::Active,
        },
    };
    let fence = RootFence {
        logical_shard_id: placement.logical_shard_id,
        placement_generation: placement.placement_generation,
        activation_state: RootActivationState::Active,
    };
    // RootPlacement and the matching Active RootFence exist before the root's first write
    // (docs/metadata-format.md, "Placement Authority"); both land in this single initializing batch.
    let mutations = vec![
        Mutation::put(
            Family::System,
            KEY_SCHEMA.to_vec(),
            SchemaMarker::current().encode(),
        ),
        Mutation::put(
            Family::System,
            KEY_ROOT_PLACEMENT.to_vec(),
            placement.encode(),
        ),
        Mutation::put(
            Family::System,
            KEY_PRESENTATION_ROOT.to_vec(),
            encode_presentation_root(presentation_root),
        ),
        Mutation::put(
            Family::System,
            KEY_OWNER_EPOCH.to_vec(),
            encode_owner_epoch(1),
        ),
        Mutation::put(
            Family::RootFence,
            root_fence::key(&placement.root_id),
            fence.encode(),
        ),
    ];
    let appended = crate::outbox::append(
        &RecoveryTail::GENESIS,
        1,
        &RecoveryEntry::StoreInitialization {
            root_id: placement.root_id,
            logical_shard_id: placement.logical_shard_id,
            placement_generation: placement.placement_generation,
            owner_epoch: 1,
        },
        &mutations,
    )?;
    commit(
        store,
        CheckedWrite {
            read_version: Some(0),
            predicates: vec![
                Predicate::absent(Family::System, KEY_SCHEMA.to_vec()),
                Predicate::absent(Family::System, KEY_RECOVERY_TAIL.to_vec()),
            ],
            mutations: mutations.into_iter().chain(appended.rows).collect(),
        },
    )?;
    Ok(GateOutcome {
        placement,
        presentation_root: presentation_root.to_owned(),
        owner_epoch: 1,
        initialized: true,
        // The initializing record was written, not read back: nothing is verified yet.
        verified_tail: RecoveryTail::GENESIS,
    })
}

pub use crate::codec::system::marker_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_has_the_exact_seed_names_and_tags() {
        assert_eq!(Family::RootFence.tag(), 0x01);
        assert_eq!(Family::Tag.tag(), 0x0a);
        assert_eq!(Family::ChangeEvent.tag(), 0x10);
        assert_eq!(Family::CommandDedupe.tag(), 0x14);
        assert_eq!(Family::WorkspaceIncarnationClaim.tag(), 0x17);
        assert_eq!(
            Family::WorkspaceIncarnationClaim.name(),
            "workspace_incarnation_claim"
        );
        assert_eq!(Family::System.tag(), 0xF0);
        assert_eq!(Family::RecoveryOutbox.tag(), 0xF1);
        assert!(!Family::System.versioned() && !Family::RecoveryOutbox.versioned());
        let tags: Vec<u8> = Family::ALL[..23].iter().map(|f| f.tag()).collect();
        assert_eq!(tags, (1u8..=0x17).collect::<Vec<_>>());
        for (i, f) in Family::ALL.iter().enumerate() {
            assert_eq!(f.index(), i);
            assert_eq!(Family::from_name(f.name()), Some(*f));
        }
    }
}
