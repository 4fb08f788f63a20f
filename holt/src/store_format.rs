//! The store format marker `dir/FORMAT`.
//!
//! Format 2 (this version) stores hold one line, `holt store format 2\n`, written once when the
//! store is created (or upgraded) and never rewritten. In a format-2 store every WAL segment
//! starts with a header (`wal::record::SEGMENT_HEADER_LEN` bytes) and is created atomically,
//! header included (written to a `.tmp` name, fdatasynced, renamed, directory fsynced), and a
//! flush or checkpoint creates the segment that follows the image *before* it writes the image.
//! Recovery can therefore tell a missing, emptied or overwritten segment from a log that simply
//! ends: the segment starting right after the images' last LSN must exist and every segment it
//! reads must carry a valid header, otherwise the open fails with `Error::Corrupt` instead of
//! silently dropping acknowledged records.
//!
//! A store without the file is format 1 (written before the marker existed): its segments may
//! lack the header and the successor segment may be absent, so those checks do not apply. A
//! writer opening a non-empty format-1 store upgrades it at open (`Db::open`).

use std::io::ErrorKind;
use std::path::Path;

use crate::error::{Error, Result};
use crate::vfs::{self, WalFs};

/// File name of the marker inside the store directory.
pub(crate) const FILE: &str = "FORMAT";
const PREFIX: &str = "holt store format ";
/// The format this version writes.
const CURRENT: u32 = 2;

/// Which on-disk rules a store follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StoreFormat {
    /// No marker: segments may lack headers; a missing successor segment is not detectable.
    V1,
    /// Headed segments, created atomically; the successor of the images always exists.
    V2,
}

/// Reads the marker of the store in `dir` (format 1 when there is none).
/// Errors: `Corrupt` for a marker that is not one line `holt store format N`; `Unsupported` for
/// a format newer than this version; `Io` when the file cannot be read.
pub(crate) fn read(fs: &dyn WalFs, dir: &Path) -> Result<StoreFormat> {
    let path = dir.join(FILE);
    let data = match fs.read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(StoreFormat::V1),
        Err(e) => return Err(Error::io("read", &path, e)),
    };
    let number = std::str::from_utf8(&data)
        .ok()
        .and_then(|t| t.strip_prefix(PREFIX))
        .and_then(|t| t.strip_suffix('\n'))
        .and_then(|n| n.parse::<u32>().ok());
    match number {
        Some(2) => Ok(StoreFormat::V2),
        Some(n) if n > CURRENT => Err(Error::Unsupported(format!(
            "{}: store format {n} is newer than this holt (format {CURRENT})",
            path.display()
        ))),
        _ => Err(Error::corrupt(
            &path,
            0,
            format!("not a store format marker ({} bytes)", data.len()),
        )),
    }
}

/// Writes the format-2 marker atomically: `FORMAT.tmp`, fdatasync, rename, directory fsync.
/// Errors: `Io` naming the failed operation.
pub(crate) fn write(fs: &dyn WalFs, dir: &Path) -> Result<()> {
    let line = format!("{PREFIX}{CURRENT}\n");
    vfs::create_whole(fs, dir, FILE, line.as_bytes()).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_round_trips_and_bad_markers_are_typed() {
        let dir = tempfile::tempdir().unwrap();
        let os = crate::vfs::os();
        assert_eq!(read(&*os, dir.path()).unwrap(), StoreFormat::V1);
        write(&*os, dir.path()).unwrap();
        assert_eq!(read(&*os, dir.path()).unwrap(), StoreFormat::V2);
        assert!(!dir.path().join("FORMAT.tmp").exists());
        std::fs::write(dir.path().join(FILE), "holt store format 9\n").unwrap();
        assert!(matches!(
            read(&*os, dir.path()),
            Err(Error::Unsupported(m)) if m.contains("format 9")
        ));
        for bad in [&b""[..], b"holt store format 2", b"\xff\xfe", b"format 2\n"] {
            std::fs::write(dir.path().join(FILE), bad).unwrap();
            assert!(matches!(read(&*os, dir.path()), Err(Error::Corrupt { .. })));
        }
    }
}
