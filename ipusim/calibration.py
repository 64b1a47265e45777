"""A user's own measurements set the GPU model's efficiency parameters for their chip.

Measurements are rows in the registry's format (``ipusim/data/published.md``). Each must be a
padded forward step on one GPU preset (``area`` gpu, ``workload`` gpu-padded, ``unit`` ms, a
model preset, ``batch`` and ``seq_len``); all rows name the same chip. Any other row is refused
with its line and the reason: nothing is matched loosely.

Parameters set (documented in ``ipusim.gpu.params`` and ``ipusim.hardware``):

* ``tensor_efficiency``: fraction of tensor-core peak a matmul attains (``TENSOR_EFFICIENCY``),
  bounded to ``TENSOR_EFFICIENCY_BOUNDS``;
* ``launch_s``: seconds per kernel (``kernel_launch_s``), bounded to ``LAUNCH_BOUNDS_S``.

Rule (the same as ``ipusim.gpu.calibration.fit_calibration`` uses for the published TensorRT
rows, on a continuous range instead of a grid): the pair minimising
``sum(ln(predicted / measured)**2)`` over the rows, within the bounds. A step's time is its
time without launches plus kernels x the per-kernel cost, so each efficiency is simulated once;
the efficiency is searched on a 0.01 grid and refined by golden section, the per-kernel cost by
golden section for each efficiency. ``HBM_EFFICIENCY`` is not fitted (padded BERT steps do not
separate it from the tensor efficiency; ASSUMPTION that the datasheet-derived value holds).

``load(path)`` reads the file ``calibrate`` writes: ``{"gpu": {"chip", "tensor_efficiency",
"launch_s"}}``, which ``ipusim.validation.validate(params=...)`` and ``--calibration FILE``
apply to that chip's padded GPU steps.
"""

from __future__ import annotations

import math

import numpy as np

TENSOR_EFFICIENCY_BOUNDS = (0.20, 1.00)  # a fraction of peak; below 0.2 the chip is not the one named
LAUNCH_BOUNDS_S = (0.0, 50e-6)  # seconds per kernel; 10x the preset's 4.9 us
_GOLDEN = (math.sqrt(5) - 1) / 2


def _golden(f, lo, hi, iters=60):
    a, b = lo, hi
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - _GOLDEN * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + _GOLDEN * (b - a)
            fd = f(d)
    return (a + b) / 2


def measurements(path) -> list[dict]:
    """The rows of ``path`` (registry format), each checked to be one the GPU fit can match;
    ``ValueError`` names the first that is not (its line, id and the reason)."""
    from . import hardware, workloads
    from .validation import read_rows

    rows = read_rows(path)
    if not rows:
        raise ValueError(f"{path}: no measurements")
    chips = set()
    for i, r in enumerate(rows):
        where = f"{path}, line {i + 2} (id {r['id']!r})"
        if r["area"] != "gpu" or r["workload"] != "gpu-padded":
            raise ValueError(f"{where}: cannot be matched: calibrate fits padded GPU steps "
                             f"(area gpu, workload gpu-padded), got area {r['area']!r}, workload {r['workload']!r}")
        if r["chip"] not in hardware.GPU_PRESETS:
            raise ValueError(f"{where}: chip must be a GPU preset ({', '.join(hardware.GPU_PRESETS)}), got {r['chip']!r}")
        if r["unit"] != "ms" or r["metric"] != "latency":
            raise ValueError(f"{where}: metric must be latency in ms, got {r['metric']!r} in {r['unit']!r}")
        if r["model"] not in workloads.MODELS:
            raise ValueError(f"{where}: model must be a preset ({', '.join(workloads.MODELS)}), got {r['model']!r}")
        if not r["batch"] or not r["seq_len"]:
            raise ValueError(f"{where}: batch and seq_len are needed to simulate the step")
        chips.add(r["chip"])
    if len(chips) > 1:
        raise ValueError(f"{path}: measurements of one chip per file, got {', '.join(sorted(chips))}")
    return list(rows)


def _launchless(rows, eff):
    from .gpu import simulate
    from .workloads import step

    t0, k = [], []
    for r in rows:
        res = simulate(r["chip"], step(r["model"], [r["seq_len"]] * r["batch"], pad_to=r["seq_len"]),
                       tensor_efficiency=eff, launch_s=0.0)
        t0.append(res.extra["time_if_unlimited_s"])
        k.append(sum(x["count"] for x in res.extra["kernels"]))
    return np.array(t0), np.array(k, float)


