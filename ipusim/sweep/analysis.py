"""Reading a sweep: the tile chip against a GPU, the Pareto front, and break-even values.

Every answer keeps the ``point_key`` of the rows behind it, so a figure or a sentence can be
traced to the simulations that produced it.
"""

from __future__ import annotations

import math

from . import tasks

RATIOS = {"ratio": "throughput_per_s", "ratio_per_usd": "per_usd", "ratio_per_j": "per_j"}


def param_columns(table) -> list:
    """The parameter columns of a sweep table (chip preset, chip fields, the task's parameters)."""
    t = tasks.task(str(table["task"].iloc[0]))
    names = set(t.params) | set(tasks.chip_fields()) | set(tasks.CHIP_PARAMS)
    return [c for c in table.columns if c in names]


def workload_columns(table) -> list:
    """Parameter columns that describe the workload (not the chip)."""
    chip = set(tasks.chip_fields()) | set(tasks.CHIP_PARAMS)
    return [c for c in param_columns(table) if c not in chip]


def against_gpu(table, gpu: str = "a100-80gb", *, show_progress: bool = False):
    """``table`` with the GPU's row for the same workload beside each row.

    For each distinct workload in ``table`` (its non-chip parameters), the same task runs on
    preset ``gpu`` (serially: one point per workload). Adds ``gpu_point_key``,
    ``gpu_throughput_per_s``, ``gpu_per_usd``, ``gpu_per_j``, ``gpu_fit`` and the ratios tile / GPU
    ``ratio`` (throughput), ``ratio_per_usd`` and ``ratio_per_j`` (throughput per dollar and per
    watt); a ratio is NaN where either side was refused and inf where only the GPU does not run.
    """
    import numpy as np

    from ..hardware import chip as _chip
    from .runner import run

    g = _chip(gpu)
    if g.kind != "gpu":
        raise ValueError(f"against_gpu needs a GPU preset, got {gpu!r} ({g.kind})")
    if table.empty:
        raise ValueError("the sweep table is empty")
    task = str(table["task"].iloc[0])
    wl = workload_columns(table)
    combos = table[wl].drop_duplicates().to_dict("records") if wl else [{}]
    gpu_pts = [{"chip": g.name, **c} for c in combos]
    gt = run(task, points=gpu_pts, mode="serial", show_progress=show_progress).table
    keep = {"point_key": "gpu_point_key", "fit": "gpu_fit", "error": "gpu_error"}
    keep.update({c: f"gpu_{c}" for c in RATIOS.values()})
    gt = gt[[*wl, *[k for k in keep if k in gt]]].rename(columns=keep)
    merged = table.merge(gt, on=wl, how="left") if wl else table.assign(**gt.iloc[0].to_dict())
    for name, col in RATIOS.items():
        if col in merged and f"gpu_{col}" in merged:
            a = merged[col].astype(float).to_numpy()
            b = merged[f"gpu_{col}"].astype(float).to_numpy()
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.where(b > 0, a / b, np.where(a > 0, np.inf, np.nan))
            r[(merged["error"] != "").to_numpy() | (merged["gpu_error"] != "").to_numpy()] = np.nan
            merged[name] = r
    return merged


def pareto_front(table, x: str = "per_usd", y: str = "per_j"):
    """Rows no other row beats on both ``x`` and ``y`` (larger is better), among rows that ran
    with a throughput above 0; sorted by ``x``."""
    for c in (x, y):
        if c not in table:
            raise ValueError(
                f"column {c!r} not in the table; valid: {', '.join(map(str, table.columns))}"
            )
    ok = table[(table["error"] == "") & (table[x].astype(float) > 0) & (table[y].astype(float) > 0)]
    ok = ok.sort_values([x, y], ascending=[False, False], kind="stable")
    best_y, keep = -math.inf, []
    for idx, yv in zip(ok.index, ok[y].astype(float), strict=True):
        if yv > best_y:
            keep.append(idx)
            best_y = yv
    return ok.loc[keep].sort_values(x, kind="stable")


def break_even(table, param: str, *, ratio: str = "ratio", level: float = 1.0):
    """Where the tile chip draws level with the GPU as ``param`` varies, the other parameters held.

    For each combination of the other varied parameters, the rows are sorted by ``param`` and
    the value where ``ratio`` crosses ``level`` is interpolated linearly between the two rows
    that bracket it (``below_key``, ``above_key``: their point keys). ``value`` is NaN when the
    ratio never crosses ``level`` in the swept range (``note`` says which side it stays on).
    Run ``against_gpu`` first to get the ratio columns.
    """
    import pandas as pd

    if param not in table:
        raise ValueError(f"parameter {param!r} is not a column of the table")
    if ratio not in table:
        raise ValueError(f"no {ratio!r} column: run sweep.against_gpu(table, gpu) first")
    others = [c for c in param_columns(table) if c != param and table[c].nunique(dropna=False) > 1]
    groups = table.groupby(others, dropna=False, sort=True) if others else [((), table)]
    out = []
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        g = g[g[ratio].notna()].sort_values(param, kind="stable")
        xs, rs, ks = (
            g[param].astype(float).to_list(),
            g[ratio].astype(float).to_list(),
            g["point_key"].to_list(),
        )
        row = {
            **dict(zip(others, key, strict=True)),
            "param": param,
            "value": math.nan,
            "below_key": "",
            "above_key": "",
            "note": "",
        }
        for i in range(len(xs) - 1):
            a, b = rs[i] - level, rs[i + 1] - level
            if a == 0:
                row.update(
                    value=xs[i], below_key=ks[i], above_key=ks[i], note="level at a swept value"
                )
                break
            if a * b < 0 or (b == 0):
                fa = (
                    a / (a - b)
                    if math.isfinite(a) and math.isfinite(b)
                    else (1.0 if math.isinf(b) else 0.0)
                )
                row.update(
                    value=xs[i] + fa * (xs[i + 1] - xs[i]),
                    below_key=ks[i],
                    above_key=ks[i + 1],
                    note="rises through level" if b > a else "falls through level",
                )
                break
        else:
            if rs:
                side = "above" if min(rs) > level else ("below" if max(rs) < level else "touches")
                row["note"] = f"{side} level over the whole range {min(xs):g} to {max(xs):g}"
            else:
                row["note"] = "no rows with a ratio"
        out.append(row)
    return pd.DataFrame(out)
