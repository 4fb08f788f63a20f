"""Training checkpoints in a workbench: immutable shards, then one create-only manifest.

A checkpoint of step ``N`` is published in two phases:

1. every shard is uploaded, create-only, under a fresh attempt directory
   ``{prefix}/step-{N:012d}/{attempt}/{shard name}`` (``attempt`` is random, so concurrent or
   crashed attempts never touch each other's shards);
2. one manifest ``{prefix}/step-{N:012d}/manifest.json`` is published **create-only** — the commit
   point. It names every shard with its key, size, SHA-256 digest and generation.

Only steps with a manifest are checkpoints: a process killed between shards (or before the
manifest) leaves shards that no manifest names, so :meth:`Checkpoints.list` and
:meth:`Checkpoints.latest` never show it, and the next :meth:`Checkpoints.save` of that step
succeeds — reusing already uploaded shards whose bytes match (for ``bytes`` and file-path shards,
whose digest is computed locally first). Two savers of one step race on the manifest: exactly one
wins, the other gets :class:`nokv.AlreadyExists`.

Loading checks each shard against the manifest (generation and digest as recorded), so a reader
never mixes shards of different attempts. Shards of abandoned attempts stay as unreferenced files
until path removal exists in the SDK.

Example::

    ckpts = nokv.checkpoint.Checkpoints(store.workbench("train-42"))
    buf = io.BytesIO(); torch.save(model.state_dict(), buf)
    ckpts.save(1000, {"model.pt": buf.getvalue(), "optim.pt": optim_bytes}, metadata={"loss": 0.12})
    latest = ckpts.latest()
    state = latest.read("model.pt")
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from ._store import ArtifactFile, Body, Workbench
from .errors import AlreadyExists, Conflict, InvalidArguments, NotFound

__all__ = ["Checkpoints", "Checkpoint", "Shard", "MANIFEST_SCHEMA"]

#: ``schema`` of a checkpoint manifest.
MANIFEST_SCHEMA = "nokv.checkpoint.v1"
_MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Shard:
    """One shard of a complete checkpoint, as its manifest records it."""

    #: Shard name (a relative path, e.g. ``"model.pt"`` or ``"rank0/optim.pt"``).
    name: str
    #: Workbench-relative key of the shard's file.
    key: str
    #: Size in bytes.
    size_bytes: int
    #: ``sha256:`` URI of the shard's bytes.
    digest_uri: str
    #: Generation of the shard's file when the checkpoint was published.
    generation: int


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint (its manifest exists)."""

    #: Training step.
    step: int
    #: Caller metadata stored in the manifest.
    metadata: Dict[str, Any]
    #: Shards by name, in the order they were saved.
    shards: Dict[str, Shard]
    #: When the manifest was written (Unix milliseconds, the saver's clock).
    created_at_unix_ms: int
    #: Workbench-relative key of the manifest.
    manifest_key: str
    _workbench: Workbench = field(repr=False, compare=False)

    def open(self, name: str) -> ArtifactFile:
        """A seekable read-only file over one shard, checked against the manifest.

        Raises:
            NotFound: no shard of that name (or its file is gone).
            Conflict: the shard's file is not the one the manifest recorded.
        """
        shard = self._shard(name)
        f = self._workbench.open(shard.key)
        if f.generation != shard.generation or f.digest_uri != shard.digest_uri:
            f.close()
            raise Conflict(
                f"shard {name!r} of checkpoint step {self.step} changed after it was published",
                details={"conflict": "PathGeneration", "path": shard.key},
            )
        return f

    def read(self, name: str) -> bytes:
        """The bytes of one shard (checked like :meth:`open`)."""
        with self.open(name) as f:
            return f.read()

    def _shard(self, name: str) -> Shard:
        try:
            return self.shards[name]
        except KeyError:
            raise NotFound(
                f"checkpoint step {self.step} has no shard {name!r}",
                details={"path": name},
            ) from None


