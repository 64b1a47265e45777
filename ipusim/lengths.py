"""Sequence-length sources: lists, histogram files, the two shipped real histograms, and
the articles' parametric "x% long texts" mixes.

Every source becomes a ``Histogram``: ``counts[l - 1]`` sequences of ``l`` tokens for
``l = 1 .. max_len``. Packing on counts (``ipusim.packing``) never expands 16 million
sequences; ``Histogram.sample`` and ``Histogram.expand`` give explicit lengths when needed.
``load`` and ``source`` turn one name (a file of either kind or a dataset) into lengths: the
``--lengths`` option of every command reads it.

Shipped data (``ipusim/data``, attribution in ``ipusim/data/README.md``): the sequence-length
histograms Graphcore published with Krell et al., "Efficient Sequence Packing without
Cross-contamination" (arXiv:2107.02027; source key GC-TUT in docs/facts.md).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from . import limits
from ._validate import fraction, lengths_array, positive, read_text_file

DATASETS = {
    # name -> (file in ipusim/data, max length the histogram was cut at)
    "wikipedia-512": ("wikipedia_bert_pretraining_len512.csv", 512),
    "squad-384": ("squad_v1_1_len384.csv", 384),
}
DATASET_ALIASES = {"wikipedia": "wikipedia-512", "squad": "squad-384"}  # short names of DATASETS
DATASET_NAMES = (*DATASETS, *DATASET_ALIASES)  # every name ``dataset`` takes (any case)


@dataclass(frozen=True, eq=False)
class Histogram:
    """``counts[i]`` sequences of ``i + 1`` tokens; ``max_len = counts.size`` tokens."""

    counts: np.ndarray  # int64, shape (max_len,)
    name: str = ""

    def __post_init__(self):
        try:
            c = np.asarray(self.counts)
        except (TypeError, ValueError, OverflowError):
            raise ValueError("histogram counts must be a flat list of whole numbers") from None
        if c.ndim != 1 or c.size == 0:
            raise ValueError(f"histogram counts must be a non-empty 1-D array, got shape {c.shape}")
        if not np.issubdtype(c.dtype, np.number) or c.dtype == bool:
            raise ValueError(f"histogram counts must be numbers, got dtype {c.dtype}")
        if not np.all(np.isfinite(c)) or np.any(c != np.round(c)):
            raise ValueError("histogram counts must be whole numbers")
        if np.any(c < 0):
            bad = int(np.flatnonzero(c < 0)[0]) + 1
            raise ValueError(f"histogram has a negative count ({int(c[bad - 1])}) at length {bad}")
        limits.check_sequence_length("histogram max_len (longest length it holds)", int(c.size))
        cf = c.astype(np.float64)
        if cf.sum() == 0:
            raise ValueError("histogram is empty: every count is 0")
        total = float(np.dot(cf, np.arange(1, c.size + 1, dtype=np.float64)))
        limits.check_at_most(
            "histogram tokens (sum of count x length)",
            total,
            limits.MAX_EXACT_COUNT,
            "token totals must stay exact in float64 and far from int64 overflow",
        )
        object.__setattr__(self, "counts", c.astype(np.int64))

    @property
    def max_len(self) -> int:
        """Longest length the histogram can hold, tokens."""
        return int(self.counts.size)

    @property
    def longest(self) -> int:
        """Longest length that actually occurs, tokens."""
        return int(np.flatnonzero(self.counts)[-1]) + 1

    @property
    def lengths(self) -> np.ndarray:
        """The lengths 1 .. max_len, tokens."""
        return np.arange(1, self.max_len + 1, dtype=np.int64)

    @property
    def n(self) -> int:
        """Number of sequences."""
        return int(self.counts.sum())

    @property
    def tokens(self) -> int:
        """Real tokens over all sequences."""
        return int(np.dot(self.counts, self.lengths))

    @property
    def mean(self) -> float:
        return self.tokens / self.n

    def padding_fraction(self, max_len: int | None = None) -> float:
        """Share of token slots that are padding when every sequence is padded to ``max_len``."""
        L = self.max_len if max_len is None else positive("max_len", max_len, integer=True)
        if L < self.longest:
            raise ValueError(
                f"max_len={L} is shorter than the longest sequence ({self.longest} tokens)"
            )
        return 1.0 - self.tokens / (self.n * L)

    def with_max_len(self, max_len: int) -> Histogram:
        """The same counts in a histogram ``max_len`` long (longer: zeros added)."""
        L = positive("max_len", max_len, integer=True)
        if L < self.longest:
            raise ValueError(
                f"max_len={L} is shorter than the longest sequence ({self.longest} tokens)"
            )
        c = np.zeros(L, dtype=np.int64)
        c[: min(L, self.max_len)] = self.counts[: min(L, self.max_len)]
        return Histogram(c, self.name)

    def truncate(self, max_len: int) -> Histogram:
        """Cut every sequence longer than ``max_len`` to ``max_len`` (as a tokenizer truncates)."""
        L = positive("max_len", max_len, integer=True)
        c = np.zeros(L, dtype=np.int64)
        k = min(L, self.max_len)
        c[:k] = self.counts[:k]
        c[L - 1] += self.counts[L:].sum()
        return Histogram(c, self.name)

    def expand(self, *, limit: int = 50_000_000) -> np.ndarray:
        """Every sequence's length, shortest first (refuses more than ``limit`` sequences)."""
        if self.n > limit:
            raise ValueError(
                f"histogram has {self.n:,} sequences, more than limit={limit:,} to expand"
            )
        return np.repeat(self.lengths, self.counts)

    def sample(self, n: int, *, seed: int = 0) -> np.ndarray:
        """``n`` lengths drawn with replacement in proportion to the counts (seeded)."""
        n = positive("n", n, integer=True)
        rng = np.random.default_rng(seed)
        return rng.choice(self.lengths, size=n, p=self.counts / self.n)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "max_len": self.max_len,
            "sequences": self.n,
            "tokens": self.tokens,
            "mean_len": self.mean,
            "padding_fraction": self.padding_fraction(),
        }

    def __repr__(self):
        return (
            f"Histogram({self.name or 'lengths'}: {self.n:,} sequences, mean {self.mean:,.1f} "
            f"tokens, longest {self.longest}, max_len {self.max_len}, "
            f"{self.padding_fraction():.1%} padding at max_len)"
        )


