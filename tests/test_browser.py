"""The notebooks as a reader sees them: JupyterLab in headless Chromium.

One JupyterLab server (127.0.0.1, a free port, a generated token, settings/runtime/config in a
temporary folder, serving copies of the notebooks so that nothing is written back) and one
Chromium (Debian's /usr/bin/chromium driven by playwright; never a browser playwright downloads)
per session. For each notebook: open it, run all cells with the default (inline) backend and
``IPUSIM_QUICK=1`` in the kernel's environment, check that no output shows a traceback or
"Error displaying widget" and that no cell printed a Python ``RuntimeWarning``, that every explorer rendered, move one control of each explorer and
check that its output changes (notebook 05's form: a bad candidates string must show
"ValueError: ..." and a good one a new report; notebook 08's heat map: two equal axes must show
"ValueError: ..." and swapping them a new heat map), and save screenshots of the whole notebook,
page by page, to ``screenshots/<notebook>/`` (git-ignored) for a person to look at.

These runs are also the executions of these notebooks in the default suite (together with the
nbconvert run in tests/test_nbconvert.py): tests/test_notebooks.py leaves to this file the
notebooks listed in ``BROWSER_NOTEBOOKS`` when Chromium is installed, so a notebook is executed
once per default run, not twice. Skipped, with the reason, where no Chromium is installed
(`.ci/run` installs Debian's chromium and chromium-driver when /usr/bin/chromium is missing).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from browser_notebooks import (
    BROWSER_NOTEBOOKS,
    CHROMIUM,
    CHROMIUM_FLAGS,
    chromium_missing,
    runtime_warnings,
)

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
SCREENSHOTS = ROOT / "screenshots"
RUN_TIMEOUT_S = 600  # one notebook's "run all", in quick mode on a loaded 2-core machine
WIDGET_TIMEOUT_S = 180  # one explorer's answer to a moved control

# What each notebook's explorer does when moved: a list of (control label, value) steps, each
# followed by what its output must then show: "changed" (a new view, no error line) or
# "ValueError" (the one-line message of ipusim.widgets.explorer). Label "candidates" is a text
# box (typed, then Return); the others are drop-downs.
MOVES = {
    "01_memory_wall.ipynb": [("chip", "h100-sxm", "changed")],
    "02_tile_local_compute.ipynb": [("chip", "a100-80gb", "changed")],
    "03_dynamic_batching.ipynb": [("policy", "static", "changed")],
    "04_unpadded_inference.ipynb": [("strategy", "ffd", "changed")],
    "05_poc_checklist.ipynb": [
        ("candidates", "gc200:two", "ValueError"),
        ("candidates", "gc200:2,a100-80gb:1", "changed"),
    ],
    "06_training_at_scale.ipynb": [("chip", "a100-80gb", "changed")],
    "07_sparse_embeddings.ipynb": [("chip", "h100-sxm", "changed")],
    "08_design_space.ipynb": [("y", None, "ValueError"), ("x", None, "changed")],
    "09_verdicts.ipynb": [],  # no explorer: the verdicts and the validation are read, not moved
}


pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_settings(settings: Path) -> None:
    """JupyterLab user settings: every cell in the DOM (no virtual scrolling, so outputs can be
    read and photographed), no autosave, no news or update requests."""
    for plugin, values in {
        "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none", "scrollPastEnd": False},
        "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
        "@jupyterlab/apputils-extension/notification": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
    }.items():
        path = settings / (plugin + ".jupyterlab-settings")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


@pytest.fixture(scope="module")
def workdir():
    """A private temporary folder for the server and the browser profile (not pytest's basetemp,
    which another pytest run of the same user may prune while this one still uses it)."""
    with tempfile.TemporaryDirectory(prefix="ipusim-browser-", ignore_cleanup_errors=True) as d:
        yield Path(d)


@pytest.fixture(scope="module")
def lab(workdir):
    """A JupyterLab server on a free local port serving copies of the notebooks; yields its
    base URL with the token."""
    base = workdir / "lab"
    base.mkdir()
    work = base / "notebooks"  # the repository's layout: notebook 05 reads ../examples
    work.mkdir()
    for nb in BROWSER_NOTEBOOKS:
        shutil.copy(NOTEBOOK_DIR / nb, work / nb)
    for sibling in ("examples", "docs"):
        if (ROOT / sibling).is_dir():
            (base / sibling).symlink_to(ROOT / sibling, target_is_directory=True)
    _write_settings(base / "settings")
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # the reader's default backend: inline
    env.update(
        IPUSIM_QUICK="1",
        JUPYTER_CONFIG_DIR=str(base / "config"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
    )
    token = secrets.token_hex(16)
    port = _free_port()
    log = open(base / "server.log", "w")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--port-retries=0",
            "--allow-root",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={base}",
            "--LabApp.expose_app_in_browser=True",
            "--ServerApp.terminals_enabled=False",
        ],
        cwd=base,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"jupyter lab exited {proc.returncode}: {(base / 'server.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("jupyter lab did not answer within 120 s")
            time.sleep(0.5)
        print(f"JupyterLab server up in {time.monotonic() - t0:.0f} s")
        yield url, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def page(lab, workdir):
    """One headless Chromium (new empty profile) with JupyterLab loaded."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
    )
    url, token = lab
    t0 = time.monotonic()
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(workdir / "chromium-profile"),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 1600},
        )
        # the page talks only to the local server
        context.route(
            "**/*",
            lambda route: (
                route.continue_()
                if route.request.url.startswith(url) or route.request.url.startswith("data:")
                else route.abort()
            ),
        )
        pg = context.pages[0] if context.pages else context.new_page()
        pg.goto(f"{url}/lab?token={token}", timeout=120_000)
        pg.wait_for_function(
            "() => window.jupyterapp && window.jupyterapp.started", timeout=120_000
        )
        print(f"JupyterLab loaded in Chromium in {time.monotonic() - t0:.0f} s")
        yield pg
        context.close()


