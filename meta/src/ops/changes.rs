//! ReadChanges: the change feed over ChangeEvent rows (docs/metadata-format.md, the ReadChanges paragraphs after
//! the History family, and "Namespace And Workspace Visibility").
//!
//! - **Position.** `(commit_version, event_sequence)` is an append-only log position: every
//!   metadata command writes its events at `root | commit_version | sequence` in the same holt
//!   batch as the mutation, so an event is readable exactly when its commit is.
//! - **Cursor.** [`ChangeCursor`] is "strictly after this position"; a version-only cursor
//!   (`event_sequence = None`) excludes every sequence of that commit. Its opaque form
//!   ([`ChangeCursor::encode`]) is bound to the root and the query scope (a digest, so no root id
//!   leaks) and may resume against any later root read version. A cursor newer than the root's
//!   current version fails closed ([`Error::InvalidArgument`]).
//! - **Visibility.** Each event carries its stable workbench id and incarnation. Its visibility
//!   is evaluated at the event's own commit version: one point read of that workbench's
//!   WorkspaceCurrent marker at `view_at(commit_version)` must be `Visible` with the event's
//!   incarnation, so staging incarnations never leak. Repeated events of one workbench in one
//!   commit share the result. When the history at that version has been pruned (the history floor
//!   passed it), the marker at the feed's read version decides instead — exact, because `Visible`
//!   is terminal, incarnations are never reused and staging produces no events.
//! - **Scope.** Root-wide, or one workbench (filtered on the embedded id after the root-wide
//!   seek).
//! - **Bounds.** One call returns at most `limit` (≤ [`MAX_PAGE_EVENTS`]) events, reads at most
//!   [`MAX_SCANNED_EVENTS`] rows, and stops after one visible lookahead event to report `more`.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::codec::{
    change_event, workspace_current, ChangeEvent, WorkspaceCurrent, WorkspaceState,
};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{validate_workbench_id, RootId, WorkspaceIncarnationId};
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, Snapshot, TxnStore, MAX_SCAN_ITEMS};

/// Largest page one call returns.
pub const MAX_PAGE_EVENTS: usize = 1000;
/// Most ChangeEvent rows one call reads (visible or not).
pub const MAX_SCANNED_EVENTS: usize = 16 * 1024;
/// Opaque cursor format tag.
const CURSOR_VERSION: u8 = 1;

/// Which events a feed returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeScope {
    /// Every visible event of the root.
    Root,
    /// Visible events of one workbench id.
    Workbench(String),
}

/// A feed position: the feed resumes strictly after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ChangeCursor {
    /// Commit version of the position.
    pub commit_version: u64,
    /// Sequence within that commit; `None` excludes every sequence of the commit.
    pub event_sequence: Option<u32>,
}

fn scope_digest(root: &RootId, scope: &ChangeScope) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(b"nokv.changes.cursor.v1\0");
    h.update(root.as_bytes());
    match scope {
        ChangeScope::Root => h.update([0u8]),
        ChangeScope::Workbench(id) => {
            h.update([1u8]);
            h.update((id.len() as u32).to_be_bytes());
            h.update(id.as_bytes());
        }
    }
    let d: [u8; 32] = h.finalize().into();
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

