"""Numbers the notebooks' prose quotes, each tied to the output line that prints it.

``QUOTES[notebook]`` lists ``Quote``s: a regular expression that finds the number in the
notebook's markdown, one that finds the same quantity in its executed outputs (stdout), and the
relative tolerance the prose's rounding allows (stated here, before any comparison). The slow
full-mode run (tests/test_notebooks.py) executes each notebook at the size a reader gets and
checks every quote with ``problems``: a quote whose prose or output is not found, or whose two
numbers differ by more than the tolerance, is a problem. Numbers a notebook asserts in a cell
next to its computation need no entry here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Quote:
    prose: str  # regex with one group: the number as the prose writes it
    output: str  # regex with one group: the number as an output line prints it
    rel: float  # allowed relative difference (the prose's rounding)
    what: str = ""


def _num(s: str) -> float:
    return float(s.replace(",", ""))


QUOTES: dict[str, list[Quote]] = {
    "01_memory_wall.ipynb": [
        Quote(
            r"HBM costs as much as ~(\d+) FP16 FLOPs",
            r"HBM (\d+), streaming",
            0.0,
            "FLOPs/byte, HBM",
        ),
        Quote(r"from a tile's SRAM about (\d+);", r"tile SRAM (\d+), HBM", 0.0, "FLOPs/byte, SRAM"),
        Quote(r"DDR about (\d+)\.", r"streaming DRAM (\d+)\n", 0.02, "FLOPs/byte, DDR (about)"),
        Quote(r"or (\d+) \(DDR\) FP16 FLOPs", r"streaming DRAM (\d+)\n", 0.0, "summary, DDR"),
        Quote(
            r"data is (\d+) % of\nthe energy on the GC200",
            r"gc200 (\d+)%, a100",
            0.0,
            "GC200 data share",
        ),
        Quote(r"(\d+) % on the GPUs\)", r"a100-80gb (\d+)%, h100", 0.0, "GPU data share"),
        Quote(
            r"tile SRAM is (\d+) % cheaper",
            r"tile SRAM per byte vs HBM: (\d+)% less",
            0.0,
            "per byte",
        ),
    ],
    "03_dynamic_batching.ipynb": [
        Quote(
            r"carries about ([\d.]+) times the\s+requests a second of the better one-kind deployment",
            r"best split over the best one-kind deployment: ([\d.]+)x",
            0.04,
            "disaggregated split over co-located (section 7.1)",
        ),
    ],
    "07_sparse_embeddings.ipynb": [
        Quote(
            r"cache is nearly (\d+) times larger",
            r"GC200's cache is (\d+)x",
            0.1,
            "cache size ratio",
        ),
        Quote(
            r"between (1\.\d) and 1\.\d in the full grid",
            r"behind at s = (1\.\d+)\)",
            0.0,
            "last skew behind",
        ),
        Quote(
            r"between 1\.\d and (1\.\d) in the full grid",
            r"ahead of the A100 from s = (1\.\d+)",
            0.0,
            "first skew ahead",
        ),
        Quote(
            r"about (\d+) to \d+ times, printed above",
            r"a100-80gb (\d+\.\d)x the GC200",
            0.06,
            "A100 ahead, 13 GB",
        ),
        Quote(
            r"about \d+ to (\d+) times, printed above",
            r"h100-sxm (\d+\.\d)x the GC200",
            0.06,
            "H100 ahead, 13 GB",
        ),
    ],
    "08_design_space.ipynb": [
        Quote(
            r"from about ([\d,]+) tiles at batch 32",
            r"break-even at ([\d,]+)-[\d,]+ tiles",
            0.01,
            "BERT break-even",
        ),
    ],
}


def problems(notebook: str, markdown: str, stdout: str) -> list[str]:
    """Every quote of ``notebook`` whose prose or output number is missing or disagrees."""
    out = []
    for q in QUOTES.get(notebook, []):
        p, o = re.search(q.prose, markdown), re.search(q.output, stdout)
        if not p or not o:
            miss = "prose" if not p else "output"
            out.append(
                f"{notebook}: {q.what}: {miss} not found ({q.prose if not p else q.output!r})"
            )
            continue
        a, b = _num(p.group(1)), _num(o.group(1))
        if abs(a - b) > q.rel * abs(b) + 1e-12:
            out.append(f"{notebook}: {q.what}: prose says {p.group(1)}, output prints {o.group(1)}")
    return out
