//! `Client::remove` and `Client::remove_prefix` (see [`meta::ops::remove`]).

use meta::ops::remove::{self as ops, RemoveRequest};
use meta::{NormPath, RequestId};

use serde_json::{json, Value};

use crate::client::Client;
use crate::error::{Error, Result};

/// Options of [`Client::remove`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoveOptions {
    /// Remove only when the path is at exactly this generation (else
    /// [`Error::GenerationConflict`], nothing written).
    pub expected_generation: Option<u64>,
    /// Replay identity (16 bytes; the CLI takes 32 hex characters). Retrying with the same id
    /// after a lost response returns the original receipt (`idempotent_replay = true`) even
    /// though the path is gone; `None` uses a fresh random id.
    pub request_id: Option<[u8; 16]>,
}

/// What [`Client::remove`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoveReceipt {
    /// The removed workbench-relative path.
    pub path: NormPath,
    /// The generation the path had when it was removed.
    pub removed_generation: u64,
    /// Size in bytes of the removed body.
    pub size_bytes: u64,
    /// `sha256:` URI of the removed body.
    pub digest_uri: String,
    /// Commit version of the removal (the original one on replay).
    pub commit_version: u64,
    /// True when this is the stored result of an earlier call with the same request id.
    pub idempotent_replay: bool,
}

/// Removed paths with the generation each had.
pub type RemovedPaths = [(NormPath, u64)];

/// What [`Client::remove_prefix`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrefixRemoval {
    /// Removed paths with the generation each had, in removal order.
    pub removed: Vec<(NormPath, u64)>,
    /// Reserved manifests under the prefix that were kept (commit/restore own them).
    pub kept_reserved: Vec<NormPath>,
    /// Metadata commands (batches) executed.
    pub batches: u64,
}

impl RemoveReceipt {
    /// The success envelope of a removal, as `nokv rm` prints it, the server's remove route
    /// answers it and the Python SDK returns it (without `status`): `workbench_id`,
    /// `relative_path`, `path` (under `workbench_path`, the workbench's presentation path),
    /// `removed_generation`, `size_bytes`, `digest`, `commit_version`, `idempotent_replay`.
    pub fn envelope(&self, workbench_id: &str, workbench_path: &str) -> Value {
        json!({
            "status": "success",
            "workbench_id": workbench_id,
            "relative_path": self.path.as_str(),
            "path": format!("{workbench_path}/{}", self.path.as_str()),
            "removed_generation": self.removed_generation,
            "size_bytes": self.size_bytes,
            "digest": self.digest_uri,
            "commit_version": self.commit_version,
            "idempotent_replay": self.idempotent_replay,
        })
    }
}

impl PrefixRemoval {
    /// The success envelope of a prefix removal (`nokv rm -r`, the server's remove-prefix route,
    /// the Python SDK without `status`): `workbench_id`, `prefix`, `removed_count`, `removed`
    /// (`[{relative_path, generation}]` in removal order), `kept_reserved`, `batches`.
    pub fn envelope(&self, workbench_id: &str, prefix: &str) -> Value {
        json!({
            "status": "success",
            "workbench_id": workbench_id,
            "prefix": prefix,
            "removed_count": self.removed.len(),
            "removed": self
                .removed
                .iter()
                .map(|(p, g)| json!({"relative_path": p.as_str(), "generation": g}))
                .collect::<Vec<_>>(),
            "kept_reserved": self.kept_reserved.iter().map(NormPath::as_str).collect::<Vec<_>>(),
            "batches": self.batches,
        })
    }
}

/// Maps a refusal of a metadata command on the one file at `path` of `workbench_id` (a removal,
/// the source of a move) to the SDK's typed errors: nothing there is [`Error::NotFound`], a
/// directory [`Error::NotArtifact`], a stale expected generation [`Error::GenerationConflict`]
/// naming `path`, an absent workbench [`Error::WorkbenchNotFound`], a lost read-version race
/// [`Error::Busy`].
pub(crate) fn map_path_error(err: meta::Error, path: &NormPath, workbench_id: &str) -> Error {
    match err {
        meta::Error::PathNotFound => Error::NotFound {
            path: path.as_str().to_string(),
        },
        meta::Error::PathIsDirectory => Error::NotArtifact {
            path: path.as_str().to_string(),
        },
        meta::Error::GenerationConflict { expected, actual } => Error::GenerationConflict {
            path: path.as_str().to_string(),
            expected: Some(expected),
            actual: Some(actual),
        },
        meta::Error::WorkspaceNotFound { .. } => Error::WorkbenchNotFound {
            workbench_id: workbench_id.to_string(),
        },
        meta::Error::InvalidArgument(msg) => Error::InvalidArgument(msg),
        meta::Error::ReadVersionConflict { .. } => Error::Busy,
        other => Error::Meta(other),
    }
}

