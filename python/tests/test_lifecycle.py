"""Store-level methods: workbenches, queries, commits/tags, snapshots, restore, changes,
materialize/collect, the store's lifecycle."""

from __future__ import annotations

import decimal
import pathlib
import threading
import time
from typing import Any

import pytest

import nokv

from conftest import run_cli


def test_open_close_and_context_manager(store_dir: pathlib.Path) -> None:
    with nokv.open(store_dir) as s:
        assert not s.closed
        assert s.presentation_root == "/agents/local/wb"
        assert s.directory == str(store_dir)
        s.create_workbench("a")
    assert s.closed
    with pytest.raises(nokv.InvalidState):
        s.workbench("a")
    s.close()  # idempotent
    with nokv.open(store_dir, create=False) as s2:
        assert s2.workbench("a").id == "a"


def test_open_without_create_on_missing_store_is_not_found(tmp_path: pathlib.Path) -> None:
    with pytest.raises(nokv.NotFound):
        nokv.open(tmp_path / "none", create=False)
    assert not (tmp_path / "none" / "meta").exists()


def test_close_releases_the_store_lock_for_the_cli(store_dir: pathlib.Path) -> None:
    s = nokv.open(store_dir)
    wb = s.create_workbench("lock")
    wb.put("input/a.txt", "a")
    reader = wb.open("input/a.txt")  # a derived object must not keep the store open
    changes = s.changes()
    s.close()
    proc = run_cli(store_dir, "workbench", "stat", '{"id":"lock","section":"input","path":"a.txt"}')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with pytest.raises(nokv.InvalidState):
        reader.read()
    with pytest.raises(nokv.InvalidState):
        next(changes)


