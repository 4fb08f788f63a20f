//! Restore (SDK): create a new workbench from a leased snapshot or a sealed commit of another one
//! (docs/metadata-format.md, "Restore Closure"; docs/workbench.md `workbench_restore`).
//!
//! [`Client::restore`] drives the durable operation of [`meta::ops::restore`] to a terminal phase:
//!
//! 1. resolve the source selector (a snapshot name is point-resolved to its numeric id first);
//! 2. [`meta::ops::restore::plan`]: the deterministic identity — an operation of this exact
//!    request found through the destination marker is resumed or replayed, otherwise a fresh
//!    destination incarnation is drawn;
//! 3. write `metadata/restore_manifest.json` (`nokv.workbench.restore_manifest.v2`, canonical
//!    JSON) as the operation's RestoreStaging body: its revision id is derived from the operation
//!    id, so a retry after process loss rewrites the same object key (put-if-absent) and
//!    reproduces the same initialization digest;
//! 4. [`meta::ops::restore::prepare`], then one [`meta::ops::restore::advance`] per metadata
//!    command: copy batches, seal, verify, the one final marker transition.
//!
//! No source object byte is read or written: destination paths reference the source's immutable
//! revisions (new Path RevisionRefs). The only object the restore writes is the small restore
//! manifest (one block).
//!
//! Failure handling: a closure-verification mismatch or a shared revision that is no longer
//! `Available` aborts the operation and cleans it up (driven by its RestoreMember rows) before
//! the error is returned; any other error (storage, fence, exhausted retries, process loss)
//! leaves the operation where it is, and re-running the same request resumes it. An operation
//! found aborting is cleaned up first; once cleaned, the same request starts over with a new
//! incarnation.
//!
//! Fault points (phase boundaries, see [`FaultPoint`]): a test can stop the driver at one through
//! [`RestoreOptions::interrupt_after`]; with the cargo feature `fault-points`, the environment
//! variable `NOKV_FAULT_POINT=<name>` kills the process there ([`crate::fault`]).

use meta::codec::{
    ManifestRow, OperationResult, RestoreOperation, RestorePhase, RestoreSource, TerminalError,
};
use meta::ids::{ArtifactRevisionId, CommitId, OperationId, SnapshotId};
use meta::ops::restore::{self as ops, RestoreManifestDescriptor, RestorePlan, RestoreTarget};
use meta::ops::snapshot::SnapshotSelector;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::client::Client;

/// Schema of `metadata/restore_manifest.json` (docs/workbench.md).
pub const RESTORE_MANIFEST_SCHEMA: &str = "nokv.workbench.restore_manifest.v2";
/// The reserved destination path of the restore manifest.
pub const RESTORE_MANIFEST_PATH: &str = ops::RESTORE_MANIFEST_PATH;
/// Content type of the restore manifest.
pub const RESTORE_MANIFEST_CONTENT_TYPE: &str = "application/json";
/// Producer recorded on the restore manifest's path entry.
pub const RESTORE_PRODUCER: &str = "workbench_restore";
/// Domain separator of the restore manifest's deterministic revision id:
/// `sha256(domain || root_id || operation_id)[..16]`.
pub const RESTORE_MANIFEST_REVISION_DOMAIN: &[u8] = b"nokv.restore.manifest_revision.v1\0";
/// Environment variable naming the fault point at which a `fault-points` build is killed.
pub use crate::fault::FAULT_POINT_ENV;

/// Where a restore comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreFrom {
    /// A leased snapshot of the source workbench, by numeric id or name.
    Snapshot(SnapshotSelector),
    /// A sealed commit of the source workbench.
    Commit(CommitId),
}

/// One restore request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreRequest {
    /// Source workbench id.
    pub source_workbench_id: String,
    /// Destination workbench id (must be absent; ≠ source).
    pub destination_workbench_id: String,
    /// The frozen source.
    pub from: RestoreFrom,
}

/// A phase boundary of the restore driver (names as accepted by `NOKV_FAULT_POINT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// `restore-after-preparing`: the operation, staging marker and source hold exist.
    AfterPreparing,
    /// `restore-after-copy-batch`: after the first copy batch that did not reach end-of-source.
    AfterCopyBatch,
    /// `restore-after-copying`: after the batch that recorded end-of-source.
    AfterCopying,
    /// `restore-after-source-sealed`: member count/digest sealed.
    AfterSourceSealed,
    /// `restore-after-ready`: source closure verified; the final command is next.
    AfterReady,
    /// `restore-after-complete`: the final command applied, before the result is returned.
    AfterComplete,
}

