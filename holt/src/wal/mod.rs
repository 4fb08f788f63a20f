//! The write-ahead log: `dir/wal/NNNNNNNNNNNNNNNNNNNN.wal` segments (20-digit first LSN) of
//! CRC-framed records; see [`record`] for the byte layout, [`writer`] for group commit and
//! [`reader`] for recovery.

pub(crate) mod reader;
pub(crate) mod record;
pub(crate) mod writer;
