//! The SDK error type of [`crate::client::Client`].
//!
//! Every variant is typed so that the Workbench facade (and any other front door) can map it to a
//! stable error code without parsing messages. Messages never contain storage keys, object keys,
//! revision ids or host paths of the object store.

use std::path::PathBuf;

/// Errors returned by [`crate::client::Client`] and the adapters built on it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The workbench does not exist or is not visible (staging or retired incarnations are
    /// invisible to every read surface).
    #[error("workbench `{workbench_id}` does not exist")]
    WorkbenchNotFound {
        /// The external workbench id that was looked up.
        workbench_id: String,
    },
    /// The workbench name is held by a staging or retired incarnation and cannot be created.
    #[error("workbench `{workbench_id}` is reserved by an unfinished or abandoned operation")]
    WorkbenchUnavailable {
        /// The external workbench id.
        workbench_id: String,
    },
    /// `create_if_missing` was false and the directory holds no store.
    #[error("no NoKV store exists at this location")]
    StoreNotFound,
    /// Another process kept the store locked for the whole lock wait (retry later).
    #[error("another process is using the store; retry")]
    StoreBusy,
    /// A running `nokv serve` owns the store (it holds the lock for as long as it runs): send
    /// the call to it instead (`--server URL`, `NOKV_SERVER`, `nokv_remote::RemoteClient`).
    /// Found at once, without the lock wait, from the address the server recorded in the store
    /// (`<store>/server/address.json`) and its live process.
    #[error("a running `nokv serve` owns this store and serves it at {url}; send the call there (--server {url})")]
    StoreServed {
        /// The server's base URL, e.g. `http://127.0.0.1:7070`.
        url: String,
    },
    /// No artifact exists at the path.
    #[error("no artifact at `{path}`")]
    NotFound {
        /// Workbench-relative path.
        path: String,
    },
    /// A create-only publication found an artifact already present.
    #[error("an artifact already exists at `{path}`")]
    AlreadyExists {
        /// Workbench-relative path.
        path: String,
    },
    /// A create-only publication named a path that is an implicit directory (published paths
    /// lie below it). A path is a file or a directory, never both (docs/workbench.md, "Files and
    /// directories"); the Workbench facade answers `AlreadyExists` with `details.kind =
    /// "directory"`.
    #[error("`{path}` is a directory (paths exist below it); a file cannot be created there")]
    DirectoryExists {
        /// Workbench-relative path.
        path: String,
    },
    /// A replace, append or single-path removal named an implicit directory, not a file (facade
    /// `NotArtifact`).
    #[error("`{path}` is a directory, not a file")]
    NotArtifact {
        /// Workbench-relative path.
        path: String,
    },
    /// A write named a path below a file (facade `NotDirectory`): `file` is a published file and
    /// a proper prefix of `path`.
    #[error("`{file}` is a file, so `{path}` cannot be written below it")]
    NotDirectory {
        /// Workbench-relative path that was to be written.
        path: String,
        /// Workbench-relative path of the file that is a proper prefix of `path`.
        file: String,
    },
    /// A conditional write lost its compare-and-swap on the path generation.
    #[error("`{path}` changed concurrently: expected generation {expected:?}, found {actual:?}")]
    GenerationConflict {
        /// Workbench-relative path.
        path: String,
        /// Generation the caller expected (`None`: expected the path to be absent).
        expected: Option<u64>,
        /// Generation found (`None`: the path is absent).
        actual: Option<u64>,
    },
    /// The caller's arguments are invalid (bad path, bad id, bad range …); nothing was written.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A path failed the shared normalizer (docs/metadata-format.md, "Ids, Names, And Keys").
    #[error("invalid path `{path}`: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What rule it broke.
        reason: String,
    },
    /// A byte range lies outside the body.
    #[error("range [{offset}, {offset}+{len}) is outside the body of {size} bytes")]
    RangeOutOfBounds {
        /// First byte requested.
        offset: u64,
        /// Bytes requested.
        len: u64,
        /// Body size in bytes.
        size: u64,
    },
    /// An object block could not be read or failed its SHA-256 check. Retryable; bytes that fail
    /// verification are never returned.
    #[error("artifact bytes are unavailable: {0}")]
    ObjectUnavailable(String),
    /// A concurrent writer kept moving the read version; retries were exhausted.
    #[error("the store was busy with concurrent writers; retry")]
    Busy,
    /// The store cannot be written through this handle: the client was opened read-only
    /// ([`crate::client::ClientOptions::read_only`]), or the store's files are on a read-only file system
    /// or belong to another user without write permission. Nothing was written; retrying the
    /// same write does not help. `reason` says which (no host paths).
    #[error("the store is read-only ({reason}); nothing was written")]
    ReadOnlyStore {
        /// `opened read-only`, `read-only file system` or `no write permission`.
        reason: String,
    },
    /// A materialize would merge two workbench paths into one local file: the destination's
    /// file system treats `path` and `other_path` (workbench-relative) as the same name because
    /// it folds letter case (`Report.txt` / `report.txt`; vfat, exFAT, NTFS, macOS by default)
    /// or normalizes Unicode (NFC / NFD spellings; macOS). `folding` says which:
    /// `"case"`, `"unicode"` or `"case and unicode"`. The destination was probed before
    /// anything was written, so nothing was written (docs/design.md, "Materialize onto a
    /// folding file system").
    #[error(
        "`{path}` and `{other_path}` would be the same file in the local destination, whose file \
         system folds {folding} in names; nothing was written — materialize them into a \
         destination that keeps names apart (or one narrower prefix at a time), or rename one \
         in the workbench"
    )]
    LocalNameCollision {
        /// The first workbench-relative path (in listing order).
        path: String,
        /// The workbench-relative path the destination would merge with it.
        other_path: String,
        /// What the destination folds: `"case"`, `"unicode"` or `"case and unicode"`.
        folding: String,
    },
    /// A materialize cannot write the workbench path `path` (workbench-relative) to its local
    /// destination: one of its components is `name_bytes` bytes long, over the `limit_bytes` the
    /// destination's file system allows for one file name (typically 255). The store accepts such
    /// a component (docs/metadata-format.md does not bound one that way); checked for every listed file before
    /// anything is written, so nothing was written.
    #[error(
        "`{path}` cannot be written to the local destination: one of its names is {name_bytes} \
         bytes, over the {limit_bytes} bytes the destination's file system allows per name; \
         nothing was written — materialize a narrower prefix, or rename the path in the workbench"
    )]
    LocalNameTooLong {
        /// Workbench-relative path (e.g. `input/…`).
        path: String,
        /// Bytes of its longest component.
        name_bytes: usize,
        /// The destination file system's limit on one file name, in bytes.
        limit_bytes: u64,
    },
    /// A materialize cannot write the workbench path `path` (workbench-relative) to its local
    /// destination: the local path it would be written under (with its temporary name) is
    /// `path_bytes` bytes, over the `limit_bytes` the operating system accepts for one path
    /// (`PATH_MAX`, 4,096 on Linux, counting the terminating NUL). Checked for every listed file
    /// before anything is written, so nothing was written.
    #[error(
        "`{path}` cannot be written to the local destination: its local path would be \
         {path_bytes} bytes, over the {limit_bytes} bytes the operating system accepts for one \
         path; nothing was written — materialize into a shorter destination or a narrower prefix"
    )]
    LocalPathTooLong {
        /// Workbench-relative path (e.g. `input/…`).
        path: String,
        /// Bytes of the local path (destination, the path, the temporary name's extra bytes).
        path_bytes: usize,
        /// The operating system's limit on one path, in bytes.
        limit_bytes: usize,
    },
    /// The metadata layer refused or failed the operation.
    #[error(transparent)]
    Meta(meta::Error),
    /// The control plane refused a placement or ownership request (docs/metadata-format.md, "Placement
    /// Authority"; see [`crate::control`]).
    #[error("{reason}")]
    Placement {
        /// What was refused.
        kind: PlacementErrorKind,
        /// Human-readable reason.
        reason: String,
    },
    /// A local file operation failed (materialize/collect, store directory).
    #[error("{op} `{}`: {source}", path.display())]
    LocalIo {
        /// What was attempted.
        op: &'static str,
        /// The local file involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A local file did not match the digest recorded in the store.
    #[error("digest mismatch for `{path}`: expected {expected}, got {actual}")]
    DigestMismatch {
        /// Local or workbench path.
        path: String,
        /// Expected `sha256:` URI.
        expected: String,
        /// Actual `sha256:` URI.
        actual: String,
    },
    /// The store's persisted configuration (`nokv-store.json`, see [`crate::store_config`]) is
    /// unreadable or invalid, or `nokv init` was refused (already initialized differently).
    #[error("store configuration: {reason}")]
    StoreConfig {
        /// What is wrong.
        reason: String,
    },
    /// The configured object namespace is not this store's: its namespace marker object is
    /// missing or carries another store's uuid (opened against a different bucket/prefix).
    /// Nothing was read from or written to it.
    #[error("object namespace mismatch: {reason}")]
    NamespaceMismatch {
        /// Which namespace and which uuids were involved.
        reason: String,
    },
    /// A durable operation (e.g. BuildCommit) reached a terminal failure; exact retries return
    /// the same `code` (a stable Workbench error code such as `WorkbenchCommitConflict`,
    /// `Conflict`, `InvalidState` or `NotFound`) and message.
    #[error("{message}")]
    OperationFailed {
        /// Stable Workbench error code.
        code: String,
        /// Human-readable message without storage identities.
        message: String,
    },
    /// The NoKV server could not be reached, or the connection broke before a complete response
    /// arrived (remote client). Retryable: a write retried with the same request id is executed
    /// at most once.
    #[error(
        "the NoKV server at {url} could not be reached, or the connection broke before its \
         complete answer arrived: {reason}"
    )]
    Connection {
        /// Server base URL.
        url: String,
        /// What failed (connect, timeout, reset …).
        reason: String,
    },
    /// The NoKV server refused the request itself (authentication, a malformed request,
    /// limits, shutdown) with this HTTP status and stable code (remote client).
    #[error("the NoKV server refused the request ({status} {code}): {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// Stable code (`Unauthorized`, `InvalidArguments`, `PayloadTooLarge`, `Timeout`,
        /// `Unavailable`, `RequestInFlight`, `RequestIdReused`, `OutcomeUnknown`, …).
        code: String,
        /// What was wrong.
        message: String,
        /// Whether repeating the request may succeed.
        retryable: bool,
        /// The refusal's `details` object as the server sent it (e.g. `maximum_bytes` of a
        /// 413 `PayloadTooLarge`); empty when it sent none. Boxed to keep `Error` small.
        details: Box<serde_json::Map<String, serde_json::Value>>,
    },
}

