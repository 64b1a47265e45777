"""Caches of tile-simulator results follow the tile calibration in force: a result computed inside
``tile_calibration.overrides`` is never served outside it, nor the reverse, whichever comes first."""

from __future__ import annotations

import numpy as np
import pytest

from ipusim import placement, tile_calibration, workloads
from ipusim.serving import service, tables

SLOWER = {
    "EXCHANGE_EFFICIENCY": 0.3
}  # a third of the calibrated exchange rate: every step with exchange slows
STEP = workloads.step("gpt2", [256] * 4, phase="decode")


def _placed_s() -> float:
    return placement.place("gc200", STEP, chips=2).time_s


def test_placement_cache_keys_on_the_calibration():
    assert dict(tile_calibration.current())["EXCHANGE_EFFICIENCY"] != SLOWER["EXCHANGE_EFFICIENCY"]
    placement.clear_cache()
    with tile_calibration.overrides(**SLOWER):
        inside_cold = _placed_s()  # inside first: the cache holds only the overridden results
    outside = _placed_s()
    with tile_calibration.overrides(**SLOWER):
        inside_warm = _placed_s()  # now both are cached
    placement.clear_cache()
    outside_cold = _placed_s()
    assert outside == outside_cold and inside_warm == inside_cold
    assert inside_cold > outside * 1.01  # 1%: far beyond rounding, far below the slow-down


def test_service_tables_key_on_the_calibration(tmp_path, monkeypatch):
    monkeypatch.setenv("IPUSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tables, "_memory", {})

    def table():
        return service.chip_service(
            "gc200", "bert-base", max_batch=2, max_len=64, grid="coarse"
        ).table

    with tile_calibration.overrides(**SLOWER):
        inside = table()
    outside = table()
    monkeypatch.setattr(tables, "_memory", {})  # a new process: only the disk cache remains
    with tile_calibration.overrides(**SLOWER):
        inside_disk = table()
    outside_disk = table()
    assert np.array_equal(inside, inside_disk) and np.array_equal(outside, outside_disk)
    ok = np.isfinite(outside[1:, 1:])
    assert ok.any() and np.all(inside[1:, 1:][ok] > outside[1:, 1:][ok] * 1.01)


def test_current_lists_every_parameter():
    names = [k for k, _ in tile_calibration.current()]
    assert names == list(tile_calibration.PARAMETERS)
    with tile_calibration.overrides(EXCHANGE_EFFICIENCY=0.5):
        assert dict(tile_calibration.current())["EXCHANGE_EFFICIENCY"] == pytest.approx(0.5)
