"""The book as a reader opens it: ``docs/build_site.py`` builds the static site, Chromium opens it.

Each build is checked the same way. Every internal link of every page resolves (the file, and
its ``#anchor`` in it); no page loads a script, style or image from the network. Then, in
headless Chromium (Debian's /usr/bin/chromium driven by playwright, as tests/test_browser.py
does) served from a local port: the landing page and two notebook pages open with no failed
request, no script error and no error shown (a traceback, an error output, a Sphinx system
message); every image on them is decoded; the navigation lists every notebook; and the search
box finds a word of the series.

The default run builds the text alone (``--mode none``: no notebook is executed, so no figure;
about 15 s). ``-m slow`` builds the site as published, from quick-mode outputs of every notebook
(a few minutes), and then each notebook page opened must show figures.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import re
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from browser_notebooks import CHROMIUM, CHROMIUM_FLAGS, chromium_missing

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
PAGES = ("index.html", "notebooks/01_memory_wall.html", "notebooks/09_verdicts.html")
SEARCH_WORD = "roofline"


def _build_site(out: Path, mode: str) -> Path:
    pytest.importorskip(
        "myst_nb", reason="the docs extra is not installed (pip install -e '.[docs]')"
    )
    spec = importlib.util.spec_from_file_location("build_site", ROOT / "docs" / "build_site.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build(out, mode, quiet=True)


class _Refs(HTMLParser):
    """The ids of a page, and its references: (tag, attribute, url)."""

    def __init__(self):
        super().__init__()
        self.ids, self.refs = set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        for key in ("href", "src"):
            if a.get(key) is not None:
                self.refs.append((tag, key, a[key]))


@functools.cache
def _parse(path: Path) -> _Refs:
    p = _Refs()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def link_problems(html: Path) -> list[str]:
    """Every internal reference of every page of ``html`` (not of ``_static/``, which holds the
    theme's files) that does not resolve, and every resource (script, style, image) a page would
    load from the network."""
    _parse.cache_clear()
    problems = []
    for page in sorted(html.rglob("*.html")):
        rel_page = page.relative_to(html)
        if rel_page.parts[0].startswith("_"):
            continue  # _static/: the theme's own template files, not pages
        for tag, key, url in _parse(page).refs:
            parts = urlsplit(url)
            if parts.scheme or url.startswith("//"):
                if key == "src" or tag == "link":
                    if parts.scheme in ("http", "https") or url.startswith("//"):
                        problems.append(f"{rel_page}: <{tag} {key}> loads {url} from the network")
                continue
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            if not target.exists():
                problems.append(f"{rel_page}: <{tag} {key}={url!r}> points at nothing")
            elif parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in _parse(target).ids:
                    problems.append(f"{rel_page}: {url!r}: no #{parts.fragment} in {target.name}")
    return problems


@pytest.fixture
def served():
    """A function that serves a folder on a free local port and returns its base URL."""
    servers = []

    def serve(folder: Path) -> str:
        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):  # no line per request in the test's output
                pass

        handler = functools.partial(Quiet, directory=str(folder))
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield serve
    for srv in servers:
        srv.shutdown()
        srv.server_close()


_IMAGES = """() => [...document.querySelectorAll('article img, main img')].map(i => ({
    src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0,
    figure: !!i.closest('.cell_output')}))"""

_SHOWN_ERRORS = """() => [...document.querySelectorAll(
    '.output.traceback, .output.error, .system-message, .problematic, .output.stderr')]
    .map(e => e.innerText.slice(0, 300))"""


def browser_problems(base: str, executed: bool) -> list[str]:
    """Open ``PAGES`` and the search page of the site at ``base`` in headless Chromium."""
    sync_api = pytest.importorskip("playwright.sync_api")
    problems = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        pg = browser.new_page(viewport={"width": 1280, "height": 1000})
        pg.route(
            "**/*",
            lambda route: (
                route.continue_()
                if route.request.url.startswith(base) or route.request.url.startswith("data:")
                else (
                    problems.append(f"request to the network: {route.request.url}"),
                    route.abort(),
                )
            ),
        )
        pg.on("pageerror", lambda e: problems.append(f"{pg.url}: script error: {e}"))
        pg.on(
            "console",
            lambda m: m.type == "error" and problems.append(f"{pg.url}: console error: {m.text}"),
        )
        pg.on("requestfailed", lambda r: problems.append(f"{pg.url}: request failed: {r.url}"))
        pg.on(
            "response",
            lambda r: r.status >= 400 and problems.append(f"{pg.url}: {r.status} for {r.url}"),
        )
        for path in PAGES:
            resp = pg.goto(f"{base}/{path}", wait_until="load", timeout=60_000)
            if resp is None or resp.status != 200:
                problems.append(f"{path}: status {resp and resp.status}")
                continue
            title = pg.title()
            if not title or "404" in title:
                problems.append(f"{path}: title {title!r}")
            text = pg.locator("main").inner_text()
            if "Traceback (most recent call last)" in text:
                problems.append(f"{path}: shows a traceback")
            problems += [f"{path}: shows an error: {e!r}" for e in pg.evaluate(_SHOWN_ERRORS)]
            images = pg.evaluate(_IMAGES)
            problems += [f"{path}: image {i['src']} did not load" for i in images if not i["ok"]]
            if executed and path.startswith("notebooks/") and not any(i["figure"] for i in images):
                problems.append(f"{path}: no figure among the cell outputs")
            if path == "index.html":
                nav = pg.evaluate(
                    "() => [...document.querySelectorAll('.bd-sidebar a')].map(a => a.getAttribute('href'))"
                )
                missing = [
                    n for n in NOTEBOOKS if not any(h and h.endswith(f"{n}.html") for h in nav)
                ]
                if missing:
                    problems.append(f"index.html: the navigation lacks {missing}")
        # the search box: open it from the landing page's search button, type a word, press
        # Enter, wait for the results page to list pages
        pg.goto(f"{base}/index.html", wait_until="load")
        pg.locator(".search-button__button:visible").first.click()
        box = pg.locator("input[name='q']:visible").first
        box.fill(SEARCH_WORD)
        box.press("Enter")
        pg.wait_for_url(re.compile(r"search\.html\?q="), timeout=30_000)
        try:
            pg.wait_for_selector("#search-results ul.search li", timeout=60_000)
        except sync_api.TimeoutError:
            problems.append(f"searching for {SEARCH_WORD!r} found nothing")
        browser.close()
    return problems


@pytest.mark.parametrize(
    "mode", ["none", pytest.param("quick", marks=pytest.mark.slow)], ids=["text", "executed"]
)
def test_site_builds_and_reads_in_chromium(mode, tmp_path, served):
    t0 = time.monotonic()
    html = _build_site(tmp_path / "site", mode)
    t_build = time.monotonic() - t0
    assert (html / "index.html").is_file() and (html / "search.html").is_file()
    for n in NOTEBOOKS:
        assert (html / "notebooks" / f"{n}.html").is_file(), n
    assert (html / "docs" / "cli.html").is_file() and "ipusim validate" in (
        html / "docs" / "cli.html"
    ).read_text(encoding="utf-8")
    problems = link_problems(html)
    assert not problems, "\n".join(problems[:40])
    if chromium_missing():
        pytest.skip(f"site built and its links checked; not opened: {chromium_missing()}")
    t1 = time.monotonic()
    problems = browser_problems(served(html), executed=mode != "none")
    print(
        f"site ({mode}): built in {t_build:.0f} s, read in Chromium in {time.monotonic() - t1:.0f} s"
    )
    assert not problems, "\n".join(problems[:40])


def test_link_check_finds_a_broken_link_an_anchor_and_a_network_script(tmp_path):
    (tmp_path / "a.html").write_text('<h1 id="top">A</h1><a href="b.html#top">ok</a>')
    (tmp_path / "b.html").write_text(
        '<h1 id="top">B</h1><a href="a.html#nowhere">x</a><a href="c.html">y</a>'
        '<script src="https://cdn.example/x.js"></script><a href="https://example.org">fine</a>'
    )
    found = link_problems(tmp_path)
    assert len(found) == 3, found
    assert any("#nowhere" in f for f in found) and any("c.html" in f for f in found)
    assert any("from the network" in f for f in found)
