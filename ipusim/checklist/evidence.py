"""A check's result and its evidence: ``Check``, ``Evidence``, the status names and ``fmt``.

A ``Check`` carries its evidence as numbers with units and the source (which model produced
them), so that every number in the verdict can be traced back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

STATUSES = ("pass", "warn", "fail", "info", "skipped")
CHECK_NAMES = {
    "C1": "Fit in on-chip memory",
    "C2": "Throughput at the latency target",
    "C3": "Padding and packing",
    "C4": "Cost and energy",
    "C5": "Sensitivity",
    "C6": "Training",
    "C7": "Software readiness",
    "C8": "What to measure in a proof of concept",
}
"""Each check's id and name, as its ``Check`` carries them (diagrams and tables name the checks from here)."""


@dataclass(frozen=True)
class Evidence:
    """One number a check rests on: ``value`` in ``unit``, with a note on where it comes from."""

    key: str
    value: float | str
    unit: str = ""
    note: str = ""

    def text(self) -> str:
        return f"{fmt(self.value, self.unit)}"

    def to_dict(self) -> dict:
        return {"key": self.key, "value": self.value, "unit": self.unit, "note": self.note}


@dataclass
class Check:
    """The result of one check: status, headline, reason, evidence, tables and sources."""

    id: str  # "C1" ... "C8"
    name: str
    status: str  # one of STATUSES
    summary: str  # the headline in one sentence
    reason: str  # why this status
    evidence: list = field(default_factory=list)  # Evidence records
    tables: dict = field(default_factory=dict)  # title -> list of row dicts
    source: str = ""  # which models produced the numbers
    data: dict = field(default_factory=dict)  # machine-readable extras for the verdict

    def ev(self, key: str):
        for e in self.evidence:
            if e.key == key:
                return e.value
        raise KeyError(f"{self.id} has no evidence {key!r}")

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "status": self.status,
            "summary": self.summary,
            "reason": self.reason,
            "evidence": [e.to_dict() for e in self.evidence],
            "tables": self.tables,
            "source": self.source,
        }

    def __repr__(self):
        return f"Check({self.id} {self.name}: {self.status.upper()} - {self.summary})"


def fmt(v, unit: str = "") -> str:
    """A number with its unit, readable (3 significant figures, thousands separated)."""
    if isinstance(v, str):
        return v + (f" {unit}" if unit else "")
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, float) and math.isinf(v):
        return "unbounded" if v > 0 else "-unbounded"
    if unit == "%":
        return f"{v:.1f}%"
    if unit == "x":
        return f"{v:.2f}x"
    a = abs(v)
    if isinstance(v, (int, np.integer)) or (a >= 100 and float(v).is_integer()):
        s = f"{int(v):,}"
    elif a >= 1000:
        s = f"{v:,.0f}"
    elif a >= 100:
        s = f"{v:.0f}"
    elif a >= 10:
        s = f"{v:.1f}"
    elif a >= 0.01 or a == 0:
        s = f"{v:.2f}"
    else:
        s = f"{v:.2e}"
    return f"{s} {unit}".strip()
