//! Path removal (docs/metadata-format.md, "Ordinary put/replace/remove", "Artifact Revisions And Strong
//! References"; docs/design.md, "Safe Object Lifetime").
//!
//! # One path: [`remove`]
//!
//! One bounded [`crate::command::MetadataCommand`] with point reads only (no namespace prefix
//! scan):
//!
//! - predicates: WorkspaceCurrent Equals the bytes read (same incarnation, `Visible`);
//!   PathCurrent Equals the bytes read (so a concurrent publication or removal makes it re-plan;
//!   an `expected_generation` is checked against exactly those bytes); the referenced
//!   ArtifactRevision Equals the bytes read;
//! - mutations: PathCurrent deleted; its `RevisionRef(Path, incarnation, path)` deleted and the
//!   revision's `strong_reference_count` −1 / `reference_epoch` +1 in the same command (at zero:
//!   `last_zero_ref_version` = the commit version and a `GcCandidate` keyed by the new epoch,
//!   through the one helper the commit closure uses); every SecondaryIndex row of the entry
//!   deleted ([`crate::command::projection::index_mutations`] with no new entry); WorkspaceCurrent
//!   `workspace_revision` +1 / `modified_version`; one `ArtifactRemoved` ChangeEvent
//!   (`before_generation` = the removed generation, `after_generation` = `None`); CommandDedupe
//!   with [`CommandResult::Removed`] (the removed PathEntry).
//!
//! The reserved manifests `metadata/run_manifest.json` and `metadata/restore_manifest.json` are
//! refused ([`Error::InvalidArgument`]): commit and restore own them (docs/metadata-format.md, "Commit
//! Closure"). The removed revision's bytes stay readable through every snapshot, commit or
//! restore that still holds it; garbage collection ([`crate::ops::gc`]) decides when they go.
//!
//! # A prefix: [`remove_batch`]
//!
//! A prefix (every published path strictly under a directory, plus a file at exactly the prefix)
//! is removed in bounded batches: each batch is ONE command of the shape above covering at most
//! [`MAX_PATHS_PER_BATCH`] paths (and within the command's index-mutation bound), so each path
//! disappears atomically with its reference and index rows — never half-visible — and a batch
//! either applies completely or not at all. Batches need no cursor row: removed paths are gone,
//! so rerunning after a crash continues with what is left (resumable). Reserved manifests under
//! the prefix are kept and reported.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::codec::{
    artifact_revision, path_current, revision_ref, ArtifactRevision, ChangeEvent, ChangeKind,
    CommandResult, PathEntry, RefOwner, WorkspaceCurrent,
};
use crate::command::executor::{check_handle_fences, replay_lookup};
use crate::command::projection::{index_mutations, MAX_INDEX_MUTATIONS};
use crate::command::{Mutation, Predicate, MAX_COMMAND_EVENTS};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{
    validate_workbench_id, ArtifactRevisionId, RequestId, RootId, WorkspaceIncarnationId,
};
use crate::path::NormPath;
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, Snapshot};

use super::publish::RESERVED_PATHS;

/// Most paths one prefix-removal batch (one command) removes; also bounded by
/// [`MAX_COMMAND_EVENTS`] (one event per path) and [`MAX_INDEX_MUTATIONS`].
pub const MAX_PATHS_PER_BATCH: usize = 16;

/// One path removal request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoveRequest {
    /// Replay identity: a response-loss retry with the same id returns the stored receipt.
    pub request_id: RequestId,
    /// Workbench (must be `Visible`).
    pub workbench_id: String,
    /// The path to remove (normalized; never a reserved manifest).
    pub path: NormPath,
    /// When set, the path must be at exactly this generation ([`Error::GenerationConflict`]).
    pub expected_generation: Option<u64>,
}

/// Outcome of [`remove`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoveReceipt {
    /// The PathEntry that was removed (its `generation` is the removed generation).
    pub removed: PathEntry,
    /// Commit version of the removal (the original one on replay).
    pub commit_version: u64,
    /// True when this is the stored result of an earlier identical request.
    pub idempotent_replay: bool,
}

