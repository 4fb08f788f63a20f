//! Verified local-file adapters (docs/design.md, "Reference Research Workflow"):
//! *materialize* copies a workbench (or one section/prefix of it) into a local sandbox directory,
//! verifying every body's whole-body SHA-256 before the caller runs anything; *collect* publishes
//! declared local files back as artifacts, then re-reads and verifies what was stored.
//!
//! Both stream in blocks: memory is bounded by the block size, not by the file size.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use meta::NormPath;

use crate::client::{Client, PutOptions, WriteCondition};
use crate::error::{Error, Result};

/// A progress notification of [`materialize_with_progress`] / [`collect_with_progress`]
/// (the CLI draws its progress bars from these).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressEvent<'a> {
    /// A phase over `total` bytes of one file begins: `"hashing"` (collect's pre-pass over the
    /// local file), `"uploading"` (collect), `"materializing"` (materialize).
    Begin {
        /// Phase name.
        phase: &'static str,
        /// Workbench-relative path of the file.
        path: &'a str,
        /// Bytes the phase will process.
        total: u64,
    },
    /// `done` bytes of the current phase are complete (monotonic within a phase).
    Advance {
        /// Bytes processed so far in this phase.
        done: u64,
    },
}

/// One file written by [`materialize`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaterializedFile {
    /// Workbench-relative path (e.g. `input/penguins.csv`).
    pub path: String,
    /// Local file it was written to.
    pub local: PathBuf,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Verified `sha256:` URI of the body.
    pub digest_uri: String,
}

/// Writes every artifact of `workbench_id` under `prefix` (`None`: the whole workbench) to
/// `dest/<workbench-relative path>`, at one consistent read version.
///
/// Each body is streamed block by block (each block verified against its manifest digest), the
/// whole-body SHA-256 is recomputed and compared with the recorded digest, and the file is renamed
/// into place only after it matched — a failed verification leaves no file behind.
///
/// Errors: [`Error::WorkbenchNotFound`], [`Error::InvalidPath`], [`Error::NotFound`] (empty
/// prefix), [`Error::ObjectUnavailable`] / [`Error::DigestMismatch`] on integrity failures,
/// [`Error::LocalIo`].
pub fn materialize(
    client: &Client,
    workbench_id: &str,
    prefix: Option<&str>,
    dest: &Path,
) -> Result<Vec<MaterializedFile>> {
    materialize_with_progress(client, workbench_id, prefix, dest, &mut |_| {})
}

