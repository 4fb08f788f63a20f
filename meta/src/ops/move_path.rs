//! Moving one path inside a workbench (docs/metadata-format.md, "Move One Path").
//!
//! A move is ONE bounded [`crate::command::MetadataCommand`] with point reads only (no namespace
//! prefix scan beyond the limit-1 descendant probes every publication makes). No byte is copied
//! and no revision is created: the artifact revision the source names is named by the
//! destination instead.
//!
//! - predicates: WorkspaceCurrent Equals the bytes read (same incarnation, `Visible`); the
//!   source PathCurrent Equals the bytes read (an `expected_generation` is checked against them);
//!   the destination PathCurrent Absent (create-only, with the namespace rule's Absent
//!   predicates on its ancestors) or Equals the bytes read (replace at the expected destination
//!   generation); every ArtifactRevision whose count changes Equals the bytes read;
//! - mutations: the source PathCurrent deleted and the destination's written with the source's
//!   entry (same revision, size, digests, content type, producer and index fields) at generation
//!   = the command's commit version; `RevisionRef(Path, incarnation, to)` added before
//!   `RevisionRef(Path, incarnation, from)` is released — the moved revision's
//!   `strong_reference_count` ends where it was and its `reference_epoch` advances by two, so the
//!   count never passes through zero and no GcCandidate is written for it; a replaced
//!   destination's reference is released like a removal's (GcCandidate at zero); the
//!   SecondaryIndex rows of the source deleted and the destination's written; WorkspaceCurrent
//!   `workspace_revision` +1 / `modified_version`; ONE `ArtifactMoved` ChangeEvent (`path` = the
//!   destination, `before_generation` = the replaced destination generation, `after_generation`
//!   = the new one, `moved_from` = the source and its generation); CommandDedupe with
//!   [`CommandResult::Moved`].
//!
//! Refusals name their side: errors about the source come as they are (`PathNotFound`,
//! `PathIsDirectory` for an implicit directory — directory rename is not supported —,
//! `GenerationConflict`); errors about the destination come wrapped in
//! [`Error::MoveDestination`]. A failed predicate applies nothing, so a concurrent writer can
//! never see the artifact at both paths or at neither.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::codec::{
    artifact_revision, path_current, revision_ref, ArtifactRevision, ChangeEvent, ChangeKind,
    CommandResult, MovedFrom, PathEntry, RefOwner, RevisionRef, RevisionState,
};
use crate::command::executor::{check_handle_fences, replay_lookup};
use crate::command::projection::index_mutations;
use crate::command::{CommandOutcome, Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{validate_workbench_id, ArtifactRevisionId, RequestId};
use crate::path::NormPath;
use crate::read::namespace_check;
use crate::shard::MetaShard;
use crate::store::Snapshot;

use super::publish::is_reserved;
use super::remove::{file_at, named_revision, Planned};

/// What a move may find at its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveDestination {
    /// The destination must be absent (the default).
    Create,
    /// The destination must be a file at exactly this generation; the move replaces it.
    Replace {
        /// The destination's expected generation.
        expected_generation: u64,
    },
}

/// One move request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveRequest {
    /// Replay identity: a response-loss retry with the same id returns the stored receipt.
    pub request_id: RequestId,
    /// Workbench (must be `Visible`).
    pub workbench_id: String,
    /// The source path (a file; never a reserved manifest).
    pub from: NormPath,
    /// The destination path (never a reserved manifest, never equal to `from`).
    pub to: NormPath,
    /// When set, the source must be at exactly this generation.
    pub expected_generation: Option<u64>,
    /// What the destination must be.
    pub destination: MoveDestination,
}

/// Outcome of [`move_path`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveReceipt {
    /// The generation the source had when it was moved.
    pub from_generation: u64,
    /// The destination's generation before the move (`None`: it was created).
    pub replaced_generation: Option<u64>,
    /// The PathEntry now at the destination (its `generation` is the commit version).
    pub entry: PathEntry,
    /// Commit version of the move (the original one on replay).
    pub commit_version: u64,
    /// True when this is the stored result of an earlier identical request.
    pub idempotent_replay: bool,
}

/// The command digest of a move: `sha256("nokv.move.v1\0" | u32 len | workbench_id | u32 len |
/// from | u32 len | to | option(u64 expected_generation) | option(u64
/// expected_destination_generation))`.
pub fn command_digest(req: &MoveRequest) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"nokv.move.v1\0");
    for part in [
        req.workbench_id.as_str(),
        req.from.as_str(),
        req.to.as_str(),
    ] {
        h.update((part.len() as u32).to_be_bytes());
        h.update(part.as_bytes());
    }
    let destination = match req.destination {
        MoveDestination::Create => None,
        MoveDestination::Replace {
            expected_generation,
        } => Some(expected_generation),
    };
    for g in [req.expected_generation, destination] {
        match g {
            None => h.update([0u8]),
            Some(g) => {
                h.update([1u8]);
                h.update(g.to_be_bytes());
            }
        }
    }
    h.finalize().into()
}

