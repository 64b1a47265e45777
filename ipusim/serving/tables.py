"""Service-time tables from the machine model, built once and cached on disk.

A table holds the seconds of one step (``ipusim.machine``: the tile simulator for a tile
chip, the GPU simulator for a GPU) for a batch of ``rows`` sequences padded to a length,
``inf`` where the step does not fit (the fit rule). The step runs on a ``Replica``: one chip,
``chips`` chips holding the model's layers in turn (pipeline stages), or a tensor/pipeline
placement of ``chips`` chips (``ipusim.placement``: ``tensor`` chips per layer, ``chips /
tensor`` stages; ``placed_replica`` picks the fastest that fits).

Two ways to fill a table:

* ``time_table`` (fine): every ``len_step`` tokens plus the last length before each memory
  cliff, rows exact or linearly interpolated within a regime; what ``serve`` and the
  notebooks use.
* ``coarse_table`` (coarse): powers of two in rows and length, bilinear in log rows and
  log length; what the checklist's policy search uses.

Generation adds ``serving.mixed_steps.mixed_table``: a step prefilling prompts beside decodes
(weights read once), built on these tables' replicas and cache.

Tables are kept in memory and on disk (``ipusim.serving.table_cache``: one file a table, keyed
by the library version, the machine-model sources, the tile calibration in force, the chip,
the model and the grid), each entry holding its key, shape and digest and checked for meaning
before use; a corrupt entry is reported, removed and rebuilt. When no cache directory is
writable the tables are rebuilt on each run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._validate import positive
from . import table_cache

_INF = np.inf
ROW_GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
COARSE_MIN_LEN = 8  # tokens: the shortest length of the coarse grid


@dataclass(frozen=True)
class Replica:
    """Where a step runs: ``chips`` chips of ``chip`` holding ``model``'s layers in turn.

    ``streaming``: None lets the machine model choose (weights on chip when they fit, else
    streamed); True streams the weights from off-chip DRAM; False keeps them on chip.
    ``tensor``: None for the layers-in-turn pipeline above; an integer ``t`` makes the replica
    a placement of ``t``-way tensor parallelism over ``chips / t`` pipeline stages, each step
    timed by ``placement.assess`` (one micro-batch: the batch's latency through the stages; a
    server keeps up to ``pipeline`` batches in flight), with the machine model choosing
    streaming per stage (``streaming`` must be None).
    """

    chip: object  # hardware.TileChip or hardware.GpuChip
    model: object  # workloads.TransformerConfig
    chips: int = 1
    streaming: bool | None = None
    tensor: int | None = (
        None  # chips per layer of a tensor/pipeline placement (None: layers in turn)
    )

    def __post_init__(self):
        if self.tensor is None:
            return
        from .. import placement

        t = positive("Replica.tensor", self.tensor, integer=True)
        n = positive("Replica.chips", self.chips, integer=True)
        if n % t:
            raise ValueError(f"Replica.chips ({n}) must be a multiple of Replica.tensor ({t})")
        if t not in placement.tensor_degrees(self.model, t):
            raise ValueError(f"Replica.tensor={t} must divide {self.model.name}'s heads and d_ff")
        if n // t > self.model.layers:
            raise ValueError(
                f"{n // t} pipeline stages exceed {self.model.name}'s {self.model.layers} layers"
            )
        if self.streaming is not None:
            raise ValueError(
                "a placed Replica (tensor set) lets the machine model choose streaming: streaming=None"
            )

    @property
    def pipeline(self) -> int:
        """Pipeline stages: batches a replica can keep in flight."""
        return self.chips // self.tensor if self.tensor else self.chips

    def label(self) -> str:
        if self.tensor:
            return f"t={self.tensor} p={self.pipeline}"
        return "" if self.chips == 1 else f"x{self.chips}"


def replica(
    chip,
    model,
    *,
    chips: int = 1,
    streaming: bool | None = None,
    placement=None,
    phases=("forward",),
    length: int | None = None,
) -> Replica:
    """The ``Replica`` a service model runs on: ``placement`` None gives ``chips`` chips holding the
    layers in turn; a ``placement.PlacedStep`` its tensor x pipeline chips; ``"search"`` the
    fastest placement on up to ``chips`` chips (``placed_replica`` with ``phases`` and ``length``)."""
    from .. import hardware, workloads

    c, m = hardware.chip(chip), workloads.model(model)
    n = positive("chips", chips, integer=True)
    if placement is None:
        return Replica(c, m, n, streaming)
    from ..placement import PlacedStep  # here: the placement model is not needed without one

    if streaming is not None:
        raise ValueError(
            "streaming applies to a replica without a placement; a placement lets the machine "
            "model choose per stage"
        )
    if isinstance(placement, str) and placement == "search":
        return placed_replica(c, m, n, phases=phases, length=length)
    if isinstance(placement, PlacedStep):
        if placement.fit == "does_not_fit":
            raise ValueError(f"placement {placement.label()} does not fit: {placement.reason}")
        if placement.chip != c.name:
            raise ValueError(f"placement is for chip {placement.chip!r}, not {c.name!r}")
        return Replica(c, m, placement.tensor * placement.pipeline, None, placement.tensor)
    raise ValueError(
        f"placement must be None, 'search' or a placement.PlacedStep, got {placement!r}"
    )


def placed_replica(
    chip, model, chips: int, *, phases=("forward",), length: int | None = None
) -> Replica:
    """The replica the placement search (``placement.place``) finds fastest on up to ``chips``
    chips for one sequence of ``length`` tokens (default the model's longest) in every phase
    (the slowest phase's placement), as a tensor/pipeline ``Replica`` of ``tensor x pipeline``
    chips (its data-parallel copies are the serving replicas). Raises ``ValueError`` when
    nothing fits, with the search's reason."""
    from .. import hardware, placement, workloads

    c, m = hardware.chip(chip), workloads.model(model)
    n = positive("chips", chips, integer=True)
    ln = m.max_positions if length is None else positive("length", length, integer=True)
    best = None
    for ph in phases:
        if ph == "decode":
            s = workloads.step(m, [ln], phase="decode")
        else:
            s = workloads.step(m, [ln], phase=ph, pad_to=ln)
        pl = placement.place(c, s, chips=n)
        if pl.fit == "does_not_fit":
            raise ValueError(f"{m.name} does not fit {n} {c.name} chips ({ph}): {pl.reason}")
        best = pl if best is None or pl.time_s > best.time_s else best
    return Replica(c, m, best.tensor * best.pipeline, None, best.tensor)


def source(spec: Replica) -> str:
    """Name of the machine model that fills ``spec``'s tables."""
    sim = f"ipusim.{'tiles' if spec.chip.kind == 'tile' else 'gpu'} simulator"
    return sim + (f" on ipusim.placement {spec.label()}" if spec.tensor else "")


def stage_model(model, chips: int):
    """The part of ``model`` one chip of a ``chips``-stage pipeline runs: ceil(layers / chips)
    layers. ASSUMPTION: the embedding table and output head are left out of the stage (a
    2-token vocabulary); they sit on the first and last stages."""
    if chips <= 1:
        return model
    return dataclasses.replace(
        model,
        name=f"{model.name} stage of {chips}",
        layers=-(-model.layers // chips),
        vocab=2,
        type_vocab=0,
        learned_positions=False,
        tied_embeddings=True,
        published_params=0.0,
    )


def _chip_step(spec: Replica, step):
    """``step`` as one chip of ``spec`` runs it: its stage's when ``chips`` > 1."""
    if spec.chips <= 1:
        return step
    from .. import workloads

    return workloads.step(
        stage_model(step.model, spec.chips),
        list(step.lengths),
        phase=step.phase,
        pad_to=step.row_len or None,
        dtype_bytes=step.dtype_bytes,
    )


def step_result(spec: Replica, step):
    """``machine.simulate`` of ``step`` on one chip of ``spec`` (its stage when chips > 1)."""
    from .. import machine

    if spec.tensor:
        raise ValueError(
            "a placed Replica has no one-chip step: use replica_step_s (placement.assess)"
        )
    step = _chip_step(spec, step)
    if spec.chip.kind != "tile":
        return machine.simulate(spec.chip, step)
    return machine.simulate(
        spec.chip, step, weights=_weights(spec), explain=False
    )  # tables read fits and time only


def _weights(spec: Replica) -> str:
    """``tiles.profile``'s weights mode of a tile replica: its ``streaming`` choice, or auto."""
    return "auto" if spec.streaming is None else ("stream" if spec.streaming else "on_chip")


def replica_step_s(spec: Replica, step) -> tuple[float, tuple]:
    """(seconds, regime) of ``step`` on the replica; seconds = inf when it does not fit.

    With ``chips`` > 1 the batch passes the stages in turn: ``chips`` x the stage time plus
    the activation hops over the chip links. ``regime`` is (fits, streams weights): times
    are smooth within a regime and jump between regimes (a memory cliff), so the tables
    never interpolate across one.
    """
    if spec.tensor:
        from .. import placement

        pl = placement.assess(spec.chip, step, tensor=spec.tensor, pipeline=spec.pipeline)
        ok = pl.fit != "does_not_fit" and math.isfinite(pl.time_s)
        return (float(pl.time_s) if ok else _INF), (ok, ok and pl.fit == "streams")
    if spec.chip.kind == "tile":  # the time and weights mode alone, the same doubles
        from .. import one_chip

        t, streams = one_chip.tile_time_s(spec.chip, _chip_step(spec, step), weights=_weights(spec))
        ok = math.isfinite(t)
        streams = ok and streams
        t = float(t) if ok else _INF
    else:  # a GPU: the time alone (no per-kernel records), the same double; never streams
        from .. import machine

        t = machine.step_time_s(spec.chip, _chip_step(spec, step))
        ok, streams = math.isfinite(t), False
        t = float(t) if ok else _INF
    if spec.chips > 1 and ok:
        tokens = step.batch * (1 if step.phase == "decode" else max(step.lengths))
        link = spec.chip.link_bandwidth_bytes_per_s
        hop = (
            tokens * step.model.d_model * step.dtype_bytes * (spec.chips - 1) / link
            if link > 0
            else _INF
        )
        t = spec.chips * t + hop
    return t, (ok, streams)


# ---------------------------------------------------------------------------------------
# Disk cache
# ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _code_key() -> str:
    """Library version and a digest of every source file of the package (a table is valid for
    exactly the code that built it; listing the files it depends on by name broke silently when a
    module became a package)."""
    from .. import __version__

    h = hashlib.sha256(__version__.encode())
    root = Path(__file__).resolve().parent.parent
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _describe(x):
    """A full, stable description of a key part (every field of a dataclass, not its repr)."""
    if dataclasses.is_dataclass(x):
        return (type(x).__name__,) + tuple(
            (f.name, _describe(getattr(x, f.name))) for f in dataclasses.fields(x)
        )
    if isinstance(x, dict):
        return tuple(sorted((str(k), _describe(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(_describe(v) for v in x)
    if isinstance(x, np.ndarray):
        return (x.dtype.str, x.shape, hashlib.sha256(x.tobytes()).hexdigest())
    return repr(x)


def _key(*parts) -> str:
    """Cache key: the code, the parts, and the tile calibration in force (``tile_calibration.overrides``).

    Remembered for parts that are frozen dataclasses (the same object: configs are values) and
    plain scalars, so a search that asks for the same table hundreds of times describes and
    hashes its parts once (``_describe`` of a replica costs ~0.1-0.2 ms)."""
    from .. import tile_params

    cal = tile_params.current()
    memo = _memo_token(parts)
    if memo is not None:
        hit = _key_memo.get((cal, memo))
        if hit is not None:
            return hit[1]
    key = hashlib.sha256(repr((_code_key(), cal, _describe(parts))).encode()).hexdigest()[:32]
    if memo is not None:
        if len(_key_memo) >= 1024:
            _key_memo.clear()
        _key_memo[(cal, memo)] = (parts, key)  # keeps the parts alive: their ids stay theirs
    return key


def _memo_token(parts):
    """A token equal for the same frozen-dataclass objects and equal-valued scalars (by type and
    repr, so 1 and 1.0 or 0.0 and -0.0 stay apart as ``_describe`` keeps them); None when a part
    is neither (an array, a list, a mutable dataclass): such keys are not remembered."""
    out = []
    for p in parts:
        if p is None or isinstance(p, (str, int, float, bool)):
            out.append((type(p), repr(p)))
        elif (
            dataclasses.is_dataclass(p)
            and not isinstance(p, type)
            and p.__dataclass_params__.frozen
        ):
            out.append(("id", id(p)))
        else:
            return None
    return tuple(out)


_key_memo: dict = {}


class NotCached(LookupError):
    """Raised inside ``only_cached()`` when a table is in neither the memory nor the disk cache."""


@contextlib.contextmanager
def only_cached():
    """Within this block a table that is not cached raises ``NotCached`` instead of being built
    (a caller can then run a cheap check before paying for the build)."""
    _only_cached.append(True)
    try:
        yield
    finally:
        _only_cached.pop()


_only_cached: list = []


def cached(build, *parts, shape=None, check=None) -> np.ndarray:
    """The table ``build()`` makes for the key of ``parts``: from memory, else from the disk
    cache when its entry verifies (``table_cache.load``: of ``shape``, and meaning what
    ``check`` says a table must), else built and stored. A built table that fails ``check``
    is used but not stored (said once on stderr): the cache holds only tables that verify."""
    key = _key(*parts)
    tab = _memory.get(key)
    if tab is None:
        tab = table_cache.load(key, shape=shape, check=check)
        if tab is None:
            if _only_cached:
                raise NotCached(key)
            tab = np.asarray(build(), dtype=np.float64)
            tab.setflags(write=False)
            why = check(tab) if check is not None else None
            if why:
                table_cache.note_once(
                    ("built", parts[0]),
                    f"ipusim: note: a {parts[0]} table built by the machine "
                    f"model {why}; it is used but not cached",
                )
            else:
                table_cache.store(key, tab)
        _memory[key] = tab
    return tab


_memory: dict = {}


# ---------------------------------------------------------------------------------------
# Fine tables
# ---------------------------------------------------------------------------------------


def _step_eval(spec, phase, rows, length, memo):
    key = (rows, length)
    if key not in memo:
        from .. import workloads

        pad = None if phase == "decode" else length
        memo[key] = replica_step_s(
            spec, workloads.step(spec.model, [length] * rows, phase=phase, pad_to=pad)
        )
    return memo[key]


def _fill_rows(spec, phase, max_rows, rows_grid, length, memo):
    """Seconds for 1..max_rows rows at ``length``: grid rows computed, rows between two grid
    rows of the same regime interpolated linearly, rows between regimes computed exactly."""
    col = np.empty(max_rows + 1)
    col[0] = 0.0
    for r in rows_grid:
        col[r] = _step_eval(spec, phase, r, length, memo)[0]
    for a, b in zip(rows_grid[:-1], rows_grid[1:], strict=True):
        if b - a < 2:
            continue
        ta, ga = _step_eval(spec, phase, a, length, memo)
        tb, gb = _step_eval(spec, phase, b, length, memo)
        if ga == gb and math.isfinite(ta) and math.isfinite(tb):
            col[a + 1 : b] = np.interp(np.arange(a + 1, b), [a, b], [ta, tb])
        elif ga == gb:  # both do not fit: rows in between need at least a's memory
            col[a + 1 : b] = _INF
        else:
            for r in range(a + 1, b):
                col[r] = _step_eval(spec, phase, r, length, memo)[0]
    return col


def time_table(
    spec: Replica, phase: str, max_rows: int, max_len: int, len_step: int, exact_rows: bool
):
    """Seconds of one step, ``tab[rows, j]``; ``inf`` where the step does not fit.

    ``phase`` "decode": one new token per sequence with ``j * len_step`` tokens of context
    (columns every ``len_step``). ``phase`` "forward"/"prefill": every sequence padded to
    ``L`` tokens, one column per token length ``L``: the machine model runs on the lengths
    ``len_step, 2 len_step, ...`` plus, for each grid row count, the last length before each
    memory cliff (found by bisection); a length is charged the time of the next length
    computed, which is never on the other side of a cliff. Rows on a grid are linearly
    interpolated within a regime and computed exactly across one. A row count that does not fit
    where a larger one does is charged as that larger batch, padded (``pad_to_a_fitting_batch``).
    """
    cols = -(-max_len // len_step) if phase == "decode" else max_len
    return cached(
        lambda: _build_fine(spec, phase, max_rows, max_len, len_step, exact_rows),
        "fine",
        spec,
        phase,
        max_rows,
        max_len,
        len_step,
        exact_rows,
        shape=(max_rows + 1, cols + 1),
        check=functools.partial(table_cache.times_check, zero_edges=True),
    )


def _build_fine(spec, phase, max_rows, max_len, len_step, exact_rows):
    from ..config import progress

    def bar(it, what):  # a bar on stderr, shown only once the build has run 2 s (a cold table)
        return progress(it, desc=f"{spec.model.name} {phase} table: {what}", leave=False, delay=2.0)

    memo: dict = {}
    rows_grid = (
        list(range(1, max_rows + 1))
        if exact_rows
        else sorted({r for r in ROW_GRID if r < max_rows} | {max_rows})
    )
    n_len = -(-max_len // len_step)
    grid = sorted({min(j * len_step, max_len) for j in range(1, n_len + 1)})
    if phase == "decode":
        tab = np.zeros((max_rows + 1, n_len + 1))
        for j in bar(range(1, n_len + 1), "lengths"):
            tab[:, j] = _fill_rows(
                spec, phase, max_rows, rows_grid, min(j * len_step, max_len), memo
            )
        return pad_to_a_fitting_batch(tab)
    cols = set(grid)
    for r in bar(rows_grid, "rows"):
        prev = None
        for L in grid:
            g = _step_eval(spec, phase, r, L, memo)[1]
            if prev is not None and g != prev[1]:
                lo, hi = prev[0], L  # regime(lo) = prev regime, regime(hi) differs
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if _step_eval(spec, phase, r, mid, memo)[1] == prev[1]:
                        lo = mid
                    else:
                        hi = mid
                cols.add(lo)
            prev = (L, g)
    cols = sorted(cols)
    vals = np.array(
        [_fill_rows(spec, phase, max_rows, rows_grid, L, memo) for L in bar(cols, "lengths")]
    ).T
    idx = np.searchsorted(cols, np.arange(1, max_len + 1), side="left")  # the next length computed
    tab = np.zeros((max_rows + 1, max_len + 1))
    tab[:, 1:] = vals[:, idx]
    return pad_to_a_fitting_batch(tab)


def pad_to_a_fitting_batch(tab: np.ndarray) -> np.ndarray:
    """``tab`` with every cell where ``r`` rows do not fit but more rows do set to the time of the
    fewest larger rows that fit: a batch that its own plan cannot hold runs padded with empty rows
    as the larger batch whose plan fits (the planner can pick a different tiling for a larger
    batch, so fit is not always monotone in rows as the machine model computes it). After this,
    fit is monotone in rows, the assumption ``serving.capacity.largest_batch`` and
    ``table_cache.times_check`` rest on."""
    out = tab.copy()
    for r in range(out.shape[0] - 2, 0, -1):  # from the second-largest row count up
        bad = np.isinf(out[r]) & np.isfinite(out[r + 1])
        out[r, bad] = out[r + 1, bad]
    return out


# ---------------------------------------------------------------------------------------
# Coarse tables
# ---------------------------------------------------------------------------------------


def pow2_grid(lo: int, hi: int) -> list[int]:
    """lo, 2 lo, 4 lo, ... below hi, then hi."""
    g, v = [], lo
    while v < hi:
        g.append(v)
        v *= 2
    g.append(hi)
    return g


def coarse_grid(
    spec: Replica, phase: str, max_rows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows grid, length grid, seconds[rows, length]) of the machine model on powers of two."""
    bg = np.array(pow2_grid(1, max_rows), dtype=float)
    lg = np.array(pow2_grid(COARSE_MIN_LEN, spec.model.max_positions), dtype=float)

    def build():
        from .. import workloads

        return [
            [
                replica_step_s(spec, workloads.step(spec.model, [int(ln)] * int(b), phase=phase))[0]
                for ln in lg
            ]
            for b in bg
        ]

    return (
        bg,
        lg,
        cached(
            build,
            "coarse",
            spec,
            phase,
            max_rows,
            shape=(bg.size, lg.size),
            check=functools.partial(table_cache.times_check, zero_edges=False),
        ),
    )


def coarse_time_s(spec: Replica, phase: str, max_rows: int, rows, length) -> np.ndarray:
    """Seconds for ``rows`` x ``length`` (arrays, broadcast to a rows x length table),
    bilinear in log rows and log length between the coarse grid points."""
    bg, lg, grid = coarse_grid(spec, phase, max_rows)
    return _bilinear_log(
        bg,
        lg,
        grid,
        np.atleast_1d(np.asarray(rows, float)),
        np.atleast_1d(np.asarray(length, float)),
    )


def coarse_table(spec: Replica, phase: str, max_rows: int, max_len: int, cols=None) -> np.ndarray:
    """``tab[rows, j]`` for rows 1..max_rows and lengths ``cols`` (default 1..max_len) from
    the coarse grid; row 0 and column 0 are unused (zero)."""
    cols = np.arange(1, max_len + 1) if cols is None else np.asarray(cols)
    tab = np.zeros((max_rows + 1, cols.size + 1))
    tab[1:, 1:] = coarse_time_s(
        spec, phase, max_rows, np.arange(1, max_rows + 1), np.minimum(cols, max_len)
    )
    tab.setflags(write=False)
    return tab


def _bilinear_log(bg, lg, grid, b, ln):
    """Interpolate ``grid`` (rows ``bg``, columns ``lg``) bilinearly in log b and log ln."""

    def weights(g, x):
        if g.size == 1:
            return np.zeros(x.size, dtype=np.int64), np.zeros(x.size)
        i = np.clip(np.searchsorted(g, x) - 1, 0, g.size - 2)
        w = (np.log(np.clip(x, g[0], g[-1])) - np.log(g[i])) / (np.log(g[i + 1]) - np.log(g[i]))
        return i, np.clip(w, 0.0, 1.0)

    i, u = weights(bg, b)
    j, v = weights(lg, ln)
    i1 = np.minimum(i + 1, bg.size - 1)
    j1 = np.minimum(j + 1, lg.size - 1)
    u, v = u[:, None], v[None, :]
    with np.errstate(invalid="ignore"):
        out = (
            (1 - u) * (1 - v) * grid[np.ix_(i, j)]
            + u * (1 - v) * grid[np.ix_(i1, j)]
            + (1 - u) * v * grid[np.ix_(i, j1)]
            + u * v * grid[np.ix_(i1, j1)]
        )
    # A cell next to a grid point that does not fit (inf) is unavailable too (0 x inf = nan).
    return np.where(np.isnan(out), np.inf, out)
