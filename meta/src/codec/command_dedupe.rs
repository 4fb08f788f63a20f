//! CommandDedupe (docs/metadata-format.md, tag 0x14) — request-id replay protection with the exact result.
//!
//! Key: `root_id | request_id`.
//! Value (format version 2): `u16 2 | command_digest 32 | bytes(encoded CommandResult) |
//! u64 commit_version | option(u64 recovery_lsn)`. `recovery_lsn` is `None` until the
//! RecoveryOutbox is written (not part of this slice).
//!
//! Encoded [`CommandResult`]: `u8 kind` then, per kind (discriminants chosen here):
//! - `1` WorkspaceCreated: `bytes(WorkspaceCurrent value)`;
//! - `2` Published: `u64 generation | u8 created (0/1) | option(u64 replaced_generation) |
//!   bytes(PathEntry value)`;
//! - `3` OperationRecorded: `u8 OperationKind | operation_id 16 | u8 phase` (the phase
//!   discriminant of the kind's phase enum, validated per kind).
//! - `4` Applied: `u64 value` — a single-command mutation whose only deterministic output is one
//!   number (e.g. a new tag generation);
//! - `5` Removed: `bytes(PathEntry value)` — the PathEntry a path removal deleted (its generation
//!   is the removed generation; see [`crate::ops::remove`]);
//! - `6` Moved: `u64 from_generation | option(u64 replaced_generation) | bytes(PathEntry value)`
//!   — a path move (see [`crate::ops::move_path`]): the generation the source had, the
//!   generation the destination had when it was replaced (`None`: created), and the PathEntry
//!   written at the destination;
//! - `16` SnapshotLifecycle: `u64 snapshot_id | bytes(SnapshotRef value)` — the SnapshotRef a
//!   snapshot command (create, renew, retire, reap, consumer attach/release) wrote.

use super::operation::{
    BuildCommitPhase, CommitRetirePhase, GcPhase, OperationKind, PublishPhase, ReservePhase,
    RestorePhase,
};
use super::path_current::PathEntry;
use super::snapshot_ref::SnapshotRef;
use super::wire::{Dec, Enc};
use super::workspace_current::WorkspaceCurrent;
use crate::error::Result;
use crate::ids::{OperationId, RequestId, RootId, SnapshotId};

const FAMILY: &str = "command_dedupe";
/// Value format version (binds the result to a recovery LSN).
pub const VALUE_VERSION: u16 = 2;

/// The deterministic result of a metadata command, stored for exact replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandResult {
    /// A workbench was created.
    WorkspaceCreated {
        /// The new marker.
        workspace: WorkspaceCurrent,
    },
    /// A body was published at a path.
    Published {
        /// New path generation (= the command's commit version).
        generation: u64,
        /// Whether the path was absent before.
        created: bool,
        /// Generation replaced, if the path existed.
        replaced_generation: Option<u64>,
        /// The new PathEntry.
        entry: PathEntry,
    },
    /// A durable operation row was created or advanced without publishing a path: publish
    /// ledger steps (Begin, staging, the Finalizing CAS, abort, cleanup) and each step of the
    /// multi-command operations (BuildCommit, CommitRetire, Restore).
    OperationRecorded {
        /// Operation kind.
        kind: OperationKind,
        /// Operation id.
        operation_id: OperationId,
        /// Phase discriminant after the command (the kind's phase enum).
        phase: u8,
    },
    /// A single-command mutation whose deterministic output is one number (e.g. a tag
    /// generation).
    Applied {
        /// The number.
        value: u64,
    },
    /// A path was removed (docs/metadata-format.md, "Ordinary put/replace/remove").
    Removed {
        /// The PathEntry the removal deleted.
        entry: PathEntry,
    },
    /// A path was moved to another path of the same workbench (docs/metadata-format.md, "Move
    /// One Path").
    Moved {
        /// The generation the source path had when it was moved.
        from_generation: u64,
        /// The generation the destination had when the move replaced it (`None`: created).
        replaced_generation: Option<u64>,
        /// The PathEntry written at the destination (same revision, new generation).
        entry: PathEntry,
    },
    /// A snapshot lifecycle command (docs/metadata-format.md, "Snapshot Lifecycle And History Holds") wrote
    /// this SnapshotRef value.
    SnapshotLifecycle {
        /// The snapshot (its numeric facade id).
        snapshot_id: SnapshotId,
        /// The SnapshotRef value after the command.
        snapshot: SnapshotRef,
    },
}