impl FaultPoint {
    /// Every fault point, in phase order.
    pub const ALL: [FaultPoint; 6] = [
        FaultPoint::AfterPreparing,
        FaultPoint::AfterCopyBatch,
        FaultPoint::AfterCopying,
        FaultPoint::AfterSourceSealed,
        FaultPoint::AfterReady,
        FaultPoint::AfterComplete,
    ];

    /// The point's name (`restore-after-…`).
    pub fn as_str(self) -> &'static str {
        match self {
            FaultPoint::AfterPreparing => "restore-after-preparing",
            FaultPoint::AfterCopyBatch => "restore-after-copy-batch",
            FaultPoint::AfterCopying => "restore-after-copying",
            FaultPoint::AfterSourceSealed => "restore-after-source-sealed",
            FaultPoint::AfterReady => "restore-after-ready",
            FaultPoint::AfterComplete => "restore-after-complete",
        }
    }

    /// Parses a name produced by [`FaultPoint::as_str`].
    pub fn parse(name: &str) -> Option<FaultPoint> {
        FaultPoint::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

/// Driver options.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {
    /// Diagnostics and fault-injection tests: stop with [`RestoreFailure::Interrupted`] right after
    /// this phase boundary, leaving the durable operation exactly where a crash there would.
    pub interrupt_after: Option<FaultPoint>,
}

/// A completed restore (docs/workbench.md `workbench_restore` result fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreReceipt {
    /// 32 lowercase hex: the deterministic operation id.
    pub operation_id: String,
    /// Source workbench id.
    pub source_workbench_id: String,
    /// Destination workbench id.
    pub destination_workbench_id: String,
    /// Numeric snapshot id (snapshot source).
    pub snapshot_id: Option<u64>,
    /// Read version of the source (snapshot read version or commit seal version).
    pub read_version: u64,
    /// 64 lowercase hex (commit source).
    pub commit_id: Option<String>,
    /// Generation of the destination's `metadata/restore_manifest.json`.
    pub destination_generation: u64,
    /// Commit version of the final marker command.
    pub commit_version: u64,
    /// True when the restore had already completed before this call (exact retry).
    pub idempotent_replay: bool,
    /// Always false: cleanup of an aborted attempt is finished before a result is returned.
    pub cleanup_pending: bool,
    /// Presentation path of the destination's restore manifest.
    pub restore_manifest_path: String,
    /// Number of restored paths (RestoreMember rows), excluding the restore manifest.
    pub member_count: u64,
}

