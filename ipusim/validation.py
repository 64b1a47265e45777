"""How far to trust ipusim: every published figure it uses, predicted again, side by side.

The figures live in one file, ``ipusim/data/published.csv`` (schema in ``published.md``): one
row per published measurement, with the system and workload it was measured on, its value,
source key (``docs/sources.md``) and table, its use (``calibration``: a parameter was set
from it, so its error is in sample; ``check``: nothing was set from it, so its error is out
of sample) and its tolerance (the largest ``|predicted / published - 1|`` the project holds
it to). ``validate`` runs ipusim on each row's workload *now*, with the parameters in force,
so the table moves when the model does; ``summary`` gives each area's share within 25 % and
the geometric mean of predicted / published, in sample and out of sample apart.

Each row's ``workload`` names the rule that predicts it (``PREDICTORS``); a row whose
workload is unknown is refused with its id.
"""

from __future__ import annotations

import functools
import math

from .published import AREAS, USES, read_rows, registry, row, rows  # noqa: F401  (the registry's API, here too)

BAND = 0.25
"""The issue's common band: the share of rows with ``|predicted / published - 1| <= BAND`` is
reported per area, whatever each row's own tolerance."""


# --- predictors: one per workload kind, each returns the row's metric in the row's unit ---------


def _gpu_padded(r, params):
    from .gpu import simulate
    from .workloads import step

    st = step(r["model"], [r["seq_len"]] * r["batch"], pad_to=r["seq_len"])
    g = params.get("gpu", {})
    options = {k: v for k, v in g.items() if k != "chip"} if g.get("chip") == r["chip"] else {}
    return simulate(r["chip"], st, **options).time_s * 1e3


def _gpu_padding_removed(r, params):
    from .gpu.calibration import spread_lengths
    from .gpu.varlen import remove_padding

    lens = spread_lengths(r["batch"], r["seq_len"], r["mean_fraction"])
    return remove_padding(r["chip"], lens, r["seq_len"], r["software"]).time_s * 1e3


def _tile(fn):
    def run(r, params):
        from . import tile_calibration as tc

        with tc.overrides(**params.get("tile", {})):
            return fn(r, tc)

    return run


def _tile_onchip_matmul(r, tc):
    return tc.tess_point(r["batch"])


def _tile_exchange(r, tc):
    from .hardware import chip

    return tc.exchange_point(chip(r["chip"]))


def _tile_gemm(r, tc):
    return tc.gemm_tflops()


def _dtype_bytes(r) -> int:
    return 4 if r["precision"] == "fp32" else 2  # "mixed": FP16 operands (JIA-FT)


def _tile_gemm_rate(r, tc):
    from . import tiles
    from .hardware import chip

    n = r["batch"]
    res = tiles.matmul(chip(r["chip"]), n, n, n, dtype_bytes=_dtype_bytes(r)).result
    return 2.0 * n**3 / res.extra["time_if_unlimited_s"] / 1e12


def _tile_largest_gemm(r, tc):
    """Largest n (to 16) whose n x n x n matmul fits the chip (bisection: fitting is monotone in n)."""
    from . import tiles
    from .hardware import chip

    c, lo, hi = chip(r["chip"]), 16, 16384
    while hi - lo > 16:
        mid = (lo + hi) // 2
        lo, hi = (
            (mid, hi)
            if tiles.matmul(c, mid, mid, mid, dtype_bytes=_dtype_bytes(r)).result.fits
            else (lo, mid)
        )
    return lo


def _tile_minimal_transfer(r, tc):
    """Nanoseconds of one superstep in which tile 0 sends one 4-byte word to tile 1."""
    import numpy as np

    from . import supersteps, tiles
    from .hardware import chip
    from .workloads import matmul_op

    c = chip(r["chip"])
    z = np.zeros(c.tiles)
    recv, send = z.copy(), z.copy()
    recv[1] = send[0] = 4.0
    plan = tiles.OpPlan(
        matmul_op("word", 1, 1, 1, 1, 2),
        "one word",
        1,
        [tiles.Phase("word", "exchange", False, z, z, z, recv, send)],
        z,
        z,
    )
    return float(supersteps.run_program(c, [plan]).superstep_cycles[0] / c.clock_hz) * 1e9


