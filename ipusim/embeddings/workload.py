"""What an embedding step asks for: tables, look-ups per sample, batch and how skewed the ids are.

A *table* has ``rows`` rows of ``dim`` values of ``dtype_bytes`` each. A *sample* looks up
``pooling`` rows of every table (a bag) and sums them (the pooling). A step serves ``batch``
samples; in training it also sends each bag's gradient back and updates the rows it touched
(sparse SGD: read the row, add the gradient, write it back).

Access distributions (``zipf``): 0 is uniform over a table's rows; ``s > 0`` makes the row of
popularity rank ``k`` (1 = hottest) appear with probability ``k**-s / H(rows, s)``. Ranks are
scattered over row ids by a fixed bijective hash (``ipusim.embeddings.access``), as hashed
categorical ids are, so hot rows do not cluster on one tile. A table may instead carry explicit
per-rank weights (the GNN case, where a node is picked as a neighbour in proportion to its degree).

Presets (row counts and dims from the published configurations; source keys in docs/sources.md):

* ``dlrm-mlperf``: MLPerf Training DLRM v1 on Criteo Terabyte with ``--max-ind-range=40000000``:
  26 tables, dim 128, one look-up per table (DLRM-REF).
* ``dlrm-dcnv2``: MLPerf Training DLRM-DCNv2 (v3.0 on): the same 26 features with the
  40,000,000 cap, dim 128, multi-hot sizes 3, 2, 1, ... 100, 27, ... (MLPERF-DCNV2).
* ``torchrec-criteo``: the 26 tables of TorchRec's Criteo 1TB DLRM example (91.10 GiB in FP32,
  TORCHREC-DLRM), the configuration of its published A100 throughput.
* ``small`` and ``medium``: two table sets of our own that fit in one GC200's tile SRAM.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .. import limits
from .._validate import choice, positive

DLRM_CRITEO_TB_40M_ROWS = (
    39884406,
    39043,
    17289,
    7420,
    20263,
    3,
    7120,
    1543,
    63,
    38532951,
    2953546,
    403346,
    10,
    2208,
    11938,
    155,
    4,
    976,
    14,
    39979771,
    25641295,
    39664984,
    585935,
    12972,
    108,
    36,
)
"""Rows of the 26 Criteo Terabyte tables with ids capped at 40M (DLRM-REF: facebookresearch/dlrm
``dlrm_s_pytorch.py``, "Criteo Terabyte MLPerf training", ``--max-ind-range=40000000``)."""

DLRM_DCNV2_ROWS = (
    40000000,
    39060,
    17295,
    7424,
    20265,
    3,
    7122,
    1543,
    63,
    40000000,
    3067956,
    405282,
    10,
    2209,
    11938,
    155,
    4,
    976,
    14,
    40000000,
    40000000,
    40000000,
    590152,
    12973,
    108,
    36,
)
"""``--num_embeddings_per_feature`` of MLPerf DLRM-DCNv2 (MLPERF-DCNV2)."""

DLRM_DCNV2_POOLING = (
    3,
    2,
    1,
    2,
    6,
    1,
    1,
    1,
    1,
    7,
    3,
    8,
    1,
    6,
    9,
    5,
    1,
    1,
    1,
    12,
    100,
    27,
    10,
    3,
    1,
    1,
)
"""``--multi_hot_sizes`` of MLPerf DLRM-DCNv2 (MLPERF-DCNV2): look-ups per sample per table."""

TORCHREC_CRITEO_ROWS = (
    45833188,
    36746,
    17245,
    7413,
    20243,
    3,
    7114,
    1441,
    62,
    29275261,
    1572176,
    345138,
    10,
    2209,
    11267,
    128,
    4,
    974,
    14,
    48937457,
    11316796,
    40094537,
    452104,
    12606,
    104,
    35,
)
"""``--num_embeddings_per_feature`` of TorchRec's DLRM example on Criteo 1TB (TORCHREC-DLRM)."""

DLRM_DIM = (
    128  # values per row in all three DLRM configurations (DLRM-REF, MLPERF-DCNV2, TORCHREC-DLRM)
)

OGBN_PRODUCTS_NODES = 2_449_029  # OGB-PRODUCTS: ogbn-products nodes
OGBN_PRODUCTS_EDGES = 61_859_140  # OGB-PRODUCTS: ogbn-products edges (undirected)
OGBN_PRODUCTS_FEATURES = 100  # OGB-PRODUCTS: node feature dimension
DEGREE_EXPONENT = 2.5
"""Power-law exponent of the synthetic degree sequence (P(d) ~ d**-2.5). ASSUMPTION: the source
publishes node and edge counts only; 2-3 is the usual range for web and co-purchase graphs."""