impl Error {
    /// Whether repeating the same call may succeed: busy stores, connection failures, retryable
    /// server refusals and retryable Workbench codes (`Conflict`, `ReadFenceChanged`,
    /// `ObjectUnavailable`).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Busy | Error::StoreBusy | Error::Connection { .. } => true,
            Error::ObjectUnavailable(_) | Error::GenerationConflict { .. } => true,
            Error::Server { retryable, .. } => *retryable,
            Error::OperationFailed { code, .. } => {
                matches!(
                    code.as_str(),
                    "Conflict" | "ReadFenceChanged" | "ObjectUnavailable"
                )
            }
            _ => false,
        }
    }
}

/// Result alias for the SDK.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error for a store whose writer lock another process kept: [`Error::StoreServed`] when a
/// live `nokv serve` is recorded for `store` (a server never releases the lock), else
/// [`Error::StoreBusy`] (retryable).
pub(crate) fn locked(store: &std::path::Path) -> Error {
    match crate::address::serving(store) {
        Some(url) => Error::StoreServed { url },
        None => Error::StoreBusy,
    }
}

impl From<meta::Error> for Error {
    fn from(err: meta::Error) -> Self {
        match err {
            meta::Error::WorkspaceNotFound { workbench_id } => {
                Error::WorkbenchNotFound { workbench_id }
            }
            meta::Error::ReadOnly => Error::ReadOnlyStore {
                reason: "opened read-only".into(),
            },
            // A write of a handle sharing the writer lock waited its whole lock wait
            // (`<store>/meta/LOCK`).
            meta::Error::Storage(holt::Error::Locked { path }) => {
                match path.parent().and_then(std::path::Path::parent) {
                    Some(store) => locked(store),
                    None => Error::StoreBusy,
                }
            }
            other => Error::Meta(other),
        }
    }
}