def from_lengths(lengths, *, max_len: int | None = None, name: str = "lengths") -> Histogram:
    """Histogram of a list of lengths (``max_len`` defaults to the longest)."""
    arr = lengths_array("lengths", lengths, max_len=max_len)
    L = int(arr.max()) if max_len is None else int(max_len)
    return Histogram(np.bincount(arr - 1, minlength=L).astype(np.int64), name)


def _parse_csv(text: str, source: str) -> np.ndarray:
    reader = csv.reader(io.StringIO(text))
    rows, lines = [], []
    for r in reader:
        if r and any(x.strip() for x in r) and not r[0].lstrip().startswith("#"):
            rows.append(r)
            lines.append(reader.line_num)
    if rows and not rows[0][0].strip().lstrip("-").replace(".", "").isdigit():
        rows, lines = rows[1:], lines[1:]  # header
    if not rows:
        raise ValueError(f"{source}: no length,count rows")
    data = np.empty((len(rows), 2))
    for i, r in enumerate(rows):
        try:
            if len(r) != 2:
                raise ValueError
            data[i] = float(r[0]), float(r[1])
        except ValueError:
            raise ValueError(
                f"{source} line {lines[i]}: {','.join(r)[:60]!r} is not 'length,count' "
                "(two numbers)"
            ) from None
    lens, counts = data[:, 0], data[:, 1]
    for what, col in (("length", lens), ("count", counts)):
        if not np.all(np.isfinite(col)):
            i = int(np.flatnonzero(~np.isfinite(col))[0])
            raise ValueError(
                f"{source} line {lines[i]}: {what} {float(col[i])} is not a finite number"
            )
    big = np.flatnonzero(lens > limits.MAX_SEQUENCE_TOKENS)
    if big.size:
        i = int(big[0])
        raise ValueError(
            f"{source} line {lines[i]}: length {lens[i]:,.0f} is over the limit of "
            f"{limits.MAX_SEQUENCE_TOKENS:,} tokens per sequence"
        )
    big = np.flatnonzero(counts > limits.MAX_EXACT_COUNT)
    if big.size:
        i = int(big[0])
        raise ValueError(
            f"{source} line {lines[i]}: count {counts[i]:g} is over the limit of 2**53 "
            "(counts must stay exact and their token totals far from int64 overflow)"
        )
    lengths_array(f"{source}: lengths", lens)
    if np.any(counts < 0):
        i = int(np.flatnonzero(counts < 0)[0])
        raise ValueError(f"{source}: negative count {counts[i]:g} at length {lens[i]:g}")
    if np.any(counts != np.round(counts)):
        raise ValueError(f"{source}: counts must be whole numbers")
    if len(np.unique(lens)) != lens.size:
        raise ValueError(f"{source}: a length appears on more than one row")
    out = np.zeros(int(lens.max()), dtype=np.int64)
    out[lens.astype(np.int64) - 1] = counts.astype(np.int64)
    return out


