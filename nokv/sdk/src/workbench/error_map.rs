//! The one mapping of SDK and metadata errors to the facade's typed tool errors, shared by every
//! front door (tools, CLI, Python SDK, server): messages never carry storage identities, keys or
//! host paths.

use serde_json::Value;

use crate::client::Client;
use crate::error::Error;
use nokv_protocol::errors::{ErrorCode, ToolError};

/// The refusal (`code`) of a workbench that is not live, as every front door reports it: for an
/// expired workbench `` workbench `ID` expired at TIME; `` followed by `expired` (what that
/// means), with `details.reason = "expired"` and `details.expired_at` (RFC 3339); otherwise ``
/// workbench `ID` `` followed by `otherwise` (what to do). `details.path` is the workbench's
/// presented path. A failed expiry lookup counts as not expired (the caller is already reporting
/// an error).
fn workbench_refusal(
    client: &Client,
    workbench_id: &str,
    code: ErrorCode,
    expired: &str,
    otherwise: &str,
) -> ToolError {
    let wb_path = client.workbench_path(workbench_id);
    match client.workbench_expired_at(workbench_id).ok().flatten() {
        Some(at) => {
            let at = crate::expiry::format_time(at);
            ToolError::new(
                code,
                format!("workbench `{workbench_id}` expired at {at}; {expired}"),
            )
            .with_detail("path", Value::from(wb_path))
            .with_detail("reason", Value::from("expired"))
            .with_detail("expired_at", Value::from(at))
        }
        None => ToolError::new(code, format!("workbench `{workbench_id}` {otherwise}"))
            .with_detail("path", Value::from(wb_path)),
    }
}

/// The `NotFound` of a workbench that is not live, as every front door reports it: for an
/// expired workbench the message says when it expired and that its commits stay restorable, with
/// `details.reason = "expired"` and `details.expired_at` (RFC 3339); otherwise `` workbench `ID` ``
/// followed by `otherwise` (what to do). `details.path` is the workbench's presented path.
pub fn workbench_not_found(client: &Client, workbench_id: &str, otherwise: &str) -> ToolError {
    workbench_refusal(
        client,
        workbench_id,
        ErrorCode::NotFound,
        "it is no longer listed or writable (its commits stay restorable with workbench_restore at_commit)",
        otherwise,
    )
}

