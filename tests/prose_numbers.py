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
        Quote(
            r"multiply the bytes by 8: (\d+) 80-GB GPUs",
            r"h100-sxm  training : library\s+(\d+) chips",
            0.0,
            "summary, GPT-3 training GPUs",
        ),
        Quote(
            r"or ([\d,]+) GC200s with the\s+activations",
            r"gc200     training : library\s+(\d+) chips",
            0.0,
            "summary, GPT-3 training GC200s",
        ),
    ],
    "02_tile_local_compute.ipynb": [
        Quote(
            r"BERT-large's (\d+) M parameters",
            r"BERT-large: (\d+) M parameters",
            0.0,
            "BERT-large params",
        ),
        Quote(r"\((\d+) MB in FP16\) take", r"(\d+) MB in FP16,", 0.0, "BERT-large bytes"),
        Quote(
            r"take about (\d+) KiB of",
            r"(\d+) KiB per tile on average",
            0.01,
            "BERT-large per tile",
        ),
        Quote(
            r"a sync \((\d+) cycles: the measured",
            r"sync (\d+) cycles, exchange",
            0.0,
            "sync cycles",
        ),
        Quote(
            r"about (\d\.\d) bytes/cycle x", r"exchange (\d\.\d) bytes/cycle", 0.0, "exchange rate"
        ),
        Quote(r"bytes/cycle x (0\.\d+)\)", r"bytes/cycle x (0\.\d+),", 0.0, "exchange efficiency"),
        Quote(r"`(\d+) cycles per vertex", r"(\d+) cycles per vertex", 0.0, "vertex overhead"),
        Quote(
            r"FLOPs / (\d+) FLOP per cycle", r"(\d+) FLOP per cycle \(AMP\)", 0.0, "AMP FLOP/cycle"
        ),
        Quote(
            r"fixed (\d+) cycles per AMP phase",
            r"(\d+) cycles per AMP phase",
            0.0,
            "AMP phase cycles",
        ),
        Quote(
            r"at (\d\.\d) bytes/cycle\)", r"rearranging at (\d\.\d) bytes/cycle", 0.0, "rearranging"
        ),
        Quote(r"fits in (\d+) % of a tile", r"at most (\d+)% of its", 0.0, "available memory"),
        Quote(r"nearly twice a\ntile's (\d+) KiB", r"of its (\d+) KiB", 0.0, "tile SRAM"),
        Quote(
            r"its (\d\.\d) MB of FP16 weights", r"FP16 weights (\d\.\d) MB", 0.0, "matmul weights"
        ),
        Quote(
            r"(\d\.\d+) rows per tile on average",
            r"(\d\.\d+) rows per tile on average",
            0.0,
            "rows/tile",
        ),
        Quote(
            r"Tolerance (\d+) % for every TensorRT", r"\(tolerance (\d+)%\)", 0.0, "GPU tolerance"
        ),
        Quote(
            r"one C600 card, ([\d,]+) sequences/s",
            r"held-out C600 BERT-base run ([\d,]+) seq/s published",
            0.0,
            "C600 published",
        ),
        Quote(
            r"about (\d+) GC200s' worth", r"= ([\d.]+) GC200s of tile SRAM", 0.05, "Llama GC200s"
        ),
        Quote(
            r"runs (\d+) × 384 tokens on one GC200",
            r"BERT-base (\d+) x 384 on one GC200: [\d.]+ ms, on_chip",
            0.0,
            "largest batch on chip",
        ),
        Quote(
            r"and up to (\d+) × 384\n\(`tiles",
            r"every weight on chip: (\d+)",
            0.0,
            "largest 384-token batch on chip",
        ),
        Quote(
            r"keep batches as large as\n  (\d+) × 384",
            r"every weight on chip: (\d+)",
            0.0,
            "summary, largest 384-token batch",
        ),
    ],
    "03_dynamic_batching.ipynb": [
        Quote(
            r"carries about ([\d.]+) times the\s+requests a second of the better one-kind deployment",
            r"best split over the best one-kind deployment: ([\d.]+)x",
            0.04,
            "disaggregated split over co-located (section 7.1)",
        ),
        Quote(
            r"reads the (\d+) MB of weights",
            r"weights (\d+) MB \(FP16\)",
            0.01,
            "BERT-base weights",
        ),
        Quote(
            r"request waits about (\d+) seconds",
            r"waits ([\d.]+) s one at a time",
            0.1,
            "last request's wait (about)",
        ),
        Quote(
            r"about (\d+)% standard error per\n10⁶ M/M/1",
            r"has a standard error of ([\d.]+)%",
            0.25,
            "M/M/1 standard error (about; 16 replications)",
        ),
        Quote(
            r"require agreement within (\d+)%", r"required within (\d+)%", 0.0, "theory tolerance"
        ),
        Quote(r"within (\d+)% at ρ = 0\.3", r"required within (\d+)%", 0.0, "summary tolerance"),
        Quote(
            r"W_q = 0\.9 × 0\.01 / \(2 × 0\.1\) = (\d+) ms",
            r"M/D/1\s+0\.9\s+[\d,]+\s+[\d.]+ ms\s+([\d.]+) ms",
            0.0,
            "exercise 2, M/D/1 wait",
        ),
    ],
    "04_unpadded_inference.ipynb": [
        Quote(r"(\d+)% of a SQuAD batch", r"squad-384\s+([\d.]+)%", 0.01, "SQuAD token waste"),
        Quote(r"and (\d+)% of a batch of short", r"0% long\s+([\d.]+)%", 0.01, "short texts waste"),
        Quote(
            r"\((\d+\.\d+)% vs\n99\.60%\)", r"BFHP\s+([\d.]+)% >= SPFHP 99\.60%", 0.0, "BFHP <= 16"
        ),
        Quote(
            r"\(99\.\d+% vs\n(\d+\.\d+)%\)",
            r"SPFHP ([\d.]+)% \(wikipedia-512, <= 16",
            0.0,
            "SPFHP <= 16",
        ),
        Quote(
            r"the paper's NNLSHP \((\d+\.\d+)%\)",
            r"Wikipedia NNLSHP <=3\s+[\d.]+%\s+([\d.]+)%",
            0.0,
            "published NNLSHP",
        ),
        Quote(
            r"already about (\d\.\d) times the\npadded model",
            r"padded FasterTransformer / padded model: ([\d.]+)-",
            0.05,
            "BT testbed slower (about)",
        ),
        Quote(
            r"wastes (\d+)% of the FLOPs \(Wikipedia\)",
            r"wikipedia-512\s+[\d.]+%\s+([\d.]+)%",
            0.01,
            "Wikipedia FLOP waste",
        ),
        Quote(
            r"FLOPs \(Wikipedia\), (\d+)% \(SQuAD",
            r"squad-384\s+[\d.]+%\s+([\d.]+)%",
            0.01,
            "SQuAD FLOP waste",
        ),
        Quote(
            r"and (\d+)-\d+% for the 40%-long",
            r"40% long\s+[\d.]+%\s+([\d.]+)%",
            0.01,
            "40% long FLOP waste",
        ),
        Quote(
            r"and \d+-(\d+)% for the 40%-long",
            r"0% long\s+[\d.]+%\s+([\d.]+)%",
            0.01,
            "short FLOP waste",
        ),
        Quote(
            r"wastes about (\d+)%,",
            r"pad to 512\s+waste\s+([\d.]+)%",
            0.02,
            "long texts only (about)",
        ),
        Quote(
            r"buckets, what remains is (\d+)-\d+%",
            r"8 buckets\s+waste\s+([\d.]+)%",
            0.02,
            "buckets, low",
        ),
        Quote(
            r"buckets, what remains is \d+-(\d+)%",
            r"8 buckets\s+waste\s+[\d.]+% \.\.\s+([\d.]+)%",
            0.02,
            "buckets, high",
        ),
        Quote(
            r"(\d+)-\d+% for short classification",
            r"0% long\s+([\d.]+)%",
            0.01,
            "summary, token waste",
        ),
        Quote(
            r"\d+-(\d+)% for short classification",
            r"0% long\s+[\d.]+%\s+([\d.]+)%",
            0.01,
            "summary, FLOP waste",
        ),
        Quote(
            r"a request averages (\d\.\d)x more tokens",
            r"a request averages (\d\.\d)x the tokens",
            0.0,
            "40% long vs short tokens",
        ),
        Quote(r"model, (\d+)-\d+% efficiency here", r"bucketing (\d+)%-", 0.0, "bucketing, low"),
        Quote(
            r"model, \d+-(\d+)% efficiency here", r"bucketing \d+%-(\d+)%", 0.0, "bucketing, high"
        ),
        Quote(r"Packing reaches ([\d.]+)-", r"packing ([\d.]+)%-", 0.001, "packing, low"),
        Quote(
            r"Packing reaches [\d.]+-([\d.]+)%", r"packing [\d.]+%-([\d.]+)%", 0.0, "packing, high"
        ),
        Quote(r"SPFHP and BFHP stop at (\d+)%", r"on Wikipedia (\d+)%", 0.0, "greedy packers at 3"),
        Quote(r"recovers\n  ([\d.]+)-", r"packing ([\d.]+)%-", 0.001, "summary, packing low"),
        Quote(
            r"recovers\n  [\d.]+-([\d.]+)%",
            r"packing [\d.]+%-([\d.]+)%",
            0.0,
            "summary, packing high",
        ),
        Quote(
            r"at most 3 a row, (\d+)% on Wikipedia", r"on Wikipedia (\d+)%", 0.0, "summary, greedy"
        ),
    ],
    "06_training_at_scale.ipynb": [
        Quote(
            r"some (\d+) MB/s\nfor BERT-base", r"sequences/s: (\d+) MB/s", 0.05, "host input (some)"
        ),
        Quote(
            r"BERT-base at ([\d,]+) sequences/s",
            r"BERT-base at ([\d,]+) sequences/s",
            0.03,
            "Bow BERT-base rate",
        ),
        Quote(r"A GC200 holds (\d\.\d) GB", r"one GC200 holds (\d\.\d) GB", 0.0, "GC200 SRAM"),
        Quote(
            r"GPT-3 175B's (\d\.\d) TB of training", r"gpt-3-175b's (\d\.\d) TB", 0.0, "GPT-3 state"
        ),
        Quote(
            r"about ([\d,]+) chips of SRAM",
            r"needs ([\d,]+) GC200s",
            0.01,
            "GC200s for GPT-3 (about)",
        ),
        Quote(
            r"16 B / (\d\.\d+) GB",
            r"\((\d\.\d+) GB after code\)",
            0.0,
            "exercise 1, SRAM after code",
        ),
        Quote(r"≈ ([\d,]+) chips, before", r"needs ([\d,]+) GC200s", 0.01, "exercise 1 (about)"),
        Quote(
            r"the (\d+)-day estimate",
            r"days for 300B tokens\s+published\s+([\d.]+)",
            0.0,
            "Megatron days",
        ),
        Quote(
            r"\(GC200 (\d\.\d+), A100-80GB",
            r"gc200 (\d\.\d+) USD/chip-hour, a100",
            0.0,
            "GC200 price",
        ),
        Quote(
            r"A100-80GB (\d\.\d+), H100", r"a100-80gb (\d\.\d+) USD/chip-hour,", 0.0, "A100 price"
        ),
        Quote(
            r"chip-hour; (\d\.\d+) USD/kWh\)", r"(\d\.\d+) USD/kWh \(ASSUMED", 0.0, "energy price"
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


# Quotes registered later (issue 26), appended per notebook: add new ones at the end.
QUOTES["04_unpadded_inference.ipynb"] += [
    Quote(
        r"\((-\d+\.\d)% on the A100, -\d+\.\d% on the IPU\)",
        r"the articles: A100 [\d.]+ = (-\d+\.\d)%",
        0.0,
        "the articles' 0% -> 40% long drop, A100",
    ),
    Quote(
        r"on the A100, (-\d+\.\d)% on the IPU\)",
        r", IPU [\d.]+ = (-\d+\.\d)%\)",
        0.0,
        "the articles' 0% -> 40% long drop, IPU",
    ),
    Quote(
        r"compute at 512, (\d+)% of SQuAD's at 384",
        r"squad-384\s+([\d.]+)%",
        0.01,
        "summary, SQuAD token waste",
    ),
]
QUOTES["06_training_at_scale.ipynb"] += [
    Quote(
        r"IPU-Link rate \((\d+) of a nominal",
        r"IPU-Link: measured (\d+) of a nominal",
        0.0,
        "IPU-Link measured",
    ),
    Quote(
        r"of a nominal (\d+) GB/s,",
        r"of a nominal (\d+) GB/s one way",
        0.0,
        "IPU-Link nominal",
    ),
]
_LLAMA_LINE = r"llama-2-70b: ([\d.]+) billion parameters"
QUOTES["08_design_space.ipynb"] += [
    Quote(
        r"break-even at about (\d\.\d) times the GC200's",
        r"tiles, (\d\.\d)x the GC200's 1,472",
        0.0,
        "summary, BERT break-even over the GC200's tiles",
    ),
    Quote(r"Llama-2-70B holds (\d+) billion parameters", _LLAMA_LINE, 0.01, "Llama-2-70B params"),
    Quote(
        r"About \d+ GB/s: Llama-2-70B holds ([\d.]+) billion",
        _LLAMA_LINE,
        0.0,
        "exercise 2, params",
    ),
    Quote(
        r"parameters, (\d+) GB in FP16:", r"parameters, (\d+) GB in FP16;", 0.0, "Llama-2-70B bytes"
    ),
    Quote(
        r"Streaming Memory\n\((\d+) GB\)", r"the GC200: (\d+) GB of Streaming", 0.0, "GC200 DRAM"
    ),
    Quote(
        r"the GC200 preset's (\d+) GB/s", r"Streaming Memory at (\d+) GB/s", 0.0, "GC200 DRAM rate"
    ),
    Quote(r"all-reduces \((\d+) GB/s on the", r"IPU-Links (\d+) GB/s", 0.0, "GC200 link rate"),
    Quote(
        r"chip's ([\d.]+) GB of SRAM", r"([\d.]+) GB of SRAM after code", 0.0, "exercise 2, SRAM"
    ),
]
