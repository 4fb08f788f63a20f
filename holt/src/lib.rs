//! # holt — NoKV's metadata engine
//!
//! One [`Db`] is one directory (or one in-memory instance, [`Db::open_memory`]) holding many
//! **named trees**: ordered maps from byte keys (0..=64 KiB, the empty key included) to byte
//! values (up to 16 MiB). Each tree has a name (`[a-z0-9_]`, 1..=64 bytes) and a stable one-byte
//! **tag**; the registry is durable. The engine owns the tree `history` (tag 0x00).
//!
//! Each tree is a persistent **adaptive radix tree** (ART; Leis et al., ICDE 2013: Node4/16/48/256
//! with grow and shrink, pessimistic path compression, lazy expansion, a terminal slot for keys
//! that are prefixes of others), written from scratch in module `art`. Nodes are shared through
//! `Arc` and copied on write along the written key's path, so a snapshot of every tree costs one
//! pointer copy per tree. Every inner node also counts the live values and tombstones below it
//! and bounds their commit versions, which lets scans skip whole subtrees.
//!
//! ## Versions and batches
//!
//! All writes go through [`Db::commit`] with a [`Batch`] of puts, deletes and predicates
//! ([`Expect`], [`Batch::expect_version`]) that may span trees. Predicates are checked against
//! the latest committed state; if one fails nothing applies. Each committed batch gets the next
//! **commit version** (dense, starting at 1; [`Db::version`] is the last one). Creating a tree or
//! raising the history floor is logged too but does not consume a version.
//!
//! ## Views
//!
//! A [`View`] is a consistent read at one **read version**. [`Db::view`] pins the current
//! in-memory state (an immutable snapshot shared by `Arc`): readers never wait for writers or
//! fdatasync, and a range iterator keeps seeing its snapshot while later commits land.
//! [`Tree::get`] (one ART point lookup) / [`Tree::range`] read the latest committed state.
//! Ranges roll delimiter groups up by skipping the group's subtree, so their cost follows the
//! entries returned, not the keys underneath. Batches are validated against the newest
//! *accepted* state, which may be ahead of the readable one while its group commit syncs;
//! [`Db::wait_visible`] blocks until a given commit version is readable.
//!
//! ## MVCC history
//!
//! Trees created `versioned` keep **MVCC history**: every overwrite or delete also writes the
//! key's previous value (or a tombstone marker) into the `history` tree under
//! `tag | u32be(key length) | key | u64be(!commit_version)` (docs/metadata-format.md,
//! "History"), in the same commit. Deleted keys of versioned trees stay as tombstones until the
//! history floor passes them. [`Db::view_at`] reads versioned trees as of any version at or above
//! the **history floor** ([`Db::set_history_floor`]); unversioned trees keep no history and read
//! at their latest state in such a view. Raising the floor is logged at once; the history rows
//! and tombstones it makes unreachable are then pruned incrementally, in bounded steps that never
//! hold the commit lock for a pass over a whole tree (and are hidden from every read meanwhile).
//!
//! ## Durability: WAL, group commit, checkpoints
//!
//! Every commit, tree creation and floor change is a CRC-framed record with the next **LSN** in
//! the **write-ahead log** (`dir/wal/<20-digit first LSN>.wal`, each segment created atomically
//! with a header; `dir/FORMAT` marks the store format). Concurrent committers share one
//! write and one `fdatasync` (**group commit**, leader/follower); a commit is acknowledged and
//! made visible only once its record is durable ([`Durability::Sync`], the default). With
//! [`WalIo::Auto`] (the default) the group's write and `fdatasync` are submitted as one linked
//! io_uring submission when the kernel allows it, else as `pwrite` + `fdatasync`;
//! [`Stats::wal_io`] says which, and [`Stats::wal_groups`] how many commits each sync covered.
//! A group's leader waits up to [`Options::commit_delay`] (50 µs by default) for more committers
//! while fewer records are queued than its previous group held, so concurrent committers share
//! one sync instead of alternating between two; a lone committer never waits.
//!
//! ## Serving from disk: images and the delta
//!
//! holt serves reads from **images** (`dir/image-<first LSN>-<last LSN>.holt`): immutable,
//! page-aligned files holding an on-disk ART per tree, read in place through a memory map, with
//! a CRC-32 per 4 KiB block checked on the first touch of that block (a bad block is
//! [`Error::Corrupt`] naming the file and block for the read that met it). Only the writes
//! since the newest image live in memory, in the ART above (the **delta**). Point reads, ranges
//! with delimiter roll-up, views and `view_at` see delta and images as one tree.
//! A **flush** ([`Db::flush`], or automatically every [`Options::checkpoint_wal_bytes`] of WAL
//! on a background thread, and at close when due) rolls the WAL, writes the delta as the next
//! image while commits continue, installs it (fdatasync, rename, directory fsync) and only then
//! deletes the WAL segments it covers; a background **merge** combines images per a tiered
//! policy, and [`Db::checkpoint`] merges everything into one image. Opening maps the images
//! (footer, CRC directory and meta record only — nothing proportional to the number of keys)
//! and replays the WAL after the newest one; a torn final record is dropped, any other damage —
//! including a missing, emptied or overwritten segment — is reported as [`Error::Corrupt`]. `dir/LOCK` holds an exclusive advisory lock while open. The
//! byte layout, the merge policy and the WAL bound are in `docs/holt-format.md`.
//!
//! ## Read-only opening
//!
//! [`Db::open_read_only`] opens the state of a directory as of the call — its images plus the
//! complete WAL records after them — without taking the lock and without writing
//! anything (it works on a read-only file system and on another user's readable files); any
//! number of read-only databases share a directory with its one writer. Every write answers
//! [`Error::ReadOnly`].
//!
//! ```
//! use holt::{Batch, Db, Expect, Options, RangeSpec, Entry};
//! let db = Db::open_memory(Options::default())?;
//! let files = db.create_tree("files", 0x01, true)?;
//! let mut b = Batch::new();
//! b.expect(&files, "a/x", Expect::Absent);
//! b.put(&files, "a/x", "1");
//! b.put(&files, "b", "2");
//! assert_eq!(db.commit(b)?, 1);
//! let listing: Vec<Entry> = files
//!     .range(&RangeSpec::all().delimiter(b'/'))?
//!     .collect::<holt::Result<_>>()?;
//! assert_eq!(listing[0], Entry::CommonPrefix(b"a/".to_vec()));
//! # Ok::<(), holt::Error>(())
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod art;
mod batch;
mod codec;
mod compact;
mod db;
mod error;
mod image;
mod layers;
mod legacy_checkpoint;
mod limits;
mod mvcc;
mod options;
mod pipeline;
mod published;
mod range;
mod read_only;
mod recovery;
mod registry;
mod sharing;
mod slot;
mod state;
mod store_format;
mod tree;
mod vfs;
mod wal;
mod writer_lock;

pub use batch::{Batch, Expect};
pub use db::Db;
pub use error::{Error, Result};
pub use limits::{MAX_KEY_LEN, MAX_VALUE_LEN};
pub use options::{
    Durability, Options, ScrubReport, Stats, WalGroupStats, WalIo, WalIoPath, WriterLock,
    WriterLockStats, DEFAULT_CHECKPOINT_WAL_BYTES, DEFAULT_COMMIT_DELAY,
    WAL_GROUP_HISTOGRAM_BUCKETS,
};
pub use pipeline::CommitTicket;
pub use registry::{HISTORY_NAME, HISTORY_TAG};
pub use sharing::WriterHold;

pub use range::{Entry, EntryRef, RangeIter, RangeSpec};
pub use registry::{TreeInfo, MAX_TREE_NAME_LEN};
pub use tree::{Tree, View};
/// The group-commit hand-off, exposed only in `--cfg loom` builds for the loom model test
/// (`tests/loom_group_commit.rs`). Not part of the API.
#[cfg(loom)]
#[doc(hidden)]
pub use wal::group_commit as loom_group_commit;
