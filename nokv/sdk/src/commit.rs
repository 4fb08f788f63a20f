//! Durable commits, tags and commit retirement in the SDK (docs/metadata-format.md, "Commit Closure";
//! docs/workbench.md "commit").
//!
//! [`Client::commit`] is the one commit path used by the SDK, the `workbench_commit` tool and
//! the CLI. It derives the canonical manifest bytes, `manifest_digest_uri`, the commit identity
//! (which is also the root-global CommitId) and the projection-input digest with the facade's
//! one canonical-JSON implementation ([`crate::json::canonical`]), then drives the durable
//! BuildCommit operation of [`meta::ops::commit`]:
//!
//! ```text
//! begin (Building, frozen request, HistoryHold)          fault point commit-after-building
//! upload run_manifest.json blocks (object-first)         fault point commit-after-upload
//! stage the hidden manifest revision                     fault point commit-after-stage
//! member batches … parents … seal (Sealing)              commit-after-member-batch / -parents /
//!                                                        -sealing
//! one publishing command (Complete)                      commit-after-complete
//! abort/cleanup (on a permanent failure)                 commit-after-aborting / -cleaning /
//!                                                        -cleanup-batch / -cleaned
//! ```
//!
//! Those names are crash points of [`crate::fault`] (cargo feature `fault-points`). Re-running the same request after a crash resumes the same operation
//! (its id is derived from the projection-input digest) and converges to one terminal result.
//!
//! The result is reconstructed from the build operation only — never from the current
//! `metadata/run_manifest.json` — so an exact retry returns the original result with
//! `idempotent_replay: true` even after a later replacement commit.

use serde_json::Value;

use meta::codec::{BuildCommitPhase, ManifestRow, OperationResult};
use meta::ids::CommitId;
use meta::ops::commit::{self as build, BuildCommitRequest, StagedManifest, StepOutcome};
use meta::ops::tag::{TagCondition, TagInfo};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::json::canonical;

/// Content type of `metadata/run_manifest.json`.
pub const RUN_MANIFEST_CONTENT_TYPE: &str = "application/json";
/// Producer recorded on commits made through the SDK.
pub const COMMIT_PRODUCER: &str = "nokv.commit";

/// One commit request (docs/workbench.md `workbench_commit` inputs plus SDK lineage).
#[derive(Debug, Clone, PartialEq)]
pub struct CommitRequest {
    /// Workbench to commit.
    pub workbench_id: String,
    /// The caller's manifest (a JSON object); canonicalized before hashing.
    pub manifest: Value,
    /// `sha256:` + 64 lowercase hex: the caller's content digest.
    pub content_digest_uri: String,
    /// Move an existing head to this commit instead of failing with
    /// `WorkbenchCommitConflict`.
    pub replace: bool,
    /// Parent commits (64 lowercase hex each); recorded and consumer-counted.
    pub parents: Vec<String>,
}

/// The result of a commit (docs/workbench.md `workbench_commit` result fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitReceipt {
    /// Workbench id.
    pub workbench_id: String,
    /// Presented workbench path (`{root}/{id}`).
    pub workbench_path: String,
    /// Presented path of `metadata/run_manifest.json`.
    pub path: String,
    /// Envelope length in bytes.
    pub size_bytes: u64,
    /// Generation of `metadata/run_manifest.json` published by this commit.
    pub generation: u64,
    /// Caller content digest.
    pub content_digest_uri: String,
    /// `sha256:` digest of the canonical manifest.
    pub manifest_digest_uri: String,
    /// Commit identity (64 lowercase hex) — also the CommitId.
    pub commit_identity: String,
    /// `sha256:` digest of the envelope bytes.
    pub envelope_digest_uri: String,
    /// `sha256:` + hex of the sealed member digest (derived by the store).
    pub tree_digest_uri: String,
    /// The request's `replace` bit.
    pub replace: bool,
    /// True when the build operation already existed (an exact retry).
    pub idempotent_replay: bool,
    /// First owner-observed commit time (Unix seconds).
    pub committed_at_unix_seconds: u64,
    /// Unique parents (64 hex each, ascending).
    pub parents: Vec<String>,
}

