"""A grid of step bounds: batch x sequence length x chip (``sweep``): per-op quantities are
fitted once as coefficients (``step_coefficients``), then the Numba kernel ``_sweep_kernel``
bounds every point (``tests/roofline_reference.py`` builds every step and bounds it op by op). Seconds."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .. import workloads
from .._validate import choice, positive
from ..hardware import GpuChip, TileChip
from ..hardware import chip as _chip
from ..workloads import Step
from .bounds import op_live_bytes
from .levels import main_memory_bandwidth

_BASIS = ((1, 8), (2, 8), (1, 16), (1, 32))  # (batch, seq_len) points that fix the 4 coefficients
_CHECK = (3, 24)  # a fifth point that must agree


def _features(b, ln):
    return np.array([1.0, b, b * ln, b * ln * ln])


def _op_quantities(s: Step) -> np.ndarray:
    """Per op: FLOPs, weight bytes, activation bytes, live activation bytes of one
    instance, KV-cache bytes."""
    return np.array(
        [
            [
                o.flops,
                o.weight_bytes,
                o.act_read_bytes + o.act_write_bytes,
                op_live_bytes(o, s),
                o.kv_bytes,
            ]
            for o in s.ops
        ]
    )


def step_coefficients(model_or_name, phase: str = "forward", dtype_bytes: int = 2) -> np.ndarray:
    """Coefficients ``C[op, quantity, 4]`` with quantity = C . (1, B, B l, B l^2) for a batch
    of B sequences of l tokens (context length for decode), quantity in (FLOPs, weight bytes,
    activation bytes, live activation bytes per instance, KV-cache bytes).

    Every op of ``workloads.step`` is linear in those four features; this solves for the
    coefficients from four steps and checks them on a fifth (an error if the op list ever
    stops being of that form).
    """
    m = workloads.model(model_or_name)
    pts = [(b, min(ln, m.max_positions)) for b, ln in _BASIS]
    A = np.array([_features(b, ln) for b, ln in pts])
    Y = np.stack(
        [
            _op_quantities(workloads.step(m, [ln] * b, phase=phase, dtype_bytes=dtype_bytes))
            for b, ln in pts
        ]
    )  # (4 points, ops, 4 quantities)
    C = np.linalg.solve(A, Y.reshape(4, -1)).T.reshape(Y.shape[1], Y.shape[2], 4)
    b, ln = _CHECK
    ln = min(ln, m.max_positions)
    want = _op_quantities(workloads.step(m, [ln] * b, phase=phase, dtype_bytes=dtype_bytes))
    got = C @ _features(b, ln)
    if not np.allclose(got, want, rtol=1e-9, atol=1e-6):
        raise RuntimeError(
            "workloads.step is no longer linear in (1, B, B l, B l^2); sweep cannot be used"
        )
    return C


@njit(cache=True)
def _sweep_kernel(
    batches,
    seq_lens,
    coef,
    fixed_need,
    kv_per_token,
    peak,
    bw_fast,
    bw_weights,
    cap,
    out_time,
    out_fits,
):
    """Step lower bounds over a (chip, batch, seq_len) grid.

    Preconditions: ``batches`` and ``seq_lens`` are float64 arrays of whole numbers >= 1;
    ``coef`` is float64 (ops, 5 quantities, 4 features) from ``step_coefficients``;
    ``peak``, ``bw_fast`` (> 0), ``bw_weights`` (>= 0; 0 means "no off-chip weight stream")
    and ``cap`` are float64 arrays of one value per chip; ``out_time`` (float64) and
    ``out_fits`` (bool) have shape (chips, batches, seq_lens).
    """
    n_ops = coef.shape[0]
    for c in range(peak.shape[0]):
        for i in range(batches.shape[0]):
            b = batches[i]
            for j in range(seq_lens.shape[0]):
                f1 = b
                f2 = b * seq_lens[j]
                f3 = f2 * seq_lens[j]
                live = 0.0
                for o in range(n_ops):
                    v = coef[o, 3, 0] + coef[o, 3, 1] * f1 + coef[o, 3, 2] * f2 + coef[o, 3, 3] * f3
                    if v > live:
                        live = v
                kv_need = kv_per_token * f2
                fits = fixed_need + live + kv_need <= cap[c]
                kv_on = live + kv_need <= cap[c]  # placement(): weights off first, then KV,
                act_on = live <= cap[c]  # then activations
                t = 0.0
                for o in range(n_ops):
                    fl = (
                        coef[o, 0, 0] + coef[o, 0, 1] * f1 + coef[o, 0, 2] * f2 + coef[o, 0, 3] * f3
                    )
                    w = coef[o, 1, 0] + coef[o, 1, 1] * f1 + coef[o, 1, 2] * f2 + coef[o, 1, 3] * f3
                    a = coef[o, 2, 0] + coef[o, 2, 1] * f1 + coef[o, 2, 2] * f2 + coef[o, 2, 3] * f3
                    kv = (
                        coef[o, 4, 0] + coef[o, 4, 1] * f1 + coef[o, 4, 2] * f2 + coef[o, 4, 3] * f3
                    )
                    comp = fl / peak[c]
                    if fits or bw_weights[c] <= 0.0:
                        mem = (w + a + kv) / bw_fast[c]
                    else:
                        off = w
                        if not kv_on:
                            off += kv
                        if not act_on:
                            off += a
                        mem = max(off / bw_weights[c], (w + a + kv - off) / bw_fast[c])
                    t += max(comp, mem)
                out_time[c, i, j] = t
                out_fits[c, i, j] = fits


@dataclass(frozen=True)
class BoundGrid:
    """Step lower bounds over chips x batches x sequence lengths. Seconds."""

    chips: tuple  # chip names
    model: str
    phase: str
    batches: np.ndarray  # sequences per step
    seq_lens: np.ndarray  # tokens per sequence (context length for decode)
    time_s: np.ndarray  # (chips, batches, seq_lens) lower bound of one step
    fits: np.ndarray  # (chips, batches, seq_lens) step fits in tile SRAM / HBM

    @property
    def tokens_per_s(self) -> np.ndarray:
        """Upper bound on real tokens per second (new tokens for decode)."""
        per_seq = (
            np.ones_like(self.seq_lens, dtype=np.float64)
            if self.phase == "decode"
            else self.seq_lens
        )
        return self.batches[None, :, None] * per_seq[None, None, :] / self.time_s

    def best_chip(self) -> np.ndarray:
        """Name of the fastest chip at each (batch, seq_len) point."""
        return np.asarray(self.chips)[np.argmin(self.time_s, axis=0)]

    def to_dict(self) -> dict:
        return {
            "chips": list(self.chips),
            "model": self.model,
            "phase": self.phase,
            "batches": self.batches.tolist(),
            "seq_lens": self.seq_lens.tolist(),
            "time_s": self.time_s.tolist(),
            "fits": self.fits.tolist(),
        }

    def __repr__(self):
        return (
            f"BoundGrid({self.model} {self.phase}: {len(self.chips)} chips x {self.batches.size} batches "
            f"x {self.seq_lens.size} lengths; bounds {self.time_s.min() * 1e6:,.3g} us .. "
            f"{self.time_s.max() * 1e3:,.3g} ms)"
        )


def _sweep_inputs(chips, model_or_name, batches, seq_lens):
    m = workloads.model(model_or_name)
    if isinstance(chips, (str, TileChip, GpuChip)):
        chips = [chips]
    cs = [_chip(c) for c in chips]
    if not cs:
        raise ValueError("chips is empty: give at least one chip preset name or chip object")
    arrs = []
    for name, v in (("batches", batches), ("seq_lens", seq_lens)):
        a = np.atleast_1d(np.asarray(v))
        if a.size == 0 or a.ndim != 1:
            raise ValueError(f"{name} must be a non-empty 1-D list of whole numbers >= 1")
        if (
            not np.issubdtype(a.dtype, np.number)
            or not np.all(np.isfinite(a))
            or np.any(a < 1)
            or np.any(a != np.round(a))
        ):
            raise ValueError(f"{name} must hold whole numbers >= 1, got {v!r}")
        arrs.append(a.astype(np.int64))
    if arrs[1].max() > m.max_positions:
        raise ValueError(
            f"seq_lens holds {arrs[1].max()} > {m.name}'s max_positions {m.max_positions}"
        )
    return m, cs, arrs[0], arrs[1]


def sweep(
    chips, model_or_name, batches, seq_lens, *, phase: str = "forward", dtype_bytes: int = 2
) -> BoundGrid:
    """Lower-bound step time of ``model`` for every chip x batch x sequence length (Numba).

    Each grid point is a batch of ``batch`` sequences of ``seq_len`` tokens (for decode: one
    new token each against a context of ``seq_len``), bounded as ``step_time_s`` bounds it
    (unfused): everything from tile SRAM when the step fits, else the weights (and the KV
    cache, and activations, when they do not fit either: ``placement``) from off-chip DRAM.
    """
    m, cs, b, lens = _sweep_inputs(chips, model_or_name, batches, seq_lens)
    choice("phase", phase, workloads.PHASES)
    dt = positive("dtype_bytes", dtype_bytes, integer=True)
    coef = step_coefficients(m, phase, dt)
    kv = float(m.kv_bytes_per_token(dt)) if phase in ("prefill", "decode") else 0.0
    peak = np.array([c.peak_flops for c in cs], dtype=np.float64)
    fast = np.array([main_memory_bandwidth(c, weights_on_chip=True) for c in cs], dtype=np.float64)
    wbw = np.array(
        [c.offchip_bandwidth_bytes_per_s if isinstance(c, TileChip) else 0.0 for c in cs]
    )
    cap = np.array(
        [c.data_bytes if isinstance(c, TileChip) else c.hbm_bytes for c in cs], dtype=np.float64
    )
    out_t = np.empty((len(cs), b.size, lens.size))
    out_f = np.empty((len(cs), b.size, lens.size), dtype=np.bool_)
    _sweep_kernel(
        b.astype(np.float64),
        lens.astype(np.float64),
        coef,
        float(m.weight_bytes(dt)),
        kv,
        peak,
        fast,
        wbw.astype(np.float64),
        cap,
        out_t,
        out_f,
    )
    return BoundGrid(tuple(c.name for c in cs), m.name, phase, b, lens, out_t, out_f)
