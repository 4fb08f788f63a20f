//! # objstore — NoKV's object bytes
//!
//! NoKV keeps metadata in holt and body bytes in object storage. Publication is object-first
//! and metadata-last (seed 000, "Publication"): a publish operation first writes immutable
//! blocks under revision-owned keys, then one metadata command makes them visible. This crate is
//! the bytes side of that contract:
//!
//! - [`ObjectStore`] — the small provider trait (put, put-if-absent, get, get-range, head,
//!   delete, and list for diagnostics only). Object listing is never namespace truth.
//! - [`LocalDir`] — the embedded default provider: one file per object under a root directory,
//!   written via temp file + `fsync` + rename (or hard link for put-if-absent) + directory fsync.
//! - [`keys`] — the revision-owned block layout
//!   `nokv/artifacts/{logical_shard_id}/{root_id}/{artifact_revision_id}/blocks/{object_index}`
//!   (seed 001) and the key grammar all providers accept.
//! - [`digest`] — the project's one `sha256:` digest-URI helper.
//! - [`get_verified`] — a read that checks the length and SHA-256 recorded in the
//!   ArtifactManifest (seed 000) and never hands back bytes that fail the check.
//! - `testing` (cargo feature `testing`) — `FaultyStore`, a fault-injecting wrapper.
//!
//! Every key is validated with [`keys::validate_key`] before a provider touches storage, so a
//! hostile key can never escape a provider's root.

#![warn(missing_docs)]

pub mod digest;
mod error;
pub mod keys;
mod local;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use digest::{hex_lower, parse_sha256_uri, sha256_uri, Sha256Stream};
pub use error::Error;
pub use keys::{block_key, parse_block_key, revision_prefix, validate_key, BlockKey};
pub use local::LocalDir;

/// Result of [`ObjectStore::put_if_absent`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PutOutcome {
    /// No object existed under the key; the given bytes are now durably stored there.
    Created,
    /// An object already existed under the key; it was left untouched (its bytes may differ
    /// from the ones offered).
    AlreadyExists,
}

/// Metadata of a stored object, from [`ObjectStore::head`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ObjectMeta {
    /// Object length in bytes.
    pub size: u64,
}

impl ObjectMeta {
    /// Metadata for an object of `size` bytes.
    pub fn new(size: u64) -> Self {
        Self { size }
    }
}

/// An object provider: a flat map from validated keys (see [`keys::validate_key`]) to
/// immutable-by-convention byte strings.
///
/// Every method first validates `key` and returns [`Error::InvalidKey`] for a bad key without
/// touching storage. Providers may also return [`Error::Io`] or [`Error::Unavailable`]
/// (retryable; a failed write's outcome may then be ambiguous) from any method.
pub trait ObjectStore: Send + Sync + std::fmt::Debug {
    /// Creates or overwrites `key` with `bytes`. When it returns `Ok`, the object is durable
    /// (survives a crash) and readers see either the old or the new bytes, never a mix.
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), Error>;

    /// Creates `key` with `bytes` only if no object exists under it (a CAS on absence).
    /// Returns [`PutOutcome::AlreadyExists`] and leaves the existing object untouched
    /// otherwise. `Created` is durable when returned.
    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, Error>;

    /// Reads the whole object. Errors: [`Error::NotFound`] when absent.
    fn get(&self, key: &str) -> Result<Vec<u8>, Error>;

    /// Reads exactly `len` bytes starting at byte `offset`. Errors: [`Error::NotFound`] when
    /// absent; [`Error::RangeOutOfBounds`] when `offset + len` exceeds the object size (a short
    /// read at end-of-object is an error, never a short buffer). `len == 0` inside the object
    /// (including `offset == size`) returns an empty buffer.
    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>, Error>;

    /// Object metadata, or `None` when absent.
    fn head(&self, key: &str) -> Result<Option<ObjectMeta>, Error>;

    /// Removes the object durably. Idempotent: deleting an absent key is `Ok`.
    fn delete(&self, key: &str) -> Result<(), Error>;

    /// Every key starting with `prefix` (plain string prefix, not only whole segments), sorted
    /// bytewise ascending. For diagnostics and tests only: never use listing to discover
    /// ownership (seed 000, StagedObject). `prefix` may be empty (all keys).
    /// Errors: [`Error::InvalidKey`] when `prefix` has characters outside the key alphabet or a
    /// leading `/`.
    fn list(&self, prefix: &str) -> Result<Vec<String>, Error>;

    /// Short provider name for logs and diagnostics: `"local"`, later `"s3"`.
    fn provider_name(&self) -> &'static str;
}

/// Reads the whole object `key` and checks it against the ArtifactManifest's recorded
/// `length` (bytes) and `digest_uri` (seed 000). Returns the bytes only if both match.
///
/// Errors: [`Error::InvalidDigest`] when `expected_digest_uri` is not a canonical `sha256:` URI
/// (checked before any read); [`Error::IntegrityMismatch`] with `expected`/`actual` as
/// `"<n> bytes"` on a length mismatch, or as digest URIs on a digest mismatch (the bad bytes
/// are dropped, never returned); plus any error of [`ObjectStore::get`].
pub fn get_verified(
    store: &dyn ObjectStore,
    key: &str,
    expected_len: u64,
    expected_digest_uri: &str,
) -> Result<Vec<u8>, Error> {
    let expected_digest = parse_sha256_uri(expected_digest_uri)?;
    let bytes = store.get(key)?;
    let actual_len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if actual_len != expected_len {
        return Err(Error::IntegrityMismatch {
            key: key.to_owned(),
            expected: format!("{expected_len} bytes"),
            actual: format!("{actual_len} bytes"),
        });
    }
    let mut stream = Sha256Stream::new();
    stream.update(&bytes);
    let actual_digest = stream.finish_bytes();
    if actual_digest != expected_digest {
        return Err(Error::IntegrityMismatch {
            key: key.to_owned(),
            expected: expected_digest_uri.to_owned(),
            actual: digest::sha256_uri_from_bytes(&actual_digest),
        });
    }
    Ok(bytes)
}

impl<T: ObjectStore + ?Sized> ObjectStore for Box<T> {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), Error> {
        (**self).put(key, bytes)
    }
    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, Error> {
        (**self).put_if_absent(key, bytes)
    }
    fn get(&self, key: &str) -> Result<Vec<u8>, Error> {
        (**self).get(key)
    }
    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>, Error> {
        (**self).get_range(key, offset, len)
    }
    fn head(&self, key: &str) -> Result<Option<ObjectMeta>, Error> {
        (**self).head(key)
    }
    fn delete(&self, key: &str) -> Result<(), Error> {
        (**self).delete(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>, Error> {
        (**self).list(prefix)
    }
    fn provider_name(&self) -> &'static str {
        (**self).provider_name()
    }
}

impl<T: ObjectStore + ?Sized> ObjectStore for std::sync::Arc<T> {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), Error> {
        (**self).put(key, bytes)
    }
    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, Error> {
        (**self).put_if_absent(key, bytes)
    }
    fn get(&self, key: &str) -> Result<Vec<u8>, Error> {
        (**self).get(key)
    }
    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>, Error> {
        (**self).get_range(key, offset, len)
    }
    fn head(&self, key: &str) -> Result<Option<ObjectMeta>, Error> {
        (**self).head(key)
    }
    fn delete(&self, key: &str) -> Result<(), Error> {
        (**self).delete(key)
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>, Error> {
        (**self).list(prefix)
    }
    fn provider_name(&self) -> &'static str {
        (**self).provider_name()
    }
}

#[cfg(test)]
mod tests;
