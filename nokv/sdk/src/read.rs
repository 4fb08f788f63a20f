//! The read path of the SDK: [`Client::stat`], range reads and whole reads — one metadata read
//! (an ART point lookup of the path's current row) and only the blocks a range needs, each
//! verified against its digest.

use std::path::PathBuf;

use meta::{ManifestRow, PathEntry, Reader};

use crate::client::{map_workspace_error, Client};
use crate::error::{Error, Result};

impl Client {
    /// Reads `[offset, offset + len)` of a published body, touching only the blocks it needs and
    /// verifying each block's SHA-256 before returning any of its bytes.
    ///
    /// Errors: [`Error::RangeOutOfBounds`] when the range exceeds the body;
    /// [`Error::ObjectUnavailable`] when a block is missing or corrupt.
    pub fn read_entry_range(
        &self,
        reader: &Reader,
        entry: &PathEntry,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>> {
        let end = offset.checked_add(len).ok_or(Error::RangeOutOfBounds {
            offset,
            len,
            size: entry.logical_size,
        })?;
        if end > entry.logical_size {
            return Err(Error::RangeOutOfBounds {
                offset,
                len,
                size: entry.logical_size,
            });
        }
        let rows = reader.manifest(&entry.artifact_revision_id)?;
        self.read_rows(&rows, offset, len)
    }

    /// Reads a whole published body (verified).
    pub fn read_entry(&self, reader: &Reader, entry: &PathEntry) -> Result<Vec<u8>> {
        self.read_entry_range(reader, entry, 0, entry.logical_size)
    }

    /// Reads a byte range of the artifact at `path` in the live state.
    pub fn read_range(
        &self,
        workbench_id: &str,
        path: &str,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>> {
        let (read, entry) = self.lookup(workbench_id, path)?;
        self.read_entry_range(&read, &entry, offset, len)
    }

    /// Reads the whole artifact at `path` in the live state.
    pub fn read_all(&self, workbench_id: &str, path: &str) -> Result<Vec<u8>> {
        let (read, entry) = self.lookup(workbench_id, path)?;
        self.read_entry(&read, &entry)
    }

    /// The path entry (generation, size, digest, content type …) at `path`, live state.
    pub fn stat(&self, workbench_id: &str, path: &str) -> Result<PathEntry> {
        Ok(self.lookup(workbench_id, path)?.1)
    }

    /// Streams a published body into `out`, verifying every block; returns bytes written.
    pub fn read_to_writer(
        &self,
        reader: &Reader,
        entry: &PathEntry,
        out: &mut dyn std::io::Write,
        on_progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        let rows = reader.manifest(&entry.artifact_revision_id)?;
        let mut written = 0u64;
        for row in &rows {
            let block = objstore::get_verified(
                self.objects().as_ref(),
                &row.object_key,
                row.length,
                &row.digest_uri,
            )?;
            out.write_all(&block).map_err(|source| Error::LocalIo {
                op: "write",
                path: PathBuf::from("<output>"),
                source,
            })?;
            written += row.length;
            on_progress(written);
        }
        Ok(written)
    }

    fn lookup(&self, workbench_id: &str, path: &str) -> Result<(Reader, PathEntry)> {
        let path = Self::normalize(path)?;
        let read = self.meta().read();
        let ws = read
            .visible_workspace(workbench_id)
            .map_err(|e| map_workspace_error(e, workbench_id))?;
        let entry = read
            .path_entry(&ws.incarnation, &path)?
            .ok_or_else(|| Error::NotFound {
                path: path.as_str().to_string(),
            })?;
        Ok((read, entry))
    }

    pub(crate) fn read_rows(&self, rows: &[ManifestRow], offset: u64, len: u64) -> Result<Vec<u8>> {
        let end = offset + len;
        let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0).min(1 << 26));
        for row in rows {
            let row_end = row.logical_offset + row.length;
            if row_end <= offset || row.logical_offset >= end {
                continue;
            }
            // Rows always cover one whole block object (object_offset 0, length = object size),
            // so the recorded digest verifies exactly the bytes we slice from.
            let block = objstore::get_verified(
                self.objects().as_ref(),
                &row.object_key,
                row.length,
                &row.digest_uri,
            )?;
            let from = offset.max(row.logical_offset) - row.logical_offset;
            let to = end.min(row_end) - row.logical_offset;
            let slice = block.get(from as usize..to as usize).ok_or_else(|| {
                Error::ObjectUnavailable("a block is shorter than recorded".into())
            })?;
            out.extend_from_slice(slice);
        }
        if out.len() as u64 != len {
            return Err(Error::ObjectUnavailable(
                "the manifest does not cover the requested range".into(),
            ));
        }
        Ok(out)
    }
}
