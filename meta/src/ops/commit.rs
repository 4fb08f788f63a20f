//! Durable commits: the BuildCommit operation and explicit commit retirement (docs/metadata-format.md,
//! "Commit Closure").
//!
//! # BuildCommit
//!
//! The operation id is deterministic: `first_16(sha256("nokv.build-commit.operation.v1\0" |
//! root_id | projection_input_digest))`, so an exact retry finds the same Operation row before any
//! live workspace, head or run-manifest read ("Operation lookup precedes all live … reads").
//! The retry is authenticated against the complete frozen request (workbench, identity digests,
//! `replace`, producer, lineage, parents); any difference is
//! [`Error::OperationInputMismatch`].
//!
//! Phases and the command each step is (every step CASes the exact Operation bytes it read, so
//! concurrent drivers of the same build have one winner per step):
//!
//! 1. [`begin`] — fresh construction only: evaluates the live preconditions (workspace
//!    `Visible`, head vs `replace`, parents `Sealed`), then one command creates
//!    `Operation(BuildCommit)` in `Building` with the frozen request (source incarnation,
//!    read version and workspace revision, expected head, run-manifest generation condition,
//!    first owner-observed `committed_at_unix_seconds`, initialization digest) and
//!    `HistoryHold(BuildCommit, operation_id)` at the source read version;
//! 2. [`stage_manifest`] — after the caller uploaded the canonical `run_manifest.json` blocks
//!    under the deterministic staged revision ([`staged_manifest_revision`]), one command creates
//!    the hidden ArtifactRevision (`Available`, one reference), its manifest rows, its
//!    `RevisionRef(Commit, commit_id)` and the immutable [`StagedManifestBinding`] — without
//!    PathCurrent;
//! 3. member batches ([`step`]) — the frozen workspace is scanned at the source read version in
//!    canonical path order, `metadata/run_manifest.json` replaced/inserted as one virtual member
//!    backed by the staged revision; each command writes ≤ [`MEMBER_BATCH`] CommitMember rows,
//!    one `RevisionRef(Commit)` per revision not yet referenced by this commit (count +1 /
//!    epoch +1 on the revision, which must be `Available`), and advances the member cursor, count
//!    and chained member digest;
//! 4. parent batches — one `CommitConsumer(parent, ChildCommit, child)` per unique parent
//!    against the parent's exact `Sealed` row (count +1 / epoch +1), chained parent digest;
//! 5. seal — re-scans CommitMember, `RevisionRef(Commit, commit_id)` and the parent consumer
//!    rows, verifies the member/revision/parent count+digest pairs against them, then CASes
//!    `Building -> Sealing` recording all three seals;
//! 6. publish — one command writes PathCurrent(`metadata/run_manifest.json`) and its Path
//!    RevisionRef (releasing the replaced one), its index rows, WorkspaceCurrent, the sealed
//!    Commit (consumer_count 1 for the head), WorkbenchCommitHead, the new head's
//!    `CommitConsumer(WorkbenchHead)` and the old head's release, `Sealing -> Complete` with
//!    the result, one ChangeEvent, and deletes the HistoryHold.
//!
//! Abort: a permanent failure (head moved, run-manifest generation moved, workspace gone, a
//! revision or parent no longer usable) CASes `Building|Sealing -> Aborting` with the terminal
//! error (`Sealing` only with a `Commit` Absent predicate), then `Aborting -> Cleaning`, then
//! cleanup batches delete CommitMember rows, release every `RevisionRef(Commit)` (count −1 /
//! epoch +1, GcCandidate at zero) and every parent consumer, and a final command deletes the
//! HistoryHold and sets `Cleaned`. `Quarantined` is never entered by this implementation (no
//! ambiguous external effect exists in the metadata steps).
//!
//! # Digests (decisions recorded here)
//!
//! - member digest: chained, `d_0 = 0^32`, `d_i = sha256("nokv.commit.member.v1\0" | d_{i-1} |
//!   u32 len | ordered path key | u32 len | CommitMember value)`;
//! - revision digest: `sha256("nokv.commit.revisions.v1\0" | ids…)` over the unique revision ids
//!   in ascending byte order (the `RevisionRef(Commit)` key order);
//! - parent digest: chained like the member digest with `"nokv.commit.parent.v1\0" | d | id`
//!   over the unique parents in ascending order.
//!
//! # CommitRetire
//!
//! [`retire`] claims `Sealed -> Retiring` in one command that predicates the exact Commit bytes
//! (so `consumer_count == 0` at the observed `consumer_epoch`) and creates the CommitRetire
//! operation directly in `Releasing` (the claim and the operation row are one atomic command, so
//! `Claiming` is never observable). Release batches delete members, release the unique revision
//! references and the outbound parent consumers with typed cursors; one final command publishes
//! `Retired` and `Complete`.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use crate::codec::{
    artifact_manifest, artifact_revision, commit_member, gc_candidate, manifest_digest_uri,
    path_current, revision_ref, workspace_current, ArtifactRevision, BuildCommitOperation,
    BuildCommitPhase, BuildCommitResult, ChangeEvent, ChangeKind, ClosureCursor, CommandResult,
    Commit, CommitConsumer, CommitConsumerKey, CommitMember, CommitMemberKey,
    CommitRetireOperation, CommitRetirePhase, CommitState, ConsumerOwner, GcCandidate,
    GcClaimState, HeadRef, HistoryHold, HistoryHoldKey, HistoryHoldState, HoldId, ManifestRow,
    Operation, OperationKey, OperationKind, OperationResult, PathEntry, RefOwner, RevisionRef,
    RevisionState, SetCursor, StagedManifestBinding, TerminalError, WorkbenchCommitHead,
    WorkbenchCommitHeadKey, WorkspaceCurrent, WorkspaceState,
};
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::ids::{
    validate_workbench_id, ArtifactRevisionId, CommitId, OperationId, RequestId, RootId,
    WorkspaceIncarnationId,
};
use crate::index::projection as index_projection;
use crate::path::{normalize, ordered_key, NormPath};
use crate::schema::Family;
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, Snapshot, TxnStore};

use super::{run_step as run, Step as Built};

/// The reserved path the commit publishes (docs/metadata-format.md, "Commit Closure").
pub const RUN_MANIFEST_PATH: &str = "metadata/run_manifest.json";
/// CommitMember rows written by one member-batch command.
pub const MEMBER_BATCH: usize = 64;
/// Rows released by one cleanup / retirement command.
pub const RELEASE_BATCH: usize = 64;
/// Parents attached by one command.
pub const PARENT_BATCH: usize = 32;
/// Most unique parents one commit may name.
pub const MAX_PARENTS: usize = 64;
/// Largest opaque lineage projection, in bytes.
pub const MAX_LINEAGE_BYTES: usize = 16 * 1024;
/// Largest producer, in bytes.
pub const MAX_PRODUCER_BYTES: usize = 1024;

const OPERATION_DOMAIN: &[u8] = b"nokv.build-commit.operation.v1\0";
/// Domain separator of `BuildCommitOperation.initialization_digest` (docs/metadata-format.md).
pub const INITIALIZATION_DOMAIN: &[u8] = b"nokv.build-commit.initialization.v5\0";
const STAGED_REVISION_DOMAIN: &[u8] = b"nokv.build-commit.staged-manifest.v1\0";
const STAGED_PUBLISH_DOMAIN: &[u8] = b"nokv.build-commit.staged-publish.v1\0";
const MEMBER_DOMAIN: &[u8] = b"nokv.commit.member.v1\0";
const REVISIONS_DOMAIN: &[u8] = b"nokv.commit.revisions.v1\0";
const PARENT_DOMAIN: &[u8] = b"nokv.commit.parent.v1\0";
const STEP_DOMAIN: &[u8] = b"nokv.build-commit.step.v1\0";
const RETIRE_DOMAIN: &[u8] = b"nokv.commit-retire.operation.v1\0";

/// The caller's complete commit request (the facade computed the digests with its canonical
/// JSON and the docs/workbench.md commit identity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildCommitRequest {
    /// Workbench to commit (must be `Visible`).
    pub workbench_id: String,
    /// The 32-byte commit identity (docs/workbench.md) — also the root-global CommitId.
    pub commit_id: CommitId,
    /// The Agent projection-input digest (docs/metadata-format.md).
    pub projection_input_digest: [u8; 32],
    /// `sha256:` content digest URI supplied by the caller.
    pub content_digest_uri: String,
    /// `sha256:` digest URI of the canonical manifest.
    pub manifest_digest_uri: String,
    /// Move an existing head to this commit.
    pub replace: bool,
    /// Producer / provenance summary (≤ 1024 bytes).
    pub producer: String,
    /// Opaque canonical lineage projection (≤ 16 KiB).
    pub lineage: Vec<u8>,
    /// Parent commits (deduplicated and sorted before freezing; ≤ 64 unique).
    pub parents: Vec<CommitId>,
    /// The owner's current wall-clock time, Unix seconds; used only when the operation is
    /// created (a retry keeps the first owner-observed time).
    pub observed_unix_seconds: u64,
}

/// A build operation as read from its row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildHandle {
    /// The operation id.
    pub operation_id: OperationId,
    /// The durable operation.
    pub operation: BuildCommitOperation,
    /// True when this call created the operation (fresh construction).
    pub created: bool,
}

