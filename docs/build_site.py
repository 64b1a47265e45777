"""Build the ipusim book: the executed notebooks, the docs and the README as one static HTML site.

    python docs/build_site.py                  # notebooks run in quick mode (IPUSIM_QUICK=1)
    python docs/build_site.py --mode full      # the full sizes a reader gets (minutes)
    python docs/build_site.py --mode none      # no outputs: text only, fastest
    python -m http.server -d build/site/html   # then open http://127.0.0.1:8000

The site is Sphinx with MyST-NB and the Sphinx Book Theme (``pip install -e ".[docs]"``); every
file it needs comes with those packages, so the build reads and writes local files only. Steps:

1. a source tree in ``build/site/src``: the README as the landing page (``index.md``) with the
   book's table of contents, ``docs/*.md``, a CLI reference made from ``ipusim --help`` and
   each command's ``--help`` (``docs/cli.md``), and the notebooks, executed here with nbclient
   (the inline backend, as a reader runs them; from the repository's ``notebooks/`` folder, so
   notebook 05 finds ``../examples``). An executed notebook is kept in ``build/site/executed``
   under a key of its own text, the mode and ipusim's source, and reused while none changes;
   ``--from DIR`` takes executed notebooks from DIR instead (for example ones saved from
   JupyterLab). Interactive explorers (ipywidgets) need a live kernel: the page says so in
   their place. Any file of the repository a page links to that is not a page (a source file,
   an example case) is copied beside it and becomes a download link.
2. ``sphinx-build -W``: a broken cross-reference, a missing image or any other warning fails
   the build.

The HTML lands in ``build/site/html`` (``--out`` moves ``build/site``); ``index.html`` is the
landing page and the search box searches every page.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
DOCS = ROOT / "docs"
MODES = {"quick": "1", "full": "0"}  # --mode -> IPUSIM_QUICK; "none": not executed
CELL_TIMEOUT_S = 900
# The docs pages of the book, in the order of its navigation (cli.md is generated).
DOC_PAGES = ("claims", "validation", "glossary", "facts", "sources", "formats", "cli")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = (
    "*An interactive explorer (ipywidgets) stands here: it needs a running kernel. Open this "
    "notebook in JupyterLab (`jupyter lab notebooks/`) to use it.*"
)
LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s]+?)(#[^)\s]*)?\)")
# A relative link to a page (a notebook or a Markdown file) inside a notebook's Markdown *output*:
# MyST-NB renders outputs without resolving links to pages, so they are pointed at the HTML.
PAGE_LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s]+?)\.(?:ipynb|md)(#[^)\s]*)?\)")

CONF = """\
# Written by docs/build_site.py for each build; edit it there.
project = "ipusim"
author = "the ipusim authors"
html_title = "ipusim: tile chips against GPUs"
extensions = ["myst_nb"]
exclude_patterns = ["_build"]
nb_execution_mode = "off"  # docs/build_site.py runs the notebooks itself
nb_ipywidgets_js = {}  # no widget scripts from the network: explorers need a live kernel anyway
nb_output_stderr = "show"
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
html_theme = "sphinx_book_theme"
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "use_download_button": True,
    "search_bar_text": "Search the book...",
}
# light pages for the figures' white backgrounds (and the theme then has a mode to start in)
html_context = {"default_mode": "light"}
html_last_updated_fmt = None
html_show_sourcelink = False
suppress_warnings = ["myst.header"]  # a notebook may step from # to ### (a figure's caption)
"""


def _source_key(path: Path, mode: str) -> str:
    """A key that changes when the notebook, the mode or any of ipusim's sources change."""
    h = hashlib.sha256(path.read_bytes())
    h.update(mode.encode())
    for src in sorted((ROOT / "ipusim").rglob("*")):
        if src.suffix in (".py", ".csv", ".md") and "__pycache__" not in src.parts:
            h.update(str(src.relative_to(ROOT)).encode())
            h.update(src.read_bytes())
    return h.hexdigest()[:16]