/// Maps an SDK error concerning `workbench_id` to the facade's typed error (the one mapping every
/// front door uses: tools, CLI, Python SDK). Messages never carry storage identities.
pub fn tool_error(client: &Client, workbench_id: &str, err: crate::error::Error) -> ToolError {
    use crate::error::Error as E;
    let wb_path = client.workbench_path(workbench_id);
    let presented = |rel: &str| format!("{wb_path}/{rel}");
    match err {
        E::WorkbenchNotFound { .. } => workbench_not_found(
            client,
            workbench_id,
            "does not exist; create it with workbench_create",
        ),
        E::WorkbenchUnavailable { .. } => workbench_refusal(
            client,
            workbench_id,
            ErrorCode::AlreadyExists,
            "an expired name is never reused, choose another id",
            "is reserved by an unfinished or abandoned operation; choose another id",
        ),
        E::NotFound { path } => ToolError::not_found(&presented(&path)),
        E::LocalNameTooLong {
            path,
            name_bytes,
            limit_bytes,
        } => local_limit(E::LocalNameTooLong {
            path: presented(&path),
            name_bytes,
            limit_bytes,
        }),
        E::LocalPathTooLong {
            path,
            path_bytes,
            limit_bytes,
        } => local_limit(E::LocalPathTooLong {
            path: presented(&path),
            path_bytes,
            limit_bytes,
        }),
        E::AlreadyExists { path } => ToolError::already_exists(&presented(&path)),
        E::LocalNameCollision {
            path,
            other_path,
            folding,
        } => local_limit(E::LocalNameCollision {
            path: presented(&path),
            other_path: presented(&other_path),
            folding,
        }),
        // A path is a file or a directory, never both (docs/workbench.md, "Files and directories").
        E::DirectoryExists { path } => ToolError::new(
            ErrorCode::AlreadyExists,
            format!(
                "{} is a directory (files exist below it), so a file cannot be created there; choose another name",
                presented(&path)
            ),
        )
        .with_detail("path", Value::from(presented(&path)))
        .with_detail("kind", Value::from("directory")),
        E::NotArtifact { path } => ToolError::not_artifact(&presented(&path)),
        E::NotDirectory { path, file } => ToolError::new(
            ErrorCode::NotDirectory,
            format!(
                "{} is a file, so nothing can be written below it at {}; choose a path outside it",
                presented(&file),
                presented(&path)
            ),
        )
        .with_detail("path", Value::from(presented(&path)))
        .with_detail("file", Value::from(presented(&file))),
        E::GenerationConflict {
            path,
            expected,
            actual,
        } => ToolError::conflict("PathGeneration")
            .with_detail("path", Value::from(presented(&path)))
            .with_detail("expected_generation", expected.map_or(Value::Null, Value::from))
            .with_detail("actual_generation", actual.map_or(Value::Null, Value::from)),
        E::InvalidArgument(msg) => ToolError::invalid_arguments(&msg),
        E::InvalidPath { path, reason } => {
            ToolError::invalid_arguments(format!("invalid path `{path}`: {reason}"))
        }
        E::RangeOutOfBounds { offset, len, size } => ToolError::invalid_arguments(format!(
            "range starting at byte {offset} ({len} bytes) is outside the body of {size} bytes"
        )),
        // A lost or damaged block stays ObjectUnavailable (docs/workbench.md), with a reason that
        // tells an agent not to expect a retry to help.
        // (fsck finds missing blocks from the listing; it does not read bytes, so a damaged
        // block is not sent there.)
        E::ObjectUnavailable(msg) => match crate::error::object_unavailable_reason(&msg) {
            Some(reason) => {
                let advice = if reason == "object_missing" {
                    "run nokv fsck to list every missing block, and publish the file again"
                } else {
                    "publish the file again"
                };
                ToolError::object_unavailable(format!("{msg}; retrying will not help: {advice}"))
                    .with_detail("reason", Value::from(reason))
            }
            None => ToolError::object_unavailable(&msg),
        },
        E::Busy => ToolError::conflict("ReadVersion"),
        // A request id bound to another request (docs/design.md, "Request ids of a put"):
        // retrying can never succeed, the id stays bound to its first request.
        E::Meta(meta::Error::OperationIntentMismatch { operation_id }) => {
            ToolError::invalid_arguments(
                "this request id is already bound to a different request (another path, body, \
                 content type or condition); pick a new request id for a new request",
            )
            .with_detail("reason", Value::from(REQUEST_ID_REUSED))
            .with_detail("request_id", Value::from(operation_id))
        }
        // The same request id is running right now (or its earlier attempt awaits recovery).
        E::Meta(meta::Error::OperationState { .. }) => ToolError::conflict("OperationState"),
        E::DigestMismatch { path, .. } => {
            ToolError::object_unavailable(format!("digest mismatch for `{path}`"))
        }
        other => store_error(other),
    }
}

/// `details.reason` of the refusal of a request id already bound to a different request
/// (`InvalidArguments`, not retryable).
pub const REQUEST_ID_REUSED: &str = "request_id_reused";

/// The typed tool error of a failed removal, for every front door: a request id reused for a
/// different command is `InvalidArguments` with `details.reason = "request_id_reused"`; a
/// directory (`NotArtifact`) says that a recursive removal takes it; every other error maps like
/// any tool error of `workbench_id` ([`tool_error`]).
pub fn removal_error(client: &Client, workbench_id: &str, err: Error) -> ToolError {
    match err {
        Error::Meta(meta::Error::RequestReplayMismatch) => ToolError::invalid_arguments(
            "this request id was already used for a different command; pick a new id",
        )
        .with_detail("reason", Value::from(REQUEST_ID_REUSED)),
        Error::NotArtifact { .. } => {
            let mut e = tool_error(client, workbench_id, err);
            e.message = format!(
                "{} (a recursive removal removes everything under it: `nokv rm -r`, \
                 `Client::remove_prefix`, `remove(..., recursive=True)` in Python)",
                e.message
            );
            e
        }
        other => tool_error(client, workbench_id, other),
    }
}

