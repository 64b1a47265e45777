"""The planner package's layering: each module imports only the ones below it (no cycle), and
none imports another's private names; the fast / exhaustive switch is one state for all."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ipusim import hardware, tileplan, workloads
from ipusim.tileplan import attention as tp_attention
from ipusim.tileplan import matmul as tp_matmul

PKG = Path(tileplan.__file__).parent
# module -> the sibling modules it may import (base at the bottom, step on top)
ALLOWED = {"base": set(), "search": set(), "matmul": {"base", "search"}, "attention": {"base", "search"},
           "rows": {"base"}, "step": {"base", "matmul", "attention", "rows"},
           "__init__": {"base", "search", "matmul", "attention", "rows", "step"}}


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


def test_exhaustive_switches_the_searches_of_every_module(monkeypatch):
    """Inside ``exhaustive()`` the matmul and attention planners run the searches their kernels
    replaced (counted here), outside they do not."""
    calls = {"grid": 0, "attention": 0}

    def counted(name, fn):
        def wrapper(*args):
            calls[name] += 1
            return fn(*args)
        return wrapper

    monkeypatch.setattr(tp_matmul, "_best_grid_numpy", counted("grid", tp_matmul._best_grid_numpy))
    monkeypatch.setattr(tp_attention, "_attention_cost_tables",
                        counted("attention", tp_attention._attention_cost_tables))
    c, s = hardware.chip("gc200"), workloads.step("bert-base", [16], pad_to=16)
    tileplan.clear_plan_cache()
    tileplan.plan_step(c, s)
    assert calls == {"grid": 0, "attention": 0}
    with tileplan.exhaustive():
        tileplan.plan_step(c, s)
    assert calls["grid"] > 0 and calls["attention"] > 0, calls


def test_exhaustive_restores_the_fast_search_on_error():
    assert tileplan.fast_search()
    with pytest.raises(RuntimeError), tileplan.exhaustive():
        assert not tileplan.fast_search()
        raise RuntimeError("inside")
    assert tileplan.fast_search()
