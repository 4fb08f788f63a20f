"""NoKV's exception hierarchy: one class per Workbench error code.

Every failure of the SDK raises an instance of :class:`NoKVError` — more precisely of the subclass
named after its Workbench error code (``docs/workbench.md``, "Error codes"): the same code the CLI and
the agent tools report for the same failure. Each exception carries:

* ``code`` — the code string (``"NotFound"``, ``"Conflict"``, …);
* ``message`` — what was wrong and what to do (never storage keys, object keys or host paths);
* ``retryable`` — True for ``Conflict``, ``ReadFenceChanged``, ``ObjectUnavailable`` and
  ``Unavailable``, and whatever a server marks retryable;
* ``details`` — the envelope's structured details (``path``, ``conflict``, ``matches``, …).

A few classes also derive from the matching built-in exception, so generic Python code (pandas,
fsspec, pyarrow) reacts as it does for files: :class:`NotFound` is a :class:`FileNotFoundError`,
:class:`AlreadyExists` a :class:`FileExistsError`, :class:`NotArtifact` an
:class:`IsADirectoryError`, :class:`NotDirectory` a :class:`NotADirectoryError` and
:class:`InvalidArguments` a :class:`ValueError`.

Three classes belong to connected stores (:func:`nokv.connect`) and are not Workbench tool codes:
:class:`Unavailable` (a :class:`ConnectionError`: the server cannot be reached or the connection
broke; retryable), :class:`Unauthorized` (a :class:`PermissionError`: the bearer token was
refused) and :class:`Unsupported` (a :class:`NotImplementedError`: an embedded-only operation).
Other refusals of a server (``Timeout``, ``RequestInFlight``, …) raise :class:`NoKVError` with
that code.

The list of Workbench codes is not restated here: it comes from the Rust definition
(``ErrorCode::ALL``) through the native module, and the code-to-class mapping is built from it.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple, Type

from ._nokv import ERROR_CODES as _WORKBENCH_CODES
from ._nokv import RETRYABLE_ERROR_CODES as _WORKBENCH_RETRYABLE

__all__ = [
    "NoKVError",
    "InvalidArguments",
    "UnknownTool",
    "PayloadTooLarge",
    "NotFound",
    "NotArtifact",
    "NotDirectory",
    "InvalidUtf8",
    "NoMatch",
    "AmbiguousEdit",
    "StructuredDecodeFailed",
    "AlreadyExists",
    "Conflict",
    "ReadFenceChanged",
    "ResourceExhausted",
    "SnapshotNotFound",
    "SnapshotExpired",
    "ForkRetentionActive",
    "InvalidState",
    "WorkbenchCommitConflict",
    "WorkbenchCommitProtocolMismatch",
    "RestoreProtocolMismatch",
    "CanonicalEncodingFailed",
    "ObjectUnavailable",
    "Forbidden",
    "Internal",
    "Unavailable",
    "Unauthorized",
    "Unsupported",
    "error_class",
    "from_envelope",
]

# Retryable by default: the Workbench codes the Rust side marks retryable, and Unavailable.
_RETRYABLE = frozenset(_WORKBENCH_RETRYABLE) | {"Unavailable"}


class NoKVError(Exception):
    """Base class of every NoKV error.

    Args:
        message: Human-readable explanation.
        code: Workbench error code (defaults to the class name).
        retryable: Whether the same call may be retried unchanged (defaults from the code).
        details: Structured details of the error envelope.
    """

    code: str
    message: str
    retryable: bool
    details: Dict[str, Any]

    def __init__(
        self,
        message: str,
        *,
        code: Optional[str] = None,
        retryable: Optional[bool] = None,
        details: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else type(self).__name__
        self.retryable = retryable if retryable is not None else self.code in _RETRYABLE
        self.details = dict(details or {})

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __reduce__(self) -> Any:  # picklable across processes
        return (
            _rebuild,
            (type(self).__name__, self.message, self.code, self.retryable, self.details),
        )

    def envelope(self) -> Dict[str, Any]:
        """The error envelope the CLI prints for this error."""
        return {
            "status": "error",
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "details": dict(self.details),
        }


class InvalidArguments(NoKVError, ValueError):
    """The arguments broke the tool's schema or a cross-field rule; nothing was touched."""


class UnknownTool(NoKVError):
    """The tool name is not one of the 18 Workbench tools (``details["tool"]``)."""


class PayloadTooLarge(NoKVError):
    """A tool payload exceeds 16 MiB (``details["actual_bytes"]``, ``["maximum_bytes"]``)."""


class NotFound(NoKVError, FileNotFoundError):
    """The workbench, path, snapshot source or commit does not exist (``details["path"]``)."""


class NotArtifact(NoKVError, IsADirectoryError):
    """A directory was found where a file was needed (``details["path"]``)."""