/// [`materialize`], reporting a `"materializing"` phase per file to `progress`.
pub fn materialize_with_progress(
    client: &Client,
    workbench_id: &str,
    prefix: Option<&str>,
    dest: &Path,
    progress: &mut dyn FnMut(ProgressEvent<'_>),
) -> Result<Vec<MaterializedFile>> {
    let (read, files) = list_at(client, workbench_id, prefix)?;
    write_files(&files, dest, progress, &mut |_, entry, out, advance| {
        client.read_to_writer(&read, entry, out, advance)
    })
}

/// Every artifact of `workbench_id` under `prefix` (`None`: the whole workbench; a prefix naming
/// one file: that file), in path order, at one consistent read version, which is returned too
/// (a remote materialize downloads each body at that version).
///
/// Errors: [`Error::WorkbenchNotFound`], [`Error::InvalidPath`], [`Error::NotFound`] (empty
/// prefix), [`Error::Meta`].
pub fn list_files(
    client: &Client,
    workbench_id: &str,
    prefix: Option<&str>,
) -> Result<(u64, Vec<(NormPath, meta::PathEntry)>)> {
    let (read, files) = list_at(client, workbench_id, prefix)?;
    Ok((read.version(), files))
}

type Listing = (meta::Reader, Vec<(NormPath, meta::PathEntry)>);

fn list_at(client: &Client, workbench_id: &str, prefix: Option<&str>) -> Result<Listing> {
    let prefix = prefix
        .filter(|p| !p.is_empty())
        .map(Client::normalize)
        .transpose()?;
    let read = client.meta().read();
    let ws = read.visible_workspace(workbench_id)?;
    let mut files = Vec::new();
    // A prefix naming one file materializes just that file.
    if let Some(p) = &prefix {
        if let Some(entry) = read.path_entry(&ws.incarnation, p)? {
            files.push((p.clone(), entry));
        }
    }
    if files.is_empty() {
        let mut after: Option<NormPath> = None;
        loop {
            let (batch, more) =
                read.scan_files(&ws.incarnation, prefix.as_ref(), after.as_ref(), 255)?;
            after = batch.last().map(|(p, _)| p.clone());
            files.extend(batch);
            if !more || after.is_none() {
                break;
            }
        }
    }
    if files.is_empty() {
        if let Some(p) = prefix {
            return Err(Error::NotFound {
                path: p.as_str().to_string(),
            });
        }
    }
    Ok((read, files))
}

/// Copies the body of one listed file into a writer, reporting bytes done; returns the bytes
/// written. [`write_files`] verifies length and whole-body digest itself.
pub type CopyBody<'a> =
    dyn FnMut(&NormPath, &meta::PathEntry, &mut dyn Write, &mut dyn FnMut(u64)) -> Result<u64> + 'a;

/// Writes listed files under `dest` (the local half of [`materialize`], shared by the embedded
/// store and the remote client): each body is streamed through `copy`, its length and whole-body
/// SHA-256 compared with the entry, and the file renamed into place only after it matched — a
/// failed verification leaves no file behind.
///
/// Before anything is written, every path is checked against what `dest` can hold: a path that
/// is both a file and a directory, or a component longer than the destination file system
/// allows for one name (statvfs `f_namemax`, typically 255 bytes), or a local path over
/// `PATH_MAX` (4,096 bytes), or two paths the destination would hold as one because its file
/// system folds case or normalizes Unicode (probed, see [`crate::name_folding`]), fails the call
/// with nothing written.
///
/// Errors: [`Error::InvalidArgument`] (a path that is both a file and a directory; a symlinked
/// directory leading outside `dest`), [`Error::LocalNameTooLong`], [`Error::LocalPathTooLong`],
/// [`Error::LocalNameCollision`],
/// [`Error::DigestMismatch`],
/// [`Error::LocalIo`], and `copy`'s errors.
pub fn write_files(
    files: &[(NormPath, meta::PathEntry)],
    dest: &Path,
    progress: &mut dyn FnMut(ProgressEvent<'_>),
    copy: &mut CopyBody<'_>,
) -> Result<Vec<MaterializedFile>> {
    // A path may hold a file and, below the same name, other files (an exact file wins over an
    // implicit directory in listings); a local filesystem cannot hold both, so refuse up front
    // instead of leaving a partial tree behind.
    let names: std::collections::HashSet<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    for (path, _) in files.iter() {
        let mut ancestor = path.parent();
        while let Some(a) = ancestor {
            if names.contains(a.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "`{}` is both a file and a directory in this workbench; materialize a narrower --prefix",
                    a.as_str()
                )));
            }
            ancestor = a.parent();
        }
    }
    // The store accepts components longer than a local file name may be, and paths longer than
    // a local path may be (with the temporary name's extra bytes): refuse them up front.
    let name_max = local_name_max(dest);
    for (path, _) in files.iter() {
        let longest = path.components().map(str::len).max().unwrap_or(0);
        if u64::try_from(longest).unwrap_or(u64::MAX) > name_max {
            return Err(Error::LocalNameTooLong {
                path: path.as_str().to_string(),
                name_bytes: longest,
                limit_bytes: name_max,
            });
        }
        let path_bytes = dest.as_os_str().len() + 1 + path.as_str().len() + PARTIAL_EXTRA_BYTES;
        if path_bytes >= LOCAL_PATH_MAX {
            return Err(Error::LocalPathTooLong {
                path: path.as_str().to_string(),
                path_bytes,
                limit_bytes: LOCAL_PATH_MAX,
            });
        }
    }
    // A destination that folds case or normalizes Unicode would merge two paths into one file:
    // ask it how it compares names, and refuse before anything is written.
    let folding = crate::name_folding::probe(dest)?;
    if let Some((path, other_path)) =
        crate::name_folding::first_collision(folding, files.iter().map(|(p, _)| p.as_str()))
    {
        return Err(Error::LocalNameCollision {
            path,
            other_path,
            folding: folding.describe().to_string(),
        });
    }
    std::fs::create_dir_all(dest).map_err(|source| Error::LocalIo {
        op: "create directory",
        path: dest.to_path_buf(),
        source,
    })?;
    let dest_real = std::fs::canonicalize(dest).map_err(|source| Error::LocalIo {
        op: "resolve",
        path: dest.to_path_buf(),
        source,
    })?;
    let mut out = Vec::with_capacity(files.len());
    for (path, entry) in files {
        let local = path
            .components()
            .fold(dest.to_path_buf(), |acc, c| acc.join(c));
        let parent = local.parent().unwrap_or(dest).to_path_buf();
        std::fs::create_dir_all(&parent).map_err(|source| Error::LocalIo {
            op: "create directory",
            path: parent.clone(),
            source,
        })?;
        // Never write through a symlinked directory out of the destination.
        let parent_real = std::fs::canonicalize(&parent).map_err(|source| Error::LocalIo {
            op: "resolve",
            path: parent.clone(),
            source,
        })?;
        if !parent_real.starts_with(&dest_real) {
            return Err(Error::InvalidArgument(format!(
                "{} leads outside the destination (symlink); refusing to write through it",
                parent.display()
            )));
        }
        let tmp = parent.join(partial_name(
            local.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
            name_max,
        ));
        let file = File::create(&tmp).map_err(|source| Error::LocalIo {
            op: "create",
            path: tmp.clone(),
            source,
        })?;
        let mut writer = HashingWriter {
            inner: BufWriter::new(file),
            hasher: objstore::Sha256Stream::new(),
        };
        progress(ProgressEvent::Begin {
            phase: "materializing",
            path: path.as_str(),
            total: entry.logical_size,
        });
        let written = copy(path, entry, &mut writer, &mut |done| {
            progress(ProgressEvent::Advance { done })
        });
        let flushed = writer.inner.flush();
        let digest = writer.hasher.finish();
        let check = written.and_then(|n| {
            flushed.map_err(|source| Error::LocalIo {
                op: "write",
                path: tmp.clone(),
                source,
            })?;
            if n != entry.logical_size || digest != entry.body_digest_uri {
                return Err(Error::DigestMismatch {
                    path: path.as_str().to_string(),
                    expected: entry.body_digest_uri.clone(),
                    actual: digest.clone(),
                });
            }
            Ok(n)
        });
        match check {
            Ok(size) => {
                std::fs::rename(&tmp, &local).map_err(|source| Error::LocalIo {
                    op: "rename",
                    path: local.clone(),
                    source,
                })?;
                out.push(MaterializedFile {
                    path: path.as_str().to_string(),
                    local,
                    size_bytes: size,
                    digest_uri: digest,
                });
            }
            Err(err) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(err);
            }
        }
    }
    Ok(out)
}