def fit(rows) -> dict:
    """The bounded least-squares rule of the module docstring over ``rows`` (from
    ``measurements``): chip, tensor_efficiency, launch_s, rows, and the root-mean-square
    ``ln(predicted / measured)`` before (preset parameters) and after."""
    from .gpu.params import TENSOR_EFFICIENCY

    measured = np.array([r["value"] for r in rows]) * 1e-3
    cache = {}

    def inner(eff):
        if eff not in cache:
            t0, k = _launchless(rows, eff)

            def cost(launch):
                return float(np.sum(np.log((t0 + k * launch) / measured) ** 2))
            launch = _golden(cost, *LAUNCH_BOUNDS_S)
            cache[eff] = (cost(launch), launch)
        return cache[eff]

    grid = np.round(np.arange(TENSOR_EFFICIENCY_BOUNDS[0], TENSOR_EFFICIENCY_BOUNDS[1] + 1e-9, 0.01), 2)
    best = min(grid, key=lambda e: inner(float(e))[0])
    lo, hi = max(TENSOR_EFFICIENCY_BOUNDS[0], best - 0.01), min(TENSOR_EFFICIENCY_BOUNDS[1], best + 0.01)
    eff = _golden(lambda e: inner(e)[0], lo, hi, iters=30)
    cost, launch = inner(eff)
    chip = rows[0]["chip"]
    from .hardware import chip as _chip

    t0, k = _launchless(rows, TENSOR_EFFICIENCY)
    before = float(np.sum(np.log((t0 + k * _chip(chip).kernel_launch_s) / measured) ** 2))
    n = len(rows)
    return {"chip": chip, "tensor_efficiency": float(eff), "launch_s": float(launch), "rows": n,
            "rms_log_error_before": math.sqrt(before / n), "rms_log_error_after": math.sqrt(cost / n),
            "tensor_efficiency_preset": TENSOR_EFFICIENCY, "launch_s_preset": _chip(chip).kernel_launch_s}


def to_toml(result: dict, source: str) -> str:
    """The calibration file ``load`` reads."""
    return (f"# ipusim calibration, written by `ipusim calibrate` from {source}\n"
            f"# rule: bounded least squares of ln(predicted / measured) (ipusim.calibration)\n"
            f"[gpu]\nchip = \"{result['chip']}\"\n"
            f"tensor_efficiency = {result['tensor_efficiency']:.6g}  # preset {result['tensor_efficiency_preset']}\n"
            f"launch_s = {result['launch_s']:.6g}  # preset {result['launch_s_preset']:.3g}\n"
            f"rows = {result['rows']}\n"
            f"rms_log_error_before = {result['rms_log_error_before']:.6g}\n"
            f"rms_log_error_after = {result['rms_log_error_after']:.6g}\n")


def load(path) -> dict:
    """The parameters of a calibration file: ``{"gpu": {"chip", "tensor_efficiency",
    "launch_s"}}``; ``ValueError`` names a missing or out-of-bounds key."""
    import tomllib

    from . import hardware

    with open(path, "rb") as f:
        try:
            d = tomllib.load(f)
        except tomllib.TOMLDecodeError as err:
            raise ValueError(f"{path}: not a calibration file ({err})") from None
    g = d.get("gpu")
    if not isinstance(g, dict):
        raise ValueError(f"{path}: no [gpu] table (write one with `ipusim calibrate`)")
    for key in ("chip", "tensor_efficiency", "launch_s"):
        if key not in g:
            raise ValueError(f"{path}: [gpu] needs {key}")
    if g["chip"] not in hardware.GPU_PRESETS:
        raise ValueError(f"{path}: [gpu] chip must be a GPU preset ({', '.join(hardware.GPU_PRESETS)}), got {g['chip']!r}")
    for key, (lo, hi) in (("tensor_efficiency", TENSOR_EFFICIENCY_BOUNDS), ("launch_s", LAUNCH_BOUNDS_S)):
        v = g[key]
        if not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise ValueError(f"{path}: [gpu] {key} must be a number in [{lo}, {hi}], got {v!r}")
    return {"gpu": {"chip": g["chip"], "tensor_efficiency": float(g["tensor_efficiency"]),
                    "launch_s": float(g["launch_s"])}}


def options(params: dict | None, chip) -> dict:
    """The ``machine.simulate`` / ``gpu.simulate`` options a calibration sets for ``chip`` (a
    preset name or chip object): ``tensor_efficiency`` and ``launch_s`` when ``params`` (from
    ``load``) calibrates that GPU; ``ValueError`` when it calibrates another chip."""
    if not params:
        return {}
    g = params.get("gpu", {})
    name = getattr(chip, "name", chip)
    if g.get("chip") != name:
        raise ValueError(f"the calibration is for {g.get('chip')!r}, not {name!r}: calibrate that chip "
                         "from its own measurements")
    return {"tensor_efficiency": g["tensor_efficiency"], "launch_s": g["launch_s"]}
