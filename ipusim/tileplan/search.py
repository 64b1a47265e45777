"""The planner's searches: candidate split counts, the fewest passes that fit, plan caches.

``candidates`` lists the split counts tried along one dimension; ``fewest`` bisects ascending
counts for the smallest whose plan fits. Memoised planners register with ``plan_cache`` so that
``clear_plan_cache`` empties them (``tile_calibration.overrides`` calls it, and the tests'
``tileplan_reference`` when it swaps references in for the kernels).

Units: counts (dimensionless).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=8192)
def candidates(dim: int, cap: int, small: int = 32, factors=(1, 3, 23)) -> np.ndarray:
    """Split counts tried for one dimension: every count up to ``small``, then ``factors``
    times powers of two (1,472 = 64 x 23), and the whole dimension. Ascending int64,
    read-only (memoised: the same dimensions recur in every layer and step)."""
    top = min(dim, cap)
    c = set(range(1, min(small, top) + 1)) | {top}
    for f in factors:
        p = f
        while p <= top:
            c.add(p)
            p *= 2
    out = np.array(sorted(c), dtype=np.int64)
    out.flags.writeable = False
    return out


def fewest(counts: list, plan_for):
    """The plan for the smallest count in ascending ``counts`` whose plan fits (bisection:
    a plan's working set shrinks as the count grows); None if even the largest does not."""
    if not counts:
        return None
    first = plan_for(counts[0])
    if first[-1]:
        return first
    lo, hi, found = 1, len(counts) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        plan = plan_for(counts[mid])
        if plan[-1]:
            found, hi = plan, mid - 1
        else:
            lo = mid + 1
    return found


_PLAN_CACHES = []  # the memoised planners ``clear_plan_cache`` empties


def plan_cache(maxsize: int):
    """``functools.lru_cache(maxsize)`` whose cache ``clear_plan_cache`` empties (for results
    ranked with the calibrated costs)."""

    def wrap(fn):
        cached = lru_cache(maxsize=maxsize)(fn)
        _PLAN_CACHES.append(cached)
        return cached

    return wrap


def clear_plan_cache() -> None:
    """Forget cached matmul plans (``tile_calibration.overrides`` calls it: plans are ranked
    with the calibrated costs, so a changed parameter can change the plan)."""
    for cached in _PLAN_CACHES:
        cached.cache_clear()
