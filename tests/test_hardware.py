"""Chip presets against their published figures, and validation of user-made specs.

Published figures are typed in here from the project's facts sheet, docs/facts.md (source keys
in the comments), not read back from ``ipusim.hardware``.
"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from ipusim import hardware
from ipusim.hardware import GpuChip, TileChip

MiB = 1024**2

# (preset, peak dense FP16 FLOP/s as published) -- tolerance 1 %: the per-cycle rates are
# derived by dividing the published peak by tiles x clock, so only rounding may differ.
PUBLISHED_PEAK = [
    ("gc2", 124.5e12),  # APAD2
    ("gc200", 250e12),  # CBLAKE, GC-M2000DS
    ("bow", 350e12),  # CONVERGE24, GC-BOW2000
    ("a100-40gb", 312e12),  # GKW-A100, PC2
    ("a100-80gb", 312e12),
    ("h100-sxm", 989.4e12),  # GKW-H100, HPCTECH
    ("h200", 989.4e12),  # LZW (same compute as H100)
]


def test_preset_names_are_complete_and_listed():
    assert set(hardware.PRESETS) == {
        "gc2",
        "gc200",
        "bow",
        "a100-40gb",
        "a100-80gb",
        "h100-sxm",
        "h200",
    }
    assert [c.name for c in hardware.all_chips()] == list(hardware.PRESETS)
    assert all(isinstance(hardware.chip(n), TileChip) for n in hardware.TILE_PRESETS)
    assert all(isinstance(hardware.chip(n), GpuChip) for n in hardware.GPU_PRESETS)


@pytest.mark.parametrize(("name", "peak"), PUBLISHED_PEAK)
def test_peak_flops_match_published(name, peak):
    assert hardware.chip(name).peak_flops == pytest.approx(peak, rel=0.01)


def test_tile_memory_matches_published():
    # GC2: 1,216 x 256 KiB = 304 MiB (JIA-T); GC200/Bow: 1,472 x 638,976 B = 897 MiB (GC-OOM, POPSUM-BOW)
    assert hardware.chip("gc2").sram_bytes == 1216 * 262_144
    assert hardware.chip("gc2").sram_bytes / MiB == pytest.approx(304, abs=0.5)
    for n in ("gc200", "bow"):
        c = hardware.chip(n)
        assert c.tiles == 1472
        assert c.sram_per_tile_bytes == 638_976
        assert c.sram_bytes / MiB == pytest.approx(897, abs=0.5)
        assert c.data_bytes < c.sram_bytes


def test_aggregate_bandwidths_match_published():
    # One rule, 16 B/cycle/tile (a 128-bit load): GC2 31.1 TB/s theoretical (LOUW §IV), GC200
    # 16 x 1,472 x 1.325 GHz = 31.2 TB/s (not the vendor's unmeasured 47.5 TB/s)
    assert hardware.chip("gc2").sram_bandwidth_bytes_per_s == pytest.approx(31.1e12, rel=0.005)
    assert hardware.chip("gc200").sram_bandwidth_bytes_per_s == pytest.approx(
        16 * 1472 * 1.325e9, rel=1e-12
    )
    # exchange 8 TB/s on GC2 and GC200 (LOUW, CBLAKE)
    for n in ("gc2", "gc200"):
        assert hardware.chip(n).exchange_bandwidth_bytes_per_s == pytest.approx(8e12, rel=1e-9)
    # HBM: THUNDER, GKW-A100, HPCTECH, LZW
    hbm = {"a100-40gb": 1.555e12, "a100-80gb": 2.039e12, "h100-sxm": 3.35e12, "h200": 4.8e12}
    for n, bw in hbm.items():
        assert hardware.chip(n).hbm_bandwidth_bytes_per_s == pytest.approx(bw, rel=1e-9)


def test_ridge_points_match_the_facts_sheet():
    # docs/facts.md §8: ridge vs main memory ~153 FLOP/byte (A100 80GB) and ~295 (H100)
    assert hardware.chip("a100-80gb").ridge_flop_per_byte == pytest.approx(153, rel=0.01)
    assert hardware.chip("h100-sxm").ridge_flop_per_byte == pytest.approx(295, rel=0.01)


def test_sync_time_is_derived_from_cycles():
    # hardware.SYNC_CYCLES (156, from JIA-FT's 98 ns latency on GC2) at GC200's 1.325 GHz ~ 0.118 us
    assert hardware.chip("gc200").sync_s == pytest.approx(156 / 1.325e9, rel=1e-12)


def _numeric_fields(c):
    return [f.name for f in dataclasses.fields(c) if f.name not in ("name", "sources", "notes")]


@pytest.mark.parametrize("name", hardware.PRESETS)
def test_every_preset_number_names_its_source(name):
    c = hardware.chip(name)
    key_like = re.compile(r"\b[A-Z][A-Z0-9]+(?:-[A-Z0-9]+)*\b|ASSUMPTION|derived")
    for f in _numeric_fields(c):
        src = c.sources.get(f, "")
        assert src.strip(), f"{name}.{f} has no source"
        assert key_like.search(src), (
            f"{name}.{f}: source {src!r} names no source key and no ASSUMPTION"
        )
    text = hardware.describe_sources(c)
    assert "(user value)" not in text
    for f in _numeric_fields(c):
        assert f in text


@pytest.mark.parametrize("name", hardware.PRESETS)
def test_presets_are_immutable(name):
    c = hardware.chip(name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.clock_hz = 1.0
    with pytest.raises(TypeError):
        c.sources["clock_hz"] = "mine"


def test_names_are_case_insensitive_and_objects_pass_through():
    c = hardware.chip("GC200")
    assert c == hardware.chip("gc200")
    assert hardware.chip(c) is c


def test_unknown_preset_lists_the_valid_names():
    with pytest.raises(ValueError, match="unknown chip preset 'gc300'") as err:
        hardware.chip("gc300")
    for n in hardware.PRESETS:
        assert n in str(err.value)


def _bad_values(field_name, c):
    """Values each numeric field must reject (zero only where zero is not allowed)."""
    zero_ok = {
        "offchip_bytes",
        "offchip_bandwidth_bytes_per_s",
        "link_bandwidth_bytes_per_s",
        "kernel_launch_s",
    }
    vals = [-1, -0.5, math.nan, math.inf, -math.inf, "3", None]
    if field_name not in zero_ok:
        vals.append(0)
    return vals


@pytest.mark.parametrize("name", ["gc200", "h100-sxm"])
def test_invalid_values_raise_naming_the_field(name):
    c = hardware.chip(name)
    checked = 0
    for f in _numeric_fields(c):
        for bad in _bad_values(f, c):
            with pytest.raises(ValueError, match=re.escape(f)):
                c.replace(**{f: bad})
            checked += 1
    assert checked > 50


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("gc200", "tiles"),
        ("gc200", "sram_per_tile_bytes"),
        ("gc200", "code_bytes_per_tile"),
        ("a100-80gb", "sms"),
        ("a100-80gb", "l2_bytes"),
        ("a100-80gb", "smem_per_sm_bytes"),
    ],
)
def test_counts_must_be_whole(name, field):
    c = hardware.chip(name)
    with pytest.raises(ValueError, match=f"{field} must be a whole number"):
        c.replace(**{field: getattr(c, field) + 0.5})


def test_tile_memory_too_small_for_code_is_rejected():
    c = hardware.chip("gc200")
    with pytest.raises(ValueError, match="sram_per_tile_bytes"):
        c.replace(sram_per_tile_bytes=c.code_bytes_per_tile)
    with pytest.raises(ValueError, match="sram_per_tile_bytes"):
        c.replace(code_bytes_per_tile=c.sram_per_tile_bytes + 1)
    # one byte of data room is legal
    ok = c.replace(sram_per_tile_bytes=c.code_bytes_per_tile + 1)
    assert ok.data_bytes == ok.tiles


def test_offchip_capacity_and_bandwidth_go_together():
    c = hardware.chip("gc200")
    with pytest.raises(ValueError, match="offchip_bytes"):
        c.replace(offchip_bandwidth_bytes_per_s=0.0)
    with pytest.raises(ValueError, match="offchip_bytes"):
        hardware.chip("gc2").replace(offchip_bytes=1e9)
    none = c.replace(offchip_bytes=0.0, offchip_bandwidth_bytes_per_s=0.0)
    assert none.offchip_bytes == 0


def test_empty_name_is_rejected():
    with pytest.raises(ValueError, match="name"):
        hardware.chip("gc200").replace(name="")
    with pytest.raises(ValueError, match="name"):
        hardware.chip("h200").replace(name=None)


def test_replace_gives_a_new_validated_chip_with_derived_values_updated():
    c = hardware.chip("gc200")
    half = c.replace(clock_hz=c.clock_hz / 2)
    assert half.peak_flops == pytest.approx(c.peak_flops / 2)
    assert half.sram_bandwidth_bytes_per_s == pytest.approx(c.sram_bandwidth_bytes_per_s / 2)
    assert c.clock_hz == 1.325e9  # original unchanged
    g = hardware.chip("h100-sxm").replace(hbm_bandwidth_bytes_per_s=1e12)
    assert g.ridge_flop_per_byte == pytest.approx(g.peak_flops / 1e12)


@pytest.mark.parametrize("name", hardware.PRESETS)
def test_repr_shows_the_headline_numbers(name):
    r = repr(hardware.chip(name))
    assert name in r
    assert "TFLOP/s" in r
