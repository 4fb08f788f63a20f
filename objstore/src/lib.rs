//! # objstore — NoKV's object bytes
//!
//! NoKV keeps metadata in holt and body bytes in object storage. Publication is object-first
//! and metadata-last (docs/metadata-format.md, "Upload And Append"): a publish operation first writes immutable
//! blocks under revision-owned keys, then one metadata command makes them visible. This crate is
//! the bytes side of that contract:
//!
//! - [`ObjectStore`] — the small provider trait (put, put-if-absent, get, get-range, head,
//!   delete, and list for diagnostics only). Object listing is never namespace truth.
//! - [`LocalDir`] — the embedded default provider: one file per object under a root directory,
//!   written via temp file + rename (or hard link for put-if-absent), made durable by a group
//!   flush (`syncfs`, shared by concurrent puts) or per file (`fsync` of the file and its
//!   directories), see [`ObjectSync`].
//! - [`S3`] — any S3-compatible service through aws-sdk-s3 (endpoint, region, bucket, key
//!   prefix, path-style addressing, multipart upload, `If-None-Match: *` creation, bounded
//!   retries, typed ambiguous outcomes). See [`s3`].
//! - [`CachedStore`] — a bounded local directory of verified blocks in front of a remote
//!   provider (LRU, io_uring reads where available, never trusted without its digest). See
//!   [`cache`].
//! - [`keys`] — the revision-owned block layout
//!   `nokv/artifacts/{logical_shard_id}/{root_id}/{artifact_revision_id}/blocks/{object_index}`
//!   (docs/design.md) and the key grammar all providers accept.
//! - [`digest`] — the project's one `sha256:` digest-URI helper.
//! - [`get_verified`] / [`ObjectStore::get_verified`] — a read that checks the length and
//!   SHA-256 recorded in the ArtifactManifest (docs/metadata-format.md) and never hands back bytes that fail
//!   the check (a cache serves it from local disk when it holds a matching copy).
//! - [`resolve_ambiguous`] — decides an [`Error::Ambiguous`] write by HEAD + digest.
//! - `testing` (cargo feature `testing`) — `FaultyStore`, a fault-injecting wrapper.
//!
//! Every key is validated with [`keys::validate_key`] before a provider touches storage, so a
//! hostile key can never escape a provider's root.

#![warn(missing_docs)]

pub mod cache;
pub mod digest;
mod error;
pub mod keys;
mod local;
pub mod retry;
pub mod s3;
mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use cache::{CacheOptions, CacheStats, CachedStore, ReadPath};
pub use digest::{hex_lower, parse_sha256_uri, sha256_uri, Sha256Stream};
pub use error::Error;
pub use keys::{block_key, parse_block_key, revision_prefix, validate_key, BlockKey};
pub use local::{LocalDir, LocalOptions, LocalStats, ObjectSync};
pub use retry::RetryPolicy;
pub use s3::{ConditionalPut, S3Config, S3};
pub use store::{
    get_verified, resolve_ambiguous, verify_bytes, ObjectMeta, ObjectStore, OpenUpload, PutOutcome,
    Resolution, UploadObserver,
};

#[cfg(test)]
mod tests;
