//! The control plane on etcd (docs/metadata-format.md, "Placement Authority"; docs/design.md, "Distribution").
//!
//! Placement is control-plane state, not a shard-local family. The control plane owns:
//!
//! - **RootPlacement** records ([`placement`]): `root_id → logical_shard_id,
//!   placement_generation, RootPlacementLifecycle`, created before the root's first write
//!   (`nokv root create`). A root is `Provisioning` until its shard installs the matching
//!   RootFence and the record moves to `Active`; from then on it never changes logical shard.
//! - **Shard records** ([`shard`]): one per logical shard, naming the TxnStore that backs it
//!   (which engine is part of the placement).
//! - **Shard-owner records** ([`owner`]): per logical shard, bound to an etcd lease, naming the
//!   owner process, its address and a strictly increasing owner epoch. Owners renew the lease
//!   and stop serving before it can have expired (fail-stop with a safety margin); every write of
//!   an etcd-backed shard compares the record's lease inside its transaction, so an owner whose
//!   lease lapsed can never commit.
//!
//! # Keys (under the deployment namespace, default `/nokv/`)
//!
//! ```text
//! <ns>control/roots/id/<root hex>          RootPlacement (meta's binary codec, value version 1)
//! <ns>control/roots/name/<name>            root hex (the name index; names are unique)
//! <ns>control/shards/<shard hex>/record    ShardRecord (JSON)
//! <ns>control/shards/<shard hex>/owner     OwnerRecord (JSON), bound to the owner's lease
//! <ns>control/shards/<shard hex>/epoch     u64be: the last owner epoch granted (persistent)
//! ```
//!
//! Every record change is one etcd transaction with compares (name absent, record unchanged,
//! epoch unchanged), so concurrent control-plane clients cannot interleave half-applied changes.
//!
//! ```text
//! control/
//!   plane.rs      ControlPlane: the connection, the key layout, retried etcd calls
//!   records.rs    the records and their encodings (owner, root, shard, shard status)
//!   shard.rs      shard records: create, get, require
//!   owner.rs      shard ownership: acquire, renew, release, the fail-stop rule, the fence
//!   placement.rs  RootPlacement records (create, activate, reassign) and the shard listing
//! ```

pub mod owner;
pub mod placement;
mod plane;
mod records;
pub mod shard;

pub use owner::{OwnerRecord, ShardOwnership};
pub use placement::RootRecord;
pub use plane::{parse_control_url, refused, ControlPlane, REQUEST_TIMEOUT, RETRY_WINDOW};
pub use shard::{ShardEngine, ShardRecord};

pub use crate::error::PlacementErrorKind;

#[cfg(test)]
mod tests;
