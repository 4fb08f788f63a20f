//! The Workbench facade: the agent tools of `docs/workbench.md`, transport-free (JSON in, JSON out).
//!
//! Every call is validated against the tool's JSON schema first (see [`schema`]), then against the
//! facade's cross-field rules, then executed through the [`crate::client::Client`] SDK. Results are one JSON
//! object: `{"status":"success", …}` or the error envelope of [`errors::ToolError`]. Result
//! shaping (text decoding, base64, edit matching, grep, section projection, friendly errors) lives
//! here, never in `meta`.
//!
//! All 18 tools of the contract are implemented: `workbench_create`, `workbench_put_file`,
//! `workbench_append`, `workbench_edit`, `workbench_list`, `workbench_stat`, `workbench_read`,
//! `workbench_grep` (write and read tools; list/stat/read also `at_snapshot`),
//! `workbench_search`, `workbench_aggregate`, `workbench_catalog` (typed-index queries),
//! `workbench_commit`, `workbench_find` (durable commits and run-manifest search),
//! `workbench_snapshot`, `workbench_snapshot_renew`, `workbench_snapshot_retire`,
//! `workbench_snapshot_list` (leased snapshots) and `workbench_restore` (restore into a new
//! workbench). The fallback arm of the dispatch answers `InvalidState` only for a name that
//! passed the schema lookup without a handler (not reachable with the current schema table).
//!
//! ```text
//! workbench/
//!   facade.rs        Workbench: the facade over one Client
//!   dispatch.rs      Workbench::call: schema check, then the tool
//!   error_map.rs     SDK and metadata errors as typed tool errors
//!   schema.rs        tool names, descriptions, JSON-Schema validation
//!   *_tools.rs       the tools: write, read, query, commit, snapshot, restore
//!   scope.rs, shape.rs, cursor.rs, edit.rs, grep.rs   what the tools share
//! ```

pub mod commit_tools;
pub mod cursor;
mod diff_error;
mod dispatch;
pub mod edit;
mod error_map;
mod facade;
pub mod grep;
mod query_tools;
mod read_tools;
mod restore_tools;
pub mod schema;
mod scope;
pub mod shape;
pub mod snapshot_tools;
mod write_tools;

pub use commit_tools::commit_error;
pub use diff_error::diff_error;
pub use error_map::{
    meta_tool_error, move_error, removal_error, store_error, tool_error, workbench_not_found,
    METADATA_DAMAGED, REQUEST_ID_REUSED,
};
pub use facade::Workbench;
pub use nokv_protocol::errors;
pub use snapshot_tools::snapshot_error;

/// The JSON encodings the tools use, under their historical paths
/// (`nokv::workbench::canonical`, `…::payload`, `…::numbers`).
pub use crate::json::{canonical, numbers, payload};