def execute(path: Path, mode: str):
    """Notebook ``path`` run top to bottom in ``mode`` ("quick"/"full"), as an nbformat node."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    env_before = {k: os.environ.get(k) for k in ("IPUSIM_QUICK", "MPLBACKEND")}
    os.environ["IPUSIM_QUICK"] = MODES[mode]
    os.environ.pop("MPLBACKEND", None)  # the reader's default backend: inline, figures as PNG
    try:
        nbclient.NotebookClient(
            nb,
            timeout=CELL_TIMEOUT_S,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        ).execute()
    finally:
        for k, v in env_before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb


def static_outputs(nb):
    """The notebook with each widget view replaced by a note (a static page cannot run one), the
    widget state dropped, and the links to pages in Markdown outputs pointed at their HTML."""
    import nbformat

    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outs = []
        for out in cell.get("outputs", []):
            if WIDGET_MIME in out.get("data", {}):
                out = nbformat.v4.new_output("display_data", data={"text/markdown": WIDGET_NOTE})
            elif "text/markdown" in out.get("data", {}):
                text = out["data"]["text/markdown"]
                out["data"]["text/markdown"] = PAGE_LINK.sub(
                    lambda m: f"]({m.group(1)}.html{m.group(2) or ''})", text
                )
            outs.append(out)
        cell.outputs = outs
    return nb


def notebooks(src: Path, cache: Path, mode: str, from_dir: Path | None, log) -> list[str]:
    """Write every notebook, executed (or as it is for mode "none"), to ``src/notebooks``."""
    import nbformat

    out_dir = src / "notebooks"
    out_dir.mkdir(parents=True)
    cache.mkdir(parents=True, exist_ok=True)
    names = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        names.append(path.stem)
        if from_dir is not None:
            nb = nbformat.read(from_dir / path.name, as_version=4)
            how = f"from {from_dir}"
        elif mode == "none":
            nb = nbformat.read(path, as_version=4)
            how = "not executed"
        else:
            hit = cache / f"{path.stem}.{_source_key(path, mode)}.ipynb"
            if hit.is_file():
                nb = nbformat.read(hit, as_version=4)
                how = "reused"
            else:
                t0 = time.monotonic()
                nb = execute(path, mode)
                for old in cache.glob(f"{path.stem}.*.ipynb"):
                    old.unlink()
                nbformat.write(nb, hit)
                how = f"executed ({mode}) in {time.monotonic() - t0:.0f} s"
        nbformat.write(static_outputs(nb), out_dir / path.name)
        log(f"  {path.name}: {how}")
    return names


def cli_reference() -> str:
    """``ipusim --help`` and every command's ``--help``, as a Markdown page."""
    from ipusim.cli import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps help to this width
    try:
        helps = [("ipusim", parser.format_help())]
        helps += [(f"ipusim {name}", p.format_help()) for name, p in sub.choices.items()]
    finally:
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns
    parts = [
        "# Command-line reference\n",
        "Generated from `python -m ipusim --help` and each command's `--help` when the site was "
        "built. The [README](../index.md) shows the commands in use.\n",
    ]
    for title, text in helps:
        parts += [f"## `{title}`\n", "```text\n" + text.rstrip() + "\n```\n"]
    return "\n".join(parts)


def landing_page(names: list[str]) -> str:
    """The README with the book's navigation (a hidden table of contents) after it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    toc_nb = "\n".join(f"notebooks/{n}" for n in names)
    toc_docs = "\n".join(f"docs/{d}" for d in DOC_PAGES)
    return (
        readme.rstrip()
        + "\n\n```{toctree}\n:hidden:\n:caption: Notebooks\n\n"
        + toc_nb
        + "\n```\n\n```{toctree}\n:hidden:\n:caption: Reference\n\n"
        + toc_docs
        + "\n```\n"
    )


def copy_linked_files(src: Path) -> list[str]:
    """Copy into ``src`` every repository file a Markdown page or notebook links to that is not
    itself a page (``ipusim/claims/training.py``, ``examples/*.toml``), at the same relative path,
    so the link becomes a download link; returns the files copied."""
    copied = []
    pages = list(src.rglob("*.md")) + list(src.rglob("*.ipynb"))
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target, _ in LINK.findall(text):
            rel = (page.parent / target).resolve()
            try:
                in_src = rel.relative_to(src.resolve())
            except ValueError:
                continue  # points outside the book's tree: left to Sphinx to report
            repo_file = ROOT / in_src
            if (src / in_src).exists() or not repo_file.is_file():
                continue
            (src / in_src).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo_file, src / in_src)
            copied.append(str(in_src))
    return sorted(set(copied))


def build(out: Path, mode: str, from_dir: Path | None = None, quiet: bool = False) -> Path:
    """Build the site under ``out``; returns the folder of the HTML (``out/html``)."""
    log = (lambda *_: None) if quiet else (lambda m: print(m, flush=True))
    if mode not in (*MODES, "none"):
        raise ValueError(f"mode must be one of quick, full, none; got {mode!r}")
    src, html = out / "src", out / "html"
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(html, ignore_errors=True)
    log(f"notebooks ({mode}):")
    names = notebooks(src, out / "executed", mode, from_dir, log)
    (src / "docs").mkdir()
    for d in DOC_PAGES:
        if d != "cli":
            shutil.copy2(DOCS / f"{d}.md", src / "docs" / f"{d}.md")
    (src / "docs" / "cli.md").write_text(cli_reference(), encoding="utf-8")
    (src / "index.md").write_text(landing_page(names), encoding="utf-8")
    (src / "conf.py").write_text(CONF, encoding="utf-8")
    for f in copy_linked_files(src):
        log(f"  linked file copied: {f}")
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q"]
    subprocess.run([*cmd, str(src), str(html)], check=True)
    log(f"sphinx: {time.monotonic() - t0:.0f} s; open {html / 'index.html'}")
    return html


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--mode",
        choices=[*MODES, "none"],
        default="quick",
        help="run the notebooks in quick mode (default), at full size, or not at all",
    )
    ap.add_argument(
        "--from",
        dest="from_dir",
        type=Path,
        help="take executed notebooks from this folder instead of running them",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "site", help="build folder")
    a = ap.parse_args(argv)
    try:
        build(a.out, a.mode, a.from_dir)
    except subprocess.CalledProcessError as e:
        print(f"sphinx-build failed (exit {e.returncode}); its messages are above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
