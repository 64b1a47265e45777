"""Sweep machinery speed: Dask on a local cluster vs one process, per-point overhead, driver memory.

Rows (the ``spin`` task burns a fixed amount of CPU time per point, so the rows measure the
sweep's own costs, not a model's; on a busy machine a point takes longer than its CPU time,
as a real point would):
* cheap points (~1 ms of CPU each): points/s on a 2-worker local cluster vs serial (goal >= 1.7x
  on 2 cores; the cluster is started and warmed before timing);
* 10 ms points: the Dask path's overhead per point as a share of the point (goal < 10%), from
  wall time, ``(time x workers - serial time) / points``, and from CPU time, ``(CPU of the
  driver, scheduler, nannies and workers - their idle CPU rate x the time - CPU of the serial
  run) / points`` (an idle cluster ticks: heartbeats, event-loop checks; measured for a few
  seconds before the timed runs and reported);
* driver memory while rows stream to a Parquet file: the peak traced by ``tracemalloc`` in the
  driver, for N and 4N points (goal: flat in N apart from the result table, which ``finish``
  reads back at the end).

Wall-time ratios need two idle cores: on a shared machine the workers get less than two cores,
which each Dask row reports (the cores the workers got: their CPU seconds over the wall time).
The CPU-time figures depend far less on the load: the overhead, and the ceiling of the speed-up
on idle cores, ``workers x serial CPU / (cluster CPU for the sweep + idle rate x serial CPU /
workers)`` (every CPU second packed onto the workers' cores; the wall-time ratio on an idle
machine falls short of it by the time the workers wait for the driver). ``python benchmarks/bench_sweep.py`` prints the
two figures the goals name on their own lines.
"""

from __future__ import annotations

import os
import tempfile
import time
import tracemalloc
from pathlib import Path

from ipusim import sweep
from ipusim.sweep import tasks

_PEAK = {"bytes": 0}
_WORKERS = 2


@sweep.register("spin_traced", params={"seconds": 0.0, "rep": 0}, takes_chip=False)
def _spin_traced(point):
    """``spin`` that also records the driver's traced memory (serial mode: the driver runs it)."""
    _PEAK["bytes"] = max(_PEAK["bytes"], tracemalloc.get_traced_memory()[0])
    return tasks.spin(point)


