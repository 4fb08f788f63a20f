//! `Client::move_path`: one file moves to another path of the same workbench (see
//! [`meta::ops::move_path`]; docs/metadata-format.md, "Move One Path").
//!
//! No byte is copied and no revision is created: one metadata command makes the destination name
//! the source's revision and removes the source, with their references, index rows and one
//! `artifact_moved` change event. Directory rename is not supported (docs/design.md, "Non-Goals"):
//! a source that is a directory is refused.

use meta::ops::move_path::{self as ops, MoveDestination, MoveRequest};
use meta::{NormPath, PathCondition, RequestId};
use serde_json::{json, Value};

use crate::client::{map_namespace_error, Client};
use crate::error::{Error, Result};

/// Options of [`Client::move_path`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MoveOptions {
    /// Move only when the source is at exactly this generation (else
    /// [`Error::GenerationConflict`] naming the source, nothing moved).
    pub expected_generation: Option<u64>,
    /// `None` (the default): the destination must be absent ([`Error::AlreadyExists`]
    /// otherwise). `Some(g)`: the destination must be a file at generation `g`, which the move
    /// replaces ([`Error::GenerationConflict`] naming the destination otherwise, with `actual:
    /// None` when it is absent).
    pub expected_destination_generation: Option<u64>,
    /// Replay identity (16 bytes; the CLI takes 32 hex characters). Retrying with the same id
    /// after a lost response returns the original receipt (`idempotent_replay = true`) even
    /// though the source is gone; `None` uses a fresh random id.
    pub request_id: Option<[u8; 16]>,
}

/// What [`Client::move_path`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveReceipt {
    /// The source path (now absent).
    pub from: NormPath,
    /// The destination path.
    pub to: NormPath,
    /// The generation the source had when it moved.
    pub from_generation: u64,
    /// The destination's new generation (the move's commit version).
    pub generation: u64,
    /// The destination's generation before the move (`None`: it was created).
    pub replaced_generation: Option<u64>,
    /// Size in bytes of the moved body.
    pub size_bytes: u64,
    /// `sha256:` URI of the moved body.
    pub digest_uri: String,
    /// Content type of the moved body.
    pub content_type: String,
    /// Commit version of the move (the original one on replay).
    pub commit_version: u64,
    /// True when this is the stored result of an earlier call with the same request id.
    pub idempotent_replay: bool,
}

impl MoveReceipt {
    /// The success envelope of a move, as `nokv mv` prints it, the server's move route answers it
    /// and the Python SDK returns it (without `status`): `workbench_id`, `from`, `to` (both
    /// workbench-relative), `path` (the destination under `workbench_path`, the workbench's
    /// presentation path), `from_generation`, `generation`, `replaced_generation` (`null`:
    /// created), `size_bytes`, `digest`, `content_type`, `commit_version`, `idempotent_replay`.
    pub fn envelope(&self, workbench_id: &str, workbench_path: &str) -> Value {
        json!({
            "status": "success",
            "workbench_id": workbench_id,
            "from": self.from.as_str(),
            "to": self.to.as_str(),
            "path": format!("{workbench_path}/{}", self.to.as_str()),
            "from_generation": self.from_generation,
            "generation": self.generation,
            "replaced_generation": self.replaced_generation,
            "size_bytes": self.size_bytes,
            "digest": self.digest_uri,
            "content_type": self.content_type,
            "commit_version": self.commit_version,
            "idempotent_replay": self.idempotent_replay,
        })
    }

