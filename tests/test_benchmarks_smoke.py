"""Each benchmark file runs end to end at its quick size (no time limits asserted).

One test per ``benchmarks/bench_*.py`` file, so the runs spread over the test workers.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHES = sorted(p.stem for p in (ROOT / "benchmarks").glob("bench_*.py"))


def test_every_benchmark_file_is_found():
    assert len(BENCHES) >= 10, BENCHES


@pytest.mark.parametrize("bench", BENCHES)
def test_benchmark_file_runs_quick(bench):
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--only", bench],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("benchmark"), out.stdout
    assert len(lines) >= 3, f"{bench} printed no rows:\n{out.stdout}"
