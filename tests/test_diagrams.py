"""Concept diagrams: each draws on Agg, returns axes (or a figure), writes the library's numbers, refuses bad input."""

import inspect
import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ipusim import hardware, lengths, packing, policies  # noqa: E402
from ipusim.checklist import checks  # noqa: E402
from ipusim.embeddings import machines as em  # noqa: E402
from ipusim.plots import diagrams as D  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def texts(obj) -> str:
    """Every text drawn on an axes or a figure (titles and labels included), joined by newlines."""
    fig = obj if isinstance(obj, Figure) else obj.figure
    return "\n".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))


def test_memory_hierarchy_writes_the_presets_numbers():
    ax = D.memory_hierarchy()
    assert isinstance(ax, Axes)
    s = texts(ax)
    t, g = hardware.chip("gc200"), hardware.chip("a100-80gb")
    # the numbers a reader checks, formatted here from the presets
    assert (
        f"{t.tiles:,} x {t.sram_per_tile_bytes // 1024} KiB = {round(t.sram_bytes / 2**20)} MiB"
        in s
    )
    assert f"{t.sram_bandwidth_bytes_per_s / 1e12:.3g} TB/s" in s
    assert f"{t.exchange_bandwidth_bytes_per_s / 1e12:.3g} TB/s" in s
    assert f"{t.offchip_bytes / 1e9:.3g} GB" in s and "64 GB/s (ASSUMPTION" in s
    assert (
        f"{g.hbm_bytes / 1e9:.3g} GB" in s and f"{g.hbm_bandwidth_bytes_per_s / 1e12:.3g} TB/s" in s
    )
    assert f"{g.sms} SMs" in s and f"{g.l2_bytes // 2**20} MiB" in s


def test_memory_hierarchy_follows_a_changed_chip():
    """A chip with other tiles and SRAM: the labels move with it (nothing typed in)."""
    t = hardware.chip("gc200").replace(tiles=2000, sram_per_tile_bytes=300 * 1024)
    s = texts(D.memory_hierarchy(t, "h100-sxm"))
    assert "2,000 x 300 KiB = 586 MiB" in s  # 2,000 x 300 KiB = 600,000 KiB = 585.9 MiB
    assert "1.22 MiB" in texts(D.memory_hierarchy(t.replace(sram_per_tile_bytes=2 * 638_976)))
    assert "3.35 TB/s" in s and "H100-SXM" in s


def test_memory_hierarchy_refuses_swapped_kinds():
    with pytest.raises(ValueError, match="tile must be a tile-chip preset"):
        D.memory_hierarchy("a100-80gb", "gc200")
    with pytest.raises(ValueError, match="gpu must be a GPU preset"):
        D.memory_hierarchy("gc200", "bow")


def test_bsp_superstep_phases_from_the_chip():
    c = hardware.chip("gc200")
    comp, xb = (1000, 3000, 2000), (4000, 1000, 8200)
    ax = D.bsp_superstep("gc200", comp, xb)
    s = texts(ax)
    assert f"sync\n{c.sync_cycles:,.0f} cycles" in s
    assert f"exchange\n{max(xb) / c.exchange_bytes_per_cycle_per_tile:,.0f} cycles" in s
    assert "compute\n3,000 cycles" in s
    end = 3000 + c.sync_cycles + max(xb) / c.exchange_bytes_per_cycle_per_tile
    assert f"{end / c.clock_hz * 1e6:.2f} µs" in s
    assert len(ax.get_yticks()) == 3
    # ipusim.tiles' order: sync, then exchange, then compute (left to right)
    x = {str(tx.get_text()).split("\n")[0]: tx.get_position()[0] for tx in ax.texts}
    assert x["sync"] < x["exchange"] < x["compute"]


@pytest.mark.parametrize(
    "kw",
    [
        {"compute_cycles": (1, 2), "exchange_bytes": (1, 2, 3)},
        {"compute_cycles": (1, -2), "exchange_bytes": (1, 2)},
        {"compute_cycles": (1,), "exchange_bytes": (1,)},
        {"chip": "a100-80gb"},
    ],
)
def test_bsp_superstep_bad_input(kw):
    with pytest.raises(ValueError):
        D.bsp_superstep(**kw)