/// Pure validation (no storage access). Errors: [`Error::InvalidArgument`] for an invalid
/// workbench id, a reserved manifest on either side, or `from == to`.
pub fn validate(req: &MoveRequest) -> Result<()> {
    validate_workbench_id(&req.workbench_id)?;
    for p in [&req.from, &req.to] {
        if is_reserved(p) {
            return Err(Error::invalid(format!(
                "{p} is owned by commit/restore and cannot be moved or replaced"
            )));
        }
    }
    if req.from == req.to {
        return Err(Error::invalid(
            "the source and the destination are the same path",
        ));
    }
    Ok(())
}

fn receipt(out: CommandOutcome) -> Result<MoveReceipt> {
    match out.result {
        CommandResult::Moved {
            from_generation,
            replaced_generation,
            entry,
        } => Ok(MoveReceipt {
            from_generation,
            replaced_generation,
            entry,
            commit_version: out.commit_version,
            idempotent_replay: out.idempotent_replay,
        }),
        _ => Err(Error::RequestReplayMismatch),
    }
}

/// Moves one file to another path of the same workbench (see the module docs). Validation happens
/// before any read; an exact request-id replay returns the stored receipt even after later
/// commits (and even though the source is gone).
///
/// Errors: [`Error::InvalidArgument`] (see [`validate`]); [`Error::WorkspaceNotFound`];
/// [`Error::PathNotFound`] (no file at the source); [`Error::PathIsDirectory`] (the source is
/// an implicit directory: directory rename is not supported); [`Error::GenerationConflict`]
/// (the source moved on); [`Error::MoveDestination`] wrapping `PathAlreadyExists`,
/// `GenerationConflict` (`actual = 0`: absent), `PathIsDirectory` or `AncestorIsFile`;
/// [`Error::RevisionUnavailable`]; [`Error::RequestReplayMismatch`]; [`Error::Fenced`];
/// [`Error::ReadVersionConflict`] after [`super::MAX_ATTEMPTS`]; codec and storage errors.
/// Nothing is written on any error.
pub fn move_path(shard: &MetaShard, req: &MoveRequest) -> Result<MoveReceipt> {
    validate(req)?;
    let digest = command_digest(req);
    super::sequenced_retrying(shard, |seq| {
        seq.prepare_write()?;
        let snap = seq.snapshot();
        let planned = plan(shard, &snap, req, digest)?;
        drop(snap);
        match planned {
            Planned::Replay(out) => receipt(*out),
            Planned::Command(cmd) => receipt(seq.execute(*cmd)?),
        }
    })
}

fn destination_error(e: Error) -> Error {
    Error::MoveDestination(Box::new(e))
}

/// Revisions whose counts change: original bytes, row.
type Touched = BTreeMap<ArtifactRevisionId, (Vec<u8>, ArtifactRevision)>;

fn touch<'t, S: Snapshot>(
    snap: &S,
    root: &crate::ids::RootId,
    touched: &'t mut Touched,
    rev: ArtifactRevisionId,
) -> Result<&'t mut ArtifactRevision> {
    Ok(match touched.entry(rev) {
        std::collections::btree_map::Entry::Occupied(o) => &mut o.into_mut().1,
        std::collections::btree_map::Entry::Vacant(v) => {
            &mut v.insert(named_revision(snap, root, &rev)?).1
        }
    })
}

