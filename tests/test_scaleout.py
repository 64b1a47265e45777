"""Claims 9 and 15's numbers (ipusim.scaleout) against their definitions: the placement
search's step time, the chip-hour price, the memory need."""

from __future__ import annotations

import math

import pytest

from ipusim import hardware, placement, scaleout, workloads
from ipusim.prices import Prices

REL = 1e-9  # the same products in another order


def test_scale_out_prices_the_placement_it_picked():
    s = scaleout.default_step("bert-base")
    assert (s.batch, s.phase, s.row_len) == (8, "forward", 384)
    r = scaleout.scale_out("gc200", s, counts=(1, 2))
    pl = placement.place("gc200", s, chips=r.chips_used)
    assert r.placement.degrees == pl.degrees
    rate = s.batch / pl.time_s
    assert r.sequences_per_s == pytest.approx(rate, rel=REL)
    usd = pl.chips_used * Prices().chip_hour("gc200") / (rate * 3600) * 1e6
    assert r.usd_per_million == pytest.approx(usd, rel=REL)
    assert r.usd_per_million == min(row["usd_per_million"] for row in r.rows)
    assert r.board_j_per_sequence == pytest.approx(
        hardware.chip("gc200").power_w * pl.chips_used / rate, rel=REL
    )
    assert "USD per million" in repr(r) and r.to_dict()["chips_used"] == r.chips_used


def test_parity_price_equalises_the_hardware_cost():
    one = {"tile_counts": (1,), "gpu_counts": (1,)}
    r = scaleout.same_throughput_cost("bert-base", **one)
    assert r["hardware_cost_ratio"] == pytest.approx(
        r["tile"].usd_per_million / r["gpu"].usd_per_million, rel=REL
    )
    # without prices: chip-hours per sequence; with them, the ratio is that times the price ratio
    p = Prices()
    assert r["hardware_cost_ratio"] == pytest.approx(
        r["chip_hours_ratio"] * p.chip_hour("gc200") / p.chip_hour("a100-80gb"), rel=REL
    )
    again = scaleout.same_throughput_cost(
        "bert-base", prices=p.with_prices({"gc200": r["parity_tile_usd_per_chip_hour"]}), **one
    )
    assert again["hardware_saving"] == pytest.approx(0.0, abs=1e-9)


def test_chip_counts_start_where_the_memory_may_hold_the_step():
    s = workloads.step("llama-2-7b", [1024] * 8, phase="decode")
    need = s.model.weight_bytes() + s.model.kv_bytes_per_token() * 8 * 1024
    counts = scaleout.chip_counts("gc200", s)
    assert counts[0] >= need / hardware.chip("gc200").data_bytes > counts[0] / 2
    assert counts == (counts[0], 2 * counts[0], 4 * counts[0])
    assert scaleout.chip_counts("a100-80gb", s) == (1, 2, 4)


def test_memory_bottleneck_rows_and_bad_input():
    rows = scaleout.memory_bottleneck_gain(("bert-base", "gpt2"))
    assert [r["model"] for r in rows] == ["bert-base", "gpt2"]
    for r in rows:
        assert r["tile_chips_by_memory"] == math.ceil(
            r["memory_need_bytes"] / hardware.chip("gc200").data_bytes
        )
        assert r["tile_chips_used"] >= 1 and math.isfinite(r["hardware_saving"])
    with pytest.raises(ValueError, match="models"):
        scaleout.memory_bottleneck_gain([])
    with pytest.raises(ValueError, match="chip count"):
        scaleout.scale_out("gc200", scaleout.default_step("gpt2"), counts=(0,))
    with pytest.raises(ValueError, match="workloads.Step"):
        scaleout.scale_out("gc200", "gpt2")
