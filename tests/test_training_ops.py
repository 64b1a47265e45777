"""ipusim.training.ops: a training step's ops are the machine model's ops (tile simulator, GPU model)."""

import numpy as np
import pytest

from ipusim import collectives, hardware, machine, one_chip, training, workloads
from ipusim import footprint as tmem
from ipusim.training import model as tm
from ipusim.training import ops

FORWARD_TOLERANCE = 0.05  # train's forward within 5% of machine.simulate's forward step (issue 23)


@pytest.mark.parametrize("name", ["bert-base", "gpt2", "llama-2-7b"])
def test_backward_matmuls_are_the_two_gradients(name):
    # Every forward matmul (m x k @ k x n) has an input gradient (m x n @ n x k, reading the weight)
    # and a weight gradient (k x m @ m x n, no weight read): twice its FLOPs.
    st = workloads.step(name, [64] * 2)
    bwd = {o.name: o for o in ops.backward_ops(st.ops)}
    for o in st.ops:
        if o.kind != "matmul":
            continue
        dx, dw = bwd[f"{o.name}.dx"], bwd[f"{o.name}.dw"]
        assert (dx.m, dx.k, dx.n) == (o.m, o.n, o.k) and dx.weight_bytes == o.weight_bytes
        assert (dw.m, dw.k, dw.n) == (o.k, o.m, o.n) and dw.weight_bytes == 0.0
        assert dx.flops + dw.flops == pytest.approx(2 * o.flops, rel=1e-12)
    assert not any(
        o.kind in ("attention", "softmax") for o in bwd.values()
    )  # timed from the forward


@pytest.mark.parametrize("chip", ["gc200", "bow"])
@pytest.mark.parametrize("model", ["bert-base", "bert-large", "gpt2"])
def test_forward_equals_machine_simulate(model, chip):
    ref = machine.simulate(chip, workloads.step(model, [128] * 8)).time_s
    got = training.forward_time_s(model, chip, 128, 8)
    assert got == pytest.approx(ref, rel=FORWARD_TOLERANCE)


def test_gpu_forward_is_the_gpu_models_unfused_step():
    ref = machine.simulate(
        "a100-80gb", workloads.step("gpt2", [256] * 4), fusion=ops.GPU_FUSION
    ).time_s
    assert training.forward_time_s("gpt2", "a100-80gb", 256, 4) == pytest.approx(
        ref, rel=FORWARD_TOLERANCE
    )


def test_training_state_on_the_tiles_never_speeds_a_layer_up():
    cfg = workloads.model("bert-large")
    free = ops.chip_layer_times("bow", cfg, 384, 8, 1)[0]
    tight = ops.chip_layer_times("bow", cfg, 384, 8, 1, reserved_bytes=0.5 * 900e6)[0]
    assert free.fits and tight.fits
    assert tight.forward_s + tight.backward_s >= free.forward_s + free.backward_s
    full = ops.chip_layer_times("bow", cfg, 384, 8, 1, reserved_bytes=2e9)[0]
    assert not full.fits and full.forward_s == np.inf


def test_sharded_gradients_are_reduce_scattered_every_micro_batch():
    # Stage 1 reduces the accumulated gradients once per step; stage 2 keeps a 1/d shard of them,
    # so every micro-batch's gradients are reduce-scattered: (m - 1) more reduce-scatters.
    cfg, a100 = workloads.model("bert-base"), hardware.chip("a100-80gb")
    args = (cfg, a100, 16, 128, 4096, 16, 1, 1, 4, 2)  # 16 replicas, micro-batch 4: m = 64
    z1, z2 = tm.evaluate(*args, 1), tm.evaluate(*args, 2)
    m = float(np.ravel(z1["micro_batches"])[0])
    fab = collectives.fabric(a100, 16)  # two DGX nodes: a reduce-scatter in the node, then across
    rs = collectives.reduce_scatter_s(
        cfg.params * 2.0, 8, fab.intra
    ) + collectives.reduce_scatter_s(cfg.params * 2.0 / 8, 2, fab.inter)
    extra = float(
        np.ravel(z2["split"]["data_parallel"])[0] - np.ravel(z1["split"]["data_parallel"])[0]
    )
    assert m == 64 and extra == pytest.approx((m - 1) * rs, rel=1e-9)