/// The staged run manifest the caller uploaded (object-first) before [`stage_manifest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedManifest {
    /// Must equal [`staged_manifest_revision`] of the operation.
    pub revision_id: ArtifactRevisionId,
    /// Envelope length in bytes.
    pub logical_size: u64,
    /// `sha256:` digest URI of the envelope bytes.
    pub body_digest_uri: String,
    /// Content type (`application/json`).
    pub content_type: String,
    /// Manifest rows (numbered 0,1,2…, contiguous, owned by `revision_id`).
    pub manifest: Vec<ManifestRow>,
}

/// What one [`step`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    /// The staged run manifest must be uploaded and recorded with [`stage_manifest`] first.
    NeedsManifest,
    /// One command applied; the name is the phase boundary just crossed (`"member-batch"`,
    /// `"parents"`, `"sealing"`, `"complete"`, `"aborting"`, `"cleaning"`, `"cleanup-batch"`,
    /// `"cleaned"`).
    Advanced(&'static str),
    /// The operation is terminal (`Complete`, `Cleaned` or `Quarantined`).
    Terminal,
}

fn sha(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

fn first16(d: &[u8; 32]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// The deterministic BuildCommit operation id of a request (see the module docs).
pub fn build_operation_id(root: &RootId, projection_input_digest: &[u8; 32]) -> OperationId {
    OperationId(first16(&sha(&[
        OPERATION_DOMAIN,
        root.as_bytes(),
        projection_input_digest,
    ])))
}

/// The deterministic revision id of the staged run manifest of operation `op` (so a retry after
/// process loss re-uploads to the same object keys instead of leaking blocks).
pub fn staged_manifest_revision(root: &RootId, op: &OperationId) -> ArtifactRevisionId {
    ArtifactRevisionId(first16(&sha(&[
        STAGED_REVISION_DOMAIN,
        root.as_bytes(),
        op.as_bytes(),
    ])))
}

/// The deterministic CommitRetire operation id of a commit.
pub fn retire_operation_id(root: &RootId, commit_id: &CommitId) -> OperationId {
    OperationId(first16(&sha(&[
        RETIRE_DOMAIN,
        root.as_bytes(),
        commit_id.as_bytes(),
    ])))
}

fn run_manifest_path() -> Result<NormPath> {
    Ok(normalize(RUN_MANIFEST_PATH)?)
}

fn op_key(root: &RootId, kind: OperationKind, id: &OperationId) -> Vec<u8> {
    OperationKey {
        root: *root,
        kind,
        operation_id: *id,
    }
    .encode()
}

fn head_key(root: &RootId, inc: &WorkspaceIncarnationId) -> Vec<u8> {
    WorkbenchCommitHeadKey {
        root: *root,
        incarnation: *inc,
    }
    .encode()
}

fn commit_key(root: &RootId, id: &CommitId) -> Vec<u8> {
    crate::codec::commit::CommitKey {
        root: *root,
        commit_id: *id,
    }
    .encode()
}

fn hold_key(root: &RootId, op: &OperationId) -> Vec<u8> {
    HistoryHoldKey {
        root: *root,
        hold: HoldId::BuildCommit(*op),
    }
    .encode()
}

fn consumer_key(root: &RootId, commit: &CommitId, owner: ConsumerOwner) -> Vec<u8> {
    CommitConsumerKey {
        root: *root,
        commit_id: *commit,
        owner,
    }
    .encode()
}

/// `root | Commit kind | commit_id` — prefix of the commit's `RevisionRef(Commit)` rows.
fn commit_ref_prefix(root: &RootId, commit: &CommitId) -> Vec<u8> {
    let mut k = revision_ref::key(
        root,
        &RefOwner::Commit(*commit),
        &ArtifactRevisionId([0; 16]),
    );
    k.truncate(k.len() - ArtifactRevisionId::LEN);
    k
}

fn ref_target(key: &[u8]) -> Result<ArtifactRevisionId> {
    let start = key
        .len()
        .checked_sub(ArtifactRevisionId::LEN)
        .ok_or_else(|| Error::codec("revision_ref", "short key"))?;
    let mut id = [0u8; 16];
    id.copy_from_slice(&key[start..]);
    Ok(ArtifactRevisionId(id))
}

fn decode_build(bytes: &[u8]) -> Result<BuildCommitOperation> {
    match Operation::decode_for_kind(OperationKind::BuildCommit, bytes)? {
        Operation::BuildCommit(b) => Ok(*b),
        _ => Err(Error::codec("operation", "not a BuildCommit operation")),
    }
}

fn encode_build(op: &BuildCommitOperation) -> Vec<u8> {
    Operation::BuildCommit(Box::new(op.clone())).encode()
}

/// Canonical parent list: unique, ascending.
fn canonical_parents(parents: &[CommitId]) -> Vec<CommitId> {
    parents
        .iter()
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// `nokv.build-commit.initialization.v5\0` digest over the frozen request (docs/metadata-format.md).
pub fn initialization_digest(op: &BuildCommitOperation) -> [u8; 32] {
    let mut h = Sha256::new();
    let s = |h: &mut Sha256, b: &[u8]| {
        h.update((b.len() as u64).to_be_bytes());
        h.update(b);
    };
    h.update(INITIALIZATION_DOMAIN);
    h.update(op.projection_input_digest);
    h.update(op.commit_id.as_bytes());
    s(&mut h, op.workbench_id.as_bytes());
    h.update(op.source_incarnation.as_bytes());
    h.update(op.source_read_version.to_be_bytes());
    h.update(op.source_workspace_revision.to_be_bytes());
    match &op.expected_head {
        None => h.update([0u8]),
        Some(hr) => {
            h.update([1u8]);
            h.update(hr.commit_id.as_bytes());
            h.update(hr.head_generation.to_be_bytes());
        }
    }
    s(&mut h, op.content_digest_uri.as_bytes());
    s(&mut h, op.manifest_digest_uri.as_bytes());
    h.update([u8::from(op.replace)]);
    match op.run_manifest_expected_generation {
        None => h.update([0u8]),
        Some(g) => {
            h.update([1u8]);
            h.update(g.to_be_bytes());
        }
    }
    h.update(op.committed_at_unix_seconds.to_be_bytes());
    s(&mut h, op.producer.as_bytes());
    s(&mut h, &op.lineage);
    h.update((op.parents.len() as u64).to_be_bytes());
    for p in &op.parents {
        h.update(p.as_bytes());
    }
    h.finalize().into()
}

fn validate(req: &BuildCommitRequest) -> Result<()> {
    validate_workbench_id(&req.workbench_id)?;
    super::publish::validate_digest_uri("content_digest_uri", &req.content_digest_uri)?;
    super::publish::validate_digest_uri("manifest_digest_uri", &req.manifest_digest_uri)?;
    if req.producer.len() > MAX_PRODUCER_BYTES {
        return Err(Error::invalid("producer is longer than 1024 bytes"));
    }
    if req.lineage.len() > MAX_LINEAGE_BYTES {
        return Err(Error::invalid("lineage is longer than 16 KiB"));
    }
    if canonical_parents(&req.parents).len() > MAX_PARENTS {
        return Err(Error::invalid("a commit may name at most 64 parents"));
    }
    if req.parents.contains(&req.commit_id) {
        return Err(Error::invalid("a commit cannot be its own parent"));
    }
    Ok(())
}

/// Compares a retry with the frozen durable request.
fn authenticate(req: &BuildCommitRequest, op: &BuildCommitOperation) -> Result<()> {
    let mismatch = |what: &str| {
        Err(Error::OperationInputMismatch {
            reason: format!("{what} differs from the original request of this commit"),
        })
    };
    if op.workbench_id != req.workbench_id {
        return mismatch("workbench_id");
    }
    if op.commit_id != req.commit_id || op.projection_input_digest != req.projection_input_digest {
        return mismatch("commit identity");
    }
    if op.content_digest_uri != req.content_digest_uri
        || op.manifest_digest_uri != req.manifest_digest_uri
    {
        return mismatch("digest");
    }
    if op.replace != req.replace {
        return mismatch("replace");
    }
    if op.producer != req.producer {
        return mismatch("producer");
    }
    if op.lineage != req.lineage {
        return mismatch("lineage");
    }
    if op.parents != canonical_parents(&req.parents) {
        return mismatch("parent list");
    }
    Ok(())
}

fn step_digest(op_id: &OperationId, step: &[u8], before: &[u8]) -> [u8; 32] {
    let before_digest = sha(&[before]);
    sha(&[STEP_DOMAIN, op_id.as_bytes(), step, &before_digest])
}

fn advanced(kind: OperationKind, op: &OperationId, phase: u8) -> CommandResult {
    CommandResult::OperationRecorded {
        kind,
        operation_id: *op,
        phase,
    }
}

/// The command of a plain phase step: CAS the BuildCommit row from exactly `bytes` to `next`
/// (callers add further predicates and mutations of the same step).
fn advance_build(
    shard: &MetaShard,
    snap: &impl Snapshot,
    key: &[u8],
    bytes: Vec<u8>,
    op_id: &OperationId,
    step: &[u8],
    next: &BuildCommitOperation,
) -> Result<crate::command::MetadataCommand> {
    let mut cmd = header(
        shard,
        snap,
        step_digest(op_id, step, &bytes),
        advanced(OperationKind::BuildCommit, op_id, next.phase.to_u8()),
    )?;
    cmd.predicates = vec![Predicate::equals(Family::Operation, key.to_vec(), bytes)];
    cmd.mutations = vec![Mutation::put(
        Family::Operation,
        key.to_vec(),
        encode_build(next),
    )];
    Ok(cmd)
}

fn header(
    shard: &MetaShard,
    snap: &impl Snapshot,
    digest: [u8; 32],
    result: CommandResult,
) -> Result<crate::command::MetadataCommand> {
    Ok(shard.command_header(RequestId::random()?, digest, snap.version(), result))
}

fn commit_version(snap: &impl Snapshot) -> Result<u64> {
    snap.version()
        .checked_add(1)
        .ok_or_else(|| Error::invalid("commit version exhausted"))
}

/// `(key, value bytes, decoded)` of one WorkspaceCurrent row.
type WsRow = (Vec<u8>, Vec<u8>, WorkspaceCurrent);

fn read_ws(snap: &impl Snapshot, root: &RootId, workbench_id: &str) -> Result<Option<WsRow>> {
    let key = workspace_current::key(root, workbench_id);
    match snap.get(Family::WorkspaceCurrent, &key)? {
        None => Ok(None),
        Some(b) => {
            let ws = WorkspaceCurrent::decode(&b)?;
            Ok(Some((key, b, ws)))
        }
    }
}

fn read_commit(
    snap: &impl Snapshot,
    root: &RootId,
    id: &CommitId,
) -> Result<Option<(Vec<u8>, Commit)>> {
    match snap.get(Family::Commit, &commit_key(root, id))? {
        None => Ok(None),
        Some(b) => {
            let c = Commit::decode(&b)?;
            Ok(Some((b, c)))
        }
    }
}

/// Reads the BuildCommit operation `op_id` at `snap`: `(bytes, decoded)`.
pub(crate) fn read_build(
    snap: &impl Snapshot,
    root: &RootId,
    op_id: &OperationId,
) -> Result<Option<(Vec<u8>, BuildCommitOperation)>> {
    match snap.get(
        Family::Operation,
        &op_key(root, OperationKind::BuildCommit, op_id),
    )? {
        None => Ok(None),
        Some(b) => {
            let op = decode_build(&b)?;
            Ok(Some((b, op)))
        }
    }
}

/// Reads the BuildCommit operation `op_id` at the current version.
///
/// Errors: codec and storage errors.
pub fn read_operation(
    shard: &MetaShard,
    op_id: &OperationId,
) -> Result<Option<BuildCommitOperation>> {
    let snap = shard.inner.store.snapshot();
    Ok(read_build(&snap, &shard.root_id(), op_id)?.map(|(_, op)| op))
}

/// Reads a Commit record at the current version.
///
/// Errors: codec and storage errors.
pub fn read_commit_record(shard: &MetaShard, id: &CommitId) -> Result<Option<Commit>> {
    let snap = shard.inner.store.snapshot();
    Ok(read_commit(&snap, &shard.root_id(), id)?.map(|(_, c)| c))
}

/// The current WorkbenchCommitHead of a `Visible` workbench (`None`: never committed).
///
/// Errors: [`Error::WorkspaceNotFound`]; codec and storage errors.
pub fn read_head(shard: &MetaShard, workbench_id: &str) -> Result<Option<WorkbenchCommitHead>> {
    let snap = shard.inner.store.snapshot();
    let root = shard.root_id();
    let ws = match read_ws(&snap, &root, workbench_id)? {
        Some((_, _, ws)) if ws.state == WorkspaceState::Visible => ws,
        _ => {
            return Err(Error::WorkspaceNotFound {
                workbench_id: workbench_id.to_owned(),
            })
        }
    };
    snap.get(
        Family::WorkbenchCommitHead,
        &head_key(&root, &ws.incarnation),
    )?
    .map(|b| WorkbenchCommitHead::decode(&b))
    .transpose()
}

/// Step 1: finds (and authenticates) or creates the build operation of `req`.
///
/// An existing operation is returned whatever its phase (the caller drives it with [`step`]);
/// a `Cleaned` operation whose terminal error is a retryable `Conflict` is re-initialized over
/// its exact row. Only fresh construction reads the live workspace, head and run manifest.
///
/// Errors: [`Error::InvalidArgument`], [`Error::OperationInputMismatch`],
/// [`Error::WorkspaceNotFound`], [`Error::WorkbenchCommitConflict`] (head exists, no
/// `replace`), [`Error::CommitNotFound`] / [`Error::CommitLifecycle`] for a parent that is
/// missing or not `Sealed`, [`Error::ReadVersionConflict`], [`Error::Fenced`], codec and
/// storage errors.
pub fn begin(shard: &MetaShard, req: &BuildCommitRequest) -> Result<BuildHandle> {
    validate(req)?;
    let root = shard.root_id();
    let op_id = build_operation_id(&root, &req.projection_input_digest);
    let key = op_key(&root, OperationKind::BuildCommit, &op_id);
    run(shard, |snap| {
        let previous = match read_build(snap, &root, &op_id)? {
            Some((bytes, op)) => {
                authenticate(req, &op)?;
                let restartable = op.phase == BuildCommitPhase::Cleaned
                    && matches!(&op.result, OperationResult::Failed(t) if t.code == "Conflict");
                if !restartable {
                    return Ok(Built::Done(BuildHandle {
                        operation_id: op_id,
                        operation: op,
                        created: false,
                    }));
                }
                Some(bytes)
            }
            None => None,
        };
        // Fresh construction: live preconditions.
        let Some((ws_key, ws_bytes, ws)) = read_ws(snap, &root, &req.workbench_id)? else {
            return Err(Error::WorkspaceNotFound {
                workbench_id: req.workbench_id.clone(),
            });
        };
        if ws.state != WorkspaceState::Visible {
            return Err(Error::WorkspaceNotFound {
                workbench_id: req.workbench_id.clone(),
            });
        }
        let inc = ws.incarnation;
        let hk = head_key(&root, &inc);
        let head_bytes = snap.get(Family::WorkbenchCommitHead, &hk)?;
        let head = head_bytes
            .as_deref()
            .map(WorkbenchCommitHead::decode)
            .transpose()?;
        if let Some(h) = &head {
            if !req.replace {
                return Err(Error::WorkbenchCommitConflict {
                    head: h.commit_id.to_hex(),
                });
            }
        }
        let parents = canonical_parents(&req.parents);
        for p in &parents {
            match read_commit(snap, &root, p)? {
                None => {
                    return Err(Error::CommitNotFound {
                        commit_id: p.to_hex(),
                    })
                }
                Some((_, c)) if c.state != CommitState::Sealed => {
                    return Err(Error::CommitLifecycle {
                        reason: format!("parent commit is {:?}, not Sealed", c.state),
                    })
                }
                Some(_) => {}
            }
        }
        if read_commit(snap, &root, &req.commit_id)?.is_some() {
            return Err(Error::CommitLifecycle {
                reason: "a commit with this identity already exists without its build operation"
                    .into(),
            });
        }
        let manifest_path = run_manifest_path()?;
        let manifest_gen = snap
            .get(
                Family::PathCurrent,
                &path_current::key(&root, &inc, &manifest_path),
            )?
            .map(|b| PathEntry::decode(&b).map(|e| e.generation))
            .transpose()?;
        let rv = snap.version();
        let cv = commit_version(snap)?;
        let mut op = BuildCommitOperation {
            phase: BuildCommitPhase::Building,
            commit_id: req.commit_id,
            projection_input_digest: req.projection_input_digest,
            initialization_digest: [0; 32],
            workbench_id: req.workbench_id.clone(),
            source_incarnation: inc,
            source_read_version: rv,
            source_workspace_revision: ws.workspace_revision,
            expected_head: head.map(|h| HeadRef {
                commit_id: h.commit_id,
                head_generation: h.head_generation,
            }),
            replace: req.replace,
            content_digest_uri: req.content_digest_uri.clone(),
            manifest_digest_uri: req.manifest_digest_uri.clone(),
            run_manifest_expected_generation: manifest_gen,
            committed_at_unix_seconds: req.observed_unix_seconds,
            staged_manifest: None,
            producer: req.producer.clone(),
            lineage: req.lineage.clone(),
            parents,
            cursor: ClosureCursor::default(),
            member_count: 0,
            member_digest: [0; 32],
            revision_count: 0,
            revision_digest: [0; 32],
            parent_count: 0,
            parent_digest: [0; 32],
            cleanup_cursor: ClosureCursor::default(),
            result: OperationResult::Pending,
        };
        op.initialization_digest = initialization_digest(&op);
        let digest = step_digest(&op_id, b"begin", previous.as_deref().unwrap_or_default());
        let mut cmd = header(
            shard,
            snap,
            digest,
            advanced(
                OperationKind::BuildCommit,
                &op_id,
                BuildCommitPhase::Building.to_u8(),
            ),
        )?;
        let hkey = hold_key(&root, &op_id);
        cmd.predicates = vec![
            match &previous {
                None => Predicate::absent(Family::Operation, key.clone()),
                Some(b) => Predicate::equals(Family::Operation, key.clone(), b.clone()),
            },
            Predicate::equals(Family::WorkspaceCurrent, ws_key, ws_bytes),
            match &head_bytes {
                None => Predicate::absent(Family::WorkbenchCommitHead, hk),
                Some(b) => Predicate::equals(Family::WorkbenchCommitHead, hk, b.clone()),
            },
            Predicate::absent(Family::HistoryHold, hkey.clone()),
            Predicate::absent(Family::Commit, commit_key(&root, &req.commit_id)),
        ];
        cmd.mutations = vec![
            Mutation::put(Family::Operation, key.clone(), encode_build(&op)),
            Mutation::put(
                Family::HistoryHold,
                hkey,
                HistoryHold {
                    read_version: rv,
                    source_snapshot_id: None,
                    state: HistoryHoldState::Active,
                    created_version: cv,
                }
                .encode(),
            ),
        ];
        Ok(Built::Command(
            Box::new(cmd),
            BuildHandle {
                operation_id: op_id,
                operation: op,
                created: true,
            },
        ))
    })
}

/// Step 2: records the uploaded staged run manifest (see the module docs). Idempotent: when the
/// operation already carries the same binding nothing is written.
///
/// Errors: [`Error::InvalidArgument`] (wrong revision id, malformed rows),
/// [`Error::CommitLifecycle`] (operation not `Building`), [`Error::OperationInputMismatch`]
/// (another binding is recorded), codec and storage errors.
pub fn stage_manifest(
    shard: &MetaShard,
    op_id: &OperationId,
    staged: &StagedManifest,
) -> Result<BuildCommitOperation> {
    let root = shard.root_id();
    if staged.revision_id != staged_manifest_revision(&root, op_id) {
        return Err(Error::invalid(
            "the staged run manifest must use the operation's staged revision id",
        ));
    }
    let mut offset = 0u64;
    for (i, row) in staged.manifest.iter().enumerate() {
        if row.object_index != i as u64
            || row.logical_offset != offset
            || row.length == 0
            || row.physical_owner_revision != staged.revision_id
        {
            return Err(Error::invalid("staged manifest rows are malformed"));
        }
        offset = offset
            .checked_add(row.length)
            .ok_or_else(|| Error::invalid("manifest lengths overflow"))?;
    }
    if offset != staged.logical_size || staged.manifest.len() > crate::command::MAX_MANIFEST_ROWS {
        return Err(Error::invalid(
            "staged manifest rows do not cover the logical size",
        ));
    }
    super::publish::validate_digest_uri("body_digest_uri", &staged.body_digest_uri)?;
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::CommitLifecycle {
                reason: "the build operation does not exist".into(),
            });
        };
        let binding = StagedManifestBinding {
            publish_operation_id: OperationId(first16(&sha(&[
                STAGED_PUBLISH_DOMAIN,
                op_id.as_bytes(),
            ]))),
            incarnation: op.source_incarnation,
            revision: staged.revision_id,
            logical_size: staged.logical_size,
            body_digest_uri: staged.body_digest_uri.clone(),
            manifest_digest_uri: manifest_digest_uri(&staged.manifest),
            content_type: staged.content_type.clone(),
        };
        if let Some(existing) = &op.staged_manifest {
            if *existing == binding {
                return Ok(Built::Done(op));
            }
            return Err(Error::OperationInputMismatch {
                reason: "another staged run manifest is already bound".into(),
            });
        }
        if op.phase != BuildCommitPhase::Building {
            return Err(Error::CommitLifecycle {
                reason: format!("build operation is {:?}", op.phase),
            });
        }
        let cv = commit_version(snap)?;
        let rev_key = artifact_revision::key(&root, &staged.revision_id);
        let revision = ArtifactRevision {
            logical_size: staged.logical_size,
            body_digest_uri: staged.body_digest_uri.clone(),
            manifest_digest_uri: binding.manifest_digest_uri.clone(),
            block_count: staged.manifest.len() as u64,
            dependency_count: 0,
            dependency_depth: 0,
            dependency_digest: sha(&[]),
            content_type: staged.content_type.clone(),
            state: RevisionState::Available,
            reference_epoch: 1,
            strong_reference_count: 1,
            last_zero_ref_version: None,
            created_version: cv,
        };
        let mut next = op.clone();
        next.staged_manifest = Some(binding);
        let mut cmd = header(
            shard,
            snap,
            step_digest(op_id, b"stage", &bytes),
            advanced(OperationKind::BuildCommit, op_id, next.phase.to_u8()),
        )?;
        cmd.predicates = vec![
            Predicate::equals(Family::Operation, key.clone(), bytes),
            Predicate::absent(Family::ArtifactRevision, rev_key.clone()),
        ];
        cmd.mutations = vec![
            Mutation::put(Family::ArtifactRevision, rev_key, revision.encode()),
            Mutation::put(
                Family::RevisionRef,
                revision_ref::key(&root, &RefOwner::Commit(op.commit_id), &staged.revision_id),
                RevisionRef {
                    reference_epoch_at_add: 1,
                    created_version: cv,
                }
                .encode(),
            ),
            Mutation::put(Family::Operation, key.clone(), encode_build(&next)),
        ];
        for row in &staged.manifest {
            cmd.mutations.push(Mutation::put(
                Family::ArtifactManifest,
                artifact_manifest::key(&root, &staged.revision_id, row.object_index),
                row.encode_value(),
            ));
        }
        Ok(Built::Command(Box::new(cmd), next))
    })
}

