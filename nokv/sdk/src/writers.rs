//! Writer registrations: which writer processes of a store are alive (a leaf: files only).
//!
//! With the holt writer lock shared between processes ([`crate::ClientOptions::
//! writer_idle_release`]), a Publish operation or a revision reservation that this handle does
//! not run is no longer necessarily orphaned: another live process may be uploading its object
//! right now. Every writer handle of a holt store therefore holds an exclusive flock on a
//! registration file, `<store>/writers/<32 hex digits>.lock`, for as long as it lives (the kernel
//! releases it when the process exits or is killed). A recovery pass takes
//! [`Registration::others_alive`]: another registration whose flock is still held means a live writer, and
//! the pass leaves every operation and reservation it does not run itself for a later pass;
//! registration files whose flock can be taken belong to dead processes and are removed. So the work
//! a dead process left is recovered by the next recovery pass that finds no other writer alive
//! (every writer open runs one; `nokv operation recover` runs one on demand). See
//! docs/design.md, "Many processes on one store".

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The directory of the registration files, under the store directory.
pub const WRITERS_DIR: &str = "writers";

/// This handle's registration: its file, flocked until the handle is dropped.
#[derive(Debug)]
pub(crate) struct Registration {
    file: File,
    path: PathBuf,
}

impl Registration {
    /// Creates and flocks a new registration file under `<store>/writers/`.
    /// Errors: [`Error::LocalIo`] when the directory or the file cannot be created or locked.
    pub(crate) fn start(store: &Path) -> Result<Registration> {
        let dir = store.join(WRITERS_DIR);
        std::fs::create_dir_all(&dir).map_err(|source| Error::LocalIo {
            op: "create the writers directory",
            path: dir.clone(),
            source,
        })?;
        let id = meta::OperationId::random().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let path = dir.join(format!("{}.lock", id.to_hex()));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|source| Error::LocalIo {
                op: "create a writer registration file",
                path: path.clone(),
                source,
            })?;
        file.try_lock().map_err(|e| Error::LocalIo {
            op: "lock a writer registration file",
            path: path.clone(),
            source: match e {
                std::fs::TryLockError::Error(e) => e,
                std::fs::TryLockError::WouldBlock => std::io::ErrorKind::WouldBlock.into(),
            },
        })?;
        Ok(Registration { file, path })
    }

    /// How many other writer registrations of this store are alive (their flock is held). Files of
    /// dead writers are removed on the way. A directory that cannot be listed counts as one
    /// live writer (the caller then leaves other processes' work alone).
    pub(crate) fn others_alive(&self) -> u64 {
        let Some(dir) = self.path.parent() else {
            return 1;
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 1;
        };
        let mut alive = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            if path == self.path || path.extension().is_none_or(|e| e != "lock") {
                continue;
            }
            let Ok(file) = File::open(&path) else {
                // Removed by its owner or another pass meanwhile.
                continue;
            };
            match file.try_lock() {
                Ok(()) => {
                    // Dead: nobody holds it. Removing it while holding the flock is safe (a
                    // registration never locks an existing file again).
                    let _ = std::fs::remove_file(&path);
                }
                Err(_) => alive += 1,
            }
        }
        alive
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}
