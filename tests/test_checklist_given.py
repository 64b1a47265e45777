"""C2's capacity on the chips as given (``throughput.on_chips_given``): replicas of the
deployment that carries the most on them, counting every placement that meets the p99 target
and uses at most the chips given, whatever its kind."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from ipusim.checklist import Candidate, Context, check_fit, load_case
from ipusim.checklist.throughput import check_throughput, on_chips_given

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setenv("IPUSIM_QUICK", "1")


@dataclass
class _Layout:
    chips: int


@dataclass
class _Dep:
    placement: _Layout
    capacity_per_replica: float
    usd_per_million: float = 1.0


class _Ctx:
    """A stand-in for ``Context``: the searched deployments, costs already set."""

    def __init__(self, deps):
        self.deps = deps

    def search(self, cand):
        return self.deps

    def cost(self, cand, dep):
        return dep


def test_the_rule_counts_any_placement_within_the_chips_given():
    cand = Candidate("gc200", 24)
    one = _Dep(_Layout(1), 0.5, usd_per_million=3.0)  # 24 replicas: 12 req/s
    sixteen = _Dep(_Layout(16), 10.0, usd_per_million=1.0)  # cheaper, but 1 replica: 10 req/s
    thirty = _Dep(_Layout(30), 100.0)  # does not fit the 24 chips
    none = _Dep(_Layout(1), 0.0)  # meets no target
    assert on_chips_given(_Ctx([sixteen, one, thirty, none]), cand) == (one, 24)
    assert on_chips_given(_Ctx([sixteen, thirty]), cand) == (sixteen, 1)
    assert on_chips_given(_Ctx([thirty, none]), cand) == (None, 0)
    # equal capacity on the chips given: the cheaper deployment (Context.best's order)
    a, b = _Dep(_Layout(2), 1.0, usd_per_million=2.0), _Dep(_Layout(4), 2.0, usd_per_million=1.0)
    assert on_chips_given(_Ctx([a, b]), cand) == (b, 6)


def test_chat_case_counts_the_tensor_placement_on_the_24_gc200s():
    # Llama-2-7B on 24 GC200s: no pipeline of whole layers fits the tiles, a 16-chip tensor
    # placement streaming the weights does; C2 counted 0 replicas of it (0.00 req/s) because it
    # matched placements by kind against a list that omitted kind "placed".
    case = load_case(ROOT / "examples" / "gpt_chat.toml")
    ctx = Context(case)
    c2 = check_throughput(case, ctx)
    rows = {r["candidate"]: r for r in c2.tables["throughput"]}
    for cand in case.candidates:
        key = cand.label.replace(" ", "")
        row = rows[cand.label]
        meets = [d for d in ctx.search(cand) if d.capacity_per_replica > 0]
        fitting = [d for d in meets if d.placement.chips <= cand.count]
        cap = c2.ev(f"capacity.{key}")
        assert cap == row["capacity_req_s"]
        assert (cap > 0) == bool(fitting)
        if fitting:
            assert row["replicas_given"] == cand.count // row["chips_per_replica"] >= 1
            assert cap == row["replicas_given"] * c2.ev(f"capacity_per_replica.{key}")
            assert cap == max(
                cand.count // d.placement.chips * d.capacity_per_replica for d in fitting
            )
    gc = case.candidates[0]
    assert gc.label == "gc200 x24"
    placed = [
        d for d in ctx.search(gc) if d.capacity_per_replica > 0 and d.placement.kind == "placed"
    ]
    assert placed and all(1 < d.placement.chips <= 24 for d in placed)
    assert rows["gc200 x24"]["capacity_req_s"] > 0
    # the reason gives the account of C4's larger deployment: replicas x chips each
    best = ctx.best(gc)
    n = best.chips_needed // best.placement.chips
    assert f"gc200 x24 to {n} x {best.placement.chips} = {best.chips_needed} chips" in c2.reason
    # and C1 says that replica is served, not that C2-C5 cannot price it
    c1 = check_fit(case, ctx)
    assert "serve it as replicas of that placement" in c1.reason
    assert "cannot price it" not in c1.reason
