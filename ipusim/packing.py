"""Pad, bucket or pack sequences into rows of fixed length, and count the waste.

Strategies (``pack(source, max_len, strategy=...)``), all returning a ``Packing``:

* ``"pad"``: one sequence per row, every row ``max_len`` tokens.
* ``"bucket"``: one sequence per row, each row padded only to the smallest bucket
  boundary that holds it (sort by length, cut into buckets).
* ``"ffd"``: first-fit decreasing on the individual lengths: longest first, each into the
  first row (lowest index) with room and fewer than ``max_per_row`` sequences.
* ``"spfhp"``: shortest-pack-first histogram packing (Krell et al., arXiv:2107.02027):
  lengths longest first, on the histogram's counts; each group of equal lengths
  goes to the *shortest* open pack (fewest tokens, most free space) that still has room,
  splitting a group of packs when fewer sequences remain than packs.
* ``"bfhp"``: best-fit histogram packing, the same loop but into the *fullest* open pack
  that still fits (least free space left), a best-fit variant that gets closer to optimal
  when many sequences may share a row.
* ``"nnlshp"``: non-negative least-squares histogram packing after Krell et al.:
  enumerate every pack *composition* of up to 3 sequences whose lengths sum to exactly
  ``max_len`` (``slack`` tokens short allowed), solve ``min |A x - counts|, x >= 0`` for
  how many packs of each, round down, remove any overuse of a length, and pack what is
  left with SPFHP (cap ``max_per_row``). Our NNLS solver is projected coordinate descent
  (a fixed number of sweeps), not an exact active-set solver such as SciPy's nnls.

Histogram strategies work on counts (16 million sequences are a 512-entry array) and
return row *compositions* with repeat counts; ``Packing.rows_as_lists`` expands them for small
inputs. Given a list of lengths, every strategy also says which sequence went into which
row (``Packing.seq_row``).

Token accounting: ``real_tokens`` (content), ``padded_tokens`` (padding slots, the
waste), ``total_tokens`` = their sum (token positions computed), ``efficiency`` =
real / total. ``flops()`` counts the FLOPs a BERT-style forward spends on the padding,
with attention counted per sequence under a block-diagonal mask for packed rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numba import njit

from . import lengths as _lengths
from . import limits
from ._validate import choice, lengths_array, positive

STRATEGIES = ("pad", "bucket", "ffd", "spfhp", "bfhp", "nnlshp")
PACKING_STRATEGIES = ("ffd", "spfhp", "bfhp", "nnlshp")  # several sequences per row

# ---------------------------------------------------------------------------------------------
# Result
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Packing:
    """Which sequences share which row, and the token accounting. Tokens are counts.

    Rows come in groups of identical *compositions*: ``compositions[s, :]`` lists the
    lengths in each of ``repeats[s]`` rows (0 = empty slot), each row occupying
    ``row_len[s]`` token positions. Expanded row order is group 0's rows, then group 1's...
    ``seq_row[i]`` (list inputs only) is the expanded row index of input sequence ``i``.
    """

    strategy: str
    max_len: int  # tokens per row (the longest row for "bucket")
    max_per_row: int  # cap on sequences per row that was applied
    compositions: np.ndarray  # (groups, slots) int64 lengths, 0 = empty slot
    repeats: np.ndarray  # (groups,) int64 rows with this composition
    row_len: np.ndarray  # (groups,) int64 token positions of each such row
    seq_row: np.ndarray | None = None  # (sequences,) int64, list inputs only
    source: str = ""

    # Accounting ---------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        return int(self.repeats.sum())

    @property
    def sequences(self) -> int:
        return int(((self.compositions > 0).sum(axis=1) * self.repeats).sum())

    @property
    def real_tokens(self) -> int:
        return int((self.compositions.sum(axis=1) * self.repeats).sum())

    @property
    def total_tokens(self) -> int:
        """Token positions computed: rows x their length, padding included."""
        return int((self.row_len * self.repeats).sum())

    @property
    def padded_tokens(self) -> int:
        """Padding positions (computed, carrying nothing)."""
        return self.total_tokens - self.real_tokens

    @property
    def efficiency(self) -> float:
        """Real tokens / token positions computed (1 = no padding)."""
        return self.real_tokens / self.total_tokens

    @property
    def padding_fraction(self) -> float:
        return 1.0 - self.efficiency

    @property
    def sequences_per_row(self) -> float:
        return self.sequences / self.rows

    def speedup_vs_pad(self) -> float:
        """Rows a pad-to-``max_len`` batch needs over rows this one needs (token-bound speed-up)."""
        return self.sequences * self.max_len / self.total_tokens

    def rows_as_lists(self, *, limit: int = 100_000) -> list[list[int]]:
        """Every row as the list of its lengths (expanded; refuses more than ``limit`` rows)."""
        if self.rows > limit:
            raise ValueError(f"{self.rows:,} rows is more than limit={limit:,} to expand")
        out = []
        for comp, r in zip(self.compositions, self.repeats, strict=True):
            row = [int(x) for x in comp if x > 0]
            out.extend([list(row) for _ in range(int(r))])
        return out

    def row_lengths(self) -> np.ndarray:
        """Token positions of every row (expanded), int64."""
        return np.repeat(self.row_len, self.repeats)

    def flops(self, model="bert-base", *, attention: str = "block") -> dict:
        """FLOPs of one forward pass over all rows, and what the padding wastes.

        ``useful`` is the FLOPs of the same sequences run unpadded (each attends only to
        itself). Pad and bucket rows pay dense attention over their full row. Packed rows
        pay each sequence's own ``l^2`` attention block (``attention="block"``, a
        block-diagonal kernel), or the full ``row^2`` (``attention="dense"``, a masked
        dense kernel). ``wasted_fraction`` = (computed - useful) / computed.
        """
        choice("attention", attention, ("block", "dense"))
        a, b, c = _flop_coefficients(_model_key(model))
        comp = self.compositions.astype(np.float64)
        rep = self.repeats.astype(np.float64)
        n_seq = (self.compositions > 0).sum(axis=1)
        useful_area = float((comp**2).sum(axis=1) @ rep)
        dense = self.strategy not in PACKING_STRATEGIES or attention == "dense"
        area = float((self.row_len.astype(np.float64) ** 2) @ rep) if dense else useful_area
        useful = a * self.real_tokens + b * useful_area + c * self.sequences
        computed = a * self.total_tokens + b * area + c * float(n_seq @ rep)
        return {"useful_flops": useful, "computed_flops": computed,
                "wasted_flops": computed - useful, "wasted_fraction": 1.0 - useful / computed,
                "attention": "dense" if dense else "block"}

    def to_dict(self) -> dict:
        return {
            "strategy": self.strategy, "source": self.source, "max_len": self.max_len,
            "max_per_row": self.max_per_row, "sequences": self.sequences, "rows": self.rows,
            "real_tokens": self.real_tokens, "padded_tokens": self.padded_tokens,
            "total_tokens": self.total_tokens, "efficiency": self.efficiency,
            "padding_fraction": self.padding_fraction,
            "sequences_per_row": self.sequences_per_row, "speedup_vs_pad": self.speedup_vs_pad(),
            "groups": int(self.repeats.size),
        }

    def __repr__(self):
        cap = f", <= {self.max_per_row}/row" if self.strategy in PACKING_STRATEGIES else ""
        return (
            f"Packing({self.strategy}{cap}, rows of {self.max_len}: {self.sequences:,} sequences in "
            f"{self.rows:,} rows ({self.sequences_per_row:.2f}/row), efficiency {self.efficiency:.2%}, "
            f"{self.padded_tokens:,} padding tokens of {self.total_tokens:,})"
        )

    def _repr_html_(self):
        d = self.to_dict()
        cells = "".join(
            f"<tr><td>{k}</td><td>{v:,.4g}</td></tr>" if isinstance(v, float)
            else f"<tr><td>{k}</td><td>{v:,}</td></tr>" if isinstance(v, int)
            else f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in d.items())
        return f"<table><caption>Packing</caption>{cells}</table>"


def _model_key(model):
    from .workloads import model as _m

    cfg = _m(model)
    return cfg  # TransformerConfig is frozen and hashable


@lru_cache(maxsize=16)
def _flop_coefficients(cfg) -> tuple[float, float, float]:
    """(a, b, c) with forward FLOPs = a * tokens + b * sum(l_q l_k) + c * sequences.

    Solved from three unpadded ``workloads.step`` op lists ([1], [2], [3]); the tests
    check the fit reproduces ``workloads.step`` on other batches, padded and unpadded.
    """
    from .workloads import step

    f1 = step(cfg, [1]).flops  # a + b + c
    f2 = step(cfg, [2]).flops  # 2a + 4b + c
    f3 = step(cfg, [3]).flops  # 3a + 9b + c
    b = ((f3 - f2) - (f2 - f1)) / 2.0
    a = (f2 - f1) - 3 * b
    c = f1 - a - b
    if not np.isclose(step(cfg, [1, 1]).flops, 2 * (a + b + c), rtol=1e-9):  # 2a + 2b + 2c
        raise RuntimeError("workloads.step FLOPs are not linear in tokens, attention area and sequences")
    return float(a), float(b), float(c)


# ---------------------------------------------------------------------------------------------
# Kernels (Numba) and their plain-Python references
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def first_fit_rows(sorted_lengths, max_len, max_per_row, seq_row_sorted):
    """First fit for lengths already sorted longest first; returns the number of rows.

    Preconditions: 1 <= sorted_lengths[i] <= max_len, non-increasing; max_per_row >= 1;
    seq_row_sorted has the same size. Allocates the work arrays of ``first_fit_rows_into``.
    """
    n = sorted_lengths.size
    size = 1
    while size < n:
        size *= 2
    return first_fit_rows_into(sorted_lengths, n, max_len, max_per_row, seq_row_sorted,
                               np.empty(2 * size, np.int64), np.empty(size, np.int64))


@njit(cache=True)
def first_fit_rows_into(sorted_lengths, n, max_len, max_per_row, seq_row_sorted, tree, count):
    """First fit of the first ``n`` lengths (sorted longest first) into rows; returns the rows.

    Preconditions: as ``first_fit_rows``; ``tree`` holds at least 2 x (n rounded up to a power
    of two) and ``count`` half that (work arrays, overwritten). A segment tree over row
    slots holds each row's free space (-1 once it holds ``max_per_row`` sequences); the
    leftmost row with free space >= l is found in O(log n).
    """
    size = 1
    while size < n:
        size *= 2
    for i in range(size, 2 * size):
        tree[i] = max_len if i - size < n else -1
    for i in range(size - 1, 0, -1):
        tree[i] = max(tree[2 * i], tree[2 * i + 1])
    count[:size] = 0
    rows = 0
    for j in range(n):
        ln = sorted_lengths[j]
        node = 1
        while node < size:
            node = 2 * node if tree[2 * node] >= ln else 2 * node + 1
        r = node - size
        seq_row_sorted[j] = r
        if r + 1 > rows:
            rows = r + 1
        count[r] += 1
        tree[node] = -1 if count[r] >= max_per_row else tree[node] - ln
        node //= 2
        while node >= 1:
            tree[node] = max(tree[2 * node], tree[2 * node + 1])
            node //= 2
    return rows


def _ffd_reference(lengths, max_len, max_per_row):
    """Plain-Python first-fit decreasing: (row of each input sequence, number of rows)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # stable, longest first
    free, count, seq_row = [], [], [0] * len(lengths)
    for i in order:
        ln = lengths[i]
        for r in range(len(free)):
            if free[r] >= ln and count[r] < max_per_row:
                break
        else:
            free.append(max_len)
            count.append(0)
            r = len(free) - 1
        free[r] -= ln
        count[r] += 1
        seq_row[i] = r
    return seq_row, len(free)


