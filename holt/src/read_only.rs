//! Read-only opening: [`Db::open_read_only`].
//!
//! A read-only database is the state of a directory **as of its open**: the images the store is
//! made of (mapped, like [`Db::open`] maps them) plus every complete WAL record after them (a
//! torn or still-being-written final record is left out, exactly as recovery leaves it out). It
//! takes no lock and writes nothing at all —
//! no `LOCK` file, no torn-tail truncation, no checkpoint, no `fdatasync` — so it opens a store
//! on a read-only file system and a store whose files belong to another user as long as the
//! process may read them, and any number of read-only databases share a directory with the one
//! writer that holds `LOCK`. Every write ([`Db::commit`], [`Db::create_tree`],
//! [`Db::set_history_floor`], [`Db::checkpoint`], [`Db::flush`]) answers [`Error::ReadOnly`].
//! Later commits of the writer are not seen; open again for a newer state.
//!
//! ## Concurrent writer
//!
//! A writer may append to the WAL, install a new image (a flush, a merge or a checkpoint) and
//! unlink the images and WAL segments it covers while a read-only open lists and reads the
//! files. Each attempt lists the images, maps the tiling [`Db::open`] would choose and replays
//! the WAL after it, then lists again: only a load during which no image or segment was installed
//! or dropped is kept, so its images and WAL belong to one moment (a load that decoded cleanly
//! while the files changed under it was observed to return a state older than an earlier open's,
//! in `tests/read_only.rs` with a writer checkpointing every 16 commits). When a file vanished between listing and opening (`NotFound`), the
//! replay found a gap or damage while the files changed, or the second listing differs, the
//! attempt is discarded and the open lists again (bounded: 32 attempts). Once mapped, an image stays
//! readable after the writer unlinks it (the mapping keeps the inode), so a read-only database
//! keeps serving its state for as long as it lives. Damage that stays when nothing changed is reported as
//! [`Error::Corrupt`], like [`Db::open`] reports it.
//!
//! A reader sees what the writer has written to its WAL segment, which can include commit groups
//! whose `fdatasync` has not returned yet (the writer acknowledges them only after it does). A
//! process crash of the writer cannot take such a record back — it is in the file and every
//! later recovery replays it — but a power loss before the sync can; a read-only process may
//! therefore observe a commit that a power loss then loses. It never observes part of a commit:
//! one batch is one WAL record, replayed whole or not at all.

use std::io::ErrorKind;
use std::path::Path;
use std::time::Duration;

use crate::db::Db;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::recovery::{fingerprint, recover_store};
use crate::state::State;
use crate::vfs::WalFs;

/// How many times a read-only open lists and loads the files before it gives up on a writer
/// that keeps replacing them (each retry waits 1 ms longer than the previous one).
pub(crate) const ATTEMPTS: u32 = 32;

/// True for an I/O error saying a file or directory does not exist (it vanished under a
/// concurrent checkpoint install or segment drop).
fn vanished(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == ErrorKind::NotFound)
}

/// What one attempt produced.
enum Attempt {
    Loaded(State, u64),
    /// The files changed under the attempt; list again.
    Retry(Error),
}

impl Db {
    /// Opens the existing database in `dir` **read-only** (see the module docs of
    /// `read_only.rs`): its images plus the WAL records after them, as of this call. Takes no lock (a writer and other readers may have the directory open), creates,
    /// truncates and syncs nothing, and needs only read permission on the directory and its
    /// files. `opts` is accepted for symmetry with [`Db::open`]; no option changes a read-only
    /// open (no WAL is written, no checkpoint taken).
    ///
    /// The returned database reads like any other (views, `view_at` down to the history floor
    /// as of the open); [`Db::commit`], [`Db::create_tree`], [`Db::set_history_floor`] and
    /// [`Db::checkpoint`] and [`Db::flush`] answer [`Error::ReadOnly`].
    ///
    /// Errors: `Io` (e.g. `NotFound` for a missing directory, `PermissionDenied` without read
    /// permission); `Corrupt` for a directory that is not a holt store (no `LOCK` file or `wal/`
    /// directory), a damaged image the WAL cannot replace, a damaged legacy checkpoint or a
    /// damaged, gapped, missing or headerless WAL segment (the torn final record excepted) that
    /// stays damaged when listed again; `Unsupported` for a store format newer than this
    /// version; `Corrupt` or `Io` also when a
    /// writer replaced the files under every one of 32 attempts (the last error).
    pub fn open_read_only(dir: impl AsRef<Path>, opts: Options) -> Result<Db> {
        open_read_only_with_fs(dir.as_ref(), opts, &*crate::vfs::os())
    }
}

/// [`Db::open_read_only`] with the file operations going through `fs`.
pub(crate) fn open_read_only_with_fs(dir: &Path, opts: Options, fs: &dyn WalFs) -> Result<Db> {
    let dir = dir.to_path_buf();
    let wal_dir = dir.join("wal");
    // A missing directory is an I/O error, never created.
    std::fs::metadata(&dir).map_err(|e| Error::io("stat", &dir, e))?;
    if !dir.join("LOCK").is_file() || !wal_dir.is_dir() {
        return Err(Error::corrupt(
            &dir,
            0,
            "not a holt database (missing LOCK file or wal/ directory)",
        ));
    }
    let mut last = None;
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(u64::from(attempt)));
        }
        match attempt_once(fs, &dir)? {
            Attempt::Loaded(state, replayed) => {
                return Ok(Db::from_read_only_state(opts, dir, state, replayed));
            }
            Attempt::Retry(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::corrupt(&dir, 0, "read-only open did not settle")))
}

/// One attempt: list, map the images, replay the WAL after them.
fn attempt_once(fs: &dyn WalFs, dir: &Path) -> Result<Attempt> {
    let before = fingerprint(fs, dir)?;
    let outcome = load(fs, dir);
    match outcome {
        // The load read the files of one listing only if no image or segment was installed or
        // dropped meanwhile; otherwise its images and WAL may come from different moments.
        Ok(_) if fingerprint(fs, dir)? != before => Ok(Attempt::Retry(Error::corrupt(
            dir,
            0,
            "the store's files changed during the read-only open",
        ))),
        Ok((state, replayed)) => Ok(Attempt::Loaded(state, replayed)),
        Err(e) if vanished(&e) => Ok(Attempt::Retry(e)),
        Err(e @ Error::Corrupt { .. }) => {
            // An image installed (or segments dropped) between listing and reading shows up
            // as a gap; damage that is still there with the same files is real.
            if fingerprint(fs, dir)? != before {
                Ok(Attempt::Retry(e))
            } else {
                Err(e)
            }
        }
        Err(e) => Err(e),
    }
}

/// The images and WAL [`Db::open`] would recover, recovered the same way (nothing is written).
fn load(fs: &dyn WalFs, dir: &Path) -> Result<(State, u64)> {
    let (recovered, _legacy, _format) = recover_store(fs, dir)?;
    Ok((recovered.state, recovered.replayed_bytes))
}
