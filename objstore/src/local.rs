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
//! 1. create missing parent directories;
//! 2. write all bytes to a fresh temp file in the target's directory, then `fsync` it;
//! 3. `put`: rename the temp file over the target (atomic replace);
//!    `put_if_absent`: hard-link the temp file to the target (fails with `EEXIST` if present,
//!    which is the CAS on absence), then remove the temp name;
//! 4. `fsync` the target's directory, and every ancestor directory up to the root until one is
//!    already known durable, so newly created directory entries survive a crash too.
//!
//! An object file is never modified after it becomes visible, so readers see the old or the
//! new bytes, never a mix.
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

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::digest::hex_lower;
use crate::error::Error;
use crate::keys::{list_dir_part, validate_key, TEMP_PREFIX};
use crate::store::{ObjectMeta, ObjectStore, PutOutcome};

/// Upper bound on remembered durable directories; the set is simply cleared when full, which
/// only costs a few extra directory fsyncs.
const MAX_KNOWN_DURABLE_DIRS: usize = 4096;

/// Object provider over a local directory (see the module docs for layout and durability).
///
/// Safe to share between threads; concurrent writers of the same key each leave a complete
/// object (last rename wins for `put`, exactly one `Created` for `put_if_absent`).
pub struct LocalDir {
    root: PathBuf,
    /// Relative directory paths whose own entry in their parent is known to be durable in this
    /// process, and the count of directory removals (see [`DurableDirs`]).
    durable_dirs: Mutex<DurableDirs>,
}

/// The directories known durable (`""` = root, `"nokv/artifacts"`, ...), and `removals`,
/// bumped whenever `delete` is about to remove a directory it emptied. A writer that made
/// directories durable records them only if no removal began meanwhile (else one of them may
/// be gone by now, and a later writer that recreated it would skip its fsync).
struct DurableDirs {
    known: HashSet<String>,
    removals: u64,
}

impl DurableDirs {
    fn new() -> Self {
        DurableDirs {
            known: HashSet::from([String::new()]),
            removals: 0,
        }
    }
}

impl std::fmt::Debug for LocalDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalDir")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// Is this I/O error "the path does not name an existing object"?
fn is_absent(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory)
}

fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

impl LocalDir {
    /// Opens (creating if needed, like `mkdir -p`) a provider rooted at `root`. Newly created
    /// directories are fsynced together with their parents.
    ///
    /// Errors: [`Error::Io`] (with an empty key) when the directory cannot be created or synced.
    pub fn open(root: impl AsRef<Path>) -> Result<LocalDir, Error> {
        let root = root.as_ref().to_path_buf();
        let io_err = |op, e| Error::io(op, "", e);
        // Directories `create_dir_all` is about to create, deepest first.
        let missing: Vec<PathBuf> = root
            .ancestors()
            .take_while(|p| !p.as_os_str().is_empty() && !p.is_dir())
            .map(Path::to_path_buf)
            .collect();
        fs::create_dir_all(&root).map_err(|e| io_err("create_dir", e))?;
        sync_dir(&root).map_err(|e| io_err("sync_dir", e))?;
        // Each new directory's entry becomes durable when its parent is synced.
        for dir in &missing {
            let parent = dir
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            sync_dir(parent).map_err(|e| io_err("sync_dir", e))?;
        }
        Ok(LocalDir {
            root,
            durable_dirs: Mutex::new(DurableDirs::new()),
        })
    }

    /// A provider rooted at `root` for reading only: nothing on disk is created, synced or
    /// otherwise touched (a read-only file system, another user's files). Reads behave like on
    /// a provider from [`LocalDir::open`] (a missing `root` reads as missing objects); writes
    /// fail with the file system's error.
    pub fn open_existing(root: impl AsRef<Path>) -> LocalDir {
        LocalDir {
            root: root.as_ref().to_path_buf(),
            durable_dirs: Mutex::new(DurableDirs::new()),
        }
    }

    /// The root directory objects are stored under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The filesystem path that stores `key` (`<root>/<key>`), whether or not it exists.
    /// Meant for tests and diagnostics (e.g. corrupting a block on disk).
    ///
    /// Errors: [`Error::InvalidKey`] when `key` fails [`validate_key`].
    pub fn object_path(&self, key: &str) -> Result<PathBuf, Error> {
        validate_key(key)?;
        Ok(self.root.join(key))
    }

