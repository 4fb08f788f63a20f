//! Commit discovery for `workbench_find` (docs/workbench.md "find"): pages over the root's
//! `Visible` workbenches at one read version with their commit state.
//!
//! One page is one bounded WorkspaceCurrent prefix scan (key order: `u32 len | id`, so shorter
//! ids first) plus, per visible workbench, one WorkbenchCommitHead point read, one PathCurrent
//! point read of `metadata/run_manifest.json` and, when a head exists, one Commit point read.
//! Staging and retired incarnations are skipped. Matching the run-manifest bytes (a literal,
//! ASCII case-insensitive substring) is the facade's job: `meta` never reads object bytes.

use crate::codec::{
    path_current, workspace_current, Commit, PathEntry, WorkbenchCommitHead,
    WorkbenchCommitHeadKey, WorkspaceCurrent, WorkspaceCurrentKey,
};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::WorkspaceIncarnationId;
use crate::ops::commit::RUN_MANIFEST_PATH;
use crate::path::normalize;
use crate::shard::MetaShard;
use crate::store::{ScanItem, ScanSpec, Snapshot, TxnStore, MAX_SCAN_ITEMS};

/// One visible workbench with its commit state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindCandidate {
    /// Stable workbench id.
    pub workbench_id: String,
    /// Visible incarnation.
    pub incarnation: WorkspaceIncarnationId,
    /// Current commit head (`None`: never committed).
    pub head: Option<WorkbenchCommitHead>,
    /// The sealed head Commit record.
    pub commit: Option<Commit>,
    /// PathCurrent of `metadata/run_manifest.json`, if published.
    pub manifest: Option<PathEntry>,
}

/// One page of candidates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FindPage {
    /// The read version every candidate reflects.
    pub read_version: u64,
    /// Visible workbenches in key order.
    pub candidates: Vec<FindCandidate>,
    /// True when more workbenches follow the last candidate.
    pub more: bool,
}

/// Up to `limit` (1..=255) visible workbenches strictly after `after` (a workbench id) at
/// `read_version` (`None`: the current version).
///
/// Errors: [`Error::InvalidArgument`] for `limit == 0` or an invalid `after`;
/// [`Error::Storage`] with `HistoryPruned` when `read_version` is no longer readable; codec and
/// storage errors.
pub fn find_page(
    shard: &MetaShard,
    read_version: Option<u64>,
    after: Option<&str>,
    limit: usize,
) -> Result<FindPage> {
    if limit == 0 {
        return Err(Error::invalid("find limit must be at least 1"));
    }
    let store = &shard.inner.store;
    let snap = match read_version {
        None => store.snapshot(),
        Some(v) => store.snapshot_at(v)?,
    };
    let root = shard.root_id();
    let live = crate::read::Liveness::new(&snap, shard.wall_unix_ms());
    if let Some(a) = after {
        crate::ids::validate_workbench_id(a)?;
    }
    let manifest_path = normalize(RUN_MANIFEST_PATH)?;
    let limit = limit.min(MAX_SCAN_ITEMS - 1);
    let mut marker = after.map(|a| workspace_current::key(&root, a));
    let mut candidates = Vec::new();
    loop {
        let spec = ScanSpec {
            prefix: root.as_bytes().to_vec(),
            start_after: marker.clone(),
            delimiter: None,
            limit: MAX_SCAN_ITEMS,
        };
        let batch = snap.scan(Family::WorkspaceCurrent, &spec)?;
        let exhausted = batch.len() < spec.limit;
        for item in batch {
            let ScanItem::Row { key, value } = item else {
                continue;
            };
            marker = Some(key.clone());
            let ws = WorkspaceCurrent::decode(&value)?;
            if !live.live(&ws)? {
                continue;
            }
            if candidates.len() == limit {
                return Ok(FindPage {
                    read_version: snap.version(),
                    candidates,
                    more: true,
                });
            }
            let id = WorkspaceCurrentKey::decode(&key)?.workbench_id;
            let inc = ws.incarnation;
            let head = snap
                .get(
                    Family::WorkbenchCommitHead,
                    &WorkbenchCommitHeadKey {
                        root,
                        incarnation: inc,
                    }
                    .encode(),
                )?
                .map(|b| WorkbenchCommitHead::decode(&b))
                .transpose()?;
            let commit = match &head {
                None => None,
                Some(h) => snap
                    .get(
                        Family::Commit,
                        &crate::codec::commit::CommitKey {
                            root,
                            commit_id: h.commit_id,
                        }
                        .encode(),
                    )?
                    .map(|b| Commit::decode(&b))
                    .transpose()?,
            };
            let manifest = snap
                .get(
                    Family::PathCurrent,
                    &path_current::key(&root, &inc, &manifest_path),
                )?
                .map(|b| PathEntry::decode(&b))
                .transpose()?;
            candidates.push(FindCandidate {
                workbench_id: id,
                incarnation: inc,
                head,
                commit,
                manifest,
            });
        }
        if exhausted {
            return Ok(FindPage {
                read_version: snap.version(),
                candidates,
                more: false,
            });
        }
    }
}