/// A permanent failure that aborts the build with a terminal error.
struct Abort {
    code: &'static str,
    message: String,
}

fn abort_for(err: &Error) -> Option<Abort> {
    let (code, message) = match err {
        Error::RevisionUnavailable { .. } => (
            "InvalidState",
            "an artifact of the workbench is no longer available; commit again".to_string(),
        ),
        Error::CommitLifecycle { reason } => ("InvalidState", reason.clone()),
        Error::CommitNotFound { .. } => ("NotFound", "a parent commit no longer exists".into()),
        _ => return None,
    };
    Some(Abort { code, message })
}

/// Drives the build operation by exactly one command (or reports that it needs the staged
/// manifest, or is terminal). Call repeatedly until [`StepOutcome::Terminal`].
///
/// Errors: [`Error::CommitLifecycle`] for a seal that does not verify, [`Error::Fenced`],
/// [`Error::ReadVersionConflict`], codec and storage errors. Permanent precondition failures are
/// not errors: they abort the operation, whose terminal result then carries them.
pub fn step(shard: &MetaShard, op_id: &OperationId) -> Result<StepOutcome> {
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let Some((_, op)) = read_build(&snap, &root, op_id)? else {
        return Err(Error::CommitLifecycle {
            reason: "the build operation does not exist".into(),
        });
    };
    drop(snap);
    let outcome = match op.phase {
        BuildCommitPhase::Complete | BuildCommitPhase::Cleaned | BuildCommitPhase::Quarantined => {
            return Ok(StepOutcome::Terminal)
        }
        BuildCommitPhase::Building => {
            if op.staged_manifest.is_none() {
                return Ok(StepOutcome::NeedsManifest);
            }
            if !op.cursor.members.complete {
                member_batch(shard, op_id).map(|_| "member-batch")
            } else if !op.cursor.parents.complete {
                parent_batch(shard, op_id).map(|_| "parents")
            } else {
                seal(shard, op_id).map(|_| "sealing")
            }
        }
        BuildCommitPhase::Sealing => publish_commit(shard, op_id),
        BuildCommitPhase::Aborting => to_cleaning(shard, op_id).map(|_| "cleaning"),
        BuildCommitPhase::Cleaning => cleanup_batch(shard, op_id),
    };
    match outcome {
        Ok(name) => Ok(StepOutcome::Advanced(name)),
        Err(e) => match abort_for(&e) {
            Some(a) => {
                abort(shard, op_id, a)?;
                Ok(StepOutcome::Advanced("aborting"))
            }
            None => Err(e),
        },
    }
}

