//! The write-ahead log: `dir/wal/NNNNNNNNNNNNNNNNNNNN.wal` segments (20-digit first LSN) of
//! CRC-framed records; see [`record`] for the byte layout, [`group_commit`] for the
//! committer ↔ writer hand-off, [`writer`] for the segment writer (io_uring or blocking I/O)
//! [`reader`] for recovery and `apply` for applying records to a state. The file layer they write through is `crate::vfs`.

mod apply;
// `pub` (inside this private module) so that `--cfg loom` builds can re-export it for the loom
// model test; not reachable from outside the crate otherwise.
pub mod group_commit;
#[cfg(test)]
mod io_tests;
pub(crate) mod reader;
pub(crate) mod record;
#[cfg(test)]
mod sim_crash_tests;
mod sync;
pub(crate) mod uring;
pub(crate) mod writer;
