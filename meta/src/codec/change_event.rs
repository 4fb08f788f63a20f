//! ChangeEvent (docs/metadata-format.md, tag 0x10) — the append-only change feed.
//!
//! Key: `root_id | u64 commit_version | u32 event_sequence` (sequence from 0 within a command).
//! Value (format version 2): `u16 2 | str workbench_id | workspace_incarnation_id 16 |
//! u8 ChangeKind | option(str path) | option(u64 before_generation) |
//! option(u64 after_generation)`.
//!
//! ChangeKind discriminants (as docs/metadata-format.md fixes them):
//! `WorkspaceCreated=1, ArtifactPublished=2, ArtifactAppended=3, ArtifactRemoved=4`.
//! `ArtifactRemoved` is emitted by path removal ([`crate::ops::remove`]): `before_generation` is
//! the removed generation, `after_generation` is `None`.
//! `ArtifactMoved=5` is emitted by a path move ([`crate::ops::move_path`]): `path` is the
//! destination, `before_generation` the destination's replaced generation (`None`: created),
//! `after_generation` its new generation, and `moved_from` the source path with the generation
//! it had.
//!
//! Format version 3 (written only for an event with `moved_from`, i.e. `ArtifactMoved`) appends
//! `str from_path | u64 from_generation` to the version-2 fields. The encoder writes the lowest
//! version that holds the event, so every other event keeps its version-2 bytes; the decoder
//! accepts both and requires `moved_from` exactly for `ArtifactMoved`.
//!
//! Snapshot lifecycle kinds: `SnapshotCreated=16, SnapshotRenewed=17, SnapshotRetired=18,
//! SnapshotReaped=19`; their compact after projection `after_generation` carries the numeric
//! snapshot id (`path` and `before_generation` are `None`).

use super::wire::{durable_enum, Dec, Enc};
use crate::error::{Error, Result};
use crate::ids::{RootId, WorkspaceIncarnationId};
use crate::path::NormPath;

const FAMILY: &str = "change_event";
/// Value format version of every event without a move source.
pub const VALUE_VERSION: u16 = 2;
/// Value format version of an `ArtifactMoved` event (version 2 plus the move source).
pub const MOVED_VALUE_VERSION: u16 = 3;

durable_enum!(
    /// Typed change event kind (discriminants documented in the module docs).
    ChangeKind, "change_event" {
        /// A workbench became visible.
        WorkspaceCreated = 1,
        /// A whole-body create or replace publication.
        ArtifactPublished = 2,
        /// An append publication.
        ArtifactAppended = 3,
        /// A path removal (`before_generation` = removed generation).
        ArtifactRemoved = 4,
        /// A path move: `path` is the destination, `moved_from` the source.
        ArtifactMoved = 5,
        /// A leased snapshot was minted (`after_generation` = snapshot id).
        SnapshotCreated = 16,
        /// A leased snapshot's lease was extended (`after_generation` = snapshot id).
        SnapshotRenewed = 17,
        /// A leased snapshot was retired (`after_generation` = snapshot id).
        SnapshotRetired = 18,
        /// The reaper claimed an expired snapshot (`after_generation` = snapshot id).
        SnapshotReaped = 19,
    }
);

/// One change event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeEvent {
    /// Stable workbench id.
    pub workbench_id: String,
    /// Workspace incarnation the event belongs to.
    pub incarnation: WorkspaceIncarnationId,
    /// Event kind.
    pub kind: ChangeKind,
    /// Affected path, for artifact events.
    pub path: Option<NormPath>,
    /// Generation before the change (`None` when the path was absent).
    pub before_generation: Option<u64>,
    /// Generation after the change (`None` when the path became absent).
    pub after_generation: Option<u64>,
    /// The source of an `ArtifactMoved` event (`None` for every other kind).
    pub moved_from: Option<MovedFrom>,
}

/// Where a moved artifact came from: the source path (now absent) and its generation then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovedFrom {
    /// The source path.
    pub path: NormPath,
    /// The generation the source path had when it was moved.
    pub generation: u64,
}

/// `root_id` — the prefix of the root-wide feed.
pub fn prefix(root: &RootId) -> Vec<u8> {
    root.as_bytes().to_vec()
}

/// The ChangeEvent key.
pub fn key(root: &RootId, commit_version: u64, event_sequence: u32) -> Vec<u8> {
    Enc::new()
        .raw(root.as_bytes())
        .u64(commit_version)
        .u32(event_sequence)
        .finish()
}

/// The decoded ChangeEvent key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeEventKey {
    /// Root.
    pub root: RootId,
    /// Commit version of the emitting command.
    pub commit_version: u64,
    /// Sequence within the command (from 0).
    pub event_sequence: u32,
}

impl ChangeEventKey {
    /// `root_id | u64 commit_version | u32 event_sequence` (28 bytes).
    pub fn encode(&self) -> Vec<u8> {
        key(&self.root, self.commit_version, self.event_sequence)
    }

    /// Decodes a key. Errors: [`Error::Codec`] for any length other than 28.
    pub fn decode(k: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, k);
        let v = ChangeEventKey {
            root: RootId(d.b16()?),
            commit_version: d.u64()?,
            event_sequence: d.u32()?,
        };
        d.finish()?;
        Ok(v)
    }
}

/// Decodes `(commit_version, event_sequence)` from a full key. Errors: [`Error::Codec`].
pub fn decode_key(key: &[u8]) -> Result<(u64, u32)> {
    let rest = key
        .get(16..)
        .filter(|r| r.len() == 12)
        .ok_or_else(|| Error::codec(FAMILY, "key is not root | u64 | u32"))?;
    let mut d = Dec::new(FAMILY, rest);
    let v = d.u64()?;
    let s = d.u32()?;
    d.finish()?;
    Ok((v, s))
}