def load_histogram(path, *, max_len: int | None = None) -> Histogram:
    """Read a ``length,count`` CSV (a header line is optional)."""
    p = Path(path) if isinstance(path, (str, Path)) else path
    counts = _parse_csv(read_text_file("histogram file", p), str(p))
    h = Histogram(counts, p.stem)
    return h if max_len is None else h.with_max_len(max_len)


def load_lengths(path) -> np.ndarray:
    """Read lengths from a text file: one per line, or separated by commas or spaces."""
    return _parse_lengths(read_text_file("lengths file", path), Path(path))


def _parse_lengths(text: str, p: Path) -> np.ndarray:
    vals = []
    for i, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for t in line.replace(",", " ").split():
            try:
                vals.append(float(t))
            except ValueError:
                raise ValueError(
                    f"{p} line {i}: {t[:40]!r} is not a length (a whole number of tokens)"
                ) from None
    vals = np.array(vals)
    return lengths_array(f"lengths in {p}", vals)


def dataset(name: str) -> Histogram:
    """A shipped real histogram: "wikipedia-512" or "squad-384", or their short names
    "wikipedia" and "squad" (see ``ipusim/data/README.md``)."""
    key = DATASET_ALIASES.get(str(name).lower(), str(name).lower())
    if key not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid: {', '.join(DATASET_NAMES)}")
    fname, L = DATASETS[key]
    text = resources.files("ipusim").joinpath("data", fname).read_text()
    return Histogram(_parse_csv(text, fname), key).with_max_len(L)


def load_file(path) -> Histogram | np.ndarray:
    """A lengths file of either kind, read once: a ``length,count`` CSV gives a ``Histogram``,
    a list of lengths (one a line, or separated by commas or spaces) an int64 array.

    A CSV is a file with a header line (its first field is not a number) or with two or more
    rows of exactly two comma-separated fields each; any other file is a list. One row of two
    numbers and no header ("7, 9") could be either and is refused with what to add.
    """
    p = Path(path)
    text = read_text_file("lengths file", p)
    rows = [
        ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")
    ]
    if not rows:
        raise ValueError(f"lengths file {str(p)!r} holds no lengths")
    try:
        float(rows[0].replace(",", " ").split()[0])
        header = False
    except ValueError:
        header = True
    pairs = all(len(r.split(",")) == 2 for r in rows)
    if not header and pairs and len(rows) == 1:
        raise ValueError(
            f"lengths file {str(p)!r}: {rows[0][:40]!r} could be two lengths or a length and its "
            "count; for a histogram add the header line 'length,count', for a list put one "
            "length a line"
        )
    try:
        if header or pairs:
            return Histogram(_parse_csv(text, str(p)), p.stem)
        return _parse_lengths(text, p)
    except ValueError as err:
        raise ValueError(
            f"lengths file {str(p)!r}: expected 'length,count' rows or one length a line ({err})"
        ) from None


def load(spec) -> Histogram | np.ndarray:
    """What ``spec`` names, as it is: a file (``load_file``: a CSV's ``Histogram`` or a list's
    array) or else a shipped dataset (``dataset``; a directory of that name does not hide it).
    ``pack --lengths`` packs this exactly."""
    p = Path(str(spec))
    if p.is_file():
        return load_file(p)
    if str(spec).lower() in DATASET_NAMES:
        return dataset(str(spec))
    if p.exists():  # a directory or something else that is not a file: load_file says what
        return load_file(p)
    raise ValueError(
        f"lengths {str(spec)!r} not found: neither a file nor a dataset name "
        f"({', '.join(DATASET_NAMES)})"
    )


def source(spec) -> Histogram:
    """The length distribution ``spec`` names (``load``; a list of lengths becomes its
    histogram). ``serve --lengths``, ``simulate --lengths`` and the checklist's dataset names
    draw from this."""
    got = load(spec)
    return got if isinstance(got, Histogram) else from_lengths(got, name=Path(str(spec)).stem)


