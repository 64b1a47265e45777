"""The benchmark script runs end to end at its quick size (no time limits asserted)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_benchmark_script_runs_quick():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick"],
        capture_output=True, text=True, timeout=900, check=False,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("benchmark"), out.stdout
    assert len(lines) >= 3, f"benchmark printed no rows:\n{out.stdout}"