/// Builds the move command of `req` at `snap` (see the module docs).
fn plan<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    req: &MoveRequest,
    digest: [u8; 32],
) -> Result<Planned> {
    let root = shard.root_id();
    check_handle_fences(snap, &shard.inner.fence())?;
    if let Some(out) = replay_lookup(snap, &root, &req.request_id, &digest)? {
        return Ok(Planned::Replay(Box::new(out)));
    }
    let (ws_key, ws_bytes, ws) =
        super::tag::visible_ws(snap, &root, &req.workbench_id, shard.wall_unix_ms())?;
    let inc = ws.incarnation;

    // The source: a file at the expected generation.
    let (from_key, from_bytes, from_entry) =
        file_at(snap, &root, &inc, &req.from, req.expected_generation)?;

    // The destination: absent (and creatable) or a file at the expected generation.
    let to_key = path_current::key(&root, &inc, &req.to);
    let to_bytes = snap.get(Family::PathCurrent, &to_key)?;
    let to_old = to_bytes.as_deref().map(PathEntry::decode).transpose()?;
    let mut predicates = vec![
        Predicate::equals(Family::WorkspaceCurrent, ws_key.clone(), ws_bytes),
        Predicate::equals(Family::PathCurrent, from_key.clone(), from_bytes),
    ];
    match (req.destination, &to_old, &to_bytes) {
        (MoveDestination::Create, Some(_), _) => {
            return Err(destination_error(Error::PathAlreadyExists))
        }
        (MoveDestination::Create, None, _) => {
            let namespace =
                namespace_check(snap, &root, &inc, &req.to).map_err(destination_error)?;
            predicates.push(Predicate::absent(Family::PathCurrent, to_key.clone()));
            predicates.extend(namespace);
        }
        (
            MoveDestination::Replace {
                expected_generation,
            },
            old,
            bytes,
        ) => {
            let actual = old.as_ref().map_or(0, |e| e.generation);
            if actual != expected_generation {
                return Err(destination_error(Error::GenerationConflict {
                    expected: expected_generation,
                    actual,
                }));
            }
            if let Some(b) = bytes {
                predicates.push(Predicate::equals(
                    Family::PathCurrent,
                    to_key.clone(),
                    b.clone(),
                ));
            }
        }
    }

    let read_version = snap.version();
    let cv = read_version
        .checked_add(1)
        .ok_or_else(|| Error::invalid("commit version exhausted"))?;
    let mut mutations = Vec::new();
    let mut touched = Touched::new();

    // The moved revision gains the destination reference first, then loses the source one, so
    // its count never passes through zero.
    let rev = from_entry.artifact_revision_id;
    let from_owner = RefOwner::Path {
        incarnation: inc,
        path: req.from.clone(),
    };
    let to_owner = RefOwner::Path {
        incarnation: inc,
        path: req.to.clone(),
    };
    {
        let row = touch(snap, &root, &mut touched, rev)?;
        if row.state != RevisionState::Available {
            return Err(Error::RevisionUnavailable {
                revision: rev.to_hex(),
                reason: format!("state {:?}", row.state),
            });
        }
    }
    if let Some(old) = &to_old {
        // The replaced destination's reference goes first: its key equals the new one when the
        // destination already names the moved revision.
        let old_rev = old.artifact_revision_id;
        mutations.push(Mutation::Delete {
            family: Family::RevisionRef,
            key: revision_ref::key(&root, &to_owner, &old_rev),
        });
    }
    let epoch_at_add = {
        let row = touch(snap, &root, &mut touched, rev)?;
        // Adding a reference never yields a GcCandidate.
        super::commit::adjust_revision(&root, &rev, row, true, cv)?;
        row.reference_epoch
    };
    mutations.push(Mutation::put(
        Family::RevisionRef,
        revision_ref::key(&root, &to_owner, &rev),
        RevisionRef {
            reference_epoch_at_add: epoch_at_add,
            created_version: cv,
        }
        .encode(),
    ));
    mutations.push(Mutation::Delete {
        family: Family::RevisionRef,
        key: revision_ref::key(&root, &from_owner, &rev),
    });
    let mut releases = vec![rev];
    if let Some(old) = &to_old {
        releases.push(old.artifact_revision_id);
    }
    for id in releases {
        let row = touch(snap, &root, &mut touched, id)?;
        if let Some(candidate) = super::commit::adjust_revision(&root, &id, row, false, cv)? {
            mutations.push(candidate);
        }
    }
    for (id, (bytes, row)) in touched {
        let key = artifact_revision::key(&root, &id);
        predicates.push(Predicate::equals(
            Family::ArtifactRevision,
            key.clone(),
            bytes,
        ));
        mutations.push(Mutation::put(Family::ArtifactRevision, key, row.encode()));
    }

    // The namespace rows and their projection.
    let entry = PathEntry {
        generation: cv,
        created_version: to_old.as_ref().map_or(cv, |o| o.created_version),
        modified_version: cv,
        ..from_entry.clone()
    };
    mutations.push(Mutation::Delete {
        family: Family::PathCurrent,
        key: from_key,
    });
    mutations.push(Mutation::put(Family::PathCurrent, to_key, entry.encode()));
    mutations.extend(index_mutations(
        &root,
        &inc,
        &req.workbench_id,
        &req.from,
        Some(&from_entry),
        None,
    )?);
    mutations.extend(index_mutations(
        &root,
        &inc,
        &req.workbench_id,
        &req.to,
        to_old.as_ref(),
        Some(&entry),
    )?);
    let next = ws.advanced(cv);
    mutations.push(Mutation::put(
        Family::WorkspaceCurrent,
        ws_key,
        next.encode(),
    ));

    let replaced_generation = to_old.as_ref().map(|o| o.generation);
    let mut cmd = shard.command_header(
        req.request_id,
        digest,
        read_version,
        CommandResult::Moved {
            from_generation: from_entry.generation,
            replaced_generation,
            entry,
        },
    );
    cmd.predicates = predicates;
    cmd.mutations = mutations;
    cmd.event_projection = vec![ChangeEvent {
        workbench_id: req.workbench_id.clone(),
        incarnation: inc,
        kind: ChangeKind::ArtifactMoved,
        path: Some(req.to.clone()),
        before_generation: replaced_generation,
        after_generation: Some(cv),
        moved_from: Some(MovedFrom {
            path: req.from.clone(),
            generation: from_entry.generation,
        }),
    }];
    Ok(Planned::Command(Box::new(cmd)))
}