@njit(cache=True)
def _spfhp(counts, max_per_row, shortest_first, comp, ncomp, cnt, rem):
    """Histogram packing, longest length first; returns the number of pack groups written.

    Open groups (fewer than max_per_row sequences, free space > 0) sit on a stack per free
    space. Length l goes to the top of the first non-empty stack at free space max_len,
    max_len - 1, ..., l (``shortest_first``: SPFHP, the shortest pack) or at l, l + 1, ...,
    max_len (best fit: the fullest pack that fits).
    Preconditions: counts (max_len,) >= 0; comp (>= 2 max_len + 1, max_per_row) zeroed;
    ncomp, cnt, rem sized like comp's first axis.
    """
    L = counts.size
    head = np.full(L + 1, -1, np.int64)
    nxt = np.full(comp.shape[0], -1, np.int64)
    ng = 0
    for ln in range(L, 0, -1):
        n = counts[ln - 1]
        while n > 0:
            if shortest_first:
                r = L
                while r >= ln and head[r] < 0:
                    r -= 1
                if r < ln:
                    r = L + 1
            else:
                r = ln
                while r <= L and head[r] < 0:
                    r += 1
            if r > L:  # no open group fits: start n new packs
                s = ng
                ng += 1
                comp[s, 0] = ln
                ncomp[s] = 1
                cnt[s] = n
                rem[s] = L - ln
                if ncomp[s] < max_per_row and rem[s] > 0:
                    nxt[s] = head[rem[s]]
                    head[rem[s]] = s
                n = 0
                continue
            s = head[r]
            if n >= cnt[s]:  # the whole group takes one more sequence
                head[r] = nxt[s]
                comp[s, ncomp[s]] = ln
                ncomp[s] += 1
                rem[s] -= ln
                n -= cnt[s]
                if ncomp[s] < max_per_row and rem[s] > 0:
                    nxt[s] = head[rem[s]]
                    head[rem[s]] = s
            else:  # split: n packs of the group take it, the rest stay open
                cnt[s] -= n
                t = ng
                ng += 1
                for j in range(ncomp[s]):
                    comp[t, j] = comp[s, j]
                comp[t, ncomp[s]] = ln
                ncomp[t] = ncomp[s] + 1
                cnt[t] = n
                rem[t] = rem[s] - ln
                if ncomp[t] < max_per_row and rem[t] > 0:
                    nxt[t] = head[rem[t]]
                    head[rem[t]] = t
                n = 0
    return ng


