//! **Images**: immutable, page-aligned files holding an on-disk ART per tree, read in place
//! through a memory map. holt serves reads from them; only the writes since the newest image
//! live in memory (see `crate::layers`). The byte layout is in `docs/holt-format.md`.
//!
//! - [`format`]: constants and varints;
//! - [`node`]: decoded record views (leaves, inner nodes);
//! - [`file`]: one mapped file — footer, lazy per-block CRC checks, the meta record;
//! - [`read`]: point lookups, predecessor search, subtree queries;
//! - [`cursor`]: ordered listing with seek, delimiter roll-up and summary filters;
//! - [`writer`]: the streaming ART builder and the block writer;
//! - [`set`]: file names, choosing the images that make up a store at open, the merge policy.

mod cursor;
mod file;
pub(crate) mod format;
mod node;
mod read;
pub(crate) mod set;
mod writer;

pub(crate) use cursor::{ImgItem, ImgList};
pub(crate) use file::{Image, Root};
pub(crate) use node::Leaf;
pub(crate) use read::{any_in_prefix, get, last_below, may_contain};
pub(crate) use writer::{BlockSink, Meta, Progress, ProgressFn, TreeEntry, TrieBuilder};

#[cfg(test)]
mod tests;
