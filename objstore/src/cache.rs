//! `CachedStore`: a bounded local directory of verified blocks in front of a remote provider.
//!
//! # What is cached
//!
//! Only whole objects read through [`ObjectStore::get_verified`] (the caller supplies the
//! expected length and SHA-256 from the ArtifactManifest, docs/metadata-format.md) and objects this process
//! wrote itself (`put`, and `put_if_absent` when it answered `Created`). A cached copy is never
//! trusted without its digest: every hit is read back and re-hashed, and a copy that fails is
//! deleted and the object is fetched again from the remote provider (and verified there).
//! Plain `get`, `get_range`, `head`, `list` and `delete` always go to the remote provider
//! (`delete` also drops the cached copy). The remote provider is always written first, so
//! deleting the cache directory loses nothing.
//!
//! # Layout
//!
//! ```text
//! <dir>/<kk>/<key-hash>-<digest>     one cached object
//! <dir>/<kk>/.tmp-<random>           an insert in flight (removed at open)
//! ```
//!
//! `<key-hash>` is the lowercase hex SHA-256 of the object key, `<kk>` its first two hex
//! characters, `<digest>` the object's lowercase hex SHA-256. Files are written to a temp name
//! and renamed into place without `fsync` (a copy torn by a crash fails its digest check and is
//! refetched).
//!
//! # Eviction and restart
//!
//! The in-memory index (key hash → digest, size, recency) is rebuilt from the directory at
//! open, recency ordered by file modification time (a hit bumps the file's mtime), so the
//! LRU order survives a restart. After each insert the least recently used objects are
//! deleted until the total size is at most the byte bound; an object larger than the bound is
//! not cached.
//!
//! # Reads
//!
//! Cached files are read through io_uring (one `READ` submission per chunk, waited for
//! synchronously) when the kernel allows it, else with `pread`. [`CachedStore::stats`] reports
//! the active path and how many reads took each.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

use crate::digest::{decode_lower_hex, hex_lower, parse_sha256_uri, Sha256Stream};
use crate::error::Error;
use crate::keys::{validate_key, TEMP_PREFIX};
use crate::store::{verify_bytes, ObjectMeta, ObjectStore, OpenUpload, PutOutcome, UploadObserver};

/// Default byte bound of a block cache: 1 GiB.
pub const DEFAULT_CACHE_BYTES: u64 = 1024 * 1024 * 1024;

/// Options of [`CachedStore::open`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheOptions {
    /// Cache directory (created when missing).
    pub dir: PathBuf,
    /// Upper bound of the cached bytes (sum of cached object sizes).
    pub max_bytes: u64,
    /// Use io_uring for cache reads when the kernel allows it (default true); `false` forces
    /// `pread`.
    pub io_uring: bool,
    /// Cache objects written through this store (default true).
    pub populate_on_write: bool,
}

impl CacheOptions {
    /// Options for a cache in `dir` bounded to `max_bytes`, io_uring on, populate on write.
    pub fn new(dir: impl Into<PathBuf>, max_bytes: u64) -> Self {
        Self {
            dir: dir.into(),
            max_bytes,
            io_uring: true,
            populate_on_write: true,
        }
    }
}

/// Which system interface cache reads use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadPath {
    /// io_uring `READ` submissions.
    IoUring,
    /// Positional `pread(2)`.
    Pread,
}

/// Counters and state of a [`CachedStore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// `get_verified` calls answered from a verified cached copy.
    pub hits: u64,
    /// `get_verified` calls that went to the remote provider.
    pub misses: u64,
    /// Cached copies that failed their digest (or length) check and were dropped and refetched.
    pub corrupt_refetches: u64,
    /// Objects removed to respect the byte bound.
    pub evictions: u64,
    /// Objects written into the cache.
    pub inserts: u64,
    /// Cache writes that failed (the cache is best effort; the call itself succeeded).
    pub insert_failures: u64,
    /// Objects currently indexed.
    pub entries: u64,
    /// Bytes currently indexed (at most the bound).
    pub bytes: u64,
    /// Cache file reads done through io_uring.
    pub io_uring_reads: u64,
    /// Cache file reads done with `pread`.
    pub pread_reads: u64,
    /// The read path in use now.
    pub read_path: ReadPath,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    digest: [u8; 32],
    size: u64,
    tick: u64,
}

#[derive(Debug, Default)]
struct Index {
    entries: HashMap<[u8; 32], Entry>,
    /// tick → key hash; the smallest tick is the least recently used.
    lru: BTreeMap<u64, [u8; 32]>,
    bytes: u64,
    next_tick: u64,
}