def test_batching_timelines_one_panel_per_policy():
    fig = D.batching_timelines(n_requests=8)
    assert isinstance(fig, Figure)
    titles = [a.get_title(loc="left") for a in fig.axes[1:]]
    assert [t.split(":")[0] for t in titles] == list(policies.POLICIES)
    # every request of every policy is drawn as one bar
    for a in fig.axes[1:]:
        assert sum(1 for p in a.patches if p.get_width() > 0) == 8
    assert isinstance(D.batching_timelines(ax=plt.gca()), Axes)  # the queue picture alone


@pytest.mark.parametrize(
    "kw", [{"n_requests": 1}, {"n_requests": 2.5}, {"rate_per_s": 0}, {"rate_per_s": np.nan}]
)
def test_batching_timelines_bad_input(kw):
    with pytest.raises(ValueError):
        D.batching_timelines(**kw)


def test_padding_rows_titles_carry_the_packing_efficiency():
    lens = lengths.sample(**D.ROWS_SAMPLE)
    fig = D.padding_rows()
    assert isinstance(fig, Figure)
    s = texts(fig)
    for strategy, kw in (("pad", {}), ("bucket", {"buckets": [128, 256, 512]}), ("spfhp", {})):
        p = packing.pack(lens, 512, strategy, **kw)
        assert f"{p.rows} rows, {p.efficiency:.0%} of slots carry tokens" in s
    ax = D.padding_rows([100, 200, 300], max_len=512, ax=plt.gca())
    assert isinstance(ax, Axes) and "2 rows" in ax.get_title()
    with pytest.raises(ValueError):
        D.padding_rows([600], max_len=512)
    with pytest.raises(ValueError):
        D.padding_rows(list(range(1, 50)))


def test_check_names_are_the_checks_own():
    """CHECK_NAMES must be the names the check functions give their Check objects."""
    import importlib
    import pkgutil

    import ipusim.checklist as pkg

    # every module of the checklist (each check lives in its own module; report.py adds C1-C5 skipped)
    src = "".join(
        inspect.getsource(importlib.import_module(f"ipusim.checklist.{m.name}"))
        for m in pkgutil.iter_modules(pkg.__path__)
    )
    for cid, name in checks.CHECK_NAMES.items():
        assert re.search(rf'"{cid}",\s*"{re.escape(name)}"', src), (cid, name)
    assert list(checks.CHECK_NAMES) == [f"C{i}" for i in range(1, 9)]


def test_checklist_pipeline_names_every_check():
    from ipusim.checklist import POLICY

    ax = D.checklist_pipeline()
    s = texts(ax).replace("\n", " ")
    for cid, name in checks.CHECK_NAMES.items():
        assert f"{cid} {name}" in s
    assert f">= {POLICY['migrate_at']}: migrate" in s and f">= {POLICY['pilot_at']}: pilot" in s


def test_series_strip_matches_the_notebooks():
    files = sorted(NOTEBOOKS.glob("0*.ipynb"))
    assert [f.name[:2] for f in files] == [n for n, _ in D.SERIES]
    for f, (_, short) in zip(files, D.SERIES, strict=True):
        title = json.loads(f.read_text())["cells"][0]["source"][0].lower()
        assert all(w in title for w in short.lower().split()), (f.name, short, title)


def test_series_strip_highlights_the_current_notebook():
    ax = D.series_strip(3)
    bold = [t.get_text() for t in ax.texts if t.get_fontweight() == "bold"]
    assert bold == ["03\nDynamic\nbatching"]
    assert D.series_strip("08").texts
    assert D.series_strip(9).texts  # the closing notebook
    for bad in (0, 10, "3", True, None):
        with pytest.raises(ValueError, match="current must be a notebook number"):
            D.series_strip(bad)


def test_parallelism_grid_draws_every_chip():
    ax = D.parallelism_grid(2, 3, 2)
    assert sum(1 for t in ax.texts if t.get_text().startswith("layers")) == 12
    assert "12 chips = data 2 x tensor 3 x pipeline 2" in ax.get_title(loc="left")
    with pytest.raises(ValueError):
        D.parallelism_grid(0, 1, 1)
    with pytest.raises(ValueError, match="at most 64 chips"):
        D.parallelism_grid(8, 4, 4)


