"""The Python SDK's public classes: :class:`Store`, :class:`Workbench`, :class:`ArtifactFile`."""

from __future__ import annotations

import datetime as _dt
import io
import json
import math
import os
from typing import (
    Any,
    BinaryIO,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Union,
)

from . import _nokv
from ._nokv import AppendResult, Change, PutResult, Stat
from .errors import InvalidArguments, StructuredDecodeFailed

__all__ = ["Store", "Workbench", "ArtifactFile", "open", "connect"]

#: A body for :meth:`Workbench.put`: bytes-like, text (stored as UTF-8), a local file path, or a
#: binary file object read to its end.
Body = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]", BinaryIO]
#: A snapshot selector: a numeric snapshot id or a snapshot name.
SnapshotRef = Union[int, str]
#: The five virtual sections of every workbench (docs/design.md, "Stable Workbench Surface").
SECTIONS = ("input", "scripts", "outputs", "logs", "metadata")


def _split(key: str) -> Dict[str, Any]:
    """``section/relative`` → the tools' ``{section, path}`` arguments (write tools need a
    section)."""
    first, _, rest = key.partition("/")
    if first not in SECTIONS or not rest:
        raise InvalidArguments(
            f"path {key!r} must start with one of the sections "
            "input, scripts, outputs, logs, metadata, followed by a file path"
        )
    return {"section": first, "path": rest}


def _scope(args: Dict[str, Any], key: Optional[str]) -> Dict[str, Any]:
    """Adds a workbench-relative ``key`` as the tools' ``path`` (section ``null``)."""
    if key:
        args["path"] = key
    return args


def _snap(args: Dict[str, Any], at_snapshot: Optional[SnapshotRef]) -> Dict[str, Any]:
    if at_snapshot is not None:
        args["at_snapshot"] = at_snapshot
    return args


def _selector(args: Dict[str, Any], snapshot: SnapshotRef) -> Dict[str, Any]:
    if isinstance(snapshot, bool) or not isinstance(snapshot, (int, str)):
        raise InvalidArguments("snapshot must be a snapshot id (int) or a snapshot name (str)")
    if isinstance(snapshot, int):
        args["snapshot_id"] = snapshot
    else:
        args["name"] = snapshot
    return args