impl Index {
    fn bump(&mut self, key_hash: &[u8; 32]) {
        let tick = self.next_tick;
        if let Some(e) = self.entries.get_mut(key_hash) {
            self.lru.remove(&e.tick);
            e.tick = tick;
            self.lru.insert(tick, *key_hash);
            self.next_tick += 1;
        }
    }

    fn remove(&mut self, key_hash: &[u8; 32]) -> Option<Entry> {
        let e = self.entries.remove(key_hash)?;
        self.lru.remove(&e.tick);
        self.bytes = self.bytes.saturating_sub(e.size);
        Some(e)
    }

    fn insert(&mut self, key_hash: [u8; 32], digest: [u8; 32], size: u64) -> Option<Entry> {
        let old = self.remove(&key_hash);
        let tick = self.next_tick;
        self.next_tick += 1;
        self.entries.insert(key_hash, Entry { digest, size, tick });
        self.lru.insert(tick, key_hash);
        self.bytes = self.bytes.saturating_add(size);
        old
    }

    /// Removes least-recently-used entries until `bytes <= max`; returns them.
    fn evict_to(&mut self, max: u64) -> Vec<([u8; 32], Entry)> {
        let mut out = Vec::new();
        while self.bytes > max {
            let Some((_, kh)) = self.lru.pop_first() else {
                break;
            };
            if let Some(e) = self.entries.remove(&kh) {
                self.bytes = self.bytes.saturating_sub(e.size);
                out.push((kh, e));
            }
        }
        out
    }
}

/// A caching [`ObjectStore`] wrapper (see the module docs).
pub struct CachedStore<S> {
    remote: S,
    dir: PathBuf,
    max_bytes: u64,
    populate_on_write: bool,
    index: Mutex<Index>,
    uring: Option<Mutex<uring::Reader>>,
    hits: AtomicU64,
    misses: AtomicU64,
    corrupt: AtomicU64,
    evictions: AtomicU64,
    inserts: AtomicU64,
    insert_failures: AtomicU64,
    uring_reads: AtomicU64,
    pread_reads: AtomicU64,
}

impl<S: std::fmt::Debug> std::fmt::Debug for CachedStore<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedStore")
            .field("remote", &self.remote)
            .field("dir", &self.dir)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

fn key_hash(key: &str) -> [u8; 32] {
    let mut s = Sha256Stream::new();
    s.update(key.as_bytes());
    s.finish_bytes()
}

fn cfg_err(dir: &Path, what: &str, e: &io::Error) -> Error {
    Error::InvalidConfig {
        reason: format!("cache directory {}: {what}: {e}", dir.display()),
    }
}

impl<S: ObjectStore> CachedStore<S> {
    /// Opens (creating when missing) the cache directory, removes leftover temp files, rebuilds
    /// the index from the files present (LRU order by modification time) and evicts down to
    /// the bound. Unrecognised files are left alone and not counted.
    ///
    /// Errors: [`Error::InvalidConfig`] when the directory cannot be created or scanned.
    pub fn open(remote: S, options: CacheOptions) -> Result<CachedStore<S>, Error> {
        let dir = options.dir.clone();
        fs::create_dir_all(&dir).map_err(|e| cfg_err(&dir, "create", &e))?;
        let mut found: Vec<(SystemTime, [u8; 32], [u8; 32], u64)> = Vec::new();
        for shard in fs::read_dir(&dir).map_err(|e| cfg_err(&dir, "scan", &e))? {
            let shard = shard.map_err(|e| cfg_err(&dir, "scan", &e))?;
            let is_shard = shard.file_type().is_ok_and(|t| t.is_dir())
                && shard.file_name().to_str().is_some_and(|n| {
                    n.len() == 2
                        && n.bytes()
                            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
                });
            if !is_shard {
                continue;
            }
            let Ok(files) = fs::read_dir(shard.path()) else {
                continue;
            };
            for file in files.flatten() {
                let name = file.file_name();
                let Some(name) = name.to_str() else { continue };
                if name.starts_with(TEMP_PREFIX) {
                    let _ = fs::remove_file(file.path());
                    continue;
                }
                let Some((kh, dg)) = parse_name(name) else {
                    continue;
                };
                let Ok(meta) = file.metadata() else { continue };
                if !meta.is_file() {
                    continue;
                }
                let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                found.push((mtime, kh, dg, meta.len()));
            }
        }
        found.sort_by_key(|f| f.0);
        let mut index = Index::default();
        for (_, kh, dg, size) in found {
            // Two copies of one key (different digests): the newer one wins.
            if let Some(old) = index.insert(kh, dg, size) {
                if old.digest != dg {
                    let _ = fs::remove_file(entry_path(&dir, &kh, &old.digest));
                }
            }
        }
        let uring = if options.io_uring {
            uring::Reader::new().ok().map(Mutex::new)
        } else {
            None
        };
        let store = CachedStore {
            remote,
            dir,
            max_bytes: options.max_bytes,
            populate_on_write: options.populate_on_write,
            index: Mutex::new(index),
            uring,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            corrupt: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            insert_failures: AtomicU64::new(0),
            uring_reads: AtomicU64::new(0),
            pread_reads: AtomicU64::new(0),
        };
        let victims = store.lock().evict_to(store.max_bytes);
        store.remove_files(&victims);
        Ok(store)
    }