def test_embedding_lookup_useful_shares_from_the_library():
    ax = D.embedding_lookup((8, 512))
    s = texts(ax)
    for b in (8, 512):
        for g in (em.SECTOR_BYTES, em.STREAMING_GRANULE_BYTES):
            assert f"{g}-byte" in s
            assert f"{b / (em.granules(b, g) * g):.0%} useful" in s
    assert "25% useful" in s  # an 8-byte row in a 32-byte sector: 8 of 32 bytes
    for bad in ((), (0,), (8, 16, 32, 64, 128), (4096,)):
        with pytest.raises(ValueError):
            D.embedding_lookup(bad)


def test_sweep_grid():
    assert isinstance(D.sweep_grid(), Axes)
    for bad in (2, 13, 4.5, True):
        with pytest.raises(ValueError):
            D.sweep_grid(bad)


GLOSSARY = NOTEBOOKS.parent / "docs" / "glossary.md"
TERMS = (
    "TTFT",
    "TBT",
    "ridge point",
    "arithmetic intensity",
    "superstep",
    "always-live",
    "SPFHP",
    "NNLSHP",
    "MFU",
    "fit states",
    "static batching",
    "dynamic batching",
    "token-budget batching",
    "length-bucket batching",
    "adaptive batching",
    "continuous batching",
    "percentile, p50, p99",
    "utilisation",
    "stable",
    "Kendall's notation",
    "coefficient of variation",
    "micro-batch",
    "1F1B",
    "bubble",
    "recomputation",
    "sharding",
    "ZeRO",
    "placement",
    "Zipf",
    "hit rate",
    "latency",
    "all-reduce",
    "AMP",
    "decode, prefill",
    "KV cache",
    "SM, streaming multiprocessor",
    "vertex",
)


def test_glossary_defines_the_series_terms():
    text = GLOSSARY.read_text()
    for term in TERMS:
        assert f"**{term}" in text, term
    for state in ("on_chip", "streams", "does_not_fit"):
        assert f"`{state}`" in text


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("0*.ipynb")), ids=lambda p: p.name)
def test_notebook_opens_with_one_learning_list_strip_and_glossary(path):
    cells = json.loads(path.read_text())["cells"]
    title, *head = ["".join(c["source"]) for c in cells[:3]]
    # one list of what the reader learns, in the title cell; the next cell does not repeat it
    assert "you will learn" in title.lower() and "\n- " in title
    assert "objectives" not in head[0].lower() and "you will learn" not in head[0].lower()
    assert "**fit state**" in head[0] and "](../docs/glossary.md)" in head[0]
    assert f"diagrams.series_strip({int(path.name[:2])})" in head[1]
    # and a concept diagram further down, drawn by this module
    assert any(
        "diagrams." in "".join(c["source"]) and "series_strip" not in "".join(c["source"])
        for c in cells
        if c["cell_type"] == "code"
    )


def _markdown(name):
    nb = json.loads(next(NOTEBOOKS.glob(f"{name}*.ipynb")).read_text())
    return " ".join(
        " ".join("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown"
    )


def test_notebook_prose_matches_the_diagrams_defaults():
    """The numbers the diagram cells' prose quotes are the ones the diagrams use."""
    import inspect as _inspect

    n = _inspect.signature(D.batching_timelines).parameters["n_requests"].default
    assert f"the same {n} arrivals" in _markdown("03")
    assert (
        f"{D.batching.TOY_FIXED_S * 1e3:g} ms per batch plus {D.batching.TOY_PER_TOKEN_S * 1e6:g} µs per token slot"
        in _markdown("03")
    )
    words = {10: "Ten"}
    assert (
        f"{words[D.ROWS_SAMPLE['n']]} requests drawn from a {D.ROWS_SAMPLE['long_fraction']:.0%}-long mix"
        in _markdown("04")
    )


def test_verdict_pipeline_names_the_three_states_and_both_kinds_of_row():
    s = texts(D.verdict_pipeline())
    for word in (
        "supported",
        "contradicted",
        "depends",
        "break-even",
        "calibration rows",
        "check rows",
        "in-sample error",
        "held-out error",
        "ipusim/claims/rules.py",
    ):
        assert word in s, word
