//! The change feed in the SDK (docs/metadata-format.md, ReadChanges; see [`meta::ops::changes`]).
//!
//! [`Client::changes`] iterates the visible ChangeEvents of the root (or of one workbench with
//! [`Client::workbench_changes`]) in `(commit_version, event_sequence)` order, strictly after an
//! opaque cursor. Every item carries the cursor that resumes right after it, so a consumer that
//! stores the cursor of the last item it processed resumes without gaps or duplicates, also
//! across process restarts. The iterator ends when it has caught up with the store; calling
//! [`Changes::poll`] (or iterating again) later picks up newer events (`--follow`).

use std::collections::VecDeque;

use meta::ops::changes::{read_changes, ChangeCursor, ChangeRecord, ChangeScope};

use crate::client::Client;
use crate::error::{Error, Result};

/// Events fetched per metadata call.
const PAGE: usize = 256;

/// One visible change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeItem {
    /// Opaque cursor resuming right after this event (bound to the store and the feed scope).
    pub cursor: String,
    /// Commit version of the emitting command.
    pub commit_version: u64,
    /// Sequence within that command.
    pub event_sequence: u32,
    /// Stable workbench id.
    pub workbench_id: String,
    /// Event kind in snake case: `workspace_created`, `artifact_published`,
    /// `artifact_appended`, `artifact_removed`, `artifact_moved`, `snapshot_created`, `snapshot_renewed`, `snapshot_retired`,
    /// `snapshot_reaped`, … (one per ChangeKind).
    pub kind: String,
    /// Workbench-relative path of artifact events.
    pub path: Option<String>,
    /// Path generation before the change (artifact events).
    pub before_generation: Option<u64>,
    /// Path generation after the change (artifact events).
    pub after_generation: Option<u64>,
    /// Snapshot id of snapshot events.
    pub snapshot_id: Option<u64>,
    /// The source path of an `artifact_moved` event (`path` is the destination).
    pub moved_from: Option<String>,
    /// The generation the source path had when it was moved (`artifact_moved` only).
    pub moved_from_generation: Option<u64>,
}

/// Snake-case name of a ChangeKind (`SnapshotCreated` → `snapshot_created`).
pub fn kind_name(kind: meta::ChangeKind) -> String {
    let debug = format!("{kind:?}");
    let mut out = String::with_capacity(debug.len() + 4);
    for (i, c) in debug.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// An iterator over visible changes (see the module docs). Yields `Err` once and then ends if
/// the store fails.
#[derive(Debug)]
pub struct Changes {
    client: Client,
    scope: ChangeScope,
    position: Option<ChangeCursor>,
    buffer: VecDeque<ChangeRecord>,
    caught_up: bool,
    failed: bool,
}

/// A caller-input refusal from meta as the SDK's [`Error::InvalidArgument`], keeping meta's
/// own message (without repeating its "invalid argument" prefix).
fn invalid_argument(e: meta::Error) -> Error {
    match e {
        meta::Error::InvalidArgument(msg) => Error::InvalidArgument(msg),
        other => Error::InvalidArgument(other.to_string()),
    }
}

impl Changes {
    /// The opaque cursor after the last item yielded (or the starting cursor; `None` from the
    /// beginning of the feed when nothing was read).
    pub fn cursor(&self) -> Option<String> {
        self.position
            .map(|c| c.encode(&self.client.meta().root_id(), &self.scope))
    }

    /// Fetches newer events if the iterator had caught up; returns how many are buffered.
    ///
    /// Errors: metadata/storage errors.
    pub fn poll(&mut self) -> Result<usize> {
        if self.buffer.is_empty() {
            self.fetch()?;
        }
        Ok(self.buffer.len())
    }

    fn fetch(&mut self) -> Result<()> {
        let page = read_changes(self.client.meta(), &self.scope, self.position, PAGE)?;
        self.caught_up = !page.more;
        if page.events.is_empty() {
            // Skip invisible rows for good.
            self.position = page.next.or(self.position);
        }
        self.buffer.extend(page.events);
        Ok(())
    }

    fn item(&self, r: &ChangeRecord) -> ChangeItem {
        let snapshot = matches!(
            r.event.kind,
            meta::ChangeKind::SnapshotCreated
                | meta::ChangeKind::SnapshotRenewed
                | meta::ChangeKind::SnapshotRetired
                | meta::ChangeKind::SnapshotReaped
        );
        ChangeItem {
            cursor: r
                .cursor()
                .encode(&self.client.meta().root_id(), &self.scope),
            commit_version: r.commit_version,
            event_sequence: r.event_sequence,
            workbench_id: r.event.workbench_id.clone(),
            kind: kind_name(r.event.kind),
            path: r.event.path.as_ref().map(|p| p.as_str().to_string()),
            before_generation: if snapshot {
                None
            } else {
                r.event.before_generation
            },
            after_generation: if snapshot {
                None
            } else {
                r.event.after_generation
            },
            snapshot_id: if snapshot {
                r.event.after_generation
            } else {
                None
            },
            moved_from: r
                .event
                .moved_from
                .as_ref()
                .map(|m| m.path.as_str().to_string()),
            moved_from_generation: r.event.moved_from.as_ref().map(|m| m.generation),
        }
    }
}

impl Iterator for Changes {
    type Item = Result<ChangeItem>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            if let Some(r) = self.buffer.pop_front() {
                self.position = Some(r.cursor());
                return Some(Ok(self.item(&r)));
            }
            if self.caught_up {
                // Caught up: end this pass; the next call to `next` polls again.
                self.caught_up = false;
                return None;
            }
            if let Err(e) = self.fetch() {
                self.failed = true;
                return Some(Err(e));
            }
            if self.buffer.is_empty() && self.caught_up {
                self.caught_up = false;
                return None;
            }
        }
    }
}

impl Client {
    /// The root-wide change feed strictly after `after` (an opaque cursor from
    /// [`ChangeItem::cursor`] or [`Changes::cursor`]; `None` = from the beginning).
    ///
    /// Errors: [`Error::InvalidArgument`] for a malformed or foreign cursor.
    pub fn changes(&self, after: Option<&str>) -> Result<Changes> {
        self.changes_in(ChangeScope::Root, after)
    }

    /// The change feed of one workbench id (see [`Client::changes`]).
    ///
    /// Errors: [`Error::InvalidArgument`] for an invalid id or a malformed/foreign cursor.
    pub fn workbench_changes(&self, workbench_id: &str, after: Option<&str>) -> Result<Changes> {
        meta::validate_workbench_id(workbench_id).map_err(invalid_argument)?;
        self.changes_in(ChangeScope::Workbench(workbench_id.to_string()), after)
    }

    fn changes_in(&self, scope: ChangeScope, after: Option<&str>) -> Result<Changes> {
        let position = after
            .map(|s| ChangeCursor::decode(s, &self.meta().root_id(), &scope))
            .transpose()
            .map_err(invalid_argument)?;
        if let Some(p) = position {
            if p.commit_version > self.meta().version()? {
                return Err(Error::InvalidArgument(
                    "the change cursor is newer than this store".into(),
                ));
            }
        }
        Ok(Changes {
            client: self.clone(),
            scope,
            position,
            buffer: VecDeque::new(),
            caught_up: false,
            failed: false,
        })
    }
}
