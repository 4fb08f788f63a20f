"""`Workbench.remove`: the semantics and error codes of `nokv rm [-r]` (docs/guide.md, "Removing
paths, garbage collection and fsck"), on an embedded and on a connected store."""

from __future__ import annotations

import json
import pathlib

import pytest

import nokv

from conftest import run_cli

#: Every test that takes the `store` fixture runs on both backends; the CLI comparison opens its
#: own embedded store.
pytestmark = pytest.mark.both_backends


def test_remove_then_stat_and_read_are_not_found(store: nokv.Store, wb: nokv.Workbench) -> None:
    put = wb.put("outputs/model.bin", b"weights")
    out = wb.remove("outputs/model.bin")
    assert out == {
        "workbench_id": "wb",
        "relative_path": "outputs/model.bin",
        "path": f"{store.presentation_root}/wb/outputs/model.bin",
        "removed_generation": put.generation,
        "size_bytes": 7,
        "digest": put.digest_uri,
        "commit_version": out["commit_version"],
        "idempotent_replay": False,
    }
    assert isinstance(out["commit_version"], int) and out["commit_version"] > put.generation
    with pytest.raises(nokv.NotFound):
        wb.stat("outputs/model.bin")
    with pytest.raises(nokv.NotFound):
        wb.read_bytes("outputs/model.bin")
    assert not wb.exists("outputs/model.bin")
    assert [s.key for s in wb.walk()] == []
    # The path is free again: a create-only put succeeds.
    assert wb.put("outputs/model.bin", b"v2").created


def test_removing_a_missing_path_is_not_found_and_a_directory_not_an_artifact(
    wb: nokv.Workbench,
) -> None:
    with pytest.raises(nokv.NotFound):
        wb.remove("outputs/never.txt")
    wb.put("outputs/dir/a.txt", "a")
    with pytest.raises(nokv.NotArtifact) as err:
        wb.remove("outputs/dir")  # a directory needs recursive=True
    assert "recursive" in str(err.value)
    assert wb.read_text("outputs/dir/a.txt") == "a"
    with pytest.raises(nokv.NotFound):
        wb.store.workbench("wb").remove("outputs/never.txt", recursive=False)


def test_remove_with_a_stale_generation_conflicts_and_removes_nothing(wb: nokv.Workbench) -> None:
    first = wb.put("outputs/x.txt", "1")
    second = wb.put("outputs/x.txt", "2", replace=True)
    with pytest.raises(nokv.Conflict) as err:
        wb.remove("outputs/x.txt", expected_generation=first.generation)
    assert err.value.retryable is True
    assert err.value.details["conflict"] == "PathGeneration"
    assert err.value.details["actual_generation"] == second.generation
    assert wb.read_text("outputs/x.txt") == "2"
    out = wb.remove("outputs/x.txt", expected_generation=second.generation)
    assert out["removed_generation"] == second.generation


def test_a_request_id_makes_removal_an_exact_replay(wb: nokv.Workbench) -> None:
    wb.put("outputs/r.txt", "r")
    rid = "0123456789abcdef0123456789abcdef"
    first = wb.remove("outputs/r.txt", request_id=rid)
    again = wb.remove("outputs/r.txt", request_id=rid)
    assert first["idempotent_replay"] is False and again["idempotent_replay"] is True
    assert {k: v for k, v in again.items() if k != "idempotent_replay"} == {
        k: v for k, v in first.items() if k != "idempotent_replay"
    }
    wb.put("outputs/other.txt", "o")
    with pytest.raises(nokv.InvalidArguments) as err:
        wb.remove("outputs/other.txt", request_id=rid)
    assert err.value.details["reason"] == "request_id_reused"
    assert wb.read_text("outputs/other.txt") == "o"
    with pytest.raises(nokv.InvalidArguments):
        wb.remove("outputs/other.txt", request_id="not-hex")


def test_recursive_removal_of_a_prefix_keeps_reserved_manifests(store: nokv.Store, wb: nokv.Workbench) -> None:
    keys = [f"outputs/tmp/f{i:02}.txt" for i in range(20)] + ["outputs/tmp/deep/d.txt"]
    for k in keys:
        wb.put(k, k)
    wb.put("outputs/keep.txt", "keep")
    wb.put("outputs/tmpfile.txt", "not under the prefix outputs/tmp/")
    out = wb.remove("outputs/tmp", recursive=True)
    assert out["workbench_id"] == "wb" and out["prefix"] == "outputs/tmp"
    assert out["removed_count"] == len(keys)
    assert sorted(r["relative_path"] for r in out["removed"]) == sorted(keys)
    assert out["kept_reserved"] == [] and out["batches"] >= 2  # at most 16 paths per batch
    assert sorted(s.key for s in wb.walk()) == ["outputs/keep.txt", "outputs/tmpfile.txt"]
    # Rerunning removes what is left: nothing.
    assert wb.remove("outputs/tmp", recursive=True)["removed_count"] == 0
    # The run manifest belongs to commit: a recursive removal keeps it, a single one refuses it.
    store.commit("wb", {"task": "t"})
    meta = wb.remove("metadata", recursive=True)
    assert meta["kept_reserved"] == ["metadata/run_manifest.json"]
    with pytest.raises(nokv.InvalidArguments):
        wb.remove("metadata/run_manifest.json")
    with pytest.raises(nokv.InvalidArguments):
        wb.remove("outputs", recursive=True, expected_generation=1)


def test_a_removed_revision_stays_readable_through_an_earlier_snapshot(store: nokv.Store, wb: nokv.Workbench) -> None:
    put = wb.put("outputs/result.json", '{"score": 9}')
    commit = store.commit("wb", {"task": "keep"})
    snap = wb.snapshot(name="before-cleanup")
    wb.remove("outputs/result.json")
    with pytest.raises(nokv.NotFound):
        wb.stat("outputs/result.json")
    frozen = wb.stat("outputs/result.json", at_snapshot="before-cleanup")
    assert frozen.generation == put.generation and frozen.digest_uri == put.digest_uri
    read = store.tool(
        "workbench_read",
        {"id": "wb", "section": "outputs", "path": "result.json", "at_snapshot": snap["snapshot_id"]},
    )
    assert read["status"] == "success" and read["items"][0]["value"] == {"score": 9}
    # The commit holds it too: a restore from it reads the bytes.
    store.restore("wb", "wb-back", at_commit=commit["commit_identity"])
    assert store.workbench("wb-back").read_json("outputs/result.json") == {"score": 9}


def test_remove_answers_what_nokv_rm_prints(tmp_path: pathlib.Path) -> None:
    """The SDK's result is the CLI's envelope without `status` (the CLI replays the same request
    id once the store is closed)."""
    store_dir = tmp_path / "cli"
    with nokv.open(store_dir) as store:
        wb = store.create_workbench("wb")
        wb.put("outputs/a.txt", "a")
        b = wb.put("outputs/b.txt", "b")
        sdk = wb.remove("outputs/a.txt", request_id="ab" * 16)
    cli = json.loads(run_cli(store_dir, "rm", "wb", "outputs/a.txt", "--request-id", "ab" * 16).stdout)
    assert cli.pop("status") == "success"
    assert cli == {**sdk, "idempotent_replay": True}
    cli_r = json.loads(run_cli(store_dir, "rm", "-r", "wb", "outputs").stdout)
    assert cli_r["removed"] == [{"relative_path": "outputs/b.txt", "generation": b.generation}]
    with nokv.open(store_dir) as store:
        with pytest.raises(nokv.NotFound):
            store.workbench("wb").stat("outputs/b.txt")