def _tile_bytemlperf(r, tc):
    import numpy as np

    from . import tiles
    from .workloads import step

    res = tiles.simulate(
        tc.c600(), step(r["model"], [r["seq_len"]] * r["batch"], pad_to=r["seq_len"])
    )
    t = res.time_s if np.isfinite(res.time_s) else res.extra["time_if_unlimited_s"]
    return r["batch"] * tc.squad_sequences_per_row() / t


def _training_model(name):
    from .training import calibration as cal

    return cal.LLAMA2_13B if name == "llama-2-13b" else name


def _train_megatron_tflops(r, params):
    from . import training

    return training.best_placement(r["model"], r["chip"], r["chips"]).hardware_flops_per_chip / 1e12


def _train_megatron_days(r, params):
    from . import training

    res = training.best_placement(
        r["model"], r["chip"], r["chips"], recompute=("full",), sharding=(0,)
    )
    return res.run(3e11).days  # NARAYANAN2021 §5.1: 300B tokens


def _train_llama2_hours(r, params):
    from . import training

    res = training.best_placement(
        _training_model(r["model"]),
        r["chip"],
        r["chips"],
        seq_len=r["seq_len"],
        global_batch=r["batch"],
    )
    return res.run(2e12).chip_hours  # TOUVRON2023 Table 2: 2T tokens


def _train_tile_throughput(r, params):
    from . import training

    res = training.best_placement(
        r["model"], r["chip"], r["chips"], seq_len=r["seq_len"], global_batch=r["batch"]
    )
    return res.tokens_per_s / r["seq_len"]


def _dlrm_step(r, params):
    from .embeddings import dlrm
    from .embeddings.workload import preset

    n, local = r["chips"], r["batch"]
    res = dlrm.training_step(r["chip"], preset("torchrec-criteo", batch=n * local), chips=n)
    return n * local / res.time_s


def _packing(r, params):
    from . import packing

    strategy = r["software"]
    kw = {"max_per_row": r["max_per_row"]} if r["max_per_row"] else {}
    p = packing.pack(r["model"], r["seq_len"], strategy, **kw)
    return p.padding_fraction if r["workload"] == "packing-padding" else p.efficiency


SERVING_REQUESTS = 1_000_000
"""Requests per queueing run (one seeded replication, started empty; the M/M/1 mean wait at
rho 0.8 then has a relative standard error of about 1.5 %, a third of the rows' 5 % tolerance)."""


def _serving_queue(r, params):
    from . import arrivals
    from . import policies as P
    from .serving import service as S
    from .serving.batching import simulate

    s, rho = 0.01, r["load"]  # seconds per request; the result is in units of s
    kind = "mm1" if r["software"] == "M/M/1" else "md1"
    svc = S.exponential_service(s) if kind == "mm1" else S.fixed_service(s)
    res = simulate(
        arrivals.poisson(rho / s, SERVING_REQUESTS, seed=7),
        1,
        P.Dynamic(1, 0.0),
        svc,
        seed=11,
        max_waiting=None,
    )
    if "p99" in r["id"]:
        return res.latency_p99_s / s
    return res.queueing_mean_s / s


PREDICTORS = {
    "gpu-padded": _gpu_padded,
    "gpu-padding-removed": _gpu_padding_removed,
    "tile-onchip-matmul": _tile(_tile_onchip_matmul),
    "tile-exchange": _tile(_tile_exchange),
    "tile-gemm": _tile(_tile_gemm),
    "tile-bytemlperf": _tile(_tile_bytemlperf),
    "tile-gemm-rate": _tile(_tile_gemm_rate),
    "tile-largest-gemm": _tile(_tile_largest_gemm),
    "tile-minimal-transfer": _tile(_tile_minimal_transfer),
    "train-megatron-tflops": _train_megatron_tflops,
    "train-megatron-days": _train_megatron_days,
    "train-llama2-hours": _train_llama2_hours,
    "train-tile-throughput": _train_tile_throughput,
    "dlrm-step": _dlrm_step,
    "packing-padding": _packing,
    "packing-efficiency": _packing,
    "serving-queue": _serving_queue,
}
"""Workload kind -> rule that predicts a row's metric (in the row's unit) from ipusim."""


