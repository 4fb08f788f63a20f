//! `LocalDir`: the embedded default provider, one file per object under a root directory.
//!
//! # On-disk layout
//!
//! Key `a/b/c` lives at `<root>/a/b/c`. In-flight writes use a sibling temp file named
//! `.tmp-<16 hex: SHA-256 of the final file name>-<32 random lowercase hex>`;
//! [`crate::keys::validate_key`] rejects any segment starting with `.tmp-`, so a temp file left
//! behind by a crash is never returned by `get` or `list`. Because the temp name is tied to its
//! target, `delete(key)` also removes the key's own leftover temp files: a process killed while
//! uploading leaves a temp file that the ledger-driven cleanup of that key then removes.
//!
//! # Write protocol (crash safety)
//!
//! A put writes all bytes to a fresh temp file in the target's directory (creating missing
//! directories one level at a time, so it knows which ones it created), then moves it into
//! place: `put` renames the temp file over the target (atomic replace); `put_if_absent`
//! hard-links it to the target (`EEXIST` if present, which is the CAS on absence) and removes
//! the temp name. An object file is never modified after it becomes visible, so readers see the
//! old or the new bytes, never a mix. What makes the object durable before the call returns is
//! chosen per store ([`ObjectSync`]):
//!
//! - **[`ObjectSync::Syncfs`]** (the default on Linux) — no file or directory is synced on its
//!   own. After its link or rename, a caller waits for a *group flush*: one `syncfs(2)` on the
//!   root's file system, shared by every caller that finished its writes while the previous
//!   flush ran (leader/follower, like the WAL's group commit; see `flush.rs`). A flush covers
//!   the object's bytes and every directory entry on its path, whoever created the directories.
//!   `put` (which may replace an existing object) waits for one flush before its rename too,
//!   so a crash leaves the old or the new bytes under the key. `put_if_absent` waits once, after
//!   its link: if the power fails before that flush returns, the key of the unacknowledged put
//!   may survive holding a prefix of its bytes (possibly none), because a file system may write
//!   a directory entry back before the file's data. NoKV tolerates that: every block key is
//!   owned by the StagedObject ledger until its publication ends, cleanup deletes the keys of
//!   publications that never finished, and blocks are read only through their recorded length
//!   and SHA-256 (docs/metadata-format.md, "Upload And Append"). `delete` shares the flush
//!   too.
//!
//!   *Cost.* A `syncfs` writes back every dirty page and inode of the **whole file system**,
//!   other processes' included, and waits for it. It is the right choice where the store owns
//!   its file system, or where the file system is otherwise not busy: there, concurrent puts
//!   make their bodies durable with one flush per group instead of one per object and
//!   directory, and a put waits for one flush. The writes themselves are not merged (each
//!   object's data and directory entries are still written back), so what a group gains is
//!   bounded by what the device does per write (the `durability_floor` bench measures both
//!   modes). On a file system that other programs fill with
//!   dirty data (a build tree, a database), every group pays for their writeback as well.
//!   Writeback errors are seen by `syncfs` only since Linux 5.8; with older kernels use
//!   per-file syncs. Any error of the file system reported to a flush (another file's
//!   writeback error included) fails every put of that group with [`Error::Io`] (op
//!   `"syncfs"`); the next group runs a new flush, which never answers for the failed one.
//!   A `put_if_absent` whose flush failed removes the object it linked (best effort), and a
//!   `put_if_absent` of the same key that found that object meanwhile waits for this outcome
//!   rather than report bytes no flush vouched for: it then writes its own. (Another process's
//!   unlucky object is beyond this: a writeback error that happened before this provider was
//!   opened is not reported to it; NoKV reads every block against its recorded digest.)
//!
//! - **[`ObjectSync::PerFile`]** — the temp file is `fsync`ed before its link or rename, then
//!   the target's directory is `fsync`ed, and so is the parent of every directory *this call*
//!   created (deepest first), so the new entries survive a crash. A directory the call found
//!   already there is trusted to be durable: its creator made it so under the same protocol
//!   before acknowledging anything below it; a creator in this process that has not finished
//!   yet is known (a registry of directories created and not yet made durable), and a caller
//!   that uses one of its directories syncs that directory's parent itself. *Cost:* one file
//!   fsync and one to three directory fsyncs per put, none shared with other writers; it
//!   touches nothing but the store's own files, so it is the fallback for a shared file
//!   system. Its limit: a directory created by a process that died between its `mkdir` and
//!   the `fsync` of the parent is trusted by the next process, though its entry is only as
//!   durable as the kernel's writeback makes it (on journaling file systems such as ext4 and
//!   XFS it is typically committed with the next journal commit, which later `fsync`s force;
//!   [`ObjectSync::Syncfs`] has no such gap: a flush covers every entry, whoever made it).
//!
//! `delete` removes the directories it leaves empty (up to the root), so a store's directory
//! tree holds only the objects that exist; a writer whose directory vanishes between creating
//! it and creating its temp file creates it again.
//!
//! # Trust
//!
//! Keys are validated before any filesystem call, so they cannot climb out of the root. The
//! root directory itself is trusted: `LocalDir` never creates symlinks, and does not defend
//! against symlinks planted inside the root by someone else.