def _local_digest(data: Any) -> Optional[str]:
    """``sha256:`` of bytes or a local file; ``None`` for streams (not re-readable)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return "sha256:" + hashlib.sha256(data).hexdigest()
    if isinstance(data, str):
        return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()
    if hasattr(data, "__fspath__"):
        h = hashlib.sha256()
        with open(os.fspath(data), "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return "sha256:" + h.hexdigest()
    return None


class Checkpoints:
    """The checkpoints of one workbench under ``prefix`` (default ``outputs/checkpoints``)."""

    def __init__(self, workbench: Workbench, prefix: str = "outputs/checkpoints") -> None:
        prefix = prefix.strip("/")
        if not prefix:
            raise InvalidArguments("prefix must name a directory, e.g. 'outputs/checkpoints'")
        self.workbench = workbench
        self.prefix = prefix

    def _step_dir(self, step: int) -> str:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0 or step >= 10**12:
            raise InvalidArguments("step must be an int in 0 ..= 999999999999")
        return f"{self.prefix}/step-{step:012d}"

    # -- writing ---------------------------------------------------------------------------

    def save(
        self,
        step: int,
        shards: Union[Mapping[str, Body], Iterable[Tuple[str, Body]]],
        *,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> Checkpoint:
        """Publishes checkpoint ``step``: each shard (bytes, text, a local file path, or a binary
        file object — streamed) create-only under a new attempt directory, then the manifest,
        create-only. ``shards`` may be a mapping or an iterable of ``(name, data)`` pairs (a
        generator lets each shard be produced just before it is uploaded).

        Raises:
            AlreadyExists: checkpoint ``step`` is already complete (or another saver won).
            InvalidArguments: no shards, a duplicate or invalid shard name, a bad step.
        """
        step_dir = self._step_dir(step)
        manifest_key = f"{step_dir}/{_MANIFEST}"
        if self.workbench.exists(manifest_key):
            raise AlreadyExists(
                f"checkpoint step {step} is already complete",
                details={"path": manifest_key},
            )
        reusable = self._orphan_shards(step_dir)
        attempt = secrets.token_hex(8)
        items = shards.items() if isinstance(shards, Mapping) else shards
        recorded: List[Dict[str, Any]] = []
        seen = set()
        for name, data in items:
            if not isinstance(name, str) or not name or name.startswith("/") or name == _MANIFEST:
                raise InvalidArguments(f"invalid shard name {name!r}")
            if name in seen:
                raise InvalidArguments(f"shard {name!r} is given twice")
            seen.add(name)
            digest = _local_digest(data)
            previous = reusable.get((name, digest)) if digest else None
            if previous is not None:
                recorded.append(dict(previous, name=name))
                continue
            key = f"{step_dir}/{attempt}/{name}"
            put = self.workbench.put(key, data, content_type="application/octet-stream")
            recorded.append(
                {
                    "name": name,
                    "key": put.key,
                    "size_bytes": put.size_bytes,
                    "digest_uri": put.digest_uri,
                    "generation": put.generation,
                }
            )
        if not recorded:
            raise InvalidArguments("a checkpoint needs at least one shard")
        manifest = {
            "schema": MANIFEST_SCHEMA,
            "step": step,
            "metadata": dict(metadata or {}),
            "shards": recorded,
            "created_at_unix_ms": int(time.time() * 1000),
        }
        import json

        body = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode("utf-8")
        self.workbench.put(manifest_key, body, content_type="application/json")
        return self._parse(manifest, manifest_key)

    def _orphan_shards(self, step_dir: str) -> Dict[Tuple[str, Optional[str]], Dict[str, Any]]:
        """Shards already uploaded by earlier (crashed) attempts of this step, by
        ``(name, digest)``."""
        out: Dict[Tuple[str, Optional[str]], Dict[str, Any]] = {}
        try:
            files = list(self.workbench.walk(step_dir))
        except NotFound:
            return out
        for s in files:
            rest = s.key[len(step_dir) + 1 :]
            attempt, _, name = rest.partition("/")
            if not name:
                continue
            out[(name, s.digest_uri)] = {
                "key": s.key,
                "size_bytes": s.size_bytes,
                "digest_uri": s.digest_uri,
                "generation": s.generation,
            }
        return out

    # -- reading ---------------------------------------------------------------------------

    def _parse(self, manifest: Mapping[str, Any], manifest_key: str) -> Checkpoint:
        if manifest.get("schema") != MANIFEST_SCHEMA:
            raise InvalidArguments(f"{manifest_key} is not a {MANIFEST_SCHEMA} manifest")
        shards = {
            s["name"]: Shard(
                name=s["name"],
                key=s["key"],
                size_bytes=int(s["size_bytes"]),
                digest_uri=s["digest_uri"],
                generation=int(s["generation"]),
            )
            for s in manifest["shards"]
        }
        return Checkpoint(
            step=int(manifest["step"]),
            metadata=dict(manifest.get("metadata") or {}),
            shards=shards,
            created_at_unix_ms=int(manifest.get("created_at_unix_ms", 0)),
            manifest_key=manifest_key,
            _workbench=self.workbench,
        )

    def _steps(self) -> List[int]:
        """Steps that have a directory (complete or not), ascending."""
        steps = []
        try:
            for entry in self.workbench.list(self.prefix):
                if entry.kind == "directory" and entry.name.startswith("step-"):
                    digits = entry.name[len("step-") :]
                    if digits.isdigit():
                        steps.append(int(digits))
        except NotFound:
            return []
        return sorted(steps)

    def load(self, step: Optional[int] = None) -> Checkpoint:
        """Checkpoint ``step`` (``None``: the latest complete one).

        Raises:
            NotFound: no such complete checkpoint.
        """
        if step is None:
            latest = self.latest()
            if latest is None:
                raise NotFound(
                    f"no complete checkpoint under {self.prefix}", details={"path": self.prefix}
                )
            return latest
        manifest_key = f"{self._step_dir(step)}/{_MANIFEST}"
        return self._parse(self.workbench.read_json(manifest_key), manifest_key)

    def list(self) -> List[Checkpoint]:
        """Every complete checkpoint, by ascending step (incomplete steps are skipped)."""
        out = []
        for step in self._steps():
            try:
                out.append(self.load(step))
            except NotFound:
                continue
        return out

    def latest(self) -> Optional[Checkpoint]:
        """The complete checkpoint with the highest step, or ``None``."""
        for step in reversed(self._steps()):
            try:
                return self.load(step)
            except NotFound:
                continue
        return None
