"""Which notebooks tests/test_browser.py runs in Chromium (and tests/test_notebooks.py then leaves
to it), whether Chromium is here at all, and how it is started (also by tests/test_site.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"  # Debian's chromium package (.ci/run installs it when missing)
# headless, and nothing of its own on the network (tests/test_browser.py, tests/test_site.py)
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
BROWSER_NOTEBOOKS = sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb"))


def chromium_missing() -> str | None:
    """Why the browser test cannot run here, or None when it can."""
    if not Path(CHROMIUM).is_file():
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium chromium-driver; .ci/run does this)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


# tests/test_nbconvert.py's default-suite notebook (the others run that way under -m slow)
NBCONVERT_NOTEBOOK = "07_sparse_embeddings.ipynb"


def executed_elsewhere(name: str) -> str | None:
    """Why tests/test_notebooks.py need not execute notebook ``name`` in the default run (another
    default-run test executes it, with stricter checks), or None when it must."""
    if name == NBCONVERT_NOTEBOOK:
        return "executed by tests/test_nbconvert.py (nbconvert, default backend)"
    if name in BROWSER_NOTEBOOKS and chromium_missing() is None:
        return "executed by tests/test_browser.py (JupyterLab in Chromium, default backend)"
    return None


def runtime_warnings(notebook: str, streams) -> list[str]:
    """The lines of a notebook run's cell outputs that show a Python ``RuntimeWarning`` (a division
    by zero, an overflow, a mean of nothing: a number the lesson may print wrong), one problem a
    line. ``streams`` holds (code cell index, stream name, text) of every stream output."""
    return [
        f"{notebook}: code cell {i} printed to {name}: {line.strip()[:300]}"
        for i, name, text in streams
        for line in text.splitlines()
        if "RuntimeWarning" in line
    ]


def stream_outputs(nb) -> list[tuple[int, str, str]]:
    """(code cell index, stream name, text) of every stream output of an executed nbformat notebook."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    return [
        (i, o.get("name", ""), "".join(o.get("text", "")))
        for i, c in enumerate(code)
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream"
    ]
