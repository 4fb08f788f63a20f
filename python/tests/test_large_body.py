"""A 200 MB body is put from a stream and read back through a file object with bounded memory.

Runs in a fresh interpreter so its peak RSS (VmHWM) reflects only this workload: the growth of
the peak over the RSS after `nokv.open` must stay under 64 MB (the body streams in 4 MiB blocks;
reads go through the one-block cache of the file object).
"""

from __future__ import annotations

import json
import pathlib

from conftest import run_python

SCRIPT = r'''
import hashlib, json, sys
import nokv

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(field)

SIZE = 200 * 1024 * 1024

class Generated:
    """A binary stream of SIZE deterministic bytes, produced chunk by chunk."""
    def __init__(self):
        self.done = 0
        self.h = hashlib.sha256()
        self.block = bytes(range(256)) * 4096  # 1 MiB pattern
    def read(self, n=-1):
        if n is None or n < 0:
            n = SIZE - self.done
        n = min(n, SIZE - self.done)
        if n == 0:
            return b""
        off = self.done % len(self.block)
        out = (self.block[off:] + self.block)[:n] if off + n > len(self.block) else self.block[off:off + n]
        self.done += n
        self.h.update(out)
        return out

store = nokv.open(sys.argv[1])
wb = store.create_workbench("big")
baseline = status("VmRSS")
src = Generated()
put = wb.put("outputs/body.bin", src)
assert put.size_bytes == SIZE, put.size_bytes
after_put = status("VmHWM")
h = hashlib.sha256()
with wb.open("outputs/body.bin") as f:
    while True:
        chunk = f.read(1024 * 1024)
        if not chunk:
            break
        h.update(chunk)
peak = status("VmHWM")
print(json.dumps({
    "size": put.size_bytes,
    "digest_ok": put.digest_uri == "sha256:" + src.h.hexdigest() == "sha256:" + h.hexdigest(),
    "baseline": baseline,
    "peak_after_put": after_put,
    "peak": peak,
}))
'''


def test_200mb_put_and_read_back_stay_within_64mb_of_rss(tmp_path: pathlib.Path) -> None:
    proc = run_python(SCRIPT, str(tmp_path / "store"), timeout=900)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["size"] == 200 * 1024 * 1024
    assert out["digest_ok"] is True
    growth = out["peak"] - out["baseline"]
    print(f"peak RSS growth: {growth / 2**20:.1f} MiB (put: {(out['peak_after_put'] - out['baseline']) / 2**20:.1f} MiB)")
    assert growth < 64 * 1024 * 1024, out
