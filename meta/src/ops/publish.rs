//! Artifact publication: create, replace and append as one metadata command.
//!
//! One command (docs/metadata-format.md, "Artifact Revisions And Strong References", "Upload And Append"):
//! - predicates: WorkspaceCurrent Equals the bytes read (same incarnation, `Visible`);
//!   PathCurrent Absent / Equals the bytes read, per [`PathCondition`]; the new ArtifactRevision
//!   Absent (revision ids are never reused); every dependency owner's ArtifactRevision Equals the
//!   bytes read (it must be `Available`); the replaced revision's row Equals the bytes read;
//! - mutations: the new ArtifactRevision (`Available`, strong_reference_count 1, reference_epoch
//!   1, manifest digest, dependency count/digest), its ArtifactManifest rows, RevisionRef(Path)
//!   for it, one RevisionRef(RevisionDependency, child = new revision) per distinct physical
//!   owner with that owner's count +1 / epoch +1, PathCurrent (generation = commit version =
//!   read_version + 1, created_version kept across replacements), WorkspaceCurrent
//!   workspace_revision +1 / modified_version; when a path existed: its RevisionRef(Path) is
//!   deleted and the old revision's count −1 / epoch +1 (at zero: last_zero_ref_version = commit
//!   version and a GcCandidate keyed by the new epoch); a ChangeEvent; CommandDedupe;
//! - index projection (see [`crate::command::projection`]): the SecondaryIndex rows of the new
//!   PathEntry (built-in fields plus the request's `index_fields`, which PathCurrent also stores
//!   in `index_projection`) are put and the replaced entry's rows whose keys changed are
//!   deleted, in this same command — there is no second index mutation path;
//! - namespace rule (docs/workbench.md, "Files and directories": a path is a file or an implicit
//!   directory, never both), checked by [`namespace_check`] whenever the command creates the
//!   path: every proper prefix of the path must be absent (one PathCurrent point read each,
//!   re-asserted as `Absent` predicates) and the path must have no descendants (one limit-1 scan
//!   of its subtree prefix). The scan has no predicate form; the command's read-version fence
//!   (commit version = read version + 1, see [`crate::command::executor`]) guarantees that no row
//!   entered the subtree between the probe and the commit, so two racing writers of `d` and
//!   `d/x` cannot both succeed. Replacing or appending to an existing file skips the check: the
//!   file's position was checked when it was created. This is the one bounded prefix probe of an
//!   ordinary publication (docs/metadata-format.md otherwise asks for point reads only).

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use crate::codec::{
    artifact_manifest, artifact_revision, gc_candidate, manifest_digest_uri, path_current,
    revision_ref, workspace_current, ArtifactRevision, ChangeEvent, ChangeKind, CommandResult,
    GcCandidate, GcClaimState, ManifestRow, PathEntry, RefOwner, RevisionRef, RevisionState,
    WorkspaceCurrent, WorkspaceState,
};
use crate::command::executor::{check_handle_fences, replay_lookup};
use crate::command::projection::{self as index_projection, IndexFields};
use crate::command::{CommandOutcome, MetadataCommand, Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{validate_workbench_id, ArtifactRevisionId, RequestId};
use crate::path::NormPath;
use crate::shard::sequencer::Sequenced;
use crate::shard::MetaShard;
use crate::store::Snapshot;

/// Paths owned by commit/restore; generic publication refuses them (docs/metadata-format.md, "Commit Closure").
pub const RESERVED_PATHS: [&str; 2] = [
    "metadata/run_manifest.json",
    "metadata/restore_manifest.json",
];
/// At most this many distinct dependency owner revisions (docs/metadata-format.md).
pub const MAX_DEPENDENCY_OWNERS: usize = 64;
/// Maximum sealed dependency depth (docs/metadata-format.md).
pub const MAX_DEPENDENCY_DEPTH: u32 = 8;
/// Maximum content-type length in bytes.
pub const MAX_CONTENT_TYPE_BYTES: usize = 255;
/// Maximum producer length in bytes.
pub const MAX_PRODUCER_BYTES: usize = 1024;
/// Maximum manifest id length in bytes.
pub const MAX_MANIFEST_ID_BYTES: usize = 1024;
/// Maximum object key length in bytes.
pub const MAX_OBJECT_KEY_BYTES: usize = 1024;

/// The publication condition (a generation CAS on PathCurrent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathCondition {
    /// The path must be absent ([`Error::PathAlreadyExists`] otherwise).
    Create,
    /// The path must exist ([`Error::PathNotFound`]) with this generation
    /// ([`Error::GenerationConflict`]).
    Replace {
        /// Generation read by the caller.
        expected_generation: u64,
    },
    /// `None`: the path must be absent; `Some(g)`: it must exist with generation `g`. Any
    /// mismatch is [`Error::GenerationConflict`] (`0` standing for "absent").
    Append {
        /// Generation of the base body, if any.
        expected_generation: Option<u64>,
    },
}