impl From<objstore::Error> for Error {
    fn from(err: objstore::Error) -> Self {
        match err {
            objstore::Error::RangeOutOfBounds {
                offset, len, size, ..
            } => Error::RangeOutOfBounds { offset, len, size },
            other => Error::ObjectUnavailable(object_error_message(&other)),
        }
    }
}

/// The [`Error::ObjectUnavailable`] message of a block the metadata names but the object store
/// no longer holds (a lost block: retrying does not bring it back; `nokv fsck` names it).
pub const MISSING_BLOCK: &str = "a block of the artifact is missing";
/// The [`Error::ObjectUnavailable`] message of a block whose bytes differ from their recorded
/// SHA-256 (a damaged block).
pub const DAMAGED_BLOCK: &str = "a block of the artifact failed its SHA-256 integrity check";

/// `details.reason` of an [`Error::ObjectUnavailable`] with `message`: `object_missing` for
/// [`MISSING_BLOCK`], `object_damaged` for [`DAMAGED_BLOCK`]; `None` for a failure that may
/// pass (an unreachable provider, an I/O error).
pub fn object_unavailable_reason(message: &str) -> Option<&'static str> {
    match message {
        MISSING_BLOCK => Some("object_missing"),
        DAMAGED_BLOCK => Some("object_damaged"),
        _ => None,
    }
}