/// A sealed commit as recorded (SDK view of docs/metadata-format.md `Commit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// Commit id (64 lowercase hex).
    pub commit_id: String,
    /// Source workbench id.
    pub workbench_id: String,
    /// Lifecycle: `sealed`, `retiring` or `retired`.
    pub state: String,
    /// `sha256:` tree digest.
    pub tree_digest_uri: String,
    /// Caller content digest.
    pub content_digest_uri: String,
    /// Canonical manifest digest.
    pub manifest_digest_uri: String,
    /// CommitMember rows.
    pub member_count: u64,
    /// Unique revisions referenced.
    pub unique_revision_count: u64,
    /// Parents (64 hex each, ascending).
    pub parents: Vec<String>,
    /// Live consumers (head, tags, leases, child commits).
    pub consumer_count: u64,
    /// Consumer epoch.
    pub consumer_epoch: u64,
    /// Commit version that sealed it.
    pub created_version: u64,
}

/// Parses a 64-hex commit id. Errors: [`Error::InvalidArgument`].
pub fn parse_commit_id(hex: &str) -> Result<CommitId> {
    CommitId::from_hex(hex).map_err(|_| {
        Error::InvalidArgument(format!(
            "`{hex}` is not a commit id (64 lowercase hexadecimal characters)"
        ))
    })
}

fn tool_err(e: nokv_protocol::errors::ToolError) -> Error {
    Error::InvalidArgument(e.message)
}

fn now_unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Everything derived from the request before any storage access.
struct Derived {
    manifest_digest_uri: String,
    identity: [u8; 32],
    projection_input_digest: [u8; 32],
    workbench_path: String,
    parents: Vec<CommitId>,
}

impl Client {
    fn derive(&self, req: &CommitRequest) -> Result<Derived> {
        meta::validate_workbench_id(&req.workbench_id)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        if !req.manifest.is_object() {
            return Err(Error::InvalidArgument(
                "manifest must be a JSON object".into(),
            ));
        }
        meta::ops::publish::validate_digest_uri("content_digest_uri", &req.content_digest_uri)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let canonical_manifest = canonical::canonical_json(&req.manifest).map_err(tool_err)?;
        // The same bound as every tool payload, so every committed run manifest stays readable
        // by `workbench_find` (which reads at most this plus the envelope).
        let max = crate::json::payload::MAX_PAYLOAD_BYTES;
        if canonical_manifest.len() as u64 > max {
            return Err(Error::OperationFailed {
                code: "PayloadTooLarge".into(),
                message: format!(
                    "the canonical manifest is {} bytes; at most {max} bytes are allowed — keep \
                     large data in files and reference them from the manifest",
                    canonical_manifest.len()
                ),
            });
        }
        let manifest_digest_uri = canonical::sha256_uri(&canonical_manifest);
        let identity = canonical::commit_identity(
            &req.workbench_id,
            &req.content_digest_uri,
            &manifest_digest_uri,
        );
        let workbench_path = self.workbench_path(&req.workbench_id);
        let projection_input_digest = canonical::projection_input_digest(
            &req.workbench_id,
            &workbench_path,
            &req.content_digest_uri,
            &canonical_manifest,
            &manifest_digest_uri,
            &identity,
        );
        let parents = req
            .parents
            .iter()
            .map(|p| parse_commit_id(p))
            .collect::<Result<Vec<_>>>()?;
        Ok(Derived {
            manifest_digest_uri,
            identity,
            projection_input_digest,
            workbench_path,
            parents,
        })
    }

    /// Commits a workbench (see the module docs): builds the durable commit closure, publishes
    /// the canonical `metadata/run_manifest.json` and moves the workbench head, all through one
    /// durable BuildCommit operation. An exact retry returns the original receipt with
    /// `idempotent_replay: true`.
    ///
    /// Errors: [`Error::InvalidArgument`] (id, manifest, digest, parent ids),
    /// [`Error::WorkbenchNotFound`], [`Error::Meta`] with `WorkbenchCommitConflict` (head exists,
    /// no `replace`), `OperationInputMismatch` (same identity, different `replace`/parents),
    /// `CommitNotFound`/`CommitLifecycle` (parents); [`Error::OperationFailed`] when the build
    /// aborted (e.g. a concurrent commit moved the head); [`Error::ObjectUnavailable`] for
    /// upload failures; [`Error::Busy`].
    pub fn commit(&self, req: &CommitRequest) -> Result<CommitReceipt> {
        self.commit_with_clock(req, now_unix_seconds())
    }