/// One publication request. The caller uploads the blocks under `revision_id` first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishRequest {
    /// Replay identity; a response-loss retry reuses it.
    pub request_id: RequestId,
    /// Target workbench (must be `Visible`).
    pub workbench_id: String,
    /// Target path (normalized).
    pub path: NormPath,
    /// Generation condition.
    pub condition: PathCondition,
    /// The new revision, allocated by the caller before uploading blocks (must be unused).
    pub revision_id: ArtifactRevisionId,
    /// Complete body length in bytes.
    pub logical_size: u64,
    /// `sha256:` + 64 lowercase hex of the complete body.
    pub body_digest_uri: String,
    /// Content type, 1..=255 bytes.
    pub content_type: String,
    /// Producer / provenance summary (≤1024 bytes).
    pub producer: String,
    /// Optional caller manifest id (≤1024 bytes).
    pub manifest_id: Option<String>,
    /// Rows in logical order: `object_index` 0,1,2…, contiguous `logical_offset`s starting at 0,
    /// non-zero lengths summing to `logical_size`. Rows owned by older revisions name them in
    /// `physical_owner_revision`.
    pub manifest: Vec<ManifestRow>,
    /// Sealed dependency depth: 0 when every row is owned by `revision_id`, otherwise
    /// `1 + max(dependency_depth of the distinct physical owners)`; must equal that value and be
    /// ≤ 8 (the caller rematerializes otherwise).
    pub dependency_depth: u32,
    /// Custom typed index fields (at most 64, never a built-in name; see
    /// [`crate::command::projection`]). The built-in fields are projected automatically.
    pub index_fields: IndexFields,
}

/// Outcome of a publication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishReceipt {
    /// New path generation (= `commit_version`).
    pub generation: u64,
    /// Commit version that applied the publication (the original one on replay).
    pub commit_version: u64,
    /// True when the path was absent before.
    pub created: bool,
    /// The published PathEntry.
    pub entry: PathEntry,
    /// True when this is the stored result of an earlier identical request.
    pub idempotent_replay: bool,
    /// The generation that was replaced, if the path existed.
    pub replaced_generation: Option<u64>,
}

/// Validates a `sha256:` + 64 lowercase hex digest URI. Errors: [`Error::InvalidArgument`].
pub fn validate_digest_uri(what: &str, uri: &str) -> Result<()> {
    let ok = uri.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64 && h.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
    });
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} must be \"sha256:\" followed by 64 lowercase hex characters"
        )))
    }
}

/// Whether `path` is one of [`RESERVED_PATHS`] or lies below one. Commit and restore publish
/// the reserved paths as files, so nothing may be written below them either (a path is a file
/// or a directory, never both).
pub fn is_reserved(path: &NormPath) -> bool {
    RESERVED_PATHS.iter().any(|r| {
        let p = path.as_str();
        p == *r || (p.starts_with(r) && p.as_bytes().get(r.len()) == Some(&b'/'))
    })
}

pub use crate::read::namespace_check;

