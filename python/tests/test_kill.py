"""`kill -9` of a Python writer, then reopen: nothing acknowledged is lost, nothing is
half-visible."""

from __future__ import annotations

import hashlib
import os
import pathlib
import signal
import subprocess
import sys
import time

import nokv

WRITER = r'''
import sys
import nokv

def body(i):
    # Sizes vary from a few bytes to several 4 MiB blocks.
    size = (i * 7919) % (9 * 1024 * 1024) + 1
    pattern = (str(i).encode() + b"|") * 64
    return (pattern * (size // len(pattern) + 1))[:size]

store = nokv.open(sys.argv[1])
wb = store.create_workbench("kill")
i = 0
while True:
    wb.put(f"outputs/f{i:05d}.bin", body(i))
    print(f"ACK {i}", flush=True)
    i += 1
'''


def body(i: int) -> bytes:
    size = (i * 7919) % (9 * 1024 * 1024) + 1
    pattern = (str(i).encode() + b"|") * 64
    return (pattern * (size // len(pattern) + 1))[:size]


def test_sigkill_of_a_writer_loses_no_acknowledged_put(tmp_path: pathlib.Path) -> None:
    for round_ in range(3):
        store_dir = tmp_path / f"store{round_}"
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store_dir)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        acked = []
        deadline = time.monotonic() + 120
        assert proc.stdout is not None
        # Kill after a different number of acknowledgements per round, mid-write.
        while len(acked) < 4 + 3 * round_ and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked.append(int(line.split()[1]))
        time.sleep(0.05 * round_)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert acked, proc.stderr.read() if proc.stderr else ""
        with nokv.open(store_dir) as s:
            wb = s.workbench("kill")
            visible = {st.key: st for st in wb.walk("outputs")}
            for i in acked:
                key = f"outputs/f{i:05d}.bin"
                assert key in visible, f"acknowledged {key} lost"
            for key, st in visible.items():
                i = int(key[len("outputs/f") : -len(".bin")])
                expected = body(i)
                assert st.size_bytes == len(expected)
                data = wb.read_bytes(key)
                assert hashlib.sha256(data).hexdigest() == hashlib.sha256(expected).hexdigest(), key
