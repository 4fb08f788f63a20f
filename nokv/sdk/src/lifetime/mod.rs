//! Object lifetime: path removal, garbage collection, explainable retention, fsck and index
//! repair, and the durable store settings they depend on (docs/metadata-format.md, "Ordinary put/replace/remove",
//! "Artifact Revisions And Strong References", "Garbage Collection State Machine"; docs/design.md,
//! "Safe Object Lifetime", "Discovery And Provenance").
//!
//! Every front door (CLI `nokv rm | gc | fsck | config`, the SDK, a long-running owner process)
//! calls these [`crate::client::Client`] methods; the state machines themselves live in `meta`
//! ([`meta::ops::remove`], [`meta::ops::gc`], [`meta::ops::fsck`], [`meta::ops::settings`]) and
//! only the provider calls (DELETE, HEAD, listing) are made here, through `objstore`.
//!
//! | method | what |
//! |--------|------|
//! | [`Client::remove`](crate::client::Client::remove) | remove one path (generation CAS optional, request-id idempotent) |
//! | [`Client::remove_prefix`](crate::client::Client::remove_prefix) | remove everything under a prefix in bounded batches |
//! | [`Client::gc`](crate::client::Client::gc) | one garbage-collection pass (dry run, budget) |
//! | [`Client::gc_explain`](crate::client::Client::gc_explain) / [`Client::gc_explain_revision`](crate::client::Client::gc_explain_revision) | why a revision is kept |
//! | [`Client::fsck`](crate::client::Client::fsck) | typed findings from authoritative rows, plus unowned provider objects |
//! | [`Client::repair_index`](crate::client::Client::repair_index) | rebuild SecondaryIndex rows from PathCurrent |
//! | [`Client::config_get`](crate::client::Client::config_get) / [`Client::config_set`](crate::client::Client::config_set) / [`Client::config_list`](crate::client::Client::config_list) | durable settings |
//! | [`Client::start_background_maintenance`](crate::client::Client::start_background_maintenance) | reaper + GC on a timer for long-running processes |
//! | [`Client::checkpoint_failures`](crate::client::Client::checkpoint_failures) | failed background checkpoints of the metadata engine (warned about, see `crate::health`) |
//!
//! Nothing here lists the bucket to decide what to delete: GC deletes exactly the objects the
//! ArtifactManifest rows of a claimed revision name, and fsck's provider listing is information
//! only.

mod fsck;
mod gc;
mod remove;
mod settings;

pub use fsck::FsckOutcome;
pub use gc::{MaintenanceHandle, MaintenanceReport};
pub(crate) use remove::map_path_error;
pub use remove::{PrefixRemoval, RemoveOptions, RemoveReceipt, RemovedPaths};

pub use meta::ops::fsck::{Finding, FindingKind, FsckReport, FsckStats, RepairReport};
pub use meta::ops::gc::explain::{ExpiryRelease, Explanation, Holder, Verdict};
pub use meta::ops::gc::{
    CollectedRevision, GcOptions, GcReport, HoldHolder, HoldInfo, InterruptedRevision,
    QuarantinedRevision, WaitReason, WaitingRevision,
};
pub use meta::ops::settings::{SetReceipt, SettingValue, HISTORY_RETENTION_VERSIONS};
