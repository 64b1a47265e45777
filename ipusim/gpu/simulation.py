"""Simulate one GPU kernel (``simulate_kernel``) or a whole step (``simulate``): kernels of
thread blocks in waves over SMs sharing HBM, the HBM fit rule, and the energy of the work done.
Times in seconds, sizes in bytes, work in FLOP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import energy as _energy
from .._validate import choice, fraction, positive
from ..footprint import training_footprint
from ..hardware import GPU_PRESETS, GpuChip
from ..result import StepResult
from ..workloads import Step
from .autotune import fastest
from .kernels import Kernel, elementwise_kernel, kernel_plan, rates, resolve
from .params import (
    FUSIONS,
    HBM_EFFICIENCY,
    MAX_BLOCKS_PER_SM,
    OPTIONS,
    TENSOR_EFFICIENCY,
)
from .waves import run_waves


@dataclass(frozen=True)
class KernelResult:
    """One kernel of thread blocks on a GPU. Times in seconds (launch included in ``time_s``)."""

    blocks: int
    blocks_per_sm: int
    waves: int
    time_s: float
    compute_s: float  # time the slowest SM spends on its blocks, summed over waves
    memory_s: float  # time beyond that spent waiting for HBM
    launch_s: float
    sm_busy_s: np.ndarray  # per SM

    @property
    def wave_efficiency(self) -> float:
        """Blocks run / block slots offered by the waves (1.0 = no quantization tail)."""
        return self.blocks / (self.waves * self.blocks_per_sm * self.sm_busy_s.size)

    def __repr__(self):
        return (
            f"KernelResult({self.blocks} blocks in {self.waves} waves of "
            f"{self.blocks_per_sm * self.sm_busy_s.size}: {self.time_s * 1e6:,.2f} us = compute "
            f"{self.compute_s * 1e6:,.2f} + memory {self.memory_s * 1e6:,.2f} + launch "
            f"{self.launch_s * 1e6:,.2f}; wave efficiency {self.wave_efficiency:.0%})"
        )


def _gpu_chip(chip, fn: str) -> GpuChip:
    """The GPU chip ``chip`` names (or is); ``ValueError`` naming ``fn`` for a tile chip."""
    c = resolve(chip)
    if not isinstance(c, GpuChip):
        raise ValueError(f"{fn} needs a GPU chip, got {c.kind} chip {c.name!r}")
    return c


def simulate_kernel(
    chip,
    blocks: int,
    block_flops: float,
    block_hbm_bytes: float = 0.0,
    *,
    blocks_per_sm: int = 1,
    block_l2_bytes: float | None = None,
    tensor_efficiency: float = TENSOR_EFFICIENCY,
    hbm_efficiency: float = HBM_EFFICIENCY,
    launch_s: float | None = None,
) -> KernelResult:
    """One kernel of ``blocks`` identical thread blocks (tensor-core FLOP and HBM bytes each).

    ``block_l2_bytes`` (default: the HBM bytes) is what each block pulls from L2 into its SM.

    >>> r = simulate_kernel("a100-40gb", 109, 1e6, launch_s=0.0)
    >>> r.waves
    2
    """
    c = _gpu_chip(chip, "simulate_kernel")
    blocks = positive("blocks", blocks, integer=True)
    block_flops = positive("block_flops", block_flops, allow_zero=True)
    block_hbm_bytes = positive("block_hbm_bytes", block_hbm_bytes, allow_zero=True)
    l2 = (
        block_hbm_bytes
        if block_l2_bytes is None
        else positive("block_l2_bytes", block_l2_bytes, allow_zero=True)
    )
    bps = positive("blocks_per_sm", blocks_per_sm, integer=True)
    if bps > MAX_BLOCKS_PER_SM:
        raise ValueError(f"blocks_per_sm must be <= {MAX_BLOCKS_PER_SM}, got {bps}")
    r = rates(
        c,
        check_efficiency("tensor_efficiency", tensor_efficiency),
        check_efficiency("hbm_efficiency", hbm_efficiency),
    )
    launch = (
        c.kernel_launch_s if launch_s is None else positive("launch_s", launch_s, allow_zero=True)
    )
    k = Kernel(
        "kernel",
        (),
        [(blocks, block_flops * r.tensor_s_per_flop, l2 / r.sm_bw, block_hbm_bytes)],
        bps,
        0.0,
        block_flops * blocks,
        block_hbm_bytes * blocks,
    )
    t, comp, mem, waves, busy = run_waves([k], r)
    return KernelResult(
        blocks,
        bps,
        int(waves[0]),
        float(t[0]) + launch,
        float(comp[0]),
        float(mem[0]),
        launch,
        busy[0],
    )


def elementwise_kernel_s(chip, elements: int, bytes_moved: float, simt_flops: float = 0.0) -> float:
    """Seconds of one memory-streaming kernel (copy, gather, an optimizer update): ``elements``
    outputs, ``bytes_moved`` HBM bytes read and written, ``simt_flops`` on the CUDA cores; its
    blocks in waves over the SMs (``run_waves``), launch included."""
    c = _gpu_chip(chip, "elementwise_kernel_s")
    elements = positive("elements", elements, integer=True)
    bytes_moved = positive("bytes_moved", bytes_moved, allow_zero=True)
    simt_flops = positive("simt_flops", simt_flops, allow_zero=True)
    r = rates(c, TENSOR_EFFICIENCY, HBM_EFFICIENCY)
    k = elementwise_kernel("elementwise", (), simt_flops, bytes_moved, elements, r)
    t, *_ = run_waves([k], r)
    return float(t[0]) + c.kernel_launch_s


def check_efficiency(name, v):
    v = fraction(name, v)
    if v == 0:
        raise ValueError(f"{name} must be > 0 (a fraction of the peak in (0, 1]), got {v!r}")
    return v


def _fit(c: GpuChip, s: Step):
    """(fits, message, need_bytes) for weights + activations + KV (or the training state) in HBM."""
    cap = c.hbm_bytes
    weights = s.model.weight_bytes(s.dtype_bytes)
    if s.phase == "train":
        row = s.row_len or int(s.lengths.max())
        fp = training_footprint(
            s.model, seq_len=row, tokens_per_step=s.tokens, dtype_bytes=s.dtype_bytes
        )
        fixed = fp.weight_bytes + fp.gradient_bytes + fp.optimizer_bytes
        var = fp.activation_bytes
    else:
        fixed = weights
        live_act = max((o.act_read_bytes + o.act_write_bytes) / o.count for o in s.ops)
        kv = (
            s.model.kv_bytes_per_token(s.dtype_bytes) * float(s.lengths.sum())
            if s.phase in ("prefill", "decode")
            else 0.0
        )
        var = live_act + kv
    need = fixed + var
    if need <= cap:
        return True, "", need
    gpus = math.ceil(need / cap)
    gb = 1e9
    msg = (
        f"needs {need / gb:,.1f} GB of HBM ({fixed / gb:,.1f} GB "
        f"{'weights' if s.phase != 'train' else 'weights, gradients and optimizer state'} + "
        f"{var / gb:,.1f} GB activations/KV) but {c.name} has {cap / gb:,.0f} GB: "
        f"short by {(need - cap) / gb:,.1f} GB. "
    )
    per_seq = var / s.batch
    b = int((cap - fixed) // per_seq) if fixed < cap and per_seq > 0 else 0
    if b >= 1:
        msg += (
            f"Largest batch that fits: {b} (of these sequences); or spread the step over at "
            f"least {gpus} GPUs"
        )
    else:
        what = "the weights" if s.phase != "train" else "the training state"
        msg += (
            f"Largest batch that fits: none (not even one sequence fits beside {what}); "
            f"spread the model over at least {gpus} GPUs"
        )
    msg += " (tensor or pipeline parallel)."
    return False, msg, need


def _setup(chip, step, options):
    """``simulate``'s checked inputs: (chip, step, fusion, tensor and HBM efficiency, launch
    seconds per kernel, ``Rates``)."""
    c = resolve(chip)
    if not isinstance(c, GpuChip):
        raise ValueError(
            f"gpu.simulate needs a GPU chip (presets: {', '.join(GPU_PRESETS)}), "
            f"got {c.kind} chip {c.name!r}"
        )
    if not isinstance(step, Step):
        raise ValueError(
            f"step must be a workloads.Step (from ipusim.step(...)), got {type(step).__name__}"
        )
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(sorted(unknown))}; valid: {', '.join(OPTIONS)}"
        )
    fusion = choice("fusion", options.get("fusion", "tensorrt"), FUSIONS)
    teff = check_efficiency(
        "tensor_efficiency", options.get("tensor_efficiency", TENSOR_EFFICIENCY)
    )
    heff = check_efficiency("hbm_efficiency", options.get("hbm_efficiency", HBM_EFFICIENCY))
    launch = options.get("launch_s")
    launch = c.kernel_launch_s if launch is None else positive("launch_s", launch, allow_zero=True)
    return c, step, fusion, teff, heff, launch, rates(c, teff, heff)


def _charged(s: Step, r, fusion: str, launch: float):
    """(plan, picks, reps, compute, memory, launch): the step's kernels (``kernel_plan``), each
    one's pick (``autotune.fastest``), the repeats of each (3 for a training step: backward =
    two GEMMs of the forward's shape per GEMM) and per op of the step the compute, memory and
    launch seconds charged to it (lists, in step order)."""
    plan = kernel_plan(s, fusion)
    picks = fastest(plan, s, r, fusion)
    reps = 3 if s.phase == "train" else 1
    op_index = {o.name: j for j, o in enumerate(s.ops)}
    n_ops = len(s.ops)
    compute, memory, launches = [0.0] * n_ops, [0.0] * n_ops, [0.0] * n_ops
    for (_, ops), p in zip(plan, picks, strict=True):
        count = ops[0].count * reps
        # A fused kernel's time is charged to the op that is the kernel (its GEMM, or the
        # attention op opening fused_mha): how a kernel's time divides among the ops fused
        # into it is not observable, so no share is invented for them.
        lead = op_index[ops[0].name]
        compute[lead] += p.compute_s * count
        memory[lead] += p.memory_s * count
        launches[lead] += launch * count
    return plan, picks, reps, compute, memory, launches


def _totals(compute, memory, launches):
    """(op_split, split, estimate seconds) of the per-op charges: the arrays, their sums, and the
    sum of those (``simulate``'s time when the step fits)."""
    op_split = {
        "compute": np.array(compute),
        "memory": np.array(memory),
        "launch": np.array(launches),
    }
    split = {k: float(v.sum()) for k, v in op_split.items()}
    return op_split, split, float(sum(split.values()))


def step_time_s(chip: GpuChip | str, step: Step, **options) -> float:
    """``simulate(chip, step, **options).time_s`` (the same double; ``inf`` when the step does not
    fit in HBM) without the rest of the result: no per-kernel records, per-SM rows or energy, for
    callers that read the time only (the serving tables, thousands of steps)."""
    c, s, fusion, _, _, launch, r = _setup(chip, step, options)
    *_, compute, memory, launches = _charged(s, r, fusion, launch)
    if not _fit(c, s)[0]:
        return math.inf
    return _totals(compute, memory, launches)[2]


def step_times(chip: GpuChip | str, step: Step, **options) -> tuple:
    """(time_s, fits, split, op_names, op_time_s) of ``simulate(chip, step, **options)``, the
    same values, without the per-kernel records, per-SM rows and energy: for callers that time a
    step's ops and read only these (training's layer times)."""
    c, s, fusion, _, _, launch, r = _setup(chip, step, options)
    *_, compute, memory, launches = _charged(s, r, fusion, launch)
    op_split, split, estimate_s = _totals(compute, memory, launches)
    op_time = op_split["compute"] + op_split["memory"] + op_split["launch"]
    fits = _fit(c, s)[0]
    return (estimate_s if fits else math.inf), fits, split, tuple(o.name for o in s.ops), op_time


def simulate(chip: GpuChip | str, step: Step, **options) -> StepResult:
    """Time of ``step`` on GPU ``chip``: every op as a kernel of thread blocks in waves.

    Options (all optional): ``fusion`` ("tensorrt" default, or "none": one kernel per op,
    attention through HBM); ``tensor_efficiency`` and ``hbm_efficiency`` (fractions in (0, 1],
    defaults ``TENSOR_EFFICIENCY`` and ``HBM_EFFICIENCY``); ``launch_s`` (seconds per kernel,
    default the chip's ``kernel_launch_s``).

    A step that does not fit in HBM (weights + activations + KV cache, or the training state)
    follows the fit rule of ``machine.StepResult``: ``fits=False``, ``time_s = inf`` (so
    ``energy_j`` is inf and the throughputs 0), ``fit_message`` says by how much it is short and
    the largest batch that fits (or "none"); ``split``, ``op_time_s``, ``op_split`` and
    ``extra["kernels"]`` then hold the estimate as if HBM were unlimited, whose total is
    ``extra["time_if_unlimited_s"]`` (present for every step; equal to ``time_s`` when it fits).

    The result's ``split`` is {"compute", "memory", "launch"} and sums to ``time_s`` (for a step
    that fits);
    ``unit_busy_s`` is per SM; ``unit_memory_bytes`` is each SM's peak shared-memory use;
    ``extra["kernels"]`` lists every kernel (tile, blocks, waves, compute and memory time).
    ``op_time_s`` / ``op_split`` charge each kernel's whole time to the op that is the kernel
    (the GEMM of ``ffn_up``, ``attn_scores`` for the fused attention); ops fused into another
    op's kernel (softmax, attention context, activation) get 0, and ``extra["op_kernel"]`` maps
    every op to the kernel that runs it. Compare machines per kernel, not per fused-away op.
    ``energy_split`` prices the simulated kernels' FLOPs and their HBM, L2-to-SM and shared-memory
    bytes (``energy.gpu_split``); ``energy_j`` is its sum and ``board_energy_j`` the board-power
    upper bound (``machine.StepResult``).
    """
    c, s, fusion, teff, heff, launch, r = _setup(chip, step, options)
    plan, picks, reps, compute, memory, launches = _charged(s, r, fusion, launch)
    unit_busy = np.zeros(r.sms)
    scaled = np.empty(r.sms)  # one kernel's busy row times its count (no array made per kernel)
    smem_over = {}  # SMs a kernel's blocks reach -> the most shared memory one of them holds
    kernels = []
    op_kernel = {}
    # the work the energy is priced on, summed over kernels in step order
    tensor_flops = simt_flops = hbm_bytes = l2_bytes = smem_staged = 0.0
    sms, hbm_bw = r.sms, r.hbm_bw
    for (kname, ops), p in zip(plan, picks, strict=True):
        count = ops[0].count * reps
        names = [o.name for o in ops]
        for o in names:
            op_kernel[o] = kname
        np.multiply(p.busy_s, count, out=scaled)
        unit_busy += scaled
        tensor_flops += p.flops * count
        simt_flops += p.simt_flops * count
        hbm_bytes += p.hbm_bytes * count
        l2_bytes += p.l2_bytes * count
        smem_staged += (p.l2_bytes if p.stages_smem else 0.0) * count
        used = min(p.blocks, sms)
        smem_over[used] = max(smem_over.get(used, 0.0), p.smem_bytes)
        kernels.append(
            {
                "kernel": kname,
                "ops": names,
                "count": count,
                "tile": p.tile,
                "blocks": int(p.blocks),
                "blocks_per_sm": p.blocks_per_sm,
                "waves": p.waves,
                "time_s": float(p.time_s * count + launch * count),
                "compute_s": float(p.compute_s * count),
                "memory_s": float(p.memory_s * count),
                "hbm_s": float(p.hbm_bytes / hbm_bw * count),
                "launch_s": float(launch * count),
                "flops": float((p.flops + p.simt_flops) * count),
                "hbm_bytes": float(p.hbm_bytes * count),
                "l2_bytes": float(p.l2_bytes * count),
            }
        )
    work = {
        "tensor_flops": tensor_flops,
        "simt_flops": simt_flops,
        "hbm_bytes": hbm_bytes,
        "l2_bytes": l2_bytes,
        "smem_staged_bytes": smem_staged,
    }
    unit_smem = np.zeros(r.sms)  # each SM's peak: the largest of the kernels reaching it
    for used, smem in smem_over.items():
        unit_smem[:used] = np.maximum(unit_smem[:used], smem)
    op_split, split, estimate_s = _totals(compute, memory, launches)
    op_time = op_split["compute"] + op_split["memory"] + op_split["launch"]
    fits, msg, need = _fit(c, s)
    # The fit rule (machine.StepResult): a step that does not fit in HBM has no honest time.
    time_s = estimate_s if fits else math.inf
    esplit = _energy.gpu_split(**work, flop_scale=_energy.flop_scale(c.process_nm))
    return StepResult(
        chip=c.name,
        kind="gpu",
        model=s.model.name,
        phase=s.phase,
        batch=s.batch,
        real_tokens=s.real_tokens,
        tokens=s.tokens,
        time_s=time_s,
        split=split,
        op_names=tuple(o.name for o in s.ops),
        op_time_s=op_time,
        op_split=op_split,
        unit_busy_s=unit_busy,
        unit_memory_bytes=unit_smem,
        memory_limit_bytes=float(c.smem_per_sm_bytes),
        fits=fits,
        fit_message=msg,
        energy_j=sum(esplit.values()) if fits else math.inf,
        energy_split=esplit,
        board_power_w=c.power_w,
        extra={
            "kernels": kernels,
            "op_kernel": op_kernel,
            "fusion": fusion,
            "hbm_need_bytes": need,
            "time_if_unlimited_s": estimate_s,
            "tensor_efficiency": teff,
            "hbm_efficiency": heff,
            "launch_per_kernel_s": launch,
        },
    )
