//! # NoKV — a workspace and artifact store for AI-agent infrastructure
//!
//! Agents get *workbenches*: stable, path-shaped, versioned places with five virtual sections
//! (`input`, `scripts`, `outputs`, `logs`, `metadata`). Bodies are immutable revisions stored as
//! SHA-256-verified blocks in object storage (a local directory by default); metadata lives in
//! `holt`, NoKV's own ART engine with a group-commit WAL, through the schema-8 contract of `meta`.
//!
//! Front doors in this crate:
//!
//! * [`Client`] — the Rust SDK over an embedded store (`Client::open(dir)`): create workbenches,
//!   publish (create-only or generation-CAS replace), append immutable segments, stat, range reads.
//! * [`workbench::Workbench`] — the transport-free facade of the agent tools (`docs/workbench.md`):
//!   JSON in, one JSON envelope out, typed error codes.
//! * [`index_fields`] — typed custom index fields for publications (SDK map, CLI `--field`,
//!   `index_json`), queried by `workbench_search` / `workbench_aggregate` / `workbench_catalog`.
//! * [`materialize`] — verified local-file adapters: materialize a workbench into a sandbox
//!   directory (digests checked before anything runs) and collect declared outputs back.
//! * [`publication`] — every publication runs as a durable Publish operation whose
//!   StagedObject ledger owns each block before its bytes are sent; recovery at open and
//!   [`Client::recover_operations`]; durable idempotent append ([`Client::append_idempotent`]).
//! * [`commit`], [`snapshot`], [`restore`], [`changes`] — the lifecycle as [`Client`] methods:
//!   durable commits with lineage and tags, leased snapshots, restore without copying bytes, and
//!   the change feed.
//! * [`control`] — the control plane on etcd: RootPlacement records, shard records naming the
//!   TxnStore behind each logical shard, and lease-bound shard-owner records with strictly
//!   increasing owner epochs and the fail-stop rule (`nokv root`, `nokv shard`).
//! * [`mcp`] — `nokv mcp`: the 18 tools as an MCP server over stdio, on the embedded store or
//!   through a `nokv serve` process (`--server URL`).
//! * [`lifetime`] — object lifetime: [`Client::remove`] / [`Client::remove_prefix`],
//!   [`Client::gc`] (and `--explain`), [`Client::fsck`] / [`Client::repair_index`], durable
//!   settings ([`Client::config_set`]) and [`Client::start_background_maintenance`].
//! * [`demo`] — the reference research workflow of docs/design.md on the Palmer penguins data, with
//!   commits, a tag, a snapshot, a restore and `workbench_find`.
//! * the `nokv` binary (`src/bin/nokv.rs`, [`cli`]) — `nokv workbench <tool> '<json>'`,
//!   `nokv schema`, `nokv materialize`, `nokv collect`, `nokv append --operation-id`,
//!   `nokv operation recover|list`, `nokv demo`, `nokv commit`, `nokv tag`, `nokv find`,
//!   `nokv snapshot`, `nokv restore`, `nokv changes`, `nokv rm`, `nokv gc`, `nokv fsck`,
//!   `nokv config`, `nokv mcp`.
//!
//! * [`server`] — `nokv serve`: one owner process serves many agents over the versioned `/v1/`
//!   HTTP protocol (the 18 tools, streaming bodies, the CLI's commands, the change feed,
//!   metrics); [`remote::RemoteClient`] — the Rust SDK against it, and the CLI's
//!   `--server URL` / `NOKV_SERVER`.
//!
//! The store directory of the CLI is `--store DIR`, else `$NOKV_STORE`, else `./.nokv`.

pub mod address;
pub mod changes;
pub mod client;
pub mod commit;
#[cfg(feature = "etcd")]
pub mod control;
pub mod error;
pub mod index_fields;
pub mod lifetime;
pub mod materialize;
mod periodic;
pub mod publication;
pub mod restore;
pub mod snapshot;
pub mod store_config;
pub mod workbench;

pub use client::{
    AppendReceipt, Client, ClientOptions, PutOptions, PutReceipt, WorkbenchInfo, WriteCondition,
};
pub use error::{Error, Result};
pub use index_fields::{FieldId, IndexFields, IndexValue, Timestamp};
pub use publication::{OperationInfo, RecoverySummary};
