"""Workbench file methods: put/append/edit, reads, open(), stat, list/walk, grep."""

from __future__ import annotations

import datetime
import decimal
import hashlib
import io
import pathlib

import pytest

import nokv


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_put_bytes_create_only_then_replace_moves_generation(wb: nokv.Workbench) -> None:
    first = wb.put("input/a.bin", b"one")
    assert first.created and not first.replace
    assert first.key == "input/a.bin"
    assert first.section == "input" and first.relative_path == "a.bin"
    assert first.path == "/agents/local/wb/wb/input/a.bin"
    assert first.size_bytes == 3
    assert first.digest_uri == sha(b"one")
    assert first.content_type == "application/octet-stream"
    with pytest.raises(nokv.AlreadyExists):
        wb.put("input/a.bin", b"two")
    second = wb.put("input/a.bin", b"two", replace=True, expected_generation=first.generation)
    assert second.generation > first.generation and not second.created
    assert wb.read_bytes("input/a.bin") == b"two"


def test_put_accepts_text_pathlike_file_objects_and_buffers(wb: nokv.Workbench, tmp_path: pathlib.Path) -> None:
    text = wb.put("scripts/run.sh", "echo héllo\n")
    assert text.content_type == "text/x-shellscript; charset=utf-8"
    assert wb.read_text("scripts/run.sh") == "echo héllo\n"
    note = wb.put("logs/note", "plain")
    assert note.content_type == "text/plain; charset=utf-8"
    local = tmp_path / "data.csv"
    local.write_bytes(b"a,b\n1,2\n")
    from_path = wb.put("input/data.csv", local)
    assert from_path.content_type == "text/csv; charset=utf-8"
    assert from_path.digest_uri == sha(b"a,b\n1,2\n")
    with open(local, "rb") as f:
        from_file = wb.put("input/copy.csv", f, content_type="text/csv")
    assert from_file.content_type == "text/csv"
    assert wb.read_bytes("input/copy.csv") == b"a,b\n1,2\n"
    wb.put("input/ba.bin", bytearray(b"\x00\x01"))
    wb.put("input/mv.bin", memoryview(b"xyz"))
    assert wb.read_bytes("input/ba.bin") == b"\x00\x01"
    assert wb.read_bytes("input/mv.bin") == b"xyz"
    stream = io.BytesIO(b"s" * 10_000)
    assert wb.put("outputs/stream.bin", stream).size_bytes == 10_000


def test_put_refuses_bad_input_without_writing(wb: nokv.Workbench) -> None:
    with pytest.raises(nokv.InvalidArguments):
        wb.put("input/../x", b"x")
    with pytest.raises(nokv.InvalidArguments):
        wb.put("metadata/run_manifest.json", b"{}")
    with pytest.raises(nokv.InvalidArguments):
        wb.put("input/x", b"x", expected_generation=3)
    with pytest.raises(nokv.InvalidArguments):
        wb.put("input/x", 12345)  # type: ignore[arg-type]
    with pytest.raises(nokv.InvalidArguments):
        wb.put("input/x", b"x", fields={"bad name!": 1})
    assert list(wb.walk()) == []


def test_file_object_that_fails_mid_stream_publishes_nothing(wb: nokv.Workbench) -> None:
    class Broken(io.RawIOBase):
        def __init__(self) -> None:
            self.calls = 0

        def read(self, n: int = -1) -> bytes:
            self.calls += 1
            if self.calls > 3:
                raise OSError("disk vanished")
            return b"x" * min(n, 1000)

    with pytest.raises(nokv.InvalidArguments, match="disk vanished"):
        wb.put("input/broken.bin", Broken())
    assert not wb.exists("input/broken.bin")


