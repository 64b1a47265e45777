"""FP16 weight updates: round-to-nearest stalls where stochastic rounding keeps going.

A weight kept in FP16 and updated by ``w <- w - lr * g`` loses every update smaller than half
the spacing of FP16 numbers around ``w`` under round-to-nearest (the update rounds back to
``w``). Stochastic rounding rounds up with probability equal to the fraction of the gap, so
the expected update is exact (Gupta et al. 2015, "Deep Learning with Limited Numerical
Precision"); Graphcore's tile chips do it in hardware for FP16 arithmetic. The experiment is
least-squares linear regression by full-batch gradient descent, weights stored in FP16,
gradients in FP32. Seconds on a laptop; seeded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import positive

ROUNDINGS = ("fp32", "nearest", "stochastic")


def round_fp16(x: np.ndarray, mode: str, rng: np.random.Generator) -> np.ndarray:
    """``x`` (float64/32) rounded to FP16 values (returned as float64): ``nearest`` or
    ``stochastic`` (round up with probability equal to the fraction of the gap)."""
    x = np.asarray(x, dtype=np.float64)
    if mode == "nearest":
        return x.astype(np.float16).astype(np.float64)
    if mode != "stochastic":
        raise ValueError(f"unknown rounding {mode!r}; valid: nearest, stochastic")
    down = x.astype(np.float16)
    down = np.where(down.astype(np.float64) > x, np.nextafter(down, np.float16(-np.inf)), down)
    up = np.nextafter(down, np.float16(np.inf))
    lo, hi = down.astype(np.float64), up.astype(np.float64)
    gap = hi - lo
    frac = np.divide(x - lo, gap, out=np.zeros_like(x), where=gap > 0)
    return np.where(rng.random(x.shape) < frac, hi, lo)


@dataclass(frozen=True)
class ConvergenceRun:
    """Loss per step for each rounding of the weights."""

    steps: np.ndarray  # step index
    loss: dict  # rounding -> loss per step (mean squared error)

    def final(self, mode: str) -> float:
        return float(self.loss[mode][-1])

    def to_dict(self) -> dict:
        return {"steps": self.steps.tolist(), "loss": {k: v.tolist() for k, v in self.loss.items()}}

    def __repr__(self):
        return (
            "ConvergenceRun(final loss: "
            + ", ".join(f"{k} {v[-1]:.4g}" for k, v in self.loss.items())
            + ")"
        )


def fp16_updates(
    *,
    steps: int = 2000,
    features: int = 64,
    samples: int = 512,
    lr: float = 1e-3,
    weight_scale: float = 8.0,
    seed: int = 0,
) -> ConvergenceRun:
    """Gradient descent on a linear regression whose true weights are of size ``weight_scale``
    (so FP16's spacing near them, ~``weight_scale / 1024``, dwarfs ``lr x gradient`` late in
    training), with the weights stored in FP32, in FP16 rounded to nearest, and in FP16 with
    stochastic rounding. Returns the loss curves."""
    steps = positive("steps", steps, integer=True)
    features = positive("features", features, integer=True)
    samples = positive("samples", samples, integer=True)
    lr = positive("lr", lr)
    weight_scale = positive("weight_scale", weight_scale)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((samples, features))
    w_true = weight_scale * (1.0 + 0.25 * rng.standard_normal(features))
    y = X @ w_true
    w0 = w_true + 0.5 * rng.standard_normal(
        features
    )  # start near the answer: the late phase of training
    loss = {}
    for mode in ROUNDINGS:
        r = np.random.default_rng(seed + 1)
        w = w0.copy() if mode == "fp32" else round_fp16(w0, "nearest", r)
        out = np.empty(steps)
        for k in range(steps):
            err = X @ w - y
            out[k] = float(np.mean(err**2))
            g = (2.0 / samples) * (X.T @ err)
            w = w - lr * g if mode == "fp32" else round_fp16(w - lr * g, mode, r)
        loss[mode] = out
    return ConvergenceRun(np.arange(steps), loss)