def _spfhp_reference(counts, max_per_row, shortest_first=True):
    """Plain-Python SPFHP (or best fit): list of (composition tuple, repeats), kernel order."""
    L = len(counts)
    stacks = {r: [] for r in range(L + 1)}
    groups = []  # [composition list, count, free space]
    for ln in range(L, 0, -1):
        n = int(counts[ln - 1])
        while n > 0:
            order = range(L, ln - 1, -1) if shortest_first else range(ln, L + 1)
            r = next((r for r in order if stacks[r]), None)
            if r is None:
                groups.append([[ln], n, L - ln])
                g = len(groups) - 1
                n = 0
            elif n >= groups[stacks[r][-1]][1]:
                g = stacks[r].pop()
                groups[g][0].append(ln)
                groups[g][2] -= ln
                n -= groups[g][1]
            else:
                s = stacks[r][-1]
                groups[s][1] -= n
                groups.append([groups[s][0] + [ln], n, groups[s][2] - ln])
                g = len(groups) - 1
                n = 0
            if len(groups[g][0]) < max_per_row and groups[g][2] > 0:
                stacks[groups[g][2]].append(g)
    return [(tuple(c), k) for c, k, _ in groups]


NNLS_DEPTH = 3  # sequences per composition in the NNLS step (Krell et al. use 3)
NNLS_SWEEPS = 300  # coordinate-descent sweeps; see tests/test_packing.py for convergence