def test_index_fields_are_searchable(store: nokv.Store, wb: nokv.Workbench) -> None:
    when = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone.utc)
    wb.put(
        "outputs/m.json",
        b'{"loss": 0.25, "epoch": 3}',
        fields={"run": "r1", "ok": True, "n": 7, "at": when, "raw": b"\x01"},
        index_json=True,
    )
    st = wb.stat("outputs/m.json")
    assert st.fields is not None
    assert st.fields["run"] == "r1" and st.fields["n"] == 7 and st.fields["loss"] == 0.25
    assert st.fields["at"] == "2024-05-01T12:00:00Z"
    found = store.search(predicates=[{"field": "epoch", "op": "eq", "value": 3}], fields=["run"])
    assert [m["relative_path"] for m in found["matches"]] == ["m.json"]
    assert found["matches"][0]["values"] == {"run": "r1"}
    with pytest.raises(nokv.InvalidArguments):
        wb.put("outputs/n.json", b"{}", fields={"at": datetime.datetime(2024, 1, 1)})


def test_append_creates_then_extends(wb: nokv.Workbench) -> None:
    a = wb.append("logs/run.log", "line 1\n")
    assert a.created and a.appended_bytes == 7 and a.content_type == "text/plain; charset=utf-8"
    b = wb.append("logs/run.log", b"line 2\n")
    assert not b.created and b.size_bytes == 14 and b.generation > a.generation
    assert b.digest == sha(b"line 2\n")
    assert b.digest_uri == sha(b"line 1\nline 2\n")
    assert wb.read_text("logs/run.log") == "line 1\nline 2\n"


def test_edit_replaces_exact_text(wb: nokv.Workbench) -> None:
    wb.put("scripts/a.py", "x = 1\ny = 1\n")
    out = wb.edit("scripts/a.py", "x = 1", "x = 2")
    assert out["replacements"] == 1 and out["no_change"] is False
    assert wb.read_text("scripts/a.py") == "x = 2\ny = 1\n"
    same = wb.edit("scripts/a.py", "x = 2", "x = 2")
    assert same["no_change"] is True and same["generation"] == out["generation"]
    all_ = wb.edit("scripts/a.py", "= ", "== ", replace_all=True)
    assert all_["replacements"] == 2


def test_read_bytes_ranges_and_bounds(wb: nokv.Workbench) -> None:
    wb.put("input/r.bin", bytes(range(256)))
    assert wb.read_bytes("input/r.bin", 10, 5) == bytes(range(10, 15))
    assert wb.read_bytes("input/r.bin", 250) == bytes(range(250, 256))
    assert wb.read_bytes("input/r.bin", 256) == b""
    with pytest.raises(nokv.InvalidArguments):
        wb.read_bytes("input/r.bin", 257)
    with pytest.raises(nokv.InvalidArguments):
        wb.read_bytes("input/r.bin", 250, 10)
    with pytest.raises(nokv.NotFound):
        wb.read_bytes("input/none.bin")
    with pytest.raises(nokv.NotArtifact):
        wb.read_bytes("input")


def test_read_json_keeps_big_integers_exact_and_decimals_on_request(wb: nokv.Workbench) -> None:
    wb.put("outputs/n.json", b'{"big": 123456789012345678901234567890, "x": 0.1000000000000000055511151231257827}')
    plain = wb.read_json("outputs/n.json")
    assert plain["big"] == 123456789012345678901234567890
    assert isinstance(plain["x"], float)
    exact = wb.read_json("outputs/n.json", parse_float=decimal.Decimal)
    assert exact["x"] == decimal.Decimal("0.1000000000000000055511151231257827")
    wb.put("outputs/bad.json", b"{not json")
    with pytest.raises(nokv.StructuredDecodeFailed) as e:
        wb.read_json("outputs/bad.json")
    assert e.value.details["format"] == "json"