mod flush;
mod fs;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::digest::hex_lower;
use crate::error::Error;
use crate::keys::{list_dir_part, validate_key, TEMP_PREFIX};
use crate::store::{ObjectMeta, ObjectStore, PutOutcome};

use self::flush::GroupFlush;
use self::fs::{Fs, Kind, NewFileError, ObjectFile, RealFs};

/// How a [`LocalDir`] makes written objects durable (see the module docs for what each costs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectSync {
    /// Group flushes: one `syncfs(2)` on the root's file system makes the objects of every
    /// put waiting for it durable. Right where the store owns its file system or the file
    /// system is not busy. Only available on Linux; elsewhere a store asking for it gets
    /// [`ObjectSync::PerFile`].
    Syncfs,
    /// One `fsync` per object file, then its directory and the parents of the directories the
    /// put created. The fallback for a file system shared with busy programs.
    PerFile,
}

/// Is `syncfs(2)` available on this platform?
const SYNCFS_AVAILABLE: bool = cfg!(any(target_os = "linux", target_os = "android"));

impl Default for ObjectSync {
    /// [`ObjectSync::Syncfs`] on Linux, [`ObjectSync::PerFile`] elsewhere.
    fn default() -> Self {
        if SYNCFS_AVAILABLE {
            ObjectSync::Syncfs
        } else {
            ObjectSync::PerFile
        }
    }
}

/// Options of [`LocalDir::open_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalOptions {
    /// How objects are made durable (default: [`ObjectSync::default`]).
    pub sync: ObjectSync,
}

/// Counts of the flushes a [`LocalDir`] made since it was opened (for benchmarks and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocalStats {
    /// `syncfs(2)` calls (group flushes; [`ObjectSync::Syncfs`] only).
    pub syncfs_calls: u64,
    /// Waits for a group flush (every put, put-if-absent and delete in
    /// [`ObjectSync::Syncfs`] mode waits once, `put` twice).
    pub flush_waits: u64,
    /// `fsync(2)` calls on object files ([`ObjectSync::PerFile`] only).
    pub file_fsyncs: u64,
    /// `fsync(2)` calls on directories.
    pub dir_fsyncs: u64,
}