    /// The wrapped remote provider.
    pub fn remote(&self) -> &S {
        &self.remote
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The byte bound.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Counters, sizes and the active read path.
    pub fn stats(&self) -> CacheStats {
        let (entries, bytes) = {
            let idx = self.lock();
            (
                u64::try_from(idx.entries.len()).unwrap_or(u64::MAX),
                idx.bytes,
            )
        };
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            corrupt_refetches: self.corrupt.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            inserts: self.inserts.load(Ordering::Relaxed),
            insert_failures: self.insert_failures.load(Ordering::Relaxed),
            entries,
            bytes,
            io_uring_reads: self.uring_reads.load(Ordering::Relaxed),
            pread_reads: self.pread_reads.load(Ordering::Relaxed),
            read_path: self.read_path(),
        }
    }

    /// The read path cache hits use now.
    pub fn read_path(&self) -> ReadPath {
        match &self.uring {
            Some(r) if lock_any(r).usable() => ReadPath::IoUring,
            _ => ReadPath::Pread,
        }
    }

    /// Whether a copy of `key` with this SHA-256 `digest_uri` is indexed (diagnostics/tests).
    pub fn contains(&self, key: &str, digest_uri: &str) -> bool {
        let Ok(digest) = parse_sha256_uri(digest_uri) else {
            return false;
        };
        self.lock()
            .entries
            .get(&key_hash(key))
            .is_some_and(|e| e.digest == digest)
    }

    /// The file that caches `key` with digest `digest_uri`, whether or not it exists
    /// (diagnostics and tests, e.g. corrupting a cached copy).
    ///
    /// Errors: [`Error::InvalidKey`], [`Error::InvalidDigest`].
    pub fn cache_path(&self, key: &str, digest_uri: &str) -> Result<PathBuf, Error> {
        validate_key(key)?;
        let digest = parse_sha256_uri(digest_uri)?;
        Ok(entry_path(&self.dir, &key_hash(key), &digest))
    }