# ASSUMPTION: the articles say only "mixed lengths" and "40% long texts". We read a short text
# as a classification request of 16-128 tokens and a long text as 256-512 tokens (BERT's
# limit), each uniform. These ranges are ours; change them with the arguments.
SHORT_RANGE = (16, 128)
LONG_RANGE = (256, 512)


def _range(lo, hi, max_len: int | None = None) -> tuple[int, int]:
    """A checked inclusive length range ``(lo, hi)``, tokens (``hi <= max_len`` if given)."""
    lo = positive("range start", lo, integer=True)
    hi = positive("range end", hi, integer=True)
    if hi < lo or (max_len is not None and hi > max_len):
        cap = "" if max_len is None else f" <= max_len={max_len}"
        raise ValueError(f"length range ({lo}, {hi}) must satisfy 1 <= start <= end{cap}")
    return lo, hi


def long_text_mix(
    long_fraction: float,
    *,
    short=SHORT_RANGE,
    long=LONG_RANGE,
    max_len: int = 512,
    resolution: int = 1_000_000,
) -> Histogram:
    """The articles' "x% long texts" mix as a histogram (expected counts, no sampling).

    ``long_fraction`` of the sequences are uniform on ``long`` (inclusive), the rest
    uniform on ``short``. ``resolution`` is the total count the shares are rounded to.
    ``sample_long_text_mix`` draws requests from the same mix one by one.
    """
    p = fraction("long_fraction", long_fraction)
    L = positive("max_len", max_len, integer=True)
    res = positive("resolution", resolution, integer=True)
    counts = np.zeros(L, np.int64)
    n_long = int(round(p * res))
    for part, n_part in ((short, res - n_long), (long, n_long)):
        lo, hi = _range(*part, L)
        width = hi - lo + 1  # spread n_part as evenly as whole counts allow
        counts[lo - 1 : hi] += n_part // width
        counts[lo - 1 : lo - 1 + n_part % width] += 1
    return Histogram(counts, f"{p:.0%} long texts")


def sample_long_text_mix(
    n: int, long_fraction: float, *, short=SHORT_RANGE, long=LONG_RANGE, seed: int = 0
) -> np.ndarray:
    """``n`` request lengths (tokens, int64) drawn one by one from the ``long_text_mix`` mix.

    Each request is long with probability ``long_fraction`` (its length uniform on
    ``long``, inclusive), else uniform on ``short``: the share of long requests varies
    from draw to draw, as in live traffic, where ``long_text_mix`` holds it exact.
    """
    n = positive("n", n, integer=True)
    p = fraction("long_fraction", long_fraction)
    (s_lo, s_hi), (l_lo, l_hi) = _range(*short), _range(*long)
    rng = np.random.default_rng(seed)
    is_long = rng.random(n) < p
    s = rng.integers(s_lo, s_hi + 1, n)
    lg = rng.integers(l_lo, l_hi + 1, n)
    return np.where(is_long, lg, s).astype(np.int64)


def sample(
    n: int,
    *,
    long_fraction: float = 0.0,
    short=SHORT_RANGE,
    long=LONG_RANGE,
    histogram=None,
    seed: int = 0,
) -> np.ndarray:
    """``n`` request lengths (tokens, int64) for a serving run.

    Either the "x% long texts" mix (``sample_long_text_mix``) or draws from ``histogram``
    (``Histogram.sample``): a ``Histogram``, a path to a ``length,count`` CSV
    (``load_histogram``) or a pair ``(lengths, counts)`` of whole counts.
    """
    if histogram is None:
        return sample_long_text_mix(n, long_fraction, short=short, long=long, seed=seed)
    if isinstance(histogram, Histogram):
        h = histogram
    elif isinstance(histogram, tuple):
        lens, counts = histogram
        lens = lengths_array("histogram lengths", lens)
        counts = np.asarray(counts, dtype=np.float64)
        if counts.shape != lens.shape:
            raise ValueError(
                f"histogram needs one count per length; got {counts.size} counts for {lens.size} lengths"
            )
        c = np.zeros(int(lens.max()))
        np.add.at(c, lens - 1, counts)
        h = Histogram(c, "histogram")
    else:
        h = load_histogram(histogram)
    return h.sample(n, seed=seed)