/// Chains one element into a running digest.
fn chain(domain: &[u8], prev: &[u8; 32], parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(domain);
    h.update(prev);
    for p in parts {
        h.update((p.len() as u32).to_be_bytes());
        h.update(p);
    }
    h.finalize().into()
}

fn member_from_entry(entry: &PathEntry) -> CommitMember {
    CommitMember {
        artifact_revision_id: entry.artifact_revision_id,
        path_generation: entry.generation,
        body_digest_uri: entry.body_digest_uri.clone(),
        manifest_digest_uri: entry.manifest_digest_uri.clone(),
        logical_size: entry.logical_size,
        dependency_count: entry.dependency_count,
        dependency_depth: entry.dependency_depth,
        content_type: entry.content_type.clone(),
        producer: entry.producer.clone(),
        manifest_id: entry.manifest_id.clone(),
        projection: entry.index_projection.clone(),
    }
}

fn virtual_member(op: &BuildCommitOperation, b: &StagedManifestBinding) -> CommitMember {
    CommitMember {
        artifact_revision_id: b.revision,
        // The run manifest's path generation is assigned by the final publishing command; the
        // frozen member records 0.
        path_generation: 0,
        body_digest_uri: b.body_digest_uri.clone(),
        manifest_digest_uri: b.manifest_digest_uri.clone(),
        logical_size: b.logical_size,
        dependency_count: 0,
        dependency_depth: 0,
        content_type: b.content_type.clone(),
        producer: op.producer.clone(),
        manifest_id: None,
        projection: Vec::new(),
    }
}

