//! The publication request: bounds, conditions, validation, the command digest and the receipt.

use crate::codec::{CommandResult, ManifestRow, PathEntry};
use crate::command::projection::{self as index_projection, IndexFields};
use crate::command::CommandOutcome;
use crate::error::{Error, Result};
use crate::ids::{validate_workbench_id, ArtifactRevisionId, RequestId};
use crate::path::NormPath;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;

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
pub(super) fn dependency_owners(req: &PublishRequest) -> BTreeSet<ArtifactRevisionId> {
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
