//! The one error type of the crate.

use std::io;

/// Every failure an object provider or a key/digest helper can report.
///
/// Providers never panic on caller input or on-disk state; they return one of these variants.
/// Use [`Error::is_retryable`] to decide whether repeating the same call may succeed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The object `key` does not exist (returned by `get`, `get_range`, `get_verified`).
    #[error("object not found: {key}")]
    NotFound {
        /// The requested object key.
        key: String,
    },

    /// `key` is not an acceptable object key (see [`crate::keys::validate_key`]) or is not a
    /// well-formed revision-owned block key (see [`crate::keys::parse_block_key`]).
    #[error("invalid object key {key:?}: {reason}")]
    InvalidKey {
        /// The rejected key (possibly hostile; printed with `{:?}` escaping).
        key: String,
        /// Which rule the key broke.
        reason: &'static str,
    },

    /// The object's bytes do not match the length or SHA-256 digest recorded in metadata
    /// (docs/metadata-format.md, ArtifactManifest `length` / `digest_uri`). The bad bytes are never returned.
    #[error("integrity mismatch for {key}: expected {expected}, got {actual}")]
    IntegrityMismatch {
        /// The object key that was read.
        key: String,
        /// What metadata promised: `"<n> bytes"` for a length mismatch, else a `sha256:` URI.
        expected: String,
        /// What was read, in the same form as `expected`.
        actual: String,
    },

    /// `get_range` asked for bytes `[offset, offset + len)` that do not lie inside the object
    /// of `size` bytes. A short read at end-of-object is always this error, never a short buffer.
    #[error("range [{offset}, +{len}) out of bounds for {key} of {size} bytes")]
    RangeOutOfBounds {
        /// The object key.
        key: String,
        /// Requested start, in bytes from the start of the object.
        offset: u64,
        /// Requested length in bytes.
        len: u64,
        /// Object size in bytes as observed by the provider.
        size: u64,
    },

    /// A digest URI is not `"sha256:"` followed by exactly 64 lowercase hex characters.
    #[error("invalid digest URI {value:?}")]
    InvalidDigest {
        /// The rejected value.
        value: String,
    },

    /// An operating-system I/O error from a provider. `op` names the step that failed
    /// (`"open"`, `"read"`, `"write"`, `"sync"`, `"rename"`, `"link"`, `"sync_dir"`, ...).
    #[error("I/O error during {op} on {key:?}: {source}")]
    Io {
        /// The provider step that failed.
        op: &'static str,
        /// The object key (or, for directory-level steps, the key whose path was involved).
        key: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// A transient provider failure (throttling, timeout, connection loss, injected fault).
    /// The outcome of a write that fails this way may be ambiguous: the object may or may not
    /// exist afterwards, so callers reconcile through the StagedObject ledger (docs/metadata-format.md).
    #[error("object provider unavailable for {key}: {reason}")]
    Unavailable {
        /// The object key of the failed call.
        key: String,
        /// Human-readable cause.
        reason: String,
    },

    /// A write whose outcome is unknown: the request was sent, then the connection was lost or
    /// the attempt timed out before a response arrived (or a retried create-only write found an
    /// object that the lost attempt may itself have written). The object may or may not exist.
    /// Never guessed: record it and decide with [`crate::resolve_ambiguous`] (HEAD + digest).
    #[error("ambiguous outcome of {op} on {key}: {reason}")]
    Ambiguous {
        /// The write that was attempted (`"put"`, `"put_if_absent"`).
        op: &'static str,
        /// The object key of the write.
        key: String,
        /// Human-readable cause (timeout, connection loss, ...).
        reason: String,
    },

    /// The provider's configuration is unusable (bad bucket name or prefix, unparsable endpoint,
    /// cache directory that cannot be used, ...). Nothing was read or written.
    #[error("invalid object-store configuration: {reason}")]
    InvalidConfig {
        /// What is wrong.
        reason: String,
    },

    /// The provider refused the request for good (access denied, missing bucket, bad request,
    /// ...); repeating it unchanged fails the same way. `status` is the HTTP status when known.
    #[error("object provider refused {op} on {key}: {reason}")]
    Refused {
        /// The provider call (`"put"`, `"get"`, `"head"`, `"list"`, ...).
        op: &'static str,
        /// The object key (or list prefix) of the call.
        key: String,
        /// HTTP status code, when the provider answered with one.
        status: Option<u16>,
        /// Service error code and message.
        reason: String,
    },
}

impl Error {
    /// `true` when repeating the same call unchanged may succeed: [`Error::Unavailable`] and
    /// I/O errors of kind `Interrupted` or `TimedOut`. Everything else (missing object, bad
    /// key, integrity mismatch, range, bad digest, other I/O, refusal, configuration) is
    /// permanent for that call. [`Error::Ambiguous`] is not retryable as such: resolve it first
    /// with [`crate::resolve_ambiguous`], then retry only when the object is absent.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Unavailable { .. } => true,
            Error::Io { source, .. } => matches!(
                source.kind(),
                io::ErrorKind::Interrupted | io::ErrorKind::TimedOut
            ),
            _ => false,
        }
    }

    /// Builds [`Error::Io`].
    pub(crate) fn io(op: &'static str, key: &str, source: io::Error) -> Error {
        Error::Io {
            op,
            key: key.to_owned(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unavailable_and_transient_io_are_retryable() {
        let unavailable = Error::Unavailable {
            key: "k".into(),
            reason: "throttled".into(),
        };
        assert!(unavailable.is_retryable());
        assert!(Error::io("read", "k", io::Error::from(io::ErrorKind::Interrupted)).is_retryable());
        assert!(Error::io("read", "k", io::Error::from(io::ErrorKind::TimedOut)).is_retryable());
        assert!(!Error::io(
            "read",
            "k",
            io::Error::from(io::ErrorKind::PermissionDenied)
        )
        .is_retryable());
        assert!(!Error::NotFound { key: "k".into() }.is_retryable());
        assert!(!Error::IntegrityMismatch {
            key: "k".into(),
            expected: "a".into(),
            actual: "b".into()
        }
        .is_retryable());
        assert!(!Error::InvalidDigest { value: "x".into() }.is_retryable());
        assert!(!Error::Ambiguous {
            op: "put",
            key: "k".into(),
            reason: "timeout".into()
        }
        .is_retryable());
    }
}