def test_step_split_sums_to_the_step():
    r = training.best_placement("bert-base", "bow", 16, seq_len=128, global_batch=65536)
    assert sum(r.split.values()) == pytest.approx(r.step_time_s, rel=1e-9)
    assert {"ops_compute", "ops_exchange", "ops_sync"} <= set(r.split)


def test_a_tile_that_overflows_moves_state_off_chip():
    # BERT-large, micro-batch 2, 8 stages: every state fits the chip's SRAM in total (level 0), but with
    # the state spread over the tiles a layer's working set overflows a tile; the step then keeps the
    # optimizer state in Streaming Memory (level 1) instead of not fitting.
    cfg, bow = workloads.model("bert-large"), hardware.chip("bow")
    args = (384, 16384, 2, 1, 8, 2, 2, 1)
    assert int(np.ravel(tm.evaluate_memory(cfg, bow, *args)["level"])[0]) == 0
    r = tm.evaluate(cfg, bow, 16, *args)
    assert int(np.ravel(r["level"])[0]) == 1 and np.isfinite(np.ravel(r["step_time_s"])[0])


# ---- the optimizer update: an element-wise op of the machine model --------------------------
ADAM_PARAMS = 40_000_000  # a BERT-large pipeline stage's shard, about


@pytest.mark.parametrize("chip", ["gc200", "bow"])
def test_tile_optimizer_update_is_a_superstep_bound_by_tile_sram(chip):
    # On chip: 28 B/param of SRAM traffic over all tiles (16 B/cycle each) set the pace, since
    # 14 FP32 operations take fewer cycles than 28 bytes; one sync on top, nothing else.
    c = hardware.chip(chip)
    got = ops.optimizer_s(c, ADAM_PARAMS, 0)
    sram = ADAM_PARAMS * tmem.OPTIMIZER_TRAFFIC_BYTES_PER_PARAM
    floor = sram / c.sram_bandwidth_bytes_per_s
    assert floor < got <= floor * 1.01 + (c.sync_cycles + 2 * c.vertex_overhead_cycles) / c.clock_hz


@pytest.mark.parametrize("level", [1, 2])
def test_tile_optimizer_state_in_streaming_memory_adds_its_copy(level):
    c = hardware.chip("bow")
    on = ops.optimizer_s(c, ADAM_PARAMS, 0)
    streamed = ops.optimizer_s(c, ADAM_PARAMS, level)
    copy = ADAM_PARAMS * ops.STREAMED_UPDATE_BYTES[level] / c.offchip_bandwidth_bytes_per_s
    assert streamed == pytest.approx(on + copy, rel=1e-9)
    assert ops.STREAMED_UPDATE_BYTES[2] > ops.STREAMED_UPDATE_BYTES[1] > 0


@pytest.mark.parametrize("chip", ["a100-80gb", "h100-sxm"])
def test_gpu_optimizer_update_streams_hbm(chip):
    # One memory-bound kernel: no faster than its bytes at full HBM bandwidth, no slower than
    # at the GPU model's HBM efficiency plus a launch and a partial last wave (5 %).
    from ipusim import gpu

    c = hardware.chip(chip)
    got = ops.optimizer_s(c, ADAM_PARAMS, 0)
    moved = ADAM_PARAMS * tmem.OPTIMIZER_TRAFFIC_BYTES_PER_PARAM
    assert moved / c.hbm_bandwidth_bytes_per_s < got
    assert got <= 1.05 * moved / (c.hbm_bandwidth_bytes_per_s * gpu.HBM_EFFICIENCY) + (
        c.kernel_launch_s
    )


