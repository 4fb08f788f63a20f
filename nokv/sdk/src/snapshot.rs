//! Leased snapshots in the SDK (docs/metadata-format.md, "Snapshot Lifecycle And History Holds").
//!
//! A snapshot freezes one workbench at one read version: [`Client::create_snapshot`] writes the
//! SnapshotRef, the optional alias and the HistoryHold in one metadata command; frozen reads go
//! through [`Client::snapshot_reader`] (holt `view_at` at the snapshot's read version). Leases
//! run on the shard's persisted lease clock, fed by the client's injectable wall clock
//! ([`crate::client::ClientOptions::clock`]).
//!
//! The reaper claims expired snapshots after the skew grace and lets the history floor advance.
//! It runs at every [`Client::open_with`] (best effort), on a timer in long-running processes
//! ([`Client::start_reaper`]), and on demand ([`Client::reap_snapshots`], `nokv snapshot reap`).
//!
//! Errors are the metadata layer's, wrapped in [`crate::error::Error::Meta`]:
//! `SnapshotNotFound`, `SnapshotExpired` (expired, retired or reaped), `SnapshotLifecycle`
//! (extend-only renewal, renewing a retired snapshot, no commit head), `ForkRetentionActive`.

use std::time::Duration;

use meta::ops::snapshot::{
    self as ops, CreateSnapshotRequest, ReapReport, RenewSnapshotRequest, RetireSnapshotRequest,
    SnapshotInfo, SnapshotSelector,
};
use meta::{Reader, RequestId};

use crate::client::Client;
use crate::error::{Error, Result};

pub use meta::ops::lease_clock::{ManualClock, SystemWallClock, WallClock};
pub use meta::ops::snapshot::{SnapshotPolicy, SnapshotStatus, DAY_MS};

/// Options of one snapshot mint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotOptions {
    /// Optional alias (UTF-8 without NUL, 1..=128 bytes); minting it again moves it to the newest
    /// snapshot.
    pub name: Option<String>,
    /// Lease length in ms (1 ms ..= 90 days; default 7 days).
    pub ttl_ms: u64,
    /// Canonical annotation bytes (the facade stores `{reason, metadata}`; ≤ 4096 bytes).
    pub annotation: Vec<u8>,
    /// Refuse unless the workbench has a commit head (the Workbench facade's rule).
    pub require_commit: bool,
}

impl Default for SnapshotOptions {
    fn default() -> Self {
        SnapshotOptions {
            name: None,
            ttl_ms: 7 * DAY_MS,
            annotation: b"{}".to_vec(),
            require_commit: false,
        }
    }
}

/// Parses a selector: all digits → numeric id, else an alias.
///
/// Errors: [`Error::InvalidArgument`] for an empty or invalid alias.
pub fn parse_selector(s: &str) -> Result<SnapshotSelector> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(id) = s.parse::<u64>() {
            return Ok(SnapshotSelector::Id(meta::ids::SnapshotId(id)));
        }
    }
    name_selector(s)
}

/// A by-name selector. Errors: [`Error::InvalidArgument`] for an invalid alias.
pub fn name_selector(name: &str) -> Result<SnapshotSelector> {
    meta::ids::AliasName::new(name)
        .map(SnapshotSelector::Name)
        .map_err(|e| Error::InvalidArgument(e.to_string()))
}

/// Stops and joins the background reaper thread when dropped (see [`Client::start_reaper`]).
#[derive(Debug)]
pub struct ReaperHandle {
    task: crate::periodic::Periodic,
}

impl ReaperHandle {
    /// Stops the reaper and waits for its thread (at most one pass plus one poll interval).
    pub fn stop(mut self) {
        self.task.shutdown();
    }
}

impl Client {
    fn policy(&self) -> SnapshotPolicy {
        *self.snapshot_policy()
    }

    /// Mints a leased snapshot of a visible workbench at the current read version.
    ///
    /// Errors: [`Error::WorkbenchNotFound`]; [`Error::InvalidArgument`] (alias, ttl,
    /// annotation); `Meta(SnapshotLifecycle)` with `require_commit` and no commit head.
    pub fn create_snapshot(
        &self,
        workbench_id: &str,
        options: &SnapshotOptions,
    ) -> Result<SnapshotInfo> {
        let alias = options
            .name
            .as_deref()
            .map(meta::ids::AliasName::new)
            .transpose()
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let req = CreateSnapshotRequest {
            request_id: RequestId::random()?,
            workbench_id: workbench_id.to_string(),
            alias,
            ttl_ms: options.ttl_ms,
            annotation: options.annotation.clone(),
            require_commit_head: options.require_commit,
        };
        let receipt = ops::create(self.meta(), &req, self.now_unix_ms(), &self.policy())
            .map_err(invalid_to_sdk)?;
        self.snapshot(workbench_id, &SnapshotSelector::Id(receipt.snapshot_id))
    }