/// Object provider over a local directory (see the module docs for layout and durability).
///
/// Safe to share between threads; concurrent writers of the same key each leave a complete
/// object (last rename wins for `put`, exactly one `Created` for `put_if_absent`).
pub struct LocalDir {
    root: PathBuf,
    sync: ObjectSync,
    fs: Box<dyn Fs>,
    flush: GroupFlush,
    /// [`ObjectSync::PerFile`]: directories created by this process whose own entry may not be
    /// durable yet, with the number of creators that registered each. A creator registers a
    /// directory before its `mkdir` and unregisters it once the parent is synced, so whoever
    /// finds the directory already there also finds it here while its creator is unfinished.
    /// A creator whose sync failed leaves its registration behind: later writers keep syncing
    /// that directory's parent.
    unsynced_dirs: Mutex<HashMap<PathBuf, usize>>,
    /// [`ObjectSync::Syncfs`]: objects this process is linking or has linked and whose flush
    /// has not ended (with the number of callers linking each). A put-if-absent that finds
    /// one of them waits for that outcome (`linked`) instead of vouching for bytes whose
    /// flush may fail: a later flush could not vouch for them (see the module docs).
    linking: Mutex<HashMap<PathBuf, usize>>,
    linked: Condvar,
    file_fsyncs: AtomicU64,
    dir_fsyncs: AtomicU64,
    /// Test-only broken variant: skips every flush, to prove the crash checker catches it.
    #[cfg(test)]
    skip_flushes: bool,
}

impl std::fmt::Debug for LocalDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalDir")
            .field("root", &self.root)
            .field("sync", &self.sync)
            .finish_non_exhaustive()
    }
}

/// Is this I/O error "the path does not name an existing object"?
fn is_absent(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory)
}

/// The directory holding `path` (`.` for a bare relative name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The directories a put created, and its registrations in [`LocalDir::unsynced_dirs`]
/// (released on drop once the put has made them durable).
struct NewDirs<'a> {
    store: &'a LocalDir,
    created: Vec<PathBuf>,
    registered: Vec<PathBuf>,
    durable: bool,
}

impl Drop for NewDirs<'_> {
    fn drop(&mut self) {
        if self.registered.is_empty() || !self.durable {
            // Not made durable (the put failed): the registrations stay, see `unsynced_dirs`.
            return;
        }
        let mut dirs = self.store.unsynced();
        for d in &self.registered {
            release(&mut dirs, d);
        }
    }
}

/// A link registered in [`LocalDir::linking`]; unregistered (waking the waiters) on drop.
struct Linking<'a> {
    store: &'a LocalDir,
    target: Option<PathBuf>,
}

impl Drop for Linking<'_> {
    fn drop(&mut self) {
        if let Some(target) = &self.target {
            release(&mut self.store.linking(), target);
            self.store.linked.notify_all();
        }
    }
}

/// How many times a put-if-absent writes again after the object it found vanished.
const MAX_VANISHED: u32 = 8;

fn release(dirs: &mut HashMap<PathBuf, usize>, dir: &Path) {
    if let Some(n) = dirs.get_mut(dir) {
        *n -= 1;
        if *n == 0 {
            dirs.remove(dir);
        }
    }
}

impl LocalDir {
    /// Opens (creating if needed, like `mkdir -p`) a provider rooted at `root`, with the
    /// default [`LocalOptions`]. Newly created directories are made durable.
    ///
    /// Errors: [`Error::Io`] (with an empty key) when the directory cannot be created or synced.
    pub fn open(root: impl AsRef<Path>) -> Result<LocalDir, Error> {
        LocalDir::open_with(root, LocalOptions::default())
    }

    /// Opens (creating if needed, like `mkdir -p`) a provider rooted at `root` that makes
    /// objects durable as `options.sync` says ([`ObjectSync::Syncfs`] where `syncfs` is not
    /// available becomes [`ObjectSync::PerFile`]). Newly created directories are made durable
    /// before it returns; an existing root costs no flush.
    ///
    /// Errors: [`Error::Io`] (with an empty key) when the directory cannot be created, opened
    /// or synced.
    pub fn open_with(root: impl AsRef<Path>, options: LocalOptions) -> Result<LocalDir, Error> {
        LocalDir::open_on(Box::new(RealFs::default()), root.as_ref(), options)
    }