/// Why a restore call of [`Client`] ([`Client::restore`], [`Client::abort_restore`],
/// [`Client::restore_operation`]) failed: an SDK error, a typed failure of the durable restore
/// operation (meta's [`ops::RestoreError`], which this wraps), or the interruption a test asked
/// for.
#[derive(Debug, thiserror::Error)]
pub enum RestoreFailure {
    /// An SDK error (invalid argument, object store, local I/O, …).
    #[error(transparent)]
    Sdk(#[from] crate::error::Error),
    /// A typed failure of the durable operation.
    #[error(transparent)]
    Operation(#[from] ops::RestoreError),
    /// [`RestoreOptions::interrupt_after`] stopped the driver here; re-running the same request
    /// resumes.
    #[error("restore interrupted after {}", .0.as_str())]
    Interrupted(FaultPoint),
}

impl From<meta::Error> for RestoreFailure {
    fn from(e: meta::Error) -> Self {
        RestoreFailure::Operation(ops::RestoreError::Meta(e))
    }
}

/// The outcome of [`Client::abort_restore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbortReceipt {
    /// 32 lowercase hex operation id.
    pub operation_id: String,
    /// Phase after the call (`Cleaned`, or `Complete` when the restore had already published —
    /// a visible destination is never torn down).
    pub phase: RestorePhase,
}

fn fault(point: FaultPoint, options: &RestoreOptions) -> Result<(), RestoreFailure> {
    // Process loss here when a `fault-points` build is told so (see crate::fault).
    crate::fault::point(point.as_str());
    if options.interrupt_after == Some(point) {
        return Err(RestoreFailure::Interrupted(point));
    }
    Ok(())
}

/// The canonical bytes of `metadata/restore_manifest.json` (docs/workbench.md):
/// `{schema, operation_id, restored_from{workbench_id, path, source}, source_workbench_id,
/// source_path, destination_workbench_id, destination_path}` with `source`
/// `{"kind":"snapshot","snapshot_id":N}` or `{"kind":"commit","commit_id":HEX64}`; canonical
/// JSON (compact, keys sorted by bytes).
///
/// Errors: [`crate::error::Error::InvalidArgument`] if the value cannot be canonicalized (not
/// reachable for these shapes).
pub fn restore_manifest_bytes(
    presentation_root: &str,
    operation_id: &OperationId,
    source_workbench_id: &str,
    source: &RestoreSource,
    destination_workbench_id: &str,
) -> crate::error::Result<Vec<u8>> {
    let source_path = format!("{presentation_root}/{source_workbench_id}");
    let destination_path = format!("{presentation_root}/{destination_workbench_id}");
    let source_json = match source {
        RestoreSource::Snapshot(id) => json!({"kind": "snapshot", "snapshot_id": id.get()}),
        RestoreSource::Commit(id) => json!({"kind": "commit", "commit_id": id.to_hex()}),
    };
    let value = json!({
        "schema": RESTORE_MANIFEST_SCHEMA,
        "operation_id": operation_id.to_hex(),
        "restored_from": {
            "workbench_id": source_workbench_id,
            "path": source_path,
            "source": source_json,
        },
        "source_workbench_id": source_workbench_id,
        "source_path": source_path,
        "destination_workbench_id": destination_workbench_id,
        "destination_path": destination_path,
    });
    crate::json::canonical::canonical_json(&value)
        .map_err(|e| crate::error::Error::InvalidArgument(format!("restore manifest: {e:?}")))
}

/// The deterministic revision id of an operation's restore manifest.
pub fn restore_manifest_revision(
    root: &meta::RootId,
    operation_id: &OperationId,
) -> ArtifactRevisionId {
    let mut h = Sha256::new();
    h.update(RESTORE_MANIFEST_REVISION_DOMAIN);
    h.update(root.as_bytes());
    h.update(operation_id.as_bytes());
    let d: [u8; 32] = h.finalize().into();
    let mut id = [0u8; 16];
    id.copy_from_slice(&d[..16]);
    ArtifactRevisionId(id)
}

impl Client {
    /// Restores `req` to completion (see the module docs) with default options.
    ///
    /// Errors: see [`Client::restore_with`].
    pub fn restore(&self, req: &RestoreRequest) -> Result<RestoreReceipt, RestoreFailure> {
        self.restore_with(req, &RestoreOptions::default())
    }

    /// Restores `req`, stopping early only at `options.interrupt_after`.
    ///
    /// Errors: [`RestoreFailure::Operation`] with the typed source/destination/identity errors of
    /// [`meta::ops::restore`] (`SourceWorkbenchNotFound`, `SnapshotNotFound`, `SnapshotExpired`,
    /// `CommitNotFound`, `CommitUnavailable`, `DestinationExists`, `IdentityCollision`,
    /// `RequestMismatch`, `SourceClosureMismatch` after an automatic abort, …);
    /// [`RestoreFailure::Sdk`] for invalid arguments and object-store failures writing the
    /// restore manifest; [`RestoreFailure::Interrupted`].
    pub fn restore_with(
        &self,
        req: &RestoreRequest,
        options: &RestoreOptions,
    ) -> Result<RestoreReceipt, RestoreFailure> {
        let source = self.resolve_restore_source(req)?;
        let target = RestoreTarget {
            source_workbench_id: req.source_workbench_id.clone(),
            source,
            destination_workbench_id: req.destination_workbench_id.clone(),
            now_unix_ms: self.now_unix_ms(),
            policy: *self.snapshot_policy(),
        };
        // At most: finish an aborting attempt, then run a fresh one.
        for _ in 0..3 {
            let plan = ops::plan(self.meta(), &target)?;
            if let Some(op) = &plan.existing {
                if matches!(op.phase, RestorePhase::Aborting | RestorePhase::Cleaning) {
                    self.drive_cleanup(&plan.operation_id)?;
                    continue;
                }
            }
            return self.run_plan(&plan, options);
        }
        Err(ops::RestoreError::InvalidPhase {
            phase: RestorePhase::Cleaned,
            reason: "the destination kept being reclaimed by other restores".into(),
        }
        .into())
    }