/// The next ≤ [`MEMBER_BATCH`] members after the cursor and whether the scan is complete.
fn next_members(
    shard: &MetaShard,
    op: &BuildCommitOperation,
) -> Result<(Vec<(NormPath, CommitMember)>, bool)> {
    let Some(binding) = &op.staged_manifest else {
        return Err(Error::CommitLifecycle {
            reason: "the staged run manifest is not recorded".into(),
        });
    };
    let vpath = run_manifest_path()?;
    let vkey = ordered_key(&vpath);
    let reader = shard.read_at(op.source_read_version)?;
    let mut members: Vec<(NormPath, CommitMember)> = Vec::new();
    let mut after = op.cursor.members.after.clone();
    let mut more = true;
    while members.len() < MEMBER_BATCH && more {
        let (files, m) = reader.scan_files(
            &op.source_incarnation,
            None,
            after.as_ref(),
            MEMBER_BATCH - members.len(),
        )?;
        more = m;
        if let Some((p, _)) = files.last() {
            after = Some(p.clone());
        }
        for (p, e) in files {
            if p != vpath {
                members.push((p, member_from_entry(&e)));
            }
        }
    }
    let virtual_pending = op
        .cursor
        .members
        .after
        .as_ref()
        .is_none_or(|a| ordered_key(a) < vkey);
    if virtual_pending {
        let fits = !more || members.last().is_some_and(|(p, _)| vkey < ordered_key(p));
        if fits {
            members.push((vpath.clone(), virtual_member(op, binding)));
            members.sort_by_key(|(p, _)| ordered_key(p));
            if members.len() > MEMBER_BATCH {
                members.pop();
                more = true;
            }
        }
    }
    Ok((members, !more))
}

fn member_batch(shard: &MetaShard, op_id: &OperationId) -> Result<()> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if op.phase != BuildCommitPhase::Building || op.cursor.members.complete {
            return Ok(Built::Done(()));
        }
        let (members, complete) = next_members(shard, &op)?;
        let cv = commit_version(snap)?;
        let mut next = op.clone();
        let mut predicates = vec![Predicate::equals(
            Family::Operation,
            key.clone(),
            bytes.clone(),
        )];
        let mut mutations = Vec::new();
        let mut seen: BTreeSet<ArtifactRevisionId> = BTreeSet::new();
        for (path, member) in &members {
            let mkey = CommitMemberKey {
                root,
                commit_id: op.commit_id,
                path: path.clone(),
            }
            .encode();
            let value = member.encode();
            next.member_digest = chain(
                MEMBER_DOMAIN,
                &next.member_digest,
                &[&ordered_key(path), &value],
            );
            next.member_count += 1;
            // No per-member predicate: the Operation CAS orders member batches (a command bound
            // of 192 predicates leaves room for one Equals + one Absent per new revision).
            mutations.push(Mutation::put(Family::CommitMember, mkey, value));
            let rev = member.artifact_revision_id;
            if !seen.insert(rev) {
                continue;
            }
            let rkey = revision_ref::key(&root, &RefOwner::Commit(op.commit_id), &rev);
            if snap.get(Family::RevisionRef, &rkey)?.is_some() {
                continue;
            }
            let akey = artifact_revision::key(&root, &rev);
            let Some(abytes) = snap.get(Family::ArtifactRevision, &akey)? else {
                return Err(Error::RevisionUnavailable {
                    revision: rev.to_hex(),
                    reason: "missing".into(),
                });
            };
            let mut arow = ArtifactRevision::decode(&abytes)?;
            if arow.state != RevisionState::Available {
                return Err(Error::RevisionUnavailable {
                    revision: rev.to_hex(),
                    reason: format!("state {:?}", arow.state),
                });
            }
            arow.strong_reference_count = arow.strong_reference_count.saturating_add(1);
            arow.reference_epoch = arow.reference_epoch.saturating_add(1);
            predicates.push(Predicate::equals(
                Family::ArtifactRevision,
                akey.clone(),
                abytes,
            ));
            predicates.push(Predicate::absent(Family::RevisionRef, rkey.clone()));
            mutations.push(Mutation::put(
                Family::RevisionRef,
                rkey,
                RevisionRef {
                    reference_epoch_at_add: arow.reference_epoch,
                    created_version: cv,
                }
                .encode(),
            ));
            mutations.push(Mutation::put(Family::ArtifactRevision, akey, arow.encode()));
        }
        next.cursor.members = SetCursor {
            after: members
                .last()
                .map(|(p, _)| p.clone())
                .or(op.cursor.members.after.clone()),
            complete,
        };
        if next.cursor.members.complete && next.parents.is_empty() {
            next.cursor.parents.complete = true;
        }
        mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            encode_build(&next),
        ));
        let mut cmd = header(
            shard,
            snap,
            step_digest(op_id, b"members", &bytes),
            advanced(OperationKind::BuildCommit, op_id, next.phase.to_u8()),
        )?;
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        Ok(Built::Command(Box::new(cmd), ()))
    })
}

fn parent_batch(shard: &MetaShard, op_id: &OperationId) -> Result<()> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if op.phase != BuildCommitPhase::Building || op.cursor.parents.complete {
            return Ok(Built::Done(()));
        }
        let todo: Vec<CommitId> = op
            .parents
            .iter()
            .copied()
            .filter(|p| op.cursor.parents.after.is_none_or(|a| *p > a))
            .take(PARENT_BATCH)
            .collect();
        let cv = commit_version(snap)?;
        let mut next = op.clone();
        let mut cmd = header(
            shard,
            snap,
            step_digest(op_id, b"parents", &bytes),
            advanced(OperationKind::BuildCommit, op_id, next.phase.to_u8()),
        )?;
        cmd.predicates.push(Predicate::equals(
            Family::Operation,
            key.clone(),
            bytes.clone(),
        ));
        for p in &todo {
            let Some((cbytes, mut c)) = read_commit(snap, &root, p)? else {
                return Err(Error::CommitNotFound {
                    commit_id: p.to_hex(),
                });
            };
            if c.state != CommitState::Sealed {
                return Err(Error::CommitLifecycle {
                    reason: format!("parent commit is {:?}, not Sealed", c.state),
                });
            }
            c.consumer_count = c.consumer_count.saturating_add(1);
            c.consumer_epoch = c.consumer_epoch.saturating_add(1);
            let ck = consumer_key(
                &root,
                p,
                ConsumerOwner::ChildCommit {
                    child: op.commit_id,
                },
            );
            cmd.predicates.push(Predicate::equals(
                Family::Commit,
                commit_key(&root, p),
                cbytes,
            ));
            cmd.predicates
                .push(Predicate::absent(Family::CommitConsumer, ck.clone()));
            cmd.mutations.push(Mutation::put(
                Family::CommitConsumer,
                ck,
                CommitConsumer {
                    consumer_epoch_at_add: c.consumer_epoch,
                    created_version: cv,
                }
                .encode(),
            ));
            cmd.mutations.push(Mutation::put(
                Family::Commit,
                commit_key(&root, p),
                c.encode(),
            ));
            next.parent_digest = chain(PARENT_DOMAIN, &next.parent_digest, &[p.as_bytes()]);
            next.parent_count += 1;
        }
        next.cursor.parents = SetCursor {
            after: todo.last().copied().or(op.cursor.parents.after),
            complete: next.parent_count == op.parents.len() as u64,
        };
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            encode_build(&next),
        ));
        Ok(Built::Command(Box::new(cmd), ()))
    })
}

/// All rows of one scan prefix ([`Snapshot::rows`]).
fn scan_all(
    snap: &impl Snapshot,
    family: Family,
    prefix: &[u8],
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    snap.rows(family, prefix, "commit closure")
}

/// Seals of one commit closure recomputed from its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosureSeals {
    /// CommitMember rows.
    pub member_count: u64,
    /// Chained member digest.
    pub member_digest: [u8; 32],
    /// Unique `RevisionRef(Commit)` rows.
    pub revision_count: u64,
    /// Revision-set digest.
    pub revision_digest: [u8; 32],
    /// Unique revisions named by the members.
    pub member_revisions: BTreeSet<ArtifactRevisionId>,
    /// Revisions named by `RevisionRef(Commit)` rows.
    pub referenced_revisions: Vec<ArtifactRevisionId>,
}

pub(crate) fn recompute_seals(
    snap: &impl Snapshot,
    root: &RootId,
    id: &CommitId,
) -> Result<ClosureSeals> {
    let mprefix = commit_member::commit_prefix(root, id);
    let mut member_digest = [0u8; 32];
    let mut member_count = 0u64;
    let mut member_revisions = BTreeSet::new();
    for (k, v) in scan_all(snap, Family::CommitMember, &mprefix)? {
        let suffix = &k[mprefix.len()..];
        member_digest = chain(MEMBER_DOMAIN, &member_digest, &[suffix, &v]);
        member_count += 1;
        member_revisions.insert(CommitMember::decode(&v)?.artifact_revision_id);
    }
    let mut referenced = Vec::new();
    for (k, _) in scan_all(snap, Family::RevisionRef, &commit_ref_prefix(root, id))? {
        referenced.push(ref_target(&k)?);
    }
    let mut h = Sha256::new();
    h.update(REVISIONS_DOMAIN);
    for r in &referenced {
        h.update(r.as_bytes());
    }
    Ok(ClosureSeals {
        member_count,
        member_digest,
        revision_count: referenced.len() as u64,
        revision_digest: h.finalize().into(),
        member_revisions,
        referenced_revisions: referenced,
    })
}

