"""`Workbench.move`, `Store.diff` and fsspec `mv`: one-command moves (create-only, replace at a
generation, Conflict, request-id replay, no directory rename) and diffs of live trees, snapshots
and commits, on an embedded and on a connected store."""

from __future__ import annotations

import pytest

import nokv
from nokv.fsspec import NoKVFileSystem

pytestmark = pytest.mark.both_backends


def test_move_keeps_the_bytes_and_frees_the_source(store: nokv.Store, wb: nokv.Workbench) -> None:
    put = wb.put("outputs/draft.txt", b"report")
    out = wb.move("outputs/draft.txt", "outputs/final.txt")
    assert out["from"] == "outputs/draft.txt"
    assert out["to"] == "outputs/final.txt"
    assert out["path"] == f"{store.presentation_root}/wb/outputs/final.txt"
    assert out["from_generation"] == put.generation
    assert out["replaced_generation"] is None
    assert out["digest"] == put.digest_uri
    assert out["size_bytes"] == 6
    assert out["idempotent_replay"] is False
    assert wb.read_bytes("outputs/final.txt") == b"report"
    assert not wb.exists("outputs/draft.txt")
    kinds = [c.kind for c in store.changes()]
    assert kinds[-1] == "artifact_moved"
    last = list(store.changes())[-1]
    assert last.moved_from == "outputs/draft.txt"
    assert last.path == "outputs/final.txt"


def test_move_conflicts_and_replay(wb: nokv.Workbench) -> None:
    wb.put("a.txt", b"a")
    b = wb.put("b.txt", b"b")
    with pytest.raises(nokv.AlreadyExists):
        wb.move("a.txt", "b.txt")
    with pytest.raises(nokv.Conflict):
        wb.move("a.txt", "b.txt", expected_destination_generation=b.generation + 1)
    with pytest.raises(nokv.Conflict):
        wb.mv("a.txt", "c.txt", expected_generation=1)
    assert wb.read_bytes("a.txt") == b"a" and wb.read_bytes("b.txt") == b"b"
    rid = "ab" * 16
    first = wb.move("a.txt", "b.txt", expected_destination_generation=b.generation, request_id=rid)
    again = wb.move("a.txt", "b.txt", expected_destination_generation=b.generation, request_id=rid)
    assert again["idempotent_replay"] is True
    assert again["generation"] == first["generation"]
    assert first["replaced_generation"] == b.generation
    assert wb.read_bytes("b.txt") == b"a"


def test_a_directory_is_not_renamed(wb: nokv.Workbench) -> None:
    wb.put("outputs/run/x.txt", b"x")
    with pytest.raises(nokv.NotArtifact) as err:
        wb.move("outputs/run", "outputs/run2")
    assert err.value.details["reason"] == "directory_rename_unsupported"
    assert "directory rename is not supported" in err.value.message


def test_diff_of_a_snapshot_and_the_live_tree(store: nokv.Store, wb: nokv.Workbench) -> None:
    wb.put("keep.txt", b"same")
    old = wb.put("change.txt", b"one\n")
    wb.put("gone.txt", b"bye")
    store.commit("wb", {})
    store.snapshot("wb", name="base")
    wb.put("change.txt", b"two\n", replace=True)
    wb.remove("gone.txt")
    wb.put("new.txt", b"hi")
    out = store.diff("wb@base", "wb", patch=True)
    assert out["strategy"] == "change_events"
    changes = [(c["path"], c["change"]) for c in out["changes"]]
    assert changes == [("change.txt", "changed"), ("gone.txt", "removed"), ("new.txt", "added")]
    first = out["changes"][0]
    assert first["a"]["generation"] == old.generation
    assert first["patch"].endswith("-one\n+two\n")
    assert out["next_cursor"] is None
    page = store.diff("wb@base", "wb", limit=1)
    assert len(page["changes"]) == 1 and page["next_cursor"]
    rest = store.diff("wb@base", "wb", cursor=page["next_cursor"])
    assert [c["path"] for c in rest["changes"]] == ["gone.txt", "new.txt"]
    with pytest.raises(nokv.NotFound):
        store.diff("wb", "absent")


def test_fsspec_mv_moves_one_file(store: nokv.Store) -> None:
    store.create_workbench("fs").put("outputs/a.csv", "x\n1\n")
    fs = NoKVFileSystem(store=store, workbench="fs")
    fs.mv("nokv://fs/outputs/a.csv", "nokv://fs/outputs/b.csv")
    assert fs.cat_file("outputs/b.csv") == b"x\n1\n"
    assert not fs.exists("outputs/a.csv")
    fs.pipe_file("outputs/c.csv", b"old")
    with pytest.raises(nokv.AlreadyExists):
        fs.mv("outputs/b.csv", "outputs/c.csv")
    fs.mv("outputs/b.csv", "outputs/c.csv", replace=True)
    assert fs.cat_file("outputs/c.csv") == b"x\n1\n"
    store.workbench("fs").put("outputs/dir/d.csv", "d")
    with pytest.raises(nokv.NotArtifact):
        fs.mv("outputs/dir", "outputs/dir2", recursive=True)
