"""Type stubs of the native module ``nokv._nokv`` (the Rust half of the SDK).

Use the public classes of :mod:`nokv` (``nokv.open``, ``Store``, ``Workbench``); ``Core`` is the
engine handle behind them. The result classes (``Stat``, ``PutResult``, ``AppendResult``,
``Change``) are returned by public methods and are documented here.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

__version__: str

#: Every Workbench error code (docs/workbench.md, "Error codes") in the order of the docs: the
#: Rust list ``ErrorCode::ALL``. ``nokv.errors`` maps each to its exception class.
ERROR_CODES: Tuple[str, ...]
#: The codes of ``ERROR_CODES`` whose calls may be retried unchanged.
RETRYABLE_ERROR_CODES: Tuple[str, ...]

_Selector = Union[int, str]

class Stat:
    """The card of a file or an implicit directory (artifact fields are ``None`` for
    directories)."""

    #: Last path component.
    name: str
    #: Presentation path ``{root}/{workbench}/{section}/{relative}``.
    path: str
    #: Workbench-relative key ``section/relative`` (``""`` for the workbench root).
    key: str
    #: ``input``, ``scripts``, ``outputs``, ``logs``, ``metadata``, or ``None`` outside them.
    section: Optional[str]
    #: Path below the section.
    relative_path: Optional[str]
    #: ``"file"`` or ``"directory"``.
    kind: str
    #: Body size in bytes (files).
    size_bytes: Optional[int]
    #: Direct children (directories, when known).
    entry_count: Optional[int]
    #: Conditional-write token (files).
    generation: Optional[int]
    #: Content type (files).
    content_type: Optional[str]
    #: ``sha256:`` URI of the body (files).
    digest_uri: Optional[str]
    #: Who published the body (files).
    producer: Optional[str]
    #: Caller manifest id (files, when set).
    manifest_id: Optional[str]
    #: Custom typed index fields (files read by ``stat``/``walk``; ``None`` from ``list``).
    fields: Optional[Dict[str, Any]]
    @property
    def is_file(self) -> bool: ...
    @property
    def is_dir(self) -> bool: ...

class PutResult:
    """What ``Workbench.put`` published."""

    workbench_id: str
    key: str
    section: Optional[str]
    relative_path: Optional[str]
    path: str
    size_bytes: int
    generation: int
    digest_uri: str
    content_type: str
    replace: bool
    created: bool
    #: True when this is the stored receipt of an earlier put with the same ``request_id``
    #: (nothing was written by this call).
    idempotent_replay: bool

class AppendResult:
    """What ``Workbench.append`` did."""

    workbench_id: str
    key: str
    section: Optional[str]
    relative_path: Optional[str]
    path: str
    appended_bytes: int
    size_bytes: int
    generation: int
    created: bool
    #: ``sha256:`` of the appended bytes only.
    digest: str
    #: ``sha256:`` of the whole resulting body.
    digest_uri: str
    content_type: str

class Change:
    """One visible change of the change feed."""

    #: Opaque cursor resuming right after this change.
    cursor: str
    commit_version: int
    event_sequence: int
    workbench_id: str
    #: ``workspace_created``, ``artifact_published``, ``artifact_appended``, ``snapshot_created``, …
    kind: str
    path: Optional[str]
    before_generation: Optional[int]
    after_generation: Optional[int]
    snapshot_id: Optional[int]
    #: Source path of an ``artifact_moved`` change (``path`` is the destination).
    moved_from: Optional[str]
    moved_from_generation: Optional[int]

class ChangeIter(Iterator[Change]):
    def __iter__(self) -> ChangeIter: ...
    def __next__(self) -> Change: ...
    @property
    def cursor(self) -> Optional[str]: ...

class RangeReader:
    @property
    def size(self) -> int: ...
    @property
    def generation(self) -> int: ...
    @property
    def digest_uri(self) -> str: ...
    @property
    def content_type(self) -> str: ...
    def read_at(self, offset: int, length: int) -> bytes: ...
    def release(self) -> None: ...

class Core:
    @staticmethod
    def open(
        path: Union[str, os.PathLike[str]],
        *,
        create: bool = True,
        objects: Union[None, str, Dict[str, Any]] = None,
        lock_timeout: float = 30.0,
    ) -> Core: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @staticmethod
    def connect(url: str, *, token: Optional[str] = None, retries: int = 4) -> Core: ...
    @property
    def directory(self) -> Optional[str]: ...
    @property
    def url(self) -> Optional[str]: ...
    @property
    def presentation_root(self) -> str: ...
    def tool(self, name: str, args: Any) -> Dict[str, Any]: ...
    def call(self, name: str, args: Any, *, parse_float: Optional[Callable[[str], Any]] = None) -> Dict[str, Any]: ...
    def put(
        self,
        workbench_id: str,
        key: str,
        data: Any,
        *,
        replace: bool = False,
        expected_generation: Optional[int] = None,
        content_type: Optional[str] = None,
        fields: Optional[Dict[str, Any]] = None,
        index_json: bool = False,
        request_id: Optional[str] = None,
    ) -> PutResult: ...
    def append(self, workbench_id: str, key: str, data: Any, *, content_type: Optional[str] = None) -> AppendResult: ...
    def stat(self, workbench_id: str, key: str, *, at_snapshot: Optional[_Selector] = None) -> Stat: ...
    def list_page(
        self, workbench_id: str, key: str, *, cursor: Optional[str] = None, limit: int = 100, at_snapshot: Optional[_Selector] = None
    ) -> Tuple[List[Stat], Optional[str]]: ...
    def walk_page(
        self, workbench_id: str, key: str, *, after: Optional[str] = None, limit: int = 256, at_snapshot: Optional[_Selector] = None
    ) -> Tuple[List[Stat], Optional[str]]: ...
    def read_bytes(
        self, workbench_id: str, key: str, offset: int = 0, length: Optional[int] = None, *, at_snapshot: Optional[_Selector] = None
    ) -> bytes: ...
    def open_reader(self, workbench_id: str, key: str, *, at_snapshot: Optional[_Selector] = None) -> RangeReader: ...
    def commit(
        self,
        workbench_id: str,
        manifest: Mapping[str, Any],
        *,
        content_digest_uri: Optional[str] = None,
        replace: bool = False,
        parents: Sequence[str] = ...,
    ) -> Dict[str, Any]: ...
    def content_digest(self, workbench_id: str) -> str: ...
    def commit_head(self, workbench_id: str) -> Optional[Dict[str, Any]]: ...
    def commit_info(self, commit_id: str) -> Optional[Dict[str, Any]]: ...
    def tags(self, workbench_id: str) -> List[Dict[str, Any]]: ...
    def get_tag(self, workbench_id: str, name: str) -> Optional[Dict[str, Any]]: ...
    def set_tag(
        self, workbench_id: str, name: str, commit_id: str, *, expected_generation: Optional[int] = None, create_only: bool = False
    ) -> Dict[str, Any]: ...
    def delete_tag(self, workbench_id: str, name: str, *, expected_generation: Optional[int] = None) -> Optional[Dict[str, Any]]: ...
    def changes(self, *, after: Optional[str] = None, workbench_id: Optional[str] = None) -> ChangeIter: ...
    def materialize(self, workbench_id: str, directory: Union[str, os.PathLike[str]], *, prefix: Optional[str] = None) -> List[Dict[str, Any]]: ...
    def collect(
        self,
        workbench_id: str,
        file: Union[str, os.PathLike[str]],
        key: str,
        *,
        content_type: Optional[str] = None,
        replace: bool = False,
        fields: Optional[Dict[str, Any]] = None,
        index_json: bool = False,
    ) -> Dict[str, Any]: ...
    def remove(
        self,
        workbench_id: str,
        key: str,
        *,
        recursive: bool = False,
        expected_generation: Optional[int] = None,
        request_id: Optional[str] = None,
    ) -> Dict[str, Any]: ...
    def expire(
        self,
        workbench_id: str,
        *,
        after: Optional[str] = None,
        at: Optional[str] = None,
        never: bool = False,
    ) -> Dict[str, Any]: ...
    def move_path(
        self,
        workbench_id: str,
        from_key: str,
        to_key: str,
        *,
        expected_generation: Optional[int] = None,
        expected_destination_generation: Optional[int] = None,
        request_id: Optional[str] = None,
    ) -> Dict[str, Any]: ...
    def diff(
        self,
        a: str,
        b: str,
        *,
        cursor: Optional[str] = None,
        limit: int = 1000,
        patch: bool = False,
        patch_max_bytes: int = 262144,
    ) -> Dict[str, Any]: ...
    def object_count(self) -> int: ...
