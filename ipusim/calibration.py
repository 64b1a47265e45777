"""A user's own measurements set the efficiency parameters of the GPU model (for their chip)
and of the tile model (``tile_calibration.PARAMETERS``, from tile microbenchmarks: ``fit_tile``).

Measurements are rows in the registry's format (``ipusim/data/published.md``). Each must be a
padded forward step on one GPU preset (``area`` gpu, ``workload`` gpu-padded, ``unit`` ms, a
model preset, ``batch`` and ``seq_len``); all rows name the same chip. Any other row is refused
with its line and the reason: nothing is matched loosely.

Parameters set (documented in ``ipusim.gpu.params`` and ``ipusim.hardware``):

* ``tensor_efficiency``: fraction of tensor-core peak a matmul attains (``TENSOR_EFFICIENCY``),
  bounded to ``TENSOR_EFFICIENCY_BOUNDS``;
* ``launch_s``: seconds per kernel (``kernel_launch_s``), bounded to ``LAUNCH_BOUNDS_S``.

Rule: ``ipusim.gpu.calibration.least_squares``, the one rule that also set the presets from the
published TensorRT rows (``gpu.fit_calibration``): the pair minimising
``sum(ln(predicted / measured)**2)`` over the rows, within the bounds. A step's time is its
time without launches plus kernels x the per-kernel cost, so each efficiency is simulated once;
the efficiency is searched on a 0.01 grid and refined by golden section, the per-kernel cost by
golden section for each efficiency. ``HBM_EFFICIENCY`` is not fitted (padded BERT steps do not
separate it from the tensor efficiency; ASSUMPTION that the datasheet-derived value holds).

``load(path)`` reads the file ``calibrate`` writes: ``{"gpu": {"chip", "tensor_efficiency",
"launch_s"}, "tile": {...}}``, which ``ipusim.validation.validate(params=...)`` and
``--calibration FILE`` apply (GPU parameters to that chip's padded steps, tile parameters
through ``tile_calibration.overrides``).
"""

from __future__ import annotations

import math

from .gpu.calibration import (  # the one bounded least-squares rule, and its bounds
    LAUNCH_BOUNDS_S,
    TENSOR_EFFICIENCY_BOUNDS,
    golden_section,
    least_squares,
)

TILE_WORKLOADS = {
    "tile-onchip-matmul": ("bow", "AMP_PHASE_OVERHEAD_CYCLES"),
    "tile-exchange": (None, "EXCHANGE_EFFICIENCY"),
    "tile-gemm": ("gc2", "REARRANGE_BYTES_PER_CYCLE"),
}
"""Tile microbenchmarks a measurement may be (``ipusim.tile_calibration``'s): workload -> (the
chip ``tile_calibration`` simulates it on, None for any tile preset; the parameter it sets)."""

TILE_BOUNDS = {
    "AMP_PHASE_OVERHEAD_CYCLES": (0.0, 5000.0),
    "EXCHANGE_EFFICIENCY": (0.05, 1.0),
    "REARRANGE_BYTES_PER_CYCLE": (0.01, 1000.0),
}
"""Bounds of the tile parameters (cycles; fraction of the nominal exchange; bytes/cycle)."""


def _check_tile(r, where):
    from . import hardware

    home, _ = TILE_WORKLOADS.get(r["workload"], ("?", None))
    if home == "?":
        raise ValueError(
            f"{where}: cannot be matched: tile measurements are the microbenchmarks "
            f"{', '.join(TILE_WORKLOADS)}, got workload {r['workload']!r}"
        )
    if r["chip"] not in hardware.TILE_PRESETS or (home and r["chip"] != home):
        raise ValueError(
            f"{where}: {r['workload']} is simulated on {home or 'a tile preset'}, got chip {r['chip']!r}"
        )
    if r["workload"] == "tile-gemm" and r["batch"] != 2688:
        raise ValueError(
            f"{where}: tile-gemm is the 2,688^3 GEMM of tile_calibration (batch 2688), got {r['batch']}"
        )
    if r["workload"] == "tile-onchip-matmul" and not r["batch"]:
        raise ValueError(f"{where}: tile-onchip-matmul needs batch = N of [N,16] @ [16,16]")