@dataclass(frozen=True)
class Table:
    """One embedding table: ``rows`` x ``dim`` values; ``pooling`` look-ups per sample."""

    rows: int  # rows in the table
    dim: int  # values per row
    pooling: int = 1  # look-ups per sample (bag size)
    weights: np.ndarray | None = field(default=None, compare=False, repr=False)  # per-rank weights

    def __post_init__(self):
        positive("Table.rows", self.rows, integer=True)
        positive("Table.dim", self.dim, integer=True)
        positive("Table.pooling", self.pooling, integer=True)
        if self.weights is not None:
            w = np.asarray(self.weights, dtype=np.float64)
            if (
                w.shape != (self.rows,)
                or not np.all(np.isfinite(w))
                or np.any(w < 0)
                or w.sum() <= 0
            ):
                raise ValueError(
                    f"Table.weights must be {self.rows} finite weights >= 0 with a positive sum"
                )
            object.__setattr__(self, "weights", w / w.sum())

    @cached_property
    def weights_cdf(self) -> np.ndarray:
        """Cumulative ``weights`` (by rank), computed once."""
        return np.cumsum(self.weights)

    @cached_property
    def neg_weights(self) -> np.ndarray:
        """``-weights`` (ascending), for searching thresholds, computed once."""
        return -self.weights


@dataclass(frozen=True)
class Workload:
    """An embedding step: ``tables``, ``batch`` samples, row ``dtype_bytes``, ``zipf`` skew.

    ``bag_sizes`` (optional, one per sample) replaces every table's ``pooling`` for a
    one-table workload whose bags differ in size (the GNN case). ``training``: forward plus
    the sparse backward (gradients to the owners, rows read, updated and written back).
    """

    name: str
    tables: tuple
    batch: int  # samples per step
    dtype_bytes: int = 4  # bytes per value (FP32 by default, as the DLRM references train)
    zipf: float = 0.0  # 0: uniform; s > 0: P(rank k) ~ k**-s
    training: bool = False
    bag_sizes: np.ndarray | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("Workload.name must be a non-empty string")
        tabs = tuple(self.tables)
        if not tabs or not all(isinstance(t, Table) for t in tabs):
            raise ValueError("Workload.tables must be a non-empty sequence of Table")
        limits.check_at_most(
            "Workload.tables (count)",
            len(tabs),
            MAX_TABLES,
            "tables in one embedding step; published recommenders use tens to hundreds",
        )
        object.__setattr__(self, "tables", tabs)
        positive("Workload.batch", self.batch, integer=True)
        positive("Workload.dtype_bytes", self.dtype_bytes, integer=True)
        positive("Workload.zipf", self.zipf, allow_zero=True)
        if self.bag_sizes is not None:
            b = np.asarray(self.bag_sizes)
            if len(tabs) != 1:
                raise ValueError("Workload.bag_sizes needs exactly one table")
            if b.shape != (self.batch,) or np.any(b < 0) or np.any(b != np.round(b)):
                raise ValueError(f"Workload.bag_sizes must be {self.batch} whole numbers >= 0")
            object.__setattr__(self, "bag_sizes", b.astype(np.int64))

    @property
    def table_bytes(self) -> float:
        """Bytes of all tables."""
        return float(sum(t.rows * t.dim for t in self.tables) * self.dtype_bytes)

    @property
    def lookups_per_sample(self) -> float:
        """Mean rows looked up per sample (all tables)."""
        if self.bag_sizes is not None:
            return float(self.bag_sizes.mean())
        return float(sum(t.pooling for t in self.tables))

    @property
    def lookups(self) -> int:
        """Rows looked up per step."""
        if self.bag_sizes is not None:
            return int(self.bag_sizes.sum())
        return int(self.batch * sum(t.pooling for t in self.tables))

    @property
    def lookup_bytes(self) -> float:
        """Useful bytes looked up per step (rows x row bytes): what the pooling reads."""
        if self.bag_sizes is not None:
            return float(self.lookups * self.tables[0].dim * self.dtype_bytes)
        return float(self.batch * sum(t.pooling * t.dim for t in self.tables) * self.dtype_bytes)

    @property
    def output_bytes(self) -> float:
        """Bytes of the pooled outputs (one vector per sample per table)."""
        return float(self.batch * sum(t.dim for t in self.tables) * self.dtype_bytes)

    def replace(self, **changes) -> Workload:
        """A copy with some fields changed (validated again)."""
        import dataclasses

        return dataclasses.replace(self, **changes)

    def __repr__(self):
        skew = "uniform" if self.zipf == 0 else f"Zipf s={self.zipf:g}"
        return (
            f"Workload({self.name!r}: {len(self.tables)} tables, {self.table_bytes / 1e9:,.3f} GB, "
            f"batch {self.batch}, {self.lookups_per_sample:g} look-ups/sample, {skew}, "
            f"{'training' if self.training else 'forward'})"
        )


MAX_TABLES = 10_000  # tables in one workload: the simulation loops over tables