/// The parent digest a commit seals over its unique parents in ascending order: chained like the
/// member digest, `d_i = sha256("nokv.commit.parent.v1\0" | d_{i-1} | u32 len | parent_id)`
/// from `d_0 = 0^32` (see the module docs). `parents` must already be unique and ascending (the
/// Commit record's order).
pub fn parent_digest(parents: &[CommitId]) -> [u8; 32] {
    parents
        .iter()
        .fold([0u8; 32], |d, p| chain(PARENT_DOMAIN, &d, &[p.as_bytes()]))
}

/// Recomputes the closure seals of commit `id` from its CommitMember and `RevisionRef(Commit)`
/// rows at the current version (fsck / tests).
///
/// Errors: codec and storage errors.
pub fn closure_seals(shard: &MetaShard, id: &CommitId) -> Result<ClosureSeals> {
    let snap = shard.inner.store.snapshot();
    recompute_seals(&snap, &shard.root_id(), id)
}

fn seal(shard: &MetaShard, op_id: &OperationId) -> Result<()> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if op.phase != BuildCommitPhase::Building {
            return Ok(Built::Done(()));
        }
        let seals = recompute_seals(snap, &root, &op.commit_id)?;
        if seals.member_count != op.member_count || seals.member_digest != op.member_digest {
            return Err(Error::CommitLifecycle {
                reason: "the CommitMember rows do not match the member seal".into(),
            });
        }
        let referenced: BTreeSet<ArtifactRevisionId> =
            seals.referenced_revisions.iter().copied().collect();
        if referenced != seals.member_revisions {
            return Err(Error::CommitLifecycle {
                reason: "the commit revision references do not match its members".into(),
            });
        }
        let mut parent_digest = [0u8; 32];
        for p in &op.parents {
            let ck = consumer_key(
                &root,
                p,
                ConsumerOwner::ChildCommit {
                    child: op.commit_id,
                },
            );
            if snap.get(Family::CommitConsumer, &ck)?.is_none() {
                return Err(Error::CommitLifecycle {
                    reason: "a parent consumer row is missing".into(),
                });
            }
            parent_digest = chain(PARENT_DOMAIN, &parent_digest, &[p.as_bytes()]);
        }
        if parent_digest != op.parent_digest || op.parent_count != op.parents.len() as u64 {
            return Err(Error::CommitLifecycle {
                reason: "the parent consumers do not match the parent seal".into(),
            });
        }
        let mut next = op.clone();
        next.phase = BuildCommitPhase::Sealing;
        next.revision_count = seals.revision_count;
        next.revision_digest = seals.revision_digest;
        next.cursor.revisions = SetCursor {
            after: seals.referenced_revisions.last().copied(),
            complete: true,
        };
        let cmd = advance_build(shard, snap, &key, bytes, op_id, b"seal", &next)?;
        Ok(Built::Command(Box::new(cmd), ()))
    })
}

/// Adjusts a revision row's reference count by `delta` (±1) and bumps its epoch; at zero it
/// records `last_zero_ref_version` and returns the GcCandidate mutation too.
pub(crate) fn adjust_revision(
    root: &RootId,
    rev: &ArtifactRevisionId,
    row: &mut ArtifactRevision,
    add: bool,
    cv: u64,
) -> Result<Option<Mutation>> {
    if add {
        row.strong_reference_count = row.strong_reference_count.saturating_add(1);
    } else {
        row.strong_reference_count = row
            .strong_reference_count
            .checked_sub(1)
            .ok_or_else(|| Error::codec("artifact_revision", "strong reference count underflow"))?;
    }
    row.reference_epoch = row.reference_epoch.saturating_add(1);
    if row.strong_reference_count == 0 {
        row.last_zero_ref_version = Some(cv);
        return Ok(Some(Mutation::put(
            Family::GcCandidate,
            gc_candidate::key(root, rev, row.reference_epoch),
            GcCandidate {
                last_zero_ref_version: cv,
                claim_state: GcClaimState::Candidate,
                retry_count: 0,
            }
            .encode(),
        )));
    }
    Ok(None)
}

/// Releases one consumer of `c` (count −1, epoch +1, `last_zero_consumer_version` at zero).
fn release_consumer(c: &mut Commit, cv: u64) -> Result<()> {
    c.consumer_count = c
        .consumer_count
        .checked_sub(1)
        .ok_or_else(|| Error::codec("commit", "consumer count underflow"))?;
    c.consumer_epoch = c.consumer_epoch.saturating_add(1);
    if c.consumer_count == 0 {
        c.last_zero_consumer_version = Some(cv);
    }
    Ok(())
}

