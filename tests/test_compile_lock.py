"""The Numba cache's compile lock (``ipusim._numba_cache``): two processes that share a cache
and need the same kernel at the same moment compile it once; the other waits and loads it."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="no fcntl: the lock is skipped on Windows"
)

KERNEL = """
from numba import njit


@njit(cache=True)
def mix(x):
    s = 0.0
    for i in range(x.size):
        s += x[i] * (i % 7) - s * 1e-9
    return s
"""

RUNNER = """
import json, os, sys, time
sys.path.insert(0, {here!r})
import numpy as np
import ipusim  # installs the lock before the kernel is defined
import kern

me, ready = sys.argv[1], {here!r} + "/ready-" + sys.argv[1]
open(ready, "w").close()
deadline = time.monotonic() + 120
while not all(os.path.exists({here!r} + "/ready-" + w) for w in ("a", "b")):
    if time.monotonic() > deadline:
        raise SystemExit("the other process never started")
    time.sleep(0.001)
value = kern.mix(np.arange(10.0))
st = kern.mix.stats
print(json.dumps({{"value": value, "misses": sum(st.cache_misses.values()),
                   "hits": sum(st.cache_hits.values())}}))
"""


def test_two_processes_compile_a_kernel_once(tmp_path):
    (tmp_path / "kern.py").write_text(textwrap.dedent(KERNEL))
    (tmp_path / "run.py").write_text(RUNNER.format(here=str(tmp_path)))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    procs = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "run.py"), w],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w in ("a", "b")
    ]
    got = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        got.append(json.loads(out))
    assert got[0]["value"] == got[1]["value"]
    # one compiled (a miss), the other waited for its lock and loaded what it saved (a hit)
    assert sorted(g["misses"] for g in got) == [0, 1], got
    assert sorted(g["hits"] for g in got) == [0, 1], got
    locks = list((tmp_path / "cache").rglob("*.ipusim-lock"))
    assert len(locks) == 1 and locks[0].name.startswith("kern.mix")