@njit(cache=True)
def _nnls_compositions(counts, depth, slack, out):
    """Write every composition of 1..depth lengths (non-increasing) whose sum lies in
    [L - slack, L] and whose lengths all occur often enough; returns how many.

    Preconditions: counts (L,) >= 0; 1 <= depth <= 3; out (capacity, 3) zeroed, either
    large enough or with 0 rows (then only count: the caller sizes ``out`` from that).
    """
    L = counts.size
    lo = L - slack
    write = out.shape[0] > 0
    s = 0
    for a in range(L, 0, -1):
        if counts[a - 1] == 0:
            continue
        if a >= lo:
            if write:
                out[s, 0] = a
            s += 1
        if depth < 2:
            continue
        for b in range(min(a, L - a), 0, -1):
            if counts[b - 1] < 1 + (b == a):
                continue
            if a + b >= lo:
                if write:
                    out[s, 0] = a
                    out[s, 1] = b
                s += 1
            if depth < 3:
                continue
            for c in range(min(b, L - a - b), 0, -1):
                if a + b + c < lo:
                    break
                if counts[c - 1] < 1 + (c == b) + (c == a):
                    continue
                if write:
                    out[s, 0] = a
                    out[s, 1] = b
                    out[s, 2] = c
                s += 1
    return s


