"""The Chrome trace of a BERT-base step opens in a real trace viewer: Chromium's own.

chrome://tracing is off in Debian's Chromium (an "internal debugging page") and the Perfetto UI
is a web app this machine cannot download, so the viewer is the one Chromium ships inside itself:
DevTools' Performance panel (``devtools://devtools/bundled/trace_app.html``), whose trace engine
reads the Trace Event Format that Perfetto and chrome://tracing read. The test loads the file
through the panel's "Load profile" button, as a person would, and checks that no script error
was raised, that the panel shows a loaded recording, and that its time axis spans the step's
``time_s`` (microsecond timestamps read as such). A truncated file must fail the same checks.
Skipped where Chromium or playwright is missing (as tests/test_browser.py).
"""

from __future__ import annotations

import json
import re

import pytest
from browser_notebooks import CHROMIUM, chromium_missing

from ipusim import chrometrace, machine, workloads

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")

FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWER = "devtools://devtools/bundled/trace_app.html"
TICK = re.compile(r"^(\d+(?:\.\d+)?)\s*ms$")  # \s: the axis writes a no-break space


def _open_in_viewer(browser, path) -> tuple[list[str], str]:
    """(script errors, the panel's text) after loading ``path`` into the Performance panel."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(VIEWER, timeout=60_000)
    # a DevTools without a page to inspect says so in a dialog over the panels: close it
    notice = page.get_by_text("Debugging connection was closed").first
    try:
        notice.wait_for(timeout=30_000)
        page.keyboard.press("Escape")
        notice.wait_for(state="hidden", timeout=30_000)
    except Exception:  # playwright's TimeoutError: no dialog this time
        pass
    page.get_by_text("Performance", exact=True).first.click()
    load = page.get_by_role("button", name=re.compile("Load (profile|trace)", re.I)).first
    with page.expect_file_chooser(timeout=60_000) as chooser:
        load.click()
    chooser.value.set_files(str(path))
    text = ""
    for _ in range(120):  # up to a minute: a loaded recording with its time axis, or an error
        page.wait_for_timeout(500)
        text = page.evaluate("document.body.innerText")
        lines = [ln.strip() for ln in text.splitlines()]
        if errors or ("#1" in lines and any(TICK.match(ln) for ln in lines)):
            break
    page.close()
    return errors, text


def test_bert_base_step_trace_opens_in_chromiums_trace_viewer(tmp_path):
    from playwright.sync_api import sync_playwright

    step = workloads.step("bert-base", [128] * 8, pad_to=128)
    time_ms = machine.simulate("gc200", step).time_s * 1e3
    doc = chrometrace.step_trace("gc200", step)
    chip_lane = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["tid"] == 0]
    assert sum(e["dur"] for e in chip_lane) / 1e3 == pytest.approx(time_ms, rel=1e-9)
    good, bad = tmp_path / "bert_base_step.json", tmp_path / "truncated.json"
    good.write_text(json.dumps(doc))
    bad.write_text(good.read_text()[: len(good.read_text()) // 2])
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            errors, text = _open_in_viewer(browser, good)
            bad_errors, bad_text = _open_in_viewer(browser, bad)
        finally:
            browser.close()
    lines = [ln.strip() for ln in text.splitlines()]
    assert not errors, errors
    assert "#1" in lines, text[:500]
    ticks = [float(m.group(1)) for ln in lines if (m := TICK.match(ln))]
    # the axis spans the trace: its last tick lies within a tick or so of the end
    assert ticks and 0.8 * time_ms <= max(ticks) <= 1.25 * time_ms, (ticks, time_ms)
    # the same checks fail on a broken file: the viewer raised an error and loaded nothing
    assert bad_errors and "#1" not in [ln.strip() for ln in bad_text.splitlines()]