/// Pure validation of a request (no storage access). Errors: [`Error::InvalidArgument`].
pub fn validate_request(req: &PublishRequest) -> Result<()> {
    validate_workbench_id(&req.workbench_id)?;
    if is_reserved(&req.path) {
        return Err(Error::invalid(format!(
            "{} is reserved for commit/restore (or lies below a reserved path) and cannot be published directly",
            req.path
        )));
    }
    validate_digest_uri("body_digest_uri", &req.body_digest_uri)?;
    if req.content_type.is_empty() || req.content_type.len() > MAX_CONTENT_TYPE_BYTES {
        return Err(Error::invalid("content_type must be 1..=255 bytes"));
    }
    if req.producer.len() > MAX_PRODUCER_BYTES {
        return Err(Error::invalid("producer is longer than 1024 bytes"));
    }
    if req
        .manifest_id
        .as_ref()
        .is_some_and(|m| m.len() > MAX_MANIFEST_ID_BYTES)
    {
        return Err(Error::invalid("manifest_id is longer than 1024 bytes"));
    }
    if req.manifest.len() > crate::command::MAX_MANIFEST_ROWS {
        return Err(Error::invalid("manifest has too many rows"));
    }
    let mut offset: u64 = 0;
    for (i, row) in req.manifest.iter().enumerate() {
        if row.object_index != i as u64 {
            return Err(Error::invalid(format!(
                "manifest row {i} has object_index {}; rows must be numbered 0,1,2,…",
                row.object_index
            )));
        }
        if row.logical_offset != offset {
            return Err(Error::invalid(format!(
                "manifest row {i} starts at logical offset {}, expected {offset}",
                row.logical_offset
            )));
        }
        if row.length == 0 {
            return Err(Error::invalid(format!("manifest row {i} has zero length")));
        }
        if row.object_key.is_empty() || row.object_key.len() > MAX_OBJECT_KEY_BYTES {
            return Err(Error::invalid(format!(
                "manifest row {i} object_key must be 1..=1024 bytes"
            )));
        }
        validate_digest_uri("manifest row digest_uri", &row.digest_uri)?;
        offset = offset
            .checked_add(row.length)
            .ok_or_else(|| Error::invalid("manifest lengths overflow"))?;
    }
    if offset != req.logical_size {
        return Err(Error::invalid(format!(
            "manifest rows cover {offset} bytes but logical_size is {}",
            req.logical_size
        )));
    }
    if req.dependency_depth > MAX_DEPENDENCY_DEPTH {
        return Err(Error::invalid(
            "dependency_depth exceeds 8; rematerialize the body",
        ));
    }
    let owners = dependency_owners(req);
    if owners.len() > MAX_DEPENDENCY_OWNERS {
        return Err(Error::invalid(
            "more than 64 distinct dependency owners; rematerialize the body",
        ));
    }
    index_projection::validate_index_fields(&req.index_fields)?;
    Ok(())
}

/// Distinct physical owners other than the new revision, sorted.
fn dependency_owners(req: &PublishRequest) -> BTreeSet<ArtifactRevisionId> {
    req.manifest
        .iter()
        .map(|r| r.physical_owner_revision)
        .filter(|o| *o != req.revision_id)
        .collect()
}

/// SHA-256 over the sorted, concatenated 16-byte owner ids.
pub(crate) fn dependency_digest(owners: &BTreeSet<ArtifactRevisionId>) -> [u8; 32] {
    let mut h = Sha256::new();
    for o in owners {
        h.update(o.as_bytes());
    }
    h.finalize().into()
}