/// The limit on one file name, in bytes, assumed when the file system cannot be asked (255 on
/// Linux's and macOS's common file systems).
const DEFAULT_NAME_MAX: u64 = 255;

/// The longest path the operating system accepts in one call, counting the terminating NUL
/// (Linux `PATH_MAX`).
const LOCAL_PATH_MAX: usize = 4096;

/// The suffix of the temporary name `.<name>.nokv-partial` a body is written under.
const PARTIAL_SUFFIX: &str = ".nokv-partial";

/// Bytes the temporary name adds to a file's name (the leading dot and [`PARTIAL_SUFFIX`]).
const PARTIAL_EXTRA_BYTES: usize = 1 + PARTIAL_SUFFIX.len();

/// The longest file name, in bytes, the file system holding `dest` (or, when `dest` does not
/// exist yet, its nearest existing ancestor) allows; [`DEFAULT_NAME_MAX`] when it cannot be
/// asked.
fn local_name_max(dest: &Path) -> u64 {
    let mut at = Some(dest);
    while let Some(p) = at {
        if p.exists() {
            return name_max_of(p).unwrap_or(DEFAULT_NAME_MAX);
        }
        at = p.parent();
    }
    name_max_of(Path::new(".")).unwrap_or(DEFAULT_NAME_MAX)
}

#[cfg(unix)]
fn name_max_of(path: &Path) -> Option<u64> {
    rustix::fs::statvfs(path)
        .ok()
        .map(|s| s.f_namemax)
        .filter(|&n| n > 0)
}

#[cfg(not(unix))]
fn name_max_of(_path: &Path) -> Option<u64> {
    None
}

/// The name a body is written under before it is verified and renamed to `name`:
/// `.<name>.nokv-partial`, with `name` shortened (at a character boundary) so that the whole
/// stays within `name_max` bytes — a name that itself fits must never fail for its partial file.
fn partial_name(name: &str, name_max: u64) -> String {
    let room = usize::try_from(name_max)
        .unwrap_or(usize::MAX)
        .saturating_sub(PARTIAL_EXTRA_BYTES);
    let mut end = name.len().min(room);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!(".{}{PARTIAL_SUFFIX}", name.get(..end).unwrap_or_default())
}