def test_open_is_seekable_range_reader_pinned_to_its_revision(wb: nokv.Workbench) -> None:
    body = bytes(i % 251 for i in range(300_000))
    first = wb.put("input/big.bin", body)
    with wb.open("input/big.bin") as f:
        assert f.readable() and f.seekable() and not f.writable()
        assert f.size == len(body) and f.generation == first.generation
        assert f.read(10) == body[:10]
        f.seek(-5, io.SEEK_END)
        assert f.read() == body[-5:]
        f.seek(1000)
        # A replacement after open does not change what this reader returns.
        wb.put("input/big.bin", b"replaced", replace=True)
        assert f.read(20) == body[1000:1020]
        buf = bytearray(7)
        assert f.readinto(buf) == 7 and bytes(buf) == body[1020:1027]
        assert f.tell() == 1027
        f.seek(0)
        assert hashlib.sha256(f.read()).hexdigest() == hashlib.sha256(body).hexdigest()
    with pytest.raises(ValueError):
        f.read(1)
    assert wb.open("input/big.bin").read() == b"replaced"
    with pytest.raises(nokv.InvalidArguments):
        wb.open("input/big.bin", "wb")


def test_stat_file_directory_and_root(wb: nokv.Workbench) -> None:
    put = wb.put("outputs/deep/x.txt", "hi")
    f = wb.stat("outputs/deep/x.txt")
    assert f.is_file and f.kind == "file" and f.size_bytes == 2
    assert f.generation == put.generation and f.digest_uri == put.digest_uri
    assert f.producer == "nokv python" and f.name == "x.txt"
    d = wb.stat("outputs/deep")
    assert d.is_dir and not d.is_file and d.size_bytes is None and d.digest_uri is None
    root = wb.stat()
    assert root.is_dir
    with pytest.raises(nokv.NotFound):
        wb.stat("outputs/none")
    assert wb.exists("outputs/deep") and not wb.exists("outputs/none")


def test_list_pages_through_cursors_and_walk_is_recursive(wb: nokv.Workbench) -> None:
    for i in range(230):
        wb.put(f"input/f{i:03d}.txt", str(i))
    wb.put("input/sub/inner.txt", "in")
    names = [e.name for e in wb.list("input", page_size=50)]
    assert len(names) == 231 and names == sorted(names)
    assert [e.name for e in wb.list()] == ["input", "logs", "metadata", "outputs", "scripts"]
    sub = next(e for e in wb.list("input") if e.name == "sub")
    assert sub.is_dir
    keys = [s.key for s in wb.walk("input", page_size=17)]
    assert len(keys) == 231 and "input/sub/inner.txt" in keys
    with pytest.raises(nokv.NotDirectory):
        list(wb.list("input/f000.txt"))


def test_grep_pages_matches(wb: nokv.Workbench) -> None:
    for i in range(5):
        wb.put(f"logs/l{i}.log", "ok\nERROR disk full\nok\n")
    hits = list(wb.grep("error", "logs", page_size=2))
    assert len(hits) == 5
    assert all(h["line_number"] == 2 and h["snippet"] == "ERROR disk full" for h in hits)
    assert list(wb.grep("nothing-here")) == []


def test_snapshot_reads_see_the_frozen_state(store: nokv.Store, wb: nokv.Workbench) -> None:
    wb.put("outputs/r.txt", "v1")
    store.commit("wb", {"task": "t"})
    snap = store.snapshot("wb", name="s1")
    wb.put("outputs/r.txt", "v2", replace=True)
    wb.put("outputs/new.txt", "n")
    assert wb.read_text("outputs/r.txt", at_snapshot="s1") == "v1"
    assert wb.read_text("outputs/r.txt", at_snapshot=snap["snapshot_id"]) == "v1"
    assert wb.stat("outputs/r.txt", at_snapshot="s1").size_bytes == 2
    assert [e.name for e in wb.list("outputs", at_snapshot="s1")] == ["r.txt"]
    assert [s.key for s in wb.walk("outputs", at_snapshot="s1")] == ["outputs/r.txt"]
    with wb.open("outputs/r.txt", at_snapshot="s1") as f:
        assert f.read() == b"v1"
