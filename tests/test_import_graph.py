"""The package's import graph has no cycle, counting imports inside functions.

The graph is read from the source (the AST of every module in ``ipusim/``), not from a run: an
edge for every ``import`` and ``from ... import`` at module level or inside a function or
method. Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first, so an edge to
a module is also an edge to each package above it (except the importer's own packages, which
are already importing). A cycle through ``__init__`` modules is a cycle all the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "ipusim"


def modules(root: Path = ROOT, package: str = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (path, is a package ``__init__``) for every module of ``package``."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (module level and inside functions)."""
    mods = modules(root, package)

    def known(name: str) -> str | None:  # the module a dotted name lives in
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, (path, is_pkg) in mods.items():
        base = name if is_pkg else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets |= {known(a.name) for a in node.names if a.name.split(".")[0] == package}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    up = base.split(".")[: len(base.split(".")) - (node.level - 1)]
                    where = ".".join(up + ([node.module] if node.module else []))
                else:
                    where = node.module or ""
                if where.split(".")[0] != package:
                    continue
                for a in node.names:  # ``from pkg import mod`` imports the module pkg.mod
                    targets.add(
                        known(f"{where}.{a.name}") if f"{where}.{a.name}" in mods else known(where)
                    )
        for t in list(targets):  # importing a.b.c runs a.b's __init__ first
            if t:
                parts = t.split(".")
                targets |= {".".join(parts[:i]) for i in range(2, len(parts))}
        own = {".".join(name.split(".")[:i]) for i in range(1, len(name.split(".")) + 1)}
        graph[name] = {t for t in targets if t and t not in own}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = 0

    def visit(v):
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _describe(comp: list[str], graph: dict[str, set[str]]) -> str:
    inside = set(comp)
    return "; ".join(f"{v} -> {w}" for v in comp for w in sorted(graph[v] & inside))


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 100
    assert "ipusim.placement" in graph["ipusim.machine"]  # an import inside machine.simulate
    found = cycles(graph)
    assert not found, "import cycles (edges inside each): " + " | ".join(
        _describe(c, graph) for c in found
    )


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .sub import c\n    return c\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("import pkg.a\n")
    (pkg / "d.py").write_text("from .sub import c\n")  # into the cycle, not part of it
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.b"] == {"pkg.sub", "pkg.sub.c"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    (pkg / "sub" / "__init__.py").write_text("from .. import d\n")  # a cycle through an __init__
    assert cycles(import_graph(tmp_path, "pkg")) == [
        ["pkg.a", "pkg.b", "pkg.d", "pkg.sub", "pkg.sub.c"]
    ]