    fn lock(&self) -> MutexGuard<'_, Index> {
        // The index is rebuilt from disk at open; a poisoned lock still holds a usable index.
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn remove_files(&self, victims: &[([u8; 32], Entry)]) {
        for (kh, e) in victims {
            let _ = fs::remove_file(entry_path(&self.dir, kh, &e.digest));
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Drops the cached copy of a key (index entry and file).
    fn forget(&self, kh: &[u8; 32]) {
        let old = self.lock().remove(kh);
        if let Some(e) = old {
            let _ = fs::remove_file(entry_path(&self.dir, kh, &e.digest));
        }
    }

    /// Writes a verified copy into the cache (best effort) and evicts down to the bound.
    fn insert(&self, kh: [u8; 32], digest: [u8; 32], bytes: &[u8]) {
        let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if size > self.max_bytes {
            return;
        }
        let path = entry_path(&self.dir, &kh, &digest);
        if let Err(_e) = write_file(&path, bytes) {
            self.insert_failures.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let (old, victims) = {
            let mut idx = self.lock();
            let old = idx.insert(kh, digest, size);
            (old, idx.evict_to(self.max_bytes))
        };
        if let Some(old) = old {
            if old.digest != digest {
                let _ = fs::remove_file(entry_path(&self.dir, &kh, &old.digest));
            }
        }
        self.inserts.fetch_add(1, Ordering::Relaxed);
        self.remove_files(&victims);
    }

    /// Reads a cached file entirely, through io_uring when available.
    fn read_cached(&self, path: &Path) -> io::Result<Vec<u8>> {
        let file = File::open(path)?;
        let size = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::other("cached file too large"))?;
        if let Some(r) = &self.uring {
            let mut reader = lock_any(r);
            if reader.usable() {
                match reader.read_all(&file, size) {
                    Ok(buf) => {
                        self.uring_reads.fetch_add(1, Ordering::Relaxed);
                        return Ok(buf);
                    }
                    Err(uring::ReadError::File(e)) => return Err(e),
                    // The ring itself failed: it is now disabled; fall back to pread below.
                    Err(uring::ReadError::Ring) => {}
                }
            }
        }
        let mut buf = vec![0u8; size];
        file.read_exact_at(&mut buf, 0)?;
        self.pread_reads.fetch_add(1, Ordering::Relaxed);
        Ok(buf)
    }
}

fn lock_any<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn entry_path(dir: &Path, kh: &[u8; 32], digest: &[u8; 32]) -> PathBuf {
    let kh_hex = hex_lower(kh);
    dir.join(&kh_hex[..2])
        .join(format!("{kh_hex}-{}", hex_lower(digest)))
}

fn parse_name(name: &str) -> Option<([u8; 32], [u8; 32])> {
    let (kh, dg) = name.split_once('-')?;
    Some((decode_lower_hex::<32>(kh)?, decode_lower_hex::<32>(dg)?))
}

/// Temp file + rename (no fsync: see the module docs). Creates the shard directory when
/// missing (also after the cache directory was deleted underneath us).
fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("cache path has no parent"))?;
    fs::create_dir_all(dir)?;
    let mut suffix = [0u8; 16];
    getrandom::fill(&mut suffix).map_err(|e| io::Error::other(e.to_string()))?;
    let tmp = dir.join(format!("{TEMP_PREFIX}{}", hex_lower(&suffix)));
    let result = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

impl<S: ObjectStore> ObjectStore for CachedStore<S> {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), Error> {
        self.remote.put(key, bytes)?;
        let kh = key_hash(key);
        if self.populate_on_write {
            let mut s = Sha256Stream::new();
            s.update(bytes);
            self.insert(kh, s.finish_bytes(), bytes);
        } else {
            self.forget(&kh);
        }
        Ok(())
    }

    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, Error> {
        let outcome = self.remote.put_if_absent(key, bytes)?;
        if outcome == PutOutcome::Created && self.populate_on_write {
            let mut s = Sha256Stream::new();
            s.update(bytes);
            self.insert(key_hash(key), s.finish_bytes(), bytes);
        }
        Ok(outcome)
    }