    /// [`LocalDir::open_with`] on any [`Fs`] (the power-loss simulation in tests).
    fn open_on(fs: Box<dyn Fs>, root: &Path, options: LocalOptions) -> Result<LocalDir, Error> {
        let sync = match options.sync {
            ObjectSync::Syncfs if !SYNCFS_AVAILABLE => ObjectSync::PerFile,
            s => s,
        };
        let store = LocalDir::new(fs, root.to_path_buf(), sync);
        let io_err = |op, e| Error::io(op, "", e);
        if sync == ObjectSync::Syncfs {
            // The flush descriptor is opened before anything below it is written, so every
            // later writeback error is reported to a flush. It is the root itself when that
            // exists (it may be a mount point), else the nearest existing ancestor, on whose
            // file system the missing directories will be created.
            let existing = root
                .ancestors()
                .find(|p| {
                    let p = if p.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        p
                    };
                    store.fs.stat(p, true).is_ok_and(|s| s.kind == Kind::Dir)
                })
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            store
                .fs
                .open_syncfs(existing)
                .map_err(|e| io_err("open", e))?;
        }
        let mut dirs = store.new_dirs();
        store
            .make_dirs(root, &mut dirs)
            .map_err(|e| io_err("create_dir", e))?;
        if !dirs.created.is_empty() {
            store.make_durable("", root, &mut dirs)?;
        }
        drop(dirs);
        Ok(store)
    }

    fn new(fs: Box<dyn Fs>, root: PathBuf, sync: ObjectSync) -> LocalDir {
        LocalDir {
            root,
            sync,
            fs,
            flush: GroupFlush::new(),
            unsynced_dirs: Mutex::new(HashMap::new()),
            linking: Mutex::new(HashMap::new()),
            linked: Condvar::new(),
            file_fsyncs: AtomicU64::new(0),
            dir_fsyncs: AtomicU64::new(0),
            #[cfg(test)]
            skip_flushes: false,
        }
    }

    /// A provider rooted at `root` for reading only: nothing on disk is created, synced or
    /// otherwise touched (a read-only file system, another user's files). Reads behave like on
    /// a provider from [`LocalDir::open`] (a missing `root` reads as missing objects); writes,
    /// where the file system allows them, use [`ObjectSync::PerFile`].
    pub fn open_existing(root: impl AsRef<Path>) -> LocalDir {
        LocalDir::new(
            Box::new(RealFs::default()),
            root.as_ref().to_path_buf(),
            ObjectSync::PerFile,
        )
    }

    /// The root directory objects are stored under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// How this provider makes objects durable (after the platform fallback of
    /// [`LocalDir::open_with`]).
    pub fn sync_mode(&self) -> ObjectSync {
        self.sync
    }

    /// The flushes made since this provider was opened.
    pub fn stats(&self) -> LocalStats {
        let (syncfs_calls, flush_waits) = self.flush.counts();
        LocalStats {
            syncfs_calls,
            flush_waits,
            file_fsyncs: self.file_fsyncs.load(Ordering::Relaxed),
            dir_fsyncs: self.dir_fsyncs.load(Ordering::Relaxed),
        }
    }

    /// The filesystem path that stores `key` (`<root>/<key>`), whether or not it exists.
    /// Meant for tests and diagnostics (e.g. corrupting a block on disk).
    ///
    /// Errors: [`Error::InvalidKey`] when `key` fails [`validate_key`].
    pub fn object_path(&self, key: &str) -> Result<PathBuf, Error> {
        validate_key(key)?;
        Ok(self.root.join(key))
    }

    fn per_file(&self) -> bool {
        self.sync == ObjectSync::PerFile
    }

    fn unsynced(&self) -> MutexGuard<'_, HashMap<PathBuf, usize>> {
        // Nothing panics while holding the lock; a poisoned lock still holds a consistent map.
        self.unsynced_dirs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn new_dirs(&self) -> NewDirs<'_> {
        NewDirs {
            store: self,
            created: Vec::new(),
            registered: Vec::new(),
            durable: false,
        }
    }

    /// `mkdir` of one directory, recorded in `dirs` when this call created it (registered as
    /// not yet durable first, in per-file mode).
    fn mkdir(&self, dir: &Path, dirs: &mut NewDirs<'_>) -> io::Result<()> {
        if self.per_file() {
            *self.unsynced().entry(dir.to_path_buf()).or_insert(0) += 1;
            dirs.registered.push(dir.to_path_buf());
        }
        let made = self.fs.create_dir(dir);
        match &made {
            Ok(()) => dirs.created.push(dir.to_path_buf()),
            Err(_) => {
                if self.per_file() {
                    release(&mut self.unsynced(), dir);
                    dirs.registered.pop();
                }
            }
        }
        made
    }

    /// Creates `dir` and its missing ancestors, one level at a time: `mkdir` of `dir` first,
    /// climbing only while the parent is missing, then back down. Directories created are
    /// recorded in `dirs`. A directory that a concurrent delete removes meanwhile makes this
    /// return `Ok` early; the caller's next file creation then fails with `NotFound` and
    /// calls again.
    fn make_dirs(&self, dir: &Path, dirs: &mut NewDirs<'_>) -> io::Result<()> {
        let mut missing = Vec::new();
        let mut cur = dir;
        loop {
            match self.mkdir(cur, dirs) {
                Ok(()) => break,
                Err(e) if e.kind() == ErrorKind::AlreadyExists => break,
                Err(e) if e.kind() == ErrorKind::NotFound => match cur.parent() {
                    Some(parent) if !parent.as_os_str().is_empty() => {
                        missing.push(cur);
                        cur = parent;
                    }
                    _ => return Err(e),
                },
                Err(e) => return Err(e),
            }
        }
        for d in missing.into_iter().rev() {
            match self.mkdir(d, dirs) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Writes `bytes` to a new temp file in `dir` (`fsync`ed when `sync_file`), creating
    /// `dir` and its missing ancestors when needed, and returns its path. A `delete` that
    /// empties a directory removes it ([`LocalDir::prune_empty_parents`]); if that happens
    /// between creating `dir` and creating the temp file, the directory is created again (a
    /// few attempts).
    fn write_temp(
        &self,
        key: &str,
        dir: &Path,
        bytes: &[u8],
        dirs: &mut NewDirs<'_>,
    ) -> Result<PathBuf, Error> {
        let mut suffix = [0u8; 16];
        getrandom::fill(&mut suffix)
            .map_err(|e| Error::io("random", key, io::Error::other(e.to_string())))?;
        let tmp = dir.join(format!("{}{}", temp_stem(key), hex_lower(&suffix)));
        let sync_file = self.per_file() && !self.skipping_flushes();
        let mut attempts = 0u32;
        loop {
            match self.fs.write_new(&tmp, bytes, sync_file) {
                Ok(()) => break,
                // The directory is missing (never created, or removed by a concurrent delete).
                Err(NewFileError::Create(e))
                    if e.kind() == ErrorKind::NotFound && attempts < 64 =>
                {
                    attempts += 1;
                    self.make_dirs(dir, dirs)
                        .map_err(|e| Error::io("create_dir", key, e))?;
                }
                Err(NewFileError::Create(e)) => return Err(Error::io("create_temp", key, e)),
                Err(NewFileError::Write(e)) => return Err(Error::io("write", key, e)),
                Err(NewFileError::Sync(e)) => return Err(Error::io("sync", key, e)),
            }
        }
        if sync_file {
            self.file_fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(tmp)
    }

    #[cfg(test)]
    fn skipping_flushes(&self) -> bool {
        self.skip_flushes
    }

    #[cfg(not(test))]
    fn skipping_flushes(&self) -> bool {
        false
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        if self.skipping_flushes() {
            return Ok(());
        }
        self.dir_fsyncs.fetch_add(1, Ordering::Relaxed);
        self.fs.sync_dir(dir)
    }

    /// Waits for a group flush that started after this call ([`ObjectSync::Syncfs`]).
    fn group_flush(&self, key: &str) -> Result<(), Error> {
        if self.skipping_flushes() {
            return Ok(());
        }
        self.flush
            .wait(|| self.fs.syncfs())
            .map_err(|e| Error::io("syncfs", key, e))
    }

    /// Makes the entries on the path to an object in `dir` durable, with the directories this
    /// call created (`dirs`): a group flush ([`ObjectSync::Syncfs`]), or an `fsync` of `dir`,
    /// of the parent of every directory in `dirs.created`, and of the parent of every ancestor
    /// of `dir` that another caller of this process created and has not yet made durable
    /// ([`ObjectSync::PerFile`]), deepest first.
    fn make_durable(&self, key: &str, dir: &Path, dirs: &mut NewDirs<'_>) -> Result<(), Error> {
        if !self.per_file() {
            self.group_flush(key)?;
            dirs.durable = true;
            return Ok(());
        }
        let mut to_sync = vec![dir.to_path_buf()];
        to_sync.extend(dirs.created.iter().map(|d| parent_dir(d)));
        {
            let unsynced = self.unsynced();
            if !unsynced.is_empty() {
                for a in dir.ancestors().take_while(|a| a.starts_with(&self.root)) {
                    if unsynced.contains_key(a) {
                        to_sync.push(parent_dir(a));
                    }
                }
            }
        }
        to_sync.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        to_sync.dedup();
        for d in &to_sync {
            self.sync_dir(d)
                .map_err(|e| Error::io("sync_dir", key, e))?;
        }
        dirs.durable = true;
        Ok(())
    }

    /// Removes the directories on the path to `key` that are now empty, deepest first, up to
    /// (not including) the root, stopping at the first one that is not empty. Without this every
    /// deleted revision would leave its `<revision>/blocks/` directories behind for good, and
    /// every listing would walk them. Best effort and not synced: a directory a crash brings
    /// back is empty and harmless, and a writer that creates a removed directory again makes
    /// its new entry durable itself.
    fn prune_empty_parents(&self, key: &str) {
        let mut rel = key.rfind('/').map_or("", |i| &key[..i]);
        while !rel.is_empty() {
            // Fails with ENOTEMPTY while anything (an object, a temp file, a subdirectory) is
            // inside, and NotFound when a concurrent deleter was first.
            if self.fs.remove_dir(&self.root.join(rel)).is_err() {
                break;
            }
            rel = rel.rfind('/').map_or("", |i| &rel[..i]);
        }
    }

    /// Opens an existing object file for reading and returns it with its size in bytes.
    fn open_object(&self, key: &str) -> Result<(Box<dyn ObjectFile>, u64), Error> {
        validate_key(key)?;
        let not_found = || Error::NotFound {
            key: key.to_owned(),
        };
        let file = match self.fs.open_read(&self.root.join(key)) {
            Ok(f) => f,
            Err(e) if is_absent(&e) => return Err(not_found()),
            Err(e) => return Err(Error::io("open", key, e)),
        };
        let stat = file.stat().map_err(|e| Error::io("stat", key, e))?;
        if stat.kind != Kind::File {
            // A directory (an intermediate key segment) is not an object.
            return Err(not_found());
        }
        Ok((file, stat.len))
    }

    /// `put_if_absent` found an object at `target`: waits while a caller of this process that
    /// linked it still waits for its flush ([`ObjectSync::Syncfs`]), then makes the object
    /// durable and reports it — or `None` when it is gone by then (that caller's flush failed
    /// and it removed the object, or a delete did): the put-if-absent goes on to write.
    fn existing_object(
        &self,
        key: &str,
        target: &Path,
        dir: &Path,
        dirs: &mut NewDirs<'_>,
    ) -> Result<Option<PutOutcome>, Error> {
        self.wait_for_linkers(target);
        if !self.is_object_file(target) {
            return Ok(None);
        }
        // Its writer may not have made it durable yet; make sure before reporting it.
        self.make_durable(key, dir, dirs)?;
        Ok(Some(PutOutcome::AlreadyExists))
    }

    /// Registers a link of `target` about to be made ([`ObjectSync::Syncfs`]); the returned
    /// guard unregisters it (after the link's flush and any removal) and wakes the waiters.
    fn start_linking<'a>(&'a self, target: &Path) -> Linking<'a> {
        if self.per_file() {
            return Linking {
                store: self,
                target: None,
            };
        }
        *self.linking().entry(target.to_path_buf()).or_insert(0) += 1;
        Linking {
            store: self,
            target: Some(target.to_path_buf()),
        }
    }

    fn wait_for_linkers(&self, target: &Path) {
        if self.per_file() {
            return;
        }
        let mut linking = self.linking();
        while linking.contains_key(target) {
            linking = self.linked.wait(linking).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn linking(&self) -> MutexGuard<'_, HashMap<PathBuf, usize>> {
        // Nothing panics while holding the lock; a poisoned lock still holds a consistent map.
        self.linking.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Is there a regular file (not following symlinks) at `path`?
    fn is_object_file(&self, path: &Path) -> bool {
        self.fs
            .stat(path, false)
            .is_ok_and(|s| s.kind == Kind::File)
    }

    /// Removes the temp files named for `key` in `dir` (a writer of `key` killed mid-upload
    /// leaves one). Errors: `Io` when the directory cannot be read or a temp file cannot be
    /// removed.
    fn remove_own_temps(&self, key: &str, dir: &Path) -> Result<(), Error> {
        let stem = temp_stem(key);
        let entries = match self.fs.read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if is_absent(&e) => return Ok(()),
            Err(e) => return Err(Error::io("read_dir", key, e)),
        };
        for (name, _) in entries {
            if name.to_string_lossy().starts_with(&stem) {
                match self.fs.remove_file(&dir.join(&name)) {
                    Ok(()) => {}
                    Err(e) if is_absent(&e) => {}
                    Err(e) => return Err(Error::io("remove", key, e)),
                }
            }
        }
        Ok(())
    }
}

impl ObjectStore for LocalDir {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), Error> {
        let target = self.object_path(key)?;
        let dir = parent_dir(&target);
        let mut dirs = self.new_dirs();
        let tmp = self.write_temp(key, &dir, bytes, &mut dirs)?;
        if !self.per_file() {
            // The bytes are durable before the rename can replace an existing object.
            if let Err(e) = self.group_flush(key) {
                let _ = self.fs.remove_file(&tmp);
                return Err(e);
            }
        }
        if let Err(e) = self.fs.rename(&tmp, &target) {
            let _ = self.fs.remove_file(&tmp);
            return Err(Error::io("rename", key, e));
        }
        self.make_durable(key, &dir, &mut dirs)
    }

    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, Error> {
        let target = self.object_path(key)?;
        let dir = parent_dir(&target);
        let mut dirs = self.new_dirs();
        // Each new round follows an object that vanished under us: its writer's flush failed
        // (it removed the object), or a concurrent delete removed it.
        for _ in 0..MAX_VANISHED {
            // Fast path: skip writing the bytes when the object is already there.
            if self.is_object_file(&target) {
                match self.existing_object(key, &target, &dir, &mut dirs)? {
                    Some(outcome) => return Ok(outcome),
                    None => continue,
                }
            }
            let tmp = self.write_temp(key, &dir, bytes, &mut dirs)?;
            let linking = self.start_linking(&target);
            let linked = self.fs.hard_link(&tmp, &target);
            // The temp name is invisible either way; a failed removal only leaves garbage.
            let _ = self.fs.remove_file(&tmp);
            match linked {
                Ok(()) => {
                    return match self.make_durable(key, &dir, &mut dirs) {
                        Ok(()) => Ok(PutOutcome::Created),
                        Err(e) => {
                            if !self.per_file() {
                                // Nothing can vouch for these bytes any more (module docs);
                                // callers waiting on `linking` then find the key absent.
                                let _ = self.fs.remove_file(&target);
                            }
                            drop(linking);
                            Err(e)
                        }
                    };
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    drop(linking);
                    if !self.is_object_file(&target) {
                        // Something that is not an object (a directory) occupies the key.
                        return Err(Error::io("link", key, e));
                    }
                    if let Some(outcome) = self.existing_object(key, &target, &dir, &mut dirs)? {
                        return Ok(outcome);
                    }
                }
                Err(e) => return Err(Error::io("link", key, e)),
            }
        }
        Err(Error::io(
            "link",
            key,
            io::Error::other("the object under the key kept vanishing"),
        ))
    }

    fn get(&self, key: &str) -> Result<Vec<u8>, Error> {
        let (mut file, size) = self.open_object(key)?;
        let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.read_to_end(&mut buf)
            .map_err(|e| Error::io("read", key, e))?;
        Ok(buf)
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>, Error> {
        let (file, size) = self.open_object(key)?;
        let out_of_bounds = |size| Error::RangeOutOfBounds {
            key: key.to_owned(),
            offset,
            len,
            size,
        };
        match offset.checked_add(len) {
            Some(end) if end <= size => {}
            _ => return Err(out_of_bounds(size)),
        }
        let n = usize::try_from(len).map_err(|_| out_of_bounds(size))?;
        let mut buf = vec![0u8; n];
        match file.read_exact_at(&mut buf, offset) {
            Ok(()) => Ok(buf),
            // Only possible if the file shrank under us; objects are never truncated in place.
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => Err(out_of_bounds(size)),
            Err(e) => Err(Error::io("read", key, e)),
        }
    }

    fn head(&self, key: &str) -> Result<Option<ObjectMeta>, Error> {
        let path = self.object_path(key)?;
        match self.fs.stat(&path, true) {
            Ok(s) if s.kind == Kind::File => Ok(Some(ObjectMeta::new(s.len))),
            Ok(_) => Ok(None),
            Err(e) if is_absent(&e) => Ok(None),
            Err(e) => Err(Error::io("stat", key, e)),
        }
    }

    fn delete(&self, key: &str) -> Result<(), Error> {
        let path = self.object_path(key)?;
        match self.fs.stat(&path, false) {
            Ok(s) if s.kind == Kind::Dir => return Ok(()), // not an object
            Ok(_) => match self.fs.remove_file(&path) {
                Ok(()) => {}
                Err(e) if is_absent(&e) => {}
                Err(e) => return Err(Error::io("remove", key, e)),
            },
            Err(e) if is_absent(&e) => {}
            Err(e) => return Err(Error::io("stat", key, e)),
        }
        let dir = parent_dir(&path);
        // Temp files of this key left by a writer that died before its rename/link.
        self.remove_own_temps(key, &dir)?;
        // Make the removal (ours or a concurrent deleter's) durable before returning.
        if self.per_file() {
            match self.sync_dir(&dir) {
                Ok(()) => {}
                Err(e) if is_absent(&e) => {}
                Err(e) => return Err(Error::io("sync_dir", key, e)),
            }
        } else {
            self.group_flush(key)?;
        }
        self.prune_empty_parents(key);
        Ok(())
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, Error> {
        let Some(start) = list_dir_part(prefix)? else {
            return Ok(Vec::new());
        };
        let mut keys = Vec::new();
        let mut stack = vec![start.to_owned()];
        while let Some(rel) = stack.pop() {
            let dir = if rel.is_empty() {
                self.root.clone()
            } else {
                self.root.join(&rel)
            };
            let entries = match self.fs.read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if is_absent(&e) => continue,
                Err(e) => return Err(Error::io("read_dir", &rel, e)),
            };
            for (name, kind) in entries {
                let Some(name) = name.to_str().map(str::to_owned) else {
                    continue; // not UTF-8: cannot be an object key
                };
                let key = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                // Below the start directory, a matching entry's descendants all match too.
                // validate_key skips temp files, foreign names and anything longer than a key.
                if !key.starts_with(prefix) || validate_key(&key).is_err() {
                    continue;
                }
                match kind {
                    Kind::Dir => stack.push(key),
                    Kind::File => keys.push(key),
                    // Symlinks and special files are never objects.
                    Kind::Other => {}
                }
            }
        }
        keys.sort_unstable();
        Ok(keys)
    }

    fn provider_name(&self) -> &'static str {
        "local"
    }
}

/// Temp-file name stem of `key`: `.tmp-<first 8 bytes of SHA-256(final file name), hex>-`.
fn temp_stem(key: &str) -> String {
    let name = key.rsplit('/').next().unwrap_or(key);
    let mut stream = crate::digest::Sha256Stream::new();
    stream.update(name.as_bytes());
    let digest = stream.finish_bytes();
    format!("{TEMP_PREFIX}{}-", hex_lower(&digest[..8]))
}
