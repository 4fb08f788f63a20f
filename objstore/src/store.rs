//! The provider contract every object store implements ([`ObjectStore`]) and the checks built
//! on it alone: [`verify_bytes`], [`get_verified`] and [`resolve_ambiguous`]. A leaf under the
//! providers: [`crate::LocalDir`], [`crate::S3`], [`crate::CachedStore`] and the testing wrapper
//! implement the trait; this file imports none of them.

use std::sync::Arc;

use crate::digest::{self, parse_sha256_uri, Sha256Stream};
use crate::error::Error;
use crate::keys::validate_key;

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

/// Watches one upload of [`ObjectStore::put_if_absent_observed`] (docs/metadata-format.md, "Upload And Append":
/// the StagedObject ledger owns "all object keys, multipart ids, lengths, and digests" before
/// upload).
pub trait UploadObserver {
    /// Called when a provider that uploads in parts has created the multipart upload
    /// `upload_id` for the key, before the first part is sent. Returning an error aborts the
    /// upload (nothing is sent) and fails the put with that error — e.g. when the id could not be
    /// recorded durably.
    fn upload_started(&mut self, upload_id: &str) -> Result<(), Error>;
    /// Called after part `part_number` (1-based) of the upload was sent and acknowledged.
    fn part_sent(&mut self, part_number: u32) {
        let _ = part_number;
    }
}

/// One multipart upload a provider still holds open (see [`ObjectStore::list_uploads`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpenUpload {
    /// The object key the upload would create.
    pub key: String,
    /// The provider's upload id.
    pub upload_id: String,
}

/// An object provider: a flat map from validated keys (see [`keys::validate_key`]) to
/// immutable-by-convention byte strings.
///
/// Every method first validates `key` and returns [`Error::InvalidKey`] for a bad key without
/// touching storage. Providers may also return [`Error::Io`] or [`Error::Unavailable`]
/// (retryable) from any method; remote providers also return [`Error::Refused`] (a permanent
/// service refusal) and, from writes, [`Error::Ambiguous`] (sent, outcome unknown: decide with
/// [`resolve_ambiguous`]).
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
    /// ownership (docs/metadata-format.md, StagedObject). `prefix` may be empty (all keys).
    /// Errors: [`Error::InvalidKey`] when `prefix` has characters outside the key alphabet or a
    /// leading `/`.
    fn list(&self, prefix: &str) -> Result<Vec<String>, Error>;

    /// Reads the whole object and checks it against the ArtifactManifest's recorded `length`
    /// (bytes) and `digest_uri` (docs/metadata-format.md) before returning it. This is the entry point that
    /// lets a caching provider ([`CachedStore`]) answer from a local copy: the expected digest
    /// travels with the request, so a cached copy is re-verified and never trusted blindly.
    ///
    /// The default implementation is [`ObjectStore::get`] followed by the check. Errors: as
    /// [`get_verified`].
    fn get_verified(
        &self,
        key: &str,
        expected_len: u64,
        expected_digest_uri: &str,
    ) -> Result<Vec<u8>, Error> {
        let expected = parse_sha256_uri(expected_digest_uri)?;
        let bytes = self.get(key)?;
        verify_bytes(key, bytes, expected_len, &expected)
    }

    /// Short provider name for logs and diagnostics: `"local"`, `"s3"` (a [`CachedStore`]
    /// reports its remote provider's name).
    fn provider_name(&self) -> &'static str;

    /// [`ObjectStore::put_if_absent`] that reports a multipart upload to `observer` before its
    /// first part is sent (so a ledger can own the upload id) and after each part. Providers that
    /// never upload in parts (the default, [`LocalDir`]) just call `put_if_absent` and never call
    /// the observer.
    ///
    /// Errors: those of `put_if_absent`, plus the error `observer.upload_started` returned (the
    /// upload is then aborted).
    fn put_if_absent_observed(
        &self,
        key: &str,
        bytes: &[u8],
        observer: &mut dyn UploadObserver,
    ) -> Result<PutOutcome, Error> {
        let _ = observer;
        self.put_if_absent(key, bytes)
    }

    /// Aborts the multipart upload `upload_id` of `key` so its parts are freed. Idempotent: an
    /// upload that is unknown, already aborted or completed is `Ok`. Providers without multipart
    /// uploads (the default) have nothing to abort.
    ///
    /// Errors: [`Error::InvalidKey`]; [`Error::Unavailable`] / [`Error::Refused`] from remote
    /// providers; [`Error::Ambiguous`] when an abort was sent and never answered.
    fn abort_upload(&self, key: &str, upload_id: &str) -> Result<(), Error> {
        let _ = (key, upload_id);
        validate_key(key)
    }

    /// The multipart uploads still open under `prefix` (diagnostics and tests: ownership comes
    /// from the StagedObject ledger, never from this listing). Default: none.
    ///
    /// Errors: [`Error::InvalidKey`] for a bad prefix; remote failures, including
    /// [`Error::Refused`] (HTTP 501) from services that do not implement the listing.
    fn list_uploads(&self, prefix: &str) -> Result<Vec<OpenUpload>, Error> {
        let _ = prefix;
        Ok(Vec::new())
    }
}