/// Outcome of one [`remove_batch`] call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Paths removed by this batch with the generation each had.
    pub removed: Vec<(NormPath, u64)>,
    /// Reserved manifests under the prefix that were kept.
    pub kept_reserved: Vec<NormPath>,
    /// Commit version of the batch (`None` when nothing was removed).
    pub commit_version: Option<u64>,
    /// True when no removable path is left under the prefix.
    pub done: bool,
}

fn is_reserved(path: &NormPath) -> bool {
    RESERVED_PATHS.contains(&path.as_str())
}

/// The command digest of a single removal: `sha256("nokv.remove.v1\0" | u32 len | workbench_id |
/// u32 len | path | option(u64 expected_generation))`.
pub fn command_digest(req: &RemoveRequest) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"nokv.remove.v1\0");
    h.update((req.workbench_id.len() as u32).to_be_bytes());
    h.update(req.workbench_id.as_bytes());
    h.update((req.path.as_str().len() as u32).to_be_bytes());
    h.update(req.path.as_str().as_bytes());
    match req.expected_generation {
        None => h.update([0u8]),
        Some(g) => {
            h.update([1u8]);
            h.update(g.to_be_bytes());
        }
    }
    h.finalize().into()
}

/// The file at `path` of incarnation `inc` at `snap` (one PathCurrent point read): its key, its
/// stored bytes and its entry, checked against `expected_generation` when one is given. Shared
/// by a removal and the source of a move ([`crate::ops::move_path`]).
///
/// Errors: [`Error::PathIsDirectory`] (no file, but files lie under it: one limit-1 probe);
/// [`Error::PathNotFound`]; [`Error::GenerationConflict`]; codec and storage errors.
pub(crate) fn file_at<S: Snapshot>(
    snap: &S,
    root: &RootId,
    inc: &WorkspaceIncarnationId,
    path: &NormPath,
    expected_generation: Option<u64>,
) -> Result<(Vec<u8>, Vec<u8>, PathEntry)> {
    let key = path_current::key(root, inc, path);
    let Some(bytes) = snap.get(Family::PathCurrent, &key)? else {
        // No file here: an implicit directory is named as such (a prefix removal takes it).
        if crate::read::has_descendants(snap, root, inc, path)? {
            return Err(Error::PathIsDirectory);
        }
        return Err(Error::PathNotFound);
    };
    let entry = PathEntry::decode(&bytes)?;
    if let Some(expected) = expected_generation {
        if expected != entry.generation {
            return Err(Error::GenerationConflict {
                expected,
                actual: entry.generation,
            });
        }
    }
    Ok((key, bytes, entry))
}

/// The ArtifactRevision row a PathCurrent entry names, with its stored bytes (for the Equals
/// predicate of the command that changes its count).
///
/// Errors: [`Error::Codec`] when the row is missing or corrupt; storage errors.
pub(crate) fn named_revision<S: Snapshot>(
    snap: &S,
    root: &RootId,
    rev: &ArtifactRevisionId,
) -> Result<(Vec<u8>, ArtifactRevision)> {
    let Some(bytes) = snap.get(Family::ArtifactRevision, &artifact_revision::key(root, rev))?
    else {
        return Err(Error::codec(
            "artifact_revision",
            format!("PathCurrent names missing revision {rev}"),
        ));
    };
    let row = ArtifactRevision::decode(&bytes)?;
    Ok((bytes, row))
}

/// Accumulates the predicates, mutations and events of removing several paths of one
/// incarnation in one command (shared with the reclamation of an expired workbench,
/// [`crate::ops::expiry`]).
pub(crate) struct Removal<'a> {
    root: RootId,
    ws: &'a WorkspaceCurrent,
    workbench_id: &'a str,
    cv: u64,
    pub(crate) predicates: Vec<Predicate>,
    pub(crate) mutations: Vec<Mutation>,
    /// SecondaryIndex mutations so far (bounded by [`MAX_INDEX_MUTATIONS`]).
    index_mutations: usize,
    /// Paths added so far.
    paths: usize,
    pub(crate) events: Vec<ChangeEvent>,
    /// Revisions whose count changes: original bytes, row and number of released references.
    touched: BTreeMap<ArtifactRevisionId, (Vec<u8>, ArtifactRevision, u64)>,
}