def _nnls_compositions_reference(counts, depth, slack):
    """Plain-Python list of the same compositions, as sorted tuples (longest first)."""
    from itertools import combinations_with_replacement

    L = len(counts)
    present = [x for x in range(1, L + 1) if counts[x - 1] > 0]
    out = set()
    for k in range(1, depth + 1):
        for combo in combinations_with_replacement(present, k):
            if L - slack <= sum(combo) <= L and all(counts[x - 1] >= combo.count(x) for x in combo):
                out.add(tuple(sorted(combo, reverse=True)))
    return out


@njit(cache=True)
def _nnls_cd(comp, counts, sweeps, x):
    """Projected coordinate descent for min |A x - counts|^2, x >= 0; returns the residual.

    ``A[l - 1, s]`` = how often length l occurs in composition ``comp[s]`` (0 = empty slot).
    Preconditions: comp (S, D) with >= 1 length per row; x (S,) float64 >= 0 (start point,
    updated in place); sweeps >= 0.
    """
    S, D = comp.shape
    r = counts.astype(np.float64)
    for s in range(S):  # residual of the start point
        for j in range(D):
            if comp[s, j] > 0:
                r[comp[s, j] - 1] -= x[s]
    nrm = np.zeros(S)
    for s in range(S):  # |A_s|^2 = sum over occurrences of the multiplicity
        for j in range(D):
            if comp[s, j] > 0:
                for k in range(D):
                    if comp[s, k] == comp[s, j]:
                        nrm[s] += 1.0
    for _ in range(sweeps):
        for s in range(S):
            g = 0.0
            for j in range(D):
                if comp[s, j] > 0:
                    g += r[comp[s, j] - 1]
            xn = x[s] + g / nrm[s]
            if xn < 0.0:
                xn = 0.0
            d = xn - x[s]
            if d != 0.0:
                for j in range(D):
                    if comp[s, j] > 0:
                        r[comp[s, j] - 1] -= d
                x[s] = xn
    return r


def _nnls_cd_reference(comp, counts, sweeps, x):
    """NumPy version of ``_nnls_cd`` (same update order), for tests."""
    comp = np.asarray(comp)
    A = np.zeros((len(counts), comp.shape[0]))
    for s, row in enumerate(comp):
        for ln in row:
            if ln > 0:
                A[ln - 1, s] += 1.0
    nrm = (A * A).sum(axis=0)
    r = np.asarray(counts, float) - A @ x
    for _ in range(sweeps):
        for s in range(comp.shape[0]):
            xn = max(0.0, x[s] + A[:, s] @ r / nrm[s])
            r -= A[:, s] * (xn - x[s])
            x[s] = xn
    return r


