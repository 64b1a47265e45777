"""The checklist's proposal of a disaggregated split (C2), for generation on a GPU and a tile chip."""

from __future__ import annotations

import pytest

from ipusim.checklist import Candidate, default_case, split

CANDS = (Candidate("gc200", 1), Candidate("a100-80gb", 1))


def test_split_is_weighed_for_generation_and_proposed_only_when_it_beats_co_located(monkeypatch):
    monkeypatch.setattr(split, "SPLIT_REQUESTS", 400)  # a quick run; the rule is the same
    case = default_case(
        model="gpt2",
        task="generate",
        output_tokens=64,
        rate_per_s=50.0,
        slo_p99_s=1.0,
        candidates=CANDS,
        name="gpt2 chat",
    )
    rows, ev, text = split.split_proposal(case)
    assert len(rows) == 2 + 2 + 7 + 8 and max(r["usd_per_hour"] for r in rows) == 16.0
    colo = max(r["capacity_rps"] for r in rows if r["kind"] == "co-located")
    best = max((r for r in rows if r["kind"] == "disaggregated"), key=lambda r: r["capacity_rps"])
    gain = best["capacity_rps"] / colo
    assert ev[0].key == "split.gain_x" and ev[0].value == pytest.approx(gain, rel=1e-12)
    if gain > 1:
        assert (
            text.startswith("proposal: a disaggregated split, " + best["name"])
            and "because" in text
        )
    else:
        assert text.startswith("a disaggregated split does not pay here")


def test_no_split_for_classification_nor_for_a_model_that_needs_several_tile_chips():
    assert split.split_proposal(default_case(candidates=CANDS)) == ([], [], "")
    big = default_case(
        model="llama-2-7b",
        task="generate",
        output_tokens=128,
        rate_per_s=5.0,
        slo_p99_s=20.0,
        candidates=(Candidate("gc200", 24), Candidate("a100-80gb", 1)),
        name="7b",
    )
    rows, ev, text = split.split_proposal(big)
    assert rows == [] and ev == [] and "not weighed" in text and "llama-2-7b" in text