/// Checks that `phase` is a known discriminant of `kind`'s phase enum.
fn check_phase(kind: OperationKind, phase: u8) -> Result<()> {
    match kind {
        OperationKind::Publish => PublishPhase::from_u8(phase).map(|_| ()),
        OperationKind::BuildCommit => BuildCommitPhase::from_u8(phase).map(|_| ()),
        OperationKind::Restore => RestorePhase::from_u8(phase).map(|_| ()),
        OperationKind::CommitRetire => CommitRetirePhase::from_u8(phase).map(|_| ()),
        OperationKind::Gc => GcPhase::from_u8(phase).map(|_| ()),
        OperationKind::Reserve => ReservePhase::from_u8(phase).map(|_| ()),
    }
}

impl CommandResult {
    /// Encodes the result (see module docs).
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        match self {
            CommandResult::WorkspaceCreated { workspace } => {
                e.u8(1).bytes(&workspace.encode());
            }
            CommandResult::Published {
                generation,
                created,
                replaced_generation,
                entry,
            } => {
                e.u8(2)
                    .u64(*generation)
                    .u8(u8::from(*created))
                    .opt_u64(*replaced_generation)
                    .bytes(&entry.encode());
            }
            CommandResult::OperationRecorded {
                kind,
                operation_id,
                phase,
            } => {
                e.u8(3)
                    .u8(kind.to_u8())
                    .raw(operation_id.as_bytes())
                    .u8(*phase);
            }
            CommandResult::Applied { value } => {
                e.u8(4).u64(*value);
            }
            CommandResult::Removed { entry } => {
                e.u8(5).bytes(&entry.encode());
            }
            CommandResult::Moved {
                from_generation,
                replaced_generation,
                entry,
            } => {
                e.u8(6)
                    .u64(*from_generation)
                    .opt_u64(*replaced_generation)
                    .bytes(&entry.encode());
            }
            CommandResult::SnapshotLifecycle {
                snapshot_id,
                snapshot,
            } => {
                e.u8(16).u64(snapshot_id.get()).bytes(&snapshot.encode());
            }
        }
        e.finish()
    }

    /// Decodes a result. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        let r = match d.u8()? {
            1 => CommandResult::WorkspaceCreated {
                workspace: WorkspaceCurrent::decode(d.bytes()?)?,
            },
            2 => {
                let generation = d.u64()?;
                let created = match d.u8()? {
                    0 => false,
                    1 => true,
                    x => return Err(d.err(format!("bad bool {x}"))),
                };
                let replaced_generation = d.opt_u64()?;
                let entry = PathEntry::decode(d.bytes()?)?;
                CommandResult::Published {
                    generation,
                    created,
                    replaced_generation,
                    entry,
                }
            }
            3 => {
                let kind = OperationKind::from_u8(d.u8()?)?;
                let operation_id = OperationId(d.b16()?);
                let phase = d.u8()?;
                check_phase(kind, phase)?;
                CommandResult::OperationRecorded {
                    kind,
                    operation_id,
                    phase,
                }
            }
            4 => CommandResult::Applied { value: d.u64()? },
            5 => CommandResult::Removed {
                entry: PathEntry::decode(d.bytes()?)?,
            },
            6 => {
                let from_generation = d.u64()?;
                let replaced_generation = d.opt_u64()?;
                let entry = PathEntry::decode(d.bytes()?)?;
                CommandResult::Moved {
                    from_generation,
                    replaced_generation,
                    entry,
                }
            }
            16 => CommandResult::SnapshotLifecycle {
                snapshot_id: SnapshotId(d.u64()?),
                snapshot: SnapshotRef::decode(d.bytes()?)?,
            },
            k => return Err(d.err(format!("unknown command result kind {k}"))),
        };
        d.finish()?;
        Ok(r)
    }
}

/// The CommandDedupe value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandDedupe {
    /// SHA-256 over the command's canonical inputs.
    pub command_digest: [u8; 32],
    /// The exact deterministic result.
    pub result: CommandResult,
    /// Commit version that applied the command.
    pub commit_version: u64,
    /// Recovery LSN binding (None until the RecoveryOutbox is written).
    pub recovery_lsn: Option<u64>,
}

/// The CommandDedupe key.
pub fn key(root: &RootId, request: &RequestId) -> Vec<u8> {
    Enc::new()
        .raw(root.as_bytes())
        .raw(request.as_bytes())
        .finish()
}

