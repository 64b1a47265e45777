"""The planner package's layering: each module imports only the ones below it (no cycle), and
none imports another's private names; the tests' references reach every planner module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import tileplan_reference

from ipusim import hardware, tileplan, workloads
from ipusim.tileplan import attention as tp_attention
from ipusim.tileplan import base as tp_base
from ipusim.tileplan import matmul as tp_matmul

PKG = Path(tileplan.__file__).parent
# module -> the sibling modules it may import (base at the bottom, step on top)
ALLOWED = {
    "base": set(),
    "search": set(),
    "matmul": {"base", "search"},
    "attention": {"base", "search"},
    "rows": {"base", "search"},
    "step": {"base", "matmul", "attention", "rows"},
    "__init__": {"base", "search", "matmul", "attention", "rows", "step"},
}


def _sibling_imports(path: Path):
    """(module, names) of every ``from .module import names`` in ``path``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            yield node.module, [a.name for a in node.names]


def test_every_module_is_listed_and_imports_only_the_layers_below_it():
    assert {p.stem for p in PKG.glob("*.py")} == set(ALLOWED)
    for path in PKG.glob("*.py"):
        for module, names in _sibling_imports(path):
            assert module in ALLOWED[path.stem], (path.name, module)
            assert not [n for n in names if n.startswith("_")], (path.name, module, names)


def test_plain_swaps_the_references_into_every_planner_module(monkeypatch):
    """Inside ``tileplan_reference.plain()`` the matmul, attention and dealing code runs the
    references (counted here); outside, and after an error inside, it runs the kernels again."""
    calls = {"grid": 0, "attention": 0, "deal": 0}

    def counted(name, fn):
        def wrapper(*args):
            calls[name] += 1
            return fn(*args)

        return wrapper

    monkeypatch.setattr(
        tileplan_reference, "best_grid_numpy", counted("grid", tileplan_reference.best_grid_numpy)
    )
    monkeypatch.setattr(
        tileplan_reference,
        "attention_cost",
        counted("attention", tileplan_reference.attention_cost),
    )
    monkeypatch.setattr(
        tileplan_reference, "distribute", counted("deal", tileplan_reference.distribute)
    )
    c, s = hardware.chip("gc200"), workloads.step("bert-base", [16], pad_to=16)
    kernels = (tp_matmul._best_grid, tp_attention._attention_cost, tp_base._distribute)
    tileplan.clear_plan_cache()
    tileplan.plan_step(c, s)
    assert calls == {"grid": 0, "attention": 0, "deal": 0}
    with tileplan_reference.plain():
        tileplan.plan_step(c, s)
    assert min(calls.values()) > 0, calls
    with pytest.raises(RuntimeError), tileplan_reference.plain():
        raise RuntimeError("inside")
    assert (tp_matmul._best_grid, tp_attention._attention_cost, tp_base._distribute) == kernels