@njit(cache=True)
def _nnls_repair(comp, reps, used, counts):
    """Lower ``reps`` (in composition order) until no length is used more than it occurs.

    Preconditions: used[l - 1] = sum over s of reps[s] x (occurrences of l in comp[s]).
    """
    S, D = comp.shape
    for s in range(S):
        for j in range(D):
            ln = comp[s, j]
            if ln == 0:
                continue
            over = used[ln - 1] - counts[ln - 1]
            if over > 0 and reps[s] > 0:
                m = 0
                for k in range(D):
                    if comp[s, k] == ln:
                        m += 1
                k = min(reps[s], (over + m - 1) // m)
                reps[s] -= k
                for q in range(D):
                    if comp[s, q] > 0:
                        used[comp[s, q] - 1] -= k



def _nnls_repair_reference(comp, reps, counts):
    """Plain-Python ``_nnls_repair``: returns the lowered repeats."""
    reps = [int(r) for r in reps]
    used = [0] * len(counts)
    for row, r in zip(comp, reps, strict=True):
        for ln in row:
            if ln:
                used[ln - 1] += r
    for s, row in enumerate(comp):
        row = [int(v) for v in row]
        for ln in row:
            if ln == 0:
                continue
            over = used[ln - 1] - counts[ln - 1]
            if over > 0 and reps[s] > 0:
                m = row.count(ln)
                k = min(reps[s], -(-over // m))
                reps[s] -= k
                for q in row:
                    if q:
                        used[q - 1] -= k
    return reps

# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def _as_source(source, max_len):
    """(Histogram, lengths array or None) from a Histogram, a dataset name or a list of lengths."""
    if isinstance(source, _lengths.Histogram):
        h = source
        if h.longest > max_len:
            raise ValueError(
                f"a sequence of {h.longest} tokens is longer than the row (max_len={max_len})")
        return h.with_max_len(max_len), None
    if isinstance(source, str):
        return _as_source(_lengths.dataset(source), max_len)
    arr = lengths_array("lengths", source)
    if arr.max() > max_len:
        raise ValueError(
            f"a sequence of {int(arr.max())} tokens is longer than the row (max_len={max_len})")
    return _lengths.from_lengths(arr, max_len=max_len), arr


def _assign(comps, repeats, arr):
    """Row index of every input sequence, filling each composition's slots from per-length pools."""
    order = np.argsort(arr, kind="stable")
    sorted_len = arr[order]
    L = int(sorted_len[-1])
    start = np.searchsorted(sorted_len, np.arange(1, L + 2))  # pool of length l: start[l-1]:start[l]
    ptr = start[:-1].copy()
    seq_row = np.empty(arr.size, np.int64)
    row0 = 0
    for comp, r in zip(comps, repeats, strict=True):
        r = int(r)
        for ln in comp:
            if ln <= 0:
                continue
            idx = order[ptr[ln - 1]: ptr[ln - 1] + r]
            seq_row[idx] = np.arange(row0, row0 + r)
            ptr[ln - 1] += r
        row0 += r
    return seq_row


def _bucket_boundaries(buckets, max_len):
    if buckets is None:
        buckets = 8
    if isinstance(buckets, (int, np.integer)) and not isinstance(buckets, bool):
        k = positive("buckets", buckets, integer=True)
        limits.check_at_most("buckets", k, max_len, f"at most one bucket per token length; max_len is {max_len:,}")
        b = np.unique(np.ceil(np.arange(1, k + 1) * max_len / k).astype(np.int64))
    else:
        b = np.unique(lengths_array("bucket boundaries", buckets, max_len=max_len))
    if b[-1] != max_len:
        b = np.append(b, max_len)
    return b


SPFHP_BYTES_PER_CELL = 8  # the int64 composition table (its copies are rows, not cells)
NNLSHP_MAX_LEN = 8192  # tokens per row for nnlshp (work ~ max_len^2; measured 3.5 s CPU at 4,096)
FFD_BYTES_PER_SEQUENCE = 48  # the expanded lengths, their order, and the row of each


def pack(source, max_len: int, strategy: str = "spfhp", *, max_per_row: int | None = None,
         buckets=None, slack: int = 0) -> Packing:
    """Put the sequences of ``source`` into rows of ``max_len`` tokens.

    Parameters
    ----------
    source : list/array of lengths, a ``lengths.Histogram``, or a dataset name
        ("wikipedia-512", "squad-384").
    max_len : tokens per row; no sequence may be longer.
    strategy : one of ``STRATEGIES``.
    max_per_row : cap on sequences per row for the packing strategies (default: no cap
        beyond what fits). Ignored (1) for pad and bucket.
    buckets : for "bucket": a number of equal-width buckets (default 8) or the list of
        bucket boundaries in tokens (``max_len`` is added if missing).
    slack : for "nnlshp": NNLS compositions may fall this many tokens short of ``max_len``.
    """
    max_len = positive("max_len", max_len, integer=True)
    limits.check_sequence_length("max_len", max_len)
    choice("strategy", strategy, STRATEGIES)
    sl = positive("slack", slack, integer=True, allow_zero=True)
    if sl >= max_len:
        raise ValueError(f"slack must lie in 0..{max_len - 1} (tokens an NNLSHP composition may fall short of "
                         f"max_len {max_len}), got {sl}")
    if max_per_row is None:
        K = max_len
    else:
        K = min(positive("max_per_row", max_per_row, integer=True), max_len)
    if strategy in ("spfhp", "bfhp", "nnlshp"):  # before the source is read: these depend on max_len only
        limits.check_memory("max_len" if max_per_row is None else "max_len x max_per_row", max_len,
                            SPFHP_BYTES_PER_CELL * (2 * max_len + 1) * K,
                            f"{strategy} keeps a (2 x max_len + 1) x max_per_row table of int64, "
                            f"{SPFHP_BYTES_PER_CELL} bytes per cell with its work copies")
    if strategy == "nnlshp":
        limits.check_at_most("max_len", max_len, NNLSHP_MAX_LEN,
                             "nnlshp enumerates compositions of up to 3 lengths, work ~ max_len^2: "
                             "3.5 s at 4,096; use spfhp for longer rows")
    hist, arr = _as_source(source, max_len)
    if strategy == "ffd":
        limits.check_memory("sequences", hist.n, FFD_BYTES_PER_SEQUENCE * hist.n,
                            f"ffd places sequences one by one, {FFD_BYTES_PER_SEQUENCE} bytes each")
    name = hist.name
    lens = hist.lengths
    if strategy in ("pad", "bucket"):
        nz = hist.counts > 0
        comps = lens[nz].reshape(-1, 1)
        reps = hist.counts[nz]
        if strategy == "pad":
            row_len = np.full(reps.size, max_len, np.int64)
        else:
            bounds = _bucket_boundaries(buckets, max_len)
            row_len = bounds[np.searchsorted(bounds, comps[:, 0])]
        seq_row = _assign(comps, reps, arr) if arr is not None else None
        return Packing(strategy, max_len, 1, comps, reps, row_len, seq_row, name)

    if strategy == "ffd":
        from_list = arr is not None
        if arr is None:
            arr = hist.expand()
        order = np.argsort(-arr, kind="stable")
        srow = np.empty(arr.size, np.int64)
        nrows = first_fit_rows(arr[order], max_len, K, srow)
        seq_row = np.empty(arr.size, np.int64)
        seq_row[order] = srow
        comps = _rows_from_assignment(arr[order], srow, nrows)
        reps = np.ones(nrows, np.int64)
        return Packing(strategy, max_len, K, comps, reps, np.full(nrows, max_len, np.int64),
                       seq_row if from_list else None, name)

    if strategy in ("spfhp", "bfhp"):
        comps, reps = _run_spfhp(hist.counts, K, shortest_first=strategy == "spfhp")
    else:
        comps, reps = _run_nnlshp(hist.counts, K, sl)
    width = max(1, int((comps > 0).sum(axis=1).max()))
    comps = np.ascontiguousarray(comps[:, :width])
    seq_row = _assign(comps, reps, arr) if arr is not None else None
    return Packing(strategy, max_len, K, comps, reps, np.full(reps.size, max_len, np.int64),
                   seq_row, name)


def _run_spfhp(counts, K, shortest_first=True):
    cap = 2 * counts.size + 1
    comp = np.zeros((cap, K), np.int64)
    ncomp = np.zeros(cap, np.int64)
    cnt = np.zeros(cap, np.int64)
    rem = np.zeros(cap, np.int64)
    ng = _spfhp(counts.copy(), K, shortest_first, comp, ncomp, cnt, rem)
    return comp[:ng], cnt[:ng]


def _run_nnlshp(counts, K, slack):
    L = counts.size
    depth = min(K, NNLS_DEPTH)
    S = _nnls_compositions(counts, depth, slack, np.zeros((0, 3), np.int64))  # count
    out = np.zeros((S, 3), np.int64)
    _nnls_compositions(counts, depth, slack, out)
    comp = out[:S]
    x = np.zeros(S)
    if S:
        _nnls_cd(comp, counts, NNLS_SWEEPS, x)
    reps = np.floor(x).astype(np.int64)
    used = np.zeros(L, np.int64)
    for j in range(3):
        m = comp[:, j] > 0
        np.add.at(used, comp[m, j] - 1, reps[m])
    _nnls_repair(comp, reps, used, counts)
    keep = reps > 0
    comp_nn, reps_nn = comp[keep], reps[keep]
    left = counts - used
    if left.sum() == 0:  # NNLS placed every sequence (e.g. one sequence filling one row)
        comps_sp, reps_sp = np.zeros((0, 1), np.int64), np.zeros(0, np.int64)
    else:
        comps_sp, reps_sp = _run_spfhp(left, K)
    width = max(3 if comp_nn.size else 1, comps_sp.shape[1] if reps_sp.size else 1)
    comps = np.zeros((comp_nn.shape[0] + comps_sp.shape[0], width), np.int64)
    comps[: comp_nn.shape[0], :3] = comp_nn if comp_nn.size else 0
    comps[comp_nn.shape[0]:, : comps_sp.shape[1]] = comps_sp
    return comps, np.concatenate([reps_nn, reps_sp])


def _rows_from_assignment(sorted_lengths, srow, nrows):
    """(rows, slots) lengths of each row from the row index of each (sorted) sequence."""
    per_row = np.bincount(srow, minlength=nrows)
    width = int(per_row.max())
    out = np.zeros((nrows, width), np.int64)
    order = np.argsort(srow, kind="stable")
    rows_sorted = srow[order]
    first = np.searchsorted(rows_sorted, np.arange(nrows))
    slot = np.arange(srow.size) - first[rows_sorted]
    out[rows_sorted, slot] = sorted_lengths[order]
    return out


def compare(source, max_len: int, *, max_per_row: int | None = 3,
            strategies=STRATEGIES, buckets=None) -> list[Packing]:
    """Run several strategies on one source (for tables and plots)."""
    return [pack(source, max_len, s, max_per_row=max_per_row, buckets=buckets) for s in strategies]


# ---------------------------------------------------------------------------------------------
# Throughput of a BERT-style encoder on padded, unpadded and packed batches
# ---------------------------------------------------------------------------------------------
