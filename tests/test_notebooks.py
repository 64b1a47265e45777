"""Every notebook runs headless, top to bottom, as a test; and is committed stripped. Under
``-m slow`` each runs at full size too, where every number its prose quotes must equal the output
that prints it (``tests/prose_numbers.py``) and no progress bar may be stored."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbclient
import nbformat
import prose_numbers
import pytest
from browser_notebooks import executed_elsewhere, runtime_warnings, stream_outputs

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 600  # per cell; the whole default suite stays far below this


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stripped_and_uses_python3(path):
    nb = json.loads(path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert not cell.get("outputs"), f"{path.name} cell {i} has outputs: strip them"
            assert cell.get("execution_count") is None, (
                f"{path.name} cell {i} has an execution count"
            )
        src = "".join(cell["source"])
        assert "sys.path" not in src, f"{path.name} cell {i} edits sys.path; import ipusim instead"


def _execute(path: Path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any error or failed assert
    problems = runtime_warnings(path.name, stream_outputs(nb))
    assert not problems, "\n".join(problems)
    return nb


def test_a_printed_runtime_warning_is_a_problem():
    """The check both notebook runners apply (here and tests/test_browser.py) finds a warning
    line in a cell's stderr, and nothing in clean output."""
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                outputs=[nbformat.v4.new_output("stream", name="stdout", text="p99 1.2 ms\n")]
            ),
            nbformat.v4.new_markdown_cell("RuntimeWarning in prose is not an output"),
            nbformat.v4.new_code_cell(
                outputs=[
                    nbformat.v4.new_output(
                        "stream",
                        name="stderr",
                        text="/x/ipusim/serving/sim.py:12: RuntimeWarning: Mean of empty slice\n  m = a.mean()\n",
                    )
                ]
            ),
        ]
    )
    found = runtime_warnings("nb.ipynb", stream_outputs(nb))
    assert len(found) == 1 and "code cell 1" in found[0] and "Mean of empty slice" in found[0]
    assert runtime_warnings("nb.ipynb", stream_outputs(nb)[:1]) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_headless(path, monkeypatch):
    # a notebook that another default-run test executes (nbconvert or Chromium, default backend,
    # with stricter checks) is not executed twice; the reason shows in the skip line
    reason = executed_elsewhere(path.name)
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("IPUSIM_QUICK", os.environ.get("IPUSIM_QUICK", "1"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    _execute(path)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_full_mode(path, monkeypatch):
    """The full size a reader gets in JupyterLab: the asserts on taught numbers hold there too."""
    monkeypatch.setenv("IPUSIM_QUICK", "0")
    monkeypatch.setenv("IPUSIM_PROGRESS", "0")  # headless: no bar stored as a frozen "0%"
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = _execute(path)
    # every number the prose quotes equals the output that prints it (tests/prose_numbers.py)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    stdout = "\n".join(text for _, name, text in stream_outputs(nb) if name == "stdout")
    found = prose_numbers.problems(path.name, markdown, stdout)
    bars = [
        f"{path.name}: code cell {i} stores a progress bar"
        for i, _, t in stream_outputs(nb)
        if "0%|" in t
    ]
    assert not found + bars, "\n".join(found + bars)
