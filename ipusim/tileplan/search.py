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


class BudgetMemo:
    """Memo of a search whose result depends on its budget only through which candidates fit
    it (it returns the first fastest candidate whose bytes fit the budget, else the first with
    the fewest bytes): each result is kept with the budgets it holds for, so a query with
    another budget of the same key hits when the answer cannot differ.

    * A result that fits, with ``bytes`` t, found under budget b, holds for every budget in
      [t, b]: fewer candidates fit, the chosen one among them, so it is still the fastest.
    * A result that does not fit (``bytes`` the least of all candidates) holds for every
      budget below its bytes: none fits there either.

    Keyed on the values of every other input (``key``); at most ``per_key`` results a key
    and ``maxsize`` keys (all forgotten when full). ``clear_plan_cache`` empties it."""

    def __init__(self, maxsize: int, per_key: int = 8):
        self.maxsize, self.per_key = maxsize, per_key
        self._known = {}
        _PLAN_CACHES.append(self)

    def get(self, key, budget: float):
        """The result known to hold for ``budget``, or None."""
        for fits, lo, hi, result in self._known.get(key, ()):
            if (lo <= budget <= hi) if fits else budget < lo:
                return result
        return None

    def put(self, key, budget: float, result, fits: bool, nbytes: float) -> None:
        """Remember ``result`` (found under ``budget``; ``fits`` it with ``nbytes``)."""
        known = self._known.get(key)
        if known is None:
            if len(self._known) >= self.maxsize:
                self._known.clear()
            known = self._known[key] = []
        elif len(known) >= self.per_key:
            del known[0]
        known.append((fits, nbytes, budget, result))

    def cache_clear(self) -> None:
        self._known.clear()


def clear_plan_cache() -> None:
    """Forget cached matmul plans (``tile_calibration.overrides`` calls it: plans are ranked
    with the calibrated costs, so a changed parameter can change the plan)."""
    for cached in _PLAN_CACHES:
        cached.cache_clear()
