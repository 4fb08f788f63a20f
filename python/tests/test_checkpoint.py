"""Checkpoints: immutable shards, then one create-only manifest as the commit point."""

from __future__ import annotations

import io
import pathlib

import pytest

import nokv
from nokv.checkpoint import Checkpoints

from conftest import run_python


def test_save_list_latest_and_load(wb: nokv.Workbench, tmp_path: pathlib.Path) -> None:
    ck = Checkpoints(wb)
    assert ck.list() == [] and ck.latest() is None
    local = tmp_path / "optim.bin"
    local.write_bytes(b"o" * 5000)
    c1 = ck.save(100, {"model.pt": b"m1", "optim.pt": local}, metadata={"loss": 0.5})
    c2 = ck.save(200, [("model.pt", io.BytesIO(b"m2")), ("rank0/extra.bin", "text")])
    assert [c.step for c in ck.list()] == [100, 200]
    assert ck.latest() == c2
    loaded = ck.load(100)
    assert loaded.metadata == {"loss": 0.5}
    assert loaded.read("model.pt") == b"m1" and loaded.read("optim.pt") == b"o" * 5000
    assert loaded.shards["optim.pt"].size_bytes == 5000
    with loaded.open("model.pt") as f:
        assert f.read() == b"m1"
    assert ck.load().step == 200 and c2.read("rank0/extra.bin") == b"text"
    with pytest.raises(nokv.AlreadyExists):
        ck.save(100, {"model.pt": b"again"})
    with pytest.raises(nokv.NotFound):
        ck.load(300)
    with pytest.raises(nokv.NotFound):
        loaded.read("nope")
    with pytest.raises(nokv.InvalidArguments):
        ck.save(300, {})
    assert c1.manifest_key == "outputs/checkpoints/step-000000000100/manifest.json"


KILLER = r'''
import os, signal, sys
import nokv
from nokv.checkpoint import Checkpoints

store = nokv.open(sys.argv[1])
ck = Checkpoints(store.workbench("train"))

def shards():
    yield "a.bin", b"A" * 100_000
    yield "b.bin", b"B" * 100_000
    # Killed between shards: c.bin and the manifest are never written.
    os.kill(os.getpid(), signal.SIGKILL)
    yield "c.bin", b"C"

ck.save(2, shards())
'''


def test_sigkill_between_shards_lists_nothing_and_the_next_save_succeeds(store_dir: pathlib.Path) -> None:
    with nokv.open(store_dir) as s:
        ck = Checkpoints(s.create_workbench("train"))
        ck.save(1, {"a.bin": b"one"})
    proc = run_python(KILLER, str(store_dir))
    assert proc.returncode == -9, proc.stderr
    with nokv.open(store_dir) as s:
        wb = s.workbench("train")
        ck = Checkpoints(wb)
        # Shards of the killed attempt exist, but no checkpoint 2 is listed.
        orphans = [st.key for st in wb.walk("outputs/checkpoints/step-000000000002")]
        assert len(orphans) == 2
        assert [c.step for c in ck.list()] == [1]
        assert ck.latest().step == 1
        saved = ck.save(2, {"a.bin": b"A" * 100_000, "b.bin": b"B" * 100_000, "c.bin": b"C"})
        # The matching shards of the killed attempt were reused, not uploaded again.
        assert {saved.shards[n].key for n in ("a.bin", "b.bin")} <= set(orphans)
        assert ck.latest().step == 2
        assert ck.latest().read("c.bin") == b"C" and ck.latest().read("a.bin") == b"A" * 100_000
        assert [c.step for c in ck.list()] == [1, 2]
