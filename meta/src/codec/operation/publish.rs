//! Operation payload of the Publish machine (value version 1): phase, frozen request, ledger
//! counters and result.

use crate::codec::cursor::OperationResult;
use crate::codec::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::ArtifactRevisionId;
use crate::path::NormPath;

durable_enum!(
    /// Publication phase (discriminants of docs/metadata-format.md).
    PublishPhase, "operation" {
        /// Objects uploading.
        Uploading = 1,
        /// Finalization claimed.
        Finalizing = 2,
        /// Published atomically with the path/revision.
        Published = 3,
        /// Cleanup claimed.
        Aborting = 4,
        /// Cleanup running.
        Cleaning = 5,
        /// Cleanup complete.
        Cleaned = 6,
        /// Ambiguous; awaiting reconciliation.
        Quarantined = 7,
    }
);

/// Success payload of a publish operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishResult {
    /// Commit version of the publishing command.
    pub commit_version: u64,
    /// New path generation; `None` for a staged (CommitStaging/RestoreStaging) revision that
    /// wrote no PathCurrent.
    pub path_generation: Option<u64>,
}

durable_enum!(
    /// Kind of the PathCurrent generation CAS a publication was begun with.
    PublishConditionKind, "operation" {
        /// The path must be absent.
        Create = 1,
        /// The path must exist at an expected generation.
        Replace = 2,
        /// Append: absent (`None`) or at an expected generation.
        Append = 3,
    }
);

/// The PathCurrent condition frozen into a publish operation (the generation CAS of its final
/// command).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishCondition {
    /// The path must be absent.
    Create,
    /// The path must exist with this generation.
    Replace {
        /// Expected generation.
        expected_generation: u64,
    },
    /// `None`: the path must be absent; `Some(g)`: it must be at generation `g`.
    Append {
        /// Expected generation of the base body, if any.
        expected_generation: Option<u64>,
    },
}

impl PublishCondition {
    /// The condition kind.
    pub fn kind(&self) -> PublishConditionKind {
        match self {
            PublishCondition::Create => PublishConditionKind::Create,
            PublishCondition::Replace { .. } => PublishConditionKind::Replace,
            PublishCondition::Append { .. } => PublishConditionKind::Append,
        }
    }

    fn put(&self, e: &mut Enc) {
        e.u8(self.kind().to_u8());
        match self {
            PublishCondition::Create => e.opt_u64(None),
            PublishCondition::Replace {
                expected_generation,
            } => e.opt_u64(Some(*expected_generation)),
            PublishCondition::Append {
                expected_generation,
            } => e.opt_u64(*expected_generation),
        };
    }

    fn get(d: &mut Dec<'_>) -> Result<Self> {
        let kind = PublishConditionKind::from_u8(d.u8()?)?;
        let generation = d.opt_u64()?;
        Ok(match (kind, generation) {
            (PublishConditionKind::Create, None) => PublishCondition::Create,
            (PublishConditionKind::Replace, Some(g)) => PublishCondition::Replace {
                expected_generation: g,
            },
            (PublishConditionKind::Append, g) => PublishCondition::Append {
                expected_generation: g,
            },
            (k, g) => {
                return Err(d.err(format!(
                    "publish condition {k:?} with expected generation {g:?}"
                )))
            }
        })
    }
}

/// The base body an append publication reuses as immutable segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishBase {
    /// Revision whose ArtifactManifest rows are reused (rows `0..row_count`, in order).
    pub revision: ArtifactRevisionId,
    /// Number of reused manifest rows.
    pub row_count: u64,
    /// Bytes covered by the reused rows (the new blocks start at this logical offset).
    pub logical_size: u64,
}