impl ChangeCursor {
    /// The opaque form bound to `root` and `scope`: lowercase hex of
    /// `u8 1 | scope_digest[16] | u64 commit_version | u8 has_sequence | u32 sequence`.
    pub fn encode(&self, root: &RootId, scope: &ChangeScope) -> String {
        let mut b = Vec::with_capacity(30);
        b.push(CURSOR_VERSION);
        b.extend_from_slice(&scope_digest(root, scope));
        b.extend_from_slice(&self.commit_version.to_be_bytes());
        b.push(u8::from(self.event_sequence.is_some()));
        b.extend_from_slice(&self.event_sequence.unwrap_or(0).to_be_bytes());
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// Decodes an opaque cursor and checks its binding to `root` and `scope`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a malformed, foreign-root or foreign-scope cursor.
    pub fn decode(s: &str, root: &RootId, scope: &ChangeScope) -> Result<ChangeCursor> {
        let bad = || Error::invalid("the change cursor is malformed or belongs to another feed");
        if s.len() != 60 || !s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(bad());
        }
        let mut b = [0u8; 30];
        for (i, chunk) in s.as_bytes().chunks(2).enumerate() {
            let hex = std::str::from_utf8(chunk).map_err(|_| bad())?;
            b[i] = u8::from_str_radix(hex, 16).map_err(|_| bad())?;
        }
        if b[0] != CURSOR_VERSION || b[1..17] != scope_digest(root, scope) {
            return Err(bad());
        }
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[17..25]);
        let mut q = [0u8; 4];
        q.copy_from_slice(&b[26..30]);
        let event_sequence = match b[25] {
            0 if q == [0; 4] => None,
            1 => Some(u32::from_be_bytes(q)),
            _ => return Err(bad()),
        };
        Ok(ChangeCursor {
            commit_version: u64::from_be_bytes(v),
            event_sequence,
        })
    }
}

/// One visible event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRecord {
    /// Commit version of the emitting command.
    pub commit_version: u64,
    /// Sequence within the command.
    pub event_sequence: u32,
    /// The event.
    pub event: ChangeEvent,
}

impl ChangeRecord {
    /// The position right after this event.
    pub fn cursor(&self) -> ChangeCursor {
        ChangeCursor {
            commit_version: self.commit_version,
            event_sequence: Some(self.event_sequence),
        }
    }
}

/// One page of the feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangePage {
    /// Visible events in `(commit_version, event_sequence)` order.
    pub events: Vec<ChangeRecord>,
    /// Where the next call resumes (after the last returned event, or after the last row scanned
    /// when the page ends on invisible rows; the incoming cursor when nothing was read).
    pub next: Option<ChangeCursor>,
    /// True when at least one more visible event (or unscanned row) follows `next`.
    pub more: bool,
    /// The root read version the page was read at.
    pub read_version: u64,
}

/// Reads up to `limit` visible events of `scope` strictly after `after` (see the module docs).
///
/// Errors: [`Error::InvalidArgument`] for `limit` outside 1..=[`MAX_PAGE_EVENTS`], an invalid
/// workbench id, or a cursor newer than the root's version; codec and storage errors.
pub fn read_changes(
    shard: &MetaShard,
    scope: &ChangeScope,
    after: Option<ChangeCursor>,
    limit: usize,
) -> Result<ChangePage> {
    if limit == 0 || limit > MAX_PAGE_EVENTS {
        return Err(Error::invalid(format!(
            "change page limit must be 1 ..= {MAX_PAGE_EVENTS}"
        )));
    }
    if let ChangeScope::Workbench(id) = scope {
        validate_workbench_id(id)?;
    }
    let root = shard.root_id();
    let snap = shard.inner.store.snapshot();
    let read_version = snap.version();
    if let Some(c) = after {
        if c.commit_version > read_version {
            return Err(Error::invalid(format!(
                "the change cursor is at commit version {} but the root is at {read_version}",
                c.commit_version
            )));
        }
    }
    let prefix = change_event::prefix(&root);
    let mut start_after = after.map(|c| match c.event_sequence {
        Some(seq) => change_event::key(&root, c.commit_version, seq),
        None => change_event::key(&root, c.commit_version, u32::MAX),
    });
    let mut events = Vec::new();
    let mut next = after;
    let mut more = false;
    let mut scanned = 0usize;
    let mut visible_cache: HashMap<(String, u64), Option<WorkspaceIncarnationId>> = HashMap::new();
    'scan: loop {
        let items = snap.scan(
            Family::ChangeEvent,
            &ScanSpec {
                prefix: prefix.clone(),
                start_after: start_after.clone(),
                delimiter: None,
                limit: MAX_SCAN_ITEMS,
            },
        )?;
        let n = items.len();
        for item in items {
            let ScanItem::Row { key, value } = item else {
                continue;
            };
            start_after = Some(key.clone());
            scanned += 1;
            let (commit_version, event_sequence) = change_event::decode_key(&key)?;
            let event = ChangeEvent::decode(&value)?;
            let in_scope = match scope {
                ChangeScope::Root => true,
                ChangeScope::Workbench(id) => *id == event.workbench_id,
            };
            let position = ChangeCursor {
                commit_version,
                event_sequence: Some(event_sequence),
            };
            if in_scope {
                let cache_key = (event.workbench_id.clone(), commit_version);
                let visible_inc = match visible_cache.get(&cache_key) {
                    Some(v) => *v,
                    None => {
                        let v = visible_incarnation(
                            shard,
                            &snap,
                            &root,
                            &event.workbench_id,
                            commit_version,
                        )?;
                        visible_cache.insert(cache_key, v);
                        v
                    }
                };
                if visible_inc == Some(event.incarnation) {
                    if events.len() == limit {
                        // The visible lookahead: stop before it.
                        more = true;
                        break 'scan;
                    }
                    events.push(ChangeRecord {
                        commit_version,
                        event_sequence,
                        event,
                    });
                    next = Some(position);
                    continue;
                }
            }
            if events.len() < limit {
                // Invisible or out-of-scope rows before the page fills are skipped for good.
                next = Some(position);
            }
            if scanned >= MAX_SCANNED_EVENTS {
                more = true;
                break 'scan;
            }
        }
        if n < MAX_SCAN_ITEMS {
            break;
        }
    }
    Ok(ChangePage {
        events,
        next,
        more,
        read_version,
    })
}

