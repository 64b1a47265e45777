"""``Packing``: rows of sequences (compositions with repeat counts), their token accounting
(real, padded, total tokens, efficiency) and the FLOPs a BERT-style forward spends on them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .._validate import choice

STRATEGIES = ("pad", "bucket", "ffd", "spfhp", "bfhp", "nnlshp")
PACKING_STRATEGIES = ("ffd", "spfhp", "bfhp", "nnlshp")  # several sequences per row


@dataclass(frozen=True, eq=False)
class Packing:
    """Which sequences share which row, and the token accounting. Tokens are counts.

    Rows come in groups of identical *compositions*: ``compositions[s, :]`` lists the
    lengths in each of ``repeats[s]`` rows (0 = empty slot), each row occupying
    ``row_len[s]`` token positions. Expanded row order is group 0's rows, then group 1's...
    ``seq_row[i]`` (list inputs only) is the expanded row index of input sequence ``i``.
    """

    strategy: str
    max_len: int  # tokens per row (the longest row for "bucket")
    max_per_row: int  # cap on sequences per row that was applied
    compositions: np.ndarray  # (groups, slots) int64 lengths, 0 = empty slot
    repeats: np.ndarray  # (groups,) int64 rows with this composition
    row_len: np.ndarray  # (groups,) int64 token positions of each such row
    seq_row: np.ndarray | None = None  # (sequences,) int64, list inputs only
    source: str = ""

    # Accounting ---------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        return int(self.repeats.sum())

    @property
    def sequences(self) -> int:
        return int(((self.compositions > 0).sum(axis=1) * self.repeats).sum())

    @property
    def real_tokens(self) -> int:
        return int((self.compositions.sum(axis=1) * self.repeats).sum())

    @property
    def total_tokens(self) -> int:
        """Token positions computed: rows x their length, padding included."""
        return int((self.row_len * self.repeats).sum())

    @property
    def padded_tokens(self) -> int:
        """Padding positions (computed, carrying nothing)."""
        return self.total_tokens - self.real_tokens

    @property
    def efficiency(self) -> float:
        """Real tokens / token positions computed (1 = no padding)."""
        return self.real_tokens / self.total_tokens

    @property
    def padding_fraction(self) -> float:
        return 1.0 - self.efficiency

    @property
    def sequences_per_row(self) -> float:
        return self.sequences / self.rows

    def speedup_vs_pad(self) -> float:
        """Rows a pad-to-``max_len`` batch needs over rows this one needs (token-bound speed-up)."""
        return self.sequences * self.max_len / self.total_tokens

    def rows_as_lists(self, *, limit: int = 100_000) -> list[list[int]]:
        """Every row as the list of its lengths (expanded; refuses more than ``limit`` rows)."""
        if self.rows > limit:
            raise ValueError(f"{self.rows:,} rows is more than limit={limit:,} to expand")
        out = []
        for comp, r in zip(self.compositions, self.repeats, strict=True):
            row = [int(x) for x in comp if x > 0]
            out.extend([list(row) for _ in range(int(r))])
        return out

    def row_lengths(self) -> np.ndarray:
        """Token positions of every row (expanded), int64."""
        return np.repeat(self.row_len, self.repeats)

    def flops(self, model="bert-base", *, attention: str = "block") -> dict:
        """FLOPs of one forward pass over all rows, and what the padding wastes.

        ``useful`` is the FLOPs of the same sequences run unpadded (each attends only to
        itself). Pad and bucket rows pay dense attention over their full row. Packed rows
        pay each sequence's own ``l^2`` attention block (``attention="block"``, a
        block-diagonal kernel), or the full ``row^2`` (``attention="dense"``, a masked
        dense kernel). ``wasted_fraction`` = (computed - useful) / computed.
        """
        choice("attention", attention, ("block", "dense"))
        a, b, c = _flop_coefficients(_model_key(model))
        comp = self.compositions.astype(np.float64)
        rep = self.repeats.astype(np.float64)
        n_seq = (self.compositions > 0).sum(axis=1)
        useful_area = float((comp**2).sum(axis=1) @ rep)
        dense = self.strategy not in PACKING_STRATEGIES or attention == "dense"
        area = float((self.row_len.astype(np.float64) ** 2) @ rep) if dense else useful_area
        useful = a * self.real_tokens + b * useful_area + c * self.sequences
        computed = a * self.total_tokens + b * area + c * float(n_seq @ rep)
        return {
            "useful_flops": useful,
            "computed_flops": computed,
            "wasted_flops": computed - useful,
            "wasted_fraction": 1.0 - useful / computed,
            "attention": "dense" if dense else "block",
        }

    def to_dict(self) -> dict:
        return {
            "strategy": self.strategy,
            "source": self.source,
            "max_len": self.max_len,
            "max_per_row": self.max_per_row,
            "sequences": self.sequences,
            "rows": self.rows,
            "real_tokens": self.real_tokens,
            "padded_tokens": self.padded_tokens,
            "total_tokens": self.total_tokens,
            "efficiency": self.efficiency,
            "padding_fraction": self.padding_fraction,
            "sequences_per_row": self.sequences_per_row,
            "speedup_vs_pad": self.speedup_vs_pad(),
            "groups": int(self.repeats.size),
        }

    def __repr__(self):
        cap = f", <= {self.max_per_row}/row" if self.strategy in PACKING_STRATEGIES else ""
        return (
            f"Packing({self.strategy}{cap}, rows of {self.max_len}: {self.sequences:,} sequences in "
            f"{self.rows:,} rows ({self.sequences_per_row:.2f}/row), efficiency {self.efficiency:.2%}, "
            f"{self.padded_tokens:,} padding tokens of {self.total_tokens:,})"
        )

    def _repr_html_(self):
        d = self.to_dict()
        cells = "".join(
            f"<tr><td>{k}</td><td>{v:,.4g}</td></tr>"
            if isinstance(v, float)
            else f"<tr><td>{k}</td><td>{v:,}</td></tr>"
            if isinstance(v, int)
            else f"<tr><td>{k}</td><td>{v}</td></tr>"
            for k, v in d.items()
        )
        return f"<table><caption>Packing</caption>{cells}</table>"


def _model_key(model):
    from ..workloads import model as _m

    cfg = _m(model)
    return cfg  # TransformerConfig is frozen and hashable


@lru_cache(maxsize=16)
def _flop_coefficients(cfg) -> tuple[float, float, float]:
    """(a, b, c) with forward FLOPs = a * tokens + b * sum(l_q l_k) + c * sequences.

    Solved from three unpadded ``workloads.step`` op lists ([1], [2], [3]); the tests
    check the fit reproduces ``workloads.step`` on other batches, padded and unpadded.
    """
    from ..workloads import step

    f1 = step(cfg, [1]).flops  # a + b + c
    f2 = step(cfg, [2]).flops  # 2a + 4b + c
    f3 = step(cfg, [3]).flops  # 3a + 9b + c
    b = ((f3 - f2) - (f2 - f1)) / 2.0
    a = (f2 - f1) - 3 * b
    c = f1 - a - b
    if not np.isclose(step(cfg, [1, 1]).flops, 2 * (a + b + c), rtol=1e-9):  # 2a + 2b + 2c
        raise RuntimeError(
            "workloads.step FLOPs are not linear in tokens, attention area and sequences"
        )
    return float(a), float(b), float(c)