class Store:
    """One NoKV store: embedded in this process (:func:`nokv.open`) or served by a running
    ``nokv serve`` (:func:`nokv.connect`). Both have this one API; the few operations that
    need the store's files (:meth:`content_digest`, :meth:`object_count` and walks ``at_snapshot``) raise :class:`nokv.Unsupported` on a connected store.

    A store is safe to share between threads: every storage, object and network call releases
    the GIL. Use it as a context manager, or call :meth:`close` — which waits for calls already
    running and, for an embedded store, releases the writer lock (if a write still held it
    within its idle grace) and the writer registration before it returns.
    """

    __slots__ = ("_core", "__weakref__")

    def __init__(self, core: "_nokv.Core") -> None:
        self._core = core

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the store (idempotent). Later calls raise :class:`nokv.InvalidState`."""
        self._core.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._core.closed

    @property
    def directory(self) -> Optional[str]:
        """The store directory (``None`` for a connected store)."""
        d = self._core.directory
        return None if d is None else os.fspath(d)

    @property
    def url(self) -> Optional[str]:
        """The server URL of a connected store (``None`` for an embedded store)."""
        return self._core.url

    @property
    def presentation_root(self) -> str:
        """The store's presentation root (default ``/agents/local/wb``)."""
        return self._core.presentation_root

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        where = self.directory if self.url is None else self.url
        return f"<nokv.Store {where!r} ({state})>"

    # -- workbenches -----------------------------------------------------------------------

    def workbench(self, workbench_id: str) -> "Workbench":
        """A handle on an existing workbench.

        Raises:
            NotFound: the workbench does not exist.
            InvalidArguments: the id is invalid.
        """
        self._core.call("workbench_stat", {"id": workbench_id})
        return Workbench(self, workbench_id)

    def create_workbench(self, workbench_id: str) -> "Workbench":
        """Creates a workbench and returns its handle (``workbench_create``). Creating a visible
        workbench again returns it unchanged (an exact retry).

        Raises:
            AlreadyExists: the id is held by another incarnation (a restore in progress, a
                retired workbench).
            InvalidArguments: the id is invalid (first byte a letter or digit, then
                ``[A-Za-z0-9_-]``, at most 128 bytes).
        """
        self._core.call("workbench_create", {"id": workbench_id})
        return Workbench(self, workbench_id)

    def expire(
        self,
        workbench_id: str,
        *,
        after: Union[str, _dt.timedelta, None] = None,
        at: Union[str, _dt.datetime, None] = None,
        never: bool = False,
    ) -> Dict[str, Any]:
        """Records, moves or removes a workbench's expiry deadline (``nokv expire``). Give
        exactly one of ``after`` (a duration: ``"90m"``, ``"2h"``, ``"7d"`` or a
        :class:`datetime.timedelta`, counted from the store clock), ``at`` (an RFC 3339 text or
        a timezone-aware :class:`datetime.datetime`; a time already passed expires the workbench
        at once) or ``never=True``.

        Once expired a workbench is not listed, every call on it raises :class:`nokv.NotFound`
        with ``details["reason"] == "expired"`` and ``details["expired_at"]``, and setting the
        clock back does not bring it back. The next GC pass removes its uncommitted files;
        commits, tags and snapshots keep what they reference, and a commit stays restorable
        (``restore(..., at_commit=...)``).

        Returns:
            ``{workbench_id, expires_at, expires_at_unix_ms, previous_expires_at,
            previous_expires_at_unix_ms, expired, clock, clock_unix_ms, changed,
            commit_version}`` (times as RFC 3339 text in UTC, or ``None``).

        Raises:
            NotFound: no such workbench, or it already expired.
            InvalidArguments: not exactly one of the three; a bad duration or time; a naive
                ``datetime``.
        """
        if isinstance(after, _dt.timedelta):
            seconds = after.total_seconds()
            if seconds < 0:
                raise InvalidArguments("after must not be negative")
            after = f"{int(math.ceil(seconds))}s"
        if isinstance(at, _dt.datetime):
            if at.tzinfo is None:
                raise InvalidArguments(
                    "at must be timezone-aware (e.g. datetime.now(timezone.utc))"
                )
            at = at.astimezone(_dt.timezone.utc).isoformat().replace("+00:00", "Z")
        return self._core.expire(workbench_id, after=after, at=at, never=never)

    # -- the 18 tools, as the CLI prints them ------------------------------------------------

    def tool(self, name: str, args: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Runs one of the 18 Workbench tools and returns its JSON envelope as Python objects,
        exactly as ``nokv workbench <name> '<json>'`` prints it: ``{"status": "success", …}`` or
        ``{"status": "error", "code", "message", "retryable", "details"}``. Never raises for a
        tool error (agent frameworks pass the envelope through). ``name`` may omit the
        ``workbench_`` prefix."""
        return self._core.tool(name, {} if args is None else args)

    def call_tool(
        self,
        name: str,
        args: Optional[Mapping[str, Any]] = None,
        *,
        parse_float: Optional[Callable[[str], Any]] = None,
    ) -> Dict[str, Any]:
        """Runs one of the 18 Workbench tools like :meth:`tool`, but returns only the result
        fields (no ``status``) and raises the :mod:`nokv.errors` class of a tool error's code.
        ``parse_float`` (e.g. ``decimal.Decimal``) receives the JSON text of every non-integer
        number instead of it becoming a ``float``."""
        return self._core.call(name, {} if args is None else args, parse_float=parse_float)

    # -- queries ---------------------------------------------------------------------------

    def search(
        self,
        *,
        workbench_id: Optional[str] = None,
        path: Optional[str] = None,
        predicates: Optional[Sequence[Mapping[str, Any]]] = None,
        fields: Optional[Sequence[str]] = None,
        sort: Optional[Sequence[Mapping[str, Any]]] = None,
        facets: Optional[Sequence[str]] = None,
        cursor: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Dict[str, Any]:
        """Typed query over the secondary index (``workbench_search``), within one workbench or
        across the root. Returns ``{path, match_count, matches, facets, next_cursor,
        truncated}``; pass ``cursor=result["next_cursor"]`` for the next page."""
        args: Dict[str, Any] = {}
        for k, v in (
            ("id", workbench_id),
            ("path", path),
            ("predicates", predicates),
            ("fields", fields),
            ("sort", sort),
            ("facets", facets),
            ("cursor", cursor),
            ("limit", limit),
        ):
            if v is not None:
                args[k] = v
        return self._core.call("workbench_search", args)

    def aggregate(
        self,
        measures: Sequence[Mapping[str, Any]],
        *,
        group_by: Optional[Sequence[str]] = None,
        predicates: Optional[Sequence[Mapping[str, Any]]] = None,
        sort: Optional[Sequence[Mapping[str, Any]]] = None,
        workbench_id: Optional[str] = None,
        path: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Dict[str, Any]:
        """Grouped measures (count/sum/avg/min/max) over the index (``workbench_aggregate``).
        Returns ``{path, input_match_count, row_count, group_count, groups, truncated}``."""
        args: Dict[str, Any] = {"measures": measures}
        for k, v in (
            ("group_by", group_by),
            ("predicates", predicates),
            ("sort", sort),
            ("id", workbench_id),
            ("path", path),
            ("limit", limit),
        ):
            if v is not None:
                args[k] = v
        return self._core.call("workbench_aggregate", args)

    def catalog(
        self,
        *,
        workbench_id: Optional[str] = None,
        path: Optional[str] = None,
        field_prefix: Optional[str] = None,
        include_facets: bool = False,
    ) -> Dict[str, Any]:
        """Which fields can be filtered, sorted, faceted and aggregated (``workbench_catalog``)."""
        args: Dict[str, Any] = {"include_facets": include_facets}
        for k, v in (("id", workbench_id), ("path", path), ("field_prefix", field_prefix)):
            if v is not None:
                args[k] = v
        return self._core.call("workbench_catalog", args)

    def find(
        self,
        *,
        committed: Optional[bool] = None,
        manifest_pattern: Optional[str] = None,
        include_manifest: bool = False,
        cursor: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Dict[str, Any]:
        """Workbenches of the root by commit state and run-manifest literal
        (``workbench_find``). Returns ``{path, matches, match_count, entry_count, next_cursor,
        truncated}``."""
        args: Dict[str, Any] = {"include_manifest": include_manifest}
        for k, v in (
            ("committed", committed),
            ("manifest_pattern", manifest_pattern),
            ("cursor", cursor),
            ("limit", limit),
        ):
            if v is not None:
                args[k] = v
        return self._core.call("workbench_find", args)

    # -- commits and tags --------------------------------------------------------------------

    def commit(
        self,
        workbench_id: str,
        manifest: Mapping[str, Any],
        *,
        content_digest_uri: Optional[str] = None,
        replace: bool = False,
        parents: Sequence[str] = (),
    ) -> Dict[str, Any]:
        """Commits a workbench: a durable, immutable closure of its live tree plus the canonical
        ``metadata/run_manifest.json`` (``workbench_commit``), with lineage to ``parents``
        (commit ids). ``content_digest_uri`` defaults to :meth:`content_digest` of the live tree
        (what ``nokv commit`` uses). An exact retry returns the original result with
        ``idempotent_replay: True``.

        Returns the tool's fields (``commit_identity``, ``generation``, ``manifest_digest_uri``,
        ``tree_digest_uri``, ``idempotent_replay``, …) plus ``committed_at_unix_seconds`` and
        ``parents``.

        Raises:
            WorkbenchCommitConflict: committed with another identity and ``replace`` is false.
            WorkbenchCommitProtocolMismatch: this identity was requested with other inputs.
            NotFound: the workbench or a parent commit does not exist.
        """
        return self._core.commit(
            workbench_id,
            manifest,
            content_digest_uri=content_digest_uri,
            replace=replace,
            parents=list(parents),
        )

    def content_digest(self, workbench_id: str) -> str:
        """``sha256:`` digest of the live tree (every file's path and body digest, except the run
        manifest) — the content digest ``nokv commit`` commits."""
        return self._core.content_digest(workbench_id)

    def commit_head(self, workbench_id: str) -> Optional[Dict[str, Any]]:
        """The current commit of a workbench (``None``: never committed): ``{commit_id,
        workbench_id, state, tree_digest_uri, content_digest_uri, manifest_digest_uri,
        member_count, unique_revision_count, parents, consumer_count, created_version}``."""
        return self._core.commit_head(workbench_id)

    def commit_info(self, commit_id: str) -> Optional[Dict[str, Any]]:
        """A commit by id (64 hex), as :meth:`commit_head` describes it; ``None`` if absent."""
        return self._core.commit_info(commit_id)

    def tags(self, workbench_id: str) -> List[Dict[str, Any]]:
        """Every tag of a workbench: ``[{name, commit_id, generation}]``."""
        return self._core.tags(workbench_id)

    def get_tag(self, workbench_id: str, name: str) -> Optional[Dict[str, Any]]:
        """One tag (``None``: absent)."""
        return self._core.get_tag(workbench_id, name)

    def set_tag(
        self,
        workbench_id: str,
        name: str,
        commit_id: str,
        *,
        expected_generation: Optional[int] = None,
        create_only: bool = False,
    ) -> Dict[str, Any]:
        """Points a tag at a sealed commit under a CAS: ``create_only`` (must be absent) or
        ``expected_generation`` (must be at that generation); neither = last writer wins.
        Moving a tag never retires a commit.

        Raises:
            Conflict: the CAS failed (``details["conflict"] == "CommitHead"``).
            NotFound: no such commit.
        """
        return self._core.set_tag(
            workbench_id,
            name,
            commit_id,
            expected_generation=expected_generation,
            create_only=create_only,
        )

    def delete_tag(
        self, workbench_id: str, name: str, *, expected_generation: Optional[int] = None
    ) -> Optional[Dict[str, Any]]:
        """Removes a tag (the commit stays); returns the removed tag, ``None`` if absent."""
        return self._core.delete_tag(workbench_id, name, expected_generation=expected_generation)

    # -- snapshots and restore ----------------------------------------------------------------

    def snapshot(
        self,
        workbench_id: str,
        *,
        name: Optional[str] = None,
        reason: Optional[str] = None,
        metadata: Optional[Mapping[str, Any]] = None,
        ttl_days: Optional[int] = None,
    ) -> Dict[str, Any]:
        """Mints a leased snapshot of a committed workbench (``workbench_snapshot``; lease
        ``ttl_days`` × 1 day, default 7, at most 90). Returns ``{snapshot_id, name,
        read_version, lease_expires_at, lease_expires_unix_ms, annotation, state, …}``.

        Raises:
            InvalidState: the workbench has no commit.
        """
        args: Dict[str, Any] = {"id": workbench_id}
        for k, v in (("name", name), ("reason", reason), ("metadata", metadata), ("ttl_days", ttl_days)):
            if v is not None:
                args[k] = v
        return self._core.call("workbench_snapshot", args)

    def renew(
        self, workbench_id: str, snapshot: SnapshotRef, *, ttl_days: Optional[int] = None
    ) -> Dict[str, Any]:
        """Extends a snapshot's lease to now + ``ttl_days`` (extend-only;
        ``workbench_snapshot_renew``).

        Raises:
            SnapshotExpired: it was reaped or retired.
            InvalidState: the new deadline would be earlier.
        """
        args = _selector({"id": workbench_id}, snapshot)
        if ttl_days is not None:
            args["ttl_days"] = ttl_days
        return self._core.call("workbench_snapshot_renew", args)

    def retire(
        self, workbench_id: str, snapshot: SnapshotRef, *, reason: Optional[str] = None
    ) -> Dict[str, Any]:
        """Retires a snapshot and releases its history hold (``workbench_snapshot_retire``); a
        retry answers ``retired: False`` with the first retirement's annotation.

        Raises:
            ForkRetentionActive: a restore still consumes it.
        """
        args = _selector({"id": workbench_id}, snapshot)
        if reason is not None:
            args["reason"] = reason
        return self._core.call("workbench_snapshot_retire", args)

    def snapshots(self, workbench_id: str) -> List[Dict[str, Any]]:
        """Every snapshot of a workbench with its state (``alive``, ``expired``, ``retired``,
        ``reaped``), in id order (``workbench_snapshot_list``)."""
        return self._core.call("workbench_snapshot_list", {"id": workbench_id})["snapshots"]

    def restore(
        self,
        source: str,
        destination: str,
        *,
        at_snapshot: Optional[SnapshotRef] = None,
        at_commit: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Restores a snapshot or commit of ``source`` into the new workbench ``destination``
        (no body copied; ``workbench_restore``). Exactly one of ``at_snapshot``/``at_commit``.
        An exact retry returns the original result with ``idempotent_replay: True``.

        Raises:
            AlreadyExists: ``destination`` exists (from another request).
            SnapshotExpired / SnapshotNotFound: the snapshot cannot be read.
        """
        args: Dict[str, Any] = {"id": source, "destination_id": destination}
        if at_snapshot is not None:
            args["at_snapshot"] = at_snapshot
        if at_commit is not None:
            args["at_commit"] = at_commit
        return self._core.call("workbench_restore", args)

    # -- change feed and local files -----------------------------------------------------------

    def changes(
        self, after: Optional[str] = None, *, workbench_id: Optional[str] = None
    ) -> Iterator[Change]:
        """Iterates visible changes strictly after the opaque cursor ``after`` (``None``: from
        the beginning), root-wide or of one workbench, in commit order. Each
        :class:`~nokv.Change` carries the cursor that resumes right after it. The iterator ends
        when it has caught up; calling ``next()`` on it again polls for newer changes.

        Raises:
            InvalidArguments: a malformed or foreign cursor.
        """
        return self._core.changes(after=after, workbench_id=workbench_id)

    def materialize(
        self, workbench_id: str, directory: Union[str, "os.PathLike[str]"], *, prefix: Optional[str] = None
    ) -> List[Dict[str, Any]]:
        """Writes the workbench's files (or those under ``prefix``) to ``directory/<key>``,
        verifying every body's SHA-256 before it appears; returns ``[{key, local, size_bytes,
        digest_uri}]``. Streams block by block."""
        return self._core.materialize(workbench_id, os.fspath(directory), prefix=prefix)

    def collect(
        self,
        workbench_id: str,
        file: Union[str, "os.PathLike[str]"],
        path: str,
        *,
        content_type: Optional[str] = None,
        replace: bool = False,
        fields: Optional[Mapping[str, Any]] = None,
        index_json: bool = False,
    ) -> Dict[str, Any]:
        """Publishes the local ``file`` at ``path`` (streamed; the stored digest is checked
        against the file's); returns ``{key, generation, size_bytes, digest_uri}``.
        ``content_type`` defaults from the file name."""
        return self._core.collect(
            workbench_id,
            os.fspath(file),
            path,
            content_type=content_type,
            replace=replace,
            fields=dict(fields) if fields is not None else None,
            index_json=index_json,
        )

    def diff(
        self,
        a: str,
        b: str,
        *,
        cursor: Optional[str] = None,
        limit: int = 1000,
        patch: bool = False,
        patch_max_bytes: int = 262144,
    ) -> Dict[str, Any]:
        """One page of the diff from ``a`` to ``b`` (``nokv diff``).

        Each side is a workbench id (its live tree), ``"WB@SNAPSHOT"`` (a snapshot id or name)
        or a commit id (64 hex characters). Paths are compared by revision, then by digest,
        size and content type: the answer lists the ``added``, ``removed`` and ``changed``
        paths in path order with each side's ``{generation, size_bytes, digest,
        content_type}``. Two states of one workbench (its live tree, its snapshots, its commits)
        are compared in time proportional to the paths that changed between them.

        Args:
            a: Side A.
            b: Side B.
            cursor: ``next_cursor`` of the previous page.
            limit: At most this many changes per page (1..=10000).
            patch: Add a unified text diff (``patch``) to each change whose sides are UTF-8 text
                of at most ``patch_max_bytes`` each (else ``patch_skipped``).
            patch_max_bytes: Size bound per side (at most 4 MiB).

        Returns:
            ``{a, b, count, changes: [{path, change, a, b, patch?, patch_skipped?}],
            next_cursor, strategy, rows_read, events_read}``.

        Raises:
            NotFound: a missing workbench, snapshot or commit.
            InvalidArguments: a malformed side or cursor.
            InvalidState: an expired snapshot or a retiring commit.
        """
        return self._core.diff(
            a, b, cursor=cursor, limit=limit, patch=patch, patch_max_bytes=patch_max_bytes
        )

    def object_count(self) -> int:
        """Objects in the store's object provider (diagnostics; lists the provider)."""
        return self._core.object_count()