    /// Parses [`MoveReceipt::envelope`] (as a remote client receives it).
    ///
    /// Errors: [`Error::InvalidArgument`] naming the first missing or malformed field.
    pub fn from_envelope(v: &Value) -> Result<MoveReceipt> {
        let missing = |k: &str| Error::InvalidArgument(format!("the move receipt lacks `{k}`"));
        let s = |k: &str| v.get(k).and_then(Value::as_str).ok_or_else(|| missing(k));
        let n = |k: &str| v.get(k).and_then(Value::as_u64).ok_or_else(|| missing(k));
        Ok(MoveReceipt {
            from: Client::normalize(s("from")?)?,
            to: Client::normalize(s("to")?)?,
            from_generation: n("from_generation")?,
            generation: n("generation")?,
            replaced_generation: match v.get("replaced_generation") {
                None | Some(Value::Null) => None,
                Some(g) => Some(g.as_u64().ok_or_else(|| missing("replaced_generation"))?),
            },
            size_bytes: n("size_bytes")?,
            digest_uri: s("digest")?.to_string(),
            content_type: s("content_type")?.to_string(),
            commit_version: n("commit_version")?,
            idempotent_replay: v
                .get("idempotent_replay")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }
}

/// Maps a refusal of the move to the SDK's typed errors: source errors name the source (as a
/// removal's do, [`crate::lifetime::map_path_error`]), destination errors
/// ([`meta::Error::MoveDestination`]) name the destination.
fn map_move_error(err: meta::Error, from: &NormPath, to: &NormPath, workbench_id: &str) -> Error {
    let path = |p: &NormPath| p.as_str().to_string();
    match err {
        meta::Error::MoveDestination(inner) => {
            // A directory at the destination is refused as a create over it.
            let condition = PathCondition::Create;
            match map_namespace_error(*inner, to, condition) {
                Ok(mapped) => mapped,
                Err(meta::Error::PathAlreadyExists) => Error::AlreadyExists { path: path(to) },
                Err(meta::Error::GenerationConflict { expected, actual }) => {
                    Error::GenerationConflict {
                        path: path(to),
                        expected: Some(expected),
                        actual: (actual != 0).then_some(actual),
                    }
                }
                Err(other) => Error::from(other),
            }
        }
        // Source errors: as for any command on the one file at `from`.
        other => crate::lifetime::map_path_error(other, from, workbench_id),
    }
}

impl Client {
    /// Moves the file at `from` to `to` in the same workbench (docs/metadata-format.md, "Move One
    /// Path"): ONE metadata command, no byte copied. Afterwards `from` is absent and `to` names
    /// the same revision (same size, digest, content type and index fields) at a new generation;
    /// snapshots and commits taken before keep reading both paths as they were. A concurrent
    /// reader sees the file at exactly one of the two paths.
    ///
    /// Errors: [`Error::InvalidPath`] (normalizer; a reserved run/restore manifest at `from`;
    /// at `to` whatever a put refuses: a reserved path or one below it, a section name such as
    /// `logs`); [`Error::InvalidArgument`] (`from == to`, bad workbench id);
    /// [`Error::WorkbenchNotFound`]; [`Error::NotFound`] (nothing at `from`);
    /// [`Error::NotArtifact`] (`from` is a directory — directory rename is not supported);
    /// [`Error::GenerationConflict`] (naming `from` when `expected_generation` is stale, `to`
    /// when `expected_destination_generation` is); [`Error::AlreadyExists`] (create-only and a
    /// file is at `to`); [`Error::DirectoryExists`] (`to` is a directory);
    /// [`Error::NotDirectory`] (`to` lies below a file); `Error::Meta(RequestReplayMismatch)`
    /// when the request id was used for another command; [`Error::Busy`]. Nothing is moved on
    /// any error.
    pub fn move_path(
        &self,
        workbench_id: &str,
        from: &str,
        to: &str,
        options: &MoveOptions,
    ) -> Result<MoveReceipt> {
        let from_norm = Self::normalize(from)?;
        if crate::client::RESERVED_PATHS.contains(&from_norm.as_str()) {
            return Err(Error::InvalidPath {
                path: from.to_string(),
                reason: "this path is owned by commit/restore and cannot be moved".into(),
            });
        }
        // The destination is published like a put's: not a reserved path (or below one), not a
        // section name.
        let to_norm = self.publishable_path(to)?;
        meta::validate_workbench_id(workbench_id)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let request_id = match options.request_id {
            Some(id) => RequestId(id),
            None => RequestId::random()?,
        };
        let req = MoveRequest {
            request_id,
            workbench_id: workbench_id.to_string(),
            from: from_norm.clone(),
            to: to_norm.clone(),
            expected_generation: options.expected_generation,
            destination: match options.expected_destination_generation {
                None => MoveDestination::Create,
                Some(expected_generation) => MoveDestination::Replace {
                    expected_generation,
                },
            },
        };
        let r = ops::move_path(self.meta(), &req)
            .map_err(|e| map_move_error(e, &from_norm, &to_norm, workbench_id))?;
        // The move is durable; the caller has not been answered (a lost reply).
        crate::fault::point("move-after-command");
        Ok(MoveReceipt {
            from: from_norm,
            to: to_norm,
            from_generation: r.from_generation,
            generation: r.entry.generation,
            replaced_generation: r.replaced_generation,
            size_bytes: r.entry.logical_size,
            digest_uri: r.entry.body_digest_uri,
            content_type: r.entry.content_type,
            commit_version: r.commit_version,
            idempotent_replay: r.idempotent_replay,
        })
    }
}