/// Step 9: the single publishing command. Returns the boundary name (`"complete"`, or
/// `"aborting"` when a live precondition no longer holds).
fn publish_commit(shard: &MetaShard, op_id: &OperationId) -> Result<&'static str> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    let vpath = run_manifest_path()?;
    let outcome = run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if op.phase != BuildCommitPhase::Sealing {
            return Ok(Built::Done(Ok(())));
        }
        let Some(binding) = op.staged_manifest.clone() else {
            return Err(Error::codec(
                "operation",
                "sealed build without a staged manifest",
            ));
        };
        let conflict_code = if op.replace {
            "Conflict"
        } else {
            "WorkbenchCommitConflict"
        };
        let ws = match read_ws(snap, &root, &op.workbench_id)? {
            Some(w)
                if w.2.state == WorkspaceState::Visible
                    && w.2.incarnation == op.source_incarnation =>
            {
                w
            }
            _ => {
                return Ok(Built::Done(Err(Abort {
                    code: "NotFound",
                    message: "the workbench no longer exists".into(),
                })))
            }
        };
        let (ws_key, ws_bytes, ws) = ws;
        let inc = ws.incarnation;
        let hk = head_key(&root, &inc);
        let head_bytes = snap.get(Family::WorkbenchCommitHead, &hk)?;
        let head = head_bytes
            .as_deref()
            .map(WorkbenchCommitHead::decode)
            .transpose()?;
        let head_ref = head.map(|h| HeadRef {
            commit_id: h.commit_id,
            head_generation: h.head_generation,
        });
        if head_ref != op.expected_head {
            return Ok(Built::Done(Err(Abort {
                code: conflict_code,
                message:
                    "another commit moved the workbench head while this commit was built; retry"
                        .into(),
            })));
        }
        let pkey = path_current::key(&root, &inc, &vpath);
        let old_bytes = snap.get(Family::PathCurrent, &pkey)?;
        let old = old_bytes.as_deref().map(PathEntry::decode).transpose()?;
        if old.as_ref().map(|e| e.generation) != op.run_manifest_expected_generation {
            return Ok(Built::Done(Err(Abort {
                code: "Conflict",
                message: "metadata/run_manifest.json changed while this commit was built; retry"
                    .into(),
            })));
        }
        let cv = commit_version(snap)?;
        let mut predicates = vec![
            Predicate::equals(Family::Operation, key.clone(), bytes.clone()),
            Predicate::equals(Family::WorkspaceCurrent, ws_key.clone(), ws_bytes),
            match &head_bytes {
                None => Predicate::absent(Family::WorkbenchCommitHead, hk.clone()),
                Some(b) => Predicate::equals(Family::WorkbenchCommitHead, hk.clone(), b.clone()),
            },
            match &old_bytes {
                None => Predicate::absent(Family::PathCurrent, pkey.clone()),
                Some(b) => Predicate::equals(Family::PathCurrent, pkey.clone(), b.clone()),
            },
            Predicate::absent(Family::Commit, commit_key(&root, &op.commit_id)),
        ];
        let mut mutations = Vec::new();
        // The staged manifest revision gains its path reference.
        let skey = artifact_revision::key(&root, &binding.revision);
        let Some(sbytes) = snap.get(Family::ArtifactRevision, &skey)? else {
            return Err(Error::codec(
                "artifact_revision",
                "staged manifest revision missing",
            ));
        };
        let mut srow = ArtifactRevision::decode(&sbytes)?;
        if srow.state != RevisionState::Available {
            return Err(Error::RevisionUnavailable {
                revision: binding.revision.to_hex(),
                reason: format!("state {:?}", srow.state),
            });
        }
        adjust_revision(&root, &binding.revision, &mut srow, true, cv)?;
        predicates.push(Predicate::equals(
            Family::ArtifactRevision,
            skey.clone(),
            sbytes,
        ));
        mutations.push(Mutation::put(Family::ArtifactRevision, skey, srow.encode()));
        let path_owner = RefOwner::Path {
            incarnation: inc,
            path: vpath.clone(),
        };
        mutations.push(Mutation::put(
            Family::RevisionRef,
            revision_ref::key(&root, &path_owner, &binding.revision),
            RevisionRef {
                reference_epoch_at_add: srow.reference_epoch,
                created_version: cv,
            }
            .encode(),
        ));
        if let Some(old) = &old {
            let orev = old.artifact_revision_id;
            let okey = artifact_revision::key(&root, &orev);
            let Some(obytes) = snap.get(Family::ArtifactRevision, &okey)? else {
                return Err(Error::codec(
                    "artifact_revision",
                    "replaced manifest revision missing",
                ));
            };
            let mut orow = ArtifactRevision::decode(&obytes)?;
            if let Some(gc) = adjust_revision(&root, &orev, &mut orow, false, cv)? {
                mutations.push(gc);
            }
            predicates.push(Predicate::equals(
                Family::ArtifactRevision,
                okey.clone(),
                obytes,
            ));
            mutations.push(Mutation::put(Family::ArtifactRevision, okey, orow.encode()));
            mutations.push(Mutation::Delete {
                family: Family::RevisionRef,
                key: revision_ref::key(&root, &path_owner, &orev),
            });
        }
        let entry = PathEntry {
            generation: cv,
            artifact_revision_id: binding.revision,
            logical_size: binding.logical_size,
            body_digest_uri: binding.body_digest_uri.clone(),
            manifest_digest_uri: binding.manifest_digest_uri.clone(),
            dependency_count: 0,
            dependency_depth: 0,
            content_type: binding.content_type.clone(),
            producer: op.producer.clone(),
            manifest_id: None,
            created_version: old.as_ref().map_or(cv, |o| o.created_version),
            modified_version: cv,
            index_projection: Vec::new(),
        };
        mutations.push(Mutation::put(Family::PathCurrent, pkey, entry.encode()));
        mutations.extend(index_projection::index_mutations(
            &root,
            &inc,
            &op.workbench_id,
            &vpath,
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
        // The sealed commit, owned by the head consumer.
        let commit = Commit {
            source_workbench_id: op.workbench_id.clone(),
            source_incarnation: inc,
            content_digest_uri: op.content_digest_uri.clone(),
            manifest_digest_uri: op.manifest_digest_uri.clone(),
            tree_manifest_revision: binding.revision,
            member_count: op.member_count,
            member_digest: op.member_digest,
            unique_revision_count: op.revision_count,
            revision_digest: op.revision_digest,
            parents: op.parents.clone(),
            parent_digest: op.parent_digest,
            producer: op.producer.clone(),
            lineage: op.lineage.clone(),
            consumer_count: 1,
            consumer_epoch: 1,
            last_zero_consumer_version: None,
            state: CommitState::Sealed,
            retirement_cursor: None,
            created_version: cv,
        };
        mutations.push(Mutation::put(
            Family::Commit,
            commit_key(&root, &op.commit_id),
            commit.encode(),
        ));
        mutations.push(Mutation::put(
            Family::WorkbenchCommitHead,
            hk,
            WorkbenchCommitHead {
                commit_id: op.commit_id,
                head_generation: cv,
            }
            .encode(),
        ));
        mutations.push(Mutation::put(
            Family::CommitConsumer,
            consumer_key(
                &root,
                &op.commit_id,
                ConsumerOwner::WorkbenchHead { incarnation: inc },
            ),
            CommitConsumer {
                consumer_epoch_at_add: 1,
                created_version: cv,
            }
            .encode(),
        ));
        if let Some(h) = &head {
            let Some((cbytes, mut c)) = read_commit(snap, &root, &h.commit_id)? else {
                return Err(Error::codec("commit", "head commit missing"));
            };
            release_consumer(&mut c, cv)?;
            predicates.push(Predicate::equals(
                Family::Commit,
                commit_key(&root, &h.commit_id),
                cbytes,
            ));
            mutations.push(Mutation::put(
                Family::Commit,
                commit_key(&root, &h.commit_id),
                c.encode(),
            ));
            mutations.push(Mutation::Delete {
                family: Family::CommitConsumer,
                key: consumer_key(
                    &root,
                    &h.commit_id,
                    ConsumerOwner::WorkbenchHead { incarnation: inc },
                ),
            });
        }
        let mut next = op.clone();
        next.phase = BuildCommitPhase::Complete;
        next.result = OperationResult::Succeeded(BuildCommitResult {
            commit_version: cv,
            head_generation: cv,
            manifest_generation: cv,
        });
        mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            encode_build(&next),
        ));
        mutations.push(Mutation::Delete {
            family: Family::HistoryHold,
            key: hold_key(&root, op_id),
        });
        let mut cmd = header(
            shard,
            snap,
            step_digest(op_id, b"publish", &bytes),
            advanced(OperationKind::BuildCommit, op_id, next.phase.to_u8()),
        )?;
        cmd.predicates = predicates;
        cmd.mutations = mutations;
        cmd.event_projection = vec![ChangeEvent {
            workbench_id: op.workbench_id.clone(),
            incarnation: inc,
            kind: ChangeKind::ArtifactPublished,
            path: Some(vpath.clone()),
            before_generation: old.as_ref().map(|e| e.generation),
            after_generation: Some(cv),
        }];
        Ok(Built::Command(Box::new(cmd), Ok(())))
    })?;
    match outcome {
        Ok(()) => Ok("complete"),
        Err(a) => {
            abort(shard, op_id, a)?;
            Ok("aborting")
        }
    }
}

/// CASes `Building | Sealing -> Aborting` with the terminal error.
fn abort(shard: &MetaShard, op_id: &OperationId, a: Abort) -> Result<()> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if !matches!(
            op.phase,
            BuildCommitPhase::Building | BuildCommitPhase::Sealing
        ) {
            return Ok(Built::Done(()));
        }
        let mut next = op.clone();
        next.phase = BuildCommitPhase::Aborting;
        next.result = OperationResult::Failed(TerminalError {
            code: a.code.to_owned(),
            message: a.message.clone(),
        });
        let mut cmd = advance_build(shard, snap, &key, bytes, op_id, b"abort", &next)?;
        // Sealing -> Aborting only with fenced proof that no Commit exists.
        cmd.predicates.push(Predicate::absent(
            Family::Commit,
            commit_key(&root, &op.commit_id),
        ));
        Ok(Built::Command(Box::new(cmd), ()))
    })
}

/// Requests cleanup of a non-terminal build (`Building | Sealing -> Aborting`) with the given
/// stable error code and message; [`step`] then drives it to `Cleaned`.
///
/// Errors: codec and storage errors.
pub fn request_abort(
    shard: &MetaShard,
    op_id: &OperationId,
    code: &'static str,
    message: &str,
) -> Result<()> {
    abort(
        shard,
        op_id,
        Abort {
            code,
            message: message.to_owned(),
        },
    )
}

fn to_cleaning(shard: &MetaShard, op_id: &OperationId) -> Result<()> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if op.phase != BuildCommitPhase::Aborting {
            return Ok(Built::Done(()));
        }
        let mut next = op.clone();
        next.phase = BuildCommitPhase::Cleaning;
        let cmd = advance_build(shard, snap, &key, bytes, op_id, b"cleaning", &next)?;
        Ok(Built::Command(Box::new(cmd), ()))
    })
}

/// Release progress of one closure (cleanup or retirement): deletes members, then revision
/// references, then parent consumers, ≤ [`RELEASE_BATCH`] rows per command. Returns the
/// predicates and mutations of the next batch and the advanced cursor, or `None` when all three
/// sets are released.
#[allow(clippy::type_complexity)]
fn release_batch(
    snap: &impl Snapshot,
    root: &RootId,
    commit: &CommitId,
    parents: &[CommitId],
    cursor: &ClosureCursor,
    cv: u64,
) -> Result<Option<(Vec<Predicate>, Vec<Mutation>, ClosureCursor)>> {
    let mut next = cursor.clone();
    let mut predicates = Vec::new();
    let mut mutations = Vec::new();
    if !cursor.members.complete {
        let prefix = commit_member::commit_prefix(root, commit);
        let spec = ScanSpec {
            prefix: prefix.clone(),
            start_after: None,
            delimiter: None,
            limit: RELEASE_BATCH + 1,
        };
        let rows = snap.scan(Family::CommitMember, &spec)?;
        let more = rows.len() > RELEASE_BATCH;
        for item in rows.into_iter().take(RELEASE_BATCH) {
            if let ScanItem::Row { key, .. } = item {
                next.members.after = Some(CommitMemberKey::decode(&key)?.path);
                mutations.push(Mutation::Delete {
                    family: Family::CommitMember,
                    key,
                });
            }
        }
        next.members.complete = !more;
        return Ok(Some((predicates, mutations, next)));
    }
    if !cursor.revisions.complete {
        let spec = ScanSpec {
            prefix: commit_ref_prefix(root, commit),
            start_after: None,
            delimiter: None,
            limit: RELEASE_BATCH + 1,
        };
        let rows = snap.scan(Family::RevisionRef, &spec)?;
        let more = rows.len() > RELEASE_BATCH;
        for item in rows.into_iter().take(RELEASE_BATCH) {
            if let ScanItem::Row { key, .. } = item {
                let rev = ref_target(&key)?;
                let akey = artifact_revision::key(root, &rev);
                let Some(abytes) = snap.get(Family::ArtifactRevision, &akey)? else {
                    return Err(Error::codec(
                        "artifact_revision",
                        "referenced revision missing",
                    ));
                };
                let mut arow = ArtifactRevision::decode(&abytes)?;
                if let Some(gc) = adjust_revision(root, &rev, &mut arow, false, cv)? {
                    mutations.push(gc);
                }
                predicates.push(Predicate::equals(
                    Family::ArtifactRevision,
                    akey.clone(),
                    abytes,
                ));
                mutations.push(Mutation::put(Family::ArtifactRevision, akey, arow.encode()));
                mutations.push(Mutation::Delete {
                    family: Family::RevisionRef,
                    key,
                });
                next.revisions.after = Some(rev);
            }
        }
        next.revisions.complete = !more;
        return Ok(Some((predicates, mutations, next)));
    }
    if !cursor.parents.complete {
        let todo: Vec<CommitId> = parents
            .iter()
            .copied()
            .filter(|p| cursor.parents.after.is_none_or(|a| *p > a))
            .take(PARENT_BATCH)
            .collect();
        for p in &todo {
            let ck = consumer_key(root, p, ConsumerOwner::ChildCommit { child: *commit });
            if snap.get(Family::CommitConsumer, &ck)?.is_none() {
                continue;
            }
            let Some((cbytes, mut c)) = read_commit(snap, root, p)? else {
                return Err(Error::codec("commit", "parent commit missing"));
            };
            release_consumer(&mut c, cv)?;
            predicates.push(Predicate::equals(
                Family::Commit,
                commit_key(root, p),
                cbytes,
            ));
            mutations.push(Mutation::put(
                Family::Commit,
                commit_key(root, p),
                c.encode(),
            ));
            mutations.push(Mutation::Delete {
                family: Family::CommitConsumer,
                key: ck,
            });
        }
        next.parents.after = todo.last().copied().or(cursor.parents.after);
        next.parents.complete = parents
            .last()
            .is_none_or(|last| next.parents.after.is_some_and(|a| a >= *last));
        return Ok(Some((predicates, mutations, next)));
    }
    Ok(None)
}