/// The command digest: SHA-256 over a canonical encoding of every request field except the
/// request id (domain `nokv.publish.v1\0`).
pub fn command_digest(req: &PublishRequest) -> [u8; 32] {
    let mut h = Sha256::new();
    let s = |h: &mut Sha256, b: &[u8]| {
        h.update((b.len() as u64).to_be_bytes());
        h.update(b);
    };
    h.update(b"nokv.publish.v1\0");
    s(&mut h, req.workbench_id.as_bytes());
    s(&mut h, req.path.as_str().as_bytes());
    match req.condition {
        PathCondition::Create => h.update([1u8]),
        PathCondition::Replace {
            expected_generation,
        } => {
            h.update([2u8]);
            h.update(expected_generation.to_be_bytes());
        }
        PathCondition::Append {
            expected_generation,
        } => {
            h.update([3u8]);
            match expected_generation {
                None => h.update([0u8]),
                Some(g) => {
                    h.update([1u8]);
                    h.update(g.to_be_bytes());
                }
            }
        }
    }
    h.update(req.revision_id.as_bytes());
    h.update(req.logical_size.to_be_bytes());
    s(&mut h, req.body_digest_uri.as_bytes());
    s(&mut h, req.content_type.as_bytes());
    s(&mut h, req.producer.as_bytes());
    match &req.manifest_id {
        None => h.update([0u8]),
        Some(m) => {
            h.update([1u8]);
            s(&mut h, m.as_bytes());
        }
    }
    h.update(req.dependency_depth.to_be_bytes());
    h.update((req.manifest.len() as u64).to_be_bytes());
    for r in &req.manifest {
        h.update(r.object_index.to_be_bytes());
        s(&mut h, &r.encode_value());
    }
    // Index fields extend the digest only when present (requests without keep their digest).
    if !req.index_fields.is_empty() {
        s(&mut h, b"index_fields");
        h.update((req.index_fields.len() as u64).to_be_bytes());
        for (field, value) in &req.index_fields {
            s(&mut h, field.as_str().as_bytes());
            s(&mut h, &value.encode().unwrap_or_default());
        }
    }
    h.finalize().into()
}

pub(crate) fn receipt(out: CommandOutcome) -> Result<PublishReceipt> {
    match out.result {
        CommandResult::Published {
            generation,
            created,
            replaced_generation,
            entry,
        } => Ok(PublishReceipt {
            generation,
            commit_version: out.commit_version,
            created,
            entry,
            idempotent_replay: out.idempotent_replay,
            replaced_generation,
        }),
        _ => Err(Error::RequestReplayMismatch),
    }
}

/// Publishes one body (see the module docs). Validation happens before any read or write; an
/// exact request-id replay returns the stored receipt even after later commits.
///
/// Errors: [`Error::InvalidArgument`], [`Error::WorkspaceNotFound`], [`Error::PathAlreadyExists`],
/// [`Error::PathNotFound`], [`Error::PathIsDirectory`], [`Error::AncestorIsFile`],
/// [`Error::GenerationConflict`], [`Error::RequestReplayMismatch`],
/// [`Error::RevisionUnavailable`], [`Error::ReadVersionConflict`] after [`super::MAX_ATTEMPTS`],
/// [`Error::Fenced`], codec and storage errors.
pub fn publish(shard: &MetaShard, req: PublishRequest) -> Result<PublishReceipt> {
    validate_request(&req)?;
    let digest = command_digest(&req);
    super::sequenced_retrying(shard, |seq| attempt(shard, seq, &req, digest))
}

/// Reads one ArtifactRevision row, returning its bytes and decoded value.
fn read_revision<S: Snapshot>(snap: &S, key: &[u8]) -> Result<Option<(Vec<u8>, ArtifactRevision)>> {
    match snap.get(Family::ArtifactRevision, key)? {
        None => Ok(None),
        Some(b) => {
            let r = ArtifactRevision::decode(&b)?;
            Ok(Some((b, r)))
        }
    }
}

/// What one publication attempt turns into at a snapshot.
pub(crate) enum Planned {
    /// The stored result of an earlier identical request.
    Replay(Box<CommandOutcome>),
    /// The command to execute.
    Command(Box<MetadataCommand>),
}

fn attempt(
    shard: &MetaShard,
    seq: &mut Sequenced<'_>,
    req: &PublishRequest,
    digest: [u8; 32],
) -> Result<PublishReceipt> {
    seq.prepare_write()?;
    let snap = seq.snapshot();
    match plan(shard, &snap, req, digest)? {
        Planned::Replay(out) => receipt(*out),
        Planned::Command(cmd) => {
            drop(snap);
            receipt(seq.execute(*cmd)?)
        }
    }
}

