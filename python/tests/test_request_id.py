"""`Workbench.put(..., request_id=...)`: a rerun of the same put — the reply was lost, so the
caller runs it again — returns the first receipt with ``idempotent_replay=True`` and writes
nothing; the same id with another body or path is refused (docs/design.md, "Request ids of a
put"). On an embedded and on a connected store."""

from __future__ import annotations

import pathlib

import pytest

import nokv

pytestmark = pytest.mark.both_backends

RID = "00112233445566778899aabbccddeeff"


def test_a_rerun_with_the_same_request_id_returns_the_first_receipt(store: nokv.Store, wb: nokv.Workbench) -> None:
    first = wb.put("outputs/model.bin", b"weights v1", request_id=RID)
    assert first.idempotent_replay is False
    again = wb.put("outputs/model.bin", b"weights v1", request_id=RID)
    assert again.idempotent_replay is True
    assert (again.generation, again.digest_uri, again.size_bytes, again.created) == (
        first.generation,
        first.digest_uri,
        first.size_bytes,
        first.created,
    )
    # Without the id the same call is a second create.
    with pytest.raises(nokv.errors.AlreadyExists):
        wb.put("outputs/model.bin", b"weights v1")
    assert wb.stat("outputs/model.bin").generation == first.generation


def test_the_same_request_id_with_another_body_or_path_is_refused(store: nokv.Store, wb: nokv.Workbench) -> None:
    first = wb.put("outputs/model.bin", b"weights v1", request_id=RID)
    for path, body in [("outputs/model.bin", b"weights v2"), ("outputs/other.bin", b"weights v1")]:
        with pytest.raises(nokv.errors.InvalidArguments) as refused:
            wb.put(path, body, request_id=RID)
        assert refused.value.retryable is False
        assert "request id is already bound" in str(refused.value)
        if store.url is None:
            # A connected put's refusal carries its code and message, not its details (the
            # remote client's OperationFailed has none).
            assert refused.value.details["reason"] == "request_id_reused"
    assert wb.read_bytes("outputs/model.bin") == b"weights v1"
    assert wb.stat("outputs/model.bin").generation == first.generation
    with pytest.raises(nokv.errors.NotFound):
        wb.stat("outputs/other.bin")


def test_a_streamed_body_replays_like_bytes(store: nokv.Store, wb: nokv.Workbench, tmp_path: pathlib.Path) -> None:
    local = tmp_path / "data.csv"
    local.write_bytes(b"a,b\n1,2\n")
    first = wb.put("input/data.csv", local, request_id=RID)
    with open(local, "rb") as f:
        again = wb.put("input/data.csv", f, request_id=RID)
    assert again.idempotent_replay is True
    assert again.generation == first.generation


def test_a_malformed_request_id_is_invalid_arguments(store: nokv.Store, wb: nokv.Workbench) -> None:
    with pytest.raises(nokv.errors.InvalidArguments):
        wb.put("outputs/a.txt", "x", request_id="not-hex")
    with pytest.raises(nokv.errors.NotFound):
        wb.stat("outputs/a.txt")


def test_the_record_survives_closing_and_reopening_the_store(store_dir: pathlib.Path) -> None:
    with nokv.open(store_dir) as s:
        first = s.create_workbench("wb").put("outputs/r.json", b"{}", request_id=RID)
    with nokv.open(store_dir) as s:
        again = s.workbench("wb").put("outputs/r.json", b"{}", request_id=RID)
    assert again.idempotent_replay is True
    assert again.generation == first.generation