    /// [`Client::commit`] with an injected owner clock: `observed_unix_seconds` becomes the
    /// durable `committed_at_unix_seconds` when (and only when) this call creates the build
    /// operation; a retry keeps the first observed time. For tests and replayable tooling.
    ///
    /// Errors: as [`Client::commit`].
    pub fn commit_with_clock(
        &self,
        req: &CommitRequest,
        observed_unix_seconds: u64,
    ) -> Result<CommitReceipt> {
        let d = self.derive(req)?;
        let shard = self.meta();
        let breq = BuildCommitRequest {
            workbench_id: req.workbench_id.clone(),
            commit_id: CommitId(d.identity),
            projection_input_digest: d.projection_input_digest,
            content_digest_uri: req.content_digest_uri.clone(),
            manifest_digest_uri: d.manifest_digest_uri.clone(),
            replace: req.replace,
            producer: COMMIT_PRODUCER.to_owned(),
            lineage: Vec::new(),
            parents: d.parents.clone(),
            observed_unix_seconds,
        };
        let handle = build::begin(shard, &breq).map_err(map_meta)?;
        if handle.created {
            crate::fault::point("commit-after-building");
        }
        let op_id = handle.operation_id;
        let mut guard = 0u64;
        loop {
            guard += 1;
            if guard > 10_000_000 {
                return Err(Error::Busy);
            }
            match build::step(shard, &op_id).map_err(map_meta)? {
                StepOutcome::Terminal => break,
                StepOutcome::Advanced(name) => crate::fault::point(&format!("commit-after-{name}")),
                StepOutcome::NeedsManifest => {
                    let op = build::read_operation(shard, &op_id)?.ok_or(Error::Busy)?;
                    let envelope = canonical::run_manifest_envelope(
                        &req.workbench_id,
                        &d.workbench_path,
                        &req.content_digest_uri,
                        &req.manifest,
                        op.committed_at_unix_seconds,
                    )
                    .map_err(tool_err)?;
                    let staged = self.upload_staged_manifest(&op_id, &envelope)?;
                    crate::fault::point("commit-after-upload");
                    build::stage_manifest(shard, &op_id, &staged).map_err(map_meta)?;
                    crate::fault::point("commit-after-stage");
                }
            }
        }
        let op = build::read_operation(shard, &op_id)?.ok_or(Error::Busy)?;
        match (&op.phase, &op.result) {
            (BuildCommitPhase::Complete, OperationResult::Succeeded(result)) => {
                let Some(binding) = &op.staged_manifest else {
                    return Err(Error::Meta(meta::Error::CommitLifecycle {
                        reason: "complete build without a staged manifest".into(),
                    }));
                };
                // Verify the canonical envelope against the durable binding (replay authority).
                let envelope = canonical::run_manifest_envelope(
                    &req.workbench_id,
                    &d.workbench_path,
                    &req.content_digest_uri,
                    &req.manifest,
                    op.committed_at_unix_seconds,
                )
                .map_err(tool_err)?;
                if canonical::sha256_uri(&envelope) != binding.body_digest_uri
                    || envelope.len() as u64 != binding.logical_size
                {
                    return Err(Error::Meta(meta::Error::CommitLifecycle {
                        reason: "the recorded run manifest does not match the request".into(),
                    }));
                }
                Ok(CommitReceipt {
                    workbench_id: req.workbench_id.clone(),
                    workbench_path: d.workbench_path.clone(),
                    path: format!("{}/{}", d.workbench_path, build::RUN_MANIFEST_PATH),
                    size_bytes: binding.logical_size,
                    generation: result.manifest_generation,
                    content_digest_uri: req.content_digest_uri.clone(),
                    manifest_digest_uri: d.manifest_digest_uri,
                    commit_identity: objstore::hex_lower(&d.identity),
                    envelope_digest_uri: binding.body_digest_uri.clone(),
                    tree_digest_uri: format!("sha256:{}", objstore::hex_lower(&op.member_digest)),
                    replace: op.replace,
                    idempotent_replay: !handle.created,
                    committed_at_unix_seconds: op.committed_at_unix_seconds,
                    parents: op.parents.iter().map(CommitId::to_hex).collect(),
                })
            }
            (_, OperationResult::Failed(t)) => Err(Error::OperationFailed {
                code: t.code.clone(),
                message: t.message.clone(),
            }),
            (phase, _) => Err(Error::Meta(meta::Error::CommitLifecycle {
                reason: format!("the commit build stopped in phase {phase:?}"),
            })),
        }
    }

