"""Input checks shared by every module: one place that words the ValueErrors."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def positive(name: str, value, *, integer: bool = False, allow_zero: bool = False):
    """Return ``value`` if it is a finite number > 0 (>= 0 with ``allow_zero``), else raise.

    With ``integer=True`` the value must also be a whole number; it is returned as ``int``.
    """
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


def fraction(name: str, value, *, inclusive_one: bool = True) -> float:
    """Return ``value`` if it lies in [0, 1] (or [0, 1)), else raise."""
    v = positive(name, value, allow_zero=True)
    if v > 1 or (not inclusive_one and v == 1):
        upper = "1]" if inclusive_one else "1)"
        raise ValueError(f"{name} must lie in [0, {upper}, got {value!r}")
    return v


def lengths_array(name: str, values, *, max_len: int | None = None) -> np.ndarray:
    """Return sequence lengths as an int64 array; every length a whole number >= 1 (<= max_len)."""
    if isinstance(values, (int, np.integer)):
        values = [values]
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    if arr.size == 0:
        raise ValueError(f"{name} is empty: give at least one sequence length")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number) or arr.dtype == bool:
        raise ValueError(f"{name} must hold numbers, got dtype {arr.dtype}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} holds NaN or infinite values")
    if np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must hold whole numbers (token counts)")
    if np.any(arr < 1):
        raise ValueError(f"{name} must be >= 1 token each; smallest given is {arr.min()}")
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
