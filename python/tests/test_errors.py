"""Every exception class is raised for its Workbench error code by a real call."""

from __future__ import annotations

import pathlib
import pickle

import pytest

import nokv
import nokv.errors as E

from conftest import fault_cli_path, run_cli


def check(exc: pytest.ExceptionInfo, cls: type, code: str) -> None:
    assert type(exc.value) is cls
    assert exc.value.code == code
    assert exc.value.retryable == (code in ("Conflict", "ReadFenceChanged", "ObjectUnavailable"))
    assert isinstance(exc.value.details, dict)
    assert isinstance(exc.value, nokv.NoKVError)
    assert str(exc.value).startswith(code + ": ")


def committed(store: nokv.Store, wb_id: str = "c") -> nokv.Workbench:
    wb = store.create_workbench(wb_id)
    wb.put("outputs/x.txt", "x")
    store.commit(wb_id, {"task": "t"})
    return wb


def test_invalid_arguments(wb: nokv.Workbench) -> None:
    with pytest.raises(nokv.InvalidArguments) as e:
        wb.put("input/a\x00b", b"x")
    check(e, E.InvalidArguments, "InvalidArguments")
    assert isinstance(e.value, ValueError)


def test_unknown_tool(store: nokv.Store) -> None:
    with pytest.raises(nokv.UnknownTool) as e:
        store.call_tool("workbench_delete_everything", {})
    check(e, E.UnknownTool, "UnknownTool")
    assert e.value.details["tool"] == "workbench_delete_everything"


def test_payload_too_large(store: nokv.Store, wb: nokv.Workbench) -> None:
    with pytest.raises(nokv.PayloadTooLarge) as e:
        store.call_tool("put_file", {"id": "wb", "section": "input", "path": "big.txt", "text": "x" * (16 * 1024 * 1024 + 1)})
    check(e, E.PayloadTooLarge, "PayloadTooLarge")
    assert e.value.details["maximum_bytes"] == 16 * 1024 * 1024


def test_not_found(wb: nokv.Workbench) -> None:
    with pytest.raises(nokv.NotFound) as e:
        wb.read_bytes("input/missing.bin")
    check(e, E.NotFound, "NotFound")
    assert isinstance(e.value, FileNotFoundError)
    assert e.value.details["path"] == "/agents/local/wb/wb/input/missing.bin"


def test_not_artifact(wb: nokv.Workbench) -> None:
    wb.put("input/dir/file.txt", "x")
    with pytest.raises(nokv.NotArtifact) as e:
        wb.open("input/dir")
    check(e, E.NotArtifact, "NotArtifact")


def test_not_directory(wb: nokv.Workbench) -> None:
    wb.put("input/file.txt", "x")
    with pytest.raises(nokv.NotDirectory) as e:
        list(wb.list("input/file.txt"))
    check(e, E.NotDirectory, "NotDirectory")


def test_invalid_utf8(wb: nokv.Workbench) -> None:
    wb.put("input/bin.txt", b"\xff\xfe")
    with pytest.raises(nokv.InvalidUtf8) as e:
        wb.edit("input/bin.txt", "a", "b")
    check(e, E.InvalidUtf8, "InvalidUtf8")


def test_no_match(wb: nokv.Workbench) -> None:
    wb.put("input/t.txt", "hello")
    with pytest.raises(nokv.NoMatch) as e:
        wb.edit("input/t.txt", "bye", "ciao")
    check(e, E.NoMatch, "NoMatch")


def test_ambiguous_edit(wb: nokv.Workbench) -> None:
    wb.put("input/t.txt", "a a")
    with pytest.raises(nokv.AmbiguousEdit) as e:
        wb.edit("input/t.txt", "a", "b")
    check(e, E.AmbiguousEdit, "AmbiguousEdit")
    assert e.value.details["matches"] == 2


def test_structured_decode_failed(store: nokv.Store, wb: nokv.Workbench) -> None:
    wb.put("outputs/bad.json", "{oops")
    with pytest.raises(nokv.StructuredDecodeFailed) as e:
        store.call_tool("read", {"id": "wb", "section": "outputs", "path": "bad.json"})
    check(e, E.StructuredDecodeFailed, "StructuredDecodeFailed")
    assert e.value.details["format"] == "json"


def test_already_exists(wb: nokv.Workbench) -> None:
    wb.put("input/a", "1")
    with pytest.raises(nokv.AlreadyExists) as e:
        wb.put("input/a", "2")
    check(e, E.AlreadyExists, "AlreadyExists")
    assert isinstance(e.value, FileExistsError)


def test_conflict(wb: nokv.Workbench) -> None:
    first = wb.put("input/a", "1")
    wb.put("input/a", "2", replace=True)
    with pytest.raises(nokv.Conflict) as e:
        wb.put("input/a", "3", replace=True, expected_generation=first.generation)
    check(e, E.Conflict, "Conflict")
    assert e.value.details["conflict"] == "PathGeneration"


def test_read_fence_changed(wb: nokv.Workbench) -> None:
    for i in range(3):
        wb.put(f"input/f{i}", "x")
    listing = wb.list("input", page_size=1)
    next(listing)
    wb.put("input/late", "x")
    with pytest.raises(nokv.ReadFenceChanged) as e:
        list(listing)
    check(e, E.ReadFenceChanged, "ReadFenceChanged")


def test_resource_exhausted(store: nokv.Store, wb: nokv.Workbench) -> None:
    wb.put("outputs/huge.json", b"[" + b"0," * (8 * 1024 * 1024 + 10) + b"0]")
    with pytest.raises(nokv.ResourceExhausted) as e:
        store.call_tool("read", {"id": "wb", "section": "outputs", "path": "huge.json"})
    check(e, E.ResourceExhausted, "ResourceExhausted")


def test_snapshot_not_found(store: nokv.Store) -> None:
    wb = committed(store)
    with pytest.raises(nokv.SnapshotNotFound) as e:
        wb.stat("outputs/x.txt", at_snapshot=424242)
    check(e, E.SnapshotNotFound, "SnapshotNotFound")


def test_snapshot_expired(store: nokv.Store) -> None:
    wb = committed(store)
    snap = store.snapshot("c", name="old")
    store.retire("c", "old")
    with pytest.raises(nokv.SnapshotExpired) as e:
        wb.read_bytes("outputs/x.txt", at_snapshot=snap["snapshot_id"])
    check(e, E.SnapshotExpired, "SnapshotExpired")


def interrupted_restore(store_dir: pathlib.Path) -> nokv.Store:
    """A store where a restore of snapshot `base` of `c` into `dst` was killed (SIGKILL at the
    fault point after preparing): the restore still consumes the snapshot."""
    s = nokv.open(store_dir)
    committed(s)
    s.snapshot("c", name="base")
    s.close()
    proc = run_cli(
        store_dir,
        "workbench",
        "restore",
        '{"id":"c","destination_id":"dst","at_snapshot":"base"}',
        env={"NOKV_FAULT_POINT": "restore-after-preparing"},
        binary=fault_cli_path(),
    )
    assert proc.returncode != 0, proc.stdout
    return nokv.open(store_dir)


def test_fork_retention_active(store_dir: pathlib.Path) -> None:
    with interrupted_restore(store_dir) as s:
        with pytest.raises(nokv.ForkRetentionActive) as e:
            s.retire("c", "base")
        check(e, E.ForkRetentionActive, "ForkRetentionActive")


def test_restore_protocol_mismatch_maps_to_its_class() -> None:
    # No public call reaches this code: it needs a durable restore operation whose deterministic
    # identity collides, or whose prepared manifest differs from a same-identity retry. The class
    # is checked through the envelope mapping every SDK error uses.
    err = E.from_envelope({"status": "error", "code": "RestoreProtocolMismatch", "message": "m",
                           "retryable": False, "details": {}})
    assert type(err) is nokv.RestoreProtocolMismatch and err.code == "RestoreProtocolMismatch"
    assert not err.retryable


