"""Throughput per watt: requests, samples or tokens per second per watt of board power.

The power is each chip's published board power (``chip.power_w``, sourced in ``ipusim.hardware``:
TDP or TGP) times the number of chips. CAVEAT: board power is a ceiling, not measured draw; a
chip that idles part of a step draws less, so these figures rank chips at full power only.
"""

from __future__ import annotations

import math

from .hardware import chip as _chip

CAVEAT = (
    "per watt of published board power (TDP/TGP, ipusim.hardware), not of measured draw: "
    "a chip that is idle part of the step draws less"
)


def per_watt(result, *, chips: int | None = None) -> dict:
    """Throughput per watt of one simulated result.

    ``result``: a ``StepResult`` (tokens/s: real tokens; ``chips`` defaults to 1, or the
    placement's chip count when it has one), an ``embeddings.EmbeddingResult`` or a
    ``embeddings.dlrm.DlrmStep`` (samples/s; its own chip count). Returns ``throughput``,
    ``unit``, ``power_w``, ``per_w`` (0 when the step does not fit) and ``caveat``.
    """
    if hasattr(result, "samples_per_s_per_w"):
        power = result.power_w
        thr = result.samples_per_s if math.isfinite(result.time_s) else 0.0
        unit = "samples/s"
    elif hasattr(result, "throughput_tokens_per_s"):
        n = chips if chips is not None else getattr(result.placement, "chips", 1) or 1
        if int(n) != n or n < 1:
            raise ValueError(f"chips must be a whole number >= 1, got {chips!r}")
        power = _chip(result.chip).power_w * n
        thr = result.throughput_tokens_per_s if math.isfinite(result.time_s) else 0.0
        unit = "tokens/s"
    else:
        raise ValueError(
            f"per_watt takes a StepResult, EmbeddingResult or DlrmStep, got {type(result).__name__}"
        )
    return {
        "throughput": float(thr),
        "unit": unit,
        "power_w": float(power),
        "per_w": float(thr / power),
        "caveat": CAVEAT,
    }
