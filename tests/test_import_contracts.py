"""The layering written as import contracts in pyproject.toml ([tool.importlinter]) holds, and a
forbidden import added to a copy of the package breaks it, naming the import.

``lint-imports`` (import-linter) reads the graph grimp builds from the source; it holds imports
inside functions as well as at module level (the deliberate import below is inside a function).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).parent / "lint-imports"


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [str(LINT), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _contract_names() -> list[str]:
    return [
        c["name"]
        for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
            "contracts"
        ]
    ]


def test_the_import_contracts_hold():
    names = _contract_names()
    assert len(names) >= 5
    r = _lint(ROOT)
    out = " ".join((r.stdout + r.stderr).split())  # the report wraps long names
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(names)} kept, 0 broken" in out, out
    for name in names:
        assert f"{' '.join(name.split())} KEPT" in out, name


def test_a_forbidden_import_inside_a_function_breaks_the_contracts(tmp_path):
    shutil.copytree(
        ROOT / "ipusim", tmp_path / "ipusim", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    step = tmp_path / "ipusim" / "training" / "step.py"
    step.write_text(
        step.read_text() + "\n\ndef _prices_from_the_checklist():\n"
        "    from ..checklist import case\n\n    return case\n"
    )
    r = _lint(tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "Training and the claims do not import the checklist BROKEN" in " ".join(out.split()), (
        out
    )
    assert "ipusim.training is not allowed to import ipusim.checklist" in out, out
    assert "ipusim.training.step -> ipusim.checklist" in out, out