/// The typed tool error of a failed move ([`Client::move_path`]), for every front door: a
/// request id reused for a different command is `InvalidArguments` with `details.reason =
/// "request_id_reused"`; a source that is a directory (`NotArtifact`) says that directory
/// rename is not supported (`details.reason = "directory_rename_unsupported"`); every other
/// error maps like any tool error of `workbench_id` ([`tool_error`]).
pub fn move_error(client: &Client, workbench_id: &str, err: Error) -> ToolError {
    match err {
        Error::NotArtifact { .. } => {
            let mut e = tool_error(client, workbench_id, err);
            e.message = format!(
                "{}; directory rename is not supported: move the files under it one by one",
                e.message
            );
            e.with_detail("reason", Value::from("directory_rename_unsupported"))
        }
        other => removal_error(client, workbench_id, other),
    }
}

/// Maps errors that concern the store as a whole (opening it, its files) to tool errors without
/// host paths, keys or ids.
pub fn store_error(err: crate::error::Error) -> ToolError {
    use crate::error::Error as E;
    match err {
        E::Meta(inner) => meta_tool_error(&inner),
        E::Placement { kind, reason } => {
            use crate::error::PlacementErrorKind as K;
            let code = match kind {
                K::NameTaken => ErrorCode::AlreadyExists,
                K::UnknownRoot | K::UnknownShard => ErrorCode::NotFound,
                K::OwnerHeld | K::Conflict => ErrorCode::Conflict,
                K::PopulatedRoot | K::ShardHasRoot | K::LeaseLost => ErrorCode::InvalidState,
            };
            ToolError::new(code, reason).with_detail("placement", Value::from(format!("{kind:?}")))
        }
        E::StoreNotFound => ToolError::new(
            ErrorCode::NotFound,
            "no NoKV store exists at the selected location (--store / NOKV_STORE / ./.nokv); create a workbench first",
        ),
        E::StoreServed { url } => ToolError::new(
            ErrorCode::InvalidState,
            format!(
                "a running `nokv serve` owns this store and serves it at {url}: send the call \
                 there (--server {url}, or NOKV_SERVER={url})"
            ),
        )
        .with_detail("reason", Value::from("store_served"))
        .with_detail("server_url", Value::from(url)),
        E::StoreBusy => ToolError::new(
            ErrorCode::Conflict,
            "another process kept the store locked for the whole wait (30 s); retry",
        )
        .with_detail("conflict", Value::from("Workspace"))
        .with_detail("reason", Value::from("store_locked")),
        E::LocalIo { op, source, .. } => {
            ToolError::internal(format!("{op} failed: {}", source.kind()))
        }
        E::InvalidArgument(msg) => ToolError::invalid_arguments(msg),
        E::ReadOnlyStore { reason } => read_only_store(&reason),
        e @ (E::LocalNameTooLong { .. }
        | E::LocalPathTooLong { .. }
        | E::LocalNameCollision { .. }) => local_limit(e),
        other => ToolError::internal(other.to_string()),
    }
}

