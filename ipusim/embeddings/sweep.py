"""Sweeps the notebook and the CLI share: look-ups per second against table size, and skew."""

from __future__ import annotations

import math

from .._validate import positive
from .machines import simulate
from .workload import Workload, uniform_tables


def table_size_sweep(
    chips,
    rows_list,
    *,
    n_tables: int = 26,
    dim: int = 128,
    pooling: int = 1,
    batch: int = 2048,
    zipf: float = 0.0,
    cache: bool = True,
    seed: int = 0,
) -> list[dict]:
    """One row per (chip, rows per table): table bytes, fit, look-ups/s, samples/s/W.

    ``chips``: preset names, or ``(name, count)`` pairs for clusters. A step that does not fit
    has ``lookups_per_s = 0``.
    """
    out = []
    for entry in chips:
        name, count = (entry, 1) if isinstance(entry, str) else entry
        for rows in rows_list:
            w = Workload(
                f"{n_tables} x {rows}",
                uniform_tables(n_tables, positive("rows", rows, integer=True), dim, pooling),
                batch,
                4,
                zipf,
            )
            r = simulate(name, w, chips=count, cache=cache, seed=seed)
            ok = math.isfinite(r.time_s)
            out.append(
                {
                    "chip": name,
                    "chips": count,
                    "rows": int(rows),
                    "table_bytes": w.table_bytes,
                    "fit": r.fit,
                    "lookups_per_s": r.lookups_per_s if ok else 0.0,
                    "samples_per_s_per_w": r.samples_per_s_per_w if ok else 0.0,
                    "hit_rate": r.hit_rate,
                    "result": r,
                }
            )
    return out


def crossover_bytes(
    rows: list[dict], tile: str, other: str, *, tile_chips: int = 1, other_chips: int = 1
) -> float:
    """Largest table size at which both fit and ``tile_chips`` x ``tile`` serve more look-ups/s
    than ``other_chips`` x ``other`` (0 if never). Both must appear in ``rows`` (from
    ``table_size_sweep``) at the same sizes.
    """
    a = {
        r["table_bytes"]: r["lookups_per_s"]
        for r in rows
        if (r["chip"], r["chips"]) == (tile, tile_chips)
    }
    b = {
        r["table_bytes"]: r["lookups_per_s"]
        for r in rows
        if (r["chip"], r["chips"]) == (other, other_chips)
    }
    if not a or set(a) != set(b):
        raise ValueError(f"rows must hold {tile!r} and {other!r} at the same table sizes")
    wins = [size for size in a if a[size] > b[size] > 0]
    return float(max(wins)) if wins else 0.0