    fn resolve_restore_source(
        &self,
        req: &RestoreRequest,
    ) -> Result<RestoreSource, RestoreFailure> {
        Ok(match &req.from {
            RestoreFrom::Commit(id) => RestoreSource::Commit(*id),
            RestoreFrom::Snapshot(SnapshotSelector::Id(id)) => RestoreSource::Snapshot(*id),
            RestoreFrom::Snapshot(sel @ SnapshotSelector::Name(_)) => {
                // Point-resolve the alias before PrepareRestore (docs/metadata-format.md).
                let info = meta::ops::snapshot::get(
                    self.meta(),
                    &req.source_workbench_id,
                    sel,
                    self.now_unix_ms(),
                    self.snapshot_policy(),
                )
                .map_err(|e| match e {
                    meta::Error::SnapshotNotFound => {
                        RestoreFailure::Operation(ops::RestoreError::SnapshotNotFound {
                            snapshot_id: 0,
                        })
                    }
                    meta::Error::SnapshotExpired {
                        snapshot_id,
                        status,
                    } => RestoreFailure::Operation(ops::RestoreError::SnapshotExpired {
                        snapshot_id,
                        status,
                    }),
                    meta::Error::WorkspaceNotFound { workbench_id } => {
                        RestoreFailure::Operation(ops::RestoreError::SourceWorkbenchNotFound {
                            workbench_id,
                        })
                    }
                    other => other.into(),
                })?;
                RestoreSource::Snapshot(SnapshotId(info.snapshot_id.get()))
            }
        })
    }

    /// Writes the restore manifest body of `plan` (idempotent) and returns its descriptor.
    fn stage_restore_manifest(
        &self,
        plan: &RestorePlan,
    ) -> Result<RestoreManifestDescriptor, RestoreFailure> {
        let meta = self.meta();
        let body = restore_manifest_bytes(
            self.presentation_root(),
            &plan.operation_id,
            &plan.target.source_workbench_id,
            &plan.target.source,
            &plan.target.destination_workbench_id,
        )?;
        let revision_id = restore_manifest_revision(&meta.root_id(), &plan.operation_id);
        let key = objstore::block_key(
            meta.logical_shard_id().as_bytes(),
            meta.root_id().as_bytes(),
            revision_id.as_bytes(),
            0,
        );
        let digest_uri = objstore::sha256_uri(&body);
        self.objects()
            .put_if_absent(&key, &body)
            .map_err(crate::error::Error::from)?;
        Ok(RestoreManifestDescriptor {
            revision_id,
            logical_size: body.len() as u64,
            body_digest_uri: digest_uri.clone(),
            content_type: RESTORE_MANIFEST_CONTENT_TYPE.to_string(),
            producer: RESTORE_PRODUCER.to_string(),
            manifest: vec![ManifestRow {
                object_index: 0,
                physical_owner_revision: revision_id,
                physical_object_index: 0,
                object_key: key,
                logical_offset: 0,
                object_offset: 0,
                length: body.len() as u64,
                digest_uri,
                append_segment: None,
            }],
        })
    }