_OPEN = """async (path) => {
  const app = window.jupyterapp;
  const w = await app.commands.execute('docmanager:open', {path: 'notebooks/' + path, factory: 'Notebook'});
  await w.context.ready;
  await w.sessionContext.ready;
  app.shell.collapseLeft();  // the whole width for the notebook
  return w.id;
}"""

_STATE = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
  const cells = w.content.widgets.filter(c => c.model.type === 'code');
  const prompts = cells.map(c => (c.promptNode ? c.promptNode.textContent : ''));
  const errors = [], streams = [];
  cells.forEach((c, i) => {
    for (let j = 0; j < c.model.outputs.length; j++) {
      const o = c.model.outputs.get(j).toJSON();
      if (o.output_type === 'error') errors.push(`code cell ${i}: ${o.ename}: ${o.evalue}`.slice(0, 400));
      if (o.output_type === 'stream') streams.push([i, o.name, Array.isArray(o.text) ? o.text.join('') : o.text]);
    }
  });
  return {status: kernel ? kernel.status : 'none', pending: prompts.filter(p => p.includes('*')).length,
          unrun: cells.filter(c => c.model.executionCount === null).length, cells: cells.length, errors,
          streams};
}"""


def _wait(pg, predicate_js: str, timeout_s: float, what: str, arg=None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pg.evaluate(predicate_js, arg):
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def _run_all(pg) -> dict:
    """Run all cells and wait until the kernel is idle with no cell queued."""
    pg.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    deadline = time.monotonic() + RUN_TIMEOUT_S
    idle_polls = 0
    while time.monotonic() < deadline:
        st = pg.evaluate(_STATE)
        idle_polls = idle_polls + 1 if st["status"] == "idle" and st["pending"] == 0 else 0
        if idle_polls >= 3:
            return st
        time.sleep(1.0)
    raise AssertionError(
        f"'run all' did not finish within {RUN_TIMEOUT_S} s: {pg.evaluate(_STATE)}"
    )


def _wait_idle(pg, timeout_s: float = WIDGET_TIMEOUT_S) -> None:
    _wait(
        pg,
        "() => { const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;"
        " return k && k.status === 'idle'; }",
        timeout_s,
        "an idle kernel",
    )


def _visible_text_problems(pg) -> list[str]:
    """What a reader would see as broken: a traceback in an output, or a widget that failed."""
    text = pg.evaluate("() => window.jupyterapp.shell.currentWidget.content.node.innerText")
    problems = []
    for needle in (
        "Traceback (most recent call last)",
        "Error displaying widget",
        "Model not found",
    ):
        if needle in text:
            i = text.index(needle)
            problems.append(f"{needle!r} shown: ...{text[max(0, i - 300) : i + 300]}...")
    return problems


def _output(explorer):
    """The output area of an explorer (its ``interactive``'s Output widget): (html, text)."""
    out = explorer.locator(".widget-output").last
    return out.inner_html(), out.inner_text()


def _images(explorer) -> int:
    """How many figures the explorer's output area shows: decoded, with a size, and not one flat
    colour (a blank canvas is not a figure)."""
    return explorer.locator(".widget-output").last.evaluate("""o => [...o.querySelectorAll('img')]
      .filter(i => i.complete && i.naturalWidth > 0).filter(i => {
        const c = document.createElement('canvas'); c.width = i.naturalWidth; c.height = i.naturalHeight;
        const g = c.getContext('2d'); g.drawImage(i, 0, 0);
        const d = g.getImageData(0, 0, c.width, c.height).data;
        for (let k = 4; k < d.length; k += 4 * 7) {
          if (d[k] !== d[0] || d[k + 1] !== d[1] || d[k + 2] !== d[2]) return true;
        }
        return false; }).length""")


def _move(pg, explorer, label: str, value):
    if label == "candidates":
        box = explorer.locator(".widget-text", has=pg.locator("label", has_text=label)).locator(
            "input"
        )
        box.fill(value)
        box.press("Enter")
        return
    select = explorer.locator(".widget-dropdown", has=pg.locator("label", has_text=label)).locator(
        "select"
    )
    if value is None:  # the option the other drop-down shows (notebook 08's x and y)
        options = select.locator("option").all_inner_texts()
        current = select.evaluate("s => s.options[s.selectedIndex].text")
        value = next(o for o in options if o != current)
    select.select_option(label=value)


def _moves_change_outputs(pg, notebook: str) -> list[str]:
    problems = []
    explorers = pg.locator(".widget-interact")
    n = explorers.count()
    if not MOVES[notebook]:
        return [f"{notebook}: {n} explorers rendered, none expected"] if n else []
    if n == 0:
        return [f"{notebook}: no explorer rendered"]
    explorer = explorers.last
    explorer.scroll_into_view_if_needed()
    for label, value, expect in MOVES[notebook]:
        before_html, _ = _output(explorer)
        figures_before = _images(explorer)
        _move(pg, explorer, label, value)
        deadline = time.monotonic() + WIDGET_TIMEOUT_S
        while time.monotonic() < deadline and _output(explorer)[0] == before_html:
            time.sleep(0.5)
        _wait_idle(pg)
        time.sleep(1.0)  # let the last messages render
        html, text = _output(explorer)
        if html == before_html:
            problems.append(f"{notebook}: moving {label} to {value!r} did not change the output")
        elif expect == "ValueError" and not any(
            ln.startswith("ValueError: ") for ln in text.splitlines()
        ):
            problems.append(
                f"{notebook}: {label} = {value!r} should show 'ValueError: ...', shows {text[:300]!r}"
            )
        elif expect == "changed" and any("Error: " in ln for ln in text.splitlines()):
            problems.append(f"{notebook}: {label} = {value!r} shows an error: {text[:300]!r}")
        elif expect == "changed" and figures_before and not _images(explorer):
            problems.append(f"{notebook}: {label} = {value!r}: the figure is gone ({text[:200]!r})")
    return problems


def _screenshots(pg, notebook: str) -> int:
    """Photograph the notebook from top to bottom, one viewport per file; returns the count."""
    folder = SCREENSHOTS / notebook.removesuffix(".ipynb")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    scroller = (
        "() => { const n = window.jupyterapp.shell.currentWidget.content.node;"
        " return n.classList.contains('jp-WindowedPanel-outer') ? n : n.querySelector('.jp-WindowedPanel-outer') || n; }"
    )
    pg.evaluate(f"() => {{ const s = ({scroller})(); s.scrollTop = 0; }}")
    for i in range(200):
        time.sleep(0.1)
        pg.screenshot(path=str(folder / f"page-{i:02d}.png"))
        at_end = pg.evaluate(f"""() => {{ const s = ({scroller})(); const before = s.scrollTop;
            s.scrollTop = before + s.clientHeight * 0.9; return s.scrollTop === before; }}""")
        if at_end:
            return i + 1
    return 200


@pytest.mark.parametrize("notebook", BROWSER_NOTEBOOKS)
def test_notebook_in_the_browser(page, notebook):
    """Open, run all, look for errors, move each explorer's control, photograph."""
    pg = page
    t0 = time.monotonic()
    pg.evaluate(_OPEN, notebook)
    _wait_idle(pg, 120)
    st = _run_all(pg)
    t_run = time.monotonic() - t0
    problems = [f"{notebook}: {e}" for e in st["errors"]]
    problems += runtime_warnings(notebook, st["streams"])
    if st["unrun"]:
        problems.append(f"{notebook}: {st['unrun']} of {st['cells']} code cells did not run")
    problems += _visible_text_problems(pg)
    t1 = time.monotonic()
    if not problems:
        problems += _moves_change_outputs(pg, notebook)
        problems += _visible_text_problems(pg)
    t2 = time.monotonic()
    shots = _screenshots(pg, notebook)
    t3 = time.monotonic()
    pg.evaluate("""async () => { const w = window.jupyterapp.shell.currentWidget;
        await w.sessionContext.shutdown(); w.dispose(); }""")
    print(
        f"{notebook}: open + run all {t_run:.0f} s, checks + moves {t2 - t1:.0f} s, "
        f"{shots} screenshots {t3 - t2:.0f} s, total {time.monotonic() - t0:.0f} s"
    )
    assert not problems, "\n".join(problems)
