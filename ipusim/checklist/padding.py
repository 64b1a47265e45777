"""C3: how much padding wastes, and what bucketing and packing recover."""

from __future__ import annotations

import math

import numpy as np

from .. import workloads
from . import search
from .case import Case
from .context import Context
from .evidence import Check, Evidence, fmt


# ---------------------------------------------------------------------------------------
# C3 Padding
# ---------------------------------------------------------------------------------------
def check_padding(case: Case, ctx: Context | None = None) -> Check:
    """C3: how much padding wastes, and what bucketing and packing recover."""
    ctx = ctx or Context(case)
    lens = ctx.lengths
    max_len = case.max_len
    from .. import packing

    def waste(p):
        return 1 - p.real_tokens / p.total_tokens

    pad_max = waste(packing.pack(lens, max_len, "pad"))
    rng = np.random.default_rng(case.seed)
    b = 16
    groups = rng.permutation(lens)[: (lens.size // b) * b].reshape(-1, b)
    pad_batch = 1 - groups.sum() / (groups.max(axis=1).sum() * b)
    buckets = np.array(sorted({128, 256, 384, max_len} & set(range(1, max_len + 1)) | {max_len}))
    pad_bucket = waste(packing.pack(lens, max_len, "bucket", buckets=[int(x) for x in buckets]))
    eff, packs, pack_src = search.pack_efficiency(lens, max_len)
    # FLOPs over every sampled request (a 64-request subsample moved the ratio by 25%).
    s_pad = workloads.step(case.model, lens, pad_to=max_len)
    s_real = workloads.step(case.model, lens)
    flop_ratio = s_pad.flops / s_real.flops
    ev = [
        Evidence(
            "padding_to_max",
            pad_max * 100,
            "%",
            f"share of token slots that are padding at {max_len} tokens",
        ),
        Evidence(
            "padding_per_batch",
            pad_batch * 100,
            "%",
            f"padding to the longest in random batches of {b}",
        ),
        Evidence(
            "padding_bucketed",
            pad_bucket * 100,
            "%",
            f"padding with buckets at {', '.join(map(str, buckets))}",
        ),
        Evidence("packing_efficiency", eff * 100, "%", f"real tokens per pack slot ({pack_src})"),
        Evidence(
            "padded_flops_ratio",
            flop_ratio,
            "x",
            f"FLOPs of all {lens.size} sampled requests padded to {max_len} over the same unpadded",
        ),
        Evidence("mean_length", float(lens.mean()), "tokens", f"{lens.size} sampled requests"),
    ]
    rows = []
    for cand in case.candidates:
        deps = {
            d.mode: d
            for d in ctx.search(cand)
            if d.placement == (ctx.fit(cand)["placements"] or [None])[0]
        }
        if {"padded", "packed"} <= set(deps):
            cp, ck = deps["padded"].capacity_per_replica, deps["packed"].capacity_per_replica
            gain = ck / cp if cp > 0 else math.inf
            rows.append(
                {
                    "candidate": cand.label,
                    "padded_req_s": cp,
                    "packed_req_s": ck,
                    "packing_gain_x": gain,
                }
            )
            ev.append(
                Evidence(
                    f"packing_gain.{cand.label.replace(' ', '')}",
                    gain,
                    "x",
                    "capacity at the p99 target, packed over padded (per replica)",
                )
            )
    tables = {
        "waste": [
            {"scheme": "pad to max length", "padding_%": pad_max * 100},
            {"scheme": f"pad to longest in batch of {b}", "padding_%": pad_batch * 100},
            {"scheme": "length buckets", "padding_%": pad_bucket * 100},
            {
                "scheme": f"pack ({pack_src.split(' (')[0].removeprefix('ipusim.packing ')})",
                "padding_%": (1 - eff) * 100,
            },
        ]
    }
    if rows:
        tables["packing_gain"] = rows
    status = "warn" if pad_max > 0.3 else "info"
    reason = (
        f"padded to {max_len} tokens, {fmt(pad_max * 100, '%')} of the computed token slots are "
        f"padding; packing leaves {fmt((1 - eff) * 100, '%')}"
    )
    summary = (
        f"padding wastes {fmt(pad_max * 100, '%')} of token slots at {max_len} tokens "
        f"({fmt(flop_ratio, 'x')} the FLOPs); packing reaches {fmt(eff * 100, '%')} efficiency"
    )
    return Check(
        "C3",
        "Padding and packing",
        status,
        summary,
        reason,
        ev,
        tables,
        f"workloads.step FLOPs; {pack_src}; capacities from C2",
    )
