//! Typed cursors and terminal results shared by the Commit and Operation records.
//!
//! Encodings (part of the enclosing record's value; no own version):
//!
//! - [`SetCursor<T>`]: `u8 complete (0/1) | option(anchor)` — the last released/written element
//!   of one ordered set (`None` = nothing processed yet) and whether the set is finished. Anchors:
//!   a path is a u32-length UTF-8 string (revalidated by the normalizer), an
//!   [`ArtifactRevisionId`] 16 raw bytes, a [`CommitId`] 32 raw bytes.
//! - [`ClosureCursor`]: `SetCursor<NormPath> members | SetCursor<ArtifactRevisionId> revisions |
//!   SetCursor<CommitId> parents` — progress over the three sets a commit closure owns
//!   (CommitMember paths, unique Commit RevisionRefs, outbound ChildCommit consumers), in that
//!   order. Used for commit construction, build cleanup and commit retirement.
//! - [`OperationResult<T>`]: `u8 0` pending | `u8 1` + success payload | `u8 2` +
//!   [`TerminalError`] (`str code | str message`). The tag is codec framing, like an option tag;
//!   any other tag fails closed.

use super::wire::{Dec, Enc};
use crate::error::Result;
use crate::ids::{ArtifactRevisionId, CommitId};
use crate::path::NormPath;

/// Progress over one ordered set: the last processed element and whether the set is finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetCursor<T> {
    /// Last processed element (`None`: nothing processed yet).
    pub after: Option<T>,
    /// Whether every element of the set has been processed.
    pub complete: bool,
}

impl<T> Default for SetCursor<T> {
    fn default() -> Self {
        SetCursor {
            after: None,
            complete: false,
        }
    }
}

macro_rules! set_cursor_codec {
    ($t:ty, |$e:ident, $a:ident| $put:expr, |$d:ident| $get:expr) => {
        impl SetCursor<$t> {
            pub(crate) fn put(&self, $e: &mut Enc) {
                $e.bool(self.complete);
                match &self.after {
                    None => {
                        $e.u8(0);
                    }
                    Some($a) => {
                        $e.u8(1);
                        $put;
                    }
                }
            }

            pub(crate) fn get($d: &mut Dec<'_>) -> Result<Self> {
                let complete = $d.bool()?;
                let after = if $d.opt_tag()? { Some($get) } else { None };
                Ok(SetCursor { after, complete })
            }
        }
    };
}

set_cursor_codec!(NormPath, |e, a| e.norm_path(a), |d| d.norm_path()?);
set_cursor_codec!(ArtifactRevisionId, |e, a| e.raw(a.as_bytes()), |d| {
    ArtifactRevisionId(d.b16()?)
});
set_cursor_codec!(CommitId, |e, a| e.raw(a.as_bytes()), |d| CommitId(d.b32()?));

/// Progress over the three sets of one commit closure (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClosureCursor {
    /// CommitMember rows, in canonical path order.
    pub members: SetCursor<NormPath>,
    /// Unique `RevisionRef(Commit, commit_id, revision)` rows, in revision-id order.
    pub revisions: SetCursor<ArtifactRevisionId>,
    /// Outbound `CommitConsumer(parent, ChildCommit, child)` rows, in parent-id order.
    pub parents: SetCursor<CommitId>,
}

impl ClosureCursor {
    pub(crate) fn put(&self, e: &mut Enc) {
        self.members.put(e);
        self.revisions.put(e);
        self.parents.put(e);
    }

    pub(crate) fn get(d: &mut Dec<'_>) -> Result<Self> {
        Ok(ClosureCursor {
            members: SetCursor::<NormPath>::get(d)?,
            revisions: SetCursor::<ArtifactRevisionId>::get(d)?,
            parents: SetCursor::<CommitId>::get(d)?,
        })
    }
}

/// A terminal failure recorded on an operation so exact retries return the same error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalError {
    /// Stable Workbench error code (e.g. `"WorkbenchCommitConflict"`).
    pub code: String,
    /// Human-readable message (no storage keys, object keys or host paths).
    pub message: String,
}

/// The result slot of an operation record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperationResult<T> {
    /// Not terminal yet.
    Pending,
    /// Terminal success with its deterministic payload.
    Succeeded(T),
    /// Terminal failure.
    Failed(TerminalError),
}

impl<T> OperationResult<T> {
    pub(crate) fn put(&self, e: &mut Enc, payload: impl FnOnce(&T, &mut Enc)) {
        match self {
            OperationResult::Pending => {
                e.u8(0);
            }
            OperationResult::Succeeded(v) => {
                e.u8(1);
                payload(v, e);
            }
            OperationResult::Failed(t) => {
                e.u8(2).str(&t.code).str(&t.message);
            }
        }
    }

    pub(crate) fn get<'a>(
        d: &mut Dec<'a>,
        payload: impl FnOnce(&mut Dec<'a>) -> Result<T>,
    ) -> Result<Self> {
        match d.u8()? {
            0 => Ok(OperationResult::Pending),
            1 => Ok(OperationResult::Succeeded(payload(d)?)),
            2 => Ok(OperationResult::Failed(TerminalError {
                code: d.string()?,
                message: d.string()?,
            })),
            t => Err(d.err(format!("unknown operation result tag {t}"))),
        }
    }
}
