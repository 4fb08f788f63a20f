"""examples/penguins.py prints the same values as `nokv demo` and is idempotent."""

from __future__ import annotations

import pathlib
import subprocess
import sys

from conftest import REPO, run_cli

EXAMPLE = REPO / "examples" / "penguins.py"


def run_example(store: pathlib.Path) -> list:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), str(store)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_example_prints_the_demo_values_and_reruns_idempotently(tmp_path: pathlib.Path) -> None:
    py_lines = run_example(tmp_path / "py")
    demo = run_cli(tmp_path / "cli", "demo", check=True)
    cli_lines = demo.stdout.splitlines()
    assert py_lines[0] == f"store: {tmp_path / 'py'}"
    assert cli_lines[0].startswith("store: ")
    # Every other line — table, commit ids, parents, generations, snapshot id and read version,
    # restore and object counts, find, search and aggregate results — is identical.
    assert py_lines[1:] == cli_lines[1:]
    assert "17 artifacts published in this run (0 = re-run with identical results)" in py_lines

    again = run_example(tmp_path / "py")
    assert again[-2] == "0 artifacts published in this run (0 = re-run with identical results)"
    assert again[-1] == "0 commits created, 4 replayed (idempotent_replay) in this run"
    assert any("already restored: exact replay" in line for line in again)
    assert any('"gentoo-baseline"' in line and "(reused)" in line for line in again)


def test_example_on_a_demo_store_publishes_nothing(tmp_path: pathlib.Path) -> None:
    store = tmp_path / "shared"
    run_cli(store, "demo", check=True)
    lines = run_example(store)
    # Same bytes, types and index fields as the Rust demo produced: nothing to publish, and the
    # same commit requests replay.
    assert lines[-2].startswith("0 artifacts published")
    assert lines[-1] == "0 commits created, 4 replayed (idempotent_replay) in this run"
