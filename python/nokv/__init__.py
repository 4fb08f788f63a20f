"""NoKV — a workspace and artifact store for AI agents, in-process for Python.

``nokv`` wraps NoKV's Rust SDK and its Workbench facade in the calling process (no server, no
subprocess)::

    import nokv

    with nokv.open(".nokv") as store:
        wb = store.create_workbench("penguins")
        wb.put("input/penguins.csv", open("penguins.csv", "rb"))
        print(wb.stat("input/penguins.csv").generation)
        for entry in wb.list("input"):
            print(entry.key, entry.size_bytes)
        summary = wb.read_json("outputs/summary.json")

``nokv.connect("http://127.0.0.1:7070", token=…)`` returns the same :class:`Store` API
talking to a running ``nokv serve`` (many processes sharing one store).

Modules:

* :mod:`nokv.errors` — the exception hierarchy, one class per Workbench error code;
* :mod:`nokv.fsspec` — an explicit, bounded fsspec adapter (``nokv://workbench/section/path``);
* :mod:`nokv.checkpoint` — training checkpoints as immutable shards plus a create-only manifest.

See ``docs/python.md`` for the whole API.
"""

from __future__ import annotations

from . import errors
from ._nokv import AppendResult, Change, PutResult, Stat, __version__
from ._store import SECTIONS, ArtifactFile, Store, Workbench, connect, open
from .errors import (
    AlreadyExists,
    AmbiguousEdit,
    CanonicalEncodingFailed,
    Conflict,
    Forbidden,
    ForkRetentionActive,
    Internal,
    InvalidArguments,
    InvalidState,
    InvalidUtf8,
    NoKVError,
    NoMatch,
    NotArtifact,
    NotDirectory,
    NotFound,
    ObjectUnavailable,
    PayloadTooLarge,
    ReadFenceChanged,
    ResourceExhausted,
    RestoreProtocolMismatch,
    SnapshotExpired,
    SnapshotNotFound,
    StructuredDecodeFailed,
    UnknownTool,
    Unauthorized,
    Unavailable,
    Unsupported,
    WorkbenchCommitConflict,
    WorkbenchCommitProtocolMismatch,
)

__all__ = [
    "open",
    "connect",
    "Store",
    "Workbench",
    "ArtifactFile",
    "Stat",
    "PutResult",
    "AppendResult",
    "Change",
    "SECTIONS",
    "errors",
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
    "__version__",
]