    /// Uploads the envelope under the operation's deterministic staged revision (object-first;
    /// an existing block from a crashed attempt is verified and reused).
    fn upload_staged_manifest(
        &self,
        op_id: &meta::OperationId,
        envelope: &[u8],
    ) -> Result<StagedManifest> {
        let shard = self.meta();
        let revision_id = build::staged_manifest_revision(&shard.root_id(), op_id);
        let mut rows = Vec::new();
        let mut offset = 0u64;
        for (index, block) in envelope.chunks(self.block_size().max(1)).enumerate() {
            let index = index as u64;
            let key = objstore::block_key(
                shard.logical_shard_id().as_bytes(),
                shard.root_id().as_bytes(),
                revision_id.as_bytes(),
                index,
            );
            let digest_uri = objstore::sha256_uri(block);
            if let objstore::PutOutcome::AlreadyExists =
                self.objects().put_if_absent(&key, block)?
            {
                if objstore::get_verified(
                    self.objects().as_ref(),
                    &key,
                    block.len() as u64,
                    &digest_uri,
                )
                .is_err()
                {
                    self.objects().put(&key, block)?;
                }
            }
            rows.push(ManifestRow {
                object_index: index,
                physical_owner_revision: revision_id,
                physical_object_index: index,
                object_key: key,
                logical_offset: offset,
                object_offset: 0,
                length: block.len() as u64,
                digest_uri,
                append_segment: None,
            });
            offset += block.len() as u64;
        }
        Ok(StagedManifest {
            revision_id,
            logical_size: envelope.len() as u64,
            body_digest_uri: objstore::sha256_uri(envelope),
            content_type: RUN_MANIFEST_CONTENT_TYPE.to_owned(),
            manifest: rows,
        })
    }

    /// The current commit head of a workbench (`None`: never committed).
    ///
    /// Errors: [`Error::InvalidArgument`] for a string that is no workbench id;
    /// [`Error::WorkbenchNotFound`]; metadata errors.
    pub fn commit_head(&self, workbench_id: &str) -> Result<Option<CommitInfo>> {
        meta::validate_workbench_id(workbench_id)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let Some(head) = build::read_head(self.meta(), workbench_id)? else {
            return Ok(None);
        };
        self.commit_info(&head.commit_id.to_hex())
    }

    /// A commit record by id (`None`: no such commit).
    ///
    /// Errors: [`Error::InvalidArgument`] (id); metadata errors.
    pub fn commit_info(&self, commit_id: &str) -> Result<Option<CommitInfo>> {
        let id = parse_commit_id(commit_id)?;
        Ok(
            build::read_commit_record(self.meta(), &id)?.map(|c| CommitInfo {
                commit_id: id.to_hex(),
                workbench_id: c.source_workbench_id.clone(),
                state: match c.state {
                    meta::codec::CommitState::Sealed => "sealed",
                    meta::codec::CommitState::Retiring => "retiring",
                    meta::codec::CommitState::Retired => "retired",
                }
                .to_owned(),
                tree_digest_uri: c.tree_digest_uri(),
                content_digest_uri: c.content_digest_uri.clone(),
                manifest_digest_uri: c.manifest_digest_uri.clone(),
                member_count: c.member_count,
                unique_revision_count: c.unique_revision_count,
                parents: c.parents.iter().map(CommitId::to_hex).collect(),
                consumer_count: c.consumer_count,
                consumer_epoch: c.consumer_epoch,
                created_version: c.created_version,
            }),
        )
    }

