//! The few file-system calls [`super::LocalDir`] makes, behind one small trait: [`RealFs`] is
//! the operating system; the power-loss simulation of this crate's tests (`sim.rs`) is the other
//! implementation. Everything `LocalDir` decides about durability lives above this layer, so
//! the simulation exercises exactly the code that runs in production.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// What a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// Anything else (a symlink when not followed, a device, a socket, ...).
    Other,
}

/// A path's kind and, for a regular file, its length in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) kind: Kind,
    pub(crate) len: u64,
}

/// Why [`Fs::write_new`] failed: creating the file (nothing was created), or writing or
/// syncing it (the file was removed again, best effort).
#[derive(Debug)]
pub(crate) enum NewFileError {
    Create(io::Error),
    Write(io::Error),
    Sync(io::Error),
}

/// An open file to read an object from.
pub(crate) trait ObjectFile {
    /// The open file's kind and length (`fstat`).
    fn stat(&self) -> io::Result<Stat>;
    /// Fills `buf` from byte `offset`; `UnexpectedEof` when the file ends first.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Appends the whole file to `buf`.
    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize>;
}

/// The file-system calls of `LocalDir`. Paths are absolute or relative to the process's
/// working directory, exactly as `LocalDir` builds them from its root.
pub(crate) trait Fs: Send + Sync {
    /// `mkdir(2)` of one directory (not its parents): `AlreadyExists` when the name is taken,
    /// `NotFound` when the parent is missing.
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    /// Creates a new file (`O_CREAT | O_EXCL`), writes `bytes`, and with `sync` `fsync`s it.
    fn write_new(&self, path: &Path, bytes: &[u8], sync: bool) -> Result<(), NewFileError>;
    /// `rename(2)`, replacing `to` atomically.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// `link(2)`: `AlreadyExists` when `to` exists.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// `unlink(2)`.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// `rmdir(2)`: fails while the directory has entries.
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    /// `fsync(2)` of a directory: its entries become durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// `syncfs(2)` on the file system of the directory opened by [`Fs::open_syncfs`]: every
    /// file's data and every directory entry written before the call is durable when it
    /// returns `Ok`.
    fn syncfs(&self) -> io::Result<()>;
    /// Opens (once) the directory whose file system [`Fs::syncfs`] flushes. Writeback errors
    /// are reported only to a flush through a descriptor opened before they happened, so this
    /// runs before the first write that a `syncfs` has to vouch for.
    fn open_syncfs(&self, dir: &Path) -> io::Result<()>;
    /// `stat(2)` (`follow`) or `lstat(2)`.
    fn stat(&self, path: &Path, follow: bool) -> io::Result<Stat>;
    /// Opens a file (or a directory: the caller checks the kind) for reading.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ObjectFile>>;
    /// The names in a directory with their kinds (symlinks not followed).
    fn read_dir(&self, path: &Path) -> io::Result<Vec<(OsString, Kind)>>;
}

/// The operating system's file system.
#[derive(Debug, Default)]
pub(crate) struct RealFs {
    /// The directory `syncfs` runs on, opened by [`Fs::open_syncfs`].
    syncfs_dir: std::sync::OnceLock<File>,
}

fn kind_of(t: fs::FileType) -> Kind {
    if t.is_file() {
        Kind::File
    } else if t.is_dir() {
        Kind::Dir
    } else {
        Kind::Other
    }
}

fn stat_of(m: &fs::Metadata) -> Stat {
    Stat {
        kind: kind_of(m.file_type()),
        len: m.len(),
    }
}

impl ObjectFile for File {
    fn stat(&self) -> io::Result<Stat> {
        self.metadata().map(|m| stat_of(&m))
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        Read::read_to_end(self, buf)
    }
}

impl Fs for RealFs {
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }

    fn write_new(&self, path: &Path, bytes: &[u8], sync: bool) -> Result<(), NewFileError> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(NewFileError::Create)?;
        let written = file
            .write_all(bytes)
            .map_err(NewFileError::Write)
            .and_then(|()| {
                if sync {
                    file.sync_all().map_err(NewFileError::Sync)
                } else {
                    Ok(())
                }
            });
        if written.is_err() {
            drop(file);
            let _ = fs::remove_file(path);
        }
        written
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn syncfs(&self) -> io::Result<()> {
        match self.syncfs_dir.get() {
            Some(dir) => rustix::fs::syncfs(dir).map_err(io::Error::from),
            None => Err(io::Error::other(
                "syncfs without a directory opened before the writes it covers",
            )),
        }
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn syncfs(&self) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    fn open_syncfs(&self, dir: &Path) -> io::Result<()> {
        if self.syncfs_dir.get().is_none() {
            let file = File::open(dir)?;
            // A concurrent opener may have won; either descriptor serves.
            let _ = self.syncfs_dir.set(file);
        }
        Ok(())
    }

    fn stat(&self, path: &Path, follow: bool) -> io::Result<Stat> {
        let m = if follow {
            fs::metadata(path)?
        } else {
            fs::symlink_metadata(path)?
        };
        Ok(stat_of(&m))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ObjectFile>> {
        Ok(Box::new(File::open(path)?))
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(OsString, Kind)>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            out.push((entry.file_name(), kind_of(entry.file_type()?)));
        }
        Ok(out)
    }
}