def test_a_second_process_writes_while_the_first_is_open(store_dir: pathlib.Path) -> None:
    # Writers take turns on the store's lock (held only while a write runs): a second process
    # opens and writes while the first keeps its store open, and each sees the other's writes.
    with nokv.open(store_dir) as s:
        s.create_workbench("x").put("input/a.txt", "from the first process")
        from conftest import run_python

        proc = run_python(
            "import sys, nokv\n"
            "with nokv.open(sys.argv[1], lock_timeout=5) as t:\n"
            "    print(t.workbench('x').read_text('input/a.txt'))\n"
            "    t.create_workbench('y').put('input/b.txt', 'from the second process')\n",
            str(store_dir),
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "from the first process"
        assert s.workbench("y").read_text("input/b.txt") == "from the second process"
        s.workbench("x").put("input/c.txt", "the first process writes again")
    with nokv.open(store_dir) as s:
        assert s.workbench("x").read_text("input/c.txt") == "the first process writes again"


@pytest.mark.both_backends
def test_workbench_handles(store: nokv.Store) -> None:
    with pytest.raises(nokv.NotFound):
        store.workbench("missing")
    with pytest.raises(nokv.InvalidArguments):
        store.create_workbench("-bad")
    a = store.create_workbench("a")
    assert store.create_workbench("a") == a  # exact retry
    assert store.workbench("a") == a and repr(a) == "<nokv.Workbench 'a'>"
    assert a.store is store


@pytest.mark.both_backends
def test_tool_envelopes_and_call_tool(store: nokv.Store) -> None:
    ok = store.tool("create", {"id": "t"})
    assert ok["status"] == "success" and ok["sections"] == list(nokv.SECTIONS)
    err = store.tool("workbench_read", {"id": "t", "section": "input", "path": "x"})
    assert err["status"] == "error" and err["code"] == "NotFound" and err["retryable"] is False
    bad = store.tool("put_file", {"id": "t", "section": "input", "path": "x", "text": float("nan")})
    assert bad["code"] == "InvalidArguments"
    assert store.tool("nope", {})["code"] == "UnknownTool"
    with pytest.raises(nokv.NotFound):
        store.call_tool("read", {"id": "t", "section": "input", "path": "x"})
    res = store.call_tool("stat", {"id": "t"})
    assert "status" not in res and res["card"]["kind"] == "directory"
    store.workbench("t").put("outputs/d.json", '{"x": 0.5, "n": 3}')
    read = store.call_tool("read", {"id": "t", "section": "outputs", "path": "d.json"}, parse_float=decimal.Decimal)
    assert read["items"][0]["value"] == {"x": decimal.Decimal("0.5"), "n": 3}


@pytest.mark.both_backends
def test_tool_and_structured_reads_keep_64_bit_integers_exact(store: nokv.Store) -> None:
    store.create_workbench("n")
    # Beyond 2**53: a float would round these.
    big, neg = 2**64 - 1, -(2**63)
    store.workbench("n").put("outputs/v.json", f'{{"big": {big}, "neg": {neg}}}'.encode())
    out = store.tool("read", {"id": "n", "section": "outputs", "path": "v.json"})
    assert out["items"][0]["value"] == {"big": big, "neg": neg}
    assert type(out["items"][0]["value"]["big"]) is int


@pytest.mark.both_backends
def test_integers_beyond_64_bits_are_exact_or_refused_never_rounded(store: nokv.Store) -> None:
    store.create_workbench("n")
    huge = 2**80 + 1
    env = store.tool("commit", {"id": "n", "manifest": {"v": huge}, "content_digest_uri": "sha256:" + "00" * 32})
    assert env["status"] == "success", env
    found = store.find(include_manifest=True)["matches"]
    assert found[0]["manifest"]["manifest"] == {"v": huge}
    assert type(found[0]["manifest"]["manifest"]["v"]) is int
    # An index cannot hold it exactly: the field is refused with a typed error, never rounded.
    with pytest.raises(nokv.InvalidArguments):
        store.workbench("n").put("outputs/i.json", f'{{"v": {huge}}}', index_json=True)
    assert not store.workbench("n").exists("outputs/i.json")


@pytest.mark.both_backends
def test_search_aggregate_catalog(store: nokv.Store) -> None:
    wb = store.create_workbench("q")
    for sp, mass in (("A", 3700.5), ("B", 5076.02), ("B", 5000)):
        wb.put(f"outputs/{sp}-{mass}.json", f'{{"species": "{sp}", "mass": {mass}}}', index_json=True)
    s = store.search(predicates=[{"field": "mass", "op": "gt", "value": 4000}], fields=["species"])
    assert s["match_count"] == 2 and {m["values"]["species"] for m in s["matches"]} == {"B"}
    page = wb.search(limit=1)
    assert page["truncated"] and page["next_cursor"]
    agg = store.aggregate(
        [{"name": "avg", "op": "avg", "field": "mass"}, {"name": "n", "op": "count"}],
        group_by=["species"],
    )
    groups = {g["key"]["species"]: g["values"] for g in agg["groups"]}
    assert groups["A"] == {"avg": 3700.5, "n": 1} and groups["B"]["n"] == 2
    cat = store.catalog(workbench_id="q")
    assert not cat["catalog_empty"]
    assert "mass" in cat["catalog"]["sortable"]


def test_commit_tags_head_and_find(store: nokv.Store) -> None:
    wb = store.create_workbench("c")
    wb.put("input/a.txt", "a")
    c1 = store.commit("c", {"task": "first"})
    assert c1["idempotent_replay"] is False and len(c1["commit_identity"]) == 64
    assert c1["content_digest_uri"] == store.content_digest("c")
    again = store.commit("c", {"task": "first"})
    assert again["idempotent_replay"] is True and again["commit_identity"] == c1["commit_identity"]
    head = store.commit_head("c")
    assert head is not None and head["commit_id"] == c1["commit_identity"] and head["state"] == "sealed"
    assert store.commit_info("0" * 64) is None
    run = store.create_workbench("run")
    run.put("outputs/o.txt", "o")
    c2 = run.commit({"task": "run"}, parents=[c1["commit_identity"]])
    assert c2["parents"] == [c1["commit_identity"]]
    assert store.commit_info(c2["commit_identity"])["parents"] == [c1["commit_identity"]]
    tag = store.set_tag("c", "v1", c1["commit_identity"], create_only=True)
    assert tag["commit_id"] == c1["commit_identity"]
    assert store.tags("c") == [tag] and store.get_tag("c", "v1") == tag
    with pytest.raises(nokv.Conflict):
        store.set_tag("c", "v1", c1["commit_identity"], create_only=True)
    assert store.delete_tag("c", "v1", expected_generation=tag["generation"]) == tag
    assert store.get_tag("c", "v1") is None and store.delete_tag("c", "v1") is None
    found = store.find(committed=True, manifest_pattern='"task":"run"', include_manifest=True)
    assert [m["workbench_id"] for m in found["matches"]] == ["run"]
    assert found["matches"][0]["manifest"]["manifest"] == {"task": "run"}
    assert found["matches"][0]["manifest"]["schema"] == "nokv.workbench.run_manifest.v1"


@pytest.mark.both_backends
def test_snapshot_renew_retire_list_and_restore(store: nokv.Store) -> None:
    wb = store.create_workbench("s")
    wb.put("outputs/x.txt", "x")
    commit = store.commit("s", {"k": 1})
    snap = store.snapshot("s", name="base", reason="before change", metadata={"n": 1}, ttl_days=2)
    assert snap["state"] == "alive" and snap["name"] == "base" and snap["ttl_days"] == 2
    renewed = store.renew("s", "base", ttl_days=5)
    assert renewed["renewed"] is True and renewed["lease_expires_unix_ms"] > snap["lease_expires_unix_ms"]
    restored = store.restore("s", "s-copy", at_snapshot="base")
    assert restored["state"] == "complete" and restored["idempotent_replay"] is False
    assert store.restore("s", "s-copy", at_snapshot="base")["idempotent_replay"] is True
    assert store.workbench("s-copy").read_text("outputs/x.txt") == "x"
    from_commit = store.restore("s", "s-c2", at_commit=commit["commit_identity"])
    assert from_commit["commit_id"] == commit["commit_identity"]
    retired = store.retire("s", snap["snapshot_id"], reason="done")
    assert retired["retired"] is True
    assert store.retire("s", snap["snapshot_id"], reason="again")["retired"] is False
    states = [(x["snapshot_id"], x["state"]) for x in store.snapshots("s")]
    assert states == [(snap["snapshot_id"], "retired")]
    assert wb.snapshots() == store.snapshots("s")


@pytest.mark.both_backends
def test_changes_iterate_resume_and_poll(store: nokv.Store) -> None:
    wb = store.create_workbench("ch")
    wb.put("input/a", "a")
    it = store.changes()
    kinds = [(c.workbench_id, c.kind, c.path) for c in it]
    assert ("ch", "workspace_created", None) in kinds
    assert ("ch", "artifact_published", "input/a") in kinds
    cursor = it.cursor
    wb.put("input/b", "b")
    assert [(c.kind, c.path) for c in it] == [("artifact_published", "input/b")]  # polls again
    resumed = list(store.changes(cursor))
    assert [(c.kind, c.path) for c in resumed] == [("artifact_published", "input/b")]
    assert resumed[0].after_generation == wb.stat("input/b").generation
    assert [c.path for c in wb.changes()] == [None, "input/a", "input/b"]
    with pytest.raises(nokv.InvalidArguments):
        store.changes("not-a-cursor")


def test_materialize_and_collect_round_trip(store: nokv.Store, tmp_path: pathlib.Path) -> None:
    wb = store.create_workbench("m")
    wb.put("input/data.csv", "a,b\n")
    wb.put("scripts/s.sh", "echo\n")
    out = tmp_path / "sandbox"
    files = wb.materialize(out)
    assert sorted(f["key"] for f in files) == ["input/data.csv", "scripts/s.sh"]
    assert (out / "input" / "data.csv").read_text() == "a,b\n"
    only = store.materialize("m", tmp_path / "only", prefix="scripts")
    assert [f["key"] for f in only] == ["scripts/s.sh"]
    (out / "result.json").write_text('{"score": 9}')
    got = wb.collect(out / "result.json", "outputs/result.json", index_json=True)
    assert got["key"] == "outputs/result.json" and got["size_bytes"] == 12
    assert wb.stat("outputs/result.json").content_type == "application/json"
    assert wb.stat("outputs/result.json").fields["score"] == 9
    with pytest.raises(nokv.AlreadyExists):
        wb.collect(out / "result.json", "outputs/result.json")
    with pytest.raises(nokv.InvalidArguments):
        wb.collect(tmp_path / "missing.bin", "outputs/missing.bin")
    assert store.object_count() >= 3


@pytest.mark.both_backends
def test_eight_threads_writing_distinct_paths_lose_nothing(store: nokv.Store) -> None:
    wb = store.create_workbench("threads")
    errors: list = []
    per_thread = 25

    def writer(t: int) -> None:
        try:
            for i in range(per_thread):
                wb.put(f"outputs/t{t}/f{i}.txt", f"{t}:{i}")
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    keys = {s.key for s in wb.walk("outputs")}
    assert len(keys) == 8 * per_thread
    for t in range(8):
        for i in range(per_thread):
            assert wb.read_text(f"outputs/t{t}/f{i}.txt") == f"{t}:{i}"


def test_a_served_store_sends_a_writer_to_the_server_at_once(tmp_path: pathlib.Path, server: Any) -> None:
    # `nokv serve` holds the writer lock for its whole life: an embedded writer is told where
    # the store is served within a fraction of its lock timeout, not after it.
    store_dir = tmp_path / "served"
    started = time.monotonic()
    with pytest.raises(nokv.InvalidState) as e:
        with nokv.open(store_dir, lock_timeout=30) as s:
            s.create_workbench("z")
    assert time.monotonic() - started < 10
    assert e.value.details.get("reason") == "store_served", e.value.details
    assert e.value.details.get("server_url") == server.url


@pytest.mark.parametrize("timeout", [-1.0, float("nan"), float("inf"), 1e19, 1e300])
def test_an_impossible_lock_timeout_is_invalid_arguments(store_dir: pathlib.Path, timeout: float) -> None:
    with pytest.raises(nokv.InvalidArguments):
        nokv.open(store_dir, lock_timeout=timeout)
    assert not (store_dir / "meta").exists(), "nothing was created"