def test_optimizer_split_is_the_op_time():
    pl = training.Placement(data=2, tensor=1, pipeline=8, micro_batch=8, recompute="full")
    r = training.simulate("bert-large", "bow", pl, seq_len=384, global_batch=16384)
    c = hardware.chip("bow")
    params = round(float(tm.stage_params(workloads.model("bert-large"), 8)))
    level = tm.LEVELS.index(
        "on_chip" if r.memory_where["optimizer"] == "tile SRAM" else "optimizer_streamed"
    )
    assert r.split["optimizer"] == pytest.approx(ops.optimizer_s(c, params, level), rel=1e-9)


def test_elementwise_rejects_bad_input():
    from ipusim import tiles

    with pytest.raises(ValueError, match="elements"):
        tiles.elementwise_s("bow", 0, flops_per_element=1.0, load_bytes_per_element=4.0)
    with pytest.raises(ValueError, match="Streaming Memory"):
        tiles.elementwise_s(
            "gc2", 10, flops_per_element=1.0, load_bytes_per_element=4.0, stream_bytes_per_element=4
        )
    with pytest.raises(ValueError, match="GPU"):
        from ipusim import gpu

        gpu.elementwise_kernel_s("bow", 10, 40.0)


def test_data_parallel_beyond_a_pod64_crosses_the_gateway_links():
    # 32 replicas of 8 pipelined Bow chips = 256 chips: 8 replicas of each stage per Pod64 on
    # IPU-Links, 4 pods joined by GW-Links (GC-BOW2000: 2 x 100 Gb/s per 4 chips, 6.25 GB/s a chip).
    # The accumulated gradients are all-reduced once per step, in the pod and then across pods.
    cfg, bow = workloads.model("bert-large"), hardware.chip("bow")
    fab = collectives.fabric(bow, 256)
    assert fab.inter.name == "gateway" and fab.chips_per_node == 64
    assert fab.inter.bandwidth_bytes_per_s == pytest.approx(2 * 100e9 / 8 / 4, rel=1e-12)
    r = tm.evaluate(cfg, bow, 256, 384, 16384, 32, 1, 8, 8, 2, 0)
    n = float(tm.stage_params(cfg, 8)) * tmem.BYTES_GRAD
    expect = collectives.hierarchical_all_reduce_s(n, 8, 4, fab.intra, fab.inter)
    assert float(np.ravel(r["split"]["data_parallel"])[0]) == pytest.approx(expect, rel=1e-9)
    one_pod = tm.evaluate(cfg, bow, 64, 384, 16384, 8, 1, 8, 8, 2, 0)
    assert float(np.ravel(one_pod["split"]["data_parallel"])[0]) == pytest.approx(
        collectives.all_reduce_s(n, 8, fab.intra), rel=1e-9
    )
    assert expect > collectives.all_reduce_s(n, 8, fab.intra)


@pytest.mark.parametrize(
    "chip, model, lengths, kw",
    [
        ("gc200", "bert-base", [128] * 8, {"weights": "on_chip"}),
        ("gc200", "bert-large", [512] * 64, {"weights": "on_chip"}),  # does not fit
        ("gc200", "llama-2-7b", [64], {"weights": "stream"}),
        ("bow", "gpt2", [200, 13, 7], {}),
        ("a100-80gb", "gpt2", [200, 13, 7], {"fusion": "none"}),
        ("a100-40gb", "llama-2-70b", [1024] * 4, {}),  # does not fit in HBM
    ],
)
def test_layer_times_read_the_same_figures_as_simulate(chip, model, lengths, kw):
    # ops._time reads one_chip.step_times: simulate's time, fit, split and per-op times, the same
    # values, without the rest of the result
    s = workloads.step(model, lengths)
    ref = machine.simulate(chip, s, **kw)
    got = one_chip.step_times(chip, s, **kw)
    assert got.fits == ref.fits and got.op_names == ref.op_names
    assert np.float64(got.time_s).tobytes() == np.float64(ref.time_s).tobytes()
    assert list(got.split.items()) == list(ref.split.items())
    assert np.asarray(got.op_time_s).tobytes() == np.asarray(ref.op_time_s).tobytes()
