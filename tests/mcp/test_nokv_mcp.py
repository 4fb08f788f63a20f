"""The official MCP Python client (`pip install mcp`) drives `nokv mcp` over stdio.

The binary under test is $NOKV_BIN (the CI stage sets it), else target/debug/nokv of this
checkout. A missing binary fails the tests: it never skips them.
"""

import hashlib
import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[2]
NOKV = os.environ.get("NOKV_BIN") or str(REPO / "target" / "debug" / "nokv")
PENGUINS = REPO / "examples" / "penguins"


def nokv_schema() -> dict:
    out = subprocess.run([NOKV, "schema"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def server(store: Path) -> StdioServerParameters:
    return StdioServerParameters(command=NOKV, args=["--store", str(store), "mcp"])


def envelope(result) -> dict:
    """The envelope of a tool result, after checking the MCP result shape around it."""
    assert len(result.content) == 1
    block = result.content[0]
    assert block.type == "text"
    structured = result.structured_content
    assert json.loads(block.text) == structured
    assert result.is_error == (structured["status"] != "success")
    return structured


def run(body):
    """Runs an async test body with a legacy-handshake session (`initialize`)."""

    async def main(store):
        async with stdio_client(server(store)) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                await body(session, init)

    return main


@pytest.fixture
def store(tmp_path):
    assert Path(NOKV).is_file(), f"nokv binary not found at {NOKV}; build it with cargo build -p nokv-cli"
    return tmp_path / "store"


def test_initialize_and_tools_list_match_nokv_schema(store):
    expected = {t["name"]: t for t in nokv_schema()["tools"]}

    async def body(session, init):
        assert init.server_info.name == "nokv"
        assert init.capabilities.tools is not None
        listed = await session.list_tools()
        assert [t.name for t in listed.tools] == list(expected)
        assert len(listed.tools) == 18
        for tool in listed.tools:
            assert tool.input_schema == expected[tool.name]["input_schema"], tool.name
            assert tool.description == expected[tool.name]["description"]

    anyio.run(run(body), store)


def test_put_read_grep_commit_round_trip(store):
    text = (PENGUINS / "penguins.csv").read_text()
    digest = "sha256:" + hashlib.sha256(text.encode()).hexdigest()

    async def body(session, _init):
        created = envelope(await session.call_tool("workbench_create", {"id": "penguins"}))
        assert created["status"] == "success"
        assert created["sections"] == ["input", "scripts", "outputs", "logs", "metadata"]

        put = envelope(await session.call_tool(
            "workbench_put_file",
            {"id": "penguins", "section": "input", "path": "penguins.csv", "text": text},
        ))
        assert put["status"] == "success", put
        assert put["digest_uri"] == digest
        assert put["size_bytes"] == len(text.encode())

        read = envelope(await session.call_tool(
            "workbench_read",
            {"id": "penguins", "section": "input", "path": "penguins.csv", "limit": 3},
        ))
        assert read["record_type"] == "text_lines"
        assert [i["value"] for i in read["items"]] == text.split("\n")[:3]
        assert read["generation"] == put["generation"]

        grep = envelope(await session.call_tool(
            "workbench_grep", {"id": "penguins", "pattern": "GENTOO", "recursive": True, "limit": 5},
        ))
        assert grep["status"] == "success", grep
        assert grep["matches"], grep
        assert all("gentoo" in m["snippet"].lower() for m in grep["matches"])
        assert grep["matches"][0]["relative_path"] == "penguins.csv"

        commit = envelope(await session.call_tool(
            "workbench_commit",
            {"id": "penguins", "manifest": {"task": "penguins", "source": "mcp"}, "content_digest_uri": digest},
        ))
        assert commit["status"] == "success", commit
        assert commit["content_digest_uri"] == digest
        assert commit["idempotent_replay"] is False

        replay = envelope(await session.call_tool(
            "workbench_commit",
            {"id": "penguins", "manifest": {"task": "penguins", "source": "mcp"}, "content_digest_uri": digest},
        ))
        assert replay["idempotent_replay"] is True
        assert replay["commit_identity"] == commit["commit_identity"]

        found = envelope(await session.call_tool("workbench_find", {"committed": True, "manifest_pattern": "PENGUINS"}))
        assert [m["workbench_id"] for m in found["matches"]] == ["penguins"]

    anyio.run(run(body), store)


def test_tool_errors_are_results_with_is_error(store):
    async def body(session, _init):
        envelope(await session.call_tool("workbench_create", {"id": "wb"}))
        args = {"id": "wb", "section": "input", "path": "a.txt", "text": "one"}
        envelope(await session.call_tool("workbench_put_file", args))

        again = await session.call_tool("workbench_put_file", args)
        assert again.is_error is True
        err = envelope(again)
        assert err["code"] == "AlreadyExists"
        assert err["retryable"] is False

        bad = await session.call_tool("workbench_edit", {"id": "wb", "section": "input", "path": "a.txt",
                                                         "old_string": "absent", "new_string": "x"})
        assert bad.is_error is True
        assert envelope(bad)["code"] == "NoMatch"

        invalid = await session.call_tool("workbench_list", {"id": "wb", "limit": 1000})
        assert invalid.is_error is True
        assert envelope(invalid)["code"] == "InvalidArguments"

    anyio.run(run(body), store)


def test_modern_client_negotiates_and_calls_tools(store):
    """The high-level client negotiates the newest protocol (or falls back) on its own."""

    async def main():
        async with Client(server(store)) as client:
            assert client.protocol_version
            listed = await client.list_tools()
            assert len(listed.tools) == 18
            created = envelope(await client.call_tool("workbench_create", {"id": "modern"}))
            assert created["workbench_id"] == "modern"
            stat = envelope(await client.call_tool("workbench_stat", {"id": "modern", "section": "outputs"}))
            assert stat["card"]["kind"] == "directory"

    anyio.run(main)


READING_TOOLS = [
    "workbench_list",
    "workbench_stat",
    "workbench_read",
    "workbench_grep",
    "workbench_search",
    "workbench_aggregate",
    "workbench_catalog",
    "workbench_find",
    "workbench_snapshot_list",
]


def test_read_only_profile_offers_only_reading_tools_and_refuses_writes(store):
    expected = {t["name"]: t for t in nokv_schema()["tools"]}
    # A first, writing session leaves one file behind.
    async def seed(session, _init):
        envelope(await session.call_tool("workbench_create", {"id": "inputs"}))
        put = envelope(await session.call_tool(
            "workbench_put_file", {"id": "inputs", "section": "input", "path": "a.txt", "text": "alpha\n"},
        ))
        assert put["status"] == "success", put

    anyio.run(run(seed), store)

    async def main():
        params = StdioServerParameters(command=NOKV, args=["--store", str(store), "mcp", "--read-only"])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                assert [t.name for t in listed.tools] == READING_TOOLS
                for tool in listed.tools:
                    assert tool.input_schema == expected[tool.name]["input_schema"], tool.name
                    assert tool.annotations.read_only_hint is True
                refused = await session.call_tool(
                    "workbench_put_file", {"id": "inputs", "section": "input", "path": "b.txt", "text": "b"},
                )
                env = envelope(refused)
                assert refused.is_error
                assert env["code"] == "Forbidden"
                assert env["details"]["missing_scope"] == "write:inputs"
                listing = envelope(await session.call_tool("workbench_list", {"id": "inputs", "section": "input"}))
                assert [e["name"] for e in listing["entries"]] == ["a.txt"]

    anyio.run(main)
