"""Which notebooks tests/test_browser.py runs in Chromium (and tests/test_notebooks.py then leaves
to it), and whether Chromium is here at all."""

from __future__ import annotations

import importlib.util
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"  # Debian's chromium package (.ci/run installs it when missing)
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
