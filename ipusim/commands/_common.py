"""Helpers shared by the sub-commands: JSON output and plain tables."""

from __future__ import annotations

import json
import math

import numpy as np


def _clean(obj):
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _clean(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def print_json(obj) -> None:
    """Print one JSON object (NaN and infinities become null)."""
    print(json.dumps(_clean(obj), indent=2, allow_nan=False))


def format_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """A plain-text table; ``columns`` are (key, header, format spec)."""
    heads = [h for _, h, _ in columns]
    cells = [[format(r[k], f) if f else str(r[k]) for k, _, f in columns] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(heads)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)