    fn run_plan(
        &self,
        plan: &RestorePlan,
        options: &RestoreOptions,
    ) -> Result<RestoreReceipt, RestoreFailure> {
        let meta = self.meta();
        let id = plan.operation_id;
        // One driver per operation in this process (the store has one owning process), so the
        // manifest block below is never deleted under a concurrent driver that prepares it.
        let _running = RunningRestore::claim(self, id)?;
        let desc = self.stage_restore_manifest(plan)?;
        let mut op = match ops::prepare(meta, plan, &desc) {
            Ok(op) => op,
            Err(e) => {
                // The manifest block was written object-first for an operation that was never
                // created (e.g. the source snapshot was retired meanwhile): nothing owns it, so
                // it goes now instead of staying behind unowned.
                if ops::load(meta, &id)?.is_none() {
                    for row in &desc.manifest {
                        let _ = self.objects().delete(&row.object_key);
                    }
                }
                return Err(e.into());
            }
        };
        let replay = op.phase == RestorePhase::Complete;
        if op.phase == RestorePhase::Preparing {
            fault(FaultPoint::AfterPreparing, options)?;
        }
        loop {
            match op.phase {
                RestorePhase::Complete => break,
                RestorePhase::Aborting | RestorePhase::Cleaning => {
                    self.drive_cleanup(&id)?;
                    return Err(aborted(ops::load(meta, &id)?));
                }
                RestorePhase::Cleaned | RestorePhase::Quarantined => {
                    return Err(aborted(Some(op)));
                }
                _ => {}
            }
            let before = op.phase;
            match ops::advance(meta, &id) {
                Ok(_) => {}
                Err(
                    e @ (ops::RestoreError::SourceClosureMismatch { .. }
                    | ops::RestoreError::SourceNamespaceClash { .. }
                    | ops::RestoreError::Meta(meta::Error::RevisionUnavailable { .. })),
                ) => {
                    // A definite source failure: abort and clean up, then report it. A source
                    // path that is both a file and a directory is the namespace rule's
                    // `NotDirectory`; the rest are lifecycle failures.
                    let code = match &e {
                        ops::RestoreError::SourceNamespaceClash { .. } => "NotDirectory",
                        _ => "InvalidState",
                    };
                    ops::abort(
                        meta,
                        &id,
                        TerminalError {
                            code: code.into(),
                            message: e.to_string(),
                        },
                    )?;
                    self.drive_cleanup(&id)?;
                    return Err(e.into());
                }
                Err(e) => return Err(e.into()),
            }
            op = ops::load(meta, &id)?.ok_or(ops::RestoreError::OperationNotFound)?;
            match (before, op.phase) {
                (RestorePhase::Preparing | RestorePhase::Copying, RestorePhase::Copying) => {
                    if op.cursor.source_eof {
                        fault(FaultPoint::AfterCopying, options)?;
                    } else {
                        fault(FaultPoint::AfterCopyBatch, options)?;
                    }
                }
                (_, RestorePhase::SourceSealed) => fault(FaultPoint::AfterSourceSealed, options)?,
                (_, RestorePhase::Ready) => fault(FaultPoint::AfterReady, options)?,
                (_, RestorePhase::Complete) => fault(FaultPoint::AfterComplete, options)?,
                _ => {}
            }
        }
        receipt(self, &op, replay)
    }

    /// Drives the cleanup of an aborting operation to `Cleaned` (bounded batches).
    fn drive_cleanup(&self, id: &OperationId) -> Result<(), RestoreFailure> {
        loop {
            match ops::advance(self.meta(), id)? {
                RestorePhase::Cleaned | RestorePhase::Quarantined | RestorePhase::Complete => {
                    return Ok(())
                }
                _ => {}
            }
        }
    }

    /// Aborts the unfinished restore that owns `destination_workbench_id` and cleans it up
    /// (every staged path and reference removed, the staging marker `Retired`, the source hold or
    /// commit lease released). A restore that already published is left untouched (`Complete`).
    ///
    /// Errors: [`RestoreFailure::Operation`] with `OperationNotFound` when no restore owns the
    /// name; metadata errors.
    pub fn abort_restore(
        &self,
        destination_workbench_id: &str,
    ) -> Result<AbortReceipt, RestoreFailure> {
        let op = ops::owning_operation(self.meta(), destination_workbench_id)?
            .ok_or(ops::RestoreError::OperationNotFound)?;
        let id = op.operation_id();
        let phase = ops::abort(
            self.meta(),
            &id,
            TerminalError {
                code: "InvalidState".into(),
                message: "the restore was aborted on request".into(),
            },
        )?;
        if phase != RestorePhase::Complete {
            self.drive_cleanup(&id)?;
        }
        let phase = ops::load(self.meta(), &id)?
            .map(|o| o.phase)
            .unwrap_or(phase);
        Ok(AbortReceipt {
            operation_id: id.to_hex(),
            phase,
        })
    }

    /// The restore operation that owns `destination_workbench_id`, if any (diagnostics).
    ///
    /// Errors: metadata errors.
    pub fn restore_operation(
        &self,
        destination_workbench_id: &str,
    ) -> Result<Option<RestoreOperation>, RestoreFailure> {
        Ok(ops::owning_operation(
            self.meta(),
            destination_workbench_id,
        )?)
    }
}

fn aborted(op: Option<RestoreOperation>) -> RestoreFailure {
    let err = match op.map(|o| o.result) {
        Some(OperationResult::Failed(t)) => t,
        _ => TerminalError {
            code: "InvalidState".into(),
            message: "the restore was aborted".into(),
        },
    };
    RestoreFailure::Operation(ops::RestoreError::Aborted(err))
}

/// Marks a restore operation as driven by a thread of this process (in the client's in-flight
/// set, keyed by operation id) until dropped. A second driver of the same operation waits for the
/// first to finish, then resumes from the durable phase (an identical restore replays).
struct RunningRestore<'a> {
    client: &'a Client,
    id: OperationId,
}