impl<'a> Removal<'a> {
    pub(crate) fn new(
        root: RootId,
        ws: &'a WorkspaceCurrent,
        workbench_id: &'a str,
        cv: u64,
    ) -> Self {
        Removal {
            root,
            ws,
            workbench_id,
            cv,
            predicates: Vec::new(),
            mutations: Vec::new(),
            index_mutations: 0,
            paths: 0,
            events: Vec::new(),
            touched: BTreeMap::new(),
        }
    }

    /// Adds the removal of `path` (whose PathCurrent row holds `bytes` = `entry`) unless its
    /// SecondaryIndex rows would take the command past [`MAX_INDEX_MUTATIONS`]; the first path
    /// is always added. Returns whether it was added (false: the batch is full, nothing added).
    pub(crate) fn add<S: Snapshot>(
        &mut self,
        snap: &S,
        path: &NormPath,
        bytes: Vec<u8>,
        entry: &PathEntry,
    ) -> Result<bool> {
        let inc = self.ws.incarnation;
        let index = index_mutations(&self.root, &inc, self.workbench_id, path, Some(entry), None)?;
        if self.paths > 0 && self.index_mutations + index.len() > MAX_INDEX_MUTATIONS {
            return Ok(false);
        }
        self.paths += 1;
        let pkey = path_current::key(&self.root, &inc, path);
        self.predicates
            .push(Predicate::equals(Family::PathCurrent, pkey.clone(), bytes));
        self.mutations.push(Mutation::Delete {
            family: Family::PathCurrent,
            key: pkey,
        });
        let rev = entry.artifact_revision_id;
        self.mutations.push(Mutation::Delete {
            family: Family::RevisionRef,
            key: revision_ref::key(
                &self.root,
                &RefOwner::Path {
                    incarnation: inc,
                    path: path.clone(),
                },
                &rev,
            ),
        });
        if let Some(slot) = self.touched.get_mut(&rev) {
            slot.2 += 1;
        } else {
            let (abytes, row) = named_revision(snap, &self.root, &rev)?;
            self.touched.insert(rev, (abytes, row, 1));
        }
        self.index_mutations += index.len();
        self.mutations.extend(index);
        self.events.push(ChangeEvent {
            workbench_id: self.workbench_id.to_owned(),
            incarnation: inc,
            kind: ChangeKind::ArtifactRemoved,
            path: Some(path.clone()),
            before_generation: Some(entry.generation),
            after_generation: None,
            moved_from: None,
        });
        Ok(true)
    }

    /// Appends the revision rows, GcCandidates and the WorkspaceCurrent advance.
    pub(crate) fn finish(&mut self, ws_key: Vec<u8>, ws_bytes: Vec<u8>) -> Result<()> {
        for (id, (bytes, mut row, releases)) in std::mem::take(&mut self.touched) {
            let key = artifact_revision::key(&self.root, &id);
            // The one reference-release helper: count −1 / epoch +1 per reference; the release
            // that reaches zero records last_zero_ref_version and yields the GcCandidate.
            for _ in 0..releases {
                if let Some(candidate) =
                    super::commit::adjust_revision(&self.root, &id, &mut row, false, self.cv)?
                {
                    self.mutations.push(candidate);
                }
            }
            self.predicates.push(Predicate::equals(
                Family::ArtifactRevision,
                key.clone(),
                bytes,
            ));
            self.mutations
                .push(Mutation::put(Family::ArtifactRevision, key, row.encode()));
        }
        let next = self.ws.advanced(self.cv);
        self.predicates.push(Predicate::equals(
            Family::WorkspaceCurrent,
            ws_key.clone(),
            ws_bytes,
        ));
        self.mutations.push(Mutation::put(
            Family::WorkspaceCurrent,
            ws_key,
            next.encode(),
        ));
        Ok(())
    }
}

