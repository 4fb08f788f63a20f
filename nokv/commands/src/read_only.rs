//! Which CLI calls open the store read-only.
//!
//! A call that only reads opens the store with [`ClientOptions::read_only`]: no lock (it never
//! waits for, and never blocks, the one writer or other readers), the state as of its open, and
//! nothing written — no owner-epoch advance, no recovery pass, no reaper, no fdatasync. That is
//! also what lets these calls work on a read-only file system or on another user's store. Every
//! other call opens a writer, which takes the lock and advances the owner epoch right before its
//! first write.
//!
//! Read-only calls: the Workbench tools in [`READING_TOOLS`], `nokv find`,
//! `nokv snapshot list`, `nokv tag get|list`, `nokv commit show`, `nokv changes` (with
//! `--follow` it reopens read-only at every poll), `nokv materialize`, `nokv verify`.

use std::path::Path;

use nokv::client::{Client, ClientOptions};
use nokv::workbench::schema::READING_TOOLS;

/// True for a canonical tool name in [`READING_TOOLS`]: such a call opens the store read-only.
pub fn tool_reads_only(canonical_tool: &str) -> bool {
    READING_TOOLS.contains(&canonical_tool)
}

/// Opens the existing store in `dir` for one CLI call: read-only when `read_only`, else a writer
/// that never creates a missing store.
///
/// Errors: those of [`Client::open_with`] ([`nokv::Error::StoreNotFound`] for a missing store).
pub fn open_existing(dir: &Path, read_only: bool) -> nokv::Result<Client> {
    Client::open_with(
        dir,
        ClientOptions {
            create_if_missing: false,
            read_only,
            ..Default::default()
        },
    )
}
