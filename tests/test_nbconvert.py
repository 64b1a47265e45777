"""A notebook run the ordinary headless way: ``jupyter nbconvert --to notebook --execute``, in a
subprocess, under the default (inline) backend, as a reader or a teacher would run it.

The test suite's own runner (tests/test_notebooks.py) uses Agg through nbclient directly and
never saw the stall this guards against: nbclient mirrors a widget's output area, and output
routed into one during a cell made it miss the cell's reply until the cell timeout, after which
the run went on and exited 0 (see ``ipusim.widgets.explorer``). So besides exit status 0 and no
error outputs, the test looks for that stall's signature: a wait as long as the cell timeout
between a cell's reply and the next cell's start (or the end of the run).

The default suite runs ``NBCONVERT_NOTEBOOK`` this way (tests/test_notebooks.py leaves it to this
file); the slow-marked test runs every notebook this way.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
from browser_notebooks import NBCONVERT_NOTEBOOK

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
CELL_TIMEOUT_S = 300  # nbconvert's per-cell timeout; a stall waits this long, then goes on
STALL_FRACTION = 0.8  # a wait of this share of the cell timeout or more is the stall, not work


def _when(stamp: str) -> dt.datetime:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def run_nbconvert(name: str, out_dir: Path) -> list[str]:
    """Execute notebook ``name`` with nbconvert under the default backend in quick mode; return
    the problems found (empty when the run is clean)."""
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # the default backend a reader gets: inline
    env["IPUSIM_QUICK"] = "1"
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "nbconvert",
        "--to",
        "notebook",
        "--execute",
        f"--ExecutePreprocessor.timeout={CELL_TIMEOUT_S}",
        "--output-dir",
        str(out_dir),
        str(NOTEBOOK_DIR / name),
    ]
    proc = subprocess.run(
        cmd, env=env, capture_output=True, text=True, cwd=NOTEBOOK_DIR, timeout=CELL_TIMEOUT_S * 10
    )
    ended = dt.datetime.now(dt.timezone.utc)
    if proc.returncode != 0:
        return [f"{name}: nbconvert exited {proc.returncode}: {proc.stderr[-2000:]}"]
    nb = nbformat.read(out_dir / name, as_version=4)
    problems = []
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    for i, cell in code:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                problems.append(f"{name} cell {i}: {out.get('ename')}: {out.get('evalue')}")
    # the stall's signature: the next cell starts (or the run ends) a whole timeout after a reply
    starts = [_when(c.metadata["execution"]["iopub.execute_input"]) for _, c in code[1:]] + [ended]
    for (i, cell), start in zip(code, starts, strict=True):
        wait_s = (start - _when(cell.metadata["execution"]["shell.execute_reply"])).total_seconds()
        if wait_s >= STALL_FRACTION * CELL_TIMEOUT_S:
            problems.append(
                f"{name} cell {i}: the run waited {wait_s:.0f} s after the cell's reply "
                f"(cell timeout {CELL_TIMEOUT_S} s): the nbclient stall"
            )
    return problems


def test_a_notebook_runs_with_nbconvert_under_the_default_backend():
    with tempfile.TemporaryDirectory(prefix="ipusim-nbconvert-") as out:
        problems = run_nbconvert(NBCONVERT_NOTEBOOK, Path(out))
    assert not problems, "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb")))
def test_every_notebook_runs_with_nbconvert_under_the_default_backend(name):
    with tempfile.TemporaryDirectory(prefix="ipusim-nbconvert-") as out:
        problems = run_nbconvert(name, Path(out))
    assert not problems, "\n".join(problems)