def uniform_tables(n_tables: int, rows: int, dim: int, pooling: int = 1) -> tuple:
    """``n_tables`` identical tables (the CLI's ``--tables --rows --dim --pooling``)."""
    n = positive("tables", n_tables, integer=True)
    limits.check_at_most(
        "tables",
        n,
        MAX_TABLES,
        "tables in one embedding step; published recommenders use tens to hundreds",
    )
    return tuple(Table(rows, dim, pooling) for _ in range(n))


PRESETS = ("dlrm-mlperf", "dlrm-dcnv2", "torchrec-criteo", "small", "medium")


def preset(name: str, *, batch: int = 2048, zipf: float = 0.0, training: bool = False) -> Workload:
    """A published (or our small/medium) table set as a ``Workload``.

    >>> preset("dlrm-mlperf").table_bytes / 1e9 > 100
    True
    """
    choice("embedding preset", name, PRESETS)
    if name == "dlrm-mlperf":
        tabs = tuple(Table(r, DLRM_DIM) for r in DLRM_CRITEO_TB_40M_ROWS)
    elif name == "dlrm-dcnv2":
        tabs = tuple(
            Table(r, DLRM_DIM, p) for r, p in zip(DLRM_DCNV2_ROWS, DLRM_DCNV2_POOLING, strict=True)
        )
    elif name == "torchrec-criteo":
        tabs = tuple(Table(r, DLRM_DIM) for r in TORCHREC_CRITEO_ROWS)
    elif name == "small":  # 8 x 10,000 x 64 FP32 = 20 MB: a few percent of one GC200's SRAM
        tabs = uniform_tables(8, 10_000, 64)
    else:  # medium: 26 x 40,000 x 128 FP32 = 532 MB: most of one GC200's 868 MB of data SRAM
        tabs = uniform_tables(26, 40_000, 128)
    return Workload(name, tabs, batch, 4, zipf, training)


def power_law_degrees(
    n: int,
    mean_degree: float,
    *,
    exponent: float = DEGREE_EXPONENT,
    max_degree: int | None = None,
    seed: int = 0,
) -> np.ndarray:
    """``n`` integer degrees >= 1 drawn from P(d) ~ d**-exponent, scaled to ``mean_degree``.

    A continuous Pareto with minimum ``d_min = mean (a - 2) / (a - 1)`` has the requested
    mean; draws are rounded, capped at ``max_degree`` and finally rescaled so that their sum is
    ``round(n x mean_degree)`` exactly (the published edge count).
    """
    n = positive("n", n, integer=True)
    mean_degree = positive("mean_degree", mean_degree)
    a = positive("exponent", exponent)
    if a <= 2:
        raise ValueError(f"exponent must be > 2 (a finite mean degree), got {exponent!r}")
    cap = n - 1 if max_degree is None else positive("max_degree", max_degree, integer=True)
    return _degrees(n, mean_degree, a, cap, seed).copy()


@functools.lru_cache(maxsize=2)
def _degrees(n: int, mean_degree: float, a: float, cap: int, seed) -> np.ndarray:
    """``power_law_degrees`` of checked arguments, read-only and remembered: claim 14 draws
    ogbn-products' 2.4 million degrees for the tile chip and again for the GPU (~0.2 s each)."""
    rng = np.random.default_rng(seed)
    d_min = mean_degree * (a - 2) / (a - 1)
    d = d_min * (1.0 - rng.random(n)) ** (-1.0 / (a - 1))
    d = np.clip(d, 1.0, cap)
    target = round(n * mean_degree)
    d = np.maximum(1, np.floor(d * target / d.sum())).astype(np.int64)
    short = target - int(d.sum())  # hand out the rounding remainder to the largest degrees
    if short > 0:
        k = short % n
        if k:
            d[np.argpartition(-d, k - 1)[:k]] += 1
        d += short // n
    d.flags.writeable = False
    return d


def gnn_products(batch: int = 1024, *, seed: int = 0, training: bool = False) -> Workload:
    """One GNN layer's neighbour gather on ogbn-products (full neighbourhoods, mean aggregation).

    Nodes, edges and feature width are the published ones (OGB-PRODUCTS); the degree sequence is
    synthetic (``power_law_degrees``, mean 2E/N). ``batch`` target nodes are drawn uniformly; each
    gathers the feature rows of all its neighbours; a node is picked as a neighbour in proportion
    to its degree (so the feature table has the degree distribution as its access skew).
    """
    batch = positive("batch", batch, integer=True)
    n, e = OGBN_PRODUCTS_NODES, OGBN_PRODUCTS_EDGES
    deg = power_law_degrees(n, 2 * e / n, seed=seed)
    rng = np.random.default_rng(seed + 1)
    targets = rng.integers(0, n, batch)
    weights = np.sort(deg)[::-1].astype(np.float64)  # rank 1 = the node of highest degree
    table = Table(n, OGBN_PRODUCTS_FEATURES, 1, weights=weights)
    return Workload("gnn-ogbn-products", (table,), batch, 4, 0.0, training, bag_sizes=deg[targets])