/// A publication's durable state (the StagedObject ledger rows hang off its id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishOperation {
    /// Phase.
    pub phase: PublishPhase,
    /// Revision being created (every staged object key belongs to it).
    pub artifact_revision_id: ArtifactRevisionId,
    /// Caller intent digest: an operation id reused with another intent is refused.
    pub intent_digest: [u8; 32],
    /// Target workbench id.
    pub workbench_id: String,
    /// Target path (normalized).
    pub path: NormPath,
    /// Generation CAS of the final command.
    pub condition: PublishCondition,
    /// Reused append segments, if any.
    pub base: Option<PublishBase>,
    /// Sealed dependency depth of the new revision.
    pub dependency_depth: u32,
    /// Content type (1..=255 bytes).
    pub content_type: String,
    /// Producer / provenance summary.
    pub producer: String,
    /// Optional caller manifest id.
    pub manifest_id: Option<String>,
    /// Encoded custom index fields (the PathEntry `index_projection` form).
    pub index_projection: Vec<(String, Vec<u8>)>,
    /// Number of StagedObject rows written so far (sequences `0..count` relative to the first
    /// own object index; see [`crate::ops::publish::operation`]).
    pub staged_object_count: u64,
    /// Expected body length in bytes (sealed by the Finalizing CAS; `0` before).
    pub expected_length: u64,
    /// Expected `sha256:` body digest URI (sealed by the Finalizing CAS; `None` before).
    pub expected_digest_uri: Option<String>,
    /// Next StagedObject sequence cleanup has not yet settled (Aborting/Cleaning/Quarantined).
    pub cleanup_next_sequence: u64,
    /// Evidence recorded when the operation was quarantined.
    pub quarantine_evidence: Option<String>,
    /// Terminal result.
    pub result: OperationResult<PublishResult>,
}

/// Encodes the PublishOperation payload (after the version and kind bytes).
pub(super) fn put_publish(p: &PublishOperation, e: &mut Enc) {
    e.u8(p.phase.to_u8())
        .raw(p.artifact_revision_id.as_bytes())
        .raw(&p.intent_digest)
        .str(&p.workbench_id)
        .norm_path(&p.path);
    p.condition.put(e);
    match &p.base {
        None => e.u8(0),
        Some(b) => e
            .u8(1)
            .raw(b.revision.as_bytes())
            .u64(b.row_count)
            .u64(b.logical_size),
    };
    e.u32(p.dependency_depth)
        .str(&p.content_type)
        .str(&p.producer)
        .opt_str(p.manifest_id.as_deref())
        .count(p.index_projection.len());
    for (field, value) in &p.index_projection {
        e.str(field).bytes(value);
    }
    e.u64(p.staged_object_count)
        .u64(p.expected_length)
        .opt_str(p.expected_digest_uri.as_deref())
        .u64(p.cleanup_next_sequence)
        .opt_str(p.quarantine_evidence.as_deref());
    p.result.put(e, |r, e| {
        e.u64(r.commit_version).opt_u64(r.path_generation);
    });
}

pub(super) fn decode_publish(d: &mut Dec<'_>) -> Result<PublishOperation> {
    let phase = PublishPhase::from_u8(d.u8()?)?;
    let artifact_revision_id = ArtifactRevisionId(d.b16()?);
    let intent_digest = d.b32()?;
    let workbench_id = d.string()?;
    let path = d.norm_path()?;
    let condition = PublishCondition::get(d)?;
    let base = if d.opt_tag()? {
        Some(PublishBase {
            revision: ArtifactRevisionId(d.b16()?),
            row_count: d.u64()?,
            logical_size: d.u64()?,
        })
    } else {
        None
    };
    let dependency_depth = d.u32()?;
    let content_type = d.string()?;
    let producer = d.string()?;
    let manifest_id = d.opt_string()?;
    let n = d.count()?;
    let mut index_projection = Vec::new();
    for _ in 0..n {
        let field = d.string()?;
        let value = d.bytes()?.to_vec();
        index_projection.push((field, value));
    }
    let staged_object_count = d.u64()?;
    let expected_length = d.u64()?;
    let expected_digest_uri = d.opt_string()?;
    let cleanup_next_sequence = d.u64()?;
    let quarantine_evidence = d.opt_string()?;
    let result = OperationResult::get(d, |d| {
        Ok(PublishResult {
            commit_version: d.u64()?,
            path_generation: d.opt_u64()?,
        })
    })?;
    Ok(PublishOperation {
        phase,
        artifact_revision_id,
        intent_digest,
        workbench_id,
        path,
        condition,
        base,
        dependency_depth,
        content_type,
        producer,
        manifest_id,
        index_projection,
        staged_object_count,
        expected_length,
        expected_digest_uri,
        cleanup_next_sequence,
        quarantine_evidence,
        result,
    })
}