    /// Extends a snapshot's lease to `lease clock now + ttl_ms` (extend-only; revives an expired
    /// but unreaped snapshot).
    ///
    /// Errors: `Meta(SnapshotNotFound | SnapshotExpired | SnapshotLifecycle)`,
    /// [`Error::WorkbenchNotFound`], [`Error::InvalidArgument`].
    pub fn renew_snapshot(
        &self,
        workbench_id: &str,
        selector: &SnapshotSelector,
        ttl_ms: u64,
    ) -> Result<SnapshotInfo> {
        let req = RenewSnapshotRequest {
            request_id: RequestId::random()?,
            workbench_id: workbench_id.to_string(),
            selector: selector.clone(),
            ttl_ms,
        };
        let receipt = ops::renew(self.meta(), &req, self.now_unix_ms(), &self.policy())
            .map_err(invalid_to_sdk)?;
        self.snapshot(workbench_id, &SnapshotSelector::Id(receipt.snapshot_id))
    }

    /// Retires a snapshot and releases its history hold. Returns the snapshot and whether this
    /// call retired it (`false`: it already was).
    ///
    /// Errors: `Meta(SnapshotNotFound | SnapshotExpired | ForkRetentionActive)`,
    /// [`Error::WorkbenchNotFound`].
    pub fn retire_snapshot(
        &self,
        workbench_id: &str,
        selector: &SnapshotSelector,
    ) -> Result<(SnapshotInfo, bool)> {
        self.retire_snapshot_annotated(workbench_id, selector, None)
    }

    /// [`Client::retire_snapshot`] with a retire annotation (canonical JSON bytes, ≤ 4096; the
    /// facade stores `{metadata, reason}`). The first retirement's annotation is durable: a
    /// later call on a retired snapshot returns `false` and the stored record — the first
    /// annotation (or none), never this call's.
    ///
    /// Errors: those of [`Client::retire_snapshot`]; [`Error::InvalidArgument`] for an
    /// annotation over 4096 bytes.
    pub fn retire_snapshot_annotated(
        &self,
        workbench_id: &str,
        selector: &SnapshotSelector,
        annotation: Option<Vec<u8>>,
    ) -> Result<(SnapshotInfo, bool)> {
        let req = RetireSnapshotRequest {
            request_id: RequestId::random()?,
            workbench_id: workbench_id.to_string(),
            selector: selector.clone(),
            annotation,
        };
        let receipt = ops::retire(self.meta(), &req, self.now_unix_ms(), &self.policy())
            .map_err(invalid_to_sdk)?;
        let info = self.snapshot(workbench_id, &SnapshotSelector::Id(receipt.snapshot_id))?;
        Ok((info, receipt.changed))
    }

    /// One snapshot of a visible workbench with its derived status.
    ///
    /// Errors: `Meta(SnapshotNotFound)`, [`Error::WorkbenchNotFound`].
    pub fn snapshot(
        &self,
        workbench_id: &str,
        selector: &SnapshotSelector,
    ) -> Result<SnapshotInfo> {
        Ok(ops::get(
            self.meta(),
            workbench_id,
            selector,
            self.now_unix_ms(),
            &self.policy(),
        )?)
    }

    /// Every snapshot of a visible workbench, in snapshot-id order.
    ///
    /// Errors: [`Error::WorkbenchNotFound`].
    pub fn list_snapshots(&self, workbench_id: &str) -> Result<Vec<SnapshotInfo>> {
        Ok(ops::list(
            self.meta(),
            workbench_id,
            self.now_unix_ms(),
            &self.policy(),
        )?)
    }

    /// A frozen reader at an alive snapshot's read version.
    ///
    /// Errors: `Meta(SnapshotNotFound)`; `Meta(SnapshotExpired)` when expired, retired or reaped;
    /// [`Error::WorkbenchNotFound`].
    pub fn snapshot_reader(
        &self,
        workbench_id: &str,
        selector: &SnapshotSelector,
    ) -> Result<(SnapshotInfo, Reader)> {
        Ok(ops::open_at(
            self.meta(),
            workbench_id,
            selector,
            self.now_unix_ms(),
            &self.policy(),
        )?)
    }

    /// Runs one reaper pass now (claims expired snapshots past the skew grace, then maintains the
    /// history floor).
    ///
    /// Errors: `Meta(Fenced)` and storage errors.
    pub fn reap_snapshots(&self) -> Result<ReapReport> {
        Ok(ops::reap(self.meta(), self.now_unix_ms(), &self.policy())?)
    }

    /// Starts a background thread running [`Client::reap_snapshots`] every `every` (for
    /// long-running processes). Errors of a pass are ignored; the next pass retries. Dropping
    /// or [`ReaperHandle::stop`]ping the handle stops it.
    pub fn start_reaper(&self, every: Duration) -> ReaperHandle {
        let client = self.clone();
        ReaperHandle {
            task: crate::periodic::Periodic::spawn(
                "nokv-snapshot-reaper",
                every,
                false,
                move || {
                    let _ = client.reap_snapshots();
                },
            ),
        }
    }
}

/// Keeps argument errors as SDK argument errors.
fn invalid_to_sdk(e: meta::Error) -> Error {
    match e {
        meta::Error::InvalidArgument(msg) => Error::InvalidArgument(msg),
        other => other.into(),
    }
}