/// Verifies that the local files of a previous [`materialize`] still match their digests (e.g.
/// right before executing a script). Errors: [`Error::DigestMismatch`], [`Error::LocalIo`].
pub fn verify_materialized(files: &[MaterializedFile]) -> Result<()> {
    for f in files {
        let actual = digest_file(&f.local)?;
        if actual != f.digest_uri {
            return Err(Error::DigestMismatch {
                path: f.path.clone(),
                expected: f.digest_uri.clone(),
                actual,
            });
        }
    }
    Ok(())
}

/// SHA-256 `sha256:` URI of a local file, streamed.
pub fn digest_file(path: &Path) -> Result<String> {
    digest_file_with_progress(path, &mut |_| {})
}

fn digest_file_with_progress(path: &Path, on_bytes: &mut dyn FnMut(u64)) -> Result<String> {
    let file = File::open(path).map_err(|source| Error::LocalIo {
        op: "open",
        path: path.to_path_buf(),
        source,
    })?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut hasher = objstore::Sha256Stream::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buf).map_err(|source| Error::LocalIo {
            op: "read",
            path: path.to_path_buf(),
            source,
        })?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        on_bytes(hasher.len());
    }
    Ok(hasher.finish())
}

/// What [`collect`] published for one file.
#[derive(Debug, Clone)]
pub struct CollectedFile {
    /// Workbench-relative path.
    pub path: String,
    /// New generation.
    pub generation: u64,
    /// Size in bytes.
    pub size_bytes: u64,
    /// `sha256:` URI of the body (equal to the local file's digest).
    pub digest_uri: String,
    /// True when the receipt is the stored one of an earlier collect with the same request id
    /// (nothing was written; see [`crate::client::PutOptions::request_id`]).
    pub idempotent_replay: bool,
}

/// Publishes the local file `local` at `path` in `workbench_id` (streamed), then verifies the
/// stored digest equals the local file's digest. `replace`: replace an existing artifact (under
/// a generation CAS against what was just read) instead of create-only.
///
/// Errors: those of [`Client::put_reader`], plus [`Error::DigestMismatch`] when the file changed
/// while it was being collected.
pub fn collect(
    client: &Client,
    workbench_id: &str,
    local: &Path,
    path: &str,
    content_type: &str,
    replace: bool,
) -> Result<CollectedFile> {
    collect_with_progress(
        client,
        workbench_id,
        local,
        path,
        content_type,
        replace,
        &mut |_| {},
    )
}

/// [`collect`], reporting a `"hashing"` and an `"uploading"` phase to `progress`.
pub fn collect_with_progress(
    client: &Client,
    workbench_id: &str,
    local: &Path,
    path: &str,
    content_type: &str,
    replace: bool,
    progress: &mut dyn FnMut(ProgressEvent<'_>),
) -> Result<CollectedFile> {
    collect_indexed(
        client,
        workbench_id,
        local,
        path,
        content_type,
        replace,
        &CollectIndex::default(),
        progress,
    )
}

/// Custom index fields a collected file is published with (`nokv collect --field`,
/// `--index-json`; see [`crate::index_fields`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CollectIndex {
    /// Typed custom fields.
    pub fields: crate::index_fields::IndexFields,
    /// Also project the file's top-level JSON scalar members (the file must be a JSON object of
    /// at most 16 MiB).
    pub index_json: bool,
}

