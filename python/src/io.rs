//! Streaming I/O between Python and the SDK: [`PyReader`] feeds a Python binary file object to
//! [`nokv::Client::put_reader`] (memory bounded by one block), and [`RangeReader`] serves range
//! reads of one pinned revision to the Python file object returned by `Workbench.open`.

use std::io::Read;
use std::sync::Arc;

use meta::{ManifestRow, PathEntry};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::backend::{Embedded, Inner, Shared};
use crate::errors;

/// A verified block and the `[from, to)` byte range of it that a read needs.
type Piece = (Arc<Vec<u8>>, usize, usize);

/// Bytes a connected store's file object reads ahead for a smaller read (1 MiB).
const REMOTE_CHUNK: u64 = 1 << 20;

/// Most bytes requested from a Python file object per `read` call (1 MiB).
const PY_READ_CHUNK: usize = 1 << 20;

/// A [`Read`] over a Python object with a `read(n) -> bytes` method. Each call re-attaches to the
/// interpreter (the SDK runs with the GIL released); a Python exception becomes an
/// `io::Error` carrying its text.
pub struct PyReader {
    obj: Py<PyAny>,
}

impl PyReader {
    /// Wraps a binary file-like object.
    pub fn new(obj: Py<PyAny>) -> Self {
        PyReader { obj }
    }
}

impl Read for PyReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let want = buf.len().min(PY_READ_CHUNK);
        Python::attach(|py| {
            let chunk = self
                .obj
                .bind(py)
                .call_method1("read", (want,))
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            if chunk.is_none() {
                // A non-blocking stream with no data yet: treat as "try again" is not possible
                // here; report it.
                return Err(std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    "the file object returned None (non-blocking streams are not supported)",
                ));
            }
            let bytes = chunk.cast::<PyBytes>().map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "read() must return bytes (open the file in binary mode)",
                )
            })?;
            let data = bytes.as_bytes();
            if data.len() > want {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "read(n) returned more than n bytes",
                ));
            }
            buf[..data.len()].copy_from_slice(data);
            Ok(data.len())
        })
    }
}

/// Range reads of one published revision, pinned when the file was opened: later replacements of
/// the path do not change what this reader returns. One verified block is cached, so sequential
/// small reads fetch and verify each block once; memory is bounded by one block plus the bytes a
/// caller asks for.
#[pyclass(frozen, module = "nokv._nokv")]
pub struct RangeReader {
    shared: Arc<Shared>,
    source: Source,
    size: u64,
    generation: u64,
    digest_uri: String,
    content_type: String,
    cache: Mutex<Option<(usize, Arc<Vec<u8>>)>>,
}

/// What a file object reports about its revision: size in bytes, generation, `sha256:` URI of
/// the whole body, content type.
pub struct RevisionCard {
    /// Body size in bytes.
    pub size: u64,
    /// Path generation of the revision.
    pub generation: u64,
    /// `sha256:` URI of the whole body.
    pub digest_uri: String,
    /// Content type.
    pub content_type: String,
}

impl RevisionCard {
    fn of(entry: &PathEntry) -> Self {
        RevisionCard {
            size: entry.logical_size,
            generation: entry.generation,
            digest_uri: entry.body_digest_uri.clone(),
            content_type: entry.content_type.clone(),
        }
    }
}

/// Where a [`RangeReader`]'s bytes come from.
enum Source {
    /// An embedded store: the revision's manifest rows (in object-index order); blocks are
    /// fetched from the object store and verified here.
    Blocks(Vec<ManifestRow>),
    /// A connected store: range reads of the live path, refused (`Conflict`) once the path no
    /// longer holds the pinned generation — or, with `version`, reads at that read version (a
    /// snapshot's); the server verifies every block it serves.
    Remote {
        /// The workbench.
        workbench_id: String,
        /// The workbench-relative path.
        key: String,
        /// Read version of a snapshot read (`None`: the live path).
        version: Option<u64>,
    },
}

impl RangeReader {
    /// A reader of `entry`, whose manifest rows are `rows` (in object-index order).
    pub fn new(shared: Arc<Shared>, entry: &PathEntry, rows: Vec<ManifestRow>) -> Self {
        Self::with_source(shared, RevisionCard::of(entry), Source::Blocks(rows))
    }

    /// A reader of the live revision `entry` at `workbench_id`/`key` on a connected store.
    pub fn remote(shared: Arc<Shared>, workbench_id: &str, key: &str, entry: &PathEntry) -> Self {
        Self::with_source(
            shared,
            RevisionCard::of(entry),
            Source::Remote {
                workbench_id: workbench_id.to_string(),
                key: key.to_string(),
                version: None,
            },
        )
    }

    /// A reader of the revision described by `card` at `workbench_id`/`key` as of read version
    /// `version` (a snapshot's) on a connected store.
    pub fn remote_at(
        shared: Arc<Shared>,
        workbench_id: &str,
        key: &str,
        card: RevisionCard,
        version: u64,
    ) -> Self {
        Self::with_source(
            shared,
            card,
            Source::Remote {
                workbench_id: workbench_id.to_string(),
                key: key.to_string(),
                version: Some(version),
            },
        )
    }

    fn with_source(shared: Arc<Shared>, card: RevisionCard, source: Source) -> Self {
        RangeReader {
            shared,
            source,
            size: card.size,
            generation: card.generation,
            digest_uri: card.digest_uri,
            content_type: card.content_type,
            cache: Mutex::new(None),
        }
    }

    /// Body size in bytes.
    pub fn size_value(&self) -> u64 {
        self.size
    }

