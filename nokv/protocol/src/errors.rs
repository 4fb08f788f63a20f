//! Workbench error codes and the error envelope (docs/workbench.md, "Error codes" and "Envelope").
//!
//! Every failed tool call becomes one JSON object
//! `{"status":"error","code":STRING,"message":STRING,"retryable":BOOL,"details":OBJECT}`.
//! Messages say what was wrong and what to do next; they never contain storage keys, object keys,
//! revision ids or host paths (callers pass presentation paths only).

use serde_json::{Map, Value};
use std::fmt;

/// Declares [`ErrorCode`] from one list: the enum, [`ErrorCode::ALL`] in declaration order and
/// [`ErrorCode::as_str`] (the variant's name), so the three can never disagree.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $code:ident,)*) => {
        /// Every error code of the Workbench contract (docs/workbench.md, "Error codes"). The string
        /// form ([`ErrorCode::as_str`]) is the `code` field of the error envelope and is a
        /// compatibility surface.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(#[$doc])* $code,)*
        }

        impl ErrorCode {
            /// All codes, in the order of docs/workbench.md (which is also the declaration
            /// order). This is the one list of codes: [`ErrorCode::parse`] searches it, and the
            /// Python SDK exposes its string forms as `nokv._nokv.ERROR_CODES`, from which
            /// `nokv.errors` maps codes to exception classes.
            pub const ALL: [ErrorCode; [$(stringify!($code)),*].len()] = [$(ErrorCode::$code),*];

            /// The envelope's `code` string, e.g. `"InvalidArguments"` (the variant's name).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$code => stringify!($code),)*
                }
            }
        }
    };
}

error_codes! {
    /// The arguments failed the tool's JSON schema or a cross-field rule; touches no storage.
    InvalidArguments,
    /// The tool name is not one of the 18 tools; `details.tool`.
    UnknownTool,
    /// A payload is larger than 16 MiB; `details {actual_bytes, maximum_bytes}`.
    PayloadTooLarge,
    /// The path does not exist; `details.path`.
    NotFound,
    /// A directory was found where a file was needed; `details.path`.
    NotArtifact,
    /// `list` was called on a file; `details.path`.
    NotDirectory,
    /// The body is not valid UTF-8 where text is required (edit, structured read).
    InvalidUtf8,
    /// `edit` found no literal match of `old_string`; `details.hints` may carry near misses.
    NoMatch,
    /// `edit` found more than one match without `replace_all`; `details.matches`.
    AmbiguousEdit,
    /// A JSON or YAML body failed to decode in a structured read; `details {path, format}`.
    StructuredDecodeFailed,
    /// The workbench or path already exists (create-only write, re-created id).
    AlreadyExists,
    /// A concurrent change won (retryable); `details.conflict` is one of [`CONFLICT_KINDS`].
    Conflict,
    /// A live cursor's fence (workspace incarnation / revision) moved (retryable).
    ReadFenceChanged,
    /// A bounded budget was exceeded; `details {operation, resource, maximum}`.
    ResourceExhausted,
    /// The snapshot id or name does not exist.
    SnapshotNotFound,
    /// The snapshot's lease deadline passed (also used once it was reaped).
    SnapshotExpired,
    /// A restore is still consuming the snapshot, so it cannot be retired yet.
    ForkRetentionActive,
    /// The operation is not allowed in the current lifecycle state.
    InvalidState,
    /// A different commit identity exists and `replace` was not set.
    WorkbenchCommitConflict,
    /// The stored commit does not match the expected protocol;
    /// `details {expected_commit_id, actual_commit_id}`.
    WorkbenchCommitProtocolMismatch,
    /// A restore operation's stored state does not match the request's protocol.
    RestoreProtocolMismatch,
    /// A value could not be encoded as canonical JSON (commit manifest, annotation).
    CanonicalEncodingFailed,
    /// An object-store read or write failed transiently (retryable).
    ObjectUnavailable,
    /// The caller's token (or the read-only profile) does not grant the scope the call needs;
    /// nothing was written. `details {missing_scope, action, resource}` (docs/server.md,
    /// "Scopes").
    Forbidden,
    /// An unexpected internal failure; report it.
    Internal,
}

/// The values of `details.conflict` for [`ErrorCode::Conflict`] (docs/workbench.md, "Error codes").
pub const CONFLICT_KINDS: [&str; 7] = [
    "Workspace",
    "PathGeneration",
    "CommitHead",
    "ReadVersion",
    "SnapshotLifecycle",
    "OperationState",
    "RootPlacement",
];

