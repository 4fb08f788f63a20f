#!/usr/bin/env python3
"""Per-call overhead of the Python SDK over the Rust SDK on the same store.

    python python/bench/overhead.py [--stats N] [--puts N] [--rounds R] [--profile P]

Builds nothing itself: it runs `cargo bench -p nokv-python --bench sdk_call -- STORE …` (release
profile) for the Rust side, then the same calls from Python (`Workbench.stat` of the same 4 KiB
file, create-only `Workbench.put` of 4 KiB at fresh paths) on the same store, alternating the two
sides for `--rounds` rounds (the store is opened by one process at a time). Prints the mean time
per call of each side and the difference, which is what Python adds per call. Install the wheel
built in release mode first (`pip install ./python`) so both sides run optimized code.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import time

import nokv

REPO = pathlib.Path(__file__).resolve().parents[2]


def rust_side(store: str, stats: int, puts: int, profile: str) -> dict:
    out = subprocess.run(
        ["cargo", "bench", "-q", "--profile", profile, "-p", "nokv-python", "--bench", "sdk_call",
         "--", store, str(stats), str(puts)],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def python_side(store: str, stats: int, puts: int, run: int) -> dict:
    with nokv.open(store) as s:
        wb = s.workbench("bench")
        body = b"\x07" * 4096
        st = wb.stat
        t0 = time.perf_counter_ns()
        for _ in range(stats):
            st("input/stat.bin")
        stat_ns = (time.perf_counter_ns() - t0) / stats
        put = wb.put
        t0 = time.perf_counter_ns()
        for i in range(puts):
            put(f"outputs/py/{run}/{i}.bin", body)
        put_ns = (time.perf_counter_ns() - t0) / puts
    return {"stat_ns": stat_ns, "put_ns": put_ns}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stats", type=int, default=20000)
    p.add_argument("--puts", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--profile",
        default="bench",
        help="cargo profile of the Rust side; build the wheel with the same one (default: bench)",
    )
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="nokv-overhead-") as d:
        store = os.path.join(d, "store")
        rust_side(store, 100, 10, a.profile)  # creates the store, warms the build
        rs, py = [], []
        for r in range(a.rounds):
            rs.append(rust_side(store, a.stats, a.puts, a.profile))
            py.append(python_side(store, a.stats, a.puts, r))
        for op in ("stat_ns", "put_ns"):
            r_med = statistics.median(x[op] for x in rs)
            p_med = statistics.median(x[op] for x in py)
            print(
                f"{op[:-3]:>5}: rust {r_med / 1000:8.2f} µs  python {p_med / 1000:8.2f} µs  "
                f"python adds {(p_med - r_med) / 1000:+7.2f} µs/call  (ratio {p_med / r_med:.2f}; "
                f"median of {a.rounds} rounds)"
            )


if __name__ == "__main__":
    main()
