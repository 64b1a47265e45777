"""Input checks shared by every module: one place that words the ValueErrors."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable

import numpy as np


def positive(
    name: str,
    value,
    *,
    integer: bool = False,
    allow_zero: bool = False,
    at_most: float | None = None,
    why: str = "",
):
    """Return ``value`` if it is a finite number > 0 (>= 0 with ``allow_zero``), else raise.

    With ``integer=True`` the value must also be a whole number; it is returned as ``int``.
    With ``at_most`` it must not exceed that (``why`` says why, in the message).
    """
    if (
        at_most is not None
        and isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, bool)
        and value > at_most
    ):
        raise ValueError(
            f"{name} = {value:,} is over the limit of {at_most:,}" + (f" ({why})" if why else "")
        )
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(float(value)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    bound_ok = value >= 0 if allow_zero else value > 0
    if not bound_ok:
        need = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {need}, got {value!r}")
    if integer:
        if float(value) != int(value):
            raise ValueError(f"{name} must be a whole number, got {value!r}")
        return int(value)
    return float(value)


HOLD_WHY = (
    "a batcher that holds a request over a minute is not serving traffic; in a finite run "
    "such a hold makes the last partial batch set the run's length"
)
MAX_HOLD_S = 60.0  # seconds: the longest a policy may hold a request (see HOLD_WHY)


def hold_seconds(name: str, value, *, allow_zero: bool = True) -> float:
    """A batching hold time in seconds: finite, >= 0, at most ``MAX_HOLD_S``."""
    # No upper bound: a hold longer than the run is simulated and reported unstable (serving).
    return positive(name, value, allow_zero=allow_zero)


def fraction(name: str, value, *, inclusive_one: bool = True) -> float:
    """Return ``value`` if it lies in [0, 1] (or [0, 1)), else raise."""
    v = positive(name, value, allow_zero=True)
    if v > 1 or (not inclusive_one and v == 1):
        upper = "1]" if inclusive_one else "1)"
        raise ValueError(f"{name} must lie in [0, {upper}, got {value!r}")
    return v


def lengths_array(name: str, values, *, max_len: int | None = None) -> np.ndarray:
    """Return sequence lengths as an int64 array; every length a whole number >= 1 (<= max_len)."""
    from . import limits

    if isinstance(values, (int, np.integer)):
        values = [values]
    cap = limits.MAX_SEQUENCE_TOKENS if max_len is None else max_len
    # The usual input, a short non-empty list of whole token counts (Python ints: a step's
    # sequences) or a 1-D integer array, within range: only the range to check (the float checks
    # below cannot fail). A long list takes the checks below: NumPy's pass per check beats
    # Python's per element from about 64 entries on.
    if type(values) is list and 0 < len(values) <= 64 and all(type(v) is int for v in values):
        if 1 <= min(values) and max(values) <= cap:
            return np.array(values, dtype=np.int64)
    elif (
        isinstance(values, np.ndarray)
        and values.ndim == 1
        and values.size
        and values.dtype.kind in "iu"
        and 1 <= values.min()
        and values.max() <= cap
    ):
        return values.astype(np.int64)
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise ValueError(
            f"{name} must be a list of whole token counts, got {type(values).__name__}"
        )
    try:
        arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a flat list of whole token counts") from None
    if arr.size == 0:
        raise ValueError(f"{name} is empty: give at least one sequence length")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number) or arr.dtype == bool or np.iscomplexobj(arr):
        raise ValueError(f"{name} must hold numbers, got dtype {arr.dtype}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} holds NaN or infinite values")
    if np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must hold whole numbers (token counts)")
    if np.any(arr < 1):
        raise ValueError(f"{name} must be >= 1 token each; smallest given is {arr.min()}")
    if max_len is None and np.any(arr > cap):
        raise ValueError(
            f"{name} has a sequence of {arr.max():,.0f} tokens, over the limit of {cap:,} "
            "tokens per sequence (no model preset has more than 4,096 positions)"
        )
    if max_len is not None and np.any(arr > max_len):
        raise ValueError(
            f"{name} has a sequence of {int(arr.max())} tokens, longer than the maximum {max_len}"
        )
    return arr.astype(np.int64)


def choice(name: str, value, allowed: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``allowed``, else raise listing the valid names."""
    allowed = list(allowed)
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}; valid: {', '.join(allowed)}")
    return value


def read_text_file(name: str, path, *, max_bytes: int | None = None) -> str:
    """The text of the file ``path`` given as ``name``; a ValueError naming both if it is
    missing, not a regular file (a directory, FIFO or device is refused before it is read:
    ``_files.open_regular``), unreadable, over ``max_bytes`` (default: a quarter of the memory
    budget, as parsing takes several times the text), empty, or not UTF-8 text."""
    from . import limits
    from ._files import open_regular

    shown = str(path)
    limit = max_bytes if max_bytes is not None else limits.max_memory_bytes() // 4
    with open_regular(name, path) as fh:
        try:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise ValueError(
                    f"{name} {shown!r} is {size:,} bytes, over the limit of {limit:,} "
                    "(a quarter of the memory budget; raise it with --max-memory)"
                )
            chunks, got = [], 0
            while got <= limit:  # in chunks: read(n) would reserve n bytes at once
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
            data = b"".join(chunks)
        except OSError as err:
            raise ValueError(f"{name} {shown!r} cannot be read: {err.strerror or err}") from None
    if len(data) > limit:
        raise ValueError(f"{name} {shown!r} is over the limit of {limit:,} bytes")
    if b"\x00" in data:
        raise ValueError(f"{name} {shown!r} is a binary file, not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{name} {shown!r} is not UTF-8 text (byte {err.start})") from None
    if not text.strip():
        raise ValueError(f"{name} {shown!r} is empty")
    return text


def finite_array(name: str, values) -> np.ndarray:
    """``values`` as a float64 1-D array of finite numbers, else a ValueError naming it."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a list of numbers") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} holds NaN or infinite values")
    return arr


def boolean_fields(obj) -> None:
    """Refuse a dataclass whose ``bool`` fields hold anything but True or False (a config's
    ``"true"`` or ``1`` is a string or a number, not a yes/no)."""
    import dataclasses

    for f in dataclasses.fields(obj):
        if f.type in ("bool", bool):
            v = getattr(obj, f.name)
            if not isinstance(v, (bool, np.bool_)):
                raise ValueError(
                    f"{type(obj).__name__}.{f.name} must be true or false, got {v!r} "
                    f"({type(v).__name__})"
                )


def in_range(name: str, value, lo: float, hi: float, *, why: str = "", unit: str = "") -> float:
    """``value`` as a float if ``lo <= value <= hi`` (a finite number), else a ValueError naming
    the range and ``why`` it is that range (what the arithmetic behind it can hold)."""
    v = positive(name, value, allow_zero=lo <= 0) if lo >= 0 else _finite(name, value)
    if not lo <= v <= hi:
        u = f" {unit}" if unit else ""
        raise ValueError(
            f"{name} must lie in {lo:.3g}..{hi:.3g}{u}, got {value!r}"
            + (f" ({why})" if why else "")
        )
    return v


def _finite(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(float(value)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return float(value)
