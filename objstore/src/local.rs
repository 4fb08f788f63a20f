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
use crate::keys::{list_dir_part, validate_key, TEMP_PREFIX};
use crate::{Error, ObjectMeta, ObjectStore, PutOutcome};

/// Upper bound on remembered durable directories; the set is simply cleared when full, which
/// only costs a few extra directory fsyncs.
const MAX_KNOWN_DURABLE_DIRS: usize = 4096;

/// Object provider over a local directory (see the module docs for layout and durability).
///
/// Safe to share between threads; concurrent writers of the same key each leave a complete
/// object (last rename wins for `put`, exactly one `Created` for `put_if_absent`).
pub struct LocalDir {
    root: PathBuf,
    /// Relative directory paths (`""` = root, `"nokv/artifacts"`, ...) whose own entry in their
    /// parent is known to be durable in this process.
    durable_dirs: Mutex<HashSet<String>>,
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
        let mut known = HashSet::new();
        known.insert(String::new());
        Ok(LocalDir {
            root,
            durable_dirs: Mutex::new(known),
        })
    }

    /// A provider rooted at `root` for reading only: nothing on disk is created, synced or
    /// otherwise touched (a read-only file system, another user's files). Reads behave like on
    /// a provider from [`LocalDir::open`] (a missing `root` reads as missing objects); writes
    /// fail with the file system's error.
    pub fn open_existing(root: impl AsRef<Path>) -> LocalDir {
        let mut known = HashSet::new();
        known.insert(String::new());
        LocalDir {
            root: root.as_ref().to_path_buf(),
            durable_dirs: Mutex::new(known),
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

    fn known_dirs(&self) -> MutexGuard<'_, HashSet<String>> {
        // A poisoned lock only means another thread panicked mid-insert; the set is a cache.
        self.durable_dirs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates the key's parent directory (and any missing ancestors).
    fn ensure_parent(&self, key: &str, dir: &Path) -> Result<(), Error> {
        fs::create_dir_all(dir).map_err(|e| Error::io("create_dir", key, e))
    }

    /// Writes `bytes` to a new, fsynced temp file in `dir` and returns its path.
    fn write_temp(&self, key: &str, dir: &Path, bytes: &[u8]) -> Result<PathBuf, Error> {
        let mut suffix = [0u8; 16];
        getrandom::fill(&mut suffix)
            .map_err(|e| Error::io("random", key, io::Error::other(e.to_string())))?;
        let tmp = dir.join(format!("{}{}", temp_stem(key), hex_lower(&suffix)));
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| Error::io("create_temp", key, e))?;
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
        let mut newly_durable = Vec::new();
        loop {
            let dir = if rel.is_empty() {
                self.root.clone()
            } else {
                self.root.join(rel)
            };
            sync_dir(&dir).map_err(|e| Error::io("sync_dir", key, e))?;
            if rel.is_empty() || self.known_dirs().contains(rel) {
                break;
            }
            // Syncing the parent next makes `rel`'s own entry durable.
            newly_durable.push(rel.to_owned());
            rel = rel.rfind('/').map_or("", |i| &rel[..i]);
        }
        if !newly_durable.is_empty() {
            let mut known = self.known_dirs();
            if known.len() + newly_durable.len() > MAX_KNOWN_DURABLE_DIRS {
                known.retain(String::is_empty);
            }
            known.extend(newly_durable);
        }
        Ok(())
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
        self.ensure_parent(key, &dir)?;
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
        self.ensure_parent(key, &dir)?;
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
            Ok(()) => Ok(()),
            Err(e) if is_absent(&e) => Ok(()),
            Err(e) => Err(Error::io("sync_dir", key, e)),
        }
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
