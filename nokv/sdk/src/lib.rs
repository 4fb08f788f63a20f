//! # NoKV — a workspace and artifact store for AI-agent infrastructure (the Rust SDK)
//!
//! Agents get *workbenches*: stable, path-shaped, versioned places with five virtual sections
//! (`input`, `scripts`, `outputs`, `logs`, `metadata`). Bodies are immutable revisions stored as
//! SHA-256-verified blocks in object storage (a local directory by default); metadata lives in
//! `holt`, NoKV's own ART engine with a group-commit WAL, through the schema-8 contract of `meta`.
//!
//! This crate is the SDK every front door is built on (the CLI, `nokv serve`, `nokv mcp` and
//! the Python binding live in their own crates above it). Its modules, bottom up:
//!
//! * [`error`], [`fault`] (crash points for kill tests), [`json`] (canonical JSON, tool
//!   payloads, exact numbers), [`index_fields`] (typed custom index fields), [`address`] (the
//!   serving address record of a store).
//! * [`store_config`] — `nokv-store.json`: which object provider and metadata engine a store
//!   uses; [`control`] (feature `etcd`) — the control plane on etcd: RootPlacement records,
//!   shard records naming the TxnStore behind each logical shard, lease-bound shard-owner records
//!   with strictly increasing owner epochs and the fail-stop rule.
//! * [`client`] — the narrow core: [`Client`], its options and receipts, the accessors every
//!   concept module uses. The concept modules each add one group of [`Client`] methods:
//!   opening a store (`open`), the write path (`publication`: put, put_reader, append), the read path
//!   (`read`: stat, range reads), [`publication`] (every body runs as a durable Publish
//!   operation whose StagedObject ledger owns each block before its bytes are sent; recovery at
//!   open; durable idempotent append), [`commit`] (durable commits, lineage, tags),
//!   [`snapshot`] (leased snapshots), [`restore`] (restore into a new workbench without copying
//!   bytes), [`changes`] (the change feed), [`lifetime`] (removal, GC and `--explain`, fsck,
//!   settings, background maintenance), [`expiry`] (expiring workbenches) and [`materialize`]
//!   (verified local-file adapters).
//! * [`workbench::Workbench`] — the transport-free facade of the 18 agent tools
//!   (`docs/workbench.md`): JSON in, one JSON envelope out, typed error codes from
//!   `nokv_protocol`.
//! * [`access`] — who may do what: the scope model, what each tool needs, the token registry
//!   and the audit trail that the front doors share.

pub mod access;
pub mod address;
pub mod changes;
pub mod client;
pub mod commit;
#[cfg(feature = "etcd")]
pub mod control;
pub mod diff;
pub mod error;
pub mod expiry;
pub mod fault;
mod health;
pub mod index_fields;
pub mod json;
pub mod lifetime;
pub mod materialize;
pub mod move_path;
pub mod name_folding;
mod open;
mod periodic;
pub mod printable;
pub mod publication;
mod read;
mod reservations;
pub mod restore;
pub mod snapshot;
pub mod store;
pub mod store_config;
pub mod workbench;
pub mod writers;

pub use client::{
    AppendReceipt, Client, ClientOptions, PutOptions, PutReceipt, WorkbenchInfo, WriteCondition,
    DEFAULT_WRITER_IDLE_RELEASE,
};
pub use error::{Error, Result};
pub use index_fields::{FieldId, IndexFields, IndexValue, Timestamp};
pub use publication::{OperationInfo, RecoverySummary};
pub use store::Store;