fn cleanup_batch(shard: &MetaShard, op_id: &OperationId) -> Result<&'static str> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if op.phase != BuildCommitPhase::Cleaning {
            return Ok(Built::Done("cleanup-batch"));
        }
        let cv = commit_version(snap)?;
        // Only the parents this build attached are released.
        let attached: Vec<CommitId> = op
            .parents
            .iter()
            .copied()
            .filter(|p| op.cursor.parents.after.is_some_and(|a| *p <= a))
            .collect();
        let mut next = op.clone();
        let mut cmd = header(
            shard,
            snap,
            step_digest(op_id, b"cleanup", &bytes),
            advanced(
                OperationKind::BuildCommit,
                op_id,
                BuildCommitPhase::Cleaning.to_u8(),
            ),
        )?;
        cmd.predicates.push(Predicate::equals(
            Family::Operation,
            key.clone(),
            bytes.clone(),
        ));
        let name = match release_batch(
            snap,
            &root,
            &op.commit_id,
            &attached,
            &op.cleanup_cursor,
            cv,
        )? {
            Some((p, m, c)) => {
                cmd.predicates.extend(p);
                cmd.mutations.extend(m);
                next.cleanup_cursor = c;
                "cleanup-batch"
            }
            None => {
                next.phase = BuildCommitPhase::Cleaned;
                cmd.result = advanced(OperationKind::BuildCommit, op_id, next.phase.to_u8());
                cmd.mutations.push(Mutation::Delete {
                    family: Family::HistoryHold,
                    key: hold_key(&root, op_id),
                });
                "cleaned"
            }
        };
        cmd.mutations.push(Mutation::put(
            Family::Operation,
            key.clone(),
            encode_build(&next),
        ));
        Ok(Built::Command(Box::new(cmd), name))
    })
}

/// Outcome of [`retire`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetireReceipt {
    /// The CommitRetire operation id.
    pub operation_id: OperationId,
    /// Commit version that published `Retired`.
    pub commit_version: u64,
    /// True when the commit had already been retired by an earlier call.
    pub already_retired: bool,
}

fn read_retire(
    snap: &impl Snapshot,
    root: &RootId,
    op_id: &OperationId,
) -> Result<Option<(Vec<u8>, CommitRetireOperation)>> {
    match snap.get(
        Family::Operation,
        &op_key(root, OperationKind::CommitRetire, op_id),
    )? {
        None => Ok(None),
        Some(b) => match Operation::decode_for_kind(OperationKind::CommitRetire, &b)? {
            Operation::CommitRetire(r) => Ok(Some((b, r))),
            _ => Err(Error::codec("operation", "not a CommitRetire operation")),
        },
    }
}

/// Explicitly retires a commit (see the module docs). Only a `Sealed` commit with
/// `consumer_count == 0` can be claimed; the release then runs to completion in bounded
/// batches (resumed by a later call after process loss).
///
/// Errors: [`Error::CommitNotFound`], [`Error::CommitLifecycle`] (consumers remain — heads,
/// tags, leases or child commits — or the commit is not `Sealed`), [`Error::Fenced`], codec and
/// storage errors.
pub fn retire(shard: &MetaShard, commit_id: &CommitId) -> Result<RetireReceipt> {
    let root = shard.root_id();
    let op_id = retire_operation_id(&root, commit_id);
    let okey = op_key(&root, OperationKind::CommitRetire, &op_id);
    let ckey = commit_key(&root, commit_id);
    // Claim (one command) unless the operation exists.
    run(shard, |snap| {
        if read_retire(snap, &root, &op_id)?.is_some() {
            return Ok(Built::Done(()));
        }
        let Some((cbytes, c)) = read_commit(snap, &root, commit_id)? else {
            return Err(Error::CommitNotFound {
                commit_id: commit_id.to_hex(),
            });
        };
        if c.state != CommitState::Sealed {
            return Err(Error::CommitLifecycle {
                reason: format!("the commit is {:?}", c.state),
            });
        }
        if c.consumer_count != 0 {
            return Err(Error::CommitLifecycle {
                reason: format!(
                    "the commit still has {} consumer(s) (workbench head, tags, restore leases or child commits)",
                    c.consumer_count
                ),
            });
        }
        let mut next = c.clone();
        next.state = CommitState::Retiring;
        next.retirement_cursor = Some(ClosureCursor::default());
        let op = Operation::CommitRetire(CommitRetireOperation {
            phase: CommitRetirePhase::Releasing,
            commit_id: *commit_id,
            expected_consumer_epoch: c.consumer_epoch,
            cursor: ClosureCursor::default(),
            result: OperationResult::Pending,
        });
        let mut cmd = header(
            shard,
            snap,
            sha(&[RETIRE_DOMAIN, b"claim", op_id.as_bytes(), &cbytes]),
            advanced(
                OperationKind::CommitRetire,
                &op_id,
                CommitRetirePhase::Releasing.to_u8(),
            ),
        )?;
        cmd.predicates = vec![
            Predicate::equals(Family::Commit, ckey.clone(), cbytes),
            Predicate::absent(Family::Operation, okey.clone()),
        ];
        cmd.mutations = vec![
            Mutation::put(Family::Commit, ckey.clone(), next.encode()),
            Mutation::put(Family::Operation, okey.clone(), op.encode()),
        ];
        Ok(Built::Command(Box::new(cmd), ()))
    })?;
    loop {
        let done = run(shard, |snap| {
            let Some((obytes, op)) = read_retire(snap, &root, &op_id)? else {
                return Err(Error::codec("operation", "retire operation vanished"));
            };
            match (op.phase, &op.result) {
                (CommitRetirePhase::Complete, OperationResult::Succeeded(v)) => {
                    return Ok(Built::Done(Some((*v, true))))
                }
                (CommitRetirePhase::Releasing, _) => {}
                (phase, _) => {
                    return Err(Error::CommitLifecycle {
                        reason: format!("the retirement is {phase:?}"),
                    })
                }
            }
            let Some((cbytes, c)) = read_commit(snap, &root, commit_id)? else {
                return Err(Error::codec("commit", "retiring commit missing"));
            };
            let cv = commit_version(snap)?;
            let mut cmd = header(
                shard,
                snap,
                sha(&[RETIRE_DOMAIN, b"release", op_id.as_bytes(), &obytes]),
                advanced(
                    OperationKind::CommitRetire,
                    &op_id,
                    CommitRetirePhase::Releasing.to_u8(),
                ),
            )?;
            cmd.predicates = vec![
                Predicate::equals(Family::Operation, okey.clone(), obytes.clone()),
                Predicate::equals(Family::Commit, ckey.clone(), cbytes.clone()),
            ];
            let mut next_op = op.clone();
            let mut next_c = c.clone();
            let result = match release_batch(snap, &root, commit_id, &c.parents, &op.cursor, cv)? {
                Some((p, m, cursor)) => {
                    cmd.predicates.extend(p);
                    cmd.mutations.extend(m);
                    next_op.cursor = cursor.clone();
                    next_c.retirement_cursor = Some(cursor);
                    None
                }
                None => {
                    next_op.phase = CommitRetirePhase::Complete;
                    next_op.result = OperationResult::Succeeded(cv);
                    next_c.state = CommitState::Retired;
                    cmd.result = advanced(
                        OperationKind::CommitRetire,
                        &op_id,
                        CommitRetirePhase::Complete.to_u8(),
                    );
                    Some((cv, false))
                }
            };
            cmd.mutations.push(Mutation::put(
                Family::Operation,
                okey.clone(),
                Operation::CommitRetire(next_op).encode(),
            ));
            cmd.mutations
                .push(Mutation::put(Family::Commit, ckey.clone(), next_c.encode()));
            Ok(Built::Command(Box::new(cmd), result))
        })?;
        if let Some((commit_version, already)) = done {
            return Ok(RetireReceipt {
                operation_id: op_id,
                commit_version,
                already_retired: already,
            });
        }
    }
}