/// [`collect_with_progress`] publishing the file with custom index fields. Errors: those of
/// [`collect`], plus [`Error::InvalidArgument`] for invalid index fields or an `index_json`
/// file that is not a JSON object.
#[allow(clippy::too_many_arguments)]
pub fn collect_indexed(
    client: &Client,
    workbench_id: &str,
    local: &Path,
    path: &str,
    content_type: &str,
    replace: bool,
    index: &CollectIndex,
    progress: &mut dyn FnMut(ProgressEvent<'_>),
) -> Result<CollectedFile> {
    collect_with(
        local,
        path,
        content_type,
        replace,
        index,
        progress,
        &mut |reader, options| client.put_reader(workbench_id, path, reader, options),
    )
}

/// Publishes one body read from a local file: `put(reader, options)` (the embedded or the
/// remote client's `put_reader` into the target workbench and path).
pub type PutBody<'a> =
    dyn FnMut(&mut dyn Read, &PutOptions) -> Result<crate::client::PutReceipt> + 'a;

/// The lifecycle of [`collect_indexed`] over any `put` (shared by the embedded store and the
/// remote client): hash the local file, stream it through `put`, and require the stored digest to
/// equal the local one. Errors: as [`collect_indexed`].
pub fn collect_with(
    local: &Path,
    path: &str,
    content_type: &str,
    replace: bool,
    index: &CollectIndex,
    progress: &mut dyn FnMut(ProgressEvent<'_>),
    put: &mut PutBody<'_>,
) -> Result<CollectedFile> {
    let total = std::fs::metadata(local).map(|m| m.len()).unwrap_or(0);
    progress(ProgressEvent::Begin {
        phase: "hashing",
        path,
        total,
    });
    let before =
        digest_file_with_progress(local, &mut |done| progress(ProgressEvent::Advance { done }))?;
    let file = File::open(local).map_err(|source| Error::LocalIo {
        op: "open",
        path: local.to_path_buf(),
        source,
    })?;
    progress(ProgressEvent::Begin {
        phase: "uploading",
        path,
        total,
    });
    let options = PutOptions {
        content_type: content_type.to_string(),
        condition: if replace {
            WriteCondition::Replace {
                expected_generation: None,
            }
        } else {
            WriteCondition::Create
        },
        producer: "nokv collect".into(),
        manifest_id: None,
        index_fields: index.fields.clone(),
        index_json: index.index_json,
        // The file changing while it is read refuses the publication instead of publishing a
        // body no one hashed.
        expected_digest_uri: Some(before.clone()),
        request_id: None,
    };
    let mut reader = CountingReader {
        inner: BufReader::with_capacity(1 << 20, file),
        done: 0,
        on_bytes: &mut |done| progress(ProgressEvent::Advance { done }),
    };
    let receipt = put(&mut reader, &options)?;
    if receipt.digest_uri != before {
        return Err(Error::DigestMismatch {
            path: local.display().to_string(),
            expected: before,
            actual: receipt.digest_uri,
        });
    }
    Ok(CollectedFile {
        path: receipt.path.as_str().to_string(),
        generation: receipt.generation,
        size_bytes: receipt.size_bytes,
        digest_uri: receipt.digest_uri,
        idempotent_replay: receipt.idempotent_replay,
    })
}

/// Guesses a content type from a file name (used by `nokv collect` when none is given).
pub fn guess_content_type(path: &str) -> &'static str {
    let lower = path.to_ascii_lowercase();
    let ext = lower.rsplit('.').next().unwrap_or("");
    match ext {
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "csv" => "text/csv; charset=utf-8",
        "sh" => "text/x-shellscript; charset=utf-8",
        "txt" | "log" | "md" => "text/plain; charset=utf-8",
        _ => crate::client::OCTET_STREAM,
    }
}

/// Reports the running byte count of everything read through it.
struct CountingReader<'a, R: Read> {
    inner: R,
    done: u64,
    on_bytes: &'a mut dyn FnMut(u64),
}

impl<R: Read> Read for CountingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.done = self.done.saturating_add(n as u64);
        (self.on_bytes)(self.done);
        Ok(n)
    }
}

struct HashingWriter<W: Write> {
    inner: W,
    hasher: objstore::Sha256Stream,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_name_stays_within_the_name_limit_and_keeps_short_names_whole() {
        assert_eq!(partial_name("a.csv", 255), ".a.csv.nokv-partial");
        let long = "x".repeat(250);
        let p = partial_name(&long, 255);
        assert_eq!(p.len(), 255);
        assert!(p.starts_with(".xxx") && p.ends_with(".nokv-partial"));
        // Shortened at a character boundary (each `é` is 2 bytes).
        let accented = "é".repeat(125);
        let p = partial_name(&accented, 255);
        assert!(p.len() <= 255, "{}", p.len());
        assert!(p.len() >= 254, "{}", p.len());
        // A degenerate limit still gives a usable name.
        assert_eq!(partial_name("abc", 4), "..nokv-partial");
    }

    #[test]
    fn name_limit_is_read_from_the_nearest_existing_ancestor() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("not/yet/here");
        let limit = local_name_max(&missing);
        assert_eq!(limit, local_name_max(dir.path()));
        assert!(limit >= 14, "{limit}");
    }
}