/// Checks `bytes` (read from `key`) against an expected length in bytes and raw SHA-256
/// digest; returns them unchanged when both match.
///
/// Errors: [`Error::IntegrityMismatch`] with `expected`/`actual` as `"<n> bytes"` on a length
/// mismatch, or as `sha256:` URIs on a digest mismatch (the bad bytes are dropped).
pub fn verify_bytes(
    key: &str,
    bytes: Vec<u8>,
    expected_len: u64,
    expected_digest: &[u8; 32],
) -> Result<Vec<u8>, Error> {
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
    if &actual_digest != expected_digest {
        return Err(Error::IntegrityMismatch {
            key: key.to_owned(),
            expected: digest::sha256_uri_from_bytes(expected_digest),
            actual: digest::sha256_uri_from_bytes(&actual_digest),
        });
    }
    Ok(bytes)
}

/// What [`resolve_ambiguous`] found under a key whose write had an ambiguous outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// An object exists with exactly the expected length and SHA-256: the write landed intact
    /// (or an identical object was already there). Nothing needs to be re-sent.
    Landed,
    /// No object exists under the key: the write did not land (yet). It is safe to send it
    /// again; a delayed copy of the lost request can only write the same bytes.
    Absent,
    /// An object exists but its bytes differ from the expected ones (`size` bytes). It is not
    /// this write's object: report it, never adopt it.
    Different {
        /// Size in bytes of the object found.
        size: u64,
    },
}

/// Reads the whole object `key` and checks it against the ArtifactManifest's recorded
/// `length` (bytes) and `digest_uri` (docs/metadata-format.md). Returns the bytes only if both match.
///
/// Errors: [`Error::InvalidDigest`] when `expected_digest_uri` is not a canonical `sha256:` URI
/// (checked before any read); [`Error::IntegrityMismatch`] with `expected`/`actual` as
/// `"<n> bytes"` on a length mismatch, or as digest URIs on a digest mismatch (the bad bytes
/// are dropped, never returned); plus any error of [`ObjectStore::get`].
///
/// Delegates to [`ObjectStore::get_verified`], so a caching provider may answer from a local,
/// re-verified copy.
pub fn get_verified(
    store: &dyn ObjectStore,
    key: &str,
    expected_len: u64,
    expected_digest_uri: &str,
) -> Result<Vec<u8>, Error> {
    store.get_verified(key, expected_len, expected_digest_uri)
}

/// Decides the outcome of a write that failed with [`Error::Ambiguous`]: HEAD the key, and when
/// an object of `expected_len` bytes exists, read it and compare its SHA-256 with
/// `expected_digest_uri` (the digest the StagedObject ledger recorded before the first byte was
/// sent, docs/metadata-format.md). Reads bypass any cache (uses [`ObjectStore::head`] and
/// [`ObjectStore::get`]).
///
/// Call it once the ambiguous request can no longer be in flight (its attempt timeout has
/// passed); a request still travelling could land after an `Absent` answer, which is why the
/// ledger keeps owning the key until cleanup.
///
/// Errors: [`Error::InvalidDigest`] for a malformed `expected_digest_uri` (before any request);
/// any error of `head`/`get` (an object deleted between HEAD and GET is `Absent`).
pub fn resolve_ambiguous(
    store: &dyn ObjectStore,
    key: &str,
    expected_len: u64,
    expected_digest_uri: &str,
) -> Result<Resolution, Error> {
    let expected = parse_sha256_uri(expected_digest_uri)?;
    let Some(meta) = store.head(key)? else {
        return Ok(Resolution::Absent);
    };
    if meta.size != expected_len {
        return Ok(Resolution::Different { size: meta.size });
    }
    let bytes = match store.get(key) {
        Ok(bytes) => bytes,
        Err(Error::NotFound { .. }) => return Ok(Resolution::Absent),
        Err(e) => return Err(e),
    };
    let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    match verify_bytes(key, bytes, expected_len, &expected) {
        Ok(_) => Ok(Resolution::Landed),
        Err(Error::IntegrityMismatch { .. }) => Ok(Resolution::Different { size }),
        Err(e) => Err(e),
    }
}

/// Implements [`ObjectStore`] for a smart pointer by forwarding every method to the pointee, so
/// a `Box<dyn ObjectStore>` or an `Arc<S>` is a provider wherever one is expected.
macro_rules! forward_object_store {
    ($pointer:ident) => {
        impl<T: ObjectStore + ?Sized> ObjectStore for $pointer<T> {
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
            fn get_verified(
                &self,
                key: &str,
                len: u64,
                digest_uri: &str,
            ) -> Result<Vec<u8>, Error> {
                (**self).get_verified(key, len, digest_uri)
            }
            fn provider_name(&self) -> &'static str {
                (**self).provider_name()
            }
            fn put_if_absent_observed(
                &self,
                key: &str,
                bytes: &[u8],
                observer: &mut dyn UploadObserver,
            ) -> Result<PutOutcome, Error> {
                (**self).put_if_absent_observed(key, bytes, observer)
            }
            fn abort_upload(&self, key: &str, upload_id: &str) -> Result<(), Error> {
                (**self).abort_upload(key, upload_id)
            }
            fn list_uploads(&self, prefix: &str) -> Result<Vec<OpenUpload>, Error> {
                (**self).list_uploads(prefix)
            }
        }
    };
}

forward_object_store!(Box);
forward_object_store!(Arc);
