//! Commit (docs/metadata-format.md, tag 0x07) — one sealed, root-global commit closure.
//!
//! Key: `root_id 16 | commit_id 32`.
//!
//! Value (format version 2, immutable commit record):
//!
//! ```text
//! u16 2
//! str   source_workbench_id            facade identity input (u32 length + ASCII)
//! 16    source_workspace_incarnation
//! str   content_digest_uri             facade identity input
//! str   manifest_digest_uri            facade identity input
//! 16    tree_manifest_revision         the staged run-manifest ArtifactRevision
//! u64   member_count
//! 32    member_digest                  tree_digest_uri = "sha256:" + hex(member_digest)
//! u64   unique_revision_count
//! 32    revision_digest
//! u32 n | n × 32 parents               unique parent commits, ascending; parent_count = n
//! 32    parent_digest
//! str   producer
//! bytes lineage                        opaque canonical lineage projection (u32 length)
//! u64   consumer_count
//! u64   consumer_epoch
//! option(u64) last_zero_consumer_version
//! u8    CommitState                    Sealed=1, Retiring=2, Retired=3
//! option(ClosureCursor) retirement_cursor   (see [`super::cursor`])
//! u64   created_version
//! ```
//!
//! Format version 3 appends `u64 source_read_version` (the read version the build froze the
//! source workbench at; docs/metadata-format.md, "Diff"). The encoder writes version 2 when the
//! field is absent (records sealed before it existed keep their bytes) and 3 when it is present;
//! the decoder accepts both.
//!
//! `tree_digest_uri` and `parent_count` are derived ([`Commit::tree_digest_uri`],
//! [`Commit::parent_count`]) rather than stored twice, so they can never disagree with the sealed
//! digest and parent list. Parents must be strictly ascending (unique); the decoder rejects
//! anything else.

use super::cursor::ClosureCursor;
use super::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{to_hex, ArtifactRevisionId, CommitId, RootId, WorkspaceIncarnationId};

const FAMILY: &str = "commit";
/// Value format version (immutable commit record).
pub const VALUE_VERSION: u16 = 2;
/// Value format version of a record carrying its `source_read_version`.
pub const VALUE_VERSION_WITH_SOURCE_VERSION: u16 = 3;

durable_enum!(
    /// Commit lifecycle (discriminants of docs/metadata-format.md).
    CommitState, "commit" {
        /// Sealed: consumers may attach.
        Sealed = 1,
        /// Retirement claimed: no new consumer can attach.
        Retiring = 2,
        /// Every member, reference and parent consumer released.
        Retired = 3,
    }
);

/// The Commit key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitKey {
    /// Root.
    pub root: RootId,
    /// Commit identity.
    pub commit_id: CommitId,
}

impl CommitKey {
    /// `root_id | commit_id` (48 bytes).
    pub fn encode(&self) -> Vec<u8> {
        Enc::new()
            .raw(self.root.as_bytes())
            .raw(self.commit_id.as_bytes())
            .finish()
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] for any length other than 48.
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let k = CommitKey {
            root: RootId(d.b16()?),
            commit_id: CommitId(d.b32()?),
        };
        d.finish()?;
        Ok(k)
    }
}

/// The Commit value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// Stable id of the committed workbench (facade identity input).
    pub source_workbench_id: String,
    /// Incarnation the tree was frozen from.
    pub source_incarnation: WorkspaceIncarnationId,
    /// `sha256:` content digest URI supplied by the caller (facade identity input).
    pub content_digest_uri: String,
    /// `sha256:` digest URI of the canonical manifest (facade identity input).
    pub manifest_digest_uri: String,
    /// Revision of the canonical run manifest (`metadata/run_manifest.json`).
    pub tree_manifest_revision: ArtifactRevisionId,
    /// Number of CommitMember rows.
    pub member_count: u64,
    /// Digest over the ordered CommitMember rows.
    pub member_digest: [u8; 32],
    /// Number of unique `RevisionRef(Commit)` rows.
    pub unique_revision_count: u64,
    /// Digest over the unique revision set.
    pub revision_digest: [u8; 32],
    /// Unique parent commits, strictly ascending.
    pub parents: Vec<CommitId>,
    /// Digest over the parent set.
    pub parent_digest: [u8; 32],
    /// Producer projection.
    pub producer: String,
    /// Opaque canonical lineage projection.
    pub lineage: Vec<u8>,
    /// Number of CommitConsumer rows targeting this commit.
    pub consumer_count: u64,
    /// Incremented by every consumer addition or removal.
    pub consumer_epoch: u64,
    /// Commit version at which `consumer_count` last became zero.
    pub last_zero_consumer_version: Option<u64>,
    /// Lifecycle state.
    pub state: CommitState,
    /// Retirement progress once `Retiring`.
    pub retirement_cursor: Option<ClosureCursor>,
    /// Commit version that sealed the record.
    pub created_version: u64,
    /// The read version the build froze the source workbench at (`None` in records sealed
    /// before format version 3 recorded it).
    pub source_read_version: Option<u64>,
}

