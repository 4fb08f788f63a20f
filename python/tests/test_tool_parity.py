"""`Store.tool` returns exactly the CLI's envelope for the same call on the same store state.

The store is built once, closed, and copied byte for byte per call: one copy is opened by
Python and gets the call through `store.tool`, the other gets the same call through
`nokv workbench <tool> '<json>'`. Both processes open the store exactly once, so even
generations (commit versions) agree. The only fields masked are wall-clock lease times of
snapshot mints and renewals (they are `now + ttl` on each side's clock) and, only when the two
sides' commits fell into different wall-clock seconds, the two digests that cover the run
manifest's `committed_at_unix_seconds` (each side's committed envelope is read back to check
that this is the one difference).
"""

from __future__ import annotations

import base64
import pathlib
import shutil
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import nokv

from conftest import cli_tool

CLOCK_FIELDS = ("lease_expires_at", "lease_expires_unix_ms", "expiry_warning")
# Digests over the committed run manifest, whose `committed_at_unix_seconds` is the owner's clock.
COMMIT_CLOCK_DIGESTS = ("envelope_digest_uri", "tree_digest_uri")


@pytest.fixture(scope="module")
def base_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pathlib.Path]:
    d = tmp_path_factory.mktemp("parity") / "store"
    with nokv.open(d) as s:
        wb = s.create_workbench("p")
        wb.put("input/data.csv", "species,mass\nGentoo,5000\nAdelie,3700\n")
        wb.put("scripts/run.sh", "echo run\necho again\n")
        wb.put("outputs/summary.json", '{"species":"Gentoo","count":123}', index_json=True)
        wb.put("outputs/big.json", '{"big":123456789012345678901,"dec":0.10000000000000000000001}')
        wb.put("logs/run.log", "ok\nERROR one\nok\n")
        wb.put("input/blob.bin", bytes(range(200)))
        commit = s.commit("p", {"task": "parity", "n": 1})
        s.snapshot("p", name="base")
        wb.put("outputs/late.txt", "after the snapshot")
        s.create_workbench("q").put("outputs/summary.json", '{"species":"Adelie","count":1}', index_json=True)
    (d.parent / "commit_id").write_text(commit["commit_identity"])
    yield d


