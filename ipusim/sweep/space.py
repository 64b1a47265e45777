"""The points of a sweep: a grid, a random sample or a Latin hypercube over named parameters.

A point is a plain dict ``{name: value}``: chip fields (any field of ``TileChip`` or
``GpuChip``, e.g. ``sram_per_tile_bytes``, ``tiles``, ``clock_hz``), workload settings
(``model``, ``batch``, ``seq_len``, ``phase``, ``rate_per_s``, ...) and the chip preset
(``chip``). Which names a task reads is the task's business (``ipusim.sweep.tasks``).

Values given as text may carry units: ``256KiB``, ``2MiB``, ``64GB/s``, ``1.3GHz``, ``300W``
(binary prefixes are powers of 1024, decimal ones powers of 1000; "/s" is dropped, so a
rate is in the unit's base per second). A range ``lo:hi:n`` is ``n`` evenly spaced values
(``lo:hi:n:log`` for geometric spacing); ``a,b,c`` is a list.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re

import numpy as np

from .. import limits, units

_BINARY = units.IEC
_DECIMAL = {
    **units.SI,
    "k": 1e3,
    "m": 1e6,
    "g": 1e9,
    "t": 1e12,
    "b": 1.0,
    "hz": 1.0,
    "khz": 1e3,
    "mhz": 1e6,
    "ghz": 1e9,
    "w": 1.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "%": 0.01,
}
_NUM = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z%]*)(?:/s)?\s*$")


def parse_value(text, name: str = ""):
    """A number from text with an optional unit (``"256KiB"`` -> 262144); other text as is.

    ``"true"``/``"false"`` become booleans; a word that is not a number (a model name) stays
    a string. A bare ``k``, ``M``, ``G`` is an SI multiplier (``1.3G`` Hz), except for a
    parameter named ``*_bytes``, which reads sizes by ``units.parse_bytes`` (``4G`` = 4 GiB).
    """
    if not isinstance(text, str):
        return text
    s = text.strip()
    if name.endswith("_bytes") and _NUM.match(s):
        return units.parse_bytes(s, name)
    if s.lower() in ("true", "false"):
        return s.lower() == "true"
    m = _NUM.match(s)
    if not m:
        return s
    num, unit = m.group(1), m.group(2).lower()
    if not unit:
        v = float(num)
        return int(v) if re.fullmatch(r"[-+]?\d+", num) else v
    scale = _BINARY.get(unit) or _DECIMAL.get(unit)
    if scale is None:
        raise ValueError(
            f"unknown unit {m.group(2)!r} in {text!r}; valid: "
            f"{', '.join(['KiB', 'MiB', 'GiB', 'k', 'M', 'G', 'GB', 'TB', 'GHz', 'MHz', 'W', 'ms', 'us', '%'])}"
            " (optionally followed by /s)"
        )
    v = float(num) * scale
    return int(v) if v == int(v) and abs(v) < 2**62 else v


MAX_VALUES = 100_000  # values of one swept parameter
MAX_POINTS = 10_000_000  # points in one sweep


def parse_values(spec: str, name: str = "") -> list:
    """The values of one ``--vary`` right-hand side: ``lo:hi:n[:log]`` or ``a,b,c`` or one value."""
    s = str(spec).strip()
    if not s:
        raise ValueError("empty value list: give lo:hi:n, a,b,c or one value")
    if ":" in s:
        parts = s.split(":")
        if len(parts) not in (3, 4) or (
            len(parts) == 4 and parts[3].strip().lower() not in ("log", "lin")
        ):
            raise ValueError(f"range {spec!r} must be lo:hi:n or lo:hi:n:log")
        lo, hi, n = parse_value(parts[0], name), parse_value(parts[1], name), parse_value(parts[2])
        log = len(parts) == 4 and parts[3].strip().lower() == "log"
        return value_range(lo, hi, n, log=log, what=spec)
    return [parse_value(p, name) for p in s.split(",")]


def value_range(lo, hi, n, *, log: bool = False, what: str = "range") -> list:
    """``n`` values from ``lo`` to ``hi`` inclusive, evenly (or geometrically) spaced.

    Whole numbers when both ends are whole (rounded, duplicates removed)."""
    for name, v in (("lo", lo), ("hi", hi)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{what}: {name} must be a finite number, got {v!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{what}: the number of values must be a whole number >= 1, got {n!r}")
    limits.check_at_most(
        f"{what}: the number of values", n, MAX_VALUES, "values of one swept parameter"
    )
    if hi < lo:
        raise ValueError(f"{what}: hi ({hi}) is below lo ({lo})")
    if n == 1 and lo != hi:
        raise ValueError(f"{what}: one value cannot span {lo} to {hi}; give n >= 2")
    if log and lo <= 0:
        raise ValueError(f"{what}: a log range needs lo > 0, got {lo}")
    vals = np.geomspace(lo, hi, n) if log else np.linspace(lo, hi, n)
    if isinstance(lo, int) and isinstance(hi, int):
        return list(dict.fromkeys(int(round(v)) for v in vals))
    return [float(v) for v in vals]


def parse_vary(items) -> dict:
    """``["name=spec", ...]`` (the CLI's ``--vary``) -> ``{name: [values]}``."""
    out = {}
    for item in items or ():
        if "=" not in item:
            raise ValueError(f"--vary {item!r} must be NAME=lo:hi:n or NAME=a,b,c")
        name, spec = item.split("=", 1)
        name = name.strip()
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise ValueError(f"--vary {item!r}: {name!r} is not a parameter name")
        if name in out:
            raise ValueError(f"--vary names {name!r} twice")
        out[name] = parse_values(spec, name)
    return out


def grid(vary: dict, fixed: dict | None = None):
    """Every combination of ``vary``'s values (the last name varies fastest), each merged over
    ``fixed``; a generator of point dicts (use ``grid_size`` for the count)."""
    vary = _check_vary(vary)
    fixed = dict(fixed or {})
    names = list(vary)
    for combo in itertools.product(*(vary[n] for n in names)):
        yield {**fixed, **dict(zip(names, combo, strict=True))}


def grid_size(vary: dict) -> int:
    """Points in ``grid(vary)``; refused past ``MAX_POINTS``."""
    n = math.prod(len(v) for v in _check_vary(vary).values())
    limits.check_at_most(
        "grid points", n, MAX_POINTS, "points in one sweep (~1 ms to minutes each)"
    )
    return n


def sample(
    ranges: dict, n: int, *, fixed: dict | None = None, method: str = "lhs", seed: int = 0, log=()
) -> list[dict]:
    """``n`` points drawn from ``ranges``: ``{name: (lo, hi)}`` for a number (uniform, or
    log-uniform for names in ``log``; whole numbers when both ends are) or ``{name: [choices]}``.

    ``method`` "random" draws each coordinate independently; "lhs" (Latin hypercube) splits
    each axis into ``n`` equal strata and puts one point in each, so every axis is covered
    evenly whatever ``n``. Seeded: the same arguments give the same points.
    """
    if method not in ("random", "lhs"):
        raise ValueError(f"unknown sampling method {method!r}; valid: random, lhs")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a whole number >= 1, got {n!r}")
    if not ranges:
        raise ValueError("ranges is empty: name at least one parameter to sample")
    rng = np.random.default_rng(seed)
    cols = {}
    for name, r in ranges.items():
        if method == "lhs":
            u = (rng.permutation(n) + rng.random(n)) / n
        else:
            u = rng.random(n)
        if (
            isinstance(r, tuple)
            and len(r) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in r)
        ):
            lo, hi = r
            if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
                raise ValueError(f"range of {name!r} must be (lo, hi) with lo <= hi, got {r!r}")
            if name in log:
                if lo <= 0:
                    raise ValueError(f"log range of {name!r} needs lo > 0, got {lo}")
                v = np.exp(np.log(lo) + u * (np.log(hi) - np.log(lo)))
            else:
                v = lo + u * (hi - lo)
            cols[name] = (
                [int(round(x)) for x in v]
                if isinstance(lo, int) and isinstance(hi, int)
                else [float(x) for x in v]
            )
        else:
            choices = list(r)
            if not choices:
                raise ValueError(f"choices of {name!r} are empty")
            cols[name] = [choices[min(int(x * len(choices)), len(choices) - 1)] for x in u]
    fixed = dict(fixed or {})
    return [{**fixed, **{k: cols[k][i] for k in cols}} for i in range(n)]


def point_key(point: dict, task: str = "") -> str:
    """A stable 16-hex-digit key of a point (and task): the same point always gets the same key,
    in any process, whatever the order of its names (used to resume a sweep)."""
    items = sorted([(str(k), _canon(v)) for k, v in point.items()])
    return hashlib.sha1(_KEY_JSON.encode([task, items]).encode()).hexdigest()[:16]


_KEY_JSON = json.JSONEncoder(
    separators=(",", ":")
)  # json.dumps(..., separators=...) builds one per call


def _canon(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return int(f) if f.is_integer() and abs(f) < 2**53 else repr(f)
    return str(v)


def _check_vary(vary: dict) -> dict:
    if not isinstance(vary, dict):
        raise ValueError(f"vary must be a dict name -> list of values, got {type(vary).__name__}")
    out = {}
    for k, v in vary.items():
        vals = [v] if isinstance(v, (str, int, float)) else list(v)
        if not vals:
            raise ValueError(f"no values given for {k!r}")
        out[k] = vals
    return out