impl Commit {
    /// `"sha256:" + lowercase_hex(member_digest)` (docs/metadata-format.md).
    pub fn tree_digest_uri(&self) -> String {
        format!("sha256:{}", to_hex(&self.member_digest))
    }

    /// Number of unique parents.
    pub fn parent_count(&self) -> u64 {
        self.parents.len() as u64
    }

    /// Encodes the value (format version 2, or 3 with `source_read_version`).
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::version(if self.source_read_version.is_some() {
            VALUE_VERSION_WITH_SOURCE_VERSION
        } else {
            VALUE_VERSION
        });
        e.str(&self.source_workbench_id)
            .raw(self.source_incarnation.as_bytes())
            .str(&self.content_digest_uri)
            .str(&self.manifest_digest_uri)
            .raw(self.tree_manifest_revision.as_bytes())
            .u64(self.member_count)
            .raw(&self.member_digest)
            .u64(self.unique_revision_count)
            .raw(&self.revision_digest)
            .count(self.parents.len());
        for p in &self.parents {
            e.raw(p.as_bytes());
        }
        e.raw(&self.parent_digest)
            .str(&self.producer)
            .bytes(&self.lineage)
            .u64(self.consumer_count)
            .u64(self.consumer_epoch)
            .opt_u64(self.last_zero_consumer_version)
            .u8(self.state.to_u8());
        match &self.retirement_cursor {
            None => {
                e.u8(0);
            }
            Some(c) => {
                e.u8(1);
                c.put(&mut e);
            }
        }
        e.u64(self.created_version);
        if let Some(v) = self.source_read_version {
            e.u64(v);
        }
        e.finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`] (unknown version or state,
    /// truncation, trailing bytes, unordered or duplicate parents).
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        let version = d.version_in(&[VALUE_VERSION, VALUE_VERSION_WITH_SOURCE_VERSION])?;
        let source_workbench_id = d.string()?;
        let source_incarnation = WorkspaceIncarnationId(d.b16()?);
        let content_digest_uri = d.string()?;
        let manifest_digest_uri = d.string()?;
        let tree_manifest_revision = ArtifactRevisionId(d.b16()?);
        let member_count = d.u64()?;
        let member_digest = d.b32()?;
        let unique_revision_count = d.u64()?;
        let revision_digest = d.b32()?;
        let n = d.count()?;
        let mut parents: Vec<CommitId> = Vec::new();
        for _ in 0..n {
            let p = CommitId(d.b32()?);
            if parents.last().is_some_and(|last| *last >= p) {
                return Err(d.err("parents are not strictly ascending"));
            }
            parents.push(p);
        }
        let parent_digest = d.b32()?;
        let producer = d.string()?;
        let lineage = d.bytes()?.to_vec();
        let consumer_count = d.u64()?;
        let consumer_epoch = d.u64()?;
        let last_zero_consumer_version = d.opt_u64()?;
        let state = CommitState::from_u8(d.u8()?)?;
        let retirement_cursor = if d.opt_tag()? {
            Some(ClosureCursor::get(&mut d)?)
        } else {
            None
        };
        let created_version = d.u64()?;
        let source_read_version = if version == VALUE_VERSION_WITH_SOURCE_VERSION {
            Some(d.u64()?)
        } else {
            None
        };
        d.finish()?;
        Ok(Commit {
            source_workbench_id,
            source_incarnation,
            content_digest_uri,
            manifest_digest_uri,
            tree_manifest_revision,
            member_count,
            member_digest,
            unique_revision_count,
            revision_digest,
            parents,
            parent_digest,
            producer,
            lineage,
            consumer_count,
            consumer_epoch,
            last_zero_consumer_version,
            state,
            retirement_cursor,
            created_version,
            source_read_version,
        })
    }
}
