"""An explicit, bounded fsspec adapter over one NoKV workbench (protocol ``nokv://``).

NoKV is deliberately *not* a transparent filesystem (docs/design.md, "Deliberate Non-Goals"): there are
no directory records, no in-place updates, no appends through file handles, no renames. This
adapter exposes exactly what data-science readers and writers need:

* URLs are ``nokv://<workbench>/<section>/<relative path>``; inside the filesystem object, paths
  are workbench-relative keys ``section/relative`` (one filesystem instance is bound to one
  workbench);
* reads: ``open(path, "rb")`` (a seekable range-reading file pinned to one revision), ``cat``,
  ``info``, ``ls``, ``find``, ``walk``, ``exists`` — so ``pandas.read_csv``, ``pyarrow`` and
  ``fsspec.open`` work;
* writes: ``open(path, "wb")`` / ``"xb"`` publish the whole file when it is closed, create-only
  (an existing path raises :class:`nokv.AlreadyExists`); pass ``replace=True`` (to ``open`` or
  ``pipe_file``) to replace an existing file under a generation CAS instead. Written data is
  spooled to a temporary file (at most 4 MiB in memory) and streamed into the store;
* ``mkdir``/``makedirs`` succeed without writing anything (directories are implicit prefixes of
  files); ``rm``, ``mv`` and append/update modes are not offered.

Storage options: ``store`` — an open :class:`nokv.Store` or a store directory (opened on first
use and shared by every filesystem naming the same directory in this process); ``workbench`` —
the workbench id when the paths given carry no ``nokv://`` prefix.

Example::

    df = pandas.read_csv("nokv://penguins/input/penguins.csv", storage_options={"store": ".nokv"})
"""

from __future__ import annotations

import io
import os
import tempfile
import threading
from typing import Any, Dict, List, Optional, Union

from fsspec.spec import AbstractFileSystem

from ._store import ArtifactFile, Store, Workbench, open as _open_store
from .errors import InvalidArguments, NotArtifact, NotDirectory, NotFound

__all__ = ["NoKVFileSystem", "NoKVWriteFile"]

#: Bytes a file being written keeps in memory before spilling to a temporary file.
SPOOL_BYTES = 4 * 1024 * 1024

_STORES: Dict[str, Store] = {}
_STORES_LOCK = threading.Lock()


def _shared_store(directory: str) -> Store:
    """One open store per directory in this process (a store is opened by one process at a
    time, and a Store is thread-safe)."""
    key = os.path.realpath(directory)
    with _STORES_LOCK:
        store = _STORES.get(key)
        if store is None or store.closed:
            store = _open_store(directory)
            _STORES[key] = store
        return store