def test_every_code_has_its_class() -> None:
    connected = ("Unavailable", "Unauthorized", "Unsupported")  # not tool codes: nokv.connect
    codes = [c for c in E.__all__ if c not in ("NoKVError", "error_class", "from_envelope")]
    assert len([c for c in codes if c not in connected]) == 25  # the tool error codes, Forbidden (scopes, --read-only) included
    assert all(c in codes for c in connected)
    for code in codes:
        assert E.error_class(code).__name__ == code
        assert getattr(nokv, code) is E.error_class(code)


def test_invalid_state(store: nokv.Store, wb: nokv.Workbench) -> None:
    with pytest.raises(nokv.InvalidState) as e:
        store.snapshot("wb")
    check(e, E.InvalidState, "InvalidState")


def test_workbench_commit_conflict(store: nokv.Store) -> None:
    committed(store)
    with pytest.raises(nokv.WorkbenchCommitConflict) as e:
        store.commit("c", {"task": "other"})
    check(e, E.WorkbenchCommitConflict, "WorkbenchCommitConflict")


def test_workbench_commit_protocol_mismatch(store: nokv.Store) -> None:
    committed(store)
    with pytest.raises(nokv.WorkbenchCommitProtocolMismatch) as e:
        store.commit("c", {"task": "t"}, replace=True)
    check(e, E.WorkbenchCommitProtocolMismatch, "WorkbenchCommitProtocolMismatch")


def test_canonical_encoding_failed(store: nokv.Store, wb: nokv.Workbench) -> None:
    deep: dict = {}
    node = deep
    for _ in range(200):
        node["d"] = {}
        node = node["d"]
    with pytest.raises(nokv.CanonicalEncodingFailed) as e:
        store.commit("wb", deep)
    check(e, E.CanonicalEncodingFailed, "CanonicalEncodingFailed")


def test_object_unavailable(store_dir: pathlib.Path) -> None:
    with nokv.open(store_dir) as s:
        s.create_workbench("o").put("input/a.bin", b"payload" * 100)
    blocks = [p for p in (store_dir / "objects").rglob("*") if p.is_file() and "blocks" in p.parts]
    assert blocks
    for p in blocks:
        p.write_bytes(b"tampered")
    with nokv.open(store_dir) as s:
        with pytest.raises(nokv.ObjectUnavailable) as e:
            s.workbench("o").read_bytes("input/a.bin")
        check(e, E.ObjectUnavailable, "ObjectUnavailable")
        # Damaged bytes are not a passing failure: the reason says so.
        assert e.value.details.get("reason") == "object_damaged"


def test_a_store_location_under_a_regular_file_is_invalid_arguments(tmp_path: pathlib.Path) -> None:
    # A wrong store location is the caller's mistake, not a failure of NoKV; nothing is created.
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    for location in (blocker, blocker / "store"):
        with pytest.raises(nokv.InvalidArguments) as e:
            nokv.open(location)
        check(e, E.InvalidArguments, "InvalidArguments")
        assert "not a directory" in e.value.message
        assert str(tmp_path) not in e.value.message
    assert blocker.read_text() == "not a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_internal(tmp_path: pathlib.Path) -> None:
    # The store directory cannot be created for a reason that is no caller mistake NoKV can
    # name (Linux refuses new directories in /proc with ENOENT, even for root): Internal, as
    # the CLI reports the same failure.
    location = pathlib.Path("/proc") / f"nokv-test-{tmp_path.name}" / "store"
    with pytest.raises(nokv.Internal) as e:
        nokv.open(location)
    check(e, E.Internal, "Internal")
    assert "/proc" not in e.value.message


def test_errors_pickle_and_envelope_round_trip() -> None:
    err = E.from_envelope(
        {"status": "error", "code": "Conflict", "message": "m", "retryable": True, "details": {"conflict": "Workspace"}}
    )
    assert type(err) is nokv.Conflict and err.retryable
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is nokv.Conflict and clone.details == {"conflict": "Workspace"}
    assert clone.envelope()["code"] == "Conflict"
    assert E.error_class("NoSuchCode") is nokv.NoKVError
