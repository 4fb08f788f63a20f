//! CommitConsumer (docs/metadata-format.md, tag 0x0e) — one row per live consumer of a sealed commit.
//!
//! Key: `root_id 16 | commit_id 32 | u8 CommitConsumerKind | consumer_owner_id`, where the owner
//! id is discriminated by kind exactly as docs/metadata-format.md writes it:
//!
//! - WorkbenchHead (1): `workspace_incarnation_id` (16);
//! - Tag (2): `workspace_incarnation_id 16 | u16 len(tag_name) | tag_name`;
//! - Lease (3): `operation_id` (16) — a restore/fork lease;
//! - ChildCommit (4): `child_commit_id` (32).
//!
//! Value (format version 1): `u16 1 | u64 consumer_epoch_at_add | u64 created_version`.

use super::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{CommitId, OperationId, RootId, TagName, WorkspaceIncarnationId};

const FAMILY: &str = "commit_consumer";
/// Value format version.
pub const VALUE_VERSION: u16 = 1;

durable_enum!(
    /// Kind of commit consumer (discriminants of docs/metadata-format.md).
    CommitConsumerKind, "commit_consumer" {
        /// A workbench head points at the commit.
        WorkbenchHead = 1,
        /// A tag points at the commit.
        Tag = 2,
        /// A restore/fork lease.
        Lease = 3,
        /// A child commit names it as a parent.
        ChildCommit = 4,
    }
);

/// The typed consumer owner.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConsumerOwner {
    /// The head of one workspace incarnation.
    WorkbenchHead {
        /// Workspace incarnation.
        incarnation: WorkspaceIncarnationId,
    },
    /// A tag of one workspace incarnation.
    Tag {
        /// Workspace incarnation.
        incarnation: WorkspaceIncarnationId,
        /// Tag name.
        tag: TagName,
    },
    /// A restore/fork lease held by an operation.
    Lease {
        /// Operation holding the lease.
        operation_id: OperationId,
    },
    /// A child commit.
    ChildCommit {
        /// The child commit.
        child: CommitId,
    },
}

impl ConsumerOwner {
    /// The consumer kind.
    pub fn kind(&self) -> CommitConsumerKind {
        match self {
            ConsumerOwner::WorkbenchHead { .. } => CommitConsumerKind::WorkbenchHead,
            ConsumerOwner::Tag { .. } => CommitConsumerKind::Tag,
            ConsumerOwner::Lease { .. } => CommitConsumerKind::Lease,
            ConsumerOwner::ChildCommit { .. } => CommitConsumerKind::ChildCommit,
        }
    }

    pub(crate) fn put(&self, e: &mut Enc) {
        match self {
            ConsumerOwner::WorkbenchHead { incarnation } => {
                e.raw(incarnation.as_bytes());
            }
            ConsumerOwner::Tag { incarnation, tag } => {
                e.raw(incarnation.as_bytes()).str16(tag.as_str());
            }
            ConsumerOwner::Lease { operation_id } => {
                e.raw(operation_id.as_bytes());
            }
            ConsumerOwner::ChildCommit { child } => {
                e.raw(child.as_bytes());
            }
        }
    }

    pub(crate) fn get(kind: CommitConsumerKind, d: &mut Dec<'_>) -> Result<Self> {
        Ok(match kind {
            CommitConsumerKind::WorkbenchHead => ConsumerOwner::WorkbenchHead {
                incarnation: WorkspaceIncarnationId(d.b16()?),
            },
            CommitConsumerKind::Tag => ConsumerOwner::Tag {
                incarnation: WorkspaceIncarnationId(d.b16()?),
                tag: TagName::from_stored(d.family(), d.bytes16()?)?,
            },
            CommitConsumerKind::Lease => ConsumerOwner::Lease {
                operation_id: OperationId(d.b16()?),
            },
            CommitConsumerKind::ChildCommit => ConsumerOwner::ChildCommit {
                child: CommitId(d.b32()?),
            },
        })
    }

    /// The exact `consumer_owner_id` bytes (without the kind byte).
    pub fn owner_id_bytes(&self) -> Vec<u8> {
        let mut e = Enc::new();
        self.put(&mut e);
        e.finish()
    }

    /// Decodes an exact `consumer_owner_id` of `kind`.
    ///
    /// Errors: [`crate::Error::Codec`] for a wrong width, invalid tag name or trailing bytes.
    pub fn from_owner_id_bytes(kind: CommitConsumerKind, bytes: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, bytes);
        let o = Self::get(kind, &mut d)?;
        d.finish()?;
        Ok(o)
    }
}

/// The CommitConsumer key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitConsumerKey {
    /// Root.
    pub root: RootId,
    /// Consumed commit.
    pub commit_id: CommitId,
    /// Consumer (kind and owner id).
    pub owner: ConsumerOwner,
}

/// `root_id | commit_id` — the prefix of every consumer of one commit.
pub fn commit_prefix(root: &RootId, commit_id: &CommitId) -> Vec<u8> {
    Enc::new()
        .raw(root.as_bytes())
        .raw(commit_id.as_bytes())
        .finish()
}

impl CommitConsumerKey {
    /// `root_id | commit_id | u8 kind | owner id`.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.raw(self.root.as_bytes())
            .raw(self.commit_id.as_bytes())
            .u8(self.owner.kind().to_u8());
        self.owner.put(&mut e);
        e.finish()
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] (unknown kind, wrong owner width, invalid
    /// tag name, trailing bytes).
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let root = RootId(d.b16()?);
        let commit_id = CommitId(d.b32()?);
        let kind = CommitConsumerKind::from_u8(d.u8()?)?;
        let owner = ConsumerOwner::get(kind, &mut d)?;
        d.finish()?;
        Ok(CommitConsumerKey {
            root,
            commit_id,
            owner,
        })
    }
}

/// The CommitConsumer value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitConsumer {
    /// The commit's consumer_epoch after this consumer was added.
    pub consumer_epoch_at_add: u64,
    /// Commit version that added the consumer.
    pub created_version: u64,
}

impl CommitConsumer {
    /// Encodes the value (format version 1).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .u64(self.consumer_epoch_at_add)
            .u64(self.created_version)
            .finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let v = CommitConsumer {
            consumer_epoch_at_add: d.u64()?,
            created_version: d.u64()?,
        };
        d.finish()?;
        Ok(v)
    }
}