    fn known_dirs(&self) -> MutexGuard<'_, DurableDirs> {
        // A poisoned lock only means another thread panicked mid-insert; the set is a cache.
        self.durable_dirs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `bytes` to a new, fsynced temp file in `dir` (creating `dir` and its missing
    /// ancestors first) and returns its path. A `delete` that empties a directory removes it
    /// ([`LocalDir::prune_empty_parents`]); if that happens between creating `dir` and creating
    /// the temp file, the directory is created again (a few attempts).
    fn write_temp(&self, key: &str, dir: &Path, bytes: &[u8]) -> Result<PathBuf, Error> {
        let mut suffix = [0u8; 16];
        getrandom::fill(&mut suffix)
            .map_err(|e| Error::io("random", key, io::Error::other(e.to_string())))?;
        let tmp = dir.join(format!("{}{}", temp_stem(key), hex_lower(&suffix)));
        // A concurrent delete may remove a directory on the way: the temp file's creation then
        // fails with NotFound, and so may `create_dir_all` (between creating a parent and its
        // child), or with AlreadyExists (its mkdir met the directory, gone by the time it
        // checked that it is one). Both are retried; a file occupying the path still fails once
        // the attempts are used up.
        let mut attempts = 0u32;
        let mut file = loop {
            let vanished =
                |e: &io::Error| matches!(e.kind(), ErrorKind::NotFound | ErrorKind::AlreadyExists);
            match fs::create_dir_all(dir) {
                Ok(()) => {}
                Err(e) if vanished(&e) && attempts < 64 => {
                    attempts += 1;
                    continue;
                }
                Err(e) => return Err(Error::io("create_dir", key, e)),
            }
            match OpenOptions::new().write(true).create_new(true).open(&tmp) {
                Ok(file) => break file,
                Err(e) if e.kind() == ErrorKind::NotFound && attempts < 64 => attempts += 1,
                Err(e) => return Err(Error::io("create_temp", key, e)),
            }
        };
        let written = file
            .write_all(bytes)
            .map_err(|e| Error::io("write", key, e))
            .and_then(|()| file.sync_all().map_err(|e| Error::io("sync", key, e)));
        if let Err(e) = written {
            drop(file);
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(tmp)
    }

    /// Makes the directory entries on the path to `key` durable: fsyncs the key's directory,
    /// then walks up, fsyncing each parent until reaching a directory whose own entry is
    /// already known durable (the root always is).
    fn sync_parents(&self, key: &str) -> Result<(), Error> {
        let mut rel = key.rfind('/').map_or("", |i| &key[..i]);
        let removals = self.known_dirs().removals;
        let mut newly_durable = Vec::new();
        loop {
            let dir = if rel.is_empty() {
                self.root.clone()
            } else {
                self.root.join(rel)
            };
            sync_dir(&dir).map_err(|e| Error::io("sync_dir", key, e))?;
            if rel.is_empty() || self.known_dirs().known.contains(rel) {
                break;
            }
            // Syncing the parent next makes `rel`'s own entry durable.
            newly_durable.push(rel.to_owned());
            rel = rel.rfind('/').map_or("", |i| &rel[..i]);
        }
        let mut dirs = self.known_dirs();
        // A removal that began meanwhile may have taken one of these directories away again.
        if !newly_durable.is_empty() && dirs.removals == removals {
            if dirs.known.len() + newly_durable.len() > MAX_KNOWN_DURABLE_DIRS {
                dirs.known.retain(String::is_empty);
            }
            dirs.known.extend(newly_durable);
        }
        Ok(())
    }

    /// Removes the directories on the path to `key` that are now empty, deepest first, up to
    /// (not including) the root, stopping at the first one that is not empty. Without this every
    /// deleted revision would leave its `<revision>/blocks/` directories behind for good, and
    /// every listing would walk them. Best effort and not synced: a directory a crash brings
    /// back is empty and harmless. Each directory is forgotten as durable *before* it is
    /// removed, so a writer that creates it again fsyncs its entry again ([`Self::sync_parents`]).
    fn prune_empty_parents(&self, key: &str) {
        let mut rel = key.rfind('/').map_or("", |i| &key[..i]);
        while !rel.is_empty() {
            {
                let mut dirs = self.known_dirs();
                dirs.known.remove(rel);
                dirs.removals += 1;
            }
            // Fails with ENOTEMPTY while anything (an object, a temp file, a subdirectory) is
            // inside, and NotFound when a concurrent deleter was first.
            if fs::remove_dir(self.root.join(rel)).is_err() {
                break;
            }
            rel = rel.rfind('/').map_or("", |i| &rel[..i]);
        }
    }

    /// Opens an existing object file for reading and returns it with its size in bytes.
    fn open_object(&self, key: &str) -> Result<(File, u64), Error> {
        validate_key(key)?;
        let not_found = || Error::NotFound {
            key: key.to_owned(),
        };
        let file = match File::open(self.root.join(key)) {
            Ok(f) => f,
            Err(e) if is_absent(&e) => return Err(not_found()),
            Err(e) => return Err(Error::io("open", key, e)),
        };
        let meta = file.metadata().map_err(|e| Error::io("stat", key, e))?;
        if !meta.is_file() {
            // A directory (an intermediate key segment) is not an object.
            return Err(not_found());
        }
        Ok((file, meta.len()))
    }
}

impl ObjectStore for LocalDir {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), Error> {
        let target = self.object_path(key)?;
        let dir = target.parent().unwrap_or(&self.root).to_path_buf();
        let tmp = self.write_temp(key, &dir, bytes)?;
        if let Err(e) = fs::rename(&tmp, &target) {
            let _ = fs::remove_file(&tmp);
            return Err(Error::io("rename", key, e));
        }
        self.sync_parents(key)
    }

    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, Error> {
        let target = self.object_path(key)?;
        // Fast path: skip writing the bytes when the object is already there.
        if fs::symlink_metadata(&target).is_ok_and(|m| m.is_file()) {
            // Another writer may not have synced its directory yet; make it durable first.
            self.sync_parents(key)?;
            return Ok(PutOutcome::AlreadyExists);
        }
        let dir = target.parent().unwrap_or(&self.root).to_path_buf();
        let tmp = self.write_temp(key, &dir, bytes)?;
        let linked = fs::hard_link(&tmp, &target);
        // The temp name is invisible either way; a failed removal only leaves garbage.
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                self.sync_parents(key)?;
                Ok(PutOutcome::Created)
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                if fs::symlink_metadata(&target).is_ok_and(|m| m.is_file()) {
                    self.sync_parents(key)?;
                    Ok(PutOutcome::AlreadyExists)
                } else {
                    // Something that is not an object (a directory) occupies the key.
                    Err(Error::io("link", key, e))
                }
            }
            Err(e) => Err(Error::io("link", key, e)),
        }
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
        match fs::metadata(path) {
            Ok(m) if m.is_file() => Ok(Some(ObjectMeta::new(m.len()))),
            Ok(_) => Ok(None),
            Err(e) if is_absent(&e) => Ok(None),
            Err(e) => Err(Error::io("stat", key, e)),
        }
    }

    fn delete(&self, key: &str) -> Result<(), Error> {
        let path = self.object_path(key)?;
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => return Ok(()), // not an object
            Ok(_) => match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if is_absent(&e) => {}
                Err(e) => return Err(Error::io("remove", key, e)),
            },
            Err(e) if is_absent(&e) => {}
            Err(e) => return Err(Error::io("stat", key, e)),
        }
        let dir = path.parent().unwrap_or(&self.root);
        // Temp files of this key left by a writer that died before its rename/link.
        remove_own_temps(key, dir)?;
        // Make the removal (ours or a concurrent deleter's) durable before returning.
        match sync_dir(dir) {
            Ok(()) => {}
            Err(e) if is_absent(&e) => {}
            Err(e) => return Err(Error::io("sync_dir", key, e)),
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
            let entries = match fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if is_absent(&e) => continue,
                Err(e) => return Err(Error::io("read_dir", &rel, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| Error::io("read_dir", &rel, e))?;
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
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
                let kind = entry.file_type().map_err(|e| Error::io("stat", &key, e))?;
                if kind.is_dir() {
                    stack.push(key);
                } else if kind.is_file() {
                    keys.push(key);
                }
                // Symlinks and special files are never objects.
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

/// Removes the temp files named for `key` in `dir` (a writer of `key` killed mid-upload leaves
/// one). Errors: `Io` when the directory cannot be read or a temp file cannot be removed.
fn remove_own_temps(key: &str, dir: &Path) -> Result<(), Error> {
    let stem = temp_stem(key);
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if is_absent(&e) => return Ok(()),
        Err(e) => return Err(Error::io("read_dir", key, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read_dir", key, e))?;
        if entry.file_name().to_string_lossy().starts_with(&stem) {
            match fs::remove_file(entry.path()) {
                Ok(()) => {}
                Err(e) if is_absent(&e) => {}
                Err(e) => return Err(Error::io("remove", key, e)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every directory under `root`, relative, sorted.
    fn dirs_under(root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() {
                    out.push(e.path().strip_prefix(root).unwrap().display().to_string());
                    stack.push(e.path());
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn delete_removes_the_directories_it_empties_up_to_the_root() {
        let root = tempfile::tempdir().unwrap();
        let store = LocalDir::open(root.path()).unwrap();
        store.put("a/b/c/k1", b"1").unwrap();
        store.put("a/b/c/k2", b"2").unwrap();
        store.put("a/x/k3", b"3").unwrap();
        assert!(store.known_dirs().known.contains("a/b/c"));

        store.delete("a/b/c/k1").unwrap();
        assert_eq!(dirs_under(root.path()), ["a", "a/b", "a/b/c", "a/x"]);
        // The last object of a directory takes the directories it emptied with it.
        store.delete("a/b/c/k2").unwrap();
        assert_eq!(dirs_under(root.path()), ["a", "a/x"]);
        assert!(!store.known_dirs().known.contains("a/b/c"));
        assert!(!store.known_dirs().known.contains("a/b"));
        store.delete("a/x/k3").unwrap();
        assert!(dirs_under(root.path()).is_empty());
        assert!(root.path().is_dir(), "the root itself stays");
        // Deleting what is already gone is still fine, and the tree can grow again; the
        // recreated directories are synced and known durable again.
        store.delete("a/x/k3").unwrap();
        store.put("a/b/c/k1", b"again").unwrap();
        assert_eq!(store.get("a/b/c/k1").unwrap(), b"again");
        assert_eq!(store.list("a/").unwrap(), ["a/b/c/k1"]);
        assert!(store.known_dirs().known.contains("a/b/c"));
        assert!(store.known_dirs().known.contains("a"));
    }

    #[test]
    fn a_temp_file_or_another_object_keeps_its_directory() {
        let root = tempfile::tempdir().unwrap();
        let store = LocalDir::open(root.path()).unwrap();
        store.put("r/blocks/0", b"0").unwrap();
        // A foreign temp file (another key's upload in flight) is not removed by this delete.
        let foreign = root.path().join("r/blocks").join(format!(
            "{}{}",
            temp_stem("r/blocks/9"),
            "0".repeat(32)
        ));
        fs::write(&foreign, b"partial").unwrap();
        store.delete("r/blocks/0").unwrap();
        assert!(foreign.is_file());
        assert_eq!(dirs_under(root.path()), ["r", "r/blocks"]);
    }

    #[test]
    fn puts_and_deletes_racing_in_one_directory_never_fail() {
        let root = tempfile::tempdir().unwrap();
        let store = LocalDir::open(root.path()).unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let store = &store;
                s.spawn(move || {
                    for n in 0..150 {
                        // Every thread empties the shared directories again and again while the
                        // others create files in them.
                        let key = format!("nokv/artifacts/rev/blocks/{t}-{n}");
                        store.put(&key, b"x").unwrap();
                        if n % 3 == 0 {
                            assert_eq!(
                                store.put_if_absent(&key, b"x").unwrap(),
                                PutOutcome::AlreadyExists
                            );
                        }
                        assert_eq!(store.get(&key).unwrap(), b"x");
                        store.delete(&key).unwrap();
                    }
                    // One object per thread stays.
                    let key = format!("nokv/artifacts/rev/blocks/{t}-last");
                    assert_eq!(
                        store.put_if_absent(&key, b"y").unwrap(),
                        PutOutcome::Created
                    );
                });
            }
        });
        assert_eq!(store.list("nokv/").unwrap().len(), 4);
        for t in 0..4 {
            store
                .delete(&format!("nokv/artifacts/rev/blocks/{t}-last"))
                .unwrap();
        }
        assert!(dirs_under(root.path()).is_empty());
    }

    #[test]
    fn delete_removes_the_keys_own_leftover_temp_files_and_no_others() {
        let root = tempfile::tempdir().unwrap();
        let store = LocalDir::open(root.path()).unwrap();
        let dir = root.path().join("nokv/artifacts/s/r/rev/blocks");
        fs::create_dir_all(&dir).unwrap();
        // What a writer of block 3 killed before its rename leaves behind, next to an
        // in-flight temp of block 4 and a published block 5.
        let dead = dir.join(format!(
            "{}{}",
            temp_stem("nokv/artifacts/s/r/rev/blocks/3"),
            "0".repeat(32)
        ));
        let other = dir.join(format!(
            "{}{}",
            temp_stem("nokv/artifacts/s/r/rev/blocks/4"),
            "1".repeat(32)
        ));
        fs::write(&dead, b"partial").unwrap();
        fs::write(&other, b"partial").unwrap();
        store
            .put("nokv/artifacts/s/r/rev/blocks/5", b"kept")
            .unwrap();

        store.delete("nokv/artifacts/s/r/rev/blocks/3").unwrap();

        assert!(!dead.exists(), "the deleted key's temp file is gone");
        assert!(other.exists(), "another key's temp file is untouched");
        assert_eq!(
            store.get("nokv/artifacts/s/r/rev/blocks/5").unwrap(),
            b"kept".to_vec()
        );
    }
}