    fn get(&self, key: &str) -> Result<Vec<u8>, Error> {
        self.remote.get(key)
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>, Error> {
        self.remote.get_range(key, offset, len)
    }

    fn head(&self, key: &str) -> Result<Option<ObjectMeta>, Error> {
        self.remote.head(key)
    }

    fn delete(&self, key: &str) -> Result<(), Error> {
        // The local copy goes whatever the remote answers: a block being deleted is never
        // served again, and an ambiguous remote DELETE must not leave a cached copy behind.
        let remote = self.remote.delete(key);
        self.forget(&key_hash(key));
        remote
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, Error> {
        self.remote.list(prefix)
    }

    fn get_verified(
        &self,
        key: &str,
        expected_len: u64,
        expected_digest_uri: &str,
    ) -> Result<Vec<u8>, Error> {
        let digest = parse_sha256_uri(expected_digest_uri)?;
        validate_key(key)?;
        let kh = key_hash(key);
        let hit = {
            let mut idx = self.lock();
            let hit = idx
                .entries
                .get(&kh)
                .is_some_and(|e| e.digest == digest && e.size == expected_len);
            if hit {
                idx.bump(&kh);
            }
            hit
        };
        if hit {
            let path = entry_path(&self.dir, &kh, &digest);
            match self.read_cached(&path) {
                Ok(bytes) => match verify_bytes(key, bytes, expected_len, &digest) {
                    Ok(bytes) => {
                        self.hits.fetch_add(1, Ordering::Relaxed);
                        // Recency survives a restart through the mtime (best effort).
                        if let Ok(f) = OpenOptions::new().write(true).open(&path) {
                            let _ = f.set_modified(SystemTime::now());
                        }
                        return Ok(bytes);
                    }
                    Err(_) => {
                        self.corrupt.fetch_add(1, Ordering::Relaxed);
                        self.forget(&kh);
                    }
                },
                // Evicted concurrently or the directory was deleted: a plain miss.
                Err(_) => {
                    self.lock().remove(&kh);
                }
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let bytes = self
            .remote
            .get_verified(key, expected_len, expected_digest_uri)?;
        self.insert(kh, digest, &bytes);
        Ok(bytes)
    }

    fn provider_name(&self) -> &'static str {
        self.remote.provider_name()
    }

    fn put_if_absent_observed(
        &self,
        key: &str,
        bytes: &[u8],
        observer: &mut dyn UploadObserver,
    ) -> Result<PutOutcome, Error> {
        let outcome = self.remote.put_if_absent_observed(key, bytes, observer)?;
        if outcome == PutOutcome::Created && self.populate_on_write {
            let mut s = Sha256Stream::new();
            s.update(bytes);
            self.insert(key_hash(key), s.finish_bytes(), bytes);
        }
        Ok(outcome)
    }

    fn abort_upload(&self, key: &str, upload_id: &str) -> Result<(), Error> {
        self.remote.abort_upload(key, upload_id)
    }

    fn list_uploads(&self, prefix: &str) -> Result<Vec<OpenUpload>, Error> {
        self.remote.list_uploads(prefix)
    }
}

/// io_uring reads of cache files.
mod uring {
    // The io-uring crate's `SubmissionQueue::push` is unsafe: the kernel writes into the buffer
    // an SQE points at asynchronously. Every read below waits for its completion before the
    // buffer can be touched or freed; when that cannot be guaranteed (the ring failed with an
    // entry possibly in flight) the buffer is leaked instead of freed and the ring disabled.
    #![allow(unsafe_code)]

    use std::fs::File;
    use std::io;
    use std::os::fd::AsRawFd;

    use io_uring::{opcode, types, IoUring};

    /// Largest single READ submission (the kernel caps one read at about 2 GiB anyway).
    const MAX_CHUNK: usize = 1 << 30;

    pub(super) enum ReadError {
        /// The file read failed (reported to the caller as an I/O error).
        File(io::Error),
        /// The ring failed; it is now disabled and the caller falls back to pread.
        Ring,
    }

    pub(super) struct Reader {
        ring: Option<IoUring>,
    }

    impl Reader {
        /// Creates a small ring and checks that the kernel supports `READ`.
        pub(super) fn new() -> io::Result<Reader> {
            let ring = IoUring::new(4)?;
            let mut probe = io_uring::Probe::new();
            ring.submitter().register_probe(&mut probe)?;
            if !probe.is_supported(opcode::Read::CODE) {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "io_uring READ is not supported",
                ));
            }
            Ok(Reader { ring: Some(ring) })
        }

        pub(super) fn usable(&self) -> bool {
            self.ring.is_some()
        }

        /// Reads the first `size` bytes of `file` into a new buffer.
        pub(super) fn read_all(&mut self, file: &File, size: usize) -> Result<Vec<u8>, ReadError> {
            let fd = types::Fd(file.as_raw_fd());
            let mut buf = vec![0u8; size];
            let mut done = 0usize;
            while done < size {
                let Some(ring) = self.ring.as_mut() else {
                    return Err(ReadError::Ring);
                };
                let chunk = (size - done).min(MAX_CHUNK);
                let len = u32::try_from(chunk).unwrap_or(u32::MAX);
                let offset = u64::try_from(done).unwrap_or(u64::MAX);
                let entry = opcode::Read::new(fd, buf[done..].as_mut_ptr(), len)
                    .offset(offset)
                    .build()
                    .user_data(1);
                // SAFETY: the entry points at `buf[done..done + len]`, owned by this function.
                // `buf` is neither touched nor freed until the entry's completion is reaped
                // below; if the ring fails while the entry may still be in flight, `buf` and
                // the ring are leaked (never freed or closed) instead.
                if unsafe { ring.submission().push(&entry) }.is_err() {
                    // The queue was full, so nothing was queued: safe to drop everything.
                    return Err(self.disable());
                }
                let res = loop {
                    match ring.submit_and_wait(1) {
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(_) => break None,
                    }
                    if let Some(cqe) = ring.completion().next() {
                        break Some(cqe.result());
                    }
                };
                let Some(res) = res else {
                    std::mem::forget(buf);
                    return Err(self.disable_leaking());
                };
                if res < 0 {
                    return Err(ReadError::File(io::Error::from_raw_os_error(-res)));
                }
                if res == 0 {
                    return Err(ReadError::File(io::Error::from(
                        io::ErrorKind::UnexpectedEof,
                    )));
                }
                done += usize::try_from(res).unwrap_or(0);
            }
            Ok(buf)
        }

        fn disable(&mut self) -> ReadError {
            self.ring = None;
            ReadError::Ring
        }

        /// Disables the ring without closing it: closing could let the kernel finish the
        /// in-flight read into memory the caller is about to reuse.
        fn disable_leaking(&mut self) -> ReadError {
            if let Some(ring) = self.ring.take() {
                std::mem::forget(ring);
            }
            ReadError::Ring
        }
    }
}
