"""Collective times against their closed forms and limiting cases, and the link presets
against their published figures (typed in here from the sources, not read back)."""

from __future__ import annotations

import math

import pytest

from ipusim import collectives as col
from ipusim import hardware

REL = 1e-12  # tolerance for closed forms evaluated two ways (rounding only)
LINK = col.Link("test", 100e9, 1e-6)  # beta = 100 GB/s, alpha = 1 us


@pytest.mark.parametrize("p", [2, 3, 4, 8, 17, 64])
@pytest.mark.parametrize("n", [0.0, 1.0, 4096.0, 1e6, 3.3e9])
def test_closed_forms(p, n):
    bw, a = 100e9, 1e-6
    assert col.ring_all_reduce_s(n, p, LINK) == pytest.approx(
        2 * (p - 1) / p * n / bw + 2 * (p - 1) * a, rel=REL
    )
    assert col.reduce_scatter_s(n, p, LINK) == pytest.approx(
        (p - 1) / p * n / bw + (p - 1) * a, rel=REL
    )
    assert col.all_gather_s(n, p, LINK) == pytest.approx(
        (p - 1) / p * n / bw + (p - 1) * a, rel=REL
    )
    steps = {2: 1, 3: 2, 4: 2, 8: 3, 17: 5, 64: 6}[p]  # ceil(log2 p), typed in
    assert col.tree_all_reduce_s(n, p, LINK) == pytest.approx(2 * n / bw + 2 * steps * a, rel=REL)
    # ring all-reduce = reduce-scatter + all-gather (the ring's two halves)
    assert col.ring_all_reduce_s(n, p, LINK) == pytest.approx(
        col.reduce_scatter_s(n, p, LINK) + col.all_gather_s(n, p, LINK), rel=REL
    )


def test_one_chip_costs_nothing():
    for f in (
        col.ring_all_reduce_s,
        col.reduce_scatter_s,
        col.all_gather_s,
        col.tree_all_reduce_s,
        col.all_reduce_s,
    ):
        assert f(1e9, 1, LINK) == 0.0
    assert col.point_to_point_s(0, LINK) == 0.0
    assert col.point_to_point_s(1e9, LINK) == pytest.approx(1e9 / 100e9 + 1e-6, rel=REL)
    assert col.hierarchical_all_reduce_s(1e9, 1, 1, LINK, LINK) == 0.0


@pytest.mark.parametrize(("g", "m"), [(1, 1), (4, 1), (1, 8), (4, 16), (8, 3)])
def test_link_bytes_are_what_every_chip_sends(g, m):
    """Bytes over the links summed over the chips = per-chip bandwidth time x bandwidth x chips, on
    latency-free links; the hierarchical all-reduce (in-node, across nodes, in-node) moves as
    many bytes as a flat ring over all ``g m`` chips."""
    zero = col.Link("no latency", 100e9, 0.0)
    n, p = 3.3e6, g * m
    ring = col.ring_all_reduce_s(n, p, zero) * zero.bandwidth_bytes_per_s * p
    assert col.all_reduce_bytes(n, p) == pytest.approx(ring, rel=REL)
    assert col.all_gather_bytes(n, p) == pytest.approx(
        col.all_gather_s(n, p, zero) * 100e9 * p, rel=REL
    )
    hier = (
        p * (col.reduce_scatter_s(n, g, zero) + col.all_gather_s(n, g, zero))
        + p * col.ring_all_reduce_s(n / g, m, zero)
    ) * 100e9
    assert col.all_reduce_bytes(n, p) == pytest.approx(hier, rel=REL)
    with pytest.raises(ValueError, match="nbytes"):
        col.all_reduce_bytes(-1.0, 2)
    with pytest.raises(ValueError, match="chips in the group"):
        col.all_gather_bytes(1.0, 0)


def test_bandwidth_term_tends_to_bytes_over_bandwidth():
    zero = col.Link("no latency", 100e9, 0.0)
    n = 1e9
    # ring all-gather moves (p-1)/p of the tensor: -> n / beta as p grows (within 1/p)
    for p in (10, 100, 1000):
        t = col.all_gather_s(n, p, zero)
        assert n / 100e9 * (1 - 1 / p) == pytest.approx(t, rel=REL)
        assert abs(t - n / 100e9) <= n / 100e9 / p * (1 + 1e-9)
    assert col.ring_all_reduce_s(n, 1000, zero) == pytest.approx(2 * n / 100e9, rel=2e-3)


def test_ring_vs_tree_crossover():
    p = 64
    n_star = col.ring_tree_crossover_bytes(p, LINK)
    assert n_star == pytest.approx(64 * (63 - 6) * 1e-6 * 100e9, rel=REL)
    # below the crossover the tree wins, above it the ring wins
    assert col.tree_all_reduce_s(n_star / 10, p, LINK) < col.ring_all_reduce_s(n_star / 10, p, LINK)
    assert col.tree_all_reduce_s(n_star * 10, p, LINK) > col.ring_all_reduce_s(n_star * 10, p, LINK)
    assert col.all_reduce_s(n_star / 10, p, LINK) == col.tree_all_reduce_s(n_star / 10, p, LINK)
    assert col.all_reduce_s(n_star * 10, p, LINK) == col.ring_all_reduce_s(n_star * 10, p, LINK)
    # with 2 chips the ring has 2 latency steps as the tree does and less bandwidth: no crossover
    assert col.ring_tree_crossover_bytes(2, LINK) == 0.0