/// The incarnation under which `workbench_id` was `Visible` at `version` (`None` when it was
/// absent or not visible), read at `view_at(version)`; falls back to the marker at `snap` when
/// that history was pruned (see the module docs).
fn visible_incarnation<S: Snapshot>(
    shard: &MetaShard,
    snap: &S,
    root: &RootId,
    workbench_id: &str,
    version: u64,
) -> Result<Option<WorkspaceIncarnationId>> {
    if validate_workbench_id(workbench_id).is_err() {
        return Ok(None);
    }
    let key = workspace_current::key(root, workbench_id);
    let marker = match shard.inner.store.snapshot_at(version) {
        Ok(at) => at.get(Family::WorkspaceCurrent, &key)?,
        Err(Error::Storage(holt::Error::HistoryPruned { .. })) => {
            snap.get(Family::WorkspaceCurrent, &key)?
        }
        Err(e) => return Err(e),
    };
    Ok(match marker {
        None => None,
        Some(b) => {
            let ws = WorkspaceCurrent::decode(&b)?;
            (ws.state == WorkspaceState::Visible).then_some(ws.incarnation)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_and_is_bound_to_root_and_scope() {
        let root = RootId([7; 16]);
        let scope = ChangeScope::Workbench("wb".into());
        for c in [
            ChangeCursor {
                commit_version: 42,
                event_sequence: Some(3),
            },
            ChangeCursor {
                commit_version: 9,
                event_sequence: None,
            },
        ] {
            let s = c.encode(&root, &scope);
            assert_eq!(ChangeCursor::decode(&s, &root, &scope).unwrap(), c);
            assert!(ChangeCursor::decode(&s, &RootId([8; 16]), &scope).is_err());
            assert!(ChangeCursor::decode(&s, &root, &ChangeScope::Root).is_err());
        }
        assert!(ChangeCursor::decode("zz", &root, &scope).is_err());
        let mut s = ChangeCursor {
            commit_version: 1,
            event_sequence: None,
        }
        .encode(&root, &scope);
        s.replace_range(50..52, "07");
        assert!(ChangeCursor::decode(&s, &root, &scope).is_err());
    }
}