impl<'a> RunningRestore<'a> {
    fn claim(client: &'a Client, id: OperationId) -> Result<Self, RestoreFailure> {
        let mut pause = std::time::Duration::from_millis(1);
        loop {
            {
                let mut set = client.in_flight().lock().unwrap_or_else(|p| p.into_inner());
                if set.insert(id) {
                    return Ok(RunningRestore { client, id });
                }
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(50));
        }
    }
}

impl Drop for RunningRestore<'_> {
    fn drop(&mut self) {
        self.client
            .in_flight()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
    }
}

fn receipt(
    client: &Client,
    op: &RestoreOperation,
    replay: bool,
) -> Result<RestoreReceipt, RestoreFailure> {
    let OperationResult::Succeeded(result) = &op.result else {
        return Err(aborted(Some(op.clone())));
    };
    let (snapshot_id, commit_id) = match op.source {
        RestoreSource::Snapshot(s) => (Some(s.get()), None),
        RestoreSource::Commit(c) => (None, Some(c.to_hex())),
    };
    Ok(RestoreReceipt {
        operation_id: op.operation_id().to_hex(),
        source_workbench_id: op.source_workbench_id.clone(),
        destination_workbench_id: op.destination_workbench_id.clone(),
        snapshot_id,
        read_version: op.source_read_version,
        commit_id,
        destination_generation: result.destination_generation,
        commit_version: result.commit_version,
        idempotent_replay: replay,
        cleanup_pending: false,
        restore_manifest_path: format!(
            "{}/{}",
            client.workbench_path(&op.destination_workbench_id),
            RESTORE_MANIFEST_PATH
        ),
        member_count: op.member_count,
    })
}

impl RestoreReceipt {
    /// The `workbench_restore` result fields (without `status`).
    pub fn to_json(&self) -> Value {
        json!({
            "state": "complete",
            "operation_id": self.operation_id,
            "source_workbench_id": self.source_workbench_id,
            "destination_workbench_id": self.destination_workbench_id,
            "snapshot_id": self.snapshot_id,
            "read_version": self.read_version,
            "commit_id": self.commit_id,
            "destination_generation": self.destination_generation,
            "idempotent_replay": self.idempotent_replay,
            "cleanup_pending": self.cleanup_pending,
            "restore_manifest": self.restore_manifest_path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_manifest_is_canonical_json_with_the_v2_keys() {
        let op = OperationId([0xab; 16]);
        let bytes = restore_manifest_bytes(
            "/agents/test/wb",
            &op,
            "src",
            &RestoreSource::Snapshot(SnapshotId(42)),
            "dst",
        )
        .unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert_eq!(
            text,
            format!(
                "{{\"destination_path\":\"/agents/test/wb/dst\",\"destination_workbench_id\":\"dst\",\
                 \"operation_id\":\"{}\",\"restored_from\":{{\"path\":\"/agents/test/wb/src\",\
                 \"source\":{{\"kind\":\"snapshot\",\"snapshot_id\":42}},\"workbench_id\":\"src\"}},\
                 \"schema\":\"nokv.workbench.restore_manifest.v2\",\"source_path\":\"/agents/test/wb/src\",\
                 \"source_workbench_id\":\"src\"}}",
                "ab".repeat(16)
            )
        );
        let commit = restore_manifest_bytes(
            "/agents/test/wb",
            &op,
            "src",
            &RestoreSource::Commit(CommitId([1; 32])),
            "dst",
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&commit).unwrap();
        assert_eq!(
            v["restored_from"]["source"],
            json!({"kind": "commit", "commit_id": "01".repeat(32)})
        );
    }

    #[test]
    fn fault_point_names_round_trip() {
        for p in FaultPoint::ALL {
            assert_eq!(FaultPoint::parse(p.as_str()), Some(p));
            assert!(p.as_str().starts_with("restore-after-"));
        }
        assert_eq!(FaultPoint::parse("commit-after-building"), None);
    }

    #[test]
    fn manifest_revision_is_bound_to_root_and_operation() {
        let a = restore_manifest_revision(&meta::RootId([1; 16]), &OperationId([2; 16]));
        assert_eq!(
            a,
            restore_manifest_revision(&meta::RootId([1; 16]), &OperationId([2; 16]))
        );
        assert_ne!(
            a,
            restore_manifest_revision(&meta::RootId([1; 16]), &OperationId([3; 16]))
        );
    }
}