/// A message for an object-store failure that does not leak object keys.
fn object_error_message(err: &objstore::Error) -> String {
    match err {
        objstore::Error::NotFound { .. } => MISSING_BLOCK.into(),
        objstore::Error::IntegrityMismatch { .. } => DAMAGED_BLOCK.into(),
        objstore::Error::Io { op, source, .. } => format!("object store {op} failed: {source}"),
        objstore::Error::Unavailable { reason, .. } => {
            format!("object store unavailable: {reason}")
        }
        objstore::Error::Ambiguous { reason, .. } => {
            format!("object store write outcome unknown: {reason}")
        }
        _ => "object store error".into(),
    }
}

/// Why the control plane refused a request ([`Error::Placement`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementErrorKind {
    /// Another root already has this name.
    NameTaken,
    /// No root has this name or id.
    UnknownRoot,
    /// No shard record has this id.
    UnknownShard,
    /// The root is populated (Active or later): it never changes logical shard.
    PopulatedRoot,
    /// The logical shard already serves a root (one root per logical shard in this version).
    ShardHasRoot,
    /// Another owner holds the shard's lease.
    OwnerHeld,
    /// This owner's lease lapsed or was taken over: it must stop serving the shard.
    LeaseLost,
    /// A record changed concurrently; re-read and retry.
    Conflict,
}

/// The error of creating the store directory `dir`: a location that is (or lies under) a
/// regular file is `InvalidArgument` (a wrong `--store`, not a failure of NoKV); no write
/// permission or a read-only file system is `ReadOnlyStore`; anything else `LocalIo`.
pub(crate) fn store_dir_error(dir: &std::path::Path, source: std::io::Error) -> Error {
    use std::io::ErrorKind;
    if let Some(reason) = not_writable(&source) {
        return Error::ReadOnlyStore {
            reason: reason.into(),
        };
    }
    match source.kind() {
        ErrorKind::AlreadyExists | ErrorKind::NotADirectory => Error::InvalidArgument(
            "the store location is not a directory (it is, or lies under, a regular file); \
             choose a directory"
                .into(),
        ),
        _ => Error::LocalIo {
            op: "create store directory",
            path: dir.to_path_buf(),
            source,
        },
    }
}

/// Why an I/O error means the store cannot be written by this process: `Some("read-only file
/// system")` for `EROFS`, `Some("no write permission")` for `EACCES`/`EPERM`, `None` otherwise.
pub(crate) fn not_writable(e: &std::io::Error) -> Option<&'static str> {
    match e.kind() {
        std::io::ErrorKind::ReadOnlyFilesystem => Some("read-only file system"),
        std::io::ErrorKind::PermissionDenied => Some("no write permission"),
        _ => None,
    }
}