    /// Sets (creates or moves) a tag of `workbench_id` to a sealed commit under a CAS
    /// condition (docs/design.md, "Recovery Products"). Moving a tag never retires the old commit.
    ///
    /// Errors: [`Error::InvalidArgument`], [`Error::WorkbenchNotFound`], [`Error::Meta`] with
    /// `TagConflict`, `CommitNotFound`, `CommitLifecycle`.
    pub fn set_tag(
        &self,
        workbench_id: &str,
        tag: &str,
        commit_id: &str,
        cond: TagCondition,
    ) -> Result<TagInfo> {
        let id = parse_commit_id(commit_id)?;
        Ok(meta::ops::tag::set_tag(
            self.meta(),
            workbench_id,
            tag,
            &id,
            cond,
        )?)
    }

    /// Reads a tag (`None`: absent). Errors: [`Error::InvalidArgument`],
    /// [`Error::WorkbenchNotFound`]; metadata errors.
    pub fn get_tag(&self, workbench_id: &str, tag: &str) -> Result<Option<TagInfo>> {
        Ok(meta::ops::tag::get_tag(self.meta(), workbench_id, tag)?)
    }

    /// Deletes a tag under a CAS condition; returns the removed tag. The commit is not retired.
    ///
    /// Errors: [`Error::InvalidArgument`], [`Error::WorkbenchNotFound`], [`Error::Meta`] with
    /// `TagConflict`.
    pub fn delete_tag(
        &self,
        workbench_id: &str,
        tag: &str,
        cond: TagCondition,
    ) -> Result<Option<TagInfo>> {
        Ok(meta::ops::tag::delete_tag(
            self.meta(),
            workbench_id,
            tag,
            cond,
        )?)
    }

    /// Every tag of a workbench. Errors: [`Error::WorkbenchNotFound`]; metadata errors.
    pub fn list_tags(&self, workbench_id: &str) -> Result<Vec<TagInfo>> {
        Ok(meta::ops::tag::list_tags(self.meta(), workbench_id)?)
    }

    /// Explicitly retires a commit that has no consumers left (no head, tag, lease or child
    /// commit), releasing its members, revision references and parent consumers in bounded
    /// batches (CommitRetire operation). Re-running it after process loss resumes it.
    ///
    /// Errors: [`Error::InvalidArgument`], [`Error::Meta`] with `CommitNotFound` or
    /// `CommitLifecycle` (consumers remain).
    pub fn retire_commit(&self, commit_id: &str) -> Result<meta::ops::commit::RetireReceipt> {
        let id = parse_commit_id(commit_id)?;
        Ok(build::retire(self.meta(), &id)?)
    }

    /// A content digest of the live tree of a workbench: `sha256:` over the canonical lines
    /// `path \0 body_digest_uri \n` of every published file except `metadata/run_manifest.json`,
    /// in canonical path order. Used by the CLI `nokv commit` as its `content_digest_uri`.
    ///
    /// Errors: [`Error::WorkbenchNotFound`]; metadata errors.
    pub fn tree_content_digest(&self, workbench_id: &str) -> Result<String> {
        let read = self.meta().read();
        let ws = read.visible_workspace(workbench_id)?;
        let mut h = objstore::Sha256Stream::new();
        let mut after: Option<meta::NormPath> = None;
        loop {
            let (files, more) = read.scan_files(&ws.incarnation, None, after.as_ref(), 255)?;
            for (p, e) in &files {
                if p.as_str() == build::RUN_MANIFEST_PATH {
                    continue;
                }
                h.update(p.as_str().as_bytes());
                h.update(b"\0");
                h.update(e.body_digest_uri.as_bytes());
                h.update(b"\n");
            }
            after = files.last().map(|(p, _)| p.clone());
            if !more {
                break;
            }
        }
        Ok(h.finish())
    }
}

fn map_meta(err: meta::Error) -> Error {
    Error::from(err)
}
