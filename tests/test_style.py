"""The code is linted and formatted by one tool, ruff, as pyproject.toml configures it: a change that
is not formatted, or that ruff's lint rules refuse, fails here and names the files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUFF = Path(sys.executable).parent / "ruff"
PATHS = ["ipusim", "tests", "benchmarks"]


@pytest.fixture(scope="module")
def ruff():
    if not RUFF.exists():
        pytest.skip(f"ruff is not installed beside {sys.executable} (it comes with the test extra)")
    return str(RUFF)


def test_ruff_format_leaves_every_file_as_it_is(ruff):
    r = subprocess.run(
        [ruff, "format", "--check", *PATHS], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 0, f"run `ruff format {' '.join(PATHS)}`:\n{r.stdout}{r.stderr}"


def test_ruff_check_finds_nothing(ruff):
    r = subprocess.run([ruff, "check", *PATHS], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, f"{r.stdout}{r.stderr}"


def test_the_format_check_fails_on_an_unformatted_file(ruff, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x = {  'a':1 }\n")
    r = subprocess.run(
        [ruff, "format", "--check", "--config", str(ROOT / "pyproject.toml"), str(bad)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and "bad.py" in (r.stdout + r.stderr)