def measurements(path) -> list[dict]:
    """The rows of ``path`` (registry format), each checked to be one a fit can match: a padded
    GPU step (one GPU chip per file) or a tile microbenchmark; ``ValueError`` names the first
    that is not (its line, id and the reason)."""
    from . import hardware, workloads
    from .published import numbered_rows

    numbered = numbered_rows(path)
    if not numbered:
        raise ValueError(f"{path}: no measurements")
    rows = [r for _, r in numbered]
    chips = set()
    for line, r in numbered:
        where = f"{path}, line {line} (id {r['id']!r})"
        if r["area"] == "tile":
            _check_tile(r, where)
            continue
        if r["area"] != "gpu" or r["workload"] != "gpu-padded":
            raise ValueError(
                f"{where}: cannot be matched: calibrate fits padded GPU steps "
                f"(area gpu, workload gpu-padded) and tile microbenchmarks (area tile), "
                f"got area {r['area']!r}, workload {r['workload']!r}"
            )
        if r["chip"] not in hardware.GPU_PRESETS:
            raise ValueError(
                f"{where}: chip must be a GPU preset ({', '.join(hardware.GPU_PRESETS)}), got {r['chip']!r}"
            )
        if r["unit"] != "ms" or r["metric"] != "latency":
            raise ValueError(
                f"{where}: metric must be latency in ms, got {r['metric']!r} in {r['unit']!r}"
            )
        if r["model"] not in workloads.MODELS:
            raise ValueError(
                f"{where}: model must be a preset ({', '.join(workloads.MODELS)}), got {r['model']!r}"
            )
        if not r["batch"] or not r["seq_len"]:
            raise ValueError(f"{where}: batch and seq_len are needed to simulate the step")
        chips.add(r["chip"])
    if len(chips) > 1:
        raise ValueError(
            f"{path}: measurements of one GPU chip per file, got {', '.join(sorted(chips))}"
        )
    return list(rows)


def fit_tile(rows) -> dict:
    """The tile parameters from tile microbenchmark ``rows``, in ``tile_calibration``'s order
    (the on-tile matmul receives nothing and the exchange computes nothing, so each of the first
    two depends on its own rows only; the GEMM's rearrange rate is fitted with them set): each,
    within ``TILE_BOUNDS``, minimises ``sum(ln(predicted / measured)**2)`` over its rows, by
    golden section (in log for the rearrange rate). A parameter with no rows keeps its value."""
    from . import tile_calibration as tc
    from .validation import predict

    chosen = {}
    for workload, (_, name) in TILE_WORKLOADS.items():
        mine = [r for r in rows if r["workload"] == workload]
        if not mine:
            continue
        lo, hi = TILE_BOUNDS[name]
        log = name == "REARRANGE_BYTES_PER_CYCLE"

        def cost(x, mine=mine, name=name, log=log):
            v = math.exp(x) if log else x
            p = {"tile": {**chosen, name: v}}
            return sum(math.log(predict(r, p) / r["value"]) ** 2 for r in mine)

        x = golden_section(cost, *(map(math.log, (lo, hi)) if log else (lo, hi)), iters=50)
        chosen[name] = math.exp(x) if log else x
    before = [math.log(predict(r) / r["value"]) ** 2 for r in rows]
    after = [math.log(predict(r, {"tile": chosen}) / r["value"]) ** 2 for r in rows]
    return {
        "parameters": chosen,
        "preset": dict(tc.current()),
        "rows": len(rows),
        "rms_log_error_before": math.sqrt(sum(before) / len(rows)),
        "rms_log_error_after": math.sqrt(sum(after) / len(rows)),
    }


def calibrate(rows) -> dict:
    """``{"gpu": fit(gpu rows), "tile": fit_tile(tile rows)}`` for the kinds ``rows`` hold."""
    out = {}
    g = [r for r in rows if r["area"] == "gpu"]
    t = [r for r in rows if r["area"] == "tile"]
    if g:
        out["gpu"] = fit(g)
    if t:
        out["tile"] = fit_tile(t)
    return out