impl ChangeEvent {
    /// Encodes the value: format version 2, or 3 when `moved_from` is set.
    pub fn encode(&self) -> Vec<u8> {
        let version = if self.moved_from.is_some() {
            MOVED_VALUE_VERSION
        } else {
            VALUE_VERSION
        };
        let mut e = Enc::version(version);
        e.str(&self.workbench_id)
            .raw(self.incarnation.as_bytes())
            .u8(self.kind.to_u8())
            .opt_str(self.path.as_ref().map(|p| p.as_str()))
            .opt_u64(self.before_generation)
            .opt_u64(self.after_generation);
        if let Some(from) = &self.moved_from {
            e.str(from.path.as_str()).u64(from.generation);
        }
        e.finish()
    }

    /// Decodes the value (version 2 or 3); the embedded paths are revalidated by the shared
    /// normalizer.
    ///
    /// Errors: [`Error::Codec`] (also for a version-3 value of another kind than
    /// `ArtifactMoved`, or an `ArtifactMoved` value without its source).
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        let version = d.version_in(&[VALUE_VERSION, MOVED_VALUE_VERSION])?;
        let workbench_id = d.string()?;
        let incarnation = WorkspaceIncarnationId(d.b16()?);
        let kind = ChangeKind::from_u8(d.u8()?)?;
        let path = match d.opt_string()? {
            None => None,
            Some(s) => Some(
                crate::path::normalize_stored(&s).map_err(|e| d.err(format!("bad path: {e}")))?,
            ),
        };
        let before_generation = d.opt_u64()?;
        let after_generation = d.opt_u64()?;
        let moved_from = if version == MOVED_VALUE_VERSION {
            let s = d.string()?;
            let path = crate::path::normalize_stored(&s)
                .map_err(|e| d.err(format!("bad moved-from path: {e}")))?;
            Some(MovedFrom {
                path,
                generation: d.u64()?,
            })
        } else {
            None
        };
        if moved_from.is_some() != (kind == ChangeKind::ArtifactMoved) {
            return Err(d.err("a move source belongs exactly to ArtifactMoved events"));
        }
        d.finish()?;
        Ok(ChangeEvent {
            workbench_id,
            incarnation,
            kind,
            path,
            before_generation,
            after_generation,
            moved_from,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_event_golden_bytes_and_round_trip() {
        let e = ChangeEvent {
            workbench_id: "w".into(),
            incarnation: WorkspaceIncarnationId([1; 16]),
            kind: ChangeKind::WorkspaceCreated,
            path: None,
            before_generation: None,
            after_generation: None,
            moved_from: None,
        };
        let b = e.encode();
        let mut expected = vec![0, 2, 0, 0, 0, 1, b'w'];
        expected.extend_from_slice(&[1; 16]);
        expected.extend_from_slice(&[1, 0, 0, 0]);
        assert_eq!(b, expected);
        assert_eq!(ChangeEvent::decode(&b).unwrap(), e);
        let e2 = ChangeEvent {
            kind: ChangeKind::ArtifactPublished,
            path: Some(crate::path::normalize("a/b").unwrap()),
            before_generation: Some(3),
            after_generation: Some(4),
            ..e
        };
        assert_eq!(ChangeEvent::decode(&e2.encode()).unwrap(), e2);
        let mut bad = b.clone();
        bad[7 + 16] = 9;
        assert!(ChangeEvent::decode(&bad).is_err());
        let k = key(&RootId([0; 16]), 5, 2);
        assert_eq!(decode_key(&k).unwrap(), (5, 2));
        assert!(decode_key(&k[..27]).is_err());
    }

    #[test]
    fn moved_event_is_version_3_and_only_for_artifact_moved() {
        let e = ChangeEvent {
            workbench_id: "w".into(),
            incarnation: WorkspaceIncarnationId([1; 16]),
            kind: ChangeKind::ArtifactMoved,
            path: Some(crate::path::normalize("b").unwrap()),
            before_generation: None,
            after_generation: Some(9),
            moved_from: Some(MovedFrom {
                path: crate::path::normalize("a").unwrap(),
                generation: 4,
            }),
        };
        let b = e.encode();
        let mut expected = vec![0, 3, 0, 0, 0, 1, b'w'];
        expected.extend_from_slice(&[1; 16]);
        expected.extend_from_slice(&[5, 1, 0, 0, 0, 1, b'b', 0, 1]);
        expected.extend_from_slice(&9u64.to_be_bytes());
        expected.extend_from_slice(&[0, 0, 0, 1, b'a']);
        expected.extend_from_slice(&4u64.to_be_bytes());
        assert_eq!(b, expected);
        assert_eq!(ChangeEvent::decode(&b).unwrap(), e);
        for cut in 0..b.len() {
            assert!(ChangeEvent::decode(&b[..cut]).is_err(), "cut at {cut}");
        }
        // A version-3 value of another kind, and a version-2 ArtifactMoved, fail closed.
        let mut other_kind = b.clone();
        other_kind[7 + 16] = 2;
        assert!(ChangeEvent::decode(&other_kind).is_err());
        let without_source = ChangeEvent {
            moved_from: None,
            ..e.clone()
        };
        assert!(ChangeEvent::decode(&without_source.encode()).is_err());
        let mut v4 = b;
        v4[1] = 4;
        assert!(ChangeEvent::decode(&v4).is_err());
    }
}