/// A store path a materialize cannot write to its local destination — a name over the local
/// file system's limit, a local path over `PATH_MAX`, or two paths the destination would merge
/// into one file — as `InvalidArguments` with the error's own message and `details.reason`
/// `local_name_too_long` (`name_bytes`, `limit_bytes`), `local_path_too_long` (`path_bytes`,
/// `limit_bytes`) or `local_name_collision` (`other_path`, `folding`), and `details.path` (the
/// store path as given, never the local one). Nothing was written.
fn local_limit(err: crate::error::Error) -> ToolError {
    let base = ToolError::invalid_arguments(err.to_string());
    match err {
        crate::error::Error::LocalNameTooLong {
            path,
            name_bytes,
            limit_bytes,
        } => base
            .with_detail("reason", Value::from("local_name_too_long"))
            .with_detail("path", Value::from(path))
            .with_detail("name_bytes", Value::from(name_bytes))
            .with_detail("limit_bytes", Value::from(limit_bytes)),
        crate::error::Error::LocalPathTooLong {
            path,
            path_bytes,
            limit_bytes,
        } => base
            .with_detail("reason", Value::from("local_path_too_long"))
            .with_detail("path", Value::from(path))
            .with_detail("path_bytes", Value::from(path_bytes))
            .with_detail("limit_bytes", Value::from(limit_bytes)),
        crate::error::Error::LocalNameCollision {
            path,
            other_path,
            folding,
        } => base
            .with_detail("reason", Value::from("local_name_collision"))
            .with_detail("path", Value::from(path))
            .with_detail("other_path", Value::from(other_path))
            .with_detail("folding", Value::from(folding)),
        _ => base,
    }
}

/// The typed, non-retryable refusal of a write on a read-only store: `InvalidState` with
/// `details.reason = "read_only_store"` and `details.cause` (`opened read-only`, `read-only file
/// system` or `no write permission`). The Workbench code list is closed, so the existing code
/// carries the reason.
pub(crate) fn read_only_store(cause: &str) -> ToolError {
    ToolError::new(
        ErrorCode::InvalidState,
        format!(
            "the store is read-only ({cause}): this call writes, and nothing was written; \
             read tools keep working — run writing calls where the store is writable"
        ),
    )
    .with_detail("reason", Value::from("read_only_store"))
    .with_detail("cause", Value::from(cause))
}

/// `details.reason` of the refusal of a store whose metadata files are damaged or lost (a
/// damaged image block or WAL segment, metadata missing beside existing objects): `InvalidState`,
/// nothing changed; `nokv fsck` names the damage.
pub const METADATA_DAMAGED: &str = "metadata_damaged";

/// Maps a metadata-layer error to a typed, storage-neutral tool error (no keys, ids or host
/// paths in messages). Damaged metadata files are `InvalidState` with `details.reason =
/// "metadata_damaged"` ([`METADATA_DAMAGED`]), a fenced owner `InvalidState` with
/// `details.reason = "fenced"`.
pub fn meta_tool_error(err: &meta::Error) -> ToolError {
    match err {
        meta::Error::SchemaMismatch { reason, .. } => ToolError::new(
            ErrorCode::InvalidState,
            format!("the store is not a NoKV schema-8 store, or was written by an incompatible version ({reason}); nothing was changed"),
        ),
        meta::Error::PresentationRootMismatch { .. } => ToolError::new(
            ErrorCode::InvalidState,
            "the store was created with a different presentation root; open it without overriding the root",
        ),
        meta::Error::Storage(holt::Error::Corrupt { reason, .. }) => ToolError::new(
            ErrorCode::InvalidState,
            format!("the store's metadata files are damaged ({reason}); nothing was changed — restore the store from a backup"),
        )
        .with_detail("reason", Value::from(METADATA_DAMAGED)),
        meta::Error::Storage(holt::Error::Io { op, source, .. }) => {
            ToolError::internal(format!("metadata {op} failed: {}", source.kind()))
        }
        meta::Error::ReadVersionConflict { .. } => ToolError::conflict("ReadVersion"),
        // The metadata layer's own argument checks (e.g. a workbench id the front door passed
        // through unvalidated, as an HTTP route segment): the caller's input, not a failure.
        meta::Error::InvalidArgument(reason) => ToolError::invalid_arguments(reason.clone()),
        meta::Error::ReadOnly => read_only_store("opened read-only"),
        // Owner epoch / lease fencing (docs/metadata-format.md): another owner holds the shard now.
        meta::Error::Fenced { reason } => ToolError::new(
            ErrorCode::InvalidState,
            format!("this process no longer owns the store's shard ({reason}); nothing was changed — another owner serves it now"),
        )
        .with_detail("reason", Value::from("fenced")),
        meta::Error::Storage(_) => ToolError::internal("the metadata store failed; retry"),
        other => ToolError::internal(format!("metadata error: {other}")),
    }
}
