"""The registry of published figures, ``ipusim/data/published.csv`` (schema in ``published.md``):
reading and checking it. Predictions of its rows are ``ipusim.validation``'s; modules that set
or check a parameter from a published figure read the figure here."""

from __future__ import annotations

import csv
import functools
import io
import math
from importlib import resources

AREAS = ("tile", "gpu", "training", "serving", "embeddings", "packing")
USES = ("calibration", "check")
_INT = ("chips", "batch", "seq_len", "max_per_row")
_FLOAT = ("mean_fraction", "load", "value", "tolerance")


def _typed(row: dict) -> dict:
    out = dict(row)
    for k in _INT:
        out[k] = int(row[k]) if row.get(k) not in (None, "") else None
    for k in _FLOAT:
        out[k] = float(row[k]) if row.get(k) not in (None, "") else None
    return out


def read_rows(path, name: str = "measurements file") -> tuple[dict, ...]:
    """Rows of a CSV in the registry's format (``published.md``), typed; ``ValueError`` names
    the row (its line in the file) and the column when a row is malformed. Lines that start
    with ``#`` are comments (what was measured, how, why it differs), skipped."""
    return tuple(r for _, r in numbered_rows(path, name))


def numbered_rows(path, name: str = "measurements file") -> list[tuple[int, dict]]:
    """``read_rows`` with each row's line number in the file: ``[(line, row), ...]``."""
    from ._validate import read_text_file

    lines = read_text_file(name, path).splitlines(keepends=True)
    kept = [i + 1 for i, line in enumerate(lines) if not line.startswith("#")]  # file line numbers
    reader = csv.DictReader(io.StringIO("".join(lines[i - 1] for i in kept), newline=""))
    out = []
    for r in reader:
        line = kept[reader.line_num - 1]  # the row's last physical line, in the file's numbering
        out.append((line, _check(_row_or_raise(r, line, path), line, path)))
    return out


def _row_or_raise(r, line, path):
    try:
        return _typed(r)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}, line {line}: {err}") from None


def _check(r, line, path) -> dict:
    where = f"{path}, line {line} (id {r.get('id')!r})"
    if r.get("area") not in AREAS:
        raise ValueError(f"{where}: area must be one of {', '.join(AREAS)}, got {r.get('area')!r}")
    if r.get("use") not in USES:
        raise ValueError(f"{where}: use must be one of {', '.join(USES)}, got {r.get('use')!r}")
    if r["value"] is None or not r["value"] > 0 or not math.isfinite(r["value"]):
        raise ValueError(f"{where}: value must be a number > 0, got {r['value']!r}")
    if r["tolerance"] is None or not 0 < r["tolerance"] < 1:
        raise ValueError(f"{where}: tolerance must be a fraction in (0, 1), got {r['tolerance']!r}")
    return r


@functools.cache
def registry() -> tuple[dict, ...]:
    """Every row of ``ipusim/data/published.csv``, typed (ints, floats, None for blanks)."""
    with resources.as_file(resources.files("ipusim") / "data" / "published.csv") as p:
        return read_rows(p, "the registry of published measurements")


def rows(
    area: str | None = None, *, source: str | None = None, workload: str | None = None
) -> list[dict]:
    """Registry rows, optionally of one ``area``, ``source`` key or ``workload`` rule."""
    if area is not None and area not in AREAS:
        raise ValueError(f"area must be one of {', '.join(AREAS)}, got {area!r}")
    return [
        dict(r)
        for r in registry()
        if (area is None or r["area"] == area)
        and (source is None or r["source"] == source)
        and (workload is None or r["workload"] == workload)
    ]


def row(row_id: str) -> dict:
    """The registry row called ``row_id``."""
    for r in registry():
        if r["id"] == row_id:
            return dict(r)
    raise ValueError(f"no published row has id {row_id!r}")
