"""The tile machine's three efficiency parameters, the values in force.

Each is set ONCE, for every tile chip, model and batch, by a stated rule from measured IPU
figures (facts §1.5); ``ipusim.tile_calibration`` holds the rules (``fit``), the check against
measurements and ``overrides``. The simulator (``ipusim.tiles``, ``ipusim.tileplan``) reads the
values here at call time, so an override applies to every call inside it.
"""

from __future__ import annotations

AMP_PHASE_OVERHEAD_CYCLES = 321.0
"""Cycles a tile spends in each AMP (matmul) compute phase beyond its FLOPs and its vertex
launches: TESS-PF intercept, 332 cycles, less the 11-cycle vertex launch (rule: ``ipusim.tile_calibration``)."""

EXCHANGE_EFFICIENCY = 0.96
"""Fraction of the nominal exchange rate all tiles attain together: JIA-FT 7,679 GB/s measured
on a GC2 / 8 TB/s (LOUW), rounded to two places."""

REARRANGE_BYTES_PER_CYCLE = 1.5
"""Bytes per cycle a tile rearranges of the operands it received, before an AMP phase (rule
in ``ipusim.tile_calibration``: set by ``fit()`` from JIA-FT's GEMM, rounded to two significant digits)."""

PARAMETERS = ("AMP_PHASE_OVERHEAD_CYCLES", "EXCHANGE_EFFICIENCY", "REARRANGE_BYTES_PER_CYCLE")


def current() -> tuple:
    """The parameters in force, ``((name, value), ...)`` in ``PARAMETERS`` order: part of the key
    of every cache of tile-simulator results (``ipusim.placement``, ``ipusim.serving.tables``), so
    that a result computed inside ``overrides`` is never served outside it, nor the reverse."""
    g = globals()
    return tuple((k, float(g[k])) for k in PARAMETERS)
