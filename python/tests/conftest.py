"""Shared fixtures of the Python SDK tests.

The CLI comparisons run the nokv CLI of the same checkout: `$NOKV_CLI` when set, else
`target/debug/nokv_cli` — the CLI that `cargo test --workspace` builds in the nokv-tests crate
(fault points compiled in, inert unless `NOKV_FAULT_POINT` is set; the crash tests set it).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
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


@pytest.fixture
def store_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "store"


@pytest.fixture
def store(store_dir: pathlib.Path) -> Iterator[nokv.Store]:
    s = nokv.open(store_dir)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def wb(store: nokv.Store) -> nokv.Workbench:
    return store.create_workbench("wb")
