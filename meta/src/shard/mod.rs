//! `MetaShard`: the handle on one logical-shard metadata store.
//!
//! ```text
//! shard/
//!   handle.rs           MetaShard: its parts, opening (holt, etcd; writer or read-only), reads
//!   owner.rs            a writer handle's owner state and its lazy owner-epoch advance
//!   snapshot_policy.rs  SnapshotPolicy: lease grace and history retention
//!   history_floor.rs    the MVCC history floor, never past a HistoryHold
//!   sequencer.rs        the command sequencer, and the handle's writes through it
//! ```

mod handle;
pub mod history_floor;
mod owner;
pub mod sequencer;
mod snapshot_policy;

pub use handle::{MetaShard, OpenOptions};
