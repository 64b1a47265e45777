"""Tile machine: kernels against references, conservation, closed forms, memory limits."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tileplan_reference
import tiles_reference
from hypothesis import given, settings
from hypothesis import strategies as st

from ipusim import (
    energy,
    hardware,
    machine,
    one_chip,
    roofline,
    supersteps,
    tileplan,
    tiles,
    workloads,
)
from ipusim.tileplan import base as tp_base
from ipusim.tileplan import matmul as tp_matmul
from ipusim.tileplan import rows as tp_rows

GC200 = hardware.chip("gc200")


def _bert(batch=32, seq=128, padded=True):
    return workloads.step("bert-base", [seq] * batch, pad_to=seq if padded else None)


# -- kernels vs plain-Python references ---------------------------------------------------


@pytest.mark.parametrize(
    "pieces,tiles_,cols", [(1, 7, 1), (5, 16, 3), (100, 16, 6), (4096, 1472, 6)]
)
def test_distribute_matches_reference(pieces, tiles_, cols):
    rng = np.random.default_rng(pieces)
    work = rng.random((pieces, cols))
    out = np.zeros((tiles_, cols + 1))
    tp_base._distribute(work, 1, tiles_, out)
    np.testing.assert_allclose(out, tileplan_reference.distribute(work, tiles_), rtol=1e-12)
    # conservation: every piece lands on exactly one tile
    np.testing.assert_allclose(out[:, :cols].sum(axis=0), work.sum(axis=0), rtol=1e-12)
    assert out[:, -1].sum() == pieces
    # balance: piece counts differ by at most one between tiles (when pieces >= tiles)
    if pieces >= tiles_:
        assert out[:, -1].max() - out[:, -1].min() <= 1


@pytest.mark.parametrize("P,tiles_", [(1, 7), (5, 16), (100, 16), (4096, 1472), (1472, 1472)])
def test_deal_same_equals_dealing_every_piece(P, tiles_):
    """P identical pieces: a count per tile times the row equals dealing the P rows one by one
    (tolerance 1e-12 relative: a product against a sum of P terms)."""
    row = np.array([3.5e6, 1.25e3, 0.0, 7.0, 1e-3, 42.0])
    got = tp_rows._deal_same(row, P, tiles_)
    np.testing.assert_allclose(
        got, tileplan_reference.distribute(np.tile(row, (P, 1)), tiles_), rtol=1e-12
    )


@pytest.mark.parametrize("S,T,bus", [(1, 3, 2), (4, 16, 2), (12, 100, 3), (30, 1472, 2)])
def test_superstep_kernel_matches_reference(S, T, bus):
    rng = np.random.default_rng(S * T)
    arrs = [rng.random((S, T)) * 1e4 for _ in range(5)]
    arrs[2] = rng.integers(0, 3, (S, T)).astype(float)  # vertices, some tiles idle
    rate = rng.choice([32.0, 128.0], S)
    comp, exch, mx = np.empty((S, T)), np.empty((S, T)), np.empty((S, 2))
    supersteps._superstep_cycles(*arrs, rate, 27.0, 4.1, 11.0, bus, comp, exch, mx)
    rc, rx, rm = tiles_reference.superstep_cycles(*arrs, rate, 27.0, 4.1, 11.0, bus)
    np.testing.assert_allclose(comp, rc, rtol=1e-12)
    np.testing.assert_allclose(exch, rx, rtol=1e-12)
    np.testing.assert_allclose(mx, rm, rtol=1e-12)
    assert np.all(comp[arrs[2] == 0] == 0)  # a tile with no vertex does no compute


@pytest.mark.parametrize(
    "s",
    [
        _bert(8, 64),
        workloads.step("gpt2", [17, 90, 33], phase="prefill"),
        workloads.step("gpt2", [300, 12], phase="decode"),
    ],
    ids=["bert", "gpt2-prefill", "gpt2-decode"],
)
def test_plain_references_give_the_same_step(s):
    a = tiles.profile("gc200", s)
    with tiles_reference.plain():
        b = tiles.profile("gc200", s)
    assert a.result.time_s == pytest.approx(b.result.time_s, rel=1e-12)
    np.testing.assert_allclose(a.result.unit_busy_s, b.result.unit_busy_s, rtol=1e-12)
    np.testing.assert_allclose(a.memory, b.memory, rtol=1e-12)


# -- conservation and closed forms ---------------------------------------------------------


@pytest.mark.parametrize(
    "s",
    [
        _bert(),
        _bert(16, 200, padded=False),
        workloads.step("gpt2", [40, 500, 7, 129], phase="prefill"),
        workloads.step("gpt2", [400] * 6, phase="decode"),
    ],
    ids=["bert-padded", "bert-unpadded", "gpt2-prefill", "gpt2-decode"],
)
def test_mapping_conserves_flops(s):
    """Each op's per-tile FLOPs add up to the op's FLOPs per layer (workloads' count)."""
    for plan in tiles.map_step("gc200", s):
        mapped = sum(p.flops.sum() for p in plan.phases if p.label != "reduce")
        assert mapped == pytest.approx(plan.op.flops / plan.op.count, rel=1e-9), plan.op.name


def test_matmul_compute_matches_closed_form_on_four_tiles():
    """Evenly divisible 256x64x64 on 4 tiles (m split in 4): each tile does 1/4 of 2mkn, plus
    one vertex, the AMP phase overhead, and the rearrangement of the bytes it received: 3/4
    of its 64 x 64 input rows and 3/4 of the 64 x 64 weights (it stores 1/4), FP16."""
    from ipusim import tile_params as cal

    c = GC200.replace(tiles=4)
    m, k, n = 256, 64, 64
    prof = tiles.matmul(c, m, k, n)
    assert prof.result.extra["partition"] == "m/4 x n/1 x k/1 on 4 tiles"
    received = (m // 4) * k * 2 * 3 / 4 + k * n * 2 * 3 / 4
    expect = (
        c.vertex_overhead_cycles
        + 2 * m * k * n / (4 * c.fp16_flops_per_cycle_per_tile)
        + cal.AMP_PHASE_OVERHEAD_CYCLES
        + received / cal.REARRANGE_BYTES_PER_CYCLE
    ) / c.clock_hz
    assert prof.result.split["compute"] == pytest.approx(expect, rel=1e-12)
    assert prof.program.comp[0].min() == prof.program.comp[0].max()  # perfectly balanced


def test_slowest_tile_sets_the_pace():
    """4,096 layer-norm rows on 1,472 tiles: some tiles get 3 rows, some 2; the op takes 3 rows."""
    s = _bert(32, 128)
    prof = tiles.profile("gc200", s)
    i = prof.result.op_names.index("norm_attn")
    rows = np.bincount(prof.program.op_index, minlength=len(prof.plans))
    assert rows[i] == 1  # one superstep
    step_i = int(np.flatnonzero(prof.program.op_index == i)[0])
    d, dt, c = 768, 2, GC200
    per_row = max(
        8 * d / c.fp32_flops_per_cycle_per_tile, 3 * d * dt / c.sram_bytes_per_cycle_per_tile
    )
    ceil_rows = -(-s.tokens // c.tiles)
    expect = ceil_rows * (per_row + c.vertex_overhead_cycles)
    assert prof.program.slowest[step_i, 0] == pytest.approx(expect, rel=1e-12)
    comp = prof.program.comp[step_i]
    assert comp.min() == pytest.approx(
        (ceil_rows - 1) * (per_row + c.vertex_overhead_cycles), rel=1e-12
    )
    # exchange: the tile with 3 rows receives 3 rows (less the 1/tiles it already holds)
    from ipusim.tile_params import EXCHANGE_EFFICIENCY

    x_rate = c.exchange_bytes_per_cycle_per_tile * EXCHANGE_EFFICIENCY
    x_expect = ceil_rows * d * dt * (c.tiles - 1) / c.tiles / x_rate
    assert prof.program.slowest[step_i, 1] == pytest.approx(x_expect, rel=1e-12)


def test_superstep_time_is_sync_plus_slowest_exchange_plus_slowest_compute():
    """Consistency of the assembly (time from the program's per-tile cycles, split and per-op
    sums); the independent check against the roofline is
    test_simulated_time_never_beats_the_roofline_bound."""
    prof = tiles.profile("gc200", _bert())
    p = prof.program
    expect = (
        p.count * (GC200.sync_cycles + p.comp.max(axis=1) + p.exch.max(axis=1))
    ).sum() / GC200.clock_hz
    r = prof.result
    assert r.time_s == pytest.approx(expect, rel=1e-12)
    assert sum(r.split.values()) == pytest.approx(r.time_s, rel=1e-12)
    assert r.op_time_s.sum() == pytest.approx(r.time_s, rel=1e-12)
    assert np.all(r.unit_busy_s <= r.time_s * (1 + 1e-12))  # idle = time - busy >= 0
    # the step can never beat the chip's FLOP roofline
    assert r.time_s >= _bert().flops / GC200.peak_flops


def test_padding_costs_time_and_packing_saves_it():
    lens = np.random.default_rng(3).integers(20, 129, 32)
    padded = tiles.simulate("gc200", workloads.step("bert-base", lens, pad_to=128))
    packed = tiles.simulate("gc200", workloads.step("bert-base", lens))
    assert packed.time_s < padded.time_s


def test_reproducible_with_seed():
    s = _bert(8, 64)
    a, b = tiles.simulate("gc200", s, seed=5), tiles.simulate("gc200", s, seed=5)
    assert a.time_s == b.time_s
    np.testing.assert_array_equal(a.unit_memory_bytes, b.unit_memory_bytes)


# -- memory: hard limits, fit messages, streaming -----------------------------------------


def test_bert_base_fits_on_one_gc200_with_always_live_and_temporaries():
    prof = tiles.profile("gc200", _bert())
    r = prof.result
    assert r.fits and r.extra["weights"] == "on-chip"
    assert r.unit_memory_bytes.max() <= GC200.sram_per_tile_bytes
    # weights on chip: always-live bytes are the model's weights, the code budgets and the
    # residual stream (tokens x d_model), spread over tiles
    m = workloads.model("bert-base")
    weights = m.weight_bytes(2)
    resid = 32 * 128 * m.d_model * 2
    assert prof.always_live.sum() == pytest.approx(
        weights + GC200.tiles * GC200.code_bytes_per_tile + resid, rel=1e-9
    )
    # the bytes placed as weights, summed over tiles, are (closed form from the op list and the
    # model's shape) every matmul's weights plus the word, position and type tables; exact
    tables = (m.vocab + m.max_positions + m.type_vocab) * m.d_model * 2
    matmuls = sum(o.weight_bytes for o in _bert().ops if o.kind == "matmul")
    assert prof.weight_bytes.sum() == pytest.approx(matmuls + tables, rel=1e-12)
    mb = prof.memory_breakdown()
    assert mb["code"]["max"] == GC200.code_bytes_per_tile
    assert (
        mb["weights"]["mean"] * GC200.tiles <= weights
    )  # matrices and tables; the rest is "other"
    assert (
        mb["peak"]["max"]
        <= mb["code"]["max"]
        + mb["weights"]["max"]
        + mb["other_always_live"]["max"]
        + mb["temporary"]["max"]
        + 1e-6
    )
    top = prof.fullest_tiles(5)
    assert len(top) == 5 and top[0]["bytes"] == pytest.approx(r.unit_memory_bytes.max())


def test_model_that_does_not_fit_is_reported_not_placed():
    s = workloads.step("llama-2-7b", [128], phase="prefill")
    r = tiles.simulate("gc200", s, weights="on_chip")
    assert not r.fits and r.time_s == math.inf and r.energy_j == math.inf  # the fit rule
    assert r.throughput_seq_per_s == 0 and "DOES NOT FIT" in repr(r)
    assert r.unit_memory_bytes.max() > GC200.sram_per_tile_bytes
    assert "Out of memory on tile" in r.fit_message and "chips" in r.fit_message
    assert "Streaming weights" in r.fit_message


def test_too_many_tokens_suggests_a_smaller_batch_that_does_fit():
    s = workloads.step(
        "bert-base", [128] * 400, pad_to=128
    )  # 51,200 tokens: beyond what serial passes rescue
    r = tiles.simulate("gc200", s, weights="on_chip")
    best = tiles.tile_memory_batch_limit("gc200", s)
    assert not r.fits and f"Would fit with {best} sequences per batch" in r.fit_message
    ok = workloads.step("bert-base", [128] * best, pad_to=128)
    too_many = workloads.step("bert-base", [128] * (best + 1), pad_to=128)
    assert tiles.simulate("gc200", ok, weights="on_chip").fits
    assert not tiles.simulate("gc200", too_many, weights="on_chip").fits


def test_streamed_weights_add_weight_bytes_over_dram_bandwidth():
    s = workloads.step("bert-large", [128] * 96, pad_to=128)
    r = tiles.simulate("gc200", s)  # does not fit on chip; auto streams
    assert r.fits and r.extra["weights"] == "streamed"
    d, dt = s.model.d_model, s.dtype_bytes
    matmul_w = sum(o.weight_bytes for o in s.ops if o.kind == "matmul")
    emb_rows = s.tokens * 3 * d * dt  # word, position and type rows of each token
    expect = (matmul_w + emb_rows) / GC200.offchip_bandwidth_bytes_per_s
    assert r.split["streaming"] == pytest.approx(expect, rel=1e-9)
    onchip = tiles.simulate("gc200", s, weights="on_chip")
    assert not onchip.fits


def test_input_checks():
    with pytest.raises(ValueError, match="tile chip"):
        tiles.simulate("a100-80gb", _bert(2, 16))
    for fn, args in (
        (tiles.matmul, (64, 64, 64)),
        (tiles.tile_memory_batch_limit, (_bert(2, 16),)),
        (tiles.map_step, (_bert(2, 16),)),
        (tiles.profile, (_bert(2, 16),)),
    ):
        with pytest.raises(ValueError, match=r"needs a tile chip, got 'a100-80gb'"):
            fn("a100-80gb", *args)
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="dtype_bytes"):
            tiles.matmul("gc200", 64, 64, 64, dtype_bytes=bad)
    with pytest.raises(ValueError, match="train"):
        tiles.simulate("gc200", workloads.step("bert-base", [16], phase="train"))
    with pytest.raises(ValueError, match="weights"):
        tiles.simulate("gc200", _bert(2, 16), weights="sometimes")
    with pytest.raises(ValueError, match="off-chip"):
        tiles.simulate("gc2", _bert(2, 16), weights="stream")
    with pytest.raises(ValueError, match="Step"):
        tiles.simulate("gc200", "bert-base")


@pytest.mark.parametrize(
    "model, lengths, phase, chip",
    [
        ("bert-base", [128] * 8, "forward", "gc200"),
        ("gpt2", [300, 17, 64], "prefill", "bow"),
        ("gpt2", [900] * 24, "decode", "gc200"),
        ("bert-large", [128] * 96, "forward", "gc200"),  # streams under auto
        ("llama-2-7b", [128], "prefill", "gc200"),  # fits nowhere on chip
    ],
)
def test_timed_is_the_profiles_time_and_streaming(model, lengths, phase, chip):
    """``tiles.timed`` (the serving tables' time alone) is ``simulate``'s ``time_s``, the same
    double, and whether its split streams, for every weights mode (and ``one_chip``'s door)."""
    s = workloads.step(
        model, lengths, phase=phase, pad_to=max(lengths) if phase == "forward" else None
    )
    c = hardware.chip(chip)
    for weights in ("auto", "on_chip", "stream"):
        r = tiles.simulate(c, s, weights=weights, explain=False)
        t, streams = tiles.timed(c, s, weights=weights)
        assert (t, streams) == (r.time_s, r.split.get("streaming", 0.0) > 0.0)
        assert math.isinf(t) or t.hex() == r.time_s.hex()
        assert one_chip.tile_time_s(c, s, weights=weights) == (t, streams)
    with pytest.raises(ValueError, match="needs a tile chip"):
        tiles.timed("a100-80gb", s)
    with pytest.raises(ValueError, match="weights"):
        tiles.timed(c, s, weights="sometimes")


def test_machine_dispatches_tile_chips_here():
    s = _bert(4, 32)
    assert machine.simulate("gc200", s).time_s == tiles.simulate("gc200", s).time_s
    assert machine.simulate("gc200", s).split.keys() == {"compute", "sync", "exchange"}


# -- the simulator against the roofline bound, and the fit rule ----------------------------

tile_step_st = st.tuples(
    st.sampled_from(["bert-base", "bert-large", "gpt2", "llama-2-7b"]),
    st.lists(st.integers(1, 512), min_size=1, max_size=48),
    st.sampled_from(["forward", "prefill", "decode"]),
    st.sampled_from(["gc200", "gc2", "bow"]),
).filter(
    lambda s: not (s[2] in ("prefill", "decode") and s[0].startswith("bert"))
)  # an encoder has no KV cache


def _same_mode_bound(c, s, r):
    """Unfused roofline bound with the weights where the simulator put them (KV cache and
    activations stay in tile SRAM in the tile simulator)."""
    woc = r.extra["weights"] == "on-chip"
    return sum(roofline.op_bound(c, o, weights_on_chip=woc).time_s for o in s.ops)


@settings(max_examples=30, deadline=None)
@given(spec=tile_step_st)
def test_simulated_time_never_beats_the_roofline_bound(spec):
    """A step that fits takes at least the unfused roofline bound in the same weight placement
    (the roofline ignores sync, exchange, imbalance and vertex overheads, so it can only be
    lower; tolerance 1e-9 relative). A step that fits nowhere follows the fit rule: not
    fits, time inf, energy inf, a message, and a finite as-if-unlimited estimate."""
    model, lens, phase, name = spec
    c = hardware.chip(name)
    lens = [min(n, workloads.model(model).max_positions) for n in lens]
    s = workloads.step(model, lens, phase=phase)
    r = tiles.simulate(c, s)
    if r.fits:
        assert math.isfinite(r.time_s)
        assert r.time_s >= _same_mode_bound(c, s, r) * (1 - 1e-9)
        assert r.board_energy_j == pytest.approx(c.power_w * r.time_s, rel=1e-12)
        assert r.energy_j == pytest.approx(sum(r.energy_split.values()), rel=1e-12)
        assert set(r.energy_split) == set(energy.TILE_LEVELS) and r.energy_split["exchange"] > 0
    else:
        assert r.time_s == math.inf and r.energy_j == math.inf and r.throughput_tokens_per_s == 0
        assert r.board_energy_j == math.inf
        assert r.fit_message.startswith("Out of memory") and (
            "Would fit with" in r.fit_message or "No batch" in r.fit_message
        )
        assert math.isfinite(r.extra["time_if_unlimited_s"]) and r.extra["time_if_unlimited_s"] > 0
        assert r.unit_memory_bytes.max() > c.sram_per_tile_bytes


def test_out_of_memory_steps_get_no_time():
    """GC200, BERT-base 160 x 400 tokens (64,000 tokens: more than serial passes can fit)
    has time inf; the smaller batch that fits gets a finite time at or above its roofline
    bound."""
    big = workloads.step("bert-base", [400] * 160)
    r = tiles.simulate("gc200", big)
    assert not r.fits and r.time_s == math.inf
    best = tiles.tile_memory_batch_limit("gc200", big)
    assert 0 < best < 160 and f"Would fit with {best} sequences" in r.fit_message
    ok = workloads.step("bert-base", [400] * best)
    r_ok = tiles.simulate("gc200", ok)
    assert r_ok.fits and _same_mode_bound(GC200, ok, r_ok) <= r_ok.time_s < math.inf
    # Llama-2-7B 32 x 8: 13.5 GB of weights cannot stay on chip; with serial passes its
    # temporaries fit beside the copied-in weights, so it streams, no faster than the
    # streaming roofline bound
    ls = workloads.step("llama-2-7b", [8] * 32)
    llama = tiles.simulate("gc200", ls)
    assert llama.fit == "streams" and roofline.step_time_s("gc200", ls) <= llama.time_s < math.inf
    assert not tiles.simulate("gc200", ls, weights="on_chip").fits
    assert machine.simulate("gc200", big).time_s == math.inf  # the front door does not raise


def test_matmul_that_does_not_fit_follows_the_fit_rule():
    small = tiles.matmul("gc200", 256, 256, 256)
    assert small.result.fits and math.isfinite(small.result.time_s)
    assert small.result.board_energy_j == pytest.approx(
        GC200.power_w * small.result.time_s, rel=1e-12
    )
    assert small.result.energy_j == pytest.approx(
        sum(small.result.energy_split.values()), rel=1e-12
    )
    huge = tiles.matmul(
        "gc200", 8192, 16384, 16384
    )  # 512 MiB of weights + 768 MiB of operands > 900 MB SRAM
    assert (
        not huge.result.fits
        and huge.result.time_s == math.inf
        and "Out of memory" in huge.result.fit_message
    )


# -- the planner: serial passes, online softmax, the fit limit -----------------------------


def _mm_op(m, k, n, dt=2):
    return workloads.Op(
        "mm",
        "matmul",
        1,
        flops=2.0 * m * k * n,
        weight_bytes=float(k * n * dt),
        act_read_bytes=float(m * k * dt),
        act_write_bytes=float(m * n * dt),
        m=m,
        k=k,
        n=n,
    )


@pytest.mark.parametrize(
    "m,k,n,budget",
    [
        (4096, 3072, 768, 60e3),
        (12288, 768, 3072, 80e3),
        (777, 1000, 333, 6e3),
        (512, 4096, 11008, 120e3),
    ],
)
def test_serial_pass_plans_conserve_flops_and_keep_each_pass_within_the_budget(m, k, n, budget):
    """A budget too small for one pass forces serial passes; the passes' FLOPs add up to
    2mkn exactly (tolerance 1e-12 relative), every tile's working set (the largest pass, read
    from the dealt piece tables, not from the planner's estimate) is within the budget, and
    there are as many matmul supersteps as passes."""
    plan = tileplan.map_matmul(_mm_op(m, k, n), GC200, 2, False, budget=budget)
    assert (
        tileplan.plan_matmul(GC200, m, k, n, budget=1e9).passes == 1
    )  # room for one pass: one pass
    assert plan.passes > 1
    mm = [p for p in plan.phases if p.label == "matmul"]
    assert len(mm) == plan.passes
    assert sum(p.flops.sum() for p in mm) == pytest.approx(2.0 * m * k * n, rel=1e-12)
    assert plan.working_set_bytes <= budget
    assert (
        plan.temp.max() >= plan.working_set_bytes
    )  # passes over m or n also hold the finished output
    # weights are stored once: all tiles together hold the k x n matrix exactly
    assert plan.weights.sum() == pytest.approx(k * n * 2, rel=1e-12)
    reductions = sum(p.label == "reduce" for p in plan.phases)
    pk = int(plan.partition.split("k/")[1].split(" ")[0])
    expect = 0 if pk == 1 else (1 if plan.pass_axis == "k" else plan.passes)
    assert reductions == expect


@pytest.mark.parametrize("m,k,n", [(8, 768, 768), (4096, 768, 3072), (2, 1024, 4096)])
def test_weights_are_stored_evenly_and_gathered_from_the_storage_layout(m, k, n):
    """Weights are stored spread evenly over all tiles whatever the compute grid (so a small
    batch whose grid uses few tiles does not pile weights onto them): every tile holds
    k n dt / T exactly (tolerance 1e-12 relative). Each block is read by pm tiles, each of
    which holds G / (T pm) of it (G = pm pn pk tiles in use) and receives the rest; inputs
    are received (T - 1) / T by the pn tiles reading each input block. Closed form for the
    bytes received in the matmul superstep, all tiles (one pass)."""
    T, dt = GC200.tiles, 2
    plan = tileplan.map_matmul(_mm_op(m, k, n), GC200, dt, False, budget=1e9)
    assert plan.passes == 1
    assert plan.weights.max() == pytest.approx(k * n * dt / T, rel=1e-12)
    assert plan.weights.min() == pytest.approx(k * n * dt / T, rel=1e-12)
    pm, pn, pk = (int(plan.partition.split(f"{a}/")[1].split(" ")[0]) for a in "mnk")
    G = pm * pn * pk
    expect = pn * m * k * dt * (T - 1) / T + pm * k * n * dt * (1 - G / (T * pm))
    mm = [p for p in plan.phases if p.label == "matmul"][0]
    assert mm.recv.sum() == pytest.approx(expect, rel=1e-12)


def test_fit_is_monotone_in_the_batch_for_a_tight_on_chip_case():
    """BERT-large (12 layers, one stage of a 2-chip pipeline) at 256 tokens on one GC200: if
    a batch fits with weights on chip, every smaller batch does too (weights are stored
    evenly, so a small batch's few-tile grid does not concentrate them)."""
    cfg = workloads.model("bert-large").replace(
        layers=12,
        vocab=2,
        type_vocab=0,
        learned_positions=False,
        tied_embeddings=True,
        published_params=0.0,
    )
    fits = [
        tiles.simulate("gc200", workloads.step(cfg, [256] * b), weights="on_chip").fits
        for b in (1, 2, 3, 4, 8)
    ]
    assert fits == sorted(fits, reverse=True), fits  # True... then False...
    assert fits[0]


@pytest.mark.parametrize("axis", ["m", "n", "k"])
def test_time_is_monotone_in_passes_for_a_fixed_op(axis):
    """For one op, the fastest plan with P passes over an axis takes no less time than with
    P/2 (P doubling, dimensions divisible: any plan of 2P passes runs as P passes of twice
    the block at no more cost), with the temporaries unconstrained (budget 1 GB)."""
    m, k, n = 4096, 3072, 768
    cyc = [
        tileplan.plan_matmul(GC200, m, k, n, passes=p, axis=axis, budget=1e9).cycles
        for p in (1, 2, 4, 8, 16)
    ]
    assert all(b >= a * (1 - 1e-12) for a, b in zip(cyc, cyc[1:], strict=False)), cyc


def test_plan_matmul_checks_its_input():
    with pytest.raises(ValueError, match="axis"):
        tileplan.plan_matmul(GC200, 64, 64, 64, passes=2, axis="q")
    with pytest.raises(ValueError, match="passes"):
        tileplan.plan_matmul(GC200, 64, 8, 64, passes=9, axis="k")
    with pytest.raises(ValueError, match="tile chip"):
        tileplan.plan_matmul("a100-80gb", 64, 64, 64)


@pytest.mark.parametrize("r,nb", [(1, 1), (3, 4), (8, 6)])
def test_online_softmax_accounting_matches_its_closed_form(r, nb):
    """Attention over nb key blocks (BERT-base, 3 x 384 tokens, 12 heads of 64, r query chunks):
    FLOPs of scores and context are 2 h hd L^2 per sequence whatever nb; the softmax adds
    (nb - 1) rescales of (hd + 3) FLOPs per query row to its 5 L^2; the K bytes received are
    each K row once per query chunk; a scores piece holds its query rows, one K block, one
    block of scores and (nb > 1) the FP32 accumulator and two FP32 running stats per row."""
    s = workloads.step("bert-base", [384] * 3, pad_to=384)
    T, B, L, h, hd, dt = GC200.tiles, 3, 384, 12, 64, 2
    remote = (T - 1) / T

    def total(which, col):
        first, rest = tileplan.attention_tables(s, r, nb, which, T)
        return first[:, col].sum() + (nb - 1) * rest[:, col].sum()

    assert total("attn_scores", 0) == pytest.approx(2 * B * h * hd * L * L, rel=1e-12)
    assert total("attn_context", 0) == pytest.approx(2 * B * h * hd * L * L, rel=1e-12)
    assert total("softmax", 0) == pytest.approx(
        5 * B * h * L * L + (nb - 1) * B * h * L * (hd + 3), rel=1e-12
    )
    k_and_q = B * h * (r * L + L) * hd * dt * remote  # K once per chunk, query rows once
    assert total("attn_scores", 2) == pytest.approx(k_and_q, rel=1e-12)
    assert total("attn_context", 2) == pytest.approx(B * h * r * L * hd * dt * remote, rel=1e-12)
    qc, kb = L / r, L / nb
    first, _ = tileplan.attention_tables(s, r, nb, "attn_scores", T)
    acc = (qc * hd * 4 + 2 * qc * 4) if nb > 1 else 0.0
    assert first[0, 4] == pytest.approx((qc + kb) * hd * dt + qc * kb * dt + acc, rel=1e-12)


def test_long_attention_runs_over_key_blocks_and_fits():
    """BERT-base 96 x 384 on the GC200: the attention ops run over key blocks (one pass
    each), their working set is within the budget, and the step stays on chip."""
    prof = tiles.profile("gc200", _bert(96, 384))
    att = [p for p in prof.plans if p.op.name in ("attn_scores", "softmax", "attn_context")]
    assert prof.result.fit == "on_chip"
    assert len({p.passes for p in att}) == 1 and att[0].passes > 1 and att[0].pass_axis == "keys"
    for p in att:
        assert len(p.phases) == p.passes and p.working_set_bytes <= p.budget_bytes
    whole_scores = (
        384 / int(att[0].partition.split(" x ")[1].split(" ")[0]) * 384 * 2
    )  # one chunk's scores
    assert att[0].working_set_bytes < whole_scores + 2 * 384 * 64 * 2
    rows = {r["op"]: r for r in prof.op_table()}
    assert rows["attn_scores"]["passes"] == att[0].passes and rows["qkv"]["temp_bytes_max"] > 0


@pytest.mark.parametrize(
    "chip,model,L,cap,phase,modes",
    [
        ("gc200", "bert-base", 384, 160, "forward", (True,)),
        ("gc200", "gpt2", 1024, 32, "prefill", (True, False)),
        ("gc2", "bert-base", 128, 64, "forward", (True,)),
    ],
)
def test_largest_batch_fits_and_one_more_does_not(chip, model, L, cap, phase, modes):
    """``tile_memory_batch_limit`` agrees with ``simulate``: the limit fits, one more does
    not, with weights on chip (and, where given, with weights streamed)."""
    s = workloads.step(model, [L] * cap, phase=phase, pad_to=L if phase == "forward" else None)
    for on_chip, mode in ((m, "on_chip" if m else "stream") for m in modes):
        best = tiles.tile_memory_batch_limit(chip, s, weights_on_chip=on_chip)
        assert 0 < best < cap
        sub = [
            workloads.step(model, [L] * b, phase=phase, pad_to=L if phase == "forward" else None)
            for b in (best, best + 1)
        ]
        assert tiles.simulate(chip, sub[0], weights=mode).fits
        assert not tiles.simulate(chip, sub[1], weights=mode).fits


def test_one_llama_2_7b_layer_prefills_512_tokens_with_weights_streamed():
    cfg = workloads.model("llama-2-7b").replace(layers=1)
    r = tiles.simulate("gc200", workloads.step(cfg, [512], phase="prefill"))
    assert r.fit == "streams" and math.isfinite(r.time_s) and r.split["streaming"] > 0
    assert r.unit_memory_bytes.max() <= GC200.sram_per_tile_bytes


@pytest.mark.parametrize(
    "m,k,n,axis,passes,budget",
    [
        (4096, 768, 3072, "", 1, 383e3),
        (12288, 3072, 768, "k", 3, 200e3),
        (777, 1000, 333, "m", 2, 5e3),
        (512, 4096, 11008, "n", 4, 9e9),
        (64, 64, 64, "", 1, 10.0),
    ],
)
def test_grid_search_matches_its_plain_python_reference(m, k, n, axis, passes, budget):
    """The vectorised candidate search picks the same grid, cycles and working set as the
    one-candidate-at-a-time reference (tolerance 1e-12 relative), feasible or not."""
    a = tp_matmul._best_grid(m, k, n, 2, GC200, axis, passes, budget)
    b = tileplan_reference.best_grid(m, k, n, 2, GC200, axis, passes, budget)
    assert a[:5] == b[:5] and a.fits == b.fits
    assert a.cycles == pytest.approx(b.cycles, rel=1e-12) and a.temp_bytes == pytest.approx(
        b.temp_bytes, rel=1e-12
    )
