"""The fastest placement of a training step that fits, found over the whole grid at once.

The grid: every ``(data, tensor, pipeline)`` with ``data * tensor * pipeline = chips``
(tensor degrees that divide the heads, up to ``MAX_TENSOR``; pipeline up to the layers),
every micro-batch that divides a replica's share of the global batch (up to
``MAX_MICRO_BATCH``), three recomputation modes and, with more than one replica, four
sharding stages. Memory is checked first (cheap, element-wise); the placements that fit get a
lower bound on their step time (their ops timed with no training state reserved on the tiles),
and exact times are computed in order of that bound until the bound passes the best time found.
"""

from __future__ import annotations

import numpy as np

from .. import footprint as mem
from . import model as _model
from .step import Placement, TrainingStep, build, inputs

MAX_TENSOR = 16  # chips; beyond this a layer's matmuls get too thin to pay for their all-reduces
MAX_MICRO_BATCH = 64  # sequences


def _divisors(n: int, at_most: int | None = None) -> list[int]:
    """The divisors of ``n`` up to ``at_most`` (default ``n``), ascending: work O(min(n, at_most))."""
    return [k for k in range(1, min(n, n if at_most is None else at_most) + 1) if n % k == 0]


def candidates(
    cfg, chips: int, global_batch: int, recompute=mem.RECOMPUTE, sharding=mem.SHARDING
) -> dict:
    """Every placement on the grid, as arrays ``d, t, p, b, recompute, sharding`` (``recompute``
    and ``sharding`` restrict the modes tried)."""
    rcs = [mem.RECOMPUTE.index(r) for r in _check_modes(recompute, sharding)]
    zs = tuple(sharding)
    rows = []
    for t in _divisors(chips):
        if t > MAX_TENSOR or cfg.heads % t:
            continue
        for p in _divisors(chips // t):
            if p > cfg.layers:
                continue
            d = chips // (t * p)
            if global_batch % d:
                continue
            for b in _divisors(global_batch // d, MAX_MICRO_BATCH):
                for rc in rcs:
                    for z in zs if d > 1 else zs[:1]:
                        rows.append((d, t, p, b, rc, z))
    if not rows:
        raise ValueError(
            f"no placement of {chips} chips divides the global batch of {global_batch} "
            f"sequences; use a batch divisible by more of the chip count's factors"
        )
    a = np.array(rows, dtype=np.int64)
    return {k: a[:, i] for i, k in enumerate(("d", "t", "p", "b", "recompute", "sharding"))}


def _check_modes(recompute, sharding):
    recompute = (recompute,) if isinstance(recompute, str) else tuple(recompute)
    for r in recompute:
        if r not in mem.RECOMPUTE:
            raise ValueError(f"unknown recompute {r!r}; valid: {', '.join(mem.RECOMPUTE)}")
    if not recompute or not tuple(sharding) or any(z not in mem.SHARDING for z in sharding):
        raise ValueError(
            f"recompute and sharding must be non-empty; sharding stages are 0-3, got {sharding!r}"
        )
    return recompute


def _placement(g, i) -> Placement:
    return Placement(
        int(g["d"][i]),
        int(g["t"][i]),
        int(g["p"][i]),
        int(g["b"][i]),
        mem.RECOMPUTE[int(g["recompute"][i])],
        int(g["sharding"][i]),
    )


_KNOBS = (
    ("d", "data-parallel degree"),
    ("t", "tensor-parallel degree"),
    ("p", "pipeline degree"),
    ("b", "micro-batch"),
    ("recompute", "recomputation"),
    ("sharding", "sharding stage"),
)


class _Timer:
    """Exact step times of grid placements, computed only where a lower bound says a placement
    could still win (``model.evaluate(..., bound=True)``: the ops timed with no training state
    reserved on the tiles; more room never makes an op slower)."""

    def __init__(self, cfg, c, chips, seq_len, global_batch, g, fits):
        self.args, self.g = (cfg, c, chips, seq_len, global_batch), g
        self.bound = np.full(fits.size, np.inf)
        self.times = np.full(fits.size, np.nan)  # exact, where computed
        if fits.any():
            self.bound[fits] = self._evaluate(np.flatnonzero(fits), bound=True)["step_time_s"]

    def _evaluate(self, idx, bound=False):
        g = self.g
        return _model.evaluate(
            *self.args,
            g["d"][idx],
            g["t"][idx],
            g["p"][idx],
            g["b"][idx],
            g["recompute"][idx],
            g["sharding"][idx],
            bound=bound,
        )

    def fastest(self, idx):
        """Index (into the grid) of the fastest placement among ``idx`` that fits, or None."""
        idx = np.asarray(idx)
        idx = idx[np.isfinite(self.bound[idx])]
        best, best_t = None, np.inf
        for i in idx[np.argsort(self.bound[idx], kind="stable")]:
            if self.bound[i] >= best_t:
                break
            if np.isnan(self.times[i]):
                self.times[i] = float(self._evaluate(np.array([i]))["step_time_s"][0])
            if self.times[i] < best_t:
                best, best_t = int(i), float(self.times[i])
        return best

    def row(self, i):
        return self._evaluate(np.array([i]))


def _why_not(c, g, timer, mem_row, best) -> list[dict]:
    """For each knob, the fastest placement that differs from the best in that knob only, and
    why it loses (slower by how much, or what does not fit)."""
    out = []
    tb = timer.times[best]
    for key, label in _KNOBS:
        same = np.ones(g["d"].size, bool)
        for other, _ in _KNOBS:
            if other == key or (key in ("d", "t", "p") and other in ("d", "t", "p")):
                continue
            same &= g[other] == g[other][best]
        same &= g[key] != g[key][best]
        idx = np.flatnonzero(same)
        if idx.size == 0:
            continue
        j = timer.fastest(idx)
        if j is not None:
            tj = timer.times[j]
            out.append(
                {
                    "knob": label,
                    "placement": _placement(g, j).to_dict(),
                    "fits": True,
                    "step_time_s": float(tj),
                    "slower_by": float(tj / tb - 1.0),
                    "why": f"{tj / tb - 1.0:.1%} slower",
                }
            )
        else:
            j = idx[np.argmin(mem_row["memory_total"][idx])]
            need = float(mem_row["memory_total"][j])
            cap = float(c.hbm_bytes * mem.GPU_USABLE_FRACTION if c.kind == "gpu" else c.data_bytes)
            out.append(
                {
                    "knob": label,
                    "placement": _placement(g, j).to_dict(),
                    "fits": False,
                    "step_time_s": float("inf"),
                    "slower_by": float("inf"),
                    "why": f"does not fit: needs {need / 1e9:,.2f} GB per chip"
                    + (
                        f" (capacity {cap / 1e9:,.2f} GB)"
                        if c.kind == "gpu"
                        else " with its states in Streaming Memory where needed, or a tile overflows"
                    ),
                }
            )
    return out


def best_placement(
    model,
    chip,
    chips: int,
    *,
    seq_len: int | None = None,
    global_batch: int | None = None,
    recompute=mem.RECOMPUTE,
    sharding=mem.SHARDING,
    explain: bool = True,
) -> TrainingStep:
    """The fastest placement of a training step that fits on ``chips`` chips.

    When none fits, the result has ``fit == "does_not_fit"`` and ``fit_message`` gives the
    shortest way out (the smallest power-of-two multiple of the chip count that fits)."""
    cfg, c, chips, seq_len, global_batch = inputs(model, chip, chips, seq_len, global_batch)
    sharding = (sharding,) if isinstance(sharding, int) else tuple(sharding)
    g = candidates(cfg, chips, global_batch, recompute, sharding)
    mem_row = _model.evaluate_memory(
        cfg, c, seq_len, global_batch, g["d"], g["t"], g["p"], g["b"], g["recompute"], g["sharding"]
    )
    timer = _Timer(cfg, c, chips, seq_len, global_batch, g, mem_row["level"] >= 0)
    i = timer.fastest(np.arange(g["d"].size))
    if i is not None:
        alts = _why_not(c, g, timer, mem_row, i) if explain else ()
        return build(cfg, c, chips, seq_len, global_batch, _placement(g, i), timer.row(i), 0, alts)
    # Nothing fits: the least memory-hungry placement, and how many chips would do.
    i = int(np.argmin(mem_row["memory_total"]))
    row = _model.evaluate(
        cfg,
        c,
        chips,
        seq_len,
        global_batch,
        *(g[k][i] for k in ("d", "t", "p", "b")),
        g["recompute"][i],
        g["sharding"][i],
    )
    res = build(cfg, c, chips, seq_len, global_batch, _placement(g, i), row)
    more = _chips_that_fit(cfg, c, chips, seq_len, global_batch, recompute, sharding)
    tried = (
        "every recompute and sharding option tried"
        if set(recompute) == set(mem.RECOMPUTE) and set(sharding) == set(mem.SHARDING)
        else "with the recompute and sharding options given"
    )
    way = (
        f"the smallest chip count that fits ({tried}): {more}"
        if more
        else f"no chip count up to {chips * 64} fits ({tried}); use a chip with more memory"
    )
    if tried.startswith("with"):
        wider = _chips_that_fit(
            cfg, c, chips // 2 or 1, seq_len, global_batch, mem.RECOMPUTE, mem.SHARDING
        )
        if wider and wider <= chips:
            way += "; with full recomputation and sharding allowed it fits on these chips"
    return _replace_msg(res, f"no placement fits on {chips} {c.name}: {res.fit_message}; {way}")


def _replace_msg(res, msg):
    import dataclasses

    return dataclasses.replace(res, fit_message=msg)


def _chips_that_fit(cfg, c, chips, seq_len, global_batch, recompute, sharding):
    n = chips
    for _ in range(6):
        n *= 2
        try:
            g = candidates(cfg, n, global_batch, recompute, sharding)
        except ValueError:
            continue
        m = _model.evaluate_memory(
            cfg,
            c,
            seq_len,
            global_batch,
            g["d"],
            g["t"],
            g["p"],
            g["b"],
            g["recompute"],
            g["sharding"],
        )
        if (m["level"] >= 0).any():
            return n
    return None


def smallest_chip_count(
    model,
    chip,
    *,
    seq_len: int | None = None,
    global_batch: int | None = None,
    limit: int = 1 << 16,
) -> int | None:
    """The fewest chips (a power of two, up to ``limit``) on which some placement fits (memory only)."""
    cfg, c, _, seq_len, global_batch = inputs(model, chip, 1, seq_len, global_batch)
    n = 1
    while n <= limit:
        if n == 1 or c.link_bandwidth_bytes_per_s > 0:
            try:
                g = candidates(cfg, n, global_batch)
            except ValueError:
                g = None
            if g is not None:
                m = _model.evaluate_memory(
                    cfg,
                    c,
                    seq_len,
                    global_batch,
                    g["d"],
                    g["t"],
                    g["p"],
                    g["b"],
                    g["recompute"],
                    g["sharding"],
                )
                if (m["level"] >= 0).any():
                    return n
        n *= 2
    return None
