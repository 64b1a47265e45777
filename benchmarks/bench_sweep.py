"""Sweep machinery speed: Dask on a local cluster vs one process, per-point overhead, driver memory.

Rows (the ``spin`` task burns a fixed time of CPU per point, so the rows measure the sweep's
own costs, not a model's):
* cheap points (~1 ms each): points/s on a 2-worker local cluster vs serial (goal >= 1.7x on
  2 cores; the cluster is started and warmed before timing);
* 10 ms points: the Dask path's overhead per point, (time x workers - serial time) / points,
  as a share of the point (goal < 10%);
* driver memory while rows stream to a Parquet file: the peak traced by ``tracemalloc`` in the
  driver, for N and 4N points (goal: flat in N apart from the result table, which ``finish``
  reads back at the end).
"""

from __future__ import annotations

import os
import tempfile
import tracemalloc
from pathlib import Path

from ipusim import sweep
from ipusim.sweep import tasks

_PEAK = {"bytes": 0}


@sweep.register("spin_traced", params={"seconds": 0.0, "rep": 0}, takes_chip=False)
def _spin_traced(point):
    """``spin`` that also records the driver's traced memory (serial mode: the driver runs it)."""
    _PEAK["bytes"] = max(_PEAK["bytes"], tracemalloc.get_traced_memory()[0])
    return tasks.spin(point)


def _run(n, seconds, **kw):
    return sweep.run("spin", points=[{"seconds": seconds, "rep": i} for i in range(n)], show_progress=False, **kw)


def rows(quick: bool) -> list[dict]:
    out = []
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    n_cheap = 400 if quick else 4000
    n_ten = 60 if quick else 400
    with sweep.local_cluster(2, dashboard=False) as cl:
        sweep.run("spin", points=[{"seconds": 0.0, "rep": i} for i in range(8)], client=cl, show_progress=False)
        # 1. cheap points
        serial = _run(n_cheap, 0.001, mode="serial")
        dask = _run(n_cheap, 0.001, client=cl)
        out.append({"name": f"sweep {n_cheap:,} x 1 ms points: 2 workers vs serial", "kernel_s": dask.elapsed_s,
                    "reference_s": serial.elapsed_s, "goal": ">= 1.7x on 2 cores",
                    "note": f"{dask.points_per_s:,.0f} vs {serial.points_per_s:,.0f} points/s; load average "
                            f"{load:.1f} on {os.cpu_count()} cores when started (shared machine)"})
        # 2. overhead of the Dask path on 10 ms points
        serial = _run(n_ten, 0.010, mode="serial")
        dask = _run(n_ten, 0.010, client=cl)
        over = (dask.elapsed_s * dask.workers - serial.elapsed_s) / n_ten
        out.append({"name": f"sweep {n_ten:,} x 10 ms points: Dask overhead per point", "kernel_s": dask.elapsed_s,
                    "reference_s": serial.elapsed_s, "goal": "< 10% of a 10 ms point",
                    "note": f"overhead {over * 1e3:.2f} ms/point = {over / 0.010:.1%} of the point "
                            f"((time x {dask.workers} workers - serial) / points)"})
    # 3. driver memory while streaming to a file
    peaks = []
    sizes = (2_000, 8_000) if quick else (10_000, 40_000)
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            _PEAK["bytes"] = 0
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            res = sweep.run("spin_traced", points=({"seconds": 0.0, "rep": i} for i in range(n)), mode="serial", out=Path(tmp) / f"m{n}.parquet", chunk_rows=1000, show_progress=False)
            tracemalloc.stop()
            table = int(res.table.memory_usage(deep=True).sum())
            peaks.append((n, _PEAK["bytes"] - base, table))
    (n1, p1, t1), (n2, p2, t2) = peaks
    out.append({"name": f"sweep driver memory while streaming, {n1:,} vs {n2:,} points", "kernel_s": None,
                "reference_s": None, "goal": "flat in the number of points (apart from the result table)",
                "note": f"peak while streaming {p1 / 1e6:.2f} MB vs {p2 / 1e6:.2f} MB (x{p2 / p1:.2f} for "
                        f"x{n2 / n1:.0f} points); final tables {t1 / 1e6:.2f} and {t2 / 1e6:.2f} MB"})
    return out


if __name__ == "__main__":
    import sys

    for row in rows("--quick" in sys.argv):
        print(row)