class NoKVFileSystem(AbstractFileSystem):
    """fsspec filesystem bound to one workbench (see the module docs)."""

    protocol = "nokv"
    root_marker = ""
    # Instances hold a store handle; fsspec's instance cache would key two different handles of
    # one directory (e.g. before and after a close) alike, so instances are not cached.
    cachable = False

    def __init__(
        self,
        store: Union[Store, str, "os.PathLike[str]", None] = None,
        workbench: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if store is None:
            store = os.environ.get("NOKV_STORE", ".nokv")
        self._store = store if isinstance(store, Store) else _shared_store(os.fspath(store))
        if not workbench:
            raise InvalidArguments(
                "the nokv filesystem needs a workbench: use nokv://<workbench>/<section>/<path> "
                "URLs or pass workbench=..."
            )
        self.workbench: Workbench = Workbench(self._store, workbench)

    # -- paths ---------------------------------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = os.fspath(path) if not isinstance(path, str) else path
        if path.startswith("nokv://"):
            path = path[len("nokv://") :]
            # The first component is the workbench.
            path = path.partition("/")[2]
        return path.strip("/")

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> Dict[str, Any]:
        if isinstance(path, str) and path.startswith("nokv://"):
            wb = path[len("nokv://") :].partition("/")[0]
            if wb:
                return {"workbench": wb}
        return {}

    def unstrip_protocol(self, name: str) -> str:
        return f"nokv://{self.workbench.id}/{self._strip_protocol(name)}"

    # -- metadata ------------------------------------------------------------------------------

    @staticmethod
    def _info(stat: Any) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "name": stat.key,
            "size": stat.size_bytes if stat.size_bytes is not None else 0,
            "type": "file" if stat.kind == "file" else "directory",
        }
        if stat.kind == "file":
            out.update(
                generation=stat.generation,
                digest_uri=stat.digest_uri,
                content_type=stat.content_type,
                producer=stat.producer,
            )
        return out

    def info(self, path: str, **kwargs: Any) -> Dict[str, Any]:
        return self._info(self.workbench.stat(self._strip_protocol(path)))

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> List[Any]:
        key = self._strip_protocol(path)
        try:
            entries = [self._info(s) for s in self.workbench.list(key)]
        except NotDirectory:
            entries = [self.info(key)]
        return entries if detail else [e["name"] for e in entries]

    def find(
        self,
        path: str,
        maxdepth: Optional[int] = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ) -> Any:
        if maxdepth is not None or withdirs:
            return super().find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        key = self._strip_protocol(path)
        out: Dict[str, Dict[str, Any]] = {}
        try:
            stat = self.workbench.stat(key) if key else None
        except NotFound:
            stat = None
        if stat is not None and stat.kind == "file":
            out[stat.key] = self._info(stat)
        else:
            for s in self.workbench.walk(key):
                out[s.key] = self._info(s)
        return out if detail else sorted(out)

    def exists(self, path: str, **kwargs: Any) -> bool:
        return self.workbench.exists(self._strip_protocol(path))

    def checksum(self, path: str) -> int:
        return int(self.info(path)["digest_uri"].split(":", 1)[1][:16], 16)

    def ukey(self, path: str) -> str:
        return str(self.info(path).get("digest_uri"))

    # -- directories are implicit ------------------------------------------------------------

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        """Nothing to do: directories exist exactly while files exist below them."""

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Nothing to do: directories exist exactly while files exist below them."""

    # -- bytes ---------------------------------------------------------------------------------

    def cat_file(
        self, path: str, start: Optional[int] = None, end: Optional[int] = None, **kwargs: Any
    ) -> bytes:
        key = self._strip_protocol(path)
        if start is None and end is None:
            return self.workbench.read_bytes(key)
        with self.workbench.open(key) as f:
            size = f.size
            s = 0 if start is None else (start if start >= 0 else max(size + start, 0))
            e = size if end is None else (end if end >= 0 else max(size + end, 0))
            e = min(e, size)
            if s >= e:
                return b""
            f.seek(s)
            return f.read(e - s)

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        """Publishes ``value`` at ``path``: create-only unless ``replace=True`` is passed."""
        self.workbench.put(self._strip_protocol(path), value, replace=bool(kwargs.get("replace", False)))

    def mv(
        self,
        path1: str,
        path2: str,
        recursive: bool = False,
        maxdepth: Optional[int] = None,
        **kwargs: Any,
    ) -> None:
        """Moves one file in one metadata command (no byte copied, see
        :meth:`nokv.Workbench.move`): create-only at ``path2`` unless ``replace=True`` is passed,
        which replaces a file there under a generation compare-and-swap. Directory rename is not
        supported: a directory ``path1`` (or ``recursive=True``) is refused with
        :class:`nokv.NotArtifact`."""
        if not isinstance(path1, str) or not isinstance(path2, str):
            raise InvalidArguments("the nokv filesystem moves one file at a time")
        src = self._strip_protocol(path1)
        dst = self._strip_protocol(path2)
        if recursive:
            raise NotArtifact(
                f"recursive move of {src!r}: directory rename is not supported; move the files "
                "under it one by one",
                details={"path": src, "reason": "directory_rename_unsupported"},
            )
        expected_destination_generation = None
        if kwargs.get("replace", False):
            try:
                expected_destination_generation = self.workbench.stat(dst).generation
            except NotFound:
                expected_destination_generation = None
        self.workbench.move(
            src,
            dst,
            expected_destination_generation=expected_destination_generation,
        )

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Optional[int] = None,
        autocommit: bool = True,
        cache_options: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> Any:
        key = self._strip_protocol(path)
        # fsspec turns text modes into binary ones (and wraps the result) before calling _open.
        if mode == "rb":
            return self.workbench.open(key)
        if mode in ("wb", "xb"):
            return NoKVWriteFile(
                self.workbench,
                key,
                replace=bool(kwargs.get("replace", False)),
                content_type=kwargs.get("content_type"),
            )
        raise InvalidArguments(
            f"mode {mode!r} is not supported by the nokv filesystem: read with 'rb', publish a "
            "whole new file with 'wb' (create-only; replace=True to replace). NoKV files are "
            "immutable: no append or update modes."
        )


class NoKVWriteFile(io.RawIOBase):
    """A write-only file that publishes its whole content when closed (create-only, or replace
    under a generation CAS with ``replace=True``). Data beyond 4 MiB spills to a temporary file,
    and publication streams it, so memory stays bounded. Closing after an exception inside a
    ``with`` block publishes nothing."""

    def __init__(
        self, workbench: Workbench, key: str, *, replace: bool = False, content_type: Optional[str] = None
    ) -> None:
        super().__init__()
        self._wb = workbench
        self.name = key
        self._replace = replace
        self._content_type = content_type
        self._spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
        self._discard = False
        #: The :class:`nokv.PutResult` once published.
        self.result: Any = None

    @property
    def mode(self) -> str:
        return "wb"

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        view = memoryview(data)
        self._spool.write(view)
        return view.nbytes

    def tell(self) -> int:
        return self._spool.tell()

    def flush(self) -> None:
        """Nothing is visible before :meth:`close` (publication is all or nothing)."""

    def discard(self) -> None:
        """Closes without publishing anything."""
        self._discard = True
        self.close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self._discard = True
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        try:
            if not self._discard:
                self._spool.seek(0)
                self.result = self._wb.put(
                    self.name, self._spool, replace=self._replace, content_type=self._content_type
                )
        finally:
            self._spool.close()
            super().close()


ArtifactFile = ArtifactFile  # re-exported for type annotations of open() results