def predict(r: dict, params: dict | None = None) -> float:
    """ipusim's prediction of registry row ``r`` (a row dict or an id). ``params`` holds
    efficiency parameters per chip kind (``{"gpu": {...}, "tile": {...}}``, as
    ``ipusim.calibration.load`` returns them); GPU parameters apply to the padded-step rows of
    their ``chip``, tile parameters (``tile_calibration.PARAMETERS``) to the tile rows."""
    r = row(r) if isinstance(r, str) else r
    fn = PREDICTORS.get(r["workload"])
    if fn is None:
        raise ValueError(
            f"row {r['id']!r}: no rule predicts workload {r['workload']!r} "
            f"(known: {', '.join(PREDICTORS)})"
        )
    return float(fn(r, params or {}))


@functools.cache
def _cached(row_id: str, tile_state: tuple) -> float:
    return predict(row(row_id))


def clear_cache() -> None:
    """Forget the cached predictions (after changing a module constant by hand)."""
    _cached.cache_clear()


def validate(area: str | None = None, *, params: dict | None = None) -> list[dict]:
    """Predicted vs published for every registry row (of one ``area``), with the parameters in
    force (or ``params``). Rows: id, area, source, table, use, metric, unit, published,
    predicted, ratio (predicted / published), tolerance, within (``|ratio - 1| <= tolerance``),
    within_band (``|ratio - 1| <= BAND``). Default-parameter predictions are cached per
    process and per ``tile_calibration.current()`` (the simulators are deterministic);
    ``clear_cache`` forgets them after another module constant is changed by hand."""
    from . import tile_calibration

    tile_state = tile_calibration.current()  # a prediction made inside ``overrides`` stays there
    out = []
    for r in rows(area):
        pred = _cached(r["id"], tile_state) if not params else predict(r, params)
        ratio = pred / r["value"]
        out.append(
            {
                "id": r["id"],
                "area": r["area"],
                "source": r["source"],
                "table": r["table"],
                "use": r["use"],
                "metric": r["metric"],
                "unit": r["unit"],
                "published": r["value"],
                "predicted": pred,
                "ratio": ratio,
                "tolerance": r["tolerance"],
                "within": bool(abs(ratio - 1) <= r["tolerance"]),
                "within_band": bool(abs(ratio - 1) <= BAND),
            }
        )
    return out


def _stats(rs) -> dict:
    if not rs:
        return {
            "rows": 0,
            "share_within_band": math.nan,
            "geomean_ratio": math.nan,
            "geomean_abs_error": math.nan,
        }
    logs = [math.log(r["ratio"]) for r in rs]
    return {
        "rows": len(rs),
        "share_within_band": sum(r["within_band"] for r in rs) / len(rs),
        "geomean_ratio": math.exp(sum(logs) / len(logs)),
        "geomean_abs_error": math.exp(sum(abs(x) for x in logs) / len(logs)) - 1,
    }


def summary(results: list[dict]) -> list[dict]:
    """Per area (and "all"): rows, share within ``BAND``, geometric mean of predicted / published,
    and the geometric-mean absolute error ``exp(mean |ln ratio|) - 1``, for all rows, the
    calibration rows (in sample) and the check rows (out of sample) apart."""
    out = []
    for a in [x for x in AREAS if any(r["area"] == x for r in results)] + ["all"]:
        rs = [r for r in results if a == "all" or r["area"] == a]
        d = {"area": a, **_stats(rs)}
        for use, tag in (("calibration", "in"), ("check", "out")):
            for k, v in _stats([r for r in rs if r["use"] == use]).items():
                d[f"{tag}_{k}"] = v
        out.append(d)
    return out