class NotDirectory(NoKVError, NotADirectoryError):
    """A file was found where a directory was needed (``details["path"]``)."""


class InvalidUtf8(NoKVError):
    """The body is not UTF-8 where text is required (edit, structured read)."""


class NoMatch(NoKVError):
    """``edit`` found no literal match (``details["hints"]`` may carry near misses)."""


class AmbiguousEdit(NoKVError):
    """``edit`` found several matches without ``replace_all`` (``details["matches"]``)."""


class StructuredDecodeFailed(NoKVError):
    """A JSON or YAML body failed to decode (``details["path"]``, ``["format"]``)."""


class AlreadyExists(NoKVError, FileExistsError):
    """The path or workbench already exists (create-only write, re-used id)."""


class Conflict(NoKVError):
    """A concurrent change won; retryable (``details["conflict"]`` names the kind)."""


class ReadFenceChanged(NoKVError):
    """A live cursor's fence moved; restart the listing (retryable)."""


class ResourceExhausted(NoKVError):
    """A bounded budget was exceeded (``details["operation"]``, ``["resource"]``, ``["maximum"]``)."""


class SnapshotNotFound(NoKVError):
    """The snapshot id or name does not exist."""


class SnapshotExpired(NoKVError):
    """The snapshot's lease passed, or it was retired or reaped."""


class ForkRetentionActive(NoKVError):
    """A restore still consumes the snapshot, so it cannot be retired yet."""


class InvalidState(NoKVError):
    """The operation is not allowed in the current lifecycle state (also: the store is closed)."""


class WorkbenchCommitConflict(NoKVError):
    """The workbench is committed with another identity and ``replace`` was not set."""


class WorkbenchCommitProtocolMismatch(NoKVError):
    """The same commit identity was requested earlier with other inputs."""


class RestoreProtocolMismatch(NoKVError):
    """A restore operation's stored state does not match the request."""


class CanonicalEncodingFailed(NoKVError):
    """A value cannot be encoded as canonical JSON (commit manifest, annotation)."""


class ObjectUnavailable(NoKVError):
    """Object bytes could not be read or failed their SHA-256 check (retryable)."""


class Forbidden(NoKVError, PermissionError):
    """The token (or the read-only profile) lacks the scope the call needs; nothing was written
    (``details["missing_scope"]``, ``["action"]``, ``["resource"]``)."""


class Internal(NoKVError):
    """An unexpected internal failure; please report it."""


class Unavailable(NoKVError, ConnectionError):
    """A connected store (:func:`nokv.connect`) could not be reached, or the connection broke
    before the answer arrived (retryable: writes carry a request id, so a retry never applies
    twice). ``details`` carries ``url`` and ``reason``."""


class Unauthorized(NoKVError, PermissionError):
    """The server refused the bearer token (missing or wrong ``token=`` / ``NOKV_TOKEN``)."""


class Unsupported(NoKVError, NotImplementedError):
    """The operation is not offered by this kind of store: an embedded-only operation called on a
    connected store (``details["backend"] == "remote"``, ``details["operation"]`` names it)."""


# The classes of connected stores (nokv.connect); their codes are not Workbench tool codes.
_CONNECTION_CLASSES: Tuple[Type[NoKVError], ...] = (Unavailable, Unauthorized, Unsupported)


def _classes_by_code() -> Dict[str, Type[NoKVError]]:
    """Maps every Workbench code of the native module to the class of that name, then adds the
    connection classes. A code without a class here maps to :class:`NoKVError`, like an unknown
    code (``tests/test_error_codes.py`` fails for it)."""
    by_code: Dict[str, Type[NoKVError]] = {}
    for code in _WORKBENCH_CODES:
        cls = globals().get(code)
        if isinstance(cls, type) and issubclass(cls, NoKVError) and cls is not NoKVError:
            by_code[code] = cls
    for cls in _CONNECTION_CLASSES:
        by_code[cls.__name__] = cls
    return by_code


_BY_CODE: Dict[str, Type[NoKVError]] = _classes_by_code()


def error_class(code: str) -> Type[NoKVError]:
    """The exception class of a Workbench error code (:class:`NoKVError` for unknown codes)."""
    return _BY_CODE.get(code, NoKVError)


def from_envelope(envelope: Mapping[str, Any]) -> NoKVError:
    """The exception for an error envelope ``{"status": "error", "code", "message", …}``."""
    code = str(envelope.get("code", "Internal"))
    return error_class(code)(
        str(envelope.get("message", "")),
        code=code,
        retryable=bool(envelope.get("retryable", code in _RETRYABLE)),
        details=envelope.get("details") or {},
    )


def _rebuild(
    name: str, message: str, code: str, retryable: bool, details: Dict[str, Any]
) -> NoKVError:
    return error_class(name)(message, code=code, retryable=retryable, details=details)
