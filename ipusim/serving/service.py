"""Service models: how long a device takes for a batch, as a table of seconds.

A ``ServiceModel`` is a table ``time[rows, j]`` in seconds: a batch of ``rows`` rows, each
padded to ``j * len_step`` tokens. A padded device runs ``batch size`` rows of the batch's
longest request; a packed device packs the batch's requests first-fit decreasing
(``ipusim.packing``) into rows of ``pack_len`` tokens and runs those rows (attention over
each packed row with a block mask, as PackedBERT). Cells whose step does not fit are
``inf``. ``chip_service`` fills the table from the machine model (``ipusim.serving.tables``);
``fixed_service`` and ``exponential_service`` need no machine (queueing-theory checks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from .. import limits as _limits
from .. import packing
from .._validate import positive
from . import tables

LEN_STEP = 16  # tokens per length column of a fine chip table (``chip_service``'s default)
MAX_LENGTH = 2**31 - 1  # tokens per request, at most (so a batch's token sum cannot overflow int64)


@dataclass(frozen=True)
class ServiceModel:
    """How long a device takes for a batch; ``table[rows, j]`` seconds (row 0, column 0 unused).

    ``len_step`` = 0 marks a length-independent model (fixed / exponential service).
    """

    name: str
    table: np.ndarray = field(repr=False)  # float64 [max_rows + 1, n_len + 1], seconds
    len_step: int  # tokens per length column; 0: lengths do not matter
    packed: bool = False  # rows are packs of pack_len tokens instead of padded requests
    pack_len: int = 0  # tokens per packed row
    random: str = "none"  # "exp": each batch's time is the table value x an Exp(1) draw
    source: str = ""  # what filled the table

    @property
    def max_rows(self) -> int:
        return self.table.shape[0] - 1

    @property
    def max_len(self) -> int:
        return (self.table.shape[1] - 1) * self.len_step if self.len_step else MAX_LENGTH

    def time_s(self, lengths, *, rows: int | None = None) -> float:
        """Service time of one batch with these request lengths (mean for ``random='exp'``)."""
        lens = np.asarray(lengths, dtype=np.int64)
        # One batch, called from Python: the two scalar kernels' plain functions (the same integer
        # and float arithmetic; the kernels themselves run inside the event kernel), so that a run
        # which asks a few batch times does not load two more compiled kernels (~10 ms each at
        # start-up). Sizes with no row (the kernels' error model gives 0 where Python raises) take
        # the kernels.
        size, mx = lens.size if rows is None else rows, int(lens.max())
        plain = mx >= 1 and self.max_rows >= 1
        shape = batch_shape.py_func if plain else batch_shape
        r, j, _ = shape(self.len_step, self.packed, self.pack_len, size, mx, int(lens.sum()))
        if self.packed:  # first-fit decreasing, as the simulator packs a batch
            r = packing.first_fit_rows(
                np.sort(lens)[::-1].copy(),
                self.pack_len,
                self.pack_len,
                np.empty(lens.size, np.int64),
            )
        return float((lookup_s.py_func if plain else lookup_s)(self.table, r, j))

    def fit_limit(self, length: int) -> int:
        """Most rows of ``length`` tokens (padded) that fit the device in one step: the rows before
        the table's first cell without a time; 0 if none (``serving.capacity.largest_batch``)."""
        if not self.len_step:
            return self.max_rows
        j = 1 if self.packed else -(-int(length) // self.len_step)
        bad = np.flatnonzero(~np.isfinite(self.table[1:, j]))
        return int(bad[0]) if bad.size else self.max_rows

    def throughput_rps(self, length: int, batch: int) -> float:
        """Requests per second of back-to-back batches of ``batch`` requests of ``length``."""
        return batch / self.time_s([length] * batch)

    def __repr__(self):
        kind = "packed" if self.packed else "padded"
        return f"ServiceModel({self.name}: {kind}, up to {self.max_rows} rows, {self.source})"


def fixed_service(
    seconds: float, *, per_request_s: float = 0.0, max_batch: int = 1
) -> ServiceModel:
    """A batch of b requests takes ``seconds + per_request_s * b``, whatever the lengths (M/D/1 when b = 1)."""
    s = positive("seconds", seconds, at_most=_limits.MAX_SECONDS, why="one batch's time, s")
    c = positive("per_request_s", per_request_s, allow_zero=True, at_most=_limits.MAX_SECONDS)
    b = positive("max_batch", max_batch, integer=True)
    _limits.check_memory("max_batch", b, 16 * b, "a service table of two float64 per batch size")
    tab = np.zeros((b + 1, 2))
    tab[1:, 1] = s + c * np.arange(1, b + 1)
    return ServiceModel(f"fixed {s * 1e3:g} ms", tab, 0, source="fixed")


def exponential_service(mean_s: float, *, max_batch: int = 1) -> ServiceModel:
    """Exponentially distributed batch time of mean ``mean_s`` (M/M/1 when batches are 1)."""
    m = positive("mean_s", mean_s, at_most=_limits.MAX_SECONDS, why="one batch's mean time, s")
    b = positive("max_batch", max_batch, integer=True)
    _limits.check_memory("max_batch", b, 16 * b, "a service table of two float64 per batch size")
    tab = np.zeros((b + 1, 2))
    tab[1:, 1] = m
    return ServiceModel(
        f"exponential mean {m * 1e3:g} ms", tab, 0, random="exp", source="exponential"
    )


MAX_CHIP_ROWS = tables.ROW_GRID[-1]  # rows of a chip_service table, at most (the last grid point)


def table_length(model, longest: int, *, len_step: int = LEN_STEP) -> int | None:
    """``max_len`` of the shortest fine ``chip_service`` table whose cells for requests up to
    ``longest`` tokens hold the full table's values bit for bit: ``longest`` rounded up to a
    multiple of ``len_step`` (columns are computed at those multiples and at the memory cliffs
    between them, each length charged the next one computed, rows per column alone). None when
    that is no shorter than the full table (the model's ``max_positions``)."""
    from .. import workloads

    top = workloads.model(model).max_positions
    n = positive("longest", longest, integer=True)
    step = positive("len_step", len_step, integer=True)
    rounded = -(-n // step) * step
    return rounded if rounded < top else None


def chip_service(
    chip,
    model="bert-base",
    *,
    max_batch: int = 64,
    max_len: int | None = None,
    packed: bool = False,
    pack_len: int | None = None,
    len_step: int = LEN_STEP,
    exact_rows: bool | None = None,
    chips: int = 1,
    streaming: bool | None = None,
    grid: str = "fine",
    placement=None,
) -> ServiceModel:
    """Service-time table of ``model`` on ``chip`` from the machine model (``ipusim.serving.tables``).

    Each column is a padded length in tokens (1 to ``max_len``, default the model's
    ``max_positions``). ``grid="fine"``: the machine model runs at multiples of
    ``len_step`` and at the last length before each memory cliff, a length is charged the
    next length computed, and rows are computed for every count (``exact_rows``, the
    default for GPU chips, whose wave quantization makes interpolation up to ~10% off) or
    on a grid and linearly interpolated (the default for tile chips). ``grid="coarse"``:
    powers of two in batch and length, interpolated bilinearly in log batch and log length
    (fast; what the checklist's policy search uses). A replica of ``chips`` chips holds the
    model's layers in turn (``tables.replica_step_s``); ``streaming`` True streams the
    weights from off-chip DRAM, False keeps them on chip, None (default) lets the machine
    model choose (tile chips). ``placement``: a ``placement.PlacedStep`` makes the replica its
    tensor x pipeline chips, ``"search"`` the fastest placement on up to ``chips`` chips for one
    sequence of ``max_len`` tokens (``tables.replica``); each step is then timed by
    ``placement.assess`` and a replica keeps ``tables.Replica.pipeline`` batches in flight (run
    that many servers per replica). Cells whose step does not fit are ``inf``
    (``capacity.largest_batch`` reads the fit limit). Fine tables are built for at least 64 rows and
    sliced, so policies with different batch limits see the same times.
    """
    from .. import hardware, workloads

    c = hardware.chip(chip)
    m = workloads.model(model)
    max_len = m.max_positions if max_len is None else positive("max_len", max_len, integer=True)
    if max_len > m.max_positions:
        raise ValueError(f"max_len {max_len} exceeds {m.name}'s max_positions {m.max_positions}")
    step = positive("len_step", len_step, integer=True)
    b = positive(
        "max_batch",
        max_batch,
        integer=True,
        at_most=MAX_CHIP_ROWS,
        why=f"the chip's time table is simulated on a row grid up to {MAX_CHIP_ROWS:,} rows "
        "(a tile simulator call costs ~10 ms and grows with the rows)",
    )
    _limits.check_step(b, max_len, name="max_batch")
    n_chips = positive(
        "chips", chips, integer=True, at_most=_limits.MAX_CHIPS, why="chips per replica"
    )
    if grid not in ("fine", "coarse"):
        raise ValueError(f"unknown grid {grid!r}; valid: fine, coarse")
    exact_rows = c.kind == "gpu" if exact_rows is None else bool(exact_rows)
    rows = max(64, b) if grid == "fine" else b
    spec = tables.replica(
        c,
        m,
        chips=n_chips,
        streaming=None if streaming is None else bool(streaming),
        placement=placement,
        length=max_len,
    )
    where = f" {spec.label()}" if spec.label() else ""
    where += " streamed" if streaming else ""
    if packed:
        pl = max_len if pack_len is None else positive("pack_len", pack_len, integer=True)
        if pl > m.max_positions:
            raise ValueError(f"pack_len {pl} exceeds {m.name}'s max_positions {m.max_positions}")
        # one column: every packed row has pack_len tokens; a batch of r rows of pack_len tokens
        if grid == "fine":
            tab = tables.time_table(spec, "forward", rows, pl, pl, True)[:, :2]
        else:
            tab = tables.coarse_table(spec, "forward", rows, pl)[:, [0, pl]]
        return ServiceModel(
            f"{c.name}{where} {m.name} packed {pl}",
            _rows(tab, b),
            pl,
            packed=True,
            pack_len=pl,
            source=tables.source(spec),
        )
    if grid == "fine":
        tab = tables.time_table(spec, "forward", rows, max_len, step, exact_rows)
    else:
        tab = tables.coarse_table(spec, "forward", rows, max_len)
    return ServiceModel(
        f"{c.name}{where} {m.name} padded", _rows(tab, b), 1, source=tables.source(spec)
    )


def _rows(tab, b):
    out = np.ascontiguousarray(tab[: b + 1])  # C order (a column pick is F): one lookup_s signature
    out.setflags(write=False)
    return out


def surrogate_error(
    service: ServiceModel,
    chip,
    model,
    *,
    samples: int = 50,
    long_fraction: float = 0.3,
    seed: int = 0,
) -> dict:
    """Relative error of a padded ``service`` table against direct machine-model calls.

    Each sample is a batch of random size (1..max_rows) of mixed lengths
    (``lengths.sample``); the direct call pads it to its longest request exactly, the table
    to the next length it computed (and interpolates rows if the table was built on a
    grid). Batches that do not fit are counted (``refused`` when both agree,
    ``fit_mismatches`` when they do not) and left out of the error statistics.
    """
    from .. import lengths, machine, workloads

    if service.packed or not service.len_step:
        raise ValueError(
            "surrogate_error checks padded chip tables (from chip_service with packed=False)"
        )
    rng = np.random.default_rng(seed)
    errs, refused, mismatch = [], 0, 0
    for k in range(positive("samples", samples, integer=True)):
        r = int(rng.integers(1, service.max_rows + 1))
        lens = np.minimum(
            lengths.sample(r, long_fraction=long_fraction, seed=seed + k), service.max_len
        )
        res = machine.simulate(chip, workloads.step(model, lens, pad_to=int(lens.max())))
        fits = bool(res.fits) and math.isfinite(res.time_s)
        tab = service.time_s(lens)
        if fits != math.isfinite(tab):
            mismatch += 1  # the table and the machine disagree on whether the batch fits
        elif not fits:
            refused += 1  # both say it does not fit: no time to compare
        else:
            errs.append(tab / res.time_s - 1.0)
    e = np.abs(errs) if errs else np.array([math.nan])
    return {
        "samples": int(samples),
        "compared": len(errs),
        "refused": refused,
        "fit_mismatches": mismatch,
        "max_rel_error": float(e.max()),
        "mean_rel_error": float(e.mean()),
        "mean_signed_error": float(np.mean(errs)) if errs else math.nan,
    }


@njit(cache=True, error_model="numpy")
def batch_shape(len_step, packed, pack_len, size, max_len, tokens):
    """(rows, length column, computed tokens) of a batch. Preconditions: size >= 1.

    For a packed device this is the shape of ``size`` requests of ``max_len`` tokens each
    (``pack_len // max_len`` to a row, first fit); a real batch is packed by ``packing``.
    """
    if len_step == 0:
        return size, 1, tokens
    if packed:
        per = pack_len // max_len
        rows = (size + per - 1) // per
        return rows, 1, rows * pack_len
    j = (max_len + len_step - 1) // len_step
    return size, j, size * j * len_step


@njit(cache=True, error_model="numpy")
def lookup_s(table, rows, j):
    """Seconds for ``rows`` rows at column ``j``; beyond the table, whole extra tables in series."""
    rmax = table.shape[0] - 1
    if rows <= rmax:
        return table[rows, j]
    full = rows // rmax
    rest = rows - full * rmax
    t = full * table[rmax, j]
    if rest > 0:
        t += table[rest, j]
    return t