impl Client {
    /// Removes the artifact at `path` (docs/metadata-format.md, "Ordinary put/replace/remove"): one metadata
    /// command deletes the PathCurrent row, releases its revision reference (the revision
    /// becomes a GC candidate when nothing else holds it), deletes its index rows and emits an
    /// `ArtifactRemoved` change event. Snapshots, commits and restores taken before keep reading
    /// the removed bytes; [`Client::gc`] deletes them once nothing holds them.
    ///
    /// Errors: [`Error::InvalidPath`] (normalizer; the reserved run/restore manifests);
    /// [`Error::WorkbenchNotFound`]; [`Error::NotFound`] when nothing is at `path`;
    /// [`Error::NotArtifact`] when `path` is an implicit directory (files lie under it; use
    /// [`Client::remove_prefix`]);
    /// [`Error::GenerationConflict`] with `expected_generation` stale (nothing written);
    /// `Error::Meta(RequestReplayMismatch)` when the request id was used for another removal;
    /// [`Error::Busy`].
    pub fn remove(
        &self,
        workbench_id: &str,
        path: &str,
        options: &RemoveOptions,
    ) -> Result<RemoveReceipt> {
        let norm = Self::normalize(path)?;
        if crate::client::RESERVED_PATHS.contains(&norm.as_str()) {
            return Err(Error::InvalidPath {
                path: path.to_string(),
                reason: "this path is owned by commit/restore and cannot be removed".into(),
            });
        }
        meta::validate_workbench_id(workbench_id)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let request_id = match options.request_id {
            Some(id) => RequestId(id),
            None => RequestId::random()?,
        };
        let req = RemoveRequest {
            request_id,
            workbench_id: workbench_id.to_string(),
            path: norm.clone(),
            expected_generation: options.expected_generation,
        };
        let receipt =
            ops::remove(self.meta(), &req).map_err(|e| map_path_error(e, &norm, workbench_id))?;
        Ok(RemoveReceipt {
            path: norm,
            removed_generation: receipt.removed.generation,
            size_bytes: receipt.removed.logical_size,
            digest_uri: receipt.removed.body_digest_uri,
            commit_version: receipt.commit_version,
            idempotent_replay: receipt.idempotent_replay,
        })
    }

    /// Removes every artifact under `prefix` (a directory such as `outputs/run1`, or a file) in
    /// bounded batches: each batch is one metadata command removing at most 16 paths, each path
    /// atomically with its reference, index rows and `ArtifactRemoved` event (never half-visible).
    /// Rerunning after an interruption removes what is left. Reserved manifests are kept and
    /// reported. `on_batch` sees each batch's removed paths.
    ///
    /// Errors: [`Error::InvalidPath`]; [`Error::InvalidArgument`] for an empty prefix;
    /// [`Error::WorkbenchNotFound`]; [`Error::Busy`]; `Error::Meta` for storage failures (the
    /// batches before it stay removed).
    pub fn remove_prefix_with(
        &self,
        workbench_id: &str,
        prefix: &str,
        on_batch: &mut dyn FnMut(&RemovedPaths),
    ) -> Result<PrefixRemoval> {
        if prefix.trim_matches('/').is_empty() {
            return Err(Error::InvalidArgument(
                "the prefix must name a directory or file inside the workbench".into(),
            ));
        }
        let norm = Self::normalize(prefix)?;
        meta::validate_workbench_id(workbench_id)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let mut out = PrefixRemoval::default();
        loop {
            let batch =
                ops::remove_batch(self.meta(), workbench_id, &norm, ops::MAX_PATHS_PER_BATCH)
                    .map_err(|e| map_path_error(e, &norm, workbench_id))?;
            out.kept_reserved = batch.kept_reserved;
            if !batch.removed.is_empty() {
                out.batches += 1;
                on_batch(&batch.removed);
                out.removed.extend(batch.removed);
            }
            if batch.done || batch.commit_version.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// [`Client::remove_prefix_with`] without a progress callback.
    pub fn remove_prefix(&self, workbench_id: &str, prefix: &str) -> Result<PrefixRemoval> {
        self.remove_prefix_with(workbench_id, prefix, &mut |_| {})
    }
}
