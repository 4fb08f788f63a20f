//! `Client::gc`, explain, and the background maintenance thread (see [`meta::ops::gc`]).
//!
//! The provider side of a pass: each DELETE goes to exactly the object key the manifest names,
//! after checking that the key is the revision-owned block key of that revision (a corrupt
//! manifest can never make GC delete another revision's block). Outcomes follow the publish
//! ledger's rules ([`crate::publication`]): a confirmed DELETE (or an already absent object) is
//! `Deleted`, [`objstore::Error::Ambiguous`] (sent, no answer) is `Quarantined` — never guessed —
//! and any other failure is `Failed` (the revision stays Deleting; the next pass resumes).
//! Reconciliation HEADs each object.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use meta::ops::gc::{
    self as ops, explain, Boundary, DeleteOutcome, GcOptions, GcReport, ObjectRemover, OwnedObject,
    ProbeOutcome,
};
use meta::ArtifactRevisionId;
use objstore::ObjectStore;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::periodic::Periodic;

/// Deletes and probes through the store's object provider.
struct ProviderRemover<'a> {
    objects: &'a dyn ObjectStore,
    logical_shard_id: [u8; 16],
    root_id: [u8; 16],
}

impl ProviderRemover<'_> {
    /// The object key must be exactly the block key of the owning revision (docs/design.md layout).
    fn check_key(&self, object: &OwnedObject) -> std::result::Result<(), String> {
        match objstore::parse_block_key(&object.key) {
            Ok(k)
                if k.logical_shard_id == self.logical_shard_id
                    && k.root_id == self.root_id
                    && k.artifact_revision_id == *object.revision.as_bytes()
                    && k.object_index == object.physical_object_index =>
            {
                Ok(())
            }
            _ => Err(format!(
                "the manifest's object key for block {} is not a block key of revision {}; nothing deleted",
                object.physical_object_index, object.revision
            )),
        }
    }
}

impl ObjectRemover for ProviderRemover<'_> {
    fn delete(&mut self, object: &OwnedObject) -> DeleteOutcome {
        if let Err(why) = self.check_key(object) {
            return DeleteOutcome::Failed(why);
        }
        match self.objects.delete(&object.key) {
            Ok(()) => DeleteOutcome::Deleted,
            Err(objstore::Error::Ambiguous { reason, .. }) => {
                DeleteOutcome::Quarantined(format!("ambiguous DELETE: {reason}"))
            }
            Err(e) => DeleteOutcome::Failed(Error::from(e).to_string()),
        }
    }

    fn probe(&mut self, object: &OwnedObject) -> ProbeOutcome {
        if let Err(why) = self.check_key(object) {
            return ProbeOutcome::Failed(why);
        }
        match self.objects.head(&object.key) {
            Ok(None) => ProbeOutcome::Absent,
            Ok(Some(_)) => ProbeOutcome::Present,
            Err(e) => ProbeOutcome::Failed(Error::from(e).to_string()),
        }
    }
}

/// Parses a 32-hex revision id. Errors: [`Error::InvalidArgument`].
pub(crate) fn parse_revision(hex: &str) -> Result<ArtifactRevisionId> {
    ArtifactRevisionId::from_hex(hex).map_err(|_| {
        Error::InvalidArgument(format!(
            "`{hex}` is not a revision id (32 lowercase hexadecimal characters)"
        ))
    })
}

impl Client {
    /// Runs one garbage-collection pass (docs/metadata-format.md, "Garbage Collection State Machine"; see
    /// [`meta::ops::gc`]): raises the history floor, claims zero-reference revisions the floor has
    /// passed (`Available -> Deleting` under the reference epoch), deletes their own objects,
    /// publishes them Deleted and releases their dependency sets; quarantines ambiguous DELETEs
    /// and reconciles earlier quarantines (HEAD each object). The report says what was deleted,
    /// what was quarantined and which candidates still wait (held by which snapshot, restore,
    /// build, retention window or in-flight publication). Cost O(candidates), never a listing.
    ///
    /// Processes built with the `fault-points` feature stop with SIGKILL after the phase boundary
    /// `gc-after-<boundary>` named by `NOKV_FAULT_POINT` (crash tests).
    ///
    /// Errors: `Error::Meta(Fenced)` when another owner opened the store; `Error::Meta` for
    /// storage failures and for corrupt rows of a revision being collected. Provider failures of
    /// one revision are reported in the [`GcReport`], not returned.
    pub fn gc(&self, options: &GcOptions) -> Result<GcReport> {
        let meta = self.meta();
        let mut remover = ProviderRemover {
            objects: self.objects().as_ref(),
            logical_shard_id: *meta.logical_shard_id().as_bytes(),
            root_id: *meta.root_id().as_bytes(),
        };
        let mut observe = |b: Boundary| {
            crate::fault::point(&format!("gc-after-{}", b.as_str()));
        };
        Ok(ops::run_pass(
            meta,
            self.snapshot_policy(),
            options,
            &mut remover,
            &mut observe,
        )?)
    }