def _points(rows):
    from .workloads import step

    return [
        (
            r["chip"],
            step(r["model"], [r["seq_len"]] * r["batch"], pad_to=r["seq_len"]),
            r["value"] * 1e-3,
        )
        for r in rows
    ]


def _rms_log_error(points, **params) -> float:
    from .gpu import simulate

    errs = [math.log(simulate(c, st, **params).time_s / m) ** 2 for c, st, m in points]
    return math.sqrt(sum(errs) / len(errs))


def fit(rows) -> dict:
    """``ipusim.gpu.calibration.least_squares`` (the rule of the module docstring) over ``rows``
    (from ``measurements``): chip, tensor_efficiency, launch_s, rows, and the root-mean-square
    ``ln(predicted / measured)`` before (preset parameters) and after."""
    from .gpu.params import TENSOR_EFFICIENCY
    from .hardware import chip as _chip

    points = _points(rows)
    best = least_squares(points)
    chip = rows[0]["chip"]
    return {
        "chip": chip,
        "tensor_efficiency": best["tensor_efficiency"],
        "launch_s": best["launch_s"],
        "rows": len(rows),
        "rms_log_error_before": _rms_log_error(points),
        "rms_log_error_after": math.sqrt(best["cost"] / len(rows)),
        "tensor_efficiency_preset": TENSOR_EFFICIENCY,
        "launch_s_preset": _chip(chip).kernel_launch_s,
    }


def to_toml(result: dict, source: str) -> str:
    """The calibration file ``load`` reads, from ``calibrate``'s result."""
    out = [
        f"# ipusim calibration, written by `ipusim calibrate` from {source}",
        "# rule: bounded least squares of ln(predicted / measured) (ipusim.calibration)",
    ]
    g = result.get("gpu")
    if g:
        out += [
            "[gpu]",
            f'chip = "{g["chip"]}"',
            f"tensor_efficiency = {g['tensor_efficiency']:.6g}  # preset {g['tensor_efficiency_preset']}",
            f"launch_s = {g['launch_s']:.6g}  # preset {g['launch_s_preset']:.3g}",
            f"rows = {g['rows']}",
            f"rms_log_error_before = {g['rms_log_error_before']:.6g}",
            f"rms_log_error_after = {g['rms_log_error_after']:.6g}",
        ]
    t = result.get("tile")
    if t:
        out += ["[tile]"] + [
            f"{k} = {v:.6g}  # preset {t['preset'][k]:.6g}" for k, v in t["parameters"].items()
        ]
        out += [
            f"rows = {t['rows']}",
            f"rms_log_error_before = {t['rms_log_error_before']:.6g}",
            f"rms_log_error_after = {t['rms_log_error_after']:.6g}",
        ]
    return "\n".join(out) + "\n"


def load(path) -> dict:
    """The parameters of a calibration file: ``{"gpu": {"chip", "tensor_efficiency",
    "launch_s"}, "tile": {parameter: value}}`` (either may be absent, not both); ``ValueError``
    names a missing or out-of-bounds key."""
    import tomllib

    from . import hardware
    from ._validate import read_text_file

    try:
        d = tomllib.loads(read_text_file("calibration file", path))
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: not a calibration file ({err})") from None
    out = {}
    g = d.get("gpu")
    if g is not None:
        if not isinstance(g, dict):
            raise ValueError(f"{path}: [gpu] must be a table")
        for key in ("chip", "tensor_efficiency", "launch_s"):
            if key not in g:
                raise ValueError(f"{path}: [gpu] needs {key}")
        if g["chip"] not in hardware.GPU_PRESETS:
            raise ValueError(
                f"{path}: [gpu] chip must be a GPU preset ({', '.join(hardware.GPU_PRESETS)}), "
                f"got {g['chip']!r}"
            )
        for key, (lo, hi) in (
            ("tensor_efficiency", TENSOR_EFFICIENCY_BOUNDS),
            ("launch_s", LAUNCH_BOUNDS_S),
        ):
            _bounded(path, "gpu", key, g[key], lo, hi)
        out["gpu"] = {
            "chip": g["chip"],
            "tensor_efficiency": float(g["tensor_efficiency"]),
            "launch_s": float(g["launch_s"]),
        }
    t = d.get("tile")
    if t is not None:
        if not isinstance(t, dict):
            raise ValueError(f"{path}: [tile] must be a table")
        params = {k: v for k, v in t.items() if k in TILE_BOUNDS}
        for k, v in params.items():
            _bounded(path, "tile", k, v, *TILE_BOUNDS[k])
        out["tile"] = {k: float(v) for k, v in params.items()}
    if not out:
        raise ValueError(f"{path}: no [gpu] or [tile] table (write one with `ipusim calibrate`)")
    return out


