"""The mixed prefill + decode table of continuous batching: the seconds of one step that
prefills prompts beside decoding sequences (the weights read once for both), on one grid for
every caller (``serve``, the notebooks and the checklist alike), built by the machine model on
a ``serving.tables`` replica and cached with the other tables (``tables.cached``)."""

from __future__ import annotations

import numpy as np

from .._validate import positive
from . import table_cache
from .tables import ROW_GRID, Replica, cached, pow2_grid, replica_step_s

MIXED_BYTES_PER_CELL = 8  # bytes: one float64 a (decodes, prompts, prompt column) cell


def mixed_table_bytes(max_rows: int, max_prompt: int, prompt_step: int) -> int:
    """Bytes of ``mixed_table(spec, max_rows, max_prompt, prompt_step)``: ``max_rows`` x
    ``max_rows`` x (prompt columns + 1) float64, where the columns are ``ceil(max_prompt /
    prompt_step)``. Half of it (d + r > max_rows) is NaN: the kernels index it directly."""
    return MIXED_BYTES_PER_CELL * int(max_rows) ** 2 * (-(-int(max_prompt) // int(prompt_step)) + 1)


def mixed_table(
    spec: Replica, max_rows: int, max_prompt: int, prompt_step: int, *, name: str = "max_rows"
) -> np.ndarray:
    """Seconds of one step that prefills ``r`` prompts beside ``d`` decoding sequences,
    ``tab[d, r, j]`` for d >= 1, r >= 1, d + r <= ``max_rows``; prompts padded to
    ``j * prompt_step`` tokens (column j, capped at ``max_prompt``). ``inf`` where the step
    does not fit, NaN where d + r > max_rows (and in row 0, column 0 and prompt count 0).

    The machine model runs one prefill step whose batch holds the ``r`` prompts and ``d``
    one-token rows (the decoding sequences' new tokens): the weights are read once for
    both. The decoding sequences' attention over their cached context is not in this step:
    ``GenerationModel`` adds it from the decode table.

    Grid (one rule for every caller: ``serve``, the notebooks and the checklist, whatever grid
    their other tables use; ``mixed_grid``): the machine model runs at prompt lengths
    ``prompt_step`` x 1, 2, 4, ... (and ``max_prompt``); at decode counts ``d`` on the row grid
    (``ROW_GRID`` below ``max_rows - 1``, and ``max_rows - 1``), each with prompt counts ``r``
    on the row grid below ``max_rows - d`` and ``r = max_rows - d``; and along the edge of full
    iterations (d + r = ``max_rows``) at ``r`` on the row grid and at ``max_rows - d`` for each
    grid ``d``. Every other cell is linear interpolation between grid points: in the prompt
    length, then in ``r`` (at a grid ``d``, and along the edge), then in ``d`` between the
    grid ``d`` values below ``max_rows - r`` and the edge. A cell next to a grid point that
    does not fit is ``inf`` (a step between them may not fit either). At grid points the
    table is the machine model's time exactly; elsewhere it is a weighted mean of the times
    at the grid points in the box of ``ROW_GRID`` prompt counts and grid lengths around the
    cell and decode counts from the grid ``d`` below to ``max_rows`` minus the lower prompt
    count, so where the time grows with d, r and length its error is at most the spread of
    the times over that box (tests/test_mixed_table.py checks both against direct steps).
    Measured against direct steps at 300 random cells (GPT-2 on an A100-80GB, 128 rows,
    prompts up to 896 tokens): median error 0.8%, 90th percentile 2.2%, largest 14% (a wave
    step of the GPU model between two grid points), the same as with every ``d`` computed. A
    tile chip's step time jumps with the prompt count (how the rows map onto tiles), and
    both tables err more there (GC200, 32 rows, prompts up to 1,024 tokens: median 2%, 90th
    percentile 47% here and 52% with every ``d``), mostly from the interpolation in ``r``.

    Cost: (grid ``d`` x their prompt counts + edge points) x lengths machine-model steps: 1,104
    for that case (a table of every ``d``, capped at 64 rows, needs 8,772), and
    ``mixed_table_bytes`` of memory
    (3.8 MB there), refused with a ``ValueError`` naming ``name`` (the caller's input) when
    over the memory budget (``ipusim.limits``). Cached in memory and on disk like the other
    tables.
    """
    from .. import limits

    B = positive(name, max_rows, integer=True)
    ps = positive("prompt_step", prompt_step, integer=True)
    mp = positive("max_prompt", max_prompt, integer=True)
    limits.check_memory(
        name,
        B,
        mixed_table_bytes(B, mp, ps),
        f"a mixed prefill + decode table of {name}^2 x {-(-mp // ps) + 1} prompt columns of "
        "float64; generation_model(..., mixed=False) prices such iterations as two steps",
    )
    return cached(
        lambda: _build_mixed(spec, B, mp, ps),
        "mixed",
        spec,
        B,
        mp,
        ps,
        shape=(B, B, -(-mp // ps) + 1),
        check=table_cache.mixed_check,
    )


def mixed_grid(max_rows: int, max_prompt: int, prompt_step: int) -> tuple[dict, list, list]:
    """The grid points of ``mixed_table``: ({decode count d: prompt counts r at that d}, prompt
    counts r on the edge d = max_rows - r, prompt lengths in tokens)."""
    B = int(max_rows)
    lens = sorted({min(x, max_prompt) for x in pow2_grid(prompt_step, max_prompt)})
    lines = {d: _row_grid(B - d) for d in _row_grid(B - 1)} if B >= 2 else {}
    edge = sorted(set(_row_grid(B - 1)) | {B - d for d in lines}) if B >= 2 else []
    return lines, edge, lens


def _row_grid(top: int) -> list[int]:
    """``ROW_GRID`` below ``top``, then ``top``."""
    return sorted({r for r in ROW_GRID if r < top} | {top})


def _build_mixed(spec, max_rows, max_prompt, prompt_step):
    from .. import workloads

    B = max_rows
    n_col = -(-max_prompt // prompt_step)
    cols = np.minimum(np.arange(1, n_col + 1) * prompt_step, max_prompt)
    tab = np.full((B, B, n_col + 1), np.nan)
    lines, edge_r, lens = mixed_grid(B, max_prompt, prompt_step)
    memo: dict = {}

    def line(d, top, r_grid):
        """Seconds [r = 1..top, column] along a line of fixed d (None: the edge d = B - r)."""
        vals = []
        for r in r_grid:
            dd = B - r if d is None else d
            for L in lens:
                if (dd, r, L) not in memo:
                    memo[dd, r, L] = replica_step_s(
                        spec, workloads.step(spec.model, [L] * r + [1] * dd, phase="prefill")
                    )[0]
            vals.append(_interp_or_inf(lens, [memo[dd, r, L] for L in lens], cols))
        return _interp_or_inf(r_grid, np.array(vals), np.arange(1, top + 1))

    at_d = {d: line(d, B - d, r_grid) for d, r_grid in lines.items()}  # [r - 1, column]
    edge = line(None, B - 1, edge_r) if B >= 2 else None  # [r - 1, column] at d = B - r
    for r in range(1, B):
        top = B - r
        ds = [d for d in lines if d < top]
        vals = np.array([at_d[d][r - 1] for d in ds] + [edge[r - 1]])  # [d knots, column]
        tab[1 : top + 1, r, 1:] = _interp_or_inf(ds + [top], vals, np.arange(1, top + 1))
    return tab


def _interp_or_inf(xg, vals, x):
    """Linear interpolation of ``vals`` (axis 0 at ascending ``xg``; any further axes are
    interpolated alike) at ``x``: [len(x), ...]; ``inf`` where either neighbouring grid point
    does not fit (a step between them may not fit either). Exact at a grid point."""
    xg, vals, x = np.asarray(xg, float), np.asarray(vals, float), np.asarray(x, float)
    hi = np.clip(np.searchsorted(xg, x, side="left"), 0, xg.size - 1)
    lo = np.clip(hi - 1, 0, xg.size - 1)
    span = xg[hi] - xg[lo]
    w = np.where(span > 0, (x - xg[lo]) / np.where(span > 0, span, 1.0), 1.0)
    w = w.reshape((-1,) + (1,) * (vals.ndim - 1))
    fin = np.isfinite(vals)
    ok = fin[hi] & (fin[lo] | (xg[hi] == x).reshape(w.shape))
    v = np.where(fin, vals, 0.0)
    return np.where(ok, v[lo] * (1.0 - w) + v[hi] * w, np.inf)