fn receipt(out: crate::command::CommandOutcome) -> Result<RemoveReceipt> {
    match out.result {
        CommandResult::Removed { entry } => Ok(RemoveReceipt {
            removed: entry,
            commit_version: out.commit_version,
            idempotent_replay: out.idempotent_replay,
        }),
        _ => Err(Error::RequestReplayMismatch),
    }
}

/// Removes one visible path (see the module docs). Validation happens before any read; an exact
/// request-id replay returns the stored receipt even after later commits (and even though the
/// path is gone).
///
/// Errors: [`Error::InvalidArgument`] (invalid workbench id, reserved manifest);
/// [`Error::WorkspaceNotFound`]; [`Error::PathNotFound`] (nothing at this path);
/// [`Error::PathIsDirectory`] (an implicit directory: files lie under it);
/// [`Error::GenerationConflict`] when `expected_generation`
/// differs (nothing written); [`Error::RequestReplayMismatch`]; [`Error::Fenced`];
/// [`Error::ReadVersionConflict`] after [`super::MAX_ATTEMPTS`]; codec and storage errors.
pub fn remove(shard: &MetaShard, req: &RemoveRequest) -> Result<RemoveReceipt> {
    validate_workbench_id(&req.workbench_id)?;
    if is_reserved(&req.path) {
        return Err(Error::invalid(format!(
            "{} is owned by commit/restore and cannot be removed",
            req.path
        )));
    }
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

/// What one single-path attempt (a removal, or a move: [`crate::ops::move_path`]) turns into at a
/// snapshot.
pub(crate) enum Planned {
    /// The stored result of an earlier identical request.
    Replay(Box<crate::command::CommandOutcome>),
    /// The command to execute.
    Command(Box<crate::command::MetadataCommand>),
}

/// Builds the removal command of `req` at `snap` with point reads only (no prefix scan): the
/// fence rows, the CommandDedupe row, WorkspaceCurrent, PathCurrent and the referenced
/// ArtifactRevision; only a path without a file costs one limit-1 probe for descendants.
pub(crate) fn plan<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    req: &RemoveRequest,
    digest: [u8; 32],
) -> Result<Planned> {
    let root = shard.root_id();
    check_handle_fences(snap, &shard.inner.fence())?;
    if let Some(out) = replay_lookup(snap, &root, &req.request_id, &digest)? {
        return Ok(Planned::Replay(Box::new(out)));
    }
    let (ws_key, ws_bytes, ws) =
        super::tag::visible_ws(snap, &root, &req.workbench_id, shard.wall_unix_ms())?;
    let (_, bytes, entry) = file_at(
        snap,
        &root,
        &ws.incarnation,
        &req.path,
        req.expected_generation,
    )?;
    let read_version = snap.version();
    let cv = read_version
        .checked_add(1)
        .ok_or_else(|| Error::invalid("commit version exhausted"))?;
    let mut removal = Removal::new(root, &ws, &req.workbench_id, cv);
    // One path: always within the bound.
    removal.add(snap, &req.path, bytes, &entry)?;
    removal.finish(ws_key, ws_bytes)?;
    let mut cmd = shard.command_header(
        req.request_id,
        digest,
        read_version,
        CommandResult::Removed { entry },
    );
    cmd.predicates = removal.predicates;
    cmd.mutations = removal.mutations;
    cmd.event_projection = removal.events;
    Ok(Planned::Command(Box::new(cmd)))
}