    /// Why the revision at `path` of a visible workbench is kept: every holder (the path itself
    /// and other paths sharing it, commits with their heads/tags/leases/children, dependent
    /// appended revisions, history holds, the retention window, in-flight publications), or
    /// "collectable at the next pass".
    ///
    /// Errors: [`Error::InvalidPath`]; [`Error::WorkbenchNotFound`]; [`Error::NotFound`] (a
    /// removed path: ask by revision id with [`Client::gc_explain_revision`]).
    pub fn gc_explain(&self, workbench_id: &str, path: &str) -> Result<explain::Explanation> {
        let norm = Self::normalize(path)?;
        explain::explain_path(self.meta(), workbench_id, &norm, self.snapshot_policy()).map_err(
            |e| match e {
                meta::Error::PathNotFound => Error::NotFound {
                    path: norm.as_str().to_string(),
                },
                other => other.into(),
            },
        )
    }

    /// [`Client::gc_explain`] for a revision id (32 lowercase hex characters), also after its
    /// paths were removed or it was collected.
    ///
    /// Errors: [`Error::InvalidArgument`] for a malformed id; `Error::Meta(RevisionUnavailable)`
    /// when no such revision exists.
    pub fn gc_explain_revision(&self, revision: &str) -> Result<explain::Explanation> {
        let rev = parse_revision(revision)?;
        Ok(explain::explain_revision(
            self.meta(),
            &rev,
            self.snapshot_policy(),
        )?)
    }

    /// Starts the background maintenance of a long-running process (the snapshot reaper and a
    /// GC pass, in that order, every `every`, each pass first warning when the engine's failed
    /// background checkpoints rose, see [`Client::checkpoint_failures`]): the one entry point a
    /// server or other owner process calls. Errors of a pass are kept in [`MaintenanceHandle::last`] and the next pass
    /// retries. Dropping or [`MaintenanceHandle::stop`]ping the handle stops the thread after
    /// at most one pass plus one poll interval (≤ 50 ms).
    pub fn start_background_maintenance(&self, every: Duration) -> MaintenanceHandle {
        let last = Arc::new(Mutex::new(None));
        let passes = Arc::new(AtomicU64::new(0));
        let (slot, count) = (Arc::clone(&last), Arc::clone(&passes));
        let client = self.clone();
        let mut failures_reported = 0;
        let task = Periodic::spawn("nokv-maintenance", every, true, move || {
            failures_reported =
                crate::health::warn_if_checkpoint_failures_rose(client.meta(), failures_reported);
            let reap = client.reap_snapshots().map_err(|e| e.to_string());
            let gc = client.gc(&GcOptions::default()).map_err(|e| e.to_string());
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(MaintenanceReport { reap, gc });
            count.fetch_add(1, Ordering::SeqCst);
        });
        MaintenanceHandle { last, passes, task }
    }
}

/// The outcome of one background maintenance pass.
#[derive(Debug, Clone)]
pub struct MaintenanceReport {
    /// The reaper pass (message of its error).
    pub reap: std::result::Result<meta::ops::snapshot::ReapReport, String>,
    /// The GC pass (message of its error).
    pub gc: std::result::Result<GcReport, String>,
}

/// Stops and joins the background maintenance thread when dropped (see
/// [`Client::start_background_maintenance`]).
#[derive(Debug)]
pub struct MaintenanceHandle {
    last: Arc<Mutex<Option<MaintenanceReport>>>,
    passes: Arc<AtomicU64>,
    task: Periodic,
}

impl MaintenanceHandle {
    /// The last completed pass, if any.
    pub fn last(&self) -> Option<MaintenanceReport> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Number of completed passes.
    pub fn passes(&self) -> u64 {
        self.passes.load(Ordering::SeqCst)
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.task.shutdown();
    }
}