class Workbench:
    """A handle on one workbench of a :class:`Store` (:meth:`Store.workbench`,
    :meth:`Store.create_workbench`).

    Paths are workbench-relative keys ``section/relative`` (e.g. ``"input/penguins.csv"``); the
    sections are ``input``, ``scripts``, ``outputs``, ``logs`` and ``metadata``. Read methods
    take ``at_snapshot`` (a snapshot id or name) to read a frozen view.
    """

    __slots__ = ("_store", "_core", "id")

    def __init__(self, store: Store, workbench_id: str) -> None:
        self._store = store
        self._core = store._core
        #: The workbench id.
        self.id = workbench_id

    @property
    def store(self) -> Store:
        """The store this workbench belongs to."""
        return self._store

    def __repr__(self) -> str:
        return f"<nokv.Workbench {self.id!r}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workbench) and other._core is self._core and other.id == self.id

    def __hash__(self) -> int:
        return hash((id(self._core), self.id))

    # -- writes ----------------------------------------------------------------------------

    def put(
        self,
        path: str,
        data: Body,
        *,
        replace: bool = False,
        expected_generation: Optional[int] = None,
        content_type: Optional[str] = None,
        fields: Optional[Mapping[str, Any]] = None,
        index_json: bool = False,
        request_id: Optional[str] = None,
    ) -> PutResult:
        """Publishes a whole body at ``path``: immutable, all or nothing (readers see the old or
        the new body, never a part).

        ``data`` is bytes-like, ``str`` (stored as UTF-8), an ``os.PathLike`` naming a local file
        (streamed) or a binary file object (read to its end, streamed): memory stays bounded by
        one 4 MiB block for files and streams. ``replace=False`` is create-only;
        ``replace=True`` is replace-only, under a generation CAS against
        ``expected_generation`` (or the generation just read). ``content_type`` defaults from
        the file name (``text/plain`` for text). ``fields`` attaches typed index fields (None,
        bool, int, float, str, bytes, aware datetime); ``index_json`` also indexes the body's
        top-level JSON scalars.

        ``request_id`` (32 hex characters, chosen per logical put) makes the put safe to rerun:
        the same call again — after a timeout, a lost reply, in another process — returns the
        first receipt with ``idempotent_replay=True`` and writes nothing, embedded or connected.

        Raises:
            AlreadyExists: create-only and the path exists.
            NotFound: replace and the path (or the workbench) does not exist.
            Conflict: the generation moved (``details["conflict"] == "PathGeneration"``).
            InvalidArguments: a bad path, a reserved path, bad fields, a malformed
                ``request_id``, or a ``request_id`` already used for another put
                (``details["reason"] == "request_id_reused"``).
        """
        return self._core.put(
            self.id,
            path,
            data,
            replace=replace,
            expected_generation=expected_generation,
            content_type=content_type,
            fields=dict(fields) if fields is not None else None,
            index_json=index_json,
            request_id=request_id,
        )

    def append(
        self, path: str, data: Union[bytes, bytearray, memoryview, str], *, content_type: Optional[str] = None
    ) -> AppendResult:
        """Appends to the artifact at ``path`` (created when missing) as an immutable segment
        sharing the older blocks, under a generation CAS with bounded internal retries.
        ``content_type=None`` keeps the existing type (``text/plain`` for new text,
        ``application/octet-stream`` for new bytes)."""
        return self._core.append(self.id, path, data, content_type=content_type)

    def edit(
        self, path: str, old: str, new: str, *, replace_all: bool = False
    ) -> Dict[str, Any]:
        """Exact-string edit of a UTF-8 file (``workbench_edit``): literal, byte-exact matching;
        publishes replace-if-generation. Returns ``{replacements, size_bytes, generation,
        no_change, …}``.

        Raises:
            NoMatch: no literal match (``details["hints"]`` may carry near misses).
            AmbiguousEdit: several matches without ``replace_all``.
            InvalidUtf8: the file is not UTF-8.
        """
        args = _split(path)
        args.update(id=self.id, old_string=old, new_string=new, replace_all=replace_all)
        return self._core.call("workbench_edit", args)

    def expire(
        self,
        *,
        after: Union[str, _dt.timedelta, None] = None,
        at: Union[str, _dt.datetime, None] = None,
        never: bool = False,
    ) -> Dict[str, Any]:
        """Records, moves or removes this workbench's expiry deadline; see
        :meth:`Store.expire`."""
        return self._store.expire(self.id, after=after, at=at, never=never)

    def remove(
        self,
        path: str,
        *,
        recursive: bool = False,
        expected_generation: Optional[int] = None,
        request_id: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Removes the file at ``path`` (``nokv rm``), or with ``recursive=True`` every file
        under the directory prefix ``path`` and a file at exactly ``path`` (``nokv rm -r``).

        One file goes in one metadata command: its path entry, index rows and reference to the
        revision together, with an ``artifact_removed`` change. Afterwards :meth:`stat` and
        :meth:`read_bytes` raise :class:`nokv.NotFound` and listings, search and aggregate no
        longer see it — but everything taken before keeps reading the bytes: a snapshot
        (``at_snapshot``), a commit and a restore from it. The blocks stay until a GC pass proves
        nothing holds them. A recursive removal runs in batches of at most 16 paths, each
        atomic; calling it again after an interruption removes what is left. The reserved
        manifests (``metadata/run_manifest.json``, ``metadata/restore_manifest.json``) are never
        removed: a single removal of one is refused, a recursive one keeps them and lists them
        in ``kept_reserved``.

        Args:
            path: Workbench-relative path (``recursive``: a prefix such as ``"outputs/tmp"``).
            recursive: Remove everything under ``path``.
            expected_generation: Remove only at this generation (a compare-and-swap); one path
                only.
            request_id: 32 hex characters making the call replayable: the same id again (after
                a lost answer, say) returns the original result with ``idempotent_replay:
                True`` instead of :class:`nokv.NotFound`. One path only; default a fresh id.

        Returns:
            One path: ``{workbench_id, relative_path, path, removed_generation, size_bytes,
            digest, idempotent_replay}``. Recursive: ``{workbench_id, prefix, removed_count,
            removed: [{relative_path, generation}], kept_reserved, batches}``.

        Raises:
            NotFound: nothing at ``path``, or no such workbench.
            NotArtifact: ``path`` is a directory (files lie under it) and ``recursive`` is
                false; nothing removed.
            Conflict: ``expected_generation`` is stale (``details["conflict"] ==
                "PathGeneration"``); nothing removed.
            InvalidArguments: a reserved manifest; a bad path or request id; ``request_id`` or
                ``expected_generation`` with ``recursive``; a request id reused for another
                removal (``details["reason"] == "request_id_reused"``).
        """
        return self._core.remove(
            self.id,
            path,
            recursive=recursive,
            expected_generation=expected_generation,
            request_id=request_id,
        )

    def move(
        self,
        src: str,
        dst: str,
        *,
        expected_generation: Optional[int] = None,
        expected_destination_generation: Optional[int] = None,
        request_id: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Moves the file at ``src`` to ``dst`` in this workbench (``nokv mv``).

        One metadata command and no byte copied: afterwards ``src`` is absent and ``dst`` names
        the same revision (size, digest, content type, index fields) at a new generation, with
        one ``artifact_moved`` change. A concurrent reader sees the file at exactly one of the two
        paths; snapshots and commits taken before keep reading both paths as they were.
        Directory rename is not supported: a ``src`` with files under it is refused.

        Args:
            src: Workbench-relative path of the file to move.
            dst: Workbench-relative destination. Must be absent unless
                ``expected_destination_generation`` is given.
            expected_generation: Move only when ``src`` is at this generation.
            expected_destination_generation: Replace the file at ``dst``, which must be at this
                generation.
            request_id: 32 hex characters making the call replayable: the same id again (after
                a lost answer, say) returns the original result with ``idempotent_replay:
                True`` instead of :class:`nokv.NotFound`. Default: a fresh id.

        Returns:
            ``{workbench_id, from, to, path, from_generation, generation, replaced_generation,
            size_bytes, digest, content_type, commit_version, idempotent_replay}``.

        Raises:
            NotFound: nothing at ``src``, or no such workbench.
            NotArtifact: ``src`` is a directory (``details["reason"] ==
                "directory_rename_unsupported"``).
            AlreadyExists: a file (or, with ``details["kind"] == "directory"``, a directory) is
                at ``dst``.
            NotDirectory: ``dst`` lies below a file.
            Conflict: a stale ``expected_generation`` or ``expected_destination_generation``
                (``details["path"]`` names the side); nothing moved.
            InvalidArguments: ``src == dst``, a reserved manifest, a bad path or request id, a
                request id reused for another command.
        """
        return self._core.move_path(
            self.id,
            src,
            dst,
            expected_generation=expected_generation,
            expected_destination_generation=expected_destination_generation,
            request_id=request_id,
        )

    mv = move

    # -- reads -----------------------------------------------------------------------------

    def stat(self, path: str = "", *, at_snapshot: Optional[SnapshotRef] = None) -> Stat:
        """The card of a file or directory (``""``: the workbench root). Never reads the body.

        Raises:
            NotFound: nothing at ``path``.
        """
        return self._core.stat(self.id, path, at_snapshot=at_snapshot)

    def exists(self, path: str, *, at_snapshot: Optional[SnapshotRef] = None) -> bool:
        """True when a file or directory exists at ``path``."""
        from .errors import NotFound

        try:
            self._core.stat(self.id, path, at_snapshot=at_snapshot)
            return True
        except NotFound:
            return False

    def read_bytes(
        self,
        path: str,
        offset: int = 0,
        length: Optional[int] = None,
        *,
        at_snapshot: Optional[SnapshotRef] = None,
    ) -> bytes:
        """Bytes ``[offset, offset + length)`` of a file (``length=None``: to the end); only
        the blocks covering the range are fetched, each verified before use.

        Raises:
            NotFound: no file; NotArtifact: a directory;
            InvalidArguments: the range is outside the body.
        """
        return self._core.read_bytes(self.id, path, offset, length, at_snapshot=at_snapshot)

    def read_text(
        self, path: str, *, encoding: str = "utf-8", at_snapshot: Optional[SnapshotRef] = None
    ) -> str:
        """The whole file decoded as text."""
        return self.read_bytes(path, at_snapshot=at_snapshot).decode(encoding)

    def read_json(
        self,
        path: str,
        *,
        at_snapshot: Optional[SnapshotRef] = None,
        parse_float: Optional[Callable[[str], Any]] = None,
    ) -> Any:
        """The whole file parsed as JSON. Integers come back exact (Python ``int`` of any size);
        other numbers as ``float``, or ``parse_float(text)`` when given (e.g.
        ``decimal.Decimal`` for exact decimals).

        Raises:
            StructuredDecodeFailed: the body is not JSON (``details["format"] == "json"``).
            InvalidUtf8: the body is not UTF-8.
        """
        body = self.read_bytes(path, at_snapshot=at_snapshot)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            from .errors import InvalidUtf8

            raise InvalidUtf8(
                f"{self.id}/{path} is not valid UTF-8 text; read it with read_bytes instead",
                details={"path": path},
            ) from None
        try:
            return json.loads(text, parse_float=parse_float)
        except ValueError as e:
            raise StructuredDecodeFailed(
                f"{self.id}/{path} could not be decoded as json ({e})",
                details={"path": path, "format": "json"},
            ) from None

    def open(
        self, path: str, mode: str = "rb", *, at_snapshot: Optional[SnapshotRef] = None
    ) -> "ArtifactFile":
        """A read-only, seekable binary file object over the file at ``path``, pinned to the
        revision current when opened (a later replacement does not change what it reads).
        Reads are range reads; memory stays bounded by one block plus what a caller asks for.

        Raises:
            NotFound: no file; NotArtifact: a directory; InvalidArguments: a mode other than
            ``"rb"`` (wrap the file in ``io.TextIOWrapper`` for text).
        """
        if mode not in ("rb", "br"):
            raise InvalidArguments(
                f"mode {mode!r} is not supported: NoKV files are immutable; open them with 'rb' "
                "and publish new bodies with put()"
            )
        reader = self._core.open_reader(self.id, path, at_snapshot=at_snapshot)
        return ArtifactFile(reader, f"{self.id}/{path}")

    def list(
        self, path: str = "", *, at_snapshot: Optional[SnapshotRef] = None, page_size: int = 100
    ) -> Iterator[Stat]:
        """Direct children of ``path`` (``""``: the five sections and any root entries), paging
        through the listing's cursors (``workbench_list``). Live listings raise
        :class:`nokv.ReadFenceChanged` if the workbench changes between pages; a snapshot
        listing is stable.

        Raises:
            NotFound: nothing at ``path``; NotDirectory: ``path`` is a file.
        """
        cursor: Optional[str] = None
        while True:
            entries, cursor = self._core.list_page(
                self.id, path, cursor=cursor, limit=page_size, at_snapshot=at_snapshot
            )
            yield from entries
            if cursor is None:
                return

    def walk(
        self, path: str = "", *, at_snapshot: Optional[SnapshotRef] = None, page_size: int = 256
    ) -> Iterator[Stat]:
        """Every file below ``path`` (recursive), in canonical path order, paging by the last
        key seen (each page is read at one version).

        Raises:
            NotFound: the workbench does not exist.
        """
        after: Optional[str] = None
        while True:
            files, after = self._core.walk_page(
                self.id, path, after=after, limit=page_size, at_snapshot=at_snapshot
            )
            yield from files
            if after is None:
                return

    def grep(
        self,
        pattern: str,
        path: str = "",
        *,
        recursive: bool = True,
        patterns: Optional[Sequence[str]] = None,
        glob: Optional[str] = None,
        page_size: int = 100,
    ) -> Iterator[Dict[str, Any]]:
        """Case-insensitive literal search per line (``workbench_grep``), paging through its
        cursors: yields ``{path, section, relative_path, line_number, snippet}`` per matching
        line. ``glob`` filters basenames (``*``, ``?``).

        Raises:
            ResourceExhausted: more than 10,000 files / 512 MiB scanned.
        """
        args: Dict[str, Any] = {"id": self.id, "pattern": pattern, "recursive": recursive, "limit": page_size}
        _scope(args, path)
        if patterns is not None:
            args["patterns"] = list(patterns)
        if glob is not None:
            args["glob"] = glob
        while True:
            out = self._core.call("workbench_grep", args)
            yield from out["matches"]
            cursor = out.get("next_cursor")
            if cursor is None:
                return
            args["cursor"] = cursor

    # -- per-workbench shortcuts of the store's methods ----------------------------------------

    def commit(self, manifest: Mapping[str, Any], **kwargs: Any) -> Dict[str, Any]:
        """:meth:`Store.commit` of this workbench."""
        return self._store.commit(self.id, manifest, **kwargs)

    def snapshot(self, **kwargs: Any) -> Dict[str, Any]:
        """:meth:`Store.snapshot` of this workbench."""
        return self._store.snapshot(self.id, **kwargs)

    def snapshots(self) -> List[Dict[str, Any]]:
        """:meth:`Store.snapshots` of this workbench."""
        return self._store.snapshots(self.id)

    def search(self, **kwargs: Any) -> Dict[str, Any]:
        """:meth:`Store.search` within this workbench."""
        return self._store.search(workbench_id=self.id, **kwargs)

    def changes(self, after: Optional[str] = None) -> Iterator[Change]:
        """:meth:`Store.changes` of this workbench."""
        return self._store.changes(after, workbench_id=self.id)

    def materialize(self, directory: Union[str, "os.PathLike[str]"], *, prefix: Optional[str] = None) -> List[Dict[str, Any]]:
        """:meth:`Store.materialize` of this workbench."""
        return self._store.materialize(self.id, directory, prefix=prefix)

    def collect(self, file: Union[str, "os.PathLike[str]"], path: str, **kwargs: Any) -> Dict[str, Any]:
        """:meth:`Store.collect` into this workbench."""
        return self._store.collect(self.id, file, path, **kwargs)


class ArtifactFile(io.RawIOBase):
    """A read-only, seekable binary file over one pinned revision (:meth:`Workbench.open`).

    ``read(n)`` returns exactly ``n`` bytes unless the end is reached; ``seek`` accepts
    ``SEEK_SET``, ``SEEK_CUR`` and ``SEEK_END``. Extra attributes: ``size``, ``generation``,
    ``digest_uri``, ``content_type``, ``name``.
    """

    def __init__(self, reader: "_nokv.RangeReader", name: str) -> None:
        super().__init__()
        self._reader = reader
        self._pos = 0
        self.name = name
        #: Body size in bytes.
        self.size: int = reader.size
        #: Generation of the pinned revision.
        self.generation: int = reader.generation
        #: ``sha256:`` URI of the pinned body.
        self.digest_uri: str = reader.digest_uri
        #: Content type of the pinned revision.
        self.content_type: str = reader.content_type

    @property
    def mode(self) -> str:
        return "rb"

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file")

    def readable(self) -> bool:
        self._check_open()
        return True

    def seekable(self) -> bool:
        self._check_open()
        return True

    def writable(self) -> bool:
        return False

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:
            raise ValueError(f"invalid whence ({whence})")
        if pos < 0:
            raise ValueError("negative seek position")
        self._pos = pos
        return pos

    def read(self, size: Optional[int] = -1) -> bytes:
        self._check_open()
        if size is None or size < 0:
            size = max(self.size - self._pos, 0)
        if size == 0 or self._pos >= self.size:
            return b""
        data = self._reader.read_at(self._pos, size)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._reader.release()
        super().close()

    def __repr__(self) -> str:
        return f"<nokv.ArtifactFile {self.name!r} size={self.size} generation={self.generation}>"


def open(
    path: Union[str, "os.PathLike[str]"],
    *,
    create: bool = True,
    objects: Union[None, str, Mapping[str, Any]] = None,
    lock_timeout: float = 30.0,
) -> Store:
    """Opens the embedded NoKV store in directory ``path`` (in-process: no server, no
    subprocess) and returns a :class:`Store`.

    Args:
        path: The store directory (the CLI's ``--store``).
        create: Create the store when the directory holds none (else :class:`nokv.NotFound`).
        objects: Where a new store keeps its object bytes: ``None`` = ``<path>/objects``; an
            ``"s3://bucket/prefix"`` URL, or a dict ``{url, endpoint, region, path_style,
            cache_dir, cache_bytes}`` — the settings of ``nokv init`` (an existing store must
            have been initialized with the same settings).
        lock_timeout: Seconds the open or a write waits for its turn on the store's writer
            lock (processes take turns: each holds it only while a write runs, plus a 20 ms
            grace); then :class:`nokv.Conflict`.

    Raises:
        NotFound: ``create=False`` and no store exists.
        Conflict: another process kept the writer lock for ``lock_timeout`` seconds.
        InvalidState: the directory holds an incompatible or damaged store.
    """
    core = _nokv.Core.open(
        os.fspath(path),
        create=create,
        objects=dict(objects) if isinstance(objects, Mapping) else objects,
        lock_timeout=lock_timeout,
    )
    return Store(core)


def connect(
    url: str,
    *,
    token: Optional[str] = None,
    retries: int = 4,
) -> Store:
    """Connects to a running ``nokv serve`` and returns a :class:`Store` with the same API as
    :func:`open` — the calls go through NoKV's Rust remote client inside this process (no
    Python HTTP stack), one HTTP/1.1 request each, with pooled connections shared by every
    thread.

    Writes carry a request id that their retries reuse, so a retry after a lost answer never
    applies twice; a call is retried ``retries`` times (exponential backoff from 50 ms) after a
    connection failure or a retryable refusal. A streamed body (a file object) is sent once.

    Operations that need the store's files raise :class:`nokv.Unsupported` here:
    :meth:`Store.content_digest`, :meth:`Store.object_count` and :meth:`Workbench.walk` with
    ``at_snapshot`` (:meth:`Workbench.list` works at a snapshot). Live file objects of a
    connected store read the live path and raise :class:`nokv.Conflict` once it holds another
    generation; file objects and reads ``at_snapshot`` read at the snapshot's read version.

    Args:
        url: ``http://HOST:PORT`` of the server (put TLS in a terminating proxy).
        token: The bearer token (default: ``NOKV_TOKEN`` when set).
        retries: Retries after a connection failure or a retryable refusal (0: never).

    Raises:
        Unavailable: the server cannot be reached (retryable).
        Unauthorized: the server refused the token.
        InvalidArguments: the URL is not ``http://HOST:PORT``; the token is not visible ASCII.
    """
    return Store(_nokv.Core.connect(url, token=token, retries=retries))
