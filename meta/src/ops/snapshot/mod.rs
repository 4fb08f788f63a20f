//! Leased snapshots and history holds (docs/metadata-format.md, "Snapshot Lifecycle And History Holds";
//! families SnapshotRef, SnapshotAlias, HistoryHold).
//!
//! ## Lifecycle
//!
//! - **Create** — one [`crate::command::MetadataCommand`] at one read version `R` writes the
//!   SnapshotRef (`read_version = R`, `Active`, lease deadline on the persisted lease clock,
//!   consumer count/epoch 0), the optional SnapshotAlias (latest mint wins: `alias_generation`
//!   +1, terminal projection cleared) and the `Active` HistoryHold(Snapshot, id) at `R`, plus a
//!   `SnapshotCreated` ChangeEvent. The snapshot id is the command's commit version `R + 1`:
//!   dense, never reused within the root, and exactly the numeric facade id.
//! - **Frozen reads** go through holt `view_at(R)` ([`open_at`]); the hold keeps the history floor
//!   at or below `R` until the hold is released.
//! - **Renew** is extend-only and CASes the exact SnapshotRef (and alias row when selected by
//!   name); it may revive an `Active` snapshot whose deadline passed but that was not claimed.
//! - **Retire** predicates `Active` with zero consumers at the expected consumer epoch, changes
//!   the state to `Retired`, deletes the hold and projects the terminal state onto the alias row
//!   when the alias still resolves to this snapshot (the alias never moves).
//! - **Reap** ([`reap`]) claims, after the skew grace, `Active -> ReapClaimed` with zero
//!   consumers and deletes the hold in the same command, then finalizes `ReapClaimed -> Reaped`
//!   (a crash in between is finished by the next pass). Afterwards it raises the holt history
//!   floor to `min(active holds, version - history_retention_versions)`
//!   ([`maintain_history_floor`]).
//! - **Consumers** (restore/fork): [`attach_consumer_parts`] and [`release_consumer_parts`] build
//!   the predicates and mutations a restore command splices into its own command;
//!   [`attach_consumer`] / [`release_consumer`] run them as standalone commands.
//!
//! Derived status: `alive` (Active, deadline later than the lease clock), `expired` (Active,
//! deadline passed, not yet claimed), `retired`, `reaped` (ReapClaimed or Reaped).
//!
//! ## Holds and the history floor
//!
//! Every HistoryHold row of the root (any kind and state) bounds the floor. A hold must be created
//! with `read_version` equal to the read version of the command that creates it (as every hold
//! written here is); the floor computed from any snapshot at version `V` is then `<= V`, which is
//! never above a hold committed after `V`.

pub use crate::shard::history_floor::{
    maintain_history_floor, min_hold_version, SnapshotPolicy, DEFAULT_HISTORY_RETENTION_VERSIONS,
};

mod consumer;
mod create;
mod invariants;
mod read;
mod reap;
mod renew;
mod retire;
mod rows;
mod state;

pub use consumer::*;
pub use create::*;
pub use invariants::*;
pub use read::*;
pub use reap::*;
pub use renew::*;
pub use retire::*;
pub use state::*;