def _tree_cpu_s() -> float:
    """CPU seconds (user + sys) of this process and all its children (scheduler thread, nannies,
    workers of a local cluster)."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for ch in me.children(recursive=True):
        try:
            total += sum(ch.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def _workers_cpu_s(cl) -> float:
    return sum(cl.run(time.process_time).values())


def _measure(n, seconds, cl=None):
    """(wall s, CPU s of this process tree, CPU s of the workers or None, SweepResult)."""
    pts = [{"seconds": seconds, "rep": i} for i in range(n)]
    kw = {"client": cl} if cl is not None else {"mode": "serial"}
    w0 = _workers_cpu_s(cl) if cl is not None else 0.0
    c0, t0 = _tree_cpu_s(), time.perf_counter()
    res = sweep.run("spin", points=pts, show_progress=False, **kw)
    wall, cpu = time.perf_counter() - t0, _tree_cpu_s() - c0
    workers = _workers_cpu_s(cl) - w0 if cl is not None else None
    assert res.refused == 0 and len(res.table) == n
    return wall, cpu, workers, res


def figures(quick: bool) -> dict:
    """The measured figures (seconds, ratios), for ``rows`` and the plain printout."""
    n_cheap = 200 if quick else 4000
    n_ten = 40 if quick else 400
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    f = {"n_cheap": n_cheap, "n_ten": n_ten, "load": load, "cores": os.cpu_count()}
    sizes = (("cheap", n_cheap, 0.001), ("ten", n_ten, 0.010))
    _measure(8, 0.0)
    serial = {
        key: _measure(n, s)[:2] for key, n, s in sizes
    }  # before the cluster starts: its idle CPU not counted
    with sweep.local_cluster(_WORKERS, dashboard=False) as cl:
        _measure(4 * _WORKERS, 0.0, cl)  # connections and the first tasks before timing
        c0, t0 = _tree_cpu_s(), time.perf_counter()
        time.sleep(1.0 if quick else 3.0)
        idle = (_tree_cpu_s() - c0) / (time.perf_counter() - t0)  # CPU s per s of the idle cluster
        f["idle_cpu_per_s"] = idle
        for key, n, s in sizes:
            ws, cs = serial[key]
            wd, cd, wk, res = _measure(n, s, cl)
            w = res.workers
            work = (
                cd - idle * wd
            )  # the cluster's CPU for the sweep itself, its idle ticking left out
            f[key] = {
                "serial_wall_s": ws,
                "serial_cpu_s": cs,
                "dask_wall_s": wd,
                "dask_cpu_s": cd,
                "workers_cpu_s": wk,
                "workers": w,
                "speedup": ws / wd,
                "cores_got": wk / wd,
                "over_wall": (wd * w - ws) / n / s,
                "over_cpu": (work - cs) / n / s,
                # on w idle cores the sweep lasts about cs / w, and the idle ticking takes its share
                "ceiling": w * cs / (work + idle * cs / w),
            }
    return f


def _memory(quick: bool) -> dict:
    peaks = []
    sizes = (2_000, 8_000) if quick else (10_000, 40_000)
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            _PEAK["bytes"] = 0
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            res = sweep.run(
                "spin_traced",
                points=({"seconds": 0.0, "rep": i} for i in range(n)),
                mode="serial",
                out=Path(tmp) / f"m{n}.parquet",
                chunk_rows=1000,
                show_progress=False,
            )
            tracemalloc.stop()
            table = int(res.table.memory_usage(deep=True).sum())
            peaks.append((n, _PEAK["bytes"] - base, table))
    (n1, p1, t1), (n2, p2, t2) = peaks
    return {
        "name": f"sweep driver memory while streaming, {n1:,} vs {n2:,} points",
        "kernel_s": None,
        "reference_s": None,
        "goal": "flat in the number of points (apart from the result table)",
        "note": f"peak while streaming {p1 / 1e6:.2f} MB vs {p2 / 1e6:.2f} MB (x{p2 / p1:.2f} for "
        f"x{n2 / n1:.0f} points); final tables {t1 / 1e6:.2f} and {t2 / 1e6:.2f} MB",
    }


def _cpu_note(d) -> str:
    return (
        f"CPU user+sys {d['dask_cpu_s']:.2f} s (workers {d['workers_cpu_s']:.2f} s) vs serial "
        f"{d['serial_cpu_s']:.2f} s; the workers got {d['cores_got']:.2f} of {d['workers']} cores; "
        f"CPU-bound ceiling on idle cores {d['ceiling']:.2f}x"
    )


def rows(quick: bool, f: dict | None = None) -> list[dict]:
    f = f or figures(quick)
    c, t = f["cheap"], f["ten"]
    load = f"load average {f['load']:.1f} on {f['cores']} cores when started"
    return [
        {
            "name": f"sweep {f['n_cheap']:,} x 1 ms points: {c['workers']} workers vs serial",
            "kernel_s": c["dask_wall_s"],
            "reference_s": c["serial_wall_s"],
            "goal": ">= 1.7x on 2 idle cores",
            "note": f"{f['n_cheap'] / c['dask_wall_s']:,.0f} vs {f['n_cheap'] / c['serial_wall_s']:,.0f} points/s; "
            f"{_cpu_note(c)}; {load}",
        },
        {
            "name": f"sweep {f['n_ten']:,} x 10 ms points: Dask overhead per point",
            "kernel_s": t["dask_wall_s"],
            "reference_s": t["serial_wall_s"],
            "goal": "< 10% of a 10 ms point",
            "note": f"wall: {t['over_wall']:.1%} of the point ((time x {t['workers']} workers - serial) / points); "
            f"CPU: {t['over_cpu']:.1%} ((CPU of the cluster - idle ticking - CPU of serial) / points); "
            f"{_cpu_note(t)}; idle cluster {f['idle_cpu_per_s']:.3f} CPU s per s",
        },
        _memory(quick),
    ]


if __name__ == "__main__":
    import sys

    quick = "--quick" in sys.argv
    f = figures(quick)
    for row in rows(quick, f):
        print(row)
    c, t = f["cheap"], f["ten"]
    print(
        f"speed-up, {f['n_cheap']:,} points of 1 ms CPU, {c['workers']} local Dask workers vs serial: "
        f"{c['speedup']:.2f}x by wall time (goal >= 1.7x); the workers got {c['cores_got']:.2f} cores "
        f"(load average {f['load']:.1f}); CPU-bound ceiling on {c['workers']} idle cores {c['ceiling']:.2f}x"
    )
    print(
        f"Dask-path overhead, {f['n_ten']:,} points of 10 ms CPU: {t['over_wall']:.1%} of a point by wall time, "
        f"{t['over_cpu']:.1%} by CPU time (goal < 10%); idle cluster {f['idle_cpu_per_s']:.3f} CPU s per s"
    )