/// The decoded CommandDedupe key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandDedupeKey {
    /// Root.
    pub root: RootId,
    /// Request id.
    pub request_id: RequestId,
}

impl CommandDedupeKey {
    /// `root_id | request_id` (32 bytes).
    pub fn encode(&self) -> Vec<u8> {
        key(&self.root, &self.request_id)
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] for any length other than 32.
    pub fn decode(k: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, k);
        let v = CommandDedupeKey {
            root: RootId(d.b16()?),
            request_id: RequestId(d.b16()?),
        };
        d.finish()?;
        Ok(v)
    }
}

impl CommandDedupe {
    /// Encodes the value (format version 2).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .raw(&self.command_digest)
            .bytes(&self.result.encode())
            .u64(self.commit_version)
            .opt_u64(self.recovery_lsn)
            .finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let command_digest = d.b32()?;
        let result = CommandResult::decode(d.bytes()?)?;
        let commit_version = d.u64()?;
        let recovery_lsn = d.opt_u64()?;
        d.finish()?;
        Ok(CommandDedupe {
            command_digest,
            result,
            commit_version,
            recovery_lsn,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::path_current::tests::sample;

    #[test]
    fn dedupe_round_trips_both_result_kinds() {
        let d = CommandDedupe {
            command_digest: [8; 32],
            result: CommandResult::Published {
                generation: 5,
                created: false,
                replaced_generation: Some(3),
                entry: sample(),
            },
            commit_version: 5,
            recovery_lsn: None,
        };
        let b = d.encode();
        assert_eq!(&b[..2], &[0, 2]);
        assert_eq!(CommandDedupe::decode(&b).unwrap(), d);
        let ws = CommandResult::WorkspaceCreated {
            workspace: WorkspaceCurrent {
                incarnation: crate::ids::WorkspaceIncarnationId([1; 16]),
                workspace_revision: 1,
                state: crate::codec::WorkspaceState::Visible,
                owning_operation: None,
                created_version: 1,
                modified_version: 1,
                expires_at_unix_ms: None,
            },
        };
        assert_eq!(CommandResult::decode(&ws.encode()).unwrap(), ws);
        let op = CommandResult::OperationRecorded {
            kind: OperationKind::Publish,
            operation_id: OperationId([4; 16]),
            phase: 2,
        };
        assert_eq!(CommandResult::decode(&op.encode()).unwrap(), op);
        let mut bad_phase = op.encode();
        *bad_phase.last_mut().unwrap() = 9;
        assert!(CommandResult::decode(&bad_phase).is_err());
        let removed = CommandResult::Removed { entry: sample() };
        let enc = removed.encode();
        assert_eq!(enc[0], 5);
        assert_eq!(CommandResult::decode(&enc).unwrap(), removed);
        assert!(CommandResult::decode(&enc[..enc.len() - 1]).is_err());
        let mut bad = ws.encode();
        bad[0] = 4;
        assert!(CommandResult::decode(&bad).is_err());
        assert!(CommandDedupe::decode(&b[..b.len() - 1]).is_err());
    }

    #[test]
    fn moved_result_golden_bytes_and_rejections() {
        let moved = CommandResult::Moved {
            from_generation: 7,
            replaced_generation: Some(4),
            entry: sample(),
        };
        let enc = moved.encode();
        let entry = sample().encode();
        let mut expected = vec![6];
        expected.extend_from_slice(&7u64.to_be_bytes());
        expected.push(1);
        expected.extend_from_slice(&4u64.to_be_bytes());
        expected.extend_from_slice(&(entry.len() as u32).to_be_bytes());
        expected.extend_from_slice(&entry);
        assert_eq!(enc, expected);
        assert_eq!(CommandResult::decode(&enc).unwrap(), moved);
        let created = CommandResult::Moved {
            from_generation: 7,
            replaced_generation: None,
            entry: sample(),
        };
        assert_eq!(created.encode()[9], 0);
        assert_eq!(CommandResult::decode(&created.encode()).unwrap(), created);
        for cut in 0..enc.len() {
            assert!(CommandResult::decode(&enc[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad_tag = enc.clone();
        bad_tag[9] = 2;
        assert!(CommandResult::decode(&bad_tag).is_err());
        let mut trailing = enc;
        trailing.push(0);
        assert!(CommandResult::decode(&trailing).is_err());
    }
}
