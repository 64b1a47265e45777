"""Plain JSON values from results: one helper for the command line and the checklist report."""

from __future__ import annotations

import math

import numpy as np


def json_safe(obj):
    """``obj`` with NumPy values as Python ones, tuples as lists and NaN or infinities as None."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj
