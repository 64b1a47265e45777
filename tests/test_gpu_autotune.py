"""GPU per-step shortcuts: a memoised autotuner pick is the pick worked out afresh, bit for bit,
whatever order the steps come in, and the memo keys on values (chip, efficiencies, dtype,
shapes); fused attention working out each distinct sequence shape once gives the same doubles
as the plain per-sequence loop."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from ipusim import gpu, hardware, step
from ipusim.gpu import autotune, kernels, waves

# (chip, model, lengths, phase, pad_to, dtype bytes, options): models, phases, chips, dtypes,
# efficiencies and fusions varied; several share a kernel (same token count) with another.
CASES = [
    ("a100-40gb", "bert-base", [128] * 8, "forward", 128, 2, {}),
    ("a100-40gb", "bert-base", [37, 200, 90], "forward", None, 2, {}),
    ("a100-40gb", "bert-base", [64] * 16, "forward", None, 2, {}),  # 1,024 tokens as above
    ("a100-40gb", "bert-base", [128] * 8, "forward", 128, 2, {"fusion": "none"}),
    ("a100-40gb", "bert-base", [128] * 8, "train", 128, 2, {}),
    ("a100-80gb", "gpt2", [300, 17, 512, 1], "prefill", None, 2, {}),
    ("a100-80gb", "gpt2", [900] * 33, "decode", None, 2, {}),
    ("a100-80gb", "gpt2", [20] * 33, "decode", None, 2, {}),  # same GEMMs as above
    ("a100-80gb", "gpt2", [900] * 33, "decode", None, 1, {}),
    ("h100-sxm", "llama-2-7b", [1000, 20, 513], "prefill", None, 2, {}),
    ("h100-sxm", "llama-2-7b", [2048] * 2, "decode", None, 2, {"tensor_efficiency": 0.5}),
    ("h100-sxm", "llama-2-7b", [2048] * 2, "decode", None, 2, {"hbm_efficiency": 0.6}),
    ("h200", "bert-large", [384] * 16, "forward", None, 4, {"launch_s": 0.0}),
]


def _step(case):
    chip, model, lengths, phase, pad, dt, opts = case
    return chip, step(model, lengths, phase=phase, pad_to=pad, dtype_bytes=dt), opts


def _fresh_picks(chip, s, opts):
    """Each kernel's pick worked out as ``simulate`` did before the memo: every candidate of
    the step in one wave loop, the first fastest of each kernel's own."""
    c = hardware.chip(chip)
    r = kernels.rates(
        c,
        opts.get("tensor_efficiency", gpu.TENSOR_EFFICIENCY),
        opts.get("hbm_efficiency", gpu.HBM_EFFICIENCY),
    )
    fusion = opts.get("fusion", "tensorrt")
    cands, owner = [], []
    for i, (name, ops) in enumerate(kernels.kernel_plan(s, fusion)):
        for kern in kernels.op_kernel_candidates(ops, name, s, r, fusion):
            cands.append(kern)
            owner.append(i)
    t, comp, mem, n_waves, busy = waves.run_waves(cands, r)
    owner = np.array(owner)
    out = []
    for i in range(owner.max() + 1):
        idx = np.flatnonzero(owner == i)
        best = idx[np.argmin(t[idx])]
        k = cands[best]
        out.append((k.tile, k.flops, k.hbm_bytes, t[best], comp[best], mem[best], busy[best]))
    return out


def _same(a, b):
    """Every field of two step results equal, bit for bit (arrays included)."""
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        elif isinstance(x, dict):
            assert x.keys() == y.keys(), f.name
            for key in x:
                if isinstance(x[key], np.ndarray):
                    assert np.array_equal(x[key], y[key]), (f.name, key)
                else:
                    assert x[key] == y[key], (f.name, key)
        else:
            assert x == y, f.name


def test_memoised_picks_equal_fresh_ones():
    autotune.clear_cache()
    for case in CASES:
        chip, s, opts = _step(case)
        c = hardware.chip(chip)
        r = kernels.rates(
            c,
            opts.get("tensor_efficiency", gpu.TENSOR_EFFICIENCY),
            opts.get("hbm_efficiency", gpu.HBM_EFFICIENCY),
        )
        plan = kernels.kernel_plan(s, opts.get("fusion", "tensorrt"))
        for memo_state in ("as left by earlier cases", "warm"):
            picks = autotune.fastest(plan, s, r, opts.get("fusion", "tensorrt"))
            fresh = _fresh_picks(chip, s, opts)
            assert len(picks) == len(fresh), memo_state
            for p, (tile, flops, hbm, t, comp, mem, busy) in zip(picks, fresh, strict=True):
                assert (p.tile, p.flops, p.hbm_bytes) == (tile, flops, hbm), memo_state
                assert (p.time_s, p.compute_s, p.memory_s) == (t, comp, mem), memo_state
                assert np.array_equal(p.busy_s, busy), memo_state
                assert not p.busy_s.flags.writeable


def test_results_do_not_depend_on_what_was_simulated_before():
    autotune.clear_cache()
    cold = {}
    for i, case in enumerate(CASES):
        autotune.clear_cache()
        chip, s, opts = _step(case)
        cold[i] = gpu.simulate(chip, s, **opts)
    order = list(range(len(CASES)))
    np.random.default_rng(3).shuffle(order)
    for _ in range(2):  # first in a shuffled order over a filling memo, then all hits
        for i in order:
            chip, s, opts = _step(CASES[i])
            _same(gpu.simulate(chip, s, **opts), cold[i])
    assert autotune.cached() > 0


def test_memo_keys_on_values_and_stays_bounded(monkeypatch):
    """A chip object equal in value to a preset hits its picks; one differing in any rate
    does not; the memo drops its oldest picks beyond its size."""
    autotune.clear_cache()
    s = step("gpt2", [256] * 4, phase="prefill")
    a = gpu.simulate("a100-80gb", s)
    n = autotune.cached()
    same = dataclasses.replace(hardware.chip("a100-80gb"))
    _same(gpu.simulate(same, s), a)
    assert autotune.cached() == n
    fewer_sms = dataclasses.replace(hardware.chip("a100-80gb"), sms=100)
    b = gpu.simulate(fewer_sms, s)
    assert autotune.cached() == 2 * n and b.time_s != a.time_s
    monkeypatch.setattr(autotune, "_PICKS_SIZE", n)
    gpu.simulate(fewer_sms, step("gpt2", [100] * 4, phase="prefill"))
    assert autotune.cached() == n


def test_threads_share_the_memo_safely(monkeypatch):
    """Threads simulating at once while the memo drops entries: no error, the same results."""
    from concurrent.futures import ThreadPoolExecutor

    steps = [_step(case) for case in CASES]
    autotune.clear_cache()
    alone = [gpu.simulate(chip, s, **opts) for chip, s, opts in steps]
    monkeypatch.setattr(autotune, "_PICKS_SIZE", 4)  # evictions all the time
    autotune.clear_cache()
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda a: gpu.simulate(a[0], a[1], **a[2]), steps * 3))
    for a, b in zip(alone * 3, together, strict=True):
        _same(a, b)
    assert autotune.cached() <= 4


@pytest.mark.parametrize("lengths", [[128] * 4, [37, 200, 90]])
def test_plain_reference_path_skips_the_memo(lengths):
    import gpu_reference

    s = step("bert-base", lengths)
    a = gpu.simulate("a100-40gb", s)  # fills the memo
    with gpu_reference.plain():
        assert not autotune.cached()
        b = gpu.simulate("a100-40gb", s)
    assert not autotune.cached()
    assert a.time_s == pytest.approx(b.time_s, rel=1e-9)


def _plain_shapes(s):
    """Per sequence (query rows, key rows) of step ``s`` as lists: one query row against the
    context when decoding, the padded length when padded, else the sequence's own length."""
    rows = [int(x) for x in s.lengths]
    if s.phase == "decode":
        return [1] * len(rows), rows
    return ([s.row_len] * len(rows),) * 2 if s.row_len else (rows, rows)