impl ErrorCode {
    /// Parses an envelope `code` string back into a code; `None` for an unknown string.
    pub fn parse(code: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.as_str() == code)
    }

    /// Whether a caller may retry the same call unchanged: true exactly for `Conflict`,
    /// `ReadFenceChanged` and `ObjectUnavailable` (docs/workbench.md).
    pub fn retryable(self) -> bool {
        matches!(
            self,
            ErrorCode::Conflict | ErrorCode::ReadFenceChanged | ErrorCode::ObjectUnavailable
        )
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed tool call: code, human message and structured details. Serialised by
/// [`ToolError::envelope`].
#[derive(Clone, Debug, PartialEq)]
pub struct ToolError {
    /// The error code (envelope `code`; `retryable` derives from it).
    pub code: ErrorCode,
    /// What was wrong and what to do; never storage keys or host paths.
    pub message: String,
    /// Structured details (envelope `details`), e.g. `path`, `conflict`, `matches`.
    pub details: Map<String, Value>,
}

/// Result type of every Workbench shaping function and tool.
pub type ToolResult<T> = Result<T, ToolError>;

impl ToolError {
    /// A new error with empty details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            details: Map::new(),
        }
    }

    /// Adds (or replaces) one `details` entry.
    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.to_string(), value.into());
        self
    }

    /// Whether the call may be retried unchanged (see [`ErrorCode::retryable`]).
    pub fn retryable(&self) -> bool {
        self.code.retryable()
    }

    /// The error envelope
    /// `{"status":"error","code":…,"message":…,"retryable":…,"details":{…}}` (docs/workbench.md, "Envelope").
    pub fn envelope(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("status".into(), Value::from("error"));
        obj.insert("code".into(), Value::from(self.code.as_str()));
        obj.insert("message".into(), Value::from(self.message.clone()));
        obj.insert("retryable".into(), Value::from(self.code.retryable()));
        obj.insert("details".into(), Value::Object(self.details.clone()));
        Value::Object(obj)
    }

    /// `InvalidArguments` with the given explanation.
    pub fn invalid_arguments(msg: impl Into<String>) -> Self {
        ToolError::new(ErrorCode::InvalidArguments, msg)
    }

    /// `NotFound` for a presentation path; `details.path`.
    pub fn not_found(path: &str) -> Self {
        ToolError::new(
            ErrorCode::NotFound,
            format!("{path} does not exist; list its parent directory to see what is there"),
        )
        .with_detail("path", path)
    }

    /// `NotArtifact`: a directory where a file was needed; `details.path`.
    pub fn not_artifact(path: &str) -> Self {
        ToolError::new(
            ErrorCode::NotArtifact,
            format!("{path} is a directory, not a file; name a file inside it"),
        )
        .with_detail("path", path)
    }

    /// `NotDirectory`: a file where a directory was needed (list); `details.path`.
    pub fn not_directory(path: &str) -> Self {
        ToolError::new(
            ErrorCode::NotDirectory,
            format!("{path} is a file, not a directory; use stat or read on it"),
        )
        .with_detail("path", path)
    }

    /// `AlreadyExists` for a workbench or path; `details.path`.
    pub fn already_exists(path: &str) -> Self {
        ToolError::new(
            ErrorCode::AlreadyExists,
            format!(
                "{path} already exists; choose another name, or pass replace=true to overwrite a file"
            ),
        )
        .with_detail("path", path)
    }

    /// `Conflict` (retryable) with `details.conflict = kind` (one of [`CONFLICT_KINDS`]).
    pub fn conflict(kind: &str) -> Self {
        let what = match kind {
            "Workspace" => "the workbench changed concurrently",
            "PathGeneration" => "the file changed since it was read (its generation moved)",
            "CommitHead" => "another commit was published concurrently",
            "ReadVersion" => "the read version moved during the operation",
            "SnapshotLifecycle" => "the snapshot's lifecycle changed concurrently",
            "OperationState" => "another operation changed the same state concurrently",
            "RootPlacement" => "the root placement changed concurrently",
            _ => "a concurrent change won",
        };
        ToolError::new(
            ErrorCode::Conflict,
            format!("{what}; re-read the current state and retry"),
        )
        .with_detail("conflict", kind)
    }

    /// `PayloadTooLarge`; `details {actual_bytes, maximum_bytes}`.
    pub fn payload_too_large(actual: u64, max: u64) -> Self {
        ToolError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "payload is {actual} bytes, more than the {max}-byte limit per call; \
                 split it into several append calls or upload it through the SDK / `nokv collect`"
            ),
        )
        .with_detail("actual_bytes", actual)
        .with_detail("maximum_bytes", max)
    }

    /// `ResourceExhausted`; `details {operation, resource, maximum}`.
    pub fn resource_exhausted(operation: &str, resource: &str, maximum: u64) -> Self {
        ToolError::new(
            ErrorCode::ResourceExhausted,
            format!(
                "{operation} exceeded its budget of {maximum} {resource}; narrow the scope \
                 (a deeper path, a glob, or format=bytes) and try again"
            ),
        )
        .with_detail("operation", operation)
        .with_detail("resource", resource)
        .with_detail("maximum", maximum)
    }

    /// `UnknownTool`; `details.tool`.
    pub fn unknown_tool(name: &str) -> Self {
        ToolError::new(
            ErrorCode::UnknownTool,
            format!("unknown tool {name:?}; run `nokv schema` to list the 18 Workbench tools"),
        )
        .with_detail("tool", name)
    }

    /// `Internal` with the given explanation.
    pub fn internal(msg: impl Into<String>) -> Self {
        ToolError::new(ErrorCode::Internal, msg)
    }

    /// `ObjectUnavailable` (retryable) with the given explanation.
    pub fn object_unavailable(msg: impl Into<String>) -> Self {
        ToolError::new(ErrorCode::ObjectUnavailable, msg)
    }

    /// `ReadFenceChanged` (retryable): a live cursor's workspace incarnation or revision moved.
    pub fn read_fence_changed() -> Self {
        ToolError::new(
            ErrorCode::ReadFenceChanged,
            "the workbench changed since this cursor was issued; restart the listing without a \
             cursor (or page a snapshot for a stable view)",
        )
    }

    /// `Forbidden`: the call needs `missing_scope` (written `ACTION[:RESOURCE]`, e.g.
    /// `write:run-1`), which the caller does not hold; nothing was written. `details
    /// {missing_scope, action, resource}` where `resource` is the workbench id, or null for a
    /// store-wide action.
    pub fn forbidden(missing_scope: &str, action: &str, resource: Option<&str>) -> Self {
        ToolError::new(
            ErrorCode::Forbidden,
            format!(
                "this call needs the scope {missing_scope}, which the caller's token does not \
                 grant; use a token that holds it (docs/server.md, \"Scopes\")"
            ),
        )
        .with_detail("missing_scope", missing_scope)
        .with_detail("action", action)
        .with_detail("resource", resource.map_or(Value::Null, Value::from))
    }

    /// `InvalidUtf8` for a body that must be text; `details.path`.
    pub fn invalid_utf8(path: &str) -> Self {
        ToolError::new(
            ErrorCode::InvalidUtf8,
            format!("{path} is not valid UTF-8 text; read it with format=bytes instead"),
        )
        .with_detail("path", path)
    }

    /// `StructuredDecodeFailed`; `details {path, format}` (`format` is `json` or `yaml`).
    pub fn structured_decode_failed(path: &str, format: &str, reason: &str) -> Self {
        ToolError::new(
            ErrorCode::StructuredDecodeFailed,
            format!(
                "{path} could not be decoded as {format} ({reason}); fix the file or read it \
                 with format=bytes"
            ),
        )
        .with_detail("path", path)
        .with_detail("format", format)
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for ToolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_conflict_fence_and_object_unavailable_are_retryable() {
        for code in ErrorCode::ALL {
            let expected = matches!(
                code,
                ErrorCode::Conflict | ErrorCode::ReadFenceChanged | ErrorCode::ObjectUnavailable
            );
            assert_eq!(code.retryable(), expected, "{code}");
        }
    }

    #[test]
    fn code_strings_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.as_str()));
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            assert_eq!(code.to_string(), code.as_str());
            assert_eq!(
                format!("{code:?}"),
                code.as_str(),
                "the string form is the variant name"
            );
        }
        assert_eq!(seen.len(), 25);
        assert_eq!(ErrorCode::parse("Nope"), None);
    }

    #[test]
    fn envelope_has_exactly_the_contract_fields() {
        let env = ToolError::conflict("PathGeneration").envelope();
        let obj = env.as_object().expect("object");
        let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        assert_eq!(keys, ["status", "code", "message", "retryable", "details"]);
        assert_eq!(env["status"], "error");
        assert_eq!(env["code"], "Conflict");
        assert_eq!(env["retryable"], true);
        assert_eq!(env["details"]["conflict"], "PathGeneration");
    }

    #[test]
    fn constructors_fill_contract_details() {
        let e = ToolError::payload_too_large(20, 10);
        assert_eq!(e.code, ErrorCode::PayloadTooLarge);
        assert_eq!(e.details["actual_bytes"], 20);
        assert_eq!(e.details["maximum_bytes"], 10);
        let e = ToolError::resource_exhausted("grep", "files", 10_000);
        assert_eq!(e.details["operation"], "grep");
        assert_eq!(e.details["resource"], "files");
        assert_eq!(e.details["maximum"], 10_000);
        assert_eq!(ToolError::unknown_tool("x").details["tool"], "x");
        assert_eq!(ToolError::not_found("/a/b").details["path"], "/a/b");
        assert_eq!(ToolError::not_artifact("/a").code, ErrorCode::NotArtifact);
        assert_eq!(ToolError::not_directory("/a").code, ErrorCode::NotDirectory);
        assert_eq!(
            ToolError::already_exists("/a").code,
            ErrorCode::AlreadyExists
        );
        assert!(!ToolError::internal("x").retryable());
        assert!(ToolError::object_unavailable("x").retryable());
        assert!(ToolError::read_fence_changed().retryable());
        let e = ToolError::structured_decode_failed("/p", "yaml", "bad");
        assert_eq!(e.details["format"], "yaml");
        assert_eq!(e.details["path"], "/p");
    }

    #[test]
    fn display_names_code_and_message() {
        let e = ToolError::invalid_arguments("limit must be at least 1");
        assert_eq!(e.to_string(), "InvalidArguments: limit must be at least 1");
        let boxed: Box<dyn std::error::Error> = Box::new(e);
        assert!(boxed.to_string().starts_with("InvalidArguments"));
    }
}
