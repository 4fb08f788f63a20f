"""Shared fixtures of the Python SDK tests.

The CLI comparisons run the nokv CLI of the same checkout: `$NOKV_CLI` when set, else
`target/debug/nokv_cli` — the CLI that `cargo test --workspace` builds in the nokv-tests crate
(fault points compiled in, inert unless `NOKV_FAULT_POINT` is set; the crash tests set it).

Connected stores (`nokv.connect`) talk to a real `nokv serve` started per test from `$NOKV_BIN`
(default `target/debug/nokv`) on a free loopback port, with a bearer token; the fixture always
kills and reaps the server. Tests marked `both_backends` run once on an embedded store and once
on a connected one (the `store` and `wb` fixtures are parametrized for them).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import nokv

REPO = pathlib.Path(__file__).resolve().parents[2]
PENGUINS_CSV = REPO / "examples" / "penguins" / "penguins.csv"


def _binary(env: str, name: str) -> pathlib.Path:
    path = pathlib.Path(os.environ.get(env) or REPO / "target" / "debug" / name)
    if not path.is_file():
        raise RuntimeError(
            f"{path} is missing: build it first (cargo test --workspace builds it) "
            f"or set ${env}"
        )
    return path


def cli_path() -> pathlib.Path:
    """The nokv CLI binary of this checkout."""
    return _binary("NOKV_CLI", "nokv_cli")


def fault_cli_path() -> pathlib.Path:
    """The CLI built with fault points (nokv-tests' `nokv_cli`)."""
    return _binary("NOKV_FAULT_CLI", "nokv_cli")


def run_cli(store: pathlib.Path, *args: str, env: Optional[Dict[str, str]] = None,
            binary: Optional[pathlib.Path] = None, check: bool = False) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env.pop("NOKV_FAULT_POINT", None)
    if env:
        full_env.update(env)
    proc = subprocess.run(
        [str(binary or cli_path()), "--store", str(store), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"nokv {args} failed ({proc.returncode}): {proc.stdout}\n{proc.stderr}")
    return proc


def cli_tool(store: pathlib.Path, tool: str, args: Dict[str, Any]) -> Dict[str, Any]:
    """`nokv workbench <tool> '<json>'`, parsed."""
    proc = run_cli(store, "workbench", tool, json.dumps(args))
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def run_python(code: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (same nokv install), capturing output."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout
    )


def server_path() -> pathlib.Path:
    """The `nokv` binary that runs `nokv serve`."""
    return _binary("NOKV_BIN", "nokv")


#: The bearer token every test server requires.
TOKEN = "python-sdk-test-token"


class Server:
    """One `nokv serve` child process on a free loopback port (see :func:`start_server`)."""

    def __init__(self, proc: subprocess.Popen, url: str, stderr: List[str]) -> None:
        self.proc = proc
        self.url = url
        self.stderr = stderr

    def stop(self) -> None:
        """Kills the server (SIGKILL) and reaps it; idempotent."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=60)


def start_server(store: pathlib.Path, token: Optional[str] = TOKEN, timeout: float = 60) -> Server:
    """Starts `nokv serve --store STORE --listen 127.0.0.1:0` and waits (at most `timeout`
    seconds) for its `listening on http://ADDR` line. The process is killed and reaped when it
    fails to start."""
    env = dict(os.environ)
    env.pop("NOKV_TOKEN", None)
    env.pop("NOKV_FAULT_POINT", None)
    if token is not None:
        env["NOKV_TOKEN"] = token
    proc = subprocess.Popen(
        [str(server_path()), "--store", str(store), "serve", "--listen", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: List[str] = []
    found = threading.Event()
    url: List[str] = []

    def pump() -> None:  # reads stderr to the end so the child never blocks on a full pipe
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            m = re.search(r"listening on (http://\S+)", line)
            if m and not url:
                url.append(m.group(1))
                found.set()
        found.set()

    threading.Thread(target=pump, daemon=True).start()
    server = Server(proc, "", lines)
    try:
        if not found.wait(timeout) or not url:
            raise RuntimeError(f"nokv serve did not start: {''.join(lines)}")
        server.url = url[0]
        return server
    except BaseException:
        server.stop()
        raise


@pytest.fixture
def server(tmp_path: pathlib.Path) -> Iterator[Server]:
    """A running `nokv serve` on a fresh store (`tmp_path/served`), killed and reaped after the
    test whatever its outcome."""
    s = start_server(tmp_path / "served")
    try:
        yield s
    finally:
        s.stop()


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", "both_backends: run on an embedded and on a connected store"
    )


def pytest_generate_tests(metafunc: Any) -> None:
    if "store" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_backends"):
        metafunc.parametrize("store", ["embedded", "connected"], indirect=True)


@pytest.fixture
def store_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "store"


@pytest.fixture
def store(request: Any, store_dir: pathlib.Path) -> Iterator[nokv.Store]:
    """An embedded store in `store_dir`; for `both_backends` tests also a store connected to a
    `nokv serve` of `store_dir`."""
    if getattr(request, "param", "embedded") == "connected":
        srv = start_server(store_dir)
        try:
            s = nokv.connect(srv.url, token=TOKEN)
            try:
                yield s
            finally:
                s.close()
        finally:
            srv.stop()
        return
    s = nokv.open(store_dir)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def wb(store: nokv.Store) -> nokv.Workbench:
    return store.create_workbench("wb")
