"""Run a sweep: serially in this process, or on Dask (a local cluster it starts, or a scheduler).

Points are grouped into batches (one Dask task each, large enough that scheduling costs
little next to the work); at most a few batches per worker are in flight, so the driver
holds the rows it has received and not the whole sweep's futures. Rows stream back as
batches complete, with a progress bar, into a ``Sink`` (``ipusim.sweep.output``). A point
that raises becomes a refused row with its message; a worker that dies costs only its
batches, which the scheduler runs again elsewhere (up to ``distributed``'s
``allowed-failures``; past that the batch's points are refused rows naming the failure).

Dask is imported only here, inside the functions that need it: ``import ipusim`` and
``import ipusim.sweep`` do not import it.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import pickle
import re
import time
import traceback
from dataclasses import dataclass, field

from ..config import progress as _progress
from . import space, tasks
from .output import Sink

MODES = ("auto", "serial", "dask")
SERIAL_AT_MOST = 16  # points; "auto" runs smaller sweeps in this process (a cluster costs seconds)


@dataclass
class SweepResult:
    """A finished sweep: its table and how it ran. Times in seconds."""

    table: object  # pandas.DataFrame, one row per point (see ``output.tidy``)
    task: str
    mode: str  # "serial" or "dask"
    elapsed_s: float
    computed: int  # points run now
    skipped: int  # points found in the output file (resume)
    workers: int
    out: str | None = None
    dashboard: str = ""
    params: tuple = field(default=())

    @property
    def points_per_s(self) -> float:
        return self.computed / self.elapsed_s if self.elapsed_s > 0 else math.inf

    @property
    def refused(self) -> int:
        return int((self.table["error"] != "").sum())

    def best(self, metric: str = "throughput_per_s"):
        """The row (a pandas Series) with the largest ``metric`` among points that ran; None if none."""
        df = self.table
        if metric not in df:
            return None
        ok = df[(df["error"] == "") & df[metric].notna()]
        return None if ok.empty else ok.loc[ok[metric].astype(float).idxmax()]

    def to_dict(self) -> dict:
        b = self.best()
        return {
            "task": self.task,
            "mode": self.mode,
            "points": int(len(self.table)),
            "computed": self.computed,
            "skipped": self.skipped,
            "refused": self.refused,
            "workers": self.workers,
            "elapsed_s": self.elapsed_s,
            "points_per_s": self.points_per_s,
            "out": self.out,
            "best": None
            if b is None
            else {k: (v.item() if hasattr(v, "item") else v) for k, v in b.items()},
        }

    def __repr__(self):
        return (
            f"SweepResult({self.task}: {len(self.table):,} points ({self.computed:,} run, {self.skipped:,} "
            f"resumed, {self.refused:,} refused) in {self.elapsed_s:.2f} s, {self.points_per_s:,.1f} points/s, "
            f"{self.mode} on {self.workers} worker(s))"
        )


def run_batch(fn, task_name: str, batch) -> list:
    """Rows of one batch of ``(index, key, point)``: each point through ``fn``; a point that
    raises gives a refused row (``error`` = its exception and message)."""
    return _rows(task_name, batch, _outputs(fn, [p for _, _, p in batch]))


def _outputs(fn, points) -> list:
    """``(row of fn(point), "")`` for each point that ran, ``(None, "Type: message")`` for each that raised."""
    outs = []
    for point in points:
        try:
            outs.append((fn(point), ""))
        except Exception as err:  # a refused point, never an aborted sweep
            msg = (
                str(err).splitlines()[0]
                if str(err)
                else traceback.format_exception_only(err)[-1].strip()
            )
            outs.append((None, f"{type(err).__name__}: {msg}"))
    return outs


def _rows(task_name, batch, outs) -> list:
    """The table rows of a batch: each point's index, key, task and parameters, then its
    outputs and ``error`` ("" for a point that ran)."""
    rows = []
    for (idx, key, point), (out, err) in zip(batch, outs, strict=True):
        meta = {"point": idx, "point_key": key, "task": task_name, **point}
        rows.append({**meta, **out, "error": ""} if out is not None else {**meta, "error": err})
    return rows


def _run_packed(fn, blob: bytes) -> bytes:
    """A Dask task: the points pickled in ``blob`` through ``fn``, their ``_outputs`` pickled.

    Points travel as one pickled bytes object each way, not as lists of dicts: Dask walks
    a list argument element by element looking for futures, and serialises a list result
    element by element (a frame, a pickle and a size estimate per row), which cost more
    CPU than a 1 ms point. The indices and keys stay in the driver."""
    return pickle.dumps(_outputs(fn, pickle.loads(blob)), protocol=pickle.HIGHEST_PROTOCOL)


def run(
    task: str = "simulate",
    points=None,
    *,
    vary: dict | None = None,
    fixed: dict | None = None,
    mode: str = "auto",
    scheduler: str | None = None,
    workers: int | None = None,
    client=None,
    batch_size: int | None = None,
    out=None,
    resume: bool = False,
    chunk_rows: int = 1000,
    retries: int = 2,
    show_progress: bool = True,
    connect_timeout_s: float = 3.0,
    overwrite: bool = False,
    retry_refused: bool = False,
) -> SweepResult:
    """Run ``task`` on every point and return a ``SweepResult`` (``.table`` is the tidy table).

    The points are ``points`` (an iterable of dicts) or the grid of ``vary`` over ``fixed``
    (``space.grid``). ``mode``: "serial" (this process), "dask", or "auto" (serial for at most
    ``SERIAL_AT_MOST`` points unless a scheduler, a client or ``workers`` is given). Dask runs on
    ``client`` if given, else on ``scheduler`` (or ``DASK_SCHEDULER_ADDRESS``), else on a
    ``LocalCluster`` of ``workers`` processes (default one per core) started and closed here.
    ``out`` (.parquet or .csv) receives the rows in chunks of ``chunk_rows`` (``output.Sink``); an
    existing ``out`` is refused unless ``resume`` (skip the points already in it; with
    ``retry_refused`` run its refused points again) or ``overwrite`` (replace it). A write error
    (a full disk) ends the run with every chunk written so far kept for ``resume``, and of the
    rows computed since, as many as still fit (``output.Sink.flush``).
    ``retries`` re-runs a batch whose worker raised outside a point.
    """
    t = tasks.task(task)
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; valid: {', '.join(MODES)}")
    if points is None:
        if vary is None:
            raise ValueError("give points or vary (and fixed)")
        n_total = space.grid_size(vary)
        params = tuple(dict.fromkeys([*(fixed or {}), *vary]))
        tasks.check_names(task, params)
        pts = space.grid(vary, fixed)
    else:
        if vary is not None:
            raise ValueError("give points or vary, not both")
        n_total = len(points) if hasattr(points, "__len__") else None
        it = iter(points)
        first = next(it, None)
        if first is None:
            raise ValueError("points is empty")
        params = tuple(dict.fromkeys([*(fixed or {}), *first]))
        pts = _checked(task, fixed, itertools.chain([first], it))
    if batch_size is not None and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
    ):
        raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}")
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        raise ValueError(f"workers must be a whole number >= 1, got {workers!r}")
    from_env = (
        None
        if (client is not None or mode == "serial")
        else os.environ.get("DASK_SCHEDULER_ADDRESS")
    )
    address = scheduler or from_env or None
    if address is not None:
        check_address(address)
    if mode == "auto":
        explicit = client is not None or address is not None or workers is not None
        mode = "dask" if explicit or n_total is None or n_total > SERIAL_AT_MOST else "serial"

    sink = Sink(
        out,
        resume=resume,
        chunk_rows=chunk_rows,
        params=params,
        overwrite=overwrite,
        retry_refused=retry_refused,
    )
    todo = (
        (i, k, p)
        for i, p in enumerate(pts)
        if (k := space.point_key(p, task)) not in sink.done_keys
    )
    skipped = len(sink.done_keys)
    n_todo = None if n_total is None else max(n_total - skipped, 0)
    dashboard, n_workers = "", 1
    with contextlib.ExitStack() as stack:
        cl = None
        if mode == "dask":
            cl = stack.enter_context(_dask_client(client, address, workers, connect_timeout_s))
            n_workers = max(len(cl.scheduler_info(n_workers=-1).get("workers", {})), 1)
            dashboard = cl.dashboard_link or ""
            if t.takes_chip:
                _warm_workers(cl)
        bar = stack.enter_context(
            contextlib.closing(
                _progress(
                    total=n_todo,
                    desc=f"sweep {task}",
                    **({} if show_progress else {"disable": True}),
                )
            )
        )
        t0 = time.perf_counter()
        if cl is None:
            for batch in _chunks(todo, batch_size or 64):
                rows = run_batch(t.fn, task, batch)
                sink.write(rows)
                bar.update(len(rows))
        else:
            if batch_size is not None or n_todo is None:
                batches = _chunks(todo, batch_size or 64)
            else:
                batches = _guided_chunks(todo, n_todo, n_workers)
            _run_dask(cl, t.fn, task, batches, sink, bar, n_workers, retries)
        table = sink.finish()
        elapsed = time.perf_counter() - t0
    return SweepResult(
        table,
        task,
        mode,
        elapsed,
        len(table) - skipped,
        skipped,
        n_workers,
        None if out is None else str(out),
        dashboard,
        params,
    )


def _checked(task, fixed, points):
    """The points merged over ``fixed``, each checked for names the task does not know (lazily)."""
    seen = set()
    for p in points:
        if not isinstance(p, dict):
            raise ValueError(f"a point must be a dict name -> value, got {type(p).__name__}")
        new = p.keys() - seen
        if new:
            tasks.check_names(task, new)
            seen |= new
        yield {**(fixed or {}), **p}


def _chunks(it, n):
    it = iter(it)
    while batch := list(itertools.islice(it, n)):
        yield batch


BATCH_MAX = 256  # points per Dask task at most (a progress step; what a lost worker costs)


def guided_sizes(n: int, workers: int) -> list:
    """Batch sizes for ``n`` points on ``workers`` workers (they sum to ``n``).

    ``min(BATCH_MAX, n / (4 x workers))`` points per batch while more than two such batches per
    worker are left, then half the points left per worker (guided self-scheduling), down to an
    eighth of the first size: the sweep ends on small batches, so no worker sits idle while
    another finishes a large one, for a few more tasks (a task costs milliseconds of CPU). Half,
    not all: workers do not run at the same pace (on a 2-core machine the driver and the nannies
    take turns on their cores), and with a whole share each the last large batch started on the
    slower worker finished 0.25 s after the other worker ran dry (400 points of 10 ms)."""
    first = max(1, min(BATCH_MAX, math.ceil(n / (4 * workers))))
    least = max(1, first // 8)
    sizes, left = [], n
    while left > 0:
        b = min(first, max(least, math.ceil(left / (2 * workers))))
        sizes.append(min(b, left))
        left -= sizes[-1]
    return sizes


def _guided_chunks(it, n, workers):
    """Batches of ``it`` sized by ``guided_sizes(n, workers)``; anything past ``n`` in batches of the last size."""
    it = iter(it)
    sizes = guided_sizes(n, workers) or [1]
    for b in itertools.chain(sizes, itertools.repeat(sizes[-1])):
        batch = list(itertools.islice(it, b))
        if not batch:
            return
        yield batch


def _run_dask(cl, fn, task_name, batches, sink, bar, n_workers, retries):
    from distributed import as_completed

    window = max(2 * n_workers, 4)
    pending = {}  # future key -> its batch (the driver keeps indices, keys and points)

    def submit(batch):
        blob = pickle.dumps([p for _, _, p in batch], protocol=pickle.HIGHEST_PROTOCOL)
        fut = cl.submit(_run_packed, fn, blob, retries=retries, pure=False)
        pending[fut.key] = batch
        return fut

    ac = as_completed([submit(b) for b in itertools.islice(batches, window)], loop=cl.loop)
    for fut in ac:
        batch = pending.pop(fut.key)
        try:
            rows = _rows(task_name, batch, pickle.loads(fut.result()))
        except Exception as err:  # the batch failed outside any point (e.g. KilledWorker)
            rows = [
                {
                    "point": i,
                    "point_key": k,
                    "task": task_name,
                    **p,
                    "error": f"{type(err).__name__}: {err}",
                }
                for i, k, p in batch
            ]
        sink.write(rows)
        bar.update(len(rows))
        fut.release()
        nxt = next(batches, None)
        if nxt is not None:
            ac.add(submit(nxt))


_ADDRESS = re.compile(r"^(?:(tcp|tls|inproc|ucx|ws|wss)://)?\[?[\w.\-:]+\]?:\d{1,5}$")


def check_address(address: str) -> str:
    """``address`` if it looks like a Dask scheduler address (``tcp://host:port``), else ValueError."""
    if not isinstance(address, str) or not _ADDRESS.match(address.strip()):
        raise ValueError(f"scheduler address {address!r} must look like tcp://HOST:PORT")
    port = int(address.rsplit(":", 1)[1])
    if not 0 < port < 65536:
        raise ValueError(f"scheduler address {address!r}: port must be 1-65535")
    return address.strip()


@contextlib.contextmanager
def _dask_client(client, address, workers, timeout_s):
    if client is not None:
        yield client
        return
    if address is not None:
        with _connect(address, timeout_s) as cl:
            yield cl
        return
    with local_cluster(workers) as cl:
        yield cl


@contextlib.contextmanager
def _connect(address, timeout_s):
    from distributed import Client

    try:
        cl = Client(address, timeout=f"{timeout_s}s", set_as_default=False)
    except (OSError, TimeoutError) as err:
        raise ValueError(
            f"cannot reach a Dask scheduler at {address} within {timeout_s:g} s ({err})"
        ) from None
    try:
        yield cl
    finally:
        cl.close()


QUIET_CLUSTER = {
    "distributed.worker.profile.enabled": False,  # the statistical profiler samples each worker every 10 ms
    "distributed.admin.tick.interval": "1s",  # event-loop health check, default every 20 ms in every process
    "distributed.admin.system-monitor.interval": "2s",  # CPU/memory sampling, default every 500 ms
    "distributed.worker.memory.monitor-interval": "1s",  # each worker's and nanny's memory check, default 100 ms
}
"""Dask settings of the local cluster: an idle 2-worker cluster used 0.14-0.16 CPU seconds per
second with the defaults, 0.04-0.055 with the first three and 0.025 with all four (measured on
this project's 2-core machine), CPU the sweep's points get instead; the dashboard then shows no
profile and samples more slowly, and a worker past its memory limit is paused, spilled or
restarted within a second instead of a tenth of one."""


@contextlib.contextmanager
def local_cluster(workers: int | None = None, *, dashboard: bool = True, processes: bool = True):
    """A ``distributed.Client`` on a ``LocalCluster`` of ``workers`` single-threaded worker
    processes (default: one per core), closed on exit; ``client.dashboard_link`` is its dashboard.

    ``processes=False`` runs the workers as threads of this process instead: it starts in about
    a second and reuses this process's warm Numba caches, but the threads share one interpreter
    (Python code runs one thread at a time), so it shows the machinery rather than a speed-up."""
    import logging

    from distributed import Client, LocalCluster

    n = workers or os.cpu_count() or 1
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"workers must be a whole number >= 1, got {workers!r}")
    if not isinstance(processes, bool):
        raise ValueError(f"processes must be True or False, got {processes!r}")
    import dask

    with dask.config.set(QUIET_CLUSTER):
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=processes,
            dashboard_address=":0" if dashboard else None,
            silence_logs=logging.ERROR,
        )
        client = Client(cluster, set_as_default=False)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def _warm_workers(cl):
    """Register the warm-up plugin: each worker (and any that replaces a dead one) loads the
    Numba caches once before its first batch."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class WarmUp(WorkerPlugin):
        name = "ipusim-warm-up"

        def setup(self, worker):
            from ipusim.sweep.tasks import warm_up

            warm_up()

    cl.register_plugin(WarmUp(), name="ipusim-warm-up")