/// Builds the publication command at `snap`: point reads of the fence rows (marker, RootFence,
/// owner epoch, recovery tail), the CommandDedupe row, WorkspaceCurrent, PathCurrent, the new
/// ArtifactRevision (must be absent), each distinct dependency owner (≤
/// [`MAX_DEPENDENCY_OWNERS`]) and the replaced revision; when the path is created, the
/// [`namespace_check`] (ancestor point reads and one limit-1 descendant probe).
pub(crate) fn plan<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    req: &PublishRequest,
    digest: [u8; 32],
) -> Result<Planned> {
    plan_with(shard, snap, req, digest, None)
}

/// The publish operation a ledger-driven publication moves Finalizing -> Published in the same
/// command (see [`crate::ops::publish_operation`]).
pub(crate) struct OperationBinding {
    /// Operation key.
    pub(crate) key: Vec<u8>,
    /// Exact Finalizing value read (the command predicates it unchanged).
    pub(crate) bytes: Vec<u8>,
    /// The decoded operation.
    pub(crate) op: crate::codec::PublishOperation,
}

/// [`plan`] with an optional publish-operation binding: the command then also predicates the
/// operation row unchanged and writes it as Published with the result (commit version and new
/// path generation).
pub(crate) fn plan_with<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    req: &PublishRequest,
    digest: [u8; 32],
    binding: Option<&OperationBinding>,
) -> Result<Planned> {
    let root = shard.root_id();
    // Validation order (docs/metadata-format.md): schema marker, RootFence and owner epoch before replay.
    check_handle_fences(snap, &shard.inner.fence)?;
    if let Some(out) = replay_lookup(snap, &root, &req.request_id, &digest)? {
        return Ok(Planned::Replay(Box::new(out)));
    }
    let read_version = snap.version();
    let cv = read_version
        .checked_add(1)
        .ok_or_else(|| Error::invalid("commit version exhausted"))?;

    // Workspace marker.
    let ws_key = workspace_current::key(&root, &req.workbench_id);
    let ws_bytes = snap
        .get(Family::WorkspaceCurrent, &ws_key)?
        .ok_or_else(|| Error::WorkspaceNotFound {
            workbench_id: req.workbench_id.clone(),
        })?;
    let ws = WorkspaceCurrent::decode(&ws_bytes)?;
    if ws.state != WorkspaceState::Visible {
        return Err(Error::WorkspaceNotFound {
            workbench_id: req.workbench_id.clone(),
        });
    }
    let inc = ws.incarnation;

    // Path condition.
    let path_key = path_current::key(&root, &inc, &req.path);
    let old_bytes = snap.get(Family::PathCurrent, &path_key)?;
    let old = old_bytes.as_deref().map(PathEntry::decode).transpose()?;
    let actual = old.as_ref().map(|e| e.generation);
    // A path the command would create must be neither below a file nor a directory; this is
    // checked before the condition so a replace or append naming a directory is refused as one.
    let namespace = match old {
        None => namespace_check(snap, &root, &inc, &req.path)?,
        Some(_) => Vec::new(),
    };
    match req.condition {
        PathCondition::Create => {
            if old.is_some() {
                return Err(Error::PathAlreadyExists);
            }
        }
        PathCondition::Replace {
            expected_generation,
        } => match actual {
            None => return Err(Error::PathNotFound),
            Some(g) if g != expected_generation => {
                return Err(Error::GenerationConflict {
                    expected: expected_generation,
                    actual: g,
                })
            }
            Some(_) => {}
        },
        PathCondition::Append {
            expected_generation,
        } => {
            if actual != expected_generation {
                return Err(Error::GenerationConflict {
                    expected: expected_generation.unwrap_or(0),
                    actual: actual.unwrap_or(0),
                });
            }
        }
    }

    // The new revision must be unused.
    let new_rev_key = artifact_revision::key(&root, &req.revision_id);
    if snap.get(Family::ArtifactRevision, &new_rev_key)?.is_some() {
        return Err(Error::invalid(format!(
            "artifact revision {} already exists; allocate a fresh revision id",
            req.revision_id
        )));
    }

    let mut predicates = vec![
        Predicate::equals(Family::WorkspaceCurrent, ws_key.clone(), ws_bytes),
        match &old_bytes {
            None => Predicate::absent(Family::PathCurrent, path_key.clone()),
            Some(b) => Predicate::equals(Family::PathCurrent, path_key.clone(), b.clone()),
        },
        Predicate::absent(Family::ArtifactRevision, new_rev_key.clone()),
    ];
    predicates.extend(namespace);
    let mut mutations = Vec::new();

    // Revisions whose reference counts change: id -> (original bytes, updated row).
    let mut touched: BTreeMap<ArtifactRevisionId, (Vec<u8>, ArtifactRevision)> = BTreeMap::new();

    // Dependency owners: each must be Available; add one RevisionDependency ref each.
    let owners = dependency_owners(req);
    let mut expected_depth = 0u32;
    for owner in &owners {
        let key = artifact_revision::key(&root, owner);
        let Some((bytes, mut row)) = read_revision(snap, &key)? else {
            return Err(Error::RevisionUnavailable {
                revision: owner.to_hex(),
                reason: "missing".into(),
            });
        };
        if row.state != RevisionState::Available {
            return Err(Error::RevisionUnavailable {
                revision: owner.to_hex(),
                reason: format!("state {:?}", row.state),
            });
        }
        expected_depth = expected_depth.max(row.dependency_depth.saturating_add(1));
        row.strong_reference_count = row.strong_reference_count.saturating_add(1);
        row.reference_epoch = row.reference_epoch.saturating_add(1);
        mutations.push(Mutation::put(
            Family::RevisionRef,
            revision_ref::key(
                &root,
                &RefOwner::RevisionDependency {
                    child: req.revision_id,
                },
                owner,
            ),
            RevisionRef {
                reference_epoch_at_add: row.reference_epoch,
                created_version: cv,
            }
            .encode(),
        ));
        touched.insert(*owner, (bytes, row));
    }
    if req.dependency_depth != expected_depth {
        return Err(Error::invalid(format!(
            "dependency_depth is {} but the manifest's owners give {expected_depth}",
            req.dependency_depth
        )));
    }

    // Release the replaced path reference.
    let path_owner = RefOwner::Path {
        incarnation: inc,
        path: req.path.clone(),
    };
    if let Some(old) = &old {
        let old_rev = old.artifact_revision_id;
        mutations.push(Mutation::Delete {
            family: Family::RevisionRef,
            key: revision_ref::key(&root, &path_owner, &old_rev),
        });
        let slot = match touched.entry(old_rev) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                let key = artifact_revision::key(&root, &old_rev);
                let Some(found) = read_revision(snap, &key)? else {
                    return Err(Error::codec(
                        "artifact_revision",
                        format!("PathCurrent names missing revision {old_rev}"),
                    ));
                };
                v.insert(found)
            }
        };
        let row = &mut slot.1;
        row.strong_reference_count = row
            .strong_reference_count
            .checked_sub(1)
            .ok_or_else(|| Error::codec("artifact_revision", "strong reference count underflow"))?;
        row.reference_epoch = row.reference_epoch.saturating_add(1);
    }
    for (id, (bytes, mut row)) in touched {
        let key = artifact_revision::key(&root, &id);
        if row.strong_reference_count == 0 {
            row.last_zero_ref_version = Some(cv);
            mutations.push(Mutation::put(
                Family::GcCandidate,
                gc_candidate::key(&root, &id, row.reference_epoch),
                GcCandidate {
                    last_zero_ref_version: cv,
                    claim_state: GcClaimState::Candidate,
                    retry_count: 0,
                }
                .encode(),
            ));
        }
        predicates.push(Predicate::equals(
            Family::ArtifactRevision,
            key.clone(),
            bytes,
        ));
        mutations.push(Mutation::put(Family::ArtifactRevision, key, row.encode()));
    }

    // The new revision, its manifest and its path reference.
    let manifest_digest = manifest_digest_uri(&req.manifest);
    let revision = ArtifactRevision {
        logical_size: req.logical_size,
        body_digest_uri: req.body_digest_uri.clone(),
        manifest_digest_uri: manifest_digest.clone(),
        block_count: req.manifest.len() as u64,
        dependency_count: owners.len() as u32,
        dependency_depth: req.dependency_depth,
        dependency_digest: dependency_digest(&owners),
        content_type: req.content_type.clone(),
        state: RevisionState::Available,
        reference_epoch: 1,
        strong_reference_count: 1,
        last_zero_ref_version: None,
        created_version: cv,
    };
    mutations.push(Mutation::put(
        Family::ArtifactRevision,
        new_rev_key,
        revision.encode(),
    ));
    mutations.push(Mutation::put(
        Family::RevisionRef,
        revision_ref::key(&root, &path_owner, &req.revision_id),
        RevisionRef {
            reference_epoch_at_add: 1,
            created_version: cv,
        }
        .encode(),
    ));
    let entry = PathEntry {
        generation: cv,
        artifact_revision_id: req.revision_id,
        logical_size: req.logical_size,
        body_digest_uri: req.body_digest_uri.clone(),
        manifest_digest_uri: manifest_digest,
        dependency_count: owners.len() as u32,
        dependency_depth: req.dependency_depth,
        content_type: req.content_type.clone(),
        producer: req.producer.clone(),
        manifest_id: req.manifest_id.clone(),
        created_version: old.as_ref().map_or(cv, |o| o.created_version),
        modified_version: cv,
        index_projection: index_projection::encode_projection(&req.index_fields)?,
    };
    mutations.push(Mutation::put(Family::PathCurrent, path_key, entry.encode()));
    // Index projection: same command as PathCurrent (bounded by the field count).
    mutations.extend(index_projection::index_mutations(
        &root,
        &inc,
        &req.workbench_id,
        &req.path,
        old.as_ref(),
        Some(&entry),
    )?);
    let ws_next = WorkspaceCurrent {
        workspace_revision: ws.workspace_revision.saturating_add(1),
        modified_version: cv,
        ..ws
    };
    mutations.push(Mutation::put(
        Family::WorkspaceCurrent,
        ws_key,
        ws_next.encode(),
    ));
    for row in &req.manifest {
        mutations.push(Mutation::put(
            Family::ArtifactManifest,
            artifact_manifest::key(&root, &req.revision_id, row.object_index),
            row.encode_value(),
        ));
    }

    if let Some(b) = binding {
        predicates.push(Predicate::equals(
            Family::Operation,
            b.key.clone(),
            b.bytes.clone(),
        ));
        let mut published = b.op.clone();
        published.phase = crate::codec::PublishPhase::Published;
        published.result = crate::codec::OperationResult::Succeeded(crate::codec::PublishResult {
            commit_version: cv,
            path_generation: Some(cv),
        });
        mutations.push(Mutation::put(
            Family::Operation,
            b.key.clone(),
            crate::codec::Operation::Publish(published).encode(),
        ));
    }

    let mut cmd = shard.command_header(
        req.request_id,
        digest,
        read_version,
        CommandResult::Published {
            generation: cv,
            created: old.is_none(),
            replaced_generation: actual,
            entry,
        },
    );
    cmd.predicates = predicates;
    cmd.mutations = mutations;
    cmd.event_projection = vec![ChangeEvent {
        workbench_id: req.workbench_id.clone(),
        incarnation: inc,
        kind: if matches!(req.condition, PathCondition::Append { .. }) {
            ChangeKind::ArtifactAppended
        } else {
            ChangeKind::ArtifactPublished
        },
        path: Some(req.path.clone()),
        before_generation: actual,
        after_generation: Some(cv),
    }];
    Ok(Planned::Command(Box::new(cmd)))
}
impl MetaShard {
    /// Publishes one artifact body (see [`publish`]).
    pub fn publish(&self, req: PublishRequest) -> Result<PublishReceipt> {
        publish(self, req)
    }
}