def _bounded(path, table, key, v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise ValueError(f"{path}: [{table}] {key} must be a number in [{lo}, {hi}], got {v!r}")


def options(params: dict | None, chip) -> dict:
    """The ``machine.simulate`` / ``gpu.simulate`` options a calibration sets for ``chip`` (a
    preset name or chip object): ``tensor_efficiency`` and ``launch_s`` when ``params`` (from
    ``load``) calibrates that GPU; ``ValueError`` when it calibrates another chip."""
    if not params or "gpu" not in params:
        return {}
    g = params["gpu"]
    name = getattr(chip, "name", chip)
    if g.get("chip") != name:
        raise ValueError(
            f"the calibration is for {g.get('chip')!r}, not {name!r}: calibrate that chip "
            "from its own measurements"
        )
    return {"tensor_efficiency": g["tensor_efficiency"], "launch_s": g["launch_s"]}


def calibrated_chip(params: dict | None, chip):
    """``chip`` (a preset name or chip object) as the calibration ``params`` (from ``load``) sets
    it, for code that takes a chip rather than simulator options (the checklist, serving tables):
    the calibrated GPU is a copy named ``<preset>*`` whose per-kernel cost is ``launch_s`` and
    whose FP16 tensor rate per SM is scaled by ``tensor_efficiency / gpu.TENSOR_EFFICIENCY``, so
    every matmul takes the time ``gpu.simulate(..., tensor_efficiency=...)`` gives (the same
    product of rate and efficiency; an MFU computed against it is against the scaled peak). A chip
    the calibration does not name comes back unchanged."""
    from . import hardware
    from .gpu.params import TENSOR_EFFICIENCY

    c = hardware.chip(chip)
    g = (params or {}).get("gpu")
    if not g or c.name != g["chip"]:
        return c
    return c.replace(
        name=c.name + "*",
        fp16_flops_per_cycle_per_sm=c.fp16_flops_per_cycle_per_sm
        * g["tensor_efficiency"]
        / TENSOR_EFFICIENCY,
        kernel_launch_s=g["launch_s"],
    )


def moved(params: dict) -> list[dict]:
    """Each parameter ``params`` (from ``load``) sets: ``parameter``, ``chip`` (GPU) or "tile",
    ``preset``, ``calibrated`` and ``change`` (calibrated / preset - 1)."""
    from . import hardware
    from . import tile_calibration as tc
    from .gpu.params import TENSOR_EFFICIENCY

    rows = []
    g = params.get("gpu")
    if g:
        for name, preset in (
            ("tensor_efficiency", TENSOR_EFFICIENCY),
            ("launch_s", hardware.chip(g["chip"]).kernel_launch_s),
        ):
            rows.append(
                {
                    "parameter": name,
                    "chip": g["chip"],
                    "preset": preset,
                    "calibrated": g[name],
                    "change": g[name] / preset - 1 if preset else math.inf,
                }
            )
    preset = tc.current()
    for name, v in (params.get("tile") or {}).items():
        rows.append(
            {
                "parameter": name,
                "chip": "tile",
                "preset": preset[name],
                "calibrated": v,
                "change": v / preset[name] - 1 if preset[name] else math.inf,
            }
        )
    return rows
