"""`nokv.connect`: the `Store` / `Workbench` API against a real `nokv serve` (started per test on
a free loopback port by the `server` fixture, always killed and reaped), compared with the same
calls on an embedded store."""

from __future__ import annotations

import io
import os
import pathlib
import threading
from typing import Any, Dict, List, Tuple

import pytest

import nokv

from conftest import TOKEN, start_server


def connect(server: Any, **kw: Any) -> nokv.Store:
    return nokv.connect(server.url, token=TOKEN, **kw)


def test_connect_returns_a_store_that_closes(server: Any) -> None:
    with connect(server) as store:
        assert store.url == server.url and store.directory is None
        assert store.presentation_root == "/agents/local/wb"
        assert repr(store) == f"<nokv.Store {server.url!r} (open)>"
        wb = store.create_workbench("w")
        assert store.workbench("w") == wb
    assert store.closed
    with pytest.raises(nokv.InvalidState):
        store.workbench("w")


def test_a_wrong_or_missing_token_is_unauthorized(server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOKV_TOKEN", raising=False)
    with pytest.raises(nokv.Unauthorized) as err:
        nokv.connect(server.url, token="not-the-token")
    assert err.value.code == "Unauthorized" and err.value.retryable is False
    assert isinstance(err.value, PermissionError)
    assert err.value.details["http_status"] == 401
    with pytest.raises(nokv.Unauthorized):
        nokv.connect(server.url)
    with pytest.raises(nokv.InvalidArguments):
        nokv.connect(server.url, token="has space")
    # The token may come from NOKV_TOKEN.
    monkeypatch.setenv("NOKV_TOKEN", TOKEN)
    with nokv.connect(server.url) as store:
        assert store.create_workbench("env").id == "env"


def test_a_server_that_is_down_is_a_retryable_unavailable_error(server: Any) -> None:
    store = connect(server, retries=0)
    wb = store.create_workbench("w")
    server.stop()
    with pytest.raises(nokv.Unavailable) as err:
        wb.put("input/a.txt", "a")
    assert err.value.retryable is True and isinstance(err.value, ConnectionError)
    assert err.value.details["url"] == server.url
    # tool() never raises: the envelope says what happened.
    env = store.tool("workbench_stat", {"id": "w"})
    assert env["status"] == "error" and env["code"] == "Unavailable" and env["retryable"] is True
    store.close()
    with pytest.raises(nokv.Unavailable) as err:
        nokv.connect(server.url, token=TOKEN, retries=1)
    assert err.value.retryable is True
    with pytest.raises(nokv.InvalidArguments):
        nokv.connect("https://example.invalid")


def test_eight_threads_sharing_one_connected_store_lose_nothing(server: Any) -> None:
    store = connect(server)
    wb = store.create_workbench("threads")
    per_thread = 25
    failures: List[BaseException] = []
    acked: List[Tuple[str, int]] = []
    lock = threading.Lock()

    def writer(t: int) -> None:
        try:
            for i in range(per_thread):
                r = wb.put(f"outputs/t{t}/f{i}.txt", f"{t}:{i}")
                with lock:
                    acked.append((r.key, r.generation))
        except BaseException as e:  # noqa: BLE001 - collected and asserted below
            failures.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len(acked) == 8 * per_thread
    walked = {s.key: s.generation for s in wb.walk("outputs")}
    assert walked == dict(acked)
    for t in range(8):
        for i in range(per_thread):
            assert wb.read_text(f"outputs/t{t}/f{i}.txt") == f"{t}:{i}"
    store.close()


# The read and error calls compared between an embedded and a connected store on one state.
PARITY_CALLS: List[Tuple[str, Dict[str, Any]]] = [
    ("workbench_list", {"id": "p"}),
    ("workbench_list", {"id": "p", "section": "outputs", "limit": 1}),
    ("workbench_stat", {"id": "p", "section": "outputs", "path": "m.json"}),
    ("workbench_stat", {"id": "p"}),
    ("workbench_read", {"id": "p", "section": "outputs", "path": "m.json"}),
    ("workbench_read", {"id": "p", "section": "input", "path": "t.txt", "format": "bytes", "offset": 2, "limit": 4}),
    ("workbench_grep", {"id": "p", "pattern": "line", "recursive": True}),
    ("workbench_search", {"predicates": [{"field": "loss", "op": "lt", "value": 1}], "fields": ["loss"]}),
    ("workbench_aggregate", {"measures": [{"name": "n", "op": "count"}], "group_by": ["epoch"]}),
    ("workbench_catalog", {"include_facets": True}),
    ("workbench_find", {"include_manifest": True}),
    ("workbench_snapshot_list", {"id": "p"}),
    ("workbench_read", {"id": "p", "section": "outputs", "path": "m.json", "at_snapshot": "frozen"}),
    # Errors: the same codes, messages and details.
    ("workbench_read", {"id": "p", "section": "input", "path": "missing.txt"}),
    ("workbench_stat", {"id": "nope"}),
    ("workbench_put_file", {"id": "p", "section": "outputs", "path": "m.json", "text": "{}"}),
    ("workbench_edit", {"id": "p", "section": "input", "path": "t.txt", "old_string": "zzz", "new_string": "y"}),
    ("workbench_list", {"id": "p", "section": "input", "path": "t.txt"}),
    ("workbench_read", {"id": "p", "section": "bogus", "path": "x"}),
    ("workbench_nope", {}),
    ("workbench_snapshot_renew", {"id": "p", "snapshot_id": 999999}),
]


def test_tool_envelopes_equal_embedded_ones_on_the_same_state(tmp_path: pathlib.Path) -> None:
    store_dir = tmp_path / "parity"
    with nokv.open(store_dir) as store:
        wb = store.create_workbench("p")
        wb.put("input/t.txt", "line one\nline two\nthird line\n")
        wb.put("outputs/m.json", '{"loss": 0.5, "epoch": 2}', index_json=True)
        store.commit("p", {"task": "parity"})
        store.snapshot("p", name="frozen")
        embedded = [store.tool(name, args) for name, args in PARITY_CALLS]
    srv = start_server(store_dir)
    try:
        with nokv.connect(srv.url, token=TOKEN) as remote:
            connected = [remote.tool(name, args) for name, args in PARITY_CALLS]
    finally:
        srv.stop()
    for (name, args), a, b in zip(PARITY_CALLS, embedded, connected):
        assert a == b, (name, args)
    assert [e["status"] for e in embedded].count("error") == 8
    # And the SDK methods built on the tools answer alike.
    with nokv.open(store_dir) as store:
        emb = (store.workbench("p").read_json("outputs/m.json"), [s.key for s in store.workbench("p").walk()])
    srv = start_server(store_dir)
    try:
        with nokv.connect(srv.url, token=TOKEN) as remote:
            con = (remote.workbench("p").read_json("outputs/m.json"), [s.key for s in remote.workbench("p").walk()])
    finally:
        srv.stop()
    assert emb == con


def test_commit_tags_and_heads_through_the_server(server: Any) -> None:
    store = connect(server)
    wb = store.create_workbench("c")
    wb.put("input/a.txt", "a")
    c1 = store.commit("c", {"task": "first"})
    assert c1["idempotent_replay"] is False and len(c1["commit_identity"]) == 64
    assert store.commit("c", {"task": "first"})["idempotent_replay"] is True
    with pytest.raises(nokv.WorkbenchCommitConflict):
        store.commit("c", {"task": "other"})
    head = store.commit_head("c")
    assert head is not None and head["commit_id"] == c1["commit_identity"] and head["state"] == "sealed"
    assert store.commit_info("0" * 64) is None
    run = store.create_workbench("run")
    run.put("outputs/o.txt", "o")
    c2 = run.commit({"task": "run"}, parents=[c1["commit_identity"]])
    assert c2["parents"] == [c1["commit_identity"]]
    assert store.commit_info(c2["commit_identity"])["parents"] == [c1["commit_identity"]]
    tag = store.set_tag("c", "v1", c1["commit_identity"], create_only=True)
    assert tag["name"] == "v1" and tag["commit_id"] == c1["commit_identity"]
    assert store.tags("c") == [tag] and store.get_tag("c", "v1") == tag
    with pytest.raises(nokv.Conflict):
        store.set_tag("c", "v1", c1["commit_identity"], create_only=True)
    with pytest.raises(nokv.Conflict):
        store.delete_tag("c", "v1", expected_generation=tag["generation"] + 100)
    assert store.delete_tag("c", "v1") == tag
    assert store.get_tag("c", "v1") is None and store.delete_tag("c", "v1") is None
    store.close()


def test_file_objects_stream_and_stay_pinned_to_their_generation(server: Any, tmp_path: pathlib.Path) -> None:
    store = connect(server)
    wb = store.create_workbench("f")
    body = os.urandom(3 * 1024 * 1024 + 17)
    local = tmp_path / "body.bin"
    local.write_bytes(body)
    assert wb.put("input/path.bin", local).size_bytes == len(body)
    assert wb.put("input/stream.bin", io.BytesIO(body)).size_bytes == len(body)
    assert wb.read_bytes("input/stream.bin") == body
    assert wb.read_bytes("input/path.bin", 1_000_000, 10) == body[1_000_000:1_000_010]
    with wb.open("input/stream.bin") as f:
        chunks = []
        while True:
            c = f.read(65_536)
            if not c:
                break
            chunks.append(c)
        assert b"".join(chunks) == body
        f.seek(-5, io.SEEK_END)
        assert f.read() == body[-5:]
    f = wb.open("input/stream.bin")
    assert f.read(4) == body[:4]
    wb.put("input/stream.bin", b"replaced", replace=True)
    f.seek(2 * 1024 * 1024)  # outside the chunk read ahead
    with pytest.raises(nokv.Conflict):
        f.read(4)
    f.close()
    with pytest.raises(nokv.NotArtifact):
        wb.open("input")
    with pytest.raises(nokv.NotFound):
        wb.open("input/none.bin")
    store.close()


def test_materialize_and_collect_through_the_server(server: Any, tmp_path: pathlib.Path) -> None:
    store = connect(server)
    wb = store.create_workbench("m")
    wb.put("input/data.csv", "a,b\n")
    wb.put("scripts/s.sh", "echo\n")
    out = tmp_path / "sandbox"
    files = wb.materialize(out)
    assert sorted(f["key"] for f in files) == ["input/data.csv", "scripts/s.sh"]
    assert (out / "input" / "data.csv").read_text() == "a,b\n"
    (out / "result.json").write_text('{"score": 9}')
    got = wb.collect(out / "result.json", "outputs/result.json", index_json=True)
    assert got["key"] == "outputs/result.json" and got["size_bytes"] == 12
    assert wb.stat("outputs/result.json").fields["score"] == 9
    with pytest.raises(nokv.AlreadyExists):
        wb.collect(out / "result.json", "outputs/result.json")
    with pytest.raises(nokv.InvalidArguments):
        wb.collect(tmp_path / "missing.bin", "outputs/missing.bin")
    store.close()


def test_embedded_only_operations_raise_unsupported(server: Any) -> None:
    store = connect(server)
    wb = store.create_workbench("u")
    wb.put("input/a.txt", "a")
    store.commit("u", {"t": 1})
    wb.snapshot(name="s")
    calls = [
        lambda: store.content_digest("u"),
        lambda: store.object_count(),
        lambda: list(wb.walk(at_snapshot="s")),
    ]
    for call in calls:
        with pytest.raises(nokv.Unsupported) as err:
            call()
        assert err.value.details["backend"] == "remote" and err.value.retryable is False
        assert isinstance(err.value, NotImplementedError)
    # What the server offers at a snapshot: stat, listings, byte reads and the read tool.
    assert wb.stat("input/a.txt", at_snapshot="s").size_bytes == 1
    assert wb.read_bytes("input/a.txt", at_snapshot="s") == b"a"
    assert [s.key for s in wb.list("input", at_snapshot="s")] == ["input/a.txt"]
    store.close()