def test_hierarchical_limits_and_closed_form():
    intra, inter = col.Link("in", 150e9, 1e-6), col.Link("out", 40e9, 2e-6)
    n = 64e6
    # one node: the in-node ring all-reduce
    assert col.hierarchical_all_reduce_s(n, 4, 1, intra, inter) == pytest.approx(
        col.ring_all_reduce_s(n, 4, intra), rel=REL
    )
    # one chip per node: an all-reduce on the inter-node link
    assert col.hierarchical_all_reduce_s(n, 1, 8, intra, inter) == pytest.approx(
        col.all_reduce_s(n, 8, inter), rel=REL
    )
    # 4 x 16: typed-in closed form (n large, so the ring is taken across nodes)
    g, m = 4, 16
    expect = (
        2 * ((g - 1) / g * n / 150e9 + (g - 1) * 1e-6)
        + 2 * (m - 1) / m * (n / g) / 40e9
        + 2 * (m - 1) * 2e-6
    )
    assert col.hierarchical_all_reduce_s(n, g, m, intra, inter) == pytest.approx(expect, rel=REL)


def test_fabric_presets_and_groups():
    f = col.fabric("gc200", 256)
    assert (f.chips, f.chips_per_node, f.nodes) == (256, 64, 4)  # GC-POD64: 64 chips on IPU-Links
    # CBLAKE: 320 GB/s over 10 IPU-Links, both directions -> 160 GB/s one way, x JIA-FT's measured
    # 55 of a nominal 96 GB/s on GC2 -> 91.7 GB/s; JIA-FT 0.52-0.78 us
    assert f.intra.bandwidth_bytes_per_s == pytest.approx(160e9 * 55 / 96, rel=REL)
    assert col.fabric("gc2", 2).intra.bandwidth_bytes_per_s == pytest.approx(
        55e9, rel=REL
    )  # as measured
    assert 0.52e-6 <= f.intra.latency_s <= 0.78e-6
    # GC-BOW2000 / GC-POD64: GW-Links 2 x 100 Gb/s per 4-chip machine, full duplex -> 6.25 GB/s per chip
    assert f.inter.bandwidth_bytes_per_s == pytest.approx(2 * 100e9 / 8 / 4, rel=REL)
    a = col.fabric("a100-80gb", 16)
    assert a.chips_per_node == 8
    # NVLink 600 GB/s both ways over 12 links; NCCL-TOPO plans 20.0 of each link's 25 GB/s one way
    assert a.intra.bandwidth_bytes_per_s == pytest.approx(300e9 * 20.0 / 25, rel=REL)
    assert a.inter.bandwidth_bytes_per_s == pytest.approx(
        200e9 / 8, rel=REL
    )  # 8 x 200 Gb/s HDR per node
    h = col.fabric("h100-sxm", 16)
    # 900 GB/s over 18 links, 20.6 of 25 GB/s (NCCL-TOPO): the 370 GB/s NCCL's maintainer quotes
    assert h.intra.bandwidth_bytes_per_s == pytest.approx(450e9 * 20.6 / 25, rel=REL)
    assert h.inter.bandwidth_bytes_per_s == pytest.approx(400e9 / 8, rel=REL)  # 8 x 400 Gb/s NDR
    # within a node vs across nodes
    assert f.all_reduce_s(1e6, 16) == col.all_reduce_s(1e6, 16, f.intra)  # a Pod16 is on IPU-Links
    assert f.all_reduce_s(1e6, 128) == pytest.approx(
        col.hierarchical_all_reduce_s(1e6, 64, 2, f.intra, f.inter), rel=REL
    )
    assert f.all_reduce_s(1e6, 128) > f.all_reduce_s(1e6, 64)
    assert f.all_gather_s(1e6, 1) == 0.0
    assert f.point_to_point_s(1e6, cross_node=True) > f.point_to_point_s(1e6, cross_node=False)
    assert "ipu-link" in repr(f) and f.to_dict()["chips_per_node"] == 64
    assert col.fabric("gc200", 64, chips_per_node=4).nodes == 16


def test_every_preset_has_a_fabric():
    for name in hardware.PRESETS:
        f = col.fabric(name, 2)
        assert f.intra.bandwidth_bytes_per_s > 0 and f.inter.bandwidth_bytes_per_s > 0
        assert math.isfinite(f.all_reduce_s(1e6, 2))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: col.ring_all_reduce_s(-1, 4, LINK), "nbytes"),
        (lambda: col.ring_all_reduce_s(1e6, 0, LINK), "p"),
        (lambda: col.all_gather_s(1e6, 2.5, LINK), "whole"),
        (lambda: col.tree_all_reduce_s(float("nan"), 4, LINK), "finite"),
        (lambda: col.point_to_point_s(1e6, "nvlink"), "Link"),
        (lambda: col.Link("x", 0.0, 1e-6), "bandwidth"),
        (lambda: col.Link("x", 1e9, -1.0), "latency"),
        (lambda: col.fabric("gc200", 0), "chips"),
        (lambda: col.fabric("gc200", 8).all_reduce_s(1e6, 16), "does not fit"),
        (lambda: col.fabric("gc200", 256).all_reduce_s(1e6, 96), "whole nodes"),
        (lambda: col.fabric("gc200", 4, chips_per_node=0), "chips_per_node"),
    ],
)
def test_bad_input_is_a_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