def calls(commit_id: str) -> List[Tuple[str, Dict[str, Any]]]:
    return [
        ("workbench_create", {"id": "new-wb"}),
        ("workbench_create", {"id": "p"}),
        ("workbench_create", {"id": "-bad"}),
        ("workbench_put_file", {"id": "p", "section": "outputs", "path": "n.txt", "text": "hello"}),
        ("workbench_put_file", {"id": "p", "section": "input", "path": "b.bin", "base64": base64.b64encode(b"\x00\x01").decode()}),
        ("workbench_put_file", {"id": "p", "section": "input", "path": "data.csv", "text": "x"}),
        ("workbench_put_file", {"id": "p", "section": "input", "path": "data.csv", "text": "x", "replace": True, "expected_generation": 1}),
        ("workbench_append", {"id": "p", "section": "logs", "path": "run.log", "text": "more\n"}),
        ("workbench_edit", {"id": "p", "section": "scripts", "path": "run.sh", "old_string": "echo run", "new_string": "echo RUN"}),
        ("workbench_edit", {"id": "p", "section": "scripts", "path": "run.sh", "old_string": "echo", "new_string": "x"}),
        ("workbench_list", {"id": "p"}),
        ("workbench_list", {"id": "p", "section": "input", "limit": 1}),
        ("workbench_list", {"id": "p", "section": "outputs", "at_snapshot": "base"}),
        ("workbench_stat", {"id": "p", "section": "outputs", "path": "summary.json"}),
        ("workbench_stat", {"id": "p", "section": "input"}),
        ("workbench_read", {"id": "p", "section": "outputs", "path": "summary.json"}),
        ("workbench_read", {"id": "p", "section": "input", "path": "data.csv", "limit": 2}),
        ("workbench_read", {"id": "p", "section": "input", "path": "blob.bin", "format": "bytes", "offset": 10, "limit": 20}),
        ("workbench_read", {"id": "p", "section": "input", "path": "missing"}),
        ("workbench_grep", {"id": "p", "pattern": "error|gentoo", "recursive": True}),
        ("workbench_search", {"predicates": [{"field": "count", "op": "gte", "value": 1}], "fields": ["species"], "facets": ["species"]}),
        ("workbench_aggregate", {"measures": [{"name": "n", "op": "count"}, {"name": "s", "op": "sum", "field": "count"}], "group_by": ["species"]}),
        ("workbench_catalog", {"include_facets": True}),
        ("workbench_find", {"committed": True, "include_manifest": True}),
        ("workbench_commit", {"id": "p", "manifest": {"task": "parity", "n": 1}, "content_digest_uri": "sha256:" + "ab" * 32}),
        ("workbench_commit", {"id": "q", "manifest": {"task": "q"}, "content_digest_uri": "sha256:" + "01" * 32}),
        ("workbench_snapshot", {"id": "p", "name": "second", "reason": "parity"}),
        ("workbench_snapshot_renew", {"id": "p", "name": "base", "ttl_days": 30}),
        ("workbench_snapshot_retire", {"id": "p", "name": "base", "reason": "done"}),
        ("workbench_snapshot_list", {"id": "p"}),
        ("workbench_restore", {"id": "p", "destination_id": "p-restored", "at_snapshot": "base"}),
        ("workbench_restore", {"id": "p", "destination_id": "p-from-commit", "at_commit": commit_id}),
        ("workbench_nope", {}),
        ("read", {"id": "p", "section": "input", "path": "data.csv", "unknown_field": 1}),
    ]


def masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ("<clock>" if k in CLOCK_FIELDS else masked(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def committed_envelope(store_dir: pathlib.Path, workbench_id: str) -> Dict[str, Any]:
    """The run manifest envelope a commit published, read back from `store_dir`."""
    with nokv.open(store_dir, create=False) as s:
        env = s.workbench(workbench_id).read_json("metadata/run_manifest.json")
    assert isinstance(env, dict) and "committed_at_unix_seconds" in env
    return env


def test_every_tool_envelope_equals_the_cli(base_store: pathlib.Path, tmp_path: pathlib.Path) -> None:
    commit_id = (base_store.parent / "commit_id").read_text()
    seen_tools = set()
    for i, (tool, args) in enumerate(calls(commit_id)):
        py_dir = tmp_path / f"py{i}"
        cli_dir = tmp_path / f"cli{i}"
        shutil.copytree(base_store, py_dir)
        shutil.copytree(base_store, cli_dir)
        with nokv.open(py_dir, create=False) as s:
            from_python = s.tool(tool, args)
        from_cli = cli_tool(cli_dir, tool, args)
        if tool == "workbench_commit" and from_python.get("status") == "success":
            py_env = committed_envelope(py_dir, args["id"])
            cli_env = committed_envelope(cli_dir, args["id"])
            py_at = py_env.pop("committed_at_unix_seconds")
            cli_at = cli_env.pop("committed_at_unix_seconds")
            assert py_env == cli_env, f"{tool} {args}: committed envelopes differ beyond the clock"
            if py_at != cli_at:
                assert abs(py_at - cli_at) <= 60
                for key in COMMIT_CLOCK_DIGESTS:
                    from_python[key] = from_cli[key] = "<clock>"
        assert masked(from_python) == masked(from_cli), f"{tool} {args}"
        # Key order is part of "the same envelope" too.
        assert list(from_python) == list(from_cli)
        seen_tools.add(tool if tool.startswith("workbench_") else "workbench_" + tool)
        shutil.rmtree(py_dir)
        shutil.rmtree(cli_dir)
    assert len({t for t in seen_tools if t != "workbench_nope"}) == 18
