"""The rule of ``ipusim/__init__.py``: kernels are the library's only path. No function of the
package is a plain reference (``*_reference``) and none takes a switch to run one (``engine``,
``use_kernel``, ``exhaustive``, ``reference``, ``ref``); the references live in
``tests/*_reference.py``. Read from the AST of every module."""

from __future__ import annotations

import ast
from pathlib import Path

import ipusim

PKG = Path(ipusim.__file__).parent
SWITCHES = {"engine", "use_kernel", "exhaustive", "reference", "ref"}
KNOWN: set = set()


def _violations(source: str, rel: str) -> list:
    """(module, function, what) of every reference function and every switch parameter."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (rel, node.name) not in KNOWN
        ):
            a = node.args
            names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
            if node.name.endswith("_reference"):
                out.append((rel, node.name, "reference"))
            if names & SWITCHES:
                out.append((rel, node.name, f"switch {sorted(names & SWITCHES)}"))
    return out


def test_no_reference_and_no_switch_in_the_package():
    found = [
        v
        for path in sorted(PKG.rglob("*.py"))
        for v in _violations(path.read_text(), path.relative_to(PKG).as_posix())
    ]
    assert not found, found


def test_the_check_finds_a_switch_and_a_reference():
    src = "def run(x, *, engine='numba'):\n    pass\n\ndef run_reference(x):\n    pass\n"
    assert _violations(src, "m.py") == [
        ("m.py", "run", "switch ['engine']"),
        ("m.py", "run_reference", "reference"),
    ]