/// The published files the next batch considers: the file at exactly `prefix`, then those
/// strictly under it in canonical key order — at most `want` of them, skipping reserved
/// manifests (returned separately).
#[allow(clippy::type_complexity)]
fn next_paths<S: Snapshot>(
    snap: &S,
    root: &RootId,
    ws: &WorkspaceCurrent,
    prefix: &NormPath,
    want: usize,
) -> Result<(Vec<(NormPath, Vec<u8>)>, Vec<NormPath>)> {
    let inc = ws.incarnation;
    let mut out = Vec::new();
    let mut reserved = Vec::new();
    let exact = path_current::key(root, &inc, prefix);
    if let Some(b) = snap.get(Family::PathCurrent, &exact)? {
        if is_reserved(prefix) {
            reserved.push(prefix.clone());
        } else {
            out.push((prefix.clone(), b));
        }
    }
    let mut marker: Option<Vec<u8>> = None;
    let scan_prefix = path_current::children_prefix(root, &inc, Some(prefix));
    while out.len() < want {
        let spec = ScanSpec {
            prefix: scan_prefix.clone(),
            start_after: marker.take(),
            delimiter: None,
            limit: want - out.len() + RESERVED_PATHS.len(),
        };
        let batch = snap.scan(Family::PathCurrent, &spec)?;
        let exhausted = batch.len() < spec.limit;
        for item in batch {
            let ScanItem::Row { key, value } = item else {
                return Err(Error::codec("path_current", "rollup in a recursive scan"));
            };
            let path = path_current::decode_key_path(&key)?;
            marker = Some(key);
            if is_reserved(&path) {
                reserved.push(path);
            } else if out.len() < want {
                out.push((path, value));
            }
        }
        if exhausted {
            break;
        }
    }
    Ok((out, reserved))
}

/// Removes the next batch of paths under `prefix` in ONE command (see the module docs): the file
/// at exactly `prefix` and every file strictly under it, at most `max_paths` (clamped to
/// 1..=[`MAX_PATHS_PER_BATCH`]) and within the command's index-mutation bound. Reserved manifests
/// are kept and reported. Call it until [`BatchOutcome::done`].
///
/// Errors: [`Error::InvalidArgument`] (invalid workbench id); [`Error::WorkspaceNotFound`];
/// [`Error::Fenced`]; [`Error::ReadVersionConflict`] after [`super::MAX_ATTEMPTS`]; codec and storage
/// errors.
pub fn remove_batch(
    shard: &MetaShard,
    workbench_id: &str,
    prefix: &NormPath,
    max_paths: usize,
) -> Result<BatchOutcome> {
    validate_workbench_id(workbench_id)?;
    let want = max_paths.clamp(1, MAX_PATHS_PER_BATCH.min(MAX_COMMAND_EVENTS));
    let root = shard.root_id();
    let mut digest_input = Sha256::new();
    digest_input.update(b"nokv.remove.batch.v1\0");
    digest_input.update(workbench_id.as_bytes());
    digest_input.update([0]);
    digest_input.update(prefix.as_str().as_bytes());
    let digest: [u8; 32] = digest_input.finalize().into();
    super::run_step(shard, |snap| {
        let (ws_key, ws_bytes, ws) =
            super::tag::visible_ws(snap, &root, workbench_id, shard.wall_unix_ms())?;
        let (paths, kept_reserved) = next_paths(snap, &root, &ws, prefix, want)?;
        if paths.is_empty() {
            return Ok(super::Step::Done(BatchOutcome {
                removed: Vec::new(),
                kept_reserved,
                commit_version: None,
                done: true,
            }));
        }
        let read_version = snap.version();
        let cv = read_version
            .checked_add(1)
            .ok_or_else(|| Error::invalid("commit version exhausted"))?;
        let mut removal = Removal::new(root, &ws, workbench_id, cv);
        let mut removed = Vec::new();
        let total = paths.len();
        for (path, bytes) in paths {
            let entry = PathEntry::decode(&bytes)?;
            if !removal.add(snap, &path, bytes, &entry)? {
                break;
            }
            removed.push((path, entry.generation));
        }
        let done = removed.len() == total && total < want;
        removal.finish(ws_key, ws_bytes)?;
        let mut cmd = shard.command_header(
            RequestId::random()?,
            digest,
            read_version,
            CommandResult::Applied {
                value: removed.len() as u64,
            },
        );
        cmd.predicates = removal.predicates;
        cmd.mutations = removal.mutations;
        cmd.event_projection = removal.events;
        Ok(super::Step::Command(
            Box::new(cmd),
            BatchOutcome {
                removed,
                kept_reserved,
                commit_version: Some(cv),
                done,
            },
        ))
    })
}