def _fused_attention_plain(s, r, dt):
    """Fused attention's block groups and totals, every sequence worked out on its own."""
    cfg = s.model
    h, hd = cfg.heads, cfg.head_dim
    kv_share = cfg.n_kv_heads / cfg.heads
    q_rows, k_rows = _plain_shapes(s)
    whole = s.phase == "decode" or max(k_rows) <= gpu.ATTENTION_WHOLE_SEQUENCE_MAX_LEN
    groups, flops, hbm, simt_total = [], 0.0, 0.0, 0.0
    g = gpu.MMA_GRANULE
    for q, kk in zip(q_rows, k_rows, strict=True):
        tile = q if whole else gpu.ATTENTION_Q_TILE
        nq = -(-q // tile)
        kc = -(-kk // g) * g
        for rows, cnt in ((tile, nq - 1), (q - (nq - 1) * tile, 1)):
            if cnt <= 0:
                continue
            f = 4.0 * (-(-rows // g) * g) * kc * hd
            simt = 5.0 * rows * kk
            b = (2 * rows * hd + 2 * kk * hd * kv_share / nq) * dt
            if s.phase == "prefill":
                b += 2 * rows * hd * kv_share * dt
            comp = f * r.tensor_s_per_flop + simt * r.simt_s_per_flop
            groups.append((cnt * h, comp, (2 * rows + 2 * kk) * hd * dt / r.sm_bw, b))
            flops += f * cnt * h
            simt_total += simt * cnt * h
            hbm += b * cnt * h
    return groups, flops, hbm, simt_total


@pytest.mark.parametrize(
    "model,lengths,phase,pad",
    [
        ("gpt2", [300, 17, 300, 300, 17, 1], "prefill", None),
        ("gpt2", [900] * 7 + [20] * 5 + [900], "decode", None),
        ("gpt2", [1000, 600, 1000, 64, 65], "prefill", None),  # beyond 512 keys: query tiles
        ("llama-2-7b", [2048, 100, 2048], "prefill", None),  # grouped K/V heads
        ("bert-base", [37, 200, 90, 37], "forward", 256),
    ],
)
def test_fused_attention_equals_the_per_sequence_loop(model, lengths, phase, pad):
    s = step(model, lengths, phase=phase, pad_to=pad)
    r = kernels.rates(hardware.chip("h100-sxm"), gpu.TENSOR_EFFICIENCY, gpu.HBM_EFFICIENCY)
    kern = kernels._fused_attention("fused_mha", ("attn_scores",), s, r, s.dtype_bytes)
    groups, flops, hbm, simt = _fused_attention_plain(s, r, s.dtype_bytes)
    assert sum(g[0] for g in kern.groups) == sum(g[0] for g in groups)
    assert kern.groups == kernels._merge(groups)
    assert (kern.flops, kern.hbm_bytes, kern.simt_flops) == (flops, hbm, simt)


def _unfused_attention_plain(op, s, r, dt):
    """Unfused attention's block groups and totals (``fusion="none"``), every sequence worked
    out on its own."""
    h, hd = s.model.heads, s.model.head_dim
    q_rows, k_rows = _plain_shapes(s)
    groups, flops, hbm = [], 0.0, 0.0
    for q, kk in zip(q_rows, k_rows, strict=True):
        m_, k_, n_ = (q, hd, kk) if op.name == "attn_scores" else (q, kk, hd)
        blocks = -(-m_ // 64) * -(-n_ // 64)
        f = 2.0 * 64 * 64 * k_
        io = (m_ * k_ + k_ * n_ + m_ * n_) * dt
        l2 = (64 + 64) * k_ * dt + 64 * 64 * dt
        groups.append((blocks * h, f * r.tensor_s_per_flop, l2 / r.sm_bw, io / blocks))
        flops += f * blocks * h
        hbm += io * h
    return groups, flops, hbm


@pytest.mark.parametrize(
    "model,lengths,phase,pad",
    [
        ("gpt2", [300, 17, 300, 300, 17, 1], "prefill", None),
        ("gpt2", [900] * 7 + [20] * 5 + [900], "decode", None),
        ("bert-base", [37, 200, 90, 37], "forward", 256),
        ("bert-base", [37, 200, 90, 37, 200], "forward", None),
    ],
)
def test_unfused_attention_equals_the_per_sequence_loop(model, lengths, phase, pad):
    """Unfused attention works out each distinct sequence shape once: the same groups and the
    same doubles as the plain per-sequence loop."""
    s = step(model, lengths, phase=phase, pad_to=pad)
    r = kernels.rates(hardware.chip("a100-80gb"), gpu.TENSOR_EFFICIENCY, gpu.HBM_EFFICIENCY)
    for name, ops in kernels.kernel_plan(s, "none"):
        if ops[0].kind != "attention":
            continue
        (kern,) = kernels.op_kernel_candidates(ops, name, s, r, "none")
        groups, flops, hbm = _unfused_attention_plain(ops[0], s, r, s.dtype_bytes)
        assert kern.groups == kernels._merge(groups)
        assert (kern.flops, kern.hbm_bytes) == (flops, hbm)


def test_elementwise_kernels_equal_their_per_instance_ops():
    """An element-wise kernel's FLOPs, bytes and element count come from each op's figures
    divided by its count, as ``Op.per_instance`` gives them, bit for bit."""
    r = kernels.rates(hardware.chip("a100-80gb"), gpu.TENSOR_EFFICIENCY, gpu.HBM_EFFICIENCY)
    for s in (
        step("gpt2", [300, 17, 1], phase="prefill"),
        step("llama-2-7b", [700] * 3, phase="decode"),
        step("bert-base", [128] * 8, phase="train", pad_to=128),
    ):
        for fusion in ("tensorrt", "none"):
            for name, ops in kernels.kernel_plan(s, fusion):
                if ops[0].kind in ("matmul", "attention"):
                    continue
                (kern,) = kernels.op_kernel_candidates(ops, name, s, r, fusion)
                one = [o.per_instance() for o in ops]
                expect = kernels.elementwise_kernel(
                    name,
                    tuple(o.name for o in ops),
                    sum(o.flops for o in one),
                    sum(o.bytes for o in one),
                    one[0].act_write_bytes / s.dtype_bytes,
                    r,
                )
                assert kern == expect, (s.phase, fusion, name)


def test_step_time_is_the_simulated_time_bit_for_bit():
    """``gpu.step_time_s`` (and ``machine.step_time_s`` on one GPU, which the serving tables call)
    works out the time alone: the very double ``simulate`` reports, ``inf`` for a step that does
    not fit, whatever the memo holds."""
    from ipusim import machine

    cases = CASES + [
        ("a100-40gb", "llama-2-70b", [512] * 4, "prefill", None, 2, {}),  # does not fit
        ("a100-80gb", "gpt2", [64] * 3 + [1] * 5, "prefill", None, 2, {"fusion": "none"}),
    ]
    for memo in ("empty", "warm"):
        if memo == "empty":
            autotune.clear_cache()
        for case in cases:
            chip, s, opts = _step(case)
            full = gpu.simulate(chip, s, **opts).time_s
            alone = gpu.step_time_s(chip, s, **opts)
            assert alone == full or (math.isinf(alone) and math.isinf(full)), (memo, case)
            assert machine.step_time_s(chip, s, **opts) == alone or math.isinf(alone)
    assert math.isinf(gpu.step_time_s(*_step(cases[-2])[:2]))
    s = _step(CASES[5])[1]  # several chips and a tile chip: the full simulation's time
    assert (
        machine.step_time_s("a100-80gb", s, chips=2)
        == machine.simulate("a100-80gb", s, chips=2).time_s
    )
    assert machine.step_time_s("gc200", s) == machine.simulate("gc200", s).time_s
    with pytest.raises(ValueError, match="unknown option"):
        gpu.step_time_s("a100-80gb", _step(CASES[0])[1], fusoin="none")


def _merge_plain(groups):
    """Consecutive groups of equal cost merged, as ``kernels._merge`` did before it counted
    runs of one repeated group object."""
    out = []
    for g in groups:
        if g[0] <= 0:
            continue
        if out and out[-1][1:] == g[1:]:
            out[-1] = (out[-1][0] + g[0], *g[1:])
        else:
            out.append(tuple(g))
    return out


def test_merged_groups_equal_the_plain_merge():
    """Block groups merged the same way, repeated objects, equal values, zero counts, signed
    zeros and list groups (which never merged) included, to the repr of every number."""
    rng = np.random.default_rng(7)
    same = (16, 1e-6, 2e-6, 300.0)
    listed = [4, 1e-6, 2e-6, 300.0]
    pool = [same, (2, 1e-6, 2e-6, 300.0), (0, 5.0, 5.0, 5.0), (-1, 1e-6, 2e-6, 300.0)]
    pool += [(3, 2e-6, 2e-6, 300.0), listed, (2, 0.0, 2e-6, 1.0), (2, -0.0, 2e-6, 1.0)]
    for _ in range(3000):
        groups = [pool[i] for i in rng.integers(0, len(pool), rng.integers(0, 14))]
        assert repr(kernels._merge(groups)) == repr(_merge_plain(groups)), groups
    assert kernels._merge([same] * 64) == [(16 * 64, 1e-6, 2e-6, 300.0)]


def test_rates_are_one_object_per_equal_chip_and_efficiencies():
    """``kernels.rates`` hands out one ``Rates`` per equal (chip, efficiencies), so the memo
    finds picks by identity; an equal chip object shares it, other efficiencies do not."""
    c = hardware.chip("a100-80gb")
    a = kernels.rates(c, 0.5, 0.9)
    assert kernels.rates(dataclasses.replace(c), 0.5, 0.9) is a
    b = kernels.rates(c, 0.6, 0.9)
    assert b is not a and b != a
    assert b.tensor_s_per_flop == 1.0 / (c.fp16_flops_per_cycle_per_sm * c.clock_hz * 0.6)
    assert kernels.rates(hardware.chip("h100-sxm"), 0.5, 0.9) != a
