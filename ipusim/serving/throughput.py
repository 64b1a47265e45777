"""Requests per second of an encoder over a stream of lengths: padded, unpadded or packed batches.

``encoder_throughput`` cuts requests (in arrival order) into batches, times each batch with
the machine model (``ipusim.machine.simulate``: the tile simulator on a tile chip, the GPU
simulator on a GPU) and runs them back to back. It lives in the serving layer because it
calls the machine model; ``ipusim.packing`` knows lengths and rows only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._validate import choice, lengths_array, positive
from ..packing import pack

MODES = ("pad", "pad-batch", "unpadded", "packed")


@dataclass(frozen=True)
class Throughput:
    """Requests per second of ``chip`` running ``model`` forward over a stream of lengths."""

    chip: str
    model: str
    mode: str  # one of MODES
    requests: int
    batches: int
    time_s: float  # seconds for all batches, back to back
    real_tokens: int
    computed_tokens: int  # token positions the matmuls ran over, padding included
    flops: float  # FLOPs computed

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.time_s

    @property
    def token_efficiency(self) -> float:
        return self.real_tokens / self.computed_tokens

    def to_dict(self) -> dict:
        return {
            "chip": self.chip,
            "model": self.model,
            "mode": self.mode,
            "requests": self.requests,
            "batches": self.batches,
            "time_s": self.time_s,
            "requests_per_s": self.requests_per_s,
            "real_tokens": self.real_tokens,
            "computed_tokens": self.computed_tokens,
            "token_efficiency": self.token_efficiency,
            "flops": self.flops,
        }

    def __repr__(self):
        return (
            f"Throughput({self.chip}, {self.model}, {self.mode}: {self.requests_per_s:,.0f} "
            f"requests/s over {self.requests:,} requests in {self.batches} batches, "
            f"{self.token_efficiency:.1%} of computed tokens real)"
        )


def encoder_throughput(
    chip,
    lens,
    mode: str,
    *,
    model="bert-base",
    batch: int = 64,
    max_len: int = 512,
    max_per_row: int | None = 3,
    strategy: str = "spfhp",
    dtype_bytes: int = 2,
) -> Throughput:
    """Run ``lens`` (requests, in arrival order) through ``chip`` in batches; requests/s.

    Each batch's time is ``ipusim.machine.step_time_s`` (the tile simulator on a tile chip,
    the GPU simulator on a GPU); batches run back to back.

    Modes
    -----
    * ``"pad"``: batches of ``batch`` requests, each padded to ``max_len`` (a static-shape
      engine).
    * ``"pad-batch"``: batches of ``batch`` requests padded to the batch's longest.
    * ``"unpadded"``: batches of ``batch`` requests with padding removed: matmuls over real
      tokens, attention per sequence. On a GPU with ByteTransformer's costs
      (``gpu.remove_padding``, input padded to ``max_len``: the published padding-free system
      whose fused attention reaches 512 tokens; FasterTransformer's stops at 384).
    * ``"packed"``: all requests packed into rows of ``max_len`` (``strategy``, at most
      ``max_per_row`` a row), then batches of ``batch`` rows. A row costs its sequences'
      unpadded cost (block-diagonal attention) plus its padding tail, which runs through the
      matmuls as a filler sequence of its own.
    """
    from ..hardware import GpuChip
    from ..hardware import chip as _chip
    from ..machine import simulate as _simulate
    from ..workloads import model as _model
    from ..workloads import step

    c = _chip(chip)
    cfg = _model(model)
    choice("mode", mode, MODES)
    B = positive("batch", batch, integer=True)
    L = positive("max_len", max_len, integer=True)
    arr = lengths_array("lengths", lens, max_len=L)

    def step_time_s(c, s):  # the fit rule: a step that does not fit has no time, so refuse it
        r = _simulate(c, s)
        if not r.fits or not math.isfinite(r.time_s):
            raise ValueError(
                f"{mode}: a batch of {s.batch} rows ({s.tokens:,} tokens) of {cfg.name} does not fit "
                f"{c.name}: {r.fit_message or 'no time'}; use a smaller batch"
            )
        return r.time_s

    t = 0.0
    flops = 0.0
    computed = 0
    nb = 0
    if mode == "packed":
        p = pack(arr, L, strategy, max_per_row=max_per_row)
        rows = p.rows_as_lists(limit=10_000_000)
        for i in range(0, len(rows), B):
            chunk = rows[i : i + B]
            seqs = [v for r in chunk for v in r] + [L - sum(r) for r in chunk if sum(r) < L]
            s = step(cfg, seqs, dtype_bytes=dtype_bytes)
            t += step_time_s(c, s)
            flops += s.flops
            computed += L * len(chunk)
            nb += 1
    else:
        for i in range(0, arr.size, B):
            chunk = arr[i : i + B]
            pad_to = {"pad": L, "pad-batch": int(chunk.max()), "unpadded": None}[mode]
            s = step(cfg, chunk, pad_to=pad_to, dtype_bytes=dtype_bytes)
            if mode == "unpadded" and isinstance(c, GpuChip):
                from ..gpu import remove_padding

                r = remove_padding(
                    c, chunk, L, "bytetransformer", model=cfg, dtype_bytes=dtype_bytes
                )
                if not r.fits:
                    step_time_s(c, s)  # raises with the fit message
                t += r.time_s
            else:
                t += step_time_s(c, s)
            flops += s.flops
            computed += s.tokens
            nb += 1
    return Throughput(c.name, cfg.name, mode, int(arr.size), nb, t, int(arr.sum()), computed, flops)
