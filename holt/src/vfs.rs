//! The file layer under the WAL, the image and checkpoint writers and the format marker: the few
//! file-system operations they need, behind a small trait so tests can substitute a
//! fault-injecting simulation (`sim`, test builds only) for the operating system.
//!
//! [`OsFs`] is the real implementation. Helpers here turn the raw calls into the loops the writer
//! needs: [`write_all_at`] retries short writes and `EINTR`/`EAGAIN`, [`sync_data`] retries
//! `EINTR`.

#[cfg(test)]
pub(crate) mod sim;

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How often a write or sync that keeps failing with `EINTR`/`EAGAIN` is retried before the
/// error is returned.
const MAX_RETRIES: u32 = 10_000;

/// One open WAL segment file.
pub(crate) trait WalFile: Send {
    /// Writes up to `buf.len()` bytes at byte offset `off`; returns how many were written (may be
    /// fewer, like `pwrite(2)`).
    fn write_at(&mut self, buf: &[u8], off: u64) -> io::Result<usize>;
    /// `fdatasync(2)`: makes the written bytes (and the size needed to read them) durable.
    fn sync_data(&mut self) -> io::Result<()>;
    /// `ftruncate(2)` to `len` bytes.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
    /// The OS file descriptor, for io_uring submission; `None` for simulated files.
    fn raw_fd(&self) -> Option<RawFd>;
}

/// The directory and file operations of the WAL.
pub(crate) trait WalFs: Send + Sync {
    /// Creates `path`, failing if it exists (`O_CREAT | O_EXCL`), open for writing.
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn WalFile>>;
    /// Opens the existing file `path` for writing.
    fn open_write(&self, path: &Path) -> io::Result<Box<dyn WalFile>>;
    /// Reads the whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// The paths of the entries of directory `dir` (unsorted).
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    /// Unlinks `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// `rename(2)`: atomically gives file `from` the name `to` (replacing an existing `to`). The
    /// new name is durable only after a `sync_dir` of its directory.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// `fsync(2)` on directory `dir`, making created and removed entries durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The operating system's file system.
pub(crate) struct OsFs;

/// The shared [`OsFs`] instance.
pub(crate) fn os() -> Arc<dyn WalFs> {
    Arc::new(OsFs)
}

struct OsFile(File);

impl WalFile for OsFile {
    fn write_at(&mut self, buf: &[u8], off: u64) -> io::Result<usize> {
        self.0.write_at(buf, off)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.0.as_raw_fd())
    }
}

impl WalFs for OsFs {
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn WalFile>> {
        let f = OpenOptions::new().write(true).create_new(true).open(path)?;
        Ok(Box::new(OsFile(f)))
    }

    fn open_write(&self, path: &Path) -> io::Result<Box<dyn WalFile>> {
        let f = OpenOptions::new().write(true).open(path)?;
        Ok(Box::new(OsFile(f)))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect()
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// Is `e` a transient error worth retrying (`EINTR`, `EAGAIN`)?
pub(crate) fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
    )
}

/// Writes all of `buf` at `off`, continuing after short writes and retrying `EINTR`/`EAGAIN`.
/// A write that makes no progress fails with `ErrorKind::WriteZero`.
pub(crate) fn write_all_at(file: &mut dyn WalFile, mut buf: &[u8], mut off: u64) -> io::Result<()> {
    let mut retries = 0;
    while !buf.is_empty() {
        match file.write_at(buf, off) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "pwrite wrote 0 bytes",
                ))
            }
            Ok(n) => {
                let n = n.min(buf.len());
                buf = &buf[n..];
                off += n as u64;
                retries = 0;
            }
            Err(e) if is_transient(&e) && retries < MAX_RETRIES => retries += 1,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `fdatasync`, retrying `EINTR`/`EAGAIN`.
pub(crate) fn sync_data(file: &mut dyn WalFile) -> io::Result<()> {
    let mut retries = 0;
    loop {
        match file.sync_data() {
            Err(e) if is_transient(&e) && retries < MAX_RETRIES => retries += 1,
            other => return other,
        }
    }
}

/// Creates `dir/name` holding exactly `bytes`, atomically: the bytes go to `dir/name.tmp` (a
/// stale one is replaced), are fdatasynced, the file is renamed over `dir/name` and `dir` is
/// fsynced — after a crash the name holds either nothing (or its previous file) or all of
/// `bytes`. Returns the path. Used for WAL segment headers and the store format marker.
/// Errors: `Io` naming the failed operation.
pub(crate) fn create_whole(
    fs: &dyn WalFs,
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> crate::error::Result<PathBuf> {
    use crate::error::Error;
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    match fs.remove(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("unlink", &tmp, e)),
    }
    let mut file = fs
        .create_new(&tmp)
        .map_err(|e| Error::io("create", &tmp, e))?;
    write_all_at(&mut *file, bytes, 0).map_err(|e| Error::io("pwrite", &tmp, e))?;
    sync_data(&mut *file).map_err(|e| Error::io("fdatasync", &tmp, e))?;
    drop(file);
    fs.rename(&tmp, &path)
        .map_err(|e| Error::io("rename", &path, e))?;
    fs.sync_dir(dir).map_err(|e| Error::io("fsync", dir, e))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file that accepts at most `chunk` bytes per call and fails every other call with EINTR.
    struct Stingy {
        data: Vec<u8>,
        chunk: usize,
        calls: u32,
    }

    impl WalFile for Stingy {
        fn write_at(&mut self, buf: &[u8], off: u64) -> io::Result<usize> {
            self.calls += 1;
            if self.calls % 2 == 1 {
                return Err(io::Error::from_raw_os_error(libc::EINTR));
            }
            let n = buf.len().min(self.chunk);
            let off = off as usize;
            if self.data.len() < off + n {
                self.data.resize(off + n, 0);
            }
            self.data[off..off + n].copy_from_slice(&buf[..n]);
            Ok(n)
        }
        fn sync_data(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn set_len(&mut self, len: u64) -> io::Result<()> {
            self.data.truncate(len as usize);
            Ok(())
        }
        fn raw_fd(&self) -> Option<RawFd> {
            None
        }
    }

    #[test]
    fn write_all_at_survives_short_writes_and_eintr() {
        let mut f = Stingy {
            data: b"head".to_vec(),
            chunk: 3,
            calls: 0,
        };
        write_all_at(&mut f, b"0123456789", 4).unwrap();
        assert_eq!(f.data, b"head0123456789");
        assert!(f.calls >= 8);
    }
}