    /// The verified block `index` (from the one-block cache when it is there).
    fn block(
        &self,
        inner: &Embedded,
        rows: &[ManifestRow],
        index: usize,
    ) -> Result<Arc<Vec<u8>>, nokv::Error> {
        if let Some((i, b)) = self.cache.lock().as_ref() {
            if *i == index {
                return Ok(Arc::clone(b));
            }
        }
        let row = rows.get(index).ok_or_else(|| {
            nokv::Error::ObjectUnavailable("a block index is out of range".into())
        })?;
        let block = Arc::new(objstore::get_verified(
            inner.client.objects().as_ref(),
            &row.object_key,
            row.length,
            &row.digest_uri,
        )?);
        *self.cache.lock() = Some((index, Arc::clone(&block)));
        Ok(block)
    }

    /// The blocks covering `[offset, offset + len)` and the offset into the first one.
    fn blocks_for(
        &self,
        inner: &Embedded,
        rows: &[ManifestRow],
        offset: u64,
        len: u64,
    ) -> Result<Vec<Piece>, nokv::Error> {
        let end = offset.saturating_add(len);
        let first = rows.partition_point(|r| r.logical_offset.saturating_add(r.length) <= offset);
        let mut out = Vec::new();
        for (index, row) in rows.iter().enumerate().skip(first) {
            if row.logical_offset >= end {
                break;
            }
            let block = self.block(inner, rows, index)?;
            let from = offset.max(row.logical_offset) - row.logical_offset;
            let to = end.min(row.logical_offset.saturating_add(row.length)) - row.logical_offset;
            let (from, to) = (from as usize, to as usize);
            if to > block.len() || from > to {
                return Err(nokv::Error::ObjectUnavailable(
                    "a block is shorter than recorded".into(),
                ));
            }
            out.push((block, from, to));
        }
        Ok(out)
    }

    /// Reads `[offset, offset + len)` (clamped to the body) into a new `bytes`, releasing the
    /// GIL while blocks are fetched and verified.
    pub fn read_bytes<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        len: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let offset = offset.min(self.size);
        let len = len.min(self.size - offset);
        let inner = self.shared.get(py)?;
        let (inner, rows) = match (&*inner, &self.source) {
            (Inner::Embedded(e), Source::Blocks(rows)) => (e, rows),
            (
                Inner::Remote(r),
                Source::Remote {
                    workbench_id,
                    key,
                    version,
                },
            ) => {
                // Reads smaller than one chunk are served from one cached chunk read ahead, so
                // small sequential reads cost one request per chunk.
                let end = offset + len;
                if let Some((start, chunk)) = self.cache.lock().as_ref() {
                    let start = *start as u64;
                    if offset >= start && end <= start + chunk.len() as u64 {
                        let from = (offset - start) as usize;
                        if let Some(piece) = chunk.get(from..from + len as usize) {
                            return Ok(PyBytes::new(py, piece));
                        }
                    }
                }
                if len == 0 {
                    return Ok(PyBytes::new(py, &[]));
                }
                let fetch = if len < REMOTE_CHUNK {
                    REMOTE_CHUNK.min(self.size - offset)
                } else {
                    len
                };
                let bytes = py
                    .detach(|| match version {
                        Some(v) => r.client.read_range_at(workbench_id, key, *v, offset, fetch),
                        None => r.client.read_range_of_generation(
                            workbench_id,
                            key,
                            offset,
                            fetch,
                            self.generation,
                        ),
                    })
                    .map_err(|e| errors::remote(py, e))?;
                let out = PyBytes::new(py, bytes.get(..len as usize).unwrap_or(&bytes));
                if fetch > len {
                    if let Ok(start) = usize::try_from(offset) {
                        *self.cache.lock() = Some((start, Arc::new(bytes)));
                    }
                }
                return Ok(out);
            }
            _ => {
                return Err(errors::to_pyerr(
                    py,
                    &nokv::workbench::errors::ToolError::internal(
                        "a file object outlived the store it was opened on",
                    ),
                ))
            }
        };
        let pieces = py
            .detach(|| self.blocks_for(inner, rows, offset, len))
            .map_err(|e| errors::sdk(py, &inner.client, "", e))?;
        let total: usize = pieces.iter().map(|(_, a, b)| b - a).sum();
        if total as u64 != len {
            return Err(errors::sdk(
                py,
                &inner.client,
                "",
                nokv::Error::ObjectUnavailable(
                    "the manifest does not cover the requested range".into(),
                ),
            ));
        }
        PyBytes::new_with(py, total, |buf| {
            let mut at = 0;
            for (block, from, to) in &pieces {
                let n = to - from;
                buf[at..at + n].copy_from_slice(&block[*from..*to]);
                at += n;
            }
            Ok(())
        })
    }
}

#[pymethods]
impl RangeReader {
    /// Body size in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.size
    }

    /// Generation of the pinned revision.
    #[getter]
    fn generation(&self) -> u64 {
        self.generation
    }

    /// `sha256:` URI of the whole pinned body.
    #[getter]
    fn digest_uri(&self) -> &str {
        &self.digest_uri
    }

    /// Content type of the pinned revision.
    #[getter]
    fn content_type(&self) -> &str {
        &self.content_type
    }

    /// Bytes `[offset, offset + length)`, clamped to the body (empty at or past the end).
    fn read_at<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        length: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.read_bytes(py, offset, length)
    }

    /// Drops the cached block (or read-ahead chunk).
    fn release(&self) {
        *self.cache.lock() = None;
    }
}
